"""Compute time of operations on one GPU.

A GEMM's time comes from its shape (cost/gemm.py: tiles, waves, K-loop ramp, HBM roofline);
its backward is two GEMMs of the same FLOPs (input gradient m x k from n, weight gradient
n x k from m). Flash
attention runs at its own fraction of peak, its backward doing 2.5x the forward FLOPs (five
matrix products instead of two, FlashAttention-2 sec. 3), at an efficiency that grows with
the sequence length. Streaming work is bytes over HBM bandwidth; its backward moves about
twice the bytes. Every kernel adds KERNEL_GAP_S of idle time on the critical path; tensor-core
work runs at efficiency.tensor_derating of the microbenchmark rate (the clock held under
sustained load times SUSTAINED_TENSOR).
"""

from __future__ import annotations

from math import ceil

from dataclasses import dataclass
from functools import lru_cache

from ..specs.hardware import GPU
from ..specs.hashing import cached_hash
from . import efficiency, gemm
from .efficiency import KernelEfficiency, kernel_efficiency
from .engine_p2p import p2p_split
from ..specs.workload import FP32_STORAGE
from .attention_memory import materialises_scores
from .ops import ACT, LayerOps, MatMul, Shard

# Attention backward FLOPs over forward: the forward runs two matmuls per score tile (QK^T,
# PV), the backward five (QK^T recomputed, dV, dP, dQ, dK): 5/2, the count flash-attn's own
# benchmark uses (Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py,
# flops(mode='bwd') = 2.5 x the forward's).
ATTN_BWD_FLOP_RATIO = 2.5
# Element-wise (bandwidth-bound) work in backward over forward: each op reads its saved input
# and the output gradient and writes the input gradient, against one read and one write
# forward (e.g. a norm or an activation: 2 reads + 1 write vs 1 + 1, plus the weight-gradient
# reduction of norms), rounded to 2: an assumption from that count, not a measurement (the
# element-wise share of a step is a few percent: dense_breakdown's 'stream' line).
STREAM_BWD_BYTE_RATIO = 2.0


@cached_hash
@dataclass(frozen=True)
class Device:
    """A GPU as the compute model sees it for one precision."""

    matmul_flops: float  # achievable large-GEMM FLOP/s at the workload's precision
    attn_flops: float  # 16-bit peak (attention stays in bf16/fp16)
    attn_fwd_eff: float
    attn_bwd_eff: float
    hbm_bytes_per_s: float
    matmul_bytes: int  # operand bytes for the roofline's memory side
    kernel_gap_s: float = 0.0  # idle time per kernel launch on the critical path
    # GEMM shape model (gemm.py): SMs, K-loop FLOP/s of one SM (normalised so that an 8192^3
    # GEMM runs at matmul_flops), operand bandwidth into one SM, fixed time per CTA tile
    generation: str = "hopper"
    sms: int = 132
    sm_flops: float = 0.0
    sm_load_bytes_per_s: float = 0.0
    tile_latency_s: float = 0.0
    # fp32 / tf32 training: activations are 4-byte elements, twice the 16-bit bytes that
    # ops.py counts, and no flash-class kernel exists (unfused_attention_s)
    act_scale: float = 1.0
    unfused_attention: bool = False
    # element-wise passes over the scores of that unfused path: (forward score passes,
    # backward score passes, forward mask passes, backward mask passes): TORCH_SOFTMAX_PASSES
    # for fp32, FUSED_SOFTMAX_PASSES for 16-bit runs without flash kernels,
    # EAGER_SOFTMAX_PASSES where the run states the eager path (unfused_passes_of)
    unfused_passes: tuple = ()
    # the 16-bit device for GEMMs an FP8 recipe keeps in high precision (MatMul.high_precision;
    # None: this device is already 16-bit)
    hp: "Device | None" = None
    # attention's tensor-core and exponential rates per SM per clock (efficiency.ATTENTION_EXP;
    # 0: no exponential model for the part, attn_*_eff hold at every head dim)
    tc_flops_per_sm_clock: float = 0.0
    exp_per_sm_clock: float = efficiency.EXP_PER_SM_CLOCK
    # the attention kernel class (attention_kernel_of): its rates at head dims above 128
    # (wide_head_factor)
    attn_kernel: str = "te"


