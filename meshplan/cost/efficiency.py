"""Every constant of the cost model, in one place, each with where it comes from.

The constants are physical: they belong to a GPU generation, a kind of kernel or an engine,
never to a model, a source or a calibration row. Kernel-level fractions come from
microbenchmarks and published kernel tables; only three end-to-end constants
(SUSTAINED_TENSOR, KERNEL_GAP_S, POWER_CLOCK_EXPONENT) are fitted, on the calibration rows
only, by bench/fit_constants.py, which also reports their leave-one-source-out error and the
error on the held-out runs in bench/data/heldout_runs.csv.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class KernelEfficiency:
    """Fractions of datasheet peaks that single kernels reach on one GPU generation, as
    measured by microbenchmarks (sources beside each table entry). What a whole training
    step sustains on top of these is set by the fitted end-to-end constants below."""

    # Large square GEMM (8192^3), fraction of the dense peak of that dtype.
    matmul_bf16: float
    matmul_fp8: float
    # Flash attention at long sequences (>= 8k, head dim 128, causal), fraction of the
    # 16-bit dense peak, forward and backward; shorter sequences lose by
    # seq / (seq + ATTN_HALF_SEQ) (tile and launch under-occupancy, FA2/FA3 papers' curves).
    attention_fwd: float
    attention_bwd: float
    # Streaming kernels (norms, activations, adds, casts): fraction of HBM bandwidth.
    memory: float
    # GEMM shape model (cost/gemm.py): fixed time of one CTA tile (K-loop pipeline fill and
    # epilogue) and tensor-core FLOPs per byte of operands one SM can pull from L2. Fitted on
    # published per-shape tables (bench/data/gemm_points.csv): NVIDIA parts on the H100 bf16
    # rows of OpenXLA's profiled table (3 us, 90 FLOP/B, grid 2-3.5 us x 70-140 FLOP/B; B200
    # and DeepGEMM's H800 FP8 rows are held out, tests/test_gemm_model.py); CDNA3 on the
    # MI300X bf16 rows (11 us, 107 FLOP/B, grid 6-14 us x 107-200; its FP8 rows held out):
    # MI300X GEMMs ramp up far more slowly with size.
    # Ampere, checked (not refitted) on the only per-shape A100 tables found
    # (gemm_points.csv): Triton's regression reference (14 fp16 shapes, triton.ops.matmul at
    # 1350 MHz), each shape scored against the table's own 8192^3 row (clock and kernel level
    # cancel), rows under 15 us left out as for OpenXLA's (per-call floor, which the step model
    # charges as KERNEL_GAP_S): 1024^3, 2048^3, 8192x8192x8176 come within +17/+2/+1% at the
    # NVIDIA 3 us. Least squares on those three alone would pick ~5 us (+6/-8/+1%), but
    # mamf-finder's best cuBLAS shape (6912x16384x2048, short k) pulls the other way (-4% at
    # 3 us, -7% at 5 us): the two libraries disagree, so the 3 us of the H100 fit is kept.
    # Held out, Triton's m = 16 rows: +13/+10%; its m = 64 / n = 64 rows run 30-120% below
    # the model (Triton's skinny kernels, far under the HBM roofline). tests/test_gemm_model.py.
    # Ampere and Volta feed: no per-shape fit; their feed comes from the L2 read
    # bandwidth of the NVIDIA A100 whitepaper (5,120 B/clk on A100, 2,048 on V100): A100
    # 5120 x 1.41 GHz / 108 SMs = 67 GB/s per SM against 312/108 = 2.9 TFLOP/s -> 43 FLOP/B;
    # V100 2048 x 1.53 GHz / 80 = 39 GB/s against 125/80 = 1.56 TFLOP/s -> 40 FLOP/B. (The
    # H100 fit, 90 FLOP/B, is 83 GB/s per SM, 11 TB/s over 132 SMs.)
    gemm_tile_latency_s: float
    # Board power at which dense tensor-core work holds full clocks; a lower power cap
    # scales clocks by (cap / this) ** POWER_CLOCK_EXPONENT.
    full_clock_power_w: float = 0.0
    gemm_flop_per_load_byte: float = 90.0
    # Clock the part holds under minutes-long dense matrix load at its power limit, over the
    # clock at which the fractions above were measured (NVIDIA_SUSTAINED_CLOCK below): below
    # 1 where the source table is a short burst, 1 where it was taken at the held clock.
    sustained_clock: float = 1.0


# Clock vs power under a cap: dynamic power ~ f * V^2; near the top of the V/f curve V ~ f
# gives f ~ P^(1/3), at the voltage floor f ~ P. Fitted between those bounds (bench/fit_constants.py;
# refitted 2026-11-23 on the calibration rows after the MoE, memory, TP and recompute physics
# of that day: 0.5 -> 0.75, grid 1/3, 1/2, 3/4, 1; refitted again on the build with the
# straggler and last-bucket parts: 0.75 -> 0.5). Independent check, not fitted: NVIDIA's
# datasheets for the same GH100 die give 0.30 (H100 NVL 835 dense BF16 TFLOP/s at 400 W,
# H100 SXM 989.4 at 700 W: ln(835/989.4) / ln(400/700)), and ml-engineering's MAMF table
# 0.24 on Ampere (A100 PCIe 300 W 252.9, SXM 400 W 271.2 TFLOP/s); the fit stays above them
# because the torchtitan 500 W rows also carry torch.compile and context-parallel effects
# the shared schema cannot state.
POWER_CLOCK_EXPONENT = 0.5

# Sequence length at which flash attention runs at half its long-sequence efficiency,
# forward and backward: eff(s) = eff(8k) x s / (s + h) / (8192 / (8192 + h)). Measured here
# (bench/data/measured/h200_2026-11-27/attention.csv: torch SDPA, flash and cuDNN backends,
# causal, head dim 64 and 128, seq 512-16,384, 32k tokens per call, on one H200): one h per
# direction fitted over the four curves (their levels free) gives 450 forward and 830
# backward (rms error 2.4% over 48 points; each curve alone 420-500 and 820-860). The
# backward ramps up more slowly (its dK/dV pass holds a key block per CTA and walks all
# query blocks: fewer, longer CTAs at short sequences). FlashAttention-2 paper (Dao 2023)
# Fig. 4-5 (A100, causal forward, chart reading) agrees with the forward: h ~ 450.
# (Was 512 for both, from that chart alone.)
ATTN_HALF_SEQ = 450.0
ATTN_HALF_SEQ_BWD = 830.0
# AMD parts ramp up more slowly (aiter's v3 kernels, the kernels Transformer Engine's ROCm
# build calls): the same fit over AMD's published causal curves (bench/data/aiter_attention.csv,
# ROCm/aiter op_tests/cpp/mha/README.md; the batch-4 and batch-8 shapes, 32 or 64 query heads,
# 1k-10k keys, levels free; the backward with the dQ accumulation each generation's published
# runs use, EFFICIENCY below) gives (forward, backward) h of MI300X 850 / 890 (rms 2.7% /
# 3.0%) and MI355X 1,390 / 1,150 (3.8% / 2.1%). Batch 4 and batch 8 agree (within 90 keys);
# the batch-1 shapes do not follow the form (rms 13-16% at any h): at 1-2k keys they hold
# fewer query tiles than the part has compute units, a wave-quantisation loss this model of
# the ramp leaves out, as the NVIDIA fit does (its calls held 32k tokens).
# tests/test_amd_attention.py re-derives them.
ATTN_HALF_SEQ_GENERATION = {"cdna3": (850.0, 890.0), "cdna4": (1390.0, 1150.0)}

# Attention: tensor-core time against softmax exponentials. Per score element a flash-attention
# forward issues 2 (d_qk + d_v) tensor-core FLOPs (q k^T and p v) and one exponential
# (MUFU.EX2); its backward 2.5x the FLOPs and one exponential again (p rebuilt from the saved
# log-sum-exp: FlashAttention-2 paper, Algorithm 2). Time per element = FLOPs / (tensor rate x
# x_mma) + ATTENTION_EXP / exponential rate: the tensor-core part at a kernel's own efficiency,
# the exponential part at the share of it the kernel does not hide behind the tensor cores.
# A part's rates per SM per clock:
#   tensor cores, dense 16-bit FLOPs: A100 1,024 FMA (NVIDIA A100 whitepaper: 256 FP16 FMA
#   per tensor core, 4 per SM), H100 twice A100 clock for clock (H100 whitepaper), B200 twice
#   H100 (8,192; FlashAttention-4 paper, sec. 2: the tensor-core rate doubled, the
#   exponential unit did not); FP8 twice the 16-bit rate;
#   exponentials: 16 (CUDA C++ Programming Guide, arithmetic-instruction throughput table:
#   exp2 / MUFU, compute capability 8.0, 9.0, 10.0); Blackwell Ultra (B300, GB300) 32 (NVIDIA
#   technical blog "Making Softmax More Efficient with NVIDIA Blackwell Ultra", 2026-02:
#   doubled SFU throughput for MUFU.EX2; "Inside NVIDIA Blackwell Ultra", 2025-08: 2x
#   attention-layer acceleration).
# ATTENTION_EXP, the exposed share of the exponential time, and x_mma are solved together
# from two published kernel figures: H100 forward at 0.62 of peak at head dim 128 (the Hopper
# entry below) and the same blog's ~35% higher FP8 forward attention throughput on GB300 than
# GB200 for DeepSeek-V3 (d_qk 192, d_v 128: 640 FLOPs per element, 16,384 FP8 FLOPs per SM
# per clock, 16 vs 32 exponentials): 0.812 (x_mma 1.21, i.e. the tensor cores at 0.83 of
# peak while they run). Checked, not fitted, against the FlashAttention-3 paper's H100
# tables (Shah et al. 2024, Fig. 5-6, non-causal, 16k keys), head dim 64 over 128:
# FlashAttention-2 forward 324/370 = 0.88 (this model 0.88), backward 291/322 = 0.90 (0.95);
# FlashAttention-3 497/648 = 0.77 (0.80) and 474/561 = 0.84 (0.92); cuDNN 413/595 = 0.69
# (0.80) and 433/516 = 0.84 (0.92). Above head dim 128 the same tables show no common gain
# (d 256 over 128: cuDNN 0.98, FlashAttention-2 0.88, FlashAttention-3 1.17), so head dims
# above 128 are charged as 128 here (their measured backward loss: WIDE_HEAD_ATTENTION
# below). Each EFFICIENCY attention entry stays the part's fraction at
# head dim 128; AMD parts (no exponential-rate figure here) and Volta (no flash kernel) keep it.
ATTENTION_EXP = 0.812
ATTENTION_REF_HEAD_DIM = 128
TENSOR_FLOPS_PER_SM_CLOCK = {"ampere": 2048.0, "hopper": 4096.0, "blackwell": 8192.0}
EXP_PER_SM_CLOCK = 16.0
SKU_EXP_PER_SM_CLOCK = {"B300": 32.0, "GB300": 32.0}
# GeForce GA102 (RTX 3090): 71 dense 16-bit TFLOP/s with FP32 accumulate over 82 SMs at the
# 1,695 MHz boost clock (NVIDIA Ampere GA102 whitepaper, appendix table) -> 512 per SM per
# clock, a quarter of A100's.
SKU_TENSOR_FLOPS_PER_SM_CLOCK = {"RTX-3090-24GB": 512.0}

# How much of a microbenchmark table's clock a part keeps under sustained load, by how the
# table was measured. NVIDIA: the tables (the MAMF table: 50 warm-up and 100 timed iterations
# a shape, the fastest kept, stas00/ml-engineering compute/accelerator/benchmarks/README.md;
# our own kernel files, CUDA graphs of a few hundred ms) time the first second of load, before
# the board's power limiter has pulled the clock down. Measured here on the same 8192^3 bf16
# GEMM: H100 SXM 791.3 TFLOP/s in a one-second burst (the MAMF table's 792.1) against 670.6
# (median from 10 s to 80 s, 667.6-675.9, 1,320-1,395 MHz, 686-700 W, throttle reason 0x4,
# software power cap; bench/data/measured/h100_2026-11-27/sustained_bf16.csv and
# moe_kernels_meta.json) -> 0.847; H200 787.4 against 665.1 (10-60 s, 1,455-1,590 MHz;
# h200_2026-11-27) -> 0.845; the mean of the two. The held clock is the power cap's, not a
# rising temperature's: a compiled layer stack held 210 s stays within 0.2% of its first
# seconds (h200_2026-11-28). Whole layer steps at the cap run their GEMMs at 0.87-0.95 of the
# burst-table rate (tests/test_measured_layer_step.py): the same loss, smaller where a step's
# element-wise phases let the limiter raise the clock. Ampere, Volta and Blackwell take the
# Hopper value unmeasured (the same vendor limiter and the same burst-type tables).
# AMD: the MAF table is taken at the held clock by method ("Measuring Max-Achievable FLOPs -
# Part 2", ROCm blogs 2025-02-28: a thermally stable device, "not in an unsustainable boost
# frequency state", 25% warm-up of a 1 s run, normal-like data, the clock read by
# hipBLASLt-bench: MI300X 708 TFLOP/s bf16 at a median 1,207 MHz against its 2,100 MHz peak,
# MI325X 843 at 1,447), and the MAMF rates the CDNA entries below use sit under it (MI300X
# 668.4 = 0.944 of MAF, MI325X 784.9 = 0.931): no burst above the held clock is in them, so
# CDNA keeps 1.0. Why even a short AMD run reads the held clock: Instinct power management
# lowers the clock in dense compute phases within microseconds, "even during the execution of
# a GPU kernel" ("Understanding Peak, Max-Achievable & Delivered FLOPs, Part 1", ROCm blogs
# 2025-02-14), where NVIDIA's limiter let the H100 run a whole second above its held rate. SUSTAINED_TENSOR is the rest of what a whole step loses, fitted on NVIDIA
# rows and assumed vendor-neutral.
NVIDIA_SUSTAINED_CLOCK = (670.6 / 791.3 + 665.1 / 787.4) / 2

# Measured single-kernel fractions. Sources:
# - GEMM bf16 Hopper: 8192^3 bf16 at ~798 of 989 TFLOP/s on one H100 SXM, 769-798 on H200
#   (FIELD.md, measured here) -> 0.80. FP8: DeepGEMM README (deepseek-ai/DeepGEMM): fp8
#   GEMMs "up to 1550 TFLOPS" on H800 (same SMs and clocks as H100 SXM, 1,979 dense fp8
#   peak), on par with cuBLASLt at 8192^3 -> 0.76 (upper end: large, well-shaped GEMMs).
# - GEMM Ampere: 0.86, the A100 SXM entry of the "Maximum Achievable Matmul FLOPS" table
#   (Stas Bekman, ml-engineering, compute/accelerator/README.md; mamf-finder.py, bf16
#   torch.mm, CUDA 12.1): 267.9 of 312 TFLOP/s. The same table gives H100 SXM 792.1 of 989
#   (0.80, the Hopper entry above, measured here at 8192^3) and B200 0.78 (the Blackwell
#   entry): one source for the three NVIDIA generations. (Was 0.82, a recalled figure.)
#   Triton's A100 regression table has 8192^3 fp16 at 0.839 of the peak at its 1350 MHz
#   locked clock (bench/data/gemm_points.csv). Checked end to end, A100 rows of other
#   sources were predicted too slow at 0.82 (signed median: calibration -5.9%, 11 rows;
#   held-out -4.5%, 16 rows) and are -2.8% / -1.2% at 0.86 (seen before the change: see
#   the a100 helper note). llm-foundry's A100 MPT runs reach 64% MFU end to end.
# - Attention: FlashAttention-2 paper (A100, fwd up to 73% of peak, bwd up to ~63%; at
#   long causal sequences ~67% / ~56%). Hopper: measured here on one H200 (700 W, the
#   H100's SMs and clocks; bench/data/measured/h200_2026-11-27/attention.csv, torch 2.11
#   SDPA, cuDNN 9.19, causal, head dim 128, level at 8k keys of the ATTN_HALF_SEQ fit):
#   cuDNN's fused flash attention (the kernels Transformer Engine calls) forward 623 and
#   backward 522 TFLOP/s = 0.63 / 0.53 of 989; the forward entry keeps the FlashAttention-3
#   paper's 0.62 (FA3 causal hdim 128 ~ 600-640 at 8-16k, its cuDNN curve alike), which
#   ATTENTION_EXP is solved from; the backward is the measured 0.53 (was 0.50, a recalled
#   chart reading). Hopper entries use this FA3/cuDNN class of kernels; engines on FA2-class
#   kernels (torch SDPA's flash backend, flash-attn 2) use ATTENTION_FA2.
# - Streaming: device-to-device copy 3.0 of 3.35 TB/s (H100) and 4.3 of 4.8 (H200),
#   FIELD.md -> 0.89-0.90; measured here 2.99-3.02 (H100) and 4.17-4.25 TB/s (H200) at 2-8 GiB
#   (bench/data/measured/*/stream.csv). The other generations from published STREAM-type
#   runs on their reference part, as the mean of the kernels run (training's element-wise
#   kernels mix copy-like norms and casts, 1 read : 1 write, with add-like SwiGLU and
#   residual adds, 2 : 1; a best-of-kernels reading would differ by up to 0.05):
#   Volta 0.86: CUDA bandwidthTest device-to-device on a Tesla V100 (900 GB/s HBM2),
#   757-772 GB/s at 56-68 MB (microsoft/superbenchmark tests/data/cuda_memory_d2d_bw.log; the
#   test counts read + write); FastIceFlo's memcopy 785 GB/s on a V100 SXM2 agrees
#   (AnjaliSandip/FastIceFlo output/EffectiveMemoryThroughput.md). (Was 0.80, recalled.)
#   Ampere 0.84: BabelStream 5.0 (CUDA) on Tursa's A100-SXM4-80GB (ukri-bench/
#   benchmark-BabelStream README, example performance data: copy 1,709, mul 1,676, add 1,716,
#   triad 1,725 GB/s of 2,039) -> 0.837; the same README's earlier Perlmutter A100-40GB run
#   (OpenMP offload) 1,346 of 1,555 -> 0.865; Azure/AI-benchmarking-guide's ND A100 v4
#   results (copy / mul 1.61, add / triad 1.70 TB/s of 2,039) -> 0.81. (Was 0.85, recalled.)
#   Blackwell 0.88: STREAM on a 152-SM Blackwell (GB200 class, 8 TB/s datasheet), best block
#   size per kernel: copy 6,712, scale 6,680, add 7,407, triad 7,414 GB/s
#   (microsoft/superbenchmark tests/data/gpu_stream.log) -> 7,053 / 8,000. (Was 0.89, Hopper's.)
#   CDNA3 0.77: BabelStream on an MI300X in AMD's customer acceptance guide
#   (ROCm/system-acceptance-docs, performance benchmarking: copy 4,256, mul 4,116, add 3,956,
#   triad 3,948 GB/s of 5,300) -> 0.768; the AI-benchmarking-guide's ND MI300X v5 results
#   (Azure_Results/ND_MI300X_v5_results.md, yosoyjay fork 2025-02: copy 4.11, mul 4.26, add
#   4.14, triad 4.09 TB/s) -> 0.783. (Was 0.80, recalled.) Hopper by the same rule on the
#   guide's ND H100 v5 / H200 v5 results: 0.88 / 0.85, against 0.89 measured here. Turing
#   parts (GDDR6) share the Volta entry unmeasured.
# - Blackwell and CDNA3 GEMMs: the same MAMF table (its BF16 and FP8 tables, torch.mm /
#   torch._scaled_mm over a brute-force shape search, read 2026-11-27 in
#   stas00/ml-engineering compute/accelerator/README.md): B200 bf16 1,745.0 of 2,250 (0.776,
#   the 0.78 below) and fp8 3,432.5 of 4,500 (0.763; was 0.70, a recalled figure); MI300X
#   bf16 668.4 of 1,307 (0.511; the 0.50 below, recalled before the table was found). Other
#   parts of these generations: SKU_MATMUL. Volta: the V100's own measurement is in
#   SKU_MATMUL; the generation's 0.80 (Turing parts) is a recalled figure;
#   attention on Volta is the neighbouring generation's. Replace them with `meshplan
#   calibrate` profiles where a GPU is at hand.
# - Attention on AMD parts: AMD's published table for aiter's v3 flash-attention kernels
#   (ROCm/aiter op_tests/cpp/mha/README.md, added by ROCm/aiter#1270, 2025-10-31; BF16, head
#   dim 128, GQA, causal, bench/data/aiter_attention.csv), the median of its nine batch x head
#   shapes at 8,192 keys over the dense bf16 peak: MI300X forward 540.5 of 1,307.4 TFLOP/s
#   (0.413; was 0.40, recalled), backward with fp32 dQ atomics 433.3 (0.331; was 0.32) --
#   Transformer Engine's ROCm default (NVTE_CK_IS_V3_ATOMIC_FP32=1), which AMD's MAD/Primus
#   benchmark script sets on MI300X and MI325X; 16-bit atomics would give 478.7 (0.366).
#   MI355X (CDNA4) forward 1,318.2 of 2,516.6 (0.524), backward with 16-bit dQ atomics 1,066.7
#   (0.424), the setting AMD's published MI355X runs state (NVTE_CK_IS_V3_ATOMIC_FP32=0 in
#   mlcommons/training_results_v5.1 AMD config_MI355X_1x8x1_8b.sh and Primus' MI355X tuning
#   configs); fp32 atomics would give 772.6 (0.307). Before, CDNA4 took CDNA3's fractions.
EFFICIENCY: dict[str, KernelEfficiency] = {
    "volta": KernelEfficiency(0.80, 0.80, 0.45, 0.40, 0.86, 3e-6, gemm_flop_per_load_byte=40.0,
                              sustained_clock=NVIDIA_SUSTAINED_CLOCK),
    "ampere": KernelEfficiency(0.86, 0.86, 0.67, 0.56, 0.84, 3e-6, gemm_flop_per_load_byte=43.0,
                               sustained_clock=NVIDIA_SUSTAINED_CLOCK),
    "hopper": KernelEfficiency(0.80, 0.76, 0.62, 0.53, 0.89, 3e-6, full_clock_power_w=700,
                               sustained_clock=NVIDIA_SUSTAINED_CLOCK),
    # Blackwell attention: no per-kernel table for B200 was found; derived from the Hopper
    # entry by ATTENTION_EXP below (same kernel family, twice the tensor-core rate per SM, the
    # same exponential rate): 0.62 / 0.53 on H100 become 0.495 / 0.488 on B200 at head dim
    # 128 (tests/test_attention_exp.py re-derives them). Checked, not fitted: the FlashAttention-4
    # paper (Zadouri, Shah, Dao et al., 2026-03) reports its B200 forward up to 1,613 TFLOP/s
    # (0.72 of 2,250) and 1.1-1.3x cuDNN 9.13's, i.e. cuDNN at 0.55-0.65 where FA4 peaks.
    "blackwell": KernelEfficiency(0.78, 0.763, 0.495, 0.488, 0.88, 3e-6, full_clock_power_w=1000,
                                  sustained_clock=NVIDIA_SUSTAINED_CLOCK),
    # CDNA3 GEMMs (MI300X): bf16 668.4 of 1,307.4 (the MAMF table above, torch.mm); fp8 from
    # that rate times AMD's own measured FP8 / BF16 ratio on the same part, same method and
    # day: 1,273 / 708 TFLOP/s ("Measuring Max-Achievable FLOPs - Part 2", ROCm blogs, 2025:
    # hipBLASLt-bench, M 4096 x N 3648/4864 x K 32896, MI300X 750 W) -> 1,201.8 of 2,614.9 =
    # 0.460 (was 0.45, a recalled figure; 0.50 bf16 was recalled too).
    "cdna3": KernelEfficiency(668.4 / 1307.4, 668.4 * 1273 / 708 / 2614.9, 540.5 / 1307.4,
                              433.3 / 1307.4, 0.77, 11e-6, gemm_flop_per_load_byte=107.0),
}
# CDNA4 (MI355X): its attention from AMD's aiter table (above); no GEMM table by shape was
# found, so CDNA3's GEMM fractions and shape model stand in (same hipBLASLt / CK kernel
# families; the per-CU matrix rate doubled, ISSCC 2026; MI355X's own bf16 rate is in
# SKU_MATMUL), and its predictions carry the wide interval of a generation with no
# validation rows (uncertainty.py). Replace with a `meshplan calibrate` profile where an
# MI355X is at hand.
EFFICIENCY["cdna4"] = replace(EFFICIENCY["cdna3"], attention_fwd=1318.2 / 2516.6,
                              attention_bwd=1066.7 / 2516.6)
# The Transformer Engine environment a generation's attention fractions above were measured
# under, where it is not TE's own default: CDNA4's backward is aiter's with 16-bit dQ atomics,
# while ROCm TE's CK path defaults to fp32 atomics (ROCm/TransformerEngine transformer_engine/
# common/fused_attn_rocm/fused_attn_ck.cpp: getenv<int>("NVTE_CK_IS_V3_ATOMIC_FP32", 1)), which
# the same table puts at 772.6 instead of 1,066.7 TFLOP/s on MI355X. A TE engine's export
# (export/megatron.py) sets these so the job runs the kernels it was priced with.
TE_ATTENTION_ENV = {"cdna4": {"NVTE_CK_IS_V3_ATOMIC_FP32": "0"}}
# CDNA2 (MI250X, one GCD per device): no GEMM, attention or stream table by shape was found
# for it, so CDNA3's fractions and shape model stand in (rocBLAS / Tensile macro tiles, the
# family hipBLASLt grew from; CDNA2 matrix cores at half CDNA3's bf16 rate per CU per clock,
# which the datasheet peak carries). Its predictions carry the wide interval of a generation
# with no calibration rows (uncertainty.py). The published MI250X runs of this set used
# Megatron-DeepSpeed without flash attention (attention_kernel "unfused"), which prices the
# attention core as GEMMs and softmax passes, not with the attention fractions. Replace with a
# `meshplan calibrate` profile where an MI250X is at hand.
EFFICIENCY["cdna2"] = EFFICIENCY["cdna3"]

# Large-GEMM fractions measured on one part that differ from its generation's reference
# part (EFFICIENCY: H100, A100, B200, MI300X). Parts of one generation share the SM design
# but not the clocks they hold under a GEMM: GB200's datasheet peak (2,500 bf16) assumes a
# clock its 1,200 W do not sustain, so it reaches a smaller share of it than B200 (1,822.0
# against 1,745.0 TFLOP/s: +4%, not the datasheets' +11%). Source: the MAMF table above
# (BF16 and FP8, TFLOP/s measured / datasheet dense peak): GB200 bf16 1,822.0 / 2,500,
# fp8 3,615.6 / 5,000; B300 bf16 1,769.0 / 2,250, fp8 3,353.3 / 4,500; MI325X (1,000 W)
# bf16 784.9 / 1,307.4; MI355X bf16 1,565.0 / 2,516.6. GB300 (not in the MAMF table): Meta's
# cuBLAS GEMM runs on one at its 1,400 W rated power with the SM clock locked at its
# 2,070 MHz maximum, "~1600-2174 tflops" (~617 at a 500 W cap), as stated in
# facebookexperimental/triton PR #2023 (2026-07-14, tritonbench's denoise.sh); the top of the
# range is taken, as MAMF takes the best shape: 2,174 / 2,500. The dtype is not stated; 16-bit
# is the only reading that fits (as fp8 it would be 0.43 of the 5,000 peak, against 0.72-0.76
# for every measured Blackwell part), and it is 1.19x GB200's MAMF rate on a part with 160
# SMs to GB200's 152 and 1,400 W to its 1,200 W. A profile overrides these by name
# ("SKU_MATMUL.GB200.bf16" = 0.75).
# MI325X fp8: its MAMF bf16 rate times AMD's measured FP8 / BF16 ratio on the part, 1,408.06 /
# 831.40 (ROCm blogs "Completing the GPU Performance Picture: Understanding TAF", 2026-10:
# hipBLASLt MAF with normal-distribution inputs, MI325X at 1,000 W) -> 1,329.3 of 2,614.9.
# A part with a bf16 measurement and none at fp8 takes its bf16 fraction times its
# generation's fp8 / bf16 ratio (compute._matmul_fraction): GB300, MI355X.
# V100 (Volta has no bf16: its "bf16" entry is the fp16 tensor-core rate): Markidis et al.,
# "NVIDIA Tensor Core Programmability, Performance & Precision" (IPDPSW 2018, arXiv
# 1803.04014), cuBLAS GEMM on a Tesla V100 (125 TFLOP/s tensor peak): "up to 83 Tflops/s in
# mixed precision ... seven and three times the performance in single and half precision"
# -> 83 / 125 = 0.664 on the tensor cores and 83 / 7 = 11.9 of 15.7 TFLOP/s fp32 SGEMM
# (0.755, the "fp32" entry, which compute._fp32_device reads before the 16-bit fraction).
# The volta generation entry above (0.80) was a recalled figure; Turing parts keep it.
SKU_MATMUL: dict[str, dict[str, float]] = {
    "GB200": {"bf16": 1822.0 / 2500, "fp8": 3615.6 / 5000},
    "B300": {"bf16": 1769.0 / 2250, "fp8": 3353.3 / 4500},
    "GB300": {"bf16": 2174.0 / 2500},
    "V100-SXM-32GB": {"bf16": 83.0 / 125, "fp32": 83.0 / 7 / 15.7},
    "MI325X": {"bf16": 784.9 / 1307.4, "fp8": 784.9 * 1408.06 / 831.40 / 2614.9},
    "MI355X": {"bf16": 1565.0 / 2516.6},
}

# The part each generation's attention fractions were measured on (the aiter table above:
# ROCm/aiter op_tests/cpp/mha/README.md, MI300X and MI355X). Another part of the generation
# with its own GEMM measurement (SKU_MATMUL) runs its attention at the matrix clock that
# measurement shows: attention_fwd / attention_bwd times (its bf16 GEMM fraction / the
# measured part's), compute.attention_clock_ratio. Why: the aiter kernels are MFMA-bound
# like the GEMMs (the exponentials run on the same CUs at the same clock), and a part's
# sustained clock under dense matrix work is what its GEMM fraction carries. MI325X is the
# MI300X die at 1,000 W instead of 750 W: AMD's max-achievable-FLOPs table ("Measuring
# Max-Achievable FLOPs - Part 2", ROCm blogs, 2025-02-28, hipBLASLt-bench, Table 1) gives its
# median clock under a BF16 GEMM as 1,447 MHz against the MI300X's 1,207 (x1.199; FP8 1,464 /
# 1,230 = x1.190), and the MAMF table (SKU_MATMUL) 784.9 against 668.4 TFLOP/s (x1.174, the
# ratio applied). Before, the MI325X ran the MI300X's attention at the same peak, i.e. at the
# 750 W part's clock. The NVIDIA generations are left out: Hopper's fractions come from an
# H200 whose GEMM rate is its generation's (ratio 1 for every Hopper part without a power
# cap, which POWER_CLOCK_EXPONENT handles), and Blackwell's are derived from Hopper's
# (ATTENTION_EXP), not measured on a part.
ATTENTION_MEASURED_ON = {"cdna3": "MI300X", "cdna4": "MI355X"}

# FA2-class attention kernels (torch SDPA flash backend, flash-attn 2) on Hopper, measured
# here (the H200 attention.csv above, SDPA's flash backend, causal, head dim 128, level at 8k
# keys): forward 337, backward 288 TFLOP/s = 0.34 / 0.29 of 989 (the FA3 paper's FA2
# baseline, ~0.35 / ~0.30 recalled, agrees). Blackwell runs the same Ampere-style kernel:
# the Hopper fractions. Other generations: their EFFICIENCY entry (FA2 is the best kernel there).
ATTENTION_FA2 = {"hopper": (0.34, 0.29), "blackwell": (0.34, 0.29)}

# Head dims above 128: (forward, backward) rate of a kernel class at (d_qk x d_v) over the
# same kernel at head dim 128 and the same key length (FLOPs counted with the true head dims),
# measured on the lent H200 (bench/data/measured/h200_2026-11-27: mla_attention.csv for
# 192x128 and 192x192, attention.csv for 256x256; causal, torch 2.11 SDPA, median of the
# ratios at 2k-16k keys, 4k-16k for 256x256). The forward holds (0.9-1.06); the backward
# drops: its dQ, dK and dV accumulators grow with the head dim, so the kernels fall back to
# smaller tiles (flash-attn 2's backward, as PyTorch builds it: hdim 128 runs 64 x 128 blocks
# on parts with >= 144 KB of shared memory, hdim 160-256 64 x 64; aten/src/ATen/native/
# transformers/cuda/flash_attn/flash_bwd_launch_template.h, run_mha_bwd_hdim*). cuDNN (the
# "te" class) keeps 0.87 of its head-dim-128 backward at DeepSeek-V3's MLA shape 192x128 but
# 0.61 at 192x192 and 0.72 at 256x256 (not monotone: cuDNN picks a kernel per shape).
# flash-attn 2 has one head dim for q, k and v: a narrower value is padded to d_qk
# (compute.wide_head_factor), as its measured 192x128 run shows (0.783 / 0.746 = the 192x192
# rate x 160/192 within 0.5%). Measured on Hopper only: the "te" entries apply to Hopper
# (Blackwell's cuDNN kernels for these shapes are other kernels, not measured), the "fa2"
# ones to the NVIDIA parts that run flash-attn 2's SM80 code (Ampere, Hopper, Blackwell).
# Other shapes above 128 take the nearest entry.
WIDE_HEAD_ATTENTION = {
    "te": {"192x128": (1.0, 0.866), "192x192": (1.055, 0.607), "256x256": (1.055, 0.724)},
    "fa2": {"192x192": (0.945, 0.895), "256x256": (0.915, 0.839)},
}
WIDE_HEAD_GENERATIONS = {"te": ("hopper",), "fa2": ("ampere", "hopper", "blackwell")}

# Which attention kernel each engine runs by default: Megatron-LM / NeMo use Transformer
# Engine's cuDNN fused attention (FA3 class on Hopper); torchtitan, DeepSpeed and others
# call torch SDPA / flash-attn 2 (engines not listed: "fa2"). MaxText on NVIDIA GPUs runs
# ``attention=cudnn_flash_te`` (Transformer Engine's DotProductAttention on cuDNN's fused
# flash attention, NVTE_FUSED_ATTN=1): NVIDIA's own MaxText recipes set it
# (NVIDIA/dgxc-benchmarking maxtext/configure.sh at 0efdb23, Llama 3 70B).
# llm-foundry: its published throughput runs (scripts/train/benchmarking/README.md, the
# framework's own performance runs: framework_defaults.py rule 1) come from the harness
# scripts/train/benchmarking/submit_benchmarks.py, which sets ``parameters['model']
# ['attn_impl'] = args.attn_impl`` from ``parser.add_argument('--attn_impl', type=str,
# default='triton')`` (mosaicml/llm-foundry at 12a631913c, read 2026-11-27; the same default
# 300cc5c to b2a43a1): the "triton-fa1" class below. llm-foundry v0.7.0 and later have no
# Triton kernel (attn_impl: flash / torch): a run on those releases states fa2.
ENGINE_ATTENTION = {"megatron": "te", "nemo": "te", "maxtext": "te", "llm-foundry": "triton-fa1"}

# Attention kernel classes a run may state (Workload.attention_kernel; a runs CSV's optional
# column ``attention_kernel``), overriding its engine's default above:
#   "te"         Transformer Engine / cuDNN fused attention, FA3 class on Hopper (EFFICIENCY)
#   "fa2"        flash-attn 2 / torch SDPA flash backend (ATTENTION_FA2 on Hopper/Blackwell)
#   "triton-fa1" the first-generation FlashAttention written in Triton (flash-attn's
#                flash_attn/flash_attn_triton.py, Dao 2022), which llm-foundry copied as
#                llmfoundry/models/layers/flash_attn_triton.py on the pre-MLIR Triton
#                compiler (triton-pre-mlir) and ran as `attn_impl: triton`, its default
#                through v0.6 (mosaicml/llm-foundry TUTORIAL.md: "Our training setups
#                typically use `triton`"; removed in v0.7.0, 2024-03)
#   "unfused"    no flash-class kernel: the scores are materialised, the attention core is two
#                batched GEMMs plus a fused softmax and dropout over the s x s scores
#                (compute.unfused_attention_s; attention_memory.py keeps them for backward),
#                as on pre-Ampere parts or where a source says flash attention was off
#   "unfused-eager" the same, with the scale, the mask, the softmax and the dropout each a
#                PyTorch op of its own (no fused softmax kernel): the attention of Megatron-LM
#                before its fused kernels (mpu/transformer.py at abe36e2e5f, 2019-07, the
#                code of the Megatron-LM paper's runs; compute.EAGER_SOFTMAX_PASSES)
ATTENTION_KERNELS = ("te", "fa2", "triton-fa1", "unfused", "unfused-eager")
UNFUSED_KERNELS = ("unfused", "unfused-eager")  # the classes that materialise the scores
# FlashAttention in Triton against FlashAttention-2, same GPU: FlashAttention-2 paper
# (Dao 2023, arXiv 2307.08691, sec. 4.1, A100 80GB, causal and non-causal, head dim 64 and
# 128): "FlashAttention-2 is around 1.3-1.5x faster than FlashAttention in Triton in the
# forward pass and around 2x faster in the backward pass" -> 1.4 (midpoint) and 2.0. The
# same ratios are applied on Hopper: both kernels issue Ampere-style mma.sync tensor-core
# instructions there (FA2 "using no special instructions to make use of new features such
# as TMA and 4th-gen Tensor Cores", the same paper, Fig. 7; the pre-MLIR Triton backend has
# no wgmma path), so the Triton kernel's share of the FA2 rate carries over.
# Which Triton kernel: the paper's benchmark (Dao-AILab/flash-attention
# benchmarks/benchmark_flash_attention.py, method "Triton") times OpenAI's
# triton.ops.flash_attention, not the flash_attn_triton.py llm-foundry copied. That file's
# own docstring places it against FlashAttention-1 (CUDA): "Triton forward is generally
# faster than CUDA forward, while Triton backward is generally slower ... Overall Triton
# forward + backward is slightly slower", and the same paper's abstract has FlashAttention-2
# at "around 2x speedup compared to FlashAttention". The two chains agree on the whole step's
# attention: 1.4 and 2.0 weighted by the backward's 2.5x FLOPs give 1.83x.
TRITON_FA1_SLOWDOWN = (1.4, 2.0)  # (forward, backward) time over FlashAttention-2's

# ---- the only constants fitted end to end (bench/fit_constants.py, leave-one-source-out) ----
# Share of the tensor-core throughput at the held clock that a whole training step sustains:
# what the kernel tables and the shape model miss in a step of many GPUs (back-to-back
# kernels losing L2 reuse, communication kernels sharing the CUs, ...). The clock the power
# limiter takes off a burst-measured table is KernelEfficiency.sustained_clock, apart
# (tensor_derating). Was, until 2026-11-29, both in one: 0.75 of the burst rate on every
# vendor's tables, refitted 2026-11-23 on the calibration rows (was 0.70; grid 0.60-0.90),
# all NVIDIA. Kept as that 0.75 of the burst rate on NVIDIA, re-expressed over
# NVIDIA_SUSTAINED_CLOCK, so the split moves no NVIDIA prediction. A rerun of
# bench/fit_constants.py on 2026-11-29 (its grid now the former one over the held clock, the
# same NVIDIA products) picked 0.70 / NVIDIA_SUSTAINED_CLOCK with KERNEL_GAP_S 4 us and
# POWER_CLOCK_EXPONENT 1/3 right after the split (calibration 6.5% / 17.0% against 6.0% /
# 19.1% kept); after NeMo's bf16 gradient default (framework_defaults NEMO_DTYPES) it picks
# this SUSTAINED_TENSOR with KERNEL_GAP_S 32 us and POWER_CLOCK_EXPONENT 0.5 (6.6% / 16.8%;
# held-out at it 10.6% / 24.7% against 7.4% / 20.3% kept). Not adopted: README, "The refit".
# Held-out check at the layer level (not fitted): Korthikanti et al. 2022 Table 4 times one
# Megatron layer of a 22B model on A100; its forward and backward, less the model's other
# parts, leave the GEMMs 230-237 TFLOP/s (0.86-0.88 of the Ampere burst entry) where this
# constant and the held clock give 189, so the model's A100 layer is 12-14% slow in all five
# settings (bench/korthikanti_layer.py, tests/test_korthikanti_layer.py). The H100 / H200
# layer steps measured here show the same overcharge (bench/layer_step_compare.py: GEMMs
# 16.7 ms modelled against 13.2-14.5 held): the loss this fit charges to every GEMM is not
# seen inside a layer; where a step really loses it is not modelled yet.
SUSTAINED_TENSOR = 0.75 / NVIDIA_SUSTAINED_CLOCK
# Idle time per kernel on the critical path (launch latency, tail of the previous kernel,
# stream synchronisation): CUDA launch latency alone is ~3-5 us; PyTorch eager dispatch
# adds CPU time that is hidden only when the GPU is ahead of the host.
KERNEL_GAP_S = 16e-6  # refitted 2026-11-23 (was 8 us; grid 0-32 us)
# Fixed time of one kernel replayed from a CUDA graph (no host launch, no eager dispatch: the
# GPU runs the captured kernels back to back), what a kernel costs before its bytes or FLOPs.
# Measured: AIConfigurator's TensorRT-LLM 1.2.0rc5 static FP8 quantize kernel on H100
# (h100_sxm/quantize/trtllm/1.2.0rc5/scale_matrix_perf.parquet: m = 1-8 rows of k = 32-65,536,
# replayed in a CUDA graph) takes 2.67-3.22 us, median 2.75, where its bytes take at most
# 0.5 us; the same table at m = 256 (6 MB) gives 4.66 us, this floor plus its bytes at HBM
# bandwidth 4.8 us. No such table for other GPUs: the H100 figure stands in. Serving
# (serve/cost.py KERNEL_FLOOR_S) reads it here. Not fitted. (A training kernel's gap under a
# graph is KERNEL_GAP_S less GRAPH_LAUNCH_SAVING_S below: the fitted gap holds more than the
# launch, as the measured eager-vs-graph steps show.)
GRAPHED_KERNEL_S = 2.75e-6
# GPU idle time one host-device synchronisation adds to a stream of work: the stream drains,
# the host wakes, and the next kernel waits for its launch. Measured here: an .item() after
# each 4096^3 GEMM of a chain (bench/gpu_layer_step.py sync_cost) costs 18.7-58.1 us a sync
# over the seven runs of bench/data/measured/h*_2026-11-28/layer_*/layer_step.json
# (sync_gemm_chain.per_sync_s, H100 and H200), median 27.3 us. Charged where an engine's code
# synchronises every step (moe_comm.host_syncs). Not fitted.
HOST_SYNC_S = 27.3e-6
# What replaying a step from one CUDA graph saves per kernel against launching it eagerly,
# where the GPU, not the host, sets the pace (a graphed kernel still waits for its
# predecessor to drain; only the launch path between them goes): measured on this project's
# lent H100 and H200 (bench/data/measured/h*_2026-11-28/layer_*/layer_step.json: the same
# four-layer Llama-2-7B-shaped training step run eagerly and then replayed from one CUDA
# graph, back to back in the first seconds; kernels per step from layer_kernels.csv):
# (eager_s - graph_first_s) / kernels = H200 eager cuDNN 3.91 us (304 kernels), eager flash
# 4.26 (296), compiled 3.22 (173); H100 eager cuDNN 4.07 (304), compiled 1.47 (173): the
# median 3.91 us (tests/test_cuda_graph.py re-derives it). Measured, not fitted: a graphed
# layer's captured kernels each pay KERNEL_GAP_S less this (ops.graph_replay, compute.op_times).
GRAPH_LAUNCH_SAVING_S = 3.91e-6
# Host time to issue one framework op (Python + PyTorch dispatch + CUDA launch) in forward,
# and in backward (autograd's C++ engine issues ~1.5 ops per forward op without Python).
# PyTorch eager costs ~5-10 us of CPU per op ("Accelerating PyTorch with CUDA Graphs",
# PyTorch blog 2021: launch overheads of several microseconds per kernel make small-batch
# work CPU-bound); a layer whose GPU work is shorter than this waits for the host.
HOST_OP_FWD_S = 10e-6
HOST_OP_BWD_S = 1.5 * 5e-6
# MoE routing imbalance: tokens on the busiest expert rank over the mean. 1.0 for
# force-balanced benchmarks; auxiliary-loss balanced training reports max/mean loads of
# ~1.1-1.3 (Switch Transformer capacity factors 1.0-1.25; DeepSeek-V3 sec. 2.1.2).
MOE_LOAD_IMBALANCE = 1.0


@dataclass(frozen=True)
class NetworkEfficiency:
    """NCCL collectives (cost/collectives.py): bus bandwidth as a fraction of link bandwidth,
    and the fixed costs that make small messages slow. Sources: bench/data/nccl_points.csv
    (published nccl-tests tables) and NCCL's own tuning model (src/graph/tuning.cc)."""

    # Ring bus bandwidth at large messages, fraction of the NVLink bandwidth per GPU.
    # nccl-tests: 8x A100 NVSwitch all-reduce 235 of 300 GB/s (0.78), all-gather 223-230,
    # reduce-scatter 231 (microsoft/superbenchmark tests/data/nccl_*.log); 8x H100 ~370 of 450
    # (0.82) for every non-NVLS collective (NVIDIA/nccl-tests#212, sjeaugey).
    scaleup: float = 0.80
    # The same on AMD Infinity Fabric (xGMI) between CDNA3 GPUs (MI300X, MI325X: 7 links of
    # 64 GB/s each way): the link layer's CRC and protocol overhead leave 45-48 GB/s a link
    # (TransferBench all-to-all on 8x MI300X, 45.1-47.2 GB/s per pair) and the ring runs at the
    # slowest link's pace. AMD's rccl-tests all-reduce on 8x MI300X (one process per GPU,
    # RCCL 2.22.3, ROCm 6.3) levels off at 318.98 GB/s bus bandwidth at 16 GiB ("Understanding
    # RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", ROCm blogs 2025-03-02,
    # ROCm/rocm-blogs blogs/software-tools-optimization/mi300x-rccl-xgmi/README.md) ->
    # 318.98 / 448 = 0.712 (the 0.80 of NVLink had the ring 12% fast there; the table's other
    # sizes are held-out rows of bench/data/nccl_points.csv). CDNA4 (MI355X, its faster links)
    # has no such measurement here and keeps the NVLink fraction.
    scaleup_xgmi: float = 318.98 / 448.0
    # InfiniBand/RoCE, per NIC at large messages: NDR 400 Gb/s gives 46-48 of 50 GB/s
    # (NVIDIA/nccl-tests#290, AddyLaddy), 4x 400G RoCE ring 190 GB/s = 47.5 per NIC
    # (NVIDIA/nccl#1368), DGX-A100 8x 200G IB 192 GB/s = 24 of 25 per NIC (NVIDIA/nccl#1576).
    scaleout: float = 0.92
    # All-to-all across nodes: every rank talks to every other, so messages are n times
    # smaller than a ring's and NIC queue pairs contend. At MoE sizes (MBs per peer) and with
    # NCCL's NVLink aggregation (PXN) it comes close to the ring's NIC rate; DeepEP README
    # (H800, CX7 400 Gb/s): internode dispatch 43-58 GB/s "RDMA bandwidth" per 50 GB/s NIC
    # (NVLink forwarding). Set a little below scale-out; the 0.30 fitted before made the
    # calibration's EP32-across-nodes Qwen3 rows 50% too slow.
    alltoall_scaleout: float = 0.80
    # NVLink SHARP (NVLS, NVSwitch multicast/reduction; Hopper and later, NCCL >= 2.17)
    # all-reduce inside a node over the ring's bus bandwidth, Hopper (NVLink 4): 8x H100 ~480
    # vs ~370 GB/s (NVIDIA/nccl-tests#212), 8x H800 215 vs ~164 (0.82 x 200; NVIDIA/nccl#1374)
    # -> 1.30; AIConfigurator's 8x H100 NCCL 2.29.2 table: 445 vs 335 at 512 MiB (1.33).
    nvls_allreduce: float = 1.30
    # The same on Blackwell (NVLink 5) gains less over its ring: 8x B200, all-reduce 704 vs
    # all-gather 617 GB/s bus bandwidth at 512 MiB (1.14), 683-704 vs 596-618 in all four NCCL
    # versions timed (2.27.3-2.29.2; ai-dynamo/aiconfigurator systems data b200_sxm, commit
    # 095f58a5, bench/data/aic_training_kernels.csv); 72x GB200 NVL72 all-reduce levels off at
    # 835-839 GB/s at 4-8 GiB (coreweave/nccl-tests#43), 1.16 over the 0.80 x 900 GB/s ring.
    nvls_allreduce_blackwell: float = 1.14
    # Tree all-reduce bus bandwidth over the ring's across nodes (NCCL tuning.cc: busBw * .9).
    tree: float = 0.90
    # Protocols (NCCL picks, per call, the fastest of LL, LL128 and Simple). Bandwidth share of
    # LL: 1/4 (NCCL tuning.cc: ring LL busBw / 4: 8-byte lines with 4-byte flags, fewer
    # threads). LL's fixed cost: 8x H20 (Hopper NVSwitch) all-reduce of 4 bytes takes 12.5 us
    # with one process per GPU (deepseek-ai/DeepEP#303 nccl-tests table), less NCCL's 14 LL
    # NVLink hops of 0.47 us: 5.9 us. Fitted (grid search, bench/nccl_fit.py --fit) on the 'fit'
    # rows of bench/data/nccl_points.csv (8x A100 all-reduce and reduce-scatter, 64 KiB - 8 GiB;
    # the harness time of a 0-byte call in the same log, 34 us, added to the model's): LL128's
    # bandwidth share (0.90; NCCL's own model says 0.92) and fixed cost, and Simple's pipeline
    # fill, in bytes at the link's bus bandwidth (the ring's chunks in flight before it streams:
    # busbw is half its peak when the ring moves about this many bytes).
    ll_bw: float = 0.25
    ll_base_s: float = 5.9e-6
    ll128_bw: float = 0.90
    ll128_base_s: float = 30e-6
    simple_fill_bytes: float = 12e6
    # All-to-all: NCCL posts one send and one receive per peer (grouped p2p); each costs host
    # time to issue: the 8x A100 all-to-all table (g8 mode: one thread issues all 8 GPUs' 112
    # calls) takes ~87 us at <= 1 MB, 0.78 us a call -> 2 x 0.78 us per peer for one rank.
    a2a_peer_s: float = 1.55e-6
    # Per ring step (hop) latency by link and protocol (LL, LL128, Simple), NCCL's own model
    # (src/graph/tuning.cc hwLat, Ring row): NVLink .47/1.9/3.4 us, PCIe 1.0/2.5/5.7, network
    # 2.7/4.0/9.6. Stored here as the Simple values; collectives.py applies NCCL's LL/LL128
    # ratios. A tree level on the network costs a network hop (NCCL's tree/Simple 50 us is "a
    # 256kB chunk at 12GB/s", i.e. slower NICs; nccl-tests#232, 2 H100 nodes on NDR, shows
    # ~30 us of fixed cost for a whole tree all-reduce).
    hop_nvlink_s: float = 3.4e-6
    hop_pcie_s: float = 5.7e-6
    hop_net_s: float = 9.6e-6
    # Point-to-point send/recv inside a node: nccl-tests sendrecv_perf on 8x A100 reaches 195
    # of 300 GB/s at 1 GiB (li-plus/playground cuda/nccl.md): a p2p uses fewer channels.
    p2p_scaleup: float = 0.65
    # Share of TP communication hidden when the plan asks for TP overlap (Megatron TE
    # userbuffers / async TP: most but not all of the all-gather / reduce-scatter).
    tp_overlap: float = 0.80
    # Compute slowdown while communication runs beside it, per second of communication
    # hidden, by what issues the communication:
    # - TP overlap (Megatron / TE userbuffers, async TP): the kernels are written to share the
    #   GPU. TE's defaults (transformer_engine/pytorch/module/base.py initialize_ub,
    #   get_default_config, read 2026-11-27 at d0067d0): ring-exchange all-gathers move data
    #   on the copy engines ("use_ce": True, one SM), the pipelined / bulk reduce-scatters take
    #   16 SMs and launch the GEMM beside them with that margin ("set_sm_margin"): 0-12% of an
    #   H100's 132 SMs; MegaScale / Comet report 5-15% -> 0.10.
    overlap_contention: float = 0.10
    # - NCCL / RCCL collectives and send/recv on a side stream (data-parallel reduce-scatter,
    #   all-gather and all-reduce, FSDP gathers, context-parallel ring, pipeline p2p, expert
    #   all-to-all): every channel is a thread block resident on an SM that the compute
    #   kernels, launched for the whole GPU, do not leave free, so their last wave runs short
    #   of SMs, and both draw on HBM. Lee et al., "Characterizing Compute-Communication
    #   Overlap in GPU-Accelerated Distributed Deep Learning" (arXiv 2507.03114, 2025; GPT and
    #   Llama layers with NCCL / RCCL collectives beside them on 4x A100, H100, MI250,
    #   MI210): compute runs on average 18.9% slower than alone (at most 40.0%) -> 0.19.
    collective_contention: float = 0.19


