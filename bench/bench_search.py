"""Benchmark: full plan search time (issue 2's targets: 405B/16,384 H100 <= 2 s,
DeepSeek-V3/2,048 H800 <= 5 s, on one core). Every cache of meshplan is emptied before each
run. Prints the median wall time and the median CPU time of this process (on a shared
machine the CPU time is what one core spends; run it under `taskset -c 0` to keep it on one
core). Run: python bench/bench_search.py [repeats]"""

from __future__ import annotations

import statistics
import sys
import time

from meshplan.pipeline import simulate as sim_module
from meshplan.scenario import make_cluster
from meshplan.search.search import search
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

CASES = [
    ("llama3.1-405b", "16384xH100-SXM-80GB", 8192, 2048, 2.0),
    ("deepseek-v3", "2048xH800-SXM-80GB", 4096, 15360, 5.0),
]


def cold() -> None:
    """Empty every cache of meshplan: each lru_cache of its modules (the cost model's, the
    schedules', the bounds') and the simulator's encoded schedules."""
    for name, mod in list(sys.modules.items()):
        if name == "meshplan" or name.startswith("meshplan."):
            for obj in list(vars(mod).values()):
                if callable(getattr(obj, "cache_clear", None)) and hasattr(obj, "cache_info"):
                    obj.cache_clear()
    sim_module._ENCODED.clear()


def main(repeats: int = 3) -> None:
    print(f"{'model':<16}{'cluster':<22}{'rerank':>7}{'plans':>11}{'estimated':>11}"
          f"{'median s':>10}{'cpu s':>8}{'target s':>10}  best plan")
    for name, gpus, seq, gbs, target in CASES:
        for rerank in (0, 50):  # closed-form screen only; then with the simulator re-rank
            times, cpus = [], []
            for _ in range(repeats):
                cold()  # each run pays for everything, as one `meshplan plan` does
                t0, c0 = time.perf_counter(), time.process_time()
                r = search(preset(name), make_cluster(gpus), Workload(seq, gbs),
                           rerank_k=max(rerank, 5), simulate=rerank > 0)
                times.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            best = r.best.plan.describe() if r.best else "-"
            print(f"{name:<16}{gpus:<22}{rerank:>7}{r.considered:>11,}{r.evaluated:>11,}"
                  f"{statistics.median(times):>10.2f}{statistics.median(cpus):>8.2f}"
                  f"{target:>10.1f}  {best}", flush=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split(". ")[0])
    ap.add_argument("repeats", nargs="?", type=int, default=3, help="runs per case (median)")
    main(ap.parse_args().repeats)
