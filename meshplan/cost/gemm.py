"""Time of one (grouped) GEMM on one GPU from its shape: tiles, waves, K-loop and roofline.

The one function every GEMM of the cost model goes through (training layers via compute.py,
serving via serve/cost.py). A GEMM library splits the m x n output into CTA tiles of a few
fixed shapes, runs them in waves of one tile per SM, each tile stepping through k; it picks
the tile shape (and a split of k over several CTAs) that finishes first. NVIDIA's "Matrix
Multiplication Background User's Guide" (docs.nvidia.com/deeplearning/performance,
dl-performance-matrix-multiplication) describes the two quantisation effects this reproduces:
tile quantisation (m, n padded up to whole tiles) and wave quantisation (ceil(tiles / SMs)
waves, the last one partly idle). Per candidate tile (tm, tn) and split s:

    waves  = ceil(groups * ceil(m/tm) * ceil(n/tn) * s / SMs)
    t_cta  = tile_latency + max(2 tm tn k/s / flops_per_sm,  in_bytes (tm+tn) k/s / sm_load)
    t      = max(waves * t_cta,  tile_latency + bytes(A, B, C) / HBM)  +  split-K partials / HBM

tile_latency is the K-loop's pipeline fill and the epilogue of one CTA (the "ramp": a short
k pays it once per tile), sm_load the operand bandwidth one SM pulls from L2 (small tiles and
skinny GEMMs hit it before the tensor cores), the HBM term the roofline by arithmetic
intensity. A GEMM bound by HBM still pays one ramp: its CTAs stream their operands at the HBM
rate only once their pipelines are full, and the last tile's epilogue runs after the last
byte arrives. Without it, weight-streaming GEMMs (decode batches, small expert batches) came
out at the bare roofline: DeepGEMM's H800 FP8 rows at m = 64 and 128 (held out) had median
|error| 17.9% (the model faster), 5.6% with it; no other table moved by more than 2 points
(tests/test_gemm_model.py). Both constants live in efficiency.py (gemm_tile_latency_s,
gemm_flop_per_load_byte) with their fits and sources. ``flops_per_sm`` is set by the caller so that a large square GEMM (8192^3) runs at
the measured fraction of the datasheet peak (efficiency.py), so the large-GEMM figures stay
microbenchmark numbers and this module adds only the shape dependence.

Checked against 1,900 published per-shape throughputs (bench/data/gemm_points.csv:
OpenXLA's profiled GEMM tables for H100, B200 and MI300X, DeepGEMM's FP8 tables on H800,
Triton's A100 regression table and mamf-finder's best A100 shape) by tests/test_gemm_model.py;
grouped kernels with a fixed tile (KERNEL_TILES) against published grouped-GEMM timings
(bench/data/grouped_gemm_points.csv) by tests/test_grouped_gemm_points.py.
"""

from __future__ import annotations

from functools import lru_cache
from math import ceil

from ..specs.hardware import GPU


# Tile menus (rows x columns of one CTA's output). NVIDIA: CUTLASS 3.x SM90 warp-specialised
# kernels and cuBLASLt use 64-row wgmma granules (64 or 128 rows) with 64-256 columns (CUTLASS
# profiler tile list; DeepGEMM picks BLOCK_M 64/128, BLOCK_N up to 256); Blackwell's tcgen05
# kernels pair two SMs on 256-row tiles (128 rows per SM) from the same column menu; CUTLASS
# 2.x sm80/sm70 tensor-op tiles run 256x128 down to 64x64. CDNA3: hipBLASLt macro tiles
# 256x256 down to 64x64, one per CU.
NV_TILES = ((128, 256), (256, 128), (128, 128), (64, 256), (128, 64), (64, 128), (64, 64))
AMD_TILES = ((256, 256), (256, 128), (128, 256), (128, 128), (64, 128), (128, 64), (64, 64))
TILES = {"cdna2": AMD_TILES, "cdna3": AMD_TILES, "cdna4": AMD_TILES}

