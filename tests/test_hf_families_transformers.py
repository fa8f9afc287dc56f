"""Parameter counts against ``sum(p.numel())`` of transformers' own model, built from the
same config on the meta device (no memory, no weights), for every family transformers
has: released configs cut to a few layers (the widths stay real). Skipped where
transformers is not installed (it is not a meshplan dependency); run on transformers 5.24:
every count equal but for the stated differences (score-correction biases, which
transformers keeps as buffers; DeepSeek Sparse Attention's indexer, not modelled). Each
config is also read as transformers saves it (save_pretrained's JSON). InternLM2 is remote
code (not in transformers) and is not built here."""

from __future__ import annotations

import pytest

from meshplan.specs.hf_config import model_from_hf_dict

import copy
import json
from pathlib import Path

import test_hf_families as F
import test_hf_families_dense as D
import test_hf_families_legacy as L
import test_hf_families_more as M
import test_hf_families_recent as R

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LAYER_TYPES_LLLG = (["sliding_attention"] * 3 + ["full_attention"]) * 16

# (config, parameters transformers builds that meshplan does not count)
CASES = {
    "bloom-7b1": (L.BLOOM_7B1, 0), "opt-125m": (L.OPT_125M, 0), "opt-13b": (L.OPT_13B, 0),
    "falcon-7b": (L.FALCON_7B, 0), "falcon-40b": (L.FALCON_40B, 0),
    "falcon-rw": (dict(L.FALCON_7B, alibi=True, parallel_attn=False, bias=True,
                       multi_query=False), 0),
    "mpt-7b": (L.MPT_7B, 0), "phi-2": (L.PHI_2, 0),
    "olmo-7b": (L.OLMO_7B, 0), "olmo-1b": (L.OLMO_1B, 0),
    "glm-4-9b": (D.GLM4_9B, 0), "nemotron-4-15b": (D.NEMOTRON_15B, 0),
    "smollm3-3b": (D.SMOLLM3, 0), "olmo-3-7b": (D.OLMO3_7B, 0),
    # this transformers' Exaone4Config takes the window pattern as an int, layer_types listed
    "exaone-4.0-32b": (dict(D.EXAONE4_32B, sliding_window_pattern=4,
                            layer_types=LAYER_TYPES_LLLG), 0),
    "exaone-4.0-1.2b": (dict(D.EXAONE4_1B, sliding_window_pattern=4,
                             layer_types=["full_attention"] * 30), 0),
    "qwen3-30b-a3b-5-layers": (M.QWEN3_MOE_5, 0),
    # the score-correction bias (one per routed expert and MoE layer) is a buffer in
    # transformers (Glm4MoeTopkRouter.register_buffer), a parameter in meshplan's count
    "glm-4.5-air-4-layers": (dict(F.GLM45_AIR, num_hidden_layers=4), -3 * 128),
    # no head_dim in the file: Glm4MoeAttention takes hidden_size // num_attention_heads
    "glm4_moe-without-head_dim": (F.GLM45_AIR_NO_HEAD_DIM, -3 * 128),
    "ministral-3-8b-4-layers": (dict(R.MINISTRAL3_8B, num_hidden_layers=4), 0),
    "ministral-8b-4-layers": (R.MINISTRAL_8B_4, 0),
}


def cut(cfg: dict, layers: int, key: str = "num_hidden_layers") -> dict:
    """A released config with fewer layers (the count is per layer plus the ends, so the
    widths stay real); the lists and indices that name layers are cut with it."""
    out = dict(cfg, **{key: layers})
    for per_layer in ("layer_types", "no_rope_layers", "mlp_layer_types",
                      "moe_topk", "moe_intermediate_size", "num_shared_expert"):  # Hunyuan
        if isinstance(cfg.get(per_layer), list):
            out[per_layer] = cfg[per_layer][:layers]
    if isinstance(cfg.get("moe_layers"), list):  # Llama 4
        out["moe_layers"] = [i for i in cfg["moe_layers"] if i < layers]
    if "moe_layer_end_index" in cfg:  # ERNIE 4.5: MoE to the last layer
        out["moe_layer_end_index"] = layers - 1
    return out


