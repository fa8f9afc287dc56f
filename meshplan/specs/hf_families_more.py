"""More HuggingFace families users bring: qwen2_moe, olmoe, granite, granitemoe, starcoder2,
cohere, cohere2, dbrx, phimoe, ernie4_5, ernie4_5_moe, granitemoehybrid (attention-only)
(registered into hf_config.FAMILIES).

Field names and defaults follow each family's ``configuration_<family>.py`` in transformers
(src/transformers/models/<family>/); the weights that exist follow its ``modeling_*.py`` /
``modular_*.py``. Published parameter counts are checked in tests/test_hf_families_more.py.
"""

from __future__ import annotations

from .hf_config import (_alternating, _bool, _common, _family, _float, _head_dim, _int, _pos,
                        _qwen2_window, _str, _window, attention_biases, llama_biases,
                        qwen_moe_layer_pattern, require_object)
from ..errors import InputError
from .model import ModelSpec


@_family("qwen2_moe")
def _qwen2_moe(name: str, cfg: dict) -> ModelSpec:
    """Qwen1.5-MoE / Qwen2-MoE (modular_qwen2_moe.py): Qwen2 attention (q/k/v biases, flag
    qkv_bias), 60/64 routed SwiGLU experts of moe_intermediate_size, one shared expert of
    shared_expert_intermediate_size whose output is scaled by sigmoid(shared_expert_gate(x)),
    a Linear(hidden, 1) without bias (counted: moe_shared_gate). Layer i is MoE when
    (i + 1) % decoder_sparse_step == 0 and i is not in mlp_only_layers."""
    layers = _pos(cfg, "num_hidden_layers")
    heads = _pos(cfg, "num_attention_heads")
    dense, freq = qwen_moe_layer_pattern(cfg, layers)
    shared = _int(cfg, "shared_expert_intermediate_size", 5632)
    return ModelSpec(
        name=name, layers=layers, hidden=_pos(cfg, "hidden_size", 2048), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        ffn=_int(cfg, "intermediate_size", 5632), vocab=_pos(cfg, "vocab_size", 151936),
        qkv_bias=_bool(cfg, "qkv_bias", True),
        moe_experts=_pos(cfg, "num_experts", 60), moe_topk=_pos(cfg, "num_experts_per_tok", 4),
        moe_expert_ffn=_pos(cfg, "moe_intermediate_size", 1408),
        moe_shared_experts=1 if shared else 0, moe_shared_ffn=shared,
        moe_shared_gate=bool(shared), moe_dense_layers=dense, moe_layer_freq=freq,
        moe_topk_norm=_bool(cfg, "norm_topk_prob", False),
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        **_qwen2_window(cfg, layers),
        **_common(cfg),
    )


@_family("olmoe")
def _olmoe(name: str, cfg: dict) -> ModelSpec:
    """OLMoE (modular_olmoe.py): Llama attention with RMSNorm over the whole q projection
    (hidden) and k projection (kv_heads * head_dim) (qk_norm_full), every layer MoE: a router
    without bias and num_experts SwiGLU experts of intermediate_size, no shared expert."""
    heads = _pos(cfg, "num_attention_heads")
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers", 16), hidden=_pos(cfg, "hidden_size", 2048),
        heads=heads, kv_heads=_pos(cfg, "num_key_value_heads", heads), ffn=0,
        vocab=_pos(cfg, "vocab_size", 50304), **attention_biases(cfg),  # OlmoeAttention
        qk_norm=True, qk_norm_full=True,
        moe_experts=_pos(cfg, "num_experts", 64), moe_topk=_pos(cfg, "num_experts_per_tok", 8),
        moe_expert_ffn=_pos(cfg, "intermediate_size", 2048),
        moe_topk_norm=_bool(cfg, "norm_topk_prob", False),
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.01, allow_zero=True),
        **_common(cfg, eps_default=1e-5),
    )


