"""``meshplan predict``: the full breakdown of one given plan."""

from __future__ import annotations

import json

from ..cost import estimate
from ..report import breakdown_text, estimate_json, scenario_line
from ._common import add_plan_args, add_scenario_args, plan_from_args, scenario_from_args


def _run(args) -> int:
    sc = scenario_from_args(args)
    plan = plan_from_args(args, sc)
    e = estimate(sc.model, sc.cluster, sc.workload, plan)
    if args.json:
        print(json.dumps({"scenario": scenario_line(sc)} | estimate_json(e), indent=2))
    else:
        print(scenario_line(sc))
        print("plan: " + plan.describe())
        print("\n".join(breakdown_text(e)))
    return 0


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict step time, throughput and memory of one plan")
    add_scenario_args(p)
    add_plan_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run)
