"""``meshplan plan`` on pools, with prices, objectives and procurement (hooks for plan.py).

- ``--gpus A+B`` (or [[cluster.pools]] in the scenario): plans across pools
  (meshplan/search/hetero.py), ranked by --objective under --deadline/--budget/--max-gpus.
- ``--gpu-types T1,T2,...``: procurement (meshplan/search/procure.py).
- one plain cluster with --train-tokens / --price / --objective: today's search, unchanged,
  and a block of money and time figures after it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from ..engines import LIMITED_ENGINES, search_hints
from ..errors import InputError, require_positive_number
from ..report import scenario_line
from ..scenario import Scenario, gpu_catalog, load_scenario, make_pools
from ..search.objective import (OBJECTIVES, Goal, Outcome, fmt_duration, fmt_usd,
                                parse_duration_s, parse_tokens, parse_usd)
from ..specs.hardware import lookup_gpu
from ..specs.pools import Pool
from ..specs.prices import parse_price_overrides, price_of

GiB = 2**30


def add_pool_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("pools, prices, objectives (--gpus A+B joins pools)")
    g.add_argument("--price", action="append", metavar="GPU=USD",
                   help="$/GPU-hour for a GPU type, overriding the catalog (repeatable)")
    g.add_argument("--inter-pool-gbps", type=float,
                   help="link between pools, Gb/s per GPU one way (default: the slowest NIC)")
    g.add_argument("--objective", choices=OBJECTIVES, default="throughput",
                   help="rank by tokens/s, $ per million tokens, or time to train")
    g.add_argument("--train-tokens", help="tokens to train, e.g. 15T")
    g.add_argument("--deadline", help="finish within, e.g. 90d, 12w, 36h")
    g.add_argument("--budget", help="spend at most, US dollars, e.g. 2.5M")
    g.add_argument("--max-gpus", type=int, help="use at most this many GPUs")
    g.add_argument("--gpu-types", help="procurement: compare these GPU types (comma-separated)"
                   " and find the fewest GPUs of each that meet the deadline")
    g.add_argument("--png", help="procurement: write cost against time to train here (PNG)")


def goal_from_args(args) -> Goal:
    tokens = parse_tokens(args.train_tokens) if getattr(args, "train_tokens", None) else 0.0
    deadline = parse_duration_s(args.deadline) if getattr(args, "deadline", None) else 0.0
    budget = parse_usd(args.budget) if getattr(args, "budget", None) else 0.0
    max_gpus = getattr(args, "max_gpus", None)
    if max_gpus is not None and max_gpus < 1:  # 0 too: it would mean "no limit" below
        raise InputError("--max-gpus", max_gpus, "must be a positive integer")
    max_gpus = max_gpus or 0
    return Goal(getattr(args, "objective", None) or "throughput", tokens, deadline, budget,
                max_gpus)


def _prices(args) -> dict[str, float]:
    return parse_price_overrides(getattr(args, "price", None), gpu_catalog(args.gpu_file))


def cluster_price(args, sc: Scenario):
    """The $/GPU-hour of a one-GPU-type scenario: --price, else the price of a scenario's one
    pool (``pools = [{gpus = ..., price = ...}]``), else the catalog's."""
    prices = _prices(args)
    name = sc.cluster.gpu.name
    if sc.pools is not None and name not in prices and sc.pools.pools[0].name == name:
        return sc.pools.pools[0].price
    return price_of(name, prices)


def pooled_scenario(args) -> Scenario | None:
    """The scenario when its cluster is several pools; None for one plain cluster."""
    from ._common import scenario_from_args

    gpus = getattr(args, "gpus", None)
    from_file = None
    if not gpus and args.scenario:
        from_file = load_scenario(args.scenario)
        if from_file.pools is None or len(from_file.pools.pools) < 2:
            return None
    elif not gpus or "+" not in gpus:
        return None
    prices = _prices(args)
    if from_file is not None:
        pc = from_file.pools
        pools = tuple(Pool(p.cluster, price_of(p.name, prices)) if p.name in prices else p
                      for p in pc.pools)
        flag = getattr(args, "inter_pool_gbps", None)  # (is not None: a 0 is refused, as
        link = pc.inter_pool_bytes_per_s               # without --scenario, not "not given")
        if flag is not None:
            link = require_positive_number("inter_pool_gbps", flag) / 8 * 1e9
        given = pc.inter_pool_given or flag is not None
        pc = replace(pc, pools=pools, inter_pool_bytes_per_s=link, inter_pool_given=given)
    else:
        pc = make_pools(gpus, args.gpus_per_node, args.nic_gbps, args.gpu_file,
                        getattr(args, "inter_pool_gbps", None), prices)
    first = f"{pc.pools[0].num_gpus}x{pc.pools[0].name}"
    base = scenario_from_args(argparse.Namespace(**{**vars(args), "gpus": first}))
    return Scenario(base.model, pc.pools[0].cluster, base.workload, base.plan, pc)


