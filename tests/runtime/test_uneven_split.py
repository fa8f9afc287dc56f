"""An uneven layer split (pipeline stages on GPU types of different speed, issue 11) runs on
the runtime and computes what one process computes."""

import pytest

from meshplan.cost.hetero import UnevenPlan
from meshplan.runtime.train import RunConfig
from .crash_retry import equivalence
from meshplan.specs.catalog.presets import preset

pytestmark = pytest.mark.slow
TOL = 1e-5


@pytest.mark.parametrize("split,schedule", [((3, 1), "1f1b"), ((1, 3), "zb_h1")])
def test_uneven_split_matches_single_process(split, schedule):
    spec = preset("tiny-llama")
    assert sum(split) == spec.layers
    plan = UnevenPlan(pp=2, schedule=schedule, split=split)
    from meshplan.runtime.pipeline import chunk_layers
    assert [len(c) for c in chunk_layers(spec, plan)] == list(split)  # the split is the one run
    cfg = RunConfig(spec, plan, seq_len=16, global_batch=8, steps=3, lr=5e-4, adam_eps=1e-6)
    rep = equivalence(cfg, plan.world_size)
    assert max(rep.loss_rel, rep.param_rel, rep.grad_rel) <= TOL, rep
    assert rep.names_checked == 39 and not rep.missing_grads, rep
