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
What does not change between simulations of one schedule (every action's input and output
slots, link and cost index; the peak count in flight) is worked out once per schedule
(``_Program``), so the loop per action reads one tuple and does the arithmetic of the times
(``tests/test_simulate_work.py`` counts its bytecodes per action).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate, compress
from operator import add

from ..errors import InputError
from .actions import B, F, I, OVERLAP_F_B, W
from .schedules import Schedule, ScheduleError, build_schedule, no_gc

_F, _B, _I, _W, _O = 0, 1, 2, 3, 4
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
    prog = _encoded(sched)
    tpl, KS, MB, over = prog.tpl, prog.ks, prog.mbs, prog.over
    # durations by _Program's duration index: kind * S + stage (F, B, I, W)
    dur = ([c.fwd_s for c in chunks] + [c.bwd_input_s + c.bwd_weight_s for c in chunks]
           + [c.bwd_input_s for c in chunks] + [c.bwd_weight_s for c in chunks])
    p2p = [c.p2p_s for c in chunks]
    comp_f = [c.fwd_s - c.a2a_fwd_s for c in chunks]
    comp_b = [c.bwd_s - c.a2a_bwd_s for c in chunks]
    a2a_f = [c.a2a_fwd_s for c in chunks]
    a2a_b = [c.a2a_bwd_s for c in chunks]
    NEG = -1.0
    last = S - 1
    # one time per slot (_Program): -1 until the output exists
    T = [NEG] * prog.zero + [0.0] * (prog.n_slots - prog.zero)
    G = [0] * prog.n_slots if record else None  # producing action (global id) of each slot
    waiter = [-1] * prog.n_slots  # the rank parked on the slot
    link_free = [0.0] * (pp * pp)  # per (sender, receiver): when the link is free

    # data-parallel stream: parameter gathers at the start, in order of first use
    dp_free = [0.0] * pp
    gather_done = [0.0] * S
    dp_events: list[tuple] = []
    rank_t0 = [0.0] * pp
    for r in range(pp):
        order_used = prog.used[r]
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
    # a forward cannot end before its chunk's parameters are there (overlapped gather); by
    # duration index (forwards first); None when no gather is left to wait for
    gather = gather_done + [0.0] * (3 * S) if any(g > 0 for g in gather_done) else None

    free = list(rank_t0)
    busy = [0.0] * pp
    ptr = [0] * pp
    starts: list[list[float]] = [[0.0] * len(x) for x in KS]
    ends: list[list[float]] = [[0.0] * len(x) for x in KS]
    # critical-path bookkeeping: for each action (gid), its binding predecessor gid or -1
    gid_base = [0] * pp
    tot = 0
    for r in range(pp):
        gid_base[r] = tot
        tot += len(KS[r])
    pred = [-1] * tot if record else None
    transfers: list[tuple] = []
    ready = list(range(pp - 1, -1, -1))

    while ready:
        r = ready.pop()
        ks_r, mb_r = KS[r], MB[r]
        n = len(ks_r)
        i = ptr[r]
        t = free[r]
        st_r, en_r = starts[r], ends[r]
        base = gid_base[r]
        bsy = busy[r]
        while i < n:
            ks = ks_r[i]
            if ks >= 0:  # F, B, I or W
                k, dep, di, oa, oe, lk, pix = tpl[ks]
                mb = mb_r[i]
                dep += mb
                d = T[dep]
                if d < 0:  # its input is not there yet: park on it
                    if k == _W:
                        raise ScheduleError(f"rank {r}: {sched.order[r][i]} before its I")
                    waiter[dep] = r
                    break
                start = t if t >= d else d
                end = start + dur[di]
                if gather is not None and gather[di] > end:  # parameters still arriving
                    end = gather[di]
                t_after = end
                oe += mb
                T[oe] = end
                if record:
                    gid = base + i
                    pred[gid] = G[dep] if d > t else (gid - 1 if i else -1)
                    G[oe] = gid
                if oa >= 0:  # an output another action waits for
                    oa += mb
                    if lk >= 0:  # on the link to another rank
                        lf = link_free[lk]
                        arr = (end if end > lf else lf) + p2p[pix]
                        link_free[lk] = arr
                        if record:
                            transfers.append((r, lk - r * pp, ks % S, mb,
                                              "F" if k == _F else "B", arr - p2p[pix], arr))
                        if not overlap_p2p:
                            t_after = arr
                    else:
                        arr = end
                    T[oa] = arr
                    if record:
                        G[oa] = gid
                    w = waiter[oa]
                    if w >= 0:
                        ready.append(w)
            else:  # OVERLAP_F_B: a forward and a full backward together
                sf, mf, sb, mbb, dep_f, dep_b, fo, f_lk, bo, ie, b_lk = over[~ks]
                d = T[dep_f]
                if d < 0:
                    waiter[dep_f] = r
                    break
                db = T[dep_b]
                if db < 0:
                    waiter[dep_b] = r
                    break
                if d >= db:
                    dep, slot = d, dep_f
                else:
                    dep, slot = db, dep_b
                start = t if t >= dep else dep
                comp = comp_f[sf] + comp_b[sb]
                comm = a2a_f[sf] + a2a_b[sb]
                end = start + (comp if comp >= comm else comm)
                if gather is not None and gather[sf] > end:  # parameters still arriving
                    end = gather[sf]
                t_after = end
                gid = base + i
                if record:
                    pred[gid] = G[slot] if dep > t else (gid - 1 if i else -1)
                    G[fo] = G[ie] = gid
                # forward half (on the last stage: its own backward's input)
                if f_lk >= 0:
                    lf = link_free[f_lk]
                    arr = (end if end > lf else lf) + p2p[sf]
                    link_free[f_lk] = arr
                    if record:
                        transfers.append((r, f_lk - r * pp, sf, mf, "F", arr - p2p[sf], arr))
                else:
                    arr = end
                T[fo] = arr
                if sf != last:
                    w = waiter[fo]
                    if w >= 0:
                        ready.append(w)
                # backward half
                T[ie] = end
                if bo >= 0:
                    if b_lk >= 0:
                        lf = link_free[b_lk]
                        arr = (end if end > lf else lf) + p2p[sb - 1]
                        link_free[b_lk] = arr
                        if record:
                            transfers.append((r, b_lk - r * pp, sb, mbb, "B",
                                              arr - p2p[sb - 1], arr))
                    else:
                        arr = end
                    T[bo] = arr
                    if record:
                        G[bo] = gid
                    w = waiter[bo]
                    if w >= 0:
                        ready.append(w)
                if sf == last:  # (woken after the backward half, as before)
                    w = waiter[fo]
                    if w >= 0:
                        ready.append(w)
            st_r[i] = start
            en_r[i] = end
            bsy += end - start
            t = t_after
            i += 1
        ptr[r] = i
        free[r] = t
        busy[r] = bsy

    stuck = [r for r in range(pp) if ptr[r] < len(KS[r])]
    if stuck:
        r = stuck[0]
        raise ScheduleError(f"{sched.name}: deadlock, rank {r} waits at "
                            f"{sched.order[r][ptr[r]]} (ranks stuck: {stuck})")

    # data-parallel gradient reduction (issued when the chunk's last weight-gradient action
    # starts, ending no earlier than that action) and the optimizer
    ranks: list[RankResult] = []
    ends_rank = []
    act = [c.act_bytes for c in chunks]
    hold = [c.act_bytes if c.w_hold_bytes is None else min(c.w_hold_bytes, c.act_bytes)
            for c in chunks]
    reduce_issue = reduce_floor = None
    if any(c.grad_reduce_s > 0 for c in chunks):
        reduce_issue = [NEG] * S
        reduce_floor = [NEG] * S
        for s, (r, i) in enumerate(prog.last_grad()):
            if r >= 0:
                reduce_issue[s] = starts[r][i]
                reduce_floor[s] = ends[r][i]
    for r in range(pp):
        comp_end = free[r]
        dpf = dp_free[r]
        rstages = sched.rank_stages(r)
        if reduce_issue is not None:
            for s in sorted(rstages, key=lambda s: reduce_issue[s]):
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
    # stashed activations: a forward adds its chunk's bytes at its start, B frees them, I
    # all but what W holds, W the rest; by kind * S + stage
    change = (act + [-a for a in act] + [-(a - h) for a, h in zip(act, hold)]
              + [-h for h in hold])
    peak_in_flight = prog.peak_in_flight()
    for r in range(pp):
        comp_end, dp_exp, opt, end_r = ends_rank[r]
        idle = step - busy[r] - opt
        ranks.append(RankResult(r, busy[r], idle, idle / step if step > 0 else 0.0,
                                comp_end, dp_exp, opt, end_r, prog.peak(r, change),
                                peak_in_flight[r]))

    crit: list[tuple] = []
    if record and tot:
        rank_of = [sched.stage_to_rank(s) for s in range(S)]
        crit = _critical_path(sched, starts, ends, pred, gid_base, rank_of, step, ends_rank)
    return SimResult(sched, list(chunks), step, ranks, crit, starts, ends, transfers, dp_events)


