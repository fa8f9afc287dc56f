"""search.py's rule 7: module-level recomputation (Megatron-Core --recompute-modules) as a
second ladder of the search, for MoE models on the engines that run it.

The walk stops at the first rung that fits at the first ZeRO stage and bounds a rung by the
floor of the rungs from it on (bound.py, Theorem B1), which holds only if the step time
grows along the ladder: checked here on the estimate of real models, plan by plan, with the
activations held shrinking alike. That the pruned walk finds the exhaustive best with the
ladder in the space is tests/test_search_complete.py (its MoE scenarios)."""

import dataclasses

import pytest

from meshplan.cost import estimate
from meshplan.plan_label import parse_label
from meshplan.scenario import make_cluster
from meshplan.search.exhaustive import exhaustive_best
from meshplan.search.search import search
from meshplan.search.space import module_ladder, rung_fields
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.model import ModelSpec
from meshplan.specs.workload import Workload
from meshplan.specs.hardware import Cluster
from meshplan.specs.catalog.gpus import GPUS

DS3 = load_model("deepseek-v3")
Q235 = load_model("qwen3-235b-a22b")
MIXTRAL = load_model("mixtral-8x7b")
L8 = load_model("llama3.1-8b")


def test_ladder_names_only_modules_the_model_has():
    assert module_ladder(DS3, "megatron") == (
        "selective:moe_act", "selective:layernorm+moe_act",
        "selective:layernorm+mla_up_proj+moe_act", "selective:layernorm+mla_up_proj+moe",
        "selective:layernorm+mla_up_proj+mlp+moe")  # its 3 dense layers: mlp last
    assert module_ladder(Q235, "nemo") == (
        "selective:moe_act", "selective:layernorm+moe_act", "selective:layernorm+moe")
    # dense models, and engines without Megatron's module list: no ladder
    assert module_ladder(L8, "megatron") == ()
    for runner in ("torchtitan", "deepspeed", "maxtext", "aleph-alpha"):
        assert module_ladder(Q235, runner) == ()
    # meshplan's own runtime recomputes modules, but not the whole MoE layer under ep > 1
    assert module_ladder(Q235, "") == ("selective:moe_act", "selective:layernorm+moe_act")
    assert module_ladder(DS3, "")[-1] == "selective:layernorm+mla_up_proj+mlp+moe_act"
    assert rung_fields("selective:layernorm+moe") == {
        "recompute": "selective", "recompute_modules": "layernorm+moe"}
    assert rung_fields("full") == {"recompute": "full"}


@pytest.mark.parametrize("model, gpus, label", [
    (DS3, "256xB200", "dp16 tp1 pp16 vpp2 ep8 zero1 mb2 dualpipev"),
    (DS3, "1024xH100-SXM-80GB", "dp64 tp2 pp8 vpp4 ep64 zero1 mb1 interleaved_1f1b sp"),
    (Q235, "256xH100-SXM-80GB", "dp16 tp2 pp8 vpp2 ep8 zero1 mb4 dualpipev sp tpo"),
    (MIXTRAL, "64xH100-SXM-80GB", "dp32 tp1 pp2 ep8 zero1 mb2 1f1b"),
])
def test_time_grows_and_memory_shrinks_along_the_ladder(model, gpus, label):
    cl = make_cluster(gpus)
    w = Workload(seq_len=4096, global_batch=2048, precision="bf16", framework="megatron")
    base = parse_label(label)
    rungs = ("none",) + module_ladder(model, "megatron")
    ests = [estimate(model, cl, w, base.with_(**rung_fields(r))) for r in rungs]
    times = [e.step_time_s for e in ests]
    acts = [e.peak_memory_bytes for e in ests]
    assert all(a < b for a, b in zip(times, times[1:])), list(zip(rungs, times))
    assert all(a >= b for a, b in zip(acts, acts[1:])), list(zip(rungs, acts))
    full = estimate(model, cl, w, base.with_(recompute="full"))
    assert acts[-1] >= full.peak_memory_bytes  # full recomputation holds least


def test_search_takes_a_module_rung_where_it_wins():
    """DeepSeek-V3 on 256 B200: no recomputation does not fit; recomputing the MoE layer
    (dispatch included), the norms and the MLA up-projections beats recomputing whole
    layers, which is what the search chose before the ladder (12.47 s then, closed forms)."""
    cl = make_cluster("256xB200")
    w = Workload(seq_len=4096, global_batch=2048, precision="fp8", framework="megatron")
    r = search(DS3, cl, w, top_k=1, rerank_k=5)
    best = r.top[0].plan
    assert best.recompute == "selective" and "moe" in best.recompute_modules.split("+")
    without = search(DS3, cl, w, {"recompute": "full"}, top_k=1, rerank_k=5).top[0]
    assert r.top[0].step_time_s < 0.95 * without.step_time_s
    # an engine without module lists never gets one
    tt = search(DS3, cl, Workload(seq_len=4096, global_batch=2048, precision="bf16",
                                  framework="torchtitan"), top_k=3, rerank_k=0,
                simulate=False, engine="torchtitan")
    assert all(not e.plan.recompute_modules for e in tt.top)


