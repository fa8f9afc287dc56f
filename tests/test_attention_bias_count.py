"""attention_bias on a Llama / Qwen3 / OLMo2 / Granite config puts a bias on q, k, v AND o_proj
(transformers' LlamaAttention, Qwen3Attention: ``o_proj = nn.Linear(..., bias=
config.attention_bias)``); Qwen2Attention's o_proj has none (q, k, v biases always).

Bug this pins: the count left o_proj's bias (hidden per layer) out, and the runtime built wo
without it. Truth: the parameter list of LlamaForCausalLM written out by hand below."""

from __future__ import annotations

import pytest

from meshplan.specs.hf_config import model_from_hf_dict

CFG = dict(vocab_size=97, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
           num_key_value_heads=2, intermediate_size=96, max_position_embeddings=256,
           rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=True)


def hf_count(h=64, layers=3, heads=4, kv=2, ffn=96, vocab=97, o_bias=True, qk_norm=False):
    """embed_tokens + per layer (q, k, v, o weights; q, k, v [, o] biases; [q/k_norm of
    head_dim]; gate, up, down; 2 RMSNorms) + final norm + lm_head."""
    d = h // heads
    qkv = heads * d + 2 * kv * d
    layer = h * qkv + heads * d * h + qkv + (h if o_bias else 0) + 3 * h * ffn + 2 * h
    layer += 2 * d if qk_norm else 0
    return vocab * h + layers * layer + h + vocab * h


@pytest.mark.parametrize("mt,o_bias,qk_norm", [("llama", True, False), ("qwen3", True, True),
                                               ("qwen2", False, False)])
def test_attention_bias_counts_o_proj(mt, o_bias, qk_norm):
    cfg = dict(CFG, model_type=mt, head_dim=16)
    spec = model_from_hf_dict(cfg, mt)
    assert spec.total_params() == hf_count(o_bias=o_bias, qk_norm=qk_norm)


@pytest.mark.parametrize("mt,o_bias,qk_norm", [("llama", True, False), ("qwen3", True, True),
                                               ("qwen2", False, False)])
def test_runtime_builds_the_o_proj_bias(mt, o_bias, qk_norm):
    torch = pytest.importorskip("torch")
    from meshplan.runtime.model import build_model
    spec = model_from_hf_dict(dict(CFG, model_type=mt, head_dim=16), mt)
    m = build_model(spec, seed=0, dtype=torch.float32)
    assert sum(p.numel() for p in m.parameters()) == hf_count(o_bias=o_bias, qk_norm=qk_norm)
    assert (m.layers["0"].attention.wo.bias is not None) == o_bias


def test_megatron_export_refuses_the_o_proj_bias_it_cannot_write():
    """Megatron-LM has --add-qkv-bias (q, k, v) and --add-bias-linear (every linear layer):
    nothing for o_proj alone, so the export would have dropped it; Qwen2 stays exportable."""
    from meshplan.engines import engine_violations
    from meshplan.plan import Plan
    from meshplan.specs.workload import Workload
    for mt, refused in (("llama", True), ("qwen3", True), ("qwen2", False)):
        spec = model_from_hf_dict(dict(CFG, model_type=mt, head_dim=16), mt)
        v = engine_violations("megatron", Plan(), spec, Workload(128, 8))
        assert any("output projection" in x.allowed for x in v) == refused, v
