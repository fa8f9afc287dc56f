"""Dense Llama-shaped families (meshplan/specs/hf_families_dense.py): glm4, internlm2,
nemotron, smollm3, olmo3, exaone4, seed_oss, hunyuan_v1_dense, hunyuan_v1_moe. Parameter counts against the published ones, the twist each adds
(post-norms, squared-ReLU LayerNorm MLPs, NoPE layers, sliding layers), their refusal by the
exports, and a plan per family through the CLI.

Configs below carry the shape fields of the hub config.json files named next to them
(written from the hub files' values; no hub access here); field names and defaults were read
from transformers' src/transformers/models/{glm4,nemotron,smollm3,olmo3}/configuration_*.py,
exaone4/modular_exaone4.py
and InternLM2's remote configuration_internlm2.py. Tolerances follow the published figure's
digits: "9.4B" holds to half a unit of its last digit (0.05B)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from meshplan.engines import model_features_unbuilt
from meshplan.errors import InputError
from meshplan.specs.hf_config import FAMILIES, model_from_hf_dict

B = 1e9

# huggingface.co/THUDM/GLM-4-9B-0414 and GLM-4-32B-0414 config.json
GLM4_9B = {"model_type": "glm4", "hidden_size": 4096, "intermediate_size": 13696,
           "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 2,
           "head_dim": 128, "vocab_size": 151552, "attention_bias": True,
           "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
GLM4_32B = dict(GLM4_9B, hidden_size=6144, intermediate_size=23040, num_hidden_layers=61,
                num_attention_heads=48)
# huggingface.co/internlm/internlm2-7b and internlm2-20b config.json
INTERNLM2_7B = {"model_type": "internlm2", "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "vocab_size": 92544, "bias": False, "rope_theta": 1000000,
                "rope_scaling": {"type": "dynamic", "factor": 2.0},
                "tie_word_embeddings": False}
INTERNLM2_20B = dict(INTERNLM2_7B, hidden_size=6144, intermediate_size=16384,
                     num_hidden_layers=48, num_attention_heads=48)
# Nemotron-4 15B (arXiv 2402.16819 table 1) and 340B (arXiv 2406.11704 table 1) shapes in
# NemotronConfig's fields (its defaults are the 15B's)
NEMOTRON_15B = {"model_type": "nemotron", "hidden_size": 6144, "intermediate_size": 24576,
                "num_hidden_layers": 32, "num_attention_heads": 48, "num_key_value_heads": 8,
                "vocab_size": 256000, "hidden_act": "relu2", "partial_rotary_factor": 0.5}
NEMOTRON_340B = dict(NEMOTRON_15B, hidden_size=18432, intermediate_size=73728,
                     num_hidden_layers=96, num_attention_heads=96)
# huggingface.co/HuggingFaceTB/SmolLM3-3B/blob/main/config.json
SMOLLM3 = {"model_type": "smollm3", "hidden_size": 2048, "intermediate_size": 11008,
           "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 4,
           "vocab_size": 128256, "rope_theta": 5000000.0, "tie_word_embeddings": True,
           "use_sliding_window": False, "sliding_window": None,
           "no_rope_layers": [1, 1, 1, 0] * 9}
# huggingface.co/allenai/Olmo-3-1025-7B/blob/main/config.json
OLMO3_7B = {"model_type": "olmo3", "hidden_size": 4096, "intermediate_size": 11008,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
            "vocab_size": 100278, "sliding_window": 4096, "rope_theta": 500000,
            "tie_word_embeddings": False,
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}
OLMO3_7B["layer_types"] = OLMO3_7B["layer_types"] * 8
# huggingface.co/LGAI-EXAONE/EXAONE-4.0-32B and EXAONE-4.0-1.2B config.json
EXAONE4_32B = {"model_type": "exaone4", "hidden_size": 5120, "intermediate_size": 27392,
               "num_hidden_layers": 64, "num_attention_heads": 40, "num_key_value_heads": 8,
               "head_dim": 128, "vocab_size": 102400, "sliding_window": 4096,
               "sliding_window_pattern": "LLLG", "rope_theta": 1000000.0,
               "tie_word_embeddings": False}
EXAONE4_1B = dict(EXAONE4_32B, hidden_size=2048, intermediate_size=4096, num_hidden_layers=30,
                  num_attention_heads=32, head_dim=64, sliding_window=None,
                  sliding_window_pattern=None, tie_word_embeddings=True)

# ByteDance-Seed/Seed-OSS-36B-Base config.json's shape fields (as mirrored in the Swift
# MLX port's SeedOSS test configJSON); attention_bias / attention_out_bias / the dropouts
# at SeedOssConfig's defaults, which the hub file repeats
SEED_OSS_36B = {"model_type": "seed_oss", "hidden_size": 5120, "num_hidden_layers": 64,
                "intermediate_size": 27648, "num_attention_heads": 80,
                "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-6,
                "vocab_size": 155136, "rope_theta": 10000000.0,
                "rope_scaling": {"rope_type": "default"}, "max_position_embeddings": 524288,
                "tie_word_embeddings": False}

# tencent/Hunyuan-MT-7B config.json's model fields (as mirrored in the Swift MLX port's
# HunyuanMT test fixture)
HUNYUAN_MT_7B = {"model_type": "hunyuan_v1_dense", "attention_bias": False, "head_dim": 128,
                 "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
                 "max_position_embeddings": 32768, "mlp_bias": False,
                 "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
                 "rms_norm_eps": 1e-05,
                 "rope_scaling": {"alpha": 100000.0, "beta_fast": 32, "beta_slow": 1,
                                  "factor": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                  "type": "dynamic"},
                 "rope_theta": 10000.0, "tie_word_embeddings": True, "use_cla": False,
                 "use_qk_norm": True, "use_rotary_pos_emb": True, "vocab_size": 128256}

# tencent/Hunyuan-A13B-Instruct config.json's shape and MoE fields (as mirrored in a
# profiling tool's HUNYUAN_MOE_LIST_CONFIG; tied as the hub file)
HUNYUAN_A13B = {"model_type": "hunyuan_v1_moe", "hidden_size": 4096, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                "intermediate_size": 3072, "vocab_size": 128167, "num_experts": 64,
                "moe_intermediate_size": [3072] * 32, "moe_topk": [8] * 32,
                "num_shared_expert": [1] * 32, "use_mixed_mlp_moe": True,
                "use_qk_norm": True, "tie_word_embeddings": True}


def _emb(m) -> int:
    return m.vocab * m.hidden * (1 if m.tied_embeddings else 2)


# (config, published total, tolerance, source)
TOTALS = [
    (GLM4_9B, 9.4 * B, 0.05 * B, "hf.co/THUDM/GLM-4-9B-0414: 9.4B params"),
    (GLM4_32B, 32.6 * B, 0.05 * B, "hf.co/THUDM/GLM-4-32B-0414: 32.6B params"),
    (INTERNLM2_7B, 7.74 * B, 0.005 * B, "hf.co/internlm/internlm2-7b: 7.74B params"),
    (INTERNLM2_20B, 19.9 * B, 0.05 * B, "hf.co/internlm/internlm2-20b: 19.9B params"),
    (SMOLLM3, 3.08 * B, 0.005 * B, "hf.co/HuggingFaceTB/SmolLM3-3B: 3.08B params"),
    (SEED_OSS_36B, 36 * B, 0.5 * B, "hf.co/ByteDance-Seed/Seed-OSS-36B-Base: 36B"),
]


@pytest.mark.parametrize("cfg,total,tol,source", TOTALS)
def test_totals_match_published(cfg, total, tol, source):
    assert model_from_hf_dict(cfg).total_params() == pytest.approx(total, abs=tol), source


def test_nemotron_embedding_and_non_embedding():
    # Nemotron-4 340B report (arXiv 2406.11704) table 1: 9.4B embedding, 331.6B non-embedding
    big = model_from_hf_dict(NEMOTRON_340B)
    assert _emb(big) == pytest.approx(9.4 * B, abs=0.05 * B)
    assert big.total_params() - _emb(big) == pytest.approx(331.6 * B, abs=0.05 * B)
    # Nemotron-4 15B report (arXiv 2402.16819) table 1: 12.5B non-embedding, 3.2B embedding
    # (2 * 256,000 * 6,144 = 3.146B: the paper rounds up; 0.06B off)
    m = model_from_hf_dict(NEMOTRON_15B)
    assert m.total_params() - _emb(m) == pytest.approx(12.5 * B, abs=0.05 * B)
    assert _emb(m) == pytest.approx(3.2 * B, abs=0.06 * B)
    assert m.ungated_act == "relu2" and m.mlp == "gelu" and m.norm == "layernorm"
    assert m.rope_fraction == 0.5 and not m.linear_bias and not m.tied_embeddings
    assert model_from_hf_dict(dict(NEMOTRON_15B, attention_bias=True, mlp_bias=True)).linear_bias
    with pytest.raises(InputError, match="attention_bias"):
        model_from_hf_dict(dict(NEMOTRON_15B, attention_bias=True))
    with pytest.raises(InputError, match="hidden_act"):
        model_from_hf_dict(dict(NEMOTRON_15B, hidden_act="silu"))


def test_glm4_post_norms_and_qkv_bias():
    m = model_from_hf_dict(GLM4_9B)
    assert m.extra_layer_norms == 2 and m.qkv_bias and not m.linear_bias
    assert m.rope_fraction == 0.5 and m.head_dim == 128
    # post_self_attn_layernorm and post_mlp_layernorm: RMSNorm(hidden) each, 40 layers
    assert m.total_params() - m.with_(extra_layer_norms=0).total_params() == 40 * 2 * 4096


def test_internlm2_bias_default_is_refused():
    m = model_from_hf_dict(INTERNLM2_7B)
    assert (m.kv_heads, m.rope_theta) == (8, 1e6) and not m.qkv_bias
    cfg = dict(INTERNLM2_7B)
    del cfg["bias"]  # InternLM2Config's default is bias=True (wqkv and wo)
    with pytest.raises(InputError, match="config.json:bias"):
        model_from_hf_dict(cfg)


def test_smollm3_nope_layers():
    m = model_from_hf_dict(SMOLLM3)
    assert m.nope_layers == 9 and m.sliding_window == 0 and m.tied_embeddings
    # same weights with or without positions
    assert m.total_params() == m.with_(nope_layers=0).total_params()
    # no_rope_layers absent: every no_rope_layer_interval-th layer (default 4) is NoPE
    cfg = {k: v for k, v in SMOLLM3.items() if k != "no_rope_layers"}
    assert model_from_hf_dict(dict(cfg, no_rope_layer_interval=3)).nope_layers == 12
    windowed = model_from_hf_dict(dict(SMOLLM3, use_sliding_window=True, sliding_window=4096))
    assert (windowed.sliding_window, windowed.sliding_layers) == (4096, 9)
    with pytest.raises(InputError, match="no_rope_layers"):
        model_from_hf_dict(dict(SMOLLM3, no_rope_layers=[1, 0]))


def test_olmo3_sliding_layers_and_full_qk_norms():
    m = model_from_hf_dict(OLMO3_7B)
    assert (m.sliding_window, m.sliding_layers) == (4096, 24) and m.qk_norm_full
    # allenai/Olmo-3-1025-7B: the 7B class (7.30B held); q_norm 4,096 + k_norm 4,096 a layer
    assert 7.25 * B <= m.total_params() < 7.35 * B
    assert m.attention_params() - m.with_(qk_norm=False, qk_norm_full=False) \
        .attention_params() == 2 * 4096
    default = model_from_hf_dict({k: v for k, v in OLMO3_7B.items() if k != "layer_types"})
    assert default.sliding_layers == 24  # (i + 1) % 4 != 0 slides
    with pytest.raises(InputError, match="attention_bias"):
        model_from_hf_dict(dict(OLMO3_7B, attention_bias=True))


def test_exaone4_hybrid_attention_and_nope_globals():
    # EXAONE 4.0 cards: "Number of Parameters (without embeddings): 30.95B" (32B) and
    # "1.07B" (1.2B)
    big, small = model_from_hf_dict(EXAONE4_32B), model_from_hf_dict(EXAONE4_1B)
    assert big.total_params() - _emb(big) == pytest.approx(30.95 * B, abs=0.005 * B)
    assert small.total_params() - _emb(small) == pytest.approx(1.07 * B, abs=0.005 * B)
    # LLLG: 48 local layers with rotary positions, 16 global ones without
    assert (big.sliding_window, big.sliding_layers, big.nope_layers) == (4096, 48, 16)
    assert (small.sliding_window, small.nope_layers) == (0, 0)  # no window: all rotary
    assert big.qk_norm and not big.qk_norm_full and big.norms_after_blocks
    assert model_from_hf_dict(dict(EXAONE4_32B, sliding_window_pattern=4)).sliding_layers == 48
    with pytest.raises(InputError, match="sliding_window_pattern"):
        model_from_hf_dict(dict(EXAONE4_32B, sliding_window_pattern="LXG"))


def test_olmo2_style_blocks_are_refused_by_the_exports():
    olmo2 = model_from_hf_dict(dict(OLMO3_7B, model_type="olmo2", sliding_window=None))
    assert olmo2.norms_after_blocks and olmo2.sliding_window == 0
    assert "norms after attention/MLP" in model_features_unbuilt(olmo2)
    # same weights with the norms before the blocks
    assert olmo2.total_params() == olmo2.with_(norms_after_blocks=False).total_params()


@pytest.mark.parametrize("cfg,feature", [
    (EXAONE4_1B, "norms after attention/MLP"),
    (GLM4_9B, "post-attention/post-MLP norms"), (NEMOTRON_15B, "relu2 MLP activation"),
    (SMOLLM3, "NoPE layers"), (OLMO3_7B, "sliding-window attention")])
def test_exports_refuse_what_they_cannot_build(cfg, feature):
    assert feature in model_features_unbuilt(model_from_hf_dict(cfg))


def test_registered_and_internlm2_builds():
    for mt in ("glm4", "internlm2", "nemotron", "smollm3", "olmo3", "exaone4", "seed_oss",
               "hunyuan_v1_dense", "hunyuan_v1_moe"):
        assert mt in FAMILIES
    assert model_features_unbuilt(model_from_hf_dict(INTERNLM2_7B)) == ""


@pytest.mark.parametrize("cfg", [GLM4_9B, INTERNLM2_7B, NEMOTRON_15B, SMOLLM3, OLMO3_7B,
                                 EXAONE4_1B, SEED_OSS_36B, HUNYUAN_MT_7B],
                         ids=lambda c: c["model_type"])
def test_cli_plans_each_family(cfg, tmp_path, gpus="8xH100-SXM-80GB"):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "plan", "--model", str(path),
                        "--gpus", gpus, "--seq-len", "4096", "--global-batch",
                        "64", "--top", "1", "--rerank", "0"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr


def test_seed_oss_biases_each_where_its_flag_puts_them():
    """SeedOssAttention: q, k, v take attention_bias (default true), o_proj
    attention_out_bias (default false); SeedOssMLP mlp_bias. seed_oss was refused as an
    unknown model_type."""
    m = model_from_hf_dict(SEED_OSS_36B)
    q, kv, h, f, layers = 80 * 128, 8 * 128, 5120, 27648, 64
    assert m.head_dim == 128 and m.qkv_bias and not m.o_bias and not m.linear_bias
    per_layer = h * (q + 2 * kv) + (q + 2 * kv) + q * h + 3 * h * f + 2 * h
    assert m.total_params() == layers * per_layer + h + 2 * 155136 * h
    out = model_from_hf_dict(dict(SEED_OSS_36B, attention_out_bias=True))
    assert out.total_params() - m.total_params() == layers * h
    none = model_from_hf_dict(dict(SEED_OSS_36B, attention_bias=False))
    assert m.total_params() - none.total_params() == layers * (q + 2 * kv)
    every = model_from_hf_dict(dict(SEED_OSS_36B, attention_out_bias=True, mlp_bias=True))
    assert every.total_params() - out.total_params() == layers * (2 * f + h)
    with pytest.raises(InputError) as e:  # MLP biases without the o_proj one
        model_from_hf_dict(dict(SEED_OSS_36B, mlp_bias=True))
    assert e.value.field == "config.json:mlp_bias"
    assert "dropout (attention_dropout 0.1, residual_dropout 0.1)" in m.description
    assert model_from_hf_dict(dict(SEED_OSS_36B, attention_dropout=0.0,
                                   residual_dropout=0)).description == ""


def test_hunyuan_dense_per_head_qk_norms():
    """HunYuanDenseV1Attention: q, k, v, o (attention_bias), query_layernorm and
    key_layernorm over head_dim; HunYuanDenseV1MLP without biases; tied here.
    hunyuan_v1_dense was refused as an unknown model_type."""
    m = model_from_hf_dict(HUNYUAN_MT_7B)
    q, kv, h, f, layers, d = 32 * 128, 8 * 128, 4096, 14336, 32, 128
    per_layer = h * (q + 2 * kv) + q * h + 2 * d + 3 * h * f + 2 * h
    assert m.total_params() == layers * per_layer + h + 128256 * h
    biased = model_from_hf_dict(dict(HUNYUAN_MT_7B, attention_bias=True))
    assert biased.total_params() - m.total_params() == layers * (q + 2 * kv + h)
    for key, value in (("use_qk_norm", False), ("use_cla", True)):
        with pytest.raises(InputError) as e:
            model_from_hf_dict(dict(HUNYUAN_MT_7B, **{key: value}))
        assert e.value.field == f"config.json:{key}"


def test_hunyuan_a13b_counts_and_per_layer_lists():
    """HunYuanMoEV1Moe: a softmax router (hidden x experts, no bias), num_experts experts of
    intermediate_size and one shared MLP of intermediate_size on every layer. Tencent's
    card: 80B total, 13B active. hunyuan_v1_moe was refused as an unknown model_type."""
    m = model_from_hf_dict(HUNYUAN_A13B)
    assert m.total_params() == pytest.approx(80 * B, abs=0.5 * B)
    assert m.active_params() == pytest.approx(13 * B, abs=0.5 * B)
    assert (m.moe_experts, m.moe_topk, m.moe_shared_ffn, m.num_moe_layers) == (64, 8, 3072, 32)
    h, f = 4096, 3072
    assert m.moe_layer_params() - m.attention_params() - m.layer_norm_params() == \
        h * 64 + 65 * 3 * h * f
    for key, value in (("moe_topk", [8] * 31 + [4]), ("moe_topk", [8] * 3),
                       ("moe_intermediate_size", [1536] * 32), ("num_shared_expert", 2),
                       ("use_mixed_mlp_moe", False), ("num_experts", [64] * 32)):
        with pytest.raises(InputError) as e:
            model_from_hf_dict(dict(HUNYUAN_A13B, **{key: value}))
        assert e.value.field == f"config.json:{key}", (key, value)


def test_cli_plans_hunyuan_a13b(tmp_path):  # 80B: more than 8 GPUs hold
    test_cli_plans_each_family(HUNYUAN_A13B, tmp_path, gpus="32xH100-SXM-80GB")


@pytest.mark.parametrize("cfg", [HUNYUAN_MT_7B, HUNYUAN_A13B], ids=lambda c: c["model_type"])
def test_hunyuan_qk_norms_after_rope_are_refused_by_the_exports(cfg):
    """HunYuanDenseV1Attention normalises the queries and keys after apply_rotary_pos_emb;
    the exports and the runtime build q/k norms before it (Qwen3's order) and would have
    written another model."""
    assert "q/k norms after the rotary embedding" in model_features_unbuilt(
        model_from_hf_dict(cfg))
    assert "rotary" not in model_features_unbuilt(
        model_from_hf_dict(dict(cfg, model_type="qwen3", head_dim=128)))
