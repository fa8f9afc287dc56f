"""Why the winning serving plan wins, in sentences built from its cost breakdown."""

from __future__ import annotations

from ..cost import compute
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from .cost import StepModel
from .memory import decode_read_bytes, experts_touched_share, weight_bytes_per_gpu
from .search import GOODPUT_PLANS, Candidate, SearchResult, headroom, keeps_up
from .simulate import percentile
from .traffic import Traffic

GiB = 2**30


def decode_batch(c: Candidate) -> float:
    """Mean requests per decode iteration of one decode engine (Little's law on tokens:
    output tokens/s x time per token / engines)."""
    r, pool = c.result, c.plan.decode
    tpot = r.tpot_s
    if not tpot:
        return 1.0
    engines = pool.replicas * pool.pp * pool.attn_dp
    return max(1.0, sum(r.output_len) / r.makespan_s * (sum(tpot) / len(tpot)) / engines)


def _lat(c: Candidate, q: float) -> str:
    r = c.result
    tpot = (f"TPOT p{q:g} {percentile(r.tpot_s, q) * 1e3:.1f} ms" if r.tpot_s else
            "no TPOT (one output token per request)")
    return (f"TTFT p{q:g} {percentile(r.ttft_s, q) * 1e3:.0f} ms, {tpot},"
            f" {r.output_tokens_per_s_per_gpu():.0f} output tok/s/GPU")


def _why_first(w: Candidate, nxt: Candidate, res: SearchResult, min_gpus: bool = False,
               traffic: Traffic | None = None) -> str:
    """The rule that put ``w`` ahead of ``nxt``, in the order the ranking applies them
    (search.search's order, then the goodput re-rank of commands/serve.py). ``traffic``:
    the trace ranked on (its keeps-up rule and offline order; None leaves them out)."""
    slo = res.slo
    offline = traffic is not None and traffic.offline
    if w.meets(slo) != nxt.meets(slo):
        return f"ranked first: it meets {slo.describe()} and #2 does not"
    if traffic is not None and keeps_up(w, traffic) != keeps_up(nxt, traffic):
        return ("ranked first: it keeps up with the offered load and #2 does not (#2 finishes"
                " requests at under 90% of the rate they arrive: its queue grows without bound,"
                " so its latencies depend on the trace's length)")
    if not w.meets(slo) and (slo.ttft_s is not None or slo.tpot_s is not None):
        # neither meets it: both orders rank the rest by headroom (after the whole-cluster
        # preference without --min-gpus); no sentence about meeting the SLO applies
        q = slo.percentile
        rule = "as the closest to it"
        if not min_gpus and w.plan.gpus != nxt.plan.gpus:
            rule = (f"on the whole cluster ({w.plan.gpus} GPUs against {nxt.plan.gpus} for #2,"
                    " the search's preference)")
        return (f"no plan meets {slo.describe()}: ranked first {rule}; its worst p{q:g} latency"
                f" at {headroom(w, slo):.0%} of the target against {headroom(nxt, slo):.0%}"
                " for #2")
    if min_gpus and w.plan.gpus != nxt.plan.gpus:
        return f"ranked first: the fewest GPUs meeting the SLO ({w.plan.gpus} against {nxt.plan.gpus})"
    tie = ""
    if (not min_gpus and w.goodput_rps is not None and nxt.goodput_rps is not None
            and (slo.ttft_s or slo.tpot_s)):  # commands/serve.py re-ranks by goodput then
        gw, gn = w.goodput_rps / w.plan.gpus, nxt.goodput_rps / nxt.plan.gpus
        if gw == gn:  # the re-rank's stable sort compares these values: the order below stays
            tie = f"goodput per GPU ties with #2 ({gw:.3f} req/s); "
        else:
            later = ("; at the offered rate #2 runs further inside the SLO, but it saturates"
                     " sooner" if headroom(nxt, slo) < headroom(w, slo) else "")
            return (f"ranked first by goodput per GPU among the search's best {GOODPUT_PLANS}"
                    f" (DistServe: the highest request rate served with {slo.percentile:g}% of"
                    " requests inside"
                    f" the SLO): {gw:.3f} req/s per GPU against {gn:.3f} for #2{later}")
    if w.plan.gpus != nxt.plan.gpus:
        return (f"{tie}ranked first: {w.plan.gpus} GPUs against {nxt.plan.gpus} for #2, the"
                " search's preference when both meet the SLO")
    q = slo.percentile
    if slo.ttft_s is None and slo.tpot_s is None and offline:  # search.rank_value
        return (f"{tie}ranked first by output tokens/s per GPU"
                f" ({w.result.output_tokens_per_s_per_gpu():.0f} against"
                f" {nxt.result.output_tokens_per_s_per_gpu():.0f} for #2; no SLO given and every"
                " request sent at once: the offline max-throughput case)")
    if slo.ttft_s is None and slo.tpot_s is None and not w.result.tpot_s:
        return (f"{tie}ranked first by the lowest TTFT p{q:g} ({percentile(w.result.ttft_s, q) * 1e3:.0f}"
                f" ms against {percentile(nxt.result.ttft_s, q) * 1e3:.0f} ms for #2; no SLO given,"
                " and no request decodes)")
    if slo.ttft_s is None and slo.tpot_s is None:
        return (f"{tie}ranked first by the lowest TPOT p{q:g} ({percentile(w.result.tpot_s, q) * 1e3:.1f}"
                f" ms against {percentile(nxt.result.tpot_s, q) * 1e3:.1f} ms for #2; no SLO given)")
    return (f"{tie}ranked first: furthest inside the SLO (its worst p{q:g} latency at"
            f" {headroom(w, slo):.0%} of the target against {headroom(nxt, slo):.0%} for #2)")


