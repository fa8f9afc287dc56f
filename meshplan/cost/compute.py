"""Compute time of operations on one GPU: a roofline with shape-dependent efficiency.

A GEMM takes max(FLOPs / (peak * eff(m, n, k)), bytes / HBM bandwidth); its backward is two
GEMMs of the same FLOPs (input gradient m x k from n, weight gradient n x k from m). Flash
attention runs at its own fraction of peak, its backward doing 2.5x the forward FLOPs (five
matrix products instead of two, FlashAttention-2 sec. 3), at an efficiency that grows with
the sequence length. Streaming work is bytes over HBM bandwidth; its backward moves about
twice the bytes. Every kernel adds KERNEL_GAP_S of idle time on the critical path; tensor-core
work runs at SUSTAINED_TENSOR of the microbenchmark rate (efficiency.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..specs.hardware import GPU
from . import efficiency
from .efficiency import KernelEfficiency, kernel_efficiency
from .engine_p2p import p2p_split
from ..specs.workload import FP32_STORAGE
from .ops import ACT, LayerOps, MatMul, Shard

ATTN_BWD_FLOP_RATIO = 2.5
STREAM_BWD_BYTE_RATIO = 2.0


@dataclass(frozen=True)
class Device:
    """A GPU as the compute model sees it for one precision."""

    matmul_flops: float  # achievable large-GEMM FLOP/s at the workload's precision
    attn_flops: float  # 16-bit peak (attention stays in bf16/fp16)
    attn_fwd_eff: float
    attn_bwd_eff: float
    hbm_bytes_per_s: float
    half_dim: float
    matmul_bytes: int  # operand bytes for the roofline's memory side
    kernel_gap_s: float = 0.0  # idle time per kernel launch on the critical path
    # fp32 / tf32 training: activations are 4-byte elements, twice the 16-bit bytes that
    # ops.py counts, and no flash-class kernel exists (unfused_attention_s)
    act_scale: float = 1.0
    unfused_attention: bool = False


def engine_attention(generation: str, engine: str) -> tuple[float, float]:
    """(forward, backward) long-sequence attention efficiency of ``engine``'s kernel."""
    e = kernel_efficiency(generation)
    if efficiency.ENGINE_ATTENTION.get(engine, "") != "te" and engine != "":
        return efficiency.ATTENTION_FA2.get(generation, (e.attention_fwd, e.attention_bwd))
    return e.attention_fwd, e.attention_bwd


@lru_cache(maxsize=64)
def device(gpu: GPU, precision: str, engine: str = "") -> Device:
    """``engine`` is the framework that runs the step ("" = meshplan's own runtime, which
    uses the best kernels available: TE-class attention)."""
    e: KernelEfficiency = kernel_efficiency(gpu.generation)
    clock = efficiency.SUSTAINED_TENSOR
    if gpu.power_limit_w and e.full_clock_power_w:
        clock *= min(1.0, (gpu.power_limit_w / e.full_clock_power_w)
                     ** efficiency.POWER_CLOCK_EXPONENT)
    if precision in FP32_STORAGE:
        return _fp32_device(gpu, precision, e, clock)
    fp8 = precision == "fp8" and "fp8" in gpu.peak_flops
    peak = gpu.flops("fp8" if fp8 else "bf16")
    frac = e.matmul_fp8 if fp8 else e.matmul_bf16
    # normalise so that a large square GEMM (8192^3) runs at the measured fraction
    big = (8192 / (8192 + e.matmul_half_dim)) ** 3
    af, ab = engine_attention(gpu.generation, engine)
    return Device(peak * clock * frac / big, gpu.flops("bf16") * clock, af, ab,
                  gpu.memory_bytes_per_s * e.memory, e.matmul_half_dim,
                  1 if fp8 else 2, efficiency.KERNEL_GAP_S)


def _fp32_device(gpu: GPU, precision: str, e: KernelEfficiency, clock: float) -> Device:
    """fp32 storage: GEMMs at the TF32 tensor-core rate (``tf32``, where the GPU has TF32:
    Ampere and newer) or the fp32 rate, 4-byte operands; the GEMM fraction and shape model
    are the 16-bit ones (cuBLAS SGEMM and TF32 GEMMs reach a similar share of their peak on
    large shapes: an assumption, no fp32 microbenchmark here). FlashAttention 2 supports
    fp16 and bf16 only (flash-attn README, "Datatype fp16 and bf16"), so attention runs
    unfused (Megatron CoreAttention: baddbmm, scale-mask-softmax, dropout, bmm)."""
    p = "tf32" if precision == "tf32" and "tf32" in gpu.peak_flops else "fp32"
    peak = gpu.flops(p)
    big = (8192 / (8192 + e.matmul_half_dim)) ** 3
    mm = peak * clock * e.matmul_bf16 / big
    return Device(mm, mm, 1.0, 1.0, gpu.memory_bytes_per_s * e.memory, e.matmul_half_dim,
                  4, efficiency.KERNEL_GAP_S, act_scale=FP32_BYTES / ACT,
                  unfused_attention=True)


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
FP32_BYTES = 4


