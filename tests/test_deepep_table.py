"""DeepEP's published bandwidth table, every row, against the expert dispatch model.

Independent truth: deepseek-ai/DeepEP README, "Normal kernels with NVLink and RDMA
forwarding" (H800, ~160 GB/s NVLink; one CX7 400 Gb/s NIC per GPU, ~50 GB/s; 4096 tokens,
hidden 7168, 256 experts, top-8, top-4 groups, FP8 dispatch, BF16 combine), in both
published versions: the first release (commit ebfe47e, 2025-02-25) and after the
2025-04-22 optimisation (commit 3b1045d). "Bottleneck bandwidth" is logical bytes over
time, as its tests/test_internode.py (tests/legacy/ today) counts them: every
destination node of a token, its own node included (rdma_idx over num_nodes,
num_rdma_token_sent), times hidden times the element size; the benchmark routes within the
top min(nodes, 4) node groups.

tests/test_moe_physics.py checks the EP8 and EP64 dispatch; this file checks the rest
(EP16, EP32, the combines) and that the alltoall dispatcher, which sends one copy per
expert, moves more bytes over the NICs than DeepEP's one copy per node.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from meshplan.cost.collectives import Placement
from meshplan.cost.moe_comm import (FP8_BYTES_PER_ELEMENT, BF16_BYTES_PER_ELEMENT,
                                    copies_per_token, exchange_s, expected_distinct)
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset

TOKENS, HIDDEN = 4096, 7168
# (EP, dispatch GB/s, combine GB/s) per README version
FIRST = [(16, 43, 43), (32, 44, 47), (64, 46, 45)]
LATER = [(16, 43, 43), (32, 58, 57), (64, 51, 50)]
TOLERANCE = 0.30  # the two versions differ by up to 32% between them (EP32: 44 vs 58 GB/s)


def _bench_model(ep: int):
    """DeepSeek-V3's shape routed as the benchmark routes: one group per node, the top
    min(nodes, 4) groups."""
    nodes = ep // 8
    m = replace(preset("deepseek-v3"), moe_groups=nodes, moe_group_topk=min(nodes, 4))
    return m, make_cluster(gpu="H800-SXM-80GB", num_gpus=ep), Placement(ep, 8)


def _nodes_per_token(ep: int) -> float:
    """Destination nodes of a token, its own included (closed form, not the model's)."""
    nodes = ep // 8
    return min(expected_distinct(nodes, 256, 8), 4.0)


@pytest.mark.parametrize("ep,disp_gbs,comb_gbs", FIRST + LATER)
def test_internode_bandwidth_within_tolerance_of_deepep(ep, disp_gbs, comb_gbs):
    m, cluster, place = _bench_model(ep)
    logical = TOKENS * _nodes_per_token(ep) * HIDDEN
    for bpe, gbs in ((FP8_BYTES_PER_ELEMENT, disp_gbs), (BF16_BYTES_PER_ELEMENT, comb_gbs)):
        ours = exchange_s(cluster, place, m, TOKENS, "deepep", bpe)
        published = logical * bpe / (gbs * 1e9)
        assert ours == pytest.approx(published, rel=TOLERANCE), (ep, bpe)


def test_own_node_copy_costs_like_a_remote_one_at_ep16():
    """At EP16 (two nodes) half of a token's node copies stay on its own node, yet DeepEP's
    logical rate (43 GB/s in both versions) is no higher than at EP64, where 7 of 8 leave:
    the own node's copy goes through the RDMA channel too. Counting only remote copies would
    put EP16 about 20% faster than published; the model is within 10%."""
    m, cluster, place = _bench_model(16)
    logical = TOKENS * _nodes_per_token(16) * HIDDEN
    for bpe in (FP8_BYTES_PER_ELEMENT, BF16_BYTES_PER_ELEMENT):
        ours = exchange_s(cluster, place, m, TOKENS, "deepep", bpe)
        assert logical * bpe / ours / 1e9 == pytest.approx(43, rel=0.10)


def test_combine_takes_about_twice_the_fp8_dispatch():
    """BF16 combine moves 2 / (1 + 4/128) times the bytes of the FP8 dispatch; the table's
    dispatch and combine bandwidths are within 10% of each other, so the times follow."""
    m, cluster, place = _bench_model(64)
    d = exchange_s(cluster, place, m, TOKENS, "deepep", FP8_BYTES_PER_ELEMENT)
    c = exchange_s(cluster, place, m, TOKENS, "deepep", BF16_BYTES_PER_ELEMENT)
    assert c / d == pytest.approx(2 / FP8_BYTES_PER_ELEMENT, rel=0.10)


def test_alltoall_crosses_the_nics_once_per_expert_deepep_once_per_node():
    """Qwen3-30B-A3B (128 experts, top-8) over EP16 on two 8-GPU nodes: Megatron's alltoall
    dispatcher sends a token to each of its 8 experts, half of them on the other node
    (8 x 8/16 = 4 NIC copies); DeepEP/HybridEP sends it once to each destination node, its
    own included in the RDMA channel (2 (1 - C(64, 8) / C(128, 8)) node copies, one of them
    over the wire when any expert is remote)."""
    from math import comb

    from meshplan.cost.efficiency import NETWORK

    m = preset("qwen3-30b-a3b")
    place = Placement(16, 8)
    _, a2a_nic = copies_per_token(m, place, "alltoall")
    _, deepep_nic = copies_per_token(m, place, "deepep")
    miss = comb(64, 8) / comb(128, 8)
    assert a2a_nic == pytest.approx(4.0)
    assert deepep_nic == pytest.approx(1 - miss, rel=1e-9)
    cluster = make_cluster(gpu="H100-SXM-80GB", num_gpus=16)
    t_a2a = exchange_s(cluster, place, m, 4096, "alltoall", 2.0)
    t_deepep = exchange_s(cluster, place, m, 4096, "deepep", 2.0)
    # both are NIC-bound here: NCCL's all-to-all at its share of the NIC, DeepEP's channel
    # carrying both node copies at the large-message share
    expected = (4.0 / NETWORK.alltoall_scaleout) / (2 * (1 - miss) / NETWORK.scaleout)
    assert t_a2a / t_deepep == pytest.approx(expected, rel=0.10)
    assert t_a2a > 2 * t_deepep
