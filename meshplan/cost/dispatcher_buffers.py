"""GPU memory the DeepEP token dispatcher allocates outside PyTorch's caching allocator.

Megatron-Core's flex dispatcher with the DeepEP backend (megatron-core 0.16.1
transformer/moe/fused_a2a.py ``get_buffer``) sizes one ``deep_ep.Buffer`` for the expert
tensor x expert parallel group (token_dispatcher.py: ``group=self.tp_ep_group``), as the
larger of the dispatch and combine configs' size hints, with ``hidden_bytes = hidden *
max(element size, 2)``: 2 bytes per element for the bf16 (and fp8) hidden states. DeepEP
(deepseek-ai/DeepEP csrc/config.hpp ``Config::get_nvl_buffer_size_hint`` and
``get_rdma_buffer_size_hint``, csrc/kernels/configs.cuh) then holds, per GPU:

- the NVLink buffer, ``cudaMalloc``'d (csrc/deep_ep.cpp): per channel (num_sms / 2) and per
  NVLink peer (at most NUM_MAX_NVL_PEERS = 8), ``num_max_nvl_chunked_recv_tokens`` slots of
  one token (hidden bytes, an 8-byte SourceMeta, 128 int64 top-k indices, 128 fp32 top-k
  weights, 128 fp32 scales) plus (2 x RDMA ranks + 3) ints, rounded up to 128 bytes;
- with more than 8 ranks (internode kernels), the RDMA buffer in NVSHMEM's symmetric heap:
  per channel and per RDMA rank (node), ``num_max_rdma_chunked_recv_tokens`` slots of a token
  (hidden bytes, SourceMeta, indices, weights, scales and an int4), doubled (send and
  receive), plus (2 x 8 + 2) x 2 ints and 1 MiB "to be safe", rounded up to 128 bytes. DeepEP
  sets ``NVSHMEM_CUMEM_GRANULARITY`` to 2**29 (deep_ep/buffer.py: "NVSHMEM initialization
  requires at least 256 MiB"), so the heap maps physical memory in 512 MiB granules;
- a 32 MiB workspace (configs.cuh NUM_WORKSPACE_BYTES), ``cudaMalloc``'d.

The receive-slot counts are deep_ep/buffer.py's ``get_dispatch_config`` /
``get_combine_config`` maps (the same receive counts in the repository's versions we read:
256 up to 8 ranks, 288 for 16-64, 560 for 128, 720 for 144 and 160 on NVLink; 128 on RDMA);
Megatron sets ``num_sms`` to ``moe_deepep_num_sms`` (TransformerConfig default 20).

Neither buffer is PyTorch's: they count towards what must fit, not towards PyTorch's
reserved memory (memory.OUTSIDE_ALLOCATOR). HybridEP, the DeepEP-class backend the
Megatron export writes on rack-scale NVLink domains, sizes its buffers from the sequence
length instead (fused_a2a.py ``init_hybrid_ep_buffer``); it is not modelled (0 bytes).
"""

from __future__ import annotations

from math import ceil

from ..framework_defaults import rack_scale

NUM_MAX_NVL_PEERS = 8  # csrc/kernels/configs.cuh
NUM_MAX_RDMA_PEERS = 20  # csrc/kernels/configs.cuh: internode kernels reach at most 20 nodes
MAX_TOPK = 128  # config.hpp kNumMaxTopK
MAX_SCALES = 128  # config.hpp kNumMaxScales
SOURCE_META_BYTES = 8  # csrc/kernels/internode.cu: sizeof(SourceMeta), two ints
INT_BYTES, INT64_BYTES, FLOAT_BYTES, INT4_BYTES = 4, 8, 4, 16
WORKSPACE_BYTES = 32 * 2**20  # configs.cuh NUM_WORKSPACE_BYTES
RDMA_SAFETY_BYTES = 2**20  # config.hpp: "add a large number to be safe"
NVSHMEM_GRANULE_BYTES = 2**29  # deep_ep/buffer.py NVSHMEM_CUMEM_GRANULARITY
MEGATRON_DEEPEP_NUM_SMS = 20  # megatron-core TransformerConfig.moe_deepep_num_sms default
# group size -> (NVLink receive slots, RDMA receive slots), max over dispatch and combine
# (deep_ep/buffer.py get_dispatch_config / get_combine_config; DeepEP asserts on other sizes)
RECV_TOKENS = {2: (256, 128), 4: (256, 128), 8: (256, 128), 16: (288, 128),
               24: (288, 128), 32: (288, 128), 64: (288, 128), 128: (560, 128),
               144: (720, 128), 160: (720, 128)}
