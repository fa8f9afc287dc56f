"""``meshplan plan``: search the plan space and show the best plans and why the winner wins."""

from __future__ import annotations

import json

from ..report import search_json, search_text
from ..search.search import search
from ._common import add_plan_args, add_scenario_args, plan_overrides, scenario_from_args


def _run(args) -> int:
    sc = scenario_from_args(args)
    pins = dict(sc.plan.to_dict()) if sc.plan and args.use_scenario_plan else {}
    pins.update(plan_overrides(args))
    r = search(sc.model, sc.cluster, sc.workload, pins, top_k=args.top)
    r = rerank_with_simulator(sc, r, args)
    if args.json:
        print(json.dumps(search_json(sc, r), indent=2))
    else:
        print(search_text(sc, r))
    return 0 if r.top else 1


def rerank_with_simulator(sc, r, args):
    """Hook for the pipeline simulator (re-ranks the top candidates when it is present)."""
    return r


def register(sub) -> None:
    p = sub.add_parser("plan", help="find the best parallel plans for a model on a cluster")
    add_scenario_args(p)
    add_plan_args(p, " (pin any of them; the rest is searched)")
    p.add_argument("--top", type=int, default=5, help="how many plans to show (default 5)")
    p.add_argument("--use-scenario-plan", action="store_true",
                   help="pin the knobs of the scenario file's [plan] table")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run)
