"""Unfused rotary embedding where Megatron turns RoPE fusion off: a position embedding of
type YaRN on a non-MLA model (GPT-OSS).

ops.attention_ops counts a fused RoPE kernel (Transformer Engine's fused_apply_rotary_pos_emb):
one read and one write of q and k. Megatron-LM's validate_args (megatron/training/
arguments.py at d98e8a64dd: ``if args.position_embedding_type != 'rope':
args.apply_rope_fusion = False``) and Megatron-Bridge (src/megatron/bridge/utils/fusions.py
validate_rope_fusion_compatibility, "similar to arguments.py logic") switch the fusion off
for any other position embedding type; Megatron-Bridge's GPT-OSS provider sets
``position_embedding_type = "yarn"``. The rotation then runs as
megatron/core/models/common/embeddings/rope_utils.py _apply_rotary_pos_emb_bshd (read in
megatron-core 0.16.1): ``t * cos_ + _rotate_half(t) * sin_`` with _rotate_half's neg and
cat and a final cat with the (empty) pass-through part, once for q and once for k, plus the
cos / sin tables scaled by YaRN's mscale.
"""

from __future__ import annotations

import json

from ..specs.model import ModelSpec
from .compute import STREAM_BWD_BYTE_RATIO
from .ops import LayerOps, Shard

# engines that run Megatron's rotary embedding (framework_defaults.FRAMEWORKS)
MCORE_ENGINES = ("megatron", "nemo")

# HBM bytes per element of q or k (16-bit), from the ATen ops PyTorch dispatches for that
# function (tests/test_mcore_rope.py recounts them on CPU), without the [s, 1, 1, d] tables:
# forward t * cos (2 + 2), neg of a half (1 + 1), cat (2 + 2), * sin (2 + 2), add (4 + 2) and
# the final cat (2 + 2) = 24; backward 28 (the two products, the rotation's neg and cat, the
# slice's backward and two gradient sums). The fused kernel, as ops.attention_ops counts it:
# 4 forward, 8 backward (compute.STREAM_BWD_BYTE_RATIO).
UNFUSED_FWD_BYTES = 24.0
UNFUSED_BWD_BYTES = 28.0
FUSED_FWD_BYTES = 4.0
# kernels per tensor: the six above plus cos, sin, two mscale products and two casts of the
# tables, where the fused path launches one
UNFUSED_KERNELS = 12


def unfused_position_embedding(model: ModelSpec) -> bool:
    """Whether Megatron runs this model's rotary embedding unfused: YaRN scaling on a non-MLA
    model (Megatron's position_embedding_type "yarn"; MLA's YaRN is its own fused path)."""
    if model.position != "rope" or model.is_mla or not model.rope_scaling:
        return False
    rs = json.loads(model.rope_scaling)
    return str(rs.get("rope_type", rs.get("type", ""))).lower() == "yarn"


def eager_rope(ops: LayerOps, model: ModelSpec, s: Shard, engine: str) -> LayerOps:
    """Adds what the unfused rotary embedding moves beyond the fused one, on the engines and
    models where Megatron runs it (unfused_position_embedding)."""
    if engine not in MCORE_ENGINES or not unfused_position_embedding(model):
        return ops
    d = model.head_dim * model.rope_fraction
    elements = s.tokens * d * (model.heads / s.tp + max(model.kv_heads / s.tp, 1.0))
    fwd = elements * (UNFUSED_FWD_BYTES - FUSED_FWD_BYTES)
    bwd = elements * (UNFUSED_BWD_BYTES - STREAM_BWD_BYTE_RATIO * FUSED_FWD_BYTES)
    ops.stream_bytes += fwd
    ops.stream_bwd_extra_bytes += bwd - STREAM_BWD_BYTE_RATIO * fwd
    ops.kernels += 2 * (UNFUSED_KERNELS - 1)
    ops.host_ops += 2 * (UNFUSED_KERNELS - 1)
    return ops
