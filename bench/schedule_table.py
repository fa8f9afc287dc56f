"""Compare every pipeline schedule on one real model and cluster (closed form vs simulated).

    python3 bench/schedule_table.py [--model llama3.1-70b] [--gpus 64xH100-SXM-80GB]
        [--seq-len 8192] [--global-batch 32] [--tp 8] [--pp 8] [--dp 1] [--img-dir DIR]

Prints a Markdown table (the one in docs/pipeline.md) and, with --img-dir, draws the
timeline and memory pictures of two of the plans.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from meshplan.errors import InputError  # noqa: E402
from meshplan.pipeline.from_cost import simulate_plan  # noqa: E402
from meshplan.plan import Plan  # noqa: E402
from meshplan.scenario import make_cluster  # noqa: E402
from meshplan.specs.catalog.presets import load_model  # noqa: E402
from meshplan.specs.workload import Workload  # noqa: E402

GiB = 2**30
ROWS = [("gpipe", 1), ("1f1b", 1), ("interleaved_1f1b", 2), ("interleaved_1f1b", 5),
        ("looped_bfs", 2), ("zb_h1", 1), ("interleaved_zb", 2), ("zb_v", 2), ("dualpipev", 2)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama3.1-70b")
    ap.add_argument("--gpus", default="64xH100-SXM-80GB")
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--pp", type=int, default=8)
    ap.add_argument("--dp", type=int, default=1)
    ap.add_argument("--recompute", default="selective")
    ap.add_argument("--img-dir")
    a = ap.parse_args()
    model, cluster = load_model(a.model), make_cluster(a.gpus)
    w = Workload(a.seq_len, a.global_batch, "bf16")
    m = a.global_batch // a.dp
    print(f"{a.model} on {a.gpus}, seq {a.seq_len}, global batch {a.global_batch}: "
          f"dp{a.dp} tp{a.tp} pp{a.pp}, {a.recompute} recomputation, {m} micro-batches\n")
    print("| schedule | vpp | step, closed form (s) | step, simulated (s) | bubble, closed form (s) "
          "| idle, simulated (s) | p2p transfers / step | peak activations rank 0 (GiB) "
          "| peak memory (GiB) | tokens/s/GPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    sims = {}
    for name, v in ROWS:
        plan = Plan(dp=a.dp, tp=a.tp, pp=a.pp, vpp=v, schedule=name, recompute=a.recompute)
        try:
            ps = simulate_plan(model, cluster, w, plan)
        except InputError as e:
            print(f"| {name} | {v} | {e} |")
            continue
        sims[(name, v)] = ps
        e = ps.estimate
        fit = "" if ps.fits else " (does not fit)"
        print(f"| {name} | {v} | {e.step_time_s:.3f} | {ps.step_time_s:.3f} "
              f"| {e.step_time.parts['pp_bubble_s'] + e.step_time.parts['pp_p2p_s']:.3f} "
              f"| {ps.step_parts['pp_bubble_s']:.3f} | {len(ps.sim.transfers)} "
              f"| {ps.sim.ranks[0].peak_act_bytes / GiB:.1f} "
              f"| {ps.peak_memory_bytes / GiB:.1f}{fit} | {ps.tokens_per_s_per_gpu:,.0f} |")
    if a.img_dir:
        from meshplan.export.plots import memory_png, schedule_png
        out = Path(a.img_dir)
        out.mkdir(parents=True, exist_ok=True)
        for key in (("interleaved_1f1b", 2), ("zb_v", 2), ("dualpipev", 2), ("1f1b", 1)):
            if key in sims:
                ps = sims[key]
                tag = f"{key[0]}" + (f"_v{key[1]}" if key[1] > 1 else "")
                title = f"{a.model} on {a.gpus}: {ps.plan.describe()}"
                schedule_png(ps.sim, out / f"timeline_{tag}.png", title)
                memory_png(ps.sim, out / f"memory_{tag}.png", title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
