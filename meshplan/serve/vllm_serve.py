"""What ``vllm serve`` (vLLM's OpenAI-compatible server, V1 engine) runs with when the
command gives no --max-num-seqs / --max-num-batched-tokens.

EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py, pinned by vLLM's own
tests/engine/test_arg_utils.py::test_defaults_with_usage_context) picks the defaults by the
device and the usage context, the server being UsageContext.OPENAI_API_SERVER:

- from v0.28.0 on (the PyPI wheels: absent from 0.27.0, whose top tier is the 70 GiB one at
  arg_utils.py:2544; at arg_utils.py:2582 in 0.28.0, 2973 in 0.33.0), a GPU of at least
  160 GiB ("for GPUs like B200/B300 with >= 160GB memory, use the largest defaults";
  MI300X, MI325X, MI355X, B200, GB200 and up): 1024 running requests and 16384 tokens per
  iteration;
- a GPU of at least 70 GiB that is not an A100 (the top tier from v0.11.0 to v0.27.0, "For
  GPUs like H100 and MI300x, use larger default values"): 1024 requests and 8192 tokens;
- any other GPU, the A100 included ("Setting large `max_num_batched_tokens` for A100 reduces
  throughput, see PR #17885"): 256 requests and 2048 tokens.

A row that does not state its vLLM version is read with the rule of v0.11.0 - v0.27.0, the
versions the published runs used (bench/data/serving_runs.csv: 0.6.3 to 0.19.0).

A command that sets --max-num-batched-tokens below the request default lowers it too:
``self.max_num_seqs = min(self.max_num_seqs, self.max_num_batched_tokens)`` (same file).
Offline ``vllm bench throughput`` / the ``LLM`` class (UsageContext.LLM_CLASS) has larger
token defaults (16384 / 8192); a row from it must state its limits.
"""

from __future__ import annotations

import re

from ..specs.hardware import GPU

GiB = 2**30
LARGEST_GPU_BYTES = 160 * GiB  # get_batch_defaults from v0.28.0: ``>= 160 * GiB_bytes``
LARGEST_GPU_LIMITS = (1024, 16384)  # (max_num_seqs, max_num_batched_tokens), OPENAI_API_SERVER
LARGEST_TIER_SINCE = (0, 28)  # the first vLLM release with the 160 GiB tier (tag v0.28.0)
LARGE_GPU_BYTES = 70 * GiB  # get_batch_defaults: ``device_memory >= 70 * GiB_bytes``
LARGE_GPU_LIMITS = (1024, 8192)  # (max_num_seqs, max_num_batched_tokens), OPENAI_API_SERVER
OTHER_GPU_LIMITS = (256, 2048)
_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)")


def vllm_version(text: str | None) -> tuple[int, int] | None:
    """(major, minor) of an engine_version cell ("0.10.2 (rocm/vllm:...)", "v0.28.0"), or
    None when it names none."""
    m = _VERSION.match(text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def serve_limits(gpu: GPU, max_num_seqs: int | None = None,
                 max_batched_tokens: int | None = None,
                 version: tuple[int, int] | None = None) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) of ``vllm serve`` ``version`` (``vllm_version``;
    None: the v0.11 - v0.27 rule) on ``gpu``: the values a command states, the server's
    defaults for the others (module docstring)."""
    largest = (version is not None and version >= LARGEST_TIER_SINCE
               and gpu.memory_bytes >= LARGEST_GPU_BYTES)
    large = gpu.memory_bytes >= LARGE_GPU_BYTES and "a100" not in gpu.name.lower()
    seqs, tokens = (LARGEST_GPU_LIMITS if largest else LARGE_GPU_LIMITS if large
                    else OTHER_GPU_LIMITS)
    tokens = max_batched_tokens or tokens
    return (max_num_seqs or min(seqs, tokens)), tokens


# ---- CUDA graphs of the V1 engine ---------------------------------------------------------
# vLLM V1 replays a captured CUDA graph only for an iteration of at most
# max_cudagraph_capture_size scheduled tokens, padded up to the next captured size; a larger
# iteration runs the torch.compile'd forward without a graph, its kernels launched one by one
# from the host (GPUModelRunner.execute_model: num_input_tokens = pad_for_cudagraph(n) only
# when n <= the largest capture size; the CudagraphDispatcher picks NONE above it).
# The default sizes (VllmConfig._set_cudagraph_sizes, vllm/config/vllm.py, 0.11 and later;
# docstring of CompilationConfig.max_cudagraph_capture_size): the largest is
# min(2 x max_num_seqs, 512), never above max_num_batched_tokens; the ladder is 1, 2, 4, the
# multiples of 8 below 256, then every 16th size from 256 to the largest. (0.9 and 0.10 had
# the same largest size, SchedulerConfig.cuda_graph_sizes = [min(2 x max_num_seqs, 512)],
# and steps of 8 throughout: a pad differs by at most 8 tokens above 256.)
GRAPH_MAX_TOKENS = 512


def cudagraph_capture_sizes(max_num_seqs: int, max_batched_tokens: int) -> tuple[int, ...]:
    """Iteration sizes (tokens) vLLM V1 captures CUDA graphs for by default (see above)."""
    top = min(2 * max_num_seqs, GRAPH_MAX_TOKENS, max_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= top]
    sizes += range(8, min(top + 1, 256), 8)
    sizes += range(256, top + 1, 16)
    return tuple(sizes)


def padded_graph_tokens(tokens: int, sizes: tuple[int, ...]) -> int | None:
    """The captured size an iteration of ``tokens`` tokens is padded to and replayed at, or
    None when it is larger than every captured size (it runs without a CUDA graph)."""
    for s in sizes:
        if s >= tokens:
            return s
    return None
