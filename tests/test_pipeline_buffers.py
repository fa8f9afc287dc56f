"""Stage-boundary buffers of DeepSpeed's and Aleph Alpha's pipeline engines
(meshplan/cost/pipeline_buffers.py), against byte counts written out by hand from the
engines' source: deepspeed/runtime/pipe/engine.py at edaa7221 (pipe_buffers['outputs'] held
until the backward, grad_layer and pipe_recv_buf allocated once, pipe_buffers['inputs'] kept
beside the clone the forward runs on when not partitioned) and Aleph-Alpha/scaling at
737f8558 (PIPELINE_STAGE_OUTPUT held until receive_gradients, PipeCommunicator's
activation_recv_buffer and gradient_recv_buffer kept)."""

from __future__ import annotations

import pytest

from meshplan.cost import estimate
from meshplan.cost.pipeline_buffers import pipeline_buffer_bytes
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

# one stage-boundary message: bf16 hidden states of micro-batch 2, sequence 512, hidden 1024
U_BYTES = 2 * 2 * 512 * 1024  # 2,097,152


def test_deepspeed_unpartitioned_by_hand():
    # pp 4, tp 1, 1F1B: rank r has 4 - r micro-batches in flight
    # rank 0: 4 held outputs + grad_layer = 5 messages (no receive buffer, no input copy)
    assert pipeline_buffer_bytes("deepspeed", 4, 0, 4, U_BYTES, False) == 10_485_760
    # rank 1: 3 outputs + grad_layer + pipe_recv_buf + 3 buffered inputs = 8 messages
    assert pipeline_buffer_bytes("deepspeed", 4, 1, 3, U_BYTES, False) == 16_777_216
    # last rank: pipe_recv_buf + 1 buffered input (its outputs are the loss path's)
    assert pipeline_buffer_bytes("deepspeed", 4, 3, 1, U_BYTES, False) == 4_194_304


def test_deepspeed_partitioned_by_hand():
    # tp 2: every message is the 1/2 slice; the gathered input is the forward's own input
    half = U_BYTES // 2
    # rank 1: 3 outputs + grad_layer + pipe_recv_buf = 5 slices
    assert pipeline_buffer_bytes("deepspeed", 4, 1, 3, half, True) == 5_242_880


def test_aleph_alpha_by_hand():
    # whole tensors from every TP rank; the received clone is the forward's input
    # rank 1 of 4: 3 outputs + gradient_recv_buffer + activation_recv_buffer = 5 messages
    assert pipeline_buffer_bytes("aleph-alpha", 4, 1, 3, U_BYTES, False) == 10_485_760
    assert pipeline_buffer_bytes("aleph-alpha", 4, 3, 1, U_BYTES, False) == 2_097_152


def test_aleph_alpha_stage_inputs_no_layer_keeps():
    # without recomputation the eager norm keeps x.float(), not the stage input, which
    # PIPELINE_STAGE_INPUT holds until send_gradients (Aleph-Alpha/scaling at 78489292,
    # parallel_module.py _execute_receive_activations / _execute_send_gradients)
    # rank 1 of 4: 3 outputs + gradient_recv_buffer + activation_recv_buffer + 3 inputs = 8
    assert pipeline_buffer_bytes("aleph-alpha", 4, 1, 3, U_BYTES, False, False) == 16_777_216
    # last rank: activation_recv_buffer + 1 input; first rank: its input is the token batch
    assert pipeline_buffer_bytes("aleph-alpha", 4, 3, 1, U_BYTES, False, False) == 4_194_304
    assert pipeline_buffer_bytes("aleph-alpha", 4, 0, 4, U_BYTES, False, False) == 10_485_760
    # DeepSpeed's buffered input is its own rule (the clone beside it): unchanged
    assert pipeline_buffer_bytes("deepspeed", 4, 1, 3, U_BYTES, False, False) == 16_777_216


@pytest.mark.parametrize("engine", ["megatron", "nemo", "torchtitan", ""])
def test_megatron_style_engines_keep_nothing_more(engine):
    assert pipeline_buffer_bytes(engine, 4, 1, 3, U_BYTES, False) == 0.0


def test_no_pipeline_no_buffers():
    assert pipeline_buffer_bytes("deepspeed", 1, 0, 1, U_BYTES, False) == 0.0


def _est(engine: str, tp: int = 1, pp: int = 4, recompute: str = "full"):
    m = preset("llama3.1-8b")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    return estimate(m, c, Workload(4096, 32, "bf16", framework=engine),
                    Plan(tp=tp, pp=pp, dp=8 // (tp * pp), zero=1, micro_batch=1,
                         recompute=recompute))


@pytest.mark.parametrize("engine,recompute", [("deepspeed", "full"), ("aleph-alpha", "full"),
                                              ("aleph-alpha", "none")])
def test_estimate_carries_the_hand_count_per_rank(engine, recompute):
    est = _est(engine, recompute=recompute)
    h = preset("llama3.1-8b").hidden
    u = 2 * 4096 * 1 * h  # bf16, micro-batch 1, sequence 4096, tp 1: nothing partitioned
    m = est.num_microbatches
    for r, b in est.peak_candidates.items():
        n = min(4 - r, m)
        first, last = r == 0, r == 3
        want = (0 if last else n * u + u) + (0 if first else u)
        if engine == "deepspeed" and not first:
            want += n * u
        if engine == "aleph-alpha" and recompute == "none" and not first:
            want += n * u  # the held stage inputs the eager norm does not keep
        assert b.parts["pipeline_buffers"] == pytest.approx(want, rel=1e-12)


def test_megatron_estimate_has_a_zero_part():
    est = _est("megatron")
    assert all(b.parts["pipeline_buffers"] == 0.0 for b in est.peak_candidates.values())
