"""``meshplan validate-serve CSV``: predict published serving runs and print the errors."""

from __future__ import annotations

import json

from ..serve.validate import validate_serving


def _pct(x) -> str:
    return "      -" if x is None else f"{x * 100:+6.1f}%"


def _num(x, spec) -> str:
    """``x`` in ``spec`` ("15.0f"); a missing figure is a "-" in the same width, so the
    columns stay apart."""
    return "-".rjust(int(spec.split(".")[0])) if x is None else format(x, spec)


def _run(args) -> int:
    rows, s = validate_serving(args.csv, args.trust)
    if args.json:
        print(json.dumps({"rows": [r.to_json() for r in rows], "summary": s}, indent=2))
        return 0
    print(f"{'id':>4} {'tr':<2} {'model':<16} {'GPUs':<17} {'load':<16}{'tok/s/GPU meas':>15}"
          f"{'pred':>9}{'err':>8}{'TTFT ms meas':>13}{'pred':>9}{'err':>8}{'TPOT ms meas':>13}"
          f"{'pred':>7}{'err':>8}")
    for r in rows:
        if r.error:
            print(f"{r.id:>4} {r.trust:<2} {r.model[:16]:<16} {r.gpus:<17} error: {r.error}")
            continue
        print(f"{r.id:>4} {r.trust:<2} {r.model[:16]:<16} {r.gpus:<17} {r.load:<16}"
              f"{_num(r.measured_tps, '15.0f')}{_num(r.predicted_tps, '9.0f')} {_pct(r.err('tps'))}"
              f"{_num(r.measured_ttft_ms, '13.0f')}{_num(r.predicted_ttft_ms, '9.0f')} {_pct(r.err('ttft_ms'))}"
              f"{_num(r.measured_tpot_ms, '13.1f')}{_num(r.predicted_tpot_ms, '7.1f')} {_pct(r.err('tpot_ms'))}")
    print(f"\nrows {s['rows']}, errors {s['errors']}; trust {args.trust} rows:")
    for k, name in (("tps", "output tokens/s per GPU"), ("ttft_ms", "TTFT"), ("tpot_ms", "TPOT")):
        m = s[k]
        if m["n"]:
            print(f"  {name}: {m['n']} rows, median |error| {m['median_abs_error']:.1%}, 90th"
                  f" percentile {m['p90_abs_error']:.1%}")
    print("by engine and GPU vendor (rows, median |error|, 90th percentile, median signed):")
    for group, g in s["by_group"].items():
        parts = [f"{short} {m['n']}: {m['median_abs_error']:.1%} / {m['p90_abs_error']:.1%}"
                 f" / {m['median_signed_error']:+.1%}"
                 for k, short in (("tps", "tok/s"), ("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"))
                 if (m := g[k])["n"]]
        if parts:
            print(f"  {group:<18} " + "; ".join(parts))
    for rid, n in s["duplicate_ids"].items():
        print(f"note: id {rid!r} names {n} rows (each is predicted and scored; give each row "
              "its own id to tell them apart)")
    for c in s["columns_not_read"]:
        print(f"note: column {c['column']!r} is not read (not a column of the serving schema, "
              f"so its figures are not scored): did you mean {c['did_you_mean']}?")
    return 0


def register(sub) -> None:
    p = sub.add_parser("validate-serve", help="predict published serving runs and report errors")
    p.add_argument("csv", help="serving CSV (schema in meshplan/serve/validate.py), e.g."
                   " bench/data/serving_runs.csv")
    p.add_argument("--trust", default="AB", help="trust levels in the summary (default AB)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run)
