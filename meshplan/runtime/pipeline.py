"""Pipeline parallelism with ``torch.distributed.pipelining``: one PipelineStage per model
chunk, the plan's schedule from PyTorch's schedule library.

Chunks (virtual stages) get ``plan.layer_split`` layers each and sit on pipeline ranks as
``plan.chunk_of`` says (interleaved: chunk c*pp + r on rank r; V schedules: r and 2pp-1-r),
the same placement the planner's cost model assumes. Gradients are averaged over the
micro-batches by the schedule (``scale_grads=True``), matching a loss that is the mean.
"""

from __future__ import annotations

from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

from ..errors import InputError
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


def chunk_layers(spec, plan: Plan) -> list[list[int]]:
    """Global layer ids of each chunk (virtual stage), chunk id = index."""
    out, start = [], 0
    for n in plan.layer_split(spec):
        out.append(list(range(start, start + n)))
        start += n
    return out


def local_chunks(plan: Plan, pp_rank: int) -> list[int]:
    return [plan.chunk_of(pp_rank, j) for j in range(plan.vpp)]


def check_schedule(plan: Plan) -> None:
    if plan.pp > 1 and plan.schedule not in SCHEDULE_CLASSES:
        raise InputError("schedule", plan.schedule,
                         "the runtime runs: " + ", ".join(SCHEDULE_CLASSES)
                         + " (torch.distributed.pipelining has no single-chunk ZB-H1)")


def build_schedule(plan: Plan, modules: list, chunk_ids: list[int], device, pp_group,
                   n_microbatches: int, loss_fn):
    check_schedule(plan)
    stages = [PipelineStage(m, c, plan.num_chunks, device, group=pp_group)
              for m, c in zip(modules, chunk_ids)]
    cls = getattr(S, SCHEDULE_CLASSES[plan.schedule])
    if plan.schedule in SINGLE_STAGE:
        return cls(stages[0], n_microbatches=n_microbatches, loss_fn=loss_fn), stages
    return cls(stages, n_microbatches=n_microbatches, loss_fn=loss_fn), stages
