"""Partial activation recomputation (Plan.recompute_layers = N: the first N layers of each model
chunk recomputed in full, the others not at all; Megatron-LM's --recompute-method block).

Truth used: the closed forms of the cost model's own endpoints. Recomputing N of a chunk's L
layers must cost exactly N/L of full recomputation's extra forward work and hold exactly the
activations interpolated linearly between no recomputation (N = 0) and full (N = L); N = L must
reproduce recompute full part for part. Megatron's option table (tests/data) checks the flags."""

from __future__ import annotations

import pytest

from export_cases import scenario
from meshplan.cost import estimate
from meshplan.cost.step import _chunk_counts
from meshplan.engines import engine_violations
from meshplan.errors import InputError
from meshplan.export import render
from meshplan.export._common import script_args
from meshplan.plan import Plan
from meshplan.plan_label import format_label, parse_label
from meshplan.scenario import make_cluster
from meshplan.search.search import search
from meshplan.specs.catalog.presets import preset
from meshplan.specs.model import ModelSpec
from meshplan.specs.workload import Workload
from meshplan.validity import check_pins
from test_export import parse_megatron

MODEL = ModelSpec("toy", 16, 2048, 16, 8, 5632, 32000)
CLUSTER = make_cluster("8xH100-SXM-80GB")
WORK = Workload(4096, 32, framework="megatron")
BASE = dict(dp=2, tp=2, pp=2, vpp=2, micro_batch=1)  # 4 chunks of 4 layers each
L = 4


def _est(**kw) -> object:
    return estimate(MODEL, CLUSTER, WORK, Plan(**BASE, **kw))


def test_label_round_trip_and_token():
    p = Plan(**BASE, recompute="full", recompute_layers=3)
    assert "rc-full3" in format_label(p).split()
    assert parse_label(format_label(p)) == p
    assert parse_label("dp2 tp2 pp2 vpp2 zero1 mb1 rc-full3 interleaved_1f1b sp") == p


def test_plan_and_validity_rules():
    with pytest.raises(InputError, match="needs recompute='full'"):
        Plan(recompute="selective", recompute_layers=2)
    with pytest.raises(InputError, match="must be an integer >= 0"):
        Plan(recompute="full", recompute_layers=-1)
    # N must be below the fullest chunk's layers (N = L is recompute full)
    with pytest.raises(InputError, match="below the 4 layers"):
        _est(recompute="full", recompute_layers=L)
    _est(recompute="full", recompute_layers=L - 1)  # valid
    # pins: refused with the rule, not "no plan fits"
    with pytest.raises(InputError, match="needs recompute='full'"):
        check_pins(MODEL, WORK, 8, {"recompute": "none", "recompute_layers": 2})
    with pytest.raises(InputError, match="below the 8 layers"):
        check_pins(MODEL, WORK, 8, {"pp": 2, "recompute_layers": 8})


def test_time_rises_and_memory_falls_with_n_between_none_and_full():
    none, full = _est(), _est(recompute="full")
    parts = [_est(recompute="full", recompute_layers=n) for n in range(1, L)]
    ladder = [none] + parts + [full]
    steps = [e.step_time_s for e in ladder]
    assert all(a < b for a, b in zip(steps, steps[1:])), steps
    mems = [e.peak_memory_bytes for e in parts + [full]]  # from N = 1 on (see below)
    assert all(a > b for a, b in zip(mems, mems[1:])), mems
    r = none.bottleneck_rank
    act_none = none.memory[r].parts["activations"]
    act_full = full.memory[r].parts["activations"]
    rc_full = full.step_time.parts["recompute_s"]
    for n, e in enumerate(parts, start=1):
        # exactly N/L of full recomputation's extra work, and of its activation savings
        assert e.step_time.parts["recompute_s"] == pytest.approx(n / L * rc_full, rel=1e-12)
        assert e.memory[r].parts["activations"] == pytest.approx(
            act_none + n / L * (act_full - act_none), rel=1e-12)
        # a recomputed layer's backward holds its recomputed activations, as under full
        assert e.memory[r].parts["activation_working_set"] == \
            full.memory[r].parts["activation_working_set"]
        # the compute that is not recomputation does not change
        assert e.step_time.parts["compute_s"] == pytest.approx(
            none.step_time.parts["compute_s"], rel=1e-12)


