"""Serving: what vLLM and SGLang do, as their sources say, priced and exported so.

- Expert parallel over the tensor-parallel GPUs without attention data parallelism
  (tp = ep, attn_dp = 1): every rank holds the same tokens after attention; vLLM
  (fused_moe/config.py use_all2all_kernels needs dp > 1) and SGLang (StandardDispatcher,
  the default --moe-a2a-backend none) dispatch nothing and sum the expert outputs with one
  all-reduce over the 8 GPUs, as a dense MLP's tensor-parallel all-reduce.
"""

import pytest

from meshplan.scenario import make_cluster
from meshplan.serve.cost import StepModel, all_reduce_small_s
from meshplan.serve.spec import Pool
from meshplan.specs.catalog.presets import load_model

QWEN = load_model("qwen3-235b-a22b")
H100 = make_cluster("8xH100-SXM-80GB")


@pytest.mark.parametrize("tokens", [1, 64, 2048])
def test_tp_ep_without_attention_dp_is_two_all_reduces_per_layer(tokens):
    """tp8 ep8, no attention DP: the communication of a step is two all-reduces of
    tokens x hidden 16-bit activations per layer (attention output, MoE output), no
    expert all-to-all; the same as tp8 without expert parallel."""
    sm = StepModel(QWEN, H100, Pool(tp=8, ep=8), "fp8", "fp8")
    st = sm.step(tokens, tokens)
    ar = all_reduce_small_s(H100, 8, 2 * tokens * QWEN.hidden)
    assert st.ep_comm_s == 0
    assert st.tp_comm_s == pytest.approx(2 * QWEN.layers * ar)
    plain = StepModel(QWEN, H100, Pool(tp=8), "fp8", "fp8").step(tokens, tokens)
    assert st.tp_comm_s + st.ep_comm_s == pytest.approx(plain.tp_comm_s + plain.ep_comm_s)


def test_attention_dp_keeps_the_expert_all_to_all():
    """With attention DP each rank brings its own tokens: the dispatch/combine stays."""
    st = StepModel(QWEN, H100, Pool(tp=1, attn_dp=8, ep=8), "fp8", "fp8").step(64, 64)
    assert st.ep_comm_s > 0 and st.tp_comm_s == 0
