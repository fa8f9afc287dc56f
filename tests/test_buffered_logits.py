"""Aleph Alpha's pipeline keeps the last stage's 16-bit logits of two micro-batches
(cost/ops.py BUFFERED_LOGITS_ENGINES): Aleph-Alpha/scaling at 737f8558,
core/nn/pipeline_schedule/train.py required_buffer_count (2 slots on the last stage) and
parallel_module.py (PIPELINE_STAGE_OUTPUT is never taken on the last stage). Byte counts by
hand: tokens x full vocabulary (gathered over TP) x (12 bytes of torch's unfused cross
entropy on upcast logits + 2 bytes per buffered 16-bit micro-batch)."""

from __future__ import annotations

import pytest

from meshplan.cost import estimate
from meshplan.cost.ops import Shard, logits_bytes
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

MODEL = preset("llama3.1-8b")


def test_two_microbatches_of_logits_by_hand():
    assert MODEL.vocab == 128256
    s = Shard(seq=1024, micro_batch=1, tp=2)
    # 1024 tokens x 128,256 logits (whole vocabulary on every TP rank) x (12 + 2 x 2) bytes
    assert logits_bytes(MODEL, s, "aleph-alpha", microbatches=8) == 1024 * 128256 * 16
    assert logits_bytes(MODEL, s, "aleph-alpha", microbatches=2) == 2_101_346_304
    # one micro-batch per step: only its own logits sit in the buffer
    assert logits_bytes(MODEL, s, "aleph-alpha", microbatches=1) == 1024 * 128256 * 14


def test_other_engines_do_not_buffer_logits():
    s = Shard(seq=1024, micro_batch=1, tp=2)
    for engine in ("deepspeed", ""):
        assert (logits_bytes(MODEL, s, engine, microbatches=8)
                == logits_bytes(MODEL, s, engine, microbatches=1)
                == 1024 * 128256 / 2 * 12)


def test_estimate_last_stage_working_set_holds_the_buffered_logits():
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    plan = Plan(tp=2, pp=1, dp=4, zero=1, micro_batch=1, recompute="full")
    one = estimate(MODEL, c, Workload(4096, 4, "bf16", framework="aleph-alpha"), plan)
    many = estimate(MODEL, c, Workload(4096, 32, "bf16", framework="aleph-alpha"), plan)
    assert one.num_microbatches == 1 and many.num_microbatches == 8
    d = (many.peak_candidates[0].parts["activation_working_set"]
         - one.peak_candidates[0].parts["activation_working_set"])
    # one more buffered micro-batch of 16-bit logits: 4096 tokens x 128,256 x 2 bytes
    assert d == pytest.approx(4096 * 128256 * 2, rel=1e-9)
