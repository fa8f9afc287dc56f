"""Writes gemm_points.csv: published single-GEMM throughputs by shape, for the per-shape GEMM
model (meshplan/cost/gemm.py) and its test (tests/test_gemm_model.py).

Sources (each row names its own):
- OpenXLA's default GEMM performance tables (xla/service/gpu/model/default_matmul_perf_table.txtpb,
  commit ad6eaee1b2 of 2026-07-10, keys "sm_90" = H100 SXM per the commit "Update Latency-hiding
  scheduler cost model for GEMMS on H100" (b2766086ec) and "sm_100_B200"; and
  matmul_interpolator_data.h at commit ea2c45f2ca (2026-07-31) for "gfx942" = MI300X, added by
  AMD in "matmul and collective interpolator data for gfx942"). Each entry is a profiled XLA
  GEMM (cuBLAS/cuBLASLt or hipBLASLt) of batch b x (m, k) @ (k, n) with its FLOP/s. The smallest
  entries run at a floor of ~5 us per call (launch and harness time the table includes):
  tests/test_gemm_model.py scores only rows slower than three times that floor.
- DeepGEMM README (github.com/deepseek-ai/DeepGEMM, README.md at commit 327ec92, 2025-04-09):
  FP8 GEMMs with 1x128/128x128 block scaling on H800 (same SMs and clocks as H100 SXM):
  normal GEMMs and grouped GEMMs for MoE (contiguous and masked layouts), TFLOPS as printed.
  DeepGEMM has no split-K: rows carry split_k=0.
- A100 (no cuBLAS per-shape table was found): Triton's performance-regression reference table
  (python/test/regression/test_performance.py, ``matmul_data['a100']``, fp16, as carried at
  FlagTree/flagtree commit 92c687c4, a fork of triton-lang/triton): triton.ops.matmul timed with
  do_bench_cudagraph, as a fraction of the tensor-core peak at the current SM clock, with the
  A100 CI clocks at 1350 MHz (``sm_clocks``): TFLOP/s = fraction x 108 SMs x 2048 FLOP/clk x
  1.35 GHz = fraction x 298.6. Triton's kernel, not cuBLAS (its autotune menu includes split-K).
  And the "Maximum Achievable Matmul FLOPS" table of Stas Bekman's ml-engineering book
  (compute/accelerator/README.md; mamf-finder.py, torch.mm, CUDA 12.1): A100 SXM bf16 267.9
  TFLOP/s at 6912x16384x2048 (MxNxK), the best of a scan of shapes (so biased upward).

Re-run: python bench/data/make_gemm_points.py XLA_TXTPB XLA_GFX942_H DEEPGEMM_README.md
(the files above, e.g. from `git show ad6eaee1b2:xla/service/gpu/model/default_matmul_perf_table.txtpb`
in a clone of openxla/xla or ROCm/xla).
"""
import csv
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "gemm_points.csv"
COLS = ["source", "gpu", "dtype", "groups", "m", "n", "k", "tflops", "split_k"]
XLA_TXTPB = ("OpenXLA default_matmul_perf_table.txtpb (commit ad6eaee1b2, key {key}), "
             "profiled XLA GEMM")
XLA_H = ("OpenXLA matmul_interpolator_data.h (commit ea2c45f2ca, key {key}), profiled XLA GEMM")
GPU = {"sm_90": "H100-SXM-80GB", "sm_100_B200": "B200", "gfx942": "MI300X"}
DTYPE = {"bf16xbf16->bf16": "bf16", "f8e4m3fnxf8e4m3fn->bf16": "fp8",
         "f8e4m3fnuzxf8e4m3fnuz->bf16": "fp8"}
TRITON_A100 = ("Triton test/regression/test_performance.py matmul_data['a100'] fp16 (FlagTree/"
               "flagtree commit 92c687c4, fork of triton-lang/triton), triton.ops.matmul at "
               "1350 MHz SM clock: fraction of clock peak x 298.6")
