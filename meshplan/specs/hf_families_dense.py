"""Dense Llama-shaped HuggingFace families with one twist each: glm4 (post-norms), internlm2
(packed wqkv), nemotron (squared-ReLU MLP, LayerNorm), smollm3 (NoPE layers), olmo3
(sliding layers, full-width q/k norms), exaone4 (sliding layers, NoPE global layers),
seed_oss (q/k/v and o biases set apart), hunyuan_v1_dense (per-head q/k norms) and its
MoE, hunyuan_v1_moe (registered into hf_config.FAMILIES).

Field names and defaults follow each family's ``configuration_<family>.py`` in transformers
(src/transformers/models/<family>/; InternLM2's the remote configuration_internlm2.py its hub
files name); the weights that exist follow its ``modeling_*.py``. Published parameter counts
are checked in tests/test_hf_families_dense.py.
"""

from __future__ import annotations

from .hf_config import (_alternating, _bool, _common, _family, _float, _glu_act, _head_dim,
                        _pos, _str, _window, attention_biases)
from ..errors import InputError
from .model import ModelSpec


def _biases(cfg: dict, attention_default: bool = False) -> bool:
    """linear_bias from attention_bias (q, k, v and o) and mlp_bias: both or neither; biases
    on one of them only are not modelled."""
    attn = _bool(cfg, "attention_bias", attention_default)
    mlp = _bool(cfg, "mlp_bias", False)
    if attn != mlp:
        key = "attention_bias" if attn else "mlp_bias"
        raise InputError(f"config.json:{key}", True, "biases on attention or MLP alone are not "
                         "modelled (both or neither)")
    return attn


def _shape(cfg: dict) -> dict:
    heads = _pos(cfg, "num_attention_heads")
    return dict(layers=_pos(cfg, "num_hidden_layers"), hidden=_pos(cfg, "hidden_size"),
                heads=heads, kv_heads=_pos(cfg, "num_key_value_heads", heads),
                head_dim=_head_dim(cfg), ffn=_pos(cfg, "intermediate_size"),
                vocab=_pos(cfg, "vocab_size"))


@_family("glm4")
def _glm4(name: str, cfg: dict) -> ModelSpec:
    """GLM-4-0414 dense (configuration_glm4.py, modeling_glm4.py): a Llama with q/k/v biases
    (attention_bias, default true; o_proj has none), a fused gate_up_proj (same count), two
    more RMSNorms a layer (post_self_attn_layernorm, post_mlp_layernorm: extra_layer_norms 2,
    as Gemma 2's post-norms) and rotary on partial_rotary_factor (0.5) of each head. The
    older THUDM/glm-4-9b files are model_type chatglm (not read)."""
    common = _common(cfg, eps_default=1.5625e-07)
    return ModelSpec(name=name, **_shape(cfg), qkv_bias=_bool(cfg, "attention_bias", True),
                     extra_layer_norms=2, rope_interleaved=True,
                     rope_fraction=_float(cfg, "partial_rotary_factor", 0.5), **common)


@_family("internlm2")
def _internlm2(name: str, cfg: dict) -> ModelSpec:
    """InternLM2 / 2.5 (remote configuration_internlm2.py, modeling_internlm2.py): a Llama
    whose q, k and v sit in one wqkv of (heads + 2 * num_key_value_heads) * head_dim rows
    (grouped per K/V head; same count), w1/w3/w2 a SwiGLU MLP. bias (default true) puts
    biases on wqkv and wo only: refused (the hub files: false)."""
    if _bool(cfg, "bias", True):
        raise InputError("config.json:bias", cfg.get("bias", "absent (default true)"),
                         "biases on wqkv and wo are not modelled (the InternLM2 files: false)")
    return ModelSpec(name=name, **_shape(cfg), **_common(cfg, eps_default=1e-6))


# Nemotron's hidden_act onto ModelSpec's UNGATED_ACTS (transformers ACT2FN: relu2 is
# ReLUSquaredActivation)
NEMOTRON_ACTS = {"relu2": "relu2", "relu": "relu", "gelu": "gelu"}


