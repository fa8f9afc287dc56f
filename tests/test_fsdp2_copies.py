"""FSDP2's copy-out after every all-gather and copy-in before every reduce-scatter run on the
compute stream (cost/fsdp2_copies.py): a zero-3 step of an FSDP2 engine pays, per micro-batch
and parameter, two copy-outs of the 16-bit gathered weights (read + write, 2 + 2 bytes each)
and one copy-in of the 16-bit gradient into the reduce dtype (2 + 4 bytes with an fp32
reduce): 14 bytes, 12 with a bf16 reduce. Engines that gather and reduce in place (Megatron)
pay nothing."""

import inspect
import re

import pytest

from meshplan.cost import estimate
from meshplan.cost.compute import device
from meshplan.cost.fsdp2_copies import copy_bytes_per_param, fsdp2_copy_s
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

MODEL = preset("llama3.1-8b")
CLUSTER = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
PLAN = Plan(tp=1, dp=8, pp=1, micro_batch=1, recompute="full", zero=3)


def test_bytes_per_parameter_follow_the_copies_fsdp2_issues():
    # zero 3: per micro-batch 2 gathers x (read 2 + write 2) + one copy-in (read 2 + write 4)
    assert copy_bytes_per_param(3, 1, 4.0) == 14.0
    assert copy_bytes_per_param(3, 5, 2.0) == 5 * 12.0
    # zero 2 (reshard_after_forward=False): one gather per micro-batch and, since neither
    # torchtitan's nor OLMo-core's loop turns gradient sync off, one reduce-scatter per
    # micro-batch too (engine_dp.sharded_schedule, _dp_comm's counts)
    assert copy_bytes_per_param(2, 4, 4.0) == 4 * 4.0 + 4 * 6.0
    # under torch.distributed.pipelining: gathered once, reduced once per step
    assert copy_bytes_per_param(2, 4, 4.0, pp=2) == 4.0 + 6.0
    assert copy_bytes_per_param(1, 4, 4.0) == 0.0
    assert fsdp2_copy_s("megatron", 3, 4, 1e9, 4.0, 3e12) == 0.0


@pytest.mark.parametrize("engine", ["torchtitan", "olmo-core"])
def test_a_zero3_fsdp2_step_pays_fourteen_bytes_per_parameter_per_microbatch(engine):
    work = Workload(4096, 32, "bf16", framework=engine, grad_reduce_dtype="fp32")
    est = estimate(MODEL, CLUSTER, work, PLAN)
    m = est.num_microbatches
    assert m == 4
    hbm = device(CLUSTER.gpu, "bf16").hbm_bytes_per_s
    # every parameter sits in the rank's FSDP units (pp 1, tp 1: the whole model); Llama 3.1
    # 8B holds 8,030,261,248 (sum of numel() over meta-llama/Llama-3.1-8B's weights)
    assert est.step_time.parts["fsdp_copy_s"] == pytest.approx(
        m * 8_030_261_248 * 14.0 / hbm, rel=1e-3)


def test_megatron_gathers_in_place_and_pays_no_copy():
    work = Workload(4096, 32, "bf16", framework="megatron", grad_reduce_dtype="fp32")
    est = estimate(MODEL, CLUSTER, work, PLAN)
    assert est.step_time.parts["fsdp_copy_s"] == 0.0


def test_the_copies_sit_on_the_compute_stream_in_torch():
    """The premise, read from the installed torch: the copy-out follows the wait for the
    all-gather outside any side-stream context, and the reduce-scatter copy-in runs before
    the reduce-scatter stream is entered (and waits for the current stream)."""
    pytest.importorskip("torch")
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives as c

    out = inspect.getsource(c.foreach_all_gather_copy_out)
    assert "split_with_sizes_copy" in out and ".stream(" not in out
    red = inspect.getsource(c.foreach_reduce)
    copy_in = red.index("foreach_reduce_scatter_copy_in(")
    rs_stream = re.search(r"with device_handle\.stream\(reduce_scatter_stream\)", red).start()
    assert copy_in < rs_stream
    assert "reduce_scatter_stream.wait_stream(current_stream)" in red[copy_in:rs_stream]
    assert "dtype=reduce_dtype" in red[:copy_in]  # the copy-in writes the reduce dtype
