"""``meshplan validate CSV``: predict published runs and print the error table.

Rows that cannot be predicted or scored are listed with their reason and left out of the
statistics; the exit code is 1 when any row failed (2 when the file itself is unusable).
"""

from __future__ import annotations

import json
import math

from .. import profile
from ..errors import require_nonneg_int
from ..progress import activity
from ..ranking import format_lines
from ..terminal import say
from ..validate import validate
from ._profile import add_profile_arg, apply_profile_arg


def _fmt(x, spec: str) -> str:
    width = int(spec.split(".")[0] or 0)
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-".rjust(width)
    return format(x, spec)


def _err(x) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _rows(path: str) -> str:
    """The number of data rows, for the progress line ('?' when unreadable: validate says why)."""
    from ..inputs import MAX_INPUT_BYTES
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            text = f.read(MAX_INPUT_BYTES + 1)  # /dev/zero: not to the end
            return str(max(0, sum(1 for line in text.splitlines() if line.strip()) - 1))
    except OSError:
        return "?"


def _run(args) -> int:
    require_nonneg_int("jobs", args.jobs)
    apply_profile_arg(args)
    search_best = args.search_best and not args.no_search
    with activity(f"validating {_rows(args.csv)} published runs", quiet=args.json):
        results, summary = validate(args.csv, with_search_best=search_best, jobs=args.jobs)
    if args.json:
        print(json.dumps({"rows": [r.to_json() for r in results], "summary": summary}, indent=2))
        return 1 if summary["errors"] else 0
    say(f"{'id':>4} {'tr':<2} {'model':<22} {'GPUs':<24}{'measured':>10}{'predicted':>10}"
          f"{'p10-p90':>16}{'err':>8}{'mem meas':>9}{'mem pred':>9}{'err':>8}  plan (chosen knobs)")
    for r in results:
        if r.error:
            continue
        iv = r.tokens_p10_p90
        ivs = f"{iv[0]:.0f}-{iv[1]:.0f}" if iv else "-"
        flag = ("  [does not fit]" if r.predicted_oom else
                "  [may not fit]" if r.predicted_may_not_fit else "")
        say(f"{r.id:>4} {r.trust:<2} {r.model[:22]:<22} {r.gpus[:23]:<24}"
              f"{_fmt(r.measured_tokens_per_s_per_gpu, '10.1f')}"
              f"{_fmt(r.predicted_tokens_per_s_per_gpu, '10.1f')}{ivs:>16}"
              f"{_err(r.tokens_error):>8}"
              f"{_fmt(r.measured_peak_mem_gib, '9.1f')}{_fmt(r.predicted_peak_mem_gib, '9.1f')}"
              f"{_err(r.memory_error):>8}  {r.plan}{flag}")
        for note in r.notes:
            say(f"{'':>8}note: {note}")
    s = summary
    if s["errors"]:
        say()
        say(f"rows not scored ({s['errors']}):")
        for r in results:
            if r.error:
                say(f"{r.id:>4} {r.model[:22]:<22} {r.error}")
    say()
    for rid, n in s.get("duplicate_ids", {}).items():
        say(f"note: id {rid!r} names {n} rows (each is predicted and scored; give each row "
              "its own id to tell them apart)")
    for c in s.get("columns_not_read", []):
        say(f"note: column {c['column']!r} is not read (not a column of the schema, so its "
              f"figures are not scored): did you mean {c['did_you_mean']}?")
    say(f"rows {s['rows']}, predicted {s['predicted']}, not scored {s['errors']}")
    if s["tokens_median_abs_error"] is not None:
        say(f"tokens/s per GPU, trust A/B ({s['tokens_rows_trust_ab']} rows): median |error| "
              f"{s['tokens_median_abs_error']:.1%}, 90th percentile {s['tokens_p90_abs_error']:.1%}")
    if s["memory_median_abs_error"] is not None:
        say(f"peak memory, trust A/B ({s['memory_rows_trust_ab']} rows): median |error| "
              f"{s['memory_median_abs_error']:.1%}, 90th percentile {s['memory_p90_abs_error']:.1%}")
    if s["memory_rows_all"] > s["memory_rows_trust_ab"]:  # grade-C rows: shown apart, never alone
        say(f"peak memory, every trust grade ({s['memory_rows_all']} rows): median |error| "
              f"{s['memory_median_abs_error_all']:.1%}, 90th percentile "
              f"{s['memory_p90_abs_error_all']:.1%}")
    if s["tokens_interval_coverage"] is not None:
        say(f"10-90% interval coverage (target ~80%): tokens/s {_pct(s['tokens_interval_coverage'])}"
              f" of {s['tokens_interval_rows']} rows (residual model refitted without each "
              f"source: {_pct(s['tokens_interval_coverage_loso'])})"
              + (f", peak memory {_pct(s['memory_interval_coverage'])} of "
                 f"{s['memory_interval_rows']} rows" if s["memory_interval_rows"] else "")
              + (f" (memory residual model refitted without each source: "
                 f"{_pct(s['memory_interval_coverage_loso'])} of "
                 f"{s['memory_interval_rows_loso']} rows)"
                 if s.get("memory_interval_rows_loso") else ""))
    say(f"out-of-memory verdicts agreeing: {s['oom_rows_agreeing']} of {s['oom_rows']}"
          + (f"; runs that went out of memory flagged (does not fit / may not fit): "
             f"{s['oom_flagged']} of {s['oom_measured']}" if s["oom_measured"] else "")
          + (f"; 'may not fit': {s['may_not_fit']}" if s["may_not_fit"] else ""))
    if s["search_compared"]:
        say(f"search's best plan predicted at least as fast as the published plan: "
              f"{s['search_at_least_as_fast']} of {s['search_compared']} rows")
    if s["per_source"]:
        consts = "the profile's constants" if profile.active() else "shipped constants"
        say(f"per source: rows, median |error| tokens/s ({consts}), 10-90% coverage "
              "with the residual model left out for the source")
        for src, d in s["per_source"].items():
            say(f"  {d.get('rows', 0):>3}  {_pct(d.get('tokens_median_abs_error')):>6}  "
                  f"{_pct(d.get('loso_interval_coverage')):>6}  {src}")
    if s.get("pools"):
        _print_pools(s["pools"])
    for line in format_lines(s["ranking"]):
        say(line)
    return 1 if s["errors"] else 0


