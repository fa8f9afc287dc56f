"""Benchmark (issue 11's targets, one core): a two-pool search for a 70B model on
64 H100 + 256 A100 within 5 s; procurement over 4 GPU types with counts up to 16,384 within
20 s. Prints wall time and CPU time of this process (the machine may be shared: CPU time is
what one core spends). Run: python bench/bench_pools.py"""

from __future__ import annotations

import time

from meshplan.cost import compute, layer
from meshplan.scenario import gpu_catalog, make_pools
from meshplan.search.hetero import search_pools
from meshplan.search.objective import Goal, parse_duration_s, parse_tokens
from meshplan.search.procure import procure
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload


def _cold() -> None:
    compute.device.cache_clear()
    layer.layer_cost.cache_clear()


def timed(fn):
    _cold()
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def main() -> None:
    model, work = preset("llama3.1-70b"), Workload(8192, 512)
    pc = make_pools("64xH100-SXM-80GB+256xA100-SXM-80GB")
    r, wall, cpu = timed(lambda: search_pools(model, pc, work))
    b = r.best
    print(f"two pools  64xH100+256xA100 llama3.1-70b: wall {wall:.2f} s, cpu {cpu:.2f} s "
          f"(target 5 s); {r.considered:,} plans, {r.simulated} simulated; best "
          f"{b.kind}: {b.describe()} {b.tokens_per_s:,.0f} tok/s")
    cat = gpu_catalog()
    types = [cat[n] for n in ("H100-SXM-80GB", "H200-SXM-141GB", "B200", "MI300X")]
    goal = Goal("throughput", parse_tokens("2T"), parse_duration_s("30d"))
    res, wall, cpu = timed(lambda: procure(model, work, types, goal))
    print(f"procurement 4 types up to 16,384 GPUs, 2T tokens in 30 d: wall {wall:.2f} s, "
          f"cpu {cpu:.2f} s (target 20 s); {res.searches} counts searched")
    for row in res.rows:
        plan = row.estimate.plan.describe() if row.estimate else row.reason
        print(f"  {row.gpu.name:<16} {row.num_gpus:>6} GPUs  {plan}")


if __name__ == "__main__":
    main()
