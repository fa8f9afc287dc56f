"""Benchmark: full plan search time (issue 2's targets: 405B/16,384 H100 <= 2 s,
DeepSeek-V3/2,048 H800 <= 5 s, on one core). Prints the median wall time and the median CPU
time of this process (on a shared machine the CPU time is what one core spends; run it under
`taskset -c 0` to keep it on one core). Run: python bench/bench_search.py [repeats]"""

from __future__ import annotations

import statistics
import sys
import time

from meshplan.cost import compute, layer
from meshplan.pipeline import simulate as sim_module
from meshplan.search.bound import partial_rank_layout
from meshplan.scenario import make_cluster
from meshplan.search.search import search
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

CASES = [
    ("llama3.1-405b", "16384xH100-SXM-80GB", 8192, 2048, 2.0),
    ("deepseek-v3", "2048xH800-SXM-80GB", 4096, 15360, 5.0),
]


def main(repeats: int = 3) -> None:
    print(f"{'model':<16}{'cluster':<22}{'rerank':>7}{'plans':>11}{'estimated':>11}"
          f"{'median s':>10}{'cpu s':>8}{'target s':>10}  best plan")
    for name, gpus, seq, gbs, target in CASES:
        for rerank in (0, 50):  # closed-form screen only; then with the simulator re-rank
            times, cpus = [], []
            for _ in range(repeats):
                compute.device.cache_clear()
                layer.layer_cost.cache_clear()  # cold caches: each run pays for everything
                partial_rank_layout.cache_clear()
                sim_module._ENCODED.clear()
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
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
