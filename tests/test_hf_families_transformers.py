"""The new families' parameter counts against ``sum(p.numel())`` of transformers' own model,
built from the same config on the meta device (no memory, no weights). Skipped where
transformers is not installed (it is not a meshplan dependency); run on transformers 5.24
when these families were added: every count equal (Phi's lm_head bias counted since).
InternLM2 is remote code (not in transformers) and is not built here."""

from __future__ import annotations

import pytest

from meshplan.specs.hf_config import model_from_hf_dict

import json

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


def hf_config(cfg: dict):
    kwargs = {k: v for k, v in cfg.items() if k != "model_type"}
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
