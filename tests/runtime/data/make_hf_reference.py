"""Writes hf_reference.json: transformers' logits and loss for the weights that
tests/runtime/test_hf_reference.py's ``runtime_model`` builds (provenance of that file).

Run from the repository root with transformers 4.57.1 installed (not a project dependency):
    python tests/runtime/data/make_hf_reference.py
Names are mapped by hand, runtime -> transformers; the router of DeepseekV3TopkRouter is run
in float64 (transformers casts it to float32) with its own selection rule otherwise;
DeepseekV2MoEGate keeps its float32 router (no token's top-k is near a tie here).
"""

import copy
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m3

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.runtime.test_hf_reference import (CASES, POSITIONS, hf_config, loss_of,  # noqa
                                             runtime_model, tokens)

CLASSES = {"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM",
           "qwen3_moe": "Qwen3MoeForCausalLM", "mixtral": "MixtralForCausalLM",
           "deepseek_v3": "DeepseekV3ForCausalLM", "qwen2": "Qwen2ForCausalLM",
           "ernie4_5": "Ernie4_5ForCausalLM", "phi3": "Phi3ForCausalLM", "deepseek_v2": "DeepseekV2ForCausalLM"}


def _router64(self, hidden_states):  # DeepseekV3TopkRouter.forward without the fp32 cast
    hidden_states = hidden_states.view(-1, self.config.hidden_size)
    scores = F.linear(hidden_states, self.weight).sigmoid()
    idx = self.get_topk_indices(scores)
    w = scores.gather(1, idx)
    if self.norm_topk_prob:
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    return idx, w * self.routed_scaling_factor


m3.DeepseekV3TopkRouter.forward = _router64

ATTN = {"self_attn.q_proj": "attention.wq", "self_attn.k_proj": "attention.wk",
        "self_attn.v_proj": "attention.wv", "self_attn.o_proj": "attention.wo",
        "self_attn.q_norm": "attention.q_norm", "self_attn.k_norm": "attention.k_norm",
        "self_attn.q_a_proj": "attention.wq_a", "self_attn.q_a_layernorm": "attention.q_norm",
        "self_attn.q_b_proj": "attention.wq_b",
        "self_attn.kv_a_proj_with_mqa": "attention.wkv_a",
        "self_attn.kv_a_layernorm": "attention.kv_norm",
        "self_attn.kv_b_proj": "attention.wkv_b"}
MLP = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2", "w1": "w1", "w2": "w2",
       "w3": "w3"}


def runtime_value(key, rt, spec):
    """The runtime tensor that holds transformers' ``key``."""
    if key == "model.embed_tokens.weight":
        return rt["tok_embeddings.weight"]
    if key == "model.norm.weight":
        return rt["norm.weight"]
    if key == "lm_head.weight":
        return rt["output.weight"]
    _, _, i, rest = key.split(".", 3)
    pre = f"layers.{i}."
    if rest.startswith("input_layernorm"):
        return rt[pre + "attention_norm.weight"]
    if rest.startswith("post_attention_layernorm"):
        return rt[pre + "ffn_norm.weight"]
    if rest.startswith("self_attn.qkv_proj."):  # Phi-3's fused [q; k; v]
        return torch.cat([rt[pre + f"attention.w{n}.weight"] for n in "qkv"])
    if rest.startswith("mlp.gate_up_proj."):  # Phi-3's fused [gate; up]
        return torch.cat([rt[pre + f"feed_forward.{n}.weight"] for n in ("w1", "w3")])
    for a, b in ATTN.items():
        if rest.startswith(a + "."):
            return rt[pre + b + rest[len(a):]]
    parts = rest.split(".")[1:]  # after mlp / block_sparse_moe
    if not spec.layer_is_moe(int(i)):
        return rt[pre + f"feed_forward.{MLP[parts[0]]}.weight"]
    if parts[0] == "gate":
        return rt[pre + ("moe.gate.weight" if parts[1] == "weight" else "moe.expert_bias")]
    if parts[0] == "shared_experts":
        return rt[pre + f"moe.shared.{MLP[parts[1]]}.weight"]
    assert parts[0] == "experts", key
    return rt[pre + f"moe.experts.{MLP[parts[2]]}"][int(parts[1])]


def main():
    out = {"provenance": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                         "float64, eager attention; tests/runtime/data/make_hf_reference.py",
           "positions": list(POSITIONS), "cases": {}}
    for case in CASES:
        cfg = hf_config(case)
        spec, m = runtime_model(case)
        rt = m.state_dict()
        hc = transformers.AutoConfig.for_model(**copy.deepcopy(cfg))  # it edits rope_scaling
        hc._attn_implementation = "eager"
        hf = getattr(transformers, CLASSES[cfg["model_type"]])(hc).double().eval()
        sd = hf.state_dict()
        new = {k: runtime_value(k, rt, spec).clone() for k in sd}
        assert all(new[k].shape == sd[k].shape for k in sd)
        hf.load_state_dict(new, strict=True)
        toks = tokens()
        with torch.no_grad():
            logits = hf(toks).logits
            mine = m(toks)
        rel = ((mine - logits).norm() / logits.norm()).item()
        print(f"{case:18s} runtime vs transformers: logits {rel:.2e}")
        out["cases"][case] = {"config": cfg, "loss": loss_of(logits, toks),
                              "logits": logits[0, list(POSITIONS)].tolist()}
    path = Path(__file__).with_name("hf_reference.json")
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
