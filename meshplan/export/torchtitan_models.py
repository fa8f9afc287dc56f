"""Which torchtitan 0.3 model (module, config_registry function, flavour) a ModelSpec is.

torchtitan builds a model from its own registry of flavours (``model_registry(flavor)``
in ``torchtitan/models/<family>/__init__.py``); meshplan maps its presets onto them.
Each entry's shape is checked against torchtitan's own model config in the tests.
"""

from __future__ import annotations

from dataclasses import replace

from ..specs.catalog.presets import preset

# meshplan preset -> (torchtitan model module, config_registry function, flavor, registry kwargs)
MODELS = {
    "llama3.1-8b": ("llama3", "llama3_8b", "8B", {}),
    "llama3.1-70b": ("llama3", "llama3_70b", "70B", {}),
    "llama3.1-405b": ("llama3", "llama3_405b", "405B", {}),
    "qwen3-30b-a3b": ("qwen3", "qwen3_30b_a3b", "30B-A3B", {}),
    "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b", "671B", {"attn_backend": "flex"}),
}


def torchtitan_model(model) -> tuple[str, str, str, dict] | None:
    """The registry entry whose shape is ``model``'s, or None. The model's name (a
    config.json's folder) and the fields only serving reads (the checkpoint's quantization, the
    longest context served) are not part of it: the registry builds neither."""
    for name, entry in MODELS.items():
        if replace(preset(name), name=model.name, checkpoint_quant=model.checkpoint_quant,
                   max_context=model.max_context) == model:
            return entry
    return None


def llama3_shape(model) -> dict | None:
    """The settings of a torchtitan ``Llama3Model.Config`` for a Llama-family model of any
    shape (the job builds it with torchtitan's own layer configs), or None."""
    if llama3_missing(model):
        return None
    import json
    rs = json.loads(model.rope_scaling) if model.rope_scaling else {}
    rope = {"scaling": "none"}
    if rs:
        rope = {"scaling": "llama", "scaling_factor": float(rs["factor"]),
                "low_freq_factor": float(rs.get("low_freq_factor", 1.0)),
                "high_freq_factor": float(rs.get("high_freq_factor", 4.0)),
                "original_max_position_embeddings": int(rs.get("original_max_position_embeddings",
                                                               8192))}
    return {"dim": model.hidden, "n_layers": model.layers, "n_heads": model.heads,
            "n_kv_heads": model.kv_heads, "head_dim": model.head_dim, "hidden_dim": model.ffn,
            "vocab_size": model.vocab, "tied": model.tied_embeddings, "norm_eps": model.norm_eps,
            "rope_theta": model.rope_theta, "rope": rope}


def llama3_missing(model) -> str:
    """'' when torchtitan's llama3 model can be built in this shape, else what it lacks."""
    import json
    lacks = []
    if model.is_moe or model.is_mla:
        lacks.append("mixture-of-experts or latent-attention layers (of a shape not registered)")
    if model.mlp != "swiglu" or model.norm != "rmsnorm" or model.position != "rope":
        lacks.append(f"{model.mlp} MLP / {model.norm} / {model.position} positions "
                     "(llama3 is SwiGLU, RMSNorm, rotary)")
    if model.linear_bias or model.qkv_bias:
        lacks.append("linear-layer biases")
    if model.qk_norm:
        lacks.append("q/k norm in a dense model")
    if model.rope_fraction != 1:
        lacks.append("partial rotary embeddings")
    rs = json.loads(model.rope_scaling) if model.rope_scaling else {}
    if rs and rs.get("rope_type", rs.get("type")) != "llama3":
        lacks.append(f"rope scaling {rs.get('rope_type', rs.get('type'))!r}")
    return "; ".join(lacks)


# torchtitan's Qwen3 layers fix the norm epsilon (torchtitan/models/qwen3/__init__.py _EPS)
# and route MoE tokens with softmax scores renormalised over the top k.
QWEN3_EPS = 1e-6


def qwen3_missing(model) -> str:
    """'' when torchtitan's qwen3 model (dense, or MoE in every layer) can be built in this
    shape, else what it lacks."""
    lacks = []
    if not model.qk_norm:
        lacks.append("no q/k norm (Qwen3 layers have it)")
    if model.is_mla:
        lacks.append("latent attention")
    if model.mlp != "swiglu" or model.norm != "rmsnorm" or model.position != "rope":
        lacks.append(f"{model.mlp} MLP / {model.norm} / {model.position} positions")
    if model.linear_bias or model.qkv_bias:
        lacks.append("linear-layer biases")
    if model.rope_scaling or model.rope_fraction != 1:
        lacks.append("rope scaling or partial rotary embeddings")
    if model.norm_eps != QWEN3_EPS:
        lacks.append(f"norm epsilon {model.norm_eps} (torchtitan's Qwen3 fixes {QWEN3_EPS})")
    if model.is_moe and (model.moe_dense_layers or model.moe_layer_freq != 1
                         or model.moe_shared_experts or model.moe_score != "softmax"
                         or not model.moe_topk_norm):
        lacks.append("MoE other than every layer, no shared experts, softmax top-k renormalised")
    return "; ".join(lacks)


def qwen3_shape(model) -> dict | None:
    if qwen3_missing(model):
        return None
    return {"dim": model.hidden, "n_layers": model.layers, "n_heads": model.heads,
            "n_kv_heads": model.kv_heads, "head_dim": model.head_dim, "hidden_dim": model.ffn,
            "vocab_size": model.vocab, "tied": model.tied_embeddings,
            "rope_theta": model.rope_theta, "num_experts": model.moe_experts,
            "top_k": model.moe_topk, "moe_hidden_dim": model.moe_expert_ffn}


def custom_model(model) -> tuple[str, dict] | None:
    """(torchtitan model module, shape) for a model outside the registry that torchtitan's
    own layers can build, or None."""
    if model.qk_norm:
        shape = qwen3_shape(model)
        return ("qwen3", shape) if shape else None
    shape = llama3_shape(model)
    return ("llama3", shape) if shape else None


def torchtitan_model_missing(model) -> str:
    """'' when torchtitan has the model, else what is missing, in one sentence."""
    from ..engines import model_features_unbuilt
    unbuilt = model_features_unbuilt(model)
    if unbuilt:
        return f"torchtitan 0.3's models have no {unbuilt} ({model.name} has)"
    if torchtitan_model(model) is not None or custom_model(model) is not None:
        return ""
    lacks = qwen3_missing(model) if model.qk_norm else llama3_missing(model)
    family = "Qwen3" if model.qk_norm else "Llama"
    return (f"torchtitan 0.3 has registered flavours for {', '.join(MODELS)} and builds "
            f"Llama- and Qwen3-family shapes of any size; {model.name} as a {family}-family "
            f"model has {lacks}")
