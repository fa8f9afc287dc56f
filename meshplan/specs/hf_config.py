"""Build a ModelSpec from a HuggingFace ``config.json`` (read directly, no hub access).

Families: llama, mistral, ministral, ministral3, phi3, olmo2, mixtral, qwen2, qwen3,
qwen3_moe, deepseek_v2, deepseek_v3, kimi_k2, gpt2, gpt_neox; gpt_oss, gemma, gemma2,
gemma3_text, llama4_text, glm4_moe (hf_families.py); qwen2_moe, olmoe, granite, granitemoe,
starcoder2, cohere, cohere2, dbrx, phimoe, ernie4_5, ernie4_5_moe, granitemoehybrid
(hf_families_more.py); bloom, opt, falcon, mpt, phi, olmo, stablelm (hf_families_legacy.py);
glm4, internlm2, nemotron, smollm3, olmo3, exaone4, seed_oss, hunyuan_v1_dense,
hunyuan_v1_moe (hf_families_dense.py); minimax_m2, deepseek_v32, glm_moe_dsa, glm4_moe_lite
(hf_families_recent.py); the multimodal wrappers in
TEXT_CONFIG_WRAPPERS are read as their language model (text_config).
Field names follow each family's ``configuration_*.py`` in transformers.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError
from ..inputs import read_input
from .model import ModelSpec, check_rope_scaling

FAMILIES: dict[str, Callable[[str, dict], ModelSpec]] = {}


def _family(*names: str):
    def register(fn):
        for n in names:
            FAMILIES[n] = fn
        return fn
    return register


_JSON_KINDS = {type(None): "null", bool: "true/false", int: "a number", float: "a number",
               str: "a string", list: "an array"}


def require_object(field: str, v: object) -> dict:
    """``v`` when it is a JSON object, else an InputError naming what the file holds."""
    if not isinstance(v, dict):
        raise InputError(field, v if v is None or isinstance(v, (bool, int, float)) else
                         type(v).__name__, f"must be a JSON object {{...}}, not "
                         f"{_JSON_KINDS.get(type(v), type(v).__name__)}")
    return v


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


def _pos(cfg: dict, key: str, default: Any = ..., *alts: str) -> int:
    """A size that must be at least 1 (layers, widths, heads, vocabulary)."""
    v = _get(cfg, key, default, *alts)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"config.json:{key}", v, "must be a positive integer")
    return v


def _aliased_pos(cfg: dict, key: str, alias: str) -> int:
    """A size a file may spell two ways: a config class's ``attribute_map`` makes transformers
    read either, and its ``save_pretrained`` writes the attribute's own name (Qwen3MoeConfig,
    transformers 5: ``num_experts`` is an alias of ``num_local_experts``, so a file saved
    by transformers 5 holds only the latter). Both given and different is refused."""
    if key in cfg and alias in cfg and cfg[key] != cfg[alias] \
            and None not in (cfg[key], cfg[alias]):
        raise InputError(f"config.json:{alias}", cfg[alias], f"differs from {key} "
                         f"({cfg[key]!r}); give one, or the same value in both")
    return _pos(cfg, key, ..., alias)


def _head_dim(cfg: dict) -> int:
    """``head_dim`` where the file gives one (it must then be positive: transformers uses it
    as written), else 0: hidden / heads (ModelSpec)."""
    return _pos(cfg, "head_dim") if cfg.get("head_dim") is not None else 0


def _bool(cfg: dict, key: str, default: bool) -> bool:
    """true/false; a string such as "false" is an error, not truthy."""
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputError(f"config.json:{key}", v, "must be true or false (a JSON boolean)")
    return v


def _float(cfg: dict, key: str, default: float, *alts: str, allow_zero: bool = False) -> float:
    v = _get(cfg, key, default, *alts)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or v < 0 or (v == 0 and not allow_zero):
        raise InputError(f"config.json:{key}", v, "must be a finite number "
                         + (">= 0" if allow_zero else "> 0"))
    return float(v)


def _str(cfg: dict, key: str, default: str) -> str:
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, str):
        raise InputError(f"config.json:{key}", v, "must be a string")
    return v


def _rope_scaling(cfg: dict) -> str:
    """The rope_scaling object as canonical JSON ("" when there is none)."""
    v = cfg.get("rope_scaling")
    if v is None:
        return ""
    if not isinstance(v, dict):
        raise InputError("config.json:rope_scaling", v, "must be an object such as "
                         '{"rope_type": "llama3", "factor": 8.0, ...} or null')
    check_rope_scaling("config.json:rope_scaling", v)
    return json.dumps(v, sort_keys=True)


def _rope_parameters(cfg: dict) -> dict:
    """``cfg`` with transformers 5's ``rope_parameters`` read into the keys the families read:
    its rope_theta, partial_rotary_factor and the rest as rope_scaling (none when that is only
    rope_type "default"). transformers 5 writes the rotary base and scaling there (a top-level
    rope_theta may be absent or null) and reads it over the older keys, so it wins; a file with
    one object per layer type (Gemma 3: full_attention, sliding_attention) gives the global
    layers' one, what rope_theta and rope_scaling held before."""
    rp = cfg.get("rope_parameters")
    if rp is None:
        return cfg
    rp = dict(require_object("config.json:rope_parameters", rp))
    if "full_attention" in rp:
        rp = dict(require_object("config.json:rope_parameters.full_attention",
                                 rp["full_attention"]))
    out = dict(cfg)
    for key in ("rope_theta", "partial_rotary_factor"):
        if key in rp:
            out[key] = rp.pop(key)
    if "type" not in rp:  # transformers 5's default rope_type when the object names none
        rp.setdefault("rope_type", "default")
    default = rp.get("rope_type", rp.get("type")) == "default"
    out["rope_scaling"] = None if default and set(rp) <= {"rope_type", "type"} else rp
    return out


