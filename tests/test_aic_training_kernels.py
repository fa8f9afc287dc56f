"""The training cost model's kernels against NVIDIA AIConfigurator's measured tables at
training sizes (bench/data/aic_training_kernels.csv; source, commit and the conditions of each
measurement in its header; bench/data/make_aic_training_kernels.py extracts it). Held out: no
constant of meshplan was chosen on these rows.

error = measured time / modelled time - 1 (positive: the model is fast). GEMMs and attention
are compared at single-kernel conditions (the device's rate without the end-to-end
efficiency.tensor_derating, as tests/test_gemm_model.py and tests/test_amd_attention.py do);
collectives as cost/collectives.py prices one call on one NVSwitch board.

PINS hold the median signed error and the 90th percentile of |error| per region as measured
on 2026-11-29 (tolerance: each may move 3 points before the test fails; a change that moves
them is a change of the model to be explained, and the pins updated with it). Where the model
is accurate the tests assert it outright (bf16 GEMMs, Hopper collectives at 128 MiB and above);
the large gaps pinned here are reported, not fixed (see each PIN's comment):
- fp8 GEMMs: TensorRT-LLM's per-tensor FP8 Linear is 1.37-1.45x faster than its bf16 one
  (median of bf16 time / fp8 time; 0.52-0.55 of the fp8 peak on Hopper), where the model's
  fp8 device runs 1.9x its bf16 rate (H100: 1504 vs 792 TFLOP/s, 0.76 of the fp8 peak, held
  by gemm_points.csv's DeepGEMM H800 and OpenXLA B200 rows): +32..+58%. Pricing the input
  quantize kernel as well (3 m k bytes at the HBM rate) leaves +26..+41%. The path timed is
  TensorRT-LLM's FP8QDQLinearMethod.apply (tensorrt_llm/_torch/modules/linear.py):
  static_quantize_e4m3_per_tensor, then cublas_scaled_mm, bf16 out: a cuBLASLt kernel, as
  Transformer Engine's, so the gap is a conflict between sources for the lead to weigh.
- context attention: TensorRT-LLM's FMHA (an inference kernel; the whole op, KV-cache writes
  included) runs 528 TFLOP/s on H100 at 16k keys (batch 8, 32 heads, causal half counted)
  where the model's training kernel (TE-class, 0.62 of 989 at 8k) gives ~630: +31% at
  6k-16k, +55% at 2k-4k, where fixed per-call work weighs more; B200 +13% at 6k-16k.
- B200 / GB200 all-reduce: NVLS gains 1.14x over all-gather's bus bandwidth at 512 MiB
  (704 vs 617 GB/s; 683-704 vs 596-618 over the table's NCCL 2.27.3-2.29.2) where Hopper's
  NETWORK.nvls_allreduce gives 1.30 (set on 8x H100 / H800; H100 here: 445 vs 335, 1.33).
  A public run agrees: 72x GB200 all-reduce levels at 835-839 GB/s at 4-8 GiB (586 at
  512 MiB; coreweave/nccl-tests#43), 1.16x the model's 0.80 x 900 ring. Blackwell now has
  its own factor, NETWORK.nvls_allreduce_blackwell 1.14 (it had Hopper's: the B200
  128-512 MiB median +36%, GB200 +45%); what remains (+20%, +28%) is a ramp that on
  Blackwell is still climbing at 512 MiB.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from statistics import median

import pytest

from meshplan.cost import collectives as C
from meshplan.cost import compute, efficiency
from meshplan.cost.layer import layer_ops_times
from meshplan.cost.ops import Shard
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.hardware import Cluster
from meshplan.specs.model import ModelSpec

DATA = Path(__file__).resolve().parents[1] / "bench" / "data" / "aic_training_kernels.csv"
ROWS = list(csv.DictReader(line for line in DATA.open() if not line.startswith("#")))
DRIFT = 0.03  # points a pinned median or p90 may move


def _single_kernel_device(gpu: str, dtype: str) -> compute.Device:
    compute.device.cache_clear()
    dev = compute.device(GPUS[gpu], dtype)
    s = efficiency.tensor_derating(GPUS[gpu].generation)
    return replace(dev, matmul_flops=dev.matmul_flops / s, sm_flops=dev.sm_flops / s)


def _gemm_errors(gpu: str, dtype: str, lo: int, hi: int) -> list[float]:
    dev = _single_kernel_device(gpu, dtype)
    out = []
    for r in ROWS:
        if r["kind"] == "gemm" and r["gpu"] == gpu and r["dtype"] == dtype:
            m, n, k = (int(r[c]) for c in ("m", "n", "k"))
            if lo <= m <= hi:
                out.append(float(r["time_us"]) * 1e-6 / compute.gemm_time_s(dev, m, n, k) - 1)
    compute.device.cache_clear()
    return out


def _attention_errors(gpu: str, lo: int, hi: int) -> list[float]:
    """Forward attention core as op_times prices it for one layer of the row's shape."""
    cluster = make_cluster(gpu=gpu, num_gpus=8)
    out = []
    for r in ROWS:
        if r["kind"] != "attention" or r["gpu"] != gpu or not lo <= int(r["seq"]) <= hi:
            continue
        h, kv, d = int(r["heads"]), int(r["kv_heads"]), int(r["head_dim"])
        m = ModelSpec(name="t", layers=1, hidden=h * d, heads=h, kv_heads=kv, ffn=4 * h * d,
                      vocab=32000)
        _, _, t = layer_ops_times(m, cluster, "dense", Shard(int(r["seq"]), int(r["batch"])),
                                  "bf16")
        out.append(float(r["time_us"]) * 1e-6
                   / (t.attn_fwd_s * efficiency.tensor_derating(cluster.gpu.generation)) - 1)
    return out


