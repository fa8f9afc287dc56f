"""Tensor-core throughput held for a minute or more on the local GPU (never in tests): what
the held clock of efficiency.NVIDIA_SUSTAINED_CLOCK (KernelEfficiency.sustained_clock) stands for.

    python bench/gpu_sustained.py --out DIR [--seconds 60] [--dtype bf16|fp8]
    python bench/gpu_sustained.py --out DIR --device cpu --seconds 2   # plumbing check

Runs 8192^3 GEMMs back to back for ``--seconds`` and every ``--every`` seconds writes one row
to ``sustained.csv``: seconds since the start, TFLOP/s over the interval (CUDA events), and
what nvidia-smi reports at that moment (SM clock, power draw, temperature, throttle reasons).
The first rows are the seconds-long microbenchmark a calibration sees; the last ones what a
GPU holds once power and temperature have settled.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_kernels import write  # noqa: E402

QUERY = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def smi() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        clock, power, temp, why = (x.strip() for x in out.splitlines()[0].split(","))
        return {"sm_mhz": clock.split()[0], "power_w": power.split()[0], "temp_c": temp,
                "throttle": why}
    except Exception:  # noqa: BLE001 (no nvidia-smi: the CPU plumbing check)
        return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp8"))
    args = ap.parse_args()
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cuda = args.device != "cpu"
    n = 8192 if cuda else 256
    a = torch.randn(n, n, device=args.device, dtype=torch.bfloat16 if cuda else torch.float32)
    b = torch.randn(n, n, device=args.device, dtype=a.dtype)
    if args.dtype == "fp8" and cuda:
        one = torch.ones((), device=args.device)
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()

        def gemm():
            return torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)
    else:
        def gemm():
            return a @ b
    batch = 20 if cuda else 2
    rows, start = [], time.monotonic()
    while time.monotonic() - start < args.seconds:
        t0, calls = time.monotonic(), 0
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        while time.monotonic() - t0 < args.every:
            for _ in range(batch):
                gemm()
            calls += batch
            if cuda:
                torch.cuda.synchronize()
        if cuda:
            e1.record()
            e1.synchronize()
            s = e0.elapsed_time(e1) / 1e3
        else:
            s = time.monotonic() - t0
        row = {"t_s": round(time.monotonic() - start, 1), "dtype": args.dtype, "n": n,
               "tflops": round(2.0 * n**3 * calls / s / 1e12, 1)}
        row.update(smi())
        rows.append(row)
        print(json.dumps(row), flush=True)
    write(out / f"sustained_{args.dtype}.csv", rows)


if __name__ == "__main__":
    main()
