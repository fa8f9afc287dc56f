"""HuggingFace families of 2025-2026 checkpoints: minimax_m2, deepseek_v32, glm_moe_dsa
(registered into hf_config.FAMILIES); the Qwen3-VL wrappers are in hf_config's
TEXT_CONFIG_WRAPPERS. Field names follow each family's ``configuration_*.py`` in
transformers; published parameter counts are checked in tests/test_hf_families_recent.py.
"""

from __future__ import annotations

from .hf_config import _bool, _common, _deepseek, _family, _float, _head_dim, _int, _pos, _str
from .model import ModelSpec


@_family("minimax_m2")
def _minimax_m2(name: str, cfg: dict) -> ModelSpec:
    """MiniMax-M2 / M2.1 / M2.5 (modeling_minimax_m2.py): GQA attention with head_dim given,
    RMSNorm over the whole q and k projections (qk_norm_full; MiniMaxM2Attention always
    builds them: the hub files' use_qk_norm true, qk_norm_type "per_layer" are not read, as
    transformers does not read them), rotary on rotary_dim of each head; every layer MoE: a
    bias-free router with a sigmoid score and a selection bias (e_score_correction_bias:
    use_routing_bias) over num_local_experts SwiGLU experts of intermediate_size, no shared
    expert (shared_intermediate_size 0). The checkpoint's multi-token-prediction modules (use_mtp)
    are not part of the transformers model and are not counted."""
    heads = _pos(cfg, "num_attention_heads")
    head_dim = _head_dim(cfg)
    expert_ffn = _pos(cfg, "intermediate_size")
    rotary = _int(cfg, "rotary_dim", 0)
    common = _common(cfg)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers"), hidden=_pos(cfg, "hidden_size"),
        heads=heads, kv_heads=_pos(cfg, "num_key_value_heads", heads), head_dim=head_dim,
        ffn=expert_ffn, vocab=_pos(cfg, "vocab_size"),
        qk_norm=True, qk_norm_full=True,
        rope_fraction=(rotary / head_dim if rotary and head_dim else 1.0),
        moe_experts=_pos(cfg, "num_local_experts"), moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=expert_ffn,
        moe_shared_experts=1 if _int(cfg, "shared_intermediate_size", 0) else 0,
        moe_shared_ffn=_int(cfg, "shared_intermediate_size", 0),
        moe_router_bias=_bool(cfg, "use_routing_bias", True),
        moe_score=_str(cfg, "scoring_func", "sigmoid"),
        moe_topk_norm=True,
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        **common,
    )


DSA_NOTE = ("DeepSeek Sparse Attention's indexer (index_n_heads x index_head_dim) and its "
            "top-{k} key selection are not modelled: attention is charged as dense MLA "
            "(the same work up to {k} keys per query)")


def _with_dsa_note(spec: ModelSpec, cfg: dict) -> ModelSpec:
    k = _pos(cfg, "index_topk", 2048)
    return spec.with_(description=DSA_NOTE.format(k=k), dsa_topk=k)


@_family("deepseek_v32")
def _deepseek_v32(name: str, cfg: dict) -> ModelSpec:
    """DeepSeek-V3.2 (-Exp): DeepSeek-V3's shapes plus the sparse-attention indexer."""
    return _with_dsa_note(_deepseek(name, dict(cfg, model_type="deepseek_v3")), cfg)


@_family("glm_moe_dsa")
def _glm_moe_dsa(name: str, cfg: dict) -> ModelSpec:
    """GLM-5 (GlmMoeDsaForCausalLM): DeepSeek-V3's layout (MLA with its own ranks and head
    dims, leading dense layers, sigmoid routing with a selection bias, one shared expert)
    plus the sparse-attention indexer; the rotary base sits in rope_parameters (read by
    hf_config._rope_parameters)."""
    return _with_dsa_note(_deepseek(name, dict(cfg, model_type="deepseek_v3")), cfg)
