"""Time of one collective on a group of ranks, from where the group sits in the cluster.

A group of n ranks spread as g ranks per node over k = n/g nodes runs hierarchically:
the part inside a node on the scale-up fabric (NVLink), the part across nodes on each
GPU's own NIC, with the buffer already divided by g (NCCL uses every NIC of the node).
Per-rank volumes for ring algorithms on n ranks (FIELD.md, NCCL bus bandwidth):
all-reduce 2(n-1)/n of the buffer, all-gather / reduce-scatter (n-1)/n, all-to-all (n-1)/n.
A scale-up domain larger than a node (GB200 NVL72) counts as one node here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from math import log2

from ..specs.hardware import Cluster
from .efficiency import NETWORK


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


def _bw(cluster: Cluster) -> tuple[float, float]:
    g = cluster.gpu
    return g.scaleup_bytes_per_s * NETWORK.scaleup, cluster.nic_bytes_per_s * NETWORK.scaleout


def _latency(cluster: Cluster, p: Placement, steps_inside: int) -> float:
    lat = cluster.gpu.scaleup_latency_s * steps_inside
    if p.nodes > 1:
        lat += cluster.gpu.scaleout_latency_s * 2 * max(1.0, log2(p.nodes))
    return lat


def all_reduce_s(cluster: Cluster, p: Placement, buffer_bytes: float) -> float:
    if p.size == 1 or buffer_bytes <= 0:
        return 0.0
    up, nic = _bw(cluster)
    g, k = p.per_node, p.nodes
    t = 2 * (g - 1) / g * buffer_bytes / up
    if k > 1:
        t += 2 * (k - 1) / k * (buffer_bytes / g) / nic
    return t + _latency(cluster, p, 2 * (g - 1))


def all_gather_s(cluster: Cluster, p: Placement, gathered_bytes: float) -> float:
    """All-gather (or reduce-scatter) whose full, gathered buffer is ``gathered_bytes``."""
    if p.size == 1 or gathered_bytes <= 0:
        return 0.0
    up, nic = _bw(cluster)
    g, k = p.per_node, p.nodes
    t = (g - 1) / g * gathered_bytes / up
    if k > 1:
        t += (k - 1) / k * (gathered_bytes / g) / nic
    return t + _latency(cluster, p, g - 1)


reduce_scatter_s = all_gather_s


def all_to_all_s(cluster: Cluster, p: Placement, send_bytes: float) -> float:
    """All-to-all where each rank sends ``send_bytes`` spread evenly over the group."""
    if p.size == 1 or send_bytes <= 0:
        return 0.0
    up, _ = _bw(cluster)
    nic = cluster.nic_bytes_per_s * NETWORK.alltoall_scaleout
    n, g = p.size, p.per_node
    inside = (g - 1) / n * send_bytes / up
    across = (n - g) / n * send_bytes / nic
    return max(inside, across) + _latency(cluster, p, g - 1)


def p2p_s(cluster: Cluster, across_nodes: bool, message_bytes: float) -> float:
    """One point-to-point send (pipeline activations / gradients)."""
    if message_bytes <= 0:
        return 0.0
    up, nic = _bw(cluster)
    if across_nodes:
        return message_bytes / nic + cluster.gpu.scaleout_latency_s
    return message_bytes / up + cluster.gpu.scaleup_latency_s