def _refuse_pins(args, what: str) -> None:
    """The pools and procurement searches take no pinned plan knobs: refuse them (exit 2)
    rather than answer with a plan that ignores them."""
    from ._common import plan_overrides
    if getattr(args, "plan_label", None) is not None:
        raise InputError("--plan", args.plan_label, f"{what} searches every plan; pinned plan "
                         "knobs are taken on one GPU type only")
    pins = plan_overrides(args)
    if pins:
        k = next(iter(pins))
        raise InputError("--" + k.replace("_", "-"), pins[k], f"{what} searches every plan; "
                         "pinned plan knobs are taken on one GPU type only")
    # the one-GPU-type search's options, which these searches took and ignored
    for flag, given in (("--engine", getattr(args, "engine", None)),
                        ("--rank-by", None if getattr(args, "rank_by", "step") == "step"
                         else args.rank_by),
                        ("--use-scenario-plan", getattr(args, "use_scenario_plan", False)
                         or None)):
        if given is not None:
            raise InputError(flag, given, f"applies to one GPU type; {what} does not take it")


def pools_run(args) -> int | None:
    """Procurement or pools: run it and return the exit code; None: the plain path."""
    if getattr(args, "gpu_types", None) is not None:  # '' too: refused by gpu_types_of
        _refuse_pins(args, "--gpu-types")
        return _procure(args)
    sc = pooled_scenario(args)
    if sc is not None:
        _refuse_pins(args, "several pools (--gpus A+B)")
    if sc is None:
        goal_from_args(args)  # bad objectives and prices fail before anything is printed
        _prices(args)
        return None
    from ..search.hetero import outcome_of, search_pools

    goal = goal_from_args(args)
    hints = search_hints(args.export) if args.export in LIMITED_ENGINES else None
    r = search_pools(sc.model, sc.pools, sc.workload, goal, top_k=10**6,
                     schedules=hints["schedules"] if hints else None,
                     zeros=ENGINE_ZEROS.get(args.export))
    rendered = None
    if args.export:  # rank only what the engine can express (see export_pool_plan)
        if not args.out:
            raise InputError("--out", None, "required with --export (a directory)")
        from ..export import UnsupportedByEngine
        kept, first_refusal = [], None
        for p in r.ranked:
            if p.kind not in EXPORTABLE.get(args.export, ("single",)):
                continue
            try:
                out = export_pool_plan(sc, p, args.export)
            except UnsupportedByEngine as e:
                first_refusal = first_refusal or e
                continue
            if rendered is None:
                rendered = out
            kept.append(p)
            if len(kept) >= args.top:
                break
        if rendered is None:
            raise first_refusal or InputError("--export", args.export,
                                              "no plan fits, so there is nothing to export")
        r.ranked = kept
    r.ranked = r.ranked[:args.top]
    if args.json:
        print(json.dumps(pools_json(sc, r, goal), indent=2))
    else:
        print(pools_text(sc, r, goal))
    if rendered is not None:
        from ..export import write
        for note in rendered.notes:
            print(f"note: {note}", file=sys.stderr)
        for path in write(rendered, args.out):
            print(f"wrote {path}", file=sys.stderr)
    ok = r.best is not None and outcome_of(r.best, goal).meets(goal)[0]
    return 0 if ok else 1


# ---- exports ---------------------------------------------------------------------------
# Kinds of plan across pools each engine can express: data-parallel replicas with different
# batches per GPU type none (each gives every data-parallel rank the same micro-batches);
# stages with given layer counts Megatron (--pipeline-model-parallel-layout) and torchtitan
# (module_fqns_per_model_part), not DeepSpeed (PipelineModule partition_method).
# meshplan's own runtime (`meshplan run`) takes one GPU type per job: only a single pool.
EXPORTABLE = {"megatron": ("single", "pipeline"), "torchtitan": ("single", "pipeline"),
              "deepspeed": ("single",), "meshplan": ("single",)}
