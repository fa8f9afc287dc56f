"""Kernel-level measurements of what the cost model assumes, on the local GPU (never in tests).

    python bench/gpu_kernels.py --out DIR          # on a machine with one NVIDIA GPU
    python bench/gpu_kernels.py --out DIR --device cpu --quick   # plumbing check

Writes three CSVs into DIR, each row one timed kernel:
- ``gemm.csv``: C = A @ B (bf16 torch.matmul / torch.bmm; fp8 e4m3 torch._scaled_mm with
  per-tensor scales, bf16 out) over the (groups, m, n, k) shapes of the H100 rows of
  bench/data/gemm_points.csv (OpenXLA's profiled table), in that file's columns, so the rows
  can join it as measured points of this GPU;
- ``attention.csv``: torch scaled_dot_product_attention with the flash backend (FlashAttention-2
  kernels) and the cuDNN backend (cuDNN's fused flash attention, the kernels Transformer
  Engine calls), forward and backward, causal and not, by sequence length and head dim, in
  FLOP/s counting the executed causal half as meshplan.calibrate.micro does;
- ``stream.csv``: bytes moved per second by a device copy at several sizes, RMSNorm
  (torch.nn.functional.rms_norm) and SwiGLU (silu(a) * b, as eager PyTorch runs it).

With ``--fp8-rowwise`` only ``gemm_rowwise.csv`` is written: at the fp8 shapes of ``gemm.csv``,
per-tensor scales with fast accumulation (``fp8_fastacc``, the reference) against row-wise
scales (an fp32 scale per row of A and per column of B, PyTorch's CUTLASS row-wise kernel
that torchao's rowwise recipe calls) with (``fp8_rowwise_fastacc``) and without fast
accumulation (``fp8_rowwise``), in the same call.

Each kernel is launched back to back ``reps`` times between two CUDA events (launch overhead
hidden once a kernel outlasts it), after warm-up; the figure is the median of 5 such batches.
With ``--graphs`` the GEMMs are timed inside CUDA graphs instead (calibrate.micro.kernel_s:
kernel time without the host's launch time, which the small ones need).
A deadline (--budget-s) stops a section early and keeps what it measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from meshplan.calibrate.fit import default_shapes  # noqa: E402
from meshplan.calibrate.micro import events_s, kernel_s  # noqa: E402
POINTS = ROOT / "bench" / "data" / "gemm_points.csv"


def timer(torch, device: str, graphs: bool = False):
    def run(fn, target_s: float = 2e-3, batches: int = 5) -> float:
        if graphs and device != "cpu":
            # kernel time without the host's launch time (CUDA graphs): micro.kernel_s
            return kernel_s(fn, device, 1, batches, target_s)
        if device == "cpu":
            fn()
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        return events_s(fn, 1, batches, target_s)  # back to back between CUDA events
    return run


def gemm_shapes(quick: bool) -> list[tuple[int, int, int, int]]:
    rows = [r for r in csv.DictReader(POINTS.open())
            if r["gpu"] == "H100-SXM-80GB" and r["dtype"] == "bf16"]
    shapes = sorted({(int(r["groups"]), int(r["m"]), int(r["n"]), int(r["k"])) for r in rows})
    if quick:
        return [s for s in shapes if s[0] * s[1] * s[2] * s[3] <= 2**27][:6]
    calibrate = [(1, m, n, k) for m, n, k in default_shapes()]  # meshplan calibrate's sweep
    return shapes + [s for s in calibrate if s not in shapes]


def gemms(torch, device, time_fn, shapes, deadline, label, fp8_kinds=None):
    """bf16 GEMMs and, on a GPU, fp8 ``torch._scaled_mm`` of each kind in ``fp8_kinds``
    (default: per-tensor scales with and without fast accumulation); with ``fp8_kinds``
    given, the bf16 and grouped shapes are skipped."""
    kinds = fp8_kinds or (("fp8", False, False), ("fp8_fastacc", True, False))
    out = []
    fp8 = getattr(torch, "float8_e4m3fn", None) if device != "cpu" else None
    one = torch.ones((), device=device, dtype=torch.float32)
    for g, m, n, k in shapes:
        if time.monotonic() > deadline:
            break
        dt = torch.bfloat16 if device != "cpu" else torch.float32
        a = torch.randn(g, m, k, device=device, dtype=dt)
        b = torch.randn(g, k, n, device=device, dtype=dt)
        fn = (lambda: torch.bmm(a, b)) if g > 1 else (lambda: torch.matmul(a[0], b[0]))
        if fp8_kinds is None:
            s = time_fn(fn)
            out.append({"source": label, "gpu": "", "dtype": "bf16", "groups": g, "m": m,
                        "n": n, "k": k, "tflops": round(2.0 * g * m * n * k / s / 1e12, 3),
                        "split_k": 1})
        if fp8 is not None and g == 1 and m % 16 == 0 and n % 16 == 0 and k % 16 == 0:
            a8 = a[0].to(fp8)
            b8 = b[0].t().contiguous().to(fp8).t()  # column-major, as _scaled_mm needs
            # row-wise scales: one fp32 per row of A (m, 1) and per column of B (1, n), the
            # layout torchao's Float8 rowwise recipe passes (PyTorch's CUTLASS row-wise kernel)
            sa = torch.ones((m, 1), device=device, dtype=torch.float32)
            sb = torch.ones((1, n), device=device, dtype=torch.float32)
            # fp8: _scaled_mm's default, partial sums promoted to fp32 (TE's dgrad / wgrad);
            # fp8_fastacc: use_fast_accum=True, accumulated in the tensor cores (TE's fprop)
            for tag, fast, rowwise in kinds:
                x, y = (sa, sb) if rowwise else (one, one)
                try:
                    s = time_fn(lambda: torch._scaled_mm(a8, b8, x, y, out_dtype=torch.bfloat16,
                                                         use_fast_accum=fast))
                    out.append({"source": label, "gpu": "", "dtype": tag, "groups": 1, "m": m,
                                "n": n, "k": k, "tflops": round(2.0 * m * n * k / s / 1e12, 3),
                                "split_k": 1})
                except Exception as e:  # noqa: BLE001 (a dtype or layout this build refuses)
                    print(f"{tag} {m}x{n}x{k}: {str(e).splitlines()[0][:100]}")
            del a8, b8, sa, sb
        del a, b
    return out


def sdpa_times(torch, time_fn, backend, q, k, v, causal: bool, flops: float) -> dict:
    """Forward, and forward + backward less the forward, of torch SDPA on ``backend`` (an
    SDPBackend); TFLOP/s from ``flops`` (the forward's; the backward does 2.5x), or the error
    of a backend that refuses the shape."""
    from torch.nn.attention import sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    try:
        with sdpa_kernel(backend):
            f = time_fn(lambda: sdpa(q, k, v, is_causal=causal))
            g = torch.randn_like(sdpa(q, k, v, is_causal=causal))
            fb = time_fn(lambda: torch.autograd.grad(sdpa(q, k, v, is_causal=causal),
                                                     (q, k, v), g))
    except Exception as e:  # noqa: BLE001 (a backend that refuses the shape)
        return {"error": str(e).splitlines()[0][:120]}
    bw = max(fb - f, 1e-9)
    return {"fwd_s": f, "bwd_s": bw, "fwd_tflops": round(flops / f / 1e12, 2),
            "bwd_tflops": round(2.5 * flops / bw / 1e12, 2)}


def attention(torch, device, time_fn, quick, deadline):
    from torch.nn.attention import SDPBackend

    backends = ({"math": SDPBackend.MATH} if device == "cpu" else
                {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION})
    seqs = (128, 256) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    cases = [(s, 128, True) for s in seqs] + [(s, 128, False) for s in seqs]
    cases += [(s, 64, True) for s in seqs] + [(s, 256, True) for s in seqs[-3:]]
    tokens = 512 if quick else 32768
    dt = torch.bfloat16 if device != "cpu" else torch.float32
    out = []
    for name, be in backends.items():
        for seq, d, causal in cases:
            if time.monotonic() > deadline:
                return out
            heads = max(1, 2048 // d)
            batch = max(1, tokens // seq)
            q, k, v = (torch.randn(batch, heads, seq, d, device=device, dtype=dt,
                                   requires_grad=True) for _ in range(3))
            flops = 4.0 * batch * heads * seq * seq * d * (0.5 if causal else 1.0)
            row = {"backend": name, "seq": seq, "head_dim": d, "causal": int(causal),
                   "batch": batch, "heads": heads}
            row.update(sdpa_times(torch, time_fn, be, q, k, v, causal, flops))
            out.append(row)
            del q, k, v
    return out


def stream(torch, device, time_fn, quick):
    out = []
    dt = torch.bfloat16 if device != "cpu" else torch.float32
    el = 2 if device != "cpu" else 4
    for mb in ((8, 64) if quick else (16, 64, 256, 1024, 4096)):
        n = mb * 2**20 // el
        a = torch.ones(n, device=device, dtype=dt)
        b = torch.empty_like(a)
        s = time_fn(lambda: b.copy_(a))
        out.append({"kernel": "copy", "bytes": 2 * n * el, "seconds": s,
                    "gb_per_s": round(2 * n * el / s / 1e9, 1)})
        del a, b
    rows, h = (256, 512) if quick else (16384, 8192)
    x = torch.randn(rows, h, device=device, dtype=dt)
    w = torch.ones(h, device=device, dtype=dt)
    s = time_fn(lambda: torch.nn.functional.rms_norm(x, (h,), w))
    out.append({"kernel": "rms_norm", "bytes": 2 * rows * h * el, "seconds": s,
                "gb_per_s": round(2 * rows * h * el / s / 1e9, 1)})
    f = 4 * h if not quick else h
    a = torch.randn(rows, f, device=device, dtype=dt)
    b = torch.randn(rows, f, device=device, dtype=dt)
    s = time_fn(lambda: torch.nn.functional.silu(a) * b)
    # as counted by a fused kernel: read a and b, write the product
    out.append({"kernel": "swiglu_eager", "bytes": 3 * rows * f * el, "seconds": s,
                "gb_per_s": round(3 * rows * f * el / s / 1e9, 1)})
    return out


def write(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    cols = list(dict.fromkeys(c for r in rows for c in r))
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--graphs", action="store_true",
                    help="time GEMMs inside CUDA graphs (kernel time, no launch overhead)")
    ap.add_argument("--gemm-only", action="store_true")
    ap.add_argument("--fp8-rowwise", action="store_true",
                    help="only fp8 GEMMs: per-tensor and row-wise scales, both with fast "
                         "accumulation, plus row-wise without (gemm_rowwise.csv)")
    args = ap.parse_args()
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = args.device
    name = torch.cuda.get_device_name(0) if dev != "cpu" else "cpu"
    meta = {"device": name, "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cudnn": torch.backends.cudnn.version() if dev != "cpu" else None}
    if dev != "cpu":
        p = torch.cuda.get_device_properties(0)
        meta.update(sms=p.multi_processor_count, memory_bytes=p.total_memory)
    print(json.dumps(meta))
    (out / "kernels_meta.json").write_text(json.dumps(meta, indent=1))
    t = timer(torch, dev)
    start = time.monotonic()
    how = ", CUDA graphs" if args.graphs else ""
    label = (f"meshplan bench/gpu_kernels.py on {name}, {meta['date'][:10]}, "
             f"torch {torch.__version__}{how}")
    if args.fp8_rowwise:
        kinds = (("fp8_fastacc", True, False), ("fp8_rowwise_fastacc", True, True),
                 ("fp8_rowwise", False, True))
        write(out / "gemm_rowwise.csv", gemms(torch, dev, timer(torch, dev, args.graphs),
                                              gemm_shapes(args.quick),
                                              start + args.budget_s, label, kinds))
        print(f"fp8 rowwise gemm done {time.monotonic() - start:.0f}s", flush=True)
        return
    if not args.gemm_only:
        write(out / "stream.csv", stream(torch, dev, t, args.quick))
        print(f"stream done {time.monotonic() - start:.0f}s", flush=True)
        write(out / "attention.csv", attention(torch, dev, t, args.quick,
                                               start + args.budget_s * 0.35))
        print(f"attention done {time.monotonic() - start:.0f}s", flush=True)
    write(out / "gemm.csv", gemms(torch, dev, timer(torch, dev, args.graphs),
                                  gemm_shapes(args.quick), start + args.budget_s, label))
    print(f"gemm done {time.monotonic() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
