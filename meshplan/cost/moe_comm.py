"""Expert-parallel token dispatch and combine: bytes on each tier and their time.

Two classes of dispatcher (Plan.moe_dispatcher):

- ``alltoall`` (Megatron-Core's alltoall dispatcher over NCCL): tokens are permuted by
  expert, so a token chosen by several experts of one rank is sent once per expert. Each
  rank sends tokens * topk * hidden elements, (n-1)/n of it to other ranks
  (collectives.all_to_all_s).
- ``deepep`` (DeepEP normal kernels, DeepSeek-V3 report sec. 3.2.2; HybridEP on NVL72 is the
  same class): a token crosses InfiniBand once per destination *node* (to the GPU with the
  same local index there), then is forwarded over NVLink once per destination *GPU*. The
  RDMA channel that carries the node copies also carries the copy for the token's own node
  (written locally, without the put), so its time counts every destination node. With
  topk experts drawn among E experts spread evenly over n GPUs, the expected number of
  distinct GPUs a token reaches is n * (1 - C(E - E/n, k) / C(E, k)) (closed form: one minus
  the chance that a given GPU holds none of the k experts); the same with the node count for
  nodes. Device-limited routing (DeepSeek-V3 sec. 2.1.2: each token's experts in at most
  M = moe_group_topk of moe_groups expert groups) caps the nodes a token reaches at M when
  the groups map onto the nodes.

Bytes per element: 16-bit, except that DeepSeek's FP8 recipe dispatches the activations
(and the activation gradients before the down projection) in FP8 with one fp32 scale per
128 elements, while both combines stay in BF16 (DeepSeek-V3 report sec. 3.3.1, "Low-Precision
Communication"). Megatron-Core / NeMo dispatch 16-bit hidden states and quantize inside the
grouped GEMM (Transformer Engine), so their FP8 runs dispatch 16-bit (an assumption from the
dispatcher's interface: it takes the bf16 hidden states).
"""

from __future__ import annotations

from ..plan import DEEPEP_CLASS

from functools import lru_cache
from math import comb

from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from .collectives import Placement, _latency, all_to_all_s
from .efficiency import NETWORK

FP8_BYTES_PER_ELEMENT = 1 + 4 / 128  # e4m3 value + an fp32 scale per 1x128 tile
BF16_BYTES_PER_ELEMENT = 2.0


@lru_cache(maxsize=4096)
def expected_distinct(groups: int, experts: int, topk: int) -> float:
    """Expected number of the ``groups`` equal groups of ``experts`` that ``topk`` distinct
    experts drawn uniformly at random fall into."""
    if groups <= 1 or topk <= 0:
        return float(min(groups, 1))
    per = experts // groups
    miss = comb(experts - per, topk) / comb(experts, topk) if experts - per >= topk else 0.0
    return groups * (1.0 - miss)


def copies_per_token(model: ModelSpec, place: Placement, dispatcher: str) -> tuple[float, float]:
    """(copies to other GPUs, copies to other nodes) of one token in one dispatch."""
    n, nodes = place.size, place.nodes
    k, e = model.moe_topk, model.moe_experts
    if dispatcher not in DEEPEP_CLASS:
        return k * (n - 1) / n, k * (n - place.per_node) / n
    ranks = _limited(model, n, expected_distinct(n, e, k))
    return ranks * (n - 1) / n, node_copies(model, place) * (nodes - 1) / nodes


def _limited(model: ModelSpec, units: int, hits: float) -> float:
    """Device-limited routing: a token's experts lie in moe_group_topk of moe_groups expert
    groups; the groups split evenly over ``units`` (GPUs or nodes), so one group spans
    max(1, units / groups) of them and a token reaches at most that many times M."""
    if model.moe_groups and model.moe_group_topk and units > 1:
        return min(hits, model.moe_group_topk * max(1.0, units / model.moe_groups))
    return hits


def dispatch_bytes_per_element(dispatcher: str, precision: str, engine: str) -> float:
    """Element size of the dispatch-shaped all-to-alls (forward dispatch and the backward of
    the combine); combine-shaped ones are 16-bit."""
    from .layer import MEGATRON_ENGINES  # one list of the Megatron-family engines

    if dispatcher in DEEPEP_CLASS and precision == "fp8" and engine not in MEGATRON_ENGINES:
        return FP8_BYTES_PER_ELEMENT
    return BF16_BYTES_PER_ELEMENT


def exchange_s(cluster: Cluster, place: Placement, model: ModelSpec, tokens: float,
               dispatcher: str, bytes_per_element: float) -> float:
    """One dispatch (or combine) of ``tokens`` tokens of this rank over the EP group."""
    if place.size == 1 or tokens <= 0:
        return 0.0
    if dispatcher not in DEEPEP_CLASS:
        return all_to_all_s(cluster, place, bytes_per_element * tokens * model.moe_topk
                            * model.hidden)
    gpus, _ = copies_per_token(model, place, dispatcher)
    row = bytes_per_element * model.hidden
    up = cluster.gpu.scaleup_bytes_per_s * NETWORK.scaleup
    # every copy for another GPU crosses NVLink once (directly, or forwarded after its RDMA
    # hop)
    inside = tokens * gpus * row / up
    across = 0.0
    if place.nodes > 1:
        # the RDMA channel: one copy per destination node, the token's own node included
        # (DeepEP csrc/kernels/internode.cu at 3b1045d, dispatch: the sender warps write the
        # own node's copy into its RDMA receive buffer through the same channel chunks, only
        # the put is skipped, and the forwarders read every node's copy from there). DeepEP's
        # table counts these logical bytes and reaches 43-58 GB/s on 50 GB/s NICs at EP16-64
        # (README, normal kernels), so the channel moves all node copies at about the NIC's
        # rate: NETWORK.scaleout, the NIC's large-message share (tests/test_deepep_table.py)
        node_hits = node_copies(model, place)
        across = tokens * node_hits * row / (cluster.nic_bytes_per_s * NETWORK.scaleout)
    return max(inside, across) + _latency(cluster, place, place.per_node - 1)


def host_syncs(engine: str, cuda_graph: str) -> int:
    """Host-device synchronisations in the forward of one MoE layer. Megatron-Core's dropless
    dispatchers need the per-expert token counts on the host: MoEAlltoAllTokenDispatcher
    copies them device-to-host and synchronises at its cuda_sync_point (before the expert
    all-to-all, or before returning without expert parallelism), MoEAllGatherTokenDispatcher
    calls .cpu() on them, and the flex dispatcher's DeepEP / HybridEP dispatch returns them
    to the host (megatron/core/transformer/moe/token_dispatcher.py, fused_a2a.py). A layer
    captured whole in a CUDA graph (cuda_graph "full") cannot synchronise: its recipe runs a
    sync-free dispatch (token drop with padding to capacity, cuda_sync_point "no_sync"; or
    the full-iteration graph's fixed expert capacity). The backward reuses the forward's
    counts: no sync."""
    from .layer import MEGATRON_ENGINES  # one list of the Megatron-family engines
    from .ops import CUDA_GRAPH_FULL
    return int(engine in MEGATRON_ENGINES and cuda_graph != CUDA_GRAPH_FULL)


def node_copies(model: ModelSpec, place: Placement) -> float:
    """Expected destination nodes of one token under DeepEP-class dispatch, its own node
    included (device-limited routing applied)."""
    return _limited(model, place.nodes,
                    expected_distinct(place.nodes, model.moe_experts, model.moe_topk))