# ZeRO stages for pipelines across pools when exporting (torchtitan shards with FSDP2 only:
# see export/torchtitan.py's refusal of zero 0 and 1)
ENGINE_ZEROS = {"torchtitan": (2, 3)}

def export_pool_plan(sc: Scenario, best, engine: str):
    """The winner's config for ``engine``, or one line saying what the engine cannot express."""
    from ..export import UnsupportedByEngine, render
    from ..specs.hardware import Cluster

    if best.kind == "data":
        raise UnsupportedByEngine(engine, "dp", best.plan.dp,
                                  "replicas of different GPU types with different batch sizes "
                                  "per replica (every engine gives each data-parallel rank the "
                                  "same micro-batches)")
    if best.kind == "pipeline" and engine == "deepspeed":
        raise UnsupportedByEngine(engine, "pp", best.plan.pp,
                                  "stages with given layer counts (PipelineModule partitions by "
                                  "its partition_method: uniform, parameters or a type regex)")
    if best.kind == "single":
        pool = next(p for p in sc.pools.pools if p.name == best.rank_map[0][2])
        cluster = pool.cluster
    else:
        first = sc.pools.pools[0].cluster
        gpn = min(p.cluster.gpus_per_node for p in sc.pools.pools)
        cluster = Cluster(first.gpu, best.num_gpus, gpn, first.nic_bytes_per_s)
    rendered = render(Scenario(sc.model, cluster, sc.workload, best.plan), engine)
    if best.kind == "pipeline":
        rendered.notes.append("ranks are GPUs by this map (launch the nodes in this order): "
                              + rank_map_text(best))
    return rendered


def rank_map_text(p) -> str:
    return "; ".join(f"ranks {a}-{b}: {name}" for a, b, name in p.rank_map)


# ---- text and JSON -------------------------------------------------------------------
def pools_scenario_line(sc: Scenario) -> str:
    line = scenario_line(sc)
    head, _, tail = line.partition(" on ")
    _, _, rest = tail.partition("; seq")
    return f"{head} on {sc.pools.describe()}; seq{rest}"


def _money(o: Outcome, goal: Goal) -> str:
    s = f"${o.usd_per_hour:,.0f}/h, {fmt_usd(o.usd_per_million_tokens)} per M tokens"
    if goal.train_tokens:
        s += (f", {fmt_duration(o.time_to_train_s)} and {fmt_usd(o.cost_to_train_usd)} for "
              f"{goal.train_tokens / 1e12:g}T tokens")
    return s


def pool_plan_interval(sc: Scenario, p) -> tuple[tuple[float, float], tuple[float, float], str]:
    """(step time p10-p90 s, tokens/s p10-p90, class) of a plan of the pool search:
    uncertainty.widest_throughput_factors over the pools it uses (the rule `validate` gives
    pool rows). A one-pool plan leans on its estimate's step parts; a plan across pools on
    its own, its pipeline work read as compute (the stages' GEMMs and attention, with their
    exposed communication inside)."""
    from ..uncertainty import load, widest_throughput_factors

    if p.estimate is not None:
        parts = p.estimate.step_time.parts
    else:
        parts = {("compute_s" if k == "pipeline_work_s" else k): v for k, v in p.step_parts.items()}
    gens = {pool.name: pool.gpu.generation for pool in sc.pools.pools}
    used = [(gens[name], n, parts) for name, n in p.gpus_by_pool.items() if n]
    lo, hi, cls = widest_throughput_factors(load(), sc.model.is_moe, used)
    return ((p.step_time_s / hi, p.step_time_s / lo), (p.tokens_per_s * lo, p.tokens_per_s * hi),
            cls)


