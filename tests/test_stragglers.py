"""Stragglers (cost/stragglers.py) and the unhideable last data-parallel bucket (cost/dp_tail.py),
against closed forms of order statistics, ByteDance's published straggler traces and
Megatron-Core's bucket rule."""

import csv
import math
from pathlib import Path

import pytest

from meshplan.cost import estimate
from meshplan.cost.collectives import all_gather_s
from meshplan.cost.dp_tail import bucket_params
from meshplan.cost.stragglers import (JITTERED_PARTS, STEP_JITTER_SIGMA, expected_max_normal,
                                      straggler_s, straggler_units)
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload
from meshplan.uncertainty import load

POINTS = Path(__file__).resolve().parents[1] / "bench" / "data" / "straggler_points.csv"


# ---- E[max of n standard normals] -------------------------------------------------------

def test_expected_max_closed_forms():
    # exact: E[M_2] = 1/sqrt(pi), E[M_3] = 3/(2 sqrt(pi)); E[M_4], E[M_5] from the standard
    # tables of normal order statistics (Harter 1961; David & Nagaraja, Order Statistics)
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-7)
    assert expected_max_normal(3) == pytest.approx(1.5 / math.sqrt(math.pi), abs=1e-7)
    assert expected_max_normal(4) == pytest.approx(1.029375, abs=1e-5)
    assert expected_max_normal(5) == pytest.approx(1.162964, abs=1e-5)
    assert expected_max_normal(10) == pytest.approx(1.538753, abs=1e-5)


def test_expected_max_large_n():
    # Blom's approximation Phi^-1((n - 0.375) / (n + 0.25)) is within ~1% for large n;
    # the first-order asymptote sqrt(2 ln n) lies above and the ratio creeps toward 1
    from statistics import NormalDist
    prev = 0.0
    for n in (64, 512, 2048, 16384, 10**6):
        e = expected_max_normal(n)
        blom = NormalDist().inv_cdf((n - 0.375) / (n + 0.25))
        assert e == pytest.approx(blom, rel=0.015), n
        assert e < math.sqrt(2 * math.log(n))
        assert e > prev
        prev = e
    assert expected_max_normal(10**6) / math.sqrt(2 * math.log(10**6)) > 0.9


def test_bad_n():
    with pytest.raises(ValueError):
        expected_max_normal(0)


# ---- sigma and the closed form against the published traces -----------------------------

def _points():
    return {r["trace"]: r for r in csv.DictReader(POINTS.open())}


def test_sigma_within_the_clean_traces():
    clean = [float(r["step_cv_median"]) for r in _points().values() if r["clean"] == "1"]
    assert len(clean) == 2
    assert min(clean) * 0.9 <= STEP_JITTER_SIGMA <= max(clean) * 1.1


@pytest.mark.parametrize("trace", ["AR", "ST"])
def test_closed_form_predicts_trace_stretch(trace):
    """The measured stretch of each trace's DP group (max over ranks / mean - 1) is what
    sigma x E[M_dp] gives with the trace's own per-step spread (within 30%)."""
    r = _points()[trace]
    pred = float(r["step_cv_median"]) * expected_max_normal(int(r["dp"]))
    assert pred == pytest.approx(float(r["dp_stretch_median"]), rel=0.3)


def test_data_dependent_trace_is_far_outside():
    # the sequence-length-imbalance trace is no hardware jitter: 20x the sigma used
    assert float(_points()["SE"]["step_cv_median"]) > 20 * STEP_JITTER_SIGMA


# ---- in the estimate --------------------------------------------------------------------

def _est(num_gpus, **plan):
    m = preset("llama3.1-8b")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=num_gpus)
    w = Workload(8192, max(8, num_gpus), "bf16", framework="megatron")
    return estimate(m, c, w, Plan(**plan))


def test_units_and_single_gpu():
    assert straggler_units(1, 1) == 1
    assert straggler_units(128, 16) == 2048
    e = _est(1, micro_batch=1, recompute="full")
    assert e.step_time.parts["straggler_s"] == 0.0
    e = _est(8, tp=8, micro_batch=1)  # one TP group: no one to wait for
    assert e.step_time.parts["straggler_s"] == 0.0


def test_single_node_change_is_small_and_parts_sum():
    e = _est(8, dp=8, micro_batch=1, recompute="full")
    p = e.step_time.parts
    share = p["straggler_s"] / e.step_time_s
    # sigma x E[M_8] = 0.5% x 1.42 of the jittered parts: under 0.75% of the step
    assert 0.003 < share < 0.0075
    assert sum(p.values()) == pytest.approx(e.step_time_s, rel=1e-12)
    busy = sum(p.get(k, 0.0) for k in JITTERED_PARTS)
    assert p["straggler_s"] == pytest.approx(busy * STEP_JITTER_SIGMA * expected_max_normal(8))


