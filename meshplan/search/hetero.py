"""Search plans on a cluster of pools: each pool alone, pipelines across pools, data
parallelism across pools; rank by the objective (throughput, cost or time) under the
constraints.

- **Each pool alone** runs the unchanged homogeneous search (``search.search``): leaving a
  pool out is always a candidate, so adding a slower pool never lowers the best throughput.
- **Pipeline across pools**: for each order of two or more pools, tensor / context / data
  degrees, stages per pool (all that fit, or half), micro-batch and the recompute / ZeRO
  ladder, the layer split is searched: per-layer time of each GPU type from ``estimate``,
  then the integer split that minimises the slowest stage under each stage's memory cap
  (stages that do not fit lose layers until they do), then the event simulator times the
  step. The best ``rerank_k`` by the closed form (slowest stage x micro-batches + fill) are
  simulated with 1F1B and ZB-H1.
- **Data parallel across pools**: each pool runs replicas of the best single-pool layout
  that all pools can hold; the batch is split by speed; gradients cross pools once per step.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field

from ..cost.hetero import (PoolPlan, UnevenPlan, data_across_pools, pipeline_across_pools,
                           pool_estimates, single_pool)
from ..errors import InputError
from ..pipeline.schedules import rounds_fit
from ..specs.model import ModelSpec
from ..specs.pools import PoolCluster
from ..specs.workload import Workload
from .objective import Goal, Outcome
from .search import search
from .space import cp_choices, divisors, micro_batch_choices, tp_choices

LADDER = [(rc, z) for rc in ("none", "selective", "full") for z in (1, 2, 3)]
SCHEDULES = ("1f1b", "zb_h1")
MAX_SPLIT_ROUNDS = 4
BOUNDED = ("bounded (even a perfectly balanced split is slower than the best pipelines "
           "across pools found)")


@dataclass
class PoolSearchResult:
    ranked: list[PoolPlan]  # best first under the goal (those meeting the constraints first)
    goal: Goal
    considered: int
    simulated: int
    rejected: Counter
    elapsed_s: float
    singles: dict = field(default_factory=dict)  # pool name -> SearchResult of that pool alone

    @property
    def best(self) -> PoolPlan | None:
        return self.ranked[0] if self.ranked else None


def outcome_of(p: PoolPlan, goal: Goal) -> Outcome:
    return Outcome(p.tokens_per_s, p.usd_per_hour, p.num_gpus, goal.train_tokens)


# ---- the layer split -----------------------------------------------------------------
def _stage_times(ests: dict, stage_pools, split):
    """Per stage: (time per layer, fixed time) on its pool, read from the estimates of the
    current split (linear in the stage's layers)."""
    out = []
    n_mid = [r for r in range(len(split)) if 0 < r < len(split) - 1 and split[r]]
    per_layer_of: dict = {}
    for r, k in enumerate(stage_pools):
        chunks = ests[k].chunks
        if k not in per_layer_of:
            rs = n_mid or list(range(len(split)))
            per_layer_of[k] = sum(_t(chunks[x]) for x in rs) / max(1, sum(split[x] for x in rs))
        per_layer = per_layer_of[k]
        out.append((per_layer, max(0.0, _t(chunks[r]) - per_layer * split[r])))
    return out


def _stage_memories(ests: dict, stage_pools, split):
    """Per stage: (memory per layer, fixed memory, total) on its pool (linear in the
    stage's layers)."""
    out = []
    for r, k in enumerate(stage_pools):
        mem = _stage_memory(ests[k], r)
        scaling = sum(v for n, v in mem.parts.items() if n in (
            "weights", "gradients", "optimizer_states", "activations"))
        per_mem = scaling / split[r] if split[r] else 0.0
        out.append((per_mem, mem.total - scaling, mem.total))
    return out


def _stage_memory(est, r):
    """Memory of pipeline rank ``r`` (computed for that rank only)."""
    return est.peak_candidates.get(r) or est.rank_memory(r)


def _t(c) -> float:
    return c.fwd_s + c.bwd_input_s + c.bwd_weight_s


def min_max_split(layers: int, costs, caps) -> tuple[int, ...] | None:
    """Integer layers per stage (each >= 1, at most its cap) minimising the slowest stage's
    time fixed + n * per_layer; None when the caps hold fewer than ``layers``."""
    if sum(caps) < layers or min(caps) < 1:
        return None
    lo = 0.0
    hi = max(f + c * layers for (c, f, *_), cap in zip(costs, caps))

    def fill(T):
        return [min(cap, max(1, int((T - f) / c))) if c > 0 else cap
                for (c, f, *_), cap in zip(costs, caps)]

    for _ in range(24):  # 2^-24 of the range: far below one layer's time
        mid = (lo + hi) / 2
        if sum(fill(mid)) >= layers:
            hi = mid
        else:
            lo = mid
    n = fill(hi)
    while sum(n) > layers:  # take the surplus from the slowest stages
        r = max((i for i in range(len(n)) if n[i] > 1),
                key=lambda i: costs[i][1] + costs[i][0] * n[i])
        n[r] -= 1
    return tuple(n)


def search_split(model, pc, workload, plan, stage_pools, rejected, bound_s=float("inf"),
                 per_layer: dict | None = None):
    """The best uneven split for ``plan`` on ``stage_pools`` (with its estimates), or None.
    Gives up (counted as bounded) when even a perfectly balanced split of the first round's
    per-layer times, with no pipeline fill, is slower than ``bound_s``."""
    split = tuple(plan.layer_split(model))
    up = UnevenPlan(**{**_fields(plan), "split": split})
    caps = [model.layers] * plan.pp
    per_layer = {} if per_layer is None else per_layer
    key = (plan.tp, plan.cp, plan.micro_batch, plan.recompute)
    m = workload.global_batch // (plan.dp * plan.micro_batch)
    known = [per_layer.get((k,) + key) for k in stage_pools]
    if all(known) and m * model.layers / sum(1.0 / a for a in known) > bound_s:
        rejected[BOUNDED] += 1
        return BOUNDED
    for _ in range(MAX_SPLIT_ROUNDS):
        try:
            ests = pool_estimates(model, pc, workload, up, set(stage_pools))
        except InputError as e:
            rejected[f"invalid: {e.field} ({e.allowed})"] += 1
            return None
        times = _stage_times(ests, stage_pools, up.split)
        for k, c in zip(stage_pools, times):
            per_layer.setdefault((k,) + key, c[0])
        if m * model.layers / sum(1.0 / c[0] for c in times) > bound_s:
            rejected[BOUNDED] += 1
            return BOUNDED
        mems = _stage_memories(ests, stage_pools, up.split)  # only for splits worth it
        costs = [t + mm[:2] for t, mm in zip(times, mems)]
        over = False
        for r, k in enumerate(stage_pools):
            cap_bytes = pc.pools[k].gpu.memory_bytes
            per_mem, fixed_mem, total = mems[r]
            if per_mem > 0:
                caps[r] = min(caps[r], int((cap_bytes - fixed_mem) / per_mem))
            if total > cap_bytes:
                over = True
                caps[r] = min(caps[r], up.split[r] - 1)
        new = min_max_split(model.layers, costs, caps)
        if new is None:
            rejected["does not fit in GPU memory (no layer split fits every stage)"] += 1
            return None
        if new == up.split and not over:
            return up, ests
        up = up.with_(split=new)
    try:  # the last split proposed: estimate it, keep it only if every stage fits
        ests = pool_estimates(model, pc, workload, up, set(stage_pools))
    except InputError as e:
        rejected[f"invalid: {e.field} ({e.allowed})"] += 1
        return None
    ok = all(_stage_memory(ests[k], r).total <= pc.pools[k].gpu.memory_bytes
             for r, k in enumerate(stage_pools))
    if not ok:
        rejected["does not fit in GPU memory (no layer split fits every stage)"] += 1
        return None
    return up, ests


def _fields(plan) -> dict:
    return {f: getattr(plan, f) for f in plan.__dataclass_fields__ if f != "split"}


def _closed_form_s(ests, stage_pools, m) -> float:
    """1F1B's slowest stage x (m - 1) + every stage once: a screen for the simulator."""
    t = [_t(ests[k].chunks[r]) for r, k in enumerate(stage_pools)]
    return (m - 1) * max(t) + sum(t)


# ---- the candidates ------------------------------------------------------------------
def _pipeline_candidates(model, pc, workload, order, goal):
    """(plan, stage_pools) for pipelines over the pools in ``order`` (each used)."""
    sizes = [pc.pools[k].num_gpus for k in order]
    doms = [pc.pools[k].cluster for k in order]
    smallest = min(doms, key=lambda c: c.domain_size)
    for tp in tp_choices(model, smallest, {}):
        for cp in [c for c in cp_choices(workload, {}) if c <= 4]:
            for dp in divisors(workload.global_batch):
                g = tp * cp * dp
                if g > min(sizes):
                    break
                full = [n // g for n in sizes]
                options = [sorted({s, max(1, s // 2)}) for s in full]
                for stages in itertools.product(*options):
                    pp = sum(stages)
                    if pp < 2 or pp > model.layers:
                        continue
                    if goal.max_gpus and pp * g > goal.max_gpus:
                        continue
                    for mb in micro_batch_choices(workload, dp, {}):
                        if mb > 2 or workload.global_batch // (dp * mb) < pp:
                            continue
                        stage_pools = tuple(k for k, s in zip(order, stages) for _ in range(s))
                        yield (_uneven(dp, tp, pp, cp, mb), stage_pools)


def screened_kth(screened, k) -> float:
    """The closed-form step time a candidate must beat to enter the re-ranked few."""
    return -screened[0][0] if len(screened) >= k else float("inf")


def _uneven(dp, tp, pp, cp, mb) -> UnevenPlan:
    return UnevenPlan(dp=dp, tp=tp, pp=pp, cp=cp, micro_batch=mb, tp_comm_overlap=tp > 1)


def search_pools(model: ModelSpec, pc: PoolCluster, workload: Workload, goal: Goal | None = None,
                 top_k: int = 5, rerank_k: int = 8, single_rerank_k: int = 5,
                 schedules: tuple[str, ...] | None = None,
                 zeros: tuple[int, ...] | None = None) -> PoolSearchResult:
    """``schedules`` / ``zeros``: the pipeline schedules and ZeRO stages allowed (an
    engine's, for --export)."""
    goal = goal or Goal()
    pins = {"schedules": tuple(schedules)} if schedules else {}
    ladder = [(rc, z) for rc, z in LADDER if not zeros or z in zeros]
    t0 = time.perf_counter()
    rejected: Counter = Counter()
    cands: list[PoolPlan] = []
    singles = {}
    considered = simulated = 0
    # 1. each pool alone: the homogeneous search, unchanged
    for k, pool in enumerate(pc.pools):
        r = search(model, pool.cluster, workload, pins, top_k=1, rerank_k=single_rerank_k,
                   simulate=single_rerank_k > 0)
        singles[pool.name] = r
        considered += r.considered
        # its rejections are listed too (they were counted in `considered`, never shown)
        for why, n in r.rejected.items():
            rejected[f"{pool.name} alone: {why}"] += n
        if r.best is not None:
            cands.append(single_pool(pc, k, r.best, r.simulated.get(r.best.plan)))
    # 2. pipelines across pools
    screened: list = []  # max-heap (negated) of the rerank_k best by the closed form
    screened_all: list = []
    per_layer: dict = {}  # (pool, tp, cp, micro-batch, recompute) -> seconds per layer
    for size in range(2, len(pc.pools) + 1):
        for order in itertools.permutations(range(len(pc.pools)), size):
            for plan, stage_pools in _pipeline_candidates(model, pc, workload, order, goal):
                for i, (rc, z) in enumerate(ladder):
                    considered += 1
                    bound = screened_kth(screened, rerank_k)
                    got = search_split(model, pc, workload, plan.with_(recompute=rc, zero=z),
                                       stage_pools, rejected, bound, per_layer)
                    if got is BOUNDED:  # more recomputation or sharding is no faster
                        considered += len(ladder) - i - 1
                        rejected[BOUNDED] += len(ladder) - i - 1
                        break
                    if got is None:
                        continue
                    up, ests = got
                    m = next(iter(ests.values())).num_microbatches
                    cf = _closed_form_s(ests, stage_pools, m)
                    heapq.heappush(screened, (-cf, len(screened_all), up, stage_pools, ests))
                    screened_all.append(cf)
                    if len(screened) > rerank_k:
                        heapq.heappop(screened)
                    break  # less recomputation / a lower ZeRO stage already fits
    for _, _, up, stage_pools, ests in sorted(screened, key=lambda x: -x[0]):
        for sched in SCHEDULES:
            if schedules and sched not in schedules:
                continue
            p = up.with_(schedule=sched)
            m = next(iter(ests.values())).num_microbatches
            if not rounds_fit(sched, p.pp, m):
                continue
            e2 = ests if sched == up.schedule else pool_estimates(
                model, pc, workload, p, set(stage_pools))
            try:
                cands.append(pipeline_across_pools(model, pc, workload, p, stage_pools, e2))
                simulated += 1
            except InputError as e:
                rejected[f"schedule cannot run: {e.field} ({e.allowed})"] += 1
    # 3. data parallel across pools: the layout of the best single-pool plan that every
    # pool can run, replicas on each pool, the batch split by speed
    cands += _data_candidates(model, pc, workload, singles, rejected)
    fitting = [c for c in cands if c.fits]
    rejected["does not fit in GPU memory (simulated)"] += len(cands) - len(fitting)

    def rank(c: PoolPlan):
        o = outcome_of(c, goal)
        return (not o.meets(goal)[0], o.key(goal))

    fitting.sort(key=rank)
    return PoolSearchResult(fitting[:max(top_k, 1)], goal, considered, simulated, rejected,
                            time.perf_counter() - t0, singles)


def _data_candidates(model, pc, workload, singles, rejected) -> list[PoolPlan]:
    if len(pc.pools) < 2:
        return []
    out, seen = [], set()
    layouts = []
    for r in singles.values():
        if r.best is not None and r.best.plan not in layouts:
            layouts.append(r.best.plan)
    # pools' bests that differ only in dp (dp8 tp2 on 16 H100, dp16 tp2 on 32 A100) give the
    # same plan across pools: kept once, by the final plan (its degrees and batch split)
    for base in layouts:
        g = base.tp * base.pp * base.cp
        reps = {k: p.num_gpus // g for k, p in enumerate(pc.pools)}
        if min(reps.values()) < 1:
            continue
        # speed of one replica on each pool: the pool's best single-pool tokens/s per GPU
        speed = {}
        for k, p in enumerate(pc.pools):
            r = singles.get(p.name)
            if r is not None and r.best is not None:
                speed[k] = r.best.tokens_per_s_per_gpu * g
        if len(speed) < len(reps):
            continue
        mb = base.micro_batch
        total = sum(reps[k] * speed[k] for k in reps)
        share = {k: workload.global_batch * speed[k] / total for k in reps}  # per replica
        keys = sorted(reps, key=lambda k: -speed[k])
        best, tried = None, set()
        # split by speed; then re-split by the speed each pool showed at that split (its
        # sequences per second per replica), three rounds, and one micro-batch more or less
        # on the slowest pool; the fastest step wins
        for _ in range(3):
            for shift in (0, -1, 1):
                b = {k: max(mb, int(round(share[k] / mb)) * mb) for k in reps}
                b[keys[-1]] = max(mb, b[keys[-1]] + shift * mb)
                rest = workload.global_batch - sum(reps[k] * b[k] for k in keys[1:])
                if rest <= 0 or rest % (reps[keys[0]] * mb):
                    continue
                b[keys[0]] = rest // reps[keys[0]]
                key = tuple(sorted(b.items()))
                if key in tried:
                    continue
                tried.add(key)
                try:
                    c = data_across_pools(model, pc, workload, base, reps, b)
                except InputError as e:
                    rejected[f"invalid: {e.field} ({e.allowed})"] += 1
                    continue
                if best is None or c.step_time_s < best[0].step_time_s:
                    best = (c, b)
            if best is None:
                break
            c, b = best
            pool_s = c.pool_step_s
            speed = {k: b[k] / pool_s[k] for k in reps}
            total = sum(reps[k] * speed[k] for k in reps)
            share = {k: workload.global_batch * speed[k] / total for k in reps}  # per replica
            keys = sorted(reps, key=lambda k: -speed[k] * reps[k])
        best = best[0] if best else None
        if best is None:
            rejected["data across pools: the batch does not split into whole micro-batches"] += 1
        elif (best.plan, best.detail) not in seen:
            seen.add((best.plan, best.detail))
            out.append(best)
    return out


