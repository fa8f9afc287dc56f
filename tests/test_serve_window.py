"""Serving with sliding-window attention (GPT-OSS, Gemma 2/3, Mistral 7B v0.1): KV charge,
attention time and KV transfer against hand-computed closed forms, and no change without a
window or when the window covers the context."""

import dataclasses
import math

import pytest

from meshplan.cost import collectives
from meshplan.scenario import make_cluster
from meshplan.serve.cost import StepModel, kv_transfer_s, window_pairs
from meshplan.serve.memory import (BLOCK_TOKENS, kv_bytes_per_token, kv_bytes_per_token_layer,
                                   kv_held_tokens, kv_layer_split, kv_request_bytes,
                                   serve_memory, window_blocks_held, windowed_prefill_pairs)
from meshplan.serve.simulate import _engines_for, simulate
from meshplan.serve.spec import Pool, ServePlan
from meshplan.serve.traffic import Lengths, parse_lengths, synthetic
from meshplan.specs.catalog.presets import load_model

H100 = make_cluster("8xH100-SXM-80GB")
G20 = load_model("gpt-oss-20b")  # 24 layers, 12 with a 128-key window, 8 kv heads x 64
G20_FULL = dataclasses.replace(G20, sliding_window=0, sliding_layers=0)
L8 = load_model("llama3.1-8b")


def test_gpt_oss_20b_preset_shape():
    assert (G20.layers, G20.sliding_layers, G20.sliding_window) == (24, 12, 128)
    # K and V x 8 kv heads x head_dim 64 x 2 bytes (bf16) per token and layer
    assert kv_bytes_per_token_layer(G20, 1, "bf16") == 2 * 8 * 64 * 2 == 2048


def test_kv_bytes_of_a_windowed_request_closed_form():
    """c = 8192 (a multiple of the 16-token block): 12 full layers x 8192 + 12 windowed layers
    x min(8192, 128) token-layers, x 2048 bytes."""
    c = 8192
    assert kv_request_bytes(G20, 1, "bf16", c) == (12 * c + 12 * 128) * 2048 == 204_472_320
    # without the window every layer holds every token: the old per-token figure
    assert kv_request_bytes(G20_FULL, 1, "bf16", c) == kv_bytes_per_token(G20_FULL, 1, "bf16") * c
    # tp 2 splits the 8 kv heads
    assert kv_request_bytes(G20, 2, "bf16", c) == (12 * c + 12 * 128) * 1024


def test_window_blocks_follow_vllm_rule():
    # vLLM's docstring example: window 4, 7 computed tokens -> 4 skipped (block size 1)
    assert window_blocks_held(7, 8, 4, 1) == 8 - 4
    # window 128, 16-token blocks, 8192 computed: blocks before token 8065 freed (504), 512
    # held up to 8192 -> 8 blocks; a slot for the next token adds the 513th -> 9
    assert window_blocks_held(8192, 8192, 128, 16) == 8
    assert window_blocks_held(8192, 8193, 128, 16) == 9
    # a whole 8192-token prompt chunk computed from 0 holds all its blocks during that step
    assert window_blocks_held(0, 8192, 128, 16) == 512
    # no window, or a window covering the context: every block
    assert window_blocks_held(8192, 8192, 0, 16) == 512
    assert window_blocks_held(1000, 1000, 4096, 16) == 63


def test_window_covering_context_changes_nothing():
    big = dataclasses.replace(G20, sliding_window=16384, sliding_layers=12)
    c = 8192
    assert kv_request_bytes(big, 1, "bf16", c) == kv_request_bytes(G20_FULL, 1, "bf16", c)
    a, b = (StepModel(m, H100, Pool(tp=1), "bf16", "bf16") for m in (big, G20_FULL))
    assert a.decode_step(32, c).to_dict() == b.decode_step(32, c).to_dict()
    assert a.prefill_step(c).attention_s == pytest.approx(b.prefill_step(c).attention_s,
                                                          rel=1e-12)
    assert kv_transfer_s(big, H100, "scale-out", c, "bf16", 1) == pytest.approx(
        kv_transfer_s(G20_FULL, H100, "scale-out", c, "bf16", 1), rel=1e-12)


