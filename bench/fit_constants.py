"""Fit the few end-to-end constants of the cost model and report how well they carry over.

Every kernel-level constant in meshplan/cost/efficiency.py comes from a microbenchmark or a
published kernel table. Three remain that only whole training steps show, and they are
fitted here on the calibration rows (trust A/B) and nothing else:

- SUSTAINED_TENSOR: share of the tensor-core rate at the clock held under load that a whole
  step sustains (the held clock itself, KernelEfficiency.sustained_clock, is measured, not
  fitted: efficiency.NVIDIA_SUSTAINED_CLOCK);
- KERNEL_GAP_S: idle time per kernel launch on the critical path;
- POWER_CLOCK_EXPONENT: how clocks follow a board power cap.

The score is median |error| + 0.5 x 90th percentile of tokens/s per GPU. Every grid point
is predicted once for every row; the fits below only select among stored errors, so the
leave-one-source-out loop (fit on all sources but one, predict the left-out one) is cheap.

    python bench/fit_constants.py ../shared/validation/calibration.csv bench/data/heldout_runs.csv

The held-out CSV is only ever predicted at the constants chosen on the calibration rows.
"""

from __future__ import annotations

import itertools
import re
import statistics

from meshplan.cost import compute, efficiency as E, layer
from meshplan.validate import predict_row, read_rows

GRID = {
    # the former grid of the whole derating (0.60-0.90 of the burst-table rate; every
    # calibration row is NVIDIA) over NVIDIA's held clock, capped at 1 (a share)
    "SUSTAINED_TENSOR": [min(1.0, g / E.NVIDIA_SUSTAINED_CLOCK)
                         for g in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85)],
    "KERNEL_GAP_S": [0.0, 4e-6, 8e-6, 16e-6, 32e-6],
    "POWER_CLOCK_EXPONENT": [1 / 3, 0.5, 0.75, 1.0],  # physical bounds 1/3 and 1 (efficiency.py)
}


def source_group(source: str) -> str:
    """The document a row comes from (tables of one document form one source)."""
    s = re.sub(r"\s+Table \d+.*$", "", source.strip())
    return s.split("(")[0].strip() or s


def _set(values: dict) -> None:
    for k, v in values.items():
        setattr(E, k, v)
    compute.device.cache_clear()
    layer.layer_cost.cache_clear()


def _predict(rows: list[dict]) -> list:
    return [predict_row(r, with_search_best=False) for r in rows]


def _errors(rows: list[dict]) -> list[float | None]:
    return [res.tokens_error for res in _predict(rows)]


def _score(errs: list[float]) -> float:
    a = sorted(abs(e) for e in errs)
    if not a:
        return float("inf")
    p90 = a[min(len(a) - 1, int(round(0.9 * (len(a) - 1))))]
    return statistics.median(a) + 0.5 * p90


def _summary(errs: list[float]) -> str:
    a = sorted(abs(e) for e in errs if e is not None)
    if not a:
        return "n/a"
    p90 = a[min(len(a) - 1, int(round(0.9 * (len(a) - 1))))]
    return f"median {statistics.median(a):6.1%}  p90 {p90:6.1%}  (n={len(a)})"


def graded_ab(row: dict) -> bool:
    """Whether a row is fitted on: trust A or B, any case, or not graded (blank), the rows
    `meshplan validate` counts among its A/B figures. Grade C is never fitted on."""
    return row.get("trust", "").strip().upper() in ("A", "B", "")


def _fit_mask(rows: list[dict]) -> list[bool]:
    return [graded_ab(r) for r in rows]


def loso_predictions(rows: list[dict]) -> dict[str, float]:
    """Row id -> tokens/s per GPU predicted with the constants fitted on every other source
    (trust A/B rows only, the same grid and score as ``main``): the cross-validated
    predictions bench/fit_residuals.py turns into interval widths."""
    saved = {k: getattr(E, k) for k in GRID}
    points = [dict(zip(GRID, vals)) for vals in itertools.product(*GRID.values())]
    groups = [source_group(r.get("source", "")) for r in rows]
    fit = _fit_mask(rows)
    results = []
    try:
        for p in points:
            _set(p)
            results.append(_predict(rows))
    finally:
        _set(saved)
    out: dict[str, float] = {}
    for g in set(groups):
        i = min(range(len(points)), key=lambda i: _score(
            [res.tokens_error for res, x, m in zip(results[i], groups, fit)
             if m and x != g and res.tokens_error is not None]))
        for res, x in zip(results[i], groups):
            if x == g and res.predicted_tokens_per_s_per_gpu is not None:
                out[res.id] = res.predicted_tokens_per_s_per_gpu
    return out


def main(calib: str, heldout: str | None = None) -> None:
    rows = [r for r in read_rows(calib) if graded_ab(r)]
    if not rows:  # a fit on no rows printed the grid's first point as "fitted"
        raise SystemExit(f"fit_constants.py: {calib} has no trust A/B (or ungraded) rows to "
                         "fit on")
    groups = [source_group(r.get("source", "")) for r in rows]
    points = [dict(zip(GRID, vals)) for vals in itertools.product(*GRID.values())]
    table = []  # per grid point: per-row errors
    for p in points:
        _set(p)
        table.append(_errors(rows))

    def best(mask: list[bool]) -> int:
        return min(range(len(points)), key=lambda i: _score(
            [e for e, m in zip(table[i], mask) if m and e is not None]))

    all_i = best([True] * len(rows))
    print("fitted on all calibration sources:", points[all_i])
    print(f"  in-sample        {_summary(table[all_i])}")
    loso: list[float | None] = [None] * len(rows)
    print("\nper source: in-sample vs leave-one-source-out (fit without the source)")
    for g in sorted(set(groups)):
        i = best([x != g for x in groups])
        idx = [j for j, x in enumerate(groups) if x == g]
        for j in idx:
            loso[j] = table[i][j]
        ins = [table[all_i][j] for j in idx]
        out = [table[i][j] for j in idx]
        print(f"  {g[-70:]:<70} in {_summary(ins)}\n  {'':<70} out {_summary(out)}  fit {points[i]}")
    print(f"\nall rows, leave-one-source-out: {_summary(loso)}")
    _set(points[all_i])
    if heldout:
        hrows = [r for r in read_rows(heldout) if graded_ab(r)]
        herr = _errors(hrows)
        print(f"held-out ({heldout}) at the fitted constants: {_summary(herr)}")
        hg = [source_group(r.get("source", "")) for r in hrows]
        for g in sorted(set(hg)):
            print(f"  {g[-70:]:<70} {_summary([e for e, x in zip(herr, hg) if x == g])}")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("calibration", nargs="?", default="../shared/validation/calibration.csv",
                    help="runs CSV the constants are fitted on (default: %(default)s)")
    ap.add_argument("heldout", nargs="?", default=None,
                    help="runs CSV predicted once at the fitted constants, never fitted on")
    a = ap.parse_args()
    main(a.calibration, a.heldout)
