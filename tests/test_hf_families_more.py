"""More families (meshplan/specs/hf_families_more.py): parameter counts against the published
ones, and the structures each family adds (gated shared expert, full-width q/k norms, parallel
blocks, bias-free LayerNorm).

Configs below carry the shape fields of the hub config.json files named next to them (written
from the hub files' values; no hub access here). Tolerances follow the published figure's
digits: a count stated as "14.3B" holds to half a unit of its last digit (0.05B here)."""

from __future__ import annotations

import pytest

from meshplan.cost.flops import matmul_params_per_token
from meshplan.errors import InputError
from meshplan.specs.hf_config import FAMILIES, model_from_hf_dict

B = 1e9

# huggingface.co/Qwen/Qwen1.5-MoE-A2.7B/blob/main/config.json
QWEN15_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
              "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
              "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
              "vocab_size": 151936, "num_experts": 60, "num_experts_per_tok": 4,
              "decoder_sparse_step": 1, "norm_topk_prob": False}
# huggingface.co/Qwen/Qwen2-57B-A14B/blob/main/config.json
QWEN2_57B = dict(QWEN15_MOE, hidden_size=3584, intermediate_size=18944,
                 moe_intermediate_size=2560, shared_expert_intermediate_size=20480,
                 num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                 num_experts=64, num_experts_per_tok=8)
# huggingface.co/allenai/OLMoE-1B-7B-0924/blob/main/config.json
OLMOE = {"model_type": "olmoe", "hidden_size": 2048, "intermediate_size": 1024,
         "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16,
         "vocab_size": 50304, "num_experts": 64, "num_experts_per_tok": 8,
         "tie_word_embeddings": False}
# huggingface.co/ibm-granite/granite-3.0-8b-base/blob/main/config.json (and -2b-base)
GRANITE_8B = {"model_type": "granite", "hidden_size": 4096, "intermediate_size": 12800,
              "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
              "vocab_size": 49155, "tie_word_embeddings": True, "attention_bias": False,
              "mlp_bias": False, "embedding_multiplier": 12.0, "logits_scaling": 16.0}
GRANITE_2B = dict(GRANITE_8B, hidden_size=2048, intermediate_size=8192)
# huggingface.co/ibm-granite/granite-3.0-3b-a800m-base/blob/main/config.json (and -1b-a400m)
GRANITE_3B_MOE = {"model_type": "granitemoe", "hidden_size": 1536, "intermediate_size": 512,
                  "num_hidden_layers": 32, "num_attention_heads": 24, "num_key_value_heads": 8,
                  "vocab_size": 49155, "num_local_experts": 40, "num_experts_per_tok": 8,
                  "tie_word_embeddings": True}
GRANITE_1B_MOE = dict(GRANITE_3B_MOE, hidden_size=1024, num_hidden_layers=24,
                      num_attention_heads=16, num_local_experts=32)
# huggingface.co/bigcode/starcoder2-{3b,7b,15b}/blob/main/config.json
STARCODER2_3B = {"model_type": "starcoder2", "hidden_size": 3072, "intermediate_size": 12288,
                 "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,
                 "vocab_size": 49152, "sliding_window": 4096, "use_bias": True}
STARCODER2_7B = dict(STARCODER2_3B, hidden_size=4608, intermediate_size=18432,
                     num_hidden_layers=32, num_attention_heads=36, num_key_value_heads=4)
STARCODER2_15B = dict(STARCODER2_3B, hidden_size=6144, intermediate_size=24576,
                      num_hidden_layers=40, num_attention_heads=48, num_key_value_heads=4,
                      tie_word_embeddings=False)
# huggingface.co/CohereForAI/c4ai-command-r-v01/blob/main/config.json
COMMAND_R = {"model_type": "cohere", "hidden_size": 8192, "intermediate_size": 22528,
             "num_hidden_layers": 40, "num_attention_heads": 64, "num_key_value_heads": 64,
             "vocab_size": 256000, "logit_scale": 0.0625, "use_qk_norm": False}
# huggingface.co/CohereForAI/c4ai-command-r-plus/blob/main/config.json
COMMAND_R_PLUS = dict(COMMAND_R, hidden_size=12288, intermediate_size=33792,
                      num_hidden_layers=64, num_attention_heads=96, num_key_value_heads=8,
                      logit_scale=0.8333333333333334, use_qk_norm=True)
