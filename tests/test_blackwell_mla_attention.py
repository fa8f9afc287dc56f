"""DeepSeek-V3's MLA attention core (128 heads, q/k head dim 192, v head dim 128, causal) on
Blackwell, against NVIDIA's published cuDNN kernel tables for that very shape (held out: no
constant was set from them). Transformer Engine's fused attention, which Megatron-Core / NeMo
run (efficiency.ENGINE_ATTENTION "te"), is cuDNN's SDPA; these tables time it directly.

Sources (NVIDIA/cudnn-frontend, benchmark/sdpa_benchmark_training, configs/dsv3.py: 128 q and
kv heads, head_dim_qk 192, head_dim_vo 128, top_left causal mask; bf16; TFLOP/s with the
causal half counted, forward 2 (d_qk + d_v) and backward 2 (3 d_qk + 2 d_v) FLOPs per score,
i.e. 2.6x the forward's at this shape, where meshplan counts 2.5x):
- results/gb200_919_only_cudnn/dsv3_20260226_174854.csv at afa9f7c: GB200, cuDNN 9.19.1,
  batch 1, deterministic backward;
- results/dsv3/gb200/dsv3_20260424_101009.csv and results/dsv3/gb300/dsv3_20260424_101002.csv at
  60e572b: GB200 / GB300, cuDNN 9.22, batch 2, non-deterministic backward.
The tables are short timed bursts, as the kernel fractions the model carries are (the step's
sustained-clock derating applies on top of both), so the model's rate is taken at the
datasheet peak without it."""

import pytest

from meshplan.cost.compute import attention_efficiency, attention_occupancy, device
from meshplan.specs.catalog.gpus import GPUS

# (gpu, cuDNN, keys, forward TFLOP/s, backward TFLOP/s as the table counts it)
CUDNN_DSV3 = [
    ("GB200", "9.19", 4096, 1350, 1108), ("GB200", "9.19", 8192, 1527, 1248),
    ("GB200", "9.22", 4096, 1406, 1057), ("GB200", "9.22", 8192, 1585, 1193),
    ("GB300", "9.22", 4096, 1590, 1143), ("GB300", "9.22", 8192, 1825, 1291),
]
D_QK, D_V = 192, 128
TABLE_BWD_OVER_FWD = (3 * D_QK + 2 * D_V) / (D_QK + D_V)  # 2.6
MODEL_BWD_OVER_FWD = 2.5  # compute.ATTN_BWD_FLOP_RATIO


def _seconds_per_forward_flop(gpu_name: str, keys: int) -> tuple[float, float, float]:
    gpu = GPUS[gpu_name]
    dev = device(gpu, "bf16", "nemo")
    peak = gpu.flops("bf16")
    ef = attention_efficiency(dev, (D_QK + D_V) / 2, False, D_QK, D_V) * attention_occupancy(
        keys, False, gpu.generation)
    eb = attention_efficiency(dev, (D_QK + D_V) / 2, True, D_QK, D_V) * attention_occupancy(
        keys, True, gpu.generation)
    return 1 / (peak * ef), MODEL_BWD_OVER_FWD / (peak * eb), peak


@pytest.mark.parametrize("gpu,cudnn,keys,fwd,bwd", CUDNN_DSV3)
def test_mla_core_forward_plus_backward_time_is_cudnns(gpu, cudnn, keys, fwd, bwd):
    f, b, _ = _seconds_per_forward_flop(gpu, keys)
    measured = 1 / (fwd * 1e12) + TABLE_BWD_OVER_FWD / (bwd * 1e12)
    # model / measured: GB200 1.000, 1.043, 0.974, 1.017; GB300 0.944, 0.989
    assert (f + b) / measured == pytest.approx(1.0, abs=0.07)


@pytest.mark.parametrize("gpu,cudnn,keys,fwd,bwd", CUDNN_DSV3)
def test_mla_core_directions_within_a_quarter(gpu, cudnn, keys, fwd, bwd):
    # the model's forward rate is 0.78-0.93 of cuDNN's tables and its backward 1.02-1.10
    # (the exponential model carried from Hopper's head-dim-128 kernel, head dims capped at
    # 128); weighted by their times the two cancel in a training step (the test above)
    f, b, _ = _seconds_per_forward_flop(gpu, keys)
    assert (1 / f) / (fwd * 1e12) == pytest.approx(0.85, abs=0.08)
    assert (MODEL_BWD_OVER_FWD / b) / (bwd * 1e12 * MODEL_BWD_OVER_FWD / TABLE_BWD_OVER_FWD) \
        == pytest.approx(1.06, abs=0.05)
