"""Does the cost model order layouts the way the GPUs did? (issue 9's ranking target)

A runs CSV may carry an optional ``set`` column: rows with the same value are measured
layouts of one model on one cluster (one published sweep). Per set this reports

- ``spearman``: Spearman rank correlation between predicted and measured tokens/s per GPU
  over the rows with both (ties get their average rank; Pearson correlation of the ranks);
- ``best_gap``: how much slower (fraction) the measured throughput of the layout the model
  ranks first is than the measured best layout of the set. The layout ranked first is the
  fastest predicted among those predicted to fit in memory (the planner never proposes a
  plan it predicts out of memory); when none is predicted to fit, among all of them.

Rows without a measured throughput (runs that went out of memory) or without a prediction
are not ranked; ``rows`` counts the ranked ones. Target (issue 9): spearman >= 0.9 and
best_gap <= 3% on every set.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SPEARMAN_TARGET = 0.9   # issue 9
BEST_GAP_TARGET = 0.03  # issue 9


def average_ranks(xs: Sequence[float]) -> list[float]:
    """1-based ranks, ascending; tied values share the mean of the ranks they span."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        r = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = r
        i = j + 1
    return ranks


def _pearson(a: Sequence[float], b: Sequence[float]) -> float | None:
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    if saa == 0 or sbb == 0:
        return None
    return sab / math.sqrt(saa * sbb)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho with average ranks for ties; None when fewer than 2 pairs or when
    either side is constant (the correlation is undefined)."""
    if len(xs) != len(ys):
        raise ValueError(f"spearman: {len(xs)} values against {len(ys)}")
    if len(xs) < 2:
        return None
    return _pearson(average_ranks(xs), average_ranks(ys))


def set_report(results) -> dict:
    """{set name: {rows, spearman, best_gap, predicted_best, measured_best}} for the
    results (validate.RowResult) that carry a ``layout_set``; {} when none does."""
    groups: dict[str, list] = {}
    for r in results:
        if getattr(r, "layout_set", "") and r.error is None:
            groups.setdefault(r.layout_set, []).append(r)
    out: dict[str, dict] = {}
    for name in sorted(groups):
        rs = [r for r in groups[name] if r.measured_tokens_per_s_per_gpu
              and r.predicted_tokens_per_s_per_gpu is not None]
        d: dict = {"rows": len(rs), "spearman": None, "best_gap": None,
                   "predicted_best": None, "measured_best": None,
                   "predicted_oom": sum(bool(r.predicted_oom) for r in rs)}
        if rs:
            rho = spearman([r.predicted_tokens_per_s_per_gpu for r in rs],
                           [r.measured_tokens_per_s_per_gpu for r in rs])
            fits = [r for r in rs if not r.predicted_oom] or rs
            pick = max(fits, key=lambda r: r.predicted_tokens_per_s_per_gpu)
            best = max(rs, key=lambda r: r.measured_tokens_per_s_per_gpu)
            d.update(spearman=rho,
                     best_gap=1 - pick.measured_tokens_per_s_per_gpu
                     / best.measured_tokens_per_s_per_gpu,
                     predicted_best=pick.id, measured_best=best.id)
        out[name] = d
    return out


def meets_target(d: dict) -> bool | None:
    if d.get("spearman") is None or d.get("best_gap") is None:
        return None
    return d["spearman"] >= SPEARMAN_TARGET and d["best_gap"] <= BEST_GAP_TARGET


def format_lines(report: dict) -> list[str]:
    """The text block `meshplan validate` prints (nothing when no row has a set)."""
    if not report:
        return []
    lines = [f"ranking per layout set (target: Spearman >= {SPEARMAN_TARGET}, predicted best "
             f"within {BEST_GAP_TARGET:.0%} of the measured best)"]
    for name, d in report.items():
        rho = "-" if d["spearman"] is None else f"{d['spearman']:.3f}"
        gap = "-" if d["best_gap"] is None else f"{d['best_gap']:.1%}"
        ok = {True: "meets", False: "misses", None: "-"}[meets_target(d)]
        extra = (f"; predicted best {d['predicted_best']}, measured best {d['measured_best']}"
                 if d["predicted_best"] is not None else "")
        lines.append(f"  {name}: rows {d['rows']}, Spearman {rho}, predicted best slower than "
                     f"measured best by {gap} ({ok}){extra}")
    return lines
