"""Compute slows beside hidden communication, by what issues it (cost/efficiency.py).

TP overlap kernels (Transformer Engine userbuffers, async TP) are built to share the GPU:
copy-engine all-gathers, reduce-scatters on 16 SMs with the GEMM launched around them. NCCL
collectives and send/recv on a side stream hold SMs the compute kernels were launched for:
Lee et al. 2025 (arXiv 2507.03114) measured compute 18.9% slower on average beside them.
The step's overlap_slowdown_s charges each kind of hidden communication its own share, read
here off the step's own communication report (wire - exposed per axis)."""

import pytest

from meshplan import profile
from meshplan.cost import estimate
from meshplan.cost.efficiency import NETWORK
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

MODEL = preset("llama3.1-8b")
WORK = Workload(4096, 64, "bf16", framework="megatron")


def _hidden(est, axis: str) -> float:
    c = next(c for c in est.comm if c.axis == axis)
    return c.wire_s - c.exposed_s


def test_tp_overlap_alone_is_charged_the_tp_share():
    """One node, TP 8 with SP and overlap, nothing else to hide: 0.10 of the hidden TP time."""
    cl = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    plan = Plan(tp=8, dp=1, pp=1, micro_batch=1, recompute="none", zero=1,
                sequence_parallel=True, tp_comm_overlap=True)
    est = estimate(MODEL, cl, WORK, plan)
    hidden = _hidden(est, "tp")
    assert hidden > 0
    assert est.step_time.parts["overlap_slowdown_s"] == pytest.approx(
        NETWORK.overlap_contention * hidden, rel=1e-9)


def test_hidden_data_parallel_collectives_are_charged_the_nccl_share():
    """16 GPUs of plain data parallelism, gradients reduced under the backward: the
    collective share of the hidden DP time, nearly twice the TP overlap's."""
    cl = make_cluster(gpu="H100-SXM-80GB", num_gpus=16)
    plan = Plan(tp=1, dp=16, pp=1, micro_batch=1, recompute="none", zero=1)
    est = estimate(MODEL, cl, WORK, plan)
    hidden = _hidden(est, "dp")
    assert hidden > 0
    assert est.step_time.parts["overlap_slowdown_s"] == pytest.approx(
        NETWORK.collective_contention * hidden, rel=1e-9)
    assert NETWORK.collective_contention > NETWORK.overlap_contention


def test_both_kinds_add_and_a_profile_moves_each_alone():
    cl = make_cluster(gpu="H100-SXM-80GB", num_gpus=16)
    plan = Plan(tp=8, dp=2, pp=1, micro_batch=1, recompute="none", zero=1,
                sequence_parallel=True, tp_comm_overlap=True)
    base = estimate(MODEL, cl, WORK, plan)
    tp_h, dp_h = _hidden(base, "tp"), _hidden(base, "dp")
    assert tp_h > 0 and dp_h > 0
    assert base.step_time.parts["overlap_slowdown_s"] == pytest.approx(
        NETWORK.overlap_contention * tp_h + NETWORK.collective_contention * dp_h, rel=1e-9)
    restore = profile.apply({"NETWORK.collective_contention": 0.0})
    try:
        no_nccl = estimate(MODEL, cl, WORK, plan)
    finally:
        restore()
    assert no_nccl.step_time.parts["overlap_slowdown_s"] == pytest.approx(
        NETWORK.overlap_contention * tp_h, rel=1e-9)