def test_decode_attention_of_windowed_layers_reads_only_the_window():
    """A decode step at context c: windowed layers read min(c, w) tokens instead of c, so the
    saving is sliding_layers x batch x (c - w) x the per-token cost of one layer (the larger
    of its bytes over bandwidth and its FLOPs over attention FLOP/s)."""
    batch, c, w = 32, 8192, 128
    win = StepModel(G20, H100, Pool(tp=1), "bf16", "bf16")
    full = StepModel(G20_FULL, H100, Pool(tp=1), "bf16", "bf16")
    a, b = win.decode_step(batch, c), full.decode_step(batch, c)
    per_ctx_s = max(win.decode_attn_flops_per_ctx / win.attn_flops_s,
                    win.kv_layer_bytes / win.dev.hbm_bytes_per_s)
    assert a.attention_s < b.attention_s
    assert b.attention_s - a.attention_s == pytest.approx(12 * batch * (c - w) * per_ctx_s,
                                                          rel=1e-9)
    # everything but attention is the same model
    assert (a.gemm_s, a.tp_comm_s, a.host_s) == (b.gemm_s, b.tp_comm_s, b.host_s)
    # without the window sums the step prices the windowed layers as full ones
    assert win.step(batch, batch, batch * c).to_dict() == b.to_dict()


def test_window_pairs_closed_form_matches_the_sum():
    for start, n, w in [(0, 8192, 128), (100, 50, 128), (120, 50, 128), (500, 300, 128),
                        (0, 100, 4096), (0, 1, 1), (7, 9, 4)]:
        brute = sum(min(q, w) for q in range(start + 1, start + n + 1))
        assert window_pairs(start, n, w) == brute
    assert window_pairs(10, 20, 0) == 20 * 10 + 20 * 21 / 2


def test_prefill_attention_windowed_is_cheaper():
    win = StepModel(G20, H100, Pool(tp=1), "bf16", "bf16")
    full = StepModel(G20_FULL, H100, Pool(tp=1), "bf16", "bf16")
    p = 8192
    a, b = win.prefill_step(p), full.prefill_step(p)
    # at 8192 tokens prefill attention is FLOP-bound: half the layers do window_pairs
    # instead of p(p+1)/2 pairs
    pair_s = win.prefill_attn_flops_per_pair / win.prefill_attn_flops_s
    assert b.attention_s - a.attention_s == pytest.approx(
        12 * (p * (p + 1) / 2 - window_pairs(0, p, 128)) * pair_s, rel=1e-9)


def test_kv_transfer_sends_only_the_window():
    c = 8192
    sent_bytes = (12 * c + 12 * 128) * 2048
    for tier, tp in (("scale-out", 1), ("scale-up", 2)):
        want = collectives.p2p_s(H100, tier == "scale-out", sent_bytes / tp)
        assert kv_transfer_s(G20, H100, tier, c, "bf16", tp) == pytest.approx(want, rel=1e-12)
    assert kv_transfer_s(G20, H100, "scale-out", c, "bf16", 1) < kv_transfer_s(
        G20_FULL, H100, "scale-out", c, "bf16", 1)


def test_layer_split_per_stage():
    assert kv_layer_split(G20) == (12, 12)
    assert kv_layer_split(G20, 2) == (6, 6)
    assert kv_layer_split(L8) == (32, 0)
    mistral_like = dataclasses.replace(L8, sliding_window=4096)  # every layer windowed
    assert mistral_like.sliding_layers == 32 and kv_layer_split(mistral_like) == (0, 32)


def test_engine_capacity_is_the_same_byte_budget():
    """The simulator counts windowed models in layer-blocks: the same bytes as kv_tokens
    tokens on every layer."""
    plan = ServePlan((Pool(tp=1, gpu_mem_util=0.56),))
    mem = serve_memory(G20, H100.gpu, plan.pools[0], "bf16", "bf16")
    (e,) = _engines_for(plan.pools[0], G20, H100, plan, "both", 0)
    assert e.capacity_blocks == mem.kv_tokens // BLOCK_TOKENS * 24
    # a request of 8192 computed tokens is charged 12 x 512 + 12 x 8 layer-blocks
    assert e._demand(8192, 8192) == 12 * 512 + 12 * 8
    assert e._demand(8192, 8192) * BLOCK_TOKENS * 2048 == kv_request_bytes(G20, 1, "bf16", 8192)
    (f,) = _engines_for(plan.pools[0], G20_FULL, H100, plan, "both", 0)
    assert f.capacity_blocks == mem.kv_tokens // BLOCK_TOKENS and f._demand(8192, 8192) == 512


