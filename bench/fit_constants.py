"""How the constants in meshplan/cost/efficiency.py were chosen: a coarse coordinate search
over physically plausible grids, scored on the whole calibration file at once
(median |error| + 0.5 x 90th percentile of tokens/s per GPU, trust A/B rows).

    python bench/fit_constants.py ../shared/validation/calibration.csv

It prints the best value of each constant per pass; copy them by hand into efficiency.py
(the fit is a tool for the maintainer, not something the planner runs).
"""

from __future__ import annotations

import dataclasses
import sys

from meshplan.cost import collectives, compute, efficiency as E, layer, step
from meshplan.validate import predict_row, read_rows, summarize

GRIDS = [
    ("hopper", "matmul_bf16", [0.55, 0.6, 0.65, 0.7, 0.75, 0.8]),
    ("hopper", "matmul_fp8", [0.4, 0.45, 0.5, 0.55, 0.6, 0.66]),
    ("hopper", "attention_fwd", [0.3, 0.4, 0.5, 0.6]),
    ("hopper", "attention_bwd", [0.25, 0.3, 0.4, 0.5]),
    ("ampere", "matmul_bf16", [0.6, 0.65, 0.7, 0.75, 0.8, 0.85]),
    ("ampere", "attention_fwd", [0.3, 0.4, 0.5, 0.6]),
    ("ampere", "attention_bwd", [0.25, 0.3, 0.4, 0.5]),
    ("hopper", "matmul_half_dim", [64, 128, 256, 384]),
    ("ampere", "matmul_half_dim", [64, 128, 256, 384]),
    ("power", "exponent", [1 / 3, 0.5, 0.75, 1.0]),
    ("network", "tp_overlap", [0.0, 0.3, 0.5, 0.65, 0.8]),
    ("network", "alltoall_scaleout", [0.3, 0.45, 0.65]),
]


def _set(group: str, name: str, value: float) -> None:
    if group == "power":
        E.POWER_CLOCK_EXPONENT = value
    elif group == "network":
        E.NETWORK = dataclasses.replace(E.NETWORK, **{name: value})
        collectives.NETWORK = layer.NETWORK = step.NETWORK = E.NETWORK
    else:
        E.EFFICIENCY[group] = dataclasses.replace(E.EFFICIENCY[group], **{name: value})


def _score(rows: list[dict]) -> tuple[float, dict]:
    compute.device.cache_clear()
    layer.layer_cost.cache_clear()
    s = summarize([predict_row(r, with_search_best=False) for r in rows])
    return s["tokens_median_abs_error"] + 0.5 * s["tokens_p90_abs_error"], s


def main(path: str, passes: int = 2) -> None:
    rows = [r for r in read_rows(path) if r.get("trust", "").strip() in ("A", "B")]
    for _ in range(passes):
        for group, name, grid in GRIDS:
            scored = []
            for v in grid:
                _set(group, name, v)
                scored.append((_score(rows)[0], v))
            best, v = min(scored)
            _set(group, name, v)
            _, s = _score(rows)
            print(f"{group:<8}{name:<20}{v:<8.3g} median {s['tokens_median_abs_error']:.3f} "
                  f"p90 {s['tokens_p90_abs_error']:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation/calibration.csv")
