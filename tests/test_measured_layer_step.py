"""The cost model's dense layer against whole layer steps measured on a lent H200 and H100
(bench/data/measured/h{200,100}_2026-11-28, 2026-11-28; README.md there says how each file was
made), and the FP8 row-wise GEMM share against row-wise GEMMs measured on the H200. No
constant was set from these files: they are held-out checks, and the tolerances below say
what the model gets right and what it still misses (README, "Where it is still wrong").
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from statistics import median

import pytest

from meshplan.cost import efficiency, fp8_recipe

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "bench" / "data" / "measured"
RUNS = sorted(MEASURED.glob("h*_2026-11-28/layer_*"))


def _compare(run: Path) -> dict:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from layer_step_compare import compare
    finally:
        sys.path.pop(0)
    return compare(run)


def test_every_layer_run_is_there():
    names = {(r.parent.name[:4], r.name) for r in RUNS}
    assert {("h200", "layer_eager_cudnn"), ("h200", "layer_eager_flash"),
            ("h200", "layer_compiled_cudnn"), ("h200", "layer_eager_cudnn_seq8192"),
            ("h200", "layer_compiled_cudnn_held210s"),
            ("h100", "layer_eager_cudnn"), ("h100", "layer_compiled_cudnn")} <= names


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.parent.name[:4]}-{r.name}")
def test_layer_step_against_the_measured_step(run):
    """Eager PyTorch (meshplan's runtime's way): the model's four layers within 6% of the
    step held at the 700 W cap (measured -0.4% to +3.9%). Compiled (Inductor fuses the
    element-wise work, as torchtitan's compiled runs do): the model 5-25% slow (+15% H200,
    +19% H100), the share of the 0.75 derating that a single GPU does not lose."""
    c = _compare(run)
    err = c["model_layers_s"] / c["step_held_s"] - 1
    if "compiled" in run.name:
        assert 0.05 < err < 0.25, err
    else:
        assert abs(err) < 0.06, err


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.parent.name[:4]}-{r.name}")
def test_kernel_classes_inside_the_step(run):
    """Inside a step at the power cap the GEMMs keep 0.87-0.95 of the model's undarated rate
    (the shape model before its 0.75 derating, efficiency.tensor_derating) and attention 0.80-0.88: the model's
    GEMMs are 15-26% slow there. Its streaming count is the fused engines' (within 45% of
    Inductor's fused kernels) and a third of what eager PyTorch's unfused rotary, norms and
    SwiGLU run."""
    c = _compare(run)
    me, mo = c["measured_per_layer_s"], c["model_per_layer_s"]
    assert 0.85 < mo["gemm"] * efficiency.tensor_derating("hopper") / me["gemm"] < 0.97
    assert 0.78 < mo["attention"] * efficiency.tensor_derating("hopper") / me["attention"] < 0.92
    ratio = mo["other"] / me["other"]
    if "compiled" in run.name:
        assert 0.9 < ratio < 1.5, ratio
    else:
        assert 0.25 < ratio < 0.5, ratio


def test_profiled_kernels_account_for_the_step():
    """The profiled kernels of one eager step (after the held run) add up to the CUDA-graph
    step within 5%: the class split above covers the step."""
    for run in RUNS:
        c = _compare(run)
        layers = json.loads((run / "layer_step.json").read_text())["shape"]["layers"]
        total = layers * sum(c["measured_per_layer_s"].values())
        assert total == pytest.approx(c["step_held_s"], rel=0.05), run


def test_fp8_rowwise_gemm_share_against_the_h200():
    """torchao's rowwise recipe runs its forward GEMM on PyTorch's CUTLASS row-wise kernel
    with fast accumulation; fp8_recipe.py charges it the per-tensor rate (share 1.0). On the
    H200 (torch 2.11) at the 18 shapes of 15 us or more it ran at 0.99 of the per-tensor
    kernel in the median (0.87-1.07 from the 10th to the 90th percentile), and without fast
    accumulation (not a path torchao takes) at 0.86."""
    rows = list(csv.DictReader((MEASURED / "h200_2026-11-28" / "gemm_rowwise.csv").open()))
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((int(r["m"]), int(r["n"]), int(r["k"])), {})[r["dtype"]] = float(r["tflops"])
    ratios, slow = [], []
    for (m, n, k), d in by.items():
        if 2.0 * m * n * k / (d["fp8_fastacc"] * 1e12) >= 15e-6:
            ratios.append(d["fp8_rowwise_fastacc"] / d["fp8_fastacc"])
            slow.append(d["fp8_rowwise"] / d["fp8_fastacc"])
    assert len(ratios) >= 18
    share = fp8_recipe.resolve("fp8", "rowwise", "torchtitan", "hopper").gemm_share
    assert share == pytest.approx(median(ratios), abs=0.03)
    ratios.sort()
    assert ratios[len(ratios) // 10] <= share <= ratios[len(ratios) * 9 // 10]
    assert median(slow) < 0.9  # the kernel the recipe avoids is measurably slower
