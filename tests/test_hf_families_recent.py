"""2025-2026 families (meshplan/specs/hf_families_recent.py and hf_config's Qwen3-VL
wrappers): parameter counts against the published ones, what each file adds, and the
architectures refused with their reason.

Configs carry the shape fields of the hub files as mirrored verbatim in
ai-dynamo/aiconfigurator at 095f58a5 (aic-core/src/aiconfigurator_core/model_configs/
<Org>--<Model>_config.json; no hub access here)."""

from __future__ import annotations

import json

import pytest

from meshplan.cost.flops import matmul_params_per_token
from meshplan.engines import model_features_unbuilt
from meshplan.errors import InputError
from meshplan.specs.hf_config import model_from_hf_dict, model_from_hf_file

B = 1e9

MINIMAX_M25 = {"model_type": "minimax_m2", "num_hidden_layers": 62, "hidden_size": 3072,
               "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
               "intermediate_size": 1536, "vocab_size": 200064, "num_experts_per_tok": 8,
               "num_local_experts": 256, "rope_theta": 5000000, "rotary_dim": 64,
               "tie_word_embeddings": False, "use_qk_norm": True, "qk_norm_type": "per_layer",
               "use_routing_bias": True, "shared_intermediate_size": 0,
               "scoring_func": "sigmoid"}
GLM5 = {"model_type": "glm_moe_dsa", "first_k_dense_replace": 3, "head_dim": 64,
        "hidden_size": 6144, "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048,
        "intermediate_size": 12288, "kv_lora_rank": 512, "moe_intermediate_size": 2048,
        "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 256, "n_shared_experts": 1,
        "norm_topk_prob": True, "num_attention_heads": 64, "num_experts_per_tok": 8,
        "num_hidden_layers": 78, "num_key_value_heads": 64, "q_lora_rank": 2048,
        "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "routed_scaling_factor": 2.5,
        "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 1,
        "topk_method": "noaux_tc", "v_head_dim": 256, "vocab_size": 154880,
        "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"}}
DEEPSEEK_V32 = {"model_type": "deepseek_v32", "first_k_dense_replace": 3, "hidden_size": 7168,
                "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048,
                "intermediate_size": 18432, "kv_lora_rank": 512, "moe_intermediate_size": 2048,
                "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
                "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128,
                "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
                "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
                "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc",
                "v_head_dim": 128, "vocab_size": 129280}
QWEN3_30B_A3B_TEXT = {"head_dim": 128, "hidden_size": 2048, "intermediate_size": 6144,
                      "moe_intermediate_size": 768, "norm_topk_prob": True,
                      "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
                      "num_hidden_layers": 48, "num_key_value_heads": 4, "vocab_size": 151936,
                      "decoder_sparse_step": 1, "mlp_only_layers": []}

# Ministral3Config's documented defaults (transformers 5.24 configuration_ministral3.py,
# checkpoint mistralai/Ministral-3-8B-Base-2512), rope_parameters as its __post_init__
# writes them; Ministral 3 and Devstral 2 files put this under a mistral3 text_config
MINISTRAL3_8B = {"model_type": "ministral3", "vocab_size": 131072, "hidden_size": 4096,
                 "intermediate_size": 14336, "num_hidden_layers": 34,
                 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                 "max_position_embeddings": 262144, "rms_norm_eps": 1e-5,
                 "tie_word_embeddings": False, "sliding_window": None,
                 "rope_parameters": {"type": "yarn", "rope_theta": 1000000.0, "factor": 16.0,
                                     "original_max_position_embeddings": 16384,
                                     "beta_fast": 32.0, "beta_slow": 1.0,
                                     "mscale_all_dim": 1.0, "mscale": 1.0,
                                     "llama_4_scaling_beta": 0.1}}
# Ministral-8B-Instruct-2410's shapes with MinistralConfig's layer_types (every other
# layer sliding), cut to 4 layers
MINISTRAL_8B_4 = {"model_type": "ministral", "vocab_size": 131072, "hidden_size": 4096,
                  "intermediate_size": 12288, "num_hidden_layers": 4, "num_attention_heads": 32,
                  "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 32768,
                  "layer_types": ["sliding_attention", "full_attention"] * 2,
                  "rope_theta": 100000000.0}


