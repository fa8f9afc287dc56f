"""Which torchtitan 0.3 model (module, config_registry function, flavour) a ModelSpec is.

torchtitan builds a model from its own registry of flavours (``model_registry(flavor)``
in ``torchtitan/models/<family>/__init__.py``); meshplan maps its presets onto them.
Each entry's shape is checked against torchtitan's own model config in the tests.
"""

from __future__ import annotations

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
    """The registry entry whose shape is ``model``'s, or None."""
    for name, entry in MODELS.items():
        if preset(name) == model:
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
        lacks.append("mixture-of-experts or latent-attention layers of an unregistered shape")
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


def torchtitan_model_missing(model) -> str:
    """'' when torchtitan has the model, else what is missing, in one sentence."""
    if torchtitan_model(model) is not None:
        return ""
    lacks = llama3_missing(model)
    if not lacks:
        return ""
    return (f"torchtitan 0.3 has registered flavours for {', '.join(MODELS)} and builds "
            f"Llama-family shapes of any size; {model.name} needs {lacks}")
