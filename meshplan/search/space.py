"""Generators of valid choices for each knob; the plan space is their product.

Each generator yields only values that can be valid for the model, cluster and workload
(divisibility of heads, layers, experts, sequence and batch), so the product holds few
invalid plans. A pinned knob yields just its pinned value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..plan import MULTI_CHUNK_SCHEDULES, V_SCHEDULES
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from ..specs.workload import Workload
from ..cost.dispatcher_buffers import deepep_group_refusal

# Limits of the space (not pruning theorems; a pin goes beyond them): tp and etp within one
# scale-up domain, cp <= MAX_CP, pp <= MAX_PP, vpp <= MAX_VPP, micro-batches up to
# MAX_MICRO_BATCH sequences and MAX_MICRO_BATCH_TOKENS tokens; the overlap switches on,
# sequence parallel on when tp > 1 (sequence_parallel_off), ring cp, no HSDP, no offload,
# the default rank order. The numbers bound the search's time (seconds on a laptop), not what
# engines run: published recipes beyond them (Megatron-Bridge's MoE recipes at vpp 12-24,
# llm-foundry's sweeps at micro-batch 56) are predicted with the knob pinned.
MAX_CP = 32


def sequence_parallel_off(seq_len: int, tp: int) -> bool:
    """Whether sequence parallelism stays off at TP degree ``tp`` when not pinned: it splits
    the sequence over TP, and validity.py refuses it where ``seq_len`` does not divide (Plan
    then drops TP overlap too: only SP's collectives can be overlapped)."""
    return tp > 1 and seq_len % tp != 0

MAX_PP = 128
MAX_MICRO_BATCH = 16
MAX_VPP = 8
MAX_MICRO_BATCH_TOKENS = 32768


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True)
class Degrees:
    tp: int
    cp: int
    pp: int
    dp: int
    ep: int = 1
    etp: int = 1
    # Plan fields of rule 8's MoE communication knobs ((field, value), ...), on top of the
    # framework's defaults: moe_comm_knobs
    knobs: tuple = ()


def tp_choices(model: ModelSpec, cluster: Cluster, pins: dict) -> list[int]:
    if "tp" in pins:
        return [pins["tp"]]
    out = []
    for t in divisors(cluster.num_gpus):
        if t > cluster.domain_size or model.heads % t:
            continue
        if not model.is_mla and model.kv_heads % t and t % model.kv_heads:
            continue
        if model.num_dense_layers and model.ffn % t:
            continue
        out.append(t)
    return out


def cp_choices(workload: Workload, pins: dict) -> list[int]:
    if "cp" in pins:
        return [pins["cp"]]
    # every degree the validity rule accepts (seq_len splits into 2*cp chunks), up to MAX_CP
    return [c for c in range(1, MAX_CP + 1) if c == 1 or workload.seq_len % (2 * c) == 0]


def degree_choices(model: ModelSpec, cluster: Cluster, workload: Workload,
                   pins: dict, engine: str | None = None) -> Iterator[Degrees]:
    """Every degree point, each once per setting of rule 8's MoE communication knobs on
    ``engine`` (moe_comm_knobs)."""
    n = cluster.num_gpus
    for tp in tp_choices(model, cluster, pins):
        for cp in cp_choices(workload, pins):
            if n % (tp * cp):
                continue
            rest = n // (tp * cp)
            pps = [pins["pp"]] if "pp" in pins else [
                p for p in divisors(rest) if p <= min(MAX_PP, model.layers + 2)]
            for pp in pps:
                if rest % pp:
                    continue
                dp = rest // pp
                if "dp" in pins and pins["dp"] != dp:
                    continue
                if workload.global_batch % dp:
                    continue
                for ep, etp in expert_choices(model, dp * cp * tp, tp, pins,
                                              cluster.domain_size):
                    for knobs in moe_comm_knobs(model, cluster, engine, pins, ep, etp):
                        yield Degrees(tp, cp, pp, dp, ep, etp, knobs)


