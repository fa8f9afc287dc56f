"""Partial recomputation in the runtime: the first N blocks of a chunk run under full
checkpointing, the rest keep their activations. One process, CPU: the gradients equal those of
no recomputation, and the activations held at the end of forward are exactly those of no
recomputation less N blocks' worth of (none - full) per block: the linear interpolation the
cost model uses (cost/step.py)."""

import pytest
import torch

from meshplan.plan import Plan
from meshplan.runtime.model import build_model, cross_entropy
from meshplan.runtime.recompute import apply_recompute, layer_modes
from meshplan.specs.catalog.presets import preset

B, S = 2, 32


def test_layer_modes():
    assert layer_modes(Plan(recompute="full", recompute_layers=2), 5) == \
        ["full", "full", "none", "none", "none"]
    assert layer_modes(Plan(recompute="full", recompute_layers=7), 3) == ["full"] * 3
    assert layer_modes(Plan(recompute="selective"), 2) == ["selective"] * 2


def _run(spec, plan):
    from torch.distributed._tools.mem_tracker import MemTracker
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, spec.vocab, (B, S), generator=g)
    y = torch.randint(0, spec.vocab, (B, S), generator=g)
    m = build_model(spec, 0)
    apply_recompute(m, plan)
    mt = MemTracker()
    mt.track_external(m)
    with mt:
        loss = cross_entropy(m(x), y)
        snap = next(iter(mt.get_tracker_snapshot("current").values()))
        loss.backward()
    act = {getattr(k, "value", str(k)): v for k, v in snap.items()}["Activation"]
    return float(loss.detach()), {n: p.grad for n, p in m.named_parameters()}, act


def test_partial_recompute_same_gradients_and_interpolated_activations():
    spec = preset("tiny-llama")
    L = spec.layers
    assert L >= 2
    loss0, g0, none = _run(spec, Plan())
    _, _, full = _run(spec, Plan(recompute="full"))
    for n in range(1, L):
        loss, g, act = _run(spec, Plan(recompute="full", recompute_layers=n))
        assert loss == loss0
        for k in g0:
            assert torch.allclose(g[k], g0[k], rtol=0, atol=1e-7), (n, k)
        assert act * L == pytest.approx(none * L - n * (none - full), rel=0, abs=0)
