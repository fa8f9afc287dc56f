"""MoE mechanisms of the cost model against closed forms and published measurements.

- distinct GPUs / nodes a token reaches: exact enumeration of the top-k draws;
- DeepEP normal kernels on H800 (deepseek-ai/DeepEP docs/legacy.md, "Normal kernels with
  NVLink and RDMA forwarding": 4096 tokens, hidden 7168, top-4 groups, top-8 experts, FP8
  dispatch, BF16 combine): intranode EP8 dispatch 153 GB/s NVLink, internode EP64 dispatch
  51 GB/s RDMA, both "bottleneck bandwidth" of logical bytes (the local node / GPU counted);
- DeepSeek-V3 report sec. 3.2.1: with DualPipe "both all-to-all and PP communication can be
  fully hidden" at the report's configuration (EP64 over 8 nodes, 2048 H800);
- Transformer Engine's grouped GEMM launches one cuBLAS GEMM per local expert.
"""

from __future__ import annotations

from itertools import combinations

import pytest

from meshplan.cost import estimate
from meshplan.cost.collectives import Placement
from meshplan.cost.moe_comm import (FP8_BYTES_PER_ELEMENT, copies_per_token,
                                    dispatch_bytes_per_element, exchange_s, expected_distinct)
from meshplan.cost.ops import Shard, layer_ops
from meshplan.errors import InputError
from meshplan.plan import Plan
from meshplan.plan_label import format_label, parse_label
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload
from meshplan.validate import pins_from_row