# configuration_granite.py / _granitemoe.py defaults: 1.0 each (a plain Llama)
GRANITE_MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier",
                       "logits_scaling")


def _granite_attention(cfg: dict, mlp_bias: bool) -> dict:
    """Granite's shared fields; ``mlp_bias``: the MLP reads mlp_bias (GraniteMLP does,
    GraniteMoE's experts have no bias)."""
    heads = _pos(cfg, "num_attention_heads")
    multipliers = any(_float(cfg, k, 1.0) != 1.0 for k in GRANITE_MULTIPLIERS)
    return dict(layers=_pos(cfg, "num_hidden_layers", 32), hidden=_pos(cfg, "hidden_size", 4096),
                heads=heads, kv_heads=_pos(cfg, "num_key_value_heads", heads),
                vocab=_pos(cfg, "vocab_size", 32000),
                **(llama_biases(cfg) if mlp_bias else attention_biases(cfg)),
                activation_multipliers=multipliers)


@_family("granite")
def _granite(name: str, cfg: dict) -> ModelSpec:
    """IBM Granite 3.x dense (configuration_granite.py, modeling_granite.py): a Llama whose
    embedding_multiplier, residual_multiplier, attention_multiplier and logits_scaling scale
    activations (no weights). attention_bias puts biases on q, k, v and o (qkv_bias,
    o_bias); mlp_bias (only with attention_bias) on the MLP."""
    return ModelSpec(name=name, ffn=_pos(cfg, "intermediate_size", 11008),
                     **_granite_attention(cfg, mlp_bias=True), **_common(cfg))


@_family("granitemoe")
def _granitemoe(name: str, cfg: dict) -> ModelSpec:
    """IBM Granite 3.x MoE (modeling_granitemoe.py): Granite attention; every layer has a
    router Linear(hidden, num_local_experts) without bias and experts whose input_linear
    (2 * intermediate_size x hidden: gate and up) and output_linear hold SwiGLU MLPs of
    intermediate_size. No shared expert (granitemoeshared is another model_type)."""
    return ModelSpec(
        name=name, ffn=0,
        moe_experts=_pos(cfg, "num_local_experts", 8), moe_topk=_pos(cfg, "num_experts_per_tok", 2),
        moe_expert_ffn=_pos(cfg, "intermediate_size", 11008),
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        **_granite_attention(cfg, mlp_bias=False), **_common(cfg))


# a GraniteMoeHybrid layer type: attention (the hub files' "attention"; transformers 5 treats
# every type but "linear_attention" so) or Mamba-2 ("mamba"; "linear_attention" in 5)
GRANITE_HYBRID_ATTENTION = ("attention", "full_attention")
GRANITE_HYBRID_MAMBA = ("mamba", "linear_attention")


