"""Memory dry run: the real model at the plan's full world size, in one process, on fake
tensors (FakeTensorMode) and a fake process group, measured by PyTorch's MemTracker.

For each pipeline rank one representative rank (dp = cp = tp = 0 coordinates) is built
with every parallel wrapper of the real run (FSDP2 with the run's mixed-precision and
offload policies, DTensor TP, ring attention, EP), then the second optimizer step is
tracked (the first creates the optimizer states).

Pipeline ranks are run without the schedule but in the state where the schedule peaks:
the rank's action list (meshplan.pipeline.schedules, the lists the simulator and the cost
model use) is replayed counting forwards not yet backwarded per local chunk, weighted by
the chunk's layers; at the peak every local chunk (interleaved and V schedules hold two or
more) runs that many forwards, then their backwards (Narayanan et al. 2021 for 1F1B's
peak). Gradients are synchronised as torch.distributed.pipelining does for FSDP stages:
accumulated unsharded over the micro-batches, reduce-scattered once at the end
(``PipelineStage.perform_reduce_grad``). Without a pipeline, ZeRO-1 runs two
micro-batches (the first without gradient sync, as the Trainer does), other stages one.

MoE: token counts per expert are data-dependent, which fake tensors cannot follow, so the
router picks experts round-robin (every expert gets n*topk/E rows, the balanced routing
the cost model assumes) and the EP all-to-all uses those static splits.

What a GPU run would hold, not what the CPU path holds: torch.rms_norm on CPU runs
PyTorch's decomposition (torch/_decomp/decompositions.py ``_fused_rms_norm``), whose
autograd keeps an fp32 copy of the input, the fp32 normalised input and the rstd (8 bytes
per element + 4 per row), where CUDA runs aten's fused kernel, whose backward
(``_fused_rms_norm_backward(grad, input, shape, rstd, weight)``) needs only the input and
the rstd (2 bytes per element in bf16 + 4 per row). The dry run's RMSNorms keep exactly
that (``gpu_rms_norm``); with input and weight in different dtypes CUDA also falls back
("Mismatch dtype between input and weight ... Cannot dispatch to fused implementation",
aten layer_norm.cpp), and so does the dry run. Likewise the attention: CUDA's flash and
efficient SDPA (aten transformers/cuda/attention.cu) run on [b, s, heads, d] and return
their output as a transposed view of it, so the output projection's input (``out.transpose(
1, 2).reshape``) is that saved output itself; the CPU kernel returns a contiguous [b, heads,
s, d] output and the reshape copies it (2 bytes per query-head element per token more).
The dry run's causal attention (no context parallelism) returns the CUDA layout
(``gpu_attention``). What stays CPU-specific is reported as such (docs/runtime.md).

On CPU the host is the device: with ``offload_optimizer`` MemTracker sees the offloaded
master weights, gradient shards and AdamW states in the same (cpu) memory, so they are
reported apart by computing their bytes from the shards (``host_bytes``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..plan import Plan
from ..errors import InputError
from .data import cp_positions
from .data_parallel import _local
from .train import RunConfig


def _rank_for_stage(plan: Plan, pp_rank: int) -> int:
    for r in range(plan.world_size):
        c = plan.rank_coords(r)
        if c["pp"] == pp_rank and c["dp"] == c["cp"] == c["tp"] == 0:
            return r
    raise AssertionError(pp_rank)


def dryrun_rank(cfg: RunConfig, rank: int) -> dict:
    """Peak bytes by MemTracker category for one optimizer step of ``rank``, plus
    ``host_master`` (bytes of the fp32 master shards, inside ``Parameter``) and, offloaded,
    ``host_offloaded`` (computed from the shards; see the module doc)."""
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
            cat_peaks = _track_category_peaks(mt)
            mt.track_external(*tr.parts, *tr.optimizers)
            with mt, _accumulated_grads_as_gradient(mt):
                tr.train_step(1)
            peak = mt.get_tracker_snapshot("peak")
            host = tr.host_bytes()
            held_grads = tr.unsharded_grad_peak
    finally:
        dist.destroy_process_group()
    snap = next(iter(peak.values())) if peak else {}
    out = {getattr(k, "value", str(k)): int(v) for k, v in snap.items()}
    out.update({f"peak_{k}": int(v) for k, v in cat_peaks.items()})
    out.update({f"host_{k}": int(v) for k, v in host.items()})  # computed, not tracked
    # the unsharded gradients FSDP2 accumulates without sync (read off its parameters;
    # MemTracker files them as Temp, not Gradient: see agreement)
    out["held_unsharded_grads"] = int(held_grads)
    return out


class _accumulated_grads_as_gradient:
    """File the unsharded fp32 gradients FSDP2 accumulates without gradient sync as
    Gradient: MemTracker files only ``.grad`` as Gradient, and FSDPParam keeps these in
    ``unsharded_accumulated_grad`` (to_accumulated_grad_if_needed, torch 2.13
    distributed/fsdp/_fully_shard/_fsdp_param.py), so they were counted as Temp, in the
    activations' comparison, and missing from the gradients' (0.70 GiB measured against
    2.79 unsharded on Llama-3.2-1B dp4 pp2 zero1: the shards only)."""

    def __init__(self, mt):
        self.mt = mt

    def __enter__(self):
        from torch.distributed._tools.mem_tracker import _MemRefType
        from torch.distributed.fsdp._fully_shard._fsdp_param import FSDPParam
        self.orig = orig = FSDPParam.to_accumulated_grad_if_needed
        mt = self.mt

        def to_accumulated(fsdp_param):
            orig(fsdp_param)
            g = fsdp_param.unsharded_accumulated_grad
            if g is not None:
                mt._update_and_maybe_create_winfos(g, _MemRefType.GRAD)
        FSDPParam.to_accumulated_grad_if_needed = to_accumulated
        return self

    def __exit__(self, *exc):
        from torch.distributed.fsdp._fully_shard._fsdp_param import FSDPParam
        FSDPParam.to_accumulated_grad_if_needed = self.orig


def _track_category_peaks(mt) -> dict:
    """Record each category's own peak over the step (MemTracker keeps only the snapshot
    at the peak of the total, where e.g. zero 3's gradients are not alive yet)."""
    peaks: dict = {}
    orig = mt._update_peak_stats

    def update(state):
        orig(state)
        for dev_snap in mt._curr_mem_snap.values():
            named = {getattr(k, "value", str(k)): v for k, v in dev_snap.items()}
            for name, v in named.items():
                peaks[name] = max(peaks.get(name, 0), v)
            # activations and the temporaries around them, at their own peak (see agreement)
            act = named.get("Activation", 0) + named.get("Temp", 0)
            peaks["Activation+Temp"] = max(peaks.get("Activation+Temp", 0), act)
    mt._update_peak_stats = update
    return peaks


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