DEEPEP_GROUP_SIZES = tuple(RECV_TOKENS)


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def nvl_buffer_bytes(hidden_bytes: int, ranks: int, recv_tokens: int,
                     num_sms: int = MEGATRON_DEEPEP_NUM_SMS) -> int:
    """config.hpp ``get_nvl_buffer_size_hint``."""
    rdma_ranks = max(ranks // NUM_MAX_NVL_PEERS, 1)
    nvl_ranks = min(ranks, NUM_MAX_NVL_PEERS)
    channels = num_sms // 2
    slot = (hidden_bytes + SOURCE_META_BYTES + MAX_TOPK * INT64_BYTES + MAX_TOPK * FLOAT_BYTES
            + MAX_SCALES * FLOAT_BYTES)
    n = channels * nvl_ranks * (2 * rdma_ranks + 3) * INT_BYTES
    n += channels * nvl_ranks * recv_tokens * slot
    return _align(n, 128)


def rdma_buffer_bytes(hidden_bytes: int, ranks: int, recv_tokens: int,
                      num_sms: int = MEGATRON_DEEPEP_NUM_SMS) -> int:
    """config.hpp ``get_rdma_buffer_size_hint`` (0 within one NVLink group of 8)."""
    if ranks <= NUM_MAX_NVL_PEERS:
        return 0
    rdma_ranks = ranks // NUM_MAX_NVL_PEERS
    channels = num_sms // 2
    slot = (hidden_bytes + SOURCE_META_BYTES + MAX_TOPK * INT64_BYTES + MAX_TOPK * FLOAT_BYTES
            + MAX_SCALES * FLOAT_BYTES + INT4_BYTES)
    n = channels * rdma_ranks * (NUM_MAX_NVL_PEERS * 2 + 2) * 2 * INT_BYTES
    n += channels * rdma_ranks * recv_tokens * slot * 2
    n += RDMA_SAFETY_BYTES
    return _align(n, 128)


def deepep_buffer_bytes(hidden: int, group_size: int) -> float:
    """Bytes one GPU holds for DeepEP's normal kernels on a group of ``group_size`` GPUs
    (nodes of 8): NVLink buffer, workspace and the NVSHMEM heap's granules. Group sizes DeepEP
    has no config for take the next larger one's slots (engines.py refuses them for
    Megatron-LM)."""
    if group_size <= 1:
        return 0.0
    key = min((g for g in RECV_TOKENS if g >= group_size), default=max(RECV_TOKENS))
    nvl_recv, rdma_recv = RECV_TOKENS[key]
    hidden_bytes = 2 * hidden  # fused_a2a.get_hidden_bytes: max(element size, 2)
    nvl = nvl_buffer_bytes(hidden_bytes, group_size, nvl_recv)
    rdma = rdma_buffer_bytes(hidden_bytes, group_size, rdma_recv)
    heap = ceil(rdma / NVSHMEM_GRANULE_BYTES) * NVSHMEM_GRANULE_BYTES if rdma else 0
    return float(nvl + WORKSPACE_BYTES + heap)


def runs_deepep_kernels(moe_dispatcher: str, ep: int, scaleup_domain: int) -> bool:
    """Whether a plan's DeepEP-class dispatch runs DeepEP's normal kernels: not on
    rack-scale NVLink domains, where the Megatron export writes HybridEP."""
    return moe_dispatcher == "deepep" and ep > 1 and not rack_scale(scaleup_domain)


def deepep_group_refusal(moe_dispatcher: str, ep: int, etp: int,
                         scaleup_domain: int) -> str | None:
    """Why DeepEP cannot run a plan's expert group (None when it can): its normal kernels
    have configs for the group sizes of RECV_TOKENS only and assert on others."""
    if not runs_deepep_kernels(moe_dispatcher, ep, scaleup_domain):
        return None
    if ep * etp not in RECV_TOKENS:
        return (f"DeepEP's normal kernels run expert groups (ep x etp) of "
                f"{', '.join(map(str, DEEPEP_GROUP_SIZES))} GPUs, not {ep * etp} "
                "(deep_ep/buffer.py get_dispatch_config)")
    return None


def dispatcher_buffer_bytes(hidden: int, moe_dispatcher: str, ep: int, etp: int,
                            scaleup_domain: int) -> float:
    """What the plan's token dispatcher holds outside PyTorch's allocator (module
    docstring): DeepEP's buffers where a DeepEP-class plan runs DeepEP's normal kernels,
    else nothing."""
    if not runs_deepep_kernels(moe_dispatcher, ep, scaleup_domain):
        return 0.0
    return deepep_buffer_bytes(hidden, ep * etp)
