"""The training step on a plan, and the single-process reference it is checked against.

``Trainer`` composes the parallel dimensions on one model (or on each pipeline chunk):
expert parallelism, tensor/sequence parallelism, context parallelism, then FSDP2 on top,
then the pipeline schedule. ``reference_run`` trains the same model on the same data in one
process with no parallelism at all: the loss is the mean token cross entropy over the whole
global batch, which is what every layout computes (mean of equal-sized local means).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ..errors import InputError, require_positive_number
from ..plan import Plan
from ..specs.model import ModelSpec
from .context_parallel import apply_cp, check_cp
from .data import cp_positions, global_batch, local_slice
from .data_parallel import apply_dp, grad_sync, reduce_grads, uses_fsdp
from .expert_bias import update_expert_bias
from .expert_parallel import apply_ep
from .mesh import build_meshes
from .model import build_model, cross_entropy
from .pipeline import TiedEmbedding, build_schedule, check_schedule, chunk_layers, local_chunks
from .recompute import apply_recompute
from .precision import PARAM_DTYPES, apply_mixed, autocast, check_dtype, param_dtype
from .tensor_parallel import apply_tp, check_tp, loss_context, make_loss_fn

DTYPES = PARAM_DTYPES  # run dtype -> parameter dtype (precision.py)


# Engine knobs of a plan that meshplan's runtime does not implement, and what it runs
# instead: TP collectives in line (no async TP), the plain expert all-to-all (no DeepEP), no
# expert all-to-all hidden under another micro-batch (DualPipe(V) schedules do it by design),
# gradient reduction and parameter gathers overlapped (DDP buckets and FSDP2 always do).
RUNTIME_KNOBS = {"tp_comm_overlap": (False, "tpo (TP communication overlap)"),
                 "moe_dispatcher": ("alltoall", "the DeepEP dispatcher"),
                 "ep_comm_overlap": (False, "epo (expert all-to-all overlap)"),
                 "overlap_grad_reduce": (True, "no-ogr (gradient reduction in line)"),
                 "overlap_param_gather": (True, "no-opg (parameter gathers in line)")}


def as_run(plan: Plan) -> tuple[Plan, list[str]]:
    """The plan as the runtime runs it (RUNTIME_KNOBS) and the knobs it set otherwise, so
    what `meshplan run` predicts beside its measurement is the configuration measured."""
    changed = {k: v for k, (v, _) in RUNTIME_KNOBS.items() if getattr(plan, k) != v}
    return (plan.with_(**changed) if changed else plan), [RUNTIME_KNOBS[k][1] for k in changed]


@dataclass
class RunConfig:
    """What one run trains: model, plan, batch shape, data, optimizer, steps."""

    spec: ModelSpec
    plan: Plan
    seq_len: int = 32
    global_batch: int = 8
    steps: int = 3
    lr: float = 1e-3
    seed: int = 0
    data: str = "synthetic"
    dtype: str = "fp32"
    weight_decay: float = 0.0
    adam_eps: float = 1e-8
    schedule_source: str = ""  # "torch" | "meshplan"; "" = torch where it has the schedule
    extra: dict = field(default_factory=dict)

    def check(self, world_size: int | None = None) -> None:
        from ..specs.workload import Workload
        from .model import check_buildable
        w = Workload(self.seq_len, self.global_batch)
        self.plan.validate(self.spec, w, world_size)
        # a model the runtime cannot build is refused here, before any worker starts (it
        # was refused by every rank, after torchrun's start: 10 s for one line)
        check_buildable(self.spec)
        check_dtype(self.dtype)
        require_positive_number("lr", self.lr)  # AdamW refuses it on every rank otherwise
        check_schedule(self.plan, self.n_microbatches, self.schedule_source)
        check_cp(self.spec, self.plan)
        if self.plan.tp > 1:
            from .model import Transformer
            with torch.device("meta"):
                check_tp(Transformer(self.spec, layer_ids=[]), self.plan)
        if self.plan.offload_optimizer and (not uses_fsdp(self.plan) or self.spec.is_moe):
            raise InputError("offload_optimizer", True, "the runtime offloads with FSDP2 "
                             "(zero >= 1, dp*cp > 1) and not the routed experts (MoE)")

    @property
    def n_microbatches(self) -> int:
        return self.global_batch // (self.plan.dp * self.plan.micro_batch)


def make_optimizer(params, cfg: RunConfig):
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), eps=cfg.adam_eps,
                             weight_decay=cfg.weight_decay, foreach=False)


class Trainer:
    """One rank's share of a run: model parts, optimizer, and the step."""

    def __init__(self, cfg: RunConfig, device: torch.device):
        self.cfg, self.device = cfg, device
        plan, spec = cfg.plan, cfg.spec
        cfg.check(dist.get_world_size())
        self.rank = dist.get_rank()
        self.coords = plan.rank_coords(self.rank)
        self.meshes = build_meshes(plan, device.type, spec.is_moe)
        self.loss_fn = make_loss_fn(plan, self.meshes.tp)
        dtype = param_dtype(cfg.dtype)
        if plan.pp > 1:
            layers = chunk_layers(spec, plan)
            self.chunk_ids = local_chunks(plan, self.coords["pp"])
            parts = [build_model(spec, cfg.seed, layers[c], c == 0, c == plan.num_chunks - 1, dtype)
                     for c in self.chunk_ids]
        else:
            self.chunk_ids = [0]
            parts = [build_model(spec, cfg.seed, dtype=dtype)]
        self.expert_params, self.tp_partial = [], []
        for m in parts:
            m.to(device)
            apply_recompute(m, plan)  # per block: partial recomputation does the first N
            if spec.is_moe:
                self.expert_params += apply_ep(m, plan, self.meshes.expert)
            partial_names = apply_tp(m, plan, self.meshes.tp)
            apply_cp(m, plan, self.meshes.group("cp"))
            apply_dp(m, plan, self.meshes, self.expert_params, cfg.dtype, device.type)
            apply_mixed(m, cfg.dtype, device.type, uses_fsdp(plan))
            self.tp_partial += [m.get_parameter(n) for n in partial_names]
            m.set_positions(cp_positions(cfg.seq_len, plan.cp, self.coords["cp"]).to(device)
                            if plan.cp > 1 else None)
        self.parts = parts
        self.params = [p for m in parts for p in m.parameters()]
        # FSDP replaced the parameter objects it wraps (experts too, under ZeRO over edp)
        self.expert_params = [p for m in parts for n, p in m.named_parameters()
                              if ".moe.experts." in n]
        # one optimizer per model part: checkpoints then key optimizer state by the
        # parameter names of the whole model, whatever the layout (as torchtitan does)
        self.optimizers = [make_optimizer(list(m.parameters()), cfg) for m in parts]
        # a tied embedding split over pipeline chunks: the two copies' gradients are summed
        self.tied = TiedEmbedding(plan, parts, self.meshes.world)
        self.schedule = None
        if plan.pp > 1:
            self.schedule, self.stages = build_schedule(
                plan, parts, self.chunk_ids, device, self.meshes.group("pp"),
                cfg.n_microbatches, self.loss_fn, cfg.schedule_source)
        self.step_times_s: list[float] = []

    # ---- data ------------------------------------------------------------------------
    def local_batch(self, step: int):
        cfg, plan = self.cfg, self.cfg.plan
        x, y = global_batch(cfg.data, cfg.seed, step, cfg.global_batch, cfg.seq_len, cfg.spec.vocab)
        dp_rank = self.coords["dp"]
        x = local_slice(x, plan.dp, dp_rank, plan.cp, self.coords["cp"]).to(self.device)
        y = local_slice(y, plan.dp, dp_rank, plan.cp, self.coords["cp"]).to(self.device)
        return x, y

    # ---- one optimizer step ----------------------------------------------------------
    def train_step(self, step: int) -> float:
        """Run optimizer step ``step``; return the global mean loss (same on every rank)."""
        t0 = time.perf_counter()
        x, y = self.local_batch(step)
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        plan = self.cfg.plan
        with loss_context(plan):
            if self.schedule is None:
                loss = self._accumulate(x, y)
            else:
                loss = self._pipeline(x, y)
        reduce_grads(self.params, plan, self.meshes, self.expert_params, self.tp_partial)
        self.tied.sum_grads()
        for opt in self.optimizers:
            opt.step()
        update_expert_bias(self.parts, self._load_groups())
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.step_times_s.append(time.perf_counter() - t0)
        return loss

    def _load_groups(self) -> list:
        """The groups over which a stage's expert loads are summed (expert_bias.py)."""
        plan = self.cfg.plan
        return ([self.meshes.group("dp_cp")] if plan.dp * plan.cp > 1 else []) + \
            ([self.meshes.tp.get_group()] if plan.tp > 1 else [])

    def _accumulate(self, x, y) -> float:
        m = self.parts[0]
        n = self.cfg.n_microbatches
        mb = self.cfg.plan.micro_batch
        total = torch.zeros((), device=self.device)
        for i in range(n):
            grad_sync(self.parts, self.cfg.plan, i == n - 1)
            out = m(x[i * mb:(i + 1) * mb])
            loss = self.loss_fn(out, y[i * mb:(i + 1) * mb]) / n
            loss.backward()
            total += loss.detach().float()
        return self._mean_over_dp(total)

    def _pipeline(self, x, y) -> float:
        first = 0 in self.chunk_ids
        last = self.cfg.plan.num_chunks - 1 in self.chunk_ids
        losses: list = []
        args = (x,) if first else ()
        kw = {"target": y, "losses": losses} if last else {}
        # return_outputs=False: the last stage does not keep every micro-batch's output (the
        # logits) to the end of the step for merging, which nothing here reads (torch's
        # default True held n_microbatches x mb x seq x vocab on it)
        self.schedule.step(*args, return_outputs=False, **kw)
        if last:
            total = torch.stack([l.detach().float() for l in losses]).mean()
        else:
            total = torch.zeros((), device=self.device)
        dist.all_reduce(total, group=self.meshes.group("pp"))
        return self._mean_over_dp(total)

    def _mean_over_dp(self, total: torch.Tensor) -> float:
        dpcp = self.cfg.plan.dp * self.cfg.plan.cp
        if dpcp > 1:
            dist.all_reduce(total, group=self.meshes.group("dp_cp"))
            total = total / dpcp
        return float(total)

    # ---- inspection ------------------------------------------------------------------
    def full_state(self) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        """name -> (full parameter, full gradient) for the parameters this rank holds.

        Collective over each parameter's mesh: every rank must call it.
        """
        out = {}
        for m in self.parts:
            for name, p in m.named_parameters():
                val = p.full_tensor() if hasattr(p, "full_tensor") else p
                g = p.grad
                if g is not None and hasattr(g, "full_tensor"):
                    g = g.full_tensor()
                out[name] = (val.detach().float().cpu().clone(),
                             None if g is None else g.detach().float().cpu().clone())
            out |= expert_biases(m)
        return out


