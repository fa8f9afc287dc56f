"""Search the plan space: evaluate, prune, rank, explain.

Pruning rules, each a theorem about the closed forms of meshplan.cost (conditions stated;
tests/test_search_complete.py checks them against an exhaustive enumeration of every valid
plan on 200 seeded small spaces):

1. Ladder dominance. At fixed degrees, micro-batch and schedule, a higher ZeRO stage never
   moves fewer bytes nor computes less, and more recomputation never does less work, while
   memory only falls along both ladders. So the first (recompute, ZeRO) setting that fits,
   walking ZeRO 1 -> 3 inside recompute none -> full, is at least as fast as every later
   setting of its row; once ZeRO 1 fits at some recompute level, later levels are dominated.
   ZeRO 0 moves the same bytes as ZeRO 1 and holds more: tried only when pinned.
2. Lean first. If the leanest setting of a (degrees, micro-batch) point (full recompute,
   the ZeRO stage holding least, the schedule with the fewest micro-batches in flight on
   rank 0) does not fit, no setting of that point fits (memory falls monotonically along 1.).
   Condition: ZeRO 2 <= 1 <= 0 always, but ZeRO 3 holds two gathered layers on top of its
   shards, which outweighs what it saves when the shard group is small or the model has few
   layers (a shard group of 1 saves nothing); so the lean setting tries ZeRO 3 and, when
   that does not fit, ZeRO 2.
3. Larger micro-batches. If the leanest setting at micro-batch b does not fit, none at
   b' > b fits: activations held = in-flight count x b, and the least in-flight count over
   the runnable schedules times b is non-decreasing in b (GPipe holds m*b = the local batch,
   the others hold at least pp*b), with the working set growing in b too.
4. Bound (branch and bound, search/bound.py and search/branch.py). The walk takes the
   (degrees, micro-batch) pairs best first by a floor on their step time, tightens a pair's
   floor in stages (the mean rank's work; the closed-form bubble of each schedule row and the
   least data-parallel exposure; then per row the floor of each (recomputation, ZeRO) rung
   that a floor on memory does not rule out), and skips every pair, row and rung whose floor
   exceeds the k-th best step time found; a rung whose memory floor exceeds the GPU does not
   fit. Each floor is a theorem stated in bound.py and checked by tests/test_search_bound.py;
   the ranked plans are those of the same walk without these skips, ties included.
5. Schedule dominance: see DOMINATOR below.
6. Partial recomputation (Plan.recompute_layers = N, the first N layers of each chunk in full,
   the rest none). At fixed degrees, micro-batch, schedule and ZeRO stage, time rises and
   memory falls with N for N >= 1 (each recomputed layer adds its forward again and keeps
   only its input; the recomputed layer's backward working set is there for every N >= 1),
   so at each ZeRO stage the fastest partial plan that fits is the fewest N that fits, found
   in the bracket N in [1, L-1] (L: the fullest chunk's layers; partial_recompute.py), none
   when N = L-1 does not fit. Tried only at the ZeRO stages below the first where no recomputation fits (there
   none is faster at the same or a lower stage), not where no recomputation at that stage
   (faster than any partial plan there) is already slower than the k-th best plan found,
   not where every layer recomputed does not fit (a partial plan holds more), and only when
   recomputation is not pinned;
   the lean setting (rule 2, every layer recomputed) holds less than any partial one.
7. Module-level recomputation (Megatron-Core --recompute-modules; MoE models on the engines
   that run it, space.module_ladder). Its rungs form a second ladder, a chain along which
   each rung recomputes what the one before does and more, so time only grows along it
   (tests/test_module_ladder.py) and rule 1's walk holds on it: per rung the first ZeRO
   stage that fits, ended by the first rung that fits at the first stage, with the floors
   of Theorems B1 and M on its own rungs. Walked where no recomputation does not fit at the
   first ZeRO stage (rule 1: there it is the fastest), and only when recomputation is not
   pinned.
8. The MoE layer's communication knobs (token dispatcher, expert all-to-all overlap;
   space.moe_comm_knobs) where the engine runs every setting: each setting of a degree point
   is a point of its own, walked and bounded as any other (the floors of bound.py are those
   of the point's dispatcher and overlap), so no pruning rule is added; the engine's limits
   drop the settings it refuses plan by plan.
"""