def attention_rates(gpu: GPU) -> tuple[float, float]:
    """(16-bit tensor-core FLOPs, exponentials) per SM per clock of ``gpu``
    (efficiency.ATTENTION_EXP; 0 tensor FLOPs: no exponential model for the part)."""
    tc = efficiency.SKU_TENSOR_FLOPS_PER_SM_CLOCK.get(
        gpu.name, efficiency.TENSOR_FLOPS_PER_SM_CLOCK.get(gpu.generation or "hopper", 0.0))
    return tc, efficiency.SKU_EXP_PER_SM_CLOCK.get(gpu.name, efficiency.EXP_PER_SM_CLOCK)


def _carry_attention(fraction: float, tc: float, backward: bool, head_dim_from: float,
                     exp_from: float, head_dim_to: float, exp_to: float) -> float:
    """An attention fraction measured at ``head_dim_from`` with ``exp_from`` exponentials per
    SM per clock, carried to ``head_dim_to`` and ``exp_to`` (head dims of 128 and above count
    as 128): time per score element = tensor-core FLOPs / tc x x_mma + ATTENTION_EXP /
    exponential rate, with x_mma solved at the measured point. Returned as is where the
    model does not apply (no rates, or a fraction above what the exponentials allow)."""
    if not tc or not head_dim_from or not head_dim_to or fraction <= 0:
        return fraction
    per_dim = ATTN_BWD_FLOP_RATIO * 4.0 if backward else 4.0  # FLOPs per element per unit d
    d_from = min(head_dim_from, efficiency.ATTENTION_REF_HEAD_DIM)
    x_mma = 1.0 / fraction - efficiency.ATTENTION_EXP / exp_from * tc / (per_dim * d_from)
    if x_mma <= 0:
        return fraction
    mma = per_dim * min(head_dim_to, efficiency.ATTENTION_REF_HEAD_DIM) / tc
    return mma / (mma * x_mma + efficiency.ATTENTION_EXP / exp_to)


@lru_cache(maxsize=4096)
def attention_efficiency(dev: Device, head_dim: float, backward: bool = False,
                         d_qk: float = 0.0, d_v: float = 0.0) -> float:
    """Fraction of ``dev.attn_flops`` a flash-attention kernel reaches at mean head dimension
    ``head_dim`` ((d_qk + d_v) / 2), forward or backward (efficiency.ATTENTION_EXP): the
    device's fraction at head dim 128 on its generation's reference part splits into
    tensor-core time and exposed exponential time; a smaller head dim does fewer FLOPs per
    exponential, and a part with a faster exponential unit (Blackwell Ultra) hides more.
    Given the query/key and value head dims, a kernel above head dim 128 runs at its measured
    share of its head-dim-128 rate (wide_head_factor). Cached: a few devices and head dims
    recur for every layer shape the search prices."""
    e = _carry_attention(dev.attn_bwd_eff if backward else dev.attn_fwd_eff,
                         dev.tc_flops_per_sm_clock, backward,
                         efficiency.ATTENTION_REF_HEAD_DIM, efficiency.EXP_PER_SM_CLOCK,
                         head_dim, dev.exp_per_sm_clock)
    return e * wide_head_factor(dev, d_qk, d_v, backward)


def core_attention_efficiency(dev: Device, ops: LayerOps, backward: bool = False) -> float:
    """attention_efficiency at a layer's attention-core head dims (ops.attention_ops)."""
    return attention_efficiency(dev, ops.score_head_dim, backward, ops.score_qk_head_dim,
                                ops.score_v_head_dim)


def wide_head_factor(dev: Device, d_qk: float, d_v: float, backward: bool = False) -> float:
    """A kernel's rate at query/key head dim ``d_qk`` and value head dim ``d_v`` over its rate
    at head dim 128 (efficiency.WIDE_HEAD_ATTENTION, measured on Hopper): 1 at 128 and below,
    on parts or kernel classes not measured, and for unfused attention. flash-attn 2 pads a
    narrower value to d_qk, so it does (d_qk, d_qk) work for (d_qk + d_v) / 2 of it."""
    ref = efficiency.ATTENTION_REF_HEAD_DIM
    if d_qk <= ref or dev.unfused_attention:
        return 1.0
    kernel = dev.attn_kernel
    table = efficiency.WIDE_HEAD_ATTENTION.get(kernel)
    if not table or dev.generation not in efficiency.WIDE_HEAD_GENERATIONS.get(kernel, ()):
        return 1.0
    d_v = d_v or d_qk
    pad = 1.0
    if kernel == "fa2" and d_v < d_qk:
        pad, d_v = (d_qk + d_v) / (2.0 * d_qk), d_qk
    shapes = _measured_shapes(kernel, table)
    # nearest measured shape, counting a change of d_qk - d_v too (a uniform head takes a
    # uniform entry)
    near = min(shapes, key=lambda sh: (abs(sh[0] - d_qk) + abs(sh[1] - d_v)
                                       + abs((sh[0] - sh[1]) - (d_qk - d_v)), sh))
    return shapes[near][1 if backward else 0] * pad


