"""Module-level selective recomputation (Plan.recompute_modules): label, validity, engines,
export, cost (time re-spent and memory freed per module), runs CSV column, search pins."""

import pytest

from meshplan.cost import estimate
from meshplan.cost.compute import device, matmul_s
from meshplan.cost.layer import modules_recompute
from meshplan.cost.ops import ACT, Shard, layer_ops
from meshplan.engines import engine_violations
from meshplan.errors import InputError
from meshplan.plan import Plan
from meshplan.plan_label import format_label, parse_label
from meshplan.recompute_modules import parse_modules
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload
from meshplan.validate import pins_from_row
from meshplan.validity import check_plan

DS3 = load_model("deepseek-v3")
Q30 = load_model("qwen3-30b-a3b")
L8 = load_model("llama3.1-8b")


def test_label_round_trip_and_old_labels_unchanged():
    p = parse_label("dp8 tp1 pp1 ep8 zero1 mb1 rc-selective-moe_act+layernorm")
    assert (p.recompute, p.recompute_modules) == ("selective", "layernorm+moe_act")
    assert format_label(p) == "dp8 tp1 pp1 ep8 zero1 mb1 rc-selective-layernorm+moe_act"
    assert parse_label(format_label(p)) == p
    for old in ("dp2 tp1 pp1 zero1 mb1 rc-selective", "dp2 tp1 pp1 zero1 mb1 rc-full",
                "dp1 tp1 pp2 zero1 mb1 rc-full3 1f1b"):
        q = parse_label(old)
        assert q.recompute_modules == "" and format_label(q) == old


@pytest.mark.parametrize("bad", ["rc-selective-foo", "rc-selective-moe+moe_act",
                                 "rc-selective-core_attn+core_attn"])
def test_bad_module_sets_refused(bad):
    with pytest.raises(InputError):
        parse_label("dp2 tp1 pp1 zero1 mb1 " + bad)


def test_modules_need_selective_and_a_model_that_has_them():
    with pytest.raises(InputError, match="selective"):
        Plan(recompute="full", recompute_modules="moe_act")
    w = Workload(seq_len=4096, global_batch=64)
    with pytest.raises(InputError, match="multi-latent"):
        check_plan(Q30, w, Plan(dp=8, ep=8, recompute="selective", recompute_modules="mla_up_proj"))
    with pytest.raises(InputError, match="dense"):
        check_plan(L8, w, Plan(dp=8, recompute="selective", recompute_modules="moe_act"))
    check_plan(Q30, w, Plan(dp=8, ep=8, recompute="selective", recompute_modules="moe_act"))
    assert parse_modules(["moe_act", "layernorm"]) == parse_modules("layernorm, moe_act")


def test_engines_and_megatron_export():
    from meshplan.export.megatron import megatron_args
    from meshplan.scenario import Scenario
    w = Workload(seq_len=4096, global_batch=64, precision="bf16")
    p = Plan(dp=8, ep=8, recompute="selective", recompute_modules="layernorm+moe_act")
    assert engine_violations("megatron", p, Q30, w) == []
    for eng in ("torchtitan", "deepspeed"):
        v = engine_violations(eng, p, Q30, w)
        assert any(x.field == "recompute_modules" for x in v)
    sc = Scenario(model=Q30, cluster=make_cluster("8xH100-SXM-80GB"), workload=w, plan=p)
    args, _ = megatron_args(sc)
    assert ("--recompute-modules", ["layernorm", "moe_act"]) in args


def _moe_ops(model, fp8=False):
    return layer_ops(model, True, Shard(4096, 1, 1, 1, False, 8, 1, fp8))