def _collective_errors(gpu: str, coll: str, lo: int, hi: int) -> list[float]:
    out = []
    for r in ROWS:
        if r["kind"] != coll or r["gpu"] != gpu or not lo <= int(r["size_bytes"]) <= hi:
            continue
        n, size = int(r["gpus"]), float(r["size_bytes"])
        cl = Cluster(GPUS[gpu], n, gpus_per_node=n, scaleup_domain=n)
        p = C.Placement(n, n)
        t = C.all_reduce_s(cl, p, size) if coll == "all_reduce" else C.all_gather_s(cl, p, size)
        out.append(float(r["time_us"]) * 1e-6 / t - 1)
    return out


def _spread(errs: list[float]) -> tuple[float, float]:
    a = sorted(abs(e) for e in errs)
    return median(errs), a[int(0.9 * len(a))]


H1, H2, B2, GB = "H100-SXM-80GB", "H200-SXM-141GB", "B200", "GB200"
SMALL_M, LARGE_M = (2048, 4096), (8192, 32768)
SHORT, LONG = (2048, 4096), (6144, 16384)
RAMP, LARGE = (2**20, 2**26), (2**27, 2**29)

# (median signed error, p90 |error|), measured 2026-11-29 with this file's functions
GEMM_PINS = {
    (H1, "bf16", SMALL_M): (0.044, 0.123), (H1, "bf16", LARGE_M): (0.111, 0.205),
    (H2, "bf16", SMALL_M): (-0.002, 0.154), (H2, "bf16", LARGE_M): (0.111, 0.176),
    (B2, "bf16", SMALL_M): (0.043, 0.220), (B2, "bf16", LARGE_M): (0.110, 0.232),
    # the fp8 gap (module docstring)
    (H1, "fp8", SMALL_M): (0.395, 0.761), (H1, "fp8", LARGE_M): (0.406, 0.682),
    (H2, "fp8", SMALL_M): (0.321, 0.648), (H2, "fp8", LARGE_M): (0.366, 0.629),
    (B2, "fp8", SMALL_M): (0.442, 0.842), (B2, "fp8", LARGE_M): (0.583, 1.030),
}
ATTENTION_PINS = {
    (H1, SHORT): (0.553, 0.935), (H1, LONG): (0.306, 0.395),
    (H2, SHORT): (0.490, 0.852), (H2, LONG): (0.282, 0.348),
    (B2, SHORT): (0.656, 1.309), (B2, LONG): (0.129, 0.311),
}
# RAMP: 1-64 MiB, LARGE: 128-512 MiB (3 sizes: the p90 is the largest error)
COLLECTIVE_PINS = {
    (H1, "all_reduce", RAMP): (0.104, 0.227), (H1, "all_reduce", LARGE): (0.046, 0.068),
    (H1, "all_gather", RAMP): (-0.223, 0.331), (H1, "all_gather", LARGE): (0.027, 0.029),
    (H1, "reduce_scatter", RAMP): (-0.245, 0.402), (H1, "reduce_scatter", LARGE): (0.017, 0.027),
    (H2, "all_reduce", RAMP): (0.095, 0.219), (H2, "all_reduce", LARGE): (0.008, 0.042),
    (H2, "all_gather", RAMP): (-0.173, 0.345), (H2, "all_gather", LARGE): (0.023, 0.024),
    (H2, "reduce_scatter", RAMP): (-0.257, 0.391), (H2, "reduce_scatter", LARGE): (0.010, 0.023),
    # the Blackwell all-reduce gap (module docstring); all-gather / reduce-scatter are
    # still ramping at 512 MiB on B200 (568 -> 598 -> 617 GB/s from 128 to 512 MiB)
    (B2, "all_reduce", RAMP): (0.671, 0.766), (B2, "all_reduce", LARGE): (0.201, 0.287),
    (B2, "all_gather", RAMP): (0.258, 0.707), (B2, "all_gather", LARGE): (0.072, 0.099),
    (B2, "reduce_scatter", RAMP): (0.117, 0.594), (B2, "reduce_scatter", LARGE): (0.080, 0.106),
    (GB, "all_reduce", RAMP): (0.248, 1.266), (GB, "all_reduce", LARGE): (0.276, 0.290),
    (GB, "all_gather", RAMP): (0.162, 0.476), (GB, "all_gather", LARGE): (0.208, 0.219),
    (GB, "reduce_scatter", RAMP): (0.157, 0.382), (GB, "reduce_scatter", LARGE): (0.251, 0.252),
}


