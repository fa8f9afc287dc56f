"""Activation recomputation of a transformer block: ``full`` or ``selective``.

full: the block keeps only its input and re-runs its forward in backward (Chen et al. 2016,
"Training Deep Nets with Sublinear Memory Cost"; ``torch.utils.checkpoint``).

selective: what the planner's cost model calls selective (``cost/ops.py``): keep the
outputs of the expensive projections and recompute the cheap, large ones (Korthikanti et
al. 2022 recompute the attention core; torchtitan's op-level selective checkpointing
recomputes every other GEMM). It runs as PyTorch's selective activation checkpointing
(``create_selective_checkpoint_contexts``): an op policy decides per op whether its output
is cached in forward (MUST_SAVE) or recomputed in backward. Kept: the block input, the
outputs of the q/k/v (or MLA) projections, of the MLP gate projection and of the router and
expert gate projections, and the residual stream between attention and MLP (the second
norm's input). Recomputed: both norms, rotary embedding, the attention core and the output
projection, the up projection of gated MLPs, the activation function, and the collectives
that produce them under tensor/sequence parallelism.

The model marks regions in code (``recomputed()`` around the attention core, output
projections and up projections; ``kept()`` around the residual add), so the policy does not
guess which matmul is which; outside a region, matmul outputs are kept and everything else
is recomputed. The regions run the same way in the forward and in the recomputation, so
the policy decides identically in both, as selective checkpointing requires.

Memory trade against the cost model: the output projection (``wo``) is re-run in the
recomputation (it precedes the kept residual add), a GEMM the cost model does not charge.
"""

from __future__ import annotations

import contextlib
import functools

import torch
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

RECOMPUTE = ("none", "selective", "full")
_MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
            torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default}
_mode: list[str] = []  # innermost region first-class: "recompute" or "keep"
# module-level recomputation (Plan.recompute_modules): the Megatron-Core modules the block
# running forward recomputes (set by run_block; empty in backward and inside a module that
# is itself checkpointed, so a recomputation runs what the forward ran)
MODULE_MODE = "selective:"  # a block's recompute mode "selective:layernorm+moe_act"
_active: list[frozenset] = [frozenset()]


@contextlib.contextmanager
def _region(kind: str):
    _mode.append(kind)
    try:
        yield
    finally:
        _mode.pop()


def recomputed():
    """Ops inside are recomputed in backward under selective recomputation."""
    return _region("recompute")


def kept():
    """Ops inside keep their outputs for backward under selective recomputation."""
    return _region("keep")


def _policy(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    if _mode:
        return CheckpointPolicy.MUST_SAVE if _mode[-1] == "keep" else CheckpointPolicy.PREFER_RECOMPUTE
    return CheckpointPolicy.MUST_SAVE if op in _MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


def _plain(fn):
    def run(*args):
        _active.append(frozenset())
        try:
            return fn(*args)
        finally:
            _active.pop()
    return run


def checkpointed(name: str, fn, *args):
    """``fn(*args)``, a module Megatron-Core checkpoints normally (core_attn, mlp, moe,
    shared_experts): when the block recomputes ``name`` only its inputs are kept and its
    forward runs again in backward (torch non-reentrant checkpoint)."""
    if name not in _active[-1] or not torch.is_grad_enabled():
        return fn(*args)
    return checkpoint(_plain(fn), *args, use_reentrant=False)


def discarded(name: str, fn, consumer, *args):
    """``consumer(fn(*args))`` where ``fn`` is a module Megatron-Core recomputes with its output
    discarded (layernorm, mla_up_proj, moe_act; CheckpointWithoutOutput): when the block
    recomputes ``name``, fn keeps only its inputs (checkpoint), and what ``consumer`` saves
    of fn's output is not kept but rebuilt from those inputs when backward needs it."""
    if name not in _active[-1] or not torch.is_grad_enabled():
        return consumer(fn(*args))
    out = checkpoint(_plain(fn), *args, use_reentrant=False)
    outs = out if isinstance(out, tuple) else (out,)
    ptrs = [o.untyped_storage().data_ptr() for o in outs]
    held = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]

    def pack(t):
        p = t.untyped_storage().data_ptr()
        if p in ptrs:  # a view of one of fn's outputs: keep how to rebuild it
            return ("rebuilt", ptrs.index(p), t.size(), t.stride(), t.storage_offset(),
                    t.requires_grad)
        return t

    def unpack(x):
        if isinstance(x, tuple) and x and x[0] == "rebuilt":
            _, i, size, stride, offset, _ = x
            with torch.no_grad():
                again = _plain(fn)(*held)
            again = again if isinstance(again, tuple) else (again,)
            return again[i].as_strided(size, stride, offset)
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        return consumer(out)


def run_block(fn, recompute: str, *args):
    """``fn(*args)`` with the block's recomputation policy applied (training only)."""
    if recompute == "none" or not torch.is_grad_enabled():
        return fn(*args)
    if recompute.startswith(MODULE_MODE):
        _active.append(frozenset(recompute[len(MODULE_MODE):].split("+")))
        try:
            return fn(*args)
        finally:
            _active.pop()
    if recompute == "full":
        return checkpoint(fn, *args, use_reentrant=False)
    ctx = functools.partial(create_selective_checkpoint_contexts, _policy)
    return checkpoint(fn, *args, use_reentrant=False, context_fn=ctx)


def layer_modes(plan, n_layers: int) -> list[str]:
    """The recomputation each of a model chunk's ``n_layers`` blocks runs, in layer order:
    ``plan.recompute`` for all of them, or with partial recomputation (plan.recompute_layers
    = N) "full" for the first N and "none" for the rest (Megatron-LM's block method)."""
    if getattr(plan, "recompute_modules", ""):
        return [MODULE_MODE + plan.recompute_modules] * n_layers
    if not plan.recompute_layers:
        return [plan.recompute] * n_layers
    k = plan.recomputed_layers(n_layers)
    return ["full"] * k + ["none"] * (n_layers - k)


def apply_recompute(model, plan) -> None:
    """Set the recomputation of every block of one model chunk (blocks in layer order)."""
    if "moe" in getattr(plan, "recompute_modules", "").split("+") and plan.ep > 1:
        from ..errors import InputError
        raise InputError("recompute_modules", plan.recompute_modules,
                         "the runtime does not re-run the expert all-to-all in backward: "
                         "recomputing the whole MoE layer needs ep=1 here")
    blocks = list(model.layers.values())
    for block, mode in zip(blocks, layer_modes(plan, len(blocks))):
        block.recompute = mode

