"""Which biases (and norms) a config.json's flags give each family: exactly the parameters
transformers' own modeling code builds for it.

Two checks per rule: a closed form (what the flag adds, written out by hand, runs
everywhere) and ``sum(p.numel())`` of transformers' model built from the same tiny config
on the meta device (skipped where transformers is not installed: it is not a meshplan
dependency). The rules were read from transformers 5.24's modeling_*.py."""

from __future__ import annotations

import pytest

from meshplan.errors import InputError
from meshplan.specs.hf_config import model_from_hf_dict

# hidden 64, 4 heads of 16, 2 kv heads: q 64 + k 32 + v 32 = 128 qkv bias elements, o 64
TINY = dict(vocab_size=97, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, intermediate_size=96,
            max_position_embeddings=256, pad_token_id=0)
LAYERS, QKV, HIDDEN, FFN = 4, 128, 64, 96
MOE = dict(num_local_experts=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48)


def count(mt: str, **flags) -> int:
    return model_from_hf_dict(dict(TINY, model_type=mt, **flags), mt).total_params()


def hf_count(mt: str, **flags) -> int:
    """Parameters of transformers' AutoModelForCausalLM for the same config (tied weights
    once; buffers such as a score-correction bias are not parameters)."""
    torch = pytest.importorskip("torch", reason="torch is needed to build the HF model")
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed: the HF-built count is skipped "
        "(the closed-form test of the same rule still runs)")
    cfg = transformers.AutoConfig.for_model(mt, **dict(TINY, **flags))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


# ---- Mistral and Phi-3 build no bias at all (MistralAttention / Phi3Attention: q, k, v,
# o / qkv_proj, o_proj with bias=False; their MLPs bias=False); the flags are not read
NO_BIAS_FLAGS = [dict(attention_bias=True), dict(attention_bias=False),
                 dict(attention_bias=True, mlp_bias=True), dict(mlp_bias=True)]


@pytest.mark.parametrize("mt", ["mistral", "phi3"])
@pytest.mark.parametrize("flags", NO_BIAS_FLAGS, ids=lambda f: ",".join(f))
def test_mistral_phi3_attention_bias_builds_nothing(mt, flags):
    assert count(mt, **flags) == count(mt)


@pytest.mark.parametrize("mt", ["mistral", "phi3"])
@pytest.mark.parametrize("flags", NO_BIAS_FLAGS, ids=lambda f: ",".join(f))
def test_mistral_phi3_count_equals_transformers(mt, flags):
    assert count(mt, **flags) == hf_count(mt, **flags)


# ---- mlp_bias is read by LlamaMLP and GraniteMLP only: Qwen2, Qwen3, OLMo 2 and GraniteMoE
# build their MLPs (experts) with bias=False whatever it says; Qwen2's attention biases are
# fixed (q, k, v always, o never), the others' follow attention_bias (q, k, v and o)
MLP_BIAS_IGNORED = {"qwen2": 0, "qwen3": LAYERS * (QKV + HIDDEN),
                    "olmo2": LAYERS * (QKV + HIDDEN), "granitemoe": LAYERS * (QKV + HIDDEN)}


@pytest.mark.parametrize("mt", sorted(MLP_BIAS_IGNORED))
def test_mlp_bias_not_read_where_the_mlp_has_none(mt):
    extra = dict(MOE) if mt == "granitemoe" else {}
    both = count(mt, attention_bias=True, mlp_bias=True, **extra)
    assert both == count(mt, attention_bias=True, **extra)
    assert both - count(mt, **extra) == MLP_BIAS_IGNORED[mt]
    assert count(mt, mlp_bias=True, **extra) == count(mt, **extra)  # not refused either


@pytest.mark.parametrize("mt", sorted(MLP_BIAS_IGNORED))
def test_mlp_bias_ignored_count_equals_transformers(mt):
    extra = dict(MOE) if mt == "granitemoe" else {}
    for flags in (dict(attention_bias=True, mlp_bias=True), dict(mlp_bias=True)):
        assert count(mt, **flags, **extra) == hf_count(mt, **flags, **extra), flags


