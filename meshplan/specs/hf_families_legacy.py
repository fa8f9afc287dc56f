"""GPT-style HuggingFace families of 2022-2023 (LayerNorm, non-gated MLPs, ALiBi or learned
positions, parallel blocks): bloom, opt, falcon, mpt, phi, olmo, stablelm (registered into
hf_config.FAMILIES).

Field names and defaults follow each family's ``configuration_<family>.py`` in transformers
(src/transformers/models/<family>/; MPT's also llm-foundry's llmfoundry/models/mpt/
configuration_mpt.py, whose remote code the hub files name); the weights that exist follow
its ``modeling_*.py``. Published parameter counts are checked in
tests/test_hf_families_legacy.py.
"""

from __future__ import annotations

from .hf_config import _bool, _common, _family, _float, _glu_act, _pos, _str, require_object
from ..errors import InputError
from .model import ModelSpec


def _refuse_if(cfg: dict, key: str, value: bool, why: str) -> None:
    """One-line refusal of a true/false setting (absent: not ``value``) that changes the
    architecture and is not modelled."""
    if _bool(cfg, key, not value) == value:
        raise InputError(f"config.json:{key}", value, why)


def _act(cfg: dict, key: str, default: str, allowed: dict[str, str]) -> str:
    """The file's activation name mapped onto UNGATED_ACTS."""
    name = _str(cfg, key, default)
    if name not in allowed:
        raise InputError(f"config.json:{key}", name,
                         "supported: " + ", ".join(sorted(allowed)))
    return allowed[name]


@_family("bloom")
def _bloom(name: str, cfg: dict) -> ModelSpec:
    """BLOOM (configuration_bloom.py, modeling_bloom.py): ALiBi (no position weights),
    LayerNorm with bias before attention and MLP plus word_embeddings_layernorm after the
    embedding, biases on query_key_value, dense, dense_h_to_4h and dense_4h_to_h, a GELU MLP
    of 4 * hidden (fixed: the hub files' n_inner is not read), tied output layer."""
    _refuse_if(cfg, "apply_residual_connection_post_layernorm", True,
               "a residual taken after the LayerNorm is not modelled (the BLOOM files: false)")
    hidden = _pos(cfg, "hidden_size", 64, "n_embed")
    heads = _pos(cfg, "num_attention_heads", 8, "n_head")
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers", 2, "n_layer"), hidden=hidden,
        heads=heads, kv_heads=heads, ffn=4 * hidden, vocab=_pos(cfg, "vocab_size", 250880),
        mlp="gelu", norm="layernorm", linear_bias=True, position="alibi", embedding_norm=True,
        tied_embeddings=_bool(cfg, "tie_word_embeddings", True),
        norm_eps=_float(cfg, "layer_norm_epsilon", 1e-5),
    )


# OPTLearnedPositionalEmbedding (modeling_opt.py): "OPT is set up so that if padding_idx is
# specified then offset the embedding ids by 2 and adjust num_embeddings appropriately"
OPT_POSITION_OFFSET = 2