# Kernels that run one fixed CTA tile instead of choosing from the library's menu, by
# (kernel, generation, operand bytes): their tile menu, and no split-K (a CUTLASS grouped GEMM,
# GemmUniversalMode::kGrouped, has none). "" (the default) is a cuBLAS-class choice above.
# - "torch_grouped_mm": PyTorch's bf16 torch._grouped_mm (torchtitan's routed experts). On
#   sm10x (B200, GB200, B300) aten/src/ATen/native/cuda/GroupMM.cu at pytorch/pytorch
#   06c0cf0112 (dispatch_bf16_grouped_kernel_on_tile_size) builds one CUTLASS kernel for every
#   shape: the 1-SM tcgen05 schedule KernelPtrArrayTmaWarpSpecialized1SmSm100, TileShape
#   64 x 128 x 128, cluster 2x1x1, for the forward and for both gradients (each is a
#   torch._grouped_mm call). Its 64 x 128 tile feeds 43 FLOP per operand byte against 85 for
#   the 128 x 256 tile cuBLAS picks, so the operand feed into each SM (sm_load_bytes_per_s,
#   fitted on H100 cuBLAS rows) binds before the tensor cores. Checked against torchao's
#   published B200 fwd+bwd timings of that op (bench/data/grouped_gemm_points.csv,
#   tests/test_grouped_gemm_points.py). Later PyTorch (GroupMM.cu at 117b863359) dispatches a
#   2-SM 256 x 256 tile (128 x 256 1-SM when a group is <= 128 rows or columns); no published
#   timing of that version was found, so it is not modelled. Hopper's dispatch (128 x 256
#   cooperative; 64 x 128 ping-pong for groups of <= 128 rows or columns, not modelled) keeps
#   the menu, whose choice is that tile for large groups: the one published Hopper timing
#   (H200, pytorch PR #156203, in the same CSV) comes out 0.87x.
KERNEL_TILES: dict[tuple[str, str, int], tuple[tuple[int, int], ...]] = {
    ("torch_grouped_mm", "blackwell", 2): ((64, 128),),
}


def kernel_tiles(kernel: str, generation: str, in_bytes: float) -> tuple:
    """The fixed tile menu of ``kernel`` on ``generation`` at ``in_bytes`` operands (KERNEL_TILES),
    () where the kernel chooses from its library's menu (cuBLAS class, split-K allowed)."""
    return KERNEL_TILES.get((kernel, generation, int(in_bytes)), ()) if kernel else ()

# SMs (CUs) per generation and per catalog part where it differs. NVIDIA V100, A100, H100
# architecture whitepapers: 80, 108, 132 SMs (H800/H200 keep the H100 die's 132); OpenXLA's
# device specs (xla/backends/gpu/target_config/specs/*.txtpb, core_count as the driver reports
# it): A100 108, H100 SXM 132, B200 148, GB200 152; GA102 RTX 3090 82, TU102 TITAN RTX 72,
# RTX 2080 Ti 68 (Ampere GA102 / Turing whitepapers); AMD CDNA3 whitepaper: MI300X 304 CUs
# (MI325X the same die); MI250X 110 CUs per GCD (220 per OAM, AMD MI250X datasheet); CDNA4 MI355X 256 CUs (8 XCDs x 32 active, ISSCC 2026). Blackwell
# Ultra B300 / GB300: 20,480 CUDA cores at 128 per SM = 160 SMs (NVIDIA Blackwell Ultra
# product pages as tabulated in catalog/gpus.py's sources).
SMS = {"volta": 80, "ampere": 108, "hopper": 132, "blackwell": 148, "cdna2": 110, "cdna3": 304,
       "cdna4": 256}
SM_COUNT = {"GB200": 152, "B300": 160, "GB300": 160, "RTX-3090-24GB": 82, "TITAN-RTX-24GB": 72,
            "RTX-2080-Ti-11GB": 68}

# k splits a cuBLAS-class library may use when m x n gives fewer tiles than SMs (split-K /
# stream-K; the fp32 partial sums are written and read back through HBM after the K-loops,
# a reduction pass that adds to the time)
SPLITS = (1, 2, 4, 8, 16)
MIN_SPLIT_K = 256  # no split leaves a CTA fewer than this many k (one pipeline's worth)
PARTIAL_BYTES = 4

REF_DIM = 8192  # the square GEMM the measured large-GEMM fractions refer to