def _assert_pinned(errs: list[float], pin: tuple[float, float], key) -> None:
    med, p90 = _spread(errs)
    assert abs(med - pin[0]) <= DRIFT, (key, "median", round(med, 3), pin)
    assert p90 <= pin[1] + DRIFT, (key, "p90", round(p90, 3), pin)


def test_table_holds_every_region():
    count: dict[tuple[str, str, str], int] = {}
    for r in ROWS:
        key = (r["kind"], r["gpu"], r["dtype"])
        count[key] = count.get(key, 0) + 1
    for gpu in (H1, B2):
        assert count[("gemm", gpu, "bf16")] == count[("gemm", gpu, "fp8")] == 245  # 5 m x 7 n x 7 k
    assert count[("gemm", H2, "bf16")] == count[("gemm", H2, "fp8")] == 147  # m <= 8192 only
    for gpu in (H1, H2, B2):
        assert count[("attention", gpu, "bf16")] == 122
    for gpu in (H1, H2, B2, GB):
        for coll in ("all_reduce", "all_gather", "reduce_scatter"):
            assert count[(coll, gpu, "fp16")] == 10  # 1 MiB .. 512 MiB


@pytest.mark.parametrize("key", sorted(GEMM_PINS, key=str))
def test_gemm_error_is_pinned(key):
    gpu, dtype, band = key
    errs = _gemm_errors(gpu, dtype, *band)
    assert len(errs) >= 49
    _assert_pinned(errs, GEMM_PINS[key], key)


@pytest.mark.parametrize("gpu", [H1, H2, B2])
def test_bf16_training_gemms_within_12_percent_median_and_25_p90(gpu):
    """Stated accuracy at training shapes (m = 2k-32k tokens, n, k = 4k-16k), bf16: the model is
    fast by 4% (m <= 4096) to 11% (m >= 8192) in the median. The larger bias at large m is in
    the measured rates: H100 reaches 0.75 of its bf16 peak in the median at m <= 4096 and
    0.72 above (0.78 / 0.72 on H200), a fall with size that the shape model, whose share of
    peak rises towards its large-GEMM rate, does not have. The table does not show why
    (clocks under calls of 1-20 ms would be one mechanism; unmeasured here)."""
    for band in (SMALL_M, LARGE_M):
        med, p90 = _spread(_gemm_errors(gpu, "bf16", *band))
        assert -0.05 <= med <= 0.12 and p90 <= 0.25, (gpu, band, med, p90)


@pytest.mark.parametrize("key", sorted(ATTENTION_PINS, key=str))
def test_attention_error_is_pinned(key):
    gpu, band = key
    errs = _attention_errors(gpu, *band)
    assert len(errs) >= 48
    _assert_pinned(errs, ATTENTION_PINS[key], key)


@pytest.mark.parametrize("key", sorted(COLLECTIVE_PINS, key=str))
def test_collective_error_is_pinned(key):
    gpu, coll, band = key
    errs = _collective_errors(gpu, coll, *band)
    assert len(errs) in (3, 7)
    _assert_pinned(errs, COLLECTIVE_PINS[key], key)


@pytest.mark.parametrize("gpu", [H1, H2])
def test_hopper_collectives_at_gradient_sizes_within_7_percent(gpu):
    """8x H100 / H200, NCCL 2.29.2: all-reduce (NVLS), all-gather and reduce-scatter of
    128-512 MiB within 7% of the model (NETWORK.scaleup 0.80, nvls_allreduce 1.30); measured
    at 512 MiB: 445 / 335 / 336 GB/s bus bandwidth on H100."""
    for coll in ("all_reduce", "all_gather", "reduce_scatter"):
        errs = _collective_errors(gpu, coll, *LARGE)
        assert max(abs(e) for e in errs) <= 0.07, (gpu, coll, errs)
