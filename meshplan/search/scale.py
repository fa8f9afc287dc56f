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


def right_size(model: ModelSpec, cluster: Cluster, workload: Workload, best_all: Estimate,
               pins: dict | None = None, engine: str | None = None) -> RightSize | None:
    """The best plan on the GPU count where tokens/s per GPU stops improving (None when the
    full cluster is already that count); with ``engine``, only plans that engine runs."""
    from .search import search

    best, n, scanned = best_all, cluster.num_gpus, [(cluster.num_gpus,
                                                     best_all.tokens_per_s_per_gpu)]
    pins = {k: v for k, v in (pins or {}).items() if k not in ("dp",)}
    while n % 2 == 0 and n > 1:
        n //= 2
        smaller = replace(cluster, num_gpus=n)
        try:
            r = search(model, smaller, workload, pins, top_k=1, rerank_k=0, simulate=False,
                       engine=engine)
        except InputError:  # a pin impossible on fewer GPUs ends the scan
            break
        got = r.best.tokens_per_s_per_gpu if r.best else 0.0
        scanned.append((n, got))
        if not r.best or got < best.tokens_per_s_per_gpu * IMPROVES:
            break
        best = r.best
    if best is best_all:
        return None
    return RightSize(best.world_size, best, tuple(scanned))