# Rule 8 of search.py: the MoE layer's communication knobs, searched where the engine runs
# every setting (engines.py _common: Megatron-LM only; torchtitan and DeepSpeed dispatch with
# an NCCL all-to-all and do not overlap it) and a plan has an expert all-to-all (ep > 1):
# the token dispatcher (plan.MOE_DISPATCHERS: Megatron's alltoall, or the DeepEP class through
# --moe-token-dispatcher-type flex) and the overlap of the expert all-to-all with another
# micro-batch's compute (--overlap-moe-expert-parallel-comm; Megatron-Core refuses it with
# pp > 1 and no virtual stages, with full recomputation and with 'moe' recomputed: the
# engine's limits, engines._megatron_overlaps, drop those plans). Megatron-Bridge's MoE
# performance recipes set both per model and GPU (bench/data/heldout_runs.csv: DeepEP and the
# overlap on DeepSeek-V3, Qwen3 and GPT-OSS), so a search held at the framework's default would
# rank plans slower than the ones NVIDIA runs. DeepEP needs "Hopper (SM90) GPUs, or other
# architectures with SM90 PTX ISA support" (deepseek-ai/DeepEP README at 0297fc8,
# Requirements): NVIDIA parts of compute capability 9.0 and up (Hopper, Blackwell); elsewhere
# the dispatcher stays the default. Without an engine named, the framework's defaults hold
# (a framework alone does not limit the plans to what it runs: search.py).
MOE_KNOB_ENGINES = ("megatron",)
DEEPEP_MIN_COMPUTE_CAPABILITY = 9.0


def moe_comm_knobs(model: ModelSpec, cluster: Cluster, engine: str | None, pins: dict,
                   ep: int, etp: int = 1) -> list[tuple]:
    """Rule 8's settings of a degree point with expert-parallel degree ``ep`` on ``engine``:
    ((field, value), ...) per setting, the framework's default first (() where the knobs are
    not searched, or pinned: the plan's base fields hold them)."""
    if not model.is_moe or ep <= 1 or engine not in MOE_KNOB_ENGINES:
        return [()]
    from ..framework_defaults import plan_defaults
    default = plan_defaults(engine, 1, cluster.scaleup_domain, True)
    dispatchers = [pins.get("moe_dispatcher", default["moe_dispatcher"])]
    if "moe_dispatcher" not in pins:
        dispatchers += [d for d in ("alltoall", "deepep") if d not in dispatchers
                        and (d != "deepep" or cluster.gpu.compute_capability
                             >= DEEPEP_MIN_COMPUTE_CAPABILITY)]
        # DeepEP's normal kernels run the expert group sizes they have a config for
        # (cost/dispatcher_buffers.py; the engine's limits refuse the rest on the cluster)
        dispatchers = [d for d in dispatchers
                       if not deepep_group_refusal(d, ep, etp, cluster.scaleup_domain)]
    overlaps = [pins.get("ep_comm_overlap", default["ep_comm_overlap"])]
    if "ep_comm_overlap" not in pins:
        overlaps.append(not overlaps[0])
    out = []
    for d in dispatchers:
        for o in overlaps:
            out.append(tuple((k, v) for k, v in (("moe_dispatcher", d), ("ep_comm_overlap", o))
                             if k not in pins))
    return out


def expert_choices(model: ModelSpec, attn_ranks: int, tp: int, pins: dict,
                   domain: int = 0) -> list[tuple[int, int]]:
    if not model.is_moe:
        return [(pins.get("ep", 1), pins.get("etp", 1))]
    etps = [pins["etp"]] if "etp" in pins else [  # like tp: within one scale-up domain
        t for t in divisors(attn_ranks) if not domain or t <= domain]
    out = []
    for etp in etps:
        if model.moe_expert_ffn % etp:
            continue
        eps = [pins["ep"]] if "ep" in pins else [
            e for e in divisors(model.moe_experts) if attn_ranks % (e * etp) == 0]
        out += [(e, etp) for e in eps if attn_ranks % (e * etp) == 0]
    return out


