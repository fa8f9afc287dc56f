"""The one validity rule: is a plan valid for a model, a cluster and a workload, and if not, why.

``check_plan`` is called by the cost model (so by the search and by predict, simulate,
export, run and dryrun through it) and by the exporters before their own engine limits.
``check_pins`` applies the same rules to a partial plan (the knobs a user pins for the
search), so an impossible pin is refused with the rule it breaks instead of "no plan fits".
Each rule raises InputError(field, value, what is allowed).
"""

from __future__ import annotations

from .errors import InputError
from .plan import MULTI_CHUNK_SCHEDULES, Plan, field_value
from .specs.model import ModelSpec
from .specs.workload import Workload


def _tp_rules(model: ModelSpec, workload: Workload, tp: int, cp: int, sp: bool,
              num_gpus: int | None) -> None:
    broken = ([f"the {model.heads} attention heads"] if model.heads % tp else []) + (
        [f"the {num_gpus} GPUs"] if num_gpus is not None and num_gpus % tp else [])
    if broken:
        raise InputError("tp", tp, "must divide " + " and ".join(broken))
    if not model.is_mla and model.kv_heads % tp and tp % model.kv_heads:
        raise InputError("tp", tp,
                         f"must divide, or be a multiple of, the kv heads ({model.kv_heads})")
    if model.ffn and model.num_dense_layers and model.ffn % tp:
        raise InputError("tp", tp, f"must divide the ffn width ({model.ffn})")
    if sp and (workload.seq_len // cp) % tp:
        raise InputError("tp", tp, f"sequence parallel needs seq_len/cp "
                         f"({workload.seq_len // cp}) divisible by tp")


def check_positions(model: ModelSpec, tokens: int, field: str, value: object,
                    what: str = "") -> None:
    """A learned position table holds max_position positions (GPT-2's n_positions, OPT's
    max_position_embeddings): a longer sequence has no embedding to look up; running it
    means a larger table, which is another model (and another parameter count). Training
    checks its sequence here, ``meshplan serve`` its longest request."""
    if model.position == "learned" and tokens > model.max_position:
        raise InputError(field, value,
                         f"{what}at most {model.max_position:,} for {model.name}: its learned "
                         "position table has that many rows (a longer sequence needs a larger "
                         "table, another model)")


def check_context(model: ModelSpec, tokens: int, field: str, value: object,
                  what: str = "") -> None:
    """A served request is at most the model's context (``max_context``, as vLLM reads the
    config): vLLM and SGLang refuse a longer --max-model-len / --context-length. Training may
    run past it (context extension), so only serving checks this."""
    check_positions(model, tokens, field, value, what)
    if model.max_context and tokens > model.max_context:
        raise InputError(field, value,
                         f"{what}at most {model.max_context:,} for {model.name}: its maximum "
                         "context (max_position_embeddings with its rope scaling, as vLLM reads "
                         "the config)")


def _position_rules(model: ModelSpec, workload: Workload) -> None:
    check_positions(model, workload.seq_len, "seq_len", workload.seq_len)


def _cp_rules(workload: Workload, cp: int, num_gpus: int | None) -> None:
    if workload.seq_len % (2 * cp if cp > 1 else 1):
        raise InputError("cp", cp, f"seq_len ({workload.seq_len}) must split into 2*cp "
                         "load-balanced chunks")
    if num_gpus is not None and num_gpus % cp:
        raise InputError("cp", cp, f"must divide the {num_gpus} GPUs")


def _pp_rules(model: ModelSpec, pp: int, vpp: int, schedule: str | None,
              num_gpus: int | None) -> None:
    if num_gpus is not None and num_gpus % pp:
        raise InputError("pp", pp, f"must divide the {num_gpus} GPUs")
    # an uneven split of layers over chunks is valid: the runtime, torch.distributed.pipelining
    # and Megatron-LM (--pipeline-model-parallel-layout) all run it (Plan.layer_split)
    if pp * vpp > model.layers + 2:
        raise InputError("pp", pp, f"pp*vpp ({pp * vpp}) must not exceed the layers + 2 "
                         f"({model.layers} + 2: the first and last chunk may hold only the "
                         "embedding / the output layer)")


def _module_rules(model: ModelSpec, modules: str) -> None:
    from .recompute_modules import inapplicable
    bad = inapplicable(modules, model)
    if bad:
        raise InputError("recompute_modules", bad[0], f"has nothing to recompute: {bad[1]}")


def _recompute_rules(model: ModelSpec, plan: Plan) -> None:
    _module_rules(model, plan.recompute_modules)
    if not plan.recompute_layers:
        return
    most = max(plan.layer_split(model))
    if plan.recompute_layers >= most:
        raise InputError("recompute_layers", plan.recompute_layers,
                         f"must be below the {most} layers the fullest model chunk holds "
                         f"({model.layers} layers over pp*vpp = {plan.num_chunks} chunks); "
                         "recomputing every layer is recompute='full' without a layer count")


def _expert_rules(model: ModelSpec, ep: int, etp: int, dispatcher: str = "alltoall",
                  ep_overlap: bool = False) -> None:
    if not model.is_moe:
        if ep > 1 or etp > 1:
            raise InputError("ep" if ep > 1 else "etp", max(ep, etp),
                             f"{model.name} is dense: expert parallelism needs an MoE model")
        if dispatcher != "alltoall":  # the Plan's neutral value
            raise InputError("moe_dispatcher", dispatcher,
                             f"{model.name} is dense: a token dispatcher needs an MoE model")
        if ep_overlap:
            raise InputError("ep_comm_overlap", ep_overlap,
                             f"{model.name} is dense: there is no expert all-to-all to overlap")
        return
    if model.moe_experts % ep:
        raise InputError("ep", ep, f"must divide the experts ({model.moe_experts})")
    if model.moe_expert_ffn % etp:
        raise InputError("etp", etp, f"must divide the expert ffn width ({model.moe_expert_ffn})")


def _batch_rules(workload: Workload, plan: Plan) -> None:
    from .engines import pipeline_min_microbatches
    from .pipeline.schedules import rounds_fit

    per_step = plan.dp * plan.micro_batch
    if workload.global_batch % per_step:
        raise InputError("global_batch", workload.global_batch,
                         f"must be a multiple of dp*micro_batch ({plan.dp}*{plan.micro_batch} "
                         f"= {per_step})")
    m = plan.num_microbatches(workload)
    # the runner's own floor (engines.py): the engine named (engines.run_by made it the
    # workload's framework), else the framework, "" being meshplan's runtime (torch's)
    need, why = pipeline_min_microbatches(workload.framework, plan.schedule, plan.pp, plan.vpp)
    if m < need:
        raise InputError("global_batch", workload.global_batch,
                         f"gives {m} micro-batches per pipeline; schedule {plan.schedule} "
                         f"needs at least {need} on pp={plan.pp} (global_batch >= "
                         f"{need * per_step}): {why}")
    if plan.pp > 1 and not rounds_fit(plan.schedule, plan.pp, m):
        r = max(1, m // plan.pp)
        raise InputError("micro_batch", plan.micro_batch,
                         f"gives {m} micro-batches; schedule {plan.schedule} on pp={plan.pp} "
                         f"runs them in rounds of max(1, m // pp) = {r}, so m must be a "
                         f"multiple of {r} (torch's flexible interleaving)")


def check_plan(model: ModelSpec, workload: Workload, plan: Plan,
               num_gpus: int | None = None) -> Plan:
    """Raise InputError naming the first rule ``plan`` breaks; return it when valid.

    The plan's own consistency (schedule vs vpp, ep*etp | dp*cp*tp, ...) is checked when
    a Plan is built (plan.py); this adds what needs the model, the workload and the GPUs.
    """
    _position_rules(model, workload)
    _cp_rules(workload, plan.cp, num_gpus)  # first: _tp_rules divides the sequence by cp
    _tp_rules(model, workload, plan.tp, plan.cp, plan.sequence_parallel, num_gpus)
    _pp_rules(model, plan.pp, plan.vpp, plan.schedule, num_gpus)
    if num_gpus is not None and plan.world_size != num_gpus:
        raise InputError("plan", plan.describe(),
                         f"dp*cp*tp*pp = {plan.dp}*{plan.cp}*{plan.tp}*{plan.pp} = "
                         f"{plan.world_size} must equal the number of GPUs ({num_gpus})")
    _expert_rules(model, plan.ep, plan.etp, plan.moe_dispatcher, plan.ep_comm_overlap)
    _recompute_rules(model, plan)
    _batch_rules(workload, plan)
    return plan


def check_pins(model: ModelSpec, workload: Workload, num_gpus: int, pins: dict) -> None:
    """The rules a partial plan (pinned knobs) already breaks, whatever the rest becomes."""
    _position_rules(model, workload)
    g = {k: field_value(k, v) for k, v in pins.items()}  # each value on its own first
    if "schedule" in g or "vpp" in g:  # the pipeline knobs pinned together (Plan's rules:
        # V schedules and virtual stages need pp > 1, each schedule its chunk count)
        sched = g.get("schedule", "")
        Plan(pp=g.get("pp", 2), schedule=sched,
             vpp=g.get("vpp", 2 if sched in MULTI_CHUNK_SCHEDULES else 1))
    tp, cp, pp, dp = (g.get(k) for k in ("tp", "cp", "pp", "dp"))
    if cp is not None:  # first: _tp_rules divides the sequence by cp
        _cp_rules(workload, cp, num_gpus)
    if tp is not None:
        _tp_rules(model, workload, tp, cp or 1, bool(g.get("sequence_parallel", tp > 1)) and tp > 1
                  and cp is not None, num_gpus)
    if pp is not None:
        _pp_rules(model, pp, g.get("vpp", 1), g.get("schedule"), num_gpus)
    elif g.get("vpp", 1) > 1 and 2 * g["vpp"] > model.layers + 2:
        # virtual stages need pp >= 2 (Plan), so even the shortest pipeline breaks _pp_rules'
        # pp*vpp <= layers + 2: said here, not as "no layout uses all the GPUs" after the search
        raise InputError("vpp", g["vpp"], f"at most {(model.layers + 2) // 2} for {model.name}: "
                         f"pp*vpp must not exceed the layers + 2 ({model.layers} + 2) "
                         "and a pipeline has pp >= 2")
    if dp is not None:
        if num_gpus % dp:
            raise InputError("dp", dp, f"must divide the {num_gpus} GPUs")
        mb = g.get("micro_batch", 1)
        if workload.global_batch % (dp * mb):
            raise InputError("global_batch", workload.global_batch,
                             f"must be a multiple of dp*micro_batch ({dp}*{mb} = {dp * mb})")
    elif "micro_batch" in g and workload.global_batch % g["micro_batch"]:
        raise InputError("micro_batch", g["micro_batch"],
                         f"must divide the global batch ({workload.global_batch})")
    pinned = [k for k in ("dp", "tp", "cp", "pp") if g.get(k) is not None]
    prod = 1
    for k in pinned:
        prod *= g[k]
    if num_gpus % prod or (len(pinned) == 4 and prod != num_gpus):
        raise InputError("plan", " ".join(f"{k}{g[k]}" for k in pinned),
                         f"{'*'.join(pinned)} = {prod} must divide the {num_gpus} GPUs "
                         "(dp*cp*tp*pp = GPUs)")
    _expert_rules(model, g.get("ep", 1), g.get("etp", 1), g.get("moe_dispatcher", "alltoall"),
                  bool(g.get("ep_comm_overlap", False)))
    if g.get("recompute_modules"):
        if g.get("recompute", "selective") != "selective":
            raise InputError("recompute_modules", g["recompute_modules"],
                             f"needs recompute='selective' (pinned: {g['recompute']!r})")
        _module_rules(model, g["recompute_modules"])
    if g.get("recompute_layers"):
        if g.get("recompute", "full") != "full":
            raise InputError("recompute_layers", g["recompute_layers"],
                             f"needs recompute='full' (pinned: {g['recompute']!r})")
        if g["recompute_layers"] >= model.layers:  # no chunk holds more than every layer
            raise InputError("recompute_layers", g["recompute_layers"],
                             f"must be below the {model.layers} layers of {model.name} "
                             "(recomputing every layer is recompute='full' without a layer count)")
        if pp is not None:
            _recompute_rules(model, Plan(pp=pp, vpp=g.get("vpp", 1), recompute="full",
                                         recompute_layers=g["recompute_layers"],
                                         schedule="interleaved_1f1b" if g.get("vpp", 1) > 1
                                         else ""))
    if g.get("hsdp_shard") and num_gpus % g["hsdp_shard"]:
        raise InputError("hsdp_shard", g["hsdp_shard"], f"must divide the {num_gpus} GPUs "
                         "(it divides dp*cp)")
    if all(k in g for k in ("dp", "pp", "micro_batch", "schedule")):  # the micro-batch count
        vpp = g.get("vpp") or (2 if g["schedule"] in MULTI_CHUNK_SCHEDULES else 1)
        _batch_rules(workload, Plan(dp=g["dp"], pp=g["pp"], micro_batch=g["micro_batch"],
                                    schedule=g["schedule"], vpp=vpp))
