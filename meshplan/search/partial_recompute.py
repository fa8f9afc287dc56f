"""Rule 6 of the search (meshplan/search/search.py): the partial-recomputation ladder.

At fixed degrees, micro-batch, schedule and ZeRO stage, recomputing the first N layers of each
model chunk in full (Plan.recompute_layers) costs more time and holds less memory as N grows
(N >= 1; cost/step.py, cost/layer.py). So the fastest partial plan that fits at a ZeRO stage is
the one with the fewest layers recomputed that still fits, found in the bracket [1, L-1] (L the
layers of the fullest chunk; N = L is recompute full, which the search tries anyway): N = L-1
first (if it does not fit, nothing does), then N = 1, then steps aimed at the capacity by linear
interpolation of peak memory (exactly linear in N on an even split, so two steps usually close
the bracket), with a plain bisection step whenever a step did not halve the bracket.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

from ..cost import Estimate, estimate
from ..errors import InputError
from ..plan import Plan
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from ..specs.workload import Workload


def partial_fits(model: ModelSpec, cluster: Cluster, workload: Workload, plan: Plan,
                 zeros: list[int], runs_on_engine: Callable[[Plan], bool]
                 ) -> Iterator[tuple[Estimate | InputError, bool]]:
    """For each ZeRO stage in ``zeros``, bisect the layers recomputed per chunk. Yields
    (estimate or the InputError of an invalid plan, chosen) for every plan tried; ``chosen``
    marks the fewest layers that fit at a stage (the others that fit are dominated by it)."""
    most = max(plan.layer_split(model))
    if most < 2 or not runs_on_engine(plan.with_(recompute_layers=1)):
        return  # no chunk to split, or the engine cannot express partial recomputation

    def run(n: int, z: int) -> Estimate | InputError:
        try:
            return estimate(model, cluster, workload, plan.with_(zero=z, recompute_layers=n))
        except InputError as e:
            return e

    def fits(e: Estimate | InputError) -> bool:
        return isinstance(e, Estimate) and e.fits

    for z in zeros:
        tried = {most - 1: run(most - 1, z)}
        if fits(tried[most - 1]):  # memory falls with N: else nothing below fits either
            tried[1] = run(1, z)
        if fits(tried[most - 1]) and not fits(tried[1]) and isinstance(tried[1], Estimate):
            lo, hi = 1, most - 1  # lo does not fit, hi fits
            bisect = False
            while hi - lo > 1:
                if bisect:
                    mid = (lo + hi) // 2
                else:  # peak memory is linear in N on an even split: aim at the capacity
                    m_lo, m_hi = tried[lo].peak_memory_bytes, tried[hi].peak_memory_bytes
                    over = (m_lo - tried[lo].capacity_bytes) / max(m_lo - m_hi, 1.0)
                    mid = min(hi - 1, max(lo + 1, lo + math.ceil(over * (hi - lo))))
                width = hi - lo
                tried[mid] = run(mid, z)
                if not isinstance(tried[mid], Estimate):
                    break  # invalid (cannot happen below the fullest chunk): stop here
                if fits(tried[mid]):
                    hi = mid
                else:
                    lo = mid
                bisect = not bisect and hi - lo > width // 2  # no halving: bisect next
        best = min((n for n, e in tried.items() if fits(e)), default=None)
        for n, e in tried.items():
            yield e, n == best
