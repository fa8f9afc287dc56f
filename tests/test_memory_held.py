"""held_bytes_of (the search's memory floor) is held_bytes(memory_parts(...)) exactly: the same
terms summed in the same order, for every ZeRO stage, offload and gradient/weight precision."""

from __future__ import annotations

import random

import pytest

from meshplan.cost.memory import RankState, held_bytes, held_bytes_of, memory_parts
from meshplan.plan import Plan


@pytest.mark.parametrize("seed", range(4))
def test_held_bytes_of_equals_the_parts(seed):
    rng = random.Random(seed)
    for _ in range(200):
        dp = rng.choice([1, 2, 4, 8, 16])
        zero = rng.choice([0, 1, 2, 3])
        offload = zero >= 1 and rng.random() < 0.3
        plan = Plan(dp=dp, ep=rng.choice([e for e in (1, 2, 4) if dp % e == 0]), zero=zero,
                    offload_optimizer=offload)
        st = RankState(params=rng.random() * 1e10, expert_params=rng.random() * 1e10,
                       largest_layer_params=rng.random() * 1e9,
                       act_per_microbatch_bytes=rng.random() * 1e9,
                       in_flight=float(rng.randint(0, 16)), working_bytes=rng.random() * 1e9)
        args = (plan, st, rng.choice([12.0, 16.0, 8.0]), rng.randint(1, 64))
        kw = dict(fp16_grads=rng.random() < 0.3, fp32_weights=rng.random() < 0.3,
                  pipeline_buffer_bytes=rng.choice([0.0, rng.random() * 1e9]))
        parts = memory_parts(*args, contiguous_states=rng.random() < 0.5,
                             capacity_bytes=rng.choice([float("inf"), 8e10]), **kw)
        assert held_bytes_of(*args, **kw) == held_bytes(parts)
