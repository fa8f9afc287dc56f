"""Serving: what vLLM and SGLang do, as their sources say, priced and exported so.

- Expert parallel over the tensor-parallel GPUs without attention data parallelism
  (tp = ep, attn_dp = 1): every rank holds the same tokens after attention; vLLM
  (fused_moe/config.py use_all2all_kernels needs dp > 1) and SGLang (StandardDispatcher,
  the default --moe-a2a-backend none) dispatch nothing and sum the expert outputs with one
  all-reduce over the 8 GPUs, as a dense MLP's tensor-parallel all-reduce.
- SGLang's --mem-fraction-static is "the fraction of the memory used for static allocation
  (model weights and KV cache memory pool)": its KV pool is the free memory after the
  weights load less (1 - fraction) x the free memory before they load
  (KVCacheConfigurator._profile_available_bytes, sglang/srt/mem_cache/
  kv_cache_configurator.py). vLLM's --gpu-memory-utilization is the share of the whole GPU
  for weights, activations and cache together; the CUDA context and communicators, created
  before vLLM's memory snapshot, sit in the (1 - util) share left (vllm/v1/worker/
  gpu_worker.py init_device / determine_available_memory).
- TensorRT-LLM's kv_cache_config.free_gpu_memory_fraction is the share of the memory free
  after the weights, a profiled forward pass and the runtime: its KV cache is
  (total - peak + temporary_kv) x fraction (KvCacheCreator._cal_max_memory,
  tensorrt_llm/_torch/pyexecutor/_util.py, NVIDIA/TensorRT-LLM commit 0004396720054fd8),
  i.e. fraction x (memory - weights - activations - runtime).
"""

import json
import re
from dataclasses import replace

import pytest

from meshplan.cost import collectives
from meshplan.cost.efficiency import HOST
from meshplan.errors import InputError
from meshplan.scenario import make_cluster
from meshplan.serve.cost import StepModel, all_reduce_small_s
from meshplan.serve.export import commands, render_plan
from meshplan.serve.memory import (activation_bytes, kv_bytes_per_token, serve_memory,
                                   weight_bytes_per_gpu)
from meshplan.serve.simulate import simulate
from meshplan.serve.spec import Pool, ServePlan
from meshplan.serve.vllm_serve import cudagraph_capture_sizes, padded_graph_tokens
from meshplan.serve.traffic import Lengths, synthetic
from meshplan.specs.catalog.presets import load_model

QWEN = load_model("qwen3-235b-a22b")
L8 = load_model("llama3.1-8b")
L70 = load_model("llama3.1-70b")
H100 = make_cluster("8xH100-SXM-80GB")
GiB = 2**30


@pytest.mark.parametrize("tokens", [1, 64, 2048])
def test_tp_ep_without_attention_dp_is_two_all_reduces_per_layer(tokens):
    """tp8 ep8, no attention DP: the communication of a step is two all-reduces of
    tokens x hidden 16-bit activations per layer (attention output, MoE output), no
    expert all-to-all; the same as tp8 without expert parallel."""
    sm = StepModel(QWEN, H100, Pool(tp=8, ep=8), "fp8", "fp8")
    st = sm.step(tokens, tokens)
    ar = all_reduce_small_s(H100, 8, 2 * tokens * QWEN.hidden)
    # (and vLLM V1's all-gather of the sampled rows' 16-bit logits, serve/cost.py)
    logits = collectives.all_gather_s(H100, collectives.placement(((8, 1),), H100.domain_size),
                                      tokens * QWEN.vocab * 2)
    assert st.ep_comm_s == 0
    assert st.tp_comm_s == pytest.approx(2 * QWEN.layers * ar + logits)
    plain = StepModel(QWEN, H100, Pool(tp=8), "fp8", "fp8").step(tokens, tokens)
    assert st.tp_comm_s + st.ep_comm_s == pytest.approx(plain.tp_comm_s + plain.ep_comm_s)


def test_attention_dp_keeps_the_expert_all_to_all():
    """With attention DP each rank brings its own tokens: the dispatch/combine stays."""
    st = StepModel(QWEN, H100, Pool(tp=1, attn_dp=8, ep=8), "fp8", "fp8").step(64, 64)
    assert st.ep_comm_s > 0 and st.tp_comm_s == 0


@pytest.mark.parametrize("tokens,wdtype,x_bytes", [(1, "fp8", 1), (187, "fp8", 1),
                                                   (256, "bf16", 2)])
