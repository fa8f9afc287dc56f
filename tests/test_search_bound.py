"""The search's branch-and-bound floors (meshplan/search/bound.py) hold against estimate():
each lemma and theorem is checked on random plans of dense and MoE scenarios (fp8, Megatron
kernels, expert and context parallelism, virtual stages), and the pruned search returns the
same ranked plans, with the same numbers, as the same walk with no floor pruning."""

from __future__ import annotations

import random
from math import inf

import pytest

from meshplan.cost import estimate
from meshplan.errors import InputError
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.search import branch
from meshplan.search.bound import Bounds, layout_plan
from meshplan.search.search import search
from meshplan.search.space import (RECOMPUTE_ORDER, degree_choices, micro_batch_choices,
                                   schedule_choices)
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

SCENARIOS = [
    ("llama3.1-8b", "16xH100-SXM-80GB", Workload(4096, 64)),
    ("llama3.1-70b", "64xH100-SXM-80GB", Workload(8192, 128, "fp8", framework="megatron")),
    ("mixtral-8x7b", "32xH100-SXM-80GB", Workload(4096, 64)),
    ("deepseek-v3", "256xH800-SXM-80GB", Workload(4096, 512, framework="megatron")),
]
ZEROS = [1, 2, 3]


def _random_plans(name, gpus, w, n, seed):
    model, cluster = preset(name), make_cluster(gpus)
    rng = random.Random(seed)
    points = list(degree_choices(model, cluster, w, {}))
    out = []
    while len(out) < n:
        d = rng.choice(points)
        mb = rng.choice(micro_batch_choices(w, d.dp, {}))
        m = w.global_batch // (d.dp * mb)
        rows = schedule_choices(model, d.pp, m, {})
        if not rows:
            continue
        vpp, sched = rng.choice(rows)
        try:
            plan = Plan(dp=d.dp, tp=d.tp, pp=d.pp, cp=d.cp, ep=d.ep, etp=d.etp, micro_batch=mb,
                        vpp=vpp, schedule=sched, zero=rng.choice(ZEROS),
                        recompute=rng.choice(RECOMPUTE_ORDER), tp_comm_overlap=d.tp > 1)
            plan.validate(model, w, cluster.num_gpus)
        except InputError:
            continue
        out.append(plan)
    return model, cluster, out


@pytest.mark.parametrize("name,gpus,w", SCENARIOS)
def test_floors_hold_on_random_plans(name, gpus, w):
    model, cluster, plans = _random_plans(name, gpus, w, 40, hash(name) % 1000)
    bounds = Bounds(model, cluster, w, ZEROS)
    checked_memory = 0
    for plan in plans:
        est = estimate(model, cluster, w, plan)
        layout = layout_plan(plan.__dict__)
        m = est.num_microbatches
        # the layer costs the bounds use are those of the estimate (Lemma E for the dense,
        # embedding and output layers, computed with ep = etp = 1)
        # (at the plan's own expert all-to-all overlap; the floors below take Lemma O's)
        pc = bounds.costs(layout, plan.micro_batch, plan.recompute,
                          plan.ep_comm_overlap or plan.schedule == "dualpipev")
        assert pc.kinds == est.chunk_inputs[2] and pc.p2p_s == est.chunk_inputs[4]
        step = est.step_time_s
        rows = schedule_choices(model, plan.pp, m, {})
        a_plan = RECOMPUTE_ORDER.index(plan.recompute)
        b = ZEROS.index(plan.zero)
        for a0 in range(a_plan + 1):
            pc0 = bounds.costs(layout, plan.micro_batch, RECOMPUTE_ORDER[a0])
            assert bounds.point_s(pc0, m, plan.pp) <= step  # Theorem B2
            assert bounds.pipe_s(pc0, m, plan.pp, rows)[(plan.vpp, plan.schedule)] <= step  # B3
            pair = bounds.pair(layout, plan.micro_batch, m, RECOMPUTE_ORDER[a0:])
            # Theorem B1 from a ladder that starts at a lower (or the same) recomputation and
            # a lower (or the same) ZeRO stage (Lemmas R, P, Z)
            for b0 in range(b + 1):
                assert pair.floor_from(plan.vpp, plan.schedule, a_plan - a0, b0) <= step
                assert pair.floor_from(plan.vpp, plan.schedule, 0, b0) <= step
            assert pair.row_floor(plan.vpp, plan.schedule, inf) <= (step if est.fits else inf)
        # the floor at the plan's own rung is tight: only the optimizer step, the data-parallel
        # part hidden behind compute and the exposure of another rank than r* are missing
        tight = pair.time_floor(plan.vpp, plan.schedule, plan.recompute, b)
        assert pair.floor_from(plan.vpp, plan.schedule, 0, b) <= tight <= step
        assert tight >= 0.5 * step
        # Lemma Z: the floors grow along the ZeRO ladder (both overlap switches on)
        floors = pair.time_floors(plan.vpp, plan.schedule, plan.recompute)
        assert all(a <= b * (1 + 1e-12) for a, b in zip(floors, floors[1:])), floors
        # Theorem M: a rung it rules out does not fit
        if not pair.may_fit(plan.vpp, plan.schedule, plan.recompute, b):
            assert not est.fits
            checked_memory += 1
        else:
            assert pair.states_fit(plan.vpp, plan.schedule in ("zb_v", "dualpipev"), b)
    assert checked_memory or name == "llama3.1-8b"  # the memory floor is exercised