class _FusedRMSNorm(torch.autograd.Function):
    """torch.rms_norm keeping what the CUDA fused kernel keeps: input, weight, fp32 rstd
    (see the module doc); backward runs the decomposition again from them."""

    @staticmethod
    def forward(ctx, x, weight, shape, eps):
        import torch.nn.functional as F
        y = F.rms_norm(x, shape, weight, eps)
        dims = tuple(range(-len(shape), 0))
        rstd = torch.rsqrt(x.float().pow(2).mean(dims, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        ctx.shape, ctx.eps = shape, eps
        return y

    @staticmethod
    def backward(ctx, grad):
        import torch.nn.functional as F
        x, weight, _rstd = ctx.saved_tensors
        with torch.enable_grad():
            xd = x.detach().requires_grad_()
            wd = weight.detach().requires_grad_()
            y = F.rms_norm(xd, ctx.shape, wd, ctx.eps)
            gx, gw = torch.autograd.grad(y, (xd, wd), grad)
        return gx, gw, None, None


class _CudaLayoutSdpa(torch.autograd.Function):
    """Causal SDPA keeping q, k, v, the output in CUDA's [b, s, heads, d] layout and the
    fp32 log-sum-exp, as the CUDA flash kernel does (see the module doc); k and v with
    their own heads under GQA, as flash keeps them (model.takes_grouped_kv)."""

    @staticmethod
    def forward(ctx, q, k, v, scale):
        import torch.nn.functional as F
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale,
                                             enable_gqa=q.shape[1] != k.shape[1])
        out = out.transpose(1, 2).contiguous().transpose(1, 2)
        lse = q.new_empty(q.shape[:3], dtype=torch.float32)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad):
        import torch.nn.functional as F
        q, k, v, _out, _lse = ctx.saved_tensors
        with torch.enable_grad():
            qkv = [t.detach().requires_grad_() for t in (q, k, v)]
            out = F.scaled_dot_product_attention(*qkv, is_causal=True, scale=ctx.scale,
                                                 enable_gqa=q.shape[1] != k.shape[1])
            grads = torch.autograd.grad(out, qkv, grad)
        return (*grads, None)


