"""Serving a sliding-window model: a request's KV cache on windowed layers stops at the
window, decode reads and prefill pairs follow, and a model without a window is unchanged."""

from __future__ import annotations

import pytest

from meshplan.scenario import make_cluster
from meshplan.serve.cost import StepModel, kv_transfer_s
from meshplan.serve.memory import kv_bytes_per_token_layer, kv_held_tokens, windowed_prefill_pairs
from meshplan.serve.spec import Pool
from meshplan.specs.catalog.presets import preset

OSS = preset("gpt-oss-20b")  # 12 of 24 layers with a 128-key window
FULL = OSS.with_(sliding_window=0, sliding_layers=0)
H100 = make_cluster("8xH100-SXM-80GB")


def test_a_request_holds_full_layers_whole_and_windowed_layers_up_to_the_window():
    c = 8192
    per_layer = kv_bytes_per_token_layer(OSS, 1, "bf16")
    by_hand = (12 * c + 12 * 128) * per_layer  # full layers x c + windowed layers x 128
    assert OSS.layers * per_layer * kv_held_tokens(OSS, c) == pytest.approx(by_hand)
    assert kv_held_tokens(OSS, 100) == 100  # inside the window: every layer holds it all
    assert kv_held_tokens(FULL, c) == c


def test_prefill_pairs_match_a_brute_force_count():
    for start, n in ((0, 300), (50, 100), (1000, 64)):
        full = sum(start + i for i in range(1, n + 1))
        win = sum(min(start + i, 128) for i in range(1, n + 1))
        assert windowed_prefill_pairs(OSS, start, n) == pytest.approx((full + win) / 2)
        assert windowed_prefill_pairs(FULL, start, n) == full


def test_decode_and_kv_transfer_cost_less_with_the_window_and_not_at_short_context():
    a, b = StepModel(OSS, H100, Pool(tp=1), "bf16", "bf16"), \
        StepModel(FULL, H100, Pool(tp=1), "bf16", "bf16")
    long_w, long_f = a.decode_step(64, 16384), b.decode_step(64, 16384)
    assert long_w.attention_s < 0.6 * long_f.attention_s  # half the layers read 128 keys, not 16k
    assert long_w.gemm_s == long_f.gemm_s
    assert a.decode_step(64, 100).attention_s == pytest.approx(b.decode_step(64, 100).attention_s)
    assert kv_transfer_s(OSS, H100, "scale-up", 16384, "bf16", 1) < \
        kv_transfer_s(FULL, H100, "scale-up", 16384, "bf16", 1)