def test_trtllm_attention_dp_moe_gathers_then_reduce_scatters(tokens, wdtype, x_bytes):
    """TensorRT-LLM (PyTorch backend, CutlassFusedMoE, the v1.0-era
    tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py): select_alltoall_method_type
    gives NotEnabled when moe_ep_size <= top_k (Qwen3: ep 8, top-8) and, on Hopper, without
    MNNVL or TRTLLM_CAN_USE_DEEP_EP; the layer then runs no all-to-all. forward_chunk
    quantizes each rank's tokens to FP8 (static_quantize_e4m3_per_tensor, FP8 qdq
    checkpoints; unquantized: bf16) and all-gathers them with their top-k int32 expert ids
    and fp32 weights; every rank runs its experts on all ranks' tokens;
    reducescatter_or_allreduce reduce-scatters the bf16 outputs over the whole gathered
    buffer. vLLM and SGLang keep the dispatch/combine all-to-all."""
    pool = Pool(tp=1, attn_dp=8, ep=8)
    trt = StepModel(QWEN, H100, pool, wdtype, "fp8", scheduler="trtllm").step(tokens, tokens)
    pl = collectives.placement(((8, 1),), H100.domain_size)
    rows = 8 * tokens  # every DP rank brings ``tokens``
    gather = collectives.all_gather_s(
        H100, pl, rows * (QWEN.hidden * x_bytes + QWEN.moe_topk * (4 + 4)))
    scatter = collectives.reduce_scatter_s(H100, pl, rows * QWEN.hidden * 2)
    assert trt.ep_comm_s == pytest.approx(QWEN.num_moe_layers * (gather + scatter))
    # (vLLM runs the CUDA graph captured for the next size up: 187 tokens move as 192,
    # serve/vllm_serve.py)
    sizes = cudagraph_capture_sizes(pool.max_num_seqs, pool.max_batched_tokens)
    for sched, moved in (("vllm", padded_graph_tokens(tokens, sizes)), ("sglang", tokens)):
        a2a = collectives.all_to_all_s(H100, pl, 2 * moved * QWEN.moe_topk * QWEN.hidden)
        other = StepModel(QWEN, H100, pool, wdtype, "fp8", scheduler=sched).step(tokens, tokens)
        assert other.ep_comm_s == pytest.approx(QWEN.num_moe_layers * 2 * a2a)
    # the rest of the step is the engines' common model
    assert trt.gemm_s == other.gemm_s and trt.attention_s == other.attention_s


def test_trtllm_lockstep_gathers_every_ranks_tokens_once():
    """One busy attention-DP rank of two: TensorRT-LLM's all-gather / reduce-scatter move
    the batch of all ranks (4000 rows, priced as 2000 per rank), not the busiest rank's
    tokens on every rank as the all-to-all's wait for the largest sender is priced."""
    q3 = load_model("qwen3-30b-a3b")
    cl = make_cluster("2xH100-SXM-80GB")
    pool = Pool(tp=1, attn_dp=2, ep=2)
    alone = [(4000, 1, 0.0, 4000 * 4001 / 2, 0.0, 1)]
    trt = StepModel(q3, cl, pool, "bf16", "bf16", scheduler="trtllm")
    experts, comm = trt._moe_shared(4000)
    assert trt.lockstep_step_s(alone) == pytest.approx(
        trt.prefill_step(4000).total_s - experts - comm + sum(trt._moe_shared(2000)), rel=1e-9)
    vllm = StepModel(q3, cl, pool, "bf16", "bf16")
    experts, a2a = vllm._moe_shared(4000)
    assert vllm.lockstep_step_s(alone) == pytest.approx(
        vllm.prefill_step(4000).total_s - experts + vllm._moe_shared(2000)[0], rel=1e-9)

def test_simulated_trtllm_engines_price_trtllms_moe_communication():
    """simulate() builds each engine's step model with the plan's scheduler."""
    plan = ServePlan((Pool(tp=1, attn_dp=8, ep=8),), "fp8", "fp8", scheduler="trtllm")
    traffic = synthetic(8, Lengths(64, 64), Lengths(4, 4), rate_per_s=None, concurrency=8)
    trt = simulate(QWEN, H100, plan, traffic)
    vllm = simulate(QWEN, H100, replace(plan, scheduler="vllm"), traffic)
    sm = StepModel(QWEN, H100, plan.pools[0], "fp8", "fp8", scheduler="trtllm")
    assert sm.step(8, 8).ep_comm_s < StepModel(QWEN, H100, plan.pools[0], "fp8",
                                               "fp8").step(8, 8).ep_comm_s
    assert trt.makespan_s < vllm.makespan_s