_SHAPES: dict = {}  # kernel -> (its WIDE_HEAD_ATTENTION table, that table's shapes)


def _measured_shapes(kernel: str, table: dict) -> dict:
    """``table``'s "QKxV" keys as (d_qk, d_v) -> rates, parsed once per table (the search
    asks for thousands of layer shapes)."""
    hit = _SHAPES.get(kernel)
    if hit is None or hit[0] is not table:
        hit = _SHAPES[kernel] = (table, {tuple(float(x) for x in key.split("x")): rates
                                         for key, rates in table.items()})
    return hit[1]


def reference_attention_fraction(gpu: GPU, measured: float, head_dim: float,
                                 backward: bool = False) -> float:
    """The inverse of attention_efficiency: the head-dim-128 fraction on the generation's
    reference part (16 exponentials per SM per clock) that gives ``measured`` on ``gpu`` at
    ``head_dim``; what ``meshplan calibrate`` writes for its flash-attention timing."""
    tc, exp = attention_rates(gpu)
    return _carry_attention(measured, tc, backward, head_dim, exp,
                            efficiency.ATTENTION_REF_HEAD_DIM, efficiency.EXP_PER_SM_CLOCK)


def attention_kernel_of(engine: str, kernel: str = "") -> str:
    """The attention kernel class a step runs: the one the run states (``kernel``), else
    its engine's default (efficiency.ENGINE_ATTENTION; meshplan's own runtime, engine "",
    uses the best kernels available: TE class)."""
    if kernel:
        return kernel
    if engine == "":
        return "te"
    return efficiency.ENGINE_ATTENTION.get(engine, "fa2")


def engine_attention(generation: str, engine: str, kernel: str = "") -> tuple[float, float]:
    """(forward, backward) long-sequence attention efficiency of the kernel ``engine`` runs
    (or ``kernel``, where the run states it: efficiency.ATTENTION_KERNELS)."""
    e = kernel_efficiency(generation)
    k = attention_kernel_of(engine, kernel)
    if k == "te":
        return e.attention_fwd, e.attention_bwd
    f, b = efficiency.ATTENTION_FA2.get(generation, (e.attention_fwd, e.attention_bwd))
    if k == "triton-fa1":
        sf, sb = efficiency.TRITON_FA1_SLOWDOWN
        return f / sf, b / sb
    return f, b


@lru_cache(maxsize=64)
def device(gpu: GPU, precision: str, engine: str = "", attention_kernel: str = "",
           fp8_gemm_share: float = 1.0) -> Device:
    """``engine`` is the framework that runs the step ("" = meshplan's own runtime, which
    uses the best kernels available: TE-class attention); ``attention_kernel`` the attention
    kernel class where the run states one ("" = the engine's default); ``fp8_gemm_share`` the
    FP8 recipe's scaled-GEMM rate over the per-tensor FP8 GEMM (fp8_recipe.GEMM_SHARE)."""
    e: KernelEfficiency = kernel_efficiency(gpu.generation)
    clock = efficiency.tensor_derating(gpu.generation or "hopper")
    if gpu.power_limit_w and e.full_clock_power_w:
        clock *= min(1.0, (gpu.power_limit_w / e.full_clock_power_w)
                     ** efficiency.POWER_CLOCK_EXPONENT)
    if precision in FP32_STORAGE:
        return _fp32_device(gpu, precision, e, clock, attention_kernel)
    fp8 = precision == "fp8" and "fp8" in gpu.peak_flops
    peak = gpu.flops("fp8" if fp8 else "bf16")
    frac = _matmul_fraction(gpu, e, "fp8" if fp8 else "bf16")
    af, ab = engine_attention(gpu.generation, engine, attention_kernel)
    k = attention_clock_ratio(gpu, e)
    af, ab = af * k, ab * k
    flops = peak * clock * frac  # an 8192^3 GEMM at the measured fraction, sustained
    if fp8:
        flops *= fp8_gemm_share
    hbm = gpu.memory_bytes_per_s * e.memory
    sms = gemm.sm_count(gpu)
    load = gemm.sm_load_bytes_per_s(gpu, e.gemm_flop_per_load_byte)
    b = 1 if fp8 else 2
    gen = gpu.generation or "hopper"
    sm_flops = gemm.flops_per_sm(flops, sms, load, e.gemm_tile_latency_s, hbm, b, gen)
    # no flash-class kernel on the part for this engine (attention_memory.py): the scores
    # are materialised, so the attention core is two batched GEMMs and Megatron's fused
    # softmax passes over them instead of a flash kernel's share of the peak
    unfused = materialises_scores(gpu.generation, engine, attention_kernel)
    tc, exp = attention_rates(gpu)
    return Device(flops, gpu.flops("bf16") * clock, af, ab, hbm, b, efficiency.KERNEL_GAP_S,
                  gen, sms, sm_flops, load, e.gemm_tile_latency_s,
                  unfused_attention=unfused,
                  unfused_passes=unfused_passes_of(attention_kernel, False) if unfused else (),
                  hp=device(gpu, "bf16", engine, attention_kernel) if fp8 else None,
                  tc_flops_per_sm_clock=0.0 if unfused else tc, exp_per_sm_clock=exp,
                  attn_kernel=attention_kernel_of(engine, attention_kernel))