class _Program:
    """A schedule as the simulator reads it, the same for every simulation of it.

    The simulation keeps one time per slot: for each (stage, micro-batch) key =
    stage * m + mb, the forward's output as the next stage receives it (on the last stage:
    the forward's end, its own backward's input), the input gradient as the previous stage
    receives it, and the end of its B or I (W's input); then m slots that read 0.0 (the
    first stage's forwards have no input) and m that nobody reads. An action of kind k on
    stage s is ``tpl[k * S + s]``, (kind, input slot, duration index, output slot or -1,
    end slot, link or -1, p2p index), each slot without its micro-batch, added when it
    runs: the duration index is k * S + s, the link sender * pp + receiver where the output
    goes to another rank, the p2p index the stage whose activation size travels.
    Per rank ``ks`` lists k * S + s of each action, or ~j for the j-th OVERLAP_F_B, whose
    ``over[j]`` holds (forward stage, its mb, backward stage, its mb, the two input slots,
    the forward's output slot and link, the backward's gradient slot or -1, its end slot,
    its link), and ``mbs`` the micro-batches.
    """

    __slots__ = ("tpl", "ks", "mbs", "over", "used", "items", "zero", "n_slots", "_grads",
                 "_in_flight", "_first", "_sched")

    def __init__(self, sched: Schedule):
        S, m, pp = sched.num_stages, sched.num_microbatches, sched.pp
        nk = S * m
        FO, BA, IE = 0, nk, 2 * nk  # the blocks of slots
        ZB, SB = 3 * nk, 3 * nk + m
        last = S - 1
        rank_of = [sched.stage_to_rank(s) for s in range(S)]

        def link(s: int, to: int) -> int:
            r, dst = rank_of[s], rank_of[to]
            return r * pp + dst if dst != r else -1

        tpl = [None] * (4 * S)
        for s in range(S):
            tpl[_F * S + s] = (_F, FO + (s - 1) * m if s > 0 else ZB, _F * S + s, FO + s * m,
                               SB, link(s, s + 1) if s < last else -1, s)
            for k in (_B, _I):
                tpl[k * S + s] = (k, FO + s * m if s == last else BA + (s + 1) * m, k * S + s,
                                  BA + s * m if s > 0 else -1, IE + s * m,
                                  link(s, s - 1) if s > 0 else -1, s - 1)
            tpl[_W * S + s] = (_W, IE + s * m, _W * S + s, -1, SB, -1, -1)
        self.tpl = tpl
        self.ks, self.mbs, self.over, self.used, self.items = [], [], [], [], []
        offset = {kind: c * S for kind, c in _CODE.items()}.__getitem__
        for r in range(pp):
            acts = sched.order[r]
            stages, kinds, mbs, _ = zip(*acts) if acts else ((), (), (), ())
            if OVERLAP_F_B not in kinds:
                ks = list(map(add, map(offset, kinds), stages))
                self.ks.append(ks)
                self.used.append(list(dict.fromkeys(stages)))
                self.items.append(ks)
            else:
                ks, used, items = [], {}, []
                for a in acts:
                    if a.sub is None:
                        ks.append(_CODE[a.kind] * S + a.stage)
                        used[a.stage] = None
                        items.append(ks[-1])
                        continue
                    fa, ba = a.sub
                    sf, sb = fa.stage, ba.stage
                    kf, kb = sf * m + fa.mb, sb * m + ba.mb
                    ks.append(~len(self.over))
                    self.over.append((
                        sf, fa.mb, sb, ba.mb, FO + kf - m if sf > 0 else ZB + fa.mb,
                        FO + kb if sb == last else BA + kb + m, FO + kf,
                        link(sf, sf + 1) if sf < last else -1, BA + kb if sb > 0 else -1,
                        IE + kb, link(sb, sb - 1) if sb > 0 else -1))
                    used[sf] = used[sb] = None
                    items.append(_F * S + sf)
                    items.append(_CODE[ba.kind] * S + sb)
                self.ks.append(ks)
                self.used.append(list(used))
                self.items.append(items)
            self.mbs.append(mbs)
        self.zero, self.n_slots = ZB, SB + m
        self._grads = self._in_flight = None
        self._first = [[True] + [x < S for x in items] for items in self.items]  # 0, F
        self._sched = sched

    def peak(self, r: int, change: list[float]) -> float:
        """Rank r's peak stashed bytes: the running sum of ``change`` (by kind * S + stage)
        over its items (the actions, an OVERLAP_F_B's forward then backward) in order, at
        its forwards' starts, and 0 before any."""
        sums = accumulate(map(change.__getitem__, self.items[r]), initial=0.0)
        return max(compress(sums, self._first[r]))

    def peak_in_flight(self) -> list[int]:
        """Per rank, the most chunk-micro-batches stashed at once (a forward adds one, B and
        W free it)."""
        if self._in_flight is None:
            S = self._sched.num_stages
            step = [1] * S + [-1] * S + [0] * S + [-1] * S
            self._in_flight = [max(compress(accumulate(map(step.__getitem__, items),
                                                       initial=0), first))
                               for items, first in zip(self.items, self._first)]
        return self._in_flight

    def last_grad(self) -> list[tuple[int, int]]:
        """Per stage, (rank, index) of the action that completes its weight gradients (its
        m-th B, W or OVERLAP_F_B backward), or (-1, -1)."""
        if self._grads is None:
            sched = self._sched
            S, m = sched.num_stages, sched.num_microbatches
            count = [0] * S
            out = [(-1, -1)] * S
            for r in range(sched.pp):
                for i, ks in enumerate(self.ks[r]):
                    if ks >= 0:
                        k, s = divmod(ks, S)
                        if k != _B and k != _W:
                            continue
                    else:
                        s = self.over[~ks][2]
                    count[s] += 1
                    if count[s] == m:
                        out[s] = (r, i)
            self._grads = out
        return self._grads


_ENCODED: dict[int, tuple] = {}  # id(schedule) -> (schedule, its _Program)


def _encoded(sched: Schedule) -> _Program:
    """The schedule's _Program, cached per Schedule object (build_schedule's are never
    mutated)."""
    hit = _ENCODED.get(id(sched))
    if hit is not None and hit[0] is sched:
        return hit[1]
    prog = _Program(sched)
    if len(_ENCODED) >= 64:  # (as many as build_schedule keeps)
        _ENCODED.clear()
    _ENCODED[id(sched)] = (sched, prog)
    return prog


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


def _critical_path(sched, starts, ends, pred, gid_base, rank_of, step, ends_rank):
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
