"""Megatron-Core's unfused vocab-parallel cross entropy and its embedding gradient
(meshplan/cost/mcore_loss.py): the byte counts against the ATen ops PyTorch dispatches for
Megatron-Core's own loss function and for the embedding's dense backward plus the DDP hook's
main_grad accumulation (single-process reference runs on CPU), and where the head and the
embedding charge them."""

from __future__ import annotations

import pytest

from meshplan.cost import mcore_loss as ml
from meshplan.cost.compute import STREAM_BWD_BYTE_RATIO
from meshplan.cost.layer import layer_ops_times
from meshplan.cost.ops import Shard
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset

MODEL = preset("llama3.1-8b")
CLUSTER = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)

# ops that touch one element per row of the tensors they take (the target gather and update)
_SPARSE = {"index", "index_put", "gather", "scatter"}
_VIEWS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "expand", "detach",
          "alias", "t", "transpose", "slice", "select", "as_strided"}


def _count(torch, fn, big: int) -> float:
    """HBM bytes of the tensors of at least ``big`` elements that the data-moving ATen ops of
    ``fn`` read and write (an ``out=`` tensor once, an in-place result as its write)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    seen = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = func.overloadpacket.__name__.rstrip("_")
            if name in _VIEWS or name in _SPARSE:
                return out
            ins = [a for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)]
            ins += [a for k, a in kwargs.items() if k != "out" and isinstance(a, torch.Tensor)]
            outs = ([kwargs["out"]] if "out" in kwargs else
                    [a for a in tree_flatten(out)[0] if isinstance(a, torch.Tensor)])
            seen[0] += sum(a.numel() * a.element_size() for a in ins + outs if a.numel() >= big)
            return out

    with Count():
        fn()
    return seen[0]


def test_unfused_loss_bytes_are_what_megatron_dispatches():
    torch = pytest.importorskip("torch", reason="the reference run needs torch")
    ce = pytest.importorskip("megatron.core.tensor_parallel.cross_entropy",
                             reason="megatron-core is not installed")
    import torch.distributed as dist
    # a process group of one rank for the function's collectives, destroyed at the end: a
    # default group left behind in this process would be inherited by the runtime tests'
    # forked ranks ("trying to initialize the default process group twice")
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    group = dist.new_group([0])
    mp = pytest.MonkeyPatch()
    # a tensor-parallel group of one rank (the function's all-reduces are then identities)
    for name, value in (("get_tensor_model_parallel_group", lambda: group),
                        ("get_tensor_model_parallel_rank", lambda: 0),
                        ("get_tensor_model_parallel_world_size", lambda: 1)):
        if hasattr(ce, name):
            mp.setattr(ce, name, value)
    try:
        s, b, v = 64, 2, 4096
        logits = torch.randn(s, b, v, dtype=torch.bfloat16).requires_grad_()
        target = torch.randint(0, v, (s, b))
        kw = {} if hasattr(ce, "get_tensor_model_parallel_group") else {"tp_group": group}
        held = {}

        def fwd():
            held["loss"] = ce.vocab_parallel_cross_entropy(logits, target, **kw)

        n = s * b * v
        fb = _count(torch, fwd, n)
        loss = held["loss"]
        bb = _count(torch, lambda: torch.autograd.grad(loss, logits, torch.ones_like(loss)), n)
    finally:
        mp.undo()
        if created:
            dist.destroy_process_group()
    assert fb / n == ml.UNFUSED_LOSS_FWD_BYTES == 38
    assert bb / n == ml.UNFUSED_LOSS_BWD_BYTES == 14


def test_embedding_gradient_bytes_are_the_dense_backward_and_main_grad_add():
    torch = pytest.importorskip("torch", reason="the reference run needs torch")
    v, h, t = 4096, 64, 256
    weight = torch.randn(v, h, dtype=torch.bfloat16, requires_grad=True)
    main_grad = torch.zeros(v, h, dtype=torch.float32)
    idx = torch.randint(0, v, (t,))
    out = torch.nn.functional.embedding(idx, weight)
    dy = torch.randn_like(out)

    def bwd():
        (g,) = torch.autograd.grad(out, weight, dy)  # dense [v, h] 16-bit gradient
        main_grad.add_(g)  # Megatron's DDP hook: param.main_grad.add_(param.grad.data)

    assert _count(torch, bwd, v * h) / (v * h) == ml.EMBEDDING_GRAD_BYTES == 12


def _head(engine, precision="bf16", tp=1):
    shard = Shard(seq=4096, micro_batch=1, tp=tp)
    ops, dev, t = layer_ops_times(MODEL, CLUSTER, "head", shard, precision, engine)
    return ops, dev, t, shard


def test_megatron_head_charges_the_unfused_loss_and_others_do_not():
    base, dev, tb, s = _head("torchtitan")
    mega, _, tm, _ = _head("megatron")
    nemo, _, tn, _ = _head("nemo")  # fused loss in Megatron-Bridge's recipes: generic count
    logits = s.tokens * MODEL.vocab / s.tp
    hbm = dev.hbm_bytes_per_s
    assert tn.fwd_s == pytest.approx(tb.fwd_s)
    assert tm.fwd_s - tb.fwd_s == pytest.approx(logits * (38 - 12) / hbm, rel=1e-9)
    # backward: 14 bytes per logit where head_ops charged 2 x 12
    assert (tm.bwd_input_s - tb.bwd_input_s) == pytest.approx(
        logits * (14 - STREAM_BWD_BYTE_RATIO * 12) / hbm, rel=1e-9)
    # under tp the rank's slice of the vocabulary
    _, _, t8, s8 = _head("megatron", tp=8)
    _, _, b8, _ = _head("torchtitan", tp=8)
    assert t8.fwd_s - b8.fwd_s == pytest.approx(s8.tokens * MODEL.vocab / 8 * 26 / hbm,
                                                rel=1e-9)


def test_megatron_embedding_backward_charges_the_gradient_per_micro_batch():
    shard = Shard(seq=4096, micro_batch=1, tp=2)
    _, dev, tt = layer_ops_times(MODEL, CLUSTER, "embedding", shard, "bf16", "torchtitan")
    _, _, tm = layer_ops_times(MODEL, CLUSTER, "embedding", shard, "bf16", "megatron")
    assert tm.bwd_input_s - tt.bwd_input_s == pytest.approx(
        12 * MODEL.vocab * MODEL.hidden / 2 / dev.hbm_bytes_per_s, rel=1e-9)