# ---- SGLang's --mem-fraction-static ----------------------------------------------------------

def _sglang_pool_bytes(fraction, memory, runtime, weights):
    """SGLang's KV pool: free after load minus (1 - fraction) x free before load, the free
    memory before load being the GPU's less the CUDA context and communicators."""
    pre_load = memory - runtime
    return (pre_load - weights) - pre_load * (1 - fraction)


@pytest.mark.parametrize("tp,fraction", [(1, 0.85), (4, 0.9)])
def test_sglang_memory_check_uses_the_static_fraction(tp, fraction):
    pool = Pool(tp=tp, gpu_mem_util=fraction)
    m = serve_memory(L70 if tp > 1 else L8, H100.gpu, pool, "bf16", "bf16", scheduler="sglang")
    runtime = HOST.runtime_reserved_bytes + (HOST.comm_buffer_bytes if tp > 1 else 0)
    w = weight_bytes_per_gpu(L70 if tp > 1 else L8, pool, "bf16")
    assert m.runtime_bytes == runtime and m.weights_bytes == w
    assert m.kv_bytes == pytest.approx(_sglang_pool_bytes(fraction, H100.gpu.memory_bytes, runtime, w))
    # the activations are outside the static pool, not taken out of the cache
    assert m.activation_shortfall_bytes == 0 and m.fits


def test_sglang_fraction_leaving_no_room_for_activations_does_not_fit():
    """--mem-fraction-static 0.99 leaves 0.01 x ~78.5 GiB = 0.8 GiB for a 16k-token forward
    pass: SGLang would run out of memory there; vLLM's share takes the activations out of
    the cache instead, but its 0.99 leaves 0.8 GiB outside the share for the 1.5 GiB runtime
    (CUDA context, libraries): vLLM refuses to start when less than the share is free
    (Worker.init_device); at 0.98 (1.6 GiB outside) it runs."""
    pool = Pool(tp=1, gpu_mem_util=0.99, max_batched_tokens=16384, max_num_seqs=256)
    m = serve_memory(L8, H100.gpu, pool, "bf16", "bf16", scheduler="sglang")
    assert m.activation_bytes > 0.01 * (H100.gpu.memory_bytes - m.runtime_bytes)
    assert not m.fits and m.activation_shortfall_bytes == pytest.approx(
        m.activation_bytes - 0.01 * (H100.gpu.memory_bytes - m.runtime_bytes))
    v = serve_memory(L8, H100.gpu, pool, "bf16", "bf16")
    assert not v.fits and v.runtime_shortfall_bytes == pytest.approx(
        v.runtime_bytes - 0.01 * H100.gpu.memory_bytes) and "refuses to start" in v.why_not()
    assert serve_memory(L8, H100.gpu, replace(pool, gpu_mem_util=0.98), "bf16", "bf16").fits
    plan = ServePlan((pool,), scheduler="sglang")
    traffic = synthetic(4, Lengths(100, 100), Lengths(10, 10), rate_per_s=None, concurrency=2)
    with pytest.raises(InputError, match="mem-fraction-static"):
        simulate(L8, H100, plan, traffic)


def _flag(argv, name):
    return float(argv[argv.index(name) + 1])


@pytest.mark.parametrize("util", [0.9, 0.8])
def test_sglang_export_gives_the_simulated_kv_cache(util):
    """A plan simulated with vLLM's meaning (the serve command's) exported for SGLang: the
    --mem-fraction-static written gives, by SGLang's formula, the KV cache the simulation
    used (to 1e-4 of the memory) and leaves at least the activations outside the pool."""
    pool = Pool(tp=4, gpu_mem_util=util)
    plan = ServePlan((pool,), "fp8", "fp8")
    sim = serve_memory(L70, H100.gpu, pool, "fp8", "fp8")
    argv = commands("sglang", plan, L70, "org/x", H100, 2300)[0][1]
    f = _flag(argv, "--mem-fraction-static")
    got = _sglang_pool_bytes(f, H100.gpu.memory_bytes, sim.runtime_bytes, sim.weights_bytes)
    assert sim.kv_bytes - 1e-4 * H100.gpu.memory_bytes <= got <= sim.kv_bytes
    assert (1 - f) * (H100.gpu.memory_bytes - sim.runtime_bytes) >= sim.activation_bytes


