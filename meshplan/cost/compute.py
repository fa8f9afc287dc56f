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
from .ops import LayerOps, MatMul

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
    fp8 = precision == "fp8" and "fp8" in gpu.peak_flops
    peak = gpu.flops("fp8" if fp8 else "bf16")
    frac = e.matmul_fp8 if fp8 else e.matmul_bf16
    # normalise so that a large square GEMM (8192^3) runs at the measured fraction
    big = (8192 / (8192 + e.matmul_half_dim)) ** 3
    af, ab = engine_attention(gpu.generation, engine)
    return Device(peak * clock * frac / big, gpu.flops("bf16") * clock, af, ab,
                  gpu.memory_bytes_per_s * e.memory, e.matmul_half_dim,
                  1 if fp8 else 2, efficiency.KERNEL_GAP_S)


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
    attn_f = ops.attn_fwd_flops / (dev.attn_flops * dev.attn_fwd_eff * occ)
    attn_b = ATTN_BWD_FLOP_RATIO * ops.attn_fwd_flops / (dev.attn_flops * dev.attn_bwd_eff * occ)
    # kernel gaps: forward launches ops.kernels kernels, backward about twice as many
    gap_f = ops.kernels * dev.kernel_gap_s
    stream_f = ops.stream_bytes / dev.hbm_bytes_per_s + gap_f
    stream_b = STREAM_BWD_BYTE_RATIO * stream_f
    act_f = ops.act_fn_bytes / dev.hbm_bytes_per_s
    norm_f = ops.norm_bytes / dev.hbm_bytes_per_s
    # the host issues kernels while earlier ones run; when the GPU work of a layer is shorter
    # than the host's time to issue it, the GPU waits for the host (launch-bound)
    f_total = fwd + attn_f + stream_f
    b_total = bin_ + attn_b + stream_b + bw
    host_wait_f = max(0.0, ops.host_ops * efficiency.HOST_OP_FWD_S - f_total)
    host_wait_b = max(0.0, ops.host_ops * efficiency.HOST_OP_BWD_S - b_total)
    return OpTimes(f_total + host_wait_f, bin_ + attn_b + stream_b + host_wait_b, bw,
                   attn_f, act_f, norm_f)
