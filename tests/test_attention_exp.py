"""Attention's tensor-core time against its softmax exponentials (efficiency.ATTENTION_EXP,
compute.attention_efficiency): the constant re-derived from the two published figures it
comes from, the Blackwell entry re-derived from the Hopper one, and the head-dim dependence
checked against the FlashAttention-3 paper's H100 tables, which were not used to set it."""

import pytest

from meshplan.cost import compute, efficiency
from meshplan.cost.compute import attention_efficiency, device
from meshplan.specs.catalog.gpus import GPUS


def _time_per_element(flops_per_element, tc_per_clock, x_mma, exp_per_clock):
    return flops_per_element / tc_per_clock * x_mma + efficiency.ATTENTION_EXP / exp_per_clock


def _x_mma(fraction, flops_per_element, tc_per_clock):
    """Tensor-core inverse efficiency that gives ``fraction`` at 16 exponentials per clock."""
    exp = efficiency.ATTENTION_EXP / efficiency.EXP_PER_SM_CLOCK
    return 1 / fraction - exp * tc_per_clock / flops_per_element


def test_exposed_exponential_share_reproduces_its_two_sources():
    # H100 forward at head dim 128 holds the Hopper entry's 0.62 by construction of x_mma;
    # NVIDIA's Blackwell Ultra softmax blog: ~35% more FP8 forward attention throughput on
    # GB300 (32 exponentials per SM per clock) than GB200 (16) for DeepSeek-V3's MLA shape
    # (d_qk 192, d_v 128: 640 FLOPs per score element at 16,384 FP8 FLOPs per SM per clock)
    x = _x_mma(efficiency.EFFICIENCY["hopper"].attention_fwd, 4 * 128, 4096)
    gb200 = _time_per_element(640, 16384, x, 16)
    gb300 = _time_per_element(640, 16384, x, 32)
    assert gb200 / gb300 == pytest.approx(1.35, abs=0.005)


@pytest.mark.parametrize("backward", [False, True])
def test_blackwell_attention_entry_is_the_hopper_one_with_twice_the_tensor_rate(backward):
    hopper, blackwell = efficiency.EFFICIENCY["hopper"], efficiency.EFFICIENCY["blackwell"]
    per_element = (10 if backward else 4) * 128
    ref = hopper.attention_bwd if backward else hopper.attention_fwd
    x = _x_mma(ref, per_element, 4096)
    derived = (per_element / 8192) / _time_per_element(per_element, 8192, x, 16)
    stated = blackwell.attention_bwd if backward else blackwell.attention_fwd
    assert stated == pytest.approx(derived, abs=0.002)


# FlashAttention-3 paper (Shah et al. 2024), Fig. 5-6, H100 SXM5, non-causal, 16k keys,
# TFLOP/s at head dim 64 and 128: (forward 64, forward 128, backward 64, backward 128)
FA3_PAPER_H100 = {
    "fa2": (324, 370, 291, 322),  # FlashAttention-2: the "fa2" kernel class
    "te": (413, 595, 433, 516),  # cuDNN: Transformer Engine's fused attention
}


@pytest.mark.parametrize("kernel", sorted(FA3_PAPER_H100))
def test_head_dim_64_over_128_on_h100_against_the_flashattention3_tables(kernel):
    dev = device(GPUS["H100-SXM-80GB"], "bf16", "megatron", kernel)
    f64, f128, b64, b128 = FA3_PAPER_H100[kernel]
    fwd = attention_efficiency(dev, 64) / attention_efficiency(dev, 128)
    bwd = (attention_efficiency(dev, 64, backward=True)
           / attention_efficiency(dev, 128, backward=True))
    # both below 1, and within 16% of the measured ratios (the model has one exponential
    # per element and no other per-element work, so it under-charges cuDNN's forward most:
    # 0.80 against 0.69; FlashAttention-2's forward comes within 1%)
    assert fwd < 1 and bwd < 1
    assert fwd == pytest.approx(f64 / f128, rel=0.16)
    assert bwd == pytest.approx(b64 / b128, rel=0.16)
    if kernel == "fa2":
        assert fwd == pytest.approx(f64 / f128, rel=0.02)


