"""Tensor parallelism on the model shapes the planner allows.

The planner accepts tp that divides the kv heads or is a multiple of them (Megatron
replicates kv heads when tp > kv_heads), Qwen3-style per-head q/k norms and tied input and
output embeddings (both split by vocabulary rows). Each must compute what one process
computes (same tolerance and method as test_equivalence.py).
"""

import dataclasses

import pytest

from meshplan.plan import Plan
from meshplan.runtime.train import RunConfig
from .crash_retry import equivalence, global_batch
from meshplan.specs.catalog.presets import preset

pytestmark = pytest.mark.slow
QK_NORM = dataclasses.replace(preset("tiny-llama"), name="tiny-qwen3", qk_norm=True, qkv_bias=True)
TIED = dataclasses.replace(preset("tiny-llama"), name="tiny-tied", tied_embeddings=True)
MQA = dataclasses.replace(preset("tiny-llama"), name="tiny-mqa", kv_heads=1)
CASES = {  # tiny-llama: 4 heads, 2 kv heads
    "tp4-kv-replicated": (preset("tiny-llama"), dict(tp=4)),
    "dp2-tp4-kv-replicated-zero3": (preset("tiny-llama"), dict(dp=2, tp=4, zero=3)),
    "tp2-mqa-nosp": (MQA, dict(tp=2, sequence_parallel=False)),
    "tp2-qk-norm": (QK_NORM, dict(tp=2)),
    "tp4-qk-norm-kv-replicated": (QK_NORM, dict(tp=4)),
    "tp2-tied": (TIED, dict(tp=2)),
    "dp2-tp2-tied-zero3": (TIED, dict(dp=2, tp=2, zero=3)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_head_layouts_match_single_process(case):
    spec, fields = CASES[case]
    plan = Plan(**fields)
    cfg = RunConfig(spec, plan, seq_len=16, global_batch=global_batch(plan), steps=3, lr=5e-4,
                    adam_eps=1e-6)
    rep = equivalence(cfg, plan.world_size)
    assert max(rep.loss_rel, rep.param_rel, rep.grad_rel) <= 1e-5, rep
    assert not rep.missing_grads, rep
