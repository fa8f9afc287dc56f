"""The compute model's kernel-level rates, before the fitted end-to-end constants
(efficiency.tensor_derating, the power-cap clock), against published kernel measurements.

Independent truth:
- pytorch/pytorch#142132 (xuzhao9, 2024-12-05; PyTorch nightly 2.6.0.dev20241204+cu124 on one
  H100): tritonbench `--op flash_attention --batch 1 --n-heads 24 --seq-len 4608 --d-head 128
  --only cudnn,sdpa,flash_v3 --metrics tflops --native-sdpa` (no --causal flag): torch SDPA on
  its flash backend (FlashAttention-2, what torchtitan ran then: cuDNN SDPA was made opt-in by
  pytorch/pytorch#138522) 329.483 TFLOP/s, cuDNN 9.1 fused attention 631.338, FlashAttention-3
  631.827.
- "Maximum Achievable Matmul FLOPS" table (Stas Bekman, ml-engineering,
  compute/accelerator/README.md; mamf-finder.py, best bf16 / fp8 torch.mm shape, mean of 100
  runs): H100 SXM bf16 794.5 of 989 (torch 2.7.0+cu126; 792.1 with CUDA 12.1), A100 SXM 271.2
  of 312 (267.9 with CUDA 12.1), B200 SXM 1745.0 of 2250; FP8 (float8_e4m3fn, torch._scaled_mm)
  H100 SXM 1402.6 of 1979.
- DeepGEMM README (deepseek-ai/DeepGEMM): FP8 GEMMs "up to 1550 TFLOPS" on H800 (H100 SM count
  and clocks).
"""

from __future__ import annotations

import csv
import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from meshplan.cost import efficiency
from meshplan.cost.compute import device, gemm_time_s
from meshplan.cost.layer import layer_ops_times
from meshplan.cost.ops import Shard
from meshplan.scenario import make_cluster
from meshplan.specs.model import ModelSpec

CALIBRATION = Path(__file__).resolve().parents[2] / "shared" / "validation" / "calibration.csv"


def _attention_rate(engine: str, seq: int, gpu: str = "H100-SXM-80GB") -> float:
    """Executed attention FLOP/s of one layer's forward on ``gpu`` at the kernel level: the
    model's rate divided by the sustained-clock constant (this GPU has no power cap)."""
    heads, d = 24, 128  # the shape of pytorch/pytorch#142132
    m = ModelSpec(name="t", layers=1, hidden=heads * d, heads=heads, kv_heads=heads,
                  ffn=4 * heads * d, vocab=32000)
    c = make_cluster(gpu=gpu, num_gpus=8)
    ops, dev, t = layer_ops_times(m, c, "dense", Shard(seq, 1), "bf16", engine)
    return ops.attn_fwd_flops / t.attn_fwd_s / efficiency.tensor_derating(c.gpu.generation)


@pytest.mark.parametrize("engine,measured", [
    ("torchtitan", 329.483e12),  # SDPA flash backend = FlashAttention-2
    ("nemo", 631.338e12),  # Transformer Engine -> cuDNN fused attention
])
def test_attention_forward_rate_h100_against_tritonbench(engine, measured):
    """The model's constants come from causal-mask chart readings; the published run has no
    causal mask (no masked-block waste), so the model may sit a little below: within 10%."""
    rate = _attention_rate(engine, 4608)
    assert rate == pytest.approx(measured, rel=0.10), rate / 1e12


def test_attention_rate_grows_with_sequence_then_saturates():
    """FlashAttention-2 / -3 papers: short sequences under-occupy the GPU (fewer tiles than
    SMs x waves); past 8k the rate is flat within a few percent."""
    r = [_attention_rate("nemo", s) for s in (1024, 4096, 8192, 32768)]
    assert r[0] < r[1] < r[2] <= r[3]
    assert r[3] / r[2] < 1.06
    assert r[0] / r[2] < 0.8


@pytest.mark.parametrize("gen,gpu,mamf,peak", [
    ("hopper", "H100-SXM-80GB", 794.5, 989),
    ("ampere", "A100-SXM-80GB", 271.2, 312),
    ("blackwell", "B200", 1745.0, 2250),
])
def test_large_gemm_fraction_against_mamf(gen, gpu, mamf, peak):
    """An 8192^3 bf16 GEMM in the model runs at the generation's large-GEMM fraction (times
    the sustained constant); that fraction is the MAMF table's within 3%."""
    frac = efficiency.EFFICIENCY[gen].matmul_bf16
    assert frac == pytest.approx(mamf / peak, rel=0.03)
    c = make_cluster(gpu=gpu, num_gpus=8)
    dev = device(c.gpu, "bf16")
    rate = 2 * 8192 ** 3 / gemm_time_s(dev, 8192, 8192, 8192)
    assert rate == pytest.approx(dev.matmul_flops, rel=0.02)


def test_fp8_gemm_fraction_between_torch_and_deepgemm():
    """Hopper FP8: torch._scaled_mm's best shape reaches 1402.6 / 1979 = 0.709 (MAMF), DeepGEMM
    1550 / 1979 = 0.783; the model's large-GEMM FP8 fraction lies between the two libraries."""
    f = efficiency.EFFICIENCY["hopper"].matmul_fp8
    assert 1402.6 / 1979 <= f <= 1550 / 1979


@pytest.mark.skipif(not CALIBRATION.exists(),
                    reason="../shared/validation/calibration.csv is absent (shared data not "
                           "checked out beside the project)")
def test_breakdown_parts_sum_to_the_layer():
    """bench/dense_breakdown.py splits one layer into GEMMs, attention, streaming and kernel
    gaps; the parts must add up to the cost model's layer times."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("dense_breakdown",
                                                  root / "bench" / "dense_breakdown.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["dense_breakdown"] = mod
    spec.loader.exec_module(mod)
    from meshplan.search.search import search
    from meshplan.validate import prepare

    row = next(r for r in csv.DictReader(open(CALIBRATION)) if r["id"] == "53")
    prep = prepare(row)
    best = search(prep.model, prep.cluster, prep.workload, dict(prep.pins), top_k=1,
                  rerank_k=5).best
    p = mod.layer_parts(prep, best.plan)
    plan = best.plan
    from meshplan.cost.step import training_shard
    shard = training_shard(prep.workload, prep.cluster, plan.micro_batch, plan.tp, plan.cp,
                           bool(plan.sequence_parallel), plan.ep, plan.etp)
    _, _, t = layer_ops_times(prep.model, prep.cluster, "dense", shard, "fp8", "torchtitan")
    fwd = sum(p[k + "_fwd_s"] for k in ("gemm", "attention", "stream", "kernel_gaps"))
    bwd = sum(p[k + "_bwd_s"] for k in ("gemm", "attention", "stream", "kernel_gaps"))
    assert fwd == pytest.approx(t.fwd_s, rel=1e-9)
    assert bwd == pytest.approx(t.bwd_input_s + t.bwd_weight_s, rel=1e-9)
    assert min(v for k, v in p.items() if k.endswith("_s")) > 0
    out = io.StringIO()
    with redirect_stdout(out):
        mod.main([str(CALIBRATION), "53"])
    assert "attention" in out.getvalue() and "row 53" in out.getvalue()