def test_grows_with_replicas():
    small = _est(64, dp=8, tp=8, micro_batch=1)
    big = _est(4096, dp=512, tp=8, micro_batch=1)
    def rel(e):  # the wait over the time the ranks spend in their layers
        p = e.step_time.parts
        return p["straggler_s"] / sum(p.get(k, 0.0) for k in JITTERED_PARTS)
    assert rel(big) / rel(small) == pytest.approx(
        expected_max_normal(512) / expected_max_normal(8), rel=1e-9)
    assert expected_max_normal(512) / expected_max_normal(8) > 2.1


def test_straggler_s_formula():
    assert straggler_s({"compute_s": 10.0, "pp_bubble_s": 5.0}, 2048, 0.01) == pytest.approx(
        10.0 * 0.01 * expected_max_normal(2048))


def test_interval_carries_the_part():
    groups = [v["parts"] for v in load()["constants"].values()]
    assert any("straggler_s" in g for g in groups)


# ---- the last data-parallel bucket ------------------------------------------------------

def test_megatron_bucket_rule():
    # Megatron-Core DistributedDataParallelConfig: max(40,000,000, 1,000,000 x dp) parameters
    assert bucket_params(True, 1, 8, 1e12, 1e9, 4.0) == 40e6
    assert bucket_params(True, 1, 512, 1e12, 1e9, 4.0) == 512e6
    assert bucket_params(True, 1, 512, 100e6, 1e9, 4.0) == 100e6  # at most one chunk
    assert bucket_params(False, 0, 512, 1e12, 1e9, 4.0) == 25 * 2**20 / 4  # torch DDP 25 MiB
    assert bucket_params(False, 3, 512, 1e12, 1e9, 4.0) == 1e9  # FSDP: one layer


def test_megatron_last_bucket_holds_the_whole_embedding():
    """Megatron-Core never splits a parameter between buckets, so the rank's first parameter,
    the word embedding, ends the last bucket whole: the MLPerf v5.1 Llama 3.1 8B logs print a
    bucket of 525,336,576 elements = 128256 x 4096 (mlcommons/training_results_v5.1 441d65f,
    Verda/results/b200_8x8_ngc25.09/llama31_8b/result_0.txt, 'Params for bucket 2')."""
    emb = 128256 * 4096
    assert bucket_params(True, 1, 32, 8.03e9, 218e6, 2.0, first_param=emb) == emb
    assert bucket_params(True, 1, 32, 8.03e9, 218e6, 2.0) == 40e6  # a rank without it
    assert bucket_params(False, 0, 32, 8.03e9, 218e6, 2.0, first_param=emb) == 25 * 2**20 / 2


def test_last_bucket_is_exposed_at_scale():
    """Megatron zero-1 over 64 nodes: compute hides everything but the last bucket's fp32
    reduce-scatter and the first bucket's bf16 all-gather; that bucket is the one holding the
    embedding, 128256 x 4096 / tp 8 = 65.7M parameters, more than the 64M bucket_size
    (max(40M, 1M x 64)) a bucket closes at."""
    m = preset("llama3.1-8b")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=512)
    e = estimate(m, c, Workload(8192, 1024, "bf16", framework="megatron"),
                 Plan(dp=64, tp=8, micro_batch=2, zero=1))
    dp = next(x for x in e.comm if x.axis == "dp")
    from meshplan.cost.step import placements
    pl = placements(e.plan, c)
    b = 128256 * 4096 / 8
    want = all_gather_s(c, pl["dp"], 4.0 * b) + all_gather_s(c, pl["dp"], 2.0 * b)
    assert dp.exposed_s == pytest.approx(want, rel=1e-9)
    assert 0 < dp.exposed_s < dp.wire_s


def test_tail_keeps_the_zero_ladder_monotone():
    """search/bound.py's Lemma Z: with both overlap switches on, sharding more never exposes
    less, tails included (tiny and large layers, short and long compute windows)."""
    import random
    from dataclasses import replace
    from meshplan.cost.step import _dp_comm, placements
    rng = random.Random(7)
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=64)
    base = Plan(dp=8, tp=8, micro_batch=1)
    pl = placements(base, c)
    for _ in range(200):
        params = 10 ** rng.uniform(5, 10)
        layer = params / rng.choice((1, 4, 32, 80))
        f, b, m = 10 ** rng.uniform(-5, 0), 10 ** rng.uniform(-5, 0), rng.choice((1, 2, 8))
        meg = rng.random() < 0.5
        out = []
        for z in (1, 2, 3):
            tail = bucket_params(meg, z, 8, params, layer, 4.0)
            out.append(_dp_comm(replace(base, zero=z), c, pl, params, 0.0, m, f, b,
                                tail_params=tail)[1])
        assert out[0] <= out[1] * (1 + 1e-12) and out[1] <= out[2] * (1 + 1e-12), (params, out)
