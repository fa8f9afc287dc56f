"""Clusters made of pools: several homogeneous groups of GPUs joined by a slower link.

A ``Pool`` is a homogeneous ``Cluster`` (GPU type, count, node size, NIC) with a price per
GPU-hour. A ``PoolCluster`` is one or more pools and the link between them (bytes/s per GPU
one way; by default the slowest pool's NIC, since traffic leaving a pool crosses it). A
homogeneous cluster is a PoolCluster of one pool: every one-pool result comes from the
unchanged homogeneous path.

    64xH100-SXM-80GB+256xA100-SXM-80GB      (the --gpus syntax; "+" joins pools)
"""

from __future__ import annotations

import math

from dataclasses import dataclass

from ..errors import InputError
from .hardware import GPU, Cluster, parse_gpus
from .prices import Price, price_of


@dataclass(frozen=True)
class Pool:
    cluster: Cluster
    price: Price

    @property
    def gpu(self) -> GPU:
        return self.cluster.gpu

    @property
    def num_gpus(self) -> int:
        return self.cluster.num_gpus

    @property
    def name(self) -> str:
        return self.cluster.gpu.name

    @property
    def usd_per_hour(self) -> float:
        return self.num_gpus * self.price.usd_per_gpu_hour


@dataclass(frozen=True)
class PoolCluster:
    pools: tuple[Pool, ...]
    inter_pool_bytes_per_s: float = 0.0  # 0: the slowest pool's NIC
    inter_pool_latency_s: float = 0.0  # 0: the largest scale-out latency of the pools
    inter_pool_given: bool | None = None  # None: True when a link was given (nonzero)

    def __post_init__(self) -> None:
        if self.inter_pool_given is None:
            object.__setattr__(self, "inter_pool_given", bool(self.inter_pool_bytes_per_s))
        if not self.pools:
            raise InputError("gpus", "", "a cluster needs at least one pool")
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise InputError("gpus", dup, "each GPU type may appear in one pool only "
                             "(add the counts together)")
        if not self.inter_pool_bytes_per_s:
            object.__setattr__(self, "inter_pool_bytes_per_s",
                               min(p.cluster.nic_bytes_per_s for p in self.pools))
        if not 0 < self.inter_pool_bytes_per_s < math.inf:  # nan, inf, 0, negative
            raise InputError("--inter-pool-gbps", self.inter_pool_bytes_per_s * 8 / 1e9,
                             "must be a finite number > 0")
        if not self.inter_pool_latency_s:
            object.__setattr__(self, "inter_pool_latency_s",
                               max(p.gpu.scaleout_latency_s for p in self.pools))

    def link_bytes_per_s(self, pools) -> float:
        """Bytes/s per GPU one way between the pools with these indices: the link given,
        else the slowest NIC among those pools (traffic between them crosses only their
        NICs, not those of pools that take no part)."""
        if self.inter_pool_given:
            return self.inter_pool_bytes_per_s
        return min(self.pools[k].cluster.nic_bytes_per_s for k in pools)

    @property
    def num_gpus(self) -> int:
        return sum(p.num_gpus for p in self.pools)

    @property
    def is_homogeneous(self) -> bool:
        return len(self.pools) == 1

    @property
    def usd_per_hour(self) -> float:
        return sum(p.usd_per_hour for p in self.pools)

    def describe(self) -> str:
        parts = [f"{p.cluster.describe()} at ${p.price.usd_per_gpu_hour:.2f}/GPU-h"
                 for p in self.pools]
        link = f"; between pools {self.inter_pool_bytes_per_s * 8 / 1e9:.0f} Gb/s per GPU"
        return " + ".join(parts) + (link if len(self.pools) > 1 else "")


def parse_pools(text: str, catalog: dict[str, GPU]) -> list[tuple[int, GPU]]:
    """``64xH100-SXM-80GB+256xA100-SXM-80GB`` -> [(64, H100), (256, A100)]."""
    parts = str(text).split("+")
    if any(not p.strip() for p in parts):
        raise InputError("gpus", text, "expected COUNTxGPU[+COUNTxGPU...], "
                         "e.g. 64xH100-SXM-80GB+256xA100-SXM-80GB")
    return [parse_gpus(p, catalog) for p in parts]


def pool_of(cluster: Cluster, prices: dict[str, float] | None = None) -> Pool:
    return Pool(cluster, price_of(cluster.gpu.name, prices))
