"""A training step replayed from one CUDA graph (Workload.cuda_graph "full_iteration",
Megatron-Core cuda_graph_impl "full_iteration", as Megatron-Bridge v0.6.0's DeepSeek-V3 MXFP8
recipes set it): the graph replays the same kernels, so GEMM, attention and byte times stay
as they are and only each kernel's fixed cost changes: KERNEL_GAP_S less the launch saving
measured on this project's lent H100 / H200 (efficiency.GRAPH_LAUNCH_SAVING_S), which is
re-derived here from the measured files."""

import ast
import csv
import json
import statistics
from pathlib import Path

from dataclasses import replace

import pytest

from meshplan.cost import efficiency
from meshplan.cost.layer import layer_ops_times
from meshplan.cost.step import training_shard
from meshplan.errors import InputError
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload


def _layer(graph: str, kind: str = "moe", gpu: str = "GB300", dispatcher: str = "deepep"):
    model = preset("deepseek-v3")
    cluster = make_cluster(gpu=gpu, num_gpus=256)
    w = Workload(4096, 4096, "fp8", framework="nemo", fp8_recipe="mx", cuda_graph=graph)
    shard = training_shard(w, cluster, 1, 1, 1, False, 32, 1)
    return layer_ops_times(model, cluster, kind, shard, w.precision, w.framework, dispatcher)


@pytest.mark.parametrize("kind", ["moe", "dense", "head"])
def test_a_graphed_step_saves_exactly_the_launch_cost_of_its_kernels(kind):
    ops, dev, t = _layer("", kind)
    ops_g, dev_g, t_g = _layer("full_iteration", kind)
    assert ops_g.kernels == ops.kernels and ops_g.stream_bytes == ops.stream_bytes
    assert dev.kernel_gap_s == efficiency.KERNEL_GAP_S
    saved = efficiency.GRAPH_LAUNCH_SAVING_S
    assert dev_g.kernel_gap_s == pytest.approx(efficiency.KERNEL_GAP_S - saved)
    # forward: each kernel once (compute.op_times: ops.kernels and the FP8 cast kernels);
    # backward: twice the forward's kernels (STREAM_BWD_BYTE_RATIO) and its own cast kernels
    assert t.fwd_s - t_g.fwd_s == pytest.approx(
        (ops.kernels + ops.fp8_fwd_kernels) * saved, rel=1e-9)
    assert t.bwd_input_s - t_g.bwd_input_s == pytest.approx(
        (2 * ops.kernels + ops.fp8_bwd_kernels) * saved, rel=1e-9)
    # the weight gradients (GEMMs only) and the attention core do not change
    assert t_g.bwd_weight_s == t.bwd_weight_s and t_g.attn_fwd_s == t.attn_fwd_s


def test_blank_and_none_are_the_host_launched_step():
    assert _layer("")[2] == _layer("none")[2]


MEASURED = Path(__file__).resolve().parents[1] / "bench" / "data" / "measured"
LAYER_STEPS = ("h200_2026-11-28/layer_eager_cudnn", "h200_2026-11-28/layer_eager_flash",
               "h200_2026-11-28/layer_compiled_cudnn", "h100_2026-11-28/layer_eager_cudnn",
               "h100_2026-11-28/layer_compiled_cudnn")


def _saving_per_kernel(folder: str) -> float:
    """(eager step - the same step replayed from a CUDA graph) / kernels per step, one of
    the lent GPUs' layer-stack measurements (bench/gpu_layer_step.py)."""
    d = MEASURED / folder
    step = json.loads((d / "layer_step.json").read_text())
    res = step["results"]
    res = res if isinstance(res, dict) else ast.literal_eval(res)  # a printed dict
    with open(d / "layer_kernels.csv") as f:
        kernels = sum(float(r["calls"]) for r in csv.DictReader(f) if r["phase"] == "cold")
    return (res["eager_s"] - res["graph_first_s"]) / kernels


def test_the_launch_saving_is_the_median_of_the_lent_gpus_measurements():
    per_kernel = [_saving_per_kernel(f) for f in LAYER_STEPS]
    assert all(0 < x < 5e-6 for x in per_kernel)  # a few us: far below KERNEL_GAP_S
    assert efficiency.GRAPH_LAUNCH_SAVING_S == pytest.approx(statistics.median(per_kernel),
                                                             abs=0.01e-6)


@pytest.mark.parametrize("value", ["transformer_engine", "local", "partial", "yes"])
def test_module_scoped_graphs_are_refused_by_name(value):
    with pytest.raises(InputError, match="cuda_graph"):
        Workload(4096, 32, cuda_graph=value)


def test_the_value_is_normalised():
    assert Workload(4096, 32, cuda_graph=" Full_Iteration ").cuda_graph == "full_iteration"


def test_a_runs_csv_row_states_it(tmp_path):
    from meshplan.validate import prepare
    row = {"id": "x", "model": "deepseek-v3", "gpu": "GB300", "num_gpus": "256",
           "seq_len": "4096", "global_batch_seqs": "4096", "precision": "fp8",
           "framework": "nemo", "cuda_graph": "full_iteration"}
    assert prepare(row).workload.cuda_graph == "full_iteration"
    assert prepare(replace_row(row, cuda_graph="")).workload.cuda_graph == ""


def replace_row(row: dict, **kw) -> dict:
    return {**row, **kw}


def test_a_graphed_step_is_faster_by_its_kernels_only():
    from meshplan.cost.step import estimate
    from meshplan.plan import Plan
    model = preset("deepseek-v3")
    cluster = make_cluster(gpu="GB300", num_gpus=256)
    plan = Plan(dp=128, pp=2, vpp=8, ep=32, micro_batch=1, moe_dispatcher="deepep")
    base = Workload(4096, 4096, "fp8", framework="nemo", fp8_recipe="mx")
    e0 = estimate(model, cluster, base, plan)
    e1 = estimate(model, cluster, replace(base, cuda_graph="full_iteration"), plan)
    assert e1.step_time_s < e0.step_time_s
    assert e1.model_flops_per_step == e0.model_flops_per_step
    assert e1.peak_reserved_bytes == e0.peak_reserved_bytes
