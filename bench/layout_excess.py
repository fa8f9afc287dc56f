"""Where the measured layout sets' step times leave the model: per row, the measured step time
minus the predicted one ("excess") beside the predicted parts; then, for pipeline layouts
measured at several micro-batch sizes with the same tokens per pipeline, the number of idle
micro-batch slots per step that fits them, beside the same fit to the predicted step times (a
model whose micro-batch behaviour is right gives the same k; k absorbs every cost that
changes with the micro-batch size, not only the bubble).

At a fixed global batch, a pipeline of p stages running m micro-batches idles (p - 1) slots of
one micro-batch's time under 1F1B (Narayanan et al. 2021, sec. 2.2): step = T0 (1 + k / m)
with k = p - 1. Fitting T0 and k by least squares over the rows of one layout that differ only
in micro-batch size (m = tokens per pipeline / micro-batch) measures k from the published step
times alone, without the cost model.

    PYTHONPATH=$PWD python bench/layout_excess.py [bench/data/layout_sets.csv] [--set PREFIX]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from meshplan import runs_csv
from meshplan.search.search import search
from meshplan.validate import prepare


def idle_slots(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(T0, k) of step = T0 (1 + k / m) fitted to (m, step) points (linear in 1 / m)."""
    xs = [1 / m for m, _ in points]
    ys = [s for _, s in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
             / sum((x - mx) ** 2 for x in xs))
    t0 = my - slope * mx
    return t0, slope / t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?", default="bench/data/layout_sets.csv")
    ap.add_argument("--set", default="", help="only sets whose name starts with this")
    a = ap.parse_args()
    groups = defaultdict(list)
    print("id    set                     layout                 measured  predicted  excess  "
          "dp_exp  tp_exp  bubble  p2p")
    for r in runs_csv.read_rows(a.csv):
        if not r["set"].startswith(a.set) or r.get("oom") == "1" or not r["measured_step_time_s"]:
            continue
        p = prepare(r)
        est = search(p.model, p.cluster, p.workload, dict(p.pins), top_k=1, rerank_k=5).best
        if est is None:
            continue
        parts = est.step_time.parts
        meas = float(r["measured_step_time_s"])
        lay = f"tp{r['tp']} pp{r['pp']} dp{r['dp']} mb{r['micro_batch']} {r['recompute'][:4]}"
        print(f"{r['id']:5} {r['set'][:23]:23} {lay:22} {meas:8.2f} {est.step_time_s:10.2f} "
              f"{meas - est.step_time_s:+7.2f} {parts.get('dp_exposed_s', 0):7.2f} "
              f"{parts.get('tp_exposed_s', 0):7.2f} {parts.get('pp_bubble_s', 0):7.2f} "
              f"{parts.get('pp_p2p_s', 0):5.2f}")
        if int(r["pp"]) > 1:
            seqs_per_pipeline = int(r["global_batch_seqs"]) / int(r["dp"])
            m = seqs_per_pipeline / int(r["micro_batch"])
            groups[(r["set"], r["tp"], r["pp"], r["recompute"], seqs_per_pipeline)].append(
                (m, meas, est.step_time_s))
    print("\nidle micro-batch slots per step fitted to the published step times "
          "(1F1B: p - 1)")
    for (s, tp, pp, rc, _), pts in sorted(groups.items()):
        if len({m for m, _, _ in pts}) < 2:
            continue
        t0, k = idle_slots([(m, t) for m, t, _ in pts])
        _, k_model = idle_slots([(m, t) for m, _, t in pts])
        ms = ", ".join(f"m={m:g}: {t:.2f} s" for m, t, _ in sorted(pts, reverse=True))
        print(f"  {s:24} tp{tp} pp{pp} {rc:5}  k = {k:6.2f} (model {k_model:6.2f}, "
              f"p - 1 = {int(pp) - 1})  T0 = {t0:6.2f} s   [{ms}]")


if __name__ == "__main__":
    main()
