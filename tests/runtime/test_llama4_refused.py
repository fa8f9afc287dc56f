"""A Llama 4 config with no NoPE layers (no_rope_layers all 1) was built by the runtime as a
plain MoE Llama: modeling_llama4.py's weightless L2 q/k norm (use_qk_norm, default true),
its chunked attention (attention_chunk_size) and its router weight multiplying each expert's
input (Llama4TextMoe: routed_in = hidden_states * router_scores; SwiGLU is not linear, so
that is not the weight times the output) were all missing. Now each is refused in one line
that names it (the CLI's exit 2), as PhiMoE's router and DBRX's clamp are."""

from __future__ import annotations

import pytest

from meshplan.errors import InputError
from meshplan.runtime.model import check_buildable
from meshplan.specs.hf_config import model_from_hf_dict

TEXT = dict(model_type="llama4_text", hidden_size=64, intermediate_size=32,
            intermediate_size_mlp=96, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=97, num_local_experts=4,
            num_experts_per_tok=1, interleave_moe_layer_step=1, no_rope_layers=[1] * 4)


@pytest.mark.parametrize("extra, needle", [
    ({}, "L2 q/k norm"),
    ({"use_qk_norm": False, "attention_chunk_size": 16}, "16-key chunks"),
    ({"use_qk_norm": False}, "expert inputs scaled by the router weight"),
])
def test_llama4_without_nope_layers_is_refused_naming_the_feature(extra, needle):
    spec = model_from_hf_dict(dict(TEXT, **extra), "l4")
    assert spec.nope_layers == 0
    with pytest.raises(InputError, match=needle) as e:
        check_buildable(spec)
    assert "\n" not in str(e.value)
