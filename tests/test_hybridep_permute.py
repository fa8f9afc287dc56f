"""HybridEP (the DeepEP-class dispatch Megatron-Core runs on rack-scale NVLink) permutes inside
its dispatch and unpermutes inside its combine (megatron-core 0.16.1 token_dispatcher.py
_HybridEPManager: get_permuted_hidden_states_by_experts / get_restored_hidden_states_by_experts
return the tensor unchanged, where _DeepepManager runs permute / unpermute): the MoE layer
has no separate permutation passes under it (layer.py fused_permutation)."""

import pytest

from meshplan.cost.layer import HYBRIDEP, fused_permutation, layer_ops_times, shaping_dispatcher
from meshplan.cost.ops import ACT, PERMUTE_KERNELS, PERMUTE_PASSES, expert_rows
from meshplan.cost.step import training_shard
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload


def _moe(gpu: str, precision: str = "bf16"):
    model = preset("deepseek-v3")
    cluster = make_cluster(gpu=gpu, num_gpus=256)
    w = Workload(4096, 4096, precision, framework="nemo")
    shard = training_shard(w, cluster, 1, 1, 1, False, 32, 1)
    return model, cluster, w, shard


def test_rack_scale_deepep_plans_shape_as_hybridep_and_node_scale_as_deepep():
    for gpu, want in (("GB200", HYBRIDEP), ("GB300", HYBRIDEP), ("B200", "")):
        model, cluster, _, shard = _moe(gpu)
        assert shaping_dispatcher(model, cluster, "moe", shard, "deepep") == want


@pytest.mark.parametrize("gpu", ["GB200", "GB300"])
def test_hybridep_drops_exactly_the_two_permutation_passes(gpu):
    # bf16: no FP8 padding, so the two shapings differ only in the permutation
    model, cluster, w, shard = _moe(gpu)
    ops, _, t = layer_ops_times(model, cluster, "moe", shard, w.precision, w.framework, "")
    ops_h, _, t_h = layer_ops_times(model, cluster, "moe", shard, w.precision, w.framework,
                                    HYBRIDEP)
    rows = expert_rows(ops)
    assert rows == 4096 * 8  # the 4,096 tokens' top-8 copies (ep 32 over 256 experts)
    assert ops.stream_bytes - ops_h.stream_bytes == pytest.approx(
        PERMUTE_PASSES * ACT * rows * model.hidden)
    assert ops.kernels - ops_h.kernels == PERMUTE_KERNELS
    assert ops.modules["moe"].stream_bytes - ops_h.modules["moe"].stream_bytes == pytest.approx(
        PERMUTE_PASSES * ACT * rows * model.hidden)
    # the GEMMs and the attention core are the same kernels
    assert [m.flops for m in ops.matmuls] == [m.flops for m in ops_h.matmuls]
    assert t_h.attn_fwd_s == t.attn_fwd_s
    assert t_h.fwd_s < t.fwd_s and t_h.bwd_input_s < t.bwd_input_s


def test_other_dispatchers_keep_their_permutation():
    model, cluster, w, shard = _moe("GB200")
    ops, _, _ = layer_ops_times(model, cluster, "moe", shard, w.precision, w.framework, "")
    before = (ops.stream_bytes, ops.kernels)
    for d in ("", "deepep", "alltoall"):
        fused_permutation(ops, model, d)
        assert (ops.stream_bytes, ops.kernels) == before


def test_permutation_bytes_are_one_read_and_one_write_each_way():
    # permute (read a copy, write it) before the experts, unpermute after: 4 passes of a
    # 16-bit hidden state per token copy, 2 kernels
    assert PERMUTE_PASSES == 4 and PERMUTE_KERNELS == 2


# ---- a run may state HybridEP off rack-scale NVLink (plan.MOE_DISPATCHERS "hybridep") -------

def test_stated_hybridep_shapes_as_hybridep_on_8_gpu_nodes_too():
    model, cluster, _, shard = _moe("B200")
    assert shaping_dispatcher(model, cluster, "moe", shard, "hybridep") == HYBRIDEP
    assert shaping_dispatcher(model, cluster, "moe", shard, "deepep") == ""


def test_hybridep_exchanges_what_the_deepep_class_exchanges():
    from meshplan.cost.moe_comm import copies_per_token, dispatch_bytes_per_element, exchange_s
    from meshplan.cost.step import placements
    from meshplan.plan import Plan
    model = preset("deepseek-v3")
    cluster = make_cluster(gpu="B200", num_gpus=256)
    place = placements(Plan(dp=16, pp=16, ep=8, moe_dispatcher="deepep"), cluster)["ep"]
    assert copies_per_token(model, place, "hybridep") == copies_per_token(model, place, "deepep")
    assert exchange_s(cluster, place, model, 4096, "hybridep", 2) == exchange_s(
        cluster, place, model, 4096, "deepep", 2)
    assert exchange_s(cluster, place, model, 4096, "hybridep", 2) != exchange_s(
        cluster, place, model, 4096, "alltoall", 2)
    assert dispatch_bytes_per_element("hybridep", "fp8", "nemo") == dispatch_bytes_per_element(
        "deepep", "fp8", "nemo")


def test_hybridep_holds_no_deepep_buffers_and_is_not_refused_for_its_group():
    from meshplan.cost.dispatcher_buffers import deepep_group_refusal, dispatcher_buffer_bytes
    assert dispatcher_buffer_bytes(7168, "deepep", 8, 1, 8) > 0
    assert dispatcher_buffer_bytes(7168, "hybridep", 8, 1, 8) == 0
    assert deepep_group_refusal("hybridep", 12, 1, 8) is None


def test_a_stated_hybridep_step_on_b200_drops_the_pad_copies_and_the_permutation():
    from meshplan.cost.step import estimate
    from meshplan.plan import Plan
    model = preset("deepseek-v3")
    cluster = make_cluster(gpu="B200", num_gpus=256)
    w = Workload(4096, 4096, "fp8", framework="nemo", fp8_recipe="mx")
    de = estimate(model, cluster, w, Plan(dp=16, pp=16, ep=8, moe_dispatcher="deepep"))
    hy = estimate(model, cluster, w, Plan(dp=16, pp=16, ep=8, moe_dispatcher="hybridep"))
    assert hy.step_time_s < de.step_time_s
    assert hy.step_time.parts["ep_exposed_s"] == pytest.approx(de.step_time.parts["ep_exposed_s"])
    assert hy.model_flops_per_step == de.model_flops_per_step


def test_hybridep_reads_back_from_its_label():
    from meshplan.plan import Plan
    from meshplan.plan_label import format_label, parse_label
    p = Plan(dp=16, pp=16, ep=8, moe_dispatcher="hybridep")
    assert "hybridep" in format_label(p)
    assert parse_label(format_label(p)).moe_dispatcher == "hybridep"
