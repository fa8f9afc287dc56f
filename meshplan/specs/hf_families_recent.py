"""HuggingFace families of 2025-2026 checkpoints: minimax_m2, deepseek_v32, glm_moe_dsa,
glm4_moe_lite (registered into hf_config.FAMILIES); the Qwen3-VL wrappers are in hf_config's
TEXT_CONFIG_WRAPPERS. Field names follow each family's ``configuration_*.py`` in
transformers; published parameter counts are checked in tests/test_hf_families_recent.py.
"""

from __future__ import annotations

from .hf_config import (_bool, _common, _deepseek, _family, _float, _head_dim, _int, _pos,
                        _regular_moe_layers, _str)
from ..errors import InputError
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


# Glm4MoeLiteConfig's defaults (transformers configuration_glm4_moe_lite.py) for the fields
# DeepSeek-V3's reader would otherwise default to V3's own values
GLM4_MOE_LITE_DEFAULTS = dict(n_routed_experts=64, n_shared_experts=1, num_experts_per_tok=4,
                              moe_intermediate_size=1536, q_lora_rank=768,
                              routed_scaling_factor=1.8, rms_norm_eps=1e-5,
                              n_group=1, topk_group=1, norm_topk_prob=True,
                              topk_method="noaux_tc", scoring_func="sigmoid")


def _glm4_moe_lite_dense_layers(cfg: dict, layers: int) -> int:
    """Leading dense layers: Glm4MoeLiteDecoderLayer builds an MoE where mlp_layer_types[i] is
    "sparse", the list defaulting to one dense layer then sparse ones. The hub file writes
    first_k_dense_replace instead, which transformers does not read: one that disagrees
    with the layer types is refused rather than read either way."""
    types = cfg.get("mlp_layer_types")
    if types is None:
        dense = 1
    else:
        if not isinstance(types, list) or len(types) != layers \
                or not all(t in ("dense", "sparse") for t in types):
            raise InputError("config.json:mlp_layer_types", types if not isinstance(types, list)
                             else f"{len(types)} entries", f"must list {layers} entries, each "
                             "'dense' or 'sparse'")
        idx = [i for i, t in enumerate(types) if t == "sparse"]
        dense, freq = _regular_moe_layers(idx, layers, "config.json:mlp_layer_types", types)
        if freq != 1:
            raise InputError("config.json:mlp_layer_types", types, "only leading dense layers "
                             "then sparse ones to the last are modelled")
    given = cfg.get("first_k_dense_replace")
    if given is not None and given != dense:
        raise InputError("config.json:first_k_dense_replace", given, f"must match the "
                         f"{dense} leading dense layer(s) transformers builds (mlp_layer_types)")
    return dense


@_family("glm4_moe_lite")
def _glm4_moe_lite(name: str, cfg: dict) -> ModelSpec:
    """GLM-4.7-Flash (modeling_glm4_moe_lite.py): DeepSeek-V3's layer (MLA with q_lora_rank,
    kv_lora_rank and its own head dims, no attention biases; a sigmoid router with a
    score-correction bias over n_routed_experts SwiGLU experts, n_shared_experts shared
    ones of moe_intermediate_size each; dense layers of intermediate_size) with GLM's own
    defaults and the dense layers from mlp_layer_types."""
    layers = _pos(cfg, "num_hidden_layers")
    dense = _glm4_moe_lite_dense_layers(cfg, layers)
    merged = dict(cfg, model_type="deepseek_v3", first_k_dense_replace=dense, moe_layer_freq=1)
    for key, default in GLM4_MOE_LITE_DEFAULTS.items():
        # absent or null takes GLM's default, but a null q_lora_rank means none (the
        # attention's q_proj without the LoRA pair, as Glm4MoeLiteAttention builds it)
        if merged.get(key) is None and not (key == "q_lora_rank" and key in cfg):
            merged[key] = default
    return _deepseek(name, merged)
