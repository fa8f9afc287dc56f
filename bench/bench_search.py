"""Benchmark: full plan search time (issue 2's targets: 405B/16,384 H100 <= 2 s,
DeepSeek-V3/2,048 H800 <= 5 s, on one core). Run: python bench/bench_search.py"""

from __future__ import annotations

import statistics
import time

from meshplan.cost import compute, layer
from meshplan.scenario import make_cluster
from meshplan.search.search import search
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

CASES = [
    ("llama3.1-405b", "16384xH100-SXM-80GB", 8192, 2048, 2.0),
    ("deepseek-v3", "2048xH800-SXM-80GB", 4096, 15360, 5.0),
]


def main(repeats: int = 3) -> None:
    print(f"{'model':<16}{'cluster':<22}{'plans':>9}{'estimated':>11}{'median s':>10}"
          f"{'target s':>10}  best plan")
    for name, gpus, seq, gbs, target in CASES:
        times = []
        for _ in range(repeats):
            compute.device.cache_clear()
            layer.layer_cost.cache_clear()  # cold caches: each run pays for everything
            t0 = time.perf_counter()
            r = search(preset(name), make_cluster(gpus), Workload(seq, gbs))
            times.append(time.perf_counter() - t0)
        best = r.best.plan.describe() if r.best else "-"
        print(f"{name:<16}{gpus:<22}{r.considered:>9,}{r.evaluated:>11,}"
              f"{statistics.median(times):>10.2f}{target:>10.1f}  {best}")


if __name__ == "__main__":
    main()
