"""Memory dry run: the real model at the plan's full world size, in one process, on fake
tensors (FakeTensorMode) and a fake process group, measured by PyTorch's MemTracker.

For each pipeline rank one representative rank (dp = cp = tp = 0 coordinates) is built
with every parallel wrapper of the real run (FSDP2, DTensor TP, ring attention, EP), then
the second optimizer step is tracked (the first creates the optimizer states).

The runtime keeps parameters, gradients and AdamW states in the run's dtype (no fp32
master copy) and attends with PyTorch's SDPA (on CPU the math kernel, which materialises
the s x s scores), so its numbers differ from the cost model's mixed-precision,
flash-attention assumptions by design; ``meshplan dryrun`` prints both side by side. Pipeline stages are run without the schedule: the rank's
chunk does the forward of the micro-batches 1F1B keeps in flight on it (pp - r, at most
the micro-batch count), then their backwards, which is where the 1F1B peak sits
(Narayanan et al. 2021); interleaved schedules are measured as their first chunk only.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..plan import Plan
from ..errors import InputError
from .train import RunConfig


def _rank_for_stage(plan: Plan, pp_rank: int) -> int:
    for r in range(plan.world_size):
        c = plan.rank_coords(r)
        if c["pp"] == pp_rank and c["dp"] == c["cp"] == c["tp"] == 0:
            return r
    raise AssertionError(pp_rank)


def dryrun_rank(cfg: RunConfig, rank: int) -> dict:
    """Peak bytes by MemTracker category for one optimizer step of ``rank``."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from .worker import step_mem_tracker

    plan = cfg.plan
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=rank, world_size=plan.world_size, store=FakeStore())
    try:
        with FakeTensorMode(allow_non_fake_inputs=True), _real_mesh_concat():
            tr = _StageTrainer(cfg, rank)
            tr.train_step(0)  # untracked: creates the optimizer states (steady state)
            mt = step_mem_tracker()
            mt.track_external(*tr.parts, *tr.optimizers)
            with mt:
                tr.train_step(1)
            peak = mt.get_tracker_snapshot("peak")
    finally:
        dist.destroy_process_group()
    snap = next(iter(peak.values())) if peak else {}
    return {getattr(k, "value", str(k)): int(v) for k, v in snap.items()}


class _real_mesh_concat:
    """FSDP2 + TP concatenates DeviceMeshes, which builds a rank tensor: keep it real.

    (Under FakeTensorMode the coordinate lookup on a fake rank tensor is data-dependent.)
    """

    def __enter__(self):
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.distributed.device_mesh import DeviceMesh
        self.orig = orig = DeviceMesh._concatenate

        def concat(meshes):
            with unset_fake_temporarily():
                return orig(meshes)
        DeviceMesh._concatenate = staticmethod(concat)
        return self

    def __exit__(self, *exc):
        from torch.distributed.device_mesh import DeviceMesh
        DeviceMesh._concatenate = staticmethod(self.orig)


class _StageTrainer:
    """One rank's (first) chunk, driven 1F1B-style without a schedule (see the module doc)."""

    def __init__(self, cfg: RunConfig, rank: int):
        from .context_parallel import apply_cp
        from .data_parallel import apply_dp
        from .expert_parallel import apply_ep
        from .mesh import build_meshes
        from .model import build_model
        from .pipeline import chunk_layers
        from .tensor_parallel import apply_tp, make_loss_fn
        from .train import DTYPES, make_optimizer

        plan, spec = cfg.plan, cfg.spec
        self.cfg, self.plan = cfg, plan
        self.coords = plan.rank_coords(rank)
        self.meshes = build_meshes(plan, "cpu", spec.is_moe)
        c = plan.chunk_of(self.coords["pp"], 0)
        self.first, self.last = c == 0, c == plan.num_chunks - 1
        m = build_model(spec, cfg.seed, chunk_layers(spec, plan)[c], self.first, self.last,
                        DTYPES[cfg.dtype])
        experts = apply_ep(m, plan, self.meshes.expert) if spec.is_moe else []
        apply_tp(m, plan, self.meshes.tp)
        apply_cp(m, plan, self.meshes.group("cp"))
        apply_dp(m, plan, self.meshes, experts)
        self.parts = [m]
        self.optimizers = [make_optimizer(list(m.parameters()), cfg)]
        self.loss_fn = make_loss_fn(plan, self.meshes.tp)
        n = cfg.n_microbatches
        # 1F1B keeps pp - r micro-batches in flight on rank r; without a pipeline one at a time
        self.in_flight = min(plan.pp - self.coords["pp"], n) if plan.pp > 1 else 1

    def train_step(self, step: int) -> None:
        from .tensor_parallel import loss_context
        cfg, plan, m = self.cfg, self.plan, self.parts[0]
        mb, s = plan.micro_batch, cfg.seq_len // plan.cp
        if plan.sequence_parallel:
            s //= plan.tp
        outs = []
        with loss_context(plan):
            for _ in range(self.in_flight):
                if self.first:
                    x = torch.randint(0, cfg.spec.vocab, (mb, cfg.seq_len // plan.cp))
                else:
                    x = torch.randn(mb, s, cfg.spec.hidden, requires_grad=True)
                out = m(x)
                if self.last:
                    y = torch.randint(0, cfg.spec.vocab, (mb, cfg.seq_len // plan.cp))
                    out = self.loss_fn(out, y)
                else:
                    out = out.sum()
                outs.append(out)
                if len(outs) == self.in_flight:  # steady state reached: drain
                    for o in outs:
                        o.backward()
                    outs = []
                    break
        for opt in self.optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)


def dryrun(cfg: RunConfig) -> list[dict]:
    """Peak memory by category of one representative rank per pipeline stage."""
    cfg.check(cfg.plan.world_size)
    if cfg.spec.is_moe:
        raise InputError("model", cfg.spec.name, "the dry run builds dense models only (MoE token "
                         "counts are data-dependent, which fake tensors cannot follow)")
    from .launch import fork_ranks
    # one forked process per stage: the fake process group and its meshes are per process
    return [fork_ranks(lambda _r, _w: dryrun_rank(cfg, _rank_for_stage(cfg.plan, p)), 1,
                       init_process_group=False, timeout_s=600)[0] for p in range(cfg.plan.pp)]
