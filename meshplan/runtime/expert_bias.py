"""DeepSeek-V3's auxiliary-loss-free load balancing (DeepSeek-V3 technical report, sec.
2.1.2; Megatron-Core's moe_router_enable_expert_bias / moe_router_bias_update_rate): after
each optimizer step, every MoE layer's selection-only score-correction bias moves toward
balance,

    b_i += u * sign(mean_j load_j - load_i),

load_i being the tokens the layer routed to expert i during the step, summed over every rank
that routes a share of the layer's tokens (the data-, context- and tensor-parallel ranks of
its pipeline stage; expert parallelism folds over those same ranks). A constant factor on
every count of a layer (tensor-parallel ranks without sequence parallelism route the same
tokens; a recomputed forward routes them again) leaves every sign as it is.

Not done here: DeepSeek-V3's sequence-wise auxiliary loss (alpha 0.0001)."""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

# u: DeepSeek-V3's bias update speed gamma (0.001 over its first 14.3T tokens) and
# Megatron-Core's default moe_router_bias_update_rate
BIAS_UPDATE_RATE = 1e-3
_counting = [True]  # off while a pipeline stage infers its shapes (runtime/pipeline.py)


@contextlib.contextmanager
def not_counted():
    """Forwards that are not the step's (torch pipelining's metadata inference runs one on
    placeholder tensors at the first step) route without counting."""
    _counting[0] = False
    try:
        yield
    finally:
        _counting[0] = True


def count_load(moe, idx: torch.Tensor) -> None:
    """Add the experts picked in ``idx`` to ``moe.expert_load`` while training (not in
    evaluation, not under no_grad, not on the meta tensors of pipeline shape inference)."""
    if _counting[0] and moe.training and torch.is_grad_enabled() and idx.device.type != "meta":
        moe.expert_load += torch.bincount(idx.reshape(-1), minlength=moe.num_experts)


def update_expert_bias(parts, groups=(), rate: float = BIAS_UPDATE_RATE) -> None:
    """Move each MoE layer's ``expert_bias`` of ``parts`` by ``rate`` toward balance (the
    module docstring), its load first summed over ``groups``; then zero the load."""
    for part in parts:
        for mod in part.modules():
            load = getattr(mod, "expert_load", None)
            if load is None:
                continue
            for g in groups:
                dist.all_reduce(load, group=g)
            total = load.to(torch.float64)
            step = torch.sign(total.mean() - total).to(mod.expert_bias.dtype)
            with torch.no_grad():
                mod.expert_bias += rate * step
            load.zero_()
