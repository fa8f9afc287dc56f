"""What Megatron-Core's grouped experts run in eager PyTorch around the fused kernels that
ops.moe_ops counts, for models whose experts clamp their gated-MLP inputs or carry biases
(GPT-OSS: ModelSpec.glu_clamp, ModelSpec.linear_bias).

ops.moe_ops counts a fused activation that reads the fc1 output (2 w per token copy) and
writes its result (w), and no bias traffic (a bias inside the GEMM's epilogue). Megatron-Core
does more when the model has these features. Read in megatron-core 0.16.1 (the pip release
meshplan's Megatron export is checked against; core_r0.15.0 and the 0.17 line run the same
code, NVIDIA/Megatron-LM):

- transformer/moe/experts.py TEGroupedMLP.forward: with bias_activation_fusion and
  quick_gelu (what Megatron-Bridge's GPT-OSS provider sets: gpt_oss_bridge.py
  ``bias_activation_fusion = True``, ``activation_func = quick_gelu``,
  ``activation_func_clamp_value = 7.0``) the activation is
  fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl, which, given a clamp value,
  runs ``x_glu, x_linear = input.chunk(2, -1)``, ``x_glu.clamp(max=v)``,
  ``x_linear.clamp(-v, v)`` and ``torch.cat`` of the two in eager PyTorch before the
  compiled (jit_fuser) weighted quick-GEGLU kernel.
- the same forward builds linear_fc2 with ``skip_bias_add=True`` and adds the fc2 bias in
  TEGroupedMLP._apply_bias: one ``t + b * p`` per local expert over torch.split of the
  output by tokens per expert, then torch.cat.

Megatron-Core 0.18 routes the clamped quick-GEGLU to Transformer Engine's fused grouped MLP
only for MXFP8 on sm100 with a CuTe-DSL switch (Megatron-Bridge's 26.06 GB200 / GB300 MXFP8
GPT-OSS recipes); that path is not modelled: such a run is predicted with the eager ops.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from math import ceil, exp, floor, lgamma, log, log1p, sqrt

from ..specs.model import ModelSpec
from .compute import STREAM_BWD_BYTE_RATIO
from .ops import ACT, LayerOps, Shard, expert_rows

# engines whose MoE layers are Megatron-Core's TEGroupedMLP (framework_defaults.FRAMEWORKS)
MCORE_ENGINES = ("megatron", "nemo")

# HBM bytes per token copy and per element of the expert width w (clamp) or of the hidden
# size h (bias), 16-bit tensors: the reads and writes of the ATen ops PyTorch dispatches for
# each pattern, forward and backward (tests/test_mcore_experts.py recounts them with a
# TorchDispatchMode on CPU).
# Clamp, forward: two clamps over the halves (read 2, write 2 bytes each) and the cat (read
# 4, write 4) = 16. Backward: clamp's autograd formula (tools/autograd/derivatives.yaml,
# clamp_backward) builds its mask and selects the gradient: for the two-sided clamp of the up
# half ge, le (read 2, write a 1-byte mask each), logical_and (read 2, write 1) and where
# (read 1 + 2, write 2) = 14; for the gate's max-only clamp le and where = 8; chunk's backward
# is a cat of the two halves' gradients (read 4, write 4) = 8; cat's own backward is two
# views: 30 in all.
CLAMP_FWD_BYTES = 16.0
CLAMP_BWD_BYTES = 30.0
CLAMP_KERNELS = 3  # two clamps and a cat (chunk is a view); backward: 2 x (compute.py)
CLAMP_HOST_OPS = 4  # chunk, two clamps, cat
# The clamps keep their input for backward: the fc1 output (2 w elements, 4 bytes per w),
# beside the cat output that the activation keeps (ops.moe_ops counts one such tensor).
# Inside moe_act recomputation (CheckpointWithoutOutput runs the activation without saving)
# neither is kept.
CLAMP_SAVED_BYTES = 4.0

# Bias loop. The routing probabilities are in the router's dtype, the logits' 16-bit dtype
# unless moe_router_dtype asks for fp32 (transformer/moe/router.py; Megatron-Bridge's GPT-OSS
# provider leaves it unset), so ``b * p`` is 16-bit and ``.to(dtype)`` a no-op. Forward: b *
# p (write 2), t + (b * p) (read 4, write 2), cat (read 2, write 2) = 12. Backward: the
# gradients of b and p, each a product with the incoming gradient (read 2, write 2) and its
# sum (read 2) = 12, and torch.split's backward, a cat of the per-expert gradients (read 2,
# write 2) = 16.
BIAS_FWD_BYTES = 12.0
BIAS_BWD_BYTES = 16.0
BIAS_KERNELS_PER_EXPERT = 2  # mul, add (the cat: one more for the layer)
BIAS_HOST_OPS_PER_EXPERT = 3  # split slice, mul, add


def eager_expert_epilogue(ops: LayerOps, model: ModelSpec, s: Shard, engine: str) -> LayerOps:
    """Adds Megatron-Core's eager clamp (``model.glu_clamp``) and per-expert bias loop
    (``model.linear_bias``) to an MoE layer's ``ops`` on the engines that run them."""
    if engine not in MCORE_ENGINES or not model.moe_experts:
        return ops
    clamp = bool(model.glu_clamp) and model.mlp == "swiglu"
    bias = model.linear_bias
    if not (clamp or bias):
        return ops
    rows = expert_rows(ops)
    w = model.moe_expert_ffn / s.etp
    local = model.moe_experts / s.ep
    if clamp:
        fwd = rows * w * CLAMP_FWD_BYTES
        ops.stream_bytes += fwd
        ops.act_fn_bytes += fwd
        ops.stream_bwd_extra_bytes += rows * w * CLAMP_BWD_BYTES - STREAM_BWD_BYTE_RATIO * fwd
        ops.kernels += CLAMP_KERNELS
        ops.host_ops += CLAMP_HOST_OPS
        saved = rows * w * CLAMP_SAVED_BYTES
        ops.saved_bytes += saved
        # moe_act and moe recomputation drop what the clamps keep and run them again
        for name in ("moe_act", "moe"):
            m = ops.modules.get(name)
            if m is not None:
                ops.modules[name] = replace(m, freed_bytes=m.freed_bytes + saved,
                                            stream_bytes=m.stream_bytes + fwd,
                                            kernels=m.kernels + CLAMP_KERNELS)
    if bias:
        h = model.hidden
        fwd = rows * h * BIAS_FWD_BYTES
        ops.stream_bytes += fwd
        ops.stream_bwd_extra_bytes += rows * h * BIAS_BWD_BYTES - STREAM_BWD_BYTE_RATIO * fwd
        kernels = BIAS_KERNELS_PER_EXPERT * local + 1
        ops.kernels += kernels
        ops.host_ops += BIAS_HOST_OPS_PER_EXPERT * local + 1
        m = ops.modules.get("moe")
        if m is not None:
            ops.modules["moe"] = replace(m, stream_bytes=m.stream_bytes + fwd,
                                         kernels=m.kernels + kernels)
    return ops


