"""Time of one collective on a group of ranks, from where the group sits in the cluster.

A model of what NCCL does, checked against published nccl-tests tables
(bench/data/nccl_points.csv, tests/test_nccl_points.py). A group of n ranks sits as g ranks
per scale-up domain (NVLink node, or an NVL72 rack) over k = n/g domains.

- Volumes (FIELD.md, nccl-tests doc/PERFORMANCE.md): per rank, all-reduce moves 2(n-1)/n of
  the buffer, all-gather / reduce-scatter (n-1)/n of the gathered buffer.
- Ring across domains: every channel's ring leaves a domain once, on the NIC of the GPU at its
  edge; NCCL rotates the rings so each GPU is the edge of 1/g of them. Each GPU therefore
  sends 1/g of its ring traffic on its own NIC and the rest on NVLink, both at once: the time
  is the larger of the two (so 8 GPUs per node with a 400G NIC each reach ~8 x 46 GB/s of bus
  bandwidth, NVIDIA/nccl-tests#290, NVIDIA/nccl#1368, #1576).
- Tree all-reduce across domains (NCCL's double binary tree, or NVLS-tree on Hopper): the
  intra-domain reduce/broadcast and the inter-domain tree are pipelined; a domain sends 2S/g
  per NIC (S/g on two domains, where each is root of one tree and leaf of the other).
  Latency grows with log2(k) levels rather than 2(k-1) ring hops: NCCL picks it at scale.
- NVLS (Hopper and later, NVSwitch): all-reduce inside a domain at 1.3x the ring's bus
  bandwidth.
- Protocols: NCCL picks per call the fastest of LL (low latency, 1/4 of the bandwidth), LL128
  and Simple (full bandwidth after a pipeline fill). This is what makes messages of a few MB
  reach only part of the bus bandwidth (8x A100 all-reduce: 90 GB/s at 8 MB, 157 at 32 MB,
  235 at 8 GB). Constants and their sources: cost/efficiency.py NetworkEfficiency.
- All-to-all: the share for peers in the domain crosses NVLink, the rest the NICs, at once.
- Point to point: one send at the p2p share of NVLink, or at the NIC rate across domains.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from math import log2

from ..specs.hardware import Cluster
from .efficiency import NETWORK

# NCCL's hop latency of LL and LL128 relative to Simple, per link kind (src/graph/tuning.cc
# hwLat Ring row: NVLink .47/1.9/3.4 us, PCIe 1.0/2.5/5.7, network 2.7/4.0/9.6).
_LL_HOP = {"nvlink": 0.47 / 3.4, "pcie": 1.0 / 5.7, "net": 2.7 / 9.6}
_LL128_HOP = {"nvlink": 1.9 / 3.4, "pcie": 2.5 / 5.7, "net": 4.0 / 9.6}
# Below this NVLink/xGMI bandwidth per GPU the scale-up fabric is PCIe (3.0/4.0 x16 are 16 and
# 32 GB/s; the slowest NVLink part here, V100, has 150).
_PCIE_MAX_BYTES_PER_S = 64e9
# Generations whose NVSwitch does in-switch reduction (NVLink SHARP): Hopper, Blackwell.
_NVLS_GENERATIONS = ("hopper", "blackwell")


@dataclass(frozen=True)
class Placement:
    """How a group of ``size`` ranks sits: ``per_node`` of them in each scale-up domain."""

    size: int
    per_node: int

    @property
    def nodes(self) -> int:
        return self.size // self.per_node

    @property
    def tier(self) -> str:
        if self.size == 1:
            return "none"
        return "scale-up" if self.nodes == 1 else "scale-out"


@lru_cache(maxsize=65536)
def placement(sizes_strides: tuple[tuple[int, int], ...], domain: int) -> Placement:
    """Placement of the group spanned by axes given as (size, stride) pairs.

    Ranks r and r' share a scale-up domain when r // domain == r' // domain. The group of
    rank 0 holds the ranks sum(c_i * stride_i); count those below ``domain``.
    """
    size = 1
    for s, _ in sizes_strides:
        size *= s
    if size == 1:
        return Placement(1, 1)
    axes = [(s, st) for s, st in sizes_strides if s > 1]
    # members in the first domain: enumerate small groups, else count per axis
    if size <= 4096:
        ranges = [range(0, s * st, st) for s, st in axes]
        per_node = sum(1 for combo in product(*ranges) if sum(combo) < domain)
    else:
        per_node = 1
        for s, st in axes:
            per_node *= min(s, max(1, domain // st)) if st < domain else 1
    per_node = max(1, min(per_node, size))
    while size % per_node:  # irregular layouts: fall back to a divisor
        per_node -= 1
    return Placement(size, per_node)


def group_placement(cluster: Cluster, *axes: tuple[int, int]) -> Placement:
    return placement(tuple(axes), cluster.domain_size)


@dataclass(frozen=True)
class _Links:
    up: float  # ring bus bandwidth on the scale-up fabric, bytes/s
    nic: float  # per GPU, bytes/s
    up_kind: str  # "nvlink" or "pcie"
    hop_up: float  # Simple-protocol latency of one scale-up hop
    nvls: bool
    nvls_gain: float  # NVLS all-reduce bus bandwidth over the ring's (nvls_factor)
    mesh_links: int = 0  # links per GPU of a full-mesh domain (0: a switch; scaleup_share)

    def share(self, members: int) -> float:
        """scaleup_share for a group with ``members`` GPUs in the domain."""
        if not self.mesh_links or members > self.mesh_links:
            return 1.0
        return max(1, members - 1) / self.mesh_links


def nvls_name(generation: str) -> str:
    """The NETWORK constant of ``generation``'s NVLS all-reduce gain over the ring
    (cost/efficiency.py: NVLink 5 gains less than NVLink 4)."""
    return ("NETWORK.nvls_allreduce_blackwell" if generation == "blackwell"
            else "NETWORK.nvls_allreduce")


def nvls_factor(generation: str) -> float:
    return getattr(NETWORK, nvls_name(generation).split(".", 1)[1])


def scaleup_name(generation: str) -> str:
    """The NETWORK constant of ``generation``'s ring bus bandwidth over its scale-up link
    bandwidth (cost/efficiency.py: CDNA3's Infinity Fabric apart from NVLink)."""
    return "NETWORK.scaleup_xgmi" if generation == "cdna3" else "NETWORK.scaleup"


def scaleup_efficiency(generation: str) -> float:
    return getattr(NETWORK, scaleup_name(generation).split(".", 1)[1])


def scaleup_share(cluster: Cluster, members: int) -> float:
    """Share of a GPU's scale-up bandwidth (GPU.scaleup_bytes_per_s, all its links) that a
    group with ``members`` GPUs in one domain can use: all of it through a switch (NVSwitch
    gives any pair the full NVLink bandwidth), (members - 1) of the domain - 1 links on a full
    mesh (GPU.scaleup_full_mesh), where each pair has one link of its own and a group's
    traffic never crosses the links to GPUs outside it. AMD: "When performing collective
    operations with only 2 or 4 GPUs, only a fraction of the available bandwidth on the node
    is utilized" (ROCm blogs, RCCL and xGMI on MI300X, 2025-03-02); TransferBench there gives
    one pair 45-47 GB/s, a seventh of the 8-GPU aggregate."""
    return _links(cluster).share(members)


@lru_cache(maxsize=256)
def _links(cluster: Cluster) -> _Links:
    """The cluster's link rates and latencies (cached: every collective's price reads them,
    ~41,000 times in one DeepSeek-V3 search; profile.apply clears it with the others)."""
    g = cluster.gpu
    pcie = g.scaleup_bytes_per_s < _PCIE_MAX_BYTES_PER_S
    nvls = not pcie and g.generation in _NVLS_GENERATIONS
    return _Links(up=g.scaleup_bytes_per_s * scaleup_efficiency(g.generation),
                  nic=cluster.nic_bytes_per_s * NETWORK.scaleout,
                  up_kind="pcie" if pcie else "nvlink",
                  hop_up=NETWORK.hop_pcie_s if pcie else NETWORK.hop_nvlink_s,
                  nvls=nvls, nvls_gain=nvls_factor(g.generation) if nvls else 1.0,
                  mesh_links=(cluster.scaleup_domain - 1
                              if g.scaleup_full_mesh and cluster.scaleup_domain > 1 else 0))


def _simple(stream_s: float, hops_up: float, hops_net: float, lk: _Links) -> float:
    """NCCL's Simple protocol: pipeline fill, one hop latency per step, full bandwidth."""
    return (NETWORK.simple_fill_bytes / lk.up + hops_up * lk.hop_up + hops_net * NETWORK.hop_net_s
            + stream_s)


def _protocols(stream_s: float, hops_up: float, hops_net: float, lk: _Links) -> float:
    """Fastest of NCCL's three protocols for a transfer that streams for ``stream_s`` at full
    bus bandwidth over ``hops_up`` scale-up and ``hops_net`` network hops in sequence."""
    hop_net = NETWORK.hop_net_s
    ll = (NETWORK.ll_base_s + hops_up * lk.hop_up * _LL_HOP[lk.up_kind]
          + hops_net * hop_net * _LL_HOP["net"] + stream_s / NETWORK.ll_bw)
    ll128 = (NETWORK.ll128_base_s + hops_up * lk.hop_up * _LL128_HOP[lk.up_kind]
             + hops_net * hop_net * _LL128_HOP["net"] + stream_s / NETWORK.ll128_bw)
    return min(ll, ll128, _simple(stream_s, hops_up, hops_net, lk))


def _ring_stream_s(lk: _Links, p: Placement, volume_bytes: float) -> float:
    """Streaming time of a ring moving ``volume_bytes`` per rank (1/g of it on the NIC)."""
    g, k = p.per_node, p.nodes
    up = lk.up * lk.share(g)
    if k == 1:
        return volume_bytes / up
    return max(volume_bytes * (g - 1) / g / up, volume_bytes / g / lk.nic)


def _ar_ring(lk: _Links, p: Placement, buffer_bytes: float) -> float:
    n, g, k = p.size, p.per_node, p.nodes
    vol = 2 * (n - 1) / n * buffer_bytes
    ring = _protocols(_ring_stream_s(lk, p, vol), 2 * (n - k), 2 * (k - 1), lk)
    if k == 1 and lk.nvls and g > 2:
        # NVLS runs the Simple protocol only (NCCL: no LL/LL128 for NVLS)
        ring = min(ring, _simple(vol / (lk.up * lk.nvls_gain), 2, 0, lk))
    return ring


def _ar_tree(lk: _Links, p: Placement, buffer_bytes: float) -> float:
    """Tree (NVLS-tree where the domain has NVLS) across domains: the domain part and the
    tree are pipelined."""
    g, k = p.per_node, p.nodes
    intra = 0.0
    if g > 1:
        intra = buffer_bytes / (lk.up * lk.share(g) * lk.nvls_gain)
    inter = (1 if k == 2 else 2) * buffer_bytes / g / (lk.nic * NETWORK.tree)
    return _protocols(max(intra, inter), 2 * (g - 1), 2 * log2(k), lk)


@lru_cache(maxsize=65536)
def _all_reduce(cluster: Cluster, p: Placement, buffer_bytes: float) -> float:
    """NCCL's pick: the faster of ring and (across domains) tree."""
    lk = _links(cluster)
    ring = _ar_ring(lk, p, buffer_bytes)
    return ring if p.nodes == 1 else min(ring, _ar_tree(lk, p, buffer_bytes))


def all_reduce_algo_s(cluster: Cluster, p: Placement, buffer_bytes: float, algo: str) -> float:
    """All-reduce with the algorithm forced ("ring" or "tree"), as NCCL_ALGO does."""
    if p.size == 1 or buffer_bytes <= 0:
        return 0.0
    lk = _links(cluster)
    if algo == "ring" or p.nodes == 1:
        return _ar_ring(lk, p, float(buffer_bytes))
    if algo == "tree":
        return _ar_tree(lk, p, float(buffer_bytes))
    raise ValueError(f"algo {algo!r}: expected ring or tree")


@lru_cache(maxsize=65536)
def _all_gather(cluster: Cluster, p: Placement, gathered_bytes: float) -> float:
    lk = _links(cluster)
    n, k = p.size, p.nodes
    vol = (n - 1) / n * gathered_bytes
    return _protocols(_ring_stream_s(lk, p, vol), n - k, k - 1, lk)


def all_reduce_s(cluster: Cluster, p: Placement, buffer_bytes: float) -> float:
    if p.size == 1 or buffer_bytes <= 0:
        return 0.0
    return _all_reduce(cluster, p, float(buffer_bytes))


def all_gather_s(cluster: Cluster, p: Placement, gathered_bytes: float) -> float:
    """All-gather (or reduce-scatter) whose full, gathered buffer is ``gathered_bytes``."""
    if p.size == 1 or gathered_bytes <= 0:
        return 0.0
    return _all_gather(cluster, p, float(gathered_bytes))


reduce_scatter_s = all_gather_s


def all_to_all_s(cluster: Cluster, p: Placement, send_bytes: float) -> float:
    """All-to-all where each rank sends ``send_bytes`` spread evenly over the group: NCCL
    posts one send and one receive per peer, all at once; the share for peers in the domain
    crosses NVLink, the rest the NICs (at the all-to-all share of the NIC rate)."""
    if p.size == 1 or send_bytes <= 0:
        return 0.0
    lk = _links(cluster)
    nic = cluster.nic_bytes_per_s * NETWORK.alltoall_scaleout
    n, g = p.size, p.per_node
    inside = (g - 1) / n * send_bytes / (lk.up * lk.share(g))
    across = (n - g) / n * send_bytes / nic
    stream = _protocols(max(inside, across), 1, 1 if p.nodes > 1 else 0, lk)
    return (n - 1) * NETWORK.a2a_peer_s + stream


def p2p_s(cluster: Cluster, across_nodes: bool, message_bytes: float) -> float:
    """One point-to-point send (pipeline activations / gradients)."""
    if message_bytes <= 0:
        return 0.0
    lk = _links(cluster)
    if across_nodes:
        return _protocols(message_bytes / lk.nic, 0, 1, lk)
    up = cluster.gpu.scaleup_bytes_per_s * NETWORK.p2p_scaleup * scaleup_share(cluster, 2)
    return _protocols(message_bytes / up, 1, 0, lk)


def _latency(cluster: Cluster, p: Placement, steps_inside: int) -> float:
    """Fixed cost of a collective whose bandwidth part is computed elsewhere (DeepEP's
    dispatch in moe_comm): the LL protocol's base and hop latencies of ``steps_inside``
    scale-up hops and, across domains, the tree's log2(k) levels."""
    lk = _links(cluster)
    lat = NETWORK.ll_base_s + steps_inside * lk.hop_up * _LL_HOP[lk.up_kind]
    if p.nodes > 1:
        lat += 2 * log2(p.nodes) * NETWORK.hop_net_s * _LL_HOP["net"]
    return lat
