"""Megatron's unfused rotary embedding for YaRN on non-MLA models (meshplan/cost/mcore_rope.py):
the byte counts against the ATen ops PyTorch dispatches for Megatron-Core's own function (a
single-process reference run on CPU), and where the cost model charges them."""

from __future__ import annotations

import dataclasses

import pytest

from meshplan.cost import mcore_rope as mr
from meshplan.cost.compute import STREAM_BWD_BYTE_RATIO
from meshplan.cost.layer import layer_ops_times
from meshplan.cost.ops import Shard
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset

_VIEWS = {"view", "_unsafe_view", "split", "split_with_sizes", "chunk", "narrow", "slice",
          "as_strided", "detach", "alias", "unsqueeze", "squeeze", "expand", "t", "transpose",
          "select", "reshape", "lift_fresh", "unbind", "scalar_tensor"}


def _bytes_of(torch, fn, skip_below: int) -> tuple[int, int]:
    """(bytes moved, kernels) by the data-moving ATen ops ``fn`` dispatches, ignoring ops on
    tensors smaller than ``skip_below`` elements (the rotary tables)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    seen = [0, 0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__.rstrip("_") not in _VIEWS:
                ts = [a for a in tree_flatten((args, kwargs, out))[0]
                      if isinstance(a, torch.Tensor)]
                seen[1] += 1
                if max(a.numel() for a in ts) >= skip_below:
                    seen[0] += sum(a.numel() * a.element_size() for a in ts
                                   if a.numel() >= skip_below)
            return out

    with Count():
        fn()
    return seen[0], seen[1]


def test_unfused_rope_bytes_are_what_megatron_dispatches():
    torch = pytest.importorskip("torch", reason="the reference run needs torch")
    rope = pytest.importorskip("megatron.core.models.common.embeddings.rope_utils",
                               reason="megatron-core is not installed")
    s, b, h, d = 512, 2, 8, 64
    elements = s * b * h * d
    t = torch.randn(s, b, h, d, dtype=torch.bfloat16, requires_grad=True) * 1  # non-leaf q
    freqs = torch.randn(s, 1, 1, d)
    holder = {}

    def fwd():
        holder["out"] = rope._apply_rotary_pos_emb_bshd(t, freqs, mscale=1.35)

    # the rotary tables are s x d elements: everything larger is q's (or half of it)
    fb, fk = _bytes_of(torch, fwd, skip_below=elements // 4)
    grad = torch.randn_like(holder["out"])
    bb, _ = _bytes_of(torch, lambda: torch.autograd.grad(holder["out"], t, grad),
                      skip_below=elements // 4)
    assert fb / elements == pytest.approx(mr.UNFUSED_FWD_BYTES, rel=0.01)
    assert bb / elements == pytest.approx(mr.UNFUSED_BWD_BYTES, rel=0.01)
    assert fk == mr.UNFUSED_KERNELS


def _attn(model, engine):
    shard = Shard(seq=4096, micro_batch=2, ep=8)
    ops, _, t = layer_ops_times(model, make_cluster("8xB200"), "moe" if model.is_moe else
                                "dense", shard, "bf16", engine)
    return ops, t, shard


def test_yarn_on_a_non_mla_model_runs_unfused_on_megatron_engines_only():
    m = preset("gpt-oss-120b")
    assert mr.unfused_position_embedding(m)
    base, tb, s = _attn(m, "torchtitan")
    elements = s.tokens * m.head_dim * (m.heads + m.kv_heads)
    for engine in mr.MCORE_ENGINES:
        ops, t, _ = _attn(m, engine)
        rope = ops.stream_bytes - base.stream_bytes  # the experts' eager ops are there too
        from meshplan.cost import mcore_experts as mx
        rows = s.tokens * m.moe_topk
        rope -= rows * (m.moe_expert_ffn * mx.CLAMP_FWD_BYTES + m.hidden * mx.BIAS_FWD_BYTES)
        assert rope == pytest.approx(elements * (mr.UNFUSED_FWD_BYTES - mr.FUSED_FWD_BYTES))
    # a model without YaRN, and MLA's YaRN (its own fused path), are unchanged
    for name in ("llama3.1-8b", "deepseek-v3"):
        assert not mr.unfused_position_embedding(preset(name))
    m2 = dataclasses.replace(preset("llama3.1-8b"), rope_scaling="")
    a, _, _ = _attn(m2, "nemo")
    b, _, _ = _attn(m2, "torchtitan")
    assert a.stream_bytes == b.stream_bytes and a.kernels == b.kernels


def test_the_backward_charge_is_the_measured_one():
    m = preset("gpt-oss-20b")
    s = Shard(seq=1024, micro_batch=1)
    from meshplan.cost.ops import LayerOps
    ops = mr.eager_rope(LayerOps(), m, s, "nemo")
    elements = s.tokens * m.head_dim * (m.heads + m.kv_heads)
    bwd = STREAM_BWD_BYTE_RATIO * ops.stream_bytes + ops.stream_bwd_extra_bytes
    assert bwd == pytest.approx(elements * (mr.UNFUSED_BWD_BYTES
                                            - STREAM_BWD_BYTE_RATIO * mr.FUSED_FWD_BYTES))
