"""Plans across pools of different GPUs: what one step costs.

Two ways to spread one job over pools (specs/pools.py), each built from the unchanged
homogeneous cost model (``estimate``) run once per GPU type:

- **pipeline across pools** (Metis, HexiScale): pipeline stages sit on different pools, each
  stage a block of tp*cp*dp GPUs of one type, layers split unevenly (``UnevenPlan.split``).
  Every stage's per-micro-batch cost comes from ``estimate`` of the same plan on a cluster
  of that stage's GPU type; the stages go through the event simulator
  (``pipeline/simulate.py``, which takes per-stage times); a boundary between two pools
  sends activations over the link between those two pools (the inter-pool link given, else
  the slower of the two pools' NICs). Memory is judged per stage against that
  stage's GPU. Data-parallel gradient reduction stays inside a stage, hence inside a pool.
- **data parallel across pools** (Cephalo, Whale): every pool runs replicas of the same
  tp/pp/cp layout; the global batch is split by speed (``batch_per_replica`` per pool); the
  step waits for the slowest pool, then the gradients are all-reduced across pools over the
  link between the pools used (given, else their slowest NIC): a ring over the pools, each
  GPU's reduce-scattered shard, not overlapped (a stated simplification; Cephalo overlaps
  part of it).

Step time parts sum to the total, as everywhere: the pipeline's (simulated) work and
bubble, then the slowest pool's parts outside the pipeline, then the cross-pool reduction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..errors import InputError
from ..plan import Plan
from ..specs.hardware import Cluster, gib_text
from ..specs.model import ModelSpec
from ..specs.pools import PoolCluster
from ..specs.workload import Workload
from .memory import OUTSIDE_ALLOCATOR
from .flops import model_flops_per_token
from .step import OUTSIDE_PIPELINE, Estimate, estimate

GiB = 2**30
GRAD_BYTES = 4.0  # fp32 gradient reduction, as cost/step.py's data-parallel model


@dataclass(frozen=True)
class UnevenPlan(Plan):
    """A Plan whose pipeline stages hold the given numbers of layers (vpp 1)."""

    split: tuple[int, ...] = ()

    def layer_split(self, model: ModelSpec) -> list[int]:
        if not self.split:
            return super().layer_split(model)
        if len(self.split) != self.num_chunks or sum(self.split) != model.layers \
                or min(self.split) < 0:
            raise InputError("split", self.split, f"{self.num_chunks} stage layer counts "
                             f"summing to the model's {model.layers} layers")
        return list(self.split)

    def describe(self) -> str:
        base = super().describe()
        return base + (" layers " + "/".join(map(str, self.split)) if self.split else "")


@dataclass
class StageFigure:
    """One pipeline stage (or one pool's replicas) on its GPUs."""

    pool: str
    layers: int
    gpus: int
    memory_parts: dict  # bytes, summing to the stage's peak per GPU
    capacity_bytes: float
    busy_s: float = 0.0  # compute time of this stage in the step

    @property
    def memory_bytes(self) -> float:
        return sum(self.memory_parts.values())

    @property
    def fits(self) -> bool:
        return self.memory_bytes <= self.capacity_bytes

    @property
    def verdict(self) -> str:
        need = self.memory_bytes / GiB
        return (f"{'fits' if self.fits else 'does not fit'}: needs {need:.1f} GiB per "
                f"{self.pool}, the GPU has {gib_text(self.capacity_bytes)} GiB")


@dataclass
class PoolPlan:
    """A plan on a cluster of pools; same reading as ``Estimate`` where it can be."""

    kind: str  # "single" (one pool alone), "pipeline" (stages across pools), "data"
    plan: Plan  # the degrees and knobs (an UnevenPlan for "pipeline")
    step_parts: dict  # seconds, summing to step_time_s
    tokens_per_step: int
    model_flops_per_step: float
    gpus_by_pool: dict  # pool GPU name -> GPUs used
    peak_flops_sum: float  # 16-bit dense peak of every GPU used (MFU denominator)
    stages: list[StageFigure]
    rank_map: list  # (first rank, last rank, pool name): which ranks are which GPUs
    usd_per_hour: float
    detail: str = ""  # how the work is split across pools, in words
    estimate: Estimate | None = None  # the homogeneous estimate of a "single" plan
    notes: list = field(default_factory=list)
    pool_step_s: dict = field(default_factory=dict)  # "data": pool index -> its own step
    pool_comm: dict = field(default_factory=dict)  # pool name -> [CommAxis] of its estimate

    @property
    def step_time_s(self) -> float:
        return sum(self.step_parts.values())

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def num_gpus(self) -> int:
        return sum(self.gpus_by_pool.values())

    @property
    def mfu(self) -> float:
        return self.model_flops_per_step / (self.step_time_s * self.peak_flops_sum)

    @property
    def fits(self) -> bool:
        return all(s.fits for s in self.stages)

    def describe(self) -> str:
        return f"{self.plan.describe()} [{self.detail}]" if self.detail else self.plan.describe()


def pool_cluster_for(pc: PoolCluster, k: int, world: int) -> Cluster:
    """A homogeneous cluster of pool ``k``'s GPU with ``world`` ranks: the per-GPU-type view
    ``estimate`` needs (same NVLink domain and NIC; a world that leaves the last node partly
    filled is laid out on nodes of gcd(world, node size), which keeps every tensor-parallel
    group inside one node as before)."""
    c = pc.pools[k].cluster
    gpn = c.gpus_per_node
    if world > gpn and world % gpn:  # a partly filled last node: nodes of gcd(world, gpn)
        gpn = math.gcd(world, gpn)
    return Cluster(c.gpu, world, gpn, c.nic_bytes_per_s, c.scaleup_domain)


def _sim_memory(parts: dict, peak_act_bytes: float) -> dict:
    """The estimate's memory parts with activations replaced by the simulated peak (the
    allocator share rescaled), as pipeline/from_cost.simulate_estimate does."""
    p = dict(parts)
    if "activations" in p:
        old = p["activations"]
        alloc_old = sum(v for k, v in p.items()
                        if k != "allocator_fragmentation" and k not in OUTSIDE_ALLOCATOR)
        p["activations"] = peak_act_bytes
        if "allocator_fragmentation" in p and alloc_old > 0:
            p["allocator_fragmentation"] *= (alloc_old - old + peak_act_bytes) / alloc_old
    return p


def pool_estimates(model, pc: PoolCluster, workload, plan: Plan, pools: set[int]) -> dict:
    return {k: estimate(model, pool_cluster_for(pc, k, plan.world_size), workload, plan)
            for k in sorted(pools)}


def pipeline_across_pools(model: ModelSpec, pc: PoolCluster, workload: Workload,
                          plan: UnevenPlan, stage_pools: tuple[int, ...],
                          ests: dict | None = None) -> PoolPlan:
    """Simulate one step of ``plan`` whose stage r runs on pool ``stage_pools[r]``."""
    from ..pipeline.from_cost import _pipeline_parts, from_estimate
    from ..pipeline.schedules import schedule_for_plan
    from ..pipeline.simulate import simulate

    if plan.vpp != 1 or len(stage_pools) != plan.pp:
        raise InputError("plan", plan.describe(), "pipelines across pools take vpp 1 and one "
                         "pool per stage")
    ests = ests or pool_estimates(model, pc, workload, plan, set(stage_pools))
    times = {k: from_estimate(e) for k, e in ests.items()}
    any_est = next(iter(ests.values()))
    m = any_est.num_microbatches
    chunks = []
    for r, k in enumerate(stage_pools):
        ct = times[k][r]
        if r + 1 < plan.pp and stage_pools[r + 1] != k:  # the activation leaves the pool
            c = ests[k].chunks[r]
            link = (c.p2p_bytes / pc.link_bytes_per_s((k, stage_pools[r + 1]))
                    + pc.inter_pool_latency_s)
            ct = replace(ct, p2p_s=max(ct.p2p_s, link))
        chunks.append(ct)
    sim = simulate(schedule_for_plan(plan, m), chunks, record=False)
    parts = _pipeline_parts(sim)
    slowest = max(ests, key=lambda k: sum(ests[k].step_time.parts.get(x, 0.0)
                                          for x in OUTSIDE_PIPELINE))
    for x in OUTSIDE_PIPELINE:
        parts[x] = ests[slowest].step_time.parts.get(x, 0.0)
    g = plan.dp * plan.tp * plan.cp
    stages, rank_map, gpus = [], [], {}
    for r, k in enumerate(stage_pools):
        pool = pc.pools[k]
        mem = _sim_memory(ests[k].memory[r].parts, sim.ranks[r].peak_act_bytes)
        stages.append(StageFigure(pool.name, plan.split[r], g, mem, pool.gpu.memory_bytes,
                                  sim.ranks[r].busy_s))
        if rank_map and rank_map[-1][2] == pool.name:
            rank_map[-1] = (rank_map[-1][0], (r + 1) * g - 1, pool.name)
        else:
            rank_map.append((r * g, (r + 1) * g - 1, pool.name))
        gpus[pool.name] = gpus.get(pool.name, 0) + g
    peak = sum(n * pc.pools[_index(pc, name)].gpu.flops("bf16") for name, n in gpus.items())
    usd = sum(n * pc.pools[_index(pc, name)].price.usd_per_gpu_hour for name, n in gpus.items())
    detail = "pipeline across pools: " + ", ".join(
        f"stages {a // g}-{b // g} on {name}" for a, b, name in rank_map)
    return PoolPlan("pipeline", plan, parts, any_est.tokens_per_step,
                    any_est.model_flops_per_step, gpus, peak, stages, rank_map, usd, detail,
                    pool_comm={pc.pools[k].name: e.comm for k, e in ests.items()})


def _index(pc: PoolCluster, name: str) -> int:
    return next(i for i, p in enumerate(pc.pools) if p.name == name)


def data_across_pools(model: ModelSpec, pc: PoolCluster, workload: Workload, plan: Plan,
                      replicas: dict[int, int], batch_per_replica: dict[int, int],
                      simulate_pipeline: bool = True) -> PoolPlan:
    """Replicas of one tp/pp/cp layout on several pools; pool k runs ``replicas[k]``
    replicas of ``batch_per_replica[k]`` sequences each (micro-batches of plan.micro_batch)."""
    from ..pipeline.from_cost import simulate_estimate

    g = plan.tp * plan.pp * plan.cp
    total = sum(replicas[k] * batch_per_replica[k] for k in replicas)
    if total != workload.global_batch:
        raise InputError("global_batch", workload.global_batch,
                         f"the pools' replicas hold {total} sequences")
    per_pool, stages, rank_map, gpus = {}, [], [], {}
    first = 0
    for k in sorted(replicas):
        pool = pc.pools[k]
        n = replicas[k] * g
        wk = replace(workload, global_batch=replicas[k] * batch_per_replica[k])
        pk = plan.with_(dp=replicas[k])
        e = estimate(model, pool_cluster_for(pc, k, n), wk, pk)
        if simulate_pipeline and pk.pp > 1:
            s = simulate_estimate(e, record=False)
            step, mems = s.step_time_s, s.memory_parts
            parts = dict(s.step_parts)
        else:
            step, mems, parts = e.step_time_s, [m.parts for m in e.memory], dict(e.step_time.parts)
        per_pool[k] = (step, parts, e)
        split = e.plan.layer_split(model)
        for r, mp in enumerate(mems):
            layers = sum(split[e.plan.chunk_of(r, j)] for j in range(e.plan.vpp))
            stages.append(StageFigure(pool.name, layers, n // plan.pp, mp, pool.gpu.memory_bytes))
        rank_map.append((first, first + n - 1, pool.name))
        first += n
        gpus[pool.name] = n
    slow = max(per_pool, key=lambda k: per_pool[k][0])
    parts = dict(per_pool[slow][1])
    # cross-pool all-reduce of each GPU's gradient shard: the smallest pool's GPUs hold the
    # largest shard (params / (tp*pp) over its data-parallel group when ZeRO shards them)
    shard = 1 if plan.zero == 0 else min(replicas.values()) * plan.cp
    params = model.total_params() / (plan.tp * plan.pp)
    n_pools = len(replicas)
    cross = (2 * (n_pools - 1) / n_pools * GRAD_BYTES * params / shard
             / pc.link_bytes_per_s(replicas)
             + 2 * (n_pools - 1) * pc.inter_pool_latency_s)
    parts["cross_pool_reduce_s"] = cross
    peak = sum(n * pc.pools[_index(pc, name)].gpu.flops("bf16") for name, n in gpus.items())
    usd = sum(n * pc.pools[_index(pc, name)].price.usd_per_gpu_hour for name, n in gpus.items())
    tokens = workload.tokens_per_step
    mf = model_flops_per_token(model, workload.seq_len) * tokens
    detail = "data parallel across pools: " + ", ".join(
        f"{replicas[k]}x {batch_per_replica[k]} seq on {pc.pools[k].name} "
        f"({per_pool[k][0]:.2f} s)" for k in sorted(replicas))
    # each pool's replicas take a contiguous block of ranks: data parallel outermost
    whole = plan.with_(dp=sum(replicas.values()), order="tp-cp-pp-dp")
    return PoolPlan("data", whole, parts, tokens, mf, gpus,
                    peak, stages, rank_map, usd, detail,
                    pool_step_s={k: v[0] for k, v in per_pool.items()},
                    pool_comm={pc.pools[k].name: v[2].comm for k, v in per_pool.items()})


def single_pool(pc: PoolCluster, k: int, est: Estimate, sim=None) -> PoolPlan:
    """A plan on pool ``k`` alone (the homogeneous path's estimate, or its simulation)."""
    pool = pc.pools[k]
    parts = dict(sim.step_parts) if sim is not None else dict(est.step_time.parts)
    mems = sim.memory_parts if sim is not None else [m.parts for m in est.memory]
    g = est.world_size // est.plan.pp
    stages = [StageFigure(pool.name, 0, g, mp, pool.gpu.memory_bytes) for mp in mems]
    n = est.world_size
    return PoolPlan("single", est.plan, parts, est.tokens_per_step, est.model_flops_per_step,
                    {pool.name: n}, n * pool.gpu.flops("bf16"), stages,
                    [(0, n - 1, pool.name)], n * pool.price.usd_per_gpu_hour,
                    f"{pool.name} only", est, pool_comm={pool.name: est.comm})