def _print_pools(p: dict) -> None:
    """Mixed-GPU rows (validate_pools.py): per source, and the throughput ratios."""
    say(f"mixed GPU pools: {p['scored']} of {p['rows']} rows scored, tokens/s per GPU "
          f"median |error| {_pct(p['tokens_median_abs_error'])}")
    for src, d in p["per_source"].items():
        best = (f", pool search's best at least as fast as the published plan: "
                f"{d['search_at_least_as_fast']} of {d['search_compared']}"
                if d["search_compared"] else "")
        ratio = (f", ratio to baseline row median |error| {_pct(d['ratio_median_abs_error'])} "
                 f"({d['ratio_rows']} rows)" if d["ratio_rows"] else "")
        say(f"  {d['rows']:>3}  median |error| {_pct(d['tokens_median_abs_error'])} "
              f"(median signed {_err(d['tokens_median_error'])}){ratio}{best}  {src}")
    for r in p["ratios"]:
        if "error_ratio" in r:
            say(f"  ratio {r['id']} / {r['baseline_id']}: measured {r['measured']:.3f}, "
                  f"predicted {r['predicted']:.3f} ({_err(r['error_ratio'])})")
        else:
            say(f"  ratio {r['id']} / {r['baseline_id']}: {r['error']}")


def register(sub) -> None:
    p = sub.add_parser("validate", help="predict published training runs and report errors")
    p.add_argument("csv", help="runs CSV (its columns: docs/validation.md)")
    p.add_argument("--search-best", action="store_true",
                   help="also search each row's best plan and compare it with the published "
                        "one (a full search per distinct scenario: about 0.7 s a row)")
    p.add_argument("--no-search", action="store_true",
                   help="do not search each row's best plan (the default; kept for scripts)")
    p.add_argument("--jobs", type=int, default=0,
                   help="worker processes (default 0: one per CPU; 1: in this process)")
    add_profile_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run)
