"""SGLang's own scheduling in the serving simulator: prefill batches alone and first (its
default, without --enable-mixed-chunk) and its admission estimate of the output still to
come (PrefillAdder and new_token_ratio), checked against SGLang's rules written out."""

import math

import pytest

from meshplan.errors import InputError
from meshplan.scenario import make_cluster
from meshplan.serve import simulate as sim
from meshplan.serve import cost
from meshplan.serve.cost import StepModel
from meshplan.serve.memory import serve_memory
from meshplan.serve.spec import Pool, ServePlan
from meshplan.serve.traffic import Lengths, synthetic
from meshplan.specs.catalog.presets import load_model

L8 = load_model("llama3.1-8b")
H100 = make_cluster("8xH100-SXM-80GB")


def _steps(monkeypatch, plan, traffic):
    """Every iteration's StepModel.step_s arguments (tokens, seqs, decode context, prefill
    pairs, ...) and the result."""
    seen = []
    real = StepModel.step_s

    def spy(self, *args):
        seen.append(args)
        return real(self, *args)

    monkeypatch.setattr(StepModel, "step_s", spy)
    return seen, sim.simulate(L8, H100, plan, traffic)


def test_sglang_default_never_mixes_prefill_and_decode(monkeypatch):
    """SGLang's Scheduler.get_next_batch_to_run returns the prefill batch whenever
    get_new_batch_prefill forms one and a decode step only when it does not
    (enable_mixed_chunk is off by default): no iteration carries both prompt tokens and
    decode tokens. With --enable-mixed-chunk (and in vLLM) decode tokens ride along."""
    tr = synthetic(200, Lengths(200, 2000), Lengths(20, 300), rate_per_s=20, seed=3)
    plan = ServePlan((Pool(max_batched_tokens=2048),), scheduler="sglang", mixed_chunk=False)
    steps, res = _steps(monkeypatch, plan, tr)
    # args: tokens, seqs, decode context summed, prefill pairs, prefill context, logits
    prefill = [a for a in steps if a[3] > 0]
    decode = [a for a in steps if a[3] == 0]
    assert prefill and decode
    assert all(a[2] == 0 for a in prefill), "a prefill batch carried decode tokens"
    assert all(a[0] == a[1] for a in decode), "a decode step carried prompt tokens"
    steps.clear()
    _steps(monkeypatch, ServePlan((Pool(max_batched_tokens=2048),), scheduler="sglang"), tr)
    assert any(a[3] > 0 and a[2] > 0 for a in steps)


def test_sglang_admits_a_prompt_only_with_room_for_its_whole_output(monkeypatch):
    """PrefillAdder.add_one_req admits a request while its prompt plus min(max_new_tokens,
    4096) is below the remaining total, each admission taking that much off it; with an
    empty engine the first prefill batch therefore holds ceil(K / (p + o)) - 1 requests of
    a K-token cache, not the K / p whose prompts alone fit (vLLM's and the simulator's rule
    before). (The first request starts the engine alone on arrival; the second iteration
    admits the rest against K less its 1,000 prompt tokens in 16-token blocks, 1,008, and
    its remaining output at the starting ratio, 999 x 0.7.)"""
    pool = Pool(max_batched_tokens=65536, max_num_seqs=1024, gpu_mem_util=0.3)
    plan = ServePlan((pool,), scheduler="sglang", mixed_chunk=False)
    mem = serve_memory(L8, H100.gpu, pool, "bf16", "bf16", scheduler="sglang")
    k = mem.kv_tokens // mem.block_tokens * mem.block_tokens
    p, o = 1000, 1000
    tr = synthetic(400, Lengths(p, p), Lengths(o, o), rate_per_s=math.inf)
    steps, res = _steps(monkeypatch, plan, tr)
    room = k - 1008 - 999 * 0.7
    assert steps[0][1] == 1 and steps[1][1] == math.ceil(room / (p + o)) - 1
    assert (k - 1008) // p > steps[1][1] + 10  # (the prompts alone would admit many more)


def test_new_token_ratio_follows_sglang(monkeypatch):
    """new_token_ratio: 0.7 at start, less (0.7 - 0.7 x 0.14) / 600 after each decode step
    that found room, back to 0.7 when the engine goes idle (Scheduler.init_new_token_ratio,
    update_running_batch; python/sglang/srt/environ.py defaults)."""
    ratios = []
    real = sim._Engine._update_ratio

    def spy(self, batch, retracted):
        real(self, batch, retracted)
        ratios.append(self.new_token_ratio)

    monkeypatch.setattr(sim._Engine, "_update_ratio", spy)
    tr = synthetic(1, Lengths(100, 100), Lengths(50, 50), rate_per_s=math.inf)
    sim.simulate(L8, H100, ServePlan((Pool(),), scheduler="sglang", mixed_chunk=False), tr)
    step = (0.7 - 0.7 * 0.14) / 600
    # 49 decode steps after the prefill (which makes the first token), then idle
    assert ratios[:-1] == pytest.approx([0.7 - step * i for i in range(1, 50)])
    assert ratios[-1] == 0.7