def _common(cfg: dict, eps_key: str = "rms_norm_eps", eps_default: float = 1e-6) -> dict:
    """Fields every family shares: tying, rotary base and scaling, norm epsilon."""
    return dict(tied_embeddings=_bool(cfg, "tie_word_embeddings", False),
                rope_theta=_float(cfg, "rope_theta", 10000.0),
                rope_scaling=_rope_scaling(cfg),
                norm_eps=_float(cfg, eps_key, eps_default))


# the gate activations of gated MLPs a config's ``hidden_act`` may name (transformers
# ACT2FN), onto ModelSpec's GATED_ACTS: SiLU ("swish" is its alias) or tanh-approximated GELU
GLU_ACTS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh",
            "gelu_new": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu": "gelu_tanh"}
# ("gelu" is the erf form, the others tanh approximations: a GeGLU either way, the same
# matrices and element-wise passes; ModelSpec keeps the one GeGLU kind)


def _glu_act(cfg: dict) -> str:
    """The gated MLP's gate activation from ``hidden_act`` (default silu, what every Llama,
    Mistral, Qwen, Phi-3, OLMo 2, Mixtral and DeepSeek checkpoint uses; a GELU gate is a
    GeGLU); an activation with no gated form here is refused rather than read as SwiGLU."""
    act = _str(cfg, "hidden_act", "silu").strip().lower()
    if act not in GLU_ACTS:
        raise InputError("config.json:hidden_act", act,
                         "allowed for this family: " + ", ".join(GLU_ACTS))
    return GLU_ACTS[act]


def _alternating(layers: int, pattern: int) -> int:
    """Sliding layers when every ``pattern``-th layer (1-based) is full attention and the
    rest slide (transformers: "sliding_attention" if (i + 1) % pattern else "full")."""
    return layers - layers // pattern


def _window(cfg: dict, layers: int, default_window: int = 0,
            default_sliding: int | None = None) -> dict:
    """sliding_window / sliding_layers of a config: ``layer_types`` when the file lists them
    (transformers >= 4.54 writes them), else the family's rule (``default_sliding`` layers;
    None = every layer). A null or absent window means none."""
    w = cfg.get("sliding_window", default_window)
    if w is None or w == 0:
        return dict(sliding_window=0, sliding_layers=0)
    if isinstance(w, bool) or not isinstance(w, int) or w < 0:
        raise InputError("config.json:sliding_window", w,
                         "must be a positive integer, or 0 or null for none")
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers \
                or not all(t in ("sliding_attention", "full_attention") for t in types):
            raise InputError("config.json:layer_types", types if not isinstance(types, list)
                             else f"{len(types)} entries", f"must list {layers} entries, each "
                             "'sliding_attention' or 'full_attention'")
        n = types.count("sliding_attention")
        return dict(sliding_window=w if n else 0, sliding_layers=n)
    n = layers if default_sliding is None else default_sliding
    return dict(sliding_window=w if n else 0, sliding_layers=n)


def _qwen2_window(cfg: dict, layers: int) -> dict:
    """Qwen2/Qwen3 (configuration_qwen2.py): a window only with use_sliding_window, on the
    layers from max_window_layers on."""
    if not _bool(cfg, "use_sliding_window", False):
        return dict(sliding_window=0, sliding_layers=0)
    first = _int(cfg, "max_window_layers", 28)
    return _window(cfg, layers, 4096, max(0, layers - first))


def _regular_moe_layers(idx: list[int], layers: int, field: str, value: object) -> tuple[int, int]:
    """(leading dense layers, MoE frequency) of the sorted MoE layer indices ``idx``: the only
    patterns ModelSpec holds are a leading run of dense layers, then every k-th layer MoE to
    the last (ModelSpec.layer_is_moe); anything else is refused naming ``field``."""
    if not idx:
        raise InputError(field, value, f"leaves no MoE layer among {layers}")
    # one MoE layer: a frequency that reaches past the last layer
    freq = idx[1] - idx[0] if len(idx) > 1 else layers - idx[0]
    if idx != list(range(idx[0], layers, freq)):
        raise InputError(field, value, "only a regular pattern (a leading run "
                         "of dense layers, then every k-th layer MoE to the last) is supported")
    return idx[0], freq