@_family("opt")
def _opt(name: str, cfg: dict) -> ModelSpec:
    """OPT (configuration_opt.py, modeling_opt.py): learned positions in a table of
    max_position_embeddings + 2 rows, LayerNorm before each block (do_layer_norm_before),
    biases on every linear layer (enable_bias), a non-gated MLP of ffn_dim (ReLU), tied
    output layer. OPT-350m's word_embed_proj_dim (a 512-wide embedding with project_in /
    project_out) and post-LN blocks are refused."""
    hidden = _pos(cfg, "hidden_size", 768)
    proj = _pos(cfg, "word_embed_proj_dim", hidden)
    if proj != hidden:
        raise InputError("config.json:word_embed_proj_dim", proj, f"an embedding narrower than "
                         f"hidden_size ({hidden}), with project_in/out, is not modelled")
    _refuse_if(cfg, "do_layer_norm_before", False, "post-LN OPT blocks (OPT-350m) are not "
               "modelled")
    _refuse_if(cfg, "_remove_final_layer_norm", True, "a model without the final LayerNorm is "
               "not modelled")
    affine = _bool(cfg, "layer_norm_elementwise_affine", True)
    heads = _pos(cfg, "num_attention_heads", 12)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers", 12), hidden=hidden, heads=heads,
        kv_heads=heads, ffn=_pos(cfg, "ffn_dim", 3072), vocab=_pos(cfg, "vocab_size", 50272),
        mlp="gelu", ungated_act=_act(cfg, "activation_function", "relu",
                                     {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu"}),
        norm="layernorm" if affine else "layernorm_noparams",
        linear_bias=_bool(cfg, "enable_bias", True), position="learned",
        max_position=_pos(cfg, "max_position_embeddings", 2048) + OPT_POSITION_OFFSET,
        tied_embeddings=_bool(cfg, "tie_word_embeddings", True), norm_eps=1e-5,
    )


def _falcon_kv_heads(cfg: dict, heads: int) -> int:
    """FalconAttention: grouped K/V of num_kv_heads (n_head_kv in older files) with
    new_decoder_architecture, else one K/V head under multi_query (default true), else MHA."""
    if _bool(cfg, "new_decoder_architecture", False):
        return _pos(cfg, "num_kv_heads", heads, "n_head_kv")
    return 1 if _bool(cfg, "multi_query", True) else heads


@_family("falcon")
def _falcon(name: str, cfg: dict) -> ModelSpec:
    """Falcon (configuration_falcon.py, modeling_falcon.py): a fused query_key_value, a GELU
    MLP of ffn_hidden_size (4 * hidden), LayerNorm with bias, biases on the linear layers only
    with bias, rotary positions unless alibi, tied output layer. Attention and MLP run in
    parallel (parallel_attn, always with new_decoder_architecture), reading one input
    LayerNorm, or two (ln_attn and ln_mlp: num_ln_in_parallel_attn, 2 by default with
    new_decoder_architecture: Falcon-40B/180B)."""
    heads = _pos(cfg, "num_attention_heads", 71, "n_head")
    hidden = _pos(cfg, "hidden_size", 4544, "n_embed")
    new_arch = _bool(cfg, "new_decoder_architecture", False)
    parallel = _bool(cfg, "parallel_attn", True)
    if new_arch and not parallel:
        raise InputError("config.json:parallel_attn", False, "new_decoder_architecture runs "
                         "attention and MLP in parallel; a sequential block there is not modelled")
    lns = _pos(cfg, "num_ln_in_parallel_attn", 2 if new_arch else 1)
    if lns not in (1, 2):
        raise InputError("config.json:num_ln_in_parallel_attn", lns, "must be 1 or 2")
    _act(cfg, "activation", "gelu", {"gelu": "gelu"})
    alibi = _bool(cfg, "alibi", False)
    common = _common(cfg, eps_key="layer_norm_epsilon", eps_default=1e-5)
    common["tied_embeddings"] = _bool(cfg, "tie_word_embeddings", True)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers", 32, "n_layer"), hidden=hidden,
        heads=heads, kv_heads=_falcon_kv_heads(cfg, heads),
        ffn=_pos(cfg, "ffn_hidden_size", 4 * hidden), vocab=_pos(cfg, "vocab_size", 65024),
        mlp="gelu", norm="layernorm", linear_bias=_bool(cfg, "bias", False),
        position="alibi" if alibi else "rope", parallel_block=parallel,
        extra_layer_norms=1 if parallel and lns == 2 else 0, **common,
    )


