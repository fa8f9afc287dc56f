"""Megatron-Core's eager clamp and per-expert bias loop in GPT-OSS-style experts
(meshplan/cost/mcore_experts.py): the byte counts against the ATen ops PyTorch really
dispatches for the same code (a single-process reference run on CPU), and what the layer's
operations gain on the engines that run it and nowhere else."""

from __future__ import annotations

import inspect

import pytest

from meshplan.cost import mcore_experts as mx
from meshplan.cost.compute import STREAM_BWD_BYTE_RATIO
from meshplan.cost.layer import layer_ops_times
from meshplan.cost.ops import Shard
from meshplan.specs.catalog.presets import preset
from meshplan.scenario import make_cluster

# ops that move no data (views, metadata)
_VIEWS = {"view", "_unsafe_view", "split", "split_with_sizes", "chunk", "narrow", "slice",
          "as_strided", "detach", "alias", "unsqueeze", "squeeze", "expand", "t", "transpose",
          "select", "reshape", "lift_fresh", "unbind", "scalar_tensor"}


def _counter(torch):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Count(TorchDispatchMode):
        """Bytes read and written by every data-moving ATen op dispatched inside."""

        def __init__(self):
            super().__init__()
            self.bytes = 0
            self.kernels = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__.rstrip("_") not in _VIEWS:
                ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
                outs = [a for a in tree_flatten(out)[0] if isinstance(a, torch.Tensor)]
                self.bytes += sum(a.numel() * a.element_size() for a in ins + outs)
                self.kernels += 1
            return out

    return Count


def test_clamp_bytes_are_what_pytorch_dispatches():
    torch = pytest.importorskip("torch", reason="the reference run needs torch")
    Count = _counter(torch)
    rows, w, v = 256, 512, 7.0
    fc1 = torch.randn(rows, 2 * w, dtype=torch.bfloat16, requires_grad=True) * 4  # non-leaf
    with Count() as fwd:  # weighted_bias_quick_geglu_impl with a clamp value
        x_glu, x_linear = fc1.chunk(2, -1)
        out = torch.cat((x_glu.clamp(min=None, max=v), x_linear.clamp(min=-v, max=v)), -1)
    grad = torch.randn_like(out)
    with Count() as bwd:
        torch.autograd.grad(out, fc1, grad)
    assert fwd.bytes / (rows * w) == pytest.approx(mx.CLAMP_FWD_BYTES, rel=1e-4)
    assert fwd.kernels == mx.CLAMP_KERNELS
    assert bwd.bytes / (rows * w) == pytest.approx(mx.CLAMP_BWD_BYTES, rel=1e-4)  # + two scalars


def test_bias_loop_bytes_are_what_pytorch_dispatches():
    torch = pytest.importorskip("torch", reason="the reference run needs torch")
    Count = _counter(torch)
    local, per, h = 4, 128, 1024
    rows = local * per
    out = torch.randn(rows, h, dtype=torch.bfloat16, requires_grad=True) * 1  # fc2 output
    biases = [torch.randn(h, dtype=torch.bfloat16, requires_grad=True) for _ in range(local)]
    probs = (torch.rand(rows, dtype=torch.bfloat16, requires_grad=True) * 1).unsqueeze(-1)
    with Count() as fwd:  # TEGroupedMLP._apply_bias
        res = torch.cat([t + b * p for t, b, p in zip(
            torch.split(out.view(-1, h), [per] * local), biases,
            torch.split(probs, [per] * local))]).view(out.shape).to(out.dtype)
    grad = torch.randn_like(res)
    with Count() as bwd:
        torch.autograd.grad(res, [out, probs] + biases, grad)
    # the per-row probabilities and the per-expert biases are h times smaller: within 1%
    assert fwd.bytes / (rows * h) == pytest.approx(mx.BIAS_FWD_BYTES, rel=0.01)
    assert fwd.kernels == mx.BIAS_KERNELS_PER_EXPERT * local + 1
    assert bwd.bytes / (rows * h) == pytest.approx(mx.BIAS_BWD_BYTES, rel=0.01)