# (m, n, k): fraction of the tensor-core peak at the 1350 MHz SM clock, as the table prints it
TRITON_A100_UTIL = {
    (512, 512, 512): 0.108, (1024, 1024, 1024): 0.355, (2048, 2048, 2048): 0.653,
    (8192, 8192, 8192): 0.839, (16, 1024, 1024): 0.015, (16, 4096, 4096): 0.080,
    (16, 8192, 8192): 0.083, (64, 1024, 1024): 0.045, (64, 4096, 4096): 0.170,
    (64, 8192, 8192): 0.227, (1024, 64, 1024): 0.040, (4096, 64, 4096): 0.160,
    (8192, 64, 8192): 0.272, (8192, 8192, 8176): 0.828,
}
A100_CLOCK_PEAK_TFLOPS = 108 * 2048 * 1.35e9 / 1e12  # 298.6
MAMF = ("ml-engineering (stas00) compute/accelerator/README.md, Maximum Achievable Matmul "
        "FLOPS table: A100 SXM, CUDA 12.1, best shape of a mamf-finder.py scan")
DEEPGEMM = "DeepGEMM README (deepseek-ai/DeepGEMM commit 327ec92, 2025-04-09), {table}"


def xla_rows(text: str, keys: tuple[str, ...], src: str) -> list[dict]:
    rows = []
    parts = re.split(r'\n\s*key: "((?:sm|gfx)[0-9a-zA-Z_]+)"', text)
    for i in range(1, len(parts), 2):
        key = parts[i]
        if key not in keys:
            continue
        for b, m, n, k, body in re.findall(
                r"b: (\d+)\s+m: (\d+)\s+n: (\d+)\s+k: (\d+)((?:\s+flops\s*\{[^}]*\})+)", parts[i + 1]):
            for dt, v in re.findall(r'flops\s*\{\s*key: "([^"]+)"\s*value: (\d+)\s*\}', body):
                if dt in DTYPE:
                    rows.append(dict(source=src.format(key=key), gpu=GPU[key], dtype=DTYPE[dt],
                                     groups=int(b), m=int(m), n=int(n), k=int(k),
                                     tflops=round(int(v) / 1e12, 2), split_k=1))
    return rows


def deepgemm_rows(text: str) -> list[dict]:
    rows, table = [], ""
    for line in text.splitlines():
        if line.startswith("### "):
            table = line[4:].strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "TFLOPS" not in line or not cells[0].isdigit():
            continue
        nums = [int(c) for c in cells[:-3]]
        g, (m, n, k) = (1, nums) if len(nums) == 3 else (nums[0], nums[1:])
        rows.append(dict(source=DEEPGEMM.format(table=table), gpu="H800-SXM-80GB", dtype="fp8",
                         groups=g, m=m, n=n, k=k, tflops=float(cells[-3].split()[0]), split_k=0))
    return rows


def a100_rows() -> list[dict]:
    rows = [dict(source=TRITON_A100, gpu="A100-SXM-80GB", dtype="fp16", groups=1, m=m, n=n,
                 k=k, tflops=round(u * A100_CLOCK_PEAK_TFLOPS, 2), split_k=1)
            for (m, n, k), u in TRITON_A100_UTIL.items()]
    rows.append(dict(source=MAMF, gpu="A100-SXM-80GB", dtype="bf16", groups=1, m=6912,
                     n=16384, k=2048, tflops=267.9, split_k=1))
    return rows


def main(txtpb: str, gfx_h: str, readme: str) -> None:
    rows = xla_rows(Path(txtpb).read_text(), ("sm_90", "sm_100_B200"), XLA_TXTPB)
    # sm_90 FP8 entries reach 2,424 TFLOP/s at 4096^3, above the H100's 1,979 dense FP8 peak:
    # not a physical kernel time (the FLOP count or the timing is off), so they are left out
    rows = [r for r in rows if not (r["gpu"] == "H100-SXM-80GB" and r["dtype"] == "fp8")]
    rows += xla_rows(Path(gfx_h).read_text(), ("gfx942",), XLA_H)
    rows += deepgemm_rows(Path(readme).read_text())
    rows += a100_rows()
    with OUT.open("w", newline="") as f:
        w = csv.DictWriter(f, COLS)
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows -> {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
