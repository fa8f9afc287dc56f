"""Bridge between the cost model (``meshplan.cost.estimate``) and the event simulator.

``from_estimate`` turns ``Estimate.chunks`` (one ``ChunkCost`` per virtual stage) into the
simulator's ``ChunkTimes``; ``simulate_plan`` estimates a plan, simulates its pipeline step
and returns a ``PlanSimulation`` whose step time and memory replace the estimate's
closed-form pipeline parts with the simulated ones:

- step time = the simulated pipeline (compute, exposed TP/CP/EP inside the actions, the
  bubble of the real schedule, point-to-point waits) + the estimate's parts outside the
  pipeline (``dp_exposed_s``, ``optimizer_s``, ``overlap_slowdown_s``, ``straggler_s``);
- memory per pipeline rank = the estimate's parts with ``activations`` replaced by the
  simulated peak of stashed activations (and the allocator share rescaled).

Contract with ``meshplan/cost/step.py``: ``ChunkCost.fwd_s`` and ``.bwd_input_s`` each
include one point-to-point transfer ``p2p_s`` (the closed form then charges it in line, or
only what the next chunk does not hide where the engine overlaps it: cost/engine_p2p.py);
the simulator puts transfers on links instead, so the adapter takes them back out
(``P2P_FOLDED_INTO_COMPUTE``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cost.memory import refragment
from ..cost.step import OUTSIDE_PIPELINE
from ..plan import Plan
from .schedules import no_gc, schedule_for_plan
from .simulate import ChunkTimes, SimResult, simulate

P2P_FOLDED_INTO_COMPUTE = True


def from_estimate(est, plan: Plan | None = None) -> list[ChunkTimes]:
    """``ChunkTimes`` per virtual stage from an ``Estimate`` (its ``chunks`` field)."""
    plan = plan or est.plan
    out = []
    for c in sorted(est.chunks, key=lambda c: c.index):
        p2p = c.p2p_s if plan.pp > 1 else 0.0
        fold = p2p if P2P_FOLDED_INTO_COMPUTE else 0.0
        out.append(ChunkTimes(
            fwd_s=max(0.0, c.fwd_s - fold), bwd_input_s=max(0.0, c.bwd_input_s - fold),
            bwd_weight_s=c.bwd_weight_s, act_bytes=c.act_bytes, p2p_s=p2p,
            a2a_fwd_s=getattr(c, "a2a_fwd_s", 0.0), a2a_bwd_s=getattr(c, "a2a_bwd_s", 0.0)))
    assert len(out) == plan.num_chunks, (len(out), plan.num_chunks)
    return out


@dataclass
class PlanSimulation:
    """An estimate whose pipeline part was simulated; same reading as ``Estimate``."""

    estimate: object  # meshplan.cost.Estimate
    sim: SimResult
    step_parts: dict[str, float]  # seconds, summing to step_time_s
    memory_parts: list[dict[str, float]]  # bytes per pipeline rank

    @property
    def plan(self) -> Plan:
        return self.estimate.plan

    @property
    def step_time_s(self) -> float:
        return sum(self.step_parts.values())

    @property
    def tokens_per_s_per_gpu(self) -> float:
        e = self.estimate
        return e.tokens_per_step / self.step_time_s / e.world_size

    @property
    def mfu(self) -> float:
        e = self.estimate
        return e.model_flops_per_step / (self.step_time_s * e.world_size * e.peak_flops_per_gpu)

    @property
    def peak_memory_bytes(self) -> float:
        return max(sum(p.values()) for p in self.memory_parts)

    @property
    def fits(self) -> bool:
        return self.peak_memory_bytes <= self.estimate.capacity_bytes

    @property
    def closed_form_bubble_s(self) -> float:
        return self.estimate.step_time.parts.get("pp_bubble_s", 0.0)


def _pipeline_parts(sim: SimResult) -> dict[str, float]:
    """The rank whose compute ends last: its work and its waiting (``pp_bubble_s``: the
    schedule's bubble plus waiting on transfers, which the closed form calls ``pp_p2p_s``),
    summing to the pipeline's makespan."""
    r = max(sim.ranks, key=lambda x: x.compute_end_s)
    return {"pipeline_work_s": r.busy_s, "pp_bubble_s": r.compute_end_s - r.busy_s}


def simulate_estimate(est, *, overlap_p2p: bool | None = None,
                      record: bool = True) -> PlanSimulation:
    """Simulate the pipeline of an existing ``Estimate``. ``overlap_p2p``: whether compute
    runs on while a stage transfer is on the wire; by default as the estimate's engine runs
    its schedule (``Estimate.overlaps_p2p``, cost/engine_p2p.p2p_overlapped: torch's
    Schedule1F1B, Megatron's 1F1B and DeepSpeed wait for each transfer)."""
    plan = est.plan
    if overlap_p2p is None:
        overlap_p2p = est.overlaps_p2p
    sched = schedule_for_plan(plan, est.num_microbatches)
    sim = simulate(sched, from_estimate(est, plan), overlap_p2p=overlap_p2p, record=record)
    parts = _pipeline_parts(sim)
    for k in OUTSIDE_PIPELINE:
        parts[k] = est.step_time.parts.get(k, 0.0)
    mem = []
    for r, b in enumerate(est.memory):
        p = dict(b.parts)
        if "activations" in p:
            p["activations"] = sim.ranks[r].peak_act_bytes
            if "allocator_fragmentation" in p:
                # the allocator's cache of the simulated activations, from the uncapped share
                # (shifting the closed form's capped cache went below zero: -0.27 GiB on
                # qwen3-235b-a22b, 512 x H800, dp8 tp4 pp8 vpp2 cp2 ep8 dualpipev)
                refragment(p, est.contiguous_states, est.capacity_bytes)
        mem.append(p)
    return PlanSimulation(est, sim, parts, mem)


def simulate_plan(model, cluster, workload, plan: Plan, *, overlap_p2p: bool | None = None,
                  record: bool = True) -> PlanSimulation:
    """``meshplan.cost.estimate`` then the event simulation of its pipeline (for re-ranking
    the search's best candidates: pass ``record=False`` there)."""
    from ..cost import estimate  # the cost model is a user of nothing here; import late

    return simulate_estimate(estimate(model, cluster, workload, plan),
                             overlap_p2p=overlap_p2p, record=record)


# The largest pipeline the search's re-rank simulates, in (virtual stage, micro-batch) pairs:
# bench/bench_simulate.py's case, 128 virtual stages x 1,024 micro-batches, one simulated
# step in about 1 s on the development machine (its target). Beyond it a plan keeps its
# closed-form step time: its bubble share is then at most (stages - 1) / micro-batches of a
# pipeline that long, and a re-rank of 50 such plans would take minutes (a global batch of
# 10^6 sequences on 8 GPUs did not finish, and at 10^12 ran out of memory).
RERANK_MAX_STAGE_MICROBATCHES = 128 * 1024


def simulated_size(est) -> int:
    """(virtual stage, micro-batch) pairs the event simulation of ``est`` walks."""
    return est.plan.pp * max(1, est.plan.vpp) * est.num_microbatches


def rerank(estimates, *, overlap_p2p: bool | None = None) -> tuple[list[PlanSimulation], dict[str, int]]:
    """Simulate the search's best candidates and order them by simulated step time (plans
    that still fit first). A candidate whose schedule the runtime cannot build (e.g.
    interleaving with a micro-batch count that is not a multiple of max(1, m // pp)) is
    dropped and counted by reason, as the search counts its rejections."""
    from ..errors import InputError

    sims: list[PlanSimulation] = []
    dropped: dict[str, int] = {}
    with no_gc():  # (as simulate() does, across the candidates and their schedules)
        for est in estimates:
            try:
                sims.append(simulate_estimate(est, overlap_p2p=overlap_p2p, record=False))
            except InputError as e:
                key = f"schedule cannot run: {e.field} ({e.allowed})"
                dropped[key] = dropped.get(key, 0) + 1
    sims.sort(key=lambda s: (not s.fits, s.step_time_s))
    return sims, dropped