from __future__ import annotations

import time
from functools import lru_cache
from collections import Counter
from dataclasses import dataclass, field

from ..cost import Estimate, estimate, fp8_recipe
from ..engines import (ENGINE_NAMES, cluster_plan_violations, framework_zeros, UnsupportedByEngine,
                       plan_violations, scenario_violations,
                       search_hints)
from .. import framework_defaults
from ..errors import InputError
from ..plan import Plan, field_value
from ..validity import check_pins
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from ..specs.workload import Workload
from ..cost.pipeline import in_flight
from .branch import (BOUNDED, DOMINATED, DOMINATED_PARTIAL, DOMINATED_SCHEDULE,  # noqa: F401
                     NOT_FIT, ROUNDS, Walk)  # (the rejection reasons, as callers read them)
from .space import (RECOMPUTE_ORDER, ZERO_ORDER, degree_choices, module_ladder,
                    sequence_parallel_off)

# Theorem (schedule dominance). At the same degrees, micro-batch, vpp, recomputation and ZeRO,
# schedule S is dominated by D = DOMINATOR[S] (same vpp) when D is runnable at (pp, m) and
# the condition below holds: the closed forms of cost/pipeline.py give bubble_D <= bubble_S
# (fill*(F+B-W)/(F+B+W) <= fill since W >= 0) and in_flight_D(r) <= in_flight_S(r) on every
# rank r, checked here with the schedules' own counts (cost/pipeline.in_flight): gpipe and
# looped_bfs hold all m, ZB-H1 holds p <= m everywhere, interleaved ZB (v-1) rounds + p; but
# ZB-H1 holds p on rank r where 1F1B holds p - r, and interleaved ZB more than interleaved
# 1F1B's (v-1) rounds + 2 (p-1-r) + 1 on ranks past the middle, so those pairs are not
# dominated and both are searched. No other part of the estimate depends on the schedule
# (cost/step.py: bubble, in_flight, chunk placement only, and S and D place chunks alike).
# So D is at least as fast and fits whenever S does. When D cannot run (e.g. m < pp leaves
# GPipe, and 1F1B where the runner runs it: engines.pipeline_min_microbatches) S is not
# dominated and is searched.
# The simulator re-ranks the best plans together with their 1F1B variants (_rerank).
DOMINATOR = {"1f1b": "zb_h1", "gpipe": "zb_h1", "interleaved_1f1b": "interleaved_zb",
             "looped_bfs": "interleaved_zb"}


def schedule_dominated(vs: tuple[int, str], runnable: list[tuple[int, str]], pp: int,
                       m: int) -> bool:
    v, s = vs
    d = DOMINATOR.get(s)
    if d is None or (v, d) not in runnable:
        return False
    held, by = Plan(pp=pp, vpp=v, schedule=s), Plan(pp=pp, vpp=v, schedule=d)
    return all(in_flight(by, m, r) <= in_flight(held, m, r) for r in range(pp))

# Plan fields a user may pin (CLI flags / validate rows); the rest is searched.
PINNABLE = ("dp", "tp", "pp", "cp", "ep", "etp", "zero", "vpp", "schedule", "micro_batch",
            "recompute", "sequence_parallel", "offload_optimizer", "hsdp_shard", "cp_kind",
            "tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather", "order",
            "moe_dispatcher", "ep_comm_overlap", "schedules", "recompute_layers",
            "recompute_modules")


@dataclass
class SearchResult:
    top: list[Estimate]
    pareto: list[Estimate]  # fastest plan at each memory level: step time vs peak memory
    considered: int
    evaluated: int
    rejected: Counter
    elapsed_s: float
    pins: dict = field(default_factory=dict)
    fitting: int = 0  # plans that fit (considered = fitting + sum of rejected)
    simulated: dict = field(default_factory=dict)  # Plan -> PlanSimulation of re-ranked plans
    engine: str | None = None  # the engine whose limits (meshplan/engines.py) applied
    closest: Estimate | None = None  # the leanest plan that did not fit (when none fits)
    # of `considered`, the partial-recomputation plans rule 6 tried (how many depends on
    # the walk; the rest of `considered` is the size of the space, whatever was pruned)
    partial_considered: int = 0

    @property
    def best(self) -> Estimate | None:
        return self.top[0] if self.top else None


