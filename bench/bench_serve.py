"""Serving speed: a 1,000-request trace through one plan (the issue asks for about a second),
with the decode group and with every request stepped alone (the reference loop); then whole
`meshplan serve` searches, in this process and on every CPU.

    python bench/bench_serve.py            # both parts
    python bench/bench_serve.py --no-cli   # the simulator only
"""

import subprocess
import sys
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
    ("gpt-oss-20b", "1xH100-SXM-80GB", ServePlan((Pool(),)), 3000, 500, 10.0),
]

# whole searches: the README's serving example and a sliding-window model
SEARCHES = [
    "--model llama3.1-70b --gpus 16xH100-SXM-80GB --input-len 2000 --output-len 300 --rate 8 "
    "--ttft-p90 2s --tpot-p90 50ms",
    "--model gpt-oss-20b --gpus 8xH100-SXM-80GB --input-len 1000:6000 --output-len 100:900 "
    "--rate 20 --tpot-p90 30ms --requests 400 --no-goodput",
]


MAIN = "import sys; from meshplan.cli import main; sys.exit(main(sys.argv[1:]))"


def best_of(fn, n=3):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


print(f"{'model':<14} {'GPUs':<18} {'plan':<60} {'group':>7} {'alone':>7}  iterations")
for name, gpus, plan, il, ol, rate in CASES:
    tr = synthetic(1000, Lengths(il, il), Lengths(ol, ol), rate_per_s=rate)
    model, cluster = load_model(name), make_cluster(gpus)
    fast = best_of(lambda: simulate(model, cluster, plan, tr))
    alone = best_of(lambda: simulate(model, cluster, plan, tr, decode_group=False), 1)
    r = simulate(model, cluster, plan, tr)
    print(f"{name:<14} {gpus:<18} {plan.describe()[:60]:<60} {fast:6.2f}s {alone:6.2f}s  "
          f"{r.iterations}")

if "--no-cli" not in sys.argv:
    print("\nmeshplan serve (wall seconds): --jobs 1 | --jobs 0 (every CPU)")
    for args in SEARCHES:
        row = []
        for jobs in ("1", "0"):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", MAIN, "serve", *args.split(), "--json",
                            "--jobs", jobs], check=True, stdout=subprocess.DEVNULL)
            row.append(time.perf_counter() - t0)
        print(f"  {row[0]:6.1f} s | {row[1]:6.1f} s  meshplan serve {args}")