# --- FP8 padding of each expert's tokens -----------------------------------------------------
# Under FP8 Megatron-Core's TEGroupedMLP pads every local expert's slice of the permuted tokens
# to a multiple of the FP8 GEMM's row alignment before the grouped GEMMs and strips the padding
# from their output (transformer/moe/experts.py TEGroupedMLP.forward, ``if self.config.fp8``:
# self.fp8_padding / quantization_padding of the hidden states and of the routing probabilities,
# then quantization_unpadding of the output; core_v0.15.0 to core_v0.17.1 call it for every
# dispatcher, and from core_v0.16.0 HybridEP's dispatch already delivers padded splits (see
# fp8_expert_padding); core_v0.18 skips the call where the router, HybridEP or DeepEP's fused
# permutation pad already (moe_utils.skip_routed_expert_padding); Megatron-Bridge's recipes
# keep moe_router_padding_for_fp8 = False). The padding is Transformer Engine's Fp8Padding
# (transformer_engine/pytorch/module/fp8_padding.py, v2.9): the alignment is "32 for MXFP8
# and 16 for others"; when every split is already aligned the input passes through, else a
# new tensor of the padded rows is written by tex.fused_multi_row_padding (read the rows,
# write the padded rows), and Fp8Unpadding does the reverse on the output; each one's
# backward is the other one on the gradient, so the backward moves the forward's bytes.
FP8_ALIGN_ROWS = 16
MXFP8_ALIGN_ROWS = 32
# kernels per forward: pad the hidden states, pad the probabilities, unpad the output; host
# ops: each of the three allocates its output (torch.empty) and calls the TE kernel
PAD_KERNELS = 3
PAD_HOST_OPS = 6
# the routing probabilities are fp32 in Megatron-Core's permutation (moe_utils.permute keeps
# the router's probs dtype; the router runs its softmax / sigmoid in fp32): 4 bytes a row
PROB_BYTES = 4.0


