"""Activation recomputation in one process: same gradients, and exactly the memory planned.

Selective recomputation keeps, per layer and token, the residual stream between attention
and MLP (h), the q/k/v projections (heads*d + 2*kv_heads*d) and the MLP gate (ffn) on top
of what full recomputation keeps (the block input): a closed form the cost model's
"selective" assumes too (cost/ops.py: saved_bytes - recomputable_bytes, less the softmax
statistics of an attention core that is recomputed here).
"""

import pytest
import torch

from meshplan.runtime.model import build_model, cross_entropy
from meshplan.specs.catalog.presets import preset

pytestmark = pytest.mark.slow
B, S = 2, 32


def _run(spec, recompute: str):
    from torch.distributed._tools.mem_tracker import MemTracker
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, spec.vocab, (B, S), generator=g)
    y = torch.randint(0, spec.vocab, (B, S), generator=g)
    m = build_model(spec, 0)
    for block in m.layers.values():
        block.recompute = recompute
    mt = MemTracker()
    mt.track_external(m)
    with mt:
        loss = cross_entropy(m(x), y)
        snap = next(iter(mt.get_tracker_snapshot("current").values()))
        loss.backward()
    act = {getattr(k, "value", str(k)): v for k, v in snap.items()}["Activation"]
    return float(loss.detach()), {n: p.grad for n, p in m.named_parameters()}, act


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-moe"])
def test_recompute_gives_the_same_gradients(model):
    spec = preset(model)
    loss0, g0, _ = _run(spec, "none")
    for mode in ("selective", "full"):
        loss, g, _ = _run(spec, mode)
        assert loss == loss0
        for n in g0:
            assert torch.allclose(g[n], g0[n], rtol=0, atol=1e-7), (mode, n)


def test_selective_keeps_exactly_the_planned_tensors():
    spec = preset("tiny-llama")
    _, _, none = _run(spec, "none")
    _, _, sel = _run(spec, "selective")
    _, _, full = _run(spec, "full")
    T, d = B * S, spec.head_dim
    per_token = spec.hidden + spec.heads * d + 2 * spec.kv_heads * d + spec.ffn
    assert sel - full == spec.layers * 4 * T * per_token  # fp32: 4 bytes per element
    assert full < sel < none


PARALLEL = {  # selective recomputation under the wrappers it must compose with
    "dp2-tp2-zero3": ("tiny-llama", dict(dp=2, tp=2, zero=3)),
    "cp2-ring": ("tiny-llama", dict(cp=2)),
    "pp2-interleaved": ("tiny-llama", dict(pp=2, vpp=2)),
    "tp2-ep2-moe": ("tiny-moe", dict(tp=2, ep=2)),
}


@pytest.mark.parametrize("case", list(PARALLEL))
def test_selective_recompute_matches_single_process(case):
    from meshplan.plan import Plan
    from meshplan.runtime.train import RunConfig
    from .crash_retry import equivalence, global_batch
    model, fields = PARALLEL[case]
    plan = Plan(**fields, recompute="selective")
    cfg = RunConfig(preset(model), plan, seq_len=16, global_batch=global_batch(plan), steps=3,
                    lr=5e-4, adam_eps=1e-6)
    rep = equivalence(cfg, plan.world_size)
    assert max(rep.loss_rel, rep.param_rel, rep.grad_rel) <= 1e-5, rep
    assert not rep.missing_grads, rep
