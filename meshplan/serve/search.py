"""Search serving plans: generate the valid ones, simulate each on the traffic, rank, Pareto.

Aggregated plans: every tensor parallel size that divides the heads and fits a scale-up
domain, pipeline parallel only where a replica would not fit otherwise, expert parallel
(and attention data parallel) for MoE models, every replica count up to the cluster, two
batching settings (throughput: 256 running / 8192 tokens; latency: 64 / 2048).
Disaggregated plans: a prefill pool and a decode pool (xPyD), each with its own tp and
replica count, KV moving over NVLink when both fit one domain, else over the NICs.
A plan meets the SLOs when the chosen percentile of TTFT and of TPOT is within target and
that share of requests is within both targets (``holds``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import InputError, NoPlanFits
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from .cost import StepModel
from .memory import serve_memory
from .simulate import SimResult, percentile, simulate
from .spec import Pool, ServePlan
from .traffic import Traffic
from ..workers import pool_map

BATCHING = ((256, 8192), (64, 2048))  # (max_num_seqs, max_batched_tokens)
# Pool sizes tried for disaggregated plans (1, 2, 3, 4, 6, 8, 12, ...) and a cap on how many
# disaggregated plans are simulated (those closest to the whole cluster, fewest pools first).
POOL_SIZES = sorted({b * m for b in (1, 3) for m in (1, 2, 4, 8, 16, 32, 64, 128)} | {1})
MAX_DISAGG_PLANS = 120


@dataclass(frozen=True)
class SLO:
    ttft_s: float | None = None
    tpot_s: float | None = None
    percentile: float = 90.0

    def describe(self) -> str:
        parts = []
        if self.ttft_s is not None:
            parts.append(f"TTFT p{self.percentile:g} <= {self.ttft_s * 1e3:.0f} ms")
        if self.tpot_s is not None:
            parts.append(f"TPOT p{self.percentile:g} <= {self.tpot_s * 1e3:.0f} ms")
        return ", ".join(parts) or "no SLO"


@dataclass
class Candidate:
    plan: ServePlan
    result: SimResult | None = None
    error: str = ""
    goodput_rps: float | None = None
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.result is not None

    def meets(self, slo: SLO) -> bool:
        return self.ok and holds(self.result, slo)


def holds(r: SimResult, slo: SLO) -> bool:
    """Whether a simulated run holds ``slo``: the SLO's percentile of TTFT and of TPOT within
    its targets, and that share of requests within both targets at once (DistServe's SLO
    attainment, which the goodput bisection and the table's "attain" column count). The
    percentiles alone passed runs where different requests miss each target: with the
    targets at a plan's own p90s, 81% of requests met both (tests/test_serve_rank.py)."""
    q = slo.percentile
    if slo.ttft_s is not None and percentile(r.ttft_s, q) > slo.ttft_s:
        return False
    if slo.tpot_s is not None and r.tpot_s and percentile(r.tpot_s, q) > slo.tpot_s:
        return False
    return r.attainment(slo.ttft_s, slo.tpot_s) >= q / 100


def _tp_options(model: ModelSpec, cluster: Cluster) -> list[int]:
    out, tp = [], 1
    while tp <= min(cluster.domain_size, cluster.num_gpus):
        if model.heads % tp == 0:
            out.append(tp)
        tp *= 2
    return out


def replica_shapes(model: ModelSpec, cluster: Cluster, weight_dtype: str, kv_dtype: str,
                   role: str = "both") -> list[Pool]:
    """One-replica pools (tp, pp, ep, attn_dp) that fit in memory, with default batching."""
    shapes: list[Pool] = []
    tps = _tp_options(model, cluster)
    for tp in tps:
        eps = [1, tp] if model.is_moe and tp > 1 and model.moe_experts % tp == 0 else [1]
        for ep in eps:
            shapes.append(Pool(tp=tp, ep=ep, role=role))
    if model.is_moe:  # attention data parallel (DeepSeek / SGLang dp-attention)
        for dp in tps[1:]:
            if model.moe_experts % dp == 0:
                shapes.append(Pool(tp=1, attn_dp=dp, ep=dp, role=role))
    fits = [p for p in shapes if serve_memory(model, cluster.gpu, p, weight_dtype, kv_dtype).fits]
    if not fits and tps:  # pipeline parallel over domains only when nothing else fits
        tp = tps[-1]
        pp = 2
        while tp * pp <= cluster.num_gpus and pp <= model.layers:
            p = Pool(tp=tp, pp=pp, role=role)
            if serve_memory(model, cluster.gpu, p, weight_dtype, kv_dtype).fits:
                fits.append(p)
                break
            pp *= 2
    return fits


def _counts(limit: int) -> list[int]:
    out = {limit}
    c = 1
    while c < limit:
        out.add(c)
        c *= 2
    return sorted(out)


def candidate_plans(model: ModelSpec, cluster: Cluster, weight_dtype: str = "bf16",
                    kv_dtype: str = "bf16", disaggregated: bool = True,
                    all_sizes: bool = True) -> list[ServePlan]:
    """Valid plans on at most ``cluster.num_gpus`` GPUs (``all_sizes``: also smaller ones)."""
    n = cluster.num_gpus
    plans: list[ServePlan] = []
    for shape in replica_shapes(model, cluster, weight_dtype, kv_dtype):
        g = shape.gpus_per_replica
        counts = _counts(n // g) if all_sizes else [n // g]
        for r in counts:
            if r < 1:
                continue
            for seqs, toks in BATCHING:
                plans.append(ServePlan((Pool(shape.tp, shape.pp, shape.ep, shape.attn_dp, r, seqs,
                                             toks),), weight_dtype, kv_dtype))
    if disaggregated and n >= 2:
        pre = replica_shapes(model, cluster, weight_dtype, kv_dtype, "prefill")
        dec = replica_shapes(model, cluster, weight_dtype, kv_dtype, "decode")
        dis: list[ServePlan] = []
        for p in pre:
            for d in dec:
                gp, gd = p.gpus_per_replica, d.gpus_per_replica
                for x in (v for v in POOL_SIZES if v <= n // gp):
                    for y in (v for v in POOL_SIZES if v <= (n - x * gp) // gd):
                        total = x * gp + y * gd
                        if not all_sizes and total != n:
                            continue
                        if all_sizes and total < n and total * 2 < n:
                            continue
                        tier = "scale-up" if total <= cluster.domain_size else "scale-out"
                        dis.append(ServePlan(
                            (Pool(p.tp, p.pp, p.ep, p.attn_dp, x, 256, 8192, role="prefill"),
                             Pool(d.tp, d.pp, d.ep, d.attn_dp, y, 256, 8192, role="decode")),
                            weight_dtype, kv_dtype, tier))
        dis.sort(key=lambda pl: (n - pl.gpus, pl.prefill.replicas + pl.decode.replicas))
        plans += dis[:MAX_DISAGG_PLANS]
    return plans


def evaluate(model: ModelSpec, cluster: Cluster, plan: ServePlan, traffic: Traffic) -> Candidate:
    try:
        return Candidate(plan, simulate(model, cluster, plan, traffic))
    except InputError as e:
        return Candidate(plan, None, str(e))


def capacity_rps(model: ModelSpec, cluster: Cluster, plan: ServePlan, traffic: Traffic) -> float:
    """An upper bound on the request rate ``plan`` sustains on ``traffic``'s lengths, from
    the iterations the simulator runs: each engine (replica x pipeline slot x attention-DP
    rank, as simulate builds them) computes at most ``max_batched_tokens`` tokens per
    iteration, of which at most ``max_num_seqs`` (per slot) are decode tokens, and an
    iteration of T tokens takes at least StepModel.step_s(T, ...) with no attention context
    (more context, more requests or more logits rows only add time). A request needs its
    prompt less the shared prefix (at least one token) computed, and one decode token per
    output token after the first: on the prefill pool (aggregated: the one pool) the
    prompts, plus the decodes when the same pool runs them; on the decode pool the decodes."""
    reqs = traffic.requests
    prefix = int(traffic.prefix_share * traffic.mean_input)  # simulate's shared prefix
    prompt = sum(max(1, r.input_len - prefix) for r in reqs) / len(reqs)
    decode = sum(r.output_len - 1 for r in reqs) / len(reqs)

    def tokens_per_s(pool: Pool, cap: int) -> float:
        engines = pool.replicas * pool.pp * pool.attn_dp
        sm = StepModel(model, cluster, pool, plan.weight_dtype, plan.kv_dtype, plan.scheduler)
        return engines * cap / sm.step_s(cap, 1, logits=1)

    bounds = []
    for pool in plan.pools:
        seqs = max(1, pool.max_num_seqs // pool.pp)  # per pipeline slot, as simulate runs it
        if pool.role != "decode":  # prompt tokens, with the decodes on the same pool
            work = prompt + (decode if pool.role == "both" else 0.0)
            bounds.append(tokens_per_s(pool, pool.max_batched_tokens) / work)
        if pool.role != "prefill" and decode > 0:
            bounds.append(tokens_per_s(pool, min(seqs, pool.max_batched_tokens)) / decode)
    return min(bounds)


def goodput(model: ModelSpec, cluster: Cluster, plan: ServePlan, traffic: Traffic, slo: SLO,
            iters: int = 7) -> float:
    """DistServe's goodput: the highest Poisson rate at which the plan holds ``slo``
    (``holds``: the SLO's percentile of requests within both targets, p90: 90%, DistServe's
    usual target, p99: 99%; bisection on the rate, same lengths), so the plan meets its SLO
    at its goodput, by the rule the table's "SLO" column applies (it was 90% whatever the
    percentile).

    A rate above ``capacity_rps`` is never good: queueing theory's stability condition
    (arrivals below the service rate, else the queue grows without bound and every later
    request misses TTFT). Without that bound a short trace's burst, drained inside the TTFT
    target, passed at any rate: 200 requests gave llama3.1-8b on tp8 H100 775 req/s, 157% of
    the bf16 compute its prompts need (tests/test_serve_goodput.py)."""
    capacity = capacity_rps(model, cluster, plan, traffic)

    def good(rate: float) -> bool:
        if rate > capacity:
            return False
        try:
            r = simulate(model, cluster, plan, traffic.with_rate(rate))
        except InputError:
            return False
        return holds(r, slo)

    lo, hi = 0.0, max(traffic.rate_per_s or 1.0, 0.1)
    while good(hi):
        lo, hi = hi, hi * 2
        if hi > 1e5:
            return math.inf
    for _ in range(iters):
        mid = (lo + hi) / 2
        if good(mid):
            lo = mid
        else:
            hi = mid
    return lo


def goodputs(model: ModelSpec, cluster: Cluster, plans: list[ServePlan], traffic: Traffic,
             slo: SLO, jobs: int = 1) -> list[float]:
    """``goodput`` of each plan, the plans spread over ``jobs`` processes."""
    return pool_map(goodput, [(model, cluster, p, traffic, slo) for p in plans], jobs)


def pareto(cands: list[Candidate]) -> list[Candidate]:
    """Plans no other plan beats on both output tokens/s per GPU and tokens/s per user."""
    # a plan none of whose requests decodes has no tokens/s per user (NaN compares false
    # both ways, so every such plan sat on the front)
    pts = [c for c in cands if c.ok and c.result.tpot_s]
    front = []
    for c in pts:
        x, y = c.result.tokens_per_s_per_user(), c.result.output_tokens_per_s_per_gpu()
        dominated = any(o.result.tokens_per_s_per_user() >= x
                        and o.result.output_tokens_per_s_per_gpu() >= y
                        and (o.result.tokens_per_s_per_user() > x
                             or o.result.output_tokens_per_s_per_gpu() > y) for o in pts)
        if not dominated and not any(  # equal points: keep the first (fewer pools first)
                f.result.tokens_per_s_per_user() == x
                and f.result.output_tokens_per_s_per_gpu() == y for f in front):
            front.append(c)
    return sorted(front, key=lambda c: c.result.tokens_per_s_per_user())


@dataclass
class SearchResult:
    ranked: list[Candidate]
    front: list[Candidate]
    infeasible: list[Candidate]
    slo: SLO
    evaluated: int


def headroom(c: Candidate, slo: SLO) -> float:
    """How far inside the SLO a plan runs: the larger of p(TTFT)/target and p(TPOT)/target
    (below 1 meets it); without targets, the p-th percentile TPOT in seconds."""
    r, q = c.result, slo.percentile
    parts = []
    if slo.ttft_s is not None:
        parts.append(percentile(r.ttft_s, q) / slo.ttft_s)
    if slo.tpot_s is not None and r.tpot_s:  # (no request decodes: no TPOT to hold)
        parts.append(percentile(r.tpot_s, q) / slo.tpot_s)
    if parts:
        return max(parts)
    # no target: the TPOT; with one output token per request, the only latency, TTFT (a NaN
    # key left the sort's order to the order the plans were generated in)
    return percentile(r.tpot_s, q) if r.tpot_s else percentile(r.ttft_s, q)


def rank_value(c: Candidate, slo: SLO, traffic: Traffic) -> float:
    """The last key of the search's order (lower ranks first): ``headroom``; but with no
    target and every request sent at once (``Traffic.offline``: the offline max-throughput
    benchmark, where TPOT only says how the batch was cut) the output tokens/s per GPU,
    highest first."""
    if slo.ttft_s is None and slo.tpot_s is None and traffic.offline:
        return -c.result.output_tokens_per_s_per_gpu()
    return headroom(c, slo)


def keeps_up(c: Candidate, traffic: Traffic) -> bool:
    """Whether the plan serves the offered load instead of queueing without bound: over the
    middle 80% of the trace it finishes requests at 90% or more of the rate they arrive
    (closed loop: always). Completions are counted between the 10th and 90th percentile
    finish times, arrivals between the same arrival percentiles: a stable deployment's
    finish times trail its arrivals by about one latency at both ends, so the two rates
    agree, where requests / makespan charged the last request's whole latency (the drain)
    as lost throughput and failed short traces with long outputs at any load."""
    if traffic.closed_loop or not c.ok:
        return c.ok
    arr = sorted(r.arrival_s for r in traffic.requests)
    fin = sorted(c.result.finish_s)
    n = len(arr)
    lo, hi = n // 10, n - 1 - n // 10
    if hi <= lo or arr[hi] <= arr[lo]:  # all at once (offline): nothing to keep up with
        return True
    if fin[hi] <= fin[lo]:
        return True
    return (hi - lo) / (fin[hi] - fin[lo]) >= 0.9 * (hi - lo) / (arr[hi] - arr[lo])


# the search's best plans whose goodput `meshplan serve` bisects and re-ranks by it (each
# bisection is about ten simulations of the whole trace)
GOODPUT_PLANS = 3
SCREEN_REQUESTS = 400  # requests per screening simulation; the best plans get the full trace
RESIMULATE = 12


def _subset(traffic: Traffic, n: int) -> Traffic:
    if len(traffic.requests) <= n:
        return traffic
    return Traffic(traffic.requests[:n], traffic.rate_per_s, traffic.concurrency,
                   traffic.prefix_share)


def search(model: ModelSpec, cluster: Cluster, traffic: Traffic, slo: SLO,
           weight_dtype: str = "bf16", kv_dtype: str = "bf16", disaggregated: bool = True,
           min_gpus: bool = False, plans: list[ServePlan] | None = None,
           jobs: int = 1) -> SearchResult:
    """Simulate every candidate on the first SCREEN_REQUESTS requests, then the best ones
    (and the Pareto front) on the whole trace. Plans meeting the SLO rank first; among them,
    without ``min_gpus``, those using the whole cluster, furthest inside the SLO first; with
    it, the fewest GPUs first (``rank_value``: offline with no SLO, the highest throughput). ``jobs``: worker processes for the simulations (0: one per
    CPU); the result does not depend on it."""
    plans = plans if plans is not None else candidate_plans(
        model, cluster, weight_dtype, kv_dtype, disaggregated, all_sizes=True)
    if not plans:
        raise NoPlanFits(f"no serving plan fits: {model.name} on {cluster.describe()} (its "
                         "weights do not fit even at the largest tensor parallel size)")
    n = cluster.num_gpus

    def order(cs: list[Candidate], tr: Traffic) -> list[Candidate]:
        if min_gpus:  # fewest GPUs among the plans meeting the SLO; the rest, the closest
            # to it first (a plan missing it on fewer GPUs is no cheaper way to meet it)
            return sorted(cs, key=lambda c: (not c.meets(slo), not keeps_up(c, tr),
                                             c.plan.gpus if c.meets(slo) else 0,
                                             rank_value(c, slo, tr)))
        return sorted(cs, key=lambda c: (not c.meets(slo), not keeps_up(c, tr),
                                         c.plan.gpus != n, rank_value(c, slo, tr)))

    screen = _subset(traffic, SCREEN_REQUESTS)
    cands = pool_map(evaluate, [(model, cluster, p, screen) for p in plans], jobs)
    bad = [c for c in cands if not c.ok]
    ok = order([c for c in cands if c.ok], screen)
    if screen is not traffic:
        keep = {id(c) for c in ok[:RESIMULATE]} | {id(c) for c in pareto(
            [c for c in ok if keeps_up(c, screen)])}
        full = pool_map(evaluate, [(model, cluster, c.plan, traffic) for c in ok
                                   if id(c) in keep], jobs)
        bad += [c for c in full if not c.ok]
        ok = order([c for c in full if c.ok], traffic)
    ranked = ok
    front = pareto([c for c in ranked if keeps_up(c, traffic)])
    return SearchResult(ranked, front, bad, slo, len(cands))
