"""Worker processes for work made of independent pieces (validate's rows, serve's plans).

``jobs``: 0 means one per CPU, 1 runs in this process. Results come back in the order of
the tasks, so the output does not depend on the number of workers.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence


def worker_count(jobs: int, tasks: int) -> int:
    if jobs == 0:
        jobs = os.cpu_count() or 1
    return max(1, min(jobs, tasks))


def pool_map(fn: Callable, tasks: Sequence[tuple], jobs: int = 1) -> list:
    """``[fn(*t) for t in tasks]``, spread over ``jobs`` processes (forked where the
    platform allows, so nothing is imported again)."""
    n = worker_count(jobs, len(tasks))
    if n <= 1:
        return [fn(*t) for t in tasks]
    import multiprocessing as mp

    try:
        ctx = mp.get_context("fork")
    except ValueError:
        ctx = mp.get_context()
    with ctx.Pool(n) as pool:
        return pool.starmap(fn, tasks, chunksize=1)
