"""Time of one engine iteration (a mixed batch of prefill chunks and decode tokens).

The same kernels as training at inference shapes, composed per layer:
- GEMMs: the per-shape GEMM model of cost/gemm.py that training uses (through
  ``compute.gemm_time_s`` at the workload precision): tiles (64-row granules on Hopper's
  wgmma, so m tokens cost ceil(m/64)*64 rows), waves over the SMs, the K-loop ramp and the
  HBM roofline. At decode sizes the weights dominate the bytes, so a step is bound by reading
  them; a fused MoE kernel runs the touched experts' GEMMs as one grouped kernel.
- MoE experts: only the experts some token picked are read; with T tokens routed top-k
  (k distinct experts each) over E experts, uniformly, the expected share touched is
  1 - (1 - k/E)^T.
- Attention: decode reads each request's cached K/V (MLA: the latent) once per layer;
  a fixed time per call (DECODE_ATTN_FLOOR_S, measured) plus
  max(bytes / bandwidth, FLOPs / attention FLOP/s). MLA decodes in the absorbed form
  (DeepSeek-V2 sec. 2.1.2: scores against the kv_lora_rank latent plus the RoPE key).
  Prefill chunks: causal flash attention over the chunk and the cached prefix.
  Sliding-window layers (ModelSpec.sliding_layers) attend to at most ``sliding_window`` keys,
  the query's own included (vLLM passes window_size = (sliding_window - 1, 0) to
  FlashAttention; the KV manager keeps the same window, serve/memory.py): a decode token
  reads min(c, w) cached tokens, a prefill query at position p (0-based) sees min(p + 1, w)
  keys (``window_pairs``), and the chunk reads min(a, w) of its a cached prefix tokens.
- Tensor parallel: two all-reduces per layer of tokens x hidden 16-bit activations. Small
  messages are latency-bound; the engines use a one-shot custom all-reduce below a few MB
  (vLLM csrc/custom_all_reduce.cuh, SGLang's port of it; TensorRT-LLM's own): one-shot,
  each rank reads the n-1 peers' buffers after a barrier (a measured fixed time,
  CUSTOM_AR_FIXED_S, else two link latencies, plus (n-1) x buffer / link bandwidth), or
  two-shot (the fixed part twice plus 2(n-1)/n x buffer / bandwidth); the ring of
  cost/collectives.py beyond 8 MiB or across nodes.
- MoE expert parallel: dispatch and combine all-to-alls (cost/collectives.py), only with
  attention data parallelism; TensorRT-LLM all-gathers the tokens and reduce-scatters the
  outputs instead (``_ep_comm_s``). Expert parallel over the tensor-parallel ranks alone (tp = ep,
  attn_dp = 1) moves no tokens: every rank holds the same tokens after attention, runs its
  own experts on them, and the expert outputs are summed by the MoE layer's tensor-parallel
  all-reduce, the one a dense MLP has (already in the two all-reduces per layer).
- Pipeline parallel: one point-to-point send of the hidden states per stage boundary.
- vLLM V1's sampling: the sampled rows' logits all-gathered over tp in 16-bit, cast to
  float32 and reduced by the greedy argmax (VLLM_SAMPLER_BYTES_PER_LOGIT).
- Element-wise kernels (norms, activation, FP8 input quantization): their bytes at HBM
  bandwidth after a fixed time each (KERNEL_FLOOR_S, measured in a CUDA graph), which is what
  they cost at decode sizes.
- Host: a fixed per-iteration cost for scheduling, input preparation and sampling that
  the GPU waits on (CUDA graphs remove the per-kernel launch cost of decode steps). An
  iteration run outside CUDA graphs lasts at least the host's time to launch its ops
  (eager_op_s an op, ``forward_host_ops``), the excess counted as host: SGLang runs its
  iterations with prompt tokens so; vLLM V1 every iteration of more tokens than its largest
  captured size (serve/vllm_serve.py), and pads the others to the next captured size, whose
  padded rows its GEMMs, element-wise kernels and all-reduces carry; its smaller iterations
  with prompt tokens run piecewise and wait on three host launches a layer
  (PIECEWISE_HOST_OPS_PER_LAYER).

Every iteration is a named breakdown whose parts sum to the total.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from math import ceil

from ..cost import collectives, compute, efficiency
from ..cost.ops import ACT, MatMul, Shard, head_ops, layer_ops
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from .memory import (OUTER_WEIGHT_DTYPE, experts_touched_share, kv_bytes_per_token_layer,
                     window_pairs)
from .spec import Pool
from .vllm_serve import cudagraph_capture_sizes, padded_graph_tokens


# Per-iteration host time the GPU waits on: scheduler, input tensors, sampling, output
# processing. vLLM's v0.6.0 performance blog (Sep 2024) profiled Llama 3 8B on one H100 and
# found the GPU idle for a large share of each ~10 ms step before multi-step scheduling and
# async output processing; SGLang's v0.4 blog (Dec 2024, "zero-overhead batch scheduler")
# overlaps the scheduler with the previous step. What remains on the critical path was
# measured on vLLM V1 by vllm-project/vllm#42131 (2026-05, B200, steady-state decode steps):
# "framework overhead (scheduling + input prep)" of ~0.4 ms per step, ~30% of the TPOT of a
# long-context, small-batch run: Scheduler.schedule() 0.2 ms, the model runner's
# _update_states ~0.18 ms and _prepare_inputs ~0.05 ms. (Was 0.3 ms, assumed.) TensorRT-LLM's
# C++ executor and SGLang's overlap scheduler are not measured here; the same figure stands in.
HOST_STEP_S = 0.4e-3
# Host work that grows with the batch: the per-request loop of vLLM V1's
# Scheduler.update_from_output() after every step, 0.142 ms at 128 running requests and
# 0.287 ms at 256 (vllm-project/vllm#46112, 2026-06, its micro-benchmark
# benchmarks/overheads/benchmark_scheduler_update_from_output.py, medians of 5) -> 1.1 us per
# request, linear in the batch. (Was 1 us, assumed.)
HOST_PER_SEQ_S = 1.1e-6
# SGLang captures CUDA graphs for decode batches only (model_executor/cuda_graph_runner.py;
# piecewise graphs for prefill are opt-in, --enable-piecewise-cuda-graph, sgl-project/sglang
# #10062: "SGLang's current native prefilling can incur kernel launch overhead ... especially
# for the short length input"). An iteration with prompt tokens (prefill, or a mixed chunk)
# is launched op by op from Python and cannot end before the host has launched it. Measured:
# a DeepSeek-V3 prefill of one new token took 82.64 ms eager and 23.10 ms with a prefill CUDA
# graph (sgl-project/sglang #12160, scheduler log "forward cost", Oct 2025): the eager
# forward is host-bound. The host's time goes per framework op, not per layer, so the
# measurement is spread over DeepSeek-V3's forward ops as cost/ops.py counts them
# (forward_host_ops: 3,131 over its 61 layers, 26.4 us an op) and a model's floor is its own
# op count at that rate (Llama 3.1 70B: 1,280 ops, 33.8 ms; a per-layer reading, 1.355 ms a
# layer, charged a dense layer of 16 ops what an MoE layer of 53 costs). One measurement on
# an unstated host CPU stands in for every GPU and SGLang version. vLLM V1 runs an iteration
# larger than its largest CUDA graph (serve/vllm_serve.py) through its torch.compile'd forward
# without a graph, launched op by op: no vLLM measurement of that path's host time per op was
# found, so this figure stands in for it too (Inductor fuses the element-wise ops into fewer
# launches, so it is an upper estimate there).
SGLANG_EAGER_MEASURED_S = 82.64e-3
SGLANG_EAGER_MEASURED_MODEL = "deepseek-v3"


def forward_host_ops(model: ModelSpec) -> float:
    """Framework ops the host issues in one forward through every layer (cost/ops.py's
    ``host_ops`` of a dense and of an MoE layer, times how many of each the model has)."""
    s = Shard(seq=1, micro_batch=1)
    ops = model.num_dense_layers * layer_ops(model, False, s).host_ops
    if model.num_moe_layers:
        ops += model.num_moe_layers * layer_ops(model, True, s).host_ops
    return ops


@lru_cache(maxsize=1)
def eager_op_s() -> float:
    """Host seconds per framework op of a forward launched outside CUDA graphs (the #12160
    measurement of an eager SGLang forward over its model's op count)."""
    from ..specs.catalog.presets import load_model
    return SGLANG_EAGER_MEASURED_S / forward_host_ops(load_model(SGLANG_EAGER_MEASURED_MODEL))

# vLLM V1 runs an iteration with prompt tokens (prefill or mixed) of at most its largest
# captured size piecewise (CUDAGraphMode PIECEWISE; FULL graphs serve decode-only batches in
# the 0.11 default FULL_AND_PIECEWISE): CompilationConfig.splitting_ops (the attention ops)
# cut the compiled forward into layers + 1 pieces, each replayed from its own graph
# (CUDAGraphWrapper), and each layer's attention op runs from the host between them; V1's
# FlashAttentionImpl.forward (vllm/v1/attention/backends/flash_attn.py) launches two kernels,
# reshape_and_cache_flash and flash_attn_varlen_func. Three host launches a layer (one graph
# replay, two kernels), one more for the last piece, each priced at eager_op_s. (0.9 and
# 0.10 defaulted to PIECEWISE for decode batches too; not modelled, the plan has no engine
# version.)
PIECEWISE_HOST_OPS_PER_LAYER = 1 + 2

# vLLM's custom all-reduce (custom_all_reduce.py / custom_all_reduce.cuh) serves buffers up
# to max_size = 8 MiB inside one NVLink domain: one-shot (every rank reads all peers) for
# small buffers (below 512 KiB on 8 GPUs), two-shot (reduce-scatter then all-gather by
# direct reads) above. Larger buffers go to NCCL.
ONE_SHOT_MAX_BYTES = 512 * 2**10
CUSTOM_AR_MAX_BYTES = 8 * 2**20
# Measured time of one custom all-reduce of a tiny buffer (256 B), replayed in a CUDA graph,
# by engine and GPU generation, for 2 / 4 / 8 GPUs of one NVLink node: NVIDIA AIConfigurator's
# tables (ai-dynamo/aiconfigurator, aic-core/src/aiconfigurator_core/systems/data/h100_sxm/
# comm/<engine>/<version>/custom_allreduce_perf.parquet, and the same path under a100_sxm
# and b200_sxm): on H100 TensorRT-LLM 1.2.0rc5 (its custom all-reduce, implementation
# "trtllm") 3.11 / 3.20 / 3.47 us, vLLM 0.19.0 (its custom all-reduce, backend "vllm_graph")
# 4.27 / 4.58 / 4.62 us; on B200 TensorRT-LLM 1.2.0rc5 4.49 / 4.55 / 4.82, vLLM 0.19.0
# 6.60 / 7.08 / 7.49; on A100 vLLM 0.14.0 4.87 / 5.15 / 5.66 (TensorRT-LLM 1.0.0 on A100:
# 3.80-4.37 us at 256 B but 8.0-8.4 us on 8 GPUs from 8 kB, which this fixed + bytes form
# does not follow, so that pair keeps the fallback). It is the one-shot kernel's
# fixed part (the barriers and one read of the peers' flags and buffers); the bytes come on
# top at link bandwidth. SGLang runs vLLM's kernel (its port). Where no table exists the
# fixed part stays two link latencies (the GPU's scaleup_latency_s, NCCL's figure, which
# gave 6.0 us on H100: 1.4-1.9x these). Two-shot pays the fixed part twice (two barrier
# phases). A node size between the measured ones takes the next larger one's figure.
CUSTOM_AR_FIXED_S = {
    ("trtllm", "hopper"): {2: 3.11e-6, 4: 3.20e-6, 8: 3.47e-6},
    ("vllm", "hopper"): {2: 4.27e-6, 4: 4.58e-6, 8: 4.62e-6},
    ("trtllm", "blackwell"): {2: 4.49e-6, 4: 4.55e-6, 8: 4.82e-6},
    ("vllm", "blackwell"): {2: 6.60e-6, 4: 7.08e-6, 8: 7.49e-6},
    ("vllm", "ampere"): {2: 4.87e-6, 4: 5.15e-6, 8: 5.66e-6},
}
CUSTOM_AR_KERNEL_OF = {"sglang": "vllm"}

# Kernels of a layer besides its GEMMs, attention and all-reduces, each paying a fixed time
# (KERNEL_FLOOR_S) before its bytes: two RMSNorms with the residual add fused in and the MLP
# activation (TensorRT-LLM's LlamaDecoderLayer: input / post_attention / next-layer RMSNorm
# (hidden, residual) with its fusions switched off, tensorrt_llm/_torch/models/modeling_llama.py;
# vLLM's LlamaDecoderLayer: fused_add_rms_norm twice and SiluAndMul; NVIDIA AIConfigurator's
# Llama generation step: add_norm_1, add_norm_2, act, aic-core/.../sdk/models/gpt.py).
LAYER_ELEMENTWISE_KERNELS = 2 + 1
# With FP8 weights the linears whose input comes 16-bit from a norm (qkv and the MLP's first
# GEMM, or the MoE input) quantize it in a kernel of their own first: TensorRT-LLM's
# FP8QDQLinearMethod.apply runs static_quantize_e4m3_per_tensor before cublas_scaled_mm
# (tensorrt_llm/_torch/modules/linear.py; fused_moe quantizes its input alike); o_proj and the
# MLP's second GEMM take FP8 from the attention kernel and the activation (AIConfigurator
# marks them low_precision_input). Each reads 2 and writes 1 byte per element. TensorRT-LLM
# folds the norms and these quantizations into its all-reduce for tp > 1 and hidden > 4096
# only on Blackwell: NVIDIA/TensorRT-LLM#6205 enabled the AR + residual + RMSNorm + FP8 quant
# fusion in LlamaDecoderLayer, #7768 restricted it to SM >= 100 (a regression on H100/A100);
# that Blackwell case is not modelled here.
FP8_INPUT_QUANT_KERNELS = 2
# An MoE layer runs three kernels more than a dense MLP's GEMMs and activation: the top-k
# selection of experts, the permutation of token copies into per-expert blocks, and the
# weighted sum of each token's top-k expert outputs. SGLang's fused MoE
# (python/sglang/srt/layers/moe/topk.py select_experts; fused_moe_triton/fused_moe.py:
# moe_align_block_size, two fused_moe_kernel GEMMs, silu_and_mul, moe_sum_reduce) and vLLM's
# (topk_softmax, moe_align_block_size, fused_moe_kernel x 2, silu_and_mul, moe_sum) alike;
# TensorRT-LLM's CutlassFusedMoE routes, expands rows and finalizes (unpermute + sum). Each
# pays KERNEL_FLOOR_S before its few bytes. Check: NVIDIA AIConfigurator's measured SGLang
# 0.5.14 MoE op on B200 (ai-dynamo/aiconfigurator commit 095f58a5, aic-core/src/
# aiconfigurator_core/systems/data/b200_sxm/moe/sglang/0.5.14/moe_perf.parquet, hidden 4096,
# intermediate 1536, 128 experts top-8, moe_tp 8, bf16: Qwen3-235B-A22B at tp 8) takes 19.7 us
# for one token, where the two expert GEMMs alone model 11.4 us (tests/test_serve.py).
MOE_ROUTING_KERNELS = 3
FP8_QUANT_BYTES_PER_ELEM = ACT + 1
# Fixed time of one small kernel inside the step's CUDA graph: efficiency.GRAPHED_KERNEL_S
# (AIConfigurator's measured H100 quantize kernel; its source there).
KERNEL_FLOOR_S = efficiency.GRAPHED_KERNEL_S
# vLLM V1's sampling after the output layer, every iteration: the vocab-split logits of
# the sampled rows are all-gathered over the tensor-parallel group in the model's 16-bit
# dtype (LogitsProcessor._gather_logits: tensor_model_parallel_all_gather when
# current_platform.use_all_gather(), which is envs.VLLM_USE_V1 on CUDA and ROCm,
# vllm/platforms/interface.py), then Sampler.forward (vllm/v1/sample/sampler.py) casts them
# to float32 (logits.to(torch.float32): read 2 bytes, write 4 an element) and takes the greedy
# argmax (read 4), two kernels that each pay KERNEL_FLOOR_S. Requests with a temperature
# above 0 add the random path (temperature divide, softmax, exponential draws, argmax of
# probs / q): not priced, since a row does not say its clients' sampling parameters.
VLLM_SAMPLER_BYTES_PER_LOGIT = ACT + 4 + 4
VLLM_SAMPLER_KERNELS = 2

# Fixed time of one decode-attention call per layer, whatever the batch and context: the
# engine's attention op (TensorRT-LLM's: RoPE and the KV-cache write, then the XQA / MMHA
# generation kernel) at a handful of cached tokens. NVIDIA AIConfigurator's measured
# TensorRT-LLM 1.2.0rc5 table for H100 SXM (ai-dynamo/aiconfigurator, aic-core/src/
# aiconfigurator_core/systems/data/h100_sxm/attention/trtllm/1.2.0rc5/
# generation_attention_perf.parquet; collector/trtllm/collect_attn.py times the op's forward
# replayed in a CUDA graph): 32 query / 4 KV heads, head dim 128, FP8 KV cache (Llama 3 70B
# at tp 2), 2 to 64 cached tokens: 5.9-6.4 us at batch 1, 2, 4 and 8 alike, where the KV
# bytes (at most 0.5 MB) take 0.2 us at HBM bandwidth. The cached tokens' bytes (or FLOPs)
# come on top (_layer_attn_s). No such table for other parts: the H100 figure stands in.
DECODE_ATTN_FLOOR_S = 6.0e-6


@dataclass(frozen=True)
class StepCost:
    """Seconds of one iteration of one engine (a replica, or one attention-DP rank)."""

    gemm_s: float
    attention_s: float
    elementwise_s: float
    tp_comm_s: float
    ep_comm_s: float
    pp_comm_s: float
    host_s: float

    @property
    def total_s(self) -> float:
        return (self.gemm_s + self.attention_s + self.elementwise_s + self.tp_comm_s
                + self.ep_comm_s + self.pp_comm_s + self.host_s)

    def to_dict(self) -> dict:
        return asdict(self) | {"total_s": self.total_s}


def gemm_s(dev: compute.Device, m: float, n: float, k: float, count: float = 1.0) -> float:
    """One (grouped) GEMM at inference shapes (cost/gemm.py's shape model)."""
    if m <= 0 or count <= 0:
        return 0.0
    return compute.gemm_time_s(dev, m, n, k, count)


def custom_ar_fixed_s(cluster: Cluster, size: int, engine: str = "vllm") -> float:
    """Fixed part of one one-shot custom all-reduce over ``size`` GPUs (CUSTOM_AR_FIXED_S)."""
    table = CUSTOM_AR_FIXED_S.get((CUSTOM_AR_KERNEL_OF.get(engine, engine),
                                   cluster.gpu.generation), {})
    larger = [n for n in table if n >= size]
    return table[min(larger)] if larger else 2 * cluster.gpu.scaleup_latency_s


def all_reduce_small_s(cluster: Cluster, size: int, buffer_bytes: float,
                       engine: str = "vllm") -> float:
    """All-reduce as the serving ``engine`` runs it inside a node (see module docstring)."""
    if size <= 1 or buffer_bytes <= 0:
        return 0.0
    p = collectives.placement(((size, 1),), cluster.domain_size)
    ring = collectives.all_reduce_s(cluster, p, buffer_bytes)
    if p.nodes > 1 or buffer_bytes > CUSTOM_AR_MAX_BYTES:
        return ring
    # the links among the group's GPUs (all of a switch's; size - 1 of a full mesh's)
    link = (cluster.gpu.scaleup_bytes_per_s * collectives.scaleup_efficiency(cluster.gpu.generation)
            * collectives.scaleup_share(cluster, size))
    fixed = custom_ar_fixed_s(cluster, size, engine)
    if buffer_bytes <= ONE_SHOT_MAX_BYTES:
        custom = fixed + (size - 1) * buffer_bytes / link
    else:
        custom = 2 * fixed + 2 * (size - 1) / size * buffer_bytes / link
    return min(ring, custom)


class StepModel:
    """Iteration time of one engine of ``pool`` on ``cluster`` for ``model``.

    A replica with attention data parallelism runs ``attn_dp`` engines in lockstep (one per
    DP rank); ``step`` is the replica's iteration time when every rank brings the same batch,
    ``lockstep_step_s`` when they differ.
    With pipeline parallelism the replica runs ``pp`` micro-batches in flight (vLLM's
    virtual engines); ``step`` is one micro-batch through all stages.
    """

    def __init__(self, model: ModelSpec, cluster: Cluster, pool: Pool, weight_dtype: str,
                 kv_dtype: str, scheduler: str = "vllm"):
        self.model, self.cluster, self.pool = model, cluster, pool
        self.scheduler = scheduler  # the engine (spec.SCHEDULERS): how its MoE communicates
        self.fp8_inputs = weight_dtype == "fp8"
        # bytes per element of the MoE input TensorRT-LLM gathers: FP8 checkpoints quantize it
        # before the all-gather (_ep_comm_s), unquantized ones gather the 16-bit activations
        self.moe_gather_elem_bytes = 1 if self.fp8_inputs else ACT
        self.dev = compute.device(cluster.gpu, "fp8" if self.fp8_inputs else "bf16")
        # an eager (uncaptured) forward's host launch time: SGLang's iterations with prompt
        # tokens and vLLM's larger than its largest CUDA graph wait on it (_parts)
        self.eager_launch_s = (forward_host_ops(model) * eager_op_s()
                               if scheduler in ("sglang", "vllm") else 0.0)
        # vLLM V1: the iteration sizes replayed from CUDA graphs, and the size each smaller
        # iteration is padded to (index = tokens; vllm_serve.padded_graph_tokens)
        self.graph_pad: tuple[int, ...] = ()
        if scheduler == "vllm":
            sizes = cudagraph_capture_sizes(pool.max_num_seqs, pool.max_batched_tokens)
            self.graph_pad = tuple([0] + [padded_graph_tokens(t, sizes)
                                          for t in range(1, sizes[-1] + 1)])
        # vLLM V1's mixed (prompt-token) iterations within the graphs run piecewise: the host
        # replays the layers + 1 graph pieces and launches each layer's attention between
        # them (PIECEWISE_HOST_OPS_PER_LAYER)
        self.piecewise_launch_s = ((PIECEWISE_HOST_OPS_PER_LAYER * model.layers + 1)
                                   * eager_op_s() if scheduler == "vllm" else 0.0)
        self.layer_kernels = LAYER_ELEMENTWISE_KERNELS + (
            FP8_INPUT_QUANT_KERNELS if self.fp8_inputs else 0)
        # the output layer keeps 16-bit weights in quantized checkpoints (memory.py)
        self.head_dev = compute.device(cluster.gpu, OUTER_WEIGHT_DTYPE)
        self.kv_dtype = kv_dtype
        self.stage_layers = ceil(model.layers / pool.pp)
        # layers of each kind on one stage (stages alike, up to rounding)
        self.n_moe = model.num_moe_layers / pool.pp
        self.n_dense = model.num_dense_layers / pool.pp
        self.kv_layer_bytes = kv_bytes_per_token_layer(model, pool.tp, kv_dtype)
        self.window = model.sliding_window
        self.window_layers = model.sliding_layers  # over all stages (step covers them all)
        self.full_layers = model.layers - model.sliding_layers
        heads = model.heads / pool.tp
        if model.is_mla:  # absorbed decode: q.[latent|rope] scores, latent-weighted values
            dec_qk, dec_v = model.kv_lora_rank + model.qk_rope_head_dim, model.kv_lora_rank
            pre_qk, pre_v = model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
        else:
            dec_qk = dec_v = pre_qk = pre_v = model.head_dim
        self.decode_attn_flops_per_ctx = 2 * heads * (dec_qk + dec_v)
        self.prefill_attn_flops_per_pair = 2 * heads * (pre_qk + pre_v)
        self.attn_flops_s = self.dev.attn_flops * self.dev.attn_fwd_eff
        # prefill runs the training forward's flash kernel: its rate at the model's head dim
        # (compute.attention_efficiency); decode keeps the head-dim-128 fraction
        self.prefill_attn_flops_s = self.dev.attn_flops * compute.attention_efficiency(
            self.dev, (pre_qk + pre_v) / 2, False, pre_qk, pre_v)
        self._tokens_cost = lru_cache(maxsize=16384)(self._tokens_part)
        self._moe_shared = lru_cache(maxsize=16384)(self._moe_shared_part)

    # ---- the part that depends only on the number of tokens in the batch ---------------
    def _layer_gemm_s(self, moe: bool, T: int) -> tuple[float, float, float]:
        """(gemm, elementwise, ep all-to-all) seconds of one layer for T tokens."""
        p, m = self.pool, self.model
        s = Shard(seq=T, micro_batch=1, tp=p.tp, ep=p.ep, etp=1 if p.ep > 1 else p.tp)
        ops = layer_ops(m, moe, s)
        g = 0.0
        for mm in ops.matmuls:
            if mm.name.startswith("expert_"):
                g += self._expert_gemm_s(mm, T)
            else:
                g += gemm_s(self.dev, mm.m, mm.n, mm.k, mm.count)
        kernels = self.layer_kernels + (MOE_ROUTING_KERNELS if moe else 0)
        stream = ops.stream_bytes / self.dev.hbm_bytes_per_s + kernels * KERNEL_FLOOR_S
        if self.fp8_inputs:  # the two FP8 input-quantize kernels (FP8_INPUT_QUANT_KERNELS)
            stream += (FP8_INPUT_QUANT_KERNELS * FP8_QUANT_BYTES_PER_ELEM * T * m.hidden
                       / self.dev.hbm_bytes_per_s)
        return g, stream, self._ep_comm_s(ops, T) if moe else 0.0

    def _ep_comm_s(self, ops, T: int) -> float:
        """The expert-parallel communication of one MoE layer (``ops``: its layer_ops for
        ``T`` tokens per attention-DP rank).

        TensorRT-LLM (PyTorch backend, CutlassFusedMoE, its default MoE backend;
        tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py as of v1.0): with
        attention DP it runs an all-to-all only where select_alltoall_method_type finds MNNVL
        (GB200 NVL) or DeepEP enabled by TRTLLM_CAN_USE_DEEP_EP, and never when
        moe_ep_size <= top_k. Otherwise forward_chunk quantizes each rank's tokens (FP8 qdq
        checkpoints: static_quantize_e4m3_per_tensor, 1 byte an element; unquantized: 16-bit),
        all-gathers them with their top-k expert ids (int32) and weights (float32) over the
        attention-DP group, every rank runs its experts on all ranks' tokens, and
        reducescatter_or_allreduce reduce-scatters the 16-bit outputs of the whole gathered
        batch back to their ranks. Priced so here (MNNVL and DeepEP are not modelled);
        FP8 block-scale checkpoints (DeepSeek's) quantize inside the kernel and gather 16-bit
        tokens, which weight_dtype "fp8" does not tell apart (taken as per-tensor, the
        ModelOpt checkpoints).

        vLLM and SGLang: dispatch and combine all-to-alls of 16-bit token copies.

        None without attention data parallelism: both engines then reduce the expert
        outputs with the tensor-parallel all-reduce instead (``tp_comm``, two per layer).
        vLLM: FusedMoEParallelConfig.use_all2all_kernels is ``use_ep and (dp_size > 1 or
        pcp_size > 1 or is_sequence_parallel)``, and sequence-parallel MoE needs dp > 1
        (vllm/model_executor/layers/fused_moe/config.py; vllm/config/parallel.py
        use_sequence_parallel_moe); without them FusedMoE.maybe_all_reduce_tensor_model_parallel
        all-reduces the output (vllm/model_executor/layers/fused_moe/layer.py). SGLang: with
        the default --moe-a2a-backend none the StandardDispatcher only remaps the top-k ids to
        the rank's local experts, no communication
        (python/sglang/srt/layers/moe/token_dispatcher/standard.py), and the MoE block
        all-reduces the expert outputs over the expert-parallel group, the same GPUs as tp
        (moe_expert_parallel_all_reduce in Qwen3MoeSparseMoeBlock.forward_normal,
        python/sglang/srt/models/qwen3_moe.py)."""
        p = self.pool
        if p.ep <= 1 or p.attn_dp <= 1:
            return 0.0
        pl = collectives.placement(((p.ep, 1),), self.cluster.domain_size)
        if self.scheduler == "trtllm":
            m, rows = self.model, p.attn_dp * T  # the gathered batch: every rank's tokens
            route_bytes = m.moe_topk * (4 + 4)  # int32 expert id + float32 weight per pick
            gathered = rows * (m.hidden * self.moe_gather_elem_bytes + route_bytes)
            return (collectives.all_gather_s(self.cluster, pl, gathered)
                    + collectives.reduce_scatter_s(self.cluster, pl, rows * m.hidden * ACT))
        return ops.ep_alltoalls * collectives.all_to_all_s(self.cluster, pl, ops.ep_send_bytes)

    def _expert_gemm_s(self, mm: MatMul, T: int) -> float:
        m = self.model
        # the tokens of every attention-DP rank enter the MoE group; each picks k distinct
        # experts (memory.experts_touched_share; the picks were taken as independent draws,
        # 1 - (1 - 1/E)^(tokens k): 3.81 of gpt-oss's 4 for one token)
        touched = mm.count * experts_touched_share(m, T * self.pool.attn_dp)
        if touched <= 0:
            return 0.0
        rows = mm.m * mm.count  # this rank's token copies
        return gemm_s(self.dev, rows / touched, mm.n, mm.k, touched)

    def _tokens_part(self, T: int, logits: int) -> tuple[float, float, float, float, float]:
        p, m = self.pool, self.model
        g_d, e_d, _ = self._layer_gemm_s(False, T) if self.n_dense else (0.0, 0.0, 0.0)
        g_m, e_m, a_m = self._layer_gemm_s(True, T) if self.n_moe else (0.0, 0.0, 0.0)
        gemm = (self.n_dense * g_d + self.n_moe * g_m) * p.pp
        elem = (self.n_dense * e_d + self.n_moe * e_m) * p.pp
        # output layer over the rows that need logits (vocab split over tp)
        hs = Shard(seq=max(logits, 1), micro_batch=1, tp=p.tp)
        for mm in head_ops(m, hs).matmuls:
            gemm += gemm_s(self.head_dev, logits, mm.n, mm.k)
        sample_gather = 0.0
        if self.scheduler == "vllm" and logits > 0:  # V1's logits gather and sampler
            elem += (logits * m.vocab * VLLM_SAMPLER_BYTES_PER_LOGIT / self.dev.hbm_bytes_per_s
                     + VLLM_SAMPLER_KERNELS * KERNEL_FLOOR_S)
            if p.tp > 1:
                pl = collectives.placement(((p.tp, 1),), self.cluster.domain_size)
                sample_gather = collectives.all_gather_s(self.cluster, pl,
                                                         logits * m.vocab * ACT)
        ar = all_reduce_small_s(self.cluster, p.tp, 2 * T * m.hidden, self.scheduler)
        tp_comm = 2 * m.layers * ar + sample_gather
        ep_comm = self.n_moe * p.pp * a_m
        pp_comm = 0.0
        if p.pp > 1:
            across = p.tp * p.attn_dp * p.pp > self.cluster.domain_size
            pp_comm = (p.pp - 1) * collectives.p2p_s(self.cluster, across, 2 * T * m.hidden)
        return gemm, elem, tp_comm, ep_comm, pp_comm

    def _moe_shared_part(self, T: int) -> tuple[float, float]:
        """(routed-expert GEMMs, expert all-to-all) seconds of a step in which every
        attention-DP rank brings T tokens: the parts of the MoE layers that all ranks run
        together (each GPU its experts, on the copies routed to them from every rank)."""
        if not self.n_moe or T <= 0:
            return 0.0, 0.0
        p = self.pool
        s = Shard(seq=T, micro_batch=1, tp=p.tp, ep=p.ep, etp=1 if p.ep > 1 else p.tp)
        ops = layer_ops(self.model, True, s)
        experts = sum(self._expert_gemm_s(mm, T) for mm in ops.matmuls
                      if mm.name.startswith("expert_"))
        return self.n_moe * p.pp * experts, self.n_moe * p.pp * self._ep_comm_s(ops, T)

    def lockstep_step_s(self, ranks: list[tuple]) -> float:
        """One iteration of an attention-DP replica whose busy ranks bring ``ranks`` (each
        the step_s arguments of one rank; an idle rank runs a dummy batch and adds nothing).
        The ranks join at every MoE layer's all-to-all, so each rank's own work (attention,
        dense layers, the MoE layers' other GEMMs, output layer, tensor- and
        pipeline-parallel traffic, host) runs side by side and the slowest rank sets the
        pace; the routed experts run once on all ranks' tokens (``step`` prices them as if
        every rank brought the same tokens, so the mean rank's tokens give their time); the
        all-to-all waits for the rank that sends the most, while TensorRT-LLM's all-gather
        and reduce-scatter move every rank's tokens once (the mean rank's tokens times the
        ranks, ``_ep_comm_s``). With equal ranks this is ``step_s`` of one of them."""
        own = 0.0
        total = most = 0
        for args in ranks:
            T = int(args[0])
            experts, a2a = self._moe_shared(T)
            own = max(own, self.step_s(*args) - experts - a2a)
            total += T
            most = max(most, T)
        mean = ceil(total / self.pool.attn_dp)
        comm = self._moe_shared(mean if self.scheduler == "trtllm" else most)[1]
        return own + self._moe_shared(mean)[0] + comm

    # ---- one iteration -------------------------------------------------------------------
    def step(self, tokens: int, seqs: int, decode_ctx_tokens: float = 0.0,
             prefill_pairs: float = 0.0, prefill_ctx_tokens: float = 0.0,
             logits: int | None = None, decode_ctx_window_tokens: float | None = None,
             prefill_pairs_window: float | None = None,
             prefill_ctx_window_tokens: float | None = None) -> StepCost:
        """One iteration: ``tokens`` new tokens from ``seqs`` requests; decode requests
        attend to ``decode_ctx_tokens`` cached tokens in all; prefill chunks do
        ``prefill_pairs`` (query, key) pairs of causal attention and read
        ``prefill_ctx_tokens`` cached prefix tokens. ``logits``: rows sampled (default seqs).
        The ``*_window`` arguments are the same sums with each request's context capped at
        the sliding window (sum of min(c, w), ``window_pairs``, sum of min(a, w)); they
        price the model's sliding-window layers and default to the uncapped sums."""
        return StepCost(*self._parts(tokens, seqs, decode_ctx_tokens, prefill_pairs,
                                     prefill_ctx_tokens, logits, decode_ctx_window_tokens,
                                     prefill_pairs_window, prefill_ctx_window_tokens))

    def _parts(self, tokens: int, seqs: int, decode_ctx_tokens: float,
               prefill_pairs: float, prefill_ctx_tokens: float, logits: int | None,
               decode_ctx_window_tokens: float | None, prefill_pairs_window: float | None,
               prefill_ctx_window_tokens: float | None) -> tuple:
        """``step``'s parts in StepCost's field order."""
        if tokens <= 0:
            return 0, 0, 0, 0, 0, 0, 0
        logits = seqs if logits is None else logits
        rows, eager = int(tokens), self.scheduler == "sglang" and prefill_pairs > 0
        launch = self.eager_launch_s if eager else 0.0
        if self.scheduler == "vllm":  # replayed at the next captured size, or launched eager
            eager = rows >= len(self.graph_pad)
            rows = rows if eager else self.graph_pad[rows]
            launch = (self.eager_launch_s if eager
                      else self.piecewise_launch_s if prefill_pairs > 0 else 0.0)
        gemm, elem, tp_comm, ep_comm, pp_comm = self._tokens_cost(rows, int(logits))
        if not self.window_layers:
            attn = self.model.layers * self._layer_attn_s(tokens, decode_ctx_tokens,
                                                          prefill_pairs, prefill_ctx_tokens)
        else:
            dw = decode_ctx_tokens if decode_ctx_window_tokens is None else decode_ctx_window_tokens
            pw = prefill_pairs if prefill_pairs_window is None else prefill_pairs_window
            cw = (prefill_ctx_tokens if prefill_ctx_window_tokens is None
                  else prefill_ctx_window_tokens)
            attn = (self.full_layers * self._layer_attn_s(tokens, decode_ctx_tokens,
                                                          prefill_pairs, prefill_ctx_tokens)
                    + self.window_layers * self._layer_attn_s(tokens, dw, pw, cw))
        host = HOST_STEP_S + HOST_PER_SEQ_S * seqs
        if launch:  # (partly) outside CUDA graphs: the host's launches bound the iteration
            host += max(0.0, launch - (gemm + attn + elem + tp_comm + ep_comm + pp_comm + host))
        return gemm, attn, elem, tp_comm, ep_comm, pp_comm, host

    def _layer_attn_s(self, tokens: int, decode_ctx_tokens: float, prefill_pairs: float,
                      prefill_ctx_tokens: float) -> float:
        """Attention seconds of one layer: decode reads (memory- or FLOP-bound, after the
        call's fixed DECODE_ATTN_FLOOR_S) plus prefill chunks (FLOP-bound or reading their
        prefix and writing the new tokens' K/V)."""
        kv_bytes = (decode_ctx_tokens + prefill_ctx_tokens + tokens) * self.kv_layer_bytes
        dec = max(decode_ctx_tokens * self.decode_attn_flops_per_ctx / self.attn_flops_s,
                  (decode_ctx_tokens * self.kv_layer_bytes) / self.dev.hbm_bytes_per_s)
        if decode_ctx_tokens > 0:  # one generation-attention call (DECODE_ATTN_FLOOR_S)
            dec += DECODE_ATTN_FLOOR_S
        pre = max(prefill_pairs * self.prefill_attn_flops_per_pair / self.prefill_attn_flops_s,
                  (kv_bytes - decode_ctx_tokens * self.kv_layer_bytes) / self.dev.hbm_bytes_per_s)
        return dec + pre

    def step_s(self, tokens: int, seqs: int, decode_ctx_tokens: float = 0.0,
               prefill_pairs: float = 0.0, prefill_ctx_tokens: float = 0.0,
               logits: int | None = None, decode_ctx_window_tokens: float | None = None,
               prefill_pairs_window: float | None = None,
               prefill_ctx_window_tokens: float | None = None) -> float:
        """``step(...).total_s`` without building the StepCost (the simulator's per-iteration
        call); the parts are added in StepCost.total_s's order."""
        gemm, attn, elem, tp, ep, pp, host = self._parts(
            tokens, seqs, decode_ctx_tokens, prefill_pairs, prefill_ctx_tokens, logits,
            decode_ctx_window_tokens, prefill_pairs_window, prefill_ctx_window_tokens)
        return gemm + attn + elem + tp + ep + pp + host

    def decode_step(self, batch: int, context: int) -> StepCost:
        """A pure decode iteration: ``batch`` requests each with ``context`` cached tokens."""
        return self.step(batch, batch, decode_ctx_tokens=batch * context,
                         decode_ctx_window_tokens=batch * min(context, self.window or context))

    def prefill_step(self, prompt: int, batch: int = 1) -> StepCost:
        """A pure prefill of ``batch`` prompts of ``prompt`` tokens (one chunk each)."""
        pairs = batch * prompt * (prompt + 1) / 2
        return self.step(batch * prompt, batch, prefill_pairs=pairs, logits=batch,
                         prefill_pairs_window=batch * window_pairs(0, prompt, self.window))


def kv_transfer_s(model: ModelSpec, cluster: Cluster, tier: str, tokens: int, kv_dtype: str,
                  src_tp: int) -> float:
    """Moving one request's KV cache from the prefill to the decode replica: every prefill
    GPU sends its share in parallel (as NIXL / Mooncake transfer engines do), over NVLink
    (scale-up) or the GPU's NIC (scale-out). Sliding-window layers send only the last
    min(tokens, window) tokens: the blocks before them are already freed (serve/memory.py,
    vLLM's SlidingWindowManager), so the connector has nothing else to send."""
    total = model.layers * kv_bytes_per_token_layer(model, 1, kv_dtype) * tokens
    if model.sliding_layers:
        w = min(tokens, model.sliding_window)
        total = kv_bytes_per_token_layer(model, 1, kv_dtype) * (
            (model.layers - model.sliding_layers) * tokens + model.sliding_layers * w)
    per_gpu = total / (src_tp if not model.is_mla else 1)
    return collectives.p2p_s(cluster, tier == "scale-out", per_gpu)


