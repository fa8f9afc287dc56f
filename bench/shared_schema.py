"""A runs CSV cut down to the shared schema: the columns of ../shared/validation/calibration.csv
(plus its two optional cluster columns), every other column dropped.

Published runs that meshplan is judged on come in that schema, so the engine columns our own
held-out file adds (fp8_recipe, moe_dispatcher, ep_overlap, tp_comm_overlap, attention_kernel,
optimizer and gradient dtypes, recompute modules, ...) are not there: what a row leaves blank
is predicted with the named framework's defaults. Validating the cut-down file shows the
accuracy such rows get.

    PYTHONPATH=$PWD python bench/shared_schema.py bench/data/heldout_runs.csv -o /tmp/h.csv
    meshplan validate /tmp/h.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "validation" / "calibration.csv"
# optional cluster columns the shared README lists (not in calibration.csv's header)
OPTIONAL = ("gpus_per_node", "nic_gbps_per_gpu")


def shared_columns(path: Path = SHARED) -> list[str]:
    with open(path, newline="") as f:
        header = next(csv.reader(f))
    return header + [c for c in OPTIONAL if c not in header]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--keep", default="", help="comma-separated extra columns to keep (e.g. set)")
    a = ap.parse_args()
    if not SHARED.exists():
        sys.exit(f"{SHARED} is absent: the shared schema comes from its header")
    keep = shared_columns() + [c for c in a.keep.split(",") if c]
    with open(a.csv, newline="") as f:
        reader = csv.DictReader(f)
        cols = [c for c in reader.fieldnames if c in keep]
        rows = [{c: r.get(c, "") for c in cols} for r in reader]
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows, {len(cols)} columns kept -> {a.out}")


if __name__ == "__main__":
    main()
