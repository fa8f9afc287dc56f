"""What ``trtllm-bench throughput`` (TensorRT-LLM's offline benchmark) runs with when the
command gives no --max_batch_size / --max_num_tokens.

get_settings (tensorrt_llm/bench/benchmark/utils/general.py) calls
get_benchmark_engine_settings -> calc_engine_setting and finetune_setting
(tensorrt_llm/bench/build/tuning.py) with the command's --tp / --pp, the dataset's average
input and output lengths and --kv_cache_free_gpu_mem_fraction:

- KV bytes a token: 2 x layers x max(tp, kv_heads) x head_dim x (1 for an FP8 cache, else 2);
- engine size: the checkpoint's parameter count x (1 for FP8 / FP8 block-scale weights,
  else 2), in GiB; memory: the GPU's total (NVML) GiB x tp x pp;
- requests the cache holds: (memory - engine) x fraction / (bytes a token x (ISL + OSL));
- batch: min(requests, 4096) / pp rounded up to 32 (at least 64) below 256, to 128 below
  1024, to 256 above; tokens: min(batch x (1 + ISL / OSL), 32768) rounded up to 256 (at
  least 2048) below 4096, to 512 below 8192, to 1024 above;
- chunked prefill is off unless asked for, so max_num_tokens is raised to the longest input
  plus the batch (general.get_settings).

With attention data parallelism (--tp 8 with enable_attention_dp) the same two numbers are
each rank's limits: every rank's executor schedules up to max_batch_size requests
(ExecutorRequestQueue._fetch_new_requests admits tp_size x max_num_active_requests in all).
"""

from __future__ import annotations

from math import ceil, inf

from ..errors import InputError
from ..specs.hardware import GPU
from ..specs.model import ModelSpec
from .spec import DTYPE_BYTES

GiB = 2**30
MAX_REQUESTS = 4096  # finetune_setting: "Cap total batch size to avoid decoder buffer ... too large"
MAX_TOKENS = 32768  # finetune_setting: "Cap num tokens to avoid TRT activation buffer ... too large"


def engine_settings(model: ModelSpec, gpu: GPU, tp: int, pp: int, input_len: int,
                    output_len: int, kv_fraction: float, weight_dtype: str,
                    kv_dtype: str) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) as trtllm-bench derives them (module docstring)."""
    kv_token_gib = (2 * model.layers * max(tp, model.kv_heads) * model.head_dim
                    * DTYPE_BYTES[kv_dtype] / GiB)
    engine_gib = model.total_params() * DTYPE_BYTES[weight_dtype] / GiB
    cache_gib = (gpu.memory_bytes / GiB * tp * pp - engine_gib) * kv_fraction
    requests = cache_gib / (kv_token_gib * (input_len + output_len))
    if requests < 1:  # calc_engine_setting raises here too
        raise InputError("num_gpus", tp * pp, f"trtllm-bench finds room for {requests:.2f}"
                         f" requests of {input_len + output_len} tokens in the KV cache;"
                         " at least 1 is needed")
    raw_bs = min(requests, MAX_REQUESTS) / pp
    raw_tokens = min(raw_bs * (1 + input_len / output_len), MAX_TOKENS)
    batch = _rounded(raw_bs, ((256, 32), (1024, 128), (inf, 256)), 64)
    tokens = _rounded(raw_tokens, ((4096, 256), (8192, 512), (inf, 1024)), 2048)
    return batch, max(tokens, input_len + batch)


def _rounded(x: float, rungs: tuple[tuple[float, int], ...], least: int) -> int:
    """``x`` rounded up to the step of the first rung whose bound it is below, and at least
    ``least`` (finetune_setting's ladders: below the first bound the floor applies; above
    it the result already exceeds the floor)."""
    step = next(step for bound, step in rungs if x < bound)
    return max(least, step * ceil(x / step))