@pytest.mark.parametrize("mt", ["llama", "granite"])
def test_llama_granite_mlp_bias_counts_every_mlp_bias(mt):
    """LlamaMLP / GraniteMLP: gate, up and down take mlp_bias (2 * ffn + hidden per layer)."""
    mlp = count(mt, attention_bias=True, mlp_bias=True) - count(mt, attention_bias=True)
    assert mlp == LAYERS * (2 * FFN + HIDDEN)
    assert count(mt, attention_bias=True, mlp_bias=True) == \
        hf_count(mt, attention_bias=True, mlp_bias=True)


# ---- Cohere, Cohere2 and PhiMoE: q, k, v AND o_proj take attention_bias (CohereAttention,
# Cohere2Attention, PhimoeAttention: o_proj = nn.Linear(..., bias=config.attention_bias));
# the o_proj bias (hidden per layer) was left out
O_BIAS_FAMILIES = {"cohere": {}, "cohere2": {}, "phimoe": MOE,
                   # the same rule, found by the sweep: Gemma counted q, k, v only, Gemma 2
                   # and 3 and Qwen3-MoE no attention bias at all, Llama 4 and OLMoE no o_proj
                   # bias (GemmaAttention ... Qwen3MoeAttention, OlmoeAttention)
                   "gemma": {}, "gemma2": {}, "gemma3_text": {}, "llama4_text": MOE,
                   "olmoe": MOE, "qwen3_moe": MOE}


@pytest.mark.parametrize("mt", sorted(O_BIAS_FAMILIES))
def test_attention_bias_counts_q_k_v_and_o(mt):
    extra = O_BIAS_FAMILIES[mt]
    assert count(mt, attention_bias=True, **extra) - count(mt, **extra) == \
        LAYERS * (QKV + HIDDEN)


@pytest.mark.parametrize("mt", sorted(O_BIAS_FAMILIES))
def test_attention_bias_count_equals_transformers(mt):
    extra = O_BIAS_FAMILIES[mt]
    assert count(mt, attention_bias=True, **extra) == hf_count(mt, attention_bias=True, **extra)


# ---- Cohere2Attention builds no q/k norm (Cohere's does, per head, with use_qk_norm):
# use_qk_norm on a cohere2 config added q_dim + kv_dim norm weights per layer
def test_cohere2_use_qk_norm_builds_nothing():
    assert count("cohere2", use_qk_norm=True) == count("cohere2")
    # CohereAttention: q_norm over (4 heads, 16) and k_norm over (2 kv heads, 16), weights only
    assert count("cohere", use_qk_norm=True) - count("cohere") == LAYERS * (64 + 32)


@pytest.mark.parametrize("mt", ["cohere", "cohere2"])
def test_use_qk_norm_count_equals_transformers(mt):
    assert count(mt, use_qk_norm=True) == hf_count(mt, use_qk_norm=True)


# ---- MiniMaxM2Attention always builds q_norm (heads * head_dim) and k_norm (kv_heads *
# head_dim) RMSNorms: use_qk_norm false (or another qk_norm_type) dropped weights HF builds
MINIMAX = dict(MOE, rotary_dim=8, use_routing_bias=False)


@pytest.mark.parametrize("flags", [dict(use_qk_norm=False), dict(qk_norm_type="per_head")],
                         ids=lambda f: ",".join(f))
def test_minimax_m2_always_counts_its_q_k_norms(flags):
    assert count("minimax_m2", **MINIMAX, **flags) == count("minimax_m2", **MINIMAX)
    spec = model_from_hf_dict(dict(TINY, model_type="minimax_m2", **MINIMAX, **flags))
    no_norms = spec.with_(qk_norm=False, qk_norm_full=False).total_params()
    assert spec.total_params() - no_norms == LAYERS * (64 + 32)
    assert count("minimax_m2", **MINIMAX, **flags) == hf_count("minimax_m2", **MINIMAX, **flags)


