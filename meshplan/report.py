"""Turn estimates and search results into text tables and JSON (no computation here)."""

from __future__ import annotations

from . import engine_spread
from .engines import ENGINE_NAMES

from .cost import Estimate
from .cost.memory import reserved_bytes
from .uncertainty import Interval, around_simulation, interval, scaled, verdict
from .scenario import Scenario
from .search.search import SearchResult, explain

GiB = 2**30


def intervals_of(sc: Scenario, ests: list[Estimate], simulated: dict | None = None,
                 stated=None) -> dict:
    """Plan -> 10-90% Interval, around the simulated step time where there is one (the memory
    band stays around the closed-form peak the tables and verdicts print; `meshplan simulate`
    and plan --json's simulated_interval are around the simulated peak: around_simulation). With
    ``stated`` (the plan fields the command named), the MoE engine knobs not among them widen
    the closed-form interval as `meshplan predict` widens it for a plan that does not name
    them (engine_spread.py); the simulated one is `meshplan simulate`'s, not widened."""
    out = {}
    for e in ests:
        iv = interval(e, sc.model, sc.cluster, framework=sc.workload.framework)
        s = (simulated or {}).get(e.plan)
        if s:
            out[e.plan] = scaled(iv, s.step_time_s, e.step_time_s)
        elif stated is not None:
            blank = engine_spread.blank_knobs_of(e.plan, sc.model, stated, sc.workload.framework)
            out[e.plan] = engine_spread.widen(
                iv, engine_spread.spread(e, sc.model, sc.cluster, sc.workload, blank))
        else:
            out[e.plan] = iv
    return out


def estimate_json(e: Estimate, iv: Interval | None = None) -> dict:
    extra = {"interval": iv.to_json(), "verdict_with_interval": verdict(e, iv)} if iv else {}
    return extra | {
        "plan": e.plan.to_dict(),
        "label": e.plan.describe(),
        "describe": e.plan.describe(),
        "num_microbatches": e.num_microbatches,
        "step_time_s": e.step_time_s,
        "step_time_breakdown_s": e.step_time.parts,
        "tokens_per_s": e.tokens_per_s,
        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
        "mfu": e.mfu,
        "hfu": e.hfu,
        "model_flops_per_step": e.model_flops_per_step,
        "peak_memory_gib": e.peak_memory_bytes / GiB,
        "peak_reserved_gib": e.peak_reserved_bytes / GiB,
        "fits": e.fits,
        "verdict": e.verdict,
        "bottleneck": e.bottleneck,
        "memory_per_stage_gib": [{k: v / GiB for k, v in m.parts.items()} | {"total": m.total / GiB}
                                 for m in e.memory],
        "communication": [{"axis": c.axis, "collective": c.collective, "group_size": c.group_size,
                           "tier": c.tier, "bytes_per_step": c.bytes_per_step,
                           "wire_s": c.wire_s, "exposed_s": c.exposed_s} for c in e.comm],
    }


def _tokens(n: int) -> str:
    """Tokens per step: millions to two decimals as before, and whole counts below 10,000
    (a batch of one 2,048-token sequence read '0.00M')."""
    return f"{n / 1e6:.2f}M" if n >= 10_000 else f"{n:,}"


def scenario_line(sc: Scenario) -> str:
    m, w = sc.model, sc.workload
    kind = (f"MoE {m.moe_experts} experts top-{m.moe_topk}, " if m.is_moe else "dense, ")
    if m.sliding_window:
        wide = " (no narrower than the sequence: full attention here)" \
            if m.sliding_window >= w.seq_len else ""
        kind += (f"{m.sliding_layers} of {m.layers} layers with a {m.sliding_window}-key "
                 f"window{wide}, ")
    line = (f"{m.name} ({kind}{m.total_params() / 1e9:.1f}B params) on {sc.cluster.describe()}; "
            f"seq {w.seq_len}, global batch {w.global_batch} "
            f"sequence{'' if w.global_batch == 1 else 's'} "
            f"({_tokens(w.tokens_per_step)} tokens), {w.precision}"
            + (f" ({w.fp8_recipe} scaling)" if w.precision == "fp8" and w.fp8_recipe else "")
            + (f", as {w.framework} runs it" if w.framework else "")
            + (f", CUDA graphs: {w.cuda_graph}" if w.cuda_graph else ""))
    return line + (f"\n  note: {m.description}" if m.description else "")