def pools_text(sc: Scenario, r, goal: Goal) -> str:
    from ..search.hetero import outcome_of

    out = [pools_scenario_line(sc)]
    prices = ", ".join(f"{p.name} ${p.price.usd_per_gpu_hour:.2f}/GPU-h"
                       + (" (estimate)" if p.price.estimate else "") for p in sc.pools.pools)
    out.append(f"prices: {prices}; objective: {goal.objective}")
    out.append(f"searched {r.considered:,} plans ({r.simulated} pipelines across pools "
               f"simulated) in {r.elapsed_s:.2f} s")
    for reason, n in r.rejected.most_common():
        if n:
            out.append(f"  rejected {n:>7,}: {reason}")
    if not r.ranked:
        out.append("no plan fits: every plan rejected above")
        return "\n".join(out)
    out.append("")
    out.append(f"{'#':>2}  {'kind':<9}{'plan':<62}{'GPUs':>6}{'step s':>8}{'p10-p90 s':>14}"
               f"{'tok/s':>10}{'MFU':>7}  money")
    for i, p in enumerate(r.ranked, 1):
        o = outcome_of(p, goal)
        ok, why = o.meets(goal)
        text = p.plan.describe() + ("" if p.kind == "pipeline" else
                                    f" [{p.detail.split(': ', 1)[-1]}]")
        (s10, s90), _, _ = pool_plan_interval(sc, p)
        out.append(f"{i:>2}  {p.kind:<9}{text:<62}{p.num_gpus:>6}"
                   f"{p.step_time_s:>8.2f}{f'{s10:.2f}-{s90:.2f}':>14}{p.tokens_per_s:>10,.0f}"
                   f"{p.mfu:>7.1%}  {_money(o, goal)}" + ("" if ok else f"  [{why}]"))
    best = r.best
    out.append("")
    out.append(f"winner: {best.describe()}")
    out.append(f"  GPUs used: " + ", ".join(f"{n} x {name}" for name, n in best.gpus_by_pool.items())
               + ("" if best.num_gpus == sc.pools.num_gpus else
                  f" (of {sc.pools.num_gpus}: the rest is left out)"))
    out.append("  ranks: " + rank_map_text(best))
    out.append(f"  step time {best.step_time_s:.3f} s, {best.tokens_per_s:,.0f} tokens/s, "
               f"MFU {best.mfu:.1%} (against every used GPU's bf16 peak)")
    for k, v in best.step_parts.items():
        if v > 0:
            out.append(f"    {k.removesuffix('_s'):<22}{v:>10.3f} s  {v / best.step_time_s:>6.1%}")
    out.append("  per stage (pool, layers, GPUs, memory verdict):")
    for i, s in enumerate(best.stages):
        lay = f"{s.layers:>3} layers" if s.layers else "          "
        busy = f"  busy {s.busy_s:.2f} s" if s.busy_s else ""
        out.append(f"    stage {i:<3}{s.pool:<18}{lay}  {s.gpus:>4} GPUs{busy}  {s.verdict}")
    if best.pool_comm:
        out.append("  communication per step, by pool (wire time / exposed, as costed on each "
                   "pool's GPU type at its slowest stage):")
        for name, axes in best.pool_comm.items():
            for c in axes:
                if c.group_size > 1 and c.wire_s > 0:
                    out.append(f"    {name:<18}{c.axis:<4}{c.collective:<30} group {c.group_size:<5}"
                               f" {c.tier:<10} {c.wire_s:>8.3f} s / {c.exposed_s:>7.3f} s")
        if best.kind != "single" and len(best.gpus_by_pool) > 1:
            link = sc.pools.inter_pool_bytes_per_s * 8 / 1e9
            out.append(f"    between pools: {link:.0f} Gb/s per GPU"
                       + (f", gradient all-reduce {best.step_parts['cross_pool_reduce_s']:.3f} s"
                          if "cross_pool_reduce_s" in best.step_parts else
                          ", activations at each pool boundary (inside pipeline_work/bubble)"))
    o = outcome_of(best, goal)
    out.append("  money: " + _money(o, goal))
    alone = []
    for name, sr in r.singles.items():
        if sr.best is not None:
            sim = sr.simulated.get(sr.best.plan)
            tps = sr.best.tokens_per_step / sim.step_time_s if sim else sr.best.tokens_per_s
            alone.append(f"{name}: {sr.best.plan.describe()} {tps:,.0f} tok/s")
    if alone:
        out.append("  each pool alone: " + "; ".join(alone))
    return "\n".join(out)


