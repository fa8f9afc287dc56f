"""torchtitan's tensor parallelism as its code runs it (cost/engine_titan_tp.py, the float8
TP of cost/fp8_recipe.py Fp8Recipe.tp_float8_gather):
- async TP hides only the collectives torch._inductor's micro-pipeline TP pass fuses. The
  rules are checked on the library's own pattern functions (torch/_inductor/fx_passes/
  micro_pipeline_tp.py ``_find_producer_matmul``, ``_find_consumer_matmuls``) on graphs
  shaped like a torchtitan Llama block's, then the layer cost is checked to hide exactly the
  fusable collectives' share of each pass;
- per-op selective checkpointing runs the block's input all-gathers again in backward
  (torchtitan ``_save_list`` has no all-gather; torch/_functorch/partitioners.py
  ``must_recompute`` counts PREFER_RECOMPUTE, so force_save_collectives leaves them);
- tensorwise float8 TP casts the block input on the shard and all-gathers FP8 (torchao
  float8_tensor_parallel.py), rowwise gathers 16-bit and casts per module."""

import pytest

from meshplan.cost.collectives import all_gather_s
from meshplan.cost.efficiency import NETWORK
from meshplan.cost import fp8_recipe
from meshplan.cost.engine_titan_tp import async_tp_shares, sac_regathers
from meshplan.cost.ops import Shard, layer_ops
from meshplan.specs.catalog.presets import preset
from meshplan.cost.layer import CommPlacements, layer_cost, layer_ops_times
from meshplan.cost.step import placements, training_shard
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.model import ModelSpec
from meshplan.specs.workload import Workload


def _graph(fn, *shapes):
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(fn)(*[torch.randn(*s) for s in shapes]).graph


def _nodes(graph, name):
    return [n for n in graph.nodes if n.op == "call_function" and name in str(n.target)]


def test_input_gradient_sum_is_no_producer_matmul():
    """Backward of the q/k/v input all-gather: the reduce-scatter's input is the sum of three
    matmuls (autograd accumulates the gathered input's three uses): not fusable; a single
    matmul's output (wo / w2 forward) is."""
    mp = pytest.importorskip("torch._inductor.fx_passes.micro_pipeline_tp")
    g = _graph(lambda dq, dk, dv, wq, wk, wv: dq @ wq + dk @ wk + dv @ wv,
               (64, 32), (64, 8), (64, 8), (32, 48), (8, 48), (8, 48))
    out = [n for n in g.nodes if n.op == "output"][0].args[0]
    out = out[0] if isinstance(out, (tuple, list)) else out
    assert "add" in str(out.target)
    assert mp._find_producer_matmul(out) is None
    mm = _nodes(g, "aten.mm")[0]
    assert mp._find_producer_matmul(mm) is not None


def test_gathered_input_feeds_matmuls_in_16_bit_but_casts_under_rowwise():
    """Forward: the gathered input's users are wq, wk, wv (fusable); when the linear
    quantises it first (rowwise: TP all-gathers in 16-bit), its users are the cast's
    element-wise ops and no matmul is found."""
    torch = pytest.importorskip("torch")
    mp = pytest.importorskip("torch._inductor.fx_passes.micro_pipeline_tp")

    def plain(x, wq, wk, wv):
        x = x * 1.0  # stands for the all-gather's result node
        return x @ wq, x @ wk, x @ wv

    def quantised(x, wq):
        x = x * 1.0
        scale = 448.0 / x.abs().amax(dim=1, keepdim=True)
        return ((x * scale).clamp(-448, 448)) @ wq  # the cast's arithmetic, then the GEMM

    g = _graph(plain, (64, 32), (32, 48), (32, 8), (32, 8))
    x = _nodes(g, "aten.mul")[0]
    assert len(mp._find_consumer_matmuls(x)) == 3
    g = _graph(quantised, (64, 32), (32, 48))
    x = _nodes(g, "aten.mul")[0]
    assert mp._find_consumer_matmuls(x) == []
    del torch


@pytest.mark.parametrize("recipe, shares", [("", (1.0, 0.5)), ("tensorwise", (1.0, 0.5)),
                                            ("rowwise", (0.5, 0.0)), ("mx", (0.5, 0.0))])
def test_shares_by_recipe(recipe, shares):
    assert async_tp_shares("torchtitan", "dense", recipe) == shares


@pytest.mark.parametrize("engine, kind", [("megatron", "dense"), ("nemo", "dense"),
                                          ("torchtitan", "moe"), ("torchtitan", "head")])
def test_other_engines_and_layers_keep_the_uniform_share(engine, kind):
    assert async_tp_shares(engine, kind, "") is None


MODEL = ModelSpec(name="8B", layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336,
                  vocab=128256, mlp="swiglu")
CLUSTER = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)


def _cost(engine, precision="bf16", recipe="", recompute="selective", tp_overlap=True):
    wl = Workload(8192, 2, precision, framework=engine, fp8_recipe=recipe)
    plan = Plan(dp=1, tp=8, pp=1, micro_batch=2, recompute=recompute, sequence_parallel=True)
    shard = training_shard(wl, CLUSTER, 2, 8, 1, True, 1, 1)
    pl = placements(plan, CLUSTER)
    places = CommPlacements(pl["tp"], pl["cp"], pl["ep"], pl["etp"])
    c = layer_cost(MODEL, CLUSTER, "dense", shard, recompute, places, tp_overlap, precision,
                   "ring", engine)
    ops, _, _ = layer_ops_times(MODEL, CLUSTER, "dense", shard, precision, engine)
    half = ops.tp_collectives / 2  # all-gathers (and as many reduce-scatters) a pass
    rs = all_gather_s(CLUSTER, pl["tp"], ops.tp_buffer_bytes)  # the same time (16-bit)
    fp8_ag = engine == "torchtitan" and recipe == "tensorwise"  # torchao float8 TP
    ag = all_gather_s(CLUSTER, pl["tp"], ops.tp_buffer_bytes / (2 if fp8_ag else 1))
    return c, half * (ag + rs), half * ag


