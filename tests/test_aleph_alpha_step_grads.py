"""Aleph Alpha's fp32 gradient copy exists only during the optimizer step (framework
"aleph-alpha", Hagemann et al. 2023), against the source: github Aleph-Alpha/scaling at
737f8558, src/scaling/core/optimizer/parameter_group.py.

Independent truth, a closed form written here from the cited lines (not from cost/memory.py):
- backward (the activation peak): 16-bit weights and 16-bit gradients of every parameter
  (2 + 2 bytes), the fp32 master and Adam moments of the owned 1/dp partition (12 / dp), the
  activations and the working set; no fp32 gradient (step_sequel, line 435, set it to None);
- the step: step_prequel drops the gradients it does not own (lines 361-363), allocates the
  fp32 partition gradient (4 / dp, line 368) and drops each owned 16-bit gradient once
  copied (line 399): at most 2 / dp + 4 / dp beside the weights and the 12 / dp states, no
  activations.
The rank's peak is the larger of the two.
"""

import pytest

from meshplan.cost.memory import (RankState, held_bytes, held_bytes_of,
                                  main_grad_at_step_only, memory_parts)
from meshplan.plan import Plan

P = 1.0e9  # parameters on the rank
STATES = 12  # fp32 master + two Adam moments (Workload.master_and_state_bytes)


def _parts(dp: int, acts: float, working: float) -> dict:
    plan = Plan(dp=dp, zero=1)
    st = RankState(params=P, expert_params=0.0, largest_layer_params=P / 40,
                   act_per_microbatch_bytes=acts, in_flight=1, working_bytes=working)
    kw = dict(fp16_grads=True, step_main_grad=main_grad_at_step_only("aleph-alpha"))
    return memory_parts(plan, st, STATES, 4, **kw), held_bytes_of(plan, st, STATES, 4, **kw)


def _closed_form(dp: int, acts: float, working: float) -> float:
    backward = 2 * P + 2 * P + STATES * P / dp + acts + working
    step = 2 * P + STATES * P / dp + 2 * P / dp + 4 * P / dp
    return max(backward, step)


@pytest.mark.parametrize("dp,acts,working", [
    (32, 16e9, 4e9),  # L282's shape: the backward is the peak, no fp32 copy held there
    (2, 3e9, 0.0),
    (1, 1e9, 0.5e9),  # one replica, little activation: the step is the peak
])
def test_peak_is_the_larger_of_backward_and_step(dp, acts, working):
    parts, floor = _parts(dp, acts, working)
    model_states = sum(parts[k] for k in ("weights", "gradients", "optimizer_states",
                                          "activations", "activation_working_set",
                                          "optimizer_step_excess"))
    assert model_states == pytest.approx(_closed_form(dp, acts, working), rel=1e-12)
    assert parts["optimizer_states"] == pytest.approx(STATES * P / dp, rel=1e-12)
    assert floor == pytest.approx(held_bytes(parts), rel=1e-12)  # the search's floor agrees


def test_other_engines_keep_the_copy_with_the_optimizer_states():
    """Megatron-LM's fp16 rule (README 'Distributed Optimizer': 4 + 16 / d) is unchanged."""
    assert not main_grad_at_step_only("megatron")
    plan = Plan(dp=8, zero=1)
    st = RankState(params=P, expert_params=0.0, largest_layer_params=P / 40,
                   act_per_microbatch_bytes=1e9, in_flight=1, working_bytes=0.0)
    parts = memory_parts(plan, st, STATES, 4, fp16_grads=True)
    assert parts["optimizer_states"] == pytest.approx((STATES + 4) * P / 8, rel=1e-12)
    assert "optimizer_step_excess" not in parts
