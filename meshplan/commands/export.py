"""``meshplan export PLAN.toml --to ENGINE --out DIR``: write a plan as an engine's config.

PLAN.toml is a scenario file with a [plan] table (what ``meshplan export --to meshplan``
writes); scenario and plan flags may be given instead of it, or on top of it.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from ..errors import InputError
from ..export import ENGINES, render, write
from ._common import (add_engine_arg, add_plan_args, add_scenario_args, check_engine,
                      engine_of, plan_from_args, plan_stated, scenario_from_args)
from ._profile import add_profile_arg, apply_profile_arg, check_generation


def _export(args) -> int:
    if args.plan_file:
        if args.scenario and args.scenario != args.plan_file:
            raise InputError("--scenario", args.scenario, "give the plan file once (PLAN or --scenario)")
        args.scenario = args.plan_file
    if args.engine and args.to != "meshplan" and args.engine != args.to:
        raise InputError("--engine", args.engine, f"must match --to ({args.to}) or be left out")
    prof = apply_profile_arg(args)
    sc = scenario_from_args(args)  # as --engine (or --to ENGINE) runs it: engines.run_by
    check_generation(prof, sc.cluster.gpu)
    # the scenario predict reads, with its plan: what the file stated (plan_stated,
    # cluster_stated), its pool and its profile travel with it (they were dropped)
    sc = replace(sc, plan=plan_from_args(args, sc), plan_stated=frozenset(plan_stated(args, sc)))
    check_engine(engine_of(args), sc, sc.plan)
    rendered = render(sc, args.to)
    for path in write(rendered, args.out):
        print(path)
    for note in rendered.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser("export", help="write a plan as Megatron-LM / torchtitan / DeepSpeed / "
                       "meshplan configuration", description=__doc__.splitlines()[0])
    p.add_argument("plan_file", nargs="?", metavar="PLAN.toml",
                   help="scenario file with a [plan] table")
    p.add_argument("--to", required=True, choices=ENGINES, help="engine to write for")
    p.add_argument("--out", required=True, help="directory for the files (created if needed)")
    add_scenario_args(p)
    add_plan_args(p, " (override the file's [plan])")
    add_engine_arg(p)  # with --to meshplan: plan.toml predicts the plan as that engine runs it
    add_profile_arg(p)
    p.set_defaults(func=_export)
