"""Compute time of operations on one GPU.

A GEMM's time comes from its shape (cost/gemm.py: tiles, waves, K-loop ramp, HBM roofline);
its backward is two GEMMs of the same FLOPs (input gradient m x k from n, weight gradient
n x k from m). Flash
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
from . import efficiency, gemm
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
    matmul_bytes: int  # operand bytes for the roofline's memory side
    kernel_gap_s: float = 0.0  # idle time per kernel launch on the critical path
    # GEMM shape model (gemm.py): SMs, K-loop FLOP/s of one SM (normalised so that an 8192^3
    # GEMM runs at matmul_flops), operand bandwidth into one SM, fixed time per CTA tile
    generation: str = "hopper"
    sms: int = 132
    sm_flops: float = 0.0
    sm_load_bytes_per_s: float = 0.0
    tile_latency_s: float = 0.0


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
    af, ab = engine_attention(gpu.generation, engine)
    flops = peak * clock * frac  # an 8192^3 GEMM at the measured fraction, sustained
    hbm = gpu.memory_bytes_per_s * e.memory
    sms = gemm.sm_count(gpu)
    load = gemm.sm_load_bytes_per_s(gpu, e.gemm_flop_per_load_byte)
    b = 1 if fp8 else 2
    gen = gpu.generation or "hopper"
    sm_flops = gemm.flops_per_sm(flops, sms, load, e.gemm_tile_latency_s, hbm, b, gen)
    return Device(flops, gpu.flops("bf16") * clock, af, ab, hbm, b, efficiency.KERNEL_GAP_S,
                  gen, sms, sm_flops, load, e.gemm_tile_latency_s)


def gemm_time_s(dev: Device, m: float, n: float, k: float, count: float = 1.0,
                streams: int = 0) -> float:
    """Seconds of ``count`` GEMMs (m x k) @ (k x n): one grouped kernel (streams = 0), or
    one kernel each with up to ``streams`` running side by side (TE's multi-stream per-expert
    GEMMs), whose tiles then share the SMs."""
    if count <= 0:
        return 0.0

    def one(groups: float) -> float:
        return gemm.gemm_s(m, n, k, groups, dev.sms, dev.sm_flops, dev.sm_load_bytes_per_s,
                           dev.tile_latency_s, dev.hbm_bytes_per_s, dev.matmul_bytes,
                           dev.generation)

    if streams <= 0 or count <= 1:
        return one(count)
    side = min(float(streams), count)
    rounds, rest = divmod(count, side)
    return rounds * one(side) + (one(rest) if rest > 1e-9 else 0.0)


def matmul_s(dev: Device, mm: MatMul) -> tuple[float, float, float]:
    """(forward, input-gradient, weight-gradient) seconds of one GEMM record."""
    c, s = mm.count, mm.streams
    return (gemm_time_s(dev, mm.m, mm.n, mm.k, c, s), gemm_time_s(dev, mm.m, mm.k, mm.n, c, s),
            gemm_time_s(dev, mm.n, mm.k, mm.m, c, s))


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
