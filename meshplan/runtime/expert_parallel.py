"""Expert parallelism: routed experts sharded over the ep group, tokens dispatched and
combined with ``all_to_all_single`` (GShard, Lepikhin et al. 2020; the dispatch/combine of
Megatron-Core's ``MoEAlltoAllTokenDispatcher``).

Expert weights become DTensors sharded on dim 0 (the expert index) over the ep mesh, so
checkpoints keep the full [experts, ...] shape and reshard between layouts. Their gradients
are summed over the expert-data-parallel group and divided by dp*cp (each token's gradient
arrives once, from the rank that holds the token; data_parallel.reduce_grads).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor


class _AllToAll(torch.autograd.Function):
    """all_to_all_single whose backward is the reverse all_to_all (contiguous buffers)."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group):
        ctx.splits, ctx.group = (out_splits, in_splits), group
        out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        out_splits, in_splits = ctx.splits
        gi = g.new_empty((sum(in_splits),) + tuple(g.shape[1:]))
        dist.all_to_all_single(gi, g.contiguous(), in_splits, out_splits, group=ctx.group)
        return gi, None, None, None


def make_ep_dispatch(group, ep: int, num_experts: int):
    local_e = num_experts // ep

    def dispatch(rows: torch.Tensor, ids: torch.Tensor, experts) -> torch.Tensor:
        order = torch.argsort(ids, stable=True)
        counts = torch.bincount(ids, minlength=num_experts)
        recv_counts = torch.empty_like(counts)
        dist.all_to_all_single(recv_counts, counts, group=group)
        send = counts.view(ep, local_e).sum(1).tolist()
        recv_mat = recv_counts.view(ep, local_e)
        recv = recv_mat.sum(1).tolist()
        x = _AllToAll.apply(rows[order], recv, send, group)
        # received blocks are [source][local expert]; regroup to [local expert][source]
        seg = recv_mat.flatten().tolist()
        parts = list(torch.split(x, seg))
        by_expert = [s * local_e + e for e in range(local_e) for s in range(ep)]
        y_e = experts(torch.cat([parts[i] for i in by_expert]) if parts else x,
                      recv_mat.sum(0).tolist())
        y_parts = torch.split(y_e, [seg[i] for i in by_expert])
        back = [None] * len(seg)
        for j, i in enumerate(by_expert):
            back[i] = y_parts[j]
        y = _AllToAll.apply(torch.cat(back), send, recv, group)
        return y[torch.argsort(order)]

    return dispatch


def apply_ep(model, plan, ep_mesh) -> list[nn.Parameter]:
    """Shard experts over ``ep_mesh`` (1-D); return the expert parameters of ``model``."""
    params = []
    for block in model.layers.values():
        if not block.is_moe:
            continue
        moe = block.moe
        if plan.ep > 1:
            for name, p in list(moe.experts.named_parameters(recurse=False)):
                d = distribute_tensor(p.detach(), ep_mesh, [Shard(0)])
                setattr(moe.experts, name, nn.Parameter(d))
            moe.dispatch = make_ep_dispatch(ep_mesh.get_group(), plan.ep, moe.num_experts)
        params += list(moe.experts.parameters())
    return params
