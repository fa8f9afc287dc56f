"""Megatron-Core's expert all-to-all overlap (--overlap-moe-expert-parallel-comm, combined
1F1B) as meshplan costs it (cost/layer.py combined_1f1b_exposed_parts, cost/pipeline.py
combined_1f1b_unpaired): against the order in which megatron-core's own
TransformerLayerSchedulePlan.run issues each layer pair's nodes (replayed through a
two-stream simulation written here), against its warm-up count
(schedules.get_pp_rank_microbatches), and the limits any such schedule must meet."""

from __future__ import annotations

import random
from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from meshplan.cost.layer import COMBINED_LAYERS, combined_1f1b_exposed_parts
from meshplan.cost.pipeline import combined_1f1b_unpaired
from meshplan.plan import Plan

COMM_NODES = ("moe_dispatch", "moe_combine")
FWD_CHAIN = ("attn", "moe_dispatch", "mlp", "moe_combine")
BWD_CHAIN = ("moe_combine", "mlp", "moe_dispatch", "attn")


def _issue_order(layers: int) -> list[tuple[str, str, str]]:
    """(micro-batch 'f' or 'b', node, 'forward' / 'backward' / 'backward_dw') in the order
    megatron-core's TransformerLayerSchedulePlan.run issues them for ``layers`` layer
    pairs (the real function, run on stand-in layers that log each call)."""
    plan = pytest.importorskip("megatron.core.models.common.model_chunk_schedule_plan")
    log: list[tuple[str, str, str]] = []

    class Node:
        def __init__(self, mb, name):
            self.mb, self.name = mb, name

        def forward(self, x=None):
            log.append((self.mb, self.name, "forward"))
            return x

        def backward(self, g=None):
            log.append((self.mb, self.name, "backward"))
            return g

        def backward_dw(self):
            log.append((self.mb, self.name, "backward_dw"))

    def layer(mb):
        lay = SimpleNamespace(get_fp8_context=nullcontext,
                              config=SimpleNamespace(ep_overlap_early_attn_memory_release=False))
        for name in FWD_CHAIN + ("mtp_post_process",):
            setattr(lay, name, Node(mb, name))
        return lay

    for _ in range(layers):
        plan.TransformerLayerSchedulePlan.run(layer("f"), layer("b"), None, None, False)
    return [e for e in log if e[1] != "mtp_post_process"]


def _simulate(order, dur) -> list[float]:
    """Two CUDA streams running their kernels in issue order; the nodes of one micro-batch
    wait for the previous node of its chain (forward attn -> dispatch -> mlp -> combine ->
    next layer; backward combine -> mlp -> dispatch -> attn -> next layer); backward_dw
    follows its node's backward on the compute stream. Returns each layer pair's end."""
    free = {"comp": 0.0, "comm": 0.0}
    ready = {"f": 0.0, "b": 0.0}
    ends, last = [], None
    for mb, node, kind in order:
        stream = "comm" if node in COMM_NODES else "comp"
        start = free[stream] if kind == "backward_dw" else max(free[stream], ready[mb])
        end = start + dur[(node, kind)]
        free[stream] = end
        if kind != "backward_dw":
            ready[mb] = end
        if (mb, node, kind) == ("b", "attn", "backward_dw"):
            ends.append(max(free.values()))
        last = end
    assert last is not None
    return ends


@pytest.mark.parametrize("seed", range(12))
def test_exposed_time_is_megatron_cores_issue_order_replayed(seed):
    order = _issue_order(COMBINED_LAYERS)
    rng = random.Random(seed)
    d = {k: rng.uniform(0.1, 3.0) for k in (
        "attn_f", "attn_b", "attn_w", "mlp_f", "mlp_b", "mlp_w", "dispatch", "combine")}
    dur = {("attn", "forward"): d["attn_f"], ("attn", "backward"): d["attn_b"],
           ("attn", "backward_dw"): d["attn_w"], ("mlp", "forward"): d["mlp_f"],
           ("mlp", "backward"): d["mlp_b"], ("mlp", "backward_dw"): d["mlp_w"],
           # the backward of the combine is dispatch-shaped and vice versa
           ("moe_dispatch", "forward"): d["dispatch"], ("moe_combine", "backward"): d["dispatch"],
           ("moe_combine", "forward"): d["combine"], ("moe_dispatch", "backward"): d["combine"]}
    ends = _simulate(order, dur)
    half = COMBINED_LAYERS // 2
    period = (ends[-1] - ends[half - 1]) / (COMBINED_LAYERS - half)
    compute = sum(d[k] for k in ("attn_f", "attn_b", "attn_w", "mlp_f", "mlp_b", "mlp_w"))
    assert combined_1f1b_exposed_parts(**d) == pytest.approx(max(0.0, period - compute),
                                                             abs=1e-9)


def test_limits():
    # no communication: nothing exposed; no compute: every all-to-all in a row
    assert combined_1f1b_exposed_parts(1, 2, 1, 1, 1, 1, 0, 0) == 0.0
    assert combined_1f1b_exposed_parts(0, 0, 0, 0, 0, 0, 1.0, 2.0) == pytest.approx(6.0)
    # all-to-alls shorter than the compute each is paired with: all hidden
    assert combined_1f1b_exposed_parts(3, 3, 1, 3, 3, 1, 0.5, 0.5) == 0.0
    # the dispatch pair only has the routed experts to hide under: a long dispatch over a
    # short expert block is exposed even though the layer's compute exceeds all its comm
    exposed = combined_1f1b_exposed_parts(5, 8, 2, 0.5, 0.5, 0.5, 3.0, 3.0)
    assert exposed > 0.0 and 4 * 3.0 < 5 + 8 + 2 + 1.5


class _P2P:
    def __init__(self, pp, rank, vpp):
        self.pp_group = SimpleNamespace(size=lambda: pp, rank=lambda: rank)
        self.virtual_pipeline_model_parallel_size = vpp


@pytest.mark.parametrize("pp,vpp,m", [(2, 12, 32), (4, 4, 16), (8, 2, 8), (8, 4, 128), (2, 2, 1)])
def test_unpaired_microbatches_are_megatron_cores_warmup(pp, vpp, m):
    sched = pytest.importorskip("megatron.core.pipeline_parallel.schedules")
    plan = Plan(dp=1, pp=pp, vpp=vpp, schedule="interleaved_1f1b", micro_batch=1)
    for rank in range(pp):
        _, _, warm, _ = sched.get_pp_rank_microbatches(
            m, vpp, pp, overlap_moe_expert_parallel_comm=True,
            p2p_communicator=_P2P(pp, rank, vpp))
        assert combined_1f1b_unpaired(plan, m, rank) == pytest.approx(warm / vpp)


def test_without_pipelining_one_forward_and_one_backward_run_alone():
    c1 = pytest.importorskip("megatron.core.pipeline_parallel.combined_1f1b")
    import inspect
    src = inspect.getsource(c1.combined_1f1b_schedule_for_no_pipelining)
    assert "first microbatch is executed alone" in src
    assert "last microbatch is executed alone" in src
    assert combined_1f1b_unpaired(Plan(dp=8), 16, 0) == 1.0
