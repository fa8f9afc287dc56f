"""Pipeline parallelism with ``torch.distributed.pipelining``: one PipelineStage per model
chunk, the schedule from PyTorch's schedule library or from meshplan's own action lists.

Chunks (virtual stages) get ``plan.layer_split`` layers each and sit on pipeline ranks as
``plan.chunk_of`` says (interleaved: chunk c*pp + r on rank r; V schedules: r and 2pp-1-r),
the same placement the planner's cost model assumes. Gradients are averaged over the
micro-batches by the schedule (``scale_grads=True``), matching a loss that is the mean.

Two sources of schedules (``RunConfig.schedule_source``):

- ``torch``: the class of ``torch.distributed.pipelining.schedules`` named in
  ``SCHEDULE_CLASSES`` (the default for the 7 schedules torch has).
- ``meshplan``: the per-rank compute lists of ``meshplan.pipeline.schedules.build_schedule``
  (the lists the simulator simulates), handed to torch's ``_PipelineScheduleRuntime`` the
  way its ``_load_csv(format="compute_only")`` does: ``_prepare_schedule_with_comms`` checks
  them, infers which rank holds which stage, and lowers them (``_add_unshard_reshard`` for
  FSDP, ``_add_reduce_grad``, ``_add_send_recv``; meshplan.pipeline.lowering reproduces the
  last pass action by action). This is how ZB-H1 runs (Qi et al. 2023, "Zero Bubble
  Pipeline Parallelism", arXiv:2401.10241, section 3: one chunk per rank, backward split
  into input gradient I and weight gradient W, W delayed to fill the 1F1B bubble); torch
  2.13 has no single-chunk class for it. The default for ``zb_h1``.
"""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

from ..errors import InputError
from .data_parallel import _local
from .expert_bias import not_counted
from .model import tied_copy
from ..pipeline.schedules import check_inputs, schedule_for_plan
from ..plan import Plan

SCHEDULE_CLASSES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved_1f1b": "ScheduleInterleaved1F1B",
    "looped_bfs": "ScheduleLoopedBFS",
    "interleaved_zb": "ScheduleInterleavedZeroBubble",
    "zb_v": "ScheduleZBVZeroBubble",
    "dualpipev": "ScheduleDualPipeV",
}
SINGLE_STAGE = ("gpipe", "1f1b")
SCHEDULE_SOURCES = ("torch", "meshplan")


def chunk_layers(spec, plan: Plan) -> list[list[int]]:
    """Global layer ids of each chunk (virtual stage), chunk id = index."""
    out, start = [], 0
    for n in plan.layer_split(spec):
        out.append(list(range(start, start + n)))
        start += n
    return out


def local_chunks(plan: Plan, pp_rank: int) -> list[int]:
    return [plan.chunk_of(pp_rank, j) for j in range(plan.vpp)]


def schedule_source(plan: Plan, source: str = "") -> str:
    """The source a run uses: ``source`` if given, else torch where torch has the class."""
    if source:
        return source
    return "torch" if plan.schedule in SCHEDULE_CLASSES else "meshplan"


def check_schedule(plan: Plan, n_microbatches: int | None = None, source: str = "") -> None:
    """Refuse, as one InputError line, what the pipeline runtime would fail on.

    The micro-batch rules are torch 2.13's (kept in ``meshplan.pipeline.schedules
    .check_inputs``): Schedule1F1B needs n_microbatches >= pp, ScheduleDualPipeV >= 2*pp,
    the interleaved and zero-bubble (also ZB-H1) schedules a multiple of
    max(1, n_microbatches // pp) ("flexible interleaving").
    """
    if source not in ("",) + SCHEDULE_SOURCES:
        raise InputError("schedule_source", source, "allowed: " + ", ".join(SCHEDULE_SOURCES))
    if plan.pp == 1:
        return
    if schedule_source(plan, source) == "torch" and plan.schedule not in SCHEDULE_CLASSES:
        raise InputError("schedule_source", "torch",
                         f"torch.distributed.pipelining has no class for {plan.schedule}; "
                         "use schedule_source=meshplan (the default for it)")
    if n_microbatches is None:
        return
    try:
        check_inputs(plan.schedule, plan.pp, plan.vpp, n_microbatches)
    except InputError as e:
        if e.field != "num_microbatches":
            raise
        raise InputError("n_microbatches", n_microbatches,
                         e.allowed + f" (n_microbatches = global_batch / (dp*micro_batch) = "
                         f"global_batch / {plan.dp * plan.micro_batch})") from None


def meshplan_actions(plan: Plan, n_microbatches: int) -> dict[int, list]:
    """meshplan's compute-only lists for ``plan`` as torch ``_Action`` lists, rank -> list.

    Converted through the CSV cell text (``Action.__str__`` -> ``_Action.from_str``), the
    form ``_PipelineScheduleRuntime._load_csv`` reads and ``meshplan.pipeline.write_csv``
    writes.
    """
    sched = schedule_for_plan(plan, n_microbatches)
    return {r: [S._Action.from_str(str(a)) for a in acts] for r, acts in sched.order.items()}


