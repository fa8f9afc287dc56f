"""Layers replayed from CUDA graphs (Workload.cuda_graph, cost/ops.py graph_replay).

A kernel captured in a CUDA graph is replayed without a host launch or eager dispatch: it
pays the eager per-kernel gap (KERNEL_GAP_S) less the launch saving measured on this
project's lent H100 / H200 (efficiency.GRAPH_LAUNCH_SAVING_S, re-derived here from the
measured files), and the captured ops cost the host one graph launch. Which part of a layer is captured follows
Megatron-Core's cuda_graph_scope (transformer_config.py) and the recipe a row ran
(Megatron-Bridge scripts/performance at the row's release tag)."""
import ast
import csv
import json
import re
import statistics
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from meshplan.cost import efficiency
from meshplan.cost.compute import STREAM_BWD_BYTE_RATIO, op_times
from meshplan.cost.layer import layer_ops_times
from meshplan.cost.ops import (MOE_ROUTER_KERNELS, LayerOps, attention_kernels, attention_ops,
                               normalise_cuda_graph)
from meshplan.cost.step import training_shard
from meshplan.errors import InputError
from meshplan.specs.catalog.presets import load_model
from meshplan.scenario import make_cluster
from meshplan.specs.workload import Workload
from meshplan.validate import predict_row

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "bench" / "data" / "heldout_runs.csv"
MB_MIRROR = Path("/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo")


def _rows() -> dict:
    return {r["id"]: r for r in csv.DictReader(open(HELDOUT, newline=""))}


def _qwen_layer(graph: str, kind: str = "moe"):
    """Qwen3-30B-A3B's MoE layer on one of 8 B200 at ep 8, FP8 current scaling, Megatron."""
    model = load_model("Qwen3-30B-A3B")
    cluster = make_cluster(gpu="B200", num_gpus=8)
    w = Workload(4096, 512, "fp8", framework="megatron", fp8_recipe="cs", cuda_graph=graph)
    shard = training_shard(w, cluster, 1, 1, 1, False, 8, 1)
    ops, dev, t = layer_ops_times(model, cluster, kind, shard, "fp8", "megatron")
    return model, shard, ops, dev, t


def test_the_in_graph_kernel_floor_serving_reads_is_the_measured_one():
    # AIConfigurator h100_sxm/quantize/trtllm/1.2.0rc5: 2.67-3.22 us, median 2.75, in a graph
    assert efficiency.GRAPHED_KERNEL_S == 2.75e-6
    from meshplan.serve import cost as serve_cost
    assert serve_cost.KERNEL_FLOOR_S is efficiency.GRAPHED_KERNEL_S


MEASURED = ROOT / "bench" / "data" / "measured"
LAYER_STEPS = ("h200_2026-11-28/layer_eager_cudnn", "h200_2026-11-28/layer_eager_flash",
               "h200_2026-11-28/layer_compiled_cudnn", "h100_2026-11-28/layer_eager_cudnn",
               "h100_2026-11-28/layer_compiled_cudnn")


def _saving_per_kernel(folder: str) -> float:
    """(eager step - the same step replayed from a CUDA graph) / kernels per step, one of
    the lent GPUs' layer-stack measurements (bench/gpu_layer_step.py)."""
    d = MEASURED / folder
    res = json.loads((d / "layer_step.json").read_text())["results"]
    res = res if isinstance(res, dict) else ast.literal_eval(res)  # a printed dict
    with open(d / "layer_kernels.csv") as f:
        kernels = sum(float(r["calls"]) for r in csv.DictReader(f) if r["phase"] == "cold")
    return (res["eager_s"] - res["graph_first_s"]) / kernels