@pytest.mark.parametrize("precision, recipe, fwd, bwd", [
    ("bf16", "", 1.0, 0.5), ("fp8", "tensorwise", 1.0, 0.5), ("fp8", "rowwise", 0.5, 0.0)])
@pytest.mark.parametrize("recompute, passes", [("selective", 2), ("full", 3)])
def test_torchtitan_layer_hides_the_fused_collectives_only(precision, recipe, fwd, bwd,
                                                           recompute, passes):
    c, tp_pass, gathers = _cost("torchtitan", precision, recipe, recompute)
    regather = gathers if recompute == "selective" else 0.0  # per-op SAC: once more
    assert c.tp_wire_s == pytest.approx(passes * tp_pass + regather)
    hidden = NETWORK.tp_overlap * (tp_pass * (fwd * (passes - 1) + bwd)
                                   + (regather if fwd == 1.0 else 0.0))
    assert c.tp_exposed_s == pytest.approx(c.tp_wire_s - hidden)
    assert c.fwd_exposed_s == pytest.approx(tp_pass * (1 - NETWORK.tp_overlap * fwd))


def test_megatron_userbuffers_keep_the_uniform_share():
    c, tp_pass, _ = _cost("megatron")
    assert c.tp_wire_s == pytest.approx(2 * tp_pass)  # Megatron's selective re-gathers nothing
    assert c.tp_exposed_s == pytest.approx((1 - NETWORK.tp_overlap) * c.tp_wire_s)


@pytest.mark.parametrize("engine, recompute, modules, regathers", [
    ("torchtitan", "selective", "", True), ("torchtitan", "full", "", False),
    ("torchtitan", "none", "", False), ("torchtitan", "selective", "core_attn", False),
    ("megatron", "selective", "", False), ("deepspeed", "selective", "", False)])
def test_only_torchtitan_op_sac_regathers(engine, recompute, modules, regathers):
    assert sac_regathers(engine, "dense", recompute, modules) is regathers


def test_vanilla_tp_exposes_the_regathers():
    c, tp_pass, gathers = _cost("torchtitan", tp_overlap=False)
    assert c.tp_exposed_s == pytest.approx(c.tp_wire_s) == pytest.approx(2 * tp_pass + gathers)


def _cast_bytes(recipe, tp, sp=True):
    m = preset("llama3.1-8b")
    r = fp8_recipe.resolve("fp8", recipe, "torchtitan", "hopper")
    ops = layer_ops(m, False, Shard(8192, 1, tp=tp, sp=sp, fp8=True, fp8_recipe=r))
    return ops.fp8_fwd_bytes, ops.fp8_bwd_bytes


def test_float8_tp_casts_the_shard_once_and_copies_the_gathered_tensor():
    """Tensorwise under TP 8 with SP: wq/wk/wv's input and w1/w3's input are cast once on the
    1/8 shard (max_abs read 2 + read 2 + FP8 write 1 bytes), then the gathered FP8 tensor
    gets its column-major copy (read 1 + write 1); not 3 and 2 casts of the gathered tensor
    at 6 bytes. The weights and the other inputs are as without float8 TP."""
    T, h, f, kv, tp = 8192, 4096, 14336, 1024, 8
    fwd, bwd = _cast_bytes("tensorwise", tp)
    weights = (h * (h + 2 * kv) + h * h + 2 * f * h + f * h) / tp
    gathered = T * h * (5 / tp + 2)  # each of the two gathered inputs
    others = 6 * T * (h / tp + f / tp)  # wo's and w2's inputs (already sharded on k)
    assert fwd == pytest.approx(2 * gathered + others + 8 * weights)
    # without SP the float8 TP path does not apply: per-module casts of the full input
    fwd_nosp, _ = _cast_bytes("tensorwise", tp, sp=False)
    assert fwd_nosp == pytest.approx(6 * T * (3 * h + h / tp + 2 * h + f / tp) + 8 * weights)
    # rowwise keeps 16-bit TP: its casts are those of the gathered tensor, per module
    assert _cast_bytes("rowwise", tp)[0] > 3 * _cast_bytes("tensorwise", tp)[0]
    assert bwd < _cast_bytes("tensorwise", tp, sp=False)[1]


def test_float8_tp_gathers_move_fp8_bytes():
    """Tensorwise: the all-gathers (half a pass) move 1 byte an element, the reduce-scatters
    2; rowwise and bf16: 2 and 2."""
    _, tw_pass, tw_ag = _cost("torchtitan", "fp8", "tensorwise", "full")
    _, bf_pass, bf_ag = _cost("torchtitan", "bf16", "", "full")
    assert tw_ag < bf_ag and tw_pass == pytest.approx(bf_pass - bf_ag + tw_ag)
    c_tw, *_ = _cost("torchtitan", "fp8", "tensorwise", "full", tp_overlap=False)
    c_rw, *_ = _cost("torchtitan", "fp8", "rowwise", "full", tp_overlap=False)
    assert c_tw.tp_wire_s == pytest.approx(3 * tw_pass)
    assert c_rw.tp_wire_s == pytest.approx(3 * bf_pass)