def _cuda_layout_core(q, k, v, positions, scale):
    assert positions is None  # set only where context parallelism did not set a core
    return _CudaLayoutSdpa.apply(q, k, v, scale)


_cuda_layout_core.grouped_kv = True  # the local SDPA's own GQA (model.takes_grouped_kv)


def gpu_attention(model: torch.nn.Module) -> int:
    """Give every attention without a core (no context parallelism) the CUDA output layout
    (the module doc); returns how many were changed."""
    from .model import Attention, MLAttention
    n = 0
    for mod in model.modules():
        if isinstance(mod, (Attention, MLAttention)) and mod.core is None:
            mod.core = _cuda_layout_core
            n += 1
    return n


def gpu_rms_norm(model: torch.nn.Module) -> int:
    """Make every RMSNorm of ``model`` keep for backward what it keeps on CUDA (the module
    doc); returns how many were changed."""
    n = 0
    for mod in model.modules():
        if not isinstance(mod, torch.nn.RMSNorm) or mod.weight is None:
            continue

        def forward(x, mod=mod, fwd=mod.forward):
            w = mod.weight
            if x.dtype != w.dtype:  # CUDA's unfused fallback too
                return fwd(x)
            eps = mod.eps if mod.eps is not None else torch.finfo(x.dtype).eps
            return _FusedRMSNorm.apply(x, w, tuple(mod.normalized_shape), eps)
        mod.forward = forward
        n += 1
    return n


