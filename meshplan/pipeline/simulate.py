"""Discrete-event simulation of one training step over all pipeline ranks.

Model (one pipeline; every data-parallel replica runs the same):

- Each rank has a compute stream that runs its schedule's list in order. An action starts
  when the stream is free and its input is there: ``F`` on stage s needs stage s-1's
  activation, ``B``/``I`` needs stage s+1's input gradient (the last stage needs only its
  own forward), ``W`` its own ``I``. ``OVERLAP_F_B`` needs both inputs and runs its two
  actions together (DualPipe): compute is serial on the SMs, the expert all-to-all of each
  hides under the other's compute, so it lasts max(compute_f + compute_b, a2a_f + a2a_b).
- Point-to-point: an output for another rank goes on the (sender, receiver) link when the
  producing action ends; a link carries one transfer at a time, in the order issued (NCCL
  p2p on one channel), each taking ``p2p_s`` of the chunk whose output it is (gradients
  travel back with the size of the activation they belong to). Receives are assumed posted
  ahead (torch lowers RECVs as early as possible). With ``overlap_p2p=False`` the sender's
  compute stream also waits for its send to finish (blocking send/recv, as Megatron without
  ``overlap_p2p_comm``).
- Data parallel, on a separate stream per rank. A chunk's parameter all-gather
  (``param_gather_s``) is issued at the start, in order of first use. Overlapped
  (``overlap_param_gather``, gathered bucket by bucket as the forward reaches each layer, as
  Megatron's distributed optimizer does) the chunk's first forward cannot end before its
  gather has; not overlapped, the rank computes only after all its gathers. A chunk's
  gradient reduction (``grad_reduce_s``) starts, overlapped (``overlap_grad_reduce``),
  when the chunk's last weight-gradient action starts (buckets are reduced as that backward
  produces them) and cannot end before that action does; not overlapped, it starts when the
  rank's last compute ends.
  The rank's step ends when both streams are done, plus ``optimizer_s`` of its chunks.
- Memory: a forward stashes ``act_bytes`` of its chunk at its start; ``B`` frees it at its
  end; a split backward frees ``act_bytes - w_hold_bytes`` after ``I`` and the rest after
  ``W`` (``w_hold_bytes`` defaults to all of it, an upper bound: ``W`` needs the inputs of
  every linear layer).

Exactness: with equal chunks and zero transfer time, GPipe and 1F1B give
(m + p - 1) * (f + b) exactly (Narayanan et al. 2021, sec. 2.2.1); ``tests/test_simulate.py``
pins that and the other closed forms.

Speed: each action is simulated once; a rank blocked on a remote input is parked on that
input and woken when it is produced, so a step costs O(actions) (128 stages x 1,024
micro-batches of 1F1B, 262,144 actions, in well under a second; ``bench/bench_simulate.py``).
Which action the walk takes next depends only on the lists (whether an input has been
produced yet), never on the times, so the walk is done once per schedule (``_compile``:
each action with the slots it reads and writes, in walk order) and every simulation of that
schedule replays it: the same max and + on the same numbers in the same order, hence the
same floats, at about a third of the cost of a walk (the search's re-rank simulates many
plans per schedule; ``tests/test_simulate_replay.py`` checks the replay against a plain
sweep of this model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate, compress

from ..errors import InputError
from .actions import B, F, I, OVERLAP_F_B, W
from .schedules import Schedule, ScheduleError, build_schedule, no_gc

_F, _B, _I, _W, _O = 0, 1, 2, 3, 4
NEG = -1.0
_CODE = {F: _F, B: _B, I: _I, W: _W, OVERLAP_F_B: _O}
KIND_NAMES = ("F", "B", "I", "W", "OVERLAP_F_B")


@dataclass(frozen=True)
class ChunkTimes:
    """Per-micro-batch cost of one virtual stage (model chunk); SI units.

    ``fwd_s``, ``bwd_input_s``, ``bwd_weight_s``: forward, input-gradient and weight-gradient
    time of one micro-batch (a full ``B`` takes their sum). ``act_bytes``: activations one
    micro-batch stashes between its forward and backward on this chunk. ``p2p_s``: sending
    this chunk's output activation to the next stage (link time plus latency).
    ``a2a_fwd_s`` / ``a2a_bwd_s``: the part of fwd / backward that is expert all-to-all (only
    DualPipe's overlapped pairs use it). ``grad_reduce_s``, ``param_gather_s``,
    ``optimizer_s``: once per step for this chunk's parameters.
    """

    fwd_s: float
    bwd_input_s: float
    bwd_weight_s: float
    act_bytes: float = 0.0
    p2p_s: float = 0.0
    a2a_fwd_s: float = 0.0
    a2a_bwd_s: float = 0.0
    grad_reduce_s: float = 0.0
    param_gather_s: float = 0.0
    optimizer_s: float = 0.0
    w_hold_bytes: float | None = None

    @property
    def bwd_s(self) -> float:
        return self.bwd_input_s + self.bwd_weight_s


@dataclass
class RankResult:
    rank: int
    busy_s: float            # compute stream busy
    idle_s: float            # step_time_s - busy_s (pipeline bubble + exposed comm + waits)
    bubble_fraction: float   # idle_s / step_time_s
    compute_end_s: float     # when the rank's last compute action ends
    dp_exposed_s: float      # data-parallel communication past the last compute
    optimizer_s: float
    end_s: float             # the rank's step end
    peak_act_bytes: float    # peak stashed activations (the real schedule's number)
    peak_in_flight: int      # peak chunk-micro-batches stashed


@dataclass
class SimResult:
    schedule: Schedule = field(repr=False)
    chunks: list[ChunkTimes] = field(repr=False)
    step_time_s: float
    ranks: list[RankResult]
    critical_path: list[tuple]  # (kind, rank or (src, dst), label, start_s, end_s)
    # per rank, per action in list order: start and end times (for traces and plots)
    starts: list[list[float]] = field(repr=False)
    ends: list[list[float]] = field(repr=False)
    transfers: list[tuple] = field(repr=False)  # (src, dst, stage, mb, "F"|"B", start, end)
    dp_events: list[tuple] = field(repr=False)  # (rank, "gather"|"reduce", stage, start, end)

    @property
    def bubble_fraction(self) -> float:
        """Mean over ranks of idle / step time."""
        return sum(r.bubble_fraction for r in self.ranks) / len(self.ranks)

    @property
    def max_peak_act_bytes(self) -> float:
        return max(r.peak_act_bytes for r in self.ranks)

    def memory_timeline(self, rank: int) -> list[tuple[float, float]]:
        """(time, stashed activation bytes) after each change on ``rank``."""
        return _memory_events(self, rank)

    def summary(self) -> dict:
        return {
            "schedule": self.schedule.name, "pp": self.schedule.pp, "vpp": self.schedule.vpp,
            "num_microbatches": self.schedule.num_microbatches,
            "step_time_s": self.step_time_s, "bubble_fraction": self.bubble_fraction,
            "ranks": [r.__dict__ for r in self.ranks],
            "critical_path": [list(map(_jsonable, c)) for c in self.critical_path],
        }


def _jsonable(x):
    return list(x) if isinstance(x, tuple) else x


def uniform_chunks(num_chunks: int, fwd_s: float, bwd_input_s: float, bwd_weight_s: float,
                   act_bytes: float = 0.0, p2p_s: float = 0.0) -> list[ChunkTimes]:
    """``num_chunks`` identical chunks."""
    c = ChunkTimes(fwd_s, bwd_input_s, bwd_weight_s, act_bytes, p2p_s)
    return [c] * num_chunks


def simulate(sched: Schedule, chunks: list[ChunkTimes], *, overlap_p2p: bool = True,
             overlap_grad_reduce: bool = True, overlap_param_gather: bool = True,
             record: bool = True) -> SimResult:
    """Simulate one step of ``sched`` with per-stage costs ``chunks`` (index = stage id).

    ``record=False`` skips the transfer list and the critical path (for the search).
    Raises ScheduleError if the lists deadlock, InputError if ``chunks`` does not match.
    """
    with no_gc():
        return _simulate(sched, chunks, overlap_p2p, overlap_grad_reduce,
                         overlap_param_gather, record)


def _simulate(sched: Schedule, chunks: list[ChunkTimes], overlap_p2p: bool,
              overlap_grad_reduce: bool, overlap_param_gather: bool,
              record: bool) -> SimResult:
    S, m, pp = sched.num_stages, sched.num_microbatches, sched.pp
    if len(chunks) != S:
        raise InputError("chunks", len(chunks), f"need one ChunkTimes per stage ({S})")
    for c in chunks:
        if min(c.fwd_s, c.bwd_input_s, c.bwd_weight_s, c.p2p_s) < 0:
            raise InputError("chunks", c, "times must be >= 0")
    # the lists compiled once per schedule: actions in the order the event walk takes them
    prog = _program(sched)
    # per-simulation tables the compiled actions index: durations by kind (F, B, I, W)
    # then stage, transfer times by stage, and one slot per produced time (see _program)
    dur = ([c.fwd_s for c in chunks] + [c.bwd_input_s + c.bwd_weight_s for c in chunks]
           + [c.bwd_input_s for c in chunks] + [c.bwd_weight_s for c in chunks])
    p2p = [c.p2p_s for c in chunks]
    comp_f = [c.fwd_s - c.a2a_fwd_s for c in chunks]
    comp_b = [c.bwd_s - c.a2a_bwd_s for c in chunks]
    a2a_f = [c.a2a_fwd_s for c in chunks]
    a2a_b = [c.a2a_bwd_s for c in chunks]
    slot = [0.0] * prog.n_slots  # forward ends, arrivals, input-gradient ends; last = 0.0
    link_free = [0.0] * (pp * pp)  # per (sender, receiver): when the link is free
    used = prog.used

    # data-parallel stream: parameter gathers at the start, in order of first use
    dp_free = [0.0] * pp
    gather_done = [0.0] * S
    dp_events: list[tuple] = []
    rank_t0 = [0.0] * pp
    for r in range(pp):
        order_used = used[r]
        for s in order_used:
            g = chunks[s].param_gather_s
            if g > 0:
                st = dp_free[r]
                dp_free[r] = st + g
                gather_done[s] = st + g
                dp_events.append((r, "gather", s, st, st + g))
        if not overlap_param_gather:
            rank_t0[r] = dp_free[r]
            for s in order_used:
                gather_done[s] = 0.0
    # a forward waits for its chunk's gather only if one can end after it (times are >= 0)
    gathers = any(g > 0 for g in gather_done)

    free = list(rank_t0)
    busy = [0.0] * pp
    starts: list[list[float]] = [[] for _ in range(pp)]
    ends: list[list[float]] = [[] for _ in range(pp)]
    # critical-path bookkeeping: for each action (gid), its binding predecessor gid or -1
    pred = [-1] * prog.n_actions if record else None
    transfers: list[tuple] = []
    reduce_issue = [NEG] * S  # start of the chunk's last weight-gradient action
    reduce_floor = [NEG] * S  # its end: the last bucket cannot be reduced before it

    # recording: the action (global id) that wrote each slot, for the critical path
    prod = [-1] * prog.n_slots if record else None
    gid_base = prog.gid_base
    O = _O
    for r, ops, g0 in prog.segments:
        t = free[r]
        bsy = busy[r]
        st_add = starts[r].append
        en_add = ends[r].append
        gid = g0 - 1  # (counted only when recording)
        for k, di, dp, oe, oa, ln, pi, gs, wg in ops:
            if record:
                gid += 1
            if k == O:
                # di, dp: the halves' dependency slots; oe, oa: forward end / arrival
                # slots; ln, pi: backward end / arrival slots; gs: (sf, sb, link_f, link_b)
                sf, sb, ln_f, ln_b = gs
                dep_f = slot[di]
                dep_b = slot[dp]
                dep = dep_f if dep_f >= dep_b else dep_b
                start = t if t >= dep else dep
                comp = comp_f[sf] + comp_b[sb]
                comm = a2a_f[sf] + a2a_b[sb]
                end = start + (comp if comp >= comm else comm)
                if gathers and gather_done[sf] > end:  # parameters still arriving
                    end = gather_done[sf]
                t_after = end
                slot[oe] = end
                if oa >= 0:
                    if ln_f >= 0:
                        lf = link_free[ln_f]
                        arr = (end if end > lf else lf) + p2p[sf]
                        link_free[ln_f] = arr
                        if record:
                            fa = sched.order[r][gid - gid_base[r]].sub[0]
                            transfers.append((r, ln_f % pp, sf, fa.mb, "F", arr - p2p[sf], arr))
                    else:
                        arr = end
                    slot[oa] = arr
                slot[ln] = end
                if pi >= 0:
                    if ln_b >= 0:
                        lf = link_free[ln_b]
                        arr = (end if end > lf else lf) + p2p[sb - 1]
                        link_free[ln_b] = arr
                        if record:
                            ba = sched.order[r][gid - gid_base[r]].sub[1]
                            transfers.append((r, ln_b % pp, sb, ba.mb, "B", arr - p2p[sb - 1],
                                              arr))
                    else:
                        arr = end
                    slot[pi] = arr
                if record:
                    p = prod[di] if dep_f >= dep_b else prod[dp]
                    prod[ln] = gid
                    if pi >= 0:
                        prod[pi] = gid
            else:
                dep = slot[dp]
                start = t if t >= dep else dep
                end = t_after = start + dur[di]
                if gathers and gs >= 0 and gather_done[gs] > end:  # overlapped gather
                    end = t_after = gather_done[gs]
                slot[oe] = end  # (a W writes the scratch slot)
                if oa >= 0:
                    if ln >= 0:  # a transfer on the (sender, receiver) link, in issue order
                        lf = link_free[ln]
                        arr = (end if end > lf else lf) + p2p[pi]
                        link_free[ln] = arr
                        if record:
                            a = sched.order[r][gid - gid_base[r]]
                            transfers.append((r, ln % pp, a.stage, a.mb,
                                              "F" if k == _F else "B", arr - p2p[pi], arr))
                        if not overlap_p2p:
                            t_after = arr
                    else:
                        arr = end
                    slot[oa] = arr
                if record:
                    p = prod[dp]
            if wg >= 0:  # the chunk's last weight-gradient action
                reduce_issue[wg] = start
                reduce_floor[wg] = end
            if record:
                pred[gid] = p if dep > t else (gid - 1 if gid != gid_base[r] else -1)
                prod[oe] = gid
                if oa >= 0:
                    prod[oa] = gid
            st_add(start)
            en_add(end)
            bsy += end - start
            t = t_after
        free[r] = t
        busy[r] = bsy

    # data-parallel gradient reduction and the optimizer
    ranks: list[RankResult] = []
    ends_rank = []
    act = [c.act_bytes for c in chunks]
    hold = [c.act_bytes if c.w_hold_bytes is None else min(c.w_hold_bytes, c.act_bytes)
            for c in chunks]
    for r in range(pp):
        comp_end = free[r]
        dpf = dp_free[r]
        rstages = sched.rank_stages(r)
        issue_order = sorted(rstages, key=lambda s: reduce_issue[s])
        for s in issue_order:
            g = chunks[s].grad_reduce_s
            if g <= 0:
                continue
            at = reduce_issue[s] if overlap_grad_reduce else comp_end
            st = dpf if dpf > at else at
            dpf = st + g
            if dpf < reduce_floor[s]:
                dpf = reduce_floor[s]
            dp_events.append((r, "reduce", s, st, dpf))
        end_r = comp_end if comp_end > dpf else dpf
        opt = sum(chunks[s].optimizer_s for s in rstages)
        ends_rank.append((comp_end, end_r - comp_end, opt, end_r + opt))
    step = max(e[3] for e in ends_rank)
    for r in range(pp):
        comp_end, dp_exp, opt, end_r = ends_rank[r]
        idle = step - busy[r] - opt
        peak_b, peak_n = _peak_of(prog, r, act, hold)
        ranks.append(RankResult(r, busy[r], idle, idle / step if step > 0 else 0.0,
                                comp_end, dp_exp, opt, end_r, peak_b, peak_n))

    crit: list[tuple] = []
    if record and prog.n_actions:
        crit = _critical_path(sched, starts, ends, pred, prog.gid_base, step, ends_rank)
    return SimResult(sched, list(chunks), step, ranks, crit, starts, ends, transfers, dp_events)


@dataclass(frozen=True)
class _Program:
    """A schedule compiled for the simulator: its actions in the order the event walk takes
    them, each with the slots it reads and writes. The walk's order depends only on the
    lists (an action runs when its rank reaches it and the action producing its input has
    run), never on the times, so it is found once per schedule and every simulation of the
    schedule replays it: the same operations in the same order, hence the same floats.

    Slots (one flat list of floats per simulation), key = stage * m + micro-batch: forward
    end at key, forward output's arrival at stage + 1 at N + key, input gradient's arrival
    at stage - 1 at 2N + key, input-gradient (B or I) end at 3N + key, 0.0 at 4N (what
    stage 0's forward waits for) and at 4N + 1 a scratch slot that W actions write (read
    by none). N = stages x micro-batches."""

    segments: tuple  # (rank, ops, gid of the first): a run of one rank's actions
    n_slots: int
    n_actions: int
    gid_base: list  # per rank: global id of its first action
    used: list  # per rank: its stages in order of first use
    peak_index: list  # per rank: _peak_of's table index of each (leaf) action, in order
    peak_fwd: list  # per rank: 1 where that leaf is a forward (the stash grows), else 0
    peak_n: list  # per rank: peak chunk-micro-batches stashed (no times involved)


_ENCODED: dict[int, tuple] = {}  # id(schedule) -> (schedule, its _Program)


def _program(sched: Schedule) -> _Program:
    """``sched`` compiled (cached per Schedule object: build_schedule's are never mutated).
    Raises ScheduleError where the event walk deadlocks or a W precedes its I."""
    hit = _ENCODED.get(id(sched))
    if hit is not None and hit[0] is sched:
        return hit[1]
    prog = _compile(sched)
    if len(_ENCODED) >= 64:  # (as many as build_schedule keeps)
        _ENCODED.clear()
    _ENCODED[id(sched)] = (sched, prog)
    return prog


def _compile(sched: Schedule) -> _Program:
    """The event walk without times: a rank runs its list until an action's input has not
    been produced, parks on that input and is woken when it is (O(actions)). Each action
    becomes (kind, duration index, dependency slot, end slot, arrival slot, link, transfer
    stage, gather stage, stage whose last weight gradient this is); -1: none. An
    OVERLAP_F_B: (kind, forward dependency slot, backward dependency slot, forward end
    slot, forward arrival slot, backward end slot, backward arrival slot, (forward stage,
    backward stage, forward link, backward link), last weight gradient's stage)."""
    S, m, pp = sched.num_stages, sched.num_microbatches, sched.pp
    last = S - 1
    N = S * m
    N2, N3 = 2 * N, 3 * N
    ZERO, SCRATCH = 4 * N, 4 * N + 1
    rank_of = [sched.stage_to_rank(s) for s in range(S)]
    done = [False] * (4 * N)  # which slots the walk has produced so far
    wgrad_left = [m] * S
    waiting: dict[int, int] = {}  # key * 2 (+1 for gradients) -> parked rank
    ptr = [0] * pp
    segments: list[tuple] = []
    ready = list(range(pp - 1, -1, -1))
    order = sched.order
    gid_base = [0] * pp  # global id of each rank's first action
    tot = 0
    for r in range(pp):
        gid_base[r] = tot
        tot += len(order[r])

    while ready:
        r = ready.pop()
        acts = order[r]
        n = len(acts)
        i = ptr[r]
        ops: list[tuple] = []
        add = ops.append
        rpp = r * pp
        while i < n:
            s, kind, mb, sub = acts[i]
            if sub is not None:  # OVERLAP_F_B
                fa, ba = sub
                sf, mf, sb, mbb = fa.stage, fa.mb, ba.stage, ba.mb
                kf, kb = sf * m + mf, sb * m + mbb
                if sf > 0 and not done[N + kf - m]:
                    waiting[(kf - m) * 2] = r
                    break
                dep_b = kb if sb == last else N2 + kb + m
                if not done[dep_b]:
                    waiting[(kb + m) * 2 + 1 if sb != last else kb * 2 + 0] = r
                    break
                dst_f = rank_of[sf + 1] if sf < last else r
                dst_b = rank_of[sb - 1] if sb > 0 else r
                wgrad_left[sb] -= 1
                add((_O, N + kf - m if sf > 0 else ZERO, dep_b, kf,
                     N + kf if sf < last else -1, N3 + kb, N2 + kb if sb > 0 else -1,
                     (sf, sb, rpp + dst_f if dst_f != r else -1,
                      rpp + dst_b if dst_b != r else -1),
                     -1 if wgrad_left[sb] else sb))
                done[kf] = True
                if sf < last:
                    done[N + kf] = True
                    w = waiting.pop(kf * 2, -1)
                    if w >= 0:
                        ready.append(w)
                done[N3 + kb] = True
                if sb > 0:
                    done[N2 + kb] = True
                    w = waiting.pop(kb * 2 + 1, -1)
                    if w >= 0:
                        ready.append(w)
                if last == sf:
                    w = waiting.pop(kf * 2, -1)
                    if w >= 0:
                        ready.append(w)
            else:
                key = s * m + (-1 if mb is None else mb)
                if kind == F:
                    if s > 0 and not done[N + key - m]:
                        waiting[(key - m) * 2] = r
                        break
                    if s < last:
                        dst = rank_of[s + 1]
                        add((_F, s, N + key - m if s > 0 else ZERO, key, N + key,
                             rpp + dst if dst != r else -1, s, s, -1))
                        done[N + key] = True
                    else:
                        add((_F, s, N + key - m if s > 0 else ZERO, key, -1, -1, s, s, -1))
                    done[key] = True
                    w = waiting.pop(key * 2, -1)  # next stage, or the last stage's backward
                    if w >= 0:
                        ready.append(w)
                elif kind == W:
                    if not done[N3 + key]:
                        raise ScheduleError(f"rank {r}: {s}W{mb} before its I")
                    wgrad_left[s] -= 1
                    add((_W, 3 * S + s, N3 + key, SCRATCH, -1, -1, 0, -1,
                         -1 if wgrad_left[s] else s))
                else:  # B or I
                    if kind != B and kind != I:
                        raise ScheduleError(f"rank {r}: {acts[i]} is not a compute action")
                    dep = key if s == last else N2 + key + m
                    if not done[dep]:
                        waiting[key * 2 if s == last else (key + m) * 2 + 1] = r
                        break
                    if kind == B:
                        wgrad_left[s] -= 1
                        di, wg = S + s, -1 if wgrad_left[s] else s
                    else:
                        di, wg = 2 * S + s, -1
                    done[N3 + key] = True
                    if s > 0:
                        dst = rank_of[s - 1]
                        add((_B if kind == B else _I, di, dep, N3 + key, N2 + key,
                             rpp + dst if dst != r else -1, s - 1, -1, wg))
                        done[N2 + key] = True
                        w = waiting.pop(key * 2 + 1, -1)
                        if w >= 0:
                            ready.append(w)
                    else:
                        add((_B if kind == B else _I, di, dep, N3 + key, -1, -1, s - 1, -1,
                             wg))
            i += 1
        ptr[r] = i
        if ops:
            segments.append((r, tuple(ops), gid_base[r] + i - len(ops)))

    stuck = [r for r in range(pp) if ptr[r] < len(order[r])]
    if stuck:
        r = stuck[0]
        raise ScheduleError(f"{sched.name}: deadlock, rank {r} waits at "
                            f"{order[r][ptr[r]]} (ranks stuck: {stuck})")

    used: list[list[int]] = []
    p_index: list[list[int]] = []
    p_fwd: list[list[bool]] = []
    p_n: list[int] = []
    base = {F: 0, B: S, I: 2 * S, W: 3 * S}
    step_n = {F: 1, B: -1, I: 0, W: -1}  # chunk-micro-batches stashed: + forward, - B or W
    for r in range(pp):
        acts = order[r]
        leaves = ([x for a in acts for x in (a.sub if a.sub is not None else (a,))]
                  if any(a.sub is not None for a in acts) else acts)
        used.append(list(dict.fromkeys([x.stage for x in leaves])))
        kinds = [x.kind for x in leaves]
        p_index.append([base[k] + x.stage for k, x in zip(kinds, leaves)])
        p_fwd.append([k == F for k in kinds])
        p_n.append(max(accumulate(map(step_n.__getitem__, kinds), initial=0)))
    return _Program(tuple(segments), 4 * N + 2, tot, gid_base, used, p_index, p_fwd, p_n)


def _peak_of(prog: _Program, r: int, act: list[float], hold: list[float]
             ) -> tuple[float, int]:
    """Peak stashed bytes and chunk-micro-batches of rank ``r``, walking its actions in
    order: a forward stashes ``act``, a full backward frees it, an I frees ``act - hold``,
    a W ``hold``. The running sum is the walk's own (x - y == x + (-y) in IEEE 754), the
    peak the largest value after a forward."""
    table = act + [-a for a in act] + [-(a - h) for a, h in zip(act, hold)] + [-h for h in hold]
    sums = accumulate(map(table.__getitem__, prog.peak_index[r]), initial=0.0)
    next(sums)
    top = max(compress(sums, prog.peak_fwd[r]), default=0.0)
    return (top if top > 0.0 else 0.0), prog.peak_n[r]


def _memory_events(res: SimResult, rank: int) -> list[tuple[float, float]]:
    """Stashed activation bytes over time on ``rank`` (alloc at start of F, free at end)."""
    ev: list[tuple[float, float]] = []
    for a, st, en in zip(res.schedule.order[rank], res.starts[rank], res.ends[rank]):
        for x in a.leaves():
            c = res.chunks[x.stage]
            hold = c.act_bytes if c.w_hold_bytes is None else min(c.w_hold_bytes, c.act_bytes)
            if x.kind == F:
                ev.append((st, c.act_bytes))
            elif x.kind == B:
                ev.append((en, -c.act_bytes))
            elif x.kind == I:
                ev.append((en, -(c.act_bytes - hold)))
            else:
                ev.append((en, -hold))
    ev.sort(key=lambda e: (e[0], e[1] > 0))  # one stream: a free at t precedes an alloc at t
    out = [(0.0, 0.0)]
    cur = 0.0
    for t, d in ev:
        cur += d
        if out[-1][0] == t:  # several changes at one instant: keep the net value
            out[-1] = (t, cur)
        else:
            out.append((t, cur))
    return out


def _critical_path(sched, starts, ends, pred, gid_base, step, ends_rank):
    """Walk binding predecessors back from the action that ends last."""
    pp = sched.pp
    loc = []  # gid -> (rank, index)
    for r in range(pp):
        loc.extend((r, i) for i in range(len(starts[r])))
    # start from the rank whose step ends last
    r_last = max(range(pp), key=lambda r: ends_rank[r][3])
    g = gid_base[r_last] + len(starts[r_last]) - 1
    path: list[tuple] = []
    while g >= 0:
        r, i = loc[g]
        a = sched.order[r][i]
        path.append(("compute", r, str(a), starts[r][i], ends[r][i]))
        p = pred[g]
        if p >= 0:
            pr, pi = loc[p]
            if pr != r:  # a transfer (or a same-time handoff) between ranks
                path.append(("p2p", (pr, r), f"{sched.order[pr][pi]} -> rank {r}",
                             ends[pr][pi], starts[r][i]))
        g = p
    path.reverse()
    comp_end, dp_exp, opt, end_r = ends_rank[r_last]
    if dp_exp > 0:
        path.append(("dp", r_last, "exposed gradient reduction", comp_end, comp_end + dp_exp))
    if opt > 0:
        path.append(("optimizer", r_last, "optimizer step", end_r - opt, end_r))
    return path


def simulate_schedule(name: str, pp: int, vpp: int, num_microbatches: int,
                      chunks: list[ChunkTimes], **kw) -> SimResult:
    """``simulate(build_schedule(name, pp, vpp, m), chunks)``."""
    return simulate(build_schedule(name, pp, vpp, num_microbatches), chunks, **kw)
