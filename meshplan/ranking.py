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

Measurement noise. A runs CSV may carry an optional ``measured_noise`` column: the relative
run-to-run standard deviation of one measurement (0.01 = 1%), as its source states it or as
the source's repeated runs show (bench/data/make_layout_sets.py derives it for the BLOOM
sweeps from the configurations the source timed twice). Two layouts measured 0.5% apart
with 1% noise are not ordered by the measurement, so neither may be a ranking's error. The
report then also gives, without dropping a row:

- ``spearman_noise``: Spearman's rho with the measured side replaced by each layout's
  expected rank under the noise. With ln(measured_i) ~ N(ln m_i, s_i^2) independent,
  E[rank_i] = 1 + sum_{j != i} P(Y_j < Y_i) = 1 + sum_j Phi((ln m_i - ln m_j) /
  sqrt(s_i^2 + s_j^2)). Without noise P is 1, 1/2 or 0, i.e. exactly the average ranks of
  ties (so it equals ``spearman``); near-ties share rank in proportion to how resolvable
  they are, the same way exact ties share the mean rank.
- ``best_gap_allowance``: how far the best gap may exceed 3% before the excess is larger
  than the noise: 1.645 standard deviations of the difference of two noisy measurements
  (one-sided 95%), 1.645 * sqrt(s_pick^2 + s_best^2); 0 without noise.

``meets_target`` judges ``spearman_noise`` and ``best_gap - best_gap_allowance``; the text
report prints the raw figures beside them. Without a noise column nothing changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SPEARMAN_TARGET = 0.9   # issue 9
BEST_GAP_TARGET = 0.03  # issue 9
ONE_SIDED_95_Z = 1.6448536269514722  # standard normal quantile at 0.95


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


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def expected_ranks(xs: Sequence[float], noise: Sequence[float]) -> list[float]:
    """1-based expected ranks of positive values each measured with relative noise (one
    standard deviation of its logarithm); noise 0 everywhere gives average_ranks."""
    if len(xs) != len(noise):
        raise ValueError(f"expected_ranks: {len(xs)} values against {len(noise)} noises")
    if any(x <= 0 for x in xs) or any(s < 0 for s in noise):
        raise ValueError("expected_ranks: values must be positive and noise non-negative")
    logs = [math.log(x) for x in xs]
    out = []
    for i, (li, si) in enumerate(zip(logs, noise)):
        r = 1.0
        for j, (lj, sj) in enumerate(zip(logs, noise)):
            if i == j:
                continue
            sd = math.hypot(si, sj)
            if sd == 0.0:
                r += 1.0 if lj < li else 0.5 if lj == li else 0.0
            else:
                r += _phi((li - lj) / sd)
        out.append(r)
    return out


def spearman_noise(pred: Sequence[float], meas: Sequence[float],
                   noise: Sequence[float]) -> float | None:
    """Spearman's rho of predicted against the expected measured ranks (module docstring)."""
    if len(pred) != len(meas):
        raise ValueError(f"spearman: {len(pred)} values against {len(meas)}")
    if len(pred) < 2:
        return None
    return _pearson(average_ranks(pred), expected_ranks(meas, noise))


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
                   "spearman_noise": None, "best_gap_allowance": None, "noise": None,
                   "predicted_best": None, "measured_best": None,
                   "predicted_oom": sum(bool(r.predicted_oom) for r in rs)}
        if rs:
            pred = [r.predicted_tokens_per_s_per_gpu for r in rs]
            meas = [r.measured_tokens_per_s_per_gpu for r in rs]
            noise = [_noise(r) for r in rs]
            rho = spearman(pred, meas)
            fits = [r for r in rs if not r.predicted_oom] or rs
            pick = max(fits, key=lambda r: r.predicted_tokens_per_s_per_gpu)
            best = max(rs, key=lambda r: r.measured_tokens_per_s_per_gpu)
            d.update(spearman=rho,
                     best_gap=1 - pick.measured_tokens_per_s_per_gpu
                     / best.measured_tokens_per_s_per_gpu,
                     spearman_noise=spearman_noise(pred, meas, noise) if any(noise) else rho,
                     best_gap_allowance=ONE_SIDED_95_Z * math.hypot(_noise(pick), _noise(best)),
                     noise=max(noise),
                     predicted_best=pick.id, measured_best=best.id)
        out[name] = d
    return out


def _noise(r) -> float:
    return getattr(r, "measured_noise", None) or 0.0


def meets_target(d: dict) -> bool | None:
    """Judged on the noise-aware figures (equal to the raw ones without a noise column)."""
    rho = d.get("spearman_noise", d.get("spearman"))
    if rho is None or d.get("best_gap") is None:
        return None
    return (rho >= SPEARMAN_TARGET
            and d["best_gap"] - (d.get("best_gap_allowance") or 0.0) <= BEST_GAP_TARGET)


def format_lines(report: dict) -> list[str]:
    """The text block `meshplan validate` prints (nothing when no row has a set)."""
    if not report:
        return []
    lines = [f"ranking per layout set (target: Spearman >= {SPEARMAN_TARGET}, predicted best "
             f"within {BEST_GAP_TARGET:.0%} of the measured best)"]
    for name, d in report.items():
        rho = "-" if d["spearman"] is None else f"{d['spearman']:.3f}"
        gap = "-" if d["best_gap"] is None else f"{d['best_gap']:.1%}"
        if d.get("noise"):  # noise-aware figures first, the raw ones beside them
            rn = "-" if d["spearman_noise"] is None else f"{d['spearman_noise']:.3f}"
            rho = f"{rn} with noise {d['noise']:.1%} (raw {rho})"
            if d["best_gap"] is not None:
                gap = f"{gap} (noise allowance {d['best_gap_allowance']:.1%})"
        ok = {True: "meets", False: "misses", None: "-"}[meets_target(d)]
        extra = (f"; predicted best {d['predicted_best']}, measured best {d['measured_best']}"
                 if d["predicted_best"] is not None else "")
        lines.append(f"  {name}: rows {d['rows']}, Spearman {rho}, predicted best slower than "
                     f"measured best by {gap} ({ok}){extra}")
    return lines
