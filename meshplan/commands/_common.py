"""Arguments shared by the subcommands that take a scenario (model x cluster x workload)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ..errors import InputError
from ..plan import Plan
from ..plan_label import label_fields
from ..validity import check_plan
from ..scenario import Scenario, load_scenario, make_cluster
from ..specs.catalog.presets import load_model
from ..specs.workload import Workload

PLAN_FLAGS = {  # flag -> (Plan field, type)
    "dp": int, "tp": int, "pp": int, "cp": int, "ep": int, "etp": int, "zero": int,
    "vpp": int, "micro_batch": int, "hsdp_shard": int, "recompute_layers": int,
    "schedule": str, "recompute": str, "cp_kind": str, "order": str, "recompute_modules": str,
    "moe_dispatcher": str,
}
BOOL_FLAGS = ("sequence_parallel", "offload_optimizer", "tp_comm_overlap", "overlap_grad_reduce",
              "overlap_param_gather", "ep_comm_overlap")


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scenario (or --scenario FILE.toml)")
    g.add_argument("--scenario", help="TOML file with [model], [cluster], [workload] (and [plan])")
    g.add_argument("--model", help="preset name or path to a HuggingFace config.json")
    g.add_argument("--gpus", help="COUNTxGPU, e.g. 64xH100-SXM-80GB")
    g.add_argument("--gpus-per-node", type=int)
    g.add_argument("--nic-gbps", type=float, help="scale-out bandwidth per GPU, Gb/s one way")
    g.add_argument("--gpu-file", help="TOML file with extra [gpu.NAME] tables")
    g.add_argument("--seq-len", type=int)
    g.add_argument("--global-batch", type=int, help="sequences per step")
    g.add_argument("--global-batch-tokens", type=int)
    g.add_argument("--precision", choices=("bf16", "fp16", "fp8"))
    g.add_argument("--fp8-recipe", help="with --precision fp8: delayed, cs, tensorwise, rowwise, "
                   "mx or blockwise (default: the engine's own, cost/fp8_recipe.py)")
    g.add_argument("--grad-reduce-dtype", choices=("fp32", "bf16"),
                   help="gradient buffer and data-parallel reduction dtype (default fp32; bf16 = "
                        "Megatron's --grad-reduce-in-bf16, what Megatron-Bridge's perf recipes run)")
    g.add_argument("--cuda-graph", help="what of each layer runs from CUDA graphs: full, or "
                   "Transformer Engine scopes joined by '+' (attn, moe_router, moe_preprocess); "
                   "none (default): eager (cost/ops.py CUDA_GRAPHS)")


def add_plan_args(p: argparse.ArgumentParser, help_suffix: str = "") -> None:
    g = p.add_argument_group("plan knobs" + help_suffix)
    g.add_argument("--plan", dest="plan_label", metavar="LABEL", default=None,
                   help="a plan label exactly as `meshplan plan` prints it (or its --json "
                        "'label'); flags given beside it override its fields")
    for flag, typ in PLAN_FLAGS.items():
        g.add_argument("--" + flag.replace("_", "-"), dest=flag, type=typ, default=None)
    for flag in BOOL_FLAGS:
        g.add_argument("--" + flag.replace("_", "-"), dest=flag, default=None,
                       action=argparse.BooleanOptionalAction)


def plan_overrides(args: argparse.Namespace) -> dict:
    """Plan fields from --plan LABEL, with the per-field flags on top."""
    label = getattr(args, "plan_label", None)
    out = label_fields(label) if label is not None else {}
    keys = list(PLAN_FLAGS) + list(BOOL_FLAGS)
    out.update({k: getattr(args, k) for k in keys if getattr(args, k, None) is not None})
    if out.get("recompute_modules") and "recompute" not in out:
        out["recompute"] = "selective"  # --recompute-modules is selective recomputation
    return out


def _check_batch_flags(args: argparse.Namespace, seq_len: int | None) -> None:
    """--global-batch and --global-batch-tokens together must name the same batch."""
    gb, tokens = _flag(args, "global_batch"), _flag(args, "global_batch_tokens")
    if gb is not None and tokens is not None and (seq_len is None or gb * seq_len != tokens):
        raise InputError("--global-batch-tokens", tokens,
                         f"contradicts --global-batch {gb} (x seq_len {seq_len} = "
                         f"{gb * (seq_len or 0)} tokens); give one of them")


def _check_recipe_flag(recipe: str, precision: str) -> None:
    """--fp8-recipe names how FP8 runs: without FP8 it would be silently ignored."""
    if recipe and precision != "fp8":
        raise InputError("--fp8-recipe", recipe, f"applies to --precision fp8 only (the "
                         f"precision here is {precision})")


def engine_of(args: argparse.Namespace) -> str | None:
    """The engine a command plans, predicts or exports for (--engine; plan's --export and
    export's --to when they name a training engine), or None: meshplan's own runtime."""
    from ..engines import LIMITED_ENGINES
    for name in ("engine", "export", "to"):
        value = getattr(args, name, None)
        if value in LIMITED_ENGINES:
            return value
    return None


def add_engine_arg(p: argparse.ArgumentParser) -> None:
    """--engine for predict and simulate: the plan as that engine runs it (engines.run_by)."""
    from ..engines import LIMITED_ENGINES
    p.add_argument("--engine", choices=LIMITED_ENGINES,
                   help="predict the plan as this engine runs it (its kernels and FP8 recipe, "
                        "meshplan/engines.py run_by), as `meshplan plan --engine` does; a plan "
                        "the engine cannot run is refused")


def check_engine(engine: str | None, sc: Scenario, plan: Plan) -> None:
    """Refuse (one line, exit 2) a plan ``engine`` cannot run, as its export would."""
    if engine is not None:
        from ..engines import check
        check(engine, replace(sc, plan=plan))


# What the runtime commands (run, dryrun) take when neither --scenario nor a flag names it:
# a model and batch small enough for CPU ranks; no cluster (no prediction) unless --gpus
LOCAL_DEFAULTS = {"model": "tiny-llama", "seq_len": 64, "global_batch": 8}


def _flag(args: argparse.Namespace, name: str):
    """A scenario flag's value, None when not given or when the command has no such flag
    (run and dryrun take fewer scenario flags than predict)."""
    return getattr(args, name, None)


def scenario_from_args(args: argparse.Namespace, local: bool = False) -> Scenario:
    """The scenario from --scenario, with any flags given on top overriding it, its workload
    as the engine of ``engine_of(args)`` runs it (engines.run_by). (A cluster of several
    pools is read by commands/_pools.py, for `meshplan plan` only.) Every command that takes
    --scenario reads it here. ``local`` (run, dryrun): without --scenario the model, seq_len
    and global_batch default to LOCAL_DEFAULTS and the cluster is optional (None without
    --gpus: the plan runs on this machine's devices, with no prediction)."""
    from ..engines import run_by
    sc = _scenario_from_args(args, local)
    workload = run_by(engine_of(args), sc.workload)
    if workload is sc.workload:
        return sc
    return replace(sc, workload=workload)


def _cluster_on_top(sc: Scenario, gpus, per_node, nic, gpu_file) -> dict:
    """make_cluster's arguments for the scenario's cluster with the flags given on top: each
    flag replaces what it names (--gpus the type and count), the rest of the [cluster] table
    (NIC, scale-up domain, gpu_file) is kept."""
    table = dict(sc.cluster_stated) or {  # (a Scenario built in code, without a file)
        "gpus": f"{sc.cluster.num_gpus}x{sc.cluster.gpu.name}",
        "gpus_per_node": sc.cluster.gpus_per_node}
    if gpus:
        for k in ("gpu", "num_gpus"):
            table.pop(k, None)
        table["gpus"] = gpus
    if per_node is not None:
        table["gpus_per_node"] = per_node
    if nic is not None:
        table["nic_gbps_per_gpu"] = nic
    if gpu_file:
        table["gpu_file"] = gpu_file
    return table


def _scenario_from_args(args: argparse.Namespace, local: bool = False) -> Scenario:
    recipe = getattr(args, "fp8_recipe", None) or ""  # "" = the scenario's, else the engine's
    grads = getattr(args, "grad_reduce_dtype", None)  # None = the scenario's, else fp32
    graph = getattr(args, "cuda_graph", None)  # None = the scenario's, else eager
    if args.scenario:
        sc = load_scenario(args.scenario)
        from ._profile import apply_scenario_profile
        apply_scenario_profile(args, sc.profile,
                               sc.cluster.gpu if sc.cluster is not None else None)
        gpus, per_node, nic = (_flag(args, k) for k in ("gpus", "gpus_per_node", "nic_gbps"))
        if sc.pools is not None and len(sc.pools.pools) > 1 and not gpus:
            raise InputError("cluster.pools", len(sc.pools.pools),
                             "pools are planned by `meshplan plan`; this command takes one GPU type")
        # one pool is an ordinary cluster (docs/pools.md); it is kept for its price
        one_pool = sc.pools if sc.pools is not None and not gpus else None
        model = load_model(args.model) if args.model else sc.model
        cluster = sc.cluster
        # (`is not None`, not `or`, here and below: a 0 given on top of the file is refused
        # as it is without the file, not taken for "not given")
        if gpus or per_node is not None or nic is not None:
            cluster = make_cluster(**_cluster_on_top(sc, gpus, per_node, nic,
                                                     _flag(args, "gpu_file")))
        w = sc.workload
        seq = args.seq_len if args.seq_len is not None else w.seq_len
        _check_batch_flags(args, seq)
        gb = args.global_batch if args.global_batch is not None else w.global_batch
        tokens = _flag(args, "global_batch_tokens")
        if tokens is not None and args.global_batch is None:
            gb = Workload.from_tokens(seq, tokens).global_batch
        # flags override; what the scenario's [workload] says beyond them (framework,
        # compiled_loss, attention_kernel, optimizer, fp8_recipe) is kept
        precision = _flag(args, "precision") or w.precision
        _check_recipe_flag(recipe, precision)
        workload = replace(w, seq_len=seq, global_batch=gb, precision=precision,
                           # the scenario's recipe belongs to its fp8 runs: a --precision
                           # bf16 comparison drops it
                           fp8_recipe=recipe or (w.fp8_recipe if precision == "fp8" else ""),
                           grad_reduce_dtype=grads or w.grad_reduce_dtype,
                           cuda_graph=w.cuda_graph if graph is None else graph)
        return Scenario(model, cluster, workload, sc.plan, one_pool, plan_stated=sc.plan_stated,
                        cluster_stated=sc.cluster_stated)
    defaults = LOCAL_DEFAULTS if local else {}
    given = {k: _flag(args, k) if _flag(args, k) is not None else defaults.get(k)
             for k in ("model", "gpus", "seq_len", "global_batch")}
    for name in ("model", "seq_len") + (() if local else ("gpus",)):
        if given[name] is None:
            raise InputError("--" + name.replace("_", "-"), None, "required (or give --scenario)")
    model = load_model(given["model"])
    cluster = None  # local: the plan runs on this machine's devices, nothing to predict for
    if given["gpus"] is not None:
        cluster = make_cluster(given["gpus"], gpus_per_node=_flag(args, "gpus_per_node"),
                               nic_gbps_per_gpu=_flag(args, "nic_gbps"),
                               gpu_file=_flag(args, "gpu_file"))
    seq, gb, tokens = given["seq_len"], given["global_batch"], _flag(args, "global_batch_tokens")
    _check_batch_flags(args, seq)
    # without --precision: bf16, or fp16 on parts without bf16 tensor cores (Volta, Turing)
    default = "bf16" if cluster is None or "bf16" in cluster.gpu.peak_flops else "fp16"
    precision = _flag(args, "precision") or default
    _check_recipe_flag(recipe, precision)
    if tokens is not None:
        workload = Workload.from_tokens(seq, tokens, precision=precision,
                                        fp8_recipe=recipe, grad_reduce_dtype=grads or "fp32",
                                        cuda_graph=graph or "")
    elif gb is not None:
        workload = Workload(seq, gb, precision, fp8_recipe=recipe,
                            grad_reduce_dtype=grads or "fp32", cuda_graph=graph or "")
    else:
        raise InputError("--global-batch", None, "required (sequences per step)")
    return Scenario(model, cluster, workload, None)


def plan_stated(args: argparse.Namespace, sc: Scenario) -> set[str]:
    """The plan fields the user named (scenario [plan] table, --plan label, flags), as
    plan_from_args reads them; the others are at Plan's defaults."""
    base = set() if getattr(args, "plan_label", None) is not None else set(sc.plan_stated)
    return base | set(plan_overrides(args))


def _inferred_dp(plan: Plan, num_gpus: int) -> int:
    """The data-parallel degree a plan given without one takes: the GPUs left over by its
    other degrees (as Megatron-LM and torchtitan derive it from the world size). Where they
    do not divide the GPUs, dp stays 1 and the validity rule names the product."""
    model_parallel = plan.tp * plan.pp * plan.cp
    return num_gpus // model_parallel if num_gpus % model_parallel == 0 else 1


def plan_from_args(args: argparse.Namespace, sc: Scenario, on_cluster: bool = True,
                   default_plan: bool = False) -> Plan:
    """A full plan: the scenario's [plan] table (or --plan LABEL) with flags on top, checked
    by the one validity rule (meshplan/validity.py) against the scenario's model, workload
    and, when ``on_cluster`` and the scenario has a cluster, its number of GPUs (dp inferred
    from it when not stated). Without a cluster (run, dryrun on local devices) the plan runs
    on its own world. ``default_plan`` (run): no plan given is Plan()'s defaults, sized on the
    cluster as any plan, instead of refused."""
    base = sc.plan.to_dict() if sc.plan else {}
    if getattr(args, "plan_label", None) is not None:
        base = {}  # a label is a whole plan: it replaces the scenario's [plan]
    base.update(plan_overrides(args))
    if not base and not default_plan:
        raise InputError("plan", None, "give the plan with --dp/--tp/--pp/... or a [plan] table")
    plan = Plan.from_dict(base)
    if on_cluster and sc.cluster is not None and "dp" not in plan_stated(args, sc):
        plan = replace(plan, dp=_inferred_dp(plan, sc.cluster.num_gpus))
    if sc.workload is not None:
        check_plan(sc.model, sc.workload, plan,
                   sc.cluster.num_gpus if on_cluster and sc.cluster else None)
    return plan
