"""The optimizer step and the per-step gradient-buffer passes of each engine
(meshplan/cost/optimizer_step.py): the bytes per parameter counted from the engines' code,
and the step's optimizer_s / grad_buffer_s parts against their closed forms."""

from __future__ import annotations

import pytest

from meshplan.cost import estimate
from meshplan.cost import optimizer_step as os_
from meshplan.cost.compute import device
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

MODEL = preset("llama3.1-8b")
CLUSTER = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)

def test_step_bytes_per_param_follow_each_engines_kernels():
    # Megatron-Core: grad norm (read 4), FusedAdam (read g, p, m, v; write p, m, v), the
    # main -> model copy (read 4, write 2)
    assert os_.step_bytes_per_param("megatron") == 4 + 28 + 6 == 38
    assert os_.step_bytes_per_param("nemo", "fp16") == 38 + 8  # unscale + inf check
    assert os_.step_bytes_per_param("megatron", "bf16", 2.0) == 38 + 6  # .float() copy
    # torchtitan: clip_grad_norm_ (norm 4, scale 4 + 4), fused AdamW 28, no 16-bit copy
    assert os_.step_bytes_per_param("torchtitan") == 40
    assert os_.step_bytes_per_param("deepspeed") == 30
    assert os_.step_bytes_per_param("megatron", "fp32") == 30


def test_grad_buffer_passes_follow_megatron_ddp():
    # zero_() writes, check_grads' norm reads, the 1/dp pre-scale reads and writes
    assert os_.grad_buffer_bytes_per_param("megatron", 8, 4.0) == 16
    assert os_.grad_buffer_bytes_per_param("megatron", 1, 4.0) == 8  # no scaling at dp 1
    assert os_.grad_buffer_bytes_per_param("nemo", 8, 4.0) == 8  # average_in_collective
    assert os_.grad_buffer_bytes_per_param("megatron", 8, 2.0) == 8
    assert os_.grad_buffer_bytes_per_param("torchtitan", 8, 4.0) == 0


def test_estimate_charges_the_optimizer_and_grad_buffer_closed_forms():
    plan = Plan(tp=1, dp=8, pp=1, micro_batch=1, recompute="full", zero=1)
    hbm = device(CLUSTER.gpu, "bf16").hbm_bytes_per_s
    params = MODEL.total_params()  # tp 1, pp 1: the rank holds every parameter
    for engine, step_b, buf_b in (("megatron", 38, 16), ("nemo", 38, 8), ("deepspeed", 30, 0)):
        work = Workload(4096, 32, "bf16", framework=engine, grad_reduce_dtype="fp32")
        parts = estimate(MODEL, CLUSTER, work, plan).step_time.parts
        # the distributed optimizer (zero 1) owns 1/dp of them; the gradient buffer is whole
        assert parts["optimizer_s"] == pytest.approx(params / 8 * step_b / hbm, rel=1e-3)
        assert parts["grad_buffer_s"] == pytest.approx(params * buf_b / hbm, rel=1e-3)


def test_simulated_step_keeps_the_grad_buffer_passes():
    # the event simulation replaces the pipeline's parts and carries the rest of the step
    from meshplan.pipeline.from_cost import simulate_estimate
    plan = Plan(tp=1, dp=4, pp=2, micro_batch=1, recompute="full", zero=1)
    work = Workload(4096, 32, "bf16", framework="megatron", grad_reduce_dtype="fp32")
    est = estimate(MODEL, CLUSTER, work, plan)
    sim = simulate_estimate(est, record=False)
    assert est.step_time.parts["grad_buffer_s"] > 0
    assert sim.step_parts["grad_buffer_s"] == est.step_time.parts["grad_buffer_s"]


def test_megatron_fsdp_pays_the_same_passes_as_the_distributed_optimizer():
    # Megatron-FSDP checks and pre-scales the unsharded bucket and zeroes its buffer: the
    # part is the same at every ZeRO stage, so a higher stage is never faster by it alone
    # (the search's first fit over ZeRO stages, search/branch.py)
    work = Workload(4096, 32, "bf16", framework="megatron", grad_reduce_dtype="fp32")
    parts = {z: estimate(MODEL, CLUSTER, work, Plan(tp=1, dp=8, pp=1, micro_batch=1,
                                                    recompute="full", zero=z)).step_time.parts
             for z in (1, 3)}
    assert parts[1]["grad_buffer_s"] > 0
    assert parts[3]["grad_buffer_s"] == pytest.approx(parts[1]["grad_buffer_s"])
