"""A byte-exact fingerprint of the benchmark searches (bench/bench_search.py's cases), to show
that a speed change changes no result. For each case, closed form and with the simulator
re-rank: everything ``search()`` returns but its elapsed time (ranked plans with every part of
their step and memory, the Pareto front, the counts, the rejection reasons, every simulated
plan's step parts, peak activations and fit), each float as repr(); and ``meshplan plan
--json`` for the same scenario without its ``elapsed_s``.

Run it on the old and the new code and compare the files byte for byte:
    PYTHONPATH=OLD python bench/search_fingerprint.py > /tmp/before.txt
    PYTHONPATH=.   python bench/search_fingerprint.py > /tmp/after.txt
    cmp /tmp/before.txt /tmp/after.txt
Optional arguments: case names (llama3.1-405b, deepseek-v3) to run only those."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from meshplan.scenario import make_cluster
from meshplan.search.search import search
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

CASES = [  # the same as bench/bench_search.py
    ("llama3.1-405b", "16384xH100-SXM-80GB", 8192, 2048),
    ("deepseek-v3", "2048xH800-SXM-80GB", 4096, 15360),
]


def _est(e) -> dict:
    return {"plan": e.plan.describe(), "repr": repr(e.plan),
            "step": {k: repr(v) for k, v in e.step_time.parts.items()},
            "memory": [{k: repr(v) for k, v in b.parts.items()} for b in e.memory],
            "peak": repr(e.peak_memory_bytes), "chunks": repr(e.chunks)}


def _sim(s) -> dict:
    return {"plan": s.plan.describe(), "step": {k: repr(v) for k, v in s.step_parts.items()},
            "memory": [{k: repr(v) for k, v in p.items()} for p in s.memory_parts],
            "fits": s.fits, "ranks": repr(s.sim.ranks), "sim_step": repr(s.sim.step_time_s),
            "critical_path": repr(s.sim.critical_path)}


def search_fingerprint(name: str, gpus: str, seq: int, gbs: int, rerank: int) -> dict:
    r = search(preset(name), make_cluster(gpus), Workload(seq, gbs),
               rerank_k=max(rerank, 5), simulate=rerank > 0)
    return {"top": [_est(e) for e in r.top], "pareto": [_est(e) for e in r.pareto],
            "considered": r.considered, "evaluated": r.evaluated, "fitting": r.fitting,
            "partial_considered": r.partial_considered,
            "rejected": sorted(r.rejected.items()), "pins": repr(r.pins),
            "closest": _est(r.closest) if r.closest else None,
            "simulated": [_sim(s) for _, s in r.simulated.items()]}


def cli_fingerprint(name: str, gpus: str, seq: int, gbs: int, rerank: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "meshplan.cli", "plan", "--model", name, "--gpus", gpus,
         "--seq-len", str(seq), "--global-batch", str(gbs), "--rerank", str(rerank),
         "--json"], capture_output=True, text=True, check=True, env=dict(os.environ)).stdout
    d = json.loads(out)
    d.pop("elapsed_s", None)
    return d


def main(names: list[str]) -> None:
    for name, gpus, seq, gbs in CASES:
        if names and name not in names:
            continue
        for rerank in (0, 50):
            print(f"== {name} {gpus} seq {seq} batch {gbs} rerank {rerank}")
            print(json.dumps(search_fingerprint(name, gpus, seq, gbs, rerank), indent=1))
            print(json.dumps(cli_fingerprint(name, gpus, seq, gbs, rerank), indent=1),
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