def test_windowed_cache_holds_more_requests():
    """Long prompts on a small cache: the windowed model keeps about twice the requests
    running (half its layers hold 128 tokens instead of ~8000) and preempts less."""
    tr = synthetic(120, parse_lengths("input_len", "6000:10000"),
                   parse_lengths("output_len", "200"), rate_per_s=float("inf"), seed=1)
    plan = ServePlan((Pool(tp=1, gpu_mem_util=0.56),))
    a, b = (simulate(m, H100, plan, tr).summary() for m in (G20, G20_FULL))
    assert a["mean_batch"] > 1.5 * b["mean_batch"]
    assert a["preemptions"] < b["preemptions"]
    assert a["output_tokens_per_s_per_gpu"] > b["output_tokens_per_s_per_gpu"]
    # disaggregated and TensorRT-LLM-style reservation run too
    for p in (ServePlan((Pool(role="prefill"), Pool(role="decode"))),
              ServePlan(plan.pools, scheduler="trtllm")):
        s = simulate(G20, H100, p, tr).summary()
        assert s["output_tokens_per_s_per_gpu"] > 0


# ---- from main (f300f8a): the unrounded every-layer forms ---------------------------------

def test_a_request_holds_full_layers_whole_and_windowed_layers_up_to_the_window():
    c = 8192
    per_layer = kv_bytes_per_token_layer(G20, 1, "bf16")
    by_hand = (12 * c + 12 * 128) * per_layer  # full layers x c + windowed layers x 128
    assert G20.layers * per_layer * kv_held_tokens(G20, c) == pytest.approx(by_hand)
    assert kv_held_tokens(G20, 100) == 100  # inside the window: every layer holds it all
    assert kv_held_tokens(G20_FULL, c) == c


def test_prefill_pairs_match_a_brute_force_count():
    for start, n in ((0, 300), (50, 100), (1000, 64)):
        full = sum(start + i for i in range(1, n + 1))
        win = sum(min(start + i, 128) for i in range(1, n + 1))
        assert windowed_prefill_pairs(G20, start, n) == pytest.approx((full + win) / 2)
        assert windowed_prefill_pairs(G20_FULL, start, n) == full


def test_decode_and_kv_transfer_cost_less_with_the_window_and_not_at_short_context():
    a, b = StepModel(G20, H100, Pool(tp=1), "bf16", "bf16"), \
        StepModel(G20_FULL, H100, Pool(tp=1), "bf16", "bf16")
    long_w, long_f = a.decode_step(64, 16384), b.decode_step(64, 16384)
    assert long_w.attention_s < 0.6 * long_f.attention_s  # half the layers read 128 keys, not 16k
    assert long_w.gemm_s == long_f.gemm_s
    assert a.decode_step(64, 100).attention_s == pytest.approx(b.decode_step(64, 100).attention_s)
    assert kv_transfer_s(G20, H100, "scale-up", 16384, "bf16", 1) < \
        kv_transfer_s(G20_FULL, H100, "scale-up", 16384, "bf16", 1)


@pytest.mark.parametrize("case", ["poisson", "preempting", "disaggregated", "pipeline",
                                  "wide-window"])
def test_decode_group_with_a_window_is_the_per_request_loop(case):
    """The decode group with sliding-window layers (contexts capped at the window, blocks
    freed once past it) gives the per-request loop's results to the last bit."""
    model, cluster = G20, H100
    tr = synthetic(400, Lengths(50, 3000), Lengths(1, 600), rate_per_s=25, seed=11)
    plan = ServePlan((Pool(),))
    if case == "preempting":
        plan = ServePlan((Pool(gpu_mem_util=0.52, max_num_seqs=512),))  # ~2 GiB of cache
        tr = synthetic(300, Lengths(500, 4000), Lengths(200, 2000), rate_per_s=math.inf, seed=12)
    elif case == "disaggregated":
        cluster = make_cluster("16xH100-SXM-80GB")
        plan = ServePlan((Pool(role="prefill"), Pool(tp=2, role="decode")), kv_tier="scale-out")
    elif case == "pipeline":
        plan = ServePlan((Pool(tp=2, pp=2),))
    elif case == "wide-window":  # a window of 1,000 tokens: requests cross it while decoding
        model = dataclasses.replace(G20, sliding_window=1000)
    fast = simulate(model, cluster, plan, tr)
    ref = simulate(model, cluster, plan, tr, decode_group=False)
    for name in ("first_token_s", "finish_s", "makespan_s", "preemptions", "iterations",
                 "kv_use", "mean_in_system", "busy_share", "mean_batch"):
        assert getattr(fast, name) == getattr(ref, name), name
    if case == "preempting":
        assert ref.preemptions > 0