def test_memory_flags_pass_through_when_the_meanings_agree():
    pool = Pool(tp=4, gpu_mem_util=0.87)
    vllm = commands("vllm", ServePlan((pool,)), L70, "org/x", H100, 2300)[0][1]
    assert _flag(vllm, "--gpu-memory-utilization") == 0.87
    sgl = commands("sglang", ServePlan((pool,), scheduler="sglang"), L70, "org/x", H100,
                   2300)[0][1]
    assert _flag(sgl, "--mem-fraction-static") == 0.87


def test_vllm_export_of_an_sglang_plan_gives_its_kv_cache():
    """The other way: a plan read with SGLang's meaning exported for vLLM, whose budget
    is weights + activations + runtime + cache over the whole GPU."""
    pool = Pool(tp=4, gpu_mem_util=0.85)
    plan = ServePlan((pool,), scheduler="sglang")
    sim = serve_memory(L70, H100.gpu, pool, "bf16", "bf16", scheduler="sglang")
    argv = commands("vllm", plan, L70, "org/x", H100, 2300)[0][1]
    u = _flag(argv, "--gpu-memory-utilization")
    got = u * H100.gpu.memory_bytes - sim.weights_bytes - sim.activation_bytes
    assert sim.kv_bytes - 1e-4 * H100.gpu.memory_bytes <= got <= sim.kv_bytes
    assert re.fullmatch(r"0\.\d{1,4}", argv[argv.index("--gpu-memory-utilization") + 1])


# ---- TensorRT-LLM's free_gpu_memory_fraction -------------------------------------------------

def _runtime(pool):
    return HOST.runtime_reserved_bytes + (HOST.comm_buffer_bytes if pool.tp * pool.attn_dp > 1
                                          else 0)


def _trtllm_kv_bytes(model, pool, dtype, memory=H100.gpu.memory_bytes):
    """TensorRT-LLM's KV cache: fraction x (memory - peak), the peak being the weights, the
    profiled forward pass's activations and what lives outside torch (CUDA context, NCCL)."""
    peak = weight_bytes_per_gpu(model, pool, dtype) + activation_bytes(model, pool) + _runtime(pool)
    return pool.gpu_mem_util * (memory - peak)


