"""fp32 / tf32 training and DeepSpeed's partitioned pipeline sends, checked against the
Sailor artifact's measured per-layer profiles (bench/data/sailor_layer_profiles.csv:
Megatron-DeepSpeed OPT-350M, seq 2048, tp 1, fp32 weights, NGC container with TF32 on)."""

import csv
import dataclasses
from pathlib import Path

import pytest

from meshplan.cost.compute import device, op_times
from meshplan.cost.ops import Shard, layer_ops, unfused_norms
from meshplan.cost.step import estimate
from meshplan.plan import Plan
from meshplan.row_model import model_from_row
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.hardware import Cluster
from meshplan.specs.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
PROFILES = list(csv.DictReader(open(ROOT / "bench/data/sailor_layer_profiles.csv")))
OPT350, _ = model_from_row(next(csv.DictReader(open(ROOT / "bench/data/hetero_runs.csv"))))
TF32_PARTS = ("H100-SXM-80GB", "A100-SXM-80GB", "A100-SXM-40GB")  # TF32 tensor cores


def layer_ms(gpu: str, mbs: int, precision: str, seq: int = 2048) -> float:
    ops = unfused_norms(layer_ops(OPT350, False, Shard(seq=seq, micro_batch=mbs, tp=1)),
                        "deepspeed")
    t = op_times(device(GPUS[gpu], precision, "deepspeed"), ops)
    return (t.fwd_s + t.bwd_input_s + t.bwd_weight_s) * 1e3


def test_profiles_file_is_the_artifact_table():
    assert len(PROFILES) == 26
    # spot values read by hand from the artifact's JSON (median of layer_compute_total_ms)
    by = {(r["artifact_gpu"], int(r["micro_batch"])): float(r["measured_layer_fwd_bwd_ms"])
          for r in PROFILES}
    assert by[("GH-96", 1)] == pytest.approx(3.91, abs=0.01)
    assert by[("Titan-RTX", 2)] == pytest.approx(55.61, abs=0.01)


@pytest.mark.parametrize("r", PROFILES, ids=lambda r: f"{r['artifact_gpu']}-mb{r['micro_batch']}")
def test_fp32_layer_time_follows_the_measured_profile(r):
    measured = float(r["measured_layer_fwd_bwd_ms"])
    pred = layer_ms(r["gpu"], int(r["micro_batch"]), "tf32")
    # with the per-shape GEMM model (cost/gemm.py): TF32 parts 7-17% fast (0.83-0.93 of the
    # measured time), fp32-only parts (Volta, Turing, GA102 whose TF32 rate equals its fp32
    # rate) 1% fast to 32% slow: the SIMT GEMM fraction is the tensor-core one (an
    # assumption, compute._fp32_device) except on the V100, whose measured SGEMM fraction
    # (efficiency.SKU_MATMUL, Markidis et al. 2018) leaves its rows 24-32% slow: the known
    # remaining error
    lo, hi = (0.80, 1.15) if r["gpu"] in TF32_PARTS else (0.95, 1.4)
    assert lo < pred / measured < hi
    # the 16-bit flash-attention model is 3.5-8x too fast on these runs: the mechanism matters
    assert layer_ms(r["gpu"], int(r["micro_batch"]), "bf16") < 0.45 * measured


def test_tf32_falls_back_to_fp32_without_tf32_units():
    assert "tf32" not in GPUS["TITAN-RTX-24GB"].peak_flops
    a = device(GPUS["TITAN-RTX-24GB"], "tf32", "deepspeed")
    b = device(GPUS["TITAN-RTX-24GB"], "fp32", "deepspeed")
    assert a == b and a.matmul_bytes == 4 and a.unfused_attention and a.act_scale == 2.0
    h100 = GPUS["H100-SXM-80GB"]
    ratio = device(h100, "tf32").matmul_flops / device(h100, "fp32").matmul_flops
    assert ratio == pytest.approx(h100.flops("tf32") / h100.flops("fp32"))


def test_unfused_attention_grows_with_the_square_of_the_sequence():
    # tokens fixed (seq x micro-batch), sequence doubled: the linear layers cost the same,
    # the materialised scores double per token
    short = layer_ms("A100-SXM-80GB", 2, "tf32", seq=2048)
    long = layer_ms("A100-SXM-80GB", 1, "tf32", seq=4096)
    flash_short = layer_ms("A100-SXM-80GB", 2, "bf16", seq=2048)
    flash_long = layer_ms("A100-SXM-80GB", 1, "bf16", seq=4096)
    assert long / short > 1.3 and long / short > flash_long / flash_short


def test_deepspeed_pipeline_sends_one_tp_slice():
    cluster = Cluster(GPUS["A100-SXM-80GB"], 16)
    plan = Plan(dp=1, tp=4, pp=4, micro_batch=2, sequence_parallel=False)
    ds = estimate(OPT350, cluster, Workload(2048, 64, framework="deepspeed"), plan)
    mg = estimate(OPT350, cluster, Workload(2048, 64, framework="megatron"), plan)
    assert ds.chunks[0].p2p_bytes == pytest.approx(mg.chunks[0].p2p_bytes / 4)
    assert mg.chunks[0].p2p_bytes == 2 * 2048 * 2 * OPT350.hidden  # mb x seq x 2 B x h
    fp32 = estimate(OPT350, cluster, Workload(2048, 64, "fp32", framework="megatron"), plan)
    assert fp32.chunks[0].p2p_bytes == 2 * mg.chunks[0].p2p_bytes
    sp = dataclasses.replace(plan, sequence_parallel=True)
    ds_sp = estimate(OPT350, cluster, Workload(2048, 64, framework="deepspeed"), sp)
    assert ds_sp.chunks[0].p2p_bytes == pytest.approx(mg.chunks[0].p2p_bytes / 4)


def test_fp32_memory_counts_4_byte_weights_and_no_separate_master():
    cluster = Cluster(GPUS["A100-SXM-80GB"], 8)
    plan = Plan(dp=8, tp=1, pp=1, micro_batch=1, zero=1, sequence_parallel=False)
    mixed = estimate(OPT350, cluster, Workload(2048, 8, "bf16", framework="deepspeed"), plan)
    fp32 = estimate(OPT350, cluster, Workload(2048, 8, "fp32", framework="deepspeed"), plan)
    a, b = mixed.memory[0].parts, fp32.memory[0].parts
    assert b["weights"] == pytest.approx(2 * a["weights"])  # 4 bytes against 2
    assert b["gradients"] == pytest.approx(a["gradients"])  # 4 bytes in both
    # Adam: moments only (8 bytes) against master + moments (12), sharded the same way
    assert b["optimizer_states"] == pytest.approx(a["optimizer_states"] * 8 / 12)
    assert b["activations"] > 1.8 * a["activations"]  # 4-byte activations, fp32 scores


def test_torchtitan_export_refuses_fp32():
    from meshplan.engines import scenario_violations
    v = scenario_violations("torchtitan", OPT350, Workload(2048, 8, "tf32"))
    assert [x.field for x in v if x.field == "precision"] == ["precision"]
    assert not [x for x in scenario_violations("megatron", OPT350, Workload(2048, 8, "fp32"))
                if x.field == "precision"]