def _mpt_norm(cfg: dict, bias: bool) -> str:
    kind = _str(cfg, "norm_type", "low_precision_layernorm")
    if kind in ("low_precision_layernorm", "layernorm"):
        return "layernorm" if bias else "layernorm_nobias"
    if kind in ("low_precision_rmsnorm", "rmsnorm") and not bias:
        return "rmsnorm"
    raise InputError("config.json:norm_type", kind, "supported: low_precision_layernorm, "
                     "layernorm (and rmsnorm with no_bias)")


@_family("mpt")
def _mpt(name: str, cfg: dict) -> ModelSpec:
    """MPT (transformers configuration_mpt.py / modeling_mpt.py; llm-foundry's
    configuration_mpt.py and modeling_mpt.py, the hub files' remote code): a fused Wqkv,
    out_proj, an MLP of expansion_ratio * d_model (up_proj, GELU, down_proj), LayerNorm;
    no_bias (default true) drops every bias, LayerNorm's too. Positions: ALiBi
    (attn_config.alibi) or rotary (attn_config.rope) switch learned_pos_emb off
    (llm-foundry: "alibi or rope is turned on, setting learned_pos_emb to False"), else a
    learned table of max_seq_len rows. K/V heads: attn_config.kv_n_heads under
    grouped_query_attention, one under multiquery_attention. attn_config.qk_ln adds norms
    over the whole q (d_model) and k (kv width) projections. Output layer tied."""
    attn, ffn_cfg = cfg.get("attn_config") or {}, cfg.get("ffn_config") or {}
    for key, sub in (("attn_config", attn), ("ffn_config", ffn_cfg)):
        require_object(f"config.json:{key}", sub)
    ffn_type = ffn_cfg.get("ffn_type", "mptmlp")
    if ffn_type != "mptmlp":
        raise InputError("config.json:ffn_config.ffn_type", ffn_type, "only mptmlp (a GELU "
                         "MLP without gate) is modelled")
    act = ffn_cfg.get("ffn_act_fn") or {"name": "gelu"}
    if not isinstance(act, dict) or act.get("name", "gelu") != "gelu":
        raise InputError("config.json:ffn_config.ffn_act_fn", act, "only gelu is modelled")
    hidden = _pos(cfg, "d_model", 2048)
    heads = _pos(cfg, "n_heads", 16)
    ratio = _float(cfg, "expansion_ratio", 4)
    ffn = int(hidden * ratio)  # llm-foundry resolve_ffn_hidden_size: int(d_model * ratio)
    kind = _str(attn, "attn_type", "multihead_attention")
    kv = {"multihead_attention": heads, "multiquery_attention": 1}.get(kind)
    if kind == "grouped_query_attention":
        kv = _pos(attn, "kv_n_heads", heads)
    if kv is None:
        raise InputError("config.json:attn_config.attn_type", kind, "supported: "
                         "multihead_attention, multiquery_attention, grouped_query_attention")
    alibi, rope = _bool(attn, "alibi", False), _bool(attn, "rope", False)
    if alibi and rope:
        raise InputError("config.json:attn_config.rope", True, "both rope and alibi are on")
    learned = not (alibi or rope) and _bool(cfg, "learned_pos_emb", True)
    if not (alibi or rope or learned):
        raise InputError("config.json:learned_pos_emb", False, "a model without positions "
                         "(no alibi, rope or learned table) is not modelled")
    bias = not _bool(cfg, "no_bias", True)
    qk_ln = _bool(attn, "qk_ln", False)
    return ModelSpec(
        name=name, layers=_pos(cfg, "n_layers", 24), hidden=hidden, heads=heads, kv_heads=kv,
        ffn=ffn, vocab=_pos(cfg, "vocab_size", 50368), mlp="gelu", norm=_mpt_norm(cfg, bias),
        linear_bias=bias, qk_norm=qk_ln, qk_norm_full=qk_ln,
        position="alibi" if alibi else "rope" if rope else "learned",
        max_position=_pos(cfg, "max_seq_len", 2048) if learned else 0,
        tied_embeddings=_bool(cfg, "tie_word_embeddings", True),
        rope_theta=_float(attn, "rope_theta", 10000.0),
        norm_eps=_float(cfg, "layer_norm_epsilon", 1e-5),
    )