def test_ministral3_is_a_mistral_text_model():
    """Ministral3ForCausalLM (modeling_ministral3.py): Mistral's layer (no biases, SwiGLU,
    RMSNorm), head_dim 128 unless the file says otherwise, no window by default, yarn
    rotary with a position-dependent query scale (llama_4_scaling_beta: no parameters).
    It was refused as an unknown model_type, also under a mistral3 wrapper."""
    m = model_from_hf_dict(MINISTRAL3_8B)
    h, f, q, kv, layers, v = 4096, 14336, 32 * 128, 8 * 128, 34, 131072
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * f + 2 * h
    assert m.total_params() == layers * per_layer + h + 2 * v * h
    assert (m.sliding_window, m.head_dim, m.rope_theta) == (0, 128, 1e6)
    assert json.loads(m.rope_scaling)["type"] == "yarn"
    no_head_dim = {k: v for k, v in MINISTRAL3_8B.items() if k != "head_dim"}
    assert model_from_hf_dict(no_head_dim) == m  # Ministral3Config: head_dim 128
    wrapped = model_from_hf_dict({"model_type": "mistral3", "text_config": MINISTRAL3_8B})
    assert wrapped.total_params() == m.total_params()
    assert "vision tower is not modelled" in wrapped.description
    assert "llama_4_scaling_beta 0.1) is not modelled" in wrapped.description
    assert "llama_4_scaling_beta" in m.description
    # the exports and the runtime would build Mistral's attention without the scale
    assert "llama_4_scaling_beta 0.1" in model_features_unbuilt(m)
    plain = dict(MINISTRAL3_8B, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    assert model_features_unbuilt(model_from_hf_dict(plain)) == ""


def test_ministral_window_follows_layer_types():
    m = model_from_hf_dict(MINISTRAL_8B_4)
    assert (m.sliding_window, m.sliding_layers) == (32768, 2)
    assert m.total_params() == model_from_hf_dict(
        dict(MINISTRAL_8B_4, model_type="mistral")).total_params()
    # MinistralConfig: without layer_types every layer slides (the window defaults to 4096)
    plain = {k: v for k, v in MINISTRAL_8B_4.items() if k not in ("layer_types",
                                                                  "sliding_window")}
    assert model_from_hf_dict(plain).sliding_window == 4096
    assert model_from_hf_dict(plain).sliding_layers == 4

# GLM-4.7-Flash (zai-org/GLM-4.7-Flash config.json as mirrored in vLLM's glm4_moe_lite
# config test; the same values are Glm4MoeLiteConfig's defaults in transformers 5.24)
GLM47_FLASH = {"model_type": "glm4_moe_lite", "vocab_size": 154880, "hidden_size": 2048,
               "intermediate_size": 10240, "moe_intermediate_size": 1536,
               "num_hidden_layers": 47, "num_attention_heads": 20, "num_key_value_heads": 20,
               "hidden_act": "silu", "rms_norm_eps": 1e-5, "attention_bias": False,
               "max_position_embeddings": 202752, "rope_theta": 1000000.0,
               "rope_scaling": None, "partial_rotary_factor": 1.0, "q_lora_rank": 768,
               "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
               "v_head_dim": 256, "n_routed_experts": 64, "n_shared_experts": 1,
               "num_experts_per_tok": 4, "norm_topk_prob": True, "routed_scaling_factor": 1.8,
               "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
               "first_k_dense_replace": 1, "num_nextn_predict_layers": 1,
               "tie_word_embeddings": False}


def test_glm47_flash_is_deepseek_v3_shaped():
    """glm4_moe_lite was refused as an unknown model_type. Its layer is DeepSeek-V3's (MLA,
    sigmoid router with a score-correction bias, one shared expert, one dense layer first)."""
    m = model_from_hf_dict(GLM47_FLASH)
    assert m.total_params() == pytest.approx(30 * B, rel=0.01)  # "30B-A3B" (model card)
    assert (m.moe_experts, m.moe_topk, m.moe_shared_experts, m.num_moe_layers) == (64, 4, 1, 46)
    assert (m.q_lora_rank, m.kv_lora_rank, m.v_head_dim) == (768, 512, 256)
    assert m.moe_router_bias and m.moe_score == "sigmoid" and m.moe_routed_scale == 1.8
    # transformers 5 writes mlp_layer_types (and no first_k_dense_replace): the same model
    types = ["dense"] + ["sparse"] * 46
    saved = {k: v for k, v in GLM47_FLASH.items() if k != "first_k_dense_replace"}
    assert model_from_hf_dict(dict(saved, mlp_layer_types=types)) == m
    two = model_from_hf_dict(dict(saved, mlp_layer_types=["dense"] * 2 + ["sparse"] * 45))
    assert two.num_moe_layers == 45
    # Glm4MoeLiteConfig's rms_norm_eps (1e-5), not DeepSeek-V3's 1e-6, when the file has none
    assert model_from_hf_dict({k: v for k, v in GLM47_FLASH.items()
                               if k != "rms_norm_eps"}).norm_eps == 1e-5


@pytest.mark.parametrize("change, field", [
    (dict(mlp_layer_types=["sparse", "dense"] + ["sparse"] * 45), "mlp_layer_types"),
    (dict(mlp_layer_types=["dense", "sparse"] * 23 + ["sparse"]), "mlp_layer_types"),
    (dict(mlp_layer_types=["dense"] * 47), "mlp_layer_types"),
    (dict(mlp_layer_types=["dense"]), "mlp_layer_types"),
    # transformers reads mlp_layer_types only: a first_k_dense_replace that says otherwise
    (dict(first_k_dense_replace=3), "first_k_dense_replace")])
def test_glm47_flash_layer_patterns_outside_the_model_are_refused(change, field):
    with pytest.raises(InputError) as e:
        model_from_hf_dict(dict(GLM47_FLASH, **change))
    assert e.value.field == f"config.json:{field}"


def test_minimax_m2_counts_and_structure():
    m = model_from_hf_dict(MINIMAX_M25)
    # MiniMax-M2 model card: "230B total parameters with 10B active"
    assert m.total_params() == pytest.approx(230 * B, rel=0.01)
    assert matmul_params_per_token(m) == pytest.approx(10 * B, rel=0.05)
    assert m.num_moe_layers == 62 and m.moe_shared_experts == 0
    assert m.qk_norm and m.qk_norm_full and m.moe_router_bias and m.moe_score == "sigmoid"
    assert m.rope_fraction == 0.5 and m.head_dim == 128  # 48 heads x 128 != hidden 3072


def test_glm5_counts_and_structure():
    m = model_from_hf_dict(GLM5)
    # Z.ai's GLM-5 release: 744B parameters, 40B active
    assert m.total_params() == pytest.approx(744 * B, rel=0.005)
    assert matmul_params_per_token(m) == pytest.approx(40 * B, rel=0.03)
    assert m.is_mla and (m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim) == (192, 64, 256)
    assert m.moe_dense_layers == 3 and m.moe_shared_experts == 1
    assert m.rope_theta == 1e6  # from rope_parameters
    assert "top-2048" in m.description


def test_deepseek_v32_is_deepseek_v3_with_a_stated_gap():
    v32 = model_from_hf_dict(DEEPSEEK_V32)
    v3 = model_from_hf_dict(dict(DEEPSEEK_V32, model_type="deepseek_v3"))
    assert v32.total_params() == v3.total_params()
    assert v32.total_params() == pytest.approx(671 * B, rel=0.001)  # without the MTP module
    assert "not modelled" in v32.description and not v3.description


@pytest.mark.parametrize("wrapper, inner", [("qwen3_vl_moe", "qwen3_vl_moe_text"),
                                            ("qwen3_vl_moe", None)])
def test_qwen3_vl_moe_is_read_as_its_language_model(wrapper, inner):
    text = dict(QWEN3_30B_A3B_TEXT, **({"model_type": inner} if inner else {}))
    m = model_from_hf_dict({"model_type": wrapper, "text_config": text,
                            "tie_word_embeddings": False})
    plain = model_from_hf_dict(dict(QWEN3_30B_A3B_TEXT, model_type="qwen3_moe"))
    assert m.total_params() == plain.total_params()
    assert m.total_params() == pytest.approx(30.5 * B, abs=0.05 * B)  # Qwen3-30B-A3B card
    assert "vision tower is not modelled" in m.description


@pytest.mark.parametrize("model_type, words", [
    ("qwen3_next", "linear-attention"), ("qwen3_5_moe", "linear-attention"),
    ("nemotron_h", "state-space"), ("falcon_h1", "state-space"),
    ("nemotron-nas", "block_configs"), ("gemma4", "per-layer head dims"),
    ("mimo_v2_flash", "head counts"), ("qwen3_5_text", "linear-attention"),
    ("gemma4_text", "per-layer head dims"), ("kimi_linear", "delta-rule"),
    ("olmo_hybrid", "linear-attention"), ("lfm2", "short-convolution"),
    ("gemma3n", "AltUp"), ("gemma3n_text", "AltUp"), ("deepseek_v4", "hyper-connections"),
    ("falcon_mamba", "state-space"), ("recurrent_gemma", "RG-LRU"), ("apertus", "xIELU"),
    ("longcat_flash", "zero-computation experts")])
def test_known_architectures_outside_the_model_are_refused_with_the_reason(model_type, words):
    with pytest.raises(InputError) as e:
        model_from_hf_dict(dict(QWEN3_30B_A3B_TEXT, model_type=model_type))
    assert e.value.field == "config.json:model_type" and e.value.value == model_type
    assert words in str(e.value) and "supported: " in str(e.value)


def test_spec_checks_name_the_config_keys(tmp_path):
    bad = dict(QWEN3_30B_A3B_TEXT, model_type="qwen3_moe", num_key_value_heads=5)
    with pytest.raises(InputError) as e:
        model_from_hf_dict(bad)
    assert e.value.field == "config.json:num_key_value_heads" and e.value.value == 5
    assert "num_attention_heads (32)" in e.value.allowed
    bad = dict(QWEN3_30B_A3B_TEXT, model_type="qwen3_moe", num_experts_per_tok=256)
    with pytest.raises(InputError) as e:
        model_from_hf_dict(bad)
    assert e.value.field == "config.json:num_experts_per_tok"
    # a file not called config.json is named as given
    p = tmp_path / "my_model.json"
    p.write_text(json.dumps(dict(bad, num_experts_per_tok=8, num_attention_heads=30,
                                 head_dim=None, hidden_size=4096)))
    with pytest.raises(InputError) as e:
        model_from_hf_file(p)
    assert e.value.field == "my_model.json:num_attention_heads"


@pytest.mark.parametrize("engine", ["megatron", "torchtitan"])
def test_exports_refuse_sparse_attention_they_would_write_as_dense(engine):
    from meshplan.engines import scenario_violations
    from meshplan.specs.workload import Workload

    w = Workload(4096, 1024, "bf16")
    v32 = model_from_hf_dict(DEEPSEEK_V32)
    assert v32.dsa_topk == 2048
    said = " ".join(v.allowed for v in scenario_violations(engine, v32, w))
    assert "DeepSeek Sparse Attention" in said
    v3 = model_from_hf_dict(dict(DEEPSEEK_V32, model_type="deepseek_v3"))
    assert "Sparse" not in " ".join(v.allowed for v in scenario_violations(engine, v3, w))


@pytest.mark.parametrize("model_type", ["qwen2_vl", "qwen2_5_vl"])
def test_qwen2_vl_with_text_fields_at_the_top_is_read_as_qwen2(model_type):
    """Qwen2-VL / Qwen2.5-VL files on the hub keep the language model's fields at the top
    level beside vision_config, with no text_config (Qwen/Qwen2.5-VL-7B-Instruct
    config.json: hidden 3584, 28 layers, 28 heads, 4 kv heads, ffn 18944, vocab 152064,
    untied). Read as the Qwen2 text model: Qwen2.5-7B's shape with that vocabulary."""
    text = {"hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28,
            "num_key_value_heads": 4, "num_hidden_layers": 28, "vocab_size": 152064,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False,
            "max_position_embeddings": 128000}
    m = model_from_hf_dict({"model_type": model_type, "vision_config": {"depth": 32}, **text})
    plain = model_from_hf_dict(dict(text, model_type="qwen2"))
    assert m.total_params() == plain.total_params()
    # Qwen2.5-7B card: 7.61B with vocab 151,936; 128 more rows in each of two tables here
    assert m.total_params() == pytest.approx(7.61 * B, rel=0.01)
    assert "top-level text fields" in m.description and "vision tower" in m.description
