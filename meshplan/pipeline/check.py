"""The invariants every pipeline schedule must satisfy, checked on the lists themselves.

1. Placement: every action on rank r is on a stage rank r holds.
2. Completeness: every (stage, micro-batch) is forwarded exactly once and backwarded exactly
   once (one ``B``, or one ``I`` and one ``W``).
3. Order on a rank: a backward follows its forward, ``W`` follows its ``I``.
4. Executable: some global order runs every rank's list in its order with every input
   produced before it is used (no deadlock).
5. Communication: after lowering (``lowering.add_send_recv``) every send has exactly one
   matching receive on the peer rank, placed before the compute that consumes it, and every
   send comes after the compute that produced its tensor.
6. Memory: the micro-batches in flight per rank (activations stashed by a forward and not
   yet released by the backward that finishes with them) never exceed what the schedule
   promises (``promised_in_flight``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .actions import B, F, I, RECV_B, RECV_F, SEND_B, SEND_F, W, Action
from .lowering import add_send_recv
from .schedules import Schedule, ScheduleError, _warmup_ops


@dataclass(frozen=True)
class CheckReport:
    """Peak chunk-micro-batches whose activations a rank holds, per rank."""

    peak_in_flight: list[int]   # F done, its B (or W when split) not yet done
    peak_awaiting_input_grad: list[int]  # F done, its B / I not yet done


def in_flight_peaks(sched: Schedule) -> CheckReport:
    """Walk each rank's list: a forward stashes, a B (or W, when split) releases.

    An OVERLAP_F_B counts its forward before its backward (they run together, so the
    forward's activations exist before the backward frees its own).
    """
    held, awaiting = [], []
    for r in range(sched.pp):
        n_hold = n_wait = peak_hold = peak_wait = 0
        for a in sched.order[r]:
            for x in a.leaves():
                if x.kind == F:
                    n_hold += 1
                    n_wait += 1
                    peak_hold = max(peak_hold, n_hold)
                    peak_wait = max(peak_wait, n_wait)
                elif x.kind == B:
                    n_hold -= 1
                    n_wait -= 1
                elif x.kind == I:
                    n_wait -= 1
                elif x.kind == W:
                    n_hold -= 1
        held.append(peak_hold)
        awaiting.append(peak_wait)
    return CheckReport(held, awaiting)


def promised_in_flight(name: str, pp: int, vpp: int, m: int, rank: int) -> int:
    """Chunk-micro-batches rank ``rank`` may hold at most, as each schedule's source states.

    - GPipe: all m; looped BFS: all m on each of the vpp chunks (forward everything first).
    - 1F1B: pp - rank (PipeDream-Flush; Narayanan et al. 2021 sec. 2.2.1).
    - Interleaved 1F1B: warm-up forwards + 1, warm-up = (vpp-1)*per_round + 2*(pp-1-rank);
      on rank 0 with per_round = pp that is pp*vpp + pp - 1 chunks, i.e.
      pp * (1 + (pp-1)/(pp*vpp)) full stages (Korthikanti et al. 2022, sec. 4.2.3).
    - ZB-H1: pp on every rank, the peak of 1F1B's first stage (Qi et al. 2023, sec. 3.1:
      "the same peak memory as 1F1B"); interleaved ZB adds the same r-step W delay to the
      interleaved warm-up: (vpp-1)*per_round + pp.
    - ZB-V: 2*pp chunks = pp full stages, again 1F1B's peak (Qi et al. 2023, sec. 6).
    - DualPipeV: 2*pp + 1 chunks (2*pp in flight when the steady state starts, + 1 while an
      overlapped forward runs beside the backward that will free a slot).
    Always capped at vpp*m (everything).
    """
    cap = vpp * m
    if name == "gpipe" or name == "looped_bfs":
        return cap
    if name == "1f1b":
        return min(pp - rank, cap)
    rounds = max(1, m // pp)
    per_round = m // rounds
    if name == "interleaved_1f1b":
        return min(_warmup_ops(rank, vpp, per_round, pp, m, 2) + 1, cap)
    if name in ("zb_h1", "interleaved_zb"):
        return min((vpp - 1) * per_round + pp, cap)
    if name == "zb_v":
        return min(2 * pp, cap)
    if name == "dualpipev":
        return min(2 * pp + 1, cap)
    raise AssertionError(name)


def _check_complete(sched: Schedule) -> None:
    m, S = sched.num_microbatches, sched.num_stages
    seen: dict[tuple[int, str, int], int] = {}
    for r, acts in sched.order.items():
        pos: dict[tuple[int, str, int], int] = {}
        for i, a in enumerate(acts):
            for x in a.leaves():
                if x.kind not in (F, B, I, W):
                    raise ScheduleError(f"rank {r}: {x} is not a compute action")
                if not (0 <= x.stage < S and x.mb is not None and 0 <= x.mb < m):
                    raise ScheduleError(f"rank {r}: {x} is outside {S} stages x {m} micro-batches")
                if sched.stage_to_rank(x.stage) != r:
                    raise ScheduleError(f"rank {r}: {x} runs stage {x.stage}, which lives on "
                                        f"rank {sched.stage_to_rank(x.stage)}")
                key = (x.stage, x.kind, x.mb)
                if key in seen:
                    raise ScheduleError(f"rank {r}: {x} appears twice")
                seen[key] = r
                pos[key] = i
                if x.kind in (B, I) and pos.get((x.stage, F, x.mb), i + 1) >= i:
                    raise ScheduleError(f"rank {r}: {x} before its forward")
                if x.kind == W and pos.get((x.stage, I, x.mb), i + 1) >= i:
                    raise ScheduleError(f"rank {r}: {x} before its input backward")
    for s in range(S):
        for mb in range(m):
            if (s, F, mb) not in seen:
                raise ScheduleError(f"{s}F{mb} missing")
            full = (s, B, mb) in seen
            split = ((s, I, mb) in seen, (s, W, mb) in seen)
            if full and any(split):
                raise ScheduleError(f"stage {s} micro-batch {mb}: both B and I/W")
            if not full and split != (True, True):
                raise ScheduleError(f"stage {s} micro-batch {mb}: backward missing")


def _check_executable(sched: Schedule) -> None:
    """Run the lists with unit-less progress: a rank advances while its inputs exist."""
    last = sched.num_stages - 1
    done: set[tuple[int, str, int]] = set()
    pos = {r: 0 for r in sched.order}

    def ready(x: Action) -> bool:
        if x.kind == F:
            return x.stage == 0 or (x.stage - 1, F, x.mb) in done
        if x.kind in (B, I):
            return x.stage == last or ((x.stage + 1, B, x.mb) in done
                                       or (x.stage + 1, I, x.mb) in done)
        return True

    live = [r for r in pos if sched.order[r]]
    while live:
        progress = False
        for r in live:
            acts = sched.order[r]
            while pos[r] < len(acts) and all(ready(x) for x in acts[pos[r]].leaves()):
                done.update((x.stage, x.kind, x.mb) for x in acts[pos[r]].leaves())
                pos[r] += 1
                progress = True
        live = [r for r in live if pos[r] < len(sched.order[r])]
        if not progress:
            stuck = ", ".join(f"rank {r} waits at {sched.order[r][pos[r]]}" for r in live)
            raise ScheduleError(f"{sched.name}: deadlock: {stuck}")


def _check_comms(sched: Schedule, lowered: dict[int, list[Action]]) -> None:
    partner = {SEND_F: RECV_F, SEND_B: RECV_B}
    sends: dict[tuple[str, int, int], int] = {}
    recvs: dict[tuple[str, int, int], int] = {}
    for r, acts in lowered.items():
        produced: set[tuple[int, str, int]] = set()
        received: set[tuple[str, int, int]] = set()
        for a in acts:
            for x in a.leaves():
                if x.kind in partner:
                    producer = (x.stage, F, x.mb) if x.kind == SEND_F else None
                    ok = (producer in produced if producer else
                          (x.stage, I, x.mb) in produced or (x.stage, B, x.mb) in produced)
                    if not ok:
                        raise ScheduleError(f"rank {r}: {x} before the compute it sends")
                    peer = x.stage + 1 if x.kind == SEND_F else x.stage - 1
                    key = (partner[x.kind], peer, x.mb)
                    if key in sends:
                        raise ScheduleError(f"rank {r}: {x} sent twice")
                    sends[key] = sched.stage_to_rank(peer)
                elif x.kind in (RECV_F, RECV_B):
                    key = (x.kind, x.stage, x.mb)
                    if key in recvs:
                        raise ScheduleError(f"rank {r}: {x} received twice")
                    recvs[key] = r
                    received.add(key)
                elif x.kind in (F, B, I, W):
                    produced.add((x.stage, x.kind, x.mb))
                    need = None
                    if x.kind == F and x.stage > 0 and sched.stage_to_rank(x.stage - 1) != r:
                        need = (RECV_F, x.stage, x.mb)
                    if (x.kind in (B, I) and x.stage < sched.num_stages - 1
                            and sched.stage_to_rank(x.stage + 1) != r):
                        need = (RECV_B, x.stage, x.mb)
                    if need and need not in received:
                        raise ScheduleError(f"rank {r}: {x} runs before its {need[0]}")
    if sends != recvs:
        extra = set(sends.items()) ^ set(recvs.items())
        raise ScheduleError(f"{sched.name}: sends and receives do not match: "
                            f"{sorted(extra)[:4]}")


def check_schedule(sched: Schedule) -> CheckReport:
    """Raise ScheduleError unless ``sched`` satisfies invariants 1-6; return the peaks."""
    _check_complete(sched)
    _check_executable(sched)
    _check_comms(sched, add_send_recv(sched))
    report = in_flight_peaks(sched)
    for r, peak in enumerate(report.peak_in_flight):
        allowed = promised_in_flight(sched.name, sched.pp, sched.vpp,
                                     sched.num_microbatches, r)
        if peak > allowed:
            raise ScheduleError(f"{sched.name} pp={sched.pp} vpp={sched.vpp} "
                                f"m={sched.num_microbatches}: rank {r} holds {peak} "
                                f"micro-batch chunks in flight, the schedule promises {allowed}")
    return report