def breakdown_text(e: Estimate, iv: Interval | None = None) -> list[str]:
    out = [f"step time {e.step_time_s:.3f} s  |  {e.tokens_per_s_per_gpu:,.0f} tokens/s/GPU  |  "
           f"MFU {e.mfu:.1%}  |  {e.num_microbatches} micro-batches  |  "
           f"{verdict(e, iv) if iv else e.verdict}"]
    if iv:
        out.append(f"  10-90% interval: step time {iv.step_time_s[0]:.3f}-{iv.step_time_s[1]:.3f} s"
                   f", tokens/s/GPU {iv.tokens_per_s_per_gpu[0]:,.0f}-"
                   f"{iv.tokens_per_s_per_gpu[1]:,.0f}, peak memory {iv.peak_memory_gib[0]:.1f}-"
                   f"{iv.peak_memory_gib[1]:.1f} GiB (class {iv.throughput_class})")
    out.append("  step time breakdown (bottleneck pipeline rank "
               f"{e.bottleneck_rank}):")
    for k, v in e.step_time.parts.items():
        if v > 0:
            out.append(f"    {k.removesuffix('_s'):<22}{v:>10.3f} s  {v / e.step_time_s:>6.1%}")
    out.append("  communication per step (wire time / exposed):")
    for c in e.comm:
        if c.group_size > 1 and c.wire_s > 0:
            out.append(f"    {c.axis:<3} {c.collective:<30} group {c.group_size:<5} {c.tier:<10}"
                       f" {c.wire_s:>8.3f} s / {c.exposed_s:>7.3f} s")
    r = e.peak_memory_rank
    mem = e.memory[r]
    out.append(f"  memory on pipeline stage {r} (the fullest), GiB:")
    for k, v in mem.parts.items():
        if k == "pipeline_buffers" and not v:  # only DeepSpeed / Aleph Alpha keep any
            continue
        out.append(f"    {k:<24}{v / GiB:>8.2f}")
    out.append(f"    {'total':<24}{mem.total / GiB:>8.2f}  (PyTorch reserved "
               f"{reserved_bytes(mem.parts) / GiB:.2f})")
    if len(e.memory) > 1:
        per = ", ".join(f"{m.total / GiB:.1f}" for m in e.memory)
        out.append(f"  memory per stage, GiB: {per}")
    return out