@pytest.mark.parametrize("model,tp,fraction", [(L8, 1, 0.95), (L70, 2, 0.9), (L70, 4, 0.5)])
def test_trtllm_kv_cache_is_the_fraction_of_the_free_memory(model, tp, fraction):
    pool = Pool(tp=tp, gpu_mem_util=fraction)
    m = serve_memory(model, H100.gpu, pool, "fp8", "fp8", scheduler="trtllm")
    kv = _trtllm_kv_bytes(model, pool, "fp8")
    assert m.kv_bytes == pytest.approx(kv, rel=1e-12)
    per_token = kv_bytes_per_token(model, tp, "fp8")
    assert m.kv_tokens == int(kv // per_token) // 16 * 16
    # not vLLM's reading, fraction x memory - weights - activations (the runtime outside the
    # share): f (M - w - a - r) - (f M - w - a) = (1 - f)(w + a) - f r
    vllm = serve_memory(model, H100.gpu, pool, "fp8", "fp8", scheduler="vllm")
    held = m.weights_bytes + m.activation_bytes
    assert m.kv_bytes - vllm.kv_bytes == pytest.approx(
        (1 - fraction) * held - fraction * m.runtime_bytes, rel=1e-9)


def test_trtllm_fraction_fits_where_vllms_share_would_not():
    """Llama 3.1 70B fp8 on one H100: weights, activations and runtime take ~68.6 GiB of 80.
    vLLM's 0.85 (68 GiB for everything) leaves no cache; TensorRT-LLM's 0.85 of the ~11.4
    GiB free leaves ~9.7 GiB, and the plan runs."""
    pool = Pool(tp=1, gpu_mem_util=0.85)
    assert not serve_memory(L70, H100.gpu, pool, "fp8", "fp8", scheduler="vllm").fits
    m = serve_memory(L70, H100.gpu, pool, "fp8", "fp8", scheduler="trtllm")
    assert m.fits and m.kv_bytes == pytest.approx(_trtllm_kv_bytes(L70, pool, "fp8"))
    plan = ServePlan((pool,), "fp8", "fp8", scheduler="trtllm")
    traffic = synthetic(4, Lengths(100, 100), Lengths(10, 10), rate_per_s=None, concurrency=2)
    assert simulate(L70, H100, plan, traffic).output_tokens_per_s_per_gpu() > 0


def test_trtllm_without_free_memory_does_not_fit_and_says_why():
    pool = Pool(tp=1, gpu_mem_util=0.9)  # Llama 3.1 70B bf16: 131 GiB of weights on 80
    m = serve_memory(L70, H100.gpu, pool, "bf16", "bf16", scheduler="trtllm")
    assert m.kv_bytes == 0 and not m.fits
    assert "free_gpu_memory_fraction" in m.why_not()


def test_unknown_scheduler_is_refused():
    with pytest.raises(InputError, match="scheduler"):
        serve_memory(L8, H100.gpu, Pool(), "bf16", "bf16", scheduler="tgi")


@pytest.mark.parametrize("fraction", [0.95, 0.9])
def test_trtllm_plan_exported_for_vllm_gives_trtllms_kv_cache(fraction):
    """A plan simulated as TensorRT-LLM (validate-serve's rows) exported for vLLM: the
    --gpu-memory-utilization written gives, by vLLM's formula, TensorRT-LLM's cache."""
    pool = Pool(tp=2, gpu_mem_util=fraction)
    plan = ServePlan((pool,), "fp8", "fp8", scheduler="trtllm")
    kv = _trtllm_kv_bytes(L70, pool, "fp8")
    u = _flag(commands("vllm", plan, L70, "org/x", H100, 2300)[0][1], "--gpu-memory-utilization")
    got = u * H100.gpu.memory_bytes - weight_bytes_per_gpu(L70, pool, "fp8") - activation_bytes(L70, pool)
    assert kv - 1e-4 * H100.gpu.memory_bytes <= got <= kv


def test_trtllm_plan_exported_for_sglang_gives_trtllms_kv_cache():
    pool = Pool(tp=2, gpu_mem_util=0.95)
    plan = ServePlan((pool,), "fp8", "fp8", scheduler="trtllm")
    kv = _trtllm_kv_bytes(L70, pool, "fp8")
    f = _flag(commands("sglang", plan, L70, "org/x", H100, 2300)[0][1], "--mem-fraction-static")
    got = _sglang_pool_bytes(f, H100.gpu.memory_bytes, _runtime(pool), weight_bytes_per_gpu(L70, pool, "fp8"))
    assert kv - 1e-4 * H100.gpu.memory_bytes <= got <= kv


# ---- plan.json states the launch line's memory share ----------------------------------------

def _exported(engine, plan, model=L70):
    r = render_plan(engine, plan, model, "org/x", H100, 2300)
    return json.loads(r.files["plan.json"]), r.files[f"launch_{engine}.sh"]


@pytest.mark.parametrize("engine,scheduler,flag", [
    ("sglang", "vllm", "--mem-fraction-static"),       # serve's plans, converted for SGLang
    ("vllm", "trtllm", "--gpu-memory-utilization"),     # a TensorRT-LLM plan, for vLLM
    ("vllm", "vllm", "--gpu-memory-utilization"),       # passed through
    ("sglang", "sglang", "--mem-fraction-static")])
def test_plan_json_gives_the_launch_lines_memory_share(engine, scheduler, flag):
    """plan.json and the launch line show one number for the engine's memory flag, and
    plan.json says whose meaning it has; the simulated share stays beside it."""
    pool = Pool(tp=4, gpu_mem_util=0.9)
    plan = ServePlan((pool,), "fp8", "fp8", scheduler=scheduler)
    d, script = _exported(engine, plan)
    words = script.split()
    p = d["pools"][0]
    assert p["memory_flag"] == flag and p["gpu_mem_util"] == float(words[words.index(flag) + 1])
    assert p["simulated_gpu_mem_util"] == 0.9
    assert d["gpu_mem_util_meaning"].split(":")[0].endswith(flag)
    assert d["scheduler"] == scheduler and d["engine"] == engine
    assert (p["gpu_mem_util"] == 0.9) == (engine == scheduler)


def test_serve_plan_json_names_the_meaning_of_its_share():
    """The plan's own JSON (serve --json's "plan") names whose meaning gpu_mem_util has."""
    for sched, flag in (("vllm", "--gpu-memory-utilization"), ("sglang", "--mem-fraction-static"),
                        ("trtllm", "free_gpu_memory_fraction")):
        d = ServePlan((Pool(),), scheduler=sched).to_dict()
        assert d["scheduler"] == sched and flag in d["gpu_mem_util_meaning"]
