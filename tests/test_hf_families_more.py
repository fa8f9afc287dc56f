"""qwen2_moe, olmoe, granite, granitemoe, starcoder2 (meshplan/specs/hf_families_more.py):
parameter counts against the published ones. Configs carry the shape fields of the hub
files named next to them (written from the hub files' values; no hub access here)."""

from __future__ import annotations

import pytest

from meshplan.errors import InputError
from meshplan.specs.hf_config import model_from_hf_dict

QWEN15_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
              "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
              "vocab_size": 151936, "moe_intermediate_size": 1408,
              "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4,
              "num_experts": 60}  # huggingface.co/Qwen/Qwen1.5-MoE-A2.7B
QWEN2_57B = dict(QWEN15_MOE, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                 num_attention_heads=28, num_key_value_heads=4, moe_intermediate_size=2560,
                 shared_expert_intermediate_size=20480, num_experts=64,
                 num_experts_per_tok=8)  # Qwen/Qwen2-57B-A14B
OLMOE = {"model_type": "olmoe", "hidden_size": 2048, "intermediate_size": 1024,
         "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16,
         "vocab_size": 50304, "num_experts": 64, "num_experts_per_tok": 8}  # allenai/OLMoE-1B-7B-0924
GRANITE_8B = {"model_type": "granite", "hidden_size": 4096, "intermediate_size": 12800,
              "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
              "vocab_size": 49155, "tie_word_embeddings": True}  # ibm-granite/granite-3.0-8b-base
GRANITE_MOE_3B = {"model_type": "granitemoe", "hidden_size": 1536, "intermediate_size": 512,
                  "num_hidden_layers": 32, "num_attention_heads": 24, "num_key_value_heads": 8,
                  "vocab_size": 49155, "num_local_experts": 40, "num_experts_per_tok": 8,
                  "tie_word_embeddings": True}  # ibm-granite/granite-3.0-3b-a800m-base
STARCODER2_3B = {"model_type": "starcoder2", "hidden_size": 3072, "intermediate_size": 12288,
                 "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2,
                 "vocab_size": 49152, "sliding_window": 4096,
                 "use_bias": True}  # bigcode/starcoder2-3b


# (config, published total, published active or None, vocabulary matrices the published
# active count leaves out, tolerance, source). Tolerances: half a unit of the last stated
# digit, rounded up to a whole percent.
CASES = [
    (QWEN15_MOE, 14.3e9, 2.7e9, 0, 0.02, "Qwen1.5-MoE-A2.7B model card: 14.3B total, 2.7B "
     "activated"),
    (QWEN2_57B, 57e9, 14e9, 0, 0.02, "Qwen2 technical report (arXiv 2407.10671) table 1: "
     "57B total, 14B activated"),
    (OLMOE, 6.9e9, 1.3e9, 0, 0.02, "OLMoE paper (arXiv 2409.02060): 6.9B total, 1.3B active"),
    (GRANITE_8B, 8.1e9, None, 0, 0.01, "Granite 3.0 report / model card: 8.1B"),
    (GRANITE_MOE_3B, 3.3e9, 0.8e9, 1, 0.02, "Granite 3.0 report: 3B-A800M, 3.3B total, 800M "
     "active (tied embedding counted once in the total, not in the active figure)"),
    (STARCODER2_3B, 3.0e9, None, 0, 0.02, "StarCoder2 paper (arXiv 2402.19173): 3B"),
]


@pytest.mark.parametrize("cfg,total,active,emb_out,rel,source", CASES)
def test_counts_match_published(cfg, total, active, emb_out, rel, source):
    m = model_from_hf_dict(cfg)
    assert m.total_params() == pytest.approx(total, rel=rel), source
    if active:
        got = m.active_params() - emb_out * m.vocab * m.hidden
        assert got == pytest.approx(active, rel=0.05 if active < 1e9 else 0.04), source


def test_qwen2_moe_counts_its_shared_expert_gate():
    m = model_from_hf_dict(QWEN15_MOE)
    assert m.moe_shared_gate and m.moe_shared_ffn == 5632
    assert m.total_params() - m.with_(moe_shared_gate=False).total_params() == 24 * 2048


def test_starcoder2_shape():
    m = model_from_hf_dict(STARCODER2_3B)
    assert (m.mlp, m.norm, m.linear_bias, m.tied_embeddings) == ("gelu", "layernorm", True, True)
    assert (m.sliding_window, m.sliding_layers) == (4096, 30)


def test_qwen2_moe_dense_layers_must_lead():
    with pytest.raises(InputError, match="mlp_only_layers"):
        model_from_hf_dict(dict(QWEN15_MOE, mlp_only_layers=[3]))