def test_freed_bytes_are_the_tensors_the_module_discards():
    T, h = 4096, Q30.hidden
    ops = _moe_ops(Q30)
    # moe_act frees the experts' activation output: rows x (ffn/etp) 16-bit values
    from meshplan.cost import efficiency
    rows = T * Q30.moe_topk * efficiency.MOE_LOAD_IMBALANCE
    assert ops.modules["moe_act"].freed_bytes == pytest.approx(ACT * rows * Q30.moe_expert_ffn)
    # layernorm (MoE layer, GQA attention): only the separate pre-MLP norm's output
    assert ops.modules["layernorm"].freed_bytes == pytest.approx(ACT * T * h)
    # MLA: q (heads x 192) and k, v (heads x (192 + 128)) after the up projections
    d = layer_ops(DS3, True, Shard(4096, 1))
    heads = DS3.heads
    qk = DS3.qk_nope_head_dim + DS3.qk_rope_head_dim
    assert d.modules["mla_up_proj"].freed_bytes == pytest.approx(
        ACT * T * heads * (qk + qk + DS3.v_head_dim))
    # no module frees more than the layer keeps
    for mr in d.modules.values():
        assert mr.freed_bytes <= d.saved_bytes + d.recomputable_bytes


def test_time_re_spent_is_the_forward_of_what_is_recomputed():
    ops = layer_ops(DS3, True, Shard(4096, 1))
    dev = device(make_cluster("8xH100-SXM-80GB").gpu, "bf16")
    rc, freed, flops, ep = modules_recompute(dev, ops, "mla_up_proj", 0.0)
    ups = [mm for mm in ops.matmuls if mm.name in ("q_up", "kv_up")]
    gemm_s = sum(matmul_s(dev, mm)[0] for mm in ups)
    assert gemm_s < rc < gemm_s * 1.5  # the GEMMs plus RoPE's bytes and 4 launch gaps
    assert flops == pytest.approx(sum(mm.flops for mm in ups)) and not ep
    rc_moe, _, _, ep_moe = modules_recompute(dev, ops, "moe", 0.0)
    assert ep_moe and rc_moe > rc
    # output-discarding element-wise modules cost far less than a checkpointed MoE layer
    rc_act, _, f_act, _ = modules_recompute(dev, ops, "layernorm+moe_act", 0.0)
    assert f_act == 0.0 and rc_act < rc_moe / 5


def test_estimate_orders_time_and_memory():
    cl = make_cluster("256xGB200")
    w = Workload(seq_len=4096, global_batch=4096, precision="bf16", framework="megatron")
    base = parse_label("dp64 tp1 pp4 vpp4 ep64 zero1 mb1 interleaved_1f1b deepep")
    e = {rc: estimate(DS3, cl, w, base.with_(**kw)) for rc, kw in {
        "none": {}, "mla": dict(recompute="selective", recompute_modules="mla_up_proj"),
        "cheap": dict(recompute="selective", recompute_modules="layernorm+mla_up_proj+moe_act"),
        "full": dict(recompute="full")}.items()}
    t = {k: v.step_time_s for k, v in e.items()}
    m = {k: v.peak_reserved_bytes for k, v in e.items()}
    assert t["none"] < t["mla"] < t["cheap"] < t["full"]
    assert m["none"] > m["mla"] > m["cheap"] > m["full"]


def test_runs_csv_column_pins_the_modules():
    pins = pins_from_row({"recompute_modules": "layernorm+mla_up_proj+moe_act"})
    assert pins["recompute"] == "selective"
    assert pins["recompute_modules"] == "layernorm+mla_up_proj+moe_act"
    with pytest.raises(InputError):
        pins_from_row({"recompute_modules": "attention"})


def test_cli_flag_implies_selective():
    import argparse
    from meshplan.commands._common import add_plan_args, plan_overrides
    ap = argparse.ArgumentParser()
    add_plan_args(ap)
    got = plan_overrides(ap.parse_args(["--plan", "dp8 tp1 pp1 ep8 zero1 mb1",
                                        "--recompute-modules", "moe_act layernorm"]))
    assert Plan(**got).recompute == "selective"
    assert Plan(**got).recompute_modules == "layernorm+moe_act"