# huggingface.co/CohereForAI/c4ai-command-r7b-12-2024/blob/main/config.json
COMMAND_R7B = {"model_type": "cohere2", "hidden_size": 4096, "intermediate_size": 14336,
               "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
               "vocab_size": 256000, "sliding_window": 4096, "sliding_window_pattern": 4}
# huggingface.co/databricks/dbrx-base/blob/main/config.json
DBRX = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
        "max_seq_len": 32768, "vocab_size": 100352,
        "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4,
                       "ffn_act_fn": {"name": "silu"}}}
# huggingface.co/microsoft/Phi-3.5-MoE-instruct/blob/main/config.json
PHI35_MOE = {"model_type": "phimoe", "hidden_size": 4096, "intermediate_size": 6400,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "vocab_size": 32064, "num_local_experts": 16, "num_experts_per_tok": 2,
             "attention_bias": True, "lm_head_bias": True, "sliding_window": 131072}

# huggingface.co/baidu/ERNIE-4.5-21B-A3B-PT/blob/main/config.json
ERNIE_21B = {"model_type": "ernie4_5_moe", "hidden_size": 2560, "intermediate_size": 12288,
             "moe_intermediate_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 20,
             "num_key_value_heads": 4, "vocab_size": 103424, "moe_num_experts": 64, "moe_k": 6,
             "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
             "moe_layer_end_index": 27, "moe_layer_interval": 1, "tie_word_embeddings": True,
             "use_bias": False}
# huggingface.co/baidu/ERNIE-4.5-300B-A47B-PT/blob/main/config.json
ERNIE_300B = dict(ERNIE_21B, hidden_size=8192, intermediate_size=28672,
                  moe_intermediate_size=3584, num_hidden_layers=54, num_attention_heads=64,
                  num_key_value_heads=8, moe_k=8, moe_num_shared_experts=0,
                  moe_layer_start_index=3, moe_layer_end_index=53, tie_word_embeddings=False)
# huggingface.co/baidu/ERNIE-4.5-0.3B-PT/blob/main/config.json
ERNIE_03B = {"model_type": "ernie4_5", "hidden_size": 1024, "intermediate_size": 3072,
             "num_hidden_layers": 18, "num_attention_heads": 16, "num_key_value_heads": 2,
             "head_dim": 128, "vocab_size": 103424, "tie_word_embeddings": True}


def _emb(m) -> int:
    return m.vocab * m.hidden


# (config, published total, its tolerance, source)
TOTALS = [
    (QWEN15_MOE, 14.3 * B, 0.05 * B, "Qwen1.5-MoE-A2.7B model card: 14.3B parameters in total"),
    (QWEN2_57B, 57 * B, 0.5 * B, "Qwen2 report (arXiv 2407.10671) table 1: 57B total"),
    (OLMOE, 6.9 * B, 0.05 * B, "OLMoE paper (arXiv 2409.02060) table 1: 6.9B total"),
    (GRANITE_2B, 2.5 * B, 0.05 * B, "granite-3.0-2b-base model card: 2.5B params"),
    (GRANITE_3B_MOE, 3.3 * B, 0.05 * B, "granite-3.0-3b-a800m-base model card: 3.3B total"),
    (GRANITE_1B_MOE, 1.3 * B, 0.05 * B, "granite-3.0-1b-a400m-base model card: 1.3B total"),
    (STARCODER2_3B, 3.03 * B, 0.005 * B, "hf.co/bigcode/starcoder2-3b: 3.03B params"),
    (STARCODER2_7B, 7.17 * B, 0.005 * B, "hf.co/bigcode/starcoder2-7b: 7.17B params"),
    (STARCODER2_15B, 16 * B, 0.5 * B, "hf.co/bigcode/starcoder2-15b: 16B params (named 15B)"),
    (COMMAND_R, 35 * B, 0.5 * B, "c4ai-command-r-v01 model card: 35 billion parameters"),
    (COMMAND_R_PLUS, 104 * B, 0.5 * B, "c4ai-command-r-plus model card: 104B parameters"),
    (COMMAND_R7B, 8.03 * B, 0.005 * B, "hf.co/CohereForAI/c4ai-command-r7b-12-2024: 8.03B "
     "params (the card's '7B' names the class)"),
    (DBRX, 132 * B, 0.5 * B, "DBRX announcement / dbrx-base card: 132B total parameters"),
    (PHI35_MOE, 41.9 * B, 0.05 * B, "Phi-3.5-MoE-instruct card / Phi-3 report (arXiv "
     "2404.14219): 41.9B total"),
    (ERNIE_300B, 300 * B, 5 * B, "ERNIE-4.5-300B-A47B card: 300B total parameters (two "
     "significant figures; the weights hold 299.5B)"),
    (ERNIE_03B, 0.36 * B, 0.005 * B, "ERNIE-4.5-0.3B card: 0.36B parameters"),
]