def unfused_attention_s(dev: Device, ops: LayerOps) -> tuple[float, float]:
    """(forward, backward) seconds of an unfused attention core: the full s x s scores."""
    e, d = ops.score_elements, ops.score_head_dim
    if not e or not d:
        return 0.0, 0.0
    b = dev.matmul_bytes
    flops = 2.0 * e * d  # one of the two batched GEMMs
    eff = (ops.attn_seq / (ops.attn_seq + dev.half_dim)) ** 2 * (d / (d + dev.half_dim))
    gemm = flops / (dev.matmul_flops * eff)
    # q k^T writes the scores, probs x v reads them (operands q, k, v are small next to them)
    f = 2 * max(gemm, b * e / dev.hbm_bytes_per_s)
    # backward: four GEMMs (grad of probs, of v, of q, of k), each reading or writing scores
    bwd = 4 * max(gemm, b * e / dev.hbm_bytes_per_s)
    f += (UNFUSED_SCORE_PASSES_FWD * b + UNFUSED_MASK_PASSES_FWD) * e / dev.hbm_bytes_per_s
    bwd += (UNFUSED_SCORE_PASSES_BWD * b + UNFUSED_MASK_PASSES_BWD) * e / dev.hbm_bytes_per_s
    return f, bwd


def act_bytes_scale(precision: str) -> float:
    """Bytes of one activation element over the 16-bit bytes ops.py counts."""
    return FP32_BYTES / ACT if precision in FP32_STORAGE else 1.0




def p2p_message_bytes(hidden: int, shard: Shard, precision: str, engine: str) -> float:
    """Bytes one rank sends to the next pipeline stage per micro-batch (estimate() and the
    search's bounds use this one function)."""
    b = ACT * shard.stream_tokens * hidden * act_bytes_scale(precision)
    return b / p2p_split(engine, shard.tp, bool(shard.sp))  # engine_p2p.py: who sends 1/tp


def _eff(dev: Device, m: float, n: float, k: float) -> float:
    h = dev.half_dim
    return (m / (m + h)) * (n / (n + h)) * (k / (k + h))


def matmul_s(dev: Device, mm: MatMul) -> tuple[float, float, float]:
    """(forward, input-gradient, weight-gradient) seconds of one GEMM record."""
    flops = 2.0 * mm.m * mm.n * mm.k
    b = dev.matmul_bytes

    def t(m: float, n: float, k: float) -> float:
        compute = flops / (dev.matmul_flops * _eff(dev, m, n, k))
        memory = b * (m * k + k * n + m * n) / dev.hbm_bytes_per_s
        return max(compute, memory) * mm.count

    return t(mm.m, mm.n, mm.k), t(mm.m, mm.k, mm.n), t(mm.n, mm.k, mm.m)


@dataclass(frozen=True)
class OpTimes:
    """Seconds for one layer (or stage part) on one rank, one micro-batch."""

    fwd_s: float
    bwd_input_s: float
    bwd_weight_s: float
    attn_fwd_s: float  # part of fwd_s in the attention core
    act_fn_fwd_s: float  # part of fwd_s in the MLP activation function
    norm_fwd_s: float  # part of fwd_s in the norms


def op_times(dev: Device, ops: LayerOps) -> OpTimes:
    fwd = bin_ = bw = 0.0
    for mm in ops.matmuls:
        f, i, w = matmul_s(dev, mm)
        fwd += f
        bin_ += i
        bw += w
    seq = ops.attn_seq
    occ = seq / (seq + efficiency.ATTN_HALF_SEQ) / (8192 / (8192 + efficiency.ATTN_HALF_SEQ)) \
        if seq else 1.0
    if dev.unfused_attention:
        attn_f, attn_b = unfused_attention_s(dev, ops)
    else:
        attn_f = ops.attn_fwd_flops / (dev.attn_flops * dev.attn_fwd_eff * occ)
        attn_b = ATTN_BWD_FLOP_RATIO * ops.attn_fwd_flops / (dev.attn_flops * dev.attn_bwd_eff
                                                             * occ)
    # kernel gaps: forward launches ops.kernels kernels, backward about twice as many
    gap_f = ops.kernels * dev.kernel_gap_s
    stream_f = ops.stream_bytes * dev.act_scale / dev.hbm_bytes_per_s + gap_f
    stream_b = STREAM_BWD_BYTE_RATIO * stream_f
    act_f = ops.act_fn_bytes * dev.act_scale / dev.hbm_bytes_per_s
    norm_f = ops.norm_bytes * dev.act_scale / dev.hbm_bytes_per_s
    # the host issues kernels while earlier ones run; when the GPU work of a layer is shorter
    # than the host's time to issue it, the GPU waits for the host (launch-bound)
    f_total = fwd + attn_f + stream_f
    b_total = bin_ + attn_b + stream_b + bw
    host_wait_f = max(0.0, ops.host_ops * efficiency.HOST_OP_FWD_S - f_total)
    host_wait_b = max(0.0, ops.host_ops * efficiency.HOST_OP_BWD_S - b_total)
    return OpTimes(f_total + host_wait_f, bin_ + attn_b + stream_b + host_wait_b, bw,
                   attn_f, act_f, norm_f)