def _fp32_device(gpu: GPU, precision: str, e: KernelEfficiency, clock: float,
                 attention_kernel: str = "") -> Device:
    """fp32 storage: GEMMs at the TF32 tensor-core rate (``tf32``, where the GPU has TF32:
    Ampere and newer) or the fp32 rate, 4-byte operands; the GEMM fraction is the part's
    measured SGEMM fraction where there is one (V100), else the 16-bit one, and the shape
    model is the 16-bit one (cuBLAS SGEMM and TF32 GEMMs reach a similar share of their peak
    on large shapes: an assumption). FlashAttention 2 supports
    fp16 and bf16 only (flash-attn README, "Datatype fp16 and bf16"), so attention runs
    unfused (Megatron CoreAttention: baddbmm, scale-mask-softmax, dropout, bmm)."""
    p = "tf32" if precision == "tf32" and "tf32" in gpu.peak_flops else "fp32"
    mm = gpu.flops(p) * clock * _matmul_fraction(gpu, e, "fp32" if p == "fp32" else "bf16")
    hbm = gpu.memory_bytes_per_s * e.memory
    sms = gemm.sm_count(gpu)
    load = gemm.sm_load_bytes_per_s(gpu, e.gemm_flop_per_load_byte)
    gen = gpu.generation or "hopper"
    sm_flops = gemm.flops_per_sm(mm, sms, load, e.gemm_tile_latency_s, hbm, 4, gen)
    return Device(mm, mm, 1.0, 1.0, hbm, 4, efficiency.KERNEL_GAP_S, gen, sms, sm_flops, load,
                  e.gemm_tile_latency_s, act_scale=FP32_BYTES / ACT, unfused_attention=True,
                  unfused_passes=unfused_passes_of(attention_kernel, True))


def attention_clock_ratio(gpu: GPU, e: KernelEfficiency) -> float:
    """The matrix clock ``gpu`` holds over the part its generation's attention fractions were
    measured on (efficiency.ATTENTION_MEASURED_ON), read off both parts' bf16 GEMM fractions;
    1 where the generation names no such part, for that part itself, and for a part without
    a GEMM measurement of its own (efficiency.SKU_MATMUL)."""
    ref = efficiency.ATTENTION_MEASURED_ON.get(gpu.generation)
    own = efficiency.SKU_MATMUL.get(gpu.name, {}).get("bf16")
    if not ref or gpu.name == ref or own is None:
        return 1.0
    return own / efficiency.SKU_MATMUL.get(ref, {}).get("bf16", e.matmul_bf16)


