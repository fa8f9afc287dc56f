"""torchtitan's async TP hides only the collectives torch._inductor's micro-pipeline TP pass
fuses (cost/engine_async_tp.py). The rules are checked on the library's own pattern
functions (torch/_inductor/fx_passes/micro_pipeline_tp.py ``_find_producer_matmul``,
``_find_consumer_matmuls``) on graphs shaped like a torchtitan Llama block's, then the layer
cost is checked to hide exactly the fusable collectives' share of each pass."""

import pytest

from meshplan.cost.collectives import all_gather_s
from meshplan.cost.efficiency import NETWORK
from meshplan.cost.engine_async_tp import async_tp_shares
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


def _cost(engine, precision="bf16", recipe="", recompute="selective"):
    wl = Workload(8192, 2, precision, framework=engine, fp8_recipe=recipe)
    plan = Plan(dp=1, tp=8, pp=1, micro_batch=2, recompute=recompute, sequence_parallel=True)
    shard = training_shard(wl, CLUSTER, 2, 8, 1, True, 1, 1)
    pl = placements(plan, CLUSTER)
    places = CommPlacements(pl["tp"], pl["cp"], pl["ep"], pl["etp"])
    c = layer_cost(MODEL, CLUSTER, "dense", shard, recompute, places, True, precision,
                   "ring", engine)
    ops, _, _ = layer_ops_times(MODEL, CLUSTER, "dense", shard, precision, engine)
    tp_pass = ops.tp_collectives * all_gather_s(CLUSTER, pl["tp"], ops.tp_buffer_bytes)
    return c, tp_pass


@pytest.mark.parametrize("precision, recipe, fwd, bwd", [
    ("bf16", "", 1.0, 0.5), ("fp8", "tensorwise", 1.0, 0.5), ("fp8", "rowwise", 0.5, 0.0)])
@pytest.mark.parametrize("recompute, passes", [("selective", 2), ("full", 3)])
def test_torchtitan_layer_hides_the_fused_collectives_only(precision, recipe, fwd, bwd,
                                                           recompute, passes):
    c, tp_pass = _cost("torchtitan", precision, recipe, recompute)
    assert c.tp_wire_s == pytest.approx(passes * tp_pass)
    hidden = NETWORK.tp_overlap * tp_pass * (fwd * (passes - 1) + bwd)
    assert c.tp_exposed_s == pytest.approx(c.tp_wire_s - hidden)
    assert c.fwd_exposed_s == pytest.approx(tp_pass * (1 - NETWORK.tp_overlap * fwd))


def test_megatron_userbuffers_keep_the_uniform_share():
    c, tp_pass = _cost("megatron")
    assert c.tp_exposed_s == pytest.approx((1 - NETWORK.tp_overlap) * c.tp_wire_s)