def test_the_launch_saving_is_the_median_of_the_lent_gpus_measurements():
    per_kernel = [_saving_per_kernel(f) for f in LAYER_STEPS]
    assert all(0 < x < 5e-6 for x in per_kernel)  # a few us: far below KERNEL_GAP_S
    assert efficiency.GRAPH_LAUNCH_SAVING_S == pytest.approx(statistics.median(per_kernel),
                                                             abs=0.01e-6)
    assert efficiency.GRAPH_LAUNCH_SAVING_S < efficiency.KERNEL_GAP_S


def test_a_fully_captured_layer_pays_the_gap_less_the_launch_saving_per_kernel():
    """Closed form: every forward kernel (and FP8 cast kernel) of the layer saves
    GRAPH_LAUNCH_SAVING_S; the backward saves STREAM_BWD_BYTE_RATIO times the
    forward's kernel launches (compute.op_times scales the forward's element-wise part
    before the cast kernels are added) plus its own cast kernels'. GEMM, attention and byte times are
    those of the eager layer."""
    _, _, eager_ops, dev, eager = _qwen_layer("")
    _, _, ops, _, full = _qwen_layer("full")
    saving = efficiency.GRAPH_LAUNCH_SAVING_S
    assert ops.graphed_kernels == eager_ops.kernels > 50
    fwd_saved = (eager_ops.kernels + eager_ops.fp8_fwd_kernels) * saving
    bwd_saved = (STREAM_BWD_BYTE_RATIO * eager_ops.kernels + eager_ops.fp8_bwd_kernels) * saving
    # and the eager dispatcher's host-device sync, which a captured layer cannot make
    assert eager_ops.host_syncs == 1 and ops.host_syncs == 0
    assert eager.fwd_s - full.fwd_s == pytest.approx(fwd_saved + efficiency.HOST_SYNC_S,
                                                     rel=1e-9)
    assert eager.bwd_input_s - full.bwd_input_s == pytest.approx(bwd_saved, rel=1e-9)
    assert full.bwd_weight_s == eager.bwd_weight_s
    # the host launches one graph for the layer
    assert ops.host_ops == 1 < eager_ops.host_ops


def test_transformer_engine_scopes_capture_what_megatron_core_names():
    """cuda_graph_scope "attn" captures TransformerLayer._forward_attention (input norm,
    self-attention, residual add: attention_kernels); "moe_router" the router's kernels;
    "moe_preprocess" only host-side work (no kernel the model counts). MoE scopes do not
    touch a dense layer."""
    model, shard, eager_ops, _, _ = _qwen_layer("")
    attn = LayerOps()
    attention_ops(model, shard, attn)
    assert attention_kernels(attn) == 6  # norm, qkv, rope, core, o_proj, residual add
    for graph, kernels in (("attn", 6), ("moe_router", MOE_ROUTER_KERNELS),
                           ("moe_preprocess", 0),
                           ("attn+moe_router+moe_preprocess", 6 + MOE_ROUTER_KERNELS)):
        _, _, ops, _, _ = _qwen_layer(graph)
        assert ops.graphed_kernels == kernels, graph
        assert ops.kernels == eager_ops.kernels, graph
        assert ops.host_ops < eager_ops.host_ops, graph
    dense_model = load_model("llama3.1-8b")
    cluster = make_cluster(gpu="B200", num_gpus=8)
    w = Workload(4096, 512, "bf16", framework="megatron", cuda_graph="moe_router+moe_preprocess")
    shard = training_shard(w, cluster, 1, 1, 1, False, 1, 1)
    ops, _, _ = layer_ops_times(dense_model, cluster, "dense", shard, "bf16", "megatron")
    assert ops.graphed_kernels == 0


def test_more_capture_is_never_slower():
    row = _rows()["H082"]
    tps = [predict_row(dict(row, cuda_graph=g), with_search_best=False)
           .predicted_tokens_per_s_per_gpu
           for g in ("none", "moe_router+moe_preprocess", "attn+moe_router+moe_preprocess",
                     "full")]
    assert tps == sorted(tps) and tps[-1] > tps[0]


