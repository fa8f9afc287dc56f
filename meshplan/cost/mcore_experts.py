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

from ..specs.model import ModelSpec
from .compute import STREAM_BWD_BYTE_RATIO
from .ops import LayerOps, Shard, expert_rows

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
