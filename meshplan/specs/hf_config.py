"""Build a ModelSpec from a HuggingFace ``config.json`` (read directly, no hub access).

Families: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, gpt2,
gpt_neox. Field names follow each family's ``configuration_*.py`` in transformers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from .model import ModelSpec

FAMILIES: dict[str, Callable[[str, dict], ModelSpec]] = {}


def _family(*names: str):
    def register(fn):
        for n in names:
            FAMILIES[n] = fn
        return fn
    return register


def _get(cfg: dict, key: str, default: Any = ..., *alts: str) -> Any:
    for k in (key, *alts):
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    if default is ...:
        raise InputError(f"config.json:{key}", None, "missing; this family needs it")
    return default


def _int(cfg: dict, key: str, default: Any = ..., *alts: str) -> int:
    v = _get(cfg, key, default, *alts)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(f"config.json:{key}", v, "must be a non-negative integer")
    return v


@_family("llama", "mistral", "qwen2", "qwen3")
def _llama_like(name: str, cfg: dict) -> ModelSpec:
    mt = cfg.get("model_type")
    heads = _int(cfg, "num_attention_heads")
    attn_bias = bool(cfg.get("attention_bias", False))
    return ModelSpec(
        name=name,
        layers=_int(cfg, "num_hidden_layers"),
        hidden=_int(cfg, "hidden_size"),
        heads=heads,
        kv_heads=_int(cfg, "num_key_value_heads", heads),
        head_dim=_int(cfg, "head_dim", 0),
        ffn=_int(cfg, "intermediate_size"),
        vocab=_int(cfg, "vocab_size"),
        mlp="swiglu",
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=(mt == "qwen2") or attn_bias,
        qk_norm=(mt == "qwen3"),
    )


@_family("mixtral")
def _mixtral(name: str, cfg: dict) -> ModelSpec:
    heads = _int(cfg, "num_attention_heads")
    ffn = _int(cfg, "intermediate_size")
    return ModelSpec(
        name=name,
        layers=_int(cfg, "num_hidden_layers"),
        hidden=_int(cfg, "hidden_size"),
        heads=heads,
        kv_heads=_int(cfg, "num_key_value_heads", heads),
        head_dim=_int(cfg, "head_dim", 0),
        ffn=ffn,
        vocab=_int(cfg, "vocab_size"),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        moe_experts=_int(cfg, "num_local_experts"),
        moe_topk=_int(cfg, "num_experts_per_tok"),
        moe_expert_ffn=ffn,
    )


@_family("qwen3_moe")
def _qwen3_moe(name: str, cfg: dict) -> ModelSpec:
    heads = _int(cfg, "num_attention_heads")
    layers = _int(cfg, "num_hidden_layers")
    dense_only = sorted(cfg.get("mlp_only_layers") or [])
    if dense_only != list(range(len(dense_only))):
        raise InputError("config.json:mlp_only_layers", dense_only,
                         "only a leading run of dense layers (0, 1, ..., k-1) is supported")
    return ModelSpec(
        name=name,
        layers=layers,
        hidden=_int(cfg, "hidden_size"),
        heads=heads,
        kv_heads=_int(cfg, "num_key_value_heads", heads),
        head_dim=_int(cfg, "head_dim", 0),
        ffn=_int(cfg, "intermediate_size"),
        vocab=_int(cfg, "vocab_size"),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qk_norm=True,
        moe_experts=_int(cfg, "num_experts"),
        moe_topk=_int(cfg, "num_experts_per_tok"),
        moe_expert_ffn=_int(cfg, "moe_intermediate_size"),
        moe_dense_layers=len(dense_only),
        moe_layer_freq=_int(cfg, "decoder_sparse_step", 1) or 1,
    )


@_family("deepseek_v2", "deepseek_v3")
def _deepseek(name: str, cfg: dict) -> ModelSpec:
    heads = _int(cfg, "num_attention_heads")
    routed = _int(cfg, "n_routed_experts", 0)
    return ModelSpec(
        name=name,
        layers=_int(cfg, "num_hidden_layers"),
        hidden=_int(cfg, "hidden_size"),
        heads=heads,
        kv_heads=_int(cfg, "num_key_value_heads", heads),
        head_dim=_int(cfg, "v_head_dim"),
        ffn=_int(cfg, "intermediate_size"),
        vocab=_int(cfg, "vocab_size"),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        q_lora_rank=_int(cfg, "q_lora_rank", 0),
        kv_lora_rank=_int(cfg, "kv_lora_rank"),
        qk_nope_head_dim=_int(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
        v_head_dim=_int(cfg, "v_head_dim"),
        moe_experts=routed,
        moe_topk=_int(cfg, "num_experts_per_tok", 0) if routed else 0,
        moe_expert_ffn=_int(cfg, "moe_intermediate_size", 0) if routed else 0,
        moe_shared_experts=_int(cfg, "n_shared_experts", 0) if routed else 0,
        moe_dense_layers=_int(cfg, "first_k_dense_replace", 0) if routed else 0,
        moe_layer_freq=_int(cfg, "moe_layer_freq", 1) or 1,
        moe_router_bias=cfg.get("topk_method") == "noaux_tc",
    )


@_family("gpt2")
def _gpt2(name: str, cfg: dict) -> ModelSpec:
    hidden = _int(cfg, "n_embd", ..., "hidden_size")
    return ModelSpec(
        name=name,
        layers=_int(cfg, "n_layer", ..., "num_hidden_layers"),
        hidden=hidden,
        heads=_int(cfg, "n_head", ..., "num_attention_heads"),
        kv_heads=_int(cfg, "n_head", ..., "num_attention_heads"),
        ffn=_int(cfg, "n_inner", 4 * hidden),
        vocab=_int(cfg, "vocab_size"),
        mlp="gelu",
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        norm="layernorm",
        linear_bias=True,
        position="learned",
        max_position=_int(cfg, "n_positions", ..., "max_position_embeddings"),
    )


@_family("gpt_neox")
def _gpt_neox(name: str, cfg: dict) -> ModelSpec:
    heads = _int(cfg, "num_attention_heads")
    return ModelSpec(
        name=name,
        layers=_int(cfg, "num_hidden_layers"),
        hidden=_int(cfg, "hidden_size"),
        heads=heads,
        kv_heads=heads,
        ffn=_int(cfg, "intermediate_size"),
        vocab=_int(cfg, "vocab_size"),
        mlp="gelu",
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        norm="layernorm",
        linear_bias=bool(cfg.get("attention_bias", True)),
    )


def model_from_hf_dict(cfg: object, name: str = "custom") -> ModelSpec:
    if not isinstance(cfg, dict):
        raise InputError("config.json", type(cfg).__name__, "must be a JSON object")
    mt = cfg.get("model_type")
    if mt not in FAMILIES:
        raise InputError("config.json:model_type", mt,
                         "supported: " + ", ".join(sorted(FAMILIES)))
    return FAMILIES[mt](name, cfg)


def model_from_hf_file(path: str | Path) -> ModelSpec:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError("model", str(path), f"cannot read file ({e.strerror})") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError("model", str(path),
                         f"not valid JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
    return model_from_hf_dict(cfg, name=p.parent.name if p.name == "config.json" else p.stem)
