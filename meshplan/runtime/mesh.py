"""The DeviceMesh of a plan, laid over ranks exactly as ``Plan.rank_coords`` says.

Dims are named ``pp``, ``dp_rep``, ``dp_shard``, ``cp``, ``tp`` (outermost first in the order
of ``plan.order`` reversed; ``dp`` is split into ``dp_rep`` x ``dp_shard`` for HSDP, where
the FSDP shard group ``dp_shard * cp`` has ``plan.hsdp_shard`` ranks). The expert mesh
(``pp``, ``edp``, ``ep``, ``etp``) folds expert parallelism over the attention ranks (MoE
Parallel Folding, Liu et al. 2025, arXiv:2504.14960), in Megatron-Core's order (expert tensor
parallel innermost, then expert parallel, then expert data parallel; the order the cost
model's ``step.py`` places the groups by): attention rank a = tp + tp_size * (cp + cp_size *
dp), etp rank = a mod etp, ep rank = (a div etp) mod ep, edp rank = a div (etp * ep).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh

from ..errors import InputError
from ..plan import Plan


@dataclass
class Meshes:
    world: DeviceMesh
    expert: DeviceMesh | None
    device_type: str

    def group(self, dim: str):
        return self.world.get_group(dim)

    @property
    def tp(self) -> DeviceMesh:
        return self.world["tp"]

    def size(self, dim: str) -> int:
        return self.world[dim].size()

    def rank(self, dim: str) -> int:
        return self.world[dim].get_local_rank()


def hsdp_split(plan: Plan) -> tuple[int, int]:
    """(dp_rep, dp_shard) from ``plan.hsdp_shard`` (the shard group spans dp_shard * cp ranks)."""
    if not plan.hsdp_shard or plan.hsdp_shard == plan.dp * plan.cp:
        return 1, plan.dp
    if plan.hsdp_shard % plan.cp:
        raise InputError("hsdp_shard", plan.hsdp_shard,
                         f"the runtime needs the FSDP shard group to be a multiple of cp ({plan.cp})")
    shard = plan.hsdp_shard // plan.cp
    return plan.dp // shard, shard


def dim_layout(plan: Plan) -> list[tuple[str, int]]:
    """(name, size) of each mesh dim, outermost first."""
    rep, shard = hsdp_split(plan)
    sizes = {"tp": [("tp", plan.tp)], "cp": [("cp", plan.cp)], "pp": [("pp", plan.pp)],
             "dp": [("dp_rep", rep), ("dp_shard", shard)]}
    out = []
    for axis in reversed(plan.order.split("-")):
        out += sizes[axis]
    return out


def build_meshes(plan: Plan, device_type: str, moe: bool) -> Meshes:
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():  # the dry run builds models under FakeTensorMode
        return _build_meshes(plan, device_type, moe)


def _build_meshes(plan: Plan, device_type: str, moe: bool) -> Meshes:
    layout = dim_layout(plan)
    names = tuple(n for n, _ in layout)
    ranks = torch.arange(plan.world_size).reshape([s for _, s in layout])
    world = DeviceMesh(device_type, ranks, mesh_dim_names=names)
    # flattened groups are created collectively, now, in the same order on every rank
    world[("dp_shard", "cp")]._flatten("dp_shard_cp")
    world[("dp_rep", "dp_shard", "cp")]._flatten("dp_cp")
    expert = None
    if moe:
        expert = DeviceMesh(device_type, expert_rank_grid(plan),
                            mesh_dim_names=("pp", "edp", "ep", "etp"))
    return Meshes(world, expert, device_type)


def expert_rank_grid(plan: Plan) -> torch.Tensor:
    """[pp, edp, ep, etp] global ranks of the folded expert layout."""
    grid = torch.empty(plan.pp, plan.edp, plan.ep, plan.etp, dtype=torch.long)
    for r in range(plan.world_size):
        c = plan.rank_coords(r)
        a = c["tp"] + plan.tp * (c["cp"] + plan.cp * c["dp"])
        grid[c["pp"], a // (plan.ep * plan.etp), (a // plan.etp) % plan.ep, a % plan.etp] = r
    return grid


def fsdp_mesh(world: DeviceMesh) -> DeviceMesh:
    """1-D dp*cp mesh, or the 2-D (dp_rep, dp_shard_cp) mesh of HSDP."""
    if world["dp_rep"].size() > 1:
        return world["dp_rep", "dp_shard_cp"]
    return world["dp_shard_cp"]