@_family("phi")
def _phi(name: str, cfg: dict) -> ModelSpec:
    """Phi-1 / Phi-1.5 / Phi-2 (configuration_phi.py, modeling_phi.py): one LayerNorm
    (with bias) feeding attention and MLP in parallel, biases on q/k/v/dense and fc1/fc2,
    a GELU MLP of intermediate_size, rotary on partial_rotary_factor of each head, optional
    per-head q/k LayerNorms (qk_layernorm), untied output layer with a bias (PhiForCausalLM:
    lm_head bias=True; output_bias, vocab weights)."""
    heads = _pos(cfg, "num_attention_heads", 32)
    common = _common(cfg, eps_key="layer_norm_eps", eps_default=1e-5)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers", 24),
        hidden=_pos(cfg, "hidden_size", 2048), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        ffn=_pos(cfg, "intermediate_size", 8192), vocab=_pos(cfg, "vocab_size", 51200),
        mlp="gelu", ungated_act=_act(cfg, "hidden_act", "gelu_new",
                                     {"gelu_new": "gelu", "gelu": "gelu",
                                      "gelu_pytorch_tanh": "gelu"}),
        norm="layernorm", linear_bias=True, parallel_block=True, output_bias=True,
        qk_norm=_bool(cfg, "qk_layernorm", False),
        rope_fraction=_float(cfg, "partial_rotary_factor", 0.5), **common,
    )


@_family("olmo")
def _olmo(name: str, cfg: dict) -> ModelSpec:
    """OLMo 1 (configuration_olmo.py, modeling_olmo.py): a Llama whose LayerNorms have no
    weight and no bias (OlmoLayerNorm: F.layer_norm without parameters); clip_qkv clamps
    activations (no weights). attention_bias would put a bias on o_proj too: refused."""
    _refuse_if(cfg, "attention_bias", True, "biases on q, k, v and o are not modelled "
               "(the OLMo files: false)")
    heads = _pos(cfg, "num_attention_heads", 32)
    common = _common(cfg, eps_default=1e-5)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers", 32),
        hidden=_pos(cfg, "hidden_size", 4096), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        ffn=_pos(cfg, "intermediate_size", 11008), vocab=_pos(cfg, "vocab_size", 50304),
        norm="layernorm_noparams", **common,
    )


@_family("stablelm")
def _stablelm(name: str, cfg: dict) -> ModelSpec:
    """StableLM 3B-4E1T / StableLM 2 (configuration_stablelm.py, modeling_stablelm.py): a
    Llama's SwiGLU MLP and GQA attention without biases but for q, k and v with
    use_qkv_bias, LayerNorms with bias, rotary on partial_rotary_factor (0.25) of each head,
    and with use_parallel_residual one LayerNorm feeding attention and MLP in parallel.
    qk_layernorm (StableLmLayerNormPerHead: a bias-free LayerNorm per head) is refused."""
    _refuse_if(cfg, "qk_layernorm", True, "per-head q/k LayerNorms (one per head, no bias) "
               "are not modelled")
    heads = _pos(cfg, "num_attention_heads", 32)
    common = _common(cfg, eps_key="layer_norm_eps", eps_default=1e-5)
    return ModelSpec(
        name=name, layers=_pos(cfg, "num_hidden_layers", 32),
        hidden=_pos(cfg, "hidden_size", 2560), heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        ffn=_pos(cfg, "intermediate_size", 6912), vocab=_pos(cfg, "vocab_size", 50304),
        norm="layernorm", qkv_bias=_bool(cfg, "use_qkv_bias", False),
        parallel_block=_bool(cfg, "use_parallel_residual", False),
        rope_fraction=_float(cfg, "partial_rotary_factor", 0.25),
        gated_act=_glu_act(cfg), **common,
    )