def test_all_layers_equals_full_exactly(monkeypatch):
    """N = L (refused by validity as a second name for recompute full) costs what full does."""
    monkeypatch.setattr("meshplan.validity._recompute_rules", lambda model, plan: None)
    full = _est(recompute="full")
    every = _est(recompute="full", recompute_layers=L)
    assert every.step_time.parts == full.step_time.parts
    assert every.memory[0].parts == full.memory[0].parts
    assert every.hw_flops_per_step == full.hw_flops_per_step


def test_first_layers_of_each_chunk_are_the_recomputed_ones():
    # DeepSeek-like: 3 dense layers first, then MoE; 8 layers in chunks of 4
    m = ModelSpec("toy-moe", 8, 1024, 8, 8, 2816, 32000, moe_experts=4, moe_topk=2,
                  moe_expert_ffn=512, moe_dense_layers=3)
    # (dense kept, moe kept, embedding, head, dense recomputed, moe recomputed)
    assert _chunk_counts(m, (4, 4), 2) == [(1, 1, 1, 0, 2, 0), (0, 2, 0, 1, 0, 2)]
    assert _chunk_counts(m, (4, 4), 0) == [(3, 1, 1, 0, 0, 0), (0, 4, 0, 1, 0, 0)]


def test_engines_and_exports():
    sc = scenario("llama3.1-70b", "64xH100-SXM-80GB", 8192, 512, dp=2, tp=8, pp=4, vpp=2,
                  recompute="full", recompute_layers=3)
    assert engine_violations("megatron", sc.plan, sc.model, sc.workload, sc.cluster) == []
    text = render(sc, "megatron").files["megatron_launch.sh"]
    ns = parse_megatron(script_args(text))  # Megatron-LM's own option table and choices
    assert (ns.recompute_granularity, ns.recompute_method, ns.recompute_num_layers) == \
        ("full", "block", "3")
    full = scenario("llama3.1-70b", "64xH100-SXM-80GB", 8192, 512, dp=2, tp=8, pp=4, vpp=2,
                    recompute="full")
    ns = parse_megatron(script_args(render(full, "megatron").files["megatron_launch.sh"]))
    assert (ns.recompute_method, ns.recompute_num_layers) == ("uniform", "1")
    for engine in ("torchtitan", "deepspeed"):
        v = engine_violations(engine, sc.plan, sc.model, sc.workload, sc.cluster)
        assert [x.field for x in v if x.field == "recompute_layers"] == ["recompute_layers"]
    tt = scenario("llama3.1-8b", "8xH100-SXM-80GB", 8192, 64, dp=8, zero=3, recompute="full",
                  recompute_layers=4)
    with pytest.raises(InputError, match="torchtitan 0.3 applies one activation-checkpointing"):
        render(tt, "torchtitan")


def test_search_takes_the_partial_ladder_only_where_it_wins():
    m, c = preset("llama3.1-8b"), make_cluster("8xH100-SXM-80GB")
    w = Workload(8192, 64, framework="megatron")
    pins = {"dp": 8, "tp": 1, "pp": 1, "micro_batch": 2}
    free = search(m, c, w, pins, top_k=1, simulate=False)
    best = free.best.plan
    assert best.recompute == "full" and 0 < best.recompute_layers < m.layers
    # no recomputation does not fit there, every layer recomputed is slower
    assert search(m, c, w, dict(pins, recompute="none"), top_k=1, simulate=False).best is None
    full = search(m, c, w, dict(pins, recompute="full"), top_k=1, simulate=False).best
    assert full.step_time_s > free.best.step_time_s
    # one fewer layer recomputed does not fit at the winner's ZeRO stage (fewest that fit)
    fewer = estimate(m, c, w, best.with_(recompute_layers=best.recompute_layers - 1))
    assert not fewer.fits
    assert free.considered == free.fitting + sum(free.rejected.values())
    # where no recomputation fits at the lowest ZeRO stage, no partial plan is tried
    roomy = search(m, c, Workload(1024, 64, framework="megatron"), pins, top_k=3,
                   simulate=False)
    assert all(e.plan.recompute_layers == 0 for e in roomy.top)
    assert not any("fewer layers" in k for k in roomy.rejected)