@pytest.mark.parametrize("cfg,total,tol,source", TOTALS)
def test_totals_match_published(cfg, total, tol, source):
    assert model_from_hf_dict(cfg).total_params() == pytest.approx(total, abs=tol), source


def test_granite_8b_card_truncates():
    # granite-3.0-8b-base card: 8.1B; the weights hold 8.17B (the card truncates: its 2B
    # is 2.53B, its 3B-A800M 3.30B), so the stated digits bound the count from below
    total = model_from_hf_dict(GRANITE_8B).total_params()
    assert 8.1 * B <= total < 8.2 * B


# (config, published active, tolerance, how many vocab matrices the figure leaves out, source)
ACTIVE = [
    (QWEN15_MOE, 2.7 * B, 0.05 * B, 0, "Qwen1.5-MoE-A2.7B card: 2.7B activated"),
    (QWEN2_57B, 14 * B, 0.5 * B, 0, "Qwen2 report table 1: 14B activated"),
    (OLMOE, 1.3 * B, 0.05 * B, 0, "OLMoE paper table 1: 1.3B active"),
    (GRANITE_3B_MOE, 0.8 * B, 0.05 * B, 1, "granite-3.0 card: 800M active (without the "
     "tied embedding matrix)"),
    (GRANITE_1B_MOE, 0.4 * B, 0.05 * B, 1, "granite-3.0 card: 400M active"),
    (DBRX, 36 * B, 0.5 * B, 0, "DBRX announcement: 36B active on any input"),
    (PHI35_MOE, 6.6 * B, 0.05 * B, 0, "Phi-3.5-MoE card: 6.6B active parameters"),
]


@pytest.mark.parametrize("cfg,active,tol,emb_out,source", ACTIVE)
def test_active_match_published(cfg, active, tol, emb_out, source):
    m = model_from_hf_dict(cfg)
    assert m.active_params() - emb_out * _emb(m) == pytest.approx(active, abs=tol), source


def test_ernie_cards_truncate():
    # ERNIE 4.5 cards: 21B total / 3B activated, and "A47B"; the weights hold 21.8B / 3.35B
    # and 47.9B (the names truncate), so the stated digits bound the counts from below
    m = model_from_hf_dict(ERNIE_21B)
    assert 21 * B <= m.total_params() < 22 * B and 3 * B <= m.active_params() < 4 * B
    assert m.num_dense_layers == 1 and m.moe_shared_ffn == 2 * 1536 and m.moe_router_bias
    big = model_from_hf_dict(ERNIE_300B)
    assert 47 * B <= big.active_params() < 48 * B and big.num_dense_layers == 3
    with pytest.raises(InputError, match="moe_layer_end_index"):
        model_from_hf_dict(dict(ERNIE_21B, moe_layer_end_index=20))
    inter = model_from_hf_dict(dict(ERNIE_21B, moe_layer_interval=2))
    # transformers: MoE when (i + 1) % interval == 0 and i >= start: layers 1, 3, 5, ...
    assert [inter.layer_is_moe(i) for i in range(4)] == [False, True, False, True]


