"""``meshplan serve``: plan, simulate and export the parallelism of an inference deployment."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

from ..errors import InputError, require_nonneg_int, require_plain_text, require_positive_int
from ..scenario import make_cluster
from ..serve.explain import explain
from ..serve.search import GOODPUT_PLANS, SLO, Candidate, goodputs, search
from ..serve.simulate import percentile
from ..serve.spec import Pool, ServePlan
from ..serve.traffic import load_trace, parse_lengths, synthetic
from ..specs.catalog.presets import load_model
from ..validity import check_context

_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|us)?\s*$")
# The most requests `serve` simulates: each runs through every candidate plan's event
# simulation (10,000 requests on 76 plans: 3 min on one core, 2026-11-27), so 10**8 would
# never return; 100,000 puts ~1,000 requests beyond the p99.
MAX_REQUESTS = 100_000
DEFAULT_REQUESTS = 1000  # requests simulated without --trace or --requests
# --plan's batching limits when the flags are not given (the values the vLLM launch line of
# docs/serving.md writes)
PLAN_MAX_NUM_SEQS, PLAN_MAX_BATCHED_TOKENS = 256, 8192


def parse_duration(field: str, text: str) -> float:
    """``2s``, ``50ms``, ``800us`` or a bare number of seconds, to seconds."""
    m = _DUR.match(str(text))
    if not m:
        raise InputError(field, text, "expected a duration like 2s, 50ms or 0.05")
    v = float(m.group(1)) * {"ms": 1e-3, "us": 1e-6, "s": 1.0, None: 1.0}[m.group(2)]
    if v <= 0:
        raise InputError(field, text, "must be positive")
    return v


_POOL = re.compile(r"^tp(\d+)(?:pp(\d+))?(?:dp(\d+))?(?:ep(\d+))?(?:x(\d+))?$")


def parse_pool(text: str, role: str, seqs: int, tokens: int) -> Pool:
    m = _POOL.match(text.strip().lower())
    if not m:
        raise InputError("plan", text, "expected e.g. tp4x2 (tp 4, 2 replicas), tp8pp2x1, or"
                         " tp1dp8ep8x1 (attention DP 8, expert parallel 8)")
    tp, pp, dp, ep, r = (int(g) if g is not None else None for g in m.groups())
    dp = 1 if dp is None else dp
    # a written 0 is refused by Pool (tp0x8, tp4x0), not read as "unset"
    return Pool(tp=tp, pp=1 if pp is None else pp, attn_dp=dp, ep=1 if ep is None else ep,
                replicas=1 if r is None else r, max_num_seqs=seqs,
                max_batched_tokens=tokens, role=role)


def parse_plan(text: str, weights: str, kv: str, seqs: int, tokens: int, tier: str | None,
               domain: int) -> ServePlan:
    """``tp4x4`` (aggregated) or ``P=tp4x2/D=tp8x1`` (disaggregated)."""
    t = text.strip()
    if "/" in t or t.upper().startswith("P="):
        parts = dict(p.split("=", 1) for p in t.split("/") if "=" in p)
        if set(k.upper() for k in parts) != {"P", "D"}:
            raise InputError("plan", text, "a disaggregated plan is P=<pool>/D=<pool>, e.g."
                             " P=tp4x2/D=tp8x1")
        parts = {k.upper(): v for k, v in parts.items()}
        p = parse_pool(parts["P"], "prefill", seqs, tokens)
        d = parse_pool(parts["D"], "decode", seqs, tokens)
        tier = tier or ("scale-up" if p.gpus + d.gpus <= domain else "scale-out")
        return ServePlan((p, d), weights, kv, tier)
    return ServePlan((parse_pool(t, "both", seqs, tokens),), weights, kv)


def _slo(args) -> SLO:
    ttft = tpot = None
    q = None
    for pct in (50, 90, 99):
        for name in ("ttft", "tpot"):
            v = getattr(args, f"{name}_p{pct}")
            if v is None:
                continue
            if q is not None and q != pct:
                raise InputError(f"--{name}-p{pct}", v, "give both SLOs at the same percentile")
            q = pct
            if name == "ttft":
                ttft = parse_duration(f"--ttft-p{pct}", v)
            else:
                tpot = parse_duration(f"--tpot-p{pct}", v)
    return SLO(ttft, tpot, float(q or 90))


def _traffic(args):
    if args.trace:  # the trace gives the arrivals and lengths: refuse, do not ignore
        for flag, value, unset in (("--rate", args.rate, None),
                                   ("--input-len", args.input_len, None),
                                   ("--output-len", args.output_len, None),
                                   ("--requests", args.requests, DEFAULT_REQUESTS),
                                   ("--arrivals", args.arrivals, "poisson")):
            if value != unset:
                raise InputError(flag, value, "the --trace file gives every request's arrival "
                                 "and lengths (--concurrency replays it closed-loop)")
        traffic = load_trace(args.trace, args.prefix_share, args.concurrency)
        if len(traffic.requests) > MAX_REQUESTS:  # the --requests bound (a trace escaped it)
            raise InputError("--trace", args.trace, f"holds {len(traffic.requests):,} requests; "
                             f"at most {MAX_REQUESTS:,}: every request runs through every "
                             "candidate plan's simulation (about 3 minutes per 10,000 on one "
                             "core); replay a part of it")
        return traffic
    if args.rate is None and args.concurrency is None:
        raise InputError("--rate", None, "give --rate (requests/s), --concurrency or --trace")
    if args.rate is not None and args.concurrency is not None:
        raise InputError("--rate", args.rate, "give --rate or --concurrency, not both")
    rate = None
    if args.rate is not None:
        rate = math.inf if str(args.rate).strip().lower() in ("inf", "max") else None
        if rate is None:
            try:
                rate = float(args.rate)
            except ValueError:
                raise InputError("--rate", args.rate, "requests per second, or inf") from None
            if not rate > 0 or not math.isfinite(rate):
                raise InputError("--rate", args.rate, "must be a positive number (or inf)")
    if args.arrivals != "poisson" and (rate is None or math.isinf(rate)):
        # (the default, poisson, cannot be told from one given: only another is refused)
        raise InputError("--arrivals", args.arrivals, "spaces the requests of an open loop at"
                         " a finite --rate; with " + ("--concurrency (a closed loop)"
                                                      if rate is None else "--rate inf (all at"
                                                      " once)") + " there is nothing to space")
    if args.input_len is None or args.output_len is None:
        raise InputError("--input-len", args.input_len, "give --input-len and --output-len"
                         " (tokens, or LO:HI), or --trace")
    if not 1 <= args.requests <= MAX_REQUESTS:
        raise InputError("--requests", args.requests,
                         f"from 1 to {MAX_REQUESTS:,}: every request runs through every candidate "
                         "plan's simulation (about 3 minutes per 10,000 on one core)")
    return synthetic(args.requests, parse_lengths("--input-len", args.input_len),
                     parse_lengths("--output-len", args.output_len), rate, args.concurrency,
                     args.arrivals == "poisson", args.prefix_share, args.seed)


def _row(i: int, c: Candidate, slo: SLO) -> dict:
    r = c.result
    s = r.summary()
    return {"rank": i, "plan": c.plan.to_dict(), "describe": c.plan.describe(),
            "gpus": c.plan.gpus, "meets_slo": c.meets(slo),
            "slo_attainment": r.attainment(slo.ttft_s, slo.tpot_s),
            "goodput_req_per_s": c.goodput_rps} | s


def _print_table(rows: list[Candidate], slo: SLO) -> None:
    q = slo.percentile
    print(f"{'#':>2} {'GPUs':>4} {'TTFT p50/p90/p99 ms':>21} {'TPOT p50/p90/p99 ms':>21}"
          f" {'E2E p90 s':>9} {'out tok/s/GPU':>13} {'tok/s/user':>10} {'SLO':>4} {'attain':>6}"
          f" {'KV peak':>7}  plan")
    for i, c in enumerate(rows, 1):
        r = c.result
        t, p = r.ttft_s, r.tpot_s
        print(f"{i:>2} {c.plan.gpus:>4} "
              f"{percentile(t, 50) * 1e3:>6.0f}/{percentile(t, 90) * 1e3:>6.0f}/{percentile(t, 99) * 1e3:>7.0f}"
              f" {percentile(p, 50) * 1e3:>6.1f}/{percentile(p, 90) * 1e3:>6.1f}/{percentile(p, 99) * 1e3:>7.1f}"
              f" {percentile(r.e2e_s, 90):>9.2f} {r.output_tokens_per_s_per_gpu():>13.0f}"
              f" {r.tokens_per_s_per_user():>10.1f} {'yes' if c.meets(slo) else 'no':>4}"
              f" {r.attainment(slo.ttft_s, slo.tpot_s):>6.0%}"
              f" {max((u for _, u in r.kv_use), default=0):>7.0%}  {c.plan.describe()}")
    del q


def _json_safe(x):
    """``x`` with every non-finite float (an unbounded rate, an attainment of no request)
    as null: json.dumps writes them as NaN / Infinity, which is not JSON (jq and strict
    parsers refuse it); ``default=`` is never called for floats."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def _run(args) -> int:
    if not args.model or not args.gpus:
        raise InputError("--model" if not args.model else "--gpus", None, "required")
    require_positive_int("top", args.top)
    require_nonneg_int("jobs", args.jobs)
    require_plain_text("--model-id", args.model_id or args.model)  # written into launch lines
    model = load_model(args.model)
    cluster = make_cluster(args.gpus, gpus_per_node=args.gpus_per_node,
                           nic_gbps_per_gpu=args.nic_gbps, gpu_file=args.gpu_file)
    if args.export and not args.out:
        raise InputError("--out", None, "--export needs --out DIR")
    if args.out and not args.export:  # else nothing would be written there, without a word
        raise InputError("--out", args.out, "is the directory for --export vllm|sglang; give --export")
    if args.export:
        from ..serve.export import check_out
        check_out(args.out)  # before the search: a bad --out fails fast, nothing written
    if args.png:  # so does a bad --png (it was found after every simulation)
        from ..export.trace import check_output_file
        check_output_file("--png", args.png, ".png")
    traffic = _traffic(args)
    # the longest request the stated traffic holds: a trace's longest, or the ranges' upper
    # ends (a request of both is in the stated traffic, though the draws may have missed
    # it; servers sized to the draws would refuse it)
    longest = (max(r.input_len + r.output_len for r in traffic.requests) if args.trace else
               parse_lengths("--input-len", args.input_len).hi
               + parse_lengths("--output-len", args.output_len).hi)
    check_context(model, longest, "--trace" if args.trace else "--input-len + --output-len",
                  args.trace or f"{args.input_len} + {args.output_len}",
                  f"a request of {longest:,} tokens (prompt + output): ")
    slo = _slo(args)
    if slo.tpot_s is not None and all(r.output_len == 1 for r in traffic.requests):
        pct = f"{slo.percentile:g}"
        raise InputError(f"--tpot-p{pct}", getattr(args, f"tpot_p{pct}"), "every request has"
                         " one output token, so there is no time per output token to hold;"
                         " drop the TPOT target or give " + ("the --trace requests" if args.trace
                                                            else "--output-len")
                         + " more than one output token")
    weights, kv = args.weights, args.kv_cache or args.weights
    plans = None
    if not args.plan:  # the search sizes each plan's batch itself: refuse, do not ignore
        for flag, value in (("--max-num-seqs", args.max_num_seqs),
                            ("--max-batched-tokens", args.max_batched_tokens)):
            if value is not None:
                raise InputError(flag, value, "applies to the plan given with --plan; the "
                                 "search picks each plan's batch limits itself")
    if args.model_id and not args.export:  # else it would be silently ignored
        raise InputError("--model-id", args.model_id, "names the model in the commands "
                         "--export writes; give --export vllm|sglang")
    if args.plan:
        seqs = PLAN_MAX_NUM_SEQS if args.max_num_seqs is None else args.max_num_seqs
        tokens = PLAN_MAX_BATCHED_TOKENS if args.max_batched_tokens is None else args.max_batched_tokens
        plans = [parse_plan(args.plan, weights, kv, seqs, tokens, None, cluster.domain_size)]
        plans[0].check(model, cluster)
        if args.aggregated_only and plans[0].disaggregated:
            raise InputError("--plan", args.plan, "is disaggregated (P=.../D=...), and "
                             "--aggregated-only was given")
    if args.export:  # refuse early, or search only the plans the engine can express
        from ..serve.export import check_expressible
        from ..serve.search import candidate_plans
        if plans:
            check_expressible(args.export, plans[0], cluster, model.checkpoint_quant)
        else:
            plans, refused = [], set()
            for pl in candidate_plans(model, cluster, weights, kv, not args.aggregated_only):
                try:
                    check_expressible(args.export, pl, cluster, model.checkpoint_quant)
                    plans.append(pl)
                except InputError as e:
                    refused.add(e.allowed)
            # no candidate at all (nothing fits memory): the search says so (NoPlanFits);
            # this line is for plans that fit but the engine cannot launch
            if not plans and refused:
                raise InputError("--export", args.export, "no plan on this cluster can be "
                                 "exported: " + "; ".join(sorted(refused))[:400])
        # the plans are simulated as the engine they are exported to runs them (its scheduler,
        # MoE collectives and, for SGLang, eager prefill: serve/cost.py), so what is printed is
        # what the launch lines serve; SGLang's export writes --enable-mixed-chunk
        plans = [replace(p, scheduler=args.export, mixed_chunk=True) for p in plans]
    res = search(model, cluster, traffic, slo, weights, kv, not args.aggregated_only,
                 args.min_gpus, plans, jobs=args.jobs)
    if not res.ranked:
        reasons = sorted({c.error for c in res.infeasible})
        raise InputError("plan", args.plan or "search", "no plan runs: " + "; ".join(reasons)[:400])
    if traffic.rate_per_s is not None and math.isfinite(traffic.rate_per_s) and not args.no_goodput:
        head = res.ranked[:GOODPUT_PLANS]  # whatever --top shows: the ranking does not depend on it
        for c, g in zip(head, goodputs(model, cluster, [c.plan for c in head], traffic, slo,
                                       args.jobs)):
            c.goodput_rps = g
        if not args.min_gpus and (slo.ttft_s or slo.tpot_s):  # DistServe's measure decides
            res.ranked[:GOODPUT_PLANS] = sorted(head, key=lambda c: (not c.meets(slo),
                                                                     -c.goodput_rps / c.plan.gpus))
    top = res.ranked[:args.top]
    png = None
    if args.png:  # drawn here, written before the export (and removed if the export fails)
        from ..serve.plots import pareto_png_bytes
        png = pareto_png_bytes(res)
    exported, notes, rendered = [], [], None
    if args.export:  # rendered (and refused) before anything is written
        from ..serve.export import default_model_id, render_plan
        from ..serve.export import notes as export_notes
        from ..specs.catalog.presets import preset_names
        model_id = args.model_id or default_model_id(args.model)
        notes = export_notes(top[0].plan, model, model_id,
                             args.model.strip().lower() in preset_names())
        rendered = render_plan(args.export, top[0].plan, model, model_id, cluster, longest,
                               notes)
    new_png = False
    if png is not None:  # the PNG first: one that cannot be written left the export behind
        from ..export.trace import atomic_write
        new_png = not Path(args.png).exists()
        atomic_write(Path(args.png), png)
    if rendered is not None:
        from ..serve.export import write_plan
        try:
            exported = write_plan(rendered, args.out)
        except BaseException:  # nor is a PNG left from a command whose export failed
            if new_png:
                Path(args.png).unlink(missing_ok=True)
            raise
    if args.json:
        print(json.dumps(_json_safe({
            "model": model.name, "cluster": cluster.describe(), "traffic": traffic.describe(),
            "slo": {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "percentile": slo.percentile},
            "evaluated": res.evaluated, "infeasible": len(res.infeasible),
            "engine_simulated": args.export or "vllm",
            "top": [_row(i, c, slo) | {"kv_use": c.result.kv_use[::max(1, len(c.result.kv_use) // 50)]}
                    for i, c in enumerate(top, 1)],
            "pareto": [{"describe": c.plan.describe(), "gpus": c.plan.gpus,
                        "tokens_per_s_per_user": c.result.tokens_per_s_per_user(),
                        "output_tokens_per_s_per_gpu": c.result.output_tokens_per_s_per_gpu()}
                       for c in res.front],
            "why": explain(model, cluster, traffic, res, args.min_gpus), "exported": [str(p) for p in exported],
            "export_notes": notes,
        }), indent=2, allow_nan=False))
        return 0
    print(f"serving {model.name} on {cluster.describe()}")
    print(f"traffic: {traffic.describe()}; SLO: {slo.describe()}")
    engine = {"vllm": "vLLM", "sglang": "SGLang"}[args.export or "vllm"]
    print(f"evaluated {res.evaluated} plans by simulation of {engine}'s scheduler"
          f" ({len(res.infeasible)} could not run); weights {weights}, KV cache {kv}")
    print("\nbest plans" + (" (fewest GPUs meeting the SLO first)" if args.min_gpus else ""))
    _print_table(top, slo)
    print("\nwhy #1 wins")
    for line in explain(model, cluster, traffic, res, args.min_gpus):
        print("  " + line)
    if any(c.goodput_rps is not None for c in top):
        print(f"\ngoodput (DistServe: highest Poisson rate with {slo.percentile:g}% of requests"
              " within the SLOs)")
        for i, c in enumerate(top, 1):
            if c.goodput_rps is not None:
                print(f"  #{i}: {c.goodput_rps:.2f} req/s ({c.goodput_rps / c.plan.gpus:.3f} req/s"
                      " per GPU)")
    print("\nPareto front: output tokens/s per GPU vs tokens/s per user")
    print(f"  {'tok/s/user':>10} {'out tok/s/GPU':>13} {'GPUs':>4} {'SLO':>4}  plan")
    for c in res.front:
        print(f"  {c.result.tokens_per_s_per_user():>10.1f} {c.result.output_tokens_per_s_per_gpu():>13.0f}"
              f" {c.plan.gpus:>4} {'yes' if c.meets(slo) else 'no':>4}  {c.plan.describe()}")
    if args.min_gpus:
        ok = [c for c in res.ranked if c.meets(slo)]
        print("\nfewest GPUs meeting the SLO: " + (f"{ok[0].plan.gpus} ({ok[0].plan.describe()})"
                                                     if ok else "none within this cluster"))
    print("\nhow sure (measured 2026-11-29 by `meshplan validate-serve bench/data/serving_runs.csv`,"
          " 200 published runs; rerun it after a cost-model change): output tokens/s per GPU is"
          " within 7.4% (median) on 85 TensorRT-LLM runs (6.6% / 12.4% p90 on the 68 dense ones;"
          " 17 Qwen3-235B attention-DP runs read 22-85% high), 12.8% on 36 SGLang runs (+12% in"
          " the median), and reads high on vLLM: +49% on 18 NVIDIA runs, +22% on 38 MI300X runs"
          " (the engine's cost above the GPU step is not all modelled); TTFT is within 34.5% and"
          " TPOT 15.2% (median, 57 runs), TTFT mostly low; batch-1 TPOT reads 17% low (15.4"
          " against 18.6 ms measured)")
    if args.png:
        print(f"wrote {args.png}")
    for p in exported:
        print(f"wrote {p}")
    for n in notes:
        print(f"note: {n}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("serve", help="plan the parallelism of an inference deployment "
                       "(aggregated or disaggregated) for a traffic and latency targets")
    g = p.add_argument_group("model and cluster")
    g.add_argument("--model", help="preset name or path to a HuggingFace config.json")
    g.add_argument("--gpus", help="COUNTxGPU, e.g. 16xH100-SXM-80GB")
    g.add_argument("--gpus-per-node", type=int)
    g.add_argument("--nic-gbps", type=float, help="scale-out bandwidth per GPU, Gb/s one way")
    g.add_argument("--gpu-file", help="TOML file with extra [gpu.NAME] tables")
    g.add_argument("--weights", choices=("bf16", "fp8"), default="bf16", help="weight precision")
    g.add_argument("--kv-cache", choices=("bf16", "fp8"), help="KV cache precision (default:"
                   " as the weights)")
    t = p.add_argument_group("traffic")
    t.add_argument("--input-len", help="prompt tokens: N or LO:HI (uniform)")
    t.add_argument("--output-len", help="output tokens: N or LO:HI (uniform)")
    t.add_argument("--rate", help="requests per second (Poisson), or inf (all at once)")
    t.add_argument("--concurrency", type=int, help="fixed number of clients (closed loop)")
    t.add_argument("--trace", help="CSV with arrival_s, input_len, output_len")
    t.add_argument("--requests", type=int, default=DEFAULT_REQUESTS,
                   help=f"requests to simulate (default {DEFAULT_REQUESTS})")
    t.add_argument("--arrivals", choices=("poisson", "uniform"), default="poisson")
    t.add_argument("--prefix-share", type=float, default=0.0,
                   help="share of each prompt that is a common cached prefix (0-1)")
    t.add_argument("--seed", type=int, default=0)
    s = p.add_argument_group("service-level objectives (one percentile)")
    for pct in (50, 90, 99):
        s.add_argument(f"--ttft-p{pct}", help="time to first token target, e.g. 2s")
        s.add_argument(f"--tpot-p{pct}", help="time per output token target, e.g. 50ms")
    k = p.add_argument_group("plans")
    k.add_argument("--plan", help="evaluate one plan: tp4x4, tp8pp2x1, tp1dp8ep8x1, or"
                   " P=tp4x2/D=tp8x1 (disaggregated)")
    k.add_argument("--max-num-seqs", type=int,
                   help=f"with --plan (default {PLAN_MAX_NUM_SEQS})")
    k.add_argument("--max-batched-tokens", type=int,
                   help=f"with --plan (default {PLAN_MAX_BATCHED_TOKENS})")
    k.add_argument("--aggregated-only", action="store_true", help="skip disaggregated plans")
    k.add_argument("--min-gpus", action="store_true", help="rank by the fewest GPUs meeting the SLO")
    k.add_argument("--top", type=int, default=5)
    k.add_argument("--no-goodput", action="store_true", help="skip the goodput bisection")
    k.add_argument("--jobs", type=int, default=0,
                   help="worker processes for the simulations (default 0: one per CPU; 1: in "
                        "this process); the result does not depend on it")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true")
    o.add_argument("--png", help="write the Pareto front as a PNG")
    o.add_argument("--export", choices=("vllm", "sglang"), help="write launch commands of #1")
    o.add_argument("--out", help="directory for --export")
    o.add_argument("--model-id", help="HuggingFace id or checkpoint folder for exported commands"
                   " (default: the folder of a --model config.json, else --model)")
    p.set_defaults(func=_run)
