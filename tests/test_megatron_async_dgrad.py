"""Megatron-LM's asynchronous TP collectives in the backward of its column-parallel linears
(cost/layer.megatron_async_dgrad), against the engine's code: NVIDIA/Megatron-LM
megatron/mpu/layers.py at d898a8991d (2022-05-25) LinearWithGradAccumulationAndAsyncCommunication
.backward, the same steps in megatron/core/tensor_parallel/layers.py at d98e8a64dd (2026-08):
- no sequence parallelism: grad_input = grad_output @ W; all_reduce(grad_input,
  async_op=True); the weight-gradient GEMM; handle.wait(). The forward's all-reduces (row-
  parallel outputs) stay blocking.
- sequence parallelism: _all_gather_base(input, async_op=True) beside the input-gradient
  GEMM (a gather the forward already did: more bytes on the wire), then
  _reduce_scatter_base(grad_input, async_op=True) beside the weight-gradient GEMM. The
  row-parallel outputs' reduce-scatter has a blocking all-gather as its backward
  (mappings._ReduceScatterToSequenceParallelRegion).
The times of each GEMM and collective are the module's own (matmul_s, all_reduce_s,
all_gather_s): the test checks which of them run beside which, not their rates.
"""

import pytest

from meshplan.cost.collectives import all_gather_s, all_reduce_s
from meshplan.cost.compute import matmul_s
from meshplan.cost.layer import CommPlacements, layer_cost, layer_ops_times
from meshplan.cost.step import placements, training_shard
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.model import ModelSpec
from meshplan.specs.workload import Workload

MODEL = ModelSpec(name="22B", layers=48, hidden=6144, heads=64, kv_heads=64, ffn=24576,
                  vocab=51200, mlp="gelu")
CLUSTER = make_cluster(gpu="A100-SXM-80GB", num_gpus=8)


def _cost(engine: str, sp: bool, recompute: str = "none", tp_overlap: bool = False):
    wl = Workload(2048, 4, "bf16", framework=engine)
    plan = Plan(dp=1, tp=8, pp=1, micro_batch=4, recompute=recompute, sequence_parallel=sp)
    shard = training_shard(wl, CLUSTER, 4, 8, 1, sp, 1, 1)
    pl = placements(plan, CLUSTER)
    places = CommPlacements(pl["tp"], pl["cp"], pl["ep"], pl["etp"])
    c = layer_cost(MODEL, CLUSTER, "dense", shard, recompute, places, tp_overlap, "bf16",
                   "ring", engine)
    ops, dev, _ = layer_ops_times(MODEL, CLUSTER, "dense", shard, "bf16", engine)
    col = {mm.name: matmul_s(dev, mm) for mm in ops.matmuls if mm.name in ("qkv", "mlp_fc1")}
    return c, ops, col, pl["tp"]


def test_all_reduce_hidden_behind_the_weight_gradient_gemms():
    c, ops, col, place = _cost("megatron", sp=False)
    ar = all_reduce_s(CLUSTER, place, ops.tp_buffer_bytes)
    assert len(col) == 2 and all(t[2] > ar for t in col.values())  # each wgrad outlasts it
    # two all-reduces a pass; the forward's two exposed, the backward's two hidden
    assert c.tp_wire_s == pytest.approx(4 * ar)
    assert c.fwd_exposed_s == pytest.approx(2 * ar)
    assert c.tp_exposed_s == pytest.approx(2 * ar)
    assert c.tp_nccl_hidden_s == pytest.approx(2 * ar)


def test_sequence_parallel_regather_and_reduce_scatter_hidden():
    c, ops, col, place = _cost("megatron", sp=True)
    ag = all_gather_s(CLUSTER, place, ops.tp_buffer_bytes)
    hidden = sum(min(ag, t[1]) + min(ag, t[2]) for t in col.values())
    # forward: 2 all-gathers + 2 reduce-scatters; backward: the same 4 plus 2 re-gathers
    assert c.tp_wire_s == pytest.approx(10 * ag)
    assert c.fwd_exposed_s == pytest.approx(4 * ag)
    assert c.tp_nccl_hidden_s == pytest.approx(hidden) and hidden == pytest.approx(4 * ag)
    assert c.tp_exposed_s == pytest.approx(6 * ag)  # the backward's 2 blocking gathers


def test_full_recomputation_exposes_the_replayed_forward():
    c, ops, _, place = _cost("megatron", sp=False, recompute="full")
    ar = all_reduce_s(CLUSTER, place, ops.tp_buffer_bytes)
    assert c.tp_exposed_s == pytest.approx(4 * ar)  # forward + recomputed forward
    assert c.bwd_input_s - c.bwd_input_compute_s - c.recompute_s == pytest.approx(2 * ar)


def test_hidden_collectives_slow_compute_as_nccl_does():
    """Plain NCCL calls on their own stream: collective_contention, not TE's overlap share."""
    from meshplan.cost.efficiency import NETWORK
    c, *_ = _cost("megatron", sp=False)
    assert c.overlap_slowdown_s == pytest.approx(
        NETWORK.collective_contention * c.tp_nccl_hidden_s)


@pytest.mark.parametrize("engine", ["torchtitan", "deepspeed", ""])
def test_other_engines_keep_their_collectives_blocking(engine):
    c, *_ = _cost(engine, sp=False)
    assert c.tp_exposed_s == pytest.approx(c.tp_wire_s) and c.tp_nccl_hidden_s == 0.0


def test_userbuffer_overlap_replaces_it():
    """--tp-comm-overlap (TE userbuffers) hides its share of every pass instead."""
    from meshplan.cost.efficiency import NETWORK
    c, *_ = _cost("megatron", sp=True, tp_overlap=True)
    assert c.tp_nccl_hidden_s == 0.0
    assert c.tp_exposed_s == pytest.approx((1 - NETWORK.tp_overlap) * c.tp_wire_s)
