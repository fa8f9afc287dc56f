"""Predicted against measured on one GPU: ``meshplan run`` for a grid of single-GPU plans.

Run on a machine with one NVIDIA GPU (never in tests):

    python bench/gpu_single.py                  # Llama-3.2-1B, seq 2048, global batch 8
    python bench/gpu_single.py --model tiny-llama --device cpu --steps 2   # plumbing check

Each row trains ``--steps`` optimizer steps (the first is reported apart by ``meshplan
run``), then prints the measured step time, tokens/s and peak allocated memory next to the
planner's prediction for the same plan on the GPU the machine reports (or ``--gpus``), as a
Markdown table for the README.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (micro_batch, recompute): the axes the cost model must get right on a single GPU
GRID = [(1, "none"), (2, "none"), (4, "none"), (2, "selective"), (2, "full"), (8, "full")]
GiB = 2**30


def run_one(args, mb: int, recompute: str) -> dict:
    cmd = [sys.executable, "-m", "meshplan.cli", "run", "--model", args.model,
           "--seq-len", str(args.seq_len), "--global-batch", str(args.global_batch),
           "--micro-batch", str(mb), "--recompute", recompute, "--steps", str(args.steps),
           "--device", args.device, "--json"]
    if args.gpus:
        cmd += ["--gpus", args.gpus]
    if args.dtype:
        cmd += ["--dtype", args.dtype]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=args.timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout_s:.0f} s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout[r.stdout.index("{"):])


def row(mb: int, rc: str, res: dict) -> str:
    if "error" in res:
        return f"| {mb} | {rc} | {res['error']} | | | | | |"
    m, p = res["measured"], res["predicted"]
    mem_m = m["memory_by_pp_rank"]["0"]["Total"] / GiB
    if p:
        mem_p = p["memory_by_pp_rank"]["0"]
        alloc_p = sum(v for k, v in mem_p.items()
                      if k not in ("Total", "cuda_context", "allocator_fragmentation")) / GiB
        t_err = (p["step_time_s"] / m["step_time_s"] - 1) * 100
        m_err = (alloc_p / mem_m - 1) * 100
        return (f"| {mb} | {rc} | {m['step_time_s'] * 1e3:.0f} | {p['step_time_s'] * 1e3:.0f} "
                f"| {t_err:+.0f}% | {mem_m:.1f} | {alloc_p:.1f} | {m_err:+.0f}% |")
    return f"| {mb} | {rc} | {m['step_time_s'] * 1e3:.0f} | - | - | {mem_m:.2f} | - | - |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama3.2-1b")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--gpus", help="COUNTxGPU for the prediction (default: the local GPU)")
    ap.add_argument("--dtype", help="runtime dtype (default: meshplan run's for the device)")
    ap.add_argument("--grid", help="MB:RECOMPUTE,... (default: %s)"
                    % ",".join(f"{mb}:{rc}" for mb, rc in GRID))
    ap.add_argument("--save", help="JSON file for every run's whole report")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="per run")
    args = ap.parse_args()
    grid = ([(int(x.split(":")[0]), x.split(":")[1]) for x in args.grid.split(",")]
            if args.grid else GRID)
    saved = []
    print(f"{args.model}, seq {args.seq_len}, global batch {args.global_batch}, 1 rank, "
          f"{args.steps} steps (first one not timed)\n")
    print("| micro-batch | recompute | measured step ms | predicted step ms | error "
          "| measured peak GiB | predicted allocated GiB | error |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for mb, rc in grid:
        if args.global_batch % mb:
            continue
        res = run_one(args, mb, rc)
        print(row(mb, rc, res), flush=True)
        saved.append({"micro_batch": mb, "recompute": rc, **res})
        if args.save:
            Path(args.save).write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
