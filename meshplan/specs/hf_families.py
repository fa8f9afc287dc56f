"""HuggingFace families with local attention, GeGLU or interleaved MoE layers: gpt_oss,
gemma, gemma2, gemma3_text, llama4_text, glm4_moe (registered into hf_config.FAMILIES).

Field names and defaults follow each family's ``configuration_*.py`` in transformers; the
layer structure (which weights exist) follows its ``modeling_*.py``. Published parameter
counts are checked in tests/test_hf_families.py.
"""

from __future__ import annotations

from .hf_config import (_alternating, _bool, _common, _family, _float, _head_dim, _int,
                        _moe_layer_pattern, _pos, _str, _window, attention_biases)
from ..errors import InputError
from .model import ModelSpec


@_family("gpt_oss")
def _gpt_oss(name: str, cfg: dict) -> ModelSpec:
    """GPT-OSS (modeling_gpt_oss.py): biases on q, k, v, o and on every expert's gate/up and
    down projections, a router with bias, one learned sink logit per head, sliding-window
    attention (128 keys) on every other layer, the first included, and experts whose gate and
    up projections are clamped at ``swiglu_limit`` before a quick-GELU gate
    (GptOssExperts._apply_gate: ``gate.clamp(max=limit)``, ``up.clamp(-limit, limit)``,
    ``(up + 1) * gate * sigmoid(gate * 1.702)``)."""
    layers = _pos(cfg, "num_hidden_layers")
    heads = _pos(cfg, "num_attention_heads")
    # GptOssAttention: q, k, v and o take attention_bias; GptOssExperts' gate_up and down
    # biases and the router's are always built. linear_bias is every bias: attention without
    # biases next to biased experts is not modelled
    if not _bool(cfg, "attention_bias", True):
        raise InputError("config.json:attention_bias", False, "an attention without biases "
                         "next to GptOssExperts' (always built) expert biases is not "
                         "modelled; allowed: true (the gpt-oss files)")
    common = _common(cfg, eps_default=1e-5)
    common["rope_theta"] = _float(cfg, "rope_theta", 150000.0)
    return ModelSpec(
        name=name, layers=layers, hidden=_pos(cfg, "hidden_size"), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        head_dim=_pos(cfg, "head_dim", 64), ffn=0, vocab=_pos(cfg, "vocab_size"),
        linear_bias=True, attention_sinks=True,
        gated_act="quick_gelu", glu_clamp=_float(cfg, "swiglu_limit", 7.0, allow_zero=True),
        moe_experts=_pos(cfg, "num_local_experts"), moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=_pos(cfg, "intermediate_size"), moe_router_bias=True,
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.9, allow_zero=True),
        **_window(cfg, layers, 128, _alternating(layers, 2)),
        **common,
    )


def _gemma_common(cfg: dict, layers: int, vocab: int = 256000) -> dict:
    heads = _pos(cfg, "num_attention_heads")
    return dict(layers=layers, hidden=_pos(cfg, "hidden_size"), heads=heads,
                kv_heads=_pos(cfg, "num_key_value_heads", heads),
                head_dim=_pos(cfg, "head_dim", 256), ffn=_pos(cfg, "intermediate_size"),
                vocab=_pos(cfg, "vocab_size", vocab),
                # GemmaAttention, Gemma2Attention, Gemma3Attention: q, k, v and o take
                # attention_bias (false in every Gemma file)
                **attention_biases(cfg),
                # GemmaMLP: gate_proj / up_proj / down_proj with hidden_activation
                # "gelu_pytorch_tanh" (GeGLU); RMSNorm weights are (1 + w), same count
                gated_act="gelu_tanh",
                tied_embeddings=_bool(cfg, "tie_word_embeddings", True),
                rope_theta=_float(cfg, "rope_theta", 10000.0),
                norm_eps=_float(cfg, "rms_norm_eps", 1e-6))


@_family("gemma")
def _gemma(name: str, cfg: dict) -> ModelSpec:
    return ModelSpec(name=name, **_gemma_common(cfg, _pos(cfg, "num_hidden_layers")))


@_family("gemma2")
def _gemma2(name: str, cfg: dict) -> ModelSpec:
    """Gemma 2: post-attention and post-feedforward norms (4 per layer) and a 4,096-key
    window on every other layer, the first included."""
    layers = _pos(cfg, "num_hidden_layers")
    return ModelSpec(name=name, extra_layer_norms=2,
                     **_window(cfg, layers, 4096, _alternating(layers, 2)),
                     **_gemma_common(cfg, layers))


@_family("gemma3_text")
def _gemma3(name: str, cfg: dict) -> ModelSpec:
    """Gemma 3 (language model): Gemma 2's norms plus q/k RMSNorm; five sliding layers
    (1,024 keys) to each global one (sliding_window_pattern 6)."""
    layers = _pos(cfg, "num_hidden_layers")
    pattern = _pos(cfg, "sliding_window_pattern", 6)
    return ModelSpec(name=name, extra_layer_norms=2, qk_norm=True,
                     **_window(cfg, layers, 4096, _alternating(layers, pattern)),
                     **_gemma_common(cfg, layers, vocab=262208))


