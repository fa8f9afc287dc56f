"""``meshplan plan``: search the plan space and show the best plans and why the winner wins."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from ..engines import LIMITED_ENGINES
from ..cost import estimate
from ..errors import InputError, require_nonneg_int, require_positive_int
from ..export import ENGINES, check_out_dir, render, write
from ..plan_label import parse_label
from ..specs.hardware import gib_text
from ..progress import Progress
from ..report import (intervals_of, right_size_json, right_size_text, search_json,
                      search_text)
from ..uncertainty import GiB, Z90, memory_p90_factor, ranking_sigma
from ..scenario import Scenario
from ..search.scale import largest_count_with_a_plan, right_size, underused
from ..search.search import search
from ._common import add_plan_args, add_scenario_args, plan_overrides, scenario_from_args
from ._pools import add_pool_args, objective_text, pools_run
from ._profile import add_profile_arg, apply_profile_arg, check_generation


def _run(args) -> int:
    require_positive_int("top", args.top)
    require_nonneg_int("rerank", args.rerank)
    if args.out and not args.export:  # else nothing would be written there, without a word
        raise InputError("--out", args.out, "is the directory for --export ENGINE; give --export")
    if args.png and not args.gpu_types:
        raise InputError("--png", args.png, "is procurement's cost-against-time picture; "
                         "give --gpu-types (with --train-tokens and --deadline)")
    if args.png:  # before the search, not after it
        from ..export.trace import check_output_file
        check_output_file("--png", args.png, ".png")
    if args.use_scenario_plan and not args.scenario:  # ignored without a word
        raise InputError("--use-scenario-plan", True, "pins the [plan] table of --scenario; "
                         "give --scenario")
    prof = apply_profile_arg(args)
    handled = pools_run(args)  # several pools, or procurement (--gpu-types)
    if handled is not None:
        return handled
    sc = scenario_from_args(args)
    check_generation(prof, sc.cluster.gpu)
    max_gpus = getattr(args, "max_gpus", None)
    if max_gpus is not None and max_gpus < 1:
        raise InputError("--max-gpus", max_gpus, "must be a positive integer")
    if max_gpus is not None and sc.cluster.num_gpus > max_gpus:  # before, not after, searching
        raise InputError("--max-gpus", max_gpus, f"the cluster has {sc.cluster.num_gpus} GPUs; "
                         "give fewer with --gpus or compare counts with --gpu-types")
    # the knobs the [plan] table names, not the defaults of the ones it leaves out (which
    # would pin dp1, mb1, ...: search them)
    pins = ({k: v for k, v in sc.plan.to_dict().items() if k in sc.plan_stated}
            if sc.plan and args.use_scenario_plan else {})
    pins.update(plan_overrides(args))
    if args.plan_label is not None:  # a label is a whole plan: its defaults are pinned too
        for k, v in parse_label(args.plan_label).to_dict().items():
            pins.setdefault(k, v)
    engine = args.engine
    if args.export in LIMITED_ENGINES:
        if engine and engine != args.export:
            raise InputError("--engine", engine, f"must match --export ({args.export}) or be left out")
        engine = args.export  # search only what the engine can run
    if args.export and not args.out:
        raise InputError("--out", None, "required with --export (a directory)")
    if args.export:
        check_out_dir(args.out)  # before the search: a bad --out fails fast
    pessimistic = args.rank_by == "p90"
    # --rank-by p90 searches as if the GPU held its capacity over the memory class's 90th
    # percentile factor, so every plan it finds fits at that percentile (a plan fits when what
    # its tensors hold is under the capacity, cost/memory.py: the same quantity the interval
    # scales), partial recomputation and ZeRO stages chosen for it; the plans are then
    # estimated again on the real GPU
    factor = (memory_p90_factor(sc.workload.framework, sc.cluster.gpu.generation)
              if pessimistic else 1.0)
    with Progress("searching (degree points)", quiet=args.json) as bar:
        def shown(done: int, total: int) -> None:
            bar.total, bar.done = total, done
            bar.draw()

        def run(cluster):
            return search(sc.model, cluster, sc.workload, pins,
                          top_k=max(args.top, 10) if pessimistic else args.top,
                          rerank_k=args.rerank, simulate=args.rerank > 0, engine=engine,
                          progress=shown)
        held_note = None
        if factor > 1.0:
            gpu = sc.cluster.gpu
            r = run(replace(sc.cluster, gpu=replace(gpu, memory_bytes=gpu.memory_bytes / factor)))
            if r.top:
                r.top, r.pareto = ([estimate(sc.model, sc.cluster, sc.workload, e.plan) for e in x]
                                   for x in (r.top, r.pareto))
                held_note = (f"searched with {gpu.memory_bytes / factor / GiB:.1f} of the "
                             f"{gib_text(gpu.memory_bytes)} GiB per GPU (the capacity over the "
                             f"memory class's 90th percentile factor, {factor:.3f}), so every "
                             "plan shown fits at the 90th percentile")
            else:
                r = run(sc.cluster)
                if r.top:
                    held_note = ("no plan fits at the 90th percentile of memory: ranked among "
                                 "the plans that fit at the point estimate")
        else:
            r = run(sc.cluster)
    _rank_and_warn(sc, r, args.top, pessimistic)
    if held_note:
        r.notes.insert(0, held_note)
    fewer = None
    if r.top and underused(sc.cluster, sc.workload) and not args.no_right_size:
        fewer = right_size(sc.model, sc.cluster, sc.workload, r.top[0], pins, engine)
    elif not r.top and not r.considered and not args.no_right_size:
        fewer = largest_count_with_a_plan(sc.model, sc.cluster, sc.workload, pins, engine)
    # the plan fields the command named, as `predict` counts them (engine_spread.blank_knobs_of)
    stated = set(plan_overrides(args)) | (set(sc.plan_stated) if sc.plan and
                                           args.use_scenario_plan and
                                           args.plan_label is None else set())
    rendered = None
    if args.export and r.top:
        # (nothing fits: the search's report below says why and which plan came closest,
        # then exit 1 with nothing written, as without --export)
        best = Scenario(sc.model, sc.cluster, sc.workload, r.top[0].plan,
                        plan_stated=frozenset(stated))
        rendered = render(best, args.export)  # refuses before anything is printed or written
    money = objective_text(args, sc, r)  # may refuse (--max-gpus) before anything is printed
    # the export is written before the report is printed: one that could not be written
    # ended the command (exit 2) after the whole report, --json's included, was on stdout
    written = write(rendered, args.out) if rendered is not None else []
    if args.json:
        print(json.dumps(search_json(sc, r, stated)
                         | {"right_size": right_size_json(sc, r, fewer)},
                         indent=2))
    else:
        print(search_text(sc, r))
        print("\n".join(right_size_text(sc, r, fewer)))
    if money and not args.json:
        print(money)
    if args.export and not r.top:
        print(f"nothing exported to {args.out}: no plan fits", file=sys.stderr)
    if rendered is not None:
        for note in rendered.notes:
            print(f"note: {note}", file=sys.stderr)
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
    return 0 if r.top else 1


def _rank_and_warn(sc: Scenario, r, top: int, pessimistic: bool) -> None:
    """--rank-by p90: plans that fit at the 90th percentile of memory first, each group by its
    90th percentile step time. Notes: #2 closer to #1 than the uncertainty of the difference
    between them; #1 may not fit (its 90th percentile of memory crosses the GPU's), with the
    fastest plan shown that fits."""
    ivs = intervals_of(sc, r.top, r.simulated)
    r.notes = []
    if pessimistic and r.top:
        r.top = sorted(r.top, key=lambda e: (ivs[e.plan].may_not_fit,
                                             ivs[e.plan].step_time_s[1]))[:top]
        r.ranked_by = ("90th percentile step time, plans that fit at the 90th percentile of "
                       "memory first, --rank-by p90")
        figure = {e.plan: ivs[e.plan].step_time_s[1] for e in r.top}
    else:
        figure = {e.plan: (r.simulated[e.plan].step_time_s if e.plan in r.simulated
                           else e.step_time_s) for e in r.top}
    if len(r.top) > 1:
        a, b = r.top[:2]
        t1, t2 = figure[a.plan], figure[b.plan]
        band = Z90 * ranking_sigma(a, b)
        if 0.0 <= (t2 - t1) / t1 < band:
            r.notes.append(f"#1 and #2 are {(t2 - t1) / t1:.1%} apart, within the 10-90% "
                           f"uncertainty of their difference ({band:.1%}, from the constants "
                           "each leans on): either may be faster in practice")
    if r.top and ivs[r.top[0].plan].may_not_fit:
        cap = ivs[r.top[0].plan].capacity_gib
        safe = [(i, e) for i, e in enumerate(r.top) if not ivs[e.plan].may_not_fit]
        if safe:
            i, e = safe[0]
            slower = figure[e.plan] / figure[r.top[0].plan] - 1.0
            # (only without --rank-by p90, which puts the plans that fit first)
            r.notes.append(f"#1 may not fit (the 90th percentile of its memory crosses the "
                           f"GPU's {cap:.0f} GiB); #{i + 1}, {e.plan.describe()}, fits at the "
                           f"90th percentile and is {slower:.1%} slower (--rank-by p90 ranks "
                           "the plans that fit first)")
        else:
            r.notes.append(f"#1 may not fit (the 90th percentile of its memory crosses the "
                           f"GPU's {cap:.0f} GiB), nor does any plan shown: more GPUs, more "
                           "recomputation or a higher ZeRO stage (pin them) leave more room")


def register(sub) -> None:
    p = sub.add_parser("plan", help="find the best parallel plans for a model on a cluster")
    add_scenario_args(p)
    add_plan_args(p, " (pin any of them; the rest is searched)")
    p.add_argument("--top", type=int, default=5, help="how many plans to show (default 5)")
    p.add_argument("--rerank", type=int, default=50,
                   help="simulate the pipeline of the best N plans and rank them by it "
                        "(default 50; 0: closed forms only)")
    p.add_argument("--use-scenario-plan", action="store_true",
                   help="pin the knobs of the scenario file's [plan] table")
    p.add_argument("--rank-by", choices=("step", "p90"), default="step",
                   help="rank by the predicted step time (default) or pessimistically: "
                        "search for plans that fit at the 90th percentile of memory and rank "
                        "them by the 90th percentile step time")
    add_profile_arg(p)
    p.add_argument("--no-right-size", action="store_true",
                   help="skip the search on fewer GPUs when the batch has fewer sequences "
                        "than GPUs")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--engine", choices=LIMITED_ENGINES,
                   help="search only plans this engine runs as planned (its limits: "
                        "meshplan/engines.py); --export ENGINE implies it")
    p.add_argument("--export", choices=ENGINES, help="write the winner's config for an engine")
    p.add_argument("--out", help="directory for --export")
    add_pool_args(p)
    p.set_defaults(func=_run)
