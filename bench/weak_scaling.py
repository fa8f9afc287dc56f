"""Weak scaling: does the model lose as much per GPU as the published runs do when only the
data-parallel size grows?

A series is a set of trust A/B rows of one runs CSV identical in every column but num_gpus,
dp, global batch and the measured figures (and id/derivation). For each, the ratio of
tokens/s per GPU at the largest size to the smallest, measured and predicted. The ratio
does not depend on a model's absolute bias (a constant error cancels), so it checks what
changes with scale (collectives over more nodes, the unhideable last bucket, stragglers)
apart from the per-GPU physics. Usage:

    python bench/weak_scaling.py bench/data/heldout_runs.csv [--scale-only]

Prints one line per series and the median / mean of predicted/measured - 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from meshplan.validate import predict_rows, read_rows  # noqa: E402

VARYING = {"id", "num_gpus", "dp", "global_batch_seqs", "measured_tokens_per_s_per_gpu",
           "measured_step_time_s", "measured_peak_mem_gib", "oom", "derivation", "trust",
           "measured_noise"}


def series(rows: list[dict]) -> list[list[dict]]:
    groups: dict = {}
    for r in rows:
        if r.get("trust") not in ("A", "B") or not r.get("measured_tokens_per_s_per_gpu"):
            continue
        key = tuple(sorted((k, v) for k, v in r.items() if k not in VARYING))
        groups.setdefault(key, []).append(r)
    out = []
    for g in groups.values():
        if len({int(float(r["num_gpus"])) for r in g}) >= 2:
            out.append(sorted(g, key=lambda r: int(float(r["num_gpus"]))))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    args = ap.parse_args(argv)
    groups = series(read_rows(args.csv))
    ends = [r for g in groups for r in (g[0], g[-1])]
    pred = {r["id"]: res.predicted_tokens_per_s_per_gpu
            for r, res in zip(ends, predict_rows(ends, with_search_best=False))}
    errs = []
    for g in groups:
        a, b = g[0], g[-1]
        if pred[a["id"]] is None or pred[b["id"]] is None:
            continue
        meas = float(b["measured_tokens_per_s_per_gpu"]) / float(a["measured_tokens_per_s_per_gpu"])
        p = pred[b["id"]] / pred[a["id"]]
        errs.append(p / meas - 1)
        print(f"{a['id']}->{b['id']} {a['model'][:24]:<24} {a['num_gpus']:>5}->{b['num_gpus']:<5} "
              f"measured {meas:.3f} predicted {p:.3f} ({errs[-1]:+.1%})")
    if errs:
        print(f"{len(errs)} series: predicted/measured ratio - 1: median {statistics.median(errs):+.2%}, "
              f"mean {statistics.mean(errs):+.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