@_family("granitemoehybrid")
def _granitemoehybrid(name: str, cfg: dict) -> ModelSpec:
    """IBM Granite 4.0 (configuration_granitemoehybrid.py, modeling_granitemoehybrid.py):
    Mamba-2 or attention layers (layer_types; Mamba on every layer when absent), each with
    a shared SwiGLU MLP of shared_intermediate_size (GraniteMoeHybridMLP: input_linear
    2 * s x hidden, output_linear) and, with num_local_experts > 0, GraniteMoE's router and
    experts of intermediate_size; Granite's multipliers and attention. Rotary positions only
    with position_embedding_type "rope" (otherwise every layer is NoPE). Modelled when every
    layer is attention (Granite 4.0 Micro); a Mamba layer is refused."""
    layers = _pos(cfg, "num_hidden_layers", 32)
    types = cfg.get("layer_types", cfg.get("layers_block_type"))
    if types is None:
        types = ["mamba"] * layers
    if not isinstance(types, list) or len(types) != layers or not all(
            t in GRANITE_HYBRID_ATTENTION + GRANITE_HYBRID_MAMBA for t in types):
        raise InputError("config.json:layer_types", types if not isinstance(types, list)
                         else f"{len(types)} entries", f"must list {layers} entries, each "
                         "'attention' or 'mamba'")
    mamba = sum(t in GRANITE_HYBRID_MAMBA for t in types)
    if mamba:
        raise InputError("config.json:layer_types", f"{mamba} of {layers} layers Mamba",
                         "state-space (Mamba) layers are not modelled; meshplan prices "
                         "softmax-attention layers only (allowed: every layer 'attention', "
                         "as Granite 4.0 Micro)")
    shared = _pos(cfg, "shared_intermediate_size", 1024)
    experts = _int(cfg, "num_local_experts", 8)
    moe = dict(moe_experts=experts, moe_topk=_pos(cfg, "num_experts_per_tok", 2),
               moe_expert_ffn=_pos(cfg, "intermediate_size", 11008),
               moe_shared_experts=1, moe_shared_ffn=shared,
               moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True)
               ) if experts else {}
    rope = _str(cfg, "position_embedding_type", "") == "rope"
    return ModelSpec(name=name, ffn=0 if experts else shared, **moe,
                     nope_layers=0 if rope else layers,
                     **_granite_attention(cfg, mlp_bias=False), **_common(cfg))


@_family("starcoder2")
def _starcoder2(name: str, cfg: dict) -> ModelSpec:
    """StarCoder2 (configuration_starcoder2.py, modeling_starcoder2.py): LayerNorm with bias
    (norm_epsilon), biases on q, k, v, o and on the MLP's c_fc / c_proj (use_bias), a
    non-gated gelu_pytorch_tanh MLP, tied embeddings by default, and a sliding window on
    every layer when the file sets sliding_window (the hub files: 4096)."""
    heads = _pos(cfg, "num_attention_heads", 24)
    layers = _pos(cfg, "num_hidden_layers", 30)
    common = _common(cfg, eps_key="norm_epsilon", eps_default=1e-5)
    common["tied_embeddings"] = _bool(cfg, "tie_word_embeddings", True)
    return ModelSpec(
        name=name, layers=layers, hidden=_pos(cfg, "hidden_size", 3072), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", 2), ffn=_pos(cfg, "intermediate_size", 12288),
        vocab=_pos(cfg, "vocab_size", 49152), mlp="gelu", norm="layernorm",
        linear_bias=_bool(cfg, "use_bias", True),
        **_window(cfg, layers, 0), **common,
    )


def _cohere_common(cfg: dict, layers: int, qk: bool) -> dict:
    """Command R family (modeling_cohere.py / modeling_cohere2.py): one LayerNorm without
    bias (CohereLayerNorm) per layer feeding attention and MLP in parallel; SwiGLU MLP; tied
    embeddings; optional q/k LayerNorm of shape (heads, head_dim) (use_qk_norm: per-head
    weights, so q_dim + kv_dim of them; ``qk``). logit_scale multiplies the logits (no
    weight).
    attention_bias puts biases on q, k, v and o (CohereAttention / Cohere2Attention)."""
    heads = _pos(cfg, "num_attention_heads", 64)
    common = _common(cfg, eps_key="layer_norm_eps", eps_default=1e-5)
    common["tied_embeddings"] = _bool(cfg, "tie_word_embeddings", True)
    return dict(layers=layers, hidden=_pos(cfg, "hidden_size", 8192), heads=heads,
                kv_heads=_pos(cfg, "num_key_value_heads", heads),
                ffn=_pos(cfg, "intermediate_size", 22528), vocab=_pos(cfg, "vocab_size", 256000),
                norm="layernorm_nobias", parallel_block=True, rope_interleaved=True,
                **attention_biases(cfg), qk_norm=qk, qk_norm_full=qk,
                **common)


@_family("cohere")
def _cohere(name: str, cfg: dict) -> ModelSpec:
    """Command R / R+ (configuration_cohere.py)."""
    return ModelSpec(name=name, **_cohere_common(cfg, _pos(cfg, "num_hidden_layers", 40),
                                                 qk=_bool(cfg, "use_qk_norm", False)))