def _moe_layer_pattern(cfg: dict, layers: int, step: int) -> tuple[int, int]:
    """(leading dense layers, MoE frequency) from ``moe_layers`` (explicit indices) or an
    interleave step (Llama 4: layers step-1, 2*step-1, ... are MoE)."""
    raw = cfg.get("moe_layers")
    idx = list(range(step - 1, layers, step)) if raw is None else raw
    if not isinstance(idx, list) or not idx or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in idx):
        raise InputError("config.json:moe_layers", raw, f"must list layer indices < {layers}")
    return _regular_moe_layers(sorted(set(idx)), layers, "config.json:moe_layers", raw)


def attention_biases(cfg: dict, default: bool = False) -> dict:
    """qkv_bias and o_bias of an attention class whose q, k, v AND o_proj are all built with
    ``bias=config.attention_bias`` (transformers' LlamaAttention and the classes copied from
    it: Qwen3, Qwen3-MoE, OLMo 2, OLMoE, Granite, GraniteMoE, Gemma 1-3, Llama 4, Cohere 1-2,
    PhiMoE). The one place a family's attention_bias becomes biases; a family whose class
    builds something else (Mistral, Phi-3: none; Qwen2: q, k, v only) does not call it."""
    attn = _bool(cfg, "attention_bias", default)
    return dict(qkv_bias=attn, o_bias=attn)


def llama_biases(cfg: dict) -> dict:
    """qkv_bias, o_bias and linear_bias of a config whose MLP also reads mlp_bias (LlamaMLP /
    GraniteMLP: gate, up and down take mlp_bias) on top of attention_biases: both flags are
    ModelSpec's linear_bias; MLP biases without attention biases are refused."""
    biases = attention_biases(cfg)
    mlp = _bool(cfg, "mlp_bias", False)
    if mlp and not biases["qkv_bias"]:
        raise InputError("config.json:mlp_bias", True, "MLP biases without attention biases "
                         "are not modelled (Llama and Granite checkpoints have neither)")
    return dict(biases, linear_bias=biases["qkv_bias"] and mlp)


# Defaults are those of each family's configuration_*.py in transformers (used when a
# config.json leaves a field out).
# the Mistral family's text models: Ministral 8B (ministral: a window on the layer_types
# layers) and Ministral 3 / Devstral 2 (ministral3, under a mistral3 wrapper's text_config)
MISTRALS = ("mistral", "ministral", "ministral3")


@_family("llama", "qwen2", "qwen3", "phi3", "olmo2", *MISTRALS)
def _llama_like(name: str, cfg: dict) -> ModelSpec:
    mt = cfg.get("model_type")
    heads = _pos(cfg, "num_attention_heads")
    if mt in (*MISTRALS, "phi3"):
        # MistralAttention / MinistralAttention / Ministral3Attention / Phi3Attention and
        # their MLPs build every projection with bias=False: attention_bias and mlp_bias
        # are not read
        biases = {}
    elif mt == "qwen2":  # Qwen2Attention: q, k and v always have biases, o_proj none
        biases = dict(qkv_bias=True)
    elif mt == "llama":  # LlamaMLP is the only one of these MLPs that reads mlp_bias
        biases = llama_biases(cfg)
    else:  # Qwen3, OLMo 2: attention_bias on q, k, v and o; MLP bias=False
        biases = attention_biases(cfg)
    layers = _pos(cfg, "num_hidden_layers")
    if mt in ("qwen2", "qwen3"):
        window = _qwen2_window(cfg, layers)
    elif mt in (*MISTRALS, "phi3"):
        # MistralConfig's sliding_window defaults to 4096 (Mistral 7B v0.1); v0.2 and later
        # write null. MinistralConfig's too, on every layer unless layer_types says
        # otherwise. Ministral3Config and Phi3Config default to none; a file's own value
        # is used.
        window = _window(cfg, layers, 4096 if mt in ("mistral", "ministral") else 0)
    else:
        window = dict(sliding_window=0, sliding_layers=0)
    return ModelSpec(
        name=name,
        layers=_pos(cfg, "num_hidden_layers"),
        hidden=_pos(cfg, "hidden_size"),
        heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        # Qwen3Config and Ministral3Config declare head_dim = 128 (configuration_qwen3.py,
        # configuration_ministral3.py), not hidden / heads as the others (and
        # Qwen3MoeConfig, which declares none) derive it
        head_dim=(_pos(cfg, "head_dim", 128) if mt in ("qwen3", "ministral3")
                  else _head_dim(cfg)),
        ffn=_pos(cfg, "intermediate_size"),
        vocab=_pos(cfg, "vocab_size"),
        mlp="swiglu",
        **biases,
        # olmo2 (modeling_olmo2.py): Llama shapes, RMSNorms on the whole q and k projections
        # (q_norm over heads * head_dim, k_norm over kv_heads * head_dim: qk_norm_full, as
        # OLMo 3's block) and norms after, not before, each block (same count).
        qk_norm=mt in ("qwen3", "olmo2"),
        qk_norm_full=mt == "olmo2",
        # phi3 (Phi-3/3.5/4, configuration_phi3.py): a Llama with fused qkv/gate_up weights
        # (same counts) and a rotary fraction, partial_rotary_factor (default 1.0).
        rope_fraction=_float(cfg, "partial_rotary_factor", 1.0) if mt == "phi3" else 1.0,
        norms_after_blocks=mt == "olmo2",
        **window,
        **_common(cfg), gated_act=_glu_act(cfg),
        description=_query_scale_note(cfg),
    )