def plans_table(ests: list[Estimate], simulated: dict | None = None,
                intervals: dict | None = None) -> list[str]:
    """One row per plan; with ``simulated`` (Plan -> PlanSimulation) the simulated step time
    stands beside the closed form and tokens/s and MFU follow the simulation; with
    ``intervals`` (Plan -> Interval) the 10-90% step time and memory follow each figure."""
    sim = simulated or {}
    ivs = intervals or {}
    w = max([52] + [len(e.plan.describe()) + 2 for e in ests])
    # the time columns widen for steps of 10,000 s and more, so figures never run together
    sw = max([8] + [len(f"{e.step_time_s:.2f}") + 1 for e in ests])
    iw = max([14] + [len(f"{iv.step_time_s[0]:.2f}-{iv.step_time_s[1]:.2f}") + 1
                     for iv in (ivs.get(e.plan) for e in ests) if iv])
    out = [f"{'#':>2}  {'plan':<{w}}{'step s':>{sw}}{'sim s':>{sw}}"
           + (f"{'p10-p90 s':>{iw}}" if ivs else "") + f"{'tok/s/GPU':>11}{'MFU':>7}"
           f"{'mem GiB':>9}" + (f"{'p10-p90':>12}" if ivs else "") + "  bottleneck"]
    for i, e in enumerate(ests, 1):
        s = sim.get(e.plan)
        tps = s.tokens_per_s_per_gpu if s else e.tokens_per_s_per_gpu
        mfu = s.mfu if s else e.mfu
        iv = ivs.get(e.plan)
        st = (f"{f'{iv.step_time_s[0]:.2f}-{iv.step_time_s[1]:.2f}':>{iw}}" if iv else "")
        mt = (f"{f'{iv.peak_memory_gib[0]:.1f}-{iv.peak_memory_gib[1]:.1f}':>12}" if iv else "")
        warn = "may not fit; " if iv and e.fits and iv.may_not_fit else ""
        out.append(f"{i:>2}  {e.plan.describe():<{w}}{e.step_time_s:>{sw}.2f}"
                   f"{(f'{s.step_time_s:.2f}' if s else '-'):>{sw}}{st}{tps:>11,.0f}"
                   f"{mfu:>7.1%}{e.peak_memory_bytes / GiB:>9.1f}{mt}  {warn}{e.bottleneck}")
    return out


def search_text(sc: Scenario, r: SearchResult) -> str:
    out = [scenario_line(sc)]
    out.append(f"searched {r.considered:,} plans ({r.evaluated:,} estimated) in {r.elapsed_s:.2f} s")
    if r.engine:
        out.append(f"engine limits: {ENGINE_NAMES[r.engine]} (only plans it runs as planned; "
                   "see meshplan/engines.py)")
    for reason, n in r.rejected.most_common():
        out.append(f"  rejected {n:>7,}: {reason}")
    if not r.top and not r.considered:
        w = sc.workload
        out.append(f"no plan fits: no layout uses all {sc.cluster.num_gpus:,} GPUs (dp x cp x "
                   f"tp x pp must equal the count, with dp at most the {w.global_batch:,} "
                   f"sequences per step, tp within a node and what the heads allow, pp at most "
                   f"the {sc.model.layers} layers, cp dividing the {w.seq_len:,}-token "
                   "sequence)")
        return "\n".join(out)
    if not r.top:
        out.append("no plan fits: every plan rejected above")
        out += closest_text(r)
        return "\n".join(out)
    out.append("")
    ivs = intervals_of(sc, r.top + r.pareto[:8], r.simulated)
    ranked_by = getattr(r, "ranked_by", "")
    out.append("best plans" + (f" (ranked by {ranked_by}):" if ranked_by else
                               " (ranked by the simulated pipeline, 'sim s'):" if r.simulated
                               else ":"))
    out += plans_table(r.top, r.simulated, ivs)
    # with --engine/--export E the plans are costed as E runs them (engines.run_by): the
    # commands that reproduce them take --engine E too
    eng = f"--engine {r.engine} " if getattr(r, "engine", None) else ""
    out.append(f"('step s': the closed forms, reproduced by `meshplan predict {eng}--plan LABEL`; "
               f"'sim s': the simulated pipeline, by `meshplan simulate {eng}--plan LABEL`, and "
               "the p10-p90 and tok/s/GPU columns around it)"
               if r.simulated else
               f"('step s' is reproduced by `meshplan predict {eng}--plan LABEL`)")
    for note in getattr(r, "notes", []):
        out.append("note: " + note)
    out.append("")
    if len(r.top) > 1 and ranked_by:
        i1, i2 = (ivs[e.plan] for e in r.top[:2])
        p1, p2 = i1.step_time_s[1], i2.step_time_s[1]
        if i2.may_not_fit and not i1.may_not_fit:
            out.append("why #1 wins: it fits at the 90th percentile of memory and #2 may not")
        else:
            out.append(f"why #1 wins: its 90th percentile step time is {p2 - p1:.3f} s lower "
                       "than #2's")
    elif len(r.top) > 1:
        a, b = (r.simulated.get(e.plan) for e in r.top[:2])
        if a and b:
            out.append(f"why #1 wins: simulated {b.step_time_s - a.step_time_s:.3f} s faster per "
                       "step than #2; in the closed-form breakdown:")
            out.append("  " + explain(r.top[0], r.top[1]))
        else:
            out.append("why #1 wins: " + explain(r.top[0], r.top[1]))
    out.append("winner: " + r.top[0].plan.describe())
    w = r.simulated.get(r.top[0].plan)
    out.append(f"  breakdown below: closed forms, as `meshplan predict {eng}--plan '"
               + r.top[0].plan.describe() + "'` prints them"
               + (f"; simulated step {w.step_time_s:.3f} s, as `meshplan simulate {eng}--plan` "
                  "prints it" if w else ""))
    out += breakdown_text(r.top[0], interval(r.top[0], sc.model, sc.cluster,
                                             framework=sc.workload.framework))
    if r.pareto:
        out.append("")
        out.append("Pareto front (step time vs memory per GPU):")
        out += plans_table(r.pareto[:8], r.simulated, ivs)
    return "\n".join(out)


