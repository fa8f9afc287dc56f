"""``meshplan validate CSV``: predict published runs and print the error table."""

from __future__ import annotations

import json
import math

from ..progress import activity
from ..validate import validate


def _fmt(x, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _rows(path: str) -> str:
    """The number of data rows, for the progress line ('?' when unreadable: validate says why)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            return str(max(0, sum(1 for line in f if line.strip()) - 1))
    except OSError:
        return "?"


def _run(args) -> int:
    with activity(f"validating {_rows(args.csv)} published runs", quiet=args.json):
        results, summary = validate(args.csv, with_search_best=not args.no_search)
    if args.json:
        print(json.dumps({"rows": [r.to_json() for r in results], "summary": summary}, indent=2))
        return 0
    print(f"{'id':>4} {'tr':<2} {'model':<22} {'GPUs':<24}{'measured':>10}{'predicted':>10}"
          f"{'err':>8}{'mem meas':>9}{'mem pred':>9}{'err':>8}  plan (chosen knobs)")
    for r in results:
        if r.error:
            print(f"{r.id:>4} {r.trust:<2} {r.model[:22]:<22} {r.gpus:<24}  error: {r.error}")
            continue
        print(f"{r.id:>4} {r.trust:<2} {r.model[:22]:<22} {r.gpus:<24}"
              f"{_fmt(r.measured_tokens_per_s_per_gpu, '10.1f')}"
              f"{_fmt(r.predicted_tokens_per_s_per_gpu, '10.1f')}"
              f"{_fmt(r.tokens_error and r.tokens_error * 100, '+7.1f')}%"
              f"{_fmt(r.measured_peak_mem_gib, '9.1f')}{_fmt(r.predicted_peak_mem_gib, '9.1f')}"
              f"{_fmt(r.memory_error and r.memory_error * 100, '+7.1f')}%  {r.plan}")
    s = summary
    print()
    print(f"rows {s['rows']}, predicted {s['predicted']}, errors {s['errors']}")
    if s["tokens_median_abs_error"] is not None:
        print(f"tokens/s per GPU, trust A/B ({s['tokens_rows_trust_ab']} rows): median |error| "
              f"{s['tokens_median_abs_error']:.1%}, 90th percentile {s['tokens_p90_abs_error']:.1%}")
    if s["memory_median_abs_error"] is not None:
        print(f"peak memory, trust A/B ({s['memory_rows_trust_ab']} rows): median |error| "
              f"{s['memory_median_abs_error']:.1%}, 90th percentile {s['memory_p90_abs_error']:.1%}")
    print(f"out-of-memory verdicts agreeing: {s['oom_rows_agreeing']}")
    if s["search_compared"]:
        print(f"search's best plan predicted at least as fast as the published plan: "
              f"{s['search_at_least_as_fast']} of {s['search_compared']} rows")
    return 0


def register(sub) -> None:
    p = sub.add_parser("validate", help="predict published training runs and report errors")
    p.add_argument("csv", help="calibration CSV (schema of shared/validation/README.md)")
    p.add_argument("--no-search", action="store_true",
                   help="skip searching each row's best plan (faster)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run)
