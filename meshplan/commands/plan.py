"""``meshplan plan``: search the plan space and show the best plans and why the winner wins."""

from __future__ import annotations

import json
import sys

from ..errors import InputError
from ..export import ENGINES, render, write
from ..plan_label import parse_label
from ..report import right_size_json, right_size_text, search_json, search_text
from ..scenario import Scenario
from ..search.scale import right_size, underused
from ..search.search import search
from ._common import add_plan_args, add_scenario_args, plan_overrides, scenario_from_args


def _run(args) -> int:
    sc = scenario_from_args(args)
    pins = dict(sc.plan.to_dict()) if sc.plan and args.use_scenario_plan else {}
    pins.update(plan_overrides(args))
    if args.plan_label is not None:  # a label is a whole plan: its defaults are pinned too
        for k, v in parse_label(args.plan_label).to_dict().items():
            pins.setdefault(k, v)
    if args.export in ENGINE_SCHEDULES and "schedule" not in pins:
        pins["schedules"] = ENGINE_SCHEDULES[args.export]  # search what the engine can run
    r = search(sc.model, sc.cluster, sc.workload, pins, top_k=args.top,
               rerank_k=args.rerank, simulate=args.rerank > 0)
    fewer = None
    if r.top and underused(sc.cluster, sc.workload) and not args.no_right_size:
        fewer = right_size(sc.model, sc.cluster, sc.workload, r.top[0], pins)
    rendered = None
    if args.export:
        if not r.top:
            raise InputError("--export", args.export, "no plan fits, so there is nothing to export")
        if not args.out:
            raise InputError("--out", None, "required with --export (a directory)")
        best = Scenario(sc.model, sc.cluster, sc.workload, r.top[0].plan)
        rendered = render(best, args.export)  # refuses before anything is printed or written
    if args.json:
        print(json.dumps(search_json(sc, r) | {"right_size": right_size_json(sc, r, fewer)},
                         indent=2))
    else:
        print(search_text(sc, r))
        print("\n".join(right_size_text(sc, r, fewer)))
    if rendered is not None:
        for note in rendered.notes:
            print(f"note: {note}", file=sys.stderr)
        for path in write(rendered, args.out):
            print(f"wrote {path}", file=sys.stderr)
    return 0 if r.top else 1


# Pipeline schedules each engine can express (see meshplan/export/*.py for the refusals).
ENGINE_SCHEDULES = {
    "megatron": ("1f1b", "interleaved_1f1b"),
    "deepspeed": ("1f1b",),
    "torchtitan": ("gpipe", "1f1b", "interleaved_1f1b", "looped_bfs", "interleaved_zb", "zb_v",
                   "dualpipev"),
}


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
    p.add_argument("--no-right-size", action="store_true",
                   help="skip the search on fewer GPUs when the batch has fewer sequences "
                        "than GPUs")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--export", choices=ENGINES, help="write the winner's config for an engine")
    p.add_argument("--out", help="directory for --export")
    p.set_defaults(func=_run)
