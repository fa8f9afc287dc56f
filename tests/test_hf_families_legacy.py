"""GPT-style families (meshplan/specs/hf_families_legacy.py): bloom, opt, falcon, mpt, phi,
olmo. Parameter counts against the published ones, the structures each adds (ALiBi, an
embedding LayerNorm, learned positions with OPT's offset, two-norm parallel blocks,
parameter-free LayerNorm, ReLU MLPs), their refusal by the exports, and a plan per family
through the CLI.

Configs below carry the shape fields of the hub config.json files named next to them
(written from the hub files' values; no hub access here); field names and defaults were read
from transformers' src/transformers/models/{falcon,mpt}/configuration_*.py and llm-foundry's
llmfoundry/models/mpt/configuration_mpt.py. Tolerances follow the published figure's digits:
"41.8B" holds to half a unit of its last digit (0.05B); a figure a card truncates bounds the
count from below."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from meshplan.cost.flops import matmul_params_per_token
from meshplan.engines import model_features_unbuilt
from meshplan.errors import InputError
from meshplan.specs.hf_config import FAMILIES, model_from_hf_dict

B = 1e9

# huggingface.co/bigscience/bloom/blob/main/config.json (and bloom-7b1)
BLOOM = {"model_type": "bloom", "n_embed": 14336, "n_layer": 70, "num_attention_heads": 112,
         "vocab_size": 250880, "n_inner": None, "layer_norm_epsilon": 1e-5,
         "apply_residual_connection_post_layernorm": False, "pretraining_tp": 4}
BLOOM_7B1 = dict(BLOOM, n_embed=4096, n_layer=30, num_attention_heads=32, pretraining_tp=1)
# huggingface.co/facebook/opt-125m/blob/main/config.json (the others: opt-{13b,30b,66b})
OPT_125M = {"model_type": "opt", "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "ffn_dim": 3072, "vocab_size": 50272,
            "max_position_embeddings": 2048, "word_embed_proj_dim": 768,
            "do_layer_norm_before": True, "activation_function": "relu", "enable_bias": True}
OPT_13B = dict(OPT_125M, hidden_size=5120, num_hidden_layers=40, num_attention_heads=40,
               ffn_dim=20480, word_embed_proj_dim=5120)
OPT_30B = dict(OPT_125M, hidden_size=7168, num_hidden_layers=48, num_attention_heads=56,
               ffn_dim=28672, word_embed_proj_dim=7168)
OPT_66B = dict(OPT_125M, hidden_size=9216, num_hidden_layers=64, num_attention_heads=72,
               ffn_dim=36864, word_embed_proj_dim=9216)
# huggingface.co/tiiuae/falcon-7b/blob/main/config.json (model_type falcon since the hub
# files moved to transformers' FalconConfig)
FALCON_7B = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
             "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True,
             "new_decoder_architecture": False, "parallel_attn": True, "bias": False,
             "alibi": False, "layer_norm_epsilon": 1e-5}
# huggingface.co/tiiuae/falcon-40b and falcon-180B config.json
FALCON_40B = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
              "num_kv_heads": 8, "num_hidden_layers": 60, "vocab_size": 65024,
              "new_decoder_architecture": True, "parallel_attn": True, "bias": False,
              "alibi": False}
FALCON_180B = dict(FALCON_40B, hidden_size=14848, num_attention_heads=232,
                   num_hidden_layers=80)
# huggingface.co/mosaicml/mpt-7b/blob/main/config.json and mpt-30b
MPT_7B = {"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
          "expansion_ratio": 4, "max_seq_len": 2048, "vocab_size": 50432,
          "learned_pos_emb": True, "no_bias": True, "norm_type": "low_precision_layernorm",
          "attn_config": {"alibi": True, "alibi_bias_max": 8, "attn_type": "multihead_attention",
                          "clip_qkv": None, "qk_ln": False}}
MPT_30B = dict(MPT_7B, d_model=7168, n_heads=64, n_layers=48, max_seq_len=8192)
# huggingface.co/microsoft/phi-2 and phi-1_5 config.json
PHI_2 = {"model_type": "phi", "hidden_size": 2560, "intermediate_size": 10240,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
         "vocab_size": 51200, "partial_rotary_factor": 0.4, "hidden_act": "gelu_new",
         "qk_layernorm": False, "tie_word_embeddings": False}
PHI_15 = dict(PHI_2, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
              partial_rotary_factor=0.5)
# huggingface.co/allenai/OLMo-7B-hf and OLMo-1B-hf config.json
OLMO_7B = {"model_type": "olmo", "hidden_size": 4096, "intermediate_size": 11008,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
           "vocab_size": 50304, "tie_word_embeddings": False, "attention_bias": False,
           "clip_qkv": None}
OLMO_1B = dict(OLMO_7B, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=16, num_key_value_heads=16, tie_word_embeddings=True)

# StableLmConfig's documented defaults (transformers 5.24 configuration_stablelm.py,
# checkpoint stabilityai/stablelm-3b-4e1t), and StableLM 2 1.6B's shape on them
STABLELM_3B = {"model_type": "stablelm", "vocab_size": 50304, "intermediate_size": 6912,
               "hidden_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 32,
               "num_key_value_heads": 32, "layer_norm_eps": 1e-5, "rope_theta": 10000,
               "partial_rotary_factor": 0.25, "use_qkv_bias": False,
               "use_parallel_residual": False, "qk_layernorm": False,
               "tie_word_embeddings": False}
STABLELM2_1_6B = dict(STABLELM_3B, vocab_size=100352, intermediate_size=5632,
                      hidden_size=2048, num_hidden_layers=24, use_qkv_bias=True)


def _emb(m) -> int:
    return m.vocab * m.hidden


# exact published counts: (config, count, source)
EXACT = [
    (BLOOM, 176_247_271_424, "BLOOM paper (arXiv 2211.05100) / bigscience/bloom card: "
     "176,247,271,424 parameters"),
    (BLOOM_7B1, 7_069_016_064, "bigscience/bloom-7b1 card: 7,069,016,064 parameters"),
    (MPT_7B, 6_649_286_656, "llm-foundry / mosaicml/mpt-7b: 6,649,286,656 parameters"),
    (OPT_125M, 125_239_296, "sum(p.numel()) of transformers' OPTForCausalLM for "
     "facebook/opt-125m"),
]


@pytest.mark.parametrize("cfg,count,source", EXACT)
def test_exact_counts(cfg, count, source):
    assert model_from_hf_dict(cfg).total_params() == count, source


# (config, published total, tolerance, vocab matrices the figure adds or leaves out, source)
TOTALS = [
    # Falcon ties the output layer (FalconForCausalLM._tied_weights_keys = ["lm_head.weight"];
    # the files set no tie_word_embeddings, so PretrainedConfig's true applies), but its hub
    # safetensors store lm_head.weight beside the embedding and the hub pages count both:
    # the tied model holds 6.92B / 41.30B / 178.56B
    (FALCON_7B, 7.22 * B, 0.005 * B, 1, "hf.co/tiiuae/falcon-7b: 7.22B params"),
    (FALCON_40B, 41.8 * B, 0.05 * B, 1, "hf.co/tiiuae/falcon-40b: 41.8B params"),
    (FALCON_180B, 179.5 * B, 0.05 * B, 1, "hf.co/tiiuae/falcon-180B: 179.5B params"),
    (OLMO_7B, 6.89 * B, 0.005 * B, 0, "hf.co/allenai/OLMo-7B-hf: 6.89B params"),
    (OLMO_1B, 1.18 * B, 0.005 * B, 0, "hf.co/allenai/OLMo-1B-hf: 1.18B params"),
    (OPT_13B, 13 * B, 0.5 * B, 0, "OPT paper (arXiv 2205.01068) table 1: 13B (the weights "
     "hold 12.85B)"),
    (OPT_66B, 66 * B, 0.5 * B, 0, "OPT paper table 1: 66B (65.7B held)"),
]


@pytest.mark.parametrize("cfg,total,tol,extra,source", TOTALS)
def test_totals_match_published(cfg, total, tol, extra, source):
    m = model_from_hf_dict(cfg)
    assert m.total_params() + extra * _emb(m) == pytest.approx(total, abs=tol), source


def test_truncated_cards():
    # MPT-30B: "29.95B" (the count is 29.957B: the figure truncates); OPT-30B: 30B class,
    # 29.97B held; Phi-2 / Phi-1.5 cards: 2.7B / 1.3B parameters (2.78B / 1.42B held, the
    # lm_head bias of 51,200 included)
    assert 29.95 * B <= model_from_hf_dict(MPT_30B).total_params() < 29.96 * B
    assert 29.9 * B <= model_from_hf_dict(OPT_30B).total_params() < 30.0 * B
    phi2, phi15 = model_from_hf_dict(PHI_2), model_from_hf_dict(PHI_15)
    # sum(p.numel()) of transformers' PhiForCausalLM: 2,779,683,840 and 1,418,270,720
    assert phi2.total_params() == 2_779_683_840
    assert phi15.total_params() == 1_418_270_720


def test_bloom_alibi_and_embedding_norm():
    m = model_from_hf_dict(BLOOM)
    assert m.position == "alibi" and m.embedding_norm and m.tied_embeddings
    assert m.ffn == 4 * 14336 and m.linear_bias and m.norm == "layernorm"
    # the embedding LayerNorm: weight and bias of hidden each, not a matrix product
    assert m.total_params() - m.with_(embedding_norm=False).total_params() == 2 * 14336
    assert matmul_params_per_token(m) == matmul_params_per_token(m.with_(embedding_norm=False))
    with pytest.raises(InputError, match="apply_residual_connection_post_layernorm"):
        model_from_hf_dict(dict(BLOOM, apply_residual_connection_post_layernorm=True))


def test_opt_positions_offset_and_relu():
    m = model_from_hf_dict(OPT_125M)
    assert m.position == "learned" and m.max_position == 2048 + 2 and m.ungated_act == "relu"
    assert m.total_params() - m.with_(max_position=2048).total_params() == 2 * 768
    with pytest.raises(InputError, match="word_embed_proj_dim"):  # OPT-350m
        model_from_hf_dict(dict(OPT_125M, hidden_size=1024, word_embed_proj_dim=512))
    with pytest.raises(InputError, match="do_layer_norm_before"):
        model_from_hf_dict(dict(OPT_125M, do_layer_norm_before=False))
    with pytest.raises(InputError, match="activation_function"):
        model_from_hf_dict(dict(OPT_125M, activation_function="silu"))


def test_falcon_attention_and_parallel_norms():
    f7, f40 = model_from_hf_dict(FALCON_7B), model_from_hf_dict(FALCON_40B)
    assert f7.kv_heads == 1 and f7.parallel_block and f7.extra_layer_norms == 0
    assert f40.kv_heads == 8 and f40.parallel_block and f40.extra_layer_norms == 1
    # ln_attn and ln_mlp, LayerNorms with bias: 4 * hidden a layer; one for Falcon-7B
    assert f40.layer_norm_params() == 2 * 8192 and f7.layer_norm_params() == 0
    mha = model_from_hf_dict(dict(FALCON_7B, multi_query=False))
    assert mha.kv_heads == 71
    rw = model_from_hf_dict(dict(FALCON_7B, alibi=True, parallel_attn=False, bias=True))
    assert rw.position == "alibi" and not rw.parallel_block and rw.linear_bias
    with pytest.raises(InputError, match="parallel_attn"):
        model_from_hf_dict(dict(FALCON_40B, parallel_attn=False))


def test_mpt_positions_and_biases():
    m = model_from_hf_dict(MPT_7B)
    # alibi switches learned_pos_emb off (llm-foundry), so no 2,048-row table
    assert m.position == "alibi" and m.max_position == 0
    assert m.norm == "layernorm_nobias" and not m.linear_bias and m.tied_embeddings
    learned = model_from_hf_dict(dict(MPT_7B, attn_config={"alibi": False}))
    assert learned.position == "learned"
    assert learned.total_params() - m.total_params() == 2048 * 4096
    biased = model_from_hf_dict(dict(MPT_7B, no_bias=False))
    assert biased.linear_bias and biased.norm == "layernorm"
    gqa = model_from_hf_dict(dict(MPT_7B, attn_config={"alibi": True, "kv_n_heads": 8,
                                                        "attn_type": "grouped_query_attention"}))
    assert gqa.kv_heads == 8
    with pytest.raises(InputError, match="ffn_config.ffn_type"):
        model_from_hf_dict(dict(MPT_7B, ffn_config={"ffn_type": "mptglu"}))
    with pytest.raises(InputError, match="learned_pos_emb"):
        model_from_hf_dict(dict(MPT_7B, attn_config={"alibi": False}, learned_pos_emb=False))


def test_phi_parallel_block_and_partial_rotary():
    m = model_from_hf_dict(PHI_2)
    assert m.parallel_block and m.linear_bias and m.norm == "layernorm"
    assert m.rope_fraction == 0.4 and not m.tied_embeddings and m.mlp == "gelu"
    qk = model_from_hf_dict(dict(PHI_2, qk_layernorm=True))
    # q_layernorm and k_layernorm: LayerNorm(head_dim) with bias each
    assert qk.total_params() - m.total_params() == 32 * 2 * 2 * 80


def test_olmo_layernorm_has_no_parameters():
    m = model_from_hf_dict(OLMO_7B)
    assert m.norm == "layernorm_noparams" and m.norm_params(4096) == 0
    # the same shapes with RMSNorm weights would hold (2 * 32 + 1) * 4096 more
    assert m.with_(norm="rmsnorm").total_params() - m.total_params() == 65 * 4096
    with pytest.raises(InputError, match="attention_bias"):
        model_from_hf_dict(dict(OLMO_7B, attention_bias=True))


@pytest.mark.parametrize("cfg,feature", [
    (BLOOM, "ALiBi"), (BLOOM, "embedding LayerNorm"), (OPT_125M, "relu MLP activation"),
    (FALCON_40B, "second norm in the parallel block"), (MPT_7B, "ALiBi"),
    (PHI_2, "parallel attention/MLP blocks"), (PHI_2, "output-layer bias"),
    (OLMO_7B, "non-parametric LayerNorm")])
def test_exports_refuse_what_they_cannot_build(cfg, feature):
    assert feature in model_features_unbuilt(model_from_hf_dict(cfg))


def test_registered():
    for mt in ("bloom", "opt", "falcon", "mpt", "phi", "olmo", "stablelm"):
        assert mt in FAMILIES


@pytest.mark.parametrize("cfg", [BLOOM_7B1, OPT_13B, FALCON_7B, MPT_7B, PHI_2, OLMO_1B,
                                 STABLELM2_1_6B],
                         ids=lambda c: c["model_type"])
def test_cli_plans_each_family(cfg, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "plan", "--model", str(path),
                        "--gpus", "8xH100-SXM-80GB", "--seq-len", "2048", "--global-batch",
                        "64", "--top", "1", "--rerank", "0"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("cfg,field", [
    (dict(FALCON_7B, bias="no"), "config.json:bias"),
    (dict(MPT_7B, attn_config=[1]), "config.json:attn_config"),
    (dict(OPT_125M, hidden_size=1024, word_embed_proj_dim=512), "config.json:word_embed_proj_dim"),
    (dict(BLOOM_7B1, apply_residual_connection_post_layernorm="yes"),
     "config.json:apply_residual_connection_post_layernorm")])
def test_bad_fields_are_one_line_with_exit_2(cfg, field, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "plan", "--model", str(path),
                        "--gpus", "8xH100-SXM-80GB", "--seq-len", "2048", "--global-batch",
                        "64"], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and field in lines[0], p.stderr


def test_stablelm_layernorms_partial_rotary_and_qkv_bias():
    """StableLmDecoderLayer (modeling_stablelm.py): LayerNorms with bias (two a layer, one
    with use_parallel_residual), SwiGLU without biases, q/k/v biases with use_qkv_bias,
    rotary on a quarter of each head. stablelm was refused as an unknown model_type."""
    m = model_from_hf_dict(STABLELM_3B)
    h, f, layers = 2560, 6912, 32
    assert m.total_params() == layers * (4 * h * h + 3 * h * f + 2 * 2 * h) + 2 * h \
        + 2 * 50304 * h
    assert m.rope_fraction == 0.25 and m.norm == "layernorm"
    two = model_from_hf_dict(STABLELM2_1_6B)
    assert two.total_params() == pytest.approx(1.6 * B, abs=0.05 * B)  # "1.6B" (its name)
    assert two.qkv_bias and not two.o_bias
    par = model_from_hf_dict(dict(STABLELM_3B, use_parallel_residual=True))
    assert m.total_params() - par.total_params() == layers * 2 * h  # one LayerNorm fewer
    with pytest.raises(InputError) as e:
        model_from_hf_dict(dict(STABLELM_3B, qk_layernorm=True))
    assert e.value.field == "config.json:qk_layernorm"