@_family("cohere2")
def _cohere2(name: str, cfg: dict) -> ModelSpec:
    """Command R7B / A (configuration_cohere2.py): Cohere's block with a 4,096-key window on
    three layers of every four (sliding_window_pattern 4; layer_types when listed).
    Cohere2Attention has no q/k norm: use_qk_norm is not read (Cohere2Config has none)."""
    layers = _pos(cfg, "num_hidden_layers", 40)
    pattern = _pos(cfg, "sliding_window_pattern", 4)
    return ModelSpec(name=name, **_window(cfg, layers, 4096, _alternating(layers, pattern)),
                     **_cohere_common(cfg, layers, qk=False))


@_family("dbrx")
def _dbrx(name: str, cfg: dict) -> ModelSpec:
    """DBRX (configuration_dbrx.py, modeling_dbrx.py): fused Wqkv and out_proj without bias,
    LayerNorm without bias (norm_1, norm_2, norm_f), every layer MoE with a router
    Linear(d_model, moe_num_experts) without bias and GLU experts (w1, v1, w2) of
    ffn_hidden_size; never tied. Shape fields sit in attn_config and ffn_config."""
    attn, ffn = cfg.get("attn_config") or {}, cfg.get("ffn_config") or {}
    for key, sub in (("attn_config", attn), ("ffn_config", ffn)):
        require_object(f"config.json:{key}", sub)
    act = (ffn.get("ffn_act_fn") or {"name": "silu"})
    if not isinstance(act, dict) or act.get("name", "silu") != "silu":
        raise InputError("config.json:ffn_config.ffn_act_fn", act, "only silu (GLU) experts "
                         "are modelled")
    if _bool(cfg, "tie_word_embeddings", False):
        raise InputError("config.json:tie_word_embeddings", True, "DBRX does not tie")
    return ModelSpec(
        name=name, layers=_pos(cfg, "n_layers", 24), hidden=_pos(cfg, "d_model", 2048),
        heads=_pos(cfg, "n_heads", 16), kv_heads=_pos(attn, "kv_n_heads", 1), ffn=0,
        vocab=_pos(cfg, "vocab_size", 32000), norm="layernorm_nobias",
        moe_experts=_pos(ffn, "moe_num_experts", 4), moe_topk=_pos(ffn, "moe_top_k", 1),
        moe_expert_ffn=_pos(ffn, "ffn_hidden_size", 3584),
        moe_aux_loss_coef=_float(ffn, "moe_loss_weight", 0.01, allow_zero=True),
        rope_theta=_float(attn, "rope_theta", 10000.0), norm_eps=1e-5,
        qkv_clip=_float(attn, "clip_qkv", 0.0, allow_zero=True),
    )


@_family("phimoe")
def _phimoe(name: str, cfg: dict) -> ModelSpec:
    """Phi-3.5-MoE (configuration_phimoe.py, modeling_phimoe.py): LayerNorm with bias, every
    layer MoE (router without bias, num_local_experts SwiGLU experts of intermediate_size).
    attention_bias puts biases on q, k, v and o (PhimoeAttention), and lm_head_bias one on
    the output layer (output_bias)."""
    heads = _pos(cfg, "num_attention_heads", 32)
    layers = _pos(cfg, "num_hidden_layers", 32)
    common = _common(cfg, eps_default=1e-5)
    common["rope_theta"] = _float(cfg, "rope_theta", 1e6)
    return ModelSpec(
        name=name, layers=layers, hidden=_pos(cfg, "hidden_size", 4096), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", 8), ffn=0,
        vocab=_pos(cfg, "vocab_size", 32064), norm="layernorm", **attention_biases(cfg),
        output_bias=_bool(cfg, "lm_head_bias", False),
        moe_experts=_pos(cfg, "num_local_experts", 16),
        moe_topk=_pos(cfg, "num_experts_per_tok", 2),
        moe_expert_ffn=_pos(cfg, "intermediate_size", 6400),
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        moe_sparsemixer=True,  # PhimoeSparseMoeBlock always routes by sparsemixer
        **_window(cfg, layers, 0), **common,
    )


