"""Derive bench/data/straggler_points.csv from ByteDance's published straggler traces.

The traces are the artifact of Lin et al., "Understanding Stragglers in Large Model Training
Using What-if Analysis" (OSDI 2025, arXiv 2505.05713): github.com/ByteDance-Seed/
StragglerAnalysis, data/trace-{AR,ST,SE}.parquet (one row per operation of one worker per
(DP rank, pipeline stage): optype, step, duration, ...). Needs pandas + pyarrow (not
meshplan requirements). Usage:

    python bench/straggler_traces.py /path/to/StragglerAnalysis/data

For every trace: one worker's forward + backward compute time per step; per (step, stage)
the relative spread across DP ranks (step_cv) and the stretch max/mean - 1 (dp_stretch),
medians over steps and stages; persistent_cv: spread across DP ranks of each worker's mean
over steps (the largest stage). AR's stage 0 holds the artificially slowed worker: dropped.
"""

from pathlib import Path

import pandas as pd

SKIP_STAGES = {"AR": [0]}


def summarize(path: Path, skip: list[int]) -> dict:
    d = pd.read_parquet(path)
    c = d[d.optype.isin(["forward-compute", "backward-compute"]) & ~d.stage.isin(skip)]
    w = c.groupby(["step", "stage", "dp_rank"]).duration.sum()
    g = w.groupby(["step", "stage"])
    pers = w.groupby(["stage", "dp_rank"]).mean().groupby("stage")
    return {"dp": d.dp_rank.nunique(), "steps": d.step.nunique(),
            "microbatches_per_step": c.groupby(["step", "stage", "dp_rank"]).size().median() / 2,
            "step_cv_median": (g.std() / g.mean()).median(),
            "dp_stretch_median": (g.max() / g.mean() - 1).median(),
            "persistent_cv_max": (pers.std() / pers.mean()).max()}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path, help="StragglerAnalysis/data (the trace-*.parquet files)")
    root = ap.parse_args().data_dir
    for t in ("AR", "ST", "SE"):
        s = summarize(root / f"trace-{t}.parquet", SKIP_STAGES.get(t, []))
        print(t, " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in s.items()))
