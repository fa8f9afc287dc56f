"""Families with local attention, GeGLU or interleaved MoE (meshplan/specs/hf_families.py):
parameter counts against the published ones, the sliding-window layer pattern each family's
transformers config derives, and the multimodal wrappers read as their language model.

Configs below carry the shape fields of the hub files named next to them (written from the
hub files' values; no hub access here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.errors import InputError
from meshplan.specs.catalog.presets import preset
from meshplan.specs.hf_config import model_from_hf_dict, model_from_hf_file

DATA = Path(__file__).parent / "data" / "hf_configs"

GEMMA_7B = {"model_type": "gemma", "hidden_size": 3072, "intermediate_size": 24576,
            "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
            "head_dim": 256, "vocab_size": 256000}  # huggingface.co/google/gemma-7b
GEMMA_2B = dict(GEMMA_7B, hidden_size=2048, intermediate_size=16384, num_hidden_layers=18,
                num_attention_heads=8, num_key_value_heads=1)  # google/gemma-2b
GEMMA2_9B = {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
             "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 256, "vocab_size": 256000, "sliding_window": 4096}  # google/gemma-2-9b
GEMMA2_27B = dict(GEMMA2_9B, hidden_size=4608, intermediate_size=36864, num_hidden_layers=46,
                  num_attention_heads=32, num_key_value_heads=16, head_dim=128)
LLAMA4_SCOUT = {"model_type": "llama4", "text_config": {
    "model_type": "llama4_text", "hidden_size": 5120, "intermediate_size": 8192,
    "intermediate_size_mlp": 16384, "num_hidden_layers": 48, "num_attention_heads": 40,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048, "num_local_experts": 16,
    "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
    "moe_layers": list(range(48))}}  # meta-llama/Llama-4-Scout-17B-16E
LLAMA4_MAVERICK = {"model_type": "llama4", "text_config": dict(
    LLAMA4_SCOUT["text_config"], num_local_experts=128, interleave_moe_layer_step=2,
    moe_layers=None)}  # meta-llama/Llama-4-Maverick-17B-128E
GLM45 = {"model_type": "glm4_moe", "hidden_size": 5120, "intermediate_size": 12288,
         "moe_intermediate_size": 1536, "num_hidden_layers": 92, "num_attention_heads": 96,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151552,
         "n_routed_experts": 160, "n_shared_experts": 1, "num_experts_per_tok": 8,
         "first_k_dense_replace": 3, "attention_bias": True, "use_qk_norm": True,
         "partial_rotary_factor": 0.5, "routed_scaling_factor": 2.5}  # zai-org/GLM-4.5
GLM45_AIR = dict(GLM45, hidden_size=4096, intermediate_size=10944, moe_intermediate_size=1408,
                 num_hidden_layers=46, n_routed_experts=128, first_k_dense_replace=1,
                 use_qk_norm=False)  # zai-org/GLM-4.5-Air
# GLM-4.5-Air's shapes cut to 4 layers, 64 heads and no head_dim in the file
GLM45_AIR_NO_HEAD_DIM = {k: v for k, v in GLM45_AIR.items() if k != "head_dim"} | dict(
    num_hidden_layers=4, num_attention_heads=64)


def _non_embedding(m) -> int:
    return m.total_params() - m.vocab * m.hidden * (1 if m.tied_embeddings else 2)


# Exact published non-embedding counts: Gemma report (arXiv 2403.08295) table 2, Gemma 2
# report (arXiv 2408.00118) table 2.
EXACT = [(GEMMA_7B, 7_751_248_896), (GEMMA_2B, 1_981_884_416), (GEMMA2_9B, 8_324_201_984),
         (GEMMA2_27B, 26_047_480_320)]


@pytest.mark.parametrize("cfg,count", EXACT)
def test_gemma_non_embedding_counts_are_exact(cfg, count):
    assert _non_embedding(model_from_hf_dict(cfg)) == count


def test_gemma2_without_its_post_norms_would_miss():
    m = model_from_hf_dict(GEMMA2_9B)
    assert _non_embedding(m.with_(extra_layer_norms=0)) != 8_324_201_984


def test_gpt_oss_presets_match_the_model_card():
    # openai.com/index/gpt-oss-model-card (table 1): 116.83B total / 5.13B active and
    # 20.91B / 3.61B; the active count leaves out the embedding lookup, keeps the unembedding
    for name, total, active in (("gpt-oss-120b", 116.83e9, 5.13e9),
                                ("gpt-oss-20b", 20.91e9, 3.61e9)):
        m = preset(name)
        assert m.total_params() == pytest.approx(total, abs=0.005e9)
        assert m.active_params() - m.vocab * m.hidden == pytest.approx(active, abs=0.005e9)
        assert (m.sliding_window, m.sliding_layers) == (128, m.layers // 2)
    f = model_from_hf_file(DATA / "gpt-oss-120b.json")
    assert f.total_params() == preset("gpt-oss-120b").total_params()


# (config, published total, published active, vocabulary matrices the active count leaves
# out, source). "17B" / "32B" / "12B" have two significant figures: 3% on the active count.
@pytest.mark.parametrize("cfg,total,active,emb_out,source", [
    (LLAMA4_SCOUT, 109e9, 17e9, 0, "Llama 4 model card: 17B active, 109B total (the vision "
     "encoder, ~1B, is in the total and not modelled)"),
    (LLAMA4_MAVERICK, 400e9, 17e9, 0, "Llama 4 model card: 17B active, 400B total"),
    (GLM45, 355e9, 32e9, 2, "GLM-4.5 report (arXiv 2508.06471): 355B total, 32B active "
     "(its MTP layer, ~3.8B, is not modelled; active without embedding and output layer)"),
    (GLM45_AIR, 106e9, 12e9, 2, "GLM-4.5 report: Air 106B total, 12B active"),
])
def test_moe_families_match_published_totals(cfg, total, active, emb_out, source):
    m = model_from_hf_dict(cfg)
    assert m.total_params() == pytest.approx(total, rel=0.02), source
    assert m.active_params() - emb_out * m.vocab * m.hidden == pytest.approx(active, rel=0.03), \
        source


def test_llama4_layer_patterns():
    scout, mav = model_from_hf_dict(LLAMA4_SCOUT), model_from_hf_dict(LLAMA4_MAVERICK)
    assert scout.num_moe_layers == 48 and scout.num_dense_layers == 0
    assert mav.num_moe_layers == 24 and not mav.layer_is_moe(0) and mav.layer_is_moe(1)
    assert "vision tower is not modelled" in scout.description
    bad = {"model_type": "llama4_text", **{k: v for k, v in LLAMA4_SCOUT["text_config"].items()
                                           if k != "model_type"}, "moe_layers": [0, 1, 5]}
    with pytest.raises(InputError, match="moe_layers"):
        model_from_hf_dict(bad)


def test_gemma3_wrapper_and_window_pattern():
    m = model_from_hf_file(DATA / "gemma-3-27b.json")
    # transformers Gemma3TextConfig: layer i slides unless (i + 1) % 6 == 0
    assert (m.sliding_window, m.sliding_layers) == (1024, 62 - 62 // 6)
    assert m.gated_act == "gelu_tanh" and m.qk_norm and m.extra_layer_norms == 2
    # Gemma 3 report (arXiv 2503.19786) table 1: 27B has 25,600M non-embedding parameters
    assert _non_embedding(m) == pytest.approx(25_600e6, rel=0.001)
    assert "gemma3" in m.description


@pytest.mark.parametrize("cfg,window,layers", [
    ({"model_type": "mistral", "sliding_window": None}, 0, 0),  # Mistral 7B v0.2+: null
    ({"model_type": "mistral"}, 4096, 32),  # MistralConfig default (v0.1)
    ({"model_type": "qwen2", "sliding_window": 4096}, 0, 0),  # use_sliding_window false
    ({"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 4096,
      "max_window_layers": 28}, 4096, 4),
    ({"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}, 0, 0),
    ({"model_type": "llama", "layer_types": ["sliding_attention"] * 32,
      "sliding_window": 512}, 0, 0),  # LlamaConfig has no window
])
def test_window_rules_of_existing_families(cfg, window, layers):
    base = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000}
    m = model_from_hf_dict({**base, **cfg})
    assert (m.sliding_window, m.sliding_layers) == (window, layers)


def test_bad_layer_types_is_one_field_error():
    cfg = dict(GEMMA2_9B, layer_types=["sliding_attention", "chunked"])
    with pytest.raises(InputError, match="layer_types"):
        model_from_hf_dict(cfg)


def test_llama4_nope_layers_are_counted_and_refused_by_the_builders():
    """Llama4TextConfig: no_rope_layers, when absent or empty, is 1 (RoPE) except on every
    4th layer (no_rope_layer_interval 4): 12 of Scout's 48 layers use no rotary positions.
    They were not recorded, so the runtime built rotary positions on every layer (the exports
    and the runtime refuse NoPE layers, as SmolLM3's)."""
    from meshplan.engines import model_features_unbuilt
    text = LLAMA4_SCOUT["text_config"]
    for flags, nope in ((None, 12), ([], 12), ([1, 0] * 24, 24), ([1] * 48, 0)):
        m = model_from_hf_dict({"model_type": "llama4",
                                "text_config": dict(text, no_rope_layers=flags)})
        assert m.nope_layers == nope
        assert ("NoPE" in model_features_unbuilt(m)) == bool(nope)


def test_llama4_chunked_attention_is_named_as_not_modelled():
    """Llama-4-Scout's config.json sets attention_chunk_size 8192; modeling_llama4.py chunks
    the attention of its RoPE layers (no_rope_layers, by default all but every 4th: 36 of
    48). meshplan charges them full causal attention and says so, with the count."""
    cfg = {"model_type": "llama4", "text_config": dict(LLAMA4_SCOUT["text_config"],
                                                       attention_chunk_size=8192)}
    m = model_from_hf_dict(cfg)
    assert "8192-key chunks on 36 of 48 layers" in m.description
    given = dict(cfg["text_config"], no_rope_layers=[1, 0] * 24)
    assert "on 24 of 48 layers" in model_from_hf_dict({"model_type": "llama4",
                                                       "text_config": given}).description
    assert "chunk" not in model_from_hf_dict(LLAMA4_SCOUT).description


def test_glm4_moe_without_head_dim_takes_hidden_over_heads():
    """Glm4MoeConfig declares no head_dim; Glm4MoeAttention uses hidden_size //
    num_attention_heads when the file gives none (modeling_glm4_moe.py). 128 was assumed:
    4,096 / 64 heads = 64-wide heads were counted (and priced) twice as wide."""
    m = model_from_hf_dict(GLM45_AIR_NO_HEAD_DIM)
    assert m.head_dim == 4096 // 64
    assert m == model_from_hf_dict(dict(GLM45_AIR_NO_HEAD_DIM, head_dim=64))
    with pytest.raises(InputError) as e:  # 4,096 / 96: give head_dim (as GLM-4.5's files do)
        model_from_hf_dict(dict(GLM45_AIR_NO_HEAD_DIM, num_attention_heads=96))
    assert e.value.field == "config.json:num_attention_heads"
