"""Expert parallelism: routed experts sharded over the ep group, tokens dispatched and
combined with ``all_to_all_single`` (GShard, Lepikhin et al. 2020; the dispatch/combine of
Megatron-Core's ``MoEAlltoAllTokenDispatcher``).

Expert tensor parallelism (``etp`` > 1; MoE Parallel Folding, Liu et al. 2025,
arXiv:2504.14960; Megatron-Core's ``expert_tensor_parallel_size``) also splits every expert's
ffn width over the etp group: after the ep all-to-all each etp rank gathers the rows of its
etp peers (an all-gather of variable sizes), runs them through its ffn slice (w1, w3 by
rows, w2 by columns, so its output is a partial sum) and the partial outputs are summed
back on the rank that owns each row (a reduce-scatter of variable sizes). Both are
``all_to_all_single`` calls with autograd (the all-gather sends the same rows to every
peer, so its backward sums the peers' gradients; the reduce-scatter is an exchange then a
sum). This is the row count and ffn width per rank the cost model assumes
(``cost/ops.py`` moe_ops: tokens*topk*etp rows at ffn/etp).

Expert weights become DTensors on the (ep, etp) mesh, Shard(0) (the expert index) over ep
and Shard on the ffn dim over etp, so checkpoints keep the full [experts, ...] shape and
reshard between layouts. Their gradients are summed over the expert-data-parallel group
and divided by dp*cp (data_parallel.reduce_grads): each etp slice's local gradient already
sums the rows of every token of its ep*etp block (each row's output gradient reaches every
etp peer through the reduce-scatter's backward), each token once, so the sum over edp covers
the dp*cp*tp block exactly once, as with etp = 1.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Shard, distribute_tensor

from .model import local_dispatch


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


def _to_expert_major(counts: torch.Tensor):
    """Row blocks received as [source][expert] (``counts`` [sources, experts]): the block
    sizes in that order, and the order of block indices that groups them by expert."""
    n_src, n_e = counts.shape
    seg = counts.flatten().tolist()
    by_expert = [s * n_e + e for e in range(n_e) for s in range(n_src)]
    return seg, by_expert


def _permute_blocks(x: torch.Tensor, seg: list[int], order: list[int]) -> torch.Tensor:
    parts = torch.split(x, seg)
    return torch.cat([parts[i] for i in order]) if parts else x


def _unpermute_blocks(y: torch.Tensor, seg: list[int], order: list[int]) -> torch.Tensor:
    parts = torch.split(y, [seg[i] for i in order])
    back = [None] * len(seg)
    for j, i in enumerate(order):
        back[i] = parts[j]
    return torch.cat(back) if back else y


def make_etp_experts(group, etp: int):
    """Wrap ``experts(x, counts)`` so the etp group shares rows and sums partial outputs."""

    def run(experts, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        n, local_e = x.shape[0], len(counts)
        mine = torch.tensor(counts, dtype=torch.long, device=x.device)
        peer_counts = torch.empty(etp * local_e, dtype=torch.long, device=x.device)
        dist.all_to_all_single(peer_counts, mine.repeat(etp), group=group)
        mat = peer_counts.view(etp, local_e)  # [peer][local expert]
        sizes = mat.sum(1).tolist()
        # all-gather of variable sizes: the same rows to every peer
        xg = _AllToAll.apply(x.repeat(etp, 1), sizes, [n] * etp, group)
        seg, by_expert = _to_expert_major(mat)
        y = experts(_permute_blocks(xg, seg, by_expert), mat.sum(0).tolist())
        y = _unpermute_blocks(y, seg, by_expert)  # partial sums, [peer][expert]
        # reduce-scatter of variable sizes: each peer's rows back to it, then the sum
        back = _AllToAll.apply(y, [n] * etp, sizes, group)
        return back.view(etp, n, back.shape[-1]).sum(0)

    return run


def make_ep_dispatch(group, ep: int, num_experts: int, etp_run=None):
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
        seg, by_expert = _to_expert_major(recv_mat)
        counts_e = recv_mat.sum(0).tolist()
        x_e = _permute_blocks(x, seg, by_expert)
        y_e = experts(x_e, counts_e) if etp_run is None else etp_run(experts, x_e, counts_e)
        y = _AllToAll.apply(_unpermute_blocks(y_e, seg, by_expert), send, recv, group)
        return y[torch.argsort(order)]

    return dispatch


FFN_DIM = {"w1": 1, "w3": 1, "w2": 2}  # the ffn dim of each stacked expert weight


def apply_ep(model, plan, expert_mesh) -> list[nn.Parameter]:
    """Shard experts over the (ep, etp) dims of ``expert_mesh`` (``Meshes.expert``); return
    the expert parameters of ``model``."""
    params = []
    mesh = expert_mesh["ep", "etp"]
    ep_group, etp_group = mesh.get_group("ep"), mesh.get_group("etp")
    for block in model.layers.values():
        if not block.is_moe:
            continue
        moe = block.moe
        if plan.ep > 1 or plan.etp > 1:
            for name, p in list(moe.experts.named_parameters(recurse=False)):
                d = distribute_tensor(p.detach(), mesh, [Shard(0), Shard(FFN_DIM[name])])
                setattr(moe.experts, name, nn.Parameter(d))
        etp_run = make_etp_experts(etp_group, plan.etp) if plan.etp > 1 else None
        if plan.ep > 1:
            moe.dispatch = make_ep_dispatch(ep_group, plan.ep, moe.num_experts, etp_run)
        elif etp_run is not None:
            moe.dispatch = _local_etp_dispatch(moe.num_experts, etp_run)
        params += list(moe.experts.parameters())
    return params


def _local_etp_dispatch(num_experts: int, etp_run):
    """ep = 1: every expert on this rank, its ffn split over the etp group."""
    def dispatch(rows, ids, experts):
        return local_dispatch(rows, ids, lambda x, c: etp_run(experts, x, c), num_experts)
    return dispatch
