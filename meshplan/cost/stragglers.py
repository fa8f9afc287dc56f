"""Synchronisation cost of many GPUs: every step waits for the slowest participant.

Synchronous training ends every step with collectives over all ranks (the data-parallel
gradient reduction, Megatron's global gradient-norm all-reduce before the optimizer step,
the loss all-reduce), and a pipeline's steady state runs at the pace of its slowest stage.
So a step takes the *maximum* over the participants of their own step time, not the mean.
If each participant's time is T (1 + sigma Z_i) with Z_i independent standard normals, the
expected step is T (1 + sigma E[M_n]) where M_n is the maximum of n standard normals:
E[M_1] = 0, E[M_2] = 1/sqrt(pi), and E[M_n] ~ sqrt(2 ln n) for large n (Gumbel limit;
e.g. David & Nagaraja, "Order Statistics", 3rd ed., sec. 10.5). It grows slowly: 1.42 for
8, 3.04 for 512, 3.97 for 16,384.

Which participants are independent. Tensor-parallel and context-parallel ranks synchronise
inside every layer (their collectives sit in each layer's forward and backward), so their
spread is already inside the per-layer times the constants were measured on; the units
that run a whole step of work between synchronisations are the data-parallel replicas of
every pipeline stage: n = dp x pp (``straggler_units``). One GPU, or one TP group, has no
one to wait for (n = 1, no cost).

sigma: the relative spread, across data-parallel ranks of the same pipeline stage, of one
rank's forward + backward compute time in one step, measured on ByteDance's published
traces of Megatron-style jobs (bench/data/straggler_points.csv, derived by
bench/straggler_traces.py from github.com/ByteDance-Seed/StragglerAnalysis, the artifact
of Lin et al., "Understanding Stragglers in Large Model Training Using What-if Analysis",
OSDI 2025 / arXiv 2505.05713): 0.45-0.55% median per step on the two traces whose spread
is not data-dependent (their third, SE, has variable sequence lengths: 11%). The same
traces' measured stretch of the data-parallel group (max over ranks / mean - 1) agrees with
sigma x E[M_dp] (tests/test_stragglers.py). This is the spread of a healthy job on a
screened production cluster; unscreened HPC GPUs vary more (Sinha et al., "Not All GPUs
Are Created Equal", SC22: 8% mean range of SGEMM time across thousands of V100s, i.e.
sigma ~1.1% if the range is ~7 sigma), and a failing GPU or a data-dependent imbalance is
outside this model (the residual interval carries it).

Applied to the parts of the step a rank spends in its own layers (compute, recompute and
the exposed TP/CP/EP communication inside them, and the compute slowdown beside hidden
communication); the pipeline bubble, the data-parallel exposed time and the optimizer step
are not stretched (their variation is the network's, priced in collectives.py).
"""

from __future__ import annotations

import math
from functools import lru_cache

# relative 1-sigma of one data-parallel rank's compute time per step (ByteDance traces AR
# and ST: per-step spread across DP ranks 0.53% and 0.45%, median over steps and stages;
# bench/data/straggler_points.csv)
STEP_JITTER_SIGMA = 0.005

# step-time parts a rank spends inside its own layers (what the jitter stretches)
JITTERED_PARTS = ("compute_s", "recompute_s", "tp_exposed_s", "cp_exposed_s", "ep_exposed_s",
                  "overlap_slowdown_s", "fsdp_copy_s")


@lru_cache(maxsize=4096)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals], by quadrature of
    x * d/dx Phi(x)^n over [-12, 12] (Simpson, 4,800 panels; exact to ~1e-9)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if n == 1:
        return 0.0
    lo, hi, k = -12.0, 12.0, 4800
    h = (hi - lo) / k
    total = 0.0
    for i in range(k + 1):
        x = lo + i * h
        phi = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        cdf = 0.5 * math.erfc(-x / math.sqrt(2))
        if cdf <= 0.0:
            continue
        f = x * n * phi * math.exp((n - 1) * math.log(cdf))
        w = 1 if i in (0, k) else (4 if i % 2 else 2)
        total += w * f
    return total * h / 3


expected_max_normal.reads_no_constant = True  # its cache outlives a profile (profile.py)


def straggler_units(dp: int, pp: int) -> int:
    """Independently timed participants that synchronise every step (module docstring)."""
    return max(1, dp) * max(1, pp)


def straggler_s(parts: dict[str, float], units: int, sigma: float = STEP_JITTER_SIGMA) -> float:
    """Expected wait for the slowest of ``units`` participants in one step (seconds)."""
    busy = sum(parts.get(p, 0.0) for p in JITTERED_PARTS)
    return busy * sigma * expected_max_normal(units)