def _ernie_common(cfg: dict) -> dict:
    heads = _pos(cfg, "num_attention_heads")
    common = _common(cfg, eps_default=1e-5)
    common["tied_embeddings"] = _bool(cfg, "tie_word_embeddings", True)
    common["rope_theta"] = _float(cfg, "rope_theta", 500000.0)
    # use_bias: biases on q, k, v, o and the MLP (Ernie4_5Attention / Ernie4_5MLP; the dense
    # model's lm_head has none); ERNIE 4.5 MoE refuses it (its experts have none)
    return dict(layers=_pos(cfg, "num_hidden_layers"), hidden=_pos(cfg, "hidden_size"),
                heads=heads, kv_heads=_pos(cfg, "num_key_value_heads", heads),
                head_dim=_head_dim(cfg), vocab=_pos(cfg, "vocab_size", 103424),
                linear_bias=_bool(cfg, "use_bias", False), rope_interleaved=True, **common)


@_family("ernie4_5")
def _ernie4_5(name: str, cfg: dict) -> ModelSpec:
    """ERNIE 4.5 dense (configuration_ernie4_5.py, modular_ernie4_5.py): a Llama with
    interleaved rotary pairs (same weights), tied embeddings by default, use_bias."""
    return ModelSpec(name=name, ffn=_pos(cfg, "intermediate_size"), **_ernie_common(cfg))


@_family("ernie4_5_moe")
def _ernie4_5_moe(name: str, cfg: dict) -> ModelSpec:
    """ERNIE 4.5 MoE (configuration_ernie4_5_moe.py, modular_ernie4_5_moe.py): layer i is MoE
    when (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i <=
    moe_layer_end_index (-1: the last); an MoE layer has a router without bias, a per-expert
    score-correction bias (moe_statics, a parameter), moe_num_experts SwiGLU experts of
    moe_intermediate_size and moe_num_shared_experts shared ones fused into one MLP of
    their summed width. The multi-token-prediction layer is not modelled."""
    base = _ernie_common(cfg)
    if base["linear_bias"]:
        # Ernie4_5_MoeExperts (gate_up_proj, down_proj) have no bias while attention, the dense
        # and shared MLPs and lm_head take use_bias: linear_bias would count expert biases
        raise InputError("config.json:use_bias", True, "biases everywhere but on the routed "
                         "experts are not modelled (the ERNIE 4.5 MoE files: false)")
    layers = base["layers"]
    start = _int(cfg, "moe_layer_start_index", 1)
    end = cfg.get("moe_layer_end_index", -1)
    if end not in (-1, layers - 1):
        raise InputError("config.json:moe_layer_end_index", end, "only MoE layers to the last "
                         f"(-1 or {layers - 1}) are modelled")
    step = _pos(cfg, "moe_layer_interval", 1)
    first = next((i for i in range(start, layers) if (i + 1) % step == 0), None)
    if first is None:
        raise InputError("config.json:moe_layer_start_index", start,
                         f"leaves no MoE layer among {layers}")
    expert = _pos(cfg, "moe_intermediate_size", 1536)
    shared = _int(cfg, "moe_num_shared_experts", 2)
    return ModelSpec(
        name=name, ffn=_pos(cfg, "intermediate_size", 12288),
        moe_experts=_pos(cfg, "moe_num_experts", 64), moe_topk=_pos(cfg, "moe_k", 6),
        moe_expert_ffn=expert, moe_shared_experts=shared, moe_shared_ffn=shared * expert,
        moe_dense_layers=first, moe_layer_freq=step, moe_router_bias=True,
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        **base,
    )
