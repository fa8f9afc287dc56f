"""The equivalence cases' shared pieces: the batch they train on, and check_equivalence run
once more when its only failure is a rank killed by a signal.

A native crash in the CPU/gloo stack (launch.RankCrashed: no Python error of ours, only the
peers' lost connections) is run again and reported as a warning; a Python error, a wrong
number or a second crash still fails the test (docs/runtime.md, "Proof").
"""

import warnings

from meshplan.runtime.launch import RankCrashed
from meshplan.runtime.verify import check_equivalence


def equivalence(cfg, world: int):
    try:
        return check_equivalence(cfg, world)
    except RankCrashed as e:
        warnings.warn(f"{cfg.plan.describe()}: a rank crashed, run again: {str(e)[:300]}")
        return check_equivalence(cfg, world)


def global_batch(plan) -> int:
    """8 sequences a step under a pipeline (its schedules need several micro-batches per
    stage); without one, 3 micro-batches per rank (the first, a middle and the last of the
    gradient accumulation, each treated apart by FSDP) up to those 8: the tensor-parallel
    cases ran 8 micro-batches of DTensor dispatch a step, 60% of their time."""
    return 8 if plan.pp > 1 else min(8, 3 * plan.dp * plan.micro_batch)
