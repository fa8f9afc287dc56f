"""A pipeline whose stages sit on more than one node sends across the network, whatever its
stride (step.placements): found by driving the CLI with a near-zero NIC, where pp 8 at
stride 2 on two 8-GPU nodes was priced on NVLink."""

import pytest

from meshplan.cost import estimate
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload


def _pp(plan: Plan, gpus: int):
    est = estimate(load_model("llama3.1-8b"), make_cluster(f"{gpus}xH100-SXM-80GB"),
                   Workload(4096, 128, "bf16"), plan)
    return next(c for c in est.comm if c.axis == "pp")


@pytest.mark.parametrize("dp, pp, gpus, tier", [
    (2, 8, 16, "scale-out"),  # stride 2 (dp inner): stages 4-7 on the second node
    (2, 4, 8, "scale-up"),  # the whole pipeline on one node
    (4, 4, 16, "scale-out"),  # stride 4: stages 2-3 on the second node
    (1, 2, 16, "scale-out"),  # tp 8 fills a node: stride 8, one stage per node
])
def test_pipeline_tier_follows_the_nodes_its_stages_sit_on(dp, pp, gpus, tier):
    tp = gpus // (dp * pp)
    assert _pp(Plan(dp=dp, tp=tp, pp=pp, zero=1, micro_batch=1), gpus).tier == tier


def test_a_cross_node_pipeline_pays_the_network_per_send():
    # the same plan on a slower network: its pipeline sends get slower, its dp stays inside
    from meshplan.cost.collectives import p2p_s
    plan = Plan(dp=2, tp=1, pp=8, zero=1, micro_batch=1)
    slow = make_cluster("16xH100-SXM-80GB", nic_gbps_per_gpu=10)
    fast = make_cluster("16xH100-SXM-80GB")
    m, w = load_model("llama3.1-8b"), Workload(4096, 128, "bf16")
    a, b = estimate(m, slow, w, plan), estimate(m, fast, w, plan)
    pa = next(c for c in a.comm if c.axis == "pp")
    pb = next(c for c in b.comm if c.axis == "pp")
    assert pa.wire_s > 5 * pb.wire_s
    one = p2p_s(slow, True, 4096 * 4096 * 2)  # one micro-batch's activations, bf16
    assert pa.wire_s >= one