def test_exhaustive_reference_enumerates_the_ladder():
    """A tiny MoE model whose activations only fit with some recomputation: the exhaustive
    best and the pruned search agree, and they recompute modules (the ladder is in both).
    The runtime's case ("") squeezes at 2.5e9 bytes, not 2.8e9, since the cost model
    charges its silu output (cost/ops.py runtime_saved; its k/v stay grouped on an H100)."""
    model = ModelSpec(name="tiny-moe", layers=2, hidden=512, heads=8, kv_heads=4, ffn=1408,
                      vocab=8192, moe_experts=4, moe_topk=2, moe_expert_ffn=512)
    found = []
    for fw, mem, seq, n, gb in (("megatron", 2.75e9, 8192, 4, 8), ("megatron", 2.8e9, 4096, 2, 4),
                                ("megatron", 2.8e9, 8192, 2, 4), ("megatron", 3.3e9, 8192, 4, 8),
                                ("", 2.5e9, 8192, 4, 8), ("megatron", 3.3e9, 4096, 2, 4)):
        gpu = dataclasses.replace(GPUS["H100-SXM-80GB"], memory_bytes=mem)
        cl, w = Cluster(gpu, n), Workload(seq, gb, "bf16", framework=fw)
        ref, _ = exhaustive_best(model, cl, w)
        r = search(model, cl, w, top_k=1, rerank_k=0, simulate=False)
        assert ref is not None and r.best is not None
        assert r.best.step_time_s == pytest.approx(ref.step_time_s, rel=5e-3)
        found.append(ref.plan.recompute_modules)
    # module rungs win where the activations just do not fit (and not where they do)
    assert all(found[:5]) and not found[-1], found
    assert "moe" in found[0].split("+") and found[4] == "moe_act"  # no whole-layer rung in ""


@pytest.mark.parametrize("name,gpus,w", [
    ("mixtral-8x7b", "32xH100-SXM-80GB", Workload(4096, 64)),
    ("deepseek-v3", "256xH800-SXM-80GB", Workload(4096, 512, framework="megatron")),
])
def test_floors_hold_on_the_module_ladder(name, gpus, w):
    """bound.py's floors on rule 7's ladder, plan by plan as test_search_bound.py checks the
    main ladder's: Theorem B1 from every rung at or below the plan's (the chain's time only
    grows), the rung's own floor tight, Lemma R (forward and weight gradient unchanged,
    input gradient growing along the chain) and Theorem M."""
    from math import inf
    from meshplan.search.bound import Bounds, layout_plan
    from test_search_bound import ZEROS, _random_plans

    model, cluster, plans = _random_plans(name, gpus, w, 25, 11)
    ladder = module_ladder(model, w.framework)
    bounds = Bounds(model, cluster, w, ZEROS)
    for k, base in enumerate(plans):
        a_plan = k % len(ladder)
        plan = base.with_(**rung_fields(ladder[a_plan]))
        est = estimate(model, cluster, w, plan)
        layout = layout_plan(plan.__dict__)
        m, b = est.num_microbatches, ZEROS.index(plan.zero)
        pc = bounds.costs(layout, plan.micro_batch, ladder[a_plan],
                          plan.ep_comm_overlap or plan.schedule == "dualpipev")
        assert pc.kinds == est.chunk_inputs[2]  # the estimate's own layer costs
        step = est.step_time_s
        for a0 in range(a_plan + 1):
            pair = bounds.pair(layout, plan.micro_batch, m, ladder[a0:])
            for b0 in range(b + 1):
                assert pair.floor_from(plan.vpp, plan.schedule, a_plan - a0, b0) <= step
                assert pair.floor_from(plan.vpp, plan.schedule, 0, b0) <= step
            assert pair.row_floor(plan.vpp, plan.schedule, inf) <= (step if est.fits else inf)
        tight = pair.time_floor(plan.vpp, plan.schedule, ladder[a_plan], b)
        assert tight <= step and tight >= 0.5 * step
        if not pair.may_fit(plan.vpp, plan.schedule, ladder[a_plan], b):
            assert not est.fits
        costs = [bounds.costs(layout, plan.micro_batch, r).kinds for r in ("none",) + ladder]
        for kind in range(2):
            xs = [c[kind] for c in costs]
            for attr in ("fwd_s", "bwd_weight_s", "params"):
                vals = [getattr(x, attr) for x in xs]
                assert max(vals) <= min(vals) * (1 + 1e-12) + 1e-300
            vals = [x.bwd_input_s for x in xs]
            assert all(x <= y * (1 + 1e-12) for x, y in zip(vals, vals[1:])), vals