def micro_batch_choices(workload: Workload, dp: int, pins: dict) -> list[int]:
    if "micro_batch" in pins:
        return [pins["micro_batch"]]
    local = workload.global_batch // dp
    # GEMM efficiency saturates long before this; bigger micro-batches only add bubble
    cap = max(1, min(MAX_MICRO_BATCH, MAX_MICRO_BATCH_TOKENS // workload.seq_len))
    return [b for b in divisors(local) if b <= cap]


def schedule_choices(model: ModelSpec, pp: int, m: int, pins: dict,
                     runner: str = "") -> list[tuple[int, str]]:
    """(vpp, schedule) pairs for a pipeline of ``pp`` ranks and ``m`` micro-batches that
    ``runner`` (the workload's framework: the engine, when one is named) takes
    (engines.pipeline_min_microbatches, validity.py's rule)."""
    from ..engines import pipeline_min_microbatches

    chunky = (pins.get("vpp") or 1) > 1 or pins.get("schedule") in MULTI_CHUNK_SCHEDULES
    if pp == 1:  # a pinned vpp > 1 or multi-chunk schedule needs pp > 1: none here (they
        # were dropped, or the schedule made an invalid plan that ended the search)
        return [] if chunky else [(1, pins.get("schedule", "1f1b"))]
    pinned_v, pinned_s = pins.get("vpp"), pins.get("schedule")
    allowed = pins.get("schedules")  # a set of schedules to choose from (e.g. an engine's)
    out = []
    for v in ([pinned_v] if pinned_v else range(1, MAX_VPP + 1)):
        if pp * v > model.layers + 2:  # validity.py: at most layers + 2 chunks
            break
        if pinned_s:
            names = [pinned_s]
        elif v == 1:  # GPipe where m < pp leaves out its dominator ZB-H1 (DOMINATOR)
            names = ["1f1b", "zb_h1"] + (["gpipe"] if m < pp else [])
        else:
            names = ["interleaved_1f1b", "interleaved_zb"] + (["zb_v", "dualpipev"] if v == 2
                                                               else [])
        if allowed and not pinned_s:
            names = [n for n in allowed if (n in MULTI_CHUNK_SCHEDULES) == (v > 1)
                     and (n not in V_SCHEDULES or v == 2)]
        for s in names:
            chunky = s in MULTI_CHUNK_SCHEDULES
            if ((v > 1) != chunky or (s in V_SCHEDULES and v != 2)
                    or m < pipeline_min_microbatches(runner, s, pp, v)[0]):
                continue
            out.append((v, s))
    return out


ZERO_ORDER = (1, 2, 3)  # zero 0 moves the same bytes as zero 1 and holds more: dominated
RECOMPUTE_ORDER = ("none", "selective", "full")

# Rule 7 of search.py: module-level selective recomputation (Megatron-Core
# --recompute-modules, meshplan/recompute_modules.py) as a second recomputation ladder beside
# RECOMPUTE_ORDER, for MoE models on the engines that run it: Megatron-LM / NeMo (and
# meshplan's own runtime, runtime/recompute.py). Megatron-Bridge's MoE performance recipes
# recompute modules rather than whole layers (e.g. DeepSeek-V3 on H100 mla_up_proj + mlp,
# GPT-OSS layernorm + moe_act: bench/data/heldout_runs.csv, Megatron-Bridge
# scripts/performance configs). Without an engine named (runner ""), the rungs meshplan's own
# runtime runs. The ladder is a chain: each rung recomputes everything the
# previous one does and more (moe_act -> + layernorm -> + mla_up_proj -> the whole MoE layer
# instead of its activation -> + the dense layers' MLP), so along it the step time only grows
# and the activations held only shrink (tests/test_module_ladder.py checks both), which is
# what rule 1's walk and the floors of bound.py need. The cheap output-discarding modules
# come first: they free the largest tensors per second recomputed.
MODULE_LADDER_FRAMEWORKS = ("", "megatron", "nemo")
MODULE_RUNG = "selective:"  # a ladder rung's token: "selective:<modules>"


def module_ladder(model: ModelSpec, runner: str | None) -> tuple[str, ...]:
    """The rungs (tokens "selective:<modules>") of rule 7's ladder for ``model`` on
    ``runner`` (the engine the search is limited to, else the workload's framework); () where
    the model has no MoE layer or the runner has no module-level recomputation."""
    runner = (runner or "").strip().lower()
    if not model.is_moe or runner not in MODULE_LADDER_FRAMEWORKS:
        return ()
    chain = [("moe_act",), ("layernorm", "moe_act")]
    if model.is_mla:
        chain.append(("layernorm", "mla_up_proj", "moe_act"))
    if runner:  # meshplan's own runtime does not re-run the expert all-to-all in backward:
        # no whole-MoE-layer rung there (runtime/recompute.py refuses it with ep > 1)
        chain.append(tuple(m for m in chain[-1] if m != "moe_act") + ("moe",))
    if model.num_dense_layers:
        chain.append(chain[-1] + ("mlp",))
    from ..recompute_modules import parse_modules
    return tuple(MODULE_RUNG + parse_modules(list(c)) for c in chain)


def rung_fields(rung: str) -> dict:
    """The Plan fields of a ladder rung: {"recompute": rung} for RECOMPUTE_ORDER's, and
    recompute "selective" with its modules for a module_ladder token."""
    if rung.startswith(MODULE_RUNG):
        return {"recompute": "selective", "recompute_modules": rung[len(MODULE_RUNG):]}
    return {"recompute": rung}
