"""The cost model's kernel constants against our own measurements on one H200
(bench/data/measured/h200_2026-11-27, lent GPU, 2026-11-27; README.md there says how each file
was made). None of these rows set a constant they are checked against here except where the
test says so: the GEMM shape model was fitted on OpenXLA's H100 table (tests/test_gemm_model.py)
and is checked on these H200 GEMMs as held-out data; the attention levels at 8k keys and the
two half-sequence lengths were set from attention.csv (efficiency.py says so), so their test
checks the fit's residual over the 48 points it used, and the head-dim ratios it did not use.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import tomllib
from pathlib import Path
from statistics import median

import pytest

from meshplan.calibrate import fit
from meshplan.cost import compute, efficiency
from meshplan.cost.compute import attention_efficiency, attention_occupancy
from meshplan.specs.catalog.gpus import GPUS
from test_gemm_model import assert_error_spread, measured_errors

ROOT = Path(__file__).resolve().parents[1]
DIR = ROOT / "bench" / "data" / "measured" / "h200_2026-11-27"
H200 = GPUS["H200-SXM-141GB"]
PEAK = H200.flops("bf16")


def _rows(name: str) -> list[dict]:
    return list(csv.DictReader((DIR / name).open()))


@pytest.mark.parametrize("dtype,model_dtype,med,p90", [
    # bf16 at the 375 shapes of OpenXLA's H100 table plus calibrate's 7: 133 rows of 15 us or
    # more (the floor tests/test_gemm_model.py scores the published table above): 3.6% /
    # 12.4% off, the model 3.1% slow at the median
    ("bf16", "bf16", 0.06, 0.15),
    # fp8 e4m3 torch._scaled_mm, per-tensor scales, partial sums promoted to fp32 (TE's dgrad
    # and wgrad) and with fast accumulation (TE's fprop): 18 rows each, 5.8% / 13.0% and
    # 4.1% / 9.1% off
    ("fp8", "fp8", 0.08, 0.15),
    ("fp8_fastacc", "fp8", 0.08, 0.15),
])
def test_gemm_shape_model_on_h200_measurements(dtype, model_dtype, med, p90):
    errs = measured_errors(DIR / "gemm.csv", H200.name, dtype, model_dtype, 15e-6)
    assert len(errs) >= 18
    assert_error_spread(errs, med, p90)


def test_small_gemms_timed_eagerly_read_the_launch_rate_not_the_kernel():
    """Why gemm.csv is timed under CUDA graphs (calibrate.micro.kernel_s): the same shapes
    launched back to back from eager PyTorch on the lent VM (gemm_eager.csv) never ran faster
    than ~17 us a call, while the graph-timed kernels of those shapes take 3-15 us."""
    eager = {(r["dtype"], r["groups"], r["m"], r["n"], r["k"]): float(r["tflops"])
             for r in _rows("gemm_eager.csv")}
    ratios = []
    for r in _rows("gemm.csv"):
        key = (r["dtype"], r["groups"], r["m"], r["n"], r["k"])
        if key not in eager or r["dtype"] != "bf16":
            continue
        flops = 2 * math.prod(float(x) for x in key[1:])
        eager_s = flops / (eager[key] * 1e12)
        assert eager_s > 15e-6
        if flops / (float(r["tflops"]) * 1e12) < 10e-6:
            ratios.append(eager_s / (flops / (float(r["tflops"]) * 1e12)))
    assert len(ratios) > 100 and median(ratios) > 2.5


def _attention(backend: str, head_dim: int) -> list[dict]:
    return [r for r in _rows("attention.csv") if r["backend"] == backend
            and r["causal"] == "1" and int(r["head_dim"]) == head_dim and not r.get("error")]


KERNEL = {"flash": "fa2", "cudnn": "te"}


def _model_fraction(backend: str, seq: int, head_dim: int, backward: bool) -> float:
    dev = compute.device(H200, "bf16", "megatron", KERNEL[backend])
    return attention_efficiency(dev, head_dim, backward) * attention_occupancy(seq, backward)


@pytest.mark.parametrize("backend,tol", [("flash", 0.06), ("cudnn", 0.09)])
def test_attention_by_sequence_length_at_head_dim_128(backend, tol):
    """The 8k-key levels (ATTENTION_FA2, EFFICIENCY['hopper']) and the forward / backward
    half-sequence lengths were set from these curves: every point of 512-16,384 keys within
    6% (FlashAttention-2) and 9% (cuDNN: its backward at 16k keys is 8% below its 8k rate,
    which the model's monotone curve cannot follow)."""
    rows = _attention(backend, 128)
    assert len(rows) == 6
    for r in rows:
        for key, bwd in (("fwd_tflops", False), ("bwd_tflops", True)):
            measured = float(r[key]) * 1e12 / PEAK
            model = _model_fraction(backend, int(r["seq"]), 128, bwd)
            assert model == pytest.approx(measured, rel=tol), (r["seq"], key)


def test_backward_ramps_up_more_slowly_than_forward():
    # at 512 keys both kernels' backward is at ~0.41 of its 8k rate and the forward at ~0.56
    for backend in KERNEL:
        rows = {int(r["seq"]): r for r in _attention(backend, 128)}
        f = float(rows[512]["fwd_tflops"]) / float(rows[8192]["fwd_tflops"])
        b = float(rows[512]["bwd_tflops"]) / float(rows[8192]["bwd_tflops"])
        assert b < f - 0.1
        assert attention_occupancy(512, True) == pytest.approx(b, abs=0.04)
        assert attention_occupancy(512) == pytest.approx(f, abs=0.04)


@pytest.mark.parametrize("backend,fwd_tol,bwd_tol", [
    # not used to set anything: head dim 64 over 128 through the exponential model
    # (efficiency.ATTENTION_EXP). FlashAttention-2 within 8%; cuDNN's forward within 9%, its
    # backward under-charged by 12-22% (the model has one exponential per score element and
    # no other per-element work; cuDNN's backward at head dim 64 does more): a known miss
    ("flash", 0.08, 0.08),
    ("cudnn", 0.09, 0.25),
])
def test_head_dim_64_held_out(backend, fwd_tol, bwd_tol):
    rows = _attention(backend, 64)
    assert len(rows) == 6
    for r in rows:
        seq = int(r["seq"])
        assert _model_fraction(backend, seq, 64, False) == pytest.approx(
            float(r["fwd_tflops"]) * 1e12 / PEAK, rel=fwd_tol)
        assert _model_fraction(backend, seq, 64, True) == pytest.approx(
            float(r["bwd_tflops"]) * 1e12 / PEAK, rel=bwd_tol)


def test_head_dim_256_backward_runs_at_its_measured_share():
    """Measured, the forward holds above head dim 128 (FlashAttention-2 0.91x, cuDNN 1.06x the
    head-dim-128 rate) but the backward does not: 0.84x and 0.72x at 256, the share
    efficiency.WIDE_HEAD_ATTENTION records and the model now charges (compute.wide_head_factor;
    it was charged as head dim 128 before)."""
    for backend, ratio in (("flash", 0.84), ("cudnn", 0.72)):
        d128 = {int(r["seq"]): float(r["bwd_tflops"]) for r in _attention(backend, 128)}
        d256 = {int(r["seq"]): float(r["bwd_tflops"]) for r in _attention(backend, 256)}
        measured = median(d256[s] / d128[s] for s in d256)
        assert measured == pytest.approx(ratio, abs=0.03)
        dev = compute.device(H200, "bf16", "megatron", KERNEL[backend])
        model = (attention_efficiency(dev, 256, True, 256, 256)
                 / attention_efficiency(dev, 128, True, 128, 128))
        assert model == pytest.approx(measured, abs=0.01)


def test_streaming_efficiency_against_the_largest_copies():
    copies = [r for r in _rows("stream.csv") if r["kernel"] == "copy"]
    big = [float(r["gb_per_s"]) * 1e9 / H200.memory_bytes_per_s for r in copies
           if int(r["bytes"]) >= 2**31]
    assert big and all(x == pytest.approx(efficiency.EFFICIENCY["hopper"].memory, abs=0.03)
                       for x in big)


def test_committed_profile_is_rebuilt_from_the_committed_measurements():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from profile_from_kernels import measured_from
    finally:
        sys.path.pop(0)
    data = tomllib.loads((DIR / "profile.toml").read_text())
    assert data["meta"]["device"] == "NVIDIA H200" and data["meta"]["date"].startswith("2026-11-27")
    consts, _ = fit.constants_from(measured_from(DIR, "cudnn", 8192), H200)
    assert consts.keys() == data["constants"].keys()
    for name, value in consts.items():
        assert data["constants"][name] == pytest.approx(value, rel=1e-5), name


def test_committed_profile_against_the_defaults(capsys):
    """The measured profile resolves, and its figures sit near the defaults they replace:
    the GEMM rate within 8% (0.745 against 0.80: 737 TFLOP/s at 8192^3 in that run, 789 in
    an earlier one the same day), attention and bandwidth within 3%. The tile latency (1.75 us
    against the 3 us fitted on OpenXLA's H100 table) is the shape model's least constrained
    constant and is not compared."""
    data = tomllib.loads((DIR / "profile.toml").read_text())["constants"]
    e = efficiency.EFFICIENCY["hopper"]
    assert data["EFFICIENCY.hopper.matmul_bf16"] == pytest.approx(e.matmul_bf16, rel=0.08)
    assert data["EFFICIENCY.hopper.attention_fwd"] == pytest.approx(e.attention_fwd, rel=0.03)
    assert data["EFFICIENCY.hopper.attention_bwd"] == pytest.approx(e.attention_bwd, rel=0.03)
    assert data["EFFICIENCY.hopper.memory"] == pytest.approx(e.memory, rel=0.03)
    from meshplan.cli import main
    from meshplan.commands._profile import reset

    args = ["predict", "--model", "llama3.1-8b", "--gpus", "8xH200-SXM-141GB", "--seq-len",
            "4096", "--global-batch", "64", "--plan", "dp8 tp1 pp1 zero1 mb1", "--json"]
    try:
        assert main(args) == 0
        default = json.loads(capsys.readouterr().out)["step_time_s"]
        assert main(args + ["--profile", str(DIR / "profile.toml")]) == 0
        measured = json.loads(capsys.readouterr().out)["step_time_s"]
    finally:
        reset()  # the defaults back for the next test
    # the profile's slower GEMMs make the step slower, by less than the GEMM rate alone
    assert default < measured < default * e.matmul_bf16 / data["EFFICIENCY.hopper.matmul_bf16"]