def closest_text(r: SearchResult) -> list[str]:
    """When nothing fits: the plan closest to fitting, what it lacks, what to unpin."""
    c = r.closest
    if c is None:
        return []
    short = (c.peak_memory_bytes - c.capacity_bytes) / GiB
    out = [f"closest plan: {c.plan.describe()} needs {c.peak_memory_bytes / GiB:.1f} GiB per GPU, "
           f"the GPU has {c.capacity_bytes / GiB:.1f} GiB ({short:.1f} GiB short)"]
    pins = [k for k in r.pins if k != "schedules"]
    if pins:
        out.append("try unpinning " + ", ".join("--" + k.replace("_", "-") for k in pins)
                   + ", or use more GPUs or GPUs with more memory")
    else:
        out.append("try more GPUs, GPUs with more memory, a shorter sequence or "
                   "--offload-optimizer")
    return out


def _not_simulated(e: Estimate) -> str:
    """Why a plan of the search's top has no simulated step (its closed form ranks it)."""
    from .pipeline.from_cost import RERANK_MAX_STAGE_MICROBATCHES, simulated_size
    n = simulated_size(e)
    if n > RERANK_MAX_STAGE_MICROBATCHES:
        return (f"pipeline too long to simulate ({n:,} stage x micro-batch pairs > "
                f"{RERANK_MAX_STAGE_MICROBATCHES:,})")
    return "not among the plans the simulation re-ranked (--rerank)"