def _runtime_schedule(plan: Plan, stages: list, n_microbatches: int, loss_fn):
    sched = S._PipelineScheduleRuntime(stages, n_microbatches=n_microbatches, loss_fn=loss_fn)
    sched.pipeline_order = meshplan_actions(plan, n_microbatches)
    sched._prepare_schedule_with_comms(sched.pipeline_order)
    return sched


def not_a_view(loss_fn):
    """``loss_fn`` whose result is never a view (a view is cloned; same value and gradient).

    torch 2.13's ``stage_backward_input`` (the I of a zero-bubble schedule) ends with
    ``t.detach_()`` on the stage output, the loss on the last stage, and in-place detach
    refuses views; the loss-parallel loss of tensor parallelism is one
    (``DTensor.to_local`` returns ``view_as`` of the local tensor).
    """
    def loss(*args, **kwargs):
        out = loss_fn(*args, **kwargs)
        return out.clone() if out._is_view() else out
    return loss


class _Stage(PipelineStage):
    """A PipelineStage whose metadata inference (one forward on placeholder tensors at the
    first step) does not count as routed tokens (expert_bias.py)."""

    def _forward_metadata_inference(self, *args, **kwargs):
        with not_counted():
            return super()._forward_metadata_inference(*args, **kwargs)


def build_schedule(plan: Plan, modules: list, chunk_ids: list[int], device, pp_group,
                   n_microbatches: int, loss_fn, source: str = ""):
    check_schedule(plan, n_microbatches, source)
    loss_fn = not_a_view(loss_fn)
    stages = [_Stage(m, c, plan.num_chunks, device, group=pp_group)
              for m, c in zip(modules, chunk_ids)]
    if schedule_source(plan, source) == "meshplan":
        return _runtime_schedule(plan, stages, n_microbatches, loss_fn), stages
    cls = getattr(S, SCHEDULE_CLASSES[plan.schedule])
    if plan.schedule in SINGLE_STAGE:
        return cls(stages[0], n_microbatches=n_microbatches, loss_fn=loss_fn), stages
    return cls(stages, n_microbatches=n_microbatches, loss_fn=loss_fn), stages


def embedding_groups(plan: Plan, world_mesh) -> list[list[int]]:
    """Global ranks of each embedding group: per pipeline group (one per dp, cp, tp
    coordinate, read off the world mesh), the rank holding the embedding and the rank
    holding the output layer (Megatron-Core's parallel_state builds its embedding groups
    the same way, from the first and last rank of each pipeline group)."""
    names = list(world_mesh.mesh_dim_names)
    grid = world_mesh.mesh.movedim(names.index("pp"), -1).reshape(-1, plan.pp)
    return [[int(row[0]), int(row[plan.output_rank()])] for row in grid]


class TiedEmbedding:
    """The two copies of a tied embedding when a pipeline puts the embedding (chunk 0) and
    the output layer (the last chunk) in different chunks, kept equal as Megatron-LM keeps
    them: the last chunk holds its own copy, drawn equal to the embedding (model.py
    init_weights), and after the backward, before the optimizer step, the two copies'
    gradients are summed over the embedding group (Megatron-Core finalize_model_grads.py
    _allreduce_word_embedding_grads: an all-reduce of the shared weight's gradient over
    parallel_state's embedding group), so both take the same step from the same value and
    each gradient is the tied weight's, d/dE of embedding and output use together.

    Under V schedules both chunks sit on pipeline rank 0: the two copies are then summed in
    place, no group. FSDP2 shards both copies' vocab dim over the same dp mesh and DTensor
    TP both over the same tp mesh (Shard(0)), so the local shards hold the same rows and
    are summed as they are. Built on every rank (``new_group`` is collective)."""

    def __init__(self, plan: Plan, parts: list, world_mesh):
        self.parts = parts
        self.group = None
        if plan.pp == 1 or not parts[0].spec.tied_embeddings:
            return
        if plan.output_rank() == 0:  # both ends on one rank: summed in place
            return
        me = dist.get_rank()
        for ranks in embedding_groups(plan, world_mesh):
            g = dist.new_group(ranks)
            if me in ranks:
                self.group = g

    def copies(self) -> list:
        """This rank's copies (0, 1 or, under V schedules, 2), resolved now: FSDP replaces
        parameter objects."""
        return [m.get_parameter(n) for m in self.parts if (n := tied_copy(m))]

    def sum_grads(self) -> None:
        grads = []
        for p in self.copies():
            if p.grad is None:
                continue
            if hasattr(p.grad, "placements") and p.grad.placements != p.placements:
                # the vocab-parallel embedding's gradient comes back Replicate (torch 2.13
                # DTensor embedding backward) while the output layer's is Shard(0) like the
                # weights: as the weight's placements (a local slice, no communication)
                p.grad = p.grad.redistribute(p.device_mesh, p.placements)
            grads.append(_local(p.grad))
        if len(grads) == 2:
            total = grads[0] + grads[1]
            for g in grads:
                g.copy_(total)
        elif grads and self.group is not None:
            dist.all_reduce(grads[0], group=self.group)
