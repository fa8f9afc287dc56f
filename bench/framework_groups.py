"""Tokens/s error per framework: rows, signed median error and median |error|, from the
``meshplan validate --json`` output of a runs CSV (the JSON rows carry no framework: it is
read from the CSV by row id).

    meshplan validate bench/data/heldout_runs.csv --json > /tmp/v.json
    PYTHONPATH=$PWD python bench/framework_groups.py bench/data/heldout_runs.csv /tmp/v.json

Error is predicted / measured - 1, as validate prints it (negative: predicted too slow).
Rows without a tokens/s error (not scored, no measurement) are left out; ``--trust AB``
keeps the trust A/B rows only, as validate's headline does.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict


def groups(runs_csv: str, validate_json: dict, trust: str = "") -> dict[str, list[float]]:
    """framework -> the tokens/s errors of its rows."""
    with open(runs_csv, newline="") as f:
        framework = {r["id"]: (r.get("framework") or "").strip().lower() or "(blank)"
                     for r in csv.DictReader(f)}
    out: dict[str, list[float]] = defaultdict(list)
    for row in validate_json["rows"]:
        err = row.get("tokens_error")
        if err is None or (trust and str(row.get("trust", "")) not in trust):
            continue
        out[framework.get(row["id"], "(not in csv)")].append(float(err))
    return dict(out)


def table(g: dict[str, list[float]]) -> str:
    lines = [f"{'framework':<14} {'rows':>5} {'signed median':>14} {'median |error|':>15}"]
    every = [e for errs in g.values() for e in errs]
    for name, errs in sorted(g.items(), key=lambda kv: (-len(kv[1]), kv[0])) + [("all", every)]:
        if not errs:
            continue
        lines.append(f"{name:<14} {len(errs):>5} {statistics.median(errs):>+13.1%} "
                     f"{statistics.median(abs(e) for e in errs):>14.1%}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="the runs CSV that was validated")
    ap.add_argument("json", nargs="?", default="-",
                    help="meshplan validate --json output (default: stdin)")
    ap.add_argument("--trust", default="", help="keep only these trust levels, e.g. AB")
    a = ap.parse_args(argv)
    data = json.load(sys.stdin if a.json == "-" else open(a.json))
    print(table(groups(a.csv, data, a.trust)))


if __name__ == "__main__":
    main()
