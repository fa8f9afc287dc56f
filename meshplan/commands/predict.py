"""``meshplan predict``: the full breakdown of one given plan."""

from __future__ import annotations

import json

from ..cost import estimate
from ..report import breakdown_text, estimate_json, scenario_line
from ..uncertainty import interval
from .. import engine_spread
from ._common import (add_engine_arg, add_plan_args, add_scenario_args, check_engine,
                      engine_of, plan_from_args, plan_stated, scenario_from_args)
from ._profile import add_profile_arg, apply_profile_arg, check_generation


def _run(args) -> int:
    prof = apply_profile_arg(args)
    sc = scenario_from_args(args)
    check_generation(prof, sc.cluster.gpu)
    plan = plan_from_args(args, sc)
    check_engine(engine_of(args), sc, plan)
    e = estimate(sc.model, sc.cluster, sc.workload, plan)
    iv = interval(e, sc.model, sc.cluster, framework=sc.workload.framework)
    # MoE engine knobs the plan does not name: widened by the other settings (engine_spread)
    blank = engine_spread.blank_knobs_of(plan, sc.model, plan_stated(args, sc), sc.workload.framework)
    iv = engine_spread.widen(iv, engine_spread.spread(e, sc.model, sc.cluster, sc.workload, blank))
    if args.json:
        print(json.dumps({"scenario": scenario_line(sc)} | estimate_json(e, iv), indent=2))
    else:
        print(scenario_line(sc))
        print("plan: " + plan.describe())
        print("\n".join(breakdown_text(e, iv)))
    return 0


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict step time, throughput and memory of one plan")
    add_scenario_args(p)
    add_plan_args(p)
    add_profile_arg(p)
    add_engine_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run)