def _query_scale_note(cfg: dict) -> str:
    """Ministral 3's rope_parameters.llama_4_scaling_beta: Ministral3Attention multiplies the
    queries by 1 + beta * log(1 + floor(position / original_max_position_embeddings))
    (modeling_ministral3.py get_llama_4_attn_scale): no parameters and one multiply per
    query element, priced as without it; the exports and the runtime refuse it
    (engines.model_features_unbuilt)."""
    rs = cfg.get("rope_scaling")
    beta = rs.get("llama_4_scaling_beta") if isinstance(rs, dict) else None
    if not beta:
        return ""
    return (f"the query scale past {rs.get('original_max_position_embeddings')} positions "
            f"(llama_4_scaling_beta {beta}) is not modelled: no parameters, and the exports "
            "and the runtime refuse it")


@_family("mixtral")
def _mixtral(name: str, cfg: dict) -> ModelSpec:
    heads = _pos(cfg, "num_attention_heads")
    ffn = _pos(cfg, "intermediate_size")
    common = _common(cfg, eps_default=1e-5)
    common["rope_theta"] = _float(cfg, "rope_theta", 1e6)
    return ModelSpec(
        name=name,
        layers=_pos(cfg, "num_hidden_layers"),
        hidden=_pos(cfg, "hidden_size"),
        heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        head_dim=_head_dim(cfg),
        ffn=ffn,
        vocab=_pos(cfg, "vocab_size"),
        moe_experts=_pos(cfg, "num_local_experts"),
        moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=ffn,
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        **_window(cfg, _pos(cfg, "num_hidden_layers")),  # MixtralConfig: none by default
        **common, gated_act=_glu_act(cfg),
    )


def qwen_moe_layer_pattern(cfg: dict, layers: int) -> tuple[int, int]:
    """(leading dense layers, MoE frequency) of a Qwen-MoE config (Qwen1.5/2-MoE, Qwen3-MoE,
    Qwen3-VL-MoE): layer i is MoE when i is not in ``mlp_only_layers`` and
    (i + 1) % decoder_sparse_step == 0 (Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer in
    transformers), so step 2 makes layers 1, 3, 5, ... MoE."""
    raw = cfg.get("mlp_only_layers") or []
    if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                            for i in raw):
        raise InputError("config.json:mlp_only_layers", raw, "must be a list of layer indices")
    step = _pos(cfg, "decoder_sparse_step", 1)
    idx = [i for i in range(layers) if i not in raw and (i + 1) % step == 0]
    field, value = (("config.json:mlp_only_layers", sorted(raw)) if raw
                    else ("config.json:decoder_sparse_step", step))
    return _regular_moe_layers(idx, layers, field, value)


@_family("qwen3_moe")
def _qwen3_moe(name: str, cfg: dict) -> ModelSpec:
    heads = _pos(cfg, "num_attention_heads")
    layers = _pos(cfg, "num_hidden_layers")
    dense, freq = qwen_moe_layer_pattern(cfg, layers)
    return ModelSpec(
        name=name,
        layers=layers,
        hidden=_pos(cfg, "hidden_size"),
        heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        head_dim=_head_dim(cfg),
        ffn=_int(cfg, "intermediate_size"),
        vocab=_pos(cfg, "vocab_size"),
        **attention_biases(cfg),  # Qwen3MoeAttention: q, k, v and o take attention_bias
        qk_norm=True,
        moe_experts=_aliased_pos(cfg, "num_experts", "num_local_experts"),
        moe_topk=_pos(cfg, "num_experts_per_tok"),
        moe_expert_ffn=_pos(cfg, "moe_intermediate_size"),
        moe_dense_layers=dense,
        moe_layer_freq=freq,
        moe_topk_norm=_bool(cfg, "norm_topk_prob", False),
        moe_aux_loss_coef=_float(cfg, "router_aux_loss_coef", 0.001, allow_zero=True),
        **_common(cfg), gated_act=_glu_act(cfg),
    )


DEEPSEEK_TOPK_METHODS = ("greedy", "group_limited_greedy", "noaux_tc")


