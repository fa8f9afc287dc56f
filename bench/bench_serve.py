"""Simulator speed: a 1,000-request trace through one plan (the issue asks for about a second).

    python bench/bench_serve.py
"""

import time

from meshplan.scenario import make_cluster
from meshplan.serve.simulate import simulate
from meshplan.serve.spec import Pool, ServePlan
from meshplan.serve.traffic import Lengths, synthetic
from meshplan.specs.catalog.presets import load_model

CASES = [
    ("llama3.1-70b", "16xH100-SXM-80GB", ServePlan((Pool(tp=4, replicas=4),)), 2000, 300, 8.0),
    ("llama3.1-70b", "16xH100-SXM-80GB",
     ServePlan((Pool(tp=4, replicas=2, role="prefill"), Pool(tp=8, role="decode")),
               kv_tier="scale-out"), 2000, 300, 8.0),
    ("llama3.1-8b", "1xH100-SXM-80GB", ServePlan((Pool(max_num_seqs=1024),)), 1000, 200, 20.0),
    ("deepseek-v3", "8xH200-SXM-141GB", ServePlan((Pool(tp=1, attn_dp=8, ep=8),), "fp8", "bf16"),
     2000, 300, 4.0),
]

for name, gpus, plan, il, ol, rate in CASES:
    tr = synthetic(1000, Lengths(il, il), Lengths(ol, ol), rate_per_s=rate)
    model, cluster = load_model(name), make_cluster(gpus)
    best = min((lambda t0: (simulate(model, cluster, plan, tr), time.perf_counter() - t0)[1])(
        time.perf_counter()) for _ in range(3))
    r = simulate(model, cluster, plan, tr)
    print(f"{name:<14} {gpus:<18} {plan.describe()[:60]:<60} {best:6.2f} s  "
          f"{r.iterations} iterations")
