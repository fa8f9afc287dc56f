"""Intervals: class residuals + constants' uncertainty; coverage; plan/predict output."""

import json
import re
import math
import random
import statistics

from meshplan import uncertainty as U
from meshplan.cli import main
from meshplan.cost import estimate
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload
from meshplan.validate import RowResult, loso_coverage

GPUS = "8xH100-SXM-80GB"


def _est(gpus=GPUS, **plan):
    m = load_model("llama3.1-8b")
    c = make_cluster(gpus)
    w = Workload(4096, 16)
    kw = dict(dp=8, tp=1, pp=1, zero=3, micro_batch=1, recompute="full") | plan
    return m, c, estimate(m, c, w, Plan(**kw))


def test_fit_stats_matches_statistics():
    recs = [("hopper/dense/small", 0.1), ("hopper/dense/small", -0.05),
            ("hopper/moe/small", 0.3), ("ampere/dense/large", 0.0)]
    s = U.fit_stats(recs)
    xs = [r for _, r in recs]
    assert s["all"]["n"] == 4
    assert math.isclose(s["all"]["mean"], statistics.mean(xs))
    assert math.isclose(s["all"]["sigma"], statistics.stdev(xs))
    assert s["hopper"]["n"] == 3 and s["hopper/dense"]["n"] == 2
    assert math.isclose(s["hopper/dense/small"]["sigma"], statistics.stdev([0.1, -0.05]))


def test_interval_brackets_point_and_follows_the_data():
    m, c, e = _est()
    iv = U.interval(e, m, c)
    assert iv.step_time_s[0] < e.step_time_s * 1.2 and iv.step_time_s[1] > e.step_time_s * 0.8
    assert iv.tokens_per_s_per_gpu[0] < iv.tokens_per_s_per_gpu[1]
    assert iv.throughput_class == "hopper/dense/small"
    # a residual model whose rows say "measured 2x predicted, no spread" moves the interval
    data = {"meta": {"between_generation_sigma": 0.0}, "constants": {},
            "throughput": {"all": {"n": 100, "mean": math.log(2), "sigma": 0.0}},
            "memory": {"all": {"n": 100, "mean": 0.0, "sigma": 0.0}}}
    iv2 = U.interval(e, m, c, data)
    assert math.isclose(iv2.tokens_per_s_per_gpu[0], 2 * e.tokens_per_s_per_gpu)
    assert math.isclose(iv2.step_time_s[1], e.step_time_s / 2)


def test_may_not_fit_when_p90_memory_crosses_capacity():
    # the test is on what tensors hold (the peak less the allocator's cache, which PyTorch
    # gives back before it fails: cost/memory.py)
    m, c, e = _est()
    assert e.fits
    cap = e.capacity_bytes / 2**30
    parts = e.peak_candidates[e.peak_memory_rank].parts
    held = e.peak_memory_bytes - parts["allocator_fragmentation"]
    need = cap / (held / 2**30)  # factor at which what the plan holds reaches capacity
    data = {"meta": {}, "constants": {},
            "throughput": {"all": {"n": 10, "mean": 0.0, "sigma": 0.1}},
            "memory": {"all": {"n": 1000, "mean": math.log(need) - 0.01, "sigma": 0.05}}}
    iv = U.interval(e, m, c, data)
    assert iv.may_not_fit and U.verdict(e, iv).startswith("may not fit")
    # the printed 90th percentile says the same as the verdict: above the capacity
    assert iv.peak_memory_gib[1] > cap
    data["memory"]["all"]["mean"] = math.log(need) - 0.5
    iv = U.interval(e, m, c, data)
    assert not iv.may_not_fit and U.verdict(e, iv) == "fits"
    # ... and at most the capacity when the plan fits at that percentile, though the peak
    # with the allocator's cache times the p90 factor is above it (the cache fills free
    # memory, it does not grow past the GPU)
    peak = e.peak_memory_bytes / 2**30
    between = []
    for k in range(1, 200):
        data["memory"]["all"]["mean"] = math.log(need) - 0.001 * k
        iv = U.interval(e, m, c, data)
        if not iv.may_not_fit and peak * iv.memory_factors[1] > cap:
            between.append(iv)
    assert between
    for iv in between:
        assert peak <= iv.peak_memory_gib[1] <= cap


def test_uncalibrated_generation_is_wider():
    m, c, e = _est()
    mb, cb, eb = _est(gpus="8xB200")
    w = lambda iv: math.log(iv.step_time_s[1] / iv.step_time_s[0])  # noqa: E731
    assert w(U.interval(eb, mb, cb)) > w(U.interval(e, m, c))


def test_more_exposed_communication_is_less_certain():
    data = {"constants": {"gemm": {"parts": ["compute_s"], "sigma": 0.05},
                          "a2a": {"parts": ["ep_exposed_s"], "sigma": 0.5}}}
    lean = U.constants_var(data, {"compute_s": 1.0, "ep_exposed_s": 0.0})
    comm = U.constants_var(data, {"compute_s": 0.5, "ep_exposed_s": 0.5})
    assert math.isclose(lean, 0.05 ** 2) and comm > lean


