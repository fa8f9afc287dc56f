"""The runtime's model is the checkpoint's model: the same weights give the logits and loss
that HuggingFace transformers' own modelling code gives, in float64.

Bug this pins: the runtime rotated interleaved pairs (x[2i], x[2i+1]) in GQA attention, where
Llama / Qwen / Mixtral checkpoints in transformers pair x[i] with x[i + d/2] (rotate_half; ERNIE
4.5's are interleaved, now ModelSpec.rope_interleaved), and
it ignored rope_scaling (Llama 3.1's llama3 bands; DeepSeek-V3's YaRN frequencies and the
mscale^2 on MLA's softmax scale). Logits moved by 30-60% (relative norm) on these configs.

Truth: ``data/hf_reference.json``, written by ``data/make_hf_reference.py`` with transformers
4.57.1 (LlamaForCausalLM, Qwen2/Qwen3/Qwen3Moe, MixtralForCausalLM, Ernie4_5ForCausalLM, Phi3,
DeepseekV2/V3ForCausalLM, eager attention, float64 weights) from the weights ``runtime_model``
below builds, names mapped by hand. transformers computes its rotary angles in float32, so the
two agree to ~2e-7 rather than float64's 1e-15; the old runtime was off by 0.3-0.6.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from meshplan.runtime.model import build_model  # noqa: E402
from meshplan.specs.hf_config import model_from_hf_dict  # noqa: E402

DATA = Path(__file__).parent / "data" / "hf_reference.json"

BASE = dict(vocab_size=97, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=96, max_position_embeddings=256,
            rms_norm_eps=1e-6, tie_word_embeddings=False)
_DS = dict(model_type="deepseek_v3", num_key_value_heads=4, q_lora_rank=24, kv_lora_rank=16,
           qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=8,
           num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
           first_k_dense_replace=1, n_group=4, topk_group=2, routed_scaling_factor=2.5,
           norm_topk_prob=True, topk_method="noaux_tc", scoring_func="sigmoid")
# original_max_position_embeddings 16 < the 24 tokens, so the scaled bands matter here
CASES = {
    "llama": dict(model_type="llama", rope_theta=10000.0),
    "llama3-scaled": dict(model_type="llama", rope_theta=500000.0, rope_scaling=dict(
        rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=16)),
    "qwen3": dict(model_type="qwen3", head_dim=16, rope_theta=1e6),
    # half of each head rotates (rotate_half within the rotary part), fused qkv / gate_up
    "phi3-partial": dict(model_type="phi3", partial_rotary_factor=0.5, pad_token_id=0),
    "qwen3-moe-norm": dict(model_type="qwen3_moe", head_dim=16, num_experts=8,
                           num_experts_per_tok=2, moe_intermediate_size=32,
                           norm_topk_prob=True),
    "qwen3-moe": dict(model_type="qwen3_moe", head_dim=16, num_experts=8,
                      num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=False),
    "mixtral": dict(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2,
                    rope_theta=1e6, rms_norm_eps=1e-5, sliding_window=None),
    # ERNIE 4.5: rotary on interleaved pairs (ModelSpec.rope_interleaved)
    "ernie4.5": dict(model_type="ernie4_5", head_dim=16, rope_theta=500000.0, use_bias=False),
    "qwen2": dict(model_type="qwen2", rope_theta=1e6),  # q/k/v biases
    # DeepSeek-V2: softmax router, group_limited_greedy (groups by their best score), no
    # renormalisation, routed scale, no q LoRA, two shared experts
    "deepseek-v2": dict(_DS, model_type="deepseek_v2", q_lora_rank=None, n_shared_experts=2,
                        routed_scaling_factor=1.5, norm_topk_prob=False,
                        topk_method="group_limited_greedy", scoring_func="softmax"),
    "deepseek-v3": dict(_DS),
    "deepseek-v3-yarn": dict(_DS, rope_scaling=dict(
        type="yarn", factor=40.0, mscale=1.0, mscale_all_dim=1.0, beta_fast=32, beta_slow=1,
        original_max_position_embeddings=16)),
}
SEQ = 24
POSITIONS = (0, 7, 15, 23)  # logits pinned at these positions (all positions in the loss)


def hf_config(case: str) -> dict:
    return dict(BASE, **CASES[case])


def tokens() -> "torch.Tensor":
    return torch.tensor([[(7 * i * i + 3 * i + 5) % 97 for i in range(SEQ)]])


def runtime_model(case: str):
    """The runtime model of ``case`` in float64, its weights scaled from the runtime's own
    seeded init (std 0.02 -> 0.1, norms 1 + 0.1 cos(i), DeepSeek's score-correction bias
    0.05 sin(i)) so that rotary positions and routing move the logits visibly."""
    spec = model_from_hf_dict(hf_config(case), case)
    m = build_model(spec, seed=0, dtype=torch.float64).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name.rsplit(".", 2)[-2]:
                p.copy_(1 + 0.1 * torch.cos(torch.arange(p.numel(), dtype=torch.float64)))
            else:
                p.mul_(5.0)
        for name, b in m.named_buffers():
            if name.endswith("expert_bias"):
                b.copy_(0.05 * torch.sin(torch.arange(b.numel(), dtype=torch.float64)))
    return spec, m


def loss_of(logits, toks) -> float:
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1).double(), toks[:, 1:].flatten()).item()


@pytest.mark.parametrize("case", list(CASES))
def test_logits_and_loss_match_transformers(case):
    ref = json.loads(DATA.read_text())["cases"][case]
    assert ref["config"] == hf_config(case)
    _, m = runtime_model(case)
    toks = tokens()
    with torch.no_grad():
        logits = m(toks)
    got = logits[0, list(POSITIONS)]
    want = torch.tensor(ref["logits"], dtype=torch.float64)
    rel = ((got - want).norm() / want.norm()).item()
    assert rel < 2e-6, f"{case}: logits differ from transformers' by {rel:.2e} (relative)"
    assert math.isclose(loss_of(logits, toks), ref["loss"], rel_tol=1e-6, abs_tol=0)


def test_rope_scalings_the_runtime_does_not_build_are_refused():
    """A rope_scaling the runtime does not compute (dynamic NTK, longrope, ...) is refused in
    one line rather than built unscaled."""
    import dataclasses

    from meshplan.errors import InputError
    from meshplan.runtime.model import check_buildable

    spec = model_from_hf_dict(hf_config("llama"), "x")
    for rs in ('{"factor": 2.0, "rope_type": "dynamic"}',
               '{"factor": 4.0, "rope_type": "yarn"}'):  # yarn without its original length
        with pytest.raises(InputError) as e:
            check_buildable(dataclasses.replace(spec, rope_scaling=rs))
        assert "\n" not in str(e.value)


def test_routers_and_clamps_the_runtime_does_not_build_are_refused():
    """Bug: the runtime built PhiMoE with a softmax top-2 router (transformers' PhimoeSparseMoeBlock
    routes by sparsemixer: 0.47 relative logits difference on a 3-layer model, measured with
    transformers 4.57.1) and DBRX without its q/k/v clamp (DbrxAttention: clip_qkv, 8 in
    dbrx-base). Both are refused now, in one line."""
    from meshplan.errors import InputError
    from meshplan.runtime.model import check_buildable

    # huggingface.co/databricks/dbrx-base config.json (attn_config.clip_qkv 8)
    dbrx = {"model_type": "dbrx", "d_model": 64, "n_heads": 4, "n_layers": 2,
            "vocab_size": 97, "attn_config": {"kv_n_heads": 2, "clip_qkv": 8,
                                              "rope_theta": 500000},
            "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2}}
    phimoe = dict(BASE, model_type="phimoe", num_local_experts=4, num_experts_per_tok=2)
    for cfg, what in ((dbrx, "clip_qkv"), (phimoe, "SparseMixer")):
        with pytest.raises(InputError, match=what) as e:
            check_buildable(model_from_hf_dict(cfg, cfg["model_type"]))
        assert "\n" not in str(e.value)
    unclipped = dict(dbrx, attn_config={"kv_n_heads": 2, "rope_theta": 500000})
    check_buildable(model_from_hf_dict(unclipped, "dbrx"))  # no clamp: built
