"""Writes grouped_gemm_points.csv: published grouped-GEMM (MoE expert GEMM) kernel timings, and
checks meshplan's prediction against each (``--check``; tests/test_grouped_gemm_points.py
asserts the rows meshplan models).

Each row is one published timing of one grouped-GEMM kernel: ``groups`` GEMMs of
(m x k) @ (k x n) each (the groups split the tokens: m = total tokens / groups for the forward
and the input gradient, k = total tokens / groups for the weight gradient), ``passes`` says
which calls the timing covers:
- ``fwd`` / ``dgrad`` / ``wgrad``: one kernel, (m, n, k) as that kernel runs it;
- ``fwd+dgrad+wgrad+mse``: torchao's fwd+bwd harness (benchmarks/utils.py,
  bench_fwd_bwd_microseconds: ``out = fn(A, B_t, offs); F.mse_loss(out, labels).backward()``
  under torch.compile, timed by triton do_bench, median), with (m, n, k) the forward's. It
  runs the forward, the input gradient (m x n) @ (n x k) and the weight gradient
  (n x m) @ (m x k) per group, plus the harness's own element-wise work, priced here at the
  device's HBM rate (harness_bytes): the loss reads out and labels (2 passes of M x N), its
  backward reads both and writes grad_out (3 passes), and autograd accumulates the repeated
  calls' gradients into A.grad and B.grad in place (read, read, write: 3 passes of M x K and
  of G x N x K); 2-byte elements.

Sources (each row names its own, with its commit and software versions):
- pytorch/ao torchao/prototype/moe_training/README.md at 0b1bb117287185f325161acd6a0bce8fb443936c:
  "Microbenchmarks" (bf16 torch._grouped_mm fwd+bwd for Llama 4 Scout and DeepSeek-V3 expert
  shapes, G = 1..8, B200, torch 2.10.0a0+gitf6de195, torchao 0.14.0+gitc7b8e13da) and "MXFP8
  Kernel Breakdown by Pass" (the torch._scaled_grouped_mm MXFP8 GEMM kernels alone, B200,
  torch 2.11.0.dev20251216+cu128).
- pytorch/pytorch pull request #156203 ("[CUTLASS] [CUDA] SM100 GroupMM", description of
  2025-06-17): torch._grouped_mm bf16, batch 16 of (128000 x 7168) @ (7168 x 7168), "On H200",
  298.6668 ms per call (50 calls timed with CUDA events after 5 warm-up calls). Its B200
  figures are cut off in the stored copy and are not used.
- pytorch/ao benchmarks/prototype/moe_training/fp8_blockwise/README.md at
  ea9d5570214042def360e8d340bfbdfb9e370930: DeepGEMM FP8 blockwise grouped GEMMs (fwd, dgrad,
  wgrad) on H100, balanced tokens, M = 32768, E = 8, N = 2048, K = 7168.

Usage: python bench/data/make_grouped_gemm_points.py            (rewrites the CSV)
       PYTHONPATH=. python bench/data/make_grouped_gemm_points.py --check
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path
from statistics import median

OUT = Path(__file__).resolve().parent / "grouped_gemm_points.csv"
COLS = ["source", "gpu", "dtype", "kernel", "passes", "groups", "m", "n", "k", "measured_us",
        "trust", "derivation"]

AO = ("pytorch/ao torchao/prototype/moe_training/README.md at "
      "0b1bb117287185f325161acd6a0bce8fb443936c, {table}")
AO_BLOCKWISE = ("pytorch/ao benchmarks/prototype/moe_training/fp8_blockwise/README.md at "
                "ea9d5570214042def360e8d340bfbdfb9e370930, H100 Results")
BF16_DERIVATION = (
    "bf16_fwd_bwd_us as printed for (M, N, K, G) = ({M}, {N}, {K}, {G}); m = M / G (the "
    "groups assumed equal: the harness draws jagged offsets, generate_jagged_offs), B200 as "
    "stated, torch 2.10.0a0+gitf6de195 (its GroupMM.cu dispatch is not pinned by the README: "
    "see gemm.KERNEL_TILES); the fwd+bwd harness of benchmarks/utils.py with its loss and "
    "gradient accumulation (module docstring)")
# (N, K): {G: bf16_fwd_bwd_us}, M = 128000 tokens (Llama 4 Scout: dim 5120, expert hidden
# 8192; DeepSeek-V3: dim 7168, expert hidden 2048)
AO_BF16 = {(8192, 5120): {1: 43140.20, 2: 39487.60, 4: 39189.20, 8: 37700.70},
           (2048, 7168): {1: 13064.80, 2: 14900.20, 4: 15823.60, 8: 14966.80}}
AO_M = 128000
MX_DERIVATION = (
    "Time (us) as printed for {what}; 131072 tokens in 8 groups of 16384 (per-group shape "
    "derived from the table's input shapes), B200, torch 2.11.0.dev20251216+cu128, torchao "
    "0.15.0+gitd1305bc78; the GEMM kernel alone (quantisation and scale-layout kernels are "
    "separate rows of that table)")
PR156203 = ("pytorch/pytorch pull request #156203 ([CUTLASS] [CUDA] SM100 GroupMM, "
            "description 2025-06-17), 'On H200'")
PR156203_DERIVATION = (
    "Time per Iteration 298.6668 ms as printed for batch 16, M 128000, N 7168, K 7168: "
    "torch._grouped_mm(a, b) of a (16, 128000, 7168) and b (16, 7168, 7168) bf16 (3D x 3D, "
    "the batched form), 50 calls between two CUDA events after 5 warm-up calls; the forward "
    "only. H200 SXM assumed (the PR says H200); PyTorch built from the PR branch (sm90 "
    "dispatch: 128 x 256 x 64 cooperative for groups over 128 rows and columns)")
DG_DERIVATION = (
    "us as printed for {what}; M = 32768 tokens balanced over E = 8 experts (4096 each, "
    "128-aligned), N = 2048, K = 7168 (DeepSeek-V3 FFN), H100 (SXM assumed: the README says "
    "H100); the GEMM kernel alone")


def rows() -> list[dict]:
    out = []
    for (n, k), by_g in AO_BF16.items():
        for g, us in by_g.items():
            out.append(dict(source=AO.format(table="Microbenchmarks (bf16_fwd_bwd_us)"),
                            gpu="B200", dtype="bf16", kernel="torch_grouped_mm",
                            passes="fwd+dgrad+wgrad+mse", groups=g, m=AO_M // g, n=n, k=k,
                            measured_us=us, trust="B",
                            derivation=BF16_DERIVATION.format(M=AO_M, N=n, K=k, G=g)))
    out.append(dict(source=PR156203, gpu="H200-SXM-141GB", dtype="bf16",
                    kernel="torch_grouped_mm", passes="fwd", groups=16, m=128000, n=7168,
                    k=7168, measured_us=298666.8, trust="B", derivation=PR156203_DERIVATION))
    mx = AO.format(table="MXFP8 Kernel Breakdown by Pass")
    for passes, (m, n, k), us, what in (
            ("fwd", (16384, 2048, 7168), 1838.1,
             "Forward torch._scaled_grouped_mm (131072, 7168) @ (8, 7168, 2048)"),
            ("dgrad", (16384, 7168, 2048), 1838.1,
             "Backward (dA) torch._scaled_grouped_mm (131072, 2048) @ (8, 2048, 7168)"),
            ("wgrad", (2048, 7168, 16384), 2412.4,
             "Backward (dB) 2D-2D torch._scaled_grouped_mm (2048, 131072) @ (131072, 7168)")):
        out.append(dict(source=mx, gpu="B200", dtype="mxfp8", kernel="torch_scaled_grouped_mm",
                        passes=passes, groups=8, m=m, n=n, k=k, measured_us=us, trust="A",
                        derivation=MX_DERIVATION.format(what=what)))
    for passes, (m, n, k), us, what in (
            ("fwd", (4096, 2048, 7168), 779.3, "fwd: deepgemm_grouped_mm"),
            ("dgrad", (4096, 7168, 2048), 778.6, "bwd: deepgemm_grouped_mm_dgrad"),
            ("wgrad", (2048, 7168, 4096), 2105.4, "bwd: deepgemm_grouped_mm_wgrad")):
        out.append(dict(source=AO_BLOCKWISE, gpu="H100-SXM-80GB", dtype="fp8",
                        kernel="deepgemm_fp8_blockwise", passes=passes, groups=8, m=m, n=n, k=k,
                        measured_us=us, trust="B", derivation=DG_DERIVATION.format(what=what)))
    return out


def harness_bytes(r: dict) -> float:
    """Bytes of the fwd+bwd harness's own element-wise work (module docstring); 0 for a row
    that times one kernel."""
    if r["passes"] != "fwd+dgrad+wgrad+mse":
        return 0.0
    g, m, n, k = (float(r[c]) for c in ("groups", "m", "n", "k"))
    tokens = g * m
    return 2.0 * (5 * tokens * n + 3 * tokens * k + 3 * g * n * k)


def predicted_s(r: dict, kernel: str | None = None) -> float:
    """meshplan's seconds for one row at single-kernel conditions (no end-to-end derating:
    tests/test_gemm_model.py _single_kernel_device), through compute.matmul_s with the row's
    kernel (``kernel`` overrides it; "" = the cuBLAS-class menu)."""
    from meshplan.cost import compute, efficiency
    from meshplan.cost.ops import MatMul
    from dataclasses import replace
    from meshplan.specs.catalog.gpus import GPUS

    gpu = GPUS[r["gpu"]]
    dtype = "bf16" if r["dtype"] == "bf16" else "fp8"
    dev = compute.device(gpu, dtype)
    s = efficiency.tensor_derating(gpu.generation)
    dev = replace(dev, matmul_flops=dev.matmul_flops / s, sm_flops=dev.sm_flops / s)
    kn = r["kernel"] if kernel is None else kernel
    g, m, n, k = (float(r[c]) for c in ("groups", "m", "n", "k"))
    if r["passes"] == "fwd+dgrad+wgrad+mse":
        f, i, w = compute.matmul_s(dev, MatMul("experts", m, n, k, g, 0, False, kn))
        return f + i + w + harness_bytes(r) / dev.hbm_bytes_per_s
    return compute.gemm_time_s(dev, m, n, k, g, 0, kn)


def write() -> None:
    with OUT.open("w", newline="") as f:
        w = csv.DictWriter(f, COLS)
        w.writeheader()
        w.writerows(rows())
    print(f"{len(rows())} rows -> {OUT}")


def check() -> None:
    """Measured vs predicted for every row: the row's kernel and the cuBLAS-class menu."""
    ratios = []
    with OUT.open() as f:
        for r in csv.DictReader(f):
            us = float(r["measured_us"])
            p = predicted_s(r) * 1e6
            p0 = predicted_s(r, "") * 1e6
            ratios.append(p / us)
            print(f"{r['gpu']:14s} {r['dtype']:5s} {r['kernel']:24s} {r['passes']:20s} "
                  f"G={r['groups']} m={r['m']} n={r['n']} k={r['k']}: measured {us:9.1f} us, "
                  f"predicted {p:9.1f} us ({p / us:.2f}x), menu {p0:9.1f} us ({p0 / us:.2f}x)")
    print(f"median predicted / measured {median(ratios):.2f}")


if __name__ == "__main__":
    check() if "--check" in sys.argv[1:] else write()
