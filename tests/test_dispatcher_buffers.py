"""DeepEP's buffers (meshplan/cost/dispatcher_buffers.py): the byte counts of DeepEP's size
hints written out by hand from deepseek-ai/DeepEP csrc/config.hpp for DeepSeek-V3's hidden
size, their place in the memory breakdown (held, outside PyTorch's reserved figure), and the
expert group sizes Megatron-LM's DeepEP backend refuses (deep_ep/buffer.py config maps)."""

from __future__ import annotations

import dataclasses

import pytest

from meshplan.cost import estimate
from meshplan.cost.dispatcher_buffers import (deepep_buffer_bytes, dispatcher_buffer_bytes,
                                              nvl_buffer_bytes, rdma_buffer_bytes)
from meshplan.cost.memory import reserved_bytes
from meshplan.engines import engine_violations, run_by
from meshplan.plan import Plan
from meshplan.search.space import moe_comm_knobs
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.hardware import Cluster
from meshplan.specs.model import ModelSpec
from meshplan.specs.workload import Workload

HIDDEN = 7168  # DeepSeek-V3
MiB = 2**20


def test_nvl_hint_one_node():
    # 8 ranks: 20 SMs -> 10 channels, 8 NVLink peers, 1 RDMA rank, 256 receive slots;
    # a slot: 7168 * 2 hidden bytes + 8 SourceMeta + 128*8 idx + 128*4 weights + 128*4 scales
    slot = 14336 + 8 + 1024 + 512 + 512
    n = 10 * 8 * (2 * 1 + 3) * 4 + 10 * 8 * 256 * slot  # 335,709,760
    assert nvl_buffer_bytes(2 * HIDDEN, 8, 256) == 335_709_824 == -(-n // 128) * 128
    assert rdma_buffer_bytes(2 * HIDDEN, 8, 128) == 0  # intranode: no NVSHMEM buffer
    # + the 32 MiB workspace
    assert deepep_buffer_bytes(HIDDEN, 8) == 335_709_824 + 32 * MiB


def test_hints_eight_nodes():
    # 64 ranks: 8 RDMA ranks; NVLink 288 slots, RDMA 128 slots (get_dispatch_config(64))
    nvl = 10 * 8 * (2 * 8 + 3) * 4 + 10 * 8 * 288 * 16392  # 377,677,760 -> 377,677,824
    assert nvl_buffer_bytes(2 * HIDDEN, 64, 288) == 377_677_824 == -(-nvl // 128) * 128
    # RDMA: (8*2 + 2)*2 ints per channel and rank, send+receive slots with an int4 more,
    # and 1 MiB to be safe: 11,520 + 336,035,840 + 1,048,576 = 337,095,936 (128-aligned)
    assert rdma_buffer_bytes(2 * HIDDEN, 64, 128) == 337_095_936
    # the NVSHMEM heap maps it in 512 MiB granules
    assert deepep_buffer_bytes(HIDDEN, 64) == 377_677_824 + 32 * MiB + 512 * MiB


def test_only_deepep_kernels_hold_buffers():
    assert dispatcher_buffer_bytes(HIDDEN, "alltoall", 64, 1, 8) == 0.0
    assert dispatcher_buffer_bytes(HIDDEN, "deepep", 1, 1, 8) == 0.0
    assert dispatcher_buffer_bytes(HIDDEN, "deepep", 64, 1, 72) == 0.0  # HybridEP on NVL72
    # the group is expert tensor x expert parallel (Megatron's tp_ep_group)
    assert dispatcher_buffer_bytes(HIDDEN, "deepep", 4, 2, 8) == deepep_buffer_bytes(HIDDEN, 8)


MOE = ModelSpec(name="moe-test", layers=4, hidden=2048, heads=16, kv_heads=4, ffn=5632,
                vocab=32000, moe_experts=64, moe_topk=4, moe_expert_ffn=1024)


def _est(dispatcher: str, gpu: str = "H100-SXM-80GB"):
    cluster = Cluster(GPUS[gpu], 16)
    w = run_by("megatron", Workload(seq_len=2048, global_batch=64))
    plan = Plan(dp=16, ep=16, zero=1, micro_batch=1, moe_dispatcher=dispatcher)
    return estimate(MOE, cluster, w, plan)


def test_memory_breakdown_holds_them_outside_reserved():
    a2a, deep = _est("alltoall"), _est("deepep")
    want = deepep_buffer_bytes(MOE.hidden, 16)
    pa, pd = a2a.memory[0].parts, deep.memory[0].parts
    assert "dispatcher_buffers" not in pa
    assert pd["dispatcher_buffers"] == pytest.approx(want, rel=1e-12)
    # what must fit grows by the buffers; PyTorch's reserved figure does not
    assert deep.peak_memory_bytes - a2a.peak_memory_bytes == pytest.approx(want, rel=1e-9)
    assert reserved_bytes(pd) == pytest.approx(reserved_bytes(pa), rel=1e-12)


def test_megatron_refuses_group_sizes_deepep_has_no_config_for():
    w = run_by("megatron", Workload(seq_len=2048, global_batch=512))
    h100 = Cluster(GPUS["H100-SXM-80GB"], 256)
    big = Plan(dp=256, ep=256, zero=1, micro_batch=1, moe_dispatcher="deepep")
    v = engine_violations("megatron", big, dataclasses.replace(MOE, moe_experts=256), w, h100)
    assert [x.field for x in v] == ["moe_dispatcher"] and "256" in v[0].allowed
    ok = Plan(dp=256, ep=64, zero=1, micro_batch=1, moe_dispatcher="deepep")
    assert not engine_violations("megatron", ok, MOE, w, h100)
    # the search does not offer DeepEP at those sizes, and does at the others
    dispatchers = {dict(k).get("moe_dispatcher") for k in moe_comm_knobs(MOE, h100, "megatron",
                                                                        {}, 256)}
    assert dispatchers == {"alltoall"}
    assert "deepep" in {dict(k).get("moe_dispatcher")
                        for k in moe_comm_knobs(MOE, h100, "megatron", {}, 64)}
    # on an NVL72 rack the export writes HybridEP, which DeepEP's configs do not limit
    gb200 = Cluster(GPUS["GB200"], 288)
    assert not [x for x in engine_violations("megatron", big, MOE, w, gb200)
                if x.field == "moe_dispatcher"]