def search_json(sc: Scenario, r: SearchResult, stated: set | None = None) -> dict:
    # each plan's "interval" is around its closed-form step_time_s, as `meshplan predict
    # --json` gives it; a simulated plan also carries the interval around its simulated
    # step, as `meshplan simulate --json` gives it (the text table shows that one)
    # ``stated``: the plan fields the command named (with each plan's own label's fields, as
    # `predict --plan LABEL` counts them: engine_spread.blank_knobs_of); default: the search's pins
    closed = intervals_of(sc, r.top, stated=r.pins if stated is None else stated)
    ivs = {e.plan: around_simulation(interval(e, sc.model, sc.cluster,
                                              framework=sc.workload.framework),
                                     e, r.simulated[e.plan])
           for e in r.top if e.plan in r.simulated}
    return {
        "scenario": scenario_line(sc),
        "engine": r.engine,
        "considered": r.considered, "evaluated": r.evaluated,
        "rejected": dict(r.rejected), "elapsed_s": r.elapsed_s,
        "top": [estimate_json(e, closed[e.plan])
                | ({"simulated_step_time_s": r.simulated[e.plan].step_time_s,
                    # the table's tok/s/GPU and MFU columns, as `simulate --json` gives them
                    "simulated_tokens_per_s_per_gpu": r.simulated[e.plan].tokens_per_s_per_gpu,
                    "simulated_mfu": r.simulated[e.plan].mfu,
                    "simulated_interval": ivs[e.plan].to_json()}
                   if e.plan in r.simulated else {"simulated_step_time_s": None,
                                                   "not_simulated": _not_simulated(e)})
                for e in r.top],
        "ranked_by": getattr(r, "ranked_by", "") or ("simulated step time" if r.simulated
                                                     else "step time"),
        "notes": list(getattr(r, "notes", [])),
        "why_best": explain(r.top[0], r.top[1]) if len(r.top) > 1 else None,
        "closest": ({"label": r.closest.plan.describe(),
                     "peak_memory_gib": r.closest.peak_memory_bytes / GiB,
                     "capacity_gib": r.closest.capacity_bytes / GiB} if r.closest else None),
        "pareto": [{"label": e.plan.describe(), "describe": e.plan.describe(), "step_time_s": e.step_time_s,
                    "peak_memory_gib": e.peak_memory_bytes / GiB} for e in r.pareto],
    }


def right_size_text(sc: Scenario, r: SearchResult, fewer) -> list[str]:
    """Too many GPUs for the work: the best plan where tokens/s per GPU stops improving (or,
    when no layout uses every GPU, the largest count that has a plan)."""
    if fewer is None:
        return []
    if not r.top:
        b = fewer.best
        return ["", f"the largest GPU count of the scan with a plan: {fewer.num_gpus:,}",
                f"  on {fewer.num_gpus:,} GPUs: {b.plan.describe()}  {b.step_time_s:.3f} s, "
                f"{b.tokens_per_s_per_gpu:,.0f} tok/s/GPU, {b.tokens_per_s:,.0f} tok/s in all",
                f"  (reproduce with --gpus {fewer.num_gpus}x{sc.cluster.gpu.name})"]
    a, b = r.top[0], fewer.best
    scan = ", ".join(f"{n}: {t:,.0f}" if t else f"{n}: none fits" for n, t in fewer.scanned)
    return ["",
            f"too many GPUs for the work: {sc.workload.global_batch} sequences per step on "
            f"{sc.cluster.num_gpus:,} GPUs must split sequences over several GPUs; tokens/s "
            f"per GPU stops improving at {fewer.num_gpus:,} GPUs (scan, GPUs: tok/s/GPU -- {scan})",
            f"  on all {sc.cluster.num_gpus:,} GPUs: {a.plan.describe()}  {a.step_time_s:.3f} s, "
            f"{a.tokens_per_s_per_gpu:,.0f} tok/s/GPU, {a.tokens_per_s:,.0f} tok/s in all",
            f"  on {fewer.num_gpus:,} GPUs:     {b.plan.describe()}  {b.step_time_s:.3f} s, "
            f"{b.tokens_per_s_per_gpu:,.0f} tok/s/GPU, {b.tokens_per_s:,.0f} tok/s in all "
            f"({b.tokens_per_s_per_gpu / a.tokens_per_s_per_gpu:.1f}x per GPU)",
            f"  (closed forms; reproduce with --gpus {fewer.num_gpus}x{sc.cluster.gpu.name} "
            f"and predict --plan)"]


def right_size_json(sc: Scenario, r: SearchResult, fewer) -> dict | None:
    if fewer is None:
        return None
    b = fewer.best
    return {"num_gpus": fewer.num_gpus, "label": b.plan.describe(), "step_time_s": b.step_time_s,
            "tokens_per_s_per_gpu": b.tokens_per_s_per_gpu, "tokens_per_s": b.tokens_per_s,
            "scanned": [{"num_gpus": n, "tokens_per_s_per_gpu": t} for n, t in fewer.scanned]}
