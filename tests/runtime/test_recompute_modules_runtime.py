"""Module-level selective recomputation in the runtime (Plan.recompute_modules): the same
loss and gradients as no recomputation, and less activation memory held for backward."""

import pytest
import torch

from tests.runtime.test_recompute import _run
from meshplan.specs.catalog.presets import preset

pytestmark = pytest.mark.slow
SETS = {
    "tiny-moe": ["layernorm+mla_up_proj+moe_act", "moe", "mlp+shared_experts"],
    "tiny-llama": ["core_attn+mlp"],
}


@pytest.mark.parametrize("model", list(SETS))
def test_module_recompute_gives_the_same_gradients_and_holds_less(model):
    spec = preset(model)
    loss0, g0, act0 = _run(spec, "none")
    for mods in SETS[model]:
        loss, g, act = _run(spec, "selective:" + mods)
        assert loss == loss0, mods
        for n in g0:
            assert torch.allclose(g[n], g0[n], rtol=0, atol=1e-7), (mods, n)
        assert act < act0, (mods, act, act0)


def test_moe_module_with_expert_parallelism_is_refused():
    from meshplan.errors import InputError
    from meshplan.plan import Plan
    from meshplan.runtime.recompute import apply_recompute
    with pytest.raises(InputError, match="all-to-all"):
        apply_recompute(None, Plan(dp=2, ep=2, recompute="selective", recompute_modules="moe"))


def test_a_module_recompute_plan_reaches_the_blocks():
    """apply_recompute, the path `meshplan run` and `dryrun` take, gives each block the plan's
    modules (it refused every rc-selective-M+M plan though the blocks implement them)."""
    from types import SimpleNamespace

    from meshplan.plan import Plan
    from meshplan.runtime.recompute import MODULE_MODE, apply_recompute
    blocks = {str(i): SimpleNamespace(recompute="none") for i in range(3)}
    plan = Plan(dp=2, recompute="selective", recompute_modules="core_attn+mlp")
    apply_recompute(SimpleNamespace(layers=blocks), plan)
    assert [b.recompute for b in blocks.values()] == [MODULE_MODE + "core_attn+mlp"] * 3