def _enumerate_distinct(groups: int, experts: int, topk: int) -> float:
    per = experts // groups
    total = hits = 0
    for combo in combinations(range(experts), topk):
        total += 1
        hits += len({e // per for e in combo})
    return hits / total


@pytest.mark.parametrize("groups,experts,topk", [(4, 16, 2), (4, 16, 4), (8, 16, 3), (2, 12, 5)])
def test_expected_distinct_matches_enumeration(groups, experts, topk):
    assert expected_distinct(groups, experts, topk) == pytest.approx(
        _enumerate_distinct(groups, experts, topk), rel=1e-12)


def test_alltoall_sends_one_copy_per_expert():
    m = preset("qwen3-235b-a22b")
    gpus, nodes = copies_per_token(m, Placement(32, 8), "alltoall")
    assert gpus == pytest.approx(8 * 31 / 32)
    assert nodes == pytest.approx(8 * 24 / 32)


def test_deepep_node_limited_routing_caps_nodes_at_four():
    """DeepSeek-V3 sec. 2.1.2 / 3.2.2: each token goes to at most 4 nodes (M = 4)."""
    m = preset("deepseek-v3")
    _, remote_nodes = copies_per_token(m, Placement(64, 8), "deepep")
    assert remote_nodes == pytest.approx(4 * 7 / 8)
    # without the group limit the uniform expectation over 8 nodes would be higher
    assert expected_distinct(8, 256, 8) > 4


def _deepep_case(ep: int):
    m = preset("deepseek-v3")
    cluster = make_cluster(gpu="H800-SXM-80GB", num_gpus=ep)
    place = Placement(ep, min(ep, 8))
    b = dispatch_bytes_per_element("deepep", "fp8", "other")
    return m, cluster, place, b


def test_deepep_intranode_dispatch_matches_published_bandwidth():
    m, cluster, place, b = _deepep_case(8)
    tokens = 4096
    ours = exchange_s(cluster, place, m, tokens, "deepep", b)
    # logical bytes the benchmark counts: every destination GPU, this one included
    hits = min(expected_distinct(8, 256, 8), 4.0)  # one group per GPU, 4 groups per token
    published = tokens * hits * m.hidden * b / 153e9
    assert ours == pytest.approx(published, rel=0.25)


def test_deepep_internode_dispatch_matches_published_bandwidth():
    m, cluster, place, b = _deepep_case(64)
    tokens = 4096
    ours = exchange_s(cluster, place, m, tokens, "deepep", b)
    published = tokens * 4 * m.hidden * b / 51e9  # 4 nodes per token, own node counted
    assert ours == pytest.approx(published, rel=0.25)


def test_fp8_dispatch_only_where_the_engine_does_it():
    assert dispatch_bytes_per_element("deepep", "fp8", "other") == FP8_BYTES_PER_ELEMENT
    assert dispatch_bytes_per_element("deepep", "fp8", "megatron") == 2.0
    assert dispatch_bytes_per_element("alltoall", "fp8", "other") == 2.0
    assert dispatch_bytes_per_element("deepep", "bf16", "other") == 2.0


def _ds3_report_estimate(**kw) -> object:
    m = preset("deepseek-v3")
    cluster = make_cluster(gpu="H800-SXM-80GB", num_gpus=2048)
    w = Workload(4096, 15360, "fp8", framework="other")
    # the report recomputes only RMSNorm and the MLA up-projections (sec. 3.3.2): closest is none
    plan = Plan(dp=128, tp=1, pp=16, ep=64, zero=1, micro_batch=1, recompute="none", **kw)
    return estimate(m, cluster, w, plan)


def test_dualpipe_hides_the_expert_all_to_all():
    """DeepSeek-V3 report sec. 3.2.1: all-to-all fully hidden under DualPipe."""
    est = _ds3_report_estimate(vpp=2, schedule="dualpipev", moe_dispatcher="deepep")
    ep = next(a for a in est.comm if a.axis == "ep")
    assert ep.wire_s > 0
    assert ep.exposed_s <= 0.05 * ep.wire_s
    # the same V placement without DualPipe's overlapped forward-backward chunks
    plain = _ds3_report_estimate(vpp=2, schedule="zb_v", moe_dispatcher="deepep")
    ep_plain = next(a for a in plain.comm if a.axis == "ep")
    assert ep_plain.exposed_s == pytest.approx(ep_plain.wire_s)
    # what is hidden slows compute (contention) instead of vanishing
    assert est.step_time.parts["overlap_slowdown_s"] > plain.step_time.parts["overlap_slowdown_s"]


def test_ep_overlap_exposes_only_what_compute_cannot_cover():
    est = _ds3_report_estimate(vpp=2, schedule="zb_v", moe_dispatcher="alltoall",
                               ep_comm_overlap=True)
    ep = next(a for a in est.comm if a.axis == "ep")
    # alltoall over IB with 8 copies per token is longer than the compute it hides under
    assert 0 < ep.exposed_s < ep.wire_s


def test_te_grouped_gemm_launches_one_gemm_per_expert():
    m = preset("qwen3-30b-a3b")
    kw = dict(seq=4096, micro_batch=1, ep=8)
    te = layer_ops(m, True, Shard(**kw, per_expert_gemms=True))
    single = layer_ops(m, True, Shard(**kw))
    local = m.moe_experts // 8
    assert te.kernels - single.kernels == 2 * (local - 1)
    te8 = layer_ops(m, True, Shard(**kw, fp8=True, fp8_fused_casts=True, per_expert_gemms=True))
    single8 = layer_ops(m, True, Shard(**kw, fp8=True, fp8_fused_casts=True))
    assert te8.kernels - single8.kernels == 2 * (local - 1) + 2 * local


def test_plan_label_round_trips_moe_knobs():
    p = Plan(dp=8, pp=2, ep=8, moe_dispatcher="deepep", ep_comm_overlap=True)
    label = format_label(p)
    assert "deepep" in label.split() and "epo" in label.split()
    assert parse_label(label) == p


def test_runs_csv_engine_columns_pin_the_plan():
    row = {"pp": "16", "vpp": "2", "ep": "64", "moe_dispatcher": "DeepEP", "ep_overlap": "1",
           "schedule": "dualpipev"}
    pins = pins_from_row(row)
    assert pins["moe_dispatcher"] == "deepep" and pins["ep_comm_overlap"] is True
    assert pins["schedule"] == "dualpipev" and "schedules" not in pins
    with pytest.raises(InputError, match="moe_dispatcher"):
        pins_from_row({"moe_dispatcher": "nccl"})
    with pytest.raises(InputError, match="moe_dispatcher"):
        Plan(moe_dispatcher="nccl")


def test_megatron_export_and_engine_limits_follow_the_moe_knobs():
    from meshplan.engines import plan_violations
    from meshplan.export.megatron import megatron_args
    from meshplan.scenario import Scenario

    m = preset("qwen3-30b-a3b")
    w = Workload(4096, 512)
    p = Plan(dp=8, pp=2, vpp=12, ep=8, moe_dispatcher="deepep", ep_comm_overlap=True)
    sc = Scenario(m, make_cluster(gpu="H100-SXM-80GB", num_gpus=16), w, p)
    flags = dict(megatron_args(sc)[0])
    assert flags["--moe-token-dispatcher-type"] == ["flex"]
    assert flags["--moe-flex-dispatcher-backend"] == ["deepep"]  # 8-GPU NVLink nodes
    assert "--overlap-moe-expert-parallel-comm" in flags
    plain = dict(megatron_args(Scenario(m, sc.cluster, w, Plan(dp=8, pp=2, vpp=12, ep=8)))[0])
    assert plain["--moe-token-dispatcher-type"] == ["alltoall"]
    assert "--overlap-moe-expert-parallel-comm" not in plain
    assert not plan_violations("megatron", p, m, w)
    fields = {v.field for v in plan_violations("torchtitan", p, m, w)}
    assert {"moe_dispatcher", "ep_comm_overlap"} <= fields


# DeepGEMM README (deepseek-ai/DeepGEMM), H800, FP8 with fine-grained scaling, BF16 output:
# grouped GEMMs for MoE, (groups, M per group, N, K, TFLOP/s), contiguous and masked layouts
DEEPGEMM_GROUPED = [(4, 8192, 4096, 7168, 1297), (4, 8192, 7168, 2048, 1099),
                    (8, 4096, 4096, 7168, 1288), (8, 4096, 7168, 2048, 1093),
                    (1, 1024, 4096, 7168, 1233), (1, 1024, 7168, 2048, 925),
                    (2, 512, 4096, 7168, 1040), (2, 512, 7168, 2048, 916),
                    (4, 256, 4096, 7168, 932), (4, 256, 7168, 2048, 815)]


def test_expert_gemms_at_small_tokens_per_expert_match_deepgemm():
    """The per-expert GEMM surface (compute.py) at MoE shapes, single-kernel conditions (no
    efficiency.tensor_derating): within 30% of each published point, median within 15%."""
    from dataclasses import replace
    from statistics import median

    from meshplan.cost import efficiency
    from meshplan.cost.compute import device, matmul_s
    from meshplan.cost.ops import MatMul
    from meshplan.specs.catalog.gpus import GPUS

    dev = device(GPUS["H800-SXM-80GB"], "fp8")
    dev = replace(dev, matmul_flops=dev.matmul_flops / efficiency.tensor_derating("hopper"))
    errs = []
    for groups, m, n, k, tflops in DEEPGEMM_GROUPED:
        mm = MatMul("expert", m, n, k, groups)
        ours = mm.flops / matmul_s(dev, mm)[0] / 1e12
        errs.append(ours / tflops - 1)
        assert abs(ours / tflops - 1) < 0.30, (m, n, k, ours, tflops)
    assert abs(median(errs)) < 0.15