# kimi_k2 (Kimi K2's config.json; architectures DeepseekV3ForCausalLM, auto_map to
# DeepSeek-V3's modelling code) is DeepSeek-V3 with other sizes.
# Keys whose default depends on which code reads the file: transformers' DeepseekV3Config
# (256 routed experts, 1 shared, 3 dense layers, q_lora_rank 1536; DeepseekV2Config 64, 2, 0,
# 1536) or the checkpoint's own configuration_deepseek.py (auto_map; these differ between
# copies). They were read as 0 (a dense model, no shared expert, no q LoRA) when left out;
# every released file gives them, so a file without them is refused (null q_lora_rank: none)
DEEPSEEK_GIVEN = ("n_routed_experts", "q_lora_rank")
DEEPSEEK_MOE_GIVEN = ("n_shared_experts", "first_k_dense_replace")


def _deepseek_keys_given(cfg: dict) -> int:
    """The routed expert count, once the keys whose default is ambiguous are in the file."""
    for key in DEEPSEEK_GIVEN:
        if key not in cfg:
            raise InputError(f"config.json:{key}", None, "missing; its default differs between "
                             "transformers' DeepseekV2Config / DeepseekV3Config and the "
                             "checkpoints' own configuration_deepseek.py: give it "
                             + ("(null for no q LoRA)" if key == "q_lora_rank" else
                                "(0 for a dense model)"))
    routed = _int(cfg, "n_routed_experts", 0)
    for key in DEEPSEEK_MOE_GIVEN if routed else ():
        if cfg.get(key) is None:
            raise InputError(f"config.json:{key}", None, "missing; its default differs "
                             "between transformers' DeepseekV2Config / DeepseekV3Config and "
                             "the checkpoints' own configuration_deepseek.py: give it")
    return routed


