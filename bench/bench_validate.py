"""How long `meshplan validate` takes on 100 rows.

    python bench/bench_validate.py [../shared/validation/calibration.csv] [--jobs N ...]

The 100 rows are distinct scenarios (no two share model, cluster and workload, so the
search cache cannot help across them): the calibration file's rows, then the same rows with
the global batch doubled (a different workload: twice the micro-batches), repeated until
there are 100. Prints wall time per setting: with and without the free search (the search's
own best plan per row), for each --jobs value given (default: 1 and the CPU count), and with
--jobs 1 the CPU time of this process (on a shared machine: what one core spends).
--no-free-search skips the setting with the free search.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from meshplan.validate import validate  # noqa: E402

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "validation" / "calibration.csv"


def hundred_rows(src: Path, out: Path) -> int:
    with open(src, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    cols = list(rows[0])
    made, k = [], 0
    while len(made) < 100:
        for r in rows:
            if len(made) == 100:
                break
            r = dict(r)
            r["global_batch_seqs"] = str(int(r["global_batch_seqs"]) * 2 ** k)
            r["id"] = f"{r['id']}x{2 ** k}"
            made.append(r)
        k += 1
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        w.writerows(made)
    return len(made)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?", default=str(DEFAULT))
    ap.add_argument("--jobs", type=int, nargs="*", default=[1, os.cpu_count() or 1])
    ap.add_argument("--no-free-search", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "hundred.csv"
        n = hundred_rows(Path(a.csv), path)
        print(f"{n} rows, {os.cpu_count()} CPUs")
        for jobs in dict.fromkeys(a.jobs):
            for search_best in (False,) if a.no_free_search else (False, True):
                t0, c0 = time.perf_counter(), time.process_time()
                results, s = validate(path, with_search_best=search_best, jobs=jobs)
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
                print(f"jobs {jobs}, {'with' if search_best else 'without'} the free search: "
                      f"{dt:6.1f} s" + (f", cpu {cpu:6.1f} s" if jobs == 1 else "")
                      + f"  ({s['predicted']} predicted, {s['errors']} not scored)",
                      flush=True)


if __name__ == "__main__":
    main()