NETWORK = NetworkEfficiency()


@dataclass(frozen=True)
class HostCosts:
    """Host side: optimizer offload and framework overheads."""

    # CPU Adam (DeepSpeed CPUAdam, AVX-512): ~1e9 parameters/s per GPU's share of cores.
    # Published figures: 11.6B parameters in 8.2 s, 1.4e9/s for one process with the host's
    # cores (deepspeedai/DeepSpeed#735, 2021, against 56 s for torch.optim.Adam); 72B over 32
    # A100s (4 nodes) in ~10 s a step with parameters offloaded too, ~2.3e8/s per GPU
    # (deepspeedai/DeepSpeed#6834, 2024). The 1e9 is the single-process figure rounded down;
    # eight GPUs sharing one host's cores get less. Used only by plans that offload the optimizer.
    cpu_adam_params_per_s: float = 1.0e9
    # Host<->device copy bandwidth per GPU: PCIe Gen4 x16 measures ~25 GB/s pinned (A100: the
    # BaM paper's measured peak, ZaidQureshi/bam#54; NVIDIA/nvbandwidth#53 ~25 GB/s device
    # to host). Gen5 parts measure more (H100: host-to-device 35.2, device-to-host 52.8 GB/s
    # with nvbandwidth's SM copies, NVIDIA/nvbandwidth#24) and Grace parts far more (NVLink-C2C);
    # one figure for all parts, the Gen4 one, so offload plans on newer parts read slow.
    pcie_bytes_per_s: float = 25e9
    # GPU memory outside PyTorch's allocator: the CUDA context, ~300-400 MB since CUDA 11.7's
    # lazy module loading (pytorch/pytorch#107667 and #109888, ptrblck), and NCCL's buffers,
    # 544 MB for a 2-GPU and 688 MB for a 4-GPU process group on A100 NVLink (measured in
    # NVIDIA/nccl#964), growing with channels and communicators (NVIDIA/nccl#986): a context
    # plus one to two communicators. Not scaled with the plan's number of process groups.
    runtime_reserved_bytes: float = 1.5 * 2**30
    # PyTorch caching-allocator fragmentation: reserved exceeds allocated by this share (of
    # what is not held in contiguous buffers: memory.py). Published reserved-over-allocated
    # peaks spread widely by workload: +3% (pytorch/pytorch#44742's memory summary, 14.34
    # against 14.77 GB), +21% (meta-pytorch/torchrec#4584, 77 against 93 GiB), +108% for an
    # FSDP run of Qwen2.5-7B (+58% with expandable segments; nvidia-cosmos/cosmos-rl#388). The
    # 0.15 was set by the first release's calibration (0.08 before it) and sits inside that
    # spread; a run fits on held bytes, which leave this share out (memory.cap_fragmentation).
    allocator_fragmentation: float = 0.15
    # Communication buffers held by NCCL and the framework's bucketing (per GPU). One figure
    # for every engine, not measured: what the engines allocate beside the gradients spans
    # ~0 (Megatron-LM's buckets are views of its contiguous grad buffer) to 25 MB (PyTorch
    # DDP's default bucket_cap_mb, pytorch/pytorch#118421) to ~1 GB (DeepSpeed ZeRO-1/2's
    # IPG bucket of reduce_bucket_size elements, default 5e8, as EleutherAI's logged Pythia
    # configs show, at 2 bytes; allocated in stage_1_and_2.py, in pipeline mode only after
    # the last backward), and FSDP2 holds one unit's reduce-scatter input; 0.5 GiB sits
    # inside that span. Modelling each engine's buffer needs its timing against the peak
    # (README, "Where it is still wrong").
    comm_buffer_bytes: float = 0.5 * 2**30


