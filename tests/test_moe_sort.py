"""Megatron's all-to-all dispatcher sorts received tokens by local expert and unsorts them
before the combine (token_dispatcher.py, permutation 2): two more read+write passes of every
token copy's hidden state, only with several local experts; DeepEP-class dispatchers do not."""

import pytest

from meshplan.cost import efficiency
from meshplan.cost.layer import sort_by_local_expert
from meshplan.cost.ops import ACT, Shard, layer_ops
from meshplan.specs.catalog.presets import load_model

Q30 = load_model("qwen3-30b-a3b")


def _extra(dispatcher: str, ep: int) -> float:
    s = Shard(4096, 1, ep=ep)
    ops = layer_ops(Q30, True, s)
    before = ops.stream_bytes
    return sort_by_local_expert(ops, Q30, s, dispatcher).stream_bytes - before


def test_alltoall_with_local_experts_pays_two_more_permutations():
    rows = 4096 * Q30.moe_topk * efficiency.MOE_LOAD_IMBALANCE
    assert _extra("alltoall", 8) == pytest.approx(2 * 2 * ACT * rows * Q30.hidden)


def test_no_second_permutation_without_it():
    assert _extra("deepep", 8) == 0.0  # tokens arrive laid out per rank
    assert _extra("alltoall", 1) == 0.0  # no all-to-all
    assert _extra("alltoall", Q30.moe_experts) == 0.0  # one local expert: nothing to sort