def test_qwen2_moe_shared_expert_gate_is_counted():
    m = model_from_hf_dict(QWEN15_MOE)
    # Qwen1.5-MoE blog (qwenlm.github.io/blog/qwen-moe): 2.0B activated non-embedding
    # parameters; the weights hold 2.07B (the blog truncates, as its 14.3B total does not)
    assert 2.0 * B <= m.active_params() - 2 * _emb(m) < 2.1 * B
    assert m.moe_shared_gate and m.moe_shared_ffn == 5632 and m.qkv_bias
    ungated = m.with_(moe_shared_gate=False)
    assert m.total_params() - ungated.total_params() == 24 * 2048  # Linear(hidden, 1) a layer
    assert m.active_params() - ungated.active_params() == 24 * 2048


def test_qwen2_moe_sparse_step_and_dense_layers():
    m = model_from_hf_dict(dict(QWEN15_MOE, decoder_sparse_step=2))
    # transformers: layer i is MoE when (i + 1) % step == 0
    assert [m.layer_is_moe(i) for i in range(4)] == [False, True, False, True]
    m = model_from_hf_dict(dict(QWEN15_MOE, mlp_only_layers=[0, 1]))
    assert m.num_dense_layers == 2 and m.layer_is_moe(2)
    with pytest.raises(InputError, match="mlp_only_layers"):
        model_from_hf_dict(dict(QWEN15_MOE, mlp_only_layers=[3]))


# huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json, cut to 5 layers
QWEN3_MOE_5 = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
               "moe_intermediate_size": 768, "num_hidden_layers": 5, "num_attention_heads": 32,
               "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936,
               "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True}


@pytest.mark.parametrize("model_type", ["qwen2_moe", "qwen3_moe"])
@pytest.mark.parametrize("step,mlp_only,moe", [
    (2, [], [1, 3]), (3, [], [2]), (1, [0, 1], [2, 3, 4]), (2, [1], [3])])
def test_qwen_moe_layers_follow_transformers(model_type, step, mlp_only, moe):
    """Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer (transformers): layer i is MoE when i is not
    in mlp_only_layers and (i + 1) % decoder_sparse_step == 0. qwen3_moe read step 2 as layers
    0, 2, 4 (three MoE layers of five where the model has two)."""
    cfg = dict(QWEN3_MOE_5, model_type=model_type, decoder_sparse_step=step,
               mlp_only_layers=mlp_only, shared_expert_intermediate_size=0)
    m = model_from_hf_dict(cfg)
    assert [i for i in range(5) if m.layer_is_moe(i)] == moe
    # closed form: the same layers' parameters, dense MLP (3 h f) or router + experts
    h, f, e, fe = 2048, 6144, 128, 768
    dense_mlp, moe_mlp = 3 * h * f, h * e + e * 3 * h * fe
    assert (m.total_params() - len(moe) * moe_mlp - (5 - len(moe)) * dense_mlp
            == model_from_hf_dict(dict(cfg, decoder_sparse_step=1, mlp_only_layers=[],
                                       num_experts_per_tok=1, num_experts=1,
                                       moe_intermediate_size=f)).total_params()
            - 5 * (h * 1 + 3 * h * f))


def test_qwen_moe_irregular_layers_are_refused():
    for model_type in ("qwen2_moe", "qwen3_moe"):
        with pytest.raises(InputError, match="decoder_sparse_step"):
            model_from_hf_dict(dict(QWEN3_MOE_5, model_type=model_type, decoder_sparse_step=6))
        with pytest.raises(InputError, match="mlp_only_layers"):  # layers 0, 1, 3, 4: irregular
            model_from_hf_dict(dict(QWEN3_MOE_5, model_type=model_type, mlp_only_layers=[2]))


def test_olmoe_qk_norm_spans_the_projections():
    m = model_from_hf_dict(OLMOE)
    # q_norm RMSNorm(hidden), k_norm RMSNorm(kv_heads * head_dim): 4,096 a layer, not 2 * 128
    assert m.attention_params() - m.with_(qk_norm_full=False).attention_params() == \
        2 * 2048 - 2 * 128