def _matmul_fraction(gpu: GPU, e: KernelEfficiency, dtype: str) -> float:
    """The large-GEMM fraction of ``gpu`` at ``dtype`` ("bf16", "fp8" or "fp32", SIMT fp32):
    the part's own measurement where efficiency.SKU_MATMUL has one; a part measured at bf16
    only takes that times its generation's fp8 / bf16 ratio at fp8; fp32 without a
    measurement takes the 16-bit fraction (_fp32_device); else its generation's."""
    sku = efficiency.SKU_MATMUL.get(gpu.name, {})
    if dtype in sku:
        return sku[dtype]
    if dtype == "fp32":
        return _matmul_fraction(gpu, e, "bf16")
    if dtype == "fp8" and "bf16" in sku:
        return sku["bf16"] * e.matmul_fp8 / e.matmul_bf16
    return e.matmul_fp8 if dtype == "fp8" else e.matmul_bf16


# Unfused attention (Megatron CoreAttention without --use-flash-attn, the path of
# megatron/model/transformer.py and fused_softmax.py FusedScaleMaskSoftmax.forward_torch_softmax,
# which fp32 inputs take): element-wise passes over the score tensor, counted in reads plus
# writes of one score-sized tensor. Forward: scale (read + write), masked_fill_ (read +
# write), softmax (read + write), dropout (read + write, plus a 1-byte mask written): 8 full
# passes + the mask. Backward: dropout (read grad and mask, write), softmax backward (read
# output and grad, write), masked_fill (read grad and mask, write), scale (read + write):
# 9 full passes + two mask reads. The two batched GEMMs (q k^T writing the scores, probs x v
# reading them) are costed as GEMMs with their own memory side (matmul_s).
UNFUSED_SCORE_PASSES_FWD = 8.0
UNFUSED_SCORE_PASSES_BWD = 9.0
UNFUSED_MASK_PASSES_FWD = 1.0
UNFUSED_MASK_PASSES_BWD = 2.0
TORCH_SOFTMAX_PASSES = (UNFUSED_SCORE_PASSES_FWD, UNFUSED_SCORE_PASSES_BWD,
                        UNFUSED_MASK_PASSES_FWD, UNFUSED_MASK_PASSES_BWD)
FP32_BYTES = 4
# The 16-bit path of the same module (FusedScaleMaskSoftmax with its CUDA kernel,
# scaled_masked_softmax_cuda / scaled_upper_triang_masked_softmax_cuda, which fp16/bf16
# inputs take): scale, mask and softmax in one kernel (read the scores, write the
# probabilities), then dropout (read + write, 1-byte mask written): 4 passes + the mask.
# Backward: dropout (read grad and mask, write), the fused softmax backward (read output and
# grad, write): 5 passes + one mask read.
FUSED_SOFTMAX_PASSES = (4.0, 5.0, 1.0, 1.0)
# The eager path of Megatron-LM before its fused softmax kernels (mpu/transformer.py at
# abe36e2e5f, 2019-07-29, "large update including model parallelism and gpt2": the code of
# the Megatron-LM paper's GPT-2 runs; the fused kernels came in 2020), each step its own
# kernel over the fp16 scores: ``scores / sqrt(d)`` (read + write), ``torch.mul(scores,
# mask)`` (read + write; the [1, 1, s, s] mask is broadcast, s^2 elements, not a pass over
# the batch's scores), ``- 10000.0 * (1.0 - mask)`` (read + write), softmax (read + write),
# dropout (read + write, 1-byte mask written): 10 passes + the mask. Backward: dropout (read
# grad and mask, write), softmax backward (read output and grad, write), the mask product
# (read grad, write; the subtraction passes its gradient through), the scale (read, write):
# 9 passes + one mask read. (efficiency.ATTENTION_KERNELS "unfused-eager".)
EAGER_SOFTMAX_PASSES = (10.0, 9.0, 1.0, 1.0)


def unfused_passes_of(kernel: str, fp32: bool) -> tuple:
    """The score passes of an unfused attention core: the eager PyTorch path where the run
    states it, else Megatron's fused softmax (16-bit) or its torch softmax path (fp32)."""
    if kernel == "unfused-eager":
        return EAGER_SOFTMAX_PASSES
    return TORCH_SOFTMAX_PASSES if fp32 else FUSED_SOFTMAX_PASSES