class _StageTrainer:
    """One rank's local chunks, driven into the schedule's peak state (see the module doc)."""

    def __init__(self, cfg: RunConfig, rank: int):
        from .context_parallel import apply_cp
        from .data_parallel import apply_dp, uses_fsdp
        from .expert_parallel import apply_ep
        from .mesh import build_meshes
        from .model import build_model
        from .pipeline import chunk_layers, local_chunks
        from .precision import apply_mixed, param_dtype
        from .recompute import apply_recompute
        from .tensor_parallel import apply_tp, make_loss_fn
        from .train import make_optimizer

        plan, spec = cfg.plan, cfg.spec
        self.cfg, self.plan = cfg, plan
        self.coords = plan.rank_coords(rank)
        self.meshes = build_meshes(plan, "cpu", spec.is_moe)
        self.chunk_ids = local_chunks(plan, self.coords["pp"]) if plan.pp > 1 else [0]
        layers = chunk_layers(spec, plan)
        self.parts = []
        for c in self.chunk_ids:
            m = build_model(spec, cfg.seed, layers[c], c == 0, c == plan.num_chunks - 1,
                            param_dtype(cfg.dtype))
            gpu_rms_norm(m)
            apply_recompute(m, plan)  # per block: partial recomputation does the first N
            experts = []
            if spec.is_moe:
                experts = apply_ep(m, plan, self.meshes.expert)
                balanced_moe(m, plan.ep, self.meshes.expert["ep"].get_group() if plan.ep > 1
                             else None, plan.etp)
            apply_tp(m, plan, self.meshes.tp)
            apply_cp(m, plan, self.meshes.group("cp"))
            gpu_attention(m)
            if plan.cp > 1:
                m.set_positions(cp_positions(cfg.seq_len, plan.cp, self.coords["cp"]))
            apply_dp(m, plan, self.meshes, experts, cfg.dtype, "cpu")
            apply_mixed(m, cfg.dtype, "cpu", uses_fsdp(plan))
            self.parts.append(m)
        self.optimizers = [make_optimizer(list(m.parameters()), cfg) for m in self.parts]
        self.loss_fn = make_loss_fn(plan, self.meshes.tp)
        self.unsharded_grad_peak = 0
        self.in_flight = peak_in_flight(plan, cfg.n_microbatches, self.coords["pp"],
                                        [len(layers[c]) for c in self.chunk_ids])

    def _note_unsharded_grads(self) -> None:
        """Bytes of the unsharded gradients FSDP2 holds now: the fp32
        ``unsharded_accumulated_grad`` it keeps between backwards without gradient sync
        (FSDPParam.to_accumulated_grad_if_needed casts the bf16 gradient to the reduce
        dtype) and any unsharded ``.grad`` not yet folded in; the step's maximum is kept."""
        from torch.distributed.fsdp import FSDPModule, fully_shard
        total = 0
        for m in self.parts:
            if not isinstance(m, FSDPModule):
                continue
            for st in fully_shard.state(m)._state_ctx.all_states:
                for group in st._fsdp_param_groups:
                    for fp in group.fsdp_params:
                        grads = [fp.unsharded_accumulated_grad]
                        if hasattr(fp, "_unsharded_param"):
                            grads.append(fp._unsharded_param.grad)
                        total += sum(_local(g).numel() * _local(g).element_size()
                                     for g in grads if g is not None)
        self.unsharded_grad_peak = max(self.unsharded_grad_peak, total)

    def host_bytes(self) -> dict:
        """Bytes of the sharded fp32 master weights (mixed precision) and, offloaded, of
        everything FSDP's CPUOffloadPolicy keeps on the host."""
        from .precision import MIXED
        shards = sum(_local(p).numel() * _local(p).element_size()
                     for m in self.parts for p in m.parameters())
        out = {"master": shards if self.cfg.dtype == MIXED else 0}
        if self.plan.offload_optimizer:
            # master/param shards + their gradients + two AdamW moments, all fp32 shards
            out["offloaded"] = 4 * shards
        return out

    def _input(self, c: int):
        cfg, plan = self.cfg, self.plan
        mb, s = plan.micro_batch, cfg.seq_len // plan.cp
        if c == 0:
            return torch.randint(0, cfg.spec.vocab, (mb, s))
        if plan.sequence_parallel and plan.tp > 1:
            s //= plan.tp
        from .precision import MIXED
        dt = torch.bfloat16 if cfg.dtype in ("bf16", MIXED) else torch.float32
        return torch.randn(mb, s, cfg.spec.hidden, dtype=dt, requires_grad=True)

    def _forward(self, j: int):
        c, m = self.chunk_ids[j], self.parts[j]
        out = m(self._input(c))
        if c == self.plan.num_chunks - 1:
            y = torch.randint(0, self.cfg.spec.vocab, (self.plan.micro_batch,
                                                       self.cfg.seq_len // self.plan.cp))
            return self.loss_fn(out, y)
        return out.float().sum()

    def train_step(self, step: int) -> None:
        from .data_parallel import grad_sync
        from .tensor_parallel import loss_context
        plan = self.plan
        self.unsharded_grad_peak = 0
        with loss_context(plan):
            if plan.pp > 1:
                _pipeline_sync(self.parts, False)
                outs = [self._forward(j) for j, k in enumerate(self.in_flight) for _ in range(k)]
                for o in outs:
                    o.backward()
                del outs
                self._note_unsharded_grads()
                _pipeline_sync(self.parts, True)
            else:
                n = 2 if plan.zero == 1 and self.cfg.n_microbatches > 1 else 1
                for i in range(n):
                    grad_sync(self.parts, plan, i == n - 1)
                    self._forward(0).backward()
                    self._note_unsharded_grads()
        for opt in self.optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)


def _pipeline_sync(parts, on: bool) -> None:
    """What PipelineStage does to FSDP stages: no sync during backward (``on`` False); then
    the final reduce-scatter (perform_reduce_grad in torch/distributed/pipelining/stage.py)."""
    from torch.distributed.fsdp import FSDPModule, fully_shard
    for m in parts:
        if not isinstance(m, FSDPModule):
            continue
        m.set_is_last_backward(on)
        m.set_reshard_after_backward(on)
        m.set_requires_gradient_sync(on)
        if on:
            state = fully_shard.state(m)
            for st in state._state_ctx.all_states:
                for group in st._fsdp_param_groups:
                    group.post_backward()
            state._root_post_backward_final_callback()


def peak_in_flight(plan: Plan, n_micro: int, pp_rank: int, chunk_layers: list[int]) -> list[int]:
    """Forwards held per local chunk where the rank's held layers*micro-batches peak.

    Replays the rank's action list: F adds a micro-batch to its chunk, B (backward) or W
    (weight-gradient backward of the zero-bubble schedules, which needs the layers' saved
    inputs) removes it; I (backward-input) does not: pipeline/check.in_flight_peaks' rule,
    what the simulator and the cost model hold.
    """
    if plan.pp == 1:
        return [1]
    from ..pipeline.schedules import schedule_for_plan
    sched = schedule_for_plan(plan, n_micro)
    stages = sched.rank_stages(pp_rank)
    held = [0] * len(stages)
    best, best_held = -1, list(held)
    for action in sched.order[pp_rank]:
        for a in action.leaves():
            if a.stage not in stages:
                continue
            j = stages.index(a.stage)
            if a.kind == "F":
                held[j] += 1
                w = sum(h * n for h, n in zip(held, chunk_layers))
                if w > best:
                    best, best_held = w, list(held)
            elif a.kind in ("B", "W"):
                held[j] -= 1
    return best_held


def balanced_moe(model, ep: int, ep_group, etp: int = 1) -> None:
    """Round-robin routing and static all-to-all splits (see the module doc); with etp > 1
    every rank holds the rows of its etp peers (etp times its own) for its ffn slice."""
    import types

    from .expert_parallel import _AllToAll

    def route(self, x):
        n, k, e = x.shape[0], self.topk, self.num_experts
        scores = torch.softmax(self.gate(x).float(), dim=-1)
        idx = (torch.arange(n * k, device=x.device) % e).view(n, k)
        w = scores.gather(-1, idx)
        return idx, w / w.sum(dim=-1, keepdim=True)

    def split(rows: int, parts: int) -> list[int]:
        return [rows // parts + (1 if i < rows % parts else 0) for i in range(parts)]

    def make_dispatch(num_experts):
        def dispatch(rows, ids, experts):
            send = split(rows.shape[0], ep)  # every rank sends and receives the same splits
            x = _AllToAll.apply(rows, send, send, ep_group) if ep > 1 else rows
            if etp > 1:  # the gathered rows of the etp peers, then the sum of partial outputs
                x = x.repeat(etp, 1)
            y = experts(x, split(x.shape[0], num_experts // ep))
            if etp > 1:
                y = y.view(etp, -1, y.shape[-1]).sum(0)
            return _AllToAll.apply(y, send, send, ep_group) if ep > 1 else y
        return dispatch

    for block in model.layers.values():
        if block.is_moe:
            block.moe.route = types.MethodType(route, block.moe)
            block.moe.dispatch = make_dispatch(block.moe.num_experts)


def dryrun(cfg: RunConfig) -> list[dict]:
    """Peak memory by category of one representative rank per pipeline stage."""
    cfg.check(cfg.plan.world_size)
    from .launch import fork_ranks
    # one forked process per stage, all at once: the fake process group and its meshes are
    # per process, and the stages share nothing
    return fork_ranks(lambda p, _w: dryrun_rank(cfg, _rank_for_stage(cfg.plan, p)),
                      cfg.plan.pp, init_process_group=False, timeout_s=600)


def agreement(measured: dict, predicted: dict) -> dict[str, tuple[float, float]]:
    """category -> (measured bytes, cost-model bytes), for one pipeline rank.

    MemTracker's categories are mapped onto the cost model's (cost/memory.py): the fp32
    master shards, which MemTracker counts as Parameter, are optimizer state in the cost
    model (12 bytes = master + two moments), so they move over; weights are then the bf16
    copies (gathered layers); gradients, weights and optimizer each at their own peak over
    the step (the cost model adds the parts as if they peak together), except the optimizer
    states, taken at the step's peak (their own peak adds AdamW's per-tensor temporaries
    inside the step); gradients include the unsharded fp32 gradients FSDP2 accumulates
    without sync (filed as Gradient by ``_accumulated_grads_as_gradient``; a GPU run holds
    them too and the cost model charges them under accumulation), never less than
    ``held_unsharded_grads`` (read off FSDP2's parameters at the end of the backwards);
    activations are Activation + Temp at their own peak (at the step's peak, in the
    backward once those gradients count as Gradient, part of them is freed: 3.98 against
    6.06 GiB on stage 0 of Llama-3.2-1B dp4 pp2 zero1 mb4, seq 1024) against activations +
    working set.
    """
    master = measured.get("host_master", 0)
    return {
        "weights": (measured.get("peak_Parameter", 0) - master, predicted["weights"]),
        "gradients": (max(measured.get("peak_Gradient", 0),
                          measured.get("held_unsharded_grads", 0)), predicted["gradients"]),
        "optimizer_states": (measured.get("Optstate", 0) + master,
                             predicted["optimizer_states"]),
        "activations": (measured.get("peak_Activation+Temp",
                                     measured.get("Activation", 0) + measured.get("Temp", 0)),
                        predicted["activations"] + predicted.get("activation_working_set", 0)),
    }
