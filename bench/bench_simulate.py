"""Benchmark: one simulated step of a 128-stage pipeline with 1,024 micro-batches.

    python3 bench/bench_simulate.py [--repeat N]

Times, for each schedule, building the per-rank action lists (cold: the generator cache is
cleared first) and simulating them (with the search's setting ``record=False``, and with
the trace / critical-path recording on). The target (issue 3) is <= 1 s for the
128-stage, 1,024-micro-batch 1F1B step, lists included. "stages" are virtual stages:
interleaved schedules with 2 chunks per rank run on 64 ranks here.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from meshplan.pipeline.schedules import build_schedule  # noqa: E402
from meshplan.pipeline.simulate import simulate, uniform_chunks  # noqa: E402

CASES = [  # (schedule, pp, vpp): 128 virtual stages each
    ("gpipe", 128, 1), ("1f1b", 128, 1), ("zb_h1", 128, 1),
    ("interleaved_1f1b", 64, 2), ("interleaved_zb", 64, 2), ("looped_bfs", 64, 2),
    ("zb_v", 64, 2), ("dualpipev", 64, 2),
]
M = 1024


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{M} micro-batches, best of {args.repeat}")
    print(f"{'schedule':<18}{'pp':>4}{'vpp':>4}{'actions':>9}{'build s':>9}{'sim s':>8}"
          f"{'total s':>9}{'sim+rec s':>10}")
    worst = 0.0
    for name, pp, v in CASES:
        def build():
            build_schedule.cache_clear()
            return build_schedule(name, pp, v, M)
        t_build, sched = best_of(build, args.repeat)
        chunks = uniform_chunks(pp * v, 1e-3, 1e-3, 1e-3, act_bytes=1.0, p2p_s=1e-5)
        t_sim, _ = best_of(lambda: simulate(sched, chunks, record=False), args.repeat)
        t_rec, _ = best_of(lambda: simulate(sched, chunks, record=True), args.repeat)
        total = t_build + t_sim
        if name == "1f1b":
            worst = total
        print(f"{name:<18}{pp:>4}{v:>4}{sched.num_actions():>9}{t_build:>9.3f}{t_sim:>8.3f}"
              f"{total:>9.3f}{t_rec:>10.3f}")
    print(f"1f1b, 128 stages x {M} micro-batches, lists + simulation: {worst:.3f} s "
          f"({'meets' if worst <= 1.0 else 'MISSES'} the 1 s target)")
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
