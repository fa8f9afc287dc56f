"""Engine behaviours of the published layout sweeps' engines (cost/engine_dp.py,
cost/engine_p2p.py): what they expose of the data-parallel synchronisation, how many bytes
of gradient they hold, and what they send between pipeline stages.

Independent truths: the engines' source (cited in the modules), ring traffic counted by
hand (an all-reduce sends 2(n-1)/n of the buffer per rank, an all-gather or reduce-scatter
(n-1)/n), and the bytes per parameter of each tensor.
"""

import pytest

from meshplan.cost import estimate
from meshplan.cost.engine_dp import flush_sync
from meshplan.cost.engine_p2p import p2p_split
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

MODEL = preset("llama3.1-8b")
CLUSTER = make_cluster(gpu="A100-SXM-80GB", num_gpus=64)


def _est(engine: str, **kw):
    plan = Plan(**{"tp": 1, "pp": 2, "dp": 32, "zero": 1, "micro_batch": 1,
                   "recompute": "full", "schedule": "1f1b", **kw})
    return estimate(MODEL, CLUSTER, Workload(2048, 512, "bf16", framework=engine), plan)


def _dp(e):
    return next(c for c in e.comm if c.axis == "dp")


def test_flush_engines_hide_nothing_megatron_hides_some():
    for engine in ("aleph-alpha", "deepspeed"):
        dp = _dp(_est(engine))
        assert dp.exposed_s == pytest.approx(dp.wire_s) and dp.wire_s > 0
    mg = _dp(_est("megatron"))
    assert mg.exposed_s < mg.wire_s  # reduced under the backward


def test_aleph_alpha_sends_fp32_all_reduce_plus_16bit_gather():
    e = _est("aleph-alpha")
    n = 32
    # the busiest stage's parameters: all-reduce of 4-byte gradients, 2(n-1)/n per rank,
    # then the 2-byte weights gathered, (n-1)/n
    params = max(m.parts["weights"] for m in e.memory) / 2  # bf16 weights, 2 bytes each
    assert _dp(e).bytes_per_step == pytest.approx((2 * 4 + 2) * params * (n - 1) / n, rel=0.02)
    # without ZeRO only the all-reduce
    assert flush_sync("aleph-alpha", Plan(zero=0, pp=2), "bf16").gather_bytes_per_param == 0
    # ZeRO-3 is not the engine's: no flush rule claims it
    assert flush_sync("aleph-alpha", Plan(zero=3), "bf16") is None


def test_deepspeed_flush_only_with_its_pipeline_engine():
    assert flush_sync("deepspeed", Plan(pp=1, zero=1), "bf16") is None
    s = flush_sync("deepspeed", Plan(pp=4, zero=1), "fp16")
    assert (s.reduce, s.reduce_bytes_per_param, s.gather_bytes_per_param) == (
        "reduce-scatter", 2.0, 2.0)  # fp16 gradients, then 16-bit weights gathered
    # bf16: the BF16 optimizer's fp32 gradients all-reduced, then its bf16 weights gathered
    s = flush_sync("deepspeed", Plan(pp=4, zero=0), "bf16")
    assert (s.reduce, s.reduce_bytes_per_param, s.gather_bytes_per_param) == (
        "all-reduce", 4.0, 2.0)
    assert flush_sync("megatron", Plan(pp=4, zero=1), "bf16") is None


def test_aleph_alpha_keeps_16bit_gradients():
    # one stage, so both engines hold the same parameters (their pipeline splits differ)
    aa, mg = (_est(e, pp=1, dp=64, schedule="") for e in ("aleph-alpha", "megatron"))
    for a, m in zip(aa.memory, mg.memory):
        assert a.parts["gradients"] == pytest.approx(m.parts["gradients"] / 2)  # 2 vs 4 bytes
        # the fp32 gradient copy of the owned 1/dp slice exists only during the optimizer
        # step (parameter_group.py step_prequel / step_sequel at 737f8558): the states held
        # at the backward's peak are Megatron's, and the step needs nothing beyond that peak
        assert a.parts["optimizer_states"] == pytest.approx(m.parts["optimizer_states"])
        assert a.parts["optimizer_step_excess"] == 0.0


def test_deepspeed_pipeline_sends_one_tp_slice():
    assert p2p_split("deepspeed", 8, False) == 8
    assert p2p_split("deepspeed", 8, True) == 1  # already sharded by sequence parallelism
    assert p2p_split("aleph-alpha", 8, False) == 1  # full tensor from every TP rank
    ds, mg = (_est(e, tp=8, dp=4, zero=1, sequence_parallel=False)
              for e in ("deepspeed", "megatron"))
    pp = [next(c for c in x.comm if c.axis == "pp") for x in (ds, mg)]
    assert pp[0].bytes_per_step == pytest.approx(pp[1].bytes_per_step / 8)


def test_aleph_alpha_uniform_split_over_layer_specs():
    from meshplan.cost.engine_split import engine_layer_split
    # 63 items (embedding, 60 layers, norm, head) over 16 stages: 15 runs of 4, one of 3;
    # the first run spends a slot on the embedding, the last two on norm and head
    assert engine_layer_split("aleph-alpha", 60, 16, 1) == [3] + [4] * 14 + [1]
    # 43 items over 2 stages: 22 and 21 -> 21 layers, then 19 layers + norm + head
    assert engine_layer_split("aleph-alpha", 40, 2, 1) == [21, 19]
    assert engine_layer_split("megatron", 40, 2, 1) is None
    assert engine_layer_split("aleph-alpha", 40, 1, 1) is None
    e = _est("aleph-alpha", pp=4, dp=16)
    assert [c.layers for c in e.chunks] == engine_layer_split("aleph-alpha", MODEL.layers, 4, 1)