def test_loso_coverage_near_80_percent_on_normal_residuals():
    rng = random.Random(7)
    res = []
    for i in range(600):
        r = RowResult(id=str(i), trust="A", model="m", gpus="8xH", source=f"s{i % 6}")
        r.throughput_class = "hopper/dense/small"
        r.predicted_tokens_per_s_per_gpu = 1000.0
        r.measured_tokens_per_s_per_gpu = 1000.0 * math.exp(rng.gauss(0.05, 0.1))
        res.append(r)
    data = {"meta": {"between_generation_sigma": 0.0}}
    cov = loso_coverage(res, data)["coverage"]
    assert 0.75 <= cov <= 0.85


def test_plan_rank_by_p90_json(capsys):
    args = ["plan", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len", "4096",
            "--global-batch", "32", "--top", "3", "--rerank", "0", "--json"]
    assert main(args + ["--rank-by", "p90"]) == 0
    out = json.loads(capsys.readouterr().out)
    key = [(t["interval"]["may_not_fit"], t["interval"]["step_time_s_p10_p90"][1])
           for t in out["top"]]
    assert key == sorted(key) and "p90" in out["ranked_by"]
    for t in out["top"]:
        lo, hi = t["interval"]["step_time_s_p10_p90"]
        assert lo < t["step_time_s"] < hi
        assert t["verdict_with_interval"] in ("fits",) or "may not fit" in t["verdict_with_interval"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert all("interval" in t for t in plain["top"])


def test_plan_names_a_plan_that_fits_when_the_first_may_not(capsys):
    """Llama 3.1 70B on 64 H100 at 8k: the fastest plans fill the 79.11 GiB (zero-bubble schedules
    hold deferred weight gradients), so #1 may not fit at the 90th percentile of memory. The
    plain ranking keeps it first and names the fastest plan shown that fits; --rank-by p90 puts
    the plans that fit first."""
    args = ["plan", "--model", "llama3.1-70b", "--gpus", "64xH100-SXM-80GB", "--seq-len",
            "8192", "--global-batch", "512", "--rerank", "0", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    fits = [not t["interval"]["may_not_fit"] for t in out["top"]]
    assert not fits[0] and any(fits)  # the case this test is about
    first_fit = out["top"][fits.index(True)]
    note = [n for n in out["notes"] if n.startswith("#1 may not fit")]
    assert len(note) == 1 and f"#{fits.index(True) + 1}, {first_fit['label']}, fits" in note[0]
    # --rank-by p90 searches against the capacity over the memory class's 90th percentile
    # factor: every plan it shows fits at that percentile, on the real GPU
    assert main(args + ["--rank-by", "p90"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(not t["interval"]["may_not_fit"] for t in out["top"]) and len(out["top"]) == 5
    p90 = [t["interval"]["step_time_s_p10_p90"][1] for t in out["top"]]
    assert p90 == sorted(p90)
    from meshplan.specs.catalog.gpus import GPUS
    cap_gib = GPUS["H100-SXM-80GB"].memory_bytes / 2**30
    m = re.match(r"searched with ([\d.]+) of the ([\d.]+) GiB per GPU \(.*factor, ([\d.]+)\)",
                 out["notes"][0])
    assert m and float(m[2]) == round(cap_gib, 2)
    assert abs(float(m[1]) - cap_gib / float(m[3])) <= 0.05
    assert not [n for n in out["notes"] if n.startswith("#1 may not fit")]


def test_rank_by_p90_falls_back_when_no_plan_fits_at_the_90th_percentile(capsys):
    """Llama 3.1 70B on 8 H200 at 4k: plans fit at the point estimate, none at the 90th
    percentile of memory; --rank-by p90 then ranks the point-estimate fits and says so."""
    args = ["plan", "--model", "llama3.1-70b", "--gpus", "8xH200-SXM-141GB", "--seq-len", "4096",
            "--global-batch", "8", "--rerank", "0", "--top", "3", "--json", "--rank-by", "p90"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["top"] and all(t["interval"]["may_not_fit"] for t in out["top"])
    assert out["notes"][0].startswith("no plan fits at the 90th percentile of memory")
    assert any(n.startswith("#1 may not fit") and "nor does any plan shown" in n
               for n in out["notes"])


def test_predict_shows_interval(capsys):
    assert main(["predict", "--model", "llama3.1-8b", "--gpus", GPUS, "--seq-len", "4096",
                 "--global-batch", "16", "--dp", "8", "--zero", "3", "--micro-batch", "1",
                 "--recompute", "full"]) == 0
    out = capsys.readouterr().out
    assert "10-90% interval: step time" in out and "peak memory" in out


def test_simulate_carries_the_interval(capsys):
    assert main(["simulate", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len",
                 "4096", "--global-batch", "64", "--pp", "2", "--dp", "8", "--micro-batch", "1",
                 "--zero", "1", "--recompute", "none", "--schedule", "1f1b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    lo, hi = out["interval"]["step_time_s_p10_p90"]
    assert lo < out["step_time_s"] < hi


def test_t90_table_and_small_classes_are_wider():
    assert math.isclose(U.t90(4), 1.533) and math.isclose(U.t90(20), 1.325)
    assert U.t90(10**6) - U.Z90 < 1e-3 and U.t90(4.5) > U.t90(5)
    few = {"all": {"n": 100, "mean": 0.0, "sigma": 0.1}, "g": {"n": 2, "mean": 0.0, "sigma": 0.1}}
    many = {"all": {"n": 100, "mean": 0.0, "sigma": 0.1}, "g": {"n": 200, "mean": 0.0, "sigma": 0.1}}
    assert U._lookup(few, "g")[1] > U._lookup(many, "g")[1] > 0.1