@_family("nemotron")
def _nemotron(name: str, cfg: dict) -> ModelSpec:
    """Nemotron-4 / Minitron (configuration_nemotron.py, modeling_nemotron.py): LayerNorm1P
    (a LayerNorm with weight and bias, the weight stored minus one), a non-gated MLP
    up_proj -> relu2 (squared ReLU) -> down_proj, rotary on partial_rotary_factor (0.5) of
    each head, untied output layer."""
    act = _str(cfg, "hidden_act", "relu2")
    if act not in NEMOTRON_ACTS:
        raise InputError("config.json:hidden_act", act,
                         "supported: " + ", ".join(sorted(NEMOTRON_ACTS)))
    return ModelSpec(name=name, **_shape(cfg), mlp="gelu", ungated_act=NEMOTRON_ACTS[act],
                     norm="layernorm", linear_bias=_biases(cfg),
                     rope_fraction=_float(cfg, "partial_rotary_factor", 0.5),
                     **_common(cfg, eps_key="norm_eps", eps_default=1e-5))


def _no_rope_flags(cfg: dict, layers: int) -> list[int]:
    """SmolLM3's no_rope_layers: 1 where a layer uses rotary positions, 0 where it does not
    (default: every no_rope_layer_interval-th layer, 1-based, is NoPE)."""
    raw = cfg.get("no_rope_layers")
    if raw is None:
        step = _pos(cfg, "no_rope_layer_interval", 4)
        return [int((i + 1) % step != 0) for i in range(layers)]
    if not isinstance(raw, list) or len(raw) != layers or any(x not in (0, 1) or
                                                              isinstance(x, bool) for x in raw):
        shown = f"{len(raw)} entries" if isinstance(raw, list) and len(raw) != layers else raw
        raise InputError("config.json:no_rope_layers", shown,
                         f"must list {layers} entries, each 0 or 1")
    return raw


@_family("smollm3")
def _smollm3(name: str, cfg: dict) -> ModelSpec:
    """SmolLM3 (configuration_smollm3.py, modeling_smollm3.py): a Llama (tied by default)
    whose NoPE layers (no_rope_layers 0) skip the rotary embedding; with use_sliding_window
    and a sliding_window, those layers slide (layer_types when the file lists them)."""
    shape = _shape(cfg)
    layers = shape["layers"]
    nope = _no_rope_flags(cfg, layers).count(0)
    window = dict(sliding_window=0, sliding_layers=0)
    if _bool(cfg, "use_sliding_window", False):
        window = _window(cfg, layers, 0, nope)
    common = _common(cfg)
    common["tied_embeddings"] = _bool(cfg, "tie_word_embeddings", True)
    common["rope_theta"] = _float(cfg, "rope_theta", 2e6)
    return ModelSpec(name=name, **shape, linear_bias=_biases(cfg), nope_layers=nope,
                     **window, **common)


@_family("olmo3")
def _olmo3(name: str, cfg: dict) -> ModelSpec:
    """OLMo 3 (configuration_olmo3.py, modeling_olmo3.py): OLMo 2's block (RMSNorms after
    attention and MLP, not before: same count; q_norm over heads * head_dim and k_norm over
    kv_heads * head_dim: qk_norm_full) with a 4,096-key window on three layers of every four
    (layer_types when listed). attention_bias would put a bias on o_proj too: refused."""
    if _bool(cfg, "attention_bias", False):
        raise InputError("config.json:attention_bias", True, "biases on q, k, v and o are not "
                         "modelled (the OLMo 3 files: false)")
    shape = _shape(cfg)
    layers = shape["layers"]
    common = _common(cfg, eps_default=1e-5)
    common["rope_theta"] = _float(cfg, "rope_theta", 500000.0)
    return ModelSpec(name=name, **shape, qk_norm=True, qk_norm_full=True,
                     norms_after_blocks=True,
                     **_window(cfg, layers, 4096, _alternating(layers, 4)), **common)