def sm_count(gpu: GPU) -> int:
    return SM_COUNT.get(gpu.name) or SMS.get(gpu.generation, SMS["hopper"])


def sm_load_bytes_per_s(gpu: GPU, flop_per_load_byte: float) -> float:
    """Operand bandwidth into one SM: its 16-bit tensor peak over the FLOPs per byte the
    generation's L2 feed sustains (sized to the tensor cores, so one ratio per generation;
    the same bytes/s for 8-bit operands, which the tensor cores consume twice as fast)."""
    return gpu.flops("bf16") / sm_count(gpu) / flop_per_load_byte


@lru_cache(maxsize=1 << 16)
def gemm_s(m: float, n: float, k: float, groups: float, sms: int, flops_per_sm: float,
           load_bytes_per_s: float, tile_latency_s: float, hbm_bytes_per_s: float,
           in_bytes: float, generation: str, split_k: bool = True, out_bytes: float = 2,
           tiles: tuple = ()) -> float:
    """Seconds of ``groups`` GEMMs (m x k) @ (k x n) run as one kernel (a grouped or batched
    GEMM: their tiles share the waves). ``tiles``: a kernel's fixed tile menu (kernel_tiles),
    without split-K; () = the generation's menu."""
    return gemm_plan(m, n, k, groups, sms, flops_per_sm, load_bytes_per_s, tile_latency_s,
                     hbm_bytes_per_s, in_bytes, generation, split_k, out_bytes, tiles)[0]


@lru_cache(maxsize=1 << 16)
def gemm_plan(m: float, n: float, k: float, groups: float, sms: int, flops_per_sm: float,
              load_bytes_per_s: float, tile_latency_s: float, hbm_bytes_per_s: float,
              in_bytes: float, generation: str, split_k: bool = True,
              out_bytes: float = 2, tiles: tuple = ()) -> tuple[float, float]:
    """(seconds, share of the SMs its CTAs keep busy over its waves) of the tile and split-K
    choice gemm_s makes: CTAs / (waves x SMs), 1 for a GEMM that fills every wave."""
    if m <= 0 or n <= 0 or k <= 0 or groups <= 0:
        return 0.0, 0.0
    hbm = (in_bytes * (m * k + k * n) + out_bytes * m * n) * groups / hbm_bytes_per_s
    best, busy = float("inf"), 1.0
    menu, splits = (tiles, (1,)) if tiles else (TILES.get(generation, NV_TILES),
                                                SPLITS if split_k else (1,))
    for tm, tn in menu:
        ctas = groups * ceil(m / tm) * ceil(n / tn)
        per_k = max(2.0 * tm * tn / flops_per_sm, in_bytes * (tm + tn) / load_bytes_per_s)
        for s in splits:
            if s > 1 and (k / s < MIN_SPLIT_K or ctas * (s // 2) >= sms):
                break
            kk = ceil(k / s)
            waves = ceil(ctas * s / sms)
            t = waves * (tile_latency_s + per_k * kk)
            partial = (2 * PARTIAL_BYTES * m * n * s * groups / hbm_bytes_per_s) if s > 1 else 0.0
            tt = max(t, hbm + tile_latency_s) + partial
            if tt < best:
                best, busy = tt, ctas * s / (waves * sms)
    return best, busy


@lru_cache(maxsize=256)
def flops_per_sm(achieved_flops: float, sms: int, load_bytes_per_s: float,
                 tile_latency_s: float, hbm_bytes_per_s: float, in_bytes: float,
                 generation: str) -> float:
    """Tensor-core FLOP/s of one SM in the K-loop such that a REF_DIM^3 GEMM runs at
    ``achieved_flops`` (the measured large-GEMM rate): solved by fixed-point iteration."""
    d = REF_DIM
    f = achieved_flops / sms
    for _ in range(40):
        t = gemm_s(d, d, d, 1, sms, f, load_bytes_per_s, tile_latency_s, hbm_bytes_per_s,
                   in_bytes, generation)
        # capped: where operand loads, not the tensor cores, bound the reference GEMM, no
        # K-loop rate reaches it and the largest plausible one (2x the average) is kept
        f = min(f * achieved_flops / (2.0 * d**3 / t), 2.0 * achieved_flops / sms)
    return f