def test_cohere_parallel_block_and_norms():
    m = model_from_hf_dict(COMMAND_R)
    assert m.parallel_block and m.norm == "layernorm_nobias" and m.tied_embeddings
    assert m.layer_norm_params() == 0  # one LayerNorm (weight only) per layer, in attention
    assert m.total_params() - m.with_(parallel_block=False).total_params() == -40 * 8192
    # matrix parameters: the tied matrix once (as the output layer), without the norm
    # weights (one norm a layer plus the final one)
    assert matmul_params_per_token(m) == m.active_params() - 41 * 8192
    plus = model_from_hf_dict(COMMAND_R_PLUS)
    assert plus.qk_norm_full  # LayerNorm over (heads, head_dim): per-head weights
    assert plus.attention_params() - plus.with_(qk_norm=False, qk_norm_full=False) \
        .attention_params() == 96 * 128 + 8 * 128


def test_cohere2_window_pattern():
    m = model_from_hf_dict(COMMAND_R7B)
    assert (m.sliding_window, m.sliding_layers) == (4096, 24)  # 3 of every 4 layers
    types = ["sliding_attention", "sliding_attention", "sliding_attention",
             "full_attention"] * 8
    assert model_from_hf_dict(dict(COMMAND_R7B, layer_types=types)).sliding_layers == 24


def test_starcoder2_and_phimoe_layernorm_with_bias():
    sc = model_from_hf_dict(STARCODER2_3B)
    assert sc.norm == "layernorm" and sc.linear_bias and sc.mlp == "gelu" and sc.tied_embeddings
    assert (sc.sliding_window, sc.sliding_layers) == (4096, 30)
    phi = model_from_hf_dict(PHI35_MOE)
    assert phi.norm == "layernorm" and phi.qkv_bias and not phi.linear_bias
    # o_proj biases and the lm_head bias are the only weights not counted
    assert phi.total_params() + 32 * 4096 + 32064 == pytest.approx(41.873e9, abs=0.001e9)


def test_dbrx_reads_nested_configs():
    m = model_from_hf_dict(DBRX)
    assert (m.kv_heads, m.moe_experts, m.moe_topk, m.moe_expert_ffn) == (8, 16, 4, 10752)
    assert m.rope_theta == 500000 and m.norm == "layernorm_nobias" and not m.tied_embeddings
    with pytest.raises(InputError, match="ffn_config"):
        model_from_hf_dict(dict(DBRX, ffn_config=[1]))
    with pytest.raises(InputError, match="tie_word_embeddings"):
        model_from_hf_dict(dict(DBRX, tie_word_embeddings=True))


def test_granite_bias_flags():
    m = model_from_hf_dict(dict(GRANITE_8B, attention_bias=True, mlp_bias=True))
    assert m.linear_bias
    with pytest.raises(InputError, match="mlp_bias"):
        model_from_hf_dict(dict(GRANITE_8B, mlp_bias=True))


def test_new_families_registered_and_existing_unchanged():
    for mt in ("qwen2_moe", "olmoe", "granite", "granitemoe", "starcoder2", "cohere",
               "cohere2", "dbrx", "phimoe", "ernie4_5", "ernie4_5_moe"):
        assert mt in FAMILIES
    llama = model_from_hf_dict({"model_type": "llama", "hidden_size": 4096,
                                "intermediate_size": 14336, "num_hidden_layers": 32,
                                "num_attention_heads": 32, "num_key_value_heads": 8,
                                "vocab_size": 128256})
    assert llama.total_params() == 8_030_261_248  # Llama 3.1 8B, unchanged
    assert not (llama.parallel_block or llama.qk_norm_full or llama.moe_shared_gate)


def test_granite_multipliers_are_refused_by_the_exports_they_would_be_lost_in():
    """Granite 3.0 8B's config sets embedding_multiplier 12 and logits_scaling 16 (defaults
    1.0: a plain Llama). They hold no weights, so the count is a Llama's, but Megatron-LM,
    torchtitan and meshplan's runtime build none of them: the exports name them instead of
    writing a job that trains other numerics. Without them the model is a plain Llama."""
    from meshplan.engines import model_features_unbuilt
    m = model_from_hf_dict(GRANITE_8B)
    plain = model_from_hf_dict({k: v for k, v in GRANITE_8B.items()
                                if k not in ("embedding_multiplier", "logits_scaling")})
    assert m.total_params() == plain.total_params()
    assert "multipliers (Granite)" in model_features_unbuilt(m)
    assert model_features_unbuilt(plain) == ""