def _exaone4_sliding(cfg: dict, layers: int) -> int:
    """Sliding layers of EXAONE 4 without layer_types: sliding_window_pattern an int k (layer
    i slides unless (i + 1) % k == 0) or a string of L (local) and G (global) repeated from
    layer 0, the last layer global (configuration_exaone4.py)."""
    pattern = cfg.get("sliding_window_pattern", 4)
    if isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"}:
        kinds = [pattern[i % len(pattern)] for i in range(layers - 1)] + ["G"]
        return kinds.count("L")
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0:
        return _alternating(layers, pattern)
    raise InputError("config.json:sliding_window_pattern", pattern,
                     "must be a positive integer or a string of L and G")


@_family("exaone4")
def _exaone4(name: str, cfg: dict) -> ModelSpec:
    """EXAONE 4.0 (configuration_exaone4.py, modular_exaone4.py): OLMo 2's decoder layer
    (norms after attention and MLP), per-head RMSNorms on q and k (RMSNorm(head_dim)), no
    biases. With a sliding_window, the sliding layers keep rotary positions and the global
    ones use none ("We use global NoPE for hybrid attention model"); without one, every
    layer is global with rotary positions."""
    shape = _shape(cfg)
    layers = shape["layers"]
    window = dict(sliding_window=0, sliding_layers=0)
    if cfg.get("sliding_window", 4096) is not None:
        window = _window(cfg, layers, 4096, _exaone4_sliding(cfg, layers))
    nope = layers - window["sliding_layers"] if window["sliding_window"] else 0
    return ModelSpec(name=name, **shape, qk_norm=True, norms_after_blocks=True,
                     nope_layers=nope, **window, **_common(cfg, eps_default=1e-5))


@_family("seed_oss")
def _seed_oss(name: str, cfg: dict) -> ModelSpec:
    """Seed-OSS (configuration_seed_oss.py, modeling_seed_oss.py): a Llama whose q, k and v
    take attention_bias (default true), o_proj attention_out_bias (default false) and the
    MLP mlp_bias (default false); head_dim 128 and a rotary base of 1e7 unless the file
    says otherwise. MLP biases are modelled with every attention bias only (linear_bias).
    SeedOssConfig's dropouts (attention_dropout, residual_dropout: 0.1 by default and in
    the Seed-OSS-36B files) are named as not modelled."""
    qkv = _bool(cfg, "attention_bias", True)
    o = _bool(cfg, "attention_out_bias", False)
    mlp = _bool(cfg, "mlp_bias", False)
    if mlp and not (qkv and o):
        raise InputError("config.json:mlp_bias", True, "MLP biases are modelled with "
                         "attention_bias and attention_out_bias both true only")
    common = _common(cfg)
    common["rope_theta"] = _float(cfg, "rope_theta", 1e7)
    drops = {k: _float(cfg, k, 0.1, allow_zero=True)
             for k in ("attention_dropout", "residual_dropout")}
    note = ", ".join(f"{k} {v:g}" for k, v in drops.items() if v)
    return ModelSpec(name=name, **dict(_shape(cfg), head_dim=_pos(cfg, "head_dim", 128)),
                     qkv_bias=qkv and not mlp, o_bias=o and not mlp, linear_bias=mlp,
                     gated_act=_glu_act(cfg), **common,
                     description=(f"dropout ({note}) is not modelled: priced as without it"
                                  if note else ""))


@_family("hunyuan_v1_dense")
def _hunyuan_dense(name: str, cfg: dict) -> ModelSpec:
    """Hunyuan dense (Hunyuan-7B, Hunyuan-MT; configuration_hunyuan_v1_dense.py,
    modeling_hunyuan_v1_dense.py): a Llama with an RMSNorm over each head's queries and
    keys (query_layernorm, key_layernorm), attention_bias on q, k, v and o, an MLP without
    biases. transformers builds the q/k norms whatever use_qk_norm says and has no
    cross-layer key/value sharing; the hub's remote code follows both flags, so a file
    with use_qk_norm false or use_cla true is refused rather than read either way (the
    released files: true, false)."""
    return ModelSpec(name=name, **_hunyuan_attention(cfg), **_shape(cfg),
                     gated_act=_glu_act(cfg), **_common(cfg, eps_default=1e-5))


