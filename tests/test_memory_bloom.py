"""Peak memory against the BigScience BLOOM-176B topology search and the tr3m-1B3 V100 benchmark
(bench/data/heldout_memory.csv rows M101-M145 and M201-M216; bench/data/make_heldout_memory.py
says where each number comes from), the fp16 gradient accounting of Megatron-LM / DeepSpeed
and the attention scores of engines without flash-class kernels that they exposed."""

import csv
import statistics
from pathlib import Path

import pytest

from meshplan.cost import estimate
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload
from meshplan.validate import predict_row

MEMORY = Path(__file__).resolve().parents[1] / "bench" / "data" / "heldout_memory.csv"
ROWS = {r["id"]: r for r in csv.DictReader(open(MEMORY, newline=""))}
BLOOM = [r for r in ROWS.values() if "chronicles-prequel" in r["source"]]
TR3M = [r for r in ROWS.values() if "tr3m-1B3" in r["source"]]


def _pred(rid: str):
    res = predict_row(ROWS[rid], with_search_best=False)
    assert res.error is None, res.error
    return res


def _state_bytes_per_param(precision: str, engine: str, zero: int, dp: int) -> float:
    """weights + gradients + optimizer states of a rank, per parameter it holds"""
    m = preset("llama3.1-8b")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=8 * dp)
    est = estimate(m, c, Workload(4096, 8 * dp, precision, framework=engine),
                   Plan(tp=8, dp=dp, zero=zero, micro_batch=1, recompute="full"))
    parts = est.peak_candidates[0].parts
    params = parts["weights"] / 2  # below zero 3 every parameter is held in 16 bits
    return (parts["weights"] + parts["gradients"] + parts["optimizer_states"]) / params


# Megatron-LM README, "Distributed Optimizer": bytes per parameter, d = data-parallel size:
# fp16 param, fp16 grads 20 (distributed 4 + 16/d); bf16 param, fp32 grads 18 (6 + 12/d)
@pytest.mark.parametrize("engine", ["megatron", "deepspeed"])
@pytest.mark.parametrize("dp", [1, 4, 16])
def test_fp16_states_follow_megatrons_table(engine, dp):
    assert _state_bytes_per_param("fp16", engine, 0, dp) == pytest.approx(20, rel=1e-6)
    assert _state_bytes_per_param("fp16", engine, 1, dp) == pytest.approx(4 + 16 / dp, rel=1e-6)
    assert _state_bytes_per_param("bf16", engine, 0, dp) == pytest.approx(18, rel=1e-6)
    assert _state_bytes_per_param("bf16", engine, 1, dp) == pytest.approx(6 + 12 / dp, rel=1e-6)


def test_fp16_gradients_only_for_engines_that_keep_them():
    # torchtitan / FSDP reduce in fp32: unchanged
    assert _state_bytes_per_param("fp16", "torchtitan", 1, 4) == pytest.approx(6 + 12 / 4)


# The published Mem (nvidia-smi on the first node, less the document's 1.54 GiB CUDA context)
# reads above the prediction: median about 10% over the 42 rows (a near-constant +4..6 GiB,
# not explained: see /work/notes/memdata.md). Tolerance: prediction within -16%..+5% of each
# row below, chosen to span PP 1..48, TP 1..8, DP 1..24 and micro-batch 1..8.
@pytest.mark.parametrize("rid,published_gib", [
    ("M101", 65.46),  # 24B, TP8 on one node, DP1 PP1 MBS1
    ("M107", 71.46),  # 187B, DP4 TP8 PP10 MBS8
    ("M111", 67.46),  # 181B, DP4 TP8 PP12 MBS8
    ("M133", 63.46),  # 181B, DP24 TP8 PP2 MBS1
    ("M139", 61.46),  # 181B, DP16 TP2 PP12 MBS2
    ("M144", 56.46),  # 177B, DP8 TP1 PP48 MBS1
])
def test_bloom_peaks_pinned(rid, published_gib):
    assert float(ROWS[rid]["measured_peak_mem_gib"]) == pytest.approx(published_gib)
    err = _pred(rid).predicted_peak_mem_gib / published_gib - 1
    assert -0.16 <= err <= 0.05, f"{rid}: {err:+.1%}"


def test_bloom_rows_median_and_spread():
    errs = [_pred(r["id"]).memory_error for r in BLOOM if r["measured_peak_mem_gib"]]
    assert len(errs) == 42
    assert statistics.median(abs(e) for e in errs) <= 0.12
    assert max(errs) - min(errs) <= 0.20  # 18.7% -> 13.2% p90 after fp16 gradients


def test_bloom_zero0_against_zero1():
    # 02-21 'ZS' table: same layout, ZeRO stage 0 72 GB vs stage 1 37 GB: 35 GB for
    # (20 - (4 + 16/4)) = 12 bytes per held parameter; the model's difference within 20%
    d = _pred("M117").predicted_peak_mem_gib - _pred("M109").predicted_peak_mem_gib
    assert d == pytest.approx(72 - 37, rel=0.20)


@pytest.mark.parametrize("rid", ["M135", "M140", "M141"])
def test_bloom_out_of_memory_rows_flagged(rid):
    res = _pred(rid)
    assert ROWS[rid]["oom"] == "1"
    assert res.predicted_oom or res.predicted_may_not_fit


def test_materialised_scores_closed_form():
    # Korthikanti et al. 2022 eq. 1: without recomputation a layer keeps
    # s*b*h*(34 + 5*a*s/h) bytes (no SP, tp 1): on a V100 under Megatron-DeepSpeed the
    # 5*a*s^2*b part appears on top of the flash-style layer; not under torchtitan (SDPA)
    m = preset("llama3.1-8b")
    c = make_cluster(gpu="V100-SXM-32GB", num_gpus=8)
    plan = Plan(tp=8, dp=1, zero=1, micro_batch=1, recompute="none")
    def acts(engine):
        est = estimate(m, c, Workload(1024, 8, "fp16", framework=engine), plan)
        return est.peak_candidates[0].parts["activations"]
    extra = acts("megatron") - acts("torchtitan")
    layers = m.layers
    # pipeline 1: one micro-batch in flight
    assert extra == pytest.approx(layers * 5 * 1 * (m.heads / 8) * 1024 * 1024, rel=1e-6)


# tr3m-1B3 on 8 V100 32GB, no activation checkpointing: the scores are ~40% of the peak;
# before they were modelled these rows read -46..-56%; tolerance +-15%
@pytest.mark.parametrize("rid", ["M212", "M213", "M214", "M215"])
def test_tr3m_no_recompute_peaks(rid):
    published = float(ROWS[rid]["measured_peak_mem_gib"])
    assert _pred(rid).predicted_peak_mem_gib == pytest.approx(published, rel=0.15)