@lru_cache(maxsize=1024)
def in_flight_rank0(pp: int, vs: tuple[int, str]) -> float:
    v, sched = vs
    if pp == 1:
        return 1.0
    return in_flight(Plan(pp=pp, vpp=v, schedule=sched), 10**9, 0)


def _base_fields(pins: dict, tp: int, engine_defaults: dict | None = None,
                 framework: str = "",
                 scaleup_domain_gpus: int = framework_defaults.NODE_SCALEUP_GPUS,
                 moe: bool = True, seq_len: int = 0, model_name: str = "", gpu: str = "",
                 precision: str = "", fp8_recipe: str = "") -> dict:
    """Plan fields of every plan at TP degree ``tp``: the pins, then the engine's search
    hints, then what ``framework`` does when a run does not say (framework_defaults.py) on
    a cluster whose scale-up domain holds ``scaleup_domain_gpus`` GPUs for the model named
    ``model_name`` on the GPU ``gpu`` at ``precision`` / ``fp8_recipe`` (the family's preset
    or recipe, where the framework ships one); sequence parallelism
    off where ``seq_len`` does not divide by ``tp`` (space.sequence_parallel_off)."""
    kw = {k: pins[k] for k in PINNABLE if k in pins and k != "schedules"}
    if seq_len and sequence_parallel_off(seq_len, tp):
        kw.setdefault("sequence_parallel", False)
    for k, v in (engine_defaults or {}).items():
        kw.setdefault(k, v)
    for k, v in framework_defaults.plan_defaults(framework, tp, scaleup_domain_gpus,
                                                 moe, model_name, gpu, precision,
                                                 fp8_recipe).items():
        kw.setdefault(k, v)
    return kw


def _engine_filter(engine: str | None, model: ModelSpec, workload: Workload, rejected: Counter,
                   first: dict, cluster: Cluster | None = None):
    """A function plan -> True when ``engine`` can run it on ``cluster`` (counting the
    refusals by field; ``first`` keeps the first refusal of each field)."""
    if engine is None:
        return lambda plan: True
    name = ENGINE_NAMES[engine]

    def ok(plan: Plan) -> bool:
        v = plan_violations(engine, plan, model, workload)
        if not v and cluster is not None:  # e.g. Megatron's FP8 recipe on this GPU against
            v = cluster_plan_violations(engine, plan, cluster, workload)  # recomputed modules
        if v:
            rejected[f"{name} cannot run {v[0].field}={v[0].value}"] += 1
            first.setdefault(v[0].field, v[0])
        return not v
    return ok


