"""Memory of one serving GPU: weights, activation workspace, runtime, and the KV cache left.

KV bytes per token (per layer, summed over the layers a GPU holds):
- MHA/GQA: 2 (K and V) x kv_heads x head_dim x dtype bytes; tensor parallel splits the kv
  heads, and replicates them when tp > kv_heads (vLLM and SGLang both do).
- MLA (DeepSeek-V2 paper, sec. 2.1.2): the compressed latent kv_lora_rank plus the decoupled
  RoPE key qk_rope_head_dim, per token and layer, shared by all heads; every tensor-parallel
  rank keeps the whole latent (it is not split by heads), which is why attention data
  parallelism is how MLA models are served.
Sliding-window layers (ModelSpec.sliding_window / sliding_layers: Mistral 7B v0.1, Gemma 2/3,
GPT-OSS) keep only the keys a query can still see. vLLM's hybrid KV cache manager
(vllm/v1/core/single_type_kv_cache_manager.py, SlidingWindowManager.get_num_skipped_tokens and
SingleTypeKVCacheManager.remove_skipped_blocks, vllm-project/vllm commit
129ab7c60cbb8eb11e875373e67f7e521b74aa30) frees, before each allocation, the whole blocks
before token ``computed - window + 1``; a request that has computed ``a`` tokens and is given
slots up to ``t`` then holds ceil(t / B) - floor(max(0, a - window + 1) / B) blocks of each
sliding-window layer (``window_blocks_held``): the window, rounded out to blocks, plus the
chunk being computed. Its blocks come from one pool shared with the full-attention layers,
so the cache is a byte budget and each request is charged its windowed bytes
(``kv_request_bytes``); ``ServeMemory.kv_tokens`` stays the tokens the budget holds when
every layer keeps every token (unchanged for models without windows), and the simulator
charges windowed requests in layer-blocks against it. SGLang instead splits the budget into
a full pool and a window pool of ``swa_full_tokens_ratio`` (0.8) x as many tokens
(python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py set_num_tokens_hybrid_swa,
sgl-project/sglang commit 001ccef0072a4537d4ec6bdd50a73e6feb2c907d); that split is not modelled.
Weights per GPU come from the same per-layer parameter split as training (cost/ops.py's
``layer_ops`` params: column/row-parallel linears over tp, routed experts over ep or tp).

What ``Pool.gpu_mem_util`` means depends on the engine (``serve_memory``'s ``scheduler``):
- vLLM ``--gpu-memory-utilization``: the share of the GPU the engine may use for its weights,
  its profiled forward pass and the KV cache. Worker.init_device (vllm/v1/worker/gpu_worker.py)
  creates the CUDA context and initializes the communicators (NCCL, custom all-reduce) first,
  then snapshots the memory, asks for requested = util x total and refuses to start when less
  than that is free; determine_available_memory sizes the cache requested - (weights + the
  profiled torch peak + the non-torch increase of that forward pass), the snapshot's context
  and communicator buffers left out of it. So the KV cache gets util x memory - weights -
  activations, and the runtime must fit in the (1 - util) x memory outside the share (vLLM
  logs it: "Free memory on device (23.08/23.53 GiB) on startup ... 8.8 GiB for weight, 1.4 GiB
  for peak activation, 0.02 GiB for non-torch memory", a 0.8 share of 23.53 GiB giving 8.60
  GiB of cache = 18.82 - 8.80 - 1.40 - 0.02). CUDA graphs, captured after the cache is
  allocated, also sit outside the share unless VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
  (newer releases) counts them; not modelled.
- TensorRT-LLM ``kv_cache_config.free_gpu_memory_fraction`` (trtllm-serve / trtllm-bench
  ``--kv_cache_free_gpu_memory_fraction``; "Default is 90%", KvCacheConfig in
  tensorrt_llm/llmapi/llm_args.py): the share of the memory still FREE once the weights are
  loaded and a dummy batch of max_num_tokens has run. KvCacheCreator.configure_kv_cache_capacity
  and _cal_max_memory (tensorrt_llm/_torch/pyexecutor/_util.py, NVIDIA/TensorRT-LLM commit
  0004396720054fd8e205cbf616f21f0b57c6b412; ``cal_max_tokens`` in the same file in earlier
  releases, same form) take peak = torch's peak allocation (weights, the temporary KV cache of
  the dummy run, activations) + what is used outside torch (CUDA context, NCCL, CUDA graphs),
  and size the cache ``(total - peak + temporary_kv) * fraction``, i.e. fraction x (memory -
  weights - activations - runtime). The TensorRT engine path (C++ KV cache manager) takes
  the same fraction of cudaMemGetInfo's free memory after the engine, its activation
  workspace included, is loaded. The (1 - fraction) of the free memory is left unused.
- SGLang ``--mem-fraction-static``: "the fraction of the memory used for static allocation
  (model weights and KV cache memory pool)" (its help text). The KV pool is the free memory
  after loading the weights less (1 - fraction) of the free memory measured before loading
  them (KVCacheConfigurator._profile_available_bytes, python/sglang/srt/mem_cache/
  kv_cache_configurator.py; ModelRunner.profile_max_num_token in model_runner_kv_cache_mixin.py
  before it: ``rest = available - total * (1 - mem_fraction_static)``). That first free
  figure is taken after the CUDA context and the communicators exist, so with
  pre = memory - runtime the pool is fraction x pre - weights, and the activations (and
  CUDA graphs) must fit in the (1 - fraction) x pre left outside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from ..cost.efficiency import HOST
from ..cost.ops import Shard, embedding_ops, head_ops, layer_ops
from ..errors import require_choice
from ..specs.hardware import GPU
from ..specs.model import ModelSpec
from .spec import DTYPE_BYTES, SCHEDULERS, Pool

GiB = 2**30
# vLLM's default KV block (PagedAttention paper: 16 tokens per block); SGLang pages hold 1.
BLOCK_TOKENS = 16


def kv_bytes_per_token_layer(model: ModelSpec, tp: int, kv_dtype: str) -> float:
    """KV cache bytes one token adds to one layer on one GPU of a tensor-parallel group."""
    b = DTYPE_BYTES[kv_dtype]
    if model.is_mla:
        return (model.kv_lora_rank + model.qk_rope_head_dim) * b
    heads = ceil(model.kv_heads / tp)  # replicated when tp > kv_heads
    return 2 * heads * model.head_dim * b


def kv_held_tokens(model: ModelSpec, context: float) -> float:
    """Tokens of KV cache a request of ``context`` tokens holds, in units of one token on
    every layer, before rounding to blocks: sliding-window layers keep only the last
    ``sliding_window`` tokens (see the module docstring), so the request holds
    ``context - share x max(0, context - window)``, share = windowed layers / layers; the
    same average is the keys a decode step reads per layer. The simulator and the cost model
    use the per-layer-kind, block-rounded forms (``kv_request_bytes``,
    ``window_blocks_held``, cost.StepModel.step's window sums). Exact without a window."""
    w = model.sliding_window
    if not w or context <= w:
        return context
    return context - model.windowed_share * (context - w)


def window_pairs(start: int, n: int, window: int) -> float:
    """(query, key) pairs of a causal chunk of ``n`` queries at positions start .. start+n-1
    when each sees at most ``window`` keys (itself included): sum of min(q, w) for
    q = start+1 .. start+n. Without a window (0): n*start + n(n+1)/2, the full causal count."""
    full = n * start + n * (n + 1) / 2
    if not window or start + n <= window:
        return full
    k = max(0, window - start)  # queries still inside the first window: q = start+1 .. w
    return k * start + k * (k + 1) / 2 + (n - k) * window


def windowed_prefill_pairs(model: ModelSpec, start: float, n: float) -> float:
    """(query, key) pairs of a causal prefill chunk of ``n`` tokens after ``start`` cached
    ones, averaged over layers: ``window_pairs`` without a window on full layers, with the
    model's window on sliding ones."""
    share = model.windowed_share
    return ((1 - share) * window_pairs(start, n, 0)
            + share * window_pairs(start, n, model.sliding_window))


def kv_bytes_per_token(model: ModelSpec, tp: int, kv_dtype: str, layers: int | None = None) -> float:
    """KV cache bytes per token on one GPU holding ``layers`` layers (default all)."""
    return (model.layers if layers is None else layers) * kv_bytes_per_token_layer(model, tp, kv_dtype)


def kv_layer_split(model: ModelSpec, pp: int = 1) -> tuple[int, int]:
    """(full-attention, sliding-window) layers on the fullest pipeline stage: the stage's
    ceil(layers / pp) layers, with as many full-attention layers as an even split gives
    (rounded up, so the charge is not understated)."""
    stage = ceil(model.layers / pp)
    full = min(stage, ceil((model.layers - model.sliding_layers) / pp))
    return full, stage - full


def window_blocks_held(computed: int, total: int, window: int, block_tokens: int) -> int:
    """Blocks one sliding-window layer holds for a request that has computed ``computed``
    tokens and has slots up to ``total`` (vLLM: blocks before token computed - window + 1 are
    freed; see the module docstring). Without a window (0) every block is held."""
    blocks = -(-total // block_tokens)
    if not window:
        return blocks
    skipped = max(0, computed - window + 1) // block_tokens
    return blocks - min(skipped, blocks)


def kv_request_bytes(model: ModelSpec, tp: int, kv_dtype: str, context: int,
                     block_tokens: int = BLOCK_TOKENS) -> float:
    """KV cache bytes on one GPU (all layers) of a request holding ``context`` computed
    tokens between iterations, in whole blocks: full-attention layers ceil(c / B) blocks,
    sliding-window layers ``window_blocks_held(c, c, window, B)`` (the window rounded out to
    blocks)."""
    full, win = model.layers - model.sliding_layers, model.sliding_layers
    held = (full * -(-context // block_tokens)
            + win * window_blocks_held(context, context, model.sliding_window, block_tokens))
    return held * block_tokens * kv_bytes_per_token_layer(model, tp, kv_dtype)


def _shard(pool: Pool) -> Shard:
    etp = 1 if pool.ep > 1 else pool.tp
    return Shard(seq=1, micro_batch=1, tp=pool.tp, ep=pool.ep, etp=etp)


# The input embedding and the output layer keep 16-bit weights in quantized checkpoints: an
# FP8 checkpoint quantizes "only the weights and activations of the linear operators within
# transformers blocks" (NVIDIA's model cards of nvidia/Llama-3.1-70B-Instruct-FP8,
# Llama-3.3-70B-Instruct-FP8, Llama-3.1-405B-Instruct-FP8: TensorRT Model Optimizer), whose HF
# export writes "exclude_modules": ["lm_head"] for FP8 (NVIDIA/TensorRT-Model-Optimizer
# modelopt/torch/export/unified_export_hf.py; the embedding is no linear operator); AMD
# Quark's FP8 checkpoints list lm_head in ignored_layers alike
# (amd/Meta-Llama-3.1-70B-Instruct-FP8-KV config.json). Training's FP8 recipes keep the
# output head 16-bit too (cost/fp8_recipe.py). The engines run the 16-bit head GEMM
# (serve/cost.py).
OUTER_WEIGHT_DTYPE = "bf16"


def weight_bytes_per_gpu(model: ModelSpec, pool: Pool, weight_dtype: str) -> float:
    """Weights on the fullest GPU: its pipeline stage's layers plus embedding or output layer.
    A tied output layer (tie_word_embeddings) on the embedding's own stage is the same
    tensor (vLLM LlamaForCausalLM: lm_head.tie_weights(model.embed_tokens), vllm/model_executor/
    models/llama.py), held once; on a later stage the last rank builds its own copy."""
    s = _shard(pool)
    dense = layer_ops(model, False, s)
    moe = layer_ops(model, True, s) if model.is_moe else None
    per_layer = [(moe if model.layer_is_moe(i) else dense) for i in range(model.layers)]
    wb, ob = DTYPE_BYTES[weight_dtype], DTYPE_BYTES[OUTER_WEIGHT_DTYPE]
    params = [o.params + o.expert_params for o in per_layer]
    stage = ceil(model.layers / pool.pp)
    stages = [sum(params[i:i + stage]) * wb for i in range(0, model.layers, stage)]
    stages[0] += embedding_ops(model, s).params * ob
    stages[-1] += head_ops(model, s).params * ob
    if model.tied_embeddings and len(stages) == 1:
        stages[0] -= model.vocab * model.hidden / pool.tp * ob
    return max(stages)


def experts_touched_share(model: ModelSpec, tokens: float) -> float:
    """Expected share of the routed experts that ``tokens`` tokens pick, each top-k (k
    distinct experts), routing uniform: a token misses a given expert with probability
    1 - k/E, so the share is 1 - (1 - k/E)^tokens (k/E for one token)."""
    if not model.is_moe or tokens <= 0:
        return 0.0
    return 1.0 - (1.0 - model.moe_topk / model.moe_experts) ** tokens


def decode_read_bytes(model: ModelSpec, pool: Pool, weight_dtype: str,
                      tokens: float = 1.0) -> float:
    """Weight bytes one decode step of ``tokens`` tokens per engine reads on one GPU of each
    pipeline stage, summed over the stages (a step passes them in turn): every layer and
    the output layer, of the routed experts only those the tokens of all attention-DP
    ranks pick, and not the input embedding, of which it gathers one row per token."""
    s = _shard(pool)
    share = experts_touched_share(model, tokens * pool.attn_dp)
    per_layer = [layer_ops(model, model.layer_is_moe(i), s) for i in range(model.layers)]
    return (sum(o.params + share * o.expert_params for o in per_layer) * DTYPE_BYTES[weight_dtype]
            + head_ops(model, s).params * DTYPE_BYTES[OUTER_WEIGHT_DTYPE])


def activation_bytes(model: ModelSpec, pool: Pool) -> float:
    """Peak transient activations of one forward pass at the token budget (the engine
    profiles a dummy batch of max_batched_tokens to size the cache): the widest layer's
    16-bit intermediates for every token, and fp32 logits for every running request."""
    T, tp = pool.max_batched_tokens, pool.tp
    mlp = max(model.ffn, model.moe_shared_ffn + model.moe_topk * model.moe_expert_ffn)
    widths = model.hidden * 2 + (model.q_dim + 2 * model.kv_dim) / tp + 2 * mlp / tp
    logits = min(pool.max_num_seqs, T) * model.vocab / tp * 4
    return 2 * T * widths + logits


@dataclass(frozen=True)
class ServeMemory:
    """Bytes on one GPU; ``kv_bytes`` is what the cache gets, ``kv_tokens`` the tokens a
    replica can hold (over all its attention data-parallel ranks) when every layer keeps
    every token. With sliding-window layers the budget is in bytes: a request is charged
    ``kv_request_bytes`` (its windowed layers hold only the window), so more requests fit
    than kv_tokens / context."""

    total_bytes: float
    weights_bytes: float
    activation_bytes: float
    runtime_bytes: float
    kv_bytes: float
    kv_tokens: int
    block_tokens: int
    # SGLang: activations beyond the (1 - mem_fraction_static) share left outside the static
    # pool (the engine would run out of memory in a forward pass); 0 for vLLM's and
    # TensorRT-LLM's meanings, whose budgets already take the activations out of the cache
    activation_shortfall_bytes: float = 0.0
    scheduler: str = "vllm"  # whose meaning gpu_mem_util was read with
    # vLLM: runtime (CUDA context, communicators) beyond the (1 - util) share outside the
    # engine's budget: less than util x memory is free at startup and vLLM refuses to start
    runtime_shortfall_bytes: float = 0.0

    @property
    def fits(self) -> bool:
        return (self.kv_tokens >= self.block_tokens and self.activation_shortfall_bytes <= 0
                and self.runtime_shortfall_bytes <= 0)

    def to_dict(self) -> dict:
        return {"budget_gib": self.total_bytes / GiB, "weights_gib": self.weights_bytes / GiB,
                "activations_gib": self.activation_bytes / GiB,
                "runtime_gib": self.runtime_bytes / GiB, "kv_cache_gib": self.kv_bytes / GiB,
                "kv_tokens_per_replica": self.kv_tokens,
                "activation_shortfall_gib": self.activation_shortfall_bytes / GiB}

    def why_not(self) -> str:
        """Why the plan does not fit (empty if it does)."""
        if self.activation_shortfall_bytes > 0:
            return (f"activations of {self.activation_bytes / GiB:.1f} GiB per GPU do not fit in"
                    f" the {(self.activation_bytes - self.activation_shortfall_bytes) / GiB:.1f}"
                    " GiB SGLang leaves outside --mem-fraction-static's static pool")
        if self.runtime_shortfall_bytes > 0:
            return (f"the runtime's {self.runtime_bytes / GiB:.1f} GiB per GPU (CUDA context,"
                    f" communicators) does not fit in the {(self.runtime_bytes - self.runtime_shortfall_bytes) / GiB:.1f}"
                    " GiB vLLM's --gpu-memory-utilization leaves outside its share: less than the"
                    " share is free at startup and vLLM refuses to start")
        if not self.fits and self.scheduler == "trtllm":
            held = self.weights_bytes + self.activation_bytes + self.runtime_bytes
            return (f"weights, activations and runtime of {held / GiB:.1f} GiB per GPU leave"
                    f" {self.kv_bytes / GiB:.2f} GiB of KV cache (TensorRT-LLM's"
                    " free_gpu_memory_fraction of the free memory), less than one block")
        if not self.fits:
            return (f"weights {self.weights_bytes / GiB:.1f} GiB per GPU leave no KV cache in"
                    f" {self.total_bytes / GiB:.1f} GiB")
        return ""


def serve_memory(model: ModelSpec, gpu: GPU, pool: Pool, weight_dtype: str, kv_dtype: str,
                 block_tokens: int = BLOCK_TOKENS, scheduler: str = "vllm") -> ServeMemory:
    """One GPU's memory with ``pool.gpu_mem_util`` read as ``scheduler``'s engine reads its
    memory flag (module docstring): SGLang's --mem-fraction-static for "sglang",
    TensorRT-LLM's free_gpu_memory_fraction for "trtllm", vLLM's --gpu-memory-utilization
    for "vllm". ``total_bytes`` is the budget the fraction gives: everything (vLLM), weights
    plus KV cache (SGLang), the KV cache alone (TensorRT-LLM)."""
    scheduler = require_choice("scheduler", scheduler, SCHEDULERS)
    w = weight_bytes_per_gpu(model, pool, weight_dtype)
    act = activation_bytes(model, pool)
    # CUDA context + library workspaces, and communication buffers (cost/efficiency.py HOST)
    runtime = HOST.runtime_reserved_bytes + (HOST.comm_buffer_bytes if pool.tp * pool.attn_dp > 1
                                             else 0.0)
    shortfall = runtime_short = 0.0
    if scheduler == "sglang":
        pre_load = max(0.0, gpu.memory_bytes - runtime)
        budget = pre_load * pool.gpu_mem_util
        kv = max(0.0, budget - w)
        shortfall = max(0.0, act - (pre_load - budget))
    elif scheduler == "trtllm":
        # the fraction of what is free after the weights, the profiled forward pass and the
        # runtime (KvCacheCreator._cal_max_memory; module docstring)
        budget = kv = pool.gpu_mem_util * max(0.0, gpu.memory_bytes - w - act - runtime)
    else:
        # vLLM: the runtime exists before the snapshot and stays outside the share (module
        # docstring); it must fit in what the share leaves
        budget = gpu.memory_bytes * pool.gpu_mem_util
        kv = max(0.0, budget - w - act)
        runtime_short = max(0.0, runtime - (gpu.memory_bytes - budget))
    per_token = kv_bytes_per_token(model, pool.tp, kv_dtype, ceil(model.layers / pool.pp))
    tokens = int(kv // per_token) // block_tokens * block_tokens * pool.attn_dp
    return ServeMemory(budget, w, act, runtime, kv, tokens, block_tokens, shortfall, scheduler,
                       runtime_short)
