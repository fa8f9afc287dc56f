"""Generators of pipeline schedules: for every rank, its ordered list of compute actions.

Every generator follows the algorithm of the matching class in
``torch/distributed/pipelining/schedules.py`` (torch 2.13), so the lists simulated here are
the lists the PyTorch runtime executes (the tests compare them action by action with the
``pipeline_order`` of torch's own classes):

============== =================================== ===================================
name           torch class                          paper
============== =================================== ===================================
gpipe          ScheduleGPipe                        Huang et al. 2019 (GPipe)
1f1b           Schedule1F1B                         Narayanan et al. 2019 (PipeDream-Flush)
interleaved_1f1b ScheduleInterleaved1F1B            Narayanan et al. 2021 (Megatron-LM), sec. 2.2
looped_bfs     ScheduleLoopedBFS                    Lamy-Poirier 2023, arXiv:2211.05953
zb_h1          ScheduleInterleavedZeroBubble, v=1   Qi et al. 2023, arXiv:2401.10241 (ZB-H1)
interleaved_zb ScheduleInterleavedZeroBubble        same paper (ZB1P, interleaved)
zb_v           ScheduleZBVZeroBubble                same paper, section 6 (ZB-V)
dualpipev      ScheduleDualPipeV                    DeepSeek-V3 report 2024; deepseek-ai/DualPipe
============== =================================== ===================================

The idle slots (``None``) torch puts in its lists to draw them on a grid are dropped: the
runtime skips them and the simulator derives the waiting from the dependencies.

Stages are virtual stages (model chunks), ``pp * vpp`` of them. Placement follows
``Plan.chunk_of``: stage ``s`` lives on rank ``s % pp`` ("loop" placement), except for the V
schedules (zb_v, dualpipev) where rank ``r`` holds stages ``r`` and ``2*pp - 1 - r``.
"""

from __future__ import annotations

import gc
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import InputError, require_positive_int
from ..plan import MULTI_CHUNK_SCHEDULES, SCHEDULES, V_SCHEDULES
from .actions import B, F, I, OVERLAP_F_B, W, Action



class ScheduleError(ValueError):
    """A schedule that cannot run: a deadlock, a missing, repeated or misplaced action."""


ZERO_BUBBLE = ("zb_h1", "interleaved_zb", "zb_v", "dualpipev")  # split I / W somewhere


@dataclass(frozen=True)
class Schedule:
    """The compute-only action lists of one schedule, and where each stage lives."""

    name: str
    pp: int
    vpp: int
    num_microbatches: int
    order: dict[int, list[Action]] = field(repr=False)

    @property
    def num_stages(self) -> int:
        return self.pp * self.vpp

    @property
    def v_shape(self) -> bool:
        return self.name in V_SCHEDULES

    def stage_to_rank(self, stage: int) -> int:
        return stage_to_rank(stage, self.pp, self.v_shape)

    def rank_stages(self, rank: int) -> list[int]:
        """The stages rank ``rank`` holds, local chunk order (as ``Plan.chunk_of``)."""
        if self.v_shape:
            return [rank, 2 * self.pp - 1 - rank]
        return [c * self.pp + rank for c in range(self.vpp)]

    def num_actions(self) -> int:
        return sum(len(a) for a in self.order.values())


def stage_to_rank(stage: int, pp: int, v_shape: bool) -> int:
    """torch's ``generate_stage_to_rank_mapping`` (style "loop" or "v") for one stage."""
    if not v_shape:
        return stage % pp
    rnd, pos = divmod(stage, pp)
    return pos if rnd % 2 == 0 else pp - 1 - pos