def test_head_dims_above_128_are_charged_as_128():
    dev = device(GPUS["H100-SXM-80GB"], "bf16", "megatron")
    assert attention_efficiency(dev, 256) == attention_efficiency(dev, 128)
    assert attention_efficiency(dev, 128) == pytest.approx(dev.attn_fwd_eff)
    assert attention_efficiency(dev, 128, backward=True) == pytest.approx(dev.attn_bwd_eff)


def test_blackwell_ultra_hides_the_exponentials_blackwell_cannot():
    b200 = device(GPUS["B200"], "bf16", "megatron")
    b300 = device(GPUS["B300"], "bf16", "megatron")
    gb300 = device(GPUS["GB300"], "bf16", "megatron")
    assert b300.exp_per_sm_clock == gb300.exp_per_sm_clock == 2 * b200.exp_per_sm_clock
    # twice the exponential rate brings head dim 128 back to the Hopper fraction
    hopper = efficiency.EFFICIENCY["hopper"]
    assert attention_efficiency(b300, 128) == pytest.approx(hopper.attention_fwd, abs=0.002)
    assert attention_efficiency(b300, 128, backward=True) == pytest.approx(
        hopper.attention_bwd, abs=0.002)
    assert attention_efficiency(b200, 128) < attention_efficiency(b300, 128)
    # and the smaller the head dim, the more the faster unit gains
    gain64 = attention_efficiency(b300, 64) / attention_efficiency(b200, 64)
    gain128 = attention_efficiency(b300, 128) / attention_efficiency(b200, 128)
    assert gain64 > gain128 > 1


def test_parts_without_an_exponential_model_keep_their_fraction():
    for name in ("MI300X", "MI355X"):
        dev = device(GPUS[name], "bf16", "megatron")
        assert dev.tc_flops_per_sm_clock == 0
        assert attention_efficiency(dev, 64) == dev.attn_fwd_eff
    # no flash kernel (Volta, fp32): the unfused path charges its GEMMs and passes instead
    v100 = device(GPUS["V100-SXM-32GB"], "fp16", "megatron")
    assert v100.unfused_attention and v100.tc_flops_per_sm_clock == 0


def test_a_head_dim_64_layer_spends_more_attention_time_per_flop():
    from meshplan.cost.ops import Shard, layer_ops
    from meshplan.specs.model import ModelSpec

    def attention_s_per_flop(heads):
        m = ModelSpec(name="t", layers=2, hidden=4096, heads=heads, kv_heads=heads,
                      ffn=11008, vocab=32000)
        ops = layer_ops(m, False, Shard(seq=4096, micro_batch=1))
        t = compute.op_times(device(GPUS["H100-SXM-80GB"], "bf16", "megatron"), ops)
        return t.attn_fwd_s / ops.attn_fwd_flops

    assert attention_s_per_flop(64) > 1.2 * attention_s_per_flop(32)  # d 64 vs d 128


@pytest.mark.parametrize("gpu, head_dim", [("H100-SXM-80GB", 128), ("B300", 128),
                                           ("H100-SXM-80GB", 64), ("GB300", 96)])
def test_calibrate_stores_the_fraction_the_cost_model_scales_back(gpu, head_dim):
    # a flash-attention timing on ``gpu`` at ``head_dim`` is written as the generation's
    # head-dim-128 fraction on its reference part; the cost model then reproduces the timing
    import dataclasses

    part = GPUS[gpu]
    measured_fwd, measured_bwd = 0.58, 0.47
    ref_f = compute.reference_attention_fraction(part, measured_fwd, head_dim)
    ref_b = compute.reference_attention_fraction(part, measured_bwd, head_dim, backward=True)
    dev = dataclasses.replace(device(part, "bf16", "megatron"), attn_fwd_eff=ref_f,
                              attn_bwd_eff=ref_b)
    assert attention_efficiency(dev, head_dim) == pytest.approx(measured_fwd, rel=1e-9)
    assert attention_efficiency(dev, head_dim, backward=True) == pytest.approx(measured_bwd,
                                                                              rel=1e-9)
    if gpu == "H100-SXM-80GB" and head_dim == 128:
        assert ref_f == pytest.approx(measured_fwd)  # the reference itself: unchanged
    if gpu == "B300":
        assert ref_f < measured_fwd  # B300's faster exponentials are not credited twice