HOST = HostCosts()


def kernel_efficiency(generation: str) -> KernelEfficiency:
    return EFFICIENCY.get(generation, EFFICIENCY["hopper"])


def tensor_derating(generation: str) -> float:
    """The share of a generation's kernel-table tensor-core rate a whole training step
    sustains at full board power: the clock the part keeps under sustained load
    (KernelEfficiency.sustained_clock) times SUSTAINED_TENSOR."""
    return SUSTAINED_TENSOR * kernel_efficiency(generation).sustained_clock


# What a calibration profile (meshplan/profile.py) may set each constant to, so that a typo
# cannot make a step take negative, zero-divided or infinite time. (pattern, low, high): the
# first pattern that matches a name (fnmatch) wins, both ends included. Shares of a datasheet
# peak or of a link's bandwidth divide work: (0, 1], with 1e-12 as the floor (a smaller share
# overflows the step's arithmetic; `meshplan calibrate`'s CPU stand-in measures ~1e-7 of an
# H100's attention peak); shares of an overlap, of a waste or of an exposed exponential:
# [0, 1]; tensor-core, exponential and host rates and sizes: at least 1 (ratios: 1e-12);
# times per operation or per hop: at most 1 s. A name no pattern matches only has to be
# finite and >= 0.
PROFILE_RANGES: tuple[tuple[str, float, float], ...] = (
    ("EFFICIENCY.*.matmul_*", 1e-12, 1.0),
    ("EFFICIENCY.*.attention_*", 1e-12, 1.0),
    ("EFFICIENCY.*.memory", 1e-12, 1.0),
    ("EFFICIENCY.*.gemm_flop_per_load_byte", 1e-12, math.inf),
    ("EFFICIENCY.*.full_clock_power_w", 0.0, math.inf),
    ("EFFICIENCY.*.sustained_clock", 1e-12, 1.0),
    ("SKU_MATMUL.*", 1e-12, 1.0),
    ("SUSTAINED_TENSOR", 1e-12, 1.0),
    ("NETWORK.tp_overlap", 0.0, 1.0),
    ("NETWORK.overlap_contention", 0.0, 1.0),
    ("NETWORK.collective_contention", 0.0, 1.0),
    ("NETWORK.nvls_allreduce", 1e-12, math.inf),
    ("NETWORK.nvls_allreduce_blackwell", 1e-12, math.inf),
    ("NETWORK.simple_fill_bytes", 0.0, math.inf),
    ("NETWORK.*_s", 0.0, 1.0),
    ("NETWORK.*", 1e-12, 1.0),
    ("HOST.allocator_fragmentation", 0.0, 1.0),
    ("HOST.*_per_s", 1.0, math.inf),
    ("ATTENTION_EXP", 0.0, 1.0),
    ("TENSOR_FLOPS_PER_SM_CLOCK.*", 1.0, math.inf),
    ("SKU_TENSOR_FLOPS_PER_SM_CLOCK.*", 1.0, math.inf),
    ("*EXP_PER_SM_CLOCK*", 1.0, math.inf),
    ("ATTENTION_REF_HEAD_DIM", 1.0, math.inf),
    ("MOE_LOAD_IMBALANCE", 1.0, math.inf),
    ("*_S", 0.0, 1.0),
    ("*.*_s", 0.0, 1.0),
)


def profile_range(name: str) -> tuple[float, float] | None:
    """(low, high) a profile may set ``name`` to, both included, or None (finite, >= 0)."""
    from fnmatch import fnmatchcase
    for pattern, lo, hi in PROFILE_RANGES:
        if fnmatchcase(name, pattern):
            return lo, hi
    return None
