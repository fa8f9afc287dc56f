"""DeepSeek-V3's aux-loss-free balancing: the runtime never moved the score-correction bias
(expert_bias stayed 0 through training). Now, after each optimizer step, every MoE layer's
bias moves by u = 1e-3 toward balance: b_i += u * sign(mean(load) - load_i) (DeepSeek-V3
technical report sec. 2.1.2), the load summed over the ranks that route the layer's tokens.

Truth: the rule's closed form on loads counted here from the router's choices; and, across
ranks, the single-process run (the bias compared like a parameter: a rank that updated from
its own share of the tokens, not the group's sum, differs in sign somewhere; so does a pipeline
stage that counted torch pipelining's metadata-inference forward at the first step)."""

from __future__ import annotations

import pytest
import torch

from meshplan.plan import Plan
from meshplan.runtime.expert_bias import BIAS_UPDATE_RATE, update_expert_bias
from meshplan.runtime.model import MoE, build_model
from meshplan.runtime.train import RunConfig
from meshplan.specs.catalog.presets import preset

from .crash_retry import equivalence, global_batch


def test_one_update_is_the_closed_form_on_the_routed_counts():
    spec = preset("tiny-moe")
    m = build_model(spec, seed=0, dtype=torch.float32)
    picked = {}
    for name, mod in m.named_modules():
        if isinstance(mod, MoE):
            route = mod.route
            mod.route = lambda x, r=route, n=name: picked.setdefault(n, r(x))
    x = torch.randint(0, spec.vocab, (4, 16))
    m(x).float().sum().backward()
    assert picked
    update_expert_bias([m])
    for name, (idx, _) in picked.items():
        mod = m.get_submodule(name)
        load = torch.tensor([(idx == e).sum().item() for e in range(spec.moe_experts)],
                            dtype=torch.float64)
        want = BIAS_UPDATE_RATE * torch.sign(load.mean() - load)
        assert torch.equal(mod.expert_bias.double(), want.to(mod.expert_bias.dtype).double())
        assert mod.expert_load.sum().item() == 0  # counted afresh each step
    with torch.no_grad():  # evaluation routes without counting
        m(x)
    assert all(mod.expert_load.sum().item() == 0 for mod in m.modules() if isinstance(mod, MoE))


@pytest.mark.slow
@pytest.mark.parametrize("fields", [dict(dp=2, ep=2, zero=3), dict(cp=2, tp=2, ep=2), dict(pp=2)])
def test_biases_agree_with_one_process_across_ranks(fields):
    plan = Plan(**fields)
    cfg = RunConfig(preset("tiny-moe"), plan, seq_len=16, global_batch=global_batch(plan),
                    steps=3, lr=5e-4, adam_eps=1e-6)
    rep = equivalence(cfg, plan.world_size)
    assert rep.param_rel <= 1e-5, rep
    assert rep.loss_rel <= 1e-5, rep