def _hunyuan_attention(cfg: dict) -> dict:
    """The attention both Hunyuan families share (HunYuanDenseV1Attention and
    HunYuanMoEV1Attention are the same class): its q/k norms apply to the rotated queries
    and keys (qk_norm_after_rope), which the exports and the runtime refuse."""
    if not _bool(cfg, "use_qk_norm", True):
        raise InputError("config.json:use_qk_norm", False, "only true is modelled (the q/k "
                         "norms transformers builds regardless)")
    if _bool(cfg, "use_cla", False):
        raise InputError("config.json:use_cla", True, "cross-layer key/value sharing is not "
                         "modelled")
    return dict(attention_biases(cfg), qk_norm=True, qk_norm_after_rope=True)


def _same_each_layer(cfg: dict, key: str, layers: int, default: int) -> int:
    """A positive integer, or a list of one per layer that repeats it (Hunyuan-A13B writes
    moe_topk, moe_intermediate_size and num_shared_expert per layer); layers that differ are
    not modelled."""
    v = cfg.get(key)
    if isinstance(v, list):
        if len(v) != layers or len(set(map(repr, v))) != 1:
            raise InputError(f"config.json:{key}", v if len(v) <= 8 else f"{len(v)} entries",
                             f"must be one number, or {layers} equal ones (values that "
                             "change from layer to layer are not modelled)")
        return _pos({key: v[0]}, key)
    return _pos(cfg, key, default)


@_family("hunyuan_v1_moe")
def _hunyuan_moe(name: str, cfg: dict) -> ModelSpec:
    """Hunyuan MoE (Hunyuan-A13B; configuration_hunyuan_v1_moe.py, modeling_hunyuan_v1_moe.py):
    the dense family's attention; every layer an MoE of num_experts SwiGLU experts of
    intermediate_size under a bias-free softmax router whose top moe_topk weights are
    renormalised (HunYuanMoEV1Gate), plus one shared MLP of intermediate_size
    (HunYuanMoEV1MLP) added to their sum. transformers reads neither moe_intermediate_size
    nor num_shared_expert (the hub files: intermediate_size and 1 on every layer): other
    values are refused rather than read either way, as is use_mixed_mlp_moe false (no
    shared MLP)."""
    layers = _pos(cfg, "num_hidden_layers")
    ffn = _pos(cfg, "intermediate_size")
    for key, built in (("moe_intermediate_size", ffn), ("num_shared_expert", 1)):
        if _same_each_layer(cfg, key, layers, built) != built:
            raise InputError(f"config.json:{key}", cfg[key], f"must be {built} (what "
                             "transformers builds: intermediate_size, one shared MLP)")
    if not _bool(cfg, "use_mixed_mlp_moe", True):
        raise InputError("config.json:use_mixed_mlp_moe", False, "only true (a shared MLP "
                         "beside the experts, as transformers builds) is modelled")
    if isinstance(cfg.get("num_experts"), list):  # HunYuanMoEV1Experts reads one number
        raise InputError("config.json:num_experts", cfg["num_experts"], "must be one number")
    return ModelSpec(name=name, **_hunyuan_attention(cfg), **_shape(cfg),
                     moe_experts=_pos(cfg, "num_experts", 1),
                     moe_topk=_same_each_layer(cfg, "moe_topk", layers, 1),
                     moe_expert_ffn=ffn, moe_shared_experts=1, moe_shared_ffn=ffn,
                     moe_topk_norm=True, gated_act=_glu_act(cfg),
                     **_common(cfg, eps_default=1e-5))