def pools_json(sc: Scenario, r, goal: Goal) -> dict:
    from ..search.hetero import outcome_of

    def one(p):
        o = outcome_of(p, goal)
        step_iv, tps_iv, cls = pool_plan_interval(sc, p)
        return {"kind": p.kind, "describe": p.describe(), "plan": p.plan.to_dict(),
                "step_time_s_p10_p90": list(step_iv), "tokens_per_s_p10_p90": list(tps_iv),
                "throughput_class": cls,
                "num_gpus": p.num_gpus, "gpus_by_pool": p.gpus_by_pool,
                "rank_map": [{"first_rank": a, "last_rank": b, "gpu": n} for a, b, n in p.rank_map],
                "step_time_s": p.step_time_s, "step_time_breakdown_s": p.step_parts,
                "tokens_per_s": p.tokens_per_s, "mfu": p.mfu,
                "stages": [{"pool": s.pool, "layers": s.layers, "gpus": s.gpus,
                            "memory_gib": s.memory_bytes / GiB, "fits": s.fits,
                            "verdict": s.verdict} for s in p.stages],
                "communication_by_pool": {
                    name: [{"axis": c.axis, "collective": c.collective, "group_size": c.group_size,
                            "tier": c.tier, "wire_s": c.wire_s, "exposed_s": c.exposed_s}
                           for c in axes] for name, axes in p.pool_comm.items()},
                "usd_per_hour": o.usd_per_hour, "usd_per_million_tokens": o.usd_per_million_tokens,
                "time_to_train_s": o.time_to_train_s, "cost_to_train_usd": o.cost_to_train_usd,
                "meets_constraints": o.meets(goal)[0]}

    return {"scenario": pools_scenario_line(sc), "objective": goal.objective,
            "considered": r.considered, "elapsed_s": r.elapsed_s,
            "rejected": dict(r.rejected), "ranked": [one(p) for p in r.ranked]}


def objective_text(args, sc: Scenario, r) -> str:
    """Money and time of the plain search's winner ('' unless asked for)."""
    if not (getattr(args, "train_tokens", None) or getattr(args, "price", None)
            or getattr(args, "objective", "throughput") != "throughput"
            or getattr(args, "budget", None) or getattr(args, "deadline", None)):
        return ""
    goal = goal_from_args(args)
    if goal.max_gpus and sc.cluster.num_gpus > goal.max_gpus:
        raise InputError("--max-gpus", goal.max_gpus, f"the cluster has {sc.cluster.num_gpus} "
                         "GPUs; give fewer with --gpus or compare counts with --gpu-types")
    if not r.top:
        return ""
    price = cluster_price(args, sc)
    best = r.top[0]
    sim = r.simulated.get(best.plan)
    tps = best.tokens_per_step / sim.step_time_s if sim else best.tokens_per_s
    o = Outcome(tps, sc.cluster.num_gpus * price.usd_per_gpu_hour, sc.cluster.num_gpus,
                goal.train_tokens)
    ok, why = o.meets(goal)
    line = (f"money ({price.usd_per_gpu_hour:.2f} $/GPU-h, {price.provider or 'catalog'}"
            f"{', estimate' if price.estimate else ''}): " + _money(o, goal))
    return line + ("" if ok else f"  [{why}]")


# ---- procurement ---------------------------------------------------------------------
def _procure(args) -> int:
    from ..search.procure import curve_png, procure
    from ._common import scenario_from_args

    goal = goal_from_args(args)
    if not goal.train_tokens:
        raise InputError("--train-tokens", None, "required with --gpu-types (what to train)")
    if args.export:
        raise InputError("--export", args.export, "procurement compares GPU types; plan the "
                         "chosen one with --gpus COUNTxTYPE to export it")
    types = gpu_types_of(args.gpu_types, gpu_catalog(args.gpu_file))
    if args.gpus:  # it was ignored without a word
        raise InputError("--gpus", args.gpus, "not taken with --gpu-types: procurement searches "
                         "the GPU counts itself (leave --gpus out; --gpus-per-node sets the "
                         "node size)")
    first = f"8x{types[0].name}"
    sc = scenario_from_args(argparse.Namespace(**{**vars(args), "gpus": first}))
    prices = _prices(args)
    res = procure(sc.model, sc.workload, types, goal, prices, args.gpus_per_node, args.nic_gbps)
    # the picture first: one that could not be written ended the command (exit 2) after the
    # whole report, --json's included, was printed
    png = curve_png(res, args.png, sc.model.name) if args.png else None
    if args.json:
        print(json.dumps(procure_json(sc, res), indent=2))
    else:
        print(procure_text(sc, res))
    if png:
        print(f"wrote {png}", file=sys.stderr)
    return 0 if res.cheapest is not None else 1


