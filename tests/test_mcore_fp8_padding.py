"""Megatron-Core's FP8 padding of each expert's token slice (meshplan/cost/mcore_experts.py
fp8_expert_padding): the expected padded rows against a simulation of the engine's
force-balanced routing (random normal logits, top-k) padded the way Transformer Engine's
Fp8Padding pads, the engine's code where it is installed, and what the layer's operations
gain on the runs that pad and nowhere else."""

from __future__ import annotations

import inspect

import pytest

from meshplan.cost import mcore_experts as mx
from meshplan.cost.compute import STREAM_BWD_BYTE_RATIO
from meshplan.cost.fp8_recipe import resolve
from meshplan.cost.layer import HYBRIDEP, layer_ops_times, shaping_dispatcher
from meshplan.cost.ops import ACT, PERMUTE_KERNELS, PERMUTE_PASSES, Shard
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset


def _simulated_padded_rows(torch, tokens: int, experts: int, topk: int, align: int,
                           trials: int) -> tuple[float, float]:
    """(mean rows per expert, mean padded rows per expert) of ``trials`` micro-batches of
    ``tokens`` tokens routed as Megatron-Core's moe_router_force_load_balancing does
    (moe_utils.RandomSTE: ``logits.clone().normal_()``, then the router's top-k) and padded
    as TE's Fp8Padding pads (``(m + align - 1) // align * align``)."""
    g = torch.Generator().manual_seed(0)
    rows = padded = 0.0
    for _ in range(trials):
        logits = torch.randn(tokens, experts, generator=g)
        idx = torch.topk(logits, topk, dim=-1).indices
        counts = torch.bincount(idx.flatten(), minlength=experts)
        rows += counts.sum().item()
        padded += ((counts + align - 1) // align * align).sum().item()
    n = trials * experts
    return rows / n, padded / n


@pytest.mark.parametrize("tokens,experts,topk,align", [
    (4096, 128, 8, 16),   # Qwen3-30B-A3B, one 4k sequence on the EP group, FP8 (16 rows)
    (4096, 128, 8, 32),   # the same under MXFP8 (32 rows)
    (2048, 256, 8, 32),   # DeepSeek-V3-like: 64 rows an expert, MXFP8
    (256, 64, 2, 16),     # 8 rows an expert: most slices pad to one 16-row block
])
def test_expected_padding_matches_the_engines_random_routing(tokens, experts, topk, align):
    torch = pytest.importorskip("torch", reason="the routing simulation needs torch")
    mean, sim = _simulated_padded_rows(torch, tokens, experts, topk, align, trials=40)
    assert mean == pytest.approx(tokens * topk / experts)
    got = mx.expected_padded_rows(mean, experts, topk, align)
    # the simulated pad has a standard error of about align / sqrt(12 x 40 x experts) rows
    assert got - mean == pytest.approx(sim - mean, abs=max(0.6, 0.05 * (sim - mean)))
    assert got - mean > 0.3 * (align - 1) / 2  # not the unpadded count


def test_padding_alignment_is_transformer_engines():
    assert mx.fp8_align_rows("mx") == 32
    for recipe in ("delayed", "cs", "blockwise", ""):
        assert mx.fp8_align_rows(recipe) == 16
    # rows already a multiple: nothing added only where no expert's count can differ
    assert mx.expected_padded_rows(128.0, 1, 1, 32) == 128.0


def test_the_megatron_core_code_still_pads():
    """Where megatron-core is installed, TEGroupedMLP pads its input and probabilities and
    unpads its output under FP8, and HybridEP's dispatch pads each expert's tokens."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed")
    experts = pytest.importorskip("megatron.core.transformer.moe.experts")
    src = inspect.getsource(experts.TEGroupedMLP.forward)
    assert "self.config.fp8" in src
    assert src.count("_padding(") >= 2 and "_unpadding(" in src
    disp = pytest.importorskip("megatron.core.transformer.moe.token_dispatcher")
    src = inspect.getsource(disp._HybridEPManager.dispatch)
    assert "pad_multiple" in src and "get_align_size_for_quantization" in src


def _ops(model, engine, precision, recipe="", dispatcher="", gpu="B200", ep=8):
    cluster = make_cluster(gpu=gpu, num_gpus=ep)
    fp8 = precision == "fp8"
    shard = Shard(seq=4096, micro_batch=1, ep=ep, fp8=fp8, fp8_fused_casts=fp8,
                  per_expert_gemms=engine in mx.MCORE_ENGINES,
                  fp8_recipe=resolve(precision, recipe, engine, "blackwell"))
    ops, _, times = layer_ops_times(model, cluster, "moe", shard, precision, engine,
                                    dispatcher)
    return ops, times, shard


def _fc(ops, name):
    return next(mm for mm in ops.matmuls if mm.name == name)


@pytest.mark.parametrize("recipe", ["cs", "mx"])
def test_fp8_megatron_moe_layer_pads_and_copies(recipe):
    m = preset("qwen3-30b-a3b")
    base, tb, shard = _ops(m, "torchtitan", "fp8", "tensorwise")
    rows = shard.tokens * m.moe_topk
    local = m.moe_experts / shard.ep
    align = mx.fp8_align_rows(recipe)
    for engine in mx.MCORE_ENGINES:
        ops, t, _ = _ops(m, engine, "fp8", recipe)
        nopad, _, _ = _ops(m, engine, "bf16")
        padded_m = mx.expected_padded_rows(rows / local, m.moe_experts, m.moe_topk, align)
        assert _fc(nopad, "expert_fc1").m == pytest.approx(rows / local)
        for name in ("expert_fc1", "expert_fc2"):
            assert _fc(ops, name).m == pytest.approx(padded_m)
        assert padded_m - rows / local == pytest.approx((align - 1) / 2, rel=0.05)
        # pad (read rows, write padded) and unpad (read padded, write rows), forward and again
        # in backward, over the hidden states and the fp32 probabilities
        padded = padded_m * local
        copy = (rows + padded) * (2 * ACT * m.hidden + mx.PROB_BYTES)
        ops_bf, _, _ = _ops(m, engine, "bf16")
        assert ops.stream_bytes - ops_bf.stream_bytes == pytest.approx(copy)
        bwd = (STREAM_BWD_BYTE_RATIO * (ops.stream_bytes - ops_bf.stream_bytes)
               + ops.stream_bwd_extra_bytes - ops_bf.stream_bwd_extra_bytes)
        assert bwd == pytest.approx(copy)
        assert ops.modules["moe"].stream_bytes - ops_bf.modules["moe"].stream_bytes == \
            pytest.approx(copy)
    # torchtitan's experts are not Megatron-Core's: no padding there
    assert _fc(base, "expert_fc1").m == pytest.approx(rows / local)


def test_hybridep_pads_in_its_dispatch_without_a_copy():
    m = preset("qwen3-30b-a3b")
    rack = make_cluster(gpu="GB200", num_gpus=8)
    shard = Shard(seq=4096, micro_batch=1, ep=8, fp8=True, fp8_fused_casts=True,
                  per_expert_gemms=True, fp8_recipe=resolve("fp8", "mx", "nemo", "blackwell"))
    assert shaping_dispatcher(m, rack, "moe", shard, "deepep") == HYBRIDEP
    assert shaping_dispatcher(m, make_cluster(gpu="B200", num_gpus=8), "moe", shard,
                              "deepep") == ""
    hy, _, _ = layer_ops_times(m, rack, "moe", shard, "fp8", "nemo", HYBRIDEP)
    de, _, _ = layer_ops_times(m, rack, "moe", shard, "fp8", "nemo", "")
    assert _fc(hy, "expert_fc1").m == _fc(de, "expert_fc1").m > 4096 * 8 / 16
    rows = shard.tokens * m.moe_topk
    padded = _fc(de, "expert_fc1").m * m.moe_experts / 8
    # HybridEP makes neither the pad / unpad copies nor the permutation passes (it permutes
    # inside its dispatch and combine: tests/test_hybridep_permute.py)
    assert de.stream_bytes - hy.stream_bytes == pytest.approx(
        (rows + padded) * (2 * ACT * m.hidden + mx.PROB_BYTES)
        + PERMUTE_PASSES * ACT * rows * m.hidden)
    assert de.kernels - hy.kernels == mx.PAD_KERNELS + PERMUTE_KERNELS