@_family("deepseek_v2", "deepseek_v3", "kimi_k2")
def _deepseek(name: str, cfg: dict) -> ModelSpec:
    heads = _pos(cfg, "num_attention_heads")
    routed = _deepseek_keys_given(cfg)
    v3 = cfg.get("model_type") in ("deepseek_v3", "kimi_k2")
    # DeepSeek's MoEGate (modeling_deepseek.py): greedy and group_limited_greedy pick the top
    # k scores, noaux_tc adds the score-correction bias (moe_router_bias)
    topk_method = _str(cfg, "topk_method", "noaux_tc" if v3 else "greedy")
    if topk_method not in DEEPSEEK_TOPK_METHODS:
        raise InputError("config.json:topk_method", topk_method,
                         "allowed: " + ", ".join(DEEPSEEK_TOPK_METHODS))
    # layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0 (DeepSeek's
    # DeepseekV2DecoderLayer / V3's, vLLM and SGLang alike): the first MoE layer is the first
    # multiple of the frequency from first_k_dense_replace on
    freq = _int(cfg, "moe_layer_freq", 1) or 1
    first_k = _int(cfg, "first_k_dense_replace", 0) if routed else 0
    # DeepseekV2Attention / V3's: attention_bias puts biases on q_a_proj, kv_a_proj_with_mqa
    # and o_proj; DeepseekV2MLP reads mlp_bias (dense layers and shared experts, not the
    # routed ones). Neither is modelled for MLA (every DeepSeek / Kimi / GLM-5 file: false).
    if _bool(cfg, "attention_bias", False):
        raise InputError("config.json:attention_bias", True, "biases on the MLA projections "
                         "(q_a_proj, kv_a_proj_with_mqa, o_proj) are not modelled")
    if not v3 and _bool(cfg, "mlp_bias", False):
        raise InputError("config.json:mlp_bias", True, "biases on the dense and shared-expert "
                         "MLPs only are not modelled")
    first_moe = -(-first_k // freq) * freq
    return ModelSpec(
        name=name,
        layers=_pos(cfg, "num_hidden_layers"),
        hidden=_pos(cfg, "hidden_size"),
        heads=heads,
        kv_heads=_pos(cfg, "num_key_value_heads", heads),
        head_dim=_pos(cfg, "v_head_dim"),
        ffn=_int(cfg, "intermediate_size"),
        vocab=_pos(cfg, "vocab_size"),
        q_lora_rank=_int(cfg, "q_lora_rank", 0),
        kv_lora_rank=_pos(cfg, "kv_lora_rank"),
        qk_nope_head_dim=_pos(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=_pos(cfg, "qk_rope_head_dim"),
        v_head_dim=_pos(cfg, "v_head_dim"),
        moe_experts=routed,
        moe_topk=_int(cfg, "num_experts_per_tok", 0) if routed else 0,
        moe_expert_ffn=_int(cfg, "moe_intermediate_size", 0) if routed else 0,
        moe_shared_experts=_int(cfg, "n_shared_experts", 0) if routed else 0,
        moe_dense_layers=first_moe, moe_layer_freq=freq,
        moe_router_bias=topk_method == "noaux_tc",
        moe_score=_str(cfg, "scoring_func", "sigmoid" if v3 else "softmax"),
        moe_topk_norm=_bool(cfg, "norm_topk_prob", v3),
        moe_routed_scale=_float(cfg, "routed_scaling_factor", 2.5 if v3 else 1.0),
        moe_groups=_int(cfg, "n_group", 8 if v3 else 0),
        moe_group_topk=_int(cfg, "topk_group", 4 if v3 else 0),
        moe_aux_loss_coef=_float(cfg, "aux_loss_alpha", 0.001, allow_zero=True),
        **_common(cfg), gated_act=_glu_act(cfg),
    )


@_family("gpt2")
def _gpt2(name: str, cfg: dict) -> ModelSpec:
    hidden = _pos(cfg, "n_embd", ..., "hidden_size")
    return ModelSpec(
        name=name,
        layers=_pos(cfg, "n_layer", ..., "num_hidden_layers"),
        hidden=hidden,
        heads=_pos(cfg, "n_head", ..., "num_attention_heads"),
        kv_heads=_pos(cfg, "n_head", ..., "num_attention_heads"),
        ffn=_pos(cfg, "n_inner", 4 * hidden),
        vocab=_pos(cfg, "vocab_size"),
        mlp="gelu",
        tied_embeddings=_bool(cfg, "tie_word_embeddings", True),
        norm="layernorm",
        norm_eps=_float(cfg, "layer_norm_epsilon", 1e-5),
        linear_bias=True,
        position="learned",
        max_position=_pos(cfg, "n_positions", ..., "max_position_embeddings"),
    )


def _gpt_neox_bias(cfg: dict) -> bool:
    """GPTNeoXAttention: query_key_value and dense take attention_bias (default true);
    GPTNeoXMLP's dense_h_to_4h and dense_4h_to_h always have biases. ModelSpec's linear_bias
    is every bias; attention_bias false (MLP biases alone) is refused."""
    if not _bool(cfg, "attention_bias", True):
        raise InputError("config.json:attention_bias", False, "an attention without biases "
                         "next to GPTNeoXMLP's (always built) MLP biases is not modelled; "
                         "allowed: true (every Pythia / GPT-NeoX file)")
    return True


@_family("gpt_neox")
def _gpt_neox(name: str, cfg: dict) -> ModelSpec:
    heads = _pos(cfg, "num_attention_heads")
    return ModelSpec(
        name=name,
        layers=_pos(cfg, "num_hidden_layers"),
        hidden=_pos(cfg, "hidden_size"),
        heads=heads,
        kv_heads=heads,
        ffn=_pos(cfg, "intermediate_size"),
        vocab=_pos(cfg, "vocab_size"),
        mlp="gelu",
        tied_embeddings=_bool(cfg, "tie_word_embeddings", False),
        norm="layernorm",
        norm_eps=_float(cfg, "layer_norm_eps", 1e-5),
        linear_bias=_gpt_neox_bias(cfg),
        rope_theta=_float(cfg, "rotary_emb_base", 10000.0, "rope_theta"),
        rope_scaling=_rope_scaling(cfg),
        rope_fraction=_float(cfg, "rotary_pct", 0.25),
    )


# Multimodal checkpoints whose language model sits under ``text_config``: wrapper
# model_type -> the text model's model_type when text_config does not name one
# (configuration_gemma3.py, _llama4.py, _mistral3.py, _llava.py, _qwen2_vl.py, _qwen2_5_vl.py).
TEXT_CONFIG_WRAPPERS = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral",
                        "llava": "llama", "qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2",
                        # configuration_qwen3_vl.py / _qwen3_vl_moe.py: a Qwen3 (MoE) text
                        # model under text_config (multimodal rotary sections only)
                        "qwen3_vl": "qwen3", "qwen3_vl_moe": "qwen3_moe"}
# text model types of the wrappers that name a family of their own
TEXT_MODEL_ALIASES = {"qwen2_vl_text": "qwen2", "qwen2_5_vl_text": "qwen2",
                      "qwen3_vl_text": "qwen3", "qwen3_vl_moe_text": "qwen3_moe"}

# Architectures recognised but not modelled, with the reason: their layers are not the
# softmax-attention transformer layers the cost model prices, or their shapes change from
# layer to layer in ways ModelSpec does not hold.
_LINEAR_ATTENTION = ("hybrid linear-attention (Gated DeltaNet) layers are not modelled; "
                     "meshplan prices softmax-attention layers only")
_STATE_SPACE = ("state-space (Mamba) layers are not modelled; meshplan prices "
                "softmax-attention layers only")
_DELTA_ATTENTION = ("hybrid linear-attention (delta-rule) layers are not modelled; "
                    "meshplan prices softmax-attention layers only")
_SHORT_CONV = ("LFM2's short-convolution layers are not modelled; meshplan prices "
               "softmax-attention layers only")
_GEMMA4 = ("per-layer head dims and key/value heads (sliding vs full layers, keys shared "
           "as values) are not modelled")
_GEMMA3N = ("Gemma 3n's AltUp and LAuReL blocks, per-layer embeddings and key/value "
            "caches shared across layers are not modelled")
UNSUPPORTED = {
    "qwen3_next": _LINEAR_ATTENTION, "qwen3_5": _LINEAR_ATTENTION,
    "qwen3_5_moe": _LINEAR_ATTENTION,
    "minimax": "MiniMax-Text-01's lightning (linear) attention layers are not modelled",
    "nemotron_h": _STATE_SPACE, "falcon_h1": _STATE_SPACE, "jamba": _STATE_SPACE,
    "mamba": _STATE_SPACE, "mamba2": _STATE_SPACE, "zamba2": _STATE_SPACE,
    "bamba": _STATE_SPACE,
    "nemotron-nas": ("per-layer block_configs (layers without attention, FFN widths that "
                     "change layer by layer) are not modelled"),
    "gemma4": _GEMMA4, "gemma4_text": _GEMMA4,
    # the text model types of wrappers refused above, named as such in a text-only file
    "qwen3_5_text": _LINEAR_ATTENTION, "qwen3_5_moe_text": _LINEAR_ATTENTION,
    # OlmoHybridGatedDeltaNet, KimiLinearDeltaAttention, BailingHybridDeltaAttention
    "olmo_hybrid": _LINEAR_ATTENTION, "kimi_linear": _DELTA_ATTENTION,
    "bailing_hybrid": _DELTA_ATTENTION,
    "falcon_mamba": _STATE_SPACE, "zamba": _STATE_SPACE,
    "recurrent_gemma": ("recurrent (RG-LRU) blocks are not modelled; meshplan prices "
                        "softmax-attention layers only"),
    "rwkv": "RWKV's recurrent time-mixing layers are not modelled",
    "xlstm": "xLSTM's recurrent blocks are not modelled",
    "lfm2": _SHORT_CONV, "lfm2_moe": _SHORT_CONV,
    "gemma3n": _GEMMA3N, "gemma3n_text": _GEMMA3N,
    "deepseek_v4": ("compressed attention (compress_ratios), hyper-connections (hc_mult) "
                    "and hash-routed MoE layers (num_hash_layers) are not modelled"),
    # ApertusMLP: up/down with the xIELU activation and its learned scalars (alpha_p, alpha_n)
    "apertus": "the xIELU MLP activation and its learned per-layer scalars are not modelled",
    # LongcatFlashExperts: zero_expert_num identity experts routed beside the real ones
    "longcat_flash": ("zero-computation experts (a token-dependent number of active "
                      "experts) are not modelled"),
    "mimo_v2_flash": ("different head counts on sliding-window and full-attention layers "
                      "and value heads narrower than keys without MLA are not modelled"),
}

# ModelSpec's own field names in the errors its checks raise, as config.json spells them
_SPEC_TO_CONFIG = {"heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
                   "hidden": "hidden_size", "layers": "num_hidden_layers",
                   "vocab": "vocab_size", "ffn": "intermediate_size",
                   "moe_topk": "num_experts_per_tok", "moe_experts": "num_experts",
                   "moe_expert_ffn": "moe_intermediate_size", "moe_groups": "n_group",
                   "moe_group_topk": "topk_group",
                   # the families that read these from the file: DeepSeek, GLM-4.5, MiniMax-M2
                   "moe_dense_layers": "first_k_dense_replace", "moe_score": "scoring_func"}


def _unwrap(cfg: dict) -> tuple[dict, str]:
    """The language model's config of a multimodal wrapper, and the note that says so."""
    mt = cfg["model_type"]
    text = cfg.get("text_config")
    if text is None:
        if mt in ("qwen2_vl", "qwen2_5_vl"):  # older files keep the text fields at the top
            text = {k: v for k, v in cfg.items() if k != "model_type"}
        else:
            raise InputError("config.json:text_config", None,
                             f"missing; a {mt} checkpoint keeps its language model there")
    require_object("config.json:text_config", text)
    text = dict(text)
    inner = text.get("model_type") or TEXT_CONFIG_WRAPPERS[mt]
    text["model_type"] = TEXT_MODEL_ALIASES.get(inner, inner)
    if "tie_word_embeddings" in cfg and "tie_word_embeddings" not in text:
        text["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    where = "text_config" if "text_config" in cfg else "its top-level text fields"
    return text, (f"language model of a {mt} checkpoint ({where}); the vision tower "
                  "is not modelled")


# How vLLM 0.33.0 reads a checkpoint's longest context: the smallest of these keys present
# (vllm/transformers_utils/model_arch_config_convertor.py:376-401), model_max_length over them
# (:403-406), times the rope scaling factor unless the scaling type leaves
# max_position_embeddings already scaled (vllm/config/model.py:2598-2634; Gemma 3 never).
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "model_max_length", "max_target_positions", "max_sequence_length",
                "max_seq_length", "seq_len")
PRESCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


def max_context(cfg: dict) -> int:
    """The longest sequence (prompt + output) an engine serves from this config; 0 unknown."""
    def size(v):
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
    for k in CONTEXT_KEYS:  # -1 or "big" was taken as no length given: never refused
        v = cfg.get(k)
        if v is not None and size(v) is None and not (
                isinstance(v, float) and v.is_integer() and v > 0):
            raise InputError(f"config.json:{k}", v, "must be a positive integer (the longest "
                             "sequence; null or left out when unknown)")
    found = [v for k in CONTEXT_KEYS if (v := size(cfg.get(k))) is not None]
    if not found:
        return 0
    n = size(cfg.get("model_max_length")) or min(found)
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(rope, dict) and "gemma3" not in str(cfg.get("model_type")):
        kind = rope.get("rope_type", rope.get("type"))
        factor = rope.get("factor")
        if kind not in PRESCALED_ROPE and isinstance(factor, (int, float)) and factor > 0:
            n = int(n * factor)
    return n


def model_from_hf_dict(cfg: object, name: str = "custom") -> ModelSpec:
    require_object("config.json", cfg)
    mt = cfg.get("model_type")
    note = ""
    if mt in TEXT_CONFIG_WRAPPERS:
        cfg, note = _unwrap(cfg)
        mt = cfg["model_type"]
    if mt not in FAMILIES:
        supported = "supported: " + ", ".join(sorted(set(FAMILIES) | set(TEXT_CONFIG_WRAPPERS)))
        if mt in UNSUPPORTED:
            raise InputError("config.json:model_type", mt, f"{UNSUPPORTED[mt]}; {supported}")
        raise InputError("config.json:model_type", mt, supported)
    cfg = _rope_parameters(cfg)
    try:
        spec = FAMILIES[mt](name, cfg)
    except InputError as e:
        raise _config_error(e) from None
    if not spec.max_context:
        spec = spec.with_(max_context=max_context(cfg))
    quant = cfg.get("quantization_config")
    if isinstance(quant, dict) and isinstance(quant.get("quant_method"), str):
        spec = spec.with_(checkpoint_quant=quant["quant_method"])
    mtp = cfg.get("num_nextn_predict_layers")
    if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp > 0:
        # DeepSeek-V3 / GLM-4.5 checkpoints carry multi-token-prediction modules: a training
        # run may add their step (DeepSeek-V3 report sec. 2.2), serving may draft with them
        note = "; ".join(x for x in (note, (
            f"{mtp} multi-token-prediction layer{'s' if mtp > 1 else ''} "
            "(num_nextn_predict_layers) not modelled: neither counted (as the published "
            "totals leave them out) nor trained or served")) if x)
    if note:
        spec = spec.with_(description="; ".join(x for x in (note, spec.description) if x))
    return spec


def _config_error(e: InputError) -> InputError:
    """A ModelSpec check's error with the config.json key names in place of its own."""
    if e.field.startswith("config.json"):
        return e
    field = _SPEC_TO_CONFIG.get(e.field)
    if field is None:
        return e
    allowed = e.allowed
    for spec_name, key in _SPEC_TO_CONFIG.items():
        allowed = re.sub(rf"\b{spec_name}\b", key, allowed)
    return InputError(f"config.json:{field}", e.value, allowed)


def _once_each(pairs: list) -> dict:
    """A JSON object whose keys are each given once: json keeps the last of two, so a
    config.json naming hidden_size twice was read as whichever came last."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise InputError(f"config.json:{k}", v, f"given twice (first {out[k]!r}); "
                             "a key may appear once in an object")
        out[k] = v
    return out


def model_from_hf_file(path: str | Path) -> ModelSpec:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        text = read_input(p, "model").decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise InputError("model", str(path), "not a text file (not UTF-8 JSON)") from None
    except OSError as e:
        raise InputError("model", str(path), f"cannot read file ({e.strerror})") from None
    # the model's name is its folder's (or file's): bytes that are not UTF-8 in it (a file
    # name from another locale) are written as \xNN, so the scripts it goes into can be
    name = p.parent.name if p.name == "config.json" else p.stem
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    try:
        try:
            cfg = json.loads(text, object_pairs_hook=_once_each)
        except json.JSONDecodeError as e:
            raise InputError("model", str(path), f"not valid JSON (line {e.lineno} column "
                             f"{e.colno}: {e.msg})") from None
        except RecursionError:  # [[[[...: json's decoder recurses once per level
            raise InputError("model", str(path), "not valid JSON (nested too deeply)") from None
        return model_from_hf_dict(cfg, name=name)
    except InputError as e:
        # name the file the user gave where it is not called config.json
        if p.name != "config.json" and e.field.startswith("config.json"):
            raise InputError(p.name + e.field[len("config.json"):], e.value, e.allowed) from None
        raise


from . import hf_families  # noqa: E402,F401  (registers gpt_oss, gemma*, llama4_text, glm4_moe)
from . import hf_families_more  # noqa: E402,F401  (qwen2_moe, olmoe, granite*, cohere*, ...)
from . import hf_families_legacy  # noqa: E402,F401  (bloom, opt, falcon, mpt, phi, olmo)
from . import hf_families_dense  # noqa: E402,F401  (glm4, internlm2, ..., exaone4)
from . import hf_families_recent  # noqa: E402,F401  (minimax_m2, deepseek_v32, glm_moe_dsa)