@contextmanager
def no_gc():
    """Pause the cyclic garbage collector: building or walking hundreds of thousands of
    small tuples otherwise triggers collections that rescan every live object (they make
    up most of the time at 128 stages x 1,024 micro-batches). Nothing here makes cycles.

    On the way out, what was made meanwhile (the search's caches: 270,000 objects for
    DeepSeek-V3) goes straight to the oldest generation, which only a full collection
    examines: left young, the first allocation after the pause scanned it all as one
    young generation and, ten young collections later, again as the middle one (0.4 s of
    DeepSeek-V3's 5 s search). ``gc.freeze()`` then ``gc.unfreeze()`` does that move
    (CPython's gcmodule: freeze moves every generation to the permanent one and zeroes the
    young count, unfreeze moves the permanent one to the oldest); not when something else
    froze objects, which must stay frozen."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


# ---- requirements -----------------------------------------------------------------------

def torch_min_microbatches(name: str, pp: int, vpp: int) -> int:
    """Fewest micro-batches torch 2.13's class for ``name`` takes on ``pp`` ranks
    (torch/distributed/pipelining/schedules.py): Schedule1F1B.__init__ raises "Number of
    microbatches (m) must be greater than or equal to the number of stages";
    ScheduleDualPipeV.__init__ "requires at least as many microbatches as stages" (2*pp);
    the interleaved, looped and zero-bubble classes check only rounds_fit. The runners
    built on torch (meshplan's runtime, torchtitan) read it through engines.py."""
    if name == "gpipe" or pp == 1:
        return 1
    if name == "1f1b":
        return pp
    if name == "dualpipev":
        return pp * vpp
    return 1


def list_min_microbatches(name: str, pp: int, vpp: int) -> int:
    """Fewest micro-batches the generator of ``name`` writes complete lists for: DualPipeV's
    steps 1-3 forward 2*pp micro-batches on rank 0 before its first backward (fewer leave
    actions on micro-batches that do not exist); every other generator, one (1F1B with
    m < pp warms up min(pp - 1 - rank, m) forwards, as Megatron-Core's and torch's)."""
    return pp * vpp if name == "dualpipev" and pp > 1 else 1


def rounds_fit(name: str, pp: int, m: int) -> bool:
    """torch's flexible interleaving (interleaved 1F1B, interleaved ZB, ZB-H1) runs m
    micro-batches in rounds of max(1, m // pp): m must be a multiple of that."""
    if name not in ("interleaved_1f1b", "interleaved_zb", "zb_h1"):
        return True
    return m % max(1, m // pp) == 0


def check_inputs(name: str, pp: int, vpp: int, m: int,
                 torch_rules: bool = True) -> tuple[str, int, int, int]:
    """Validate (schedule, pp, vpp, num_microbatches); InputError names what is wrong.

    ``torch_rules``: also torch's own micro-batch floors (torch_min_microbatches), what the
    runtime checks; the generators themselves (build_schedule) need only
    list_min_microbatches: whether a runner takes the plan's count is validity.py's rule,
    per runner (engines.pipeline_min_microbatches)."""
    name = str(name).strip().lower()
    if name not in SCHEDULES:
        raise InputError("schedule", name, "allowed: " + ", ".join(SCHEDULES))
    pp = require_positive_int("pp", pp)
    vpp = require_positive_int("vpp", vpp)
    m = require_positive_int("num_microbatches", m)
    if name in V_SCHEDULES and vpp != 2:
        raise InputError("vpp", vpp, f"schedule {name} places exactly 2 chunks per rank")
    if name in MULTI_CHUNK_SCHEDULES and name not in V_SCHEDULES and vpp < 2:
        raise InputError("vpp", vpp, f"schedule {name} needs vpp >= 2")
    if name not in MULTI_CHUNK_SCHEDULES and vpp != 1:
        raise InputError("vpp", vpp, f"schedule {name} holds one chunk per rank (vpp=1)")
    if pp == 1 and (vpp > 1 or name in V_SCHEDULES):
        raise InputError("vpp" if vpp > 1 else "schedule", vpp if vpp > 1 else name,
                         "virtual stages and V schedules need pipeline parallelism (pp > 1)")
    need = (torch_min_microbatches if torch_rules else list_min_microbatches)(name, pp, vpp)
    if m < need:
        raise InputError("num_microbatches", m,
                         f"schedule {name} on pp={pp} (vpp={vpp}) needs at least {need} "
                         "micro-batches")
    if not rounds_fit(name, pp, m):
        rounds = max(1, m // pp)
        raise InputError("num_microbatches", m,
                         f"schedule {name} on pp={pp} needs a multiple of "
                         f"max(1, m // pp) = {rounds} micro-batches (torch's flexible "
                         f"interleaving); try {m - m % rounds} or {m - m % rounds + rounds}")
    return name, pp, vpp, m


# ---- generators ---------------------------------------------------------------------------

def _gpipe(pp: int, m: int, rank: int) -> list[Action]:
    return [Action(rank, F, i) for i in range(m)] + [Action(rank, B, i) for i in range(m)]


def _one_f_one_b(pp: int, m: int, rank: int) -> list[Action]:
    """Schedule1F1B._get_pipeline_order: pp-1-rank warm-up forwards, then F,B pairs."""
    warm = min(pp - 1 - rank, m)
    ops = [Action(rank, F, i) for i in range(warm)]
    fwd, bwd = warm, 0
    while fwd < m:
        ops.append(Action(rank, F, fwd))
        ops.append(Action(rank, B, bwd))
        fwd += 1
        bwd += 1
    ops.extend(Action(rank, B, i) for i in range(bwd, m))
    return ops


def _looped_bfs(pp: int, vpp: int, m: int, rank: int) -> list[Action]:
    """ScheduleLoopedBFS: all micro-batches through each local stage, then back in reverse."""
    stages = range(rank, pp * vpp, pp)
    ops = [Action(s, F, i) for s in stages for i in range(m)]
    ops += [Action(s, B, i) for s in reversed(stages) for i in reversed(range(m))]
    return ops


def _warmup_ops(rank: int, vpp: int, per_round: int, pp: int, m: int, factor: int) -> int:
    """torch ``_get_warmup_ops``: (vpp-1)*per_round + factor*(pp-1-rank), capped at m*vpp."""
    return min((vpp - 1) * per_round + factor * (pp - 1 - rank), m * vpp)


def _interleaved(pp: int, vpp: int, m: int, rank: int, zero_bubble: bool) -> list[Action]:
    """ScheduleInterleaved1F1B / ScheduleInterleavedZeroBubble via torch's _get_1f1b_rank_ops.

    Depth first: micro-batches go through the local chunks in rounds of ``per_round``
    (= m // rounds, rounds = max(1, m // pp)). The zero-bubble variant splits each backward
    into I then W and delays the W of rank r by r steps (ZB1P).

    torch's loop, step by step: ``warm`` forwards; then per step a forward and a backward,
    and, ``rank`` backwards behind, the W of the backward that many steps earlier; then the
    cool-down's backwards (and Ws); then the Ws left. Its j-th forward runs chunk
    (j // per_round) % vpp, its j-th backward chunk vpp - 1 - (j // per_round) % vpp, each
    on micro-batch (j // (vpp * per_round)) * per_round + j % per_round (rounds_fit: m is
    rounds * per_round), as torch's per-stage counters give; its j-th W is the j-th
    backward's. Built from those three lists.
    """
    rounds = max(1, m // pp)
    per_round = m // rounds
    warm = _warmup_ops(rank, vpp, per_round, pp, m, 1 if zero_bubble else 2)
    total = vpp * m  # forward ops; as many backward ops
    span = vpp * per_round
    new = tuple.__new__  # Action(stage, kind, mb) without the Python-level __new__
    fwd = [new(Action, (((j // per_round) % vpp) * pp + rank, F, (j // span) * per_round
                        + j % per_round, None)) for j in range(total)]
    bwd = [new(Action, ((vpp - 1 - (j // per_round) % vpp) * pp + rank, I if zero_bubble else B,
                        (j // span) * per_round + j % per_round, None)) for j in range(total)]
    ops = fwd[:warm]
    if not zero_bubble:
        for f, b in zip(fwd[warm:], bwd):
            ops.append(f)
            ops.append(b)
        ops.extend(bwd[total - warm:])
        return ops
    wgt = [new(Action, (a.stage, W, a.mb, None)) for a in bwd]
    delay = rank  # num_1f1b_microbatches in torch
    for j in range(total):
        if j < total - warm:
            ops.append(fwd[warm + j])
        ops.append(bwd[j])
        if j >= delay:
            ops.append(wgt[j - delay])
    ops.extend(wgt[max(0, total - delay):])
    return ops


def _zb_v(pp: int, m: int, rank: int) -> list[Action]:
    """ScheduleZBVZeroBubble (Qi et al., section 6): V placement, F / I / W balanced."""
    n = max(2 * pp - 1, m)  # torch builds the full pattern, then drops micro-batches >= m
    s0, s1 = rank, 2 * pp - 1 - rank
    f0 = f1 = b0 = b1 = 0
    ops: list[Action] = []
    for _ in range(2 * (pp - rank) - 1):
        ops.append(Action(s0, F, f0)); f0 += 1
    for _ in range(rank):
        ops.append(Action(s1, F, f1)); f1 += 1
        ops.append(Action(s0, F, f0)); f0 += 1
    for _ in range(pp - rank):
        ops.append(Action(s1, F, f1)); f1 += 1
        ops.append(Action(s1, I, b1))
        ops.append(Action(s1, W, b1)); b1 += 1
    while f1 < f0 or f0 < n:
        if f0 < n:
            ops.append(Action(s0, F, f0)); f0 += 1
        ops.append(Action(s0, I, b0))
        ops.append(Action(s0, W, b0)); b0 += 1
        ops.append(Action(s1, F, f1)); f1 += 1
        ops.append(Action(s1, I, b1))
        ops.append(Action(s1, W, b1)); b1 += 1
    w0, w1 = b0, b1
    for _ in range(rank):
        ops.append(Action(s0, I, b0)); b0 += 1
        ops.append(Action(s1, I, b1)); b1 += 1
    for _ in range(pp - rank):
        ops.append(Action(s0, I, b0)); b0 += 1
        ops.append(Action(s0, W, w0)); w0 += 1
    while w1 < b1:
        ops.append(Action(s1, W, w1)); w1 += 1
    while w0 < b0:
        ops.append(Action(s0, W, w0)); w0 += 1
    assert w0 == b0 == f0 and w1 == b1 == f1
    return [a for a in ops if a.mb < m]


def _dualpipev(pp: int, m: int, rank: int) -> list[Action]:
    """ScheduleDualPipeV (after deepseek-ai/DualPipe's dualpipev.py), steps 1-8.

    Most steady-state steps are OVERLAP_F_B pairs: the forward of one chunk and the full
    backward of the other run together so that one hides the other's communication.
    """
    s0, s1 = rank, 2 * pp - 1 - rank
    # per stage, the next micro-batch to run forward and backward (B or I: one count)
    n_fwd = {s0: 0, s1: 0}
    n_bwd = {s0: 0, s1: 0}
    wq: deque[tuple[int, int]] = deque()
    ops: list[Action] = []
    new = tuple.__new__  # Action(...) without the Python-level __new__

    def act(stage: int, kind: str) -> Action:
        if kind == F:
            mb = n_fwd[stage]
            n_fwd[stage] = mb + 1
        else:
            mb = n_bwd[stage]
            n_bwd[stage] = mb + 1
            if kind == I:
                wq.append((stage, mb))
        return new(Action, (stage, kind, mb, None))

    def add(stage: int, kind: str) -> None:
        ops.append(act(stage, kind))

    def pair(fstage: int, bstage: int) -> None:  # overlap(F, B)
        ops.append(new(Action, (-1, OVERLAP_F_B, None, (act(fstage, F), act(bstage, B)))))

    def pending_w() -> None:
        if wq:
            stage, mb = wq.popleft()
            ops.append(new(Action, (stage, W, mb, None)))

    for _ in range((pp - rank - 1) * 2):           # 1: F0
        add(s0, F)
    for _ in range(rank + 1):                       # 2: F0 F1
        add(s0, F)
        add(s1, F)
    for _ in range(pp - rank - 1):                  # 3: I1 W1 F1
        add(s1, I)
        pending_w()
        add(s1, F)
    for i in range(m - 2 * pp + rank + 1):          # 4: (F0 B1) (F1 B0)
        if i == 0 and rank == pp - 1:
            add(s0, F)
            add(s1, B)
        else:
            pair(s0, s1)
        pair(s1, s0)
    for _ in range(pp - rank - 1):                  # 5: B1 (F1 B0)
        add(s1, B)
        pair(s1, s0)
    zb = False
    step6 = rank + 1
    for i in range(step6):                          # 6: B1 B0, zero bubble from the middle
        if i == step6 // 2 and rank % 2 == 1:
            zb = True
        add(s1, I if zb else B)
        if i == step6 // 2 and rank % 2 == 0:
            zb = True
        add(s0, I if zb else B)
    for _ in range(pp - rank - 1):                  # 7: W0 B0
        pending_w()
        add(s0, I if zb else B)
    for _ in range(rank + 1):                       # 8: W0
        pending_w()
    return ops


def _rank_ops(name: str, pp: int, vpp: int, m: int, rank: int) -> list[Action]:
    if name == "gpipe":
        return _gpipe(pp, m, rank)
    if name == "1f1b":
        return _one_f_one_b(pp, m, rank)
    if name == "looped_bfs":
        return _looped_bfs(pp, vpp, m, rank)
    if name in ("interleaved_1f1b", "interleaved_zb", "zb_h1"):
        return _interleaved(pp, vpp, m, rank, zero_bubble=name != "interleaved_1f1b")
    if name == "zb_v":
        return _zb_v(pp, m, rank)
    if name == "dualpipev":
        return _dualpipev(pp, m, rank)
    raise AssertionError(name)


@lru_cache(maxsize=64)
def build_schedule(name: str, pp: int, vpp: int, num_microbatches: int) -> Schedule:
    """The compute-only per-rank lists of schedule ``name``; InputError for impossible input
    (lists the generator cannot write; whether a runner takes ``num_microbatches`` is
    validity.py's rule, and the runtime adds torch's floors: runtime/pipeline.check_schedule).

    Cached: the search simulates many plans that share a schedule shape. The returned
    Schedule must not be mutated.
    """
    name, pp, vpp, m = check_inputs(name, pp, vpp, num_microbatches, torch_rules=False)
    with no_gc():
        order = {r: _rank_ops(name, pp, vpp, m, r) for r in range(pp)}
    return Schedule(name, pp, vpp, m, order)


def schedule_for_plan(plan, num_microbatches: int) -> Schedule:
    """The schedule a ``meshplan.plan.Plan`` runs with ``num_microbatches`` micro-batches."""
    sched = build_schedule(plan.schedule, plan.pp, plan.vpp, num_microbatches)
    for r in range(plan.pp):  # the generators place stages exactly as Plan.chunk_of says
        assert sched.rank_stages(r) == [plan.chunk_of(r, c) for c in range(plan.vpp)]
    return sched
