"""Schedules as data: generators, invariants, the torch vocabulary and CSV format.

Independent truths used here: torch.distributed.pipelining's own schedule classes (their
``pipeline_order``), its validator ``_validate_schedule``, its lowering ``_add_send_recv``
and its parser ``_Action.from_str``; the memory claims of the papers (1F1B holds p - r
micro-batches on rank r; interleaving multiplies the first stage's by 1 + (p-1)/(p v)).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.errors import InputError
from meshplan.pipeline.actions import (B, F, I, W, Action, format_csv, parse_action,
                                       read_csv)
from meshplan.pipeline.check import (check_schedule, in_flight_peaks,
                                     promised_in_flight)
from meshplan.pipeline.lowering import add_send_recv
from meshplan.pipeline.schedules import (Schedule, ScheduleError, build_schedule,
                                         check_inputs, schedule_for_plan)
from meshplan.plan import SCHEDULES, Plan

VPPS = {"gpipe": (1,), "1f1b": (1,), "zb_h1": (1,), "zb_v": (2,), "dualpipev": (2,),
        "interleaved_1f1b": (2, 3, 4), "looped_bfs": (2, 3), "interleaved_zb": (2, 3)}


def _valid_cases():
    for name in SCHEDULES:
        for pp in (2, 3, 4, 6):
            for v in VPPS[name]:
                for m in (pp, pp + 1, 2 * pp, 3 * pp):
                    try:
                        build_schedule(name, pp, v, m)
                    except InputError:
                        continue
                    yield name, pp, v, m


CASES = list(_valid_cases())


@st.composite
def schedule_inputs(draw):
    name = draw(st.sampled_from(SCHEDULES))
    pp = draw(st.integers(2, 9))
    v = draw(st.sampled_from(VPPS[name]))
    m = draw(st.integers(1, 4 * pp + 3))
    return name, pp, v, m


# ---- generators satisfy the invariants ---------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(schedule_inputs())
def test_every_generated_schedule_passes_the_checker(args):
    try:
        sched = build_schedule(*args)
    except InputError:
        return  # the generator refused: tested separately below
    report = check_schedule(sched)
    assert len(report.peak_in_flight) == sched.pp


@pytest.mark.parametrize("name,pp,v,m", [c for c in CASES if c[3] >= 2 * c[1]])
def test_in_flight_is_exactly_what_the_schedule_promises(name, pp, v, m):
    sched = build_schedule(name, pp, v, m)
    peaks = in_flight_peaks(sched).peak_in_flight
    assert peaks == [promised_in_flight(name, pp, v, m, r) for r in range(pp)]


def test_in_flight_matches_the_papers():
    p, m = 8, 32
    # 1F1B: rank r holds p - r micro-batches (Narayanan et al. 2021, sec. 2.2.1)
    assert in_flight_peaks(build_schedule("1f1b", p, 1, m)).peak_in_flight == \
        [p - r for r in range(p)]
    # GPipe holds all m
    assert set(in_flight_peaks(build_schedule("gpipe", p, 1, m)).peak_in_flight) == {m}
    # interleaving: first stage holds p * (1 + (p-1)/(p v)) stages' worth (Korthikanti 2022)
    for v in (2, 4):
        peak0 = in_flight_peaks(build_schedule("interleaved_1f1b", p, v, m)).peak_in_flight[0]
        assert peak0 / v == pytest.approx(p * (1 + (p - 1) / (p * v)))
    # ZB-H1 and ZB-V keep 1F1B's first-stage peak (Qi et al. 2023): p stages' worth
    assert set(in_flight_peaks(build_schedule("zb_h1", p, 1, m)).peak_in_flight) == {p}
    assert set(in_flight_peaks(build_schedule("zb_v", p, 2, m)).peak_in_flight) == {2 * p}


def test_schedules_place_stages_as_the_plan_does():
    for name in SCHEDULES:
        v = VPPS[name][-1]
        plan = Plan(pp=4, vpp=v, schedule=name)
        sched = schedule_for_plan(plan, 8)
        for r in range(4):
            for a in sched.order[r]:
                for x in a.leaves():
                    assert x.stage in [plan.chunk_of(r, c) for c in range(v)]


def test_split_backward_only_in_zero_bubble_schedules():
    for name in SCHEDULES:
        sched = build_schedule(name, 4, VPPS[name][0], 8)
        kinds = {x.kind for acts in sched.order.values() for a in acts for x in a.leaves()}
        if name in ("gpipe", "1f1b", "interleaved_1f1b", "looped_bfs"):
            assert kinds == {F, B}
        else:
            assert {I, W} <= kinds


# ---- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("args,field", [
    (("nope", 4, 1, 8), "schedule"),
    (("dualpipev", 4, 2, 7), "num_microbatches"),   # needs m >= 2 * pp
    (("interleaved_1f1b", 4, 2, 9), "num_microbatches"),  # 9 % (9 // 4) != 0
    (("interleaved_1f1b", 4, 1, 8), "vpp"),
    (("zb_v", 4, 3, 8), "vpp"),
    (("1f1b", 4, 2, 8), "vpp"),
    (("interleaved_1f1b", 1, 2, 8), "vpp"),
    (("1f1b", 0, 1, 8), "pp"),
])
def test_impossible_inputs_raise_input_error(args, field):
    with pytest.raises(InputError) as e:
        build_schedule(*args)
    assert e.value.field == field
    assert "\n" not in str(e.value)


def test_dualpipev_needs_as_many_microbatches_as_stages():
    build_schedule("dualpipev", 4, 2, 8)
    with pytest.raises(InputError, match="at least 8"):
        build_schedule("dualpipev", 4, 2, 7)


# ---- the checker can fail --------------------------------------------------------------------

def _mutate(sched: Schedule, rank: int, new: list[Action]) -> Schedule:
    order = dict(sched.order)
    order[rank] = new
    return dataclasses.replace(sched, order=order)


def test_checker_rejects_broken_schedules():
    s = build_schedule("1f1b", 4, 1, 8)
    acts = list(s.order[1])
    with pytest.raises(ScheduleError, match="missing"):
        check_schedule(_mutate(s, 1, acts[:-1]))
    with pytest.raises(ScheduleError, match="twice"):
        check_schedule(_mutate(s, 1, acts + [acts[0]]))
    with pytest.raises(ScheduleError, match="before its forward"):
        check_schedule(_mutate(s, 1, [Action(1, B, 0)] + [a for a in acts if a != Action(1, B, 0)]))
    with pytest.raises(ScheduleError, match="lives on"):
        check_schedule(_mutate(s, 1, [Action(2, F, 0)] + acts))
    # backwards in reverse micro-batch order on rank 0: waits for 0B7 whose input needs F7
    # from rank 0 after it -> deadlock (rank 1 finishes only in the given order)
    f = [a for a in s.order[0] if a.kind == F]
    b = [a for a in s.order[0] if a.kind == B]
    bad = f[:1] + b[:1] + f[1:] + b[1:]
    with pytest.raises(ScheduleError, match="deadlock"):
        check_schedule(_mutate(s, 0, bad))
    # valid but holds more than 1F1B promises: GPipe order on rank 0 labelled 1f1b
    gp = build_schedule("gpipe", 4, 1, 8)
    with pytest.raises(ScheduleError, match="promises"):
        check_schedule(_mutate(s, 0, list(gp.order[0])))


# ---- torch's vocabulary, format, and schedules ------------------------------------------------

def test_action_strings_round_trip():
    for text in ("0F1", "12B0", "3I7", "3W7", "2SEND_F5", "4RECV_B0", "1REDUCE_GRAD",
                 "(0F3;7B1)OVERLAP_F_B"):
        assert str(parse_action(text)) == text
    assert parse_action("  ") is None
    with pytest.raises(InputError):
        parse_action("F1")
    with pytest.raises(InputError):
        parse_action("0X1")


def test_csv_round_trip():
    sched = build_schedule("dualpipev", 3, 2, 6)
    text = format_csv(sched.order)
    assert read_csv(text, text=True) == sched.order
    assert len(text.splitlines()) == 3




def _torch():
    return pytest.importorskip("torch.distributed.pipelining.schedules")


def _torch_order(S, name: str, pp: int, v: int, m: int):
    cls = {"gpipe": S.ScheduleGPipe, "1f1b": S.Schedule1F1B,
           "interleaved_1f1b": S.ScheduleInterleaved1F1B, "looped_bfs": S.ScheduleLoopedBFS,
           "zb_h1": S.ScheduleInterleavedZeroBubble,
           "interleaved_zb": S.ScheduleInterleavedZeroBubble,
           "zb_v": S.ScheduleZBVZeroBubble, "dualpipev": S.ScheduleDualPipeV}[name]
    if name in ("gpipe", "1f1b"):
        stage = SimpleNamespace(num_stages=pp, group_size=pp, group_rank=0, submod=None)
        order = cls(stage, m).pipeline_order
    else:  # stand-in stages: the classes read only these fields to build their lists
        stages = [SimpleNamespace(num_stages=pp * v, group_size=pp, group_rank=0,
                                  submod=None) for _ in range(v)]
        order = cls(stages, m).pipeline_order
    return {r: [str(a) for a in order[r]
                if a is not None and a.computation_type.value != "REDUCE_GRAD"]
            for r in order}


@pytest.mark.parametrize("name,pp,v,m", CASES)
def test_lists_equal_torch_schedule_classes(name, pp, v, m):
    S = _torch()
    theirs = _torch_order(S, name, pp, v, m)
    ours = {r: [str(a) for a in acts] for r, acts in build_schedule(name, pp, v, m).order.items()}
    if name == "1f1b":
        # torch 2.13's Schedule1F1B._get_pipeline_order (a drawing aid; the runtime does not
        # use it) numbers the last rank's forwards from 1 (``3F1 ... 3F8`` for m = 8);
        # compare the other ranks and check torch's last row is the one that is off.
        assert theirs[pp - 1][0] == f"{pp - 1}F1"
        theirs.pop(pp - 1)
        ours.pop(pp - 1)
    assert ours == theirs


def test_torch_refuses_what_we_refuse():
    # torch's own micro-batch floors are check_inputs' torch rules (the runtime's check);
    # the generators write 1F1B with m < pp too (Megatron-Core and DeepSpeed run it)
    S = _torch()
    for args in (("dualpipev", 4, 2, 7), ("1f1b", 4, 1, 3), ("interleaved_1f1b", 4, 2, 9)):
        with pytest.raises(ValueError):
            _torch_order(S, *args)
        with pytest.raises(InputError):
            check_inputs(*args)
    for args in (("dualpipev", 4, 2, 7), ("interleaved_1f1b", 4, 2, 9)):
        with pytest.raises(InputError):
            build_schedule(*args)
    # torch takes what its floors let through (m < pp in interleaved rounds of 1)
    for args in (("interleaved_1f1b", 4, 2, 3), ("zb_v", 4, 2, 3), ("1f1b", 4, 1, 4)):
        check_inputs(*args)
        _torch_order(S, *args)


@pytest.mark.parametrize("pp,m", [(2, 1), (4, 1), (4, 2), (4, 3), (8, 5)])
def test_one_f_one_b_with_fewer_microbatches_than_stages(pp, m):
    # Megatron-Core's forward_backward_pipelining_without_interleaving (and DeepSpeed's
    # TrainSchedule) warm up min(pp - rank - 1, m) forwards, then F/B pairs, then the rest of
    # the backwards: the lists are exactly that, pass every invariant, and rank r holds
    # min(pp - r, m) micro-batches (DeepSpeed's num_pipe_buffers: min(stages - stage_id, m))
    sched = build_schedule("1f1b", pp, 1, m)
    check_schedule(sched)
    for r in range(pp):
        warm = min(pp - r - 1, m)
        expect = ([f"{r}F{i}" for i in range(warm)]
                  + [x for i in range(m - warm) for x in (f"{r}F{warm + i}", f"{r}B{i}")]
                  + [f"{r}B{i}" for i in range(m - warm, m)])
        assert [str(a) for a in sched.order[r]] == expect
    assert in_flight_peaks(sched).peak_in_flight == [min(pp - r, m) for r in range(pp)]
    with pytest.raises(InputError, match="at least"):
        check_inputs("1f1b", pp, 1, m)  # torch's Schedule1F1B: m >= pp


@pytest.mark.parametrize("name,pp,v,m", [c for c in CASES if c[1] in (2, 4)])
def test_torch_validator_and_lowering_accept_our_lists(name, pp, v, m):
    S = _torch()
    sched = build_schedule(name, pp, v, m)
    as_torch = {r: [S._Action.from_str(str(a)) for a in acts]
                for r, acts in sched.order.items()}
    mapping = S._validate_schedule(as_torch, pp, pp * v, m)
    assert mapping == {s: sched.stage_to_rank(s) for s in range(pp * v)}
    lowered = S._add_send_recv({r: list(a) for r, a in as_torch.items()},
                               stage_to_rank=lambda s: mapping[s], num_stages=pp * v)
    ours = add_send_recv(sched)
    assert {r: [str(a) for a in acts] for r, acts in lowered.items()} == \
        {r: [str(a) for a in acts] for r, acts in ours.items()}
    # torch's own dry run of the lowered lists finds no deadlock (it does not understand
    # OVERLAP_F_B containers, so DualPipeV is covered by our checker only)
    if name != "dualpipev":
        S._simulate_comms_compute(lowered, lambda s: mapping[s], pp * v)


def test_csv_loads_in_torch_runtime_parser(tmp_path):
    S = _torch()
    sched = build_schedule("interleaved_zb", 2, 2, 4)
    path = tmp_path / "s.csv"
    path.write_text(format_csv(sched.order))
    import csv
    with open(path, newline="") as fh:  # exactly what _PipelineScheduleMulti._load_csv does
        rows = {r: [S._Action.from_str(c) for c in row] for r, row in enumerate(csv.reader(fh))}
    assert {r: [str(a) for a in row] for r, row in rows.items()} == \
        {r: [str(a) for a in acts] for r, acts in sched.order.items()}