@pytest.mark.parametrize("value, expected", [
    ("", ""), ("none", ""), ("FULL", "full"),
    ("moe_preprocess+attn", "attn+moe_preprocess"), (" moe_router ", "moe_router")])
def test_the_column_is_normalised(value, expected):
    assert normalise_cuda_graph(value) == expected


@pytest.mark.parametrize("value", ["mlp", "attn+", "full+attn", "local"])
def test_an_unknown_scope_names_the_field_and_what_is_allowed(value):
    with pytest.raises(InputError, match="cuda_graph.*allowed: none, full"):
        normalise_cuda_graph(value)


def test_a_runs_csv_row_with_an_unknown_scope_is_an_error_naming_the_column():
    res = predict_row(dict(_rows()["H082"], cuda_graph="attn+mlp"), with_search_best=False)
    assert res.predicted_tokens_per_s_per_gpu is None
    assert "cuda_graph='attn+mlp'" in str(res.error)


def test_rows_stating_cuda_graphs_name_the_recipe_that_set_them():
    stated = {i: r for i, r in _rows().items() if r.get("cuda_graph")}
    assert len(stated) >= 9
    for i, r in stated.items():
        d = r["derivation"]
        assert f"cuda_graph {r['cuda_graph']}" in d, i
        # the recipe read at its release tag, or the setting the derivation already quotes
        # (full_cuda_graph / full-iteration / enable_cuda_graph in a config script or log)
        assert (re.search(r"Megatron-Bridge v0\.\d", d)
                or ("setting quoted above" in d
                    and re.search(r"(?i)cuda.?graph|full.iteration", d.split("; cuda_graph ")[0]))), i


@pytest.mark.skipif(not MB_MIRROR.exists(), reason="needs a local clone of NVIDIA-NeMo/Megatron-Bridge")
def test_the_cited_recipes_set_the_graphs_the_rows_state():
    def show(tag: str, path: str) -> str:
        return subprocess.run(["git", "-C", str(MB_MIRROR), "show", f"{tag}:{path}"],
                              capture_output=True, text=True, check=True).stdout

    rows = _rows()
    # 25.09 (v0.1.0rc4): B200 and GB200 at 8 GPUs enable Megatron-Core's layer graphs
    # (enable_cuda_graph, scope "full") with token drop and padding (no dispatcher sync)
    y = show("v0.1.0rc4", "scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml")
    for gpu, rid in (("gb200", "H077"), ("b200", "H082")):
        block = re.search(rf"\n  {gpu}:\n((?:    .*\n|\n)*)", y).group(1)
        assert "cuda_graphs: true" in block and rows[rid]["cuda_graph"] == "full"
    assert "apply_moe_token_drop(recipe.model)" in show("v0.1.0rc4",
                                                       "scripts/performance/run_script.py")
    # 25.11 (v0.2.0): Transformer Engine graphs of the router and its preprocessing
    base = show("v0.2.0", "scripts/performance/configs/qwen3/workload_base_configs.py")
    b200 = base.split("QWEN3_30B_A3B_B200_FP8_CS_BASE_CONFIG = replace(")[1].split(")\n")[0]
    assert 'cuda_graph_scope=["moe_router", "moe_preprocess"]' in b200
    assert rows["H036"]["cuda_graph"] == "moe_router+moe_preprocess"
    h100 = base.split("QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG = replace(")[1].split(")\n")[0]
    assert "cuda_graph" not in h100 and rows["H033"]["cuda_graph"] == "none"
    # 26.06 (v0.5.0) B300 MXFP8: the whole iteration
    q = show("v0.5.0", "scripts/performance/configs/qwen/qwen3_workload_base_configs.py")
    b300 = q.split("QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1 = replace(")[1].split(")\n")[0]
    assert 'cuda_graph_impl="full_iteration"' in b300 and rows["H190"]["cuda_graph"] == "full"


