"""The cost model's Hopper kernel constants against our own measurements on one H100 SXM
(bench/data/measured/h100_2026-11-27, lent GPU, 2026-11-27; its README.md says how each file
was made). No constant was set from these files: the Hopper constants came from published
tables and the H200 files, so every test here is a held-out check on the part most published
runs use.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from statistics import median

import pytest

from meshplan.cost import efficiency
from meshplan.cost.compute import attention_occupancy
from meshplan.specs.catalog.gpus import GPUS
from test_gemm_model import assert_error_spread, measured_errors

ROOT = Path(__file__).resolve().parents[1]
DIR = ROOT / "bench" / "data" / "measured" / "h100_2026-11-27"
H100 = GPUS["H100-SXM-80GB"]
PEAK = H100.flops("bf16")
HOPPER = efficiency.EFFICIENCY["hopper"]


def _rows(name: str) -> list[dict]:
    return list(csv.DictReader((DIR / name).open()))


@pytest.mark.parametrize("dtype,model_dtype,med,p90", [
    # 145 bf16 rows of 15 us or more: 3.6% / 14.8% off, the model 0.9% fast at the median
    ("bf16", "bf16", 0.06, 0.17),
    # fp8 with fp32 promotion: 8.1% / 13.3% (the model 8% fast: promotion costs more on the
    # H100 than on the H200, 5.8%); with fast accumulation 2.1% / 9.3%
    ("fp8", "fp8", 0.10, 0.16),
    ("fp8_fastacc", "fp8", 0.06, 0.12),
])
def test_gemm_shape_model_on_h100_measurements(dtype, model_dtype, med, p90):
    errs = measured_errors(DIR / "gemm.csv", H100.name, dtype, model_dtype, 15e-6)
    assert len(errs) >= 18
    assert_error_spread(errs, med, p90)


def _attention(backend: str, head_dim: int) -> dict[int, tuple[float, float]]:
    return {int(r["seq"]): (float(r["fwd_tflops"]) * 1e12 / PEAK,
                            float(r["bwd_tflops"]) * 1e12 / PEAK)
            for r in _rows("attention.csv")
            if r["backend"] == backend and r["causal"] == "1" and int(r["head_dim"]) == head_dim}


@pytest.mark.parametrize("backend,levels", [
    ("cudnn", (HOPPER.attention_fwd, HOPPER.attention_bwd)),
    ("flash", efficiency.ATTENTION_FA2["hopper"]),
])
def test_attention_curves_on_h100(backend, levels):
    """Causal, head dim 128, 2k-16k keys: the level at 8k keys times the occupancy ramp,
    within 7% forward and 9% backward at every length (the H200 fit's residual was 2.4% rms;
    the H100's backward runs 2-7% below the H200's at 4k-8k)."""
    fwd, bwd = levels
    curve = _attention(backend, 128)
    for seq in (2048, 4096, 8192, 16384):
        f, b = curve[seq]
        assert f == pytest.approx(fwd * attention_occupancy(seq), rel=0.07), seq
        assert b == pytest.approx(bwd * attention_occupancy(seq, True), rel=0.09), seq


def test_streaming_efficiency_against_the_largest_copies():
    big = [float(r["gb_per_s"]) * 1e9 / H100.memory_bytes_per_s for r in _rows("stream.csv")
           if r["kernel"] == "copy" and int(r["bytes"]) >= 2**31]
    assert big and all(x == pytest.approx(HOPPER.memory, abs=0.03) for x in big)


def _copycheck(path: Path) -> dict[int, dict[str, float]]:
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"(\d+) MiB (\{.*\})", line)
        if m:
            out[int(m.group(1))] = {k: float(v) for k, v in
                                    re.findall(r"'(\w+)': (\d+)", m.group(2))}
    return out


@pytest.mark.parametrize("d", ["h100_2026-11-27", "h200_2026-11-27"])
def test_a_graph_captured_copy_is_not_the_copy_kernel(d):
    """Why calibrate.micro.copy_bandwidth times ``a x 1`` and not ``b.copy_(a)``: captured in a
    CUDA graph, copies of 1 GiB and more ran at ~0.8 of the rate of the element-wise kernel
    (and of the same copy issued eagerly), which is what calibrate's first H100 profile read
    as its streaming efficiency (calibrate_before_fix.toml: 0.724 against 0.90 here; the
    fixed calibrate read 0.898, profile.toml)."""
    rates = _copycheck(DIR.parent / d / "copycheck.txt")
    assert set(rates) == {256, 1024, 4096}
    for mib in (1024, 4096):
        r = rates[mib]
        assert r["copy__graph"] < 0.85 * r["mul1_graph"]
        assert r["copy__eager"] == pytest.approx(r["mul1_graph"], rel=0.03)
    assert rates[256]["copy__graph"] == pytest.approx(rates[256]["mul1_graph"], rel=0.03)


def test_sustained_gemm_rate_and_the_fitted_constant():
    """bf16 8192^3 GEMMs back to back for 80 s on the 700 W H100 hold 667-676 TFLOP/s at a
    power-capped ~1,350 MHz (throttle reason 0x4, software power cap): 0.85 of the 791 the
    same machine gave in a one-second burst (moe_kernels_meta.json), and the H200 the same
    (663-666 of 787, the files there). NVIDIA's held clock (efficiency.NVIDIA_SUSTAINED_CLOCK,
    the Hopper entry's sustained_clock) is the mean of the two shares; the whole derating,
    fitted end to end, is 0.75: below what power and clocks explain, so SUSTAINED_TENSOR, the
    rest, also carries step time the model does not otherwise place (README, where still
    wrong). Fails if the data or the constants change so that this no longer holds."""
    import json

    shares = []
    for d in (DIR, DIR.parent / "h200_2026-11-27"):
        burst = json.loads((d / "moe_kernels_meta.json").read_text())["bf16_8192_cubed_tflops"]
        rows = list(csv.DictReader(open(d / "sustained_bf16.csv")))
        settled = [float(r["tflops"]) for r in rows if float(r["t_s"]) >= 10]
        assert len(settled) >= 10 and max(settled) / min(settled) < 1.02
        assert all(r["throttle"] == "0x0000000000000004" for r in rows)
        shares.append(median(settled) / burst)
    assert shares[0] == pytest.approx(0.85, abs=0.02)
    assert efficiency.EFFICIENCY["hopper"].sustained_clock == pytest.approx(
        sum(shares) / 2, abs=1e-3)
    assert efficiency.tensor_derating("hopper") == pytest.approx(0.75)
    assert efficiency.tensor_derating("hopper") < min(shares) - 0.05
    fp8 = [float(r["tflops"]) for r in _rows("sustained_fp8.csv") if float(r["t_s"]) >= 10]
    assert median(fp8) * 1e12 / H100.flops("fp8") == pytest.approx(0.615, abs=0.02)


def _profile(name: str) -> dict[str, float]:
    import tomllib

    data = tomllib.loads((DIR / name).read_text())
    assert data["meta"]["device"] == "NVIDIA H100 80GB HBM3"
    return {k.split(".")[-1]: v for k, v in data["constants"].items()}


def test_fixed_calibrate_reads_the_kernel_files_rates():
    """``meshplan calibrate`` on the H100 after this release's fixes (copy through an
    element-wise kernel, attention timed back to back between CUDA events) against the
    defaults and against the kernel files measured the same hour: GEMM, attention and copy
    within 4%; before the fixes (calibrate_before_fix.toml) the copy read 19% and the
    attention 9-12% low."""
    fixed, before = _profile("profile.toml"), _profile("calibrate_before_fix.toml")
    assert fixed["matmul_bf16"] == pytest.approx(HOPPER.matmul_bf16, rel=0.04)
    assert fixed["attention_fwd"] == pytest.approx(HOPPER.attention_fwd, rel=0.04)
    assert fixed["attention_bwd"] == pytest.approx(HOPPER.attention_bwd, rel=0.04)
    assert fixed["memory"] == pytest.approx(HOPPER.memory, rel=0.04)
    assert before["memory"] < 0.85 * fixed["memory"]
    assert before["attention_fwd"] < 0.93 * fixed["attention_fwd"]
    assert before["attention_bwd"] < 0.92 * fixed["attention_bwd"]