def gpu_types_of(text: str, cat) -> list:
    """The GPU types of --gpu-types, each once (InputError: blank, an empty entry, an
    unknown type, a type named twice)."""
    names = [t.strip() for t in text.split(",")]
    allowed = "GPU types, comma-separated, each once (e.g. H100-SXM-80GB,MI300X; `meshplan gpus`)"
    if not any(names):
        raise InputError("--gpu-types", text, "is blank; give " + allowed)
    if "" in names:
        raise InputError("--gpu-types", text, "has an empty entry; give " + allowed)
    types = [lookup_gpu(t, cat) for t in names]
    seen: set = set()
    for t in types:
        if t.name in seen:
            raise InputError("--gpu-types", text, f"names {t.name} twice; give " + allowed)
        seen.add(t.name)
    return types


def procure_text(sc: Scenario, res) -> str:
    g = res.goal
    m, w = sc.model, sc.workload
    head = (f"{m.name} ({m.total_params() / 1e9:.1f}B params), seq {w.seq_len}, global batch "
            f"{w.global_batch}, {g.train_tokens / 1e12:g}T tokens")
    if g.deadline_s:
        head += f", deadline {fmt_duration(g.deadline_s)}"
    if g.budget_usd:
        head += f", budget {fmt_usd(g.budget_usd)}"
    out = [head, f"searched {res.searches} GPU counts in {res.elapsed_s:.1f} s "
           "(closed-form plan search at each count)"]
    out.append("")
    out.append(f"{'gpu':<18}{'$/GPU-h':>8}{'GPUs':>7}  {'plan':<50}{'time':>9}{'cost':>10}"
               f"{'MFU':>7}  memory")
    cheapest = res.cheapest
    unsure = {id(r) for r in res.rows if r.outcome is not None and _may_not_fit(sc, r)}
    for row in res.rows:
        price = f"{row.price.usd_per_gpu_hour:.2f}" + ("*" if row.price.estimate else "")
        if row.outcome is None:
            out.append(f"{row.gpu.name:<18}{price:>8}{'-':>7}  {row.reason}")
            continue
        o = row.outcome
        mark = "  <- cheapest" if row is cheapest else ""
        fit = "may not fit" if id(row) in unsure else "fits"
        out.append(f"{row.gpu.name:<18}{price:>8}{row.num_gpus:>7}  "
                   f"{row.estimate.plan.describe():<50}{fmt_duration(o.time_to_train_s):>9}"
                   f"{fmt_usd(o.cost_to_train_usd):>10}{row.estimate.mfu:>7.1%}  {fit:<11}"
                   f"{mark}")
    if unsure:
        out.append("'may not fit': the 90th percentile of what the plan's tensors hold crosses "
                   "the GPU's memory (`meshplan predict --plan LABEL --gpus COUNTxGPU` prints "
                   "it); each count's plan is the closed-form search's best at the point "
                   "estimate")
    if any(r.price.estimate for r in res.rows):
        out.append("* a stated estimate, not a published list price (see `meshplan gpus`)")
    return "\n".join(out)


def _may_not_fit(sc: Scenario, row) -> bool:
    """Whether a procurement row's plan may not fit (uncertainty.verdict's test), as `plan`
    flags it."""
    from ..uncertainty import interval
    return interval(row.estimate, sc.model, row.cluster,
                    framework=sc.workload.framework).may_not_fit


def procure_json(sc: Scenario, res) -> dict:
    cheapest = res.cheapest
    return {"model": sc.model.name, "train_tokens": res.goal.train_tokens,
            "deadline_s": res.goal.deadline_s, "budget_usd": res.goal.budget_usd,
            "elapsed_s": res.elapsed_s, "searches": res.searches,
            "cheapest": cheapest.gpu.name if cheapest else None,
            "rows": [{"gpu": r.gpu.name, "usd_per_gpu_hour": r.price.usd_per_gpu_hour,
                      "price_is_estimate": r.price.estimate, "num_gpus": r.num_gpus or None,
                      "plan": r.estimate.plan.describe() if r.estimate else None,
                      "time_to_train_s": r.outcome.time_to_train_s if r.outcome else None,
                      "cost_usd": r.outcome.cost_to_train_usd if r.outcome else None,
                      "mfu": r.estimate.mfu if r.estimate else None, "reason": r.reason,
                      "may_not_fit": _may_not_fit(sc, r) if r.estimate else None,
                      "curve": [{"num_gpus": n, "time_to_train_s": o.time_to_train_s,
                                 "cost_usd": o.cost_to_train_usd} for n, o in r.curve]}
                     for r in res.rows]}
