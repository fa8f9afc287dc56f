"""What ``vllm serve`` (vLLM's OpenAI-compatible server, V1 engine) runs with when the
command gives no --max-num-seqs / --max-num-batched-tokens.

EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py; the same code in v0.11.0 and on
main, and pinned by vLLM's own tests/engine/test_arg_utils.py::test_defaults_with_usage_context)
picks the defaults by the device and the usage context, the server being
UsageContext.OPENAI_API_SERVER:

- a GPU of at least 70 GiB that is not an A100 ("For GPUs like H100 and MI300x, use larger
  default values"): 1024 running requests and 8192 tokens per iteration;
- any other GPU, the A100 included ("Setting large `max_num_batched_tokens` for A100 reduces
  throughput, see PR #17885"): 256 requests and 2048 tokens.

A command that sets --max-num-batched-tokens below the request default lowers it too:
``self.max_num_seqs = min(self.max_num_seqs, self.max_num_batched_tokens)`` (same file).
Offline ``vllm bench throughput`` / the ``LLM`` class (UsageContext.LLM_CLASS) has larger
token defaults (16384 / 8192); a row from it must state its limits.
"""

from __future__ import annotations

from ..specs.hardware import GPU

GiB = 2**30
LARGE_GPU_BYTES = 70 * GiB  # get_batch_defaults: ``device_memory >= 70 * GiB_bytes``
LARGE_GPU_LIMITS = (1024, 8192)  # (max_num_seqs, max_num_batched_tokens), OPENAI_API_SERVER
OTHER_GPU_LIMITS = (256, 2048)


def serve_limits(gpu: GPU, max_num_seqs: int | None = None,
                 max_batched_tokens: int | None = None) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) of ``vllm serve`` on ``gpu``: the values a
    command states, the server's defaults for the others (module docstring)."""
    large = gpu.memory_bytes >= LARGE_GPU_BYTES and "a100" not in gpu.name.lower()
    seqs, tokens = LARGE_GPU_LIMITS if large else OTHER_GPU_LIMITS
    tokens = max_batched_tokens or tokens
    return (max_num_seqs or min(seqs, tokens)), tokens
