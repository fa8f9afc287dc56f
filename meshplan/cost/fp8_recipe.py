"""What an FP8 training recipe costs beyond running the linear GEMMs at the FP8 rate.

FP8 speeds up only the GEMMs of the linear layers, and even those pay for quantising their
operands. Everything else stays in 16-bit: attention, norms, activations, the output head
and the MoE router (DeepSeek-V3 report sec. 3.3.1 keeps "the embedding module, the output
head, MoE gating modules, normalization operators, and attention operators" in their
original precision; Megatron-Core's output_layer is a plain tensor_parallel
ColumnParallelLinear, not a Transformer Engine module; torchtitan's float8 converter skips
``output`` by default, torchtitan/components/quantization/float8.py filter_fqns). This
module says, per recipe, what each quantised linear costs on top of its GEMMs, from the
recipe's published mechanics, never from a fitted per-run factor:

- bytes per element of each quantised tensor (input, output gradient, weight) read and
  written by the cast kernels, at HBM bandwidth (ops.LayerOps.fp8_fwd_bytes/fp8_bwd_bytes);
- the kernels those casts launch, and the amax all-reduce of per-tensor current scaling
  over a sequence-parallel group (one small NCCL call each, costed as one kernel gap:
  a 4-byte all-reduce on 8 Hopper GPUs takes 12.5 us, deepseek-ai/DeepEP#303, next to
  efficiency.KERNEL_GAP_S = 16 us);
- the GEMM rate of the recipe's scaled GEMM relative to the per-tensor FP8 GEMM.

Sources of the byte counts (each constant below repeats its own):
- Transformer Engine docs, features/low_precision_training (TE @ d0067d0): current scaling
  "requires reading the tensor twice" (amax, then scale and cast); delayed scaling reads
  once (scale from the amax history); on Hopper the column-wise operand of the backward
  GEMMs "need[s] to be physically transposed in memory", on Blackwell per-tensor FP8 "supports
  columnwise access natively, so no transpose is needed"; MXFP8 row-wise (1x32) and
  column-wise (32x1) copies "must be quantized independently from the full-precision data".
- TE transformer_engine/pytorch/csrc/extensions/normalization.cpp: the norm before a linear
  writes delayed-scaling FP8 directly (FULLY_FUSED), computes the amax of current scaling
  in the norm kernel (FUSED_NORM_AMAX_FP8: the norm writes 16-bit, then one cast), and runs
  MXFP8 unfused by default (norm in 16-bit, then the MXFP8 quantiser).
- torchao's own roofline of its recipes, torchao/testing/training/roofline_utils.py
  (pytorch/ao @ 36027d8, get_tensor_memory_traffic_ovhd_s): tensorwise = max_abs pass +
  one cast writing both layouts (weights: two casts); rowwise = a cast that also writes a
  16-bit transpose, then a cast of that transpose (weights: cast, transpose, cast).
- torchao/float8/float8_ops.py (addmm_float8_unwrapped): row-wise GEMMs without fast
  accumulation (the two backward GEMMs) run cuBLAS's tensor-wise kernel and rescale the
  16-bit output in a separate pass ("The rowwise CUTLASS-based kernel is so slow without
  fast-accum...", pytorch/ao#1325, #2184).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..specs.hardware import vendor_of
from ..specs.workload import normalise_fp8_recipe as normalise

BF16 = 2.0  # bytes of a 16-bit element
FP8 = 1.0  # bytes of an FP8 element
MX_BLOCK = 32  # MXFP8: one E8M0 (1-byte) scale per 32 elements (OCP MX v1.0; TE mxfp8.rst)
BLOCK = 128  # FP8 block scaling: one fp32 scale per 1x128 block (TE fp8_blockwise_scaling.rst)

# The engines' default recipe when a run names none: Transformer Engine's default recipe is
# DelayedScaling (transformer_engine/common/recipe/__init__.py; Megatron-LM --fp8-recipe
# default "delayed"; NeMo 24.x fp8_recipe "delayed"), except that on Blackwell meshplan's
# Megatron export writes MXFP8 (export/megatron.py, NVIDIA's Blackwell recipes), so a
# Megatron/NeMo plan there is costed as what it exports; torchao's Float8LinearConfig()
# is tensorwise (torchtitan's default until 2025; see export/torchtitan.py). Others:
# delayed (XLA / MaxText, llm-foundry through TE).
ENGINE_DEFAULT = {"torchtitan": "tensorwise"}
BLACKWELL_DEFAULT = {"megatron": "mx", "nemo": "mx"}
DEFAULT = "delayed"
# Megatron-LM's --fp8-recipe for each recipe (megatron/training/arguments.py choices
# tensorwise (= TE current scaling), delayed, mxfp8, blockwise); torchao's rowwise has none
MEGATRON_FLAG = {"delayed": "delayed", "cs": "tensorwise", "tensorwise": "tensorwise",
                 "mx": "mxfp8", "blockwise": "blockwise"}


def default_recipe(engine: str, generation: str) -> str:
    """The recipe ``engine`` runs on ``generation`` when the workload names none."""
    if generation == "blackwell" and engine in BLACKWELL_DEFAULT:
        return BLACKWELL_DEFAULT[engine]
    return ENGINE_DEFAULT.get(engine, DEFAULT)


# engines whose FP8 linears are torchao's (separate cast kernels, weights cast every forward)
TORCHAO_ENGINES = ("torchtitan",)
# generations without FP8 tensor cores: an fp8 workload runs its GEMMs in 16-bit there
# (compute.device) and casts nothing
NO_FP8 = ("volta", "ampere")
# AMD Instinct generations: their FP8 recipes are ROCm Transformer Engine's
# (ROCm/TransformerEngine transformer_engine/pytorch/quantization.py at 030b79214fa6, the
# fork AMD's Megatron-LM and Primus images build), which differs from NVIDIA's TE in two:
# - check_fp8_block_scaling_support returns False on every HIP device ("FP8 block scaled
#   gemm not yet supported for ROCm"): no blockwise recipe on any AMD part;
# - check_mxfp8_support accepts gfx95x (CDNA4: MI350X, MI355X; CDNA4 has MXFP8 matrix
#   instructions, AMD CDNA4 ISA) and only while the environment switch ROCM_MXFP8_ENV is set
#   ("MXFP8 support is not enabled." when it is "0" or unset); gfx94x (CDNA3) has none.
MX_GENERATIONS = ("blackwell", "cdna4")
ROCM_MXFP8_ENV = {"NVTE_ROCM_ENABLE_MXFP8": "1"}

# GEMM rate of a recipe's scaled GEMM over the per-tensor FP8 GEMM, by generation.
# - mx on Blackwell: TE GEMM profiling tutorial (docs/examples/gemm_profiling, TE @ d0067d0),
#   B300, pre-quantised operands, per-layer GEMM time of a 5B config (M 15,872, hidden 4,096,
#   ffn 16,384): FP8 current scaling 6.812 ms, MXFP8 7.161 ms -> 6.812 / 7.161 = 0.951.
# - blockwise on Hopper: the same tutorial on H200 NVL, with casts (autocast): per-layer
#   22.882 ms block scaling against 16.785 ms of pre-quantised per-tensor GEMMs; the block
#   casts move about what delayed scaling's do (rowwise + column-wise copy, 4 B/element;
#   delayed autocast 18.978 ms -> 2.19 ms of casts), leaving 22.882 - 2.19 = 20.69 ms of
#   GEMM: 16.785 / 20.69 = 0.81 (cuBLAS promotes the partial sums per 128-deep block).
# - rowwise, forward GEMM: PyTorch's CUTLASS row-wise kernel with fast accumulation runs
#   "most shapes within 90-100% of tensor-wise efficiency" (pytorch/pytorch#147971); measured
#   on a lent H200 (torch 2.11, bench/data/measured/h200_2026-11-28/gemm_rowwise.csv, CUDA
#   graphs): 0.99 of the per-tensor kernel in the median of the 18 shapes of 15 us or more
#   (0.87-1.07 p10-p90), so 1.0; its backward GEMMs are cuBLAS tensor-wise (rescale pass below).
# - mx on CDNA4 (priced with Hopper's layouts, below): no measured MXFP8 / per-tensor FP8 GEMM
#   ratio on an MI350X / MI355X was found; AMD's MI355X datasheet gives MXFP8 the same dense
#   peak as FP8 (5.0 PF), so no share is applied (1.0) -- a known gap, not a measurement.
GEMM_SHARE = {("mx", "blackwell"): 6.812 / 7.161, ("blockwise", "hopper"): 0.81}


@dataclass(frozen=True)
class Fp8Recipe:
    """Per-element cast traffic of one FP8 recipe on one GPU generation (bytes per element
    of the 16-bit tensor quantised) and the kernels it launches per tensor."""

    name: str
    # input of a linear whose producer is a norm (TE LayerNormLinear), other inputs and
    # output gradients, weights (per micro-batch where the engine re-casts them)
    norm_input_bytes: float
    act_bytes: float
    weight_bytes: float
    kernels_per_tensor: float
    weight_kernels: float
    # TE caches the FP8 weights across the micro-batches of a step (Megatron passes
    # is_first_microbatch): their cast is paid once per step, under 1% of the cast traffic
    # at the tens of micro-batches of a pipeline and left out; torchao casts every forward
    weights_every_microbatch: bool
    # per-tensor dynamic scaling needs the global amax of a sequence-parallel input or
    # gradient before the cast: one small all-reduce over the TP group per such tensor
    amax_allreduce: bool
    # bytes read + written per element of the backward GEMMs' 16-bit outputs (rescale pass)
    bwd_output_bytes: float
    gemm_share: float = 1.0
    # routed-expert GEMMs run in FP8 (TE GroupedLinear); torchao's Float8LinearConverter
    # swaps nn.Linear only, so torchtitan's grouped experts (torch._grouped_mm) stay 16-bit
    # (torchtitan components/quantization/float8.py; meshplan's torchtitan exporter notes it)
    experts: bool = True
    # every Float8Linear quantises its own input: torchtitan's models keep wq, wk, wv and
    # the gated MLP's w1, w3 as separate linears reading the same tensor (torchtitan
    # models/common/attention.py QKVLinear, feed_forward.py), so that input is cast once per
    # module; TE's fused QKV / fc1 linears cast it once
    per_module_casts: bool = False
    # the engine's tensor parallelism is float8-aware: with sequence parallelism it casts the
    # column-parallel linears' input once, on this rank's sequence shard, and all-gathers it
    # in FP8 (torchao float8_tensor_parallel.py PrepareFloat8ModuleInput /
    # Float8ColwiseParallel: "the float8 cast happens before the all-gather ... so that if
    # there are multiple float8 users of the input activation, we perform fp8 allgather only
    # once"); in backward Float8RowwiseParallel casts the row-parallel linears' output
    # gradient on the shard before its all-gather (_NoopFwToFloat8BwDynamic after the
    # forward redistribute). torchtitan applies these only to tensorwise scaling
    # (torchtitan models/llama3/parallelize.py, 820504e and later: "float8 all-gather with
    # TP is only supported for tensorwise float8 scaling recipes. For rowwise recipes, we
    # use regular TP and all-gather happens in high precision"). The reduce-scatters stay
    # 16-bit (the scaled GEMM's output).
    tp_float8_gather: bool = False


# Under float8-aware TP (Fp8Recipe.tp_float8_gather) a gathered tensor costs, per element:
# on the shard (1/tp of them), the max_abs read and a cast writing one FP8 layout; on the
# gathered tensor, the column-major FP8 copy its weight-gradient GEMM needs: torchao's
# Float8Tensor keeps the gathered input (and output gradient) as cast, and float8_ops.py
# preprocess_addmm makes ``b`` column-major (``b.t().contiguous().t()``) and ``a`` row-major
# (``a.contiguous()``) before torch._scaled_mm: one FP8 read and one FP8 write. Without it
# the cast writes both layouts in one kernel (tensorwise branch of _recipe below).
FLOAT8_TP_SHARD_BYTES = BF16 + BF16 + FP8
FLOAT8_TP_GATHERED_BYTES = FP8 + FP8


def _family(generation: str) -> str:
    """A kernel-efficiency generation as a message names it ("hopper" -> "Hopper", "cdna3" ->
    "CDNA3")."""
    if not generation:
        return "this GPU"
    return generation.upper() if vendor_of(generation) == "amd" else generation.capitalize()


def resolve(precision: str, recipe: str, engine: str, generation: str) -> Fp8Recipe | None:
    """The recipe a step runs, or None when it does not train in FP8."""
    if precision != "fp8" or generation in NO_FP8:
        return None
    name = normalise(recipe) or default_recipe(engine, generation)
    rocm = vendor_of(generation) == "amd"
    ok = (["delayed", "cs", "tensorwise", "rowwise"] + ([] if rocm else ["blockwise"])
          + (["mx"] if generation in MX_GENERATIONS else []))
    runs = ", ".join(ok[:-1]) + " or " + ok[-1]
    if name == "mx" and generation not in MX_GENERATIONS:
        raise InputError("fp8_recipe", recipe, "mx (MXFP8) needs MX-format matrix cores "
                         f"(Blackwell, or CDNA4: MI350X / MI355X); {_family(generation)}"
                         f" runs {runs}")
    if name == "blockwise" and rocm:
        raise InputError("fp8_recipe", recipe, "blockwise (FP8 block scaling) is not in "
                         "ROCm Transformer Engine (check_fp8_block_scaling_support: \"not yet "
                         f"supported for ROCm\"); {_family(generation)} runs {runs}")
    return _recipe(name, "blackwell" if generation == "blackwell" else "hopper",
                   engine in TORCHAO_ENGINES)


def launch_env(precision: str, recipe: str, engine: str, generation: str) -> dict[str, str]:
    """Environment a Transformer Engine job needs for its FP8 recipe to run at all: ROCm TE's
    MXFP8 switch (ROCM_MXFP8_ENV) for mx on an AMD part; {} otherwise."""
    r = resolve(precision, recipe, engine, generation)
    if r is not None and r.name == "mx" and vendor_of(generation) == "amd":
        return dict(ROCM_MXFP8_ENV)
    return {}


def _recipe(name: str, gen: str, torchao: bool = False) -> Fp8Recipe:
    # column-wise copy of per-tensor FP8: a transposed FP8 copy on Hopper (written by the
    # same cast kernel, TE cast_transpose), none on Blackwell (same layout serves both)
    col = FP8 if gen == "hopper" else 0.0
    share = GEMM_SHARE.get((name, gen), 1.0)
    if name == "delayed":
        # one read, rowwise (+ transposed) FP8 writes; after a norm the norm writes FP8
        # itself and only the transposed copy is added (an FP8 transpose: read 1, write 1)
        return Fp8Recipe(name, 2 * col, BF16 + FP8 + col, BF16 + FP8 + col, 1, 1,
                         False, False, 0.0, share)
    if name == "cs":
        # amax pass (read) + cast (read, write rowwise + transposed); after a norm the norm
        # kernel computes the amax and writes 16-bit, then one cast (read, write)
        return Fp8Recipe(name, BF16 + FP8 + col, 2 * BF16 + FP8 + col, 2 * BF16 + FP8 + col,
                         2, 2, False, True, 0.0, share)
    if name == "mx" and torchao:
        # torchao mxfp8 (torchtitan): two separate casts, 1x32 along dim 0 and along dim 1,
        # each reading the 16-bit tensor (roofline_utils.py, mxfp8_cublas), weights too,
        # every forward
        q = 2 * (BF16 + FP8 * (1 + 1 / MX_BLOCK))
        return Fp8Recipe(name, q, q, q, 2, 2, True, False, 0.0, share, experts=False,
                         per_module_casts=True)
    if name == "mx":
        # one quantiser writes both the 1x32 and the 32x1 copy with their E8M0 scales; the
        # norm runs unfused (16-bit out, counted by ops.py), then the same quantiser
        q = BF16 + 2 * FP8 * (1 + 1 / MX_BLOCK)
        return Fp8Recipe(name, q, q, q, 1, 1, False, False, 0.0, share)
    if name == "blockwise":
        # rowwise 1x128 and column-wise copies with fp32 scales (4 bytes per 128)
        q = BF16 + 2 * FP8 * (1 + 4 / BLOCK)
        return Fp8Recipe(name, q, q, q, 1, 1, False, False, 0.0, share)
    if name == "tensorwise":
        # torchao: max_abs read, then one cast writing both layouts; weights: max_abs, then
        # two casts (read 16-bit, write FP8 each) -- roofline_utils.py, tensorwise
        a = BF16 + BF16 + 2 * FP8
        w = BF16 + 2 * (BF16 + FP8)
        return Fp8Recipe(name, a, a, w, 2, 3, True, True, 0.0, share, experts=False,
                         per_module_casts=True, tp_float8_gather=torchao)
    # rowwise (torchao): cast writing FP8 and a 16-bit transpose, then a cast of the
    # transpose; weights: cast, transpose (read + write 16-bit), cast -- roofline_utils.py.
    # Its backward GEMMs run tensor-wise and rescale their 16-bit output (read + write).
    a = (BF16 + FP8 + BF16) + (BF16 + FP8)
    w = (BF16 + FP8) + 2 * BF16 + (BF16 + FP8)
    return Fp8Recipe(name, a, a, w, 2, 3, True, False, 2 * BF16, share, experts=False,
                     per_module_casts=True)
