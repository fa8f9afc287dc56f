"""Lower compute-only action lists to lists with the point-to-point sends and receives.

Mirrors ``_add_send_recv`` in ``torch/distributed/pipelining/schedules.py`` (torch 2.13):
ranks are visited round-robin; a rank's next compute action is placed once its input is
there (its own RECV was placed, or the producing stage ran on the same rank); a forward
whose output goes to another rank is followed by ``SEND_F`` and the receiver gets
``RECV_F`` appended at that moment (likewise ``I``/``B`` with ``SEND_B``/``RECV_B``). The
tests check the result equals torch's pass action for action. ``REDUCE_GRAD`` is added the
way ``_add_reduce_grad`` does (after a stage's last B or W) when ``reduce_grad=True``.
"""

from __future__ import annotations

from .actions import (B, F, I, RECV_B, RECV_F, REDUCE_GRAD, SEND_B, SEND_F, W, Action)
from .schedules import Schedule, ScheduleError


def add_reduce_grad(actions: list[Action], m: int) -> list[Action]:
    """torch ``_add_reduce_grad``: REDUCE_GRAD right after a stage's m-th B or W."""
    out: list[Action] = []
    count: dict[int, int] = {}
    for a in actions:
        out.append(a)
        for leaf in a.leaves():
            if leaf.kind in (B, W):
                count[leaf.stage] = count.get(leaf.stage, 0) + 1
                if count[leaf.stage] == m:
                    out.append(Action(leaf.stage, REDUCE_GRAD, None))
    return out


def add_send_recv(sched: Schedule, reduce_grad: bool = False) -> dict[int, list[Action]]:
    """The schedule's lists with SEND_F/RECV_F/SEND_B/RECV_B in torch's order."""
    last = sched.num_stages - 1
    rank_of = sched.stage_to_rank
    pending = {r: (add_reduce_grad(a, sched.num_microbatches) if reduce_grad else list(a))
               for r, a in sched.order.items()}
    out: dict[int, list[Action]] = {r: [] for r in pending}
    seen: dict[int, set[Action]] = {r: set() for r in pending}
    pos = {r: 0 for r in pending}

    def has_comms(a: Action) -> bool:
        if a.kind == F:
            return a.stage != last and rank_of(a.stage + 1) != rank_of(a.stage)
        if a.kind in (I, B):
            return a.stage != 0 and rank_of(a.stage - 1) != rank_of(a.stage)
        return False

    def ready(a: Action, prev: set[Action]) -> bool:
        if a.kind == F and a.stage != 0:
            return (Action(a.stage, RECV_F, a.mb) in prev
                    or Action(a.stage - 1, F, a.mb) in prev)
        if a.kind in (I, B) and a.stage != last:
            return (Action(a.stage, RECV_B, a.mb) in prev
                    or Action(a.stage + 1, I, a.mb) in prev
                    or Action(a.stage + 1, B, a.mb) in prev)
        return True

    live = sorted(r for r in pending if pending[r])
    while live:
        progress = False
        for r in live:
            a = pending[r][pos[r]]
            if not all(ready(x, seen[r]) for x in a.leaves()):
                continue
            out[r].append(a)
            for x in a.leaves():
                seen[r].add(x)
                if has_comms(x):
                    fwd = x.kind == F
                    send = Action(x.stage, SEND_F if fwd else SEND_B, x.mb)
                    peer_stage = x.stage + 1 if fwd else x.stage - 1
                    recv = Action(peer_stage, RECV_F if fwd else RECV_B, x.mb)
                    out[r].append(send)
                    seen[r].add(send)
                    dst = rank_of(peer_stage)
                    out[dst].append(recv)
                    seen[dst].add(recv)
            pos[r] += 1
            progress = True
        live = [r for r in live if pos[r] < len(pending[r])]
        if not progress:
            stuck = ", ".join(f"rank {r} at {pending[r][pos[r]]}" for r in live)
            raise ScheduleError(f"{sched.name}: cannot place sends/receives, stuck: {stuck}")
    return out