def unfused_attention_s(dev: Device, ops: LayerOps) -> tuple[float, float]:
    """(forward, backward) seconds of an unfused attention core: the full s x s scores."""
    e, d = ops.score_elements, ops.score_head_dim
    if not e or not d:
        return 0.0, 0.0
    b = dev.matmul_bytes
    s = ops.attn_seq  # one of the two batched GEMMs: (s x d) @ (d x s) per head and sequence
    gemm = gemm_time_s(dev, s, s, d, count=e / (s * s))
    # q k^T writes the scores, probs x v reads them (operands q, k, v are small next to them)
    f = 2 * max(gemm, b * e / dev.hbm_bytes_per_s)
    # backward: four GEMMs (grad of probs, of v, of q, of k), each reading or writing scores
    bwd = 4 * max(gemm, b * e / dev.hbm_bytes_per_s)
    pf, pb, mf, mb = dev.unfused_passes
    f += (pf * b + mf) * e / dev.hbm_bytes_per_s
    bwd += (pb * b + mb) * e / dev.hbm_bytes_per_s
    return f, bwd


def act_bytes_scale(precision: str) -> float:
    """Bytes of one activation element over the 16-bit bytes ops.py counts."""
    return FP32_BYTES / ACT if precision in FP32_STORAGE else 1.0




def p2p_message_bytes(hidden: int, shard: Shard, precision: str, engine: str) -> float:
    """Bytes one rank sends to the next pipeline stage per micro-batch (estimate() and the
    search's bounds use this one function)."""
    b = ACT * shard.stream_tokens * hidden * act_bytes_scale(precision)
    return b / p2p_split(engine, shard.tp, bool(shard.sp))  # engine_p2p.py: who sends 1/tp


def gemm_time_s(dev: Device, m: float, n: float, k: float, count: float = 1.0,
                streams: int = 0, kernel: str = "") -> float:
    """Seconds of ``count`` GEMMs (m x k) @ (k x n): one grouped kernel (streams = 0), or
    one kernel each with up to ``streams`` running side by side (TE's multi-stream per-expert
    GEMMs). Side by side, each kernel keeps the tile and split-K choice it makes alone, so the
    streams can only fill the SMs its waves leave idle: count x t1 x busy share, and no less
    than ceil(count / streams) kernels in a row. (Until this release the kernels were priced
    as one grouped kernel of ``streams`` groups, sharing waves: on the lent H200 that gave
    per-expert GEMMs of 5-15 us 1.64x from four streams where they gained 1.13x; this rule
    gives 1.38x, and 1.03x, as measured, above 50 us. bench/data/measured/*/grouped_gemm.csv,
    tests/test_measured_moe_mla.py.) ``kernel`` names a grouped kernel with a fixed tile
    (gemm.kernel_tiles: torch._grouped_mm); "" = a cuBLAS-class choice of tile and split-K."""
    if count <= 0:
        return 0.0
    hw = (dev.sms, dev.sm_flops, dev.sm_load_bytes_per_s, dev.tile_latency_s,
          dev.hbm_bytes_per_s, dev.matmul_bytes, dev.generation)
    tiles = gemm.kernel_tiles(kernel, dev.generation, dev.matmul_bytes)
    if tiles:
        return gemm.gemm_s(m, n, k, count, *hw, False, 2, tiles)
    if streams <= 0 or count <= 1:
        return gemm.gemm_s(m, n, k, count, *hw)
    t1, busy = gemm.gemm_plan(m, n, k, 1, *hw)
    return max(count * t1 * busy, ceil(count / streams) * t1)


@lru_cache(maxsize=1 << 16)
def matmul_s(dev: Device, mm: MatMul) -> tuple[float, float, float]:
    """(forward, input-gradient, weight-gradient) seconds of one GEMM record: of each of its
    separate GEMMs (MatMul.parts, one nn.Linear each: its forward, its dgrad (m x n_i) @
    (n_i x k) and its wgrad (n_i x m) @ (m x k), one after the other) where it has them.
    Cached: both arguments are frozen, and a layer's GEMM records recur across the layer
    shapes and recomputation settings the search prices (op_times, modules_recompute,
    layer_core)."""
    c, s, kn = mm.count, mm.streams, mm.kernel
    if mm.high_precision and dev.hp is not None:
        dev = dev.hp
    f = i = w = 0.0
    for n in mm.parts or (mm.n,):
        f += gemm_time_s(dev, mm.m, n, mm.k, c, s, kn)
        i += gemm_time_s(dev, mm.m, mm.k, n, c, s, kn)
        w += gemm_time_s(dev, n, mm.k, mm.m, c, s, kn)
    return f, i, w


@dataclass(frozen=True)
class OpTimes:
    """Seconds for one layer (or stage part) on one rank, one micro-batch."""

    fwd_s: float
    bwd_input_s: float
    bwd_weight_s: float
    attn_fwd_s: float  # part of fwd_s in the attention core
    act_fn_fwd_s: float  # part of fwd_s in the MLP activation function
    norm_fwd_s: float  # part of fwd_s in the norms