def explain(model: ModelSpec, cluster: Cluster, traffic: Traffic, res: SearchResult,
            min_gpus: bool = False) -> list[str]:
    if not res.ranked:
        return ["no plan could be simulated: " + "; ".join(sorted({c.error for c in res.infeasible}))[:300]]
    w = res.ranked[0]
    q = res.slo.percentile
    plan = w.plan
    out = [f"#1 {plan.describe()}: {_lat(w, q)}"
           + ("" if w.meets(res.slo) else f" (misses {res.slo.describe()})")]
    if len(res.ranked) > 1:
        out.append(_why_first(w, res.ranked[1], res, min_gpus, traffic))
    if not w.result.tpot_s:  # every request ends at its first token: nothing decodes
        out.append("no request decodes (one output token each): TTFT is the whole latency")
    else:
        out += _decode_lines(model, cluster, traffic, w)
    out += _prefill_and_others(model, cluster, traffic, res, w)
    return out


def _decode_lines(model: ModelSpec, cluster: Cluster, traffic: Traffic,
                  w: Candidate) -> list[str]:
    """The winner's decode step, part by part, and what its tensor parallelism costs."""
    plan, pool, out = w.plan, w.plan.decode, []
    sm = StepModel(model, cluster, pool, plan.weight_dtype, plan.kv_dtype, plan.scheduler)
    b = decode_batch(w)
    ctx = traffic.mean_input + traffic.mean_output / 2
    st = sm.decode_step(round(b), round(ctx))
    dev = compute.device(cluster.gpu, "fp8" if plan.weight_dtype == "fp8" else "bf16")
    wbytes = weight_bytes_per_gpu(model, pool, plan.weight_dtype)
    # what the step reads: no embedding lookup, of the routed experts those the batch picks
    rbytes = decode_read_bytes(model, pool, plan.weight_dtype, round(b))
    read_s = rbytes / dev.hbm_bytes_per_s
    bound = "bandwidth-bound" if read_s >= 0.6 * st.gemm_s else "compute-bound"
    comm = st.tp_comm_s + st.ep_comm_s + st.pp_comm_s
    tot = st.total_s
    where = "per GPU" if pool.pp == 1 else f"per GPU over its {pool.pp} stages in turn"
    picked = ""
    if model.is_moe:  # (it said bandwidth-bound below batch 64 whatever the step's reads)
        n = experts_touched_share(model, round(b) * pool.attn_dp) * model.moe_experts
        picked = (f" (of {wbytes / GiB:.1f} GiB held: the routed experts its tokens pick, ~{n:.0f}"
                  f" of {model.moe_experts} per layer)")
    weights_note = (f"reading {rbytes / GiB:.1f} GiB of weights {where}{picked}, the"
                    f" embedding lookup aside, alone takes {read_s * 1e3:.1f} ms")
    out.append(
        f"decode is {bound} at batch {b:.0f} per engine (context ~{ctx:.0f} tokens): a step takes"
        f" {tot * 1e3:.1f} ms = weights and GEMMs {st.gemm_s * 1e3:.1f} ms"
        f" ({st.gemm_s / tot:.0%}; {weights_note}), KV cache {st.attention_s * 1e3:.1f} ms"
        f" ({st.attention_s / tot:.0%}),"
        f" communication {comm * 1e3:.1f} ms ({comm / tot:.0%}), host {st.host_s * 1e3:.1f} ms")
    if pool.tp > 1:
        out.append(f"tp{pool.tp} splits the weights and the KV cache over {pool.tp} GPUs' memory"
                   f" bandwidth; its {2 * model.layers} all-reduces per step cost"
                   f" {st.tp_comm_s * 1e3:.1f} ms at this batch")
    return out


def _prefill_and_others(model: ModelSpec, cluster: Cluster, traffic: Traffic,
                        res: SearchResult, w: Candidate) -> list[str]:
    """A lone prefill on the winner, then the runners-up and the best plan of the other kind."""
    plan, q, out = w.plan, res.slo.percentile, []
    pre = StepModel(model, cluster, plan.prefill, plan.weight_dtype, plan.kv_dtype,
                    plan.scheduler)
    ps = pre.prefill_step(round(traffic.mean_input))
    out.append(f"a {traffic.mean_input:.0f}-token prefill alone takes {ps.total_s * 1e3:.0f} ms on"
               f" one {'prefill ' if plan.disaggregated else ''}replica (GEMMs"
               f" {ps.gemm_s * 1e3:.0f} ms, attention {ps.attention_s * 1e3:.0f} ms)"
               + ("" if plan.disaggregated else "; in an aggregated replica it shares iterations"
                  " with decodes (chunked prefill), which is what stretches TPOT under load"))
    for c in res.ranked[1:3]:
        out.append(f"vs {c.plan.describe()}: {_lat(c, q)}"
                   + ("" if c.meets(res.slo) else " (misses the SLO)"))
    other = next((c for c in res.ranked[1:] if c.plan.disaggregated != plan.disaggregated), None)
    if other is not None:
        kind = "disaggregated" if other.plan.disaggregated else "aggregated"
        out.append(f"best {kind} plan: {other.plan.describe()}: {_lat(other, q)}"
                   + ("" if other.meets(res.slo) else " (misses the SLO)"))
    return out
