"""FP8 weight all-gather (cost/param_gather.py): a run that keeps its linear weights in FP8
and gathers them in FP8 (Megatron-Core fp8_param_gather: "perform the param all-gather in
fp8"; NeMo's distributed Adam gathers Float8Tensor params as uint8; torchao's FSDP float8
all-gather) moves 1 byte per transformer-layer weight instead of 2; the embedding and the
output layer stay 16-bit."""

import pytest

from meshplan.cost import estimate
from meshplan.cost.param_gather import mean_gather_bytes
from meshplan.errors import InputError
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.search.search import search
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload
from meshplan.validate import predict_row

MODEL = preset("llama3.1-8b")
CLUSTER = make_cluster(gpu="H100-SXM-80GB", num_gpus=16)
PLAN = Plan(tp=1, dp=16, pp=1, micro_batch=1, recompute="full", zero=1)
# Llama 3.1 8B: 8,030,261,248 parameters (sum of numel() over meta-llama/Llama-3.1-8B), of
# which the input embedding and the untied output layer are 128,256 x 4,096 each and the
# final norm 4,096: the 32 layers hold the rest
LAYER_PARAMS = 8_030_261_248 - 2 * 128_256 * 4_096 - 4_096


def _dp(est):
    return next(c for c in est.comm if c.axis == "dp")


def test_fp8_gather_sends_one_byte_less_per_layer_weight():
    base = Workload(8192, 64, "fp8", framework="megatron", grad_reduce_dtype="bf16")
    fp8 = Workload(8192, 64, "fp8", framework="megatron", grad_reduce_dtype="bf16",
                   fp8_param_gather=True)
    a, b = estimate(MODEL, CLUSTER, base, PLAN), estimate(MODEL, CLUSTER, fp8, PLAN)
    n = 16
    # the ring sends (n - 1) / n of every gathered byte; only the layers' weights change
    saved = _dp(a).bytes_per_step - _dp(b).bytes_per_step
    assert saved == pytest.approx(LAYER_PARAMS * 1.0 * (n - 1) / n, rel=1e-3)
    assert _dp(b).wire_s < _dp(a).wire_s
    assert b.step_time_s <= a.step_time_s


def test_mean_bytes_weigh_layers_and_the_16_bit_rest():
    assert mean_gather_bytes(False, 7.0, 1.0) == 2.0
    assert mean_gather_bytes(True, 3.0, 1.0) == pytest.approx((3 * 1 + 1 * 2) / 4)
    assert mean_gather_bytes(True, 0.0, 0.0) == 2.0


def test_fp8_gather_needs_fp8_weights():
    with pytest.raises(InputError, match="fp8_param_gather"):
        Workload(8192, 64, "bf16", fp8_param_gather=True)
    row = {"id": "x", "model": "m", "arch": "dense", "layers": "2", "hidden": "1024",
           "heads": "8", "kv_heads": "8", "ffn": "4096", "vocab": "32000", "seq_len": "2048",
           "global_batch_seqs": "16", "gpu": "H100-SXM-80GB", "num_gpus": "8", "tp": "1",
           "pp": "1", "dp": "8", "precision": "bf16", "fp8_param_gather": "1",
           "measured_tokens_per_s_per_gpu": "1000"}
    res = predict_row(row, with_search_best=False)
    assert res.error and "fp8_param_gather" in res.error


def test_the_search_floor_stays_below_the_fp8_gather_estimate():
    """search/bound.py prunes with _dp_comm at 1 byte for every weight when the run gathers
    FP8: the pinned plan is still found, at estimate()'s own figure."""
    fp8 = Workload(8192, 64, "fp8", framework="megatron", grad_reduce_dtype="bf16",
                   fp8_param_gather=True)
    pins = dict(tp=1, pp=1, dp=16, zero=1, micro_batch=1, recompute="full")
    r = search(MODEL, CLUSTER, fp8, pins, top_k=1, rerank_k=1, simulate=False)
    assert r.best is not None
    assert r.best.step_time_s == pytest.approx(
        estimate(MODEL, CLUSTER, fp8, r.best.plan).step_time_s, rel=1e-9)
