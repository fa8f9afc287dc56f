"""The event simulator's result against a plain reference, and the work it does per action.

Independent truth for the result: the model of ``meshplan/pipeline/simulate.py``'s docstring
evaluated the plain way below (dicts keyed by (kind, stage, micro-batch), every rank swept
until none can move), the same max and + on the same numbers, so equal means ==.

The work: the search's re-rank simulates 72 pipelines of 1.2 M actions for Llama 3.1 405B on
16,384 H100 (bench/bench_search.py), so the Python work per simulated action decides the
re-rank's time. It is counted as the bytecode instructions CPython 3.11 executes
(sys.settrace opcode events), which no other job on the machine changes. The loop that
parked ranks in a dict and recomputed every index per action executed 205-341 of them per
action once its schedule was encoded (1F1B 269, interleaved ZB 217, ZB-V 205, DualPipeV
341 on 8 ranks, 32 micro-batches); the encoded program of slots executes 141-204.
"""

from __future__ import annotations

import gc
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.errors import InputError
from meshplan.pipeline.actions import B, F, I, OVERLAP_F_B, W
from meshplan.pipeline.schedules import build_schedule, no_gc
from meshplan.pipeline.simulate import ChunkTimes, simulate, uniform_chunks
from meshplan.plan import SCHEDULES

VPP = {"zb_v": (2,), "dualpipev": (2,), "interleaved_1f1b": (2, 3), "looped_bfs": (2, 3),
       "interleaved_zb": (2, 3)}


def _reference(sched, chunks, overlap_p2p: bool):
    """Per rank, the (start, end) of each action; per rank, the busy time and when its
    compute stream is free at the end; the transfers."""
    pp, last = sched.pp, sched.num_stages - 1
    rank_of = sched.stage_to_rank
    done: dict = {}  # ("F" | "G" | "E", stage, mb) -> time: output arrival / end of B or I
    link: dict = {}
    free = [0.0] * pp
    busy = [0.0] * pp
    pos = [0] * pp
    times: list[list] = [[] for _ in range(pp)]
    sent: list = []

    def send(r, s_to, end, s_size, key, rec):
        dst = rank_of(s_to)
        if dst == r:
            done[key] = end
            return end
        lf = link.get((r, dst), 0.0)
        arr = (end if end > lf else lf) + chunks[s_size].p2p_s
        link[(r, dst)] = arr
        done[key] = arr
        sent.append(rec + (arr - chunks[s_size].p2p_s, arr))
        return arr

    def needs(a):
        if a.kind == F:
            return [("F", a.stage - 1, a.mb)] if a.stage > 0 else []
        if a.kind == W:
            return [("E", a.stage, a.mb)]
        return [("F", last, a.mb) if a.stage == last else ("G", a.stage + 1, a.mb)]

    moved = True
    while moved:
        moved = False
        for r in range(pp):
            while pos[r] < len(sched.order[r]):
                a = sched.order[r][pos[r]]
                leaves = a.sub if a.kind == OVERLAP_F_B else (a,)
                keys = [k for x in leaves for k in needs(x)]
                if any(k not in done for k in keys):
                    break
                start = max([free[r]] + [done[k] for k in keys])
                c = chunks[leaves[0].stage]
                if a.kind == OVERLAP_F_B:
                    cf, cb = c, chunks[leaves[1].stage]
                    comp = (cf.fwd_s - cf.a2a_fwd_s) + (cb.bwd_s - cb.a2a_bwd_s)
                    end = start + max(comp, cf.a2a_fwd_s + cb.a2a_bwd_s)
                else:
                    end = start + {F: c.fwd_s, B: c.bwd_input_s + c.bwd_weight_s,
                                   I: c.bwd_input_s, W: c.bwd_weight_s}[a.kind]
                after = end
                for x in leaves:
                    if x.kind == F:
                        if x.stage == last:
                            done[("F", x.stage, x.mb)] = end
                        else:
                            arr = send(r, x.stage + 1, end, x.stage, ("F", x.stage, x.mb),
                                       (r, rank_of(x.stage + 1), x.stage, x.mb, "F"))
                            if not overlap_p2p and a.kind != OVERLAP_F_B:
                                after = max(after, arr)
                    elif x.kind in (B, I):
                        done[("E", x.stage, x.mb)] = end
                        if x.stage > 0:
                            arr = send(r, x.stage - 1, end, x.stage - 1,
                                       ("G", x.stage, x.mb),
                                       (r, rank_of(x.stage - 1), x.stage, x.mb, "B"))
                            if not overlap_p2p and a.kind != OVERLAP_F_B:
                                after = max(after, arr)
                times[r].append((start, end))
                busy[r] += end - start
                free[r] = after
                pos[r] += 1
                moved = True
    return times, busy, free, sent


