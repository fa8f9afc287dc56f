"""Data parallelism: FSDP2 ``fully_shard`` for ZeRO, HSDP on a 2-D mesh, plain replication.

ZeRO stages (Rajbhandari et al. 2020) map onto FSDP2 as torchtitan does: zero 3 reshards
the weights after forward (``reshard_after_forward=True``), zero 1 and 2 keep them
unsharded until backward ends. FSDP2 always shards the optimizer states (they follow the
sharded fp32 parameters); the stages differ in when gradients are reduce-scattered:
- zero 2 and 3 (FSDP2's default): after every micro-batch's backward, so only sharded
  gradients are accumulated;
- zero 1, Megatron-LM's distributed optimizer: gradients accumulate unsharded (fp32)
  over the micro-batches and are reduce-scattered once, after the last
  (``set_requires_gradient_sync(False)`` before the others; ``grad_sync``). Under a
  pipeline schedule torch.distributed.pipelining does this itself for every FSDP stage,
  whatever the zero stage (``PipelineStage.backward_maybe_with_nosync``).
Zero-bubble pipeline schedules need ``reshard_after_forward=False`` (found on torch 2.13:
they give wrong gradients otherwise). zero 0 keeps full replicas and averages gradients
with one all-reduce per tensor.

``offload_optimizer`` (ZeRO-Offload, Ren et al. 2021) is FSDP2's ``CPUOffloadPolicy``:
the sharded fp32 parameters (the master), their gradients and so the AdamW states live in
host memory and the optimizer step runs on the CPU; FSDP copies a layer to the device to
all-gather it. Beyond ZeRO-Offload (which keeps fp16 weights on the GPU) it offloads the
weights' shards too, so the device holds only gathered layers. It runs with a CPU device
(``pin_memory`` off, found on torch 2.13).

Routed experts are sharded by FSDP2 over their own data-parallel group (edp, MoE Parallel
Folding) when it has more than one rank. Gradients that no data-parallel wrapper reduces are
reduced in ``reduce_grads``: expert weights without ZeRO (sum over edp / (dp*cp)) and
tp-partial weights (sum over tp; see tensor_parallel).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, fully_shard

from ..plan import Plan
from .mesh import Meshes, fsdp_mesh
from .precision import fsdp_policy

ZERO_BUBBLE = ("zb_h1", "interleaved_zb", "zb_v", "dualpipev")


def uses_fsdp(plan: Plan) -> bool:
    return plan.zero > 0 and plan.dp * plan.cp > 1


def apply_dp(model, plan: Plan, meshes: Meshes, ignored: list, dtype: str = "fp32",
             device_type: str = "cpu") -> None:
    """Wrap each transformer block and the root of ``model`` (a model or pipeline chunk)."""
    if not uses_fsdp(plan):
        return
    mesh = fsdp_mesh(meshes.world)
    reshard = plan.zero == 3 and not (plan.pp > 1 and plan.schedule in ZERO_BUBBLE)
    kw = {"mesh": mesh, "reshard_after_forward": reshard}
    mp = fsdp_policy(dtype)
    if mp is not None:
        kw["mp_policy"] = mp
    if plan.offload_optimizer:
        kw["offload_policy"] = CPUOffloadPolicy(pin_memory=device_type == "cuda")
    ign = set(ignored)
    for block in model.layers.values():
        if block.is_moe and shards_experts(plan):
            _shard_experts(block.moe.experts, plan, meshes, kw)
        mine = {p for p in block.parameters() if p in ign}
        fully_shard(block, ignored_params=mine or None, **kw)
    # the embedding and the output layer are units of their own (as torchtitan wraps them):
    # left in the root they stay gathered, and their gradients unsharded, for the whole
    # forward and backward (vocab x hidden each; measured by the dry run). A tied matrix
    # shared by both stays in the root; a pipeline chunk's copy of it (model.tied_copy) is a
    # unit like an untied one: both copies shard dim 0 over the same mesh, alike
    if not (hasattr(model, "tok_embeddings") and hasattr(model, "output")
            and model.spec.tied_embeddings):
        if hasattr(model, "tok_embeddings"):
            fully_shard(model.tok_embeddings, **kw)
        if hasattr(model, "output"):
            fully_shard([model.norm, model.output], **kw)
    fully_shard(model, ignored_params=ign or None, **kw)


def shards_experts(plan: Plan) -> bool:
    """Routed experts get ZeRO over their own data-parallel group (edp) when it has > 1 rank."""
    return uses_fsdp(plan) and plan.edp > 1


def _shard_experts(experts, plan: Plan, meshes: Meshes, kw: dict) -> None:
    """FSDP2 over the expert-data-parallel dim of the expert mesh (as torchtitan shards MoE
    experts): the weights are DTensors on (ep, etp) of the same mesh, so this is 2-D/3-D
    FSDP. FSDP averages over edp; ``reduce_grads`` rescales to the global mean.

    FSDP shards dim 0 (the expert index) when the local experts split evenly over edp;
    otherwise (e.g. Mixtral: 8 experts on ep 8 leaves one per rank) the hidden dim, which
    expert tensor parallelism never splits, so every edp rank holds an equal share."""
    from torch.distributed.tensor import Shard

    if (experts.w1.shape[0] // plan.ep) % plan.edp:  # local experts do not split over edp
        hidden_dim = {"w1": 2, "w3": 2, "w2": 1}
        dims = {id(p): hidden_dim[n] for n, p in experts.named_parameters()}
        kw = dict(kw, shard_placement_fn=lambda p: Shard(dims[id(p)]))
    fully_shard(experts, **dict(kw, mesh=meshes.expert["edp"]))



def grad_sync(parts, plan: Plan, last_microbatch: bool) -> None:
    """Before a micro-batch's backward (no pipeline): zero 1 reduce-scatters on the last only.

    The gradients of the others accumulate unsharded, in FSDP2's reduce dtype (fp32 under
    mixed precision), and the weights stay gathered between micro-batches.
    """
    if plan.zero != 1 or not uses_fsdp(plan):
        return
    for m in parts:
        if isinstance(m, FSDPModule):
            m.set_requires_gradient_sync(last_microbatch)
            m.set_reshard_after_backward(last_microbatch)
            m.set_is_last_backward(last_microbatch)


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
    if expert and shards_experts(plan):
        # FSDP's reduce-scatter averaged over edp; a token's gradient reaches its expert once,
        # from the rank holding the token, so the global mean divides the sum by dp*cp.
        # (FSDP's own divide factor needs PREMUL_SUM, which gloo lacks.)
        for p in expert:
            if p.grad is not None:
                _local(p.grad).mul_(plan.edp / dpcp)
    elif expert:
        g = meshes.expert.get_group("edp")
        for p in expert:
            if p.grad is not None:
                t = _local(p.grad)
                if meshes.expert["edp"].size() > 1:
                    dist.all_reduce(t, group=g)
                t.div_(dpcp)