def attention_occupancy(seq: float, backward: bool = False, generation: str = "") -> float:
    """Flash-attention efficiency at key length ``seq`` relative to 8,192 keys, forward or
    backward (efficiency.ATTN_HALF_SEQ, ATTN_HALF_SEQ_BWD; AMD generations:
    efficiency.ATTN_HALF_SEQ_GENERATION)."""
    if not seq:
        return 1.0
    hf, hb = efficiency.ATTN_HALF_SEQ_GENERATION.get(
        generation, (efficiency.ATTN_HALF_SEQ, efficiency.ATTN_HALF_SEQ_BWD))
    h = hb if backward else hf
    return seq / (seq + h) / (8192 / (8192 + h))


def op_times(dev: Device, ops: LayerOps) -> OpTimes:
    fwd = bin_ = bw = 0.0
    for mm in ops.matmuls:
        f, i, w = matmul_s(dev, mm)
        fwd += f
        bin_ += i
        bw += w
    if dev.unfused_attention:
        attn_f, attn_b = unfused_attention_s(dev, ops)
    else:
        # full-attention and sliding-window layers at their own kernel occupancy
        work = ((ops.attn_fwd_flops - ops.attn_window_fwd_flops, ops.attn_seq),
                (ops.attn_window_fwd_flops, ops.attn_window_seq))
        # at the head dimension's efficiency (attention_efficiency)
        ef = core_attention_efficiency(dev, ops)
        eb = core_attention_efficiency(dev, ops, backward=True)
        g = dev.generation
        attn_f = sum(f / (dev.attn_flops * ef * attention_occupancy(s, False, g))
                     for f, s in work if f)
        attn_b = sum(ATTN_BWD_FLOP_RATIO * f
                     / (dev.attn_flops * eb * attention_occupancy(s, True, g))
                     for f, s in work if f)
    # kernel gaps: forward launches ops.kernels kernels, backward about twice as many; a
    # kernel replayed from a CUDA graph pays the gap less the measured launch-path saving
    # (efficiency.GRAPH_LAUNCH_SAVING_S); the host time graphs save is ops.host_ops'
    graph_saving = min(dev.kernel_gap_s, efficiency.GRAPH_LAUNCH_SAVING_S)
    gap_f = ops.kernels * dev.kernel_gap_s - ops.graphed_kernels * graph_saving
    stream_f = ops.stream_bytes * dev.act_scale / dev.hbm_bytes_per_s + gap_f
    stream_b = (STREAM_BWD_BYTE_RATIO * stream_f
                + ops.stream_bwd_extra_bytes * dev.act_scale / dev.hbm_bytes_per_s)
    # FP8 casts (fp8_recipe.py): their own forward and backward traffic and kernels
    stream_f += (ops.fp8_fwd_bytes / dev.hbm_bytes_per_s
                 + ops.fp8_fwd_kernels * dev.kernel_gap_s
                 - ops.graphed_fp8_fwd_kernels * graph_saving)
    stream_b += (ops.fp8_bwd_bytes / dev.hbm_bytes_per_s
                 + ops.fp8_bwd_kernels * dev.kernel_gap_s
                 - ops.graphed_fp8_bwd_kernels * graph_saving)
    act_f = ops.act_fn_bytes * dev.act_scale / dev.hbm_bytes_per_s
    norm_f = ops.norm_bytes * dev.act_scale / dev.hbm_bytes_per_s
    # the host issues kernels while earlier ones run; when the GPU work of a layer is shorter
    # than the host's time to issue it, the GPU waits for the host (launch-bound)
    f_total = fwd + attn_f + stream_f
    b_total = bin_ + attn_b + stream_b + bw
    host_wait_f = max(0.0, ops.host_ops * efficiency.HOST_OP_FWD_S - f_total)
    host_wait_b = max(0.0, ops.host_ops * efficiency.HOST_OP_BWD_S - b_total)
    # each host-device sync drains the stream: the GPU idles until the host launches again
    sync_f = ops.host_syncs * efficiency.HOST_SYNC_S
    return OpTimes(f_total + host_wait_f + sync_f, bin_ + attn_b + stream_b + host_wait_b, bw,
                   attn_f, act_f, norm_f)