def test_the_megatron_core_code_still_runs_these_ops():
    """Where megatron-core is installed, its GPT-OSS expert path still clamps and
    concatenates in eager code and adds the fc2 bias per expert (the counts above)."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed")
    geglu = pytest.importorskip("megatron.core.fusions.fused_bias_geglu")
    experts = pytest.importorskip("megatron.core.transformer.moe.experts")
    src = inspect.getsource(geglu.weighted_bias_quick_geglu_impl)
    assert ".clamp(" in src and "torch.cat(" in src
    src = inspect.getsource(experts.TEGroupedMLP._apply_bias)
    assert "t + b * p" in src and "torch.split(" in src


def _moe_ops(model, engine, ep=8, recompute_safe=True):
    cluster = make_cluster(gpu="B200", num_gpus=8)
    shard = Shard(seq=4096, micro_batch=2, ep=ep)
    ops, _, times = layer_ops_times(model, cluster, "moe", shard, "bf16", engine)
    return ops, times, shard


def test_gpt_oss_layer_gains_the_eager_ops_on_megatron_core_engines_only():
    m = preset("gpt-oss-120b")
    assert m.glu_clamp == 7.0 and m.gated_act == "quick_gelu" and m.linear_bias
    # without its YaRN scaling: Megatron's unfused RoPE (mcore_rope.py) is counted apart
    import dataclasses
    m = dataclasses.replace(m, rope_scaling="")
    base, tb, shard = _moe_ops(m, "torchtitan")
    rows = shard.tokens * m.moe_topk
    w, h, local = m.moe_expert_ffn, m.hidden, m.moe_experts / shard.ep
    fwd = rows * (w * mx.CLAMP_FWD_BYTES + h * mx.BIAS_FWD_BYTES)
    bwd = rows * (w * mx.CLAMP_BWD_BYTES + h * mx.BIAS_BWD_BYTES)
    for engine in mx.MCORE_ENGINES:
        ops, t, _ = _moe_ops(m, engine)
        assert ops.stream_bytes - base.stream_bytes == pytest.approx(fwd)
        assert (STREAM_BWD_BYTE_RATIO * (ops.stream_bytes - base.stream_bytes)
                + ops.stream_bwd_extra_bytes - base.stream_bwd_extra_bytes) == pytest.approx(bwd)
        assert ops.saved_bytes - base.saved_bytes == pytest.approx(rows * w * mx.CLAMP_SAVED_BYTES)
        assert ops.kernels - base.kernels == pytest.approx(
            mx.CLAMP_KERNELS + mx.BIAS_KERNELS_PER_EXPERT * local + 1)
        # moe_act recomputation drops what the clamps keep and runs them again
        act, act0 = ops.modules["moe_act"], base.modules["moe_act"]
        assert act.freed_bytes - act0.freed_bytes == pytest.approx(rows * w * mx.CLAMP_SAVED_BYTES)
        assert act.stream_bytes - act0.stream_bytes == pytest.approx(rows * w * mx.CLAMP_FWD_BYTES)
        assert t.fwd_s > tb.fwd_s and t.bwd_input_s > tb.bwd_input_s
    # meshplan's own runtime (engine "") and torchtitan run no Megatron-Core experts
    plain, _, _ = _moe_ops(m, "")
    assert plain.stream_bytes == base.stream_bytes and plain.kernels == base.kernels


def test_models_without_clamp_or_expert_bias_are_unchanged():
    m = preset("mixtral-8x7b")
    assert not m.glu_clamp and not m.linear_bias
    a, ta, _ = _moe_ops(m, "nemo")
    b, tb, _ = _moe_ops(m, "torchtitan")
    assert a.stream_bytes == b.stream_bytes and a.saved_bytes == b.saved_bytes


def test_hf_config_reads_swiglu_limit():
    from meshplan.specs.hf_config import model_from_hf_dict
    import json
    from pathlib import Path
    cfg = json.loads((Path(__file__).resolve().parents[1] / "meshplan/specs/catalog/models/"
                      "gpt-oss-20b.json").read_text())
    cfg["swiglu_limit"] = 5.5
    m = model_from_hf_dict(cfg, "gpt-oss-20b-variant")
    assert m.glu_clamp == 5.5 and m.gated_act == "quick_gelu"
    cfg["swiglu_limit"] = -1
    from meshplan.errors import InputError
    with pytest.raises(InputError, match="swiglu_limit"):
        model_from_hf_dict(cfg, "bad")