def search(model: ModelSpec, cluster: Cluster, workload: Workload, pins: dict | None = None,
           top_k: int = 5, rerank_k: int = 50, simulate: bool = True,
           engine: str | None = None, progress=None) -> SearchResult:
    """The best plans; with ``engine`` (megatron, torchtitan, deepspeed) only plans that
    engine runs (meshplan/engines.py, the limits its exporter enforces). ``progress``, if
    given, is called with (degree points done, degree points in all) as the search walks."""
    pins_in, pins = pins, dict(pins or {})
    for k in pins:
        if k not in PINNABLE:
            raise InputError(k, pins[k], "cannot be pinned; pinnable: " + ", ".join(PINNABLE))
    # each pinned value normalised as Plan reads it ("Interleaved_1F1B", "FULL", ...)
    pins = {k: v if k == "schedules" else field_value(k, v) for k, v in pins.items()}
    if pins.get("recompute_modules"):  # module-level recomputation is selective
        pins.setdefault("recompute", "selective")
    check_pins(model, workload, cluster.num_gpus,
               {k: v for k, v in pins.items() if k != "schedules"})  # exit 2 naming the rule
    # the scenario's FP8 recipe on this GPU (MXFP8 needs Blackwell): refused once, not per plan
    fp8_recipe.resolve(workload.precision, workload.fp8_recipe, workload.framework,
                       cluster.gpu.generation)
    t0 = time.perf_counter()
    zero_order, engine_defaults = framework_zeros(workload.framework) or ZERO_ORDER, {}
    if engine is not None:
        bad = scenario_violations(engine, model, workload, cluster)
        if bad:  # no plan of this scenario can run there
            raise UnsupportedByEngine(engine, *bad[0])
        hints = search_hints(engine)
        if "schedule" not in pins and "schedules" not in pins:
            pins["schedules"] = hints["schedules"]
        zero_order, engine_defaults = hints["zeros"], hints["defaults"]
    zeros = [pins["zero"]] if "zero" in pins else list(zero_order)
    rcs = [pins["recompute"]] if "recompute" in pins else list(RECOMPUTE_ORDER)
    if pins.get("recompute_layers"):
        rcs = ["full"]
    partial = rcs == list(RECOMPUTE_ORDER) and "recompute_layers" not in pins  # rule 6
    modules = module_ladder(model, engine or workload.framework) if partial else ()  # rule 7
    keep = max(top_k, rerank_k)
    points = list(degree_choices(model, cluster, workload, pins, engine))
    while True:
        rejected: Counter = Counter()
        refusals: dict = {}
        runs_on_engine = _engine_filter(engine, model, workload, rejected, refusals, cluster)
        walk = Walk(model, cluster, workload, pins, zeros, rcs, keep, engine, rejected,
                    runs_on_engine,
                    lambda tp: _base_fields(pins, tp, engine_defaults, engine or workload.framework,
                                            cluster.scaleup_domain, model.is_moe,
                                            workload.seq_len, model.name,
                                            cluster.gpu.name, workload.precision,
                                            workload.fp8_recipe),
                    schedule_dominated, in_flight_rank0, partial, modules)
        walk.run(points, progress)
        considered, evaluated, fitting = walk.considered, walk.evaluated, walk.fitting
        closest = walk.closest
        # (step time, memory, place in the enumeration order): the order of a plain walk
        fits = [(t, mem, p) for t, mem, _, p in sorted(walk.fits, key=lambda f: f[:3])]
        pinned_refusal = [v for f, v in refusals.items() if f in pins]
        if engine is not None and not fits and not pinned_refusal and walk.closest_any:
            # every plan was rejected for memory before the engine was asked: the plan
            # closest to fitting says whether a pinned knob is one the engine refuses anyway
            pinned_refusal = [v for v in plan_violations(engine, walk.closest_any.plan, model,
                                                         workload) if v.field in pins]
        if engine is not None and not fits and pinned_refusal:
            # nothing runs because of a pinned knob the engine refuses: say so (exit 2)
            raise UnsupportedByEngine(engine, *pinned_refusal[0])
        seen: set = set()
        fits = [f for f in fits if not (f[2] in seen or seen.add(f[2]))]  # the lean may recur
        simulated: dict = {}
        if not (simulate and any(p.pp > 1 for _, _, p in fits[:rerank_k])):
            break
        tail = max(0, len(fits) - rerank_k)
        fits, simulated, lost = _rerank(model, cluster, workload, fits, rerank_k, rejected,
                                        engine)
        fitting -= lost
        # the simulation dropped plans of the head: the next closed-form plans take their
        # places, and the walk kept only the `keep` best for sure; keep more and walk again
        if not lost or len(fits) - tail >= top_k or keep >= max(top_k, rerank_k) + lost:
            break
        keep = max(top_k, rerank_k) + lost
    top = [estimate(model, cluster, workload, p) for _, _, p in fits[:top_k]]
    if simulate:
        # a pp=1 plan has no pipeline to re-rank it by (no bubble, no transfers): its
        # simulation is its closed-form step, but the plans shown carry it all the same, as
        # `meshplan simulate` gives it (plan --json's simulated_step_time_s)
        from ..pipeline.from_cost import rerank
        sims, _ = rerank([e for e in top if e.plan.pp == 1 and e.plan not in simulated])
        simulated = dict(simulated) | {s.plan: s for s in sims}
    pareto_plans, best_mem = [], float("inf")
    for step, mem, plan in fits:
        if mem < best_mem:
            pareto_plans.append(plan)
            best_mem = mem
    pareto = [estimate(model, cluster, workload, p) for p in pareto_plans]
    if "schedules" not in (pins_in or {}):
        pins.pop("schedules", None)  # the engine's schedules are not the user's pins
    return SearchResult(top, pareto, considered, evaluated, rejected,
                        time.perf_counter() - t0, pins, fitting, simulated,
                        engine=engine, closest=None if top else closest,
                        partial_considered=walk.partial_considered)