@pytest.mark.parametrize("name,gpus,w", SCENARIOS[:3])
def test_recomputation_only_adds(name, gpus, w):
    """Lemma R on the layer costs: forward, weight-gradient, compute windows, parameters and
    activations' shape are the same at every recomputation; the input-gradient pass and the
    hidden communication and the slowdown it brings grow along none -> selective -> full."""
    model, cluster, plans = _random_plans(name, gpus, w, 15, 7)
    bounds = Bounds(model, cluster, w, ZEROS)
    for plan in plans:
        layout = layout_plan(plan.__dict__)
        costs = [bounds.costs(layout, plan.micro_batch, rc).kinds for rc in RECOMPUTE_ORDER]
        for kind in range(4):
            xs = [c[kind] for c in costs]
            for a in ("fwd_s", "bwd_weight_s", "fwd_compute_s", "bwd_input_compute_s",
                      "bwd_weight_compute_s", "params", "expert_params"):
                vals = [getattr(x, a) for x in xs]  # equal up to float rounding
                assert max(vals) <= min(vals) * (1 + 1e-12) + 1e-300, (plan.describe(), kind, a)
            for a in ("bwd_input_s", "hidden_comm_s", "overlap_slowdown_s"):
                vals = [getattr(x, a) for x in xs]
                assert all(x <= y * (1 + 1e-12) for x, y in zip(vals, vals[1:])), (
                    plan.describe(), kind, a, vals)


CASES = [
    ("llama3.1-8b", "16xH100-SXM-80GB", Workload(4096, 64), 10),
    ("llama3.1-70b", "32xH100-SXM-80GB", Workload(4096, 64), 5),
    ("mixtral-8x7b", "16xH100-SXM-80GB", Workload(4096, 32), 10),
]


@pytest.mark.parametrize("name,gpus,w,k", CASES)
def test_pruned_search_ranks_as_the_plain_walk(name, gpus, w, k, monkeypatch):
    model, cluster = preset(name), make_cluster(gpus)
    pruned = search(model, cluster, w, top_k=k, rerank_k=0, simulate=False)
    monkeypatch.setattr(branch.Walk, "kth_s", lambda self: inf)  # no floor prunes anything
    plain = search(model, cluster, w, top_k=k, rerank_k=0, simulate=False)
    assert pruned.evaluated < plain.evaluated
    # the space is counted alike; rule 6's partial-recomputation tries depend on the walk
    assert (pruned.considered - pruned.partial_considered
            == plain.considered - plain.partial_considered)
    assert [(e.plan, e.step_time_s, e.peak_memory_bytes) for e in pruned.top] == \
        [(e.plan, e.step_time_s, e.peak_memory_bytes) for e in plain.top]
    assert len(pruned.top) == k


