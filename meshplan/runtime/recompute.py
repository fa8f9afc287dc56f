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


def run_block(fn, recompute: str, *args):
    """``fn(*args)`` with the block's recomputation policy applied (training only)."""
    if recompute == "none" or not torch.is_grad_enabled():
        return fn(*args)
    if recompute == "full":
        return checkpoint(fn, *args, use_reentrant=False)
    ctx = functools.partial(create_selective_checkpoint_contexts, _policy)
    return checkpoint(fn, *args, use_reentrant=False, context_fn=ctx)


def layer_modes(plan, n_layers: int) -> list[str]:
    """The recomputation each of a model chunk's ``n_layers`` blocks runs, in layer order:
    ``plan.recompute`` for all of them, or with partial recomputation (plan.recompute_layers
    = N) "full" for the first N and "none" for the rest (Megatron-LM's block method)."""
    if not plan.recompute_layers:
        return [plan.recompute] * n_layers
    k = plan.recomputed_layers(n_layers)
    return ["full"] * k + ["none"] * (n_layers - k)


def apply_recompute(model, plan) -> None:
    """Set the recomputation of every block of one model chunk (blocks in layer order)."""
    if getattr(plan, "recompute_modules", ""):
        from ..errors import InputError
        raise InputError("recompute_modules", plan.recompute_modules,
                         "meshplan's runtime recomputes whole blocks or by its op-level "
                         "selective policy, not by Megatron-Core module; run rc-selective or "
                         "rc-full here, or export the plan to Megatron-LM")
    blocks = list(model.layers.values())
    for block, mode in zip(blocks, layer_modes(plan, len(blocks))):
        block.recompute = mode