def data(name: str) -> dict:
    return json.loads((Path(__file__).parent / "data" / "hf_configs" / name).read_text())


def text_of(wrapped: dict) -> dict:
    """The language model of a multimodal file: transformers' causal LM of text_config."""
    return dict(wrapped["text_config"])


# The other families' released configs, cut to a few layers: meshplan's count equals
# transformers' own model except where a difference is stated (second element; negative
# where meshplan counts more)
CASES |= {
    "llama-3.1-8b": (cut(data("llama-3.1-8b.json"), 2), 0),
    "mistral-7b-v0.3": (cut(data("mistral-7b-v0.3.json"), 2), 0),
    "mistral-nemo-12b": (cut(data("mistral-nemo-12b.json"), 2), 0),
    "qwen2.5-0.5b": (cut(data("qwen2.5-0.5b.json"), 2), 0),
    "qwen3-8b": (cut(data("qwen3-8b.json"), 2), 0),
    "phi-4": (cut(data("phi-4.json"), 2), 0),
    "olmo-2-7b": (cut(data("olmo-2-7b.json"), 2), 0),
    "gemma-7b": (cut(F.GEMMA_7B, 2), 0), "gemma-2-9b": (cut(F.GEMMA2_9B, 4), 0),
    # Gemma 3's language model (Gemma3ForCausalLM; the wrapper's vision tower is not counted)
    "gemma-3-27b-text": (cut(text_of(data("gemma-3-27b.json")), 7), 0),
    "llama-4-scout-text": (cut(text_of(F.LLAMA4_SCOUT) | {"model_type": "llama4_text"}, 4), 0),
    "llama-4-maverick-text": (
        cut(text_of(F.LLAMA4_MAVERICK) | {"model_type": "llama4_text"}, 4), 0),
    "gpt-oss-120b": (cut(data("gpt-oss-120b.json"), 3), 0),
    "qwen1.5-moe-a2.7b": (cut(M.QWEN15_MOE, 2), 0), "olmoe": (cut(M.OLMOE, 2), 0),
    "granite-3-8b": (cut(M.GRANITE_8B, 2), 0), "granite-3-3b-moe": (cut(M.GRANITE_3B_MOE, 2), 0),
    "starcoder2-3b": (cut(M.STARCODER2_3B, 2), 0), "command-r": (cut(M.COMMAND_R, 2), 0),
    "command-r-plus": (cut(M.COMMAND_R_PLUS, 2), 0), "command-r7b": (cut(M.COMMAND_R7B, 4), 0),
    "dbrx": (cut(M.DBRX, 2, "n_layers"), 0), "phi-3.5-moe": (cut(M.PHI35_MOE, 2), 0),
    "ernie-4.5-21b-a3b": (cut(M.ERNIE_21B, 3), 0), "ernie-4.5-0.3b": (cut(M.ERNIE_03B, 2), 0),
    "deepseek-v2-lite": (cut(data("deepseek-v2-lite.json"), 3), 0),
    # score-correction biases: buffers in transformers (one per expert and MoE layer)
    "minimax-m2.5": (cut(R.MINIMAX_M25, 2), -2 * 256),
    # Kimi K2's file names model_type kimi_k2 and runs DeepSeek-V3's code
    "kimi-k2": (cut(data("kimi-k2.json"), 3) | {"model_type": "deepseek_v3"}, -2 * 384),
    "glm-4.7-flash": (cut(R.GLM47_FLASH, 4), -3 * 64),
    "glm-4.7-flash-no-q-lora": (cut(R.GLM47_FLASH, 4) | {"q_lora_rank": None}, -3 * 64),
    "glm4_moe_lite-defaults": ({k: v for k, v in cut(R.GLM47_FLASH, 4).items() if k not in (
        "q_lora_rank", "n_routed_experts", "n_shared_experts", "routed_scaling_factor",
        "n_group", "topk_group", "num_experts_per_tok")}, -3 * 64),
    "seed-oss-36b": (cut(D.SEED_OSS_36B, 2), 0),
    "hunyuan-mt-7b": (cut(D.HUNYUAN_MT_7B, 2), 0),
    "hunyuan-dense-biased": (cut(D.HUNYUAN_MT_7B, 2) | {"attention_bias": True}, 0),
    "hunyuan-a13b": (cut(D.HUNYUAN_A13B, 2), 0),
    "stablelm-3b-4e1t": (cut(L.STABLELM_3B, 2), 0),
    "stablelm-2-1.6b": (cut(L.STABLELM2_1_6B, 2), 0),
    "stablelm-parallel-gqa": (cut(L.STABLELM2_1_6B, 2) | {"use_parallel_residual": True,
                                                         "num_key_value_heads": 8}, 0),
    "granite-4-attention-only": (M.GRANITE4_ATTENTION, 0),
    "granite-4-attention-moe": (M.GRANITE4_ATTENTION | {
        "num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 512}, 0),
    "seed-oss-o-bias": (cut(D.SEED_OSS_36B, 2) | {"attention_out_bias": True}, 0),
    "seed-oss-every-bias": (cut(D.SEED_OSS_36B, 2) | {"attention_out_bias": True,
                                                      "mlp_bias": True}, 0),
}


def indexer_params(cfg: dict) -> int:
    """DeepSeek Sparse Attention's indexer, per layer (modeling_deepseek_v32.py /
    modeling_glm_moe_dsa.py): wq_b (q_lora_rank -> heads x head_dim), wk (hidden ->
    head_dim), k_norm (a LayerNorm: weight and bias) and weights_proj (hidden -> heads).
    meshplan charges dense MLA and says so in the description (hf_families_recent.DSA_NOTE)."""
    nh, hd, h = cfg["index_n_heads"], cfg["index_head_dim"], cfg["hidden_size"]
    return cfg["q_lora_rank"] * nh * hd + h * hd + 2 * hd + h * nh


# the indexer (not counted) less the score-correction buffers (counted), 4 layers, 3 dense
CASES |= {name: (cut(cfg, 4), 4 * indexer_params(cfg) - cfg["n_routed_experts"])
          for name, cfg in (("deepseek-v3.2", R.DEEPSEEK_V32), ("glm-5", R.GLM5))}


def hf_config(cfg: dict):
    # a copy: transformers writes into the nested rope objects it is given (rope_theta,
    # rope_type), which are the other test modules' fixtures
    kwargs = copy.deepcopy({k: v for k, v in cfg.items() if k != "model_type"})
    try:
        return transformers.AutoConfig.for_model(cfg["model_type"], **kwargs)
    except ValueError:
        pytest.skip(f"transformers {transformers.__version__} has no {cfg['model_type']}")


def built_params(hf_cfg) -> int:
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_cfg)
    return sum(p.numel() for p in model.parameters())  # tied weights once


@pytest.mark.parametrize("name", sorted(CASES))
def test_counts_equal_transformers_meta_build(name):
    cfg, uncounted = CASES[name]
    assert model_from_hf_dict(cfg).total_params() + uncounted == built_params(hf_config(cfg))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_file_transformers_saves_counts_the_same(name):
    """The config.json a run fine-tuned with this transformers writes (save_pretrained:
    to_json_string) reads as the same model: transformers 5 writes an attribute's own
    name, not the alias the hub file used (Qwen3MoeConfig: num_local_experts for
    num_experts, which was refused as missing)."""
    cfg, uncounted = CASES[name]
    hf_cfg = hf_config(cfg)
    saved = json.loads(hf_cfg.to_json_string(use_diff=False))
    assert model_from_hf_dict(saved).total_params() + uncounted == built_params(hf_cfg)