def test_plans_the_simulation_drops_are_replaced_by_the_next_best(monkeypatch):
    """When the re-rank drops head plans (their simulated activations do not fit), the next
    closed-form plans take their places: the pruned walk keeps more and walks again."""
    from meshplan.search import search as search_mod

    def dropping(model, cluster, workload, fits, k, rejected, engine=None):
        rejected["dropped by the simulation"] += len(fits[:k])
        return fits[k:], {}, len(fits[:k])

    monkeypatch.setattr(search_mod, "_rerank", dropping)
    model, cluster, w = preset("llama3.1-70b"), make_cluster("32xH100-SXM-80GB"), Workload(4096, 64)
    pins = {"pp": 2}  # pipelined plans, which the re-rank simulates (unpinned, pp=1 plans lead)
    pruned = search(model, cluster, w, pins, top_k=10, rerank_k=10)
    monkeypatch.setattr(branch.Walk, "kth_s", lambda self: inf)
    plain = search(model, cluster, w, pins, top_k=10, rerank_k=10)
    assert pruned.rejected["dropped by the simulation"] == 10
    assert [(e.plan, e.step_time_s) for e in pruned.top] == \
        [(e.plan, e.step_time_s) for e in plain.top] and len(pruned.top) == 10


PARTIAL_SCENARIOS = [  # memory-tight, where rule 6's partial recomputation is searched
    ("llama3.1-70b", "64xH100-SXM-80GB", Workload(8192, 128, "fp8", framework="megatron")),
    ("deepseek-v3", "256xH800-SXM-80GB", Workload(4096, 512, framework="megatron")),
]


@pytest.mark.parametrize("name,gpus,w", PARTIAL_SCENARIOS)
def test_partial_recomputation_floor_holds(name, gpus, w):
    """Theorem B4 against estimate() on random partial-recomputation plans (the first n
    layers of each chunk recomputed in full): the kinds are estimate()'s; B1 at n is below
    the step at n; the memory floor never rules out a plan that fits; the row's floor at the
    plan's ZeRO stage (B1 at the least n the memory floor allows) is below every fitting
    plan's step; and the floor grows with n (the bisection's premise)."""
    model, cluster, plans = _random_plans(name, gpus, w, 30, 11)
    bounds = Bounds(model, cluster, w, ZEROS)
    rng = random.Random(5)
    checked_fit = ruled_out = 0
    for plan in plans:
        most = max(plan.layer_split(model))
        if most < 2:
            continue
        n = rng.randrange(1, most)
        p = plan.with_(recompute="full", recompute_layers=n)
        est = estimate(model, cluster, w, p)
        layout = layout_plan(p.__dict__)
        m = est.num_microbatches
        pair = bounds.pair(layout, p.micro_batch, m, RECOMPUTE_ORDER)
        vs, b = (p.vpp, p.schedule), ZEROS.index(p.zero)
        assert pair._partial_kinds(p.schedule)[0] == est.chunk_inputs[2]
        step = est.step_time_s
        assert pair._partial_time(*vs, b, n) <= step
        times = [pair._partial_time(*vs, b, k) for k in range(1, most)]
        assert all(x <= y * (1 + 1e-12) for x, y in zip(times, times[1:]))
        if not pair._partial_fits(*vs, b, n):
            assert not est.fits
            ruled_out += 1
        if est.fits:
            assert pair.partial_floor(*vs, b) <= step
            checked_fit += 1
            # the cheap form (B1 at n = 1) on a fresh pair (the tight one is cached)
            fresh = bounds.pair(layout, p.micro_batch, m, RECOMPUTE_ORDER)
            assert fresh.partial_floor(*vs, b, -inf) <= pair.partial_floor(*vs, b)
    assert checked_fit and ruled_out  # both sides exercised


@pytest.mark.parametrize("shares", [(0.0, 1.0), (1.0, 0.0)])
def test_floors_hold_whatever_the_contention_shares(shares):
    """The floors carry each contention share as estimate() charges it (TP overlap at one,
    NCCL collectives and sends at the other), so they hold for any pair a profile sets."""
    from meshplan import profile
    restore = profile.apply({"NETWORK.overlap_contention": shares[0],
                             "NETWORK.collective_contention": shares[1]})
    try:
        for name, gpus, w in (SCENARIOS[0], SCENARIOS[2]):
            test_floors_hold_on_random_plans(name, gpus, w)
    finally:
        restore()
