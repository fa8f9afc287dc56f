"""Too many GPUs for the work: the GPU count where tokens/s per GPU stops improving.

With fewer sequences per step than GPUs, single sequences must be split over several GPUs
(tp, cp, pp), and each split adds communication or bubble that no batch hides. The scan
halves the GPU count (whole nodes kept while possible) and searches again, while tokens/s
per GPU improves by at least IMPROVES (one halving of the count must pay for itself:
below that the smaller cluster only trades total speed for little per-GPU gain).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..cost import Estimate
from ..errors import InputError
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from ..specs.workload import Workload

IMPROVES = 1.05  # a halving counts as an improvement when tokens/s per GPU rises >= 5%


@dataclass(frozen=True)
class RightSize:
    num_gpus: int
    best: Estimate
    scanned: tuple  # (GPU count, tokens/s per GPU or 0 when nothing fits), largest first


def underused(cluster: Cluster, workload: Workload) -> bool:
    """Fewer sequences per step than GPUs: some sequence is split over several GPUs."""
    return workload.global_batch < cluster.num_gpus


def half_count(n: int, per_node: int) -> int:
    """The next GPU count of the scan: half of ``n``, in whole nodes while above one node
    (96 -> 48 -> 24 -> 8 on 8-GPU nodes; 1,000 -> 496)."""
    half = n // 2
    return half // per_node * per_node if half > per_node else half


def power_of_two_nodes(n: int, per_node: int) -> int:
    """The largest count below ``n`` of whole nodes times a power of two (or a power of two
    below one node): batches of 2^k sequences split over it evenly (1,000 -> 512 on 8-GPU
    nodes, 100,000 -> 65,536)."""
    unit = per_node if n > per_node else 1
    m = unit
    while m * 2 < n:
        m *= 2
    return m


def _scan(model, cluster, workload, pins, engine, first: int):
    """(GPU count, search result) for each count of the scan, largest first: ``first``, then
    halvings in whole nodes; a pin impossible on fewer GPUs ends it."""
    from .search import search

    pins = {k: v for k, v in (pins or {}).items() if k not in ("dp",)}
    n = first
    while n >= 1:
        try:
            r = search(model, replace(cluster, num_gpus=n), workload, pins, top_k=1,
                       rerank_k=0, simulate=False, engine=engine)
        except InputError:
            return
        yield n, r
        n = half_count(n, cluster.gpus_per_node) if n > 1 else 0


def right_size(model: ModelSpec, cluster: Cluster, workload: Workload, best_all: Estimate,
               pins: dict | None = None, engine: str | None = None) -> RightSize | None:
    """The best plan on the GPU count where tokens/s per GPU stops improving (None when the
    full cluster is already that count); with ``engine``, only plans that engine runs."""
    best, scanned = best_all, [(cluster.num_gpus, best_all.tokens_per_s_per_gpu)]
    first = half_count(cluster.num_gpus, cluster.gpus_per_node)
    for n, r in _scan(model, cluster, workload, pins, engine, first):
        got = r.best.tokens_per_s_per_gpu if r.best else 0.0
        scanned.append((n, got))
        if not r.best or got < best.tokens_per_s_per_gpu * IMPROVES:
            break
        best = r.best
    if best is best_all:
        return None
    return RightSize(best.world_size, best, tuple(scanned))


def largest_count_with_a_plan(model: ModelSpec, cluster: Cluster, workload: Workload,
                              pins: dict | None = None,
                              engine: str | None = None) -> RightSize | None:
    """When no layout uses every GPU (a count whose factors no axis takes, 1,000 = 2^3 x 5^3
    with 16 sequences per step): the largest count that has a plan, scanning whole nodes
    times powers of two downwards."""
    scanned = [(cluster.num_gpus, 0.0)]
    first = power_of_two_nodes(cluster.num_gpus, cluster.gpus_per_node)
    for n, r in _scan(model, cluster, workload, pins, engine, first):
        scanned.append((n, r.best.tokens_per_s_per_gpu if r.best else 0.0))
        if r.best:
            return RightSize(n, r.best, tuple(scanned))
    return None