def test_the_cli_flag_reaches_the_prediction_and_the_header_says_it(capsys):
    from meshplan.cli import main
    argv = ["predict", "--model", "Qwen3-30B-A3B", "--gpus", "8xB200", "--seq-len", "4096",
            "--global-batch", "512", "--precision", "fp8", "--engine", "megatron", "--ep", "8",
            "--dp", "8", "--json"]
    import json
    tps = {}
    for graph in ("none", "full"):
        assert main(argv + ["--cuda-graph", graph]) == 0
        tps[graph] = json.loads(capsys.readouterr().out)["tokens_per_s_per_gpu"]
    assert tps["full"] > tps["none"]
    assert main(argv[:-1] + ["--cuda-graph", "full"]) == 0
    assert "CUDA graphs: full" in capsys.readouterr().out.splitlines()[0]


# ---- the dispatcher's host-device sync (moe_comm.host_syncs, efficiency.HOST_SYNC_S) --------

def test_the_sync_cost_is_the_median_of_the_committed_measurements():
    import json
    import statistics
    runs = sorted((ROOT / "bench" / "data" / "measured").glob("h*_2026-11-28/layer_*/layer_step.json"))
    per_sync = [json.load(open(f))["results"]["sync_gemm_chain"]["per_sync_s"] for f in runs]
    assert len(per_sync) == 7
    assert efficiency.HOST_SYNC_S == pytest.approx(statistics.median(per_sync), abs=0.05e-6)


def test_a_megatron_moe_layer_syncs_once_in_forward_unless_captured_whole():
    from meshplan.cost.moe_comm import host_syncs
    _, _, ops, dev, t = _qwen_layer("")
    assert ops.host_syncs == 1
    no_sync = op_times(dev, replace(ops, host_syncs=0))
    assert t.fwd_s - no_sync.fwd_s == pytest.approx(efficiency.HOST_SYNC_S, rel=1e-9)
    assert (t.bwd_input_s, t.bwd_weight_s) == (no_sync.bwd_input_s, no_sync.bwd_weight_s)
    for graph in ("moe_router+moe_preprocess", "attn+moe_router+moe_preprocess"):
        assert _qwen_layer(graph)[2].host_syncs == 1, graph  # the dispatch itself is eager
    assert _qwen_layer("full")[2].host_syncs == 0
    assert _qwen_layer("", kind="dense")[2].host_syncs == 0
    assert host_syncs("torchtitan", "") == 0 and host_syncs("nemo", "") == 1


def test_full_iteration_is_read_as_a_whole_layer_graph():
    # Megatron-Core cuda_graph_impl "full_iteration" (Megatron-Bridge v0.6.0 perf recipes)
    assert Workload(4096, 32, cuda_graph=" Full_Iteration ").cuda_graph == "full"


@pytest.mark.parametrize("value", ["transformer_engine", "local", "partial", "yes"])
def test_graph_implementations_without_a_scope_are_refused_by_name(value):
    with pytest.raises(InputError, match="cuda_graph"):
        Workload(4096, 32, cuda_graph=value)


def test_a_graphed_step_is_faster_and_does_the_same_work():
    from meshplan.cost.step import estimate
    from meshplan.plan import Plan
    model = load_model("deepseek-v3")
    cluster = make_cluster(gpu="GB300", num_gpus=256)
    plan = Plan(dp=128, pp=2, vpp=8, ep=32, micro_batch=1, moe_dispatcher="deepep")
    base = Workload(4096, 4096, "fp8", framework="nemo", fp8_recipe="mx")
    e0 = estimate(model, cluster, base, plan)
    e1 = estimate(model, cluster, replace(base, cuda_graph="full_iteration"), plan)
    assert e1.step_time_s < e0.step_time_s
    assert e1.model_flops_per_step == e0.model_flops_per_step
    assert e1.peak_reserved_bytes == e0.peak_reserved_bytes
