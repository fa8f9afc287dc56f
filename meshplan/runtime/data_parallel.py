"""Data parallelism: FSDP2 ``fully_shard`` for ZeRO, HSDP on a 2-D mesh, plain replication.

ZeRO stages (Rajbhandari et al. 2020) map onto FSDP2 as torchtitan does: zero 3 reshards
the weights after forward (``reshard_after_forward=True``), zero 1 and 2 keep them
unsharded until backward ends (FSDP2 always shards gradients and optimizer states, so the
runtime runs zero 1 as zero 2). Zero-bubble pipeline schedules need
``reshard_after_forward=False`` (found on torch 2.13: they give wrong gradients otherwise).
zero 0 keeps full replicas and averages gradients with one all-reduce per tensor.

Gradients that no data-parallel wrapper reduces are reduced in ``reduce_grads``: expert
weights (sum over the expert-data-parallel group / (dp*cp)) and tp-partial weights (sum
over tp; see tensor_parallel).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

from ..plan import Plan
from .mesh import Meshes, fsdp_mesh

ZERO_BUBBLE = ("zb_h1", "interleaved_zb", "zb_v", "dualpipev")


def apply_dp(model, plan: Plan, meshes: Meshes, ignored: list) -> None:
    """Wrap each transformer block and the root of ``model`` (a model or pipeline chunk)."""
    if plan.zero == 0 or plan.dp * plan.cp == 1:
        return
    mesh = fsdp_mesh(meshes.world)
    reshard = plan.zero == 3 and not (plan.pp > 1 and plan.schedule in ZERO_BUBBLE)
    ign = set(ignored)
    for block in model.layers.values():
        mine = {p for p in block.parameters() if p in ign}
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, ignored_params=mine or None)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, ignored_params=ign or None)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def reduce_grads(params, plan: Plan, meshes: Meshes, expert: list, tp_partial: list) -> None:
    """Reductions the wrappers do not do; call after backward, before the optimizer."""
    exp_ids = {id(p) for p in expert}
    dpcp = plan.dp * plan.cp
    if plan.zero == 0 and dpcp > 1:
        g = meshes.group("dp_cp")
        for p in params:
            if p.grad is not None and id(p) not in exp_ids:
                t = _local(p.grad)
                dist.all_reduce(t, group=g)
                t.div_(dpcp)
    if plan.tp > 1:
        g = meshes.group("tp")
        for p in tp_partial:
            if p.grad is not None:
                dist.all_reduce(_local(p.grad), group=g)
    if expert:
        g = meshes.expert.get_group("edp")
        for p in expert:
            if p.grad is not None:
                t = _local(p.grad)
                if meshes.expert["edp"].size() > 1:
                    dist.all_reduce(t, group=g)
                t.div_(dpcp)
