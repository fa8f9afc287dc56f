"""More HuggingFace families (registered into hf_config.FAMILIES): qwen2_moe, olmoe, granite,
granitemoe, starcoder2.

Field names and defaults follow each family's ``configuration_*.py`` in transformers; which
weights exist follows its ``modeling_*.py``. Published parameter counts are checked in
tests/test_hf_families_more.py.
"""

from __future__ import annotations

from .hf_config import (_bool, _common, _family, _float, _int, _pos, _qwen2_window, _window,
                        leading_dense_layers)
from .model import ModelSpec


@_family("qwen2_moe")
def _qwen2_moe(name: str, cfg: dict) -> ModelSpec:
    """Qwen1.5-MoE / Qwen2-MoE (modeling_qwen2_moe.py): Qwen2 attention (q/k/v biases),
    ``num_experts`` routed experts of ``moe_intermediate_size``, one shared expert of
    ``shared_expert_intermediate_size`` behind a sigmoid gate (Linear(hidden, 1))."""
    layers = _pos(cfg, "num_hidden_layers")
    heads = _pos(cfg, "num_attention_heads")
    return ModelSpec(
        name=name, layers=layers, hidden=_pos(cfg, "hidden_size"), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads), head_dim=_int(cfg, "head_dim", 0),
        ffn=_int(cfg, "intermediate_size", 5632), vocab=_pos(cfg, "vocab_size"), qkv_bias=True,
        moe_experts=_pos(cfg, "num_experts"), moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=_pos(cfg, "moe_intermediate_size"),
        moe_shared_experts=1 if _int(cfg, "shared_expert_intermediate_size", 0) else 0,
        moe_shared_ffn=_int(cfg, "shared_expert_intermediate_size", 0),
        moe_shared_gate=bool(_int(cfg, "shared_expert_intermediate_size", 0)),
        moe_dense_layers=leading_dense_layers(cfg),
        moe_layer_freq=_int(cfg, "decoder_sparse_step", 1) or 1,
        moe_topk_norm=_bool(cfg, "norm_topk_prob", False),
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        **_qwen2_window(cfg, layers),
        **_common(cfg),
    )


@_family("olmoe")
def _olmoe(name: str, cfg: dict) -> ModelSpec:
    """OLMoE (modeling_olmoe.py): Llama attention with q/k RMSNorm over the whole
    projection (counted per head like olmo2: 2 x (hidden + kv width) against 2 x 2 x
    head_dim, < 0.01% of the model), ``num_experts`` SwiGLU experts of
    ``intermediate_size``, no shared expert."""
    heads = _pos(cfg, "num_attention_heads")
    common = _common(cfg, eps_default=1e-5)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers"), hidden=_pos(cfg, "hidden_size"),
        heads=heads, kv_heads=_pos(cfg, "num_key_value_heads", heads), ffn=0,
        vocab=_pos(cfg, "vocab_size"), qk_norm=True,
        moe_experts=_pos(cfg, "num_experts"), moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=_pos(cfg, "intermediate_size"),
        moe_topk_norm=_bool(cfg, "norm_topk_prob", False),
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.01, allow_zero=True),
        **common,
    )


@_family("granite")
def _granite(name: str, cfg: dict) -> ModelSpec:
    """IBM Granite 3.x dense (modeling_granite.py): Llama weights; the embedding, residual,
    attention and logit multipliers scale activations and add no weights."""
    heads = _pos(cfg, "num_attention_heads")
    common = _common(cfg)
    common["tied_embeddings"] = _bool(cfg, "tie_word_embeddings", True)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers"), hidden=_pos(cfg, "hidden_size"),
        heads=heads, kv_heads=_pos(cfg, "num_key_value_heads", heads),
        ffn=_pos(cfg, "intermediate_size"), vocab=_pos(cfg, "vocab_size"),
        qkv_bias=_bool(cfg, "attention_bias", False), **common,
    )


@_family("granitemoe")
def _granitemoe(name: str, cfg: dict) -> ModelSpec:
    """IBM Granite 3.x MoE (modeling_granitemoe.py): ``num_local_experts`` SwiGLU experts
    of ``intermediate_size`` (a fused input_linear of 2 x width and an output_linear), a
    bias-free router, no shared expert."""
    heads = _pos(cfg, "num_attention_heads")
    common = _common(cfg)
    common["tied_embeddings"] = _bool(cfg, "tie_word_embeddings", True)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers"), hidden=_pos(cfg, "hidden_size"),
        heads=heads, kv_heads=_pos(cfg, "num_key_value_heads", heads), ffn=0,
        vocab=_pos(cfg, "vocab_size"), qkv_bias=_bool(cfg, "attention_bias", False),
        moe_experts=_pos(cfg, "num_local_experts"), moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=_pos(cfg, "intermediate_size"),
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        **common,
    )


@_family("starcoder2")
def _starcoder2(name: str, cfg: dict) -> ModelSpec:
    """StarCoder2 (modeling_starcoder2.py): LayerNorm with bias, biases on every linear
    (use_bias), a non-gated MLP c_fc -> gelu (tanh) -> c_proj, GQA with rotary embeddings,
    tied embeddings, and a sliding window (4,096 in the released checkpoints) on every
    layer."""
    layers = _pos(cfg, "num_hidden_layers")
    heads = _pos(cfg, "num_attention_heads")
    return ModelSpec(
        name=name, layers=layers, hidden=_pos(cfg, "hidden_size"), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads), ffn=_pos(cfg, "intermediate_size"),
        vocab=_pos(cfg, "vocab_size"), mlp="gelu", norm="layernorm",
        linear_bias=_bool(cfg, "use_bias", True),
        tied_embeddings=_bool(cfg, "tie_word_embeddings", True),
        rope_theta=_float(cfg, "rope_theta", 10000.0),
        norm_eps=_float(cfg, "norm_epsilon", 1e-5),
        **_window(cfg, layers, 0),
    )