def _rerank(model, cluster, workload, fits, k, rejected, engine=None):
    """Re-rank the best ``k`` plans of the closed-form screen by simulating their pipeline
    schedule (meshplan.pipeline). For each of them the schedules the screen treated as
    dominated (1F1B, interleaved 1F1B) are simulated too, so the simulator, not the closed
    form, decides between them. Plans whose schedule cannot run are dropped and counted."""
    from ..pipeline.from_cost import RERANK_MAX_STAGE_MICROBATCHES, rerank, simulated_size

    head, tail = fits[:k], fits[k:]
    plans = [p for _, _, p in head]
    seen = set(plans)
    for p in list(plans):
        alt = {"zb_h1": "1f1b", "interleaved_zb": "interleaved_1f1b"}.get(p.schedule)
        if alt and p.with_(schedule=alt) not in seen and (
                engine is None or not plan_violations(engine, p.with_(schedule=alt), model,
                                                      workload)):
            seen.add(p.with_(schedule=alt))
            plans.append(p.with_(schedule=alt))
    ests = []
    for p in plans:
        try:
            ests.append(estimate(model, cluster, workload, p))
        except InputError:
            continue
    # a pipeline too long to simulate keeps its closed form (from_cost.py)
    short, long = [], []
    for e in ests:
        (long if simulated_size(e) > RERANK_MAX_STAGE_MICROBATCHES else short).append(e)
    sims, _ = rerank(short)
    # memory as the tables show it (closed form), so the Pareto front reads consistently
    ranked = sorted([(s.step_time_s, s.estimate.peak_memory_bytes, s.plan)
                     for s in sims if s.fits]
                    + [(e.step_time_s, e.peak_memory_bytes, e.plan) for e in long if e.fits],
                    key=lambda x: x[0])
    # plans of the screen's head that the simulation drops move from kept to rejected (the
    # added 1F1B variants were already counted under the dominated schedules)
    kept = {p for _, _, p in ranked}
    ok = {s.plan for s in sims} | {e.plan for e in long}
    lost = 0
    for _, _, p in head:
        if p not in kept:
            lost += 1
            rejected[NOT_FIT + " (simulated activations)" if p in ok
                     else "schedule cannot run for this micro-batch count"] += 1
    return ranked + tail, {s.plan: s for s in sims}, lost


def explain(winner: Estimate, other: Estimate) -> str:
    """Why ``winner`` beats ``other``: the parts of the step that differ most."""
    diff = {k: other.step_time.parts.get(k, 0.0) - v for k, v in winner.step_time.parts.items()}
    gain = other.step_time_s - winner.step_time_s
    if gain < 0:
        return (f"{-gain:.2f} s slower by the closed forms than {other.plan.describe()}; "
                "the simulated pipeline ranks it first")
    items = sorted(((v, k) for k, v in diff.items() if abs(v) > 0.01 * other.step_time_s),
                   reverse=True)
    if not items:
        return f"{gain * 1e3:.0f} ms faster per step (small differences spread over the step)"
    words = []
    for v, k in items[:3]:
        name = k.removesuffix("_s").replace("_", " ")
        words.append(f"{'less' if v > 0 else 'more'} {name} ({-v:+.2f} s)")
    return f"{gain:.2f} s faster per step than {other.plan.describe()}: " + ", ".join(words)