def test_ernie_exports_interleaved_rotary_pairs_to_megatron():
    """Bug: ERNIE 4.5 rotates interleaved pairs (2i, 2i+1; the runtime checks it against
    transformers, tests/runtime/test_hf_reference.py) but the Megatron export left Megatron's
    default rotate-half pairing; Llama keeps the default."""
    from meshplan.export.megatron import megatron_args
    from meshplan.plan import Plan
    from meshplan.scenario import Scenario, make_cluster
    from meshplan.specs.catalog.presets import preset
    from meshplan.specs.workload import Workload

    for model, want in ((model_from_hf_dict(ERNIE_03B, "ernie"), True),
                        (preset("llama3.1-8b"), False)):
        sc = Scenario(model, make_cluster("8xH100-SXM-80GB"), Workload(4096, 64), Plan(dp=8))
        flags = dict(megatron_args(sc)[0])
        assert ("--rotary-interleaved" in flags) is want, model.name


def test_qwen3_moe_reads_the_expert_count_transformers5_writes():
    """Qwen3MoeConfig (transformers 5) holds num_local_experts, num_experts being its alias
    (attribute_map), and save_pretrained writes num_local_experts: such a file was refused
    as missing num_experts. Either name gives the model; two different values are refused."""
    saved = {k: v for k, v in QWEN3_MOE_5.items() if k != "num_experts"}
    saved["num_local_experts"] = 128
    assert model_from_hf_dict(saved) == model_from_hf_dict(QWEN3_MOE_5)
    assert model_from_hf_dict(dict(QWEN3_MOE_5, num_local_experts=128)).moe_experts == 128
    with pytest.raises(InputError) as e:
        model_from_hf_dict(dict(QWEN3_MOE_5, num_local_experts=64))
    assert e.value.field == "config.json:num_local_experts"



# An attention-only GraniteMoeHybrid config: Granite 4.0 Micro's layout (every layer_types
# entry "attention", no experts, a shared MLP, rotary positions, Granite's multipliers) at
# illustrative sizes, 4 layers
GRANITE4_ATTENTION = {"model_type": "granitemoehybrid", "hidden_size": 2560,
                      "num_hidden_layers": 4, "num_attention_heads": 40,
                      "num_key_value_heads": 8, "shared_intermediate_size": 8192,
                      "intermediate_size": 8192, "num_local_experts": 0,
                      "num_experts_per_tok": 0, "vocab_size": 100352,
                      "tie_word_embeddings": True, "position_embedding_type": "rope",
                      "rope_theta": 10000000, "embedding_multiplier": 12,
                      "residual_multiplier": 0.22, "attention_multiplier": 0.0078125,
                      "logits_scaling": 10, "layer_types": ["attention"] * 4}


def test_granite4_attention_only_is_read_and_mamba_layers_refused():
    """GraniteMoeHybridDecoderLayer (modeling_granitemoehybrid.py): attention or Mamba-2,
    a shared MLP of shared_intermediate_size on every layer, experts when
    num_local_experts > 0. granitemoehybrid was refused whole as state-space, also for
    Granite 4.0 Micro, whose layers are all attention."""
    m = model_from_hf_dict(GRANITE4_ATTENTION)
    h, s, q, kv = 2560, 8192, 2560, 8 * 64
    assert m.total_params() == 4 * (h * (q + 2 * kv) + q * h + 3 * h * s + 2 * h) + h \
        + 100352 * h
    assert m.activation_multipliers and m.nope_layers == 0
    moe = model_from_hf_dict(dict(GRANITE4_ATTENTION, num_local_experts=8,
                                  num_experts_per_tok=2, intermediate_size=512))
    assert (moe.moe_experts, moe.moe_shared_ffn, moe.moe_expert_ffn) == (8, s, 512)
    assert moe.total_params() - m.total_params() == 4 * (h * 8 + 8 * 3 * h * 512)
    nope = model_from_hf_dict(dict(GRANITE4_ATTENTION, position_embedding_type=None))
    assert nope.nope_layers == 4  # no rotary embedding at all
    for types in (["attention", "mamba"] * 2, None):
        cfg = dict(GRANITE4_ATTENTION, layer_types=types)
        with pytest.raises(InputError, match="Mamba") as e:
            model_from_hf_dict(cfg)
        assert e.value.field == "config.json:layer_types"