@_family("llama4_text")
def _llama4(name: str, cfg: dict) -> ModelSpec:
    """Llama 4 (language model): MoE on every ``interleave_moe_layer_step``-th layer (or the
    listed ``moe_layers``), top-k routed experts plus one shared expert of the same width;
    dense layers use ``intermediate_size_mlp``. Its q/k norm is a weightless L2 norm and its
    chunked attention (attention_chunk_size) is not modelled (full causal attention); its NoPE
    layers are counted (nope_layers). The L2 norm, the chunks and the router weight on the
    expert inputs are named (qk_l2_norm, attention_chunk, moe_input_scaled) so that the exports
    and the runtime refuse them, with or without NoPE layers."""
    layers = _pos(cfg, "num_hidden_layers")
    heads = _pos(cfg, "num_attention_heads")
    expert_ffn = _pos(cfg, "intermediate_size")
    dense, freq = _moe_layer_pattern(cfg, layers, _pos(cfg, "interleave_moe_layer_step", 1))
    common = _common(cfg, eps_default=1e-5)
    common["rope_theta"] = _float(cfg, "rope_theta", 500000.0)
    chunk = _int(cfg, "attention_chunk_size", 0)
    # modeling_llama4.py: the RoPE layers (no_rope_layers[i] == 1; by default, or for an
    # empty list, all but every 4th: configuration_llama4.py no_rope_layer_interval 4) attend
    # within attention_chunk_size-key chunks; the others (NoPE) use no rotary positions and
    # attend globally
    flags = cfg.get("no_rope_layers")
    chunked = (sum(1 for x in flags if x) if isinstance(flags, list) and len(flags) == layers
               else layers - layers // 4)
    note = ""
    if chunk:
        note = (f"chunked attention ({chunk}-key chunks on {chunked} of {layers} layers) is "
                "not modelled: those layers are charged full causal attention, so sequences "
                f"longer than {chunk} are predicted slower than they run")
    return ModelSpec(
        description=note,
        name=name, layers=layers, hidden=_pos(cfg, "hidden_size"), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads), head_dim=_head_dim(cfg),
        ffn=_pos(cfg, "intermediate_size_mlp", 16384) if (dense or freq > 1) else 0,
        vocab=_pos(cfg, "vocab_size"), **attention_biases(cfg),  # Llama4TextAttention
        moe_experts=_pos(cfg, "num_local_experts"), moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=expert_ffn, moe_shared_experts=1, moe_shared_ffn=expert_ffn,
        moe_dense_layers=dense, moe_layer_freq=freq, moe_score="sigmoid", moe_topk_norm=False,
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        nope_layers=layers - chunked, qk_l2_norm=_bool(cfg, "use_qk_norm", True) and chunked > 0,
        attention_chunk=chunk if chunked else 0, moe_input_scaled=True, **common,
    )


@_family("glm4_moe")
def _glm4_moe(name: str, cfg: dict) -> ModelSpec:
    """GLM-4.5 / 4.6 (modeling_glm4_moe.py): DeepSeek-V3-style MoE (sigmoid router with
    score-correction bias, shared experts, leading dense layers) on GQA attention with
    q/k/v biases, optional q/k norm and partial rotary embeddings. The multi-token-prediction
    layer (num_nextn_predict_layers) is not part of the trained step modelled here."""
    layers = _pos(cfg, "num_hidden_layers")
    heads = _pos(cfg, "num_attention_heads")
    common = _common(cfg, eps_default=1e-5)
    return ModelSpec(
        name=name, layers=layers, hidden=_pos(cfg, "hidden_size"), heads=heads,
        # Glm4MoeConfig declares no head_dim: Glm4MoeAttention takes the file's, else
        # hidden_size // num_attention_heads (modeling_glm4_moe.py), not 128 (GLM-4.5's own
        # value, which every GLM-4.5 / 4.6 file writes)
        kv_heads=_pos(cfg, "num_key_value_heads", heads), head_dim=_head_dim(cfg),
        ffn=_pos(cfg, "intermediate_size"), vocab=_pos(cfg, "vocab_size"),
        qkv_bias=_bool(cfg, "attention_bias", False), qk_norm=_bool(cfg, "use_qk_norm", False),
        rope_fraction=_float(cfg, "partial_rotary_factor", 0.5),
        moe_experts=_pos(cfg, "n_routed_experts"), moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=_pos(cfg, "moe_intermediate_size"),
        moe_shared_experts=_int(cfg, "n_shared_experts", 1),
        moe_dense_layers=_int(cfg, "first_k_dense_replace", 1), moe_router_bias=True,
        moe_score="sigmoid", moe_topk_norm=_bool(cfg, "norm_topk_prob", True),
        moe_routed_scale=_float(cfg, "routed_scaling_factor", 1.0),
        moe_groups=_int(cfg, "n_group", 1), moe_group_topk=_int(cfg, "topk_group", 1),
        **common,
    )