def reference_run(cfg: RunConfig, steps: int | None = None):
    """Single process, no parallelism: (losses, {name: (param, grad)}) after the steps."""
    model = build_model(cfg.spec, cfg.seed, dtype=param_dtype(cfg.dtype))
    opt = make_optimizer(list(model.parameters()), cfg)
    losses = []
    for step in range(cfg.steps if steps is None else steps):
        x, y = global_batch(cfg.data, cfg.seed, step, cfg.global_batch, cfg.seq_len, cfg.spec.vocab)
        opt.zero_grad(set_to_none=True)
        with autocast(cfg.dtype, "cpu"):
            out = model(x)
        loss = cross_entropy(out, y)
        loss.backward()
        opt.step()
        update_expert_bias([model])
        losses.append(float(loss.detach()))
    state = {n: (p.detach().float().clone(), None if p.grad is None else p.grad.detach().float().clone())
             for n, p in model.named_parameters()} | expert_biases(model)
    return losses, state


def expert_biases(model) -> dict:
    """name -> (score-correction bias, None) of each MoE layer that has one: a buffer, but
    compared as the parameters are (expert_bias.py moves it every step)."""
    return {n: (b.detach().float().cpu().clone(), None) for n, b in model.named_buffers()
            if n.endswith("expert_bias")}


def rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b|| (Frobenius norms): the error relative to the reference tensor.

    Element-wise ratios are not used: after Adam steps an element whose gradient is near
    Adam's epsilon moves by an amount that depends on the last bits of that gradient, so a
    different (equally exact) summation order can move single elements by ~1e-5 of the
    tensor's scale while the tensor as a whole agrees to ~1e-7.
    """
    scale = b.norm().item()
    return (a - b).norm().item() / (scale if scale > 0 else 1.0)