def _cases():
    for name in SCHEDULES:
        for v in VPP.get(name, (1,)):
            yield name, v


@settings(max_examples=150, deadline=None)
@given(data=st.data(), case=st.sampled_from(list(_cases())), pp=st.integers(1, 6),
       m=st.integers(1, 14), overlap=st.booleans())
def test_simulation_equals_the_plain_reference(data, case, pp, m, overlap):
    name, v = case
    try:
        sched = build_schedule(name, pp, v, m)
    except InputError:
        return
    t = st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.7, 1.0, 1.9])
    chunks = [ChunkTimes(data.draw(t), data.draw(t), data.draw(t), p2p_s=data.draw(t),
                         a2a_fwd_s=0.05, a2a_bwd_s=data.draw(st.sampled_from([0.0, 0.2])))
              for _ in range(pp * v)]
    chunks = [c if c.fwd_s >= c.a2a_fwd_s else ChunkTimes(0.05, c.bwd_input_s, c.bwd_weight_s,
                                                          p2p_s=c.p2p_s) for c in chunks]
    times, busy, free, sent = _reference(sched, chunks, overlap)
    for record in (True, False):
        res = simulate(sched, chunks, overlap_p2p=overlap, record=record)
        for r in range(pp):
            assert list(zip(res.starts[r], res.ends[r])) == times[r]
            assert res.ranks[r].busy_s == busy[r]
        assert [r.compute_end_s for r in res.ranks] == free
        assert res.step_time_s == max(free)
        # (the same transfers; the list's order is the order the simulator reached them)
        assert sorted(res.transfers) == (sorted(sent) if record else [])


def _opcodes(fn) -> int:
    n = 0

    def trace(frame, event, arg):
        nonlocal n
        frame.f_trace_opcodes = True
        if event == "opcode":
            n += 1
        return trace

    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return n


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11),
                    reason="bytecode counts are CPython 3.11's")
@pytest.mark.parametrize("name,v,budget", [("1f1b", 1, 200), ("interleaved_zb", 4, 160),
                                           ("zb_v", 2, 150), ("dualpipev", 2, 215)])
def test_event_loop_work_per_action(name, v, budget):
    pp, m = 8, 32
    sched = build_schedule(name, pp, v, m)
    chunks = uniform_chunks(pp * v, 1.0, 0.5, 0.5, act_bytes=1.0, p2p_s=0.1)
    simulate(sched, chunks, record=False)  # the schedule's encoding, once per schedule
    per_action = _opcodes(lambda: simulate(sched, chunks, record=False)) / sched.num_actions()
    assert per_action <= budget, f"{per_action:.0f} bytecodes per action"


def test_pausing_the_collector_leaves_no_young_collection_behind():
    """The objects made while the collector was paused (the walk's and the re-rank's caches)
    go to the oldest generation, which only a full collection examines, instead of waiting
    as a young generation of hundreds of thousands that the next allocation scans twice
    (0.4 s of DeepSeek-V3's 5 s search)."""
    if not gc.isenabled() or gc.get_freeze_count():
        pytest.skip("needs the collector on and nothing frozen")
    with no_gc():
        kept = [[i] for i in range(50_000)]
    assert gc.get_count()[0] < 1000  # no collection of the 50,000 pending
    assert gc.get_freeze_count() == 0  # and nothing left frozen
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(x) in oldest for x in kept[::1000])


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11),
                    reason="bytecode counts are CPython 3.11's")
@pytest.mark.parametrize("name,v,budget", [("interleaved_1f1b", 4, 50), ("interleaved_zb", 4, 50),
                                           ("dualpipev", 2, 100)])
def test_schedule_generation_work_per_action(name, v, budget):
    """Each search builds its schedules anew (23 for the 405B re-rank, 387,000 actions):
    torch's step loop with a closure call per stage and a dict per counter took 64, 68 and
    133 bytecodes per action (8 ranks, 32 micro-batches, DualPipeV 64)."""
    pp, m = 8, 64 if name == "dualpipev" else 32
    build_schedule.cache_clear()
    per_action = _opcodes(lambda: build_schedule(name, pp, v, m)) / \
        build_schedule(name, pp, v, m).num_actions()
    assert per_action <= budget, f"{per_action:.0f} bytecodes per action"