def fp8_align_rows(recipe_name: str) -> int:
    """Transformer Engine's Fp8Padding alignment for the recipe (fp8_padding.py)."""
    return MXFP8_ALIGN_ROWS if recipe_name == "mx" else FP8_ALIGN_ROWS


@lru_cache(maxsize=4096)
def expected_padded_rows(mean_rows: float, experts: int, topk: int, align: int) -> float:
    """Expected rows of one expert's slice after padding to a multiple of ``align``, E[ceil(c /
    align) * align], when its token count c is Binomial(n, topk / experts) with mean
    ``mean_rows``: every token draws its topk experts as the top-k of fresh normal logits, a
    uniformly random topk-subset (Megatron-Core's force-balanced benchmark routing,
    moe_utils.RandomSTE: ``logits.clone().normal_()``, router.py
    moe_router_force_load_balancing), so each expert is in a token's set with probability
    topk / experts, independently across tokens. Summed over the binomial's pmf within 12
    standard deviations of the mean (the tails beyond hold under 1e-30 of the mass)."""
    if align <= 1 or mean_rows <= 0 or experts <= 0 or topk <= 0:
        return mean_rows
    p = min(1.0, topk / experts)
    n = max(1, round(mean_rows / p))
    if p >= 1.0:
        return ceil(n / align) * align
    sd = sqrt(n * p * (1 - p))
    lo, hi = max(0, floor(n * p - 12 * sd)), min(n, ceil(n * p + 12 * sd))
    lc = lgamma(n + 1)
    lp, lq = log(p), log1p(-p)
    mass = total = 0.0
    for c in range(lo, hi + 1):
        w = exp(lc - lgamma(c + 1) - lgamma(n - c + 1) + c * lp + (n - c) * lq)
        mass += w
        total += w * (-(-c // align) * align)
    return total / mass


def fp8_expert_padding(ops: LayerOps, model: ModelSpec, s: Shard, engine: str,
                       padded_by_dispatch: bool = False) -> LayerOps:
    """Megatron-Core's FP8 padding of the experts' token slices (above): the expert GEMMs run
    on the expected padded rows, and the pad and unpad copies add their HBM traffic, kernels
    and host ops, forward and backward. ``padded_by_dispatch``: HybridEP's dispatch writes
    each expert's tokens padded to the same alignment (megatron-core 0.16.1 token_dispatcher.py
    _HybridEPManager.dispatch: ``pad_multiple = get_align_size_for_quantization(config)``
    under FP8), so the splits reach Fp8Padding aligned and it passes them through: the GEMMs
    still run the padded rows, no copy is made. Call after eager_expert_epilogue (which reads
    the unpadded rows). The saved activations keep the unpadded size (the padding adds under
    1% at the slices of thousands of rows of these runs)."""
    if engine not in MCORE_ENGINES or not model.moe_experts or not s.fp8:
        return ops
    recipe = s.fp8_recipe.name if s.fp8_recipe is not None else ""
    align = fp8_align_rows(recipe)
    fc1 = next(mm for mm in ops.matmuls if mm.name == "expert_fc1")
    rows = fc1.m * fc1.count
    padded_m = expected_padded_rows(fc1.m, model.moe_experts, model.moe_topk, align)
    ops.matmuls = [replace(mm, m=padded_m) if mm.name in ("expert_fc1", "expert_fc2") else mm
                   for mm in ops.matmuls]
    if padded_by_dispatch:
        return ops
    padded = padded_m * fc1.count
    # pad: read rows, write padded rows; unpad: read padded rows, write rows (hidden width)
    fwd = (rows + padded) * model.hidden * ACT * 2 + (rows + padded) * PROB_BYTES
    ops.stream_bytes += fwd
    ops.stream_bwd_extra_bytes += fwd - STREAM_BWD_BYTE_RATIO * fwd
    ops.kernels += PAD_KERNELS
    ops.host_ops += PAD_HOST_OPS
    m = ops.modules.get("moe")
    if m is not None:  # recomputing the whole MoE layer pads again
        ops.modules["moe"] = replace(m, stream_bytes=m.stream_bytes + fwd,
                                     kernels=m.kernels + PAD_KERNELS)
    return ops