# ---- biases ModelSpec cannot hold are refused, not miscounted: GPT-NeoX and gpt-oss build
# their MLP / expert biases whatever attention_bias says (attention_bias false dropped them
# all: linear_bias), DeepSeek's MLA takes attention_bias on q_a_proj, kv_a_proj_with_mqa and
# o_proj and V2's dense MLPs mlp_bias (neither was counted)
MLA = dict(MOE, n_routed_experts=4, n_shared_experts=1, kv_lora_rank=32, q_lora_rank=48,
           qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, first_k_dense_replace=1,
           n_group=2, topk_group=1)
REFUSED = [("gpt_neox", dict(attention_bias=False), "config.json:attention_bias"),
           ("gpt_oss", dict(MOE, attention_bias=False), "config.json:attention_bias"),
           ("deepseek_v2", dict(MLA, attention_bias=True), "config.json:attention_bias"),
           ("deepseek_v3", dict(MLA, attention_bias=True), "config.json:attention_bias"),
           ("deepseek_v2", dict(MLA, mlp_bias=True), "config.json:mlp_bias")]


@pytest.mark.parametrize("mt,flags,field", REFUSED, ids=[f"{r[0]}-{r[2][12:]}" for r in REFUSED])
def test_biases_not_modelled_are_refused(mt, flags, field):
    with pytest.raises(InputError) as e:
        count(mt, **flags)
    assert e.value.field == field


@pytest.mark.parametrize("mt,flags", [("gpt_neox", {}), ("gpt_oss", MOE), ("deepseek_v2", MLA),
                                      ("deepseek_v3", dict(MLA, mlp_bias=True))])
def test_what_stays_allowed_equals_transformers(mt, flags):
    """The default files still read; DeepseekV3MLP has no mlp_bias (not read). V3's
    score-correction bias is a buffer in transformers, a parameter in meshplan's count."""
    extra = 4 * (LAYERS - 1) if mt == "deepseek_v3" else 0
    assert count(mt, **flags) == hf_count(mt, **flags) + extra


# ---- ERNIE 4.5 MoE: use_bias puts biases on attention, the dense and shared MLPs and
# lm_head, not on Ernie4_5_MoeExperts: linear_bias counted expert biases HF never builds
ERNIE_MOE = dict(moe_num_experts=4, moe_k=2, moe_intermediate_size=48, moe_num_shared_experts=1)


def test_ernie_moe_use_bias_is_refused():
    with pytest.raises(InputError) as e:
        count("ernie4_5_moe", use_bias=True, **ERNIE_MOE)
    assert e.value.field == "config.json:use_bias"


def test_ernie_without_biases_equals_transformers():
    assert count("ernie4_5_moe", **ERNIE_MOE) == hf_count("ernie4_5_moe", **ERNIE_MOE)
    # the dense model's use_bias (q, k, v, o and the MLP; its lm_head has none) still counts
    assert count("ernie4_5", use_bias=True) == hf_count("ernie4_5", use_bias=True)
    assert count("ernie4_5", use_bias=True) - count("ernie4_5") == \
        LAYERS * (QKV + HIDDEN + 2 * FFN + HIDDEN)


# ---- the output layer's bias (vocab elements, tied or not): PhiForCausalLM always builds
# one, PhimoeForCausalLM with lm_head_bias; it was left out of the count
@pytest.mark.parametrize("mt,flags", [("phi", dict(num_key_value_heads=4)),
                                      ("phi", dict(num_key_value_heads=4,
                                                   tie_word_embeddings=True)),
                                      ("phimoe", dict(MOE, lm_head_bias=True))])
def test_output_layer_bias_counted(mt, flags):
    spec = model_from_hf_dict(dict(TINY, model_type=mt, **flags))
    assert spec.output_bias
    assert spec.total_params() - spec.with_(output_bias=False).total_params() == 97
    assert spec.total_params() == hf_count(mt, **flags)


def test_output_layer_bias_in_the_last_stage_params():
    """The cost model's head (last stage) holds the bias too, vocab-parallel like the weight."""
    from meshplan.cost.ops import Shard, head_ops
    spec = model_from_hf_dict(dict(TINY, model_type="phimoe", **MOE, lm_head_bias=True))
    for tp in (1, 2):
        shard = Shard(seq=128, micro_batch=1, tp=tp)
        without = head_ops(spec.with_(output_bias=False), shard).params
        assert head_ops(spec, shard).params - without == 97 / tp