def test_only_sglang_runs_unmixed():
    with pytest.raises(InputError, match="mixed_chunk"):
        ServePlan((Pool(),), scheduler="vllm", mixed_chunk=False)


@pytest.mark.parametrize("mixed", [True, False])
def test_sglang_decode_group_is_the_per_request_loop(mixed):
    """The decode group gives the per-request loop's results with SGLang's schedule too
    (the admission estimate reads a member's tokens through the group's step counter)."""
    tr = synthetic(300, Lengths(100, 3000), Lengths(1, 700), rate_per_s=30, seed=5)
    plan = ServePlan((Pool(gpu_mem_util=0.3, max_batched_tokens=4096),), scheduler="sglang",
                     mixed_chunk=mixed)
    fast = sim.simulate(L8, H100, plan, tr)
    ref = sim.simulate(L8, H100, plan, tr, decode_group=False)
    for name in ("first_token_s", "finish_s", "preemptions", "iterations", "kv_use"):
        assert getattr(fast, name) == getattr(ref, name), name


def _vllm_sampling_s(vl: StepModel, rows: int) -> float:
    """vLLM V1's logits all-gather over tp and float32 cast + argmax of ``rows`` sampled rows
    (serve/cost.py VLLM_SAMPLER_*), written out."""
    from meshplan.cost import collectives
    m, p = vl.model, vl.pool
    elem = (rows * m.vocab * (2 + 4 + 4) / vl.dev.hbm_bytes_per_s
            + cost.VLLM_SAMPLER_KERNELS * cost.KERNEL_FLOOR_S)
    pl = collectives.placement(((p.tp, 1),), vl.cluster.domain_size)
    return elem + collectives.all_gather_s(vl.cluster, pl, rows * m.vocab * 2)


def test_sglang_prefill_iteration_is_launch_bound():
    """SGLang runs iterations with prompt tokens eagerly (CUDA graphs for decode only): a
    short prefill of DeepSeek-V3 (61 layers) lasts the host's launch time, the measured
    82.64 ms of sgl-project/sglang #12160 (cost.SGLANG_EAGER_MEASURED_S); a
    decode step, and vLLM's prefill (piecewise CUDA graphs), keep their GPU time; a prefill
    long enough to outlast the launches keeps it too."""
    dsv3 = load_model("deepseek-v3")
    cl = make_cluster("8xH200-SXM-141GB")
    sg = StepModel(dsv3, cl, Pool(tp=8), "fp8", "bf16", "sglang")
    vl = StepModel(dsv3, cl, Pool(tp=8), "fp8", "bf16", "vllm")
    short = sg.prefill_step(8)
    assert short.total_s == pytest.approx(82.64e-3, rel=1e-9)
    assert vl.prefill_step(8).total_s < 0.5 * short.total_s
    # (vLLM's own sampling after the output layer, cost.VLLM_SAMPLER_*, set apart)
    assert sg.decode_step(8, 1000).total_s == pytest.approx(
        vl.decode_step(8, 1000).total_s - _vllm_sampling_s(vl, 8), rel=1e-12)
    long = sg.prefill_step(16384)
    assert long.total_s == pytest.approx(vl.prefill_step(16384).total_s - _vllm_sampling_s(vl, 1),
                                         rel=1e-12)
    assert long.total_s > 82.64e-3


def test_sglang_launch_floor_goes_by_the_models_ops():
    """The host launches ops, not layers: #12160's 82.64 ms is DeepSeek-V3's 3,131 forward ops
    (cost/ops.py host_ops: 3 dense layers of 19, 58 MoE layers of 53), so Llama 3.1 70B's 80
    dense layers of 16 ops wait 1,280 x 26.4 us = 33.8 ms, not 80 x 1.355 ms = 108 ms (the
    per-layer reading charged each dense layer an MoE layer's launches)."""
    dsv3, l70 = load_model("deepseek-v3"), load_model("llama3.1-70b")
    assert cost.forward_host_ops(dsv3) == 3 * 19 + 58 * 53
    assert cost.forward_host_ops(l70) == 80 * 16
    sg = StepModel(l70, make_cluster("4xH200-SXM-141GB"), Pool(tp=4), "bf16", "bf16", "sglang")
    short = sg.prefill_step(8)
    assert short.total_s == pytest.approx(82.64e-3 * 1280 / 3131, rel=1e-9)
    assert short.total_s < 0.4 * 80 * 82.64e-3 / 61
