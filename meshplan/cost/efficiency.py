"""Every fitted constant of the cost model, in one place, each with where it comes from.

The constants are physical: they belong to a GPU generation or to a kind of kernel, never to
a model, a source or a calibration row. They were set from microbenchmarks and vendor
figures first and then checked against ``../shared/validation/calibration.csv`` as a whole
(``meshplan validate``); see the README's accuracy table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelEfficiency:
    """Achievable fractions of datasheet peaks for one GPU generation."""

    # Large square GEMM sustained through a training step, fraction of dense peak. A single
    # 8192^3 bf16 GEMM reaches 798 of 989 TFLOP/s on H100 (FIELD.md) and cuBLAS ~280 of 312
    # on A100: upper bounds; whole-model runs sustain less (see EFFICIENCY below).
    matmul_bf16: float
    # FP8 GEMM, fraction of the FP8 peak (Hopper cuBLASLt fp8 ~1,300 of 1,979 TFLOP/s at
    # large sizes; the scaling/amax work around it is counted as memory traffic).
    matmul_fp8: float
    # Flash attention forward / backward, fraction of the 16-bit peak (FlashAttention-2
    # paper: 50-73% forward on A100; FA2/cuDNN on H100 ~ 45-60%, FA3 up to 75%).
    attention_fwd: float
    attention_bwd: float
    # Streaming kernels (norms, activations, adds, casts): fraction of HBM bandwidth
    # (a device-to-device copy reached 3.0 of 3.35 TB/s on H100 here, FIELD.md).
    memory: float
    # Matrix dimension at which a GEMM runs at half its large-size efficiency along that
    # dimension (tile and wave quantisation: 128x128/256x128 tiles on 100+ SMs).
    matmul_half_dim: float
    # Board power at which dense tensor-core work holds full clocks; a lower power cap
    # scales clocks by (cap / this) ** POWER_CLOCK_EXPONENT.
    full_clock_power_w: float = 0.0


# Clock vs power under a cap: dynamic power ~ f * V^2; near the top of the V/f curve V ~ f
# gives f ~ P^(1/3), at the voltage floor f ~ P. Fitted between those bounds.
POWER_CLOCK_EXPONENT = 0.75


# Sustained in training, not in a single-kernel microbenchmark: the GEMM fractions below are
# what whole-model runs reach (clocks under sustained board power, GEMMs interleaved with
# other kernels, TE/cuBLAS heuristics on real shapes). Hopper and Ampere were fitted on the
# calibration runs (coordinate search over a coarse grid of physically plausible values,
# scripts in bench/fit_constants.py); Volta, Blackwell and CDNA3 have no calibration run
# and take their generation neighbour's values scaled by vendor GEMM benchmarks.
EFFICIENCY: dict[str, KernelEfficiency] = {
    "volta": KernelEfficiency(0.60, 0.60, 0.30, 0.25, 0.80, 64),
    "ampere": KernelEfficiency(0.60, 0.60, 0.30, 0.25, 0.85, 64),
    "hopper": KernelEfficiency(0.55, 0.55, 0.30, 0.25, 0.88, 256, full_clock_power_w=700),
    "blackwell": KernelEfficiency(0.55, 0.55, 0.30, 0.25, 0.88, 256, full_clock_power_w=1000),
    "cdna3": KernelEfficiency(0.45, 0.40, 0.25, 0.20, 0.80, 256),
}


@dataclass(frozen=True)
class NetworkEfficiency:
    """Fractions of link bandwidth that NCCL-style collectives reach (bus bandwidth)."""

    # nccl-tests all-reduce on 8x H100 NVSwitch: ~360-380 GB/s bus bandwidth of 450.
    scaleup: float = 0.80
    # InfiniBand/RoCE NDR 400 Gb/s: ~46 of 50 GB/s per NIC in nccl-tests across nodes.
    scaleout: float = 0.85
    # All-to-all across nodes reaches less (many small messages, routing imbalance;
    # DeepEP reaches ~40-45 GB/s of 50 on H800; the all-to-all dispatchers of the
    # calibrated engines reach far less: fitted 0.30 on the MoE calibration runs).
    alltoall_scaleout: float = 0.30
    # Share of TP communication hidden when the plan asks for TP overlap (Megatron TE
    # userbuffers / async TP: most but not all of the all-gather / reduce-scatter).
    tp_overlap: float = 0.80
    # Compute slowdown while bulk communication runs beside it (SM and HBM contention,
    # MegaScale / Comet report 5-15%). Applied to the communication time that is hidden.
    overlap_contention: float = 0.10


NETWORK = NetworkEfficiency()


@dataclass(frozen=True)
class HostCosts:
    """Host side: optimizer offload and framework overheads."""

    # CPU Adam (DeepSpeed CPUAdam, AVX-512): ~1e9 parameters/s per GPU's share of cores.
    cpu_adam_params_per_s: float = 1.0e9
    # Host<->device copy bandwidth per GPU (PCIe Gen5 x16 ~ 50 GB/s peak, ~25 achieved).
    pcie_bytes_per_s: float = 25e9
    # GPU memory outside PyTorch's allocator: CUDA context and cuBLAS/NCCL workspaces.
    runtime_reserved_bytes: float = 1.5 * 2**30
    # PyTorch caching-allocator fragmentation: reserved exceeds allocated by this share.
    allocator_fragmentation: float = 0.15
    # Communication buffers held by NCCL and the framework's bucketing (per GPU).
    comm_buffer_bytes: float = 0.5 * 2**30


HOST = HostCosts()


def kernel_efficiency(generation: str) -> KernelEfficiency:
    return EFFICIENCY.get(generation, EFFICIENCY["hopper"])
