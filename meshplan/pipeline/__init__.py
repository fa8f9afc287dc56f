"""Pipeline schedules as data (per-rank action lists) and a discrete-event simulator.

- ``actions``: the action vocabulary of ``torch.distributed.pipelining`` (``0F1``, ``3I0``,
  ``2SEND_F5``...) and its CSV format.
- ``schedules``: generators for every name in ``meshplan.plan.SCHEDULES``.
- ``lowering``: compute-only lists -> lists with SEND/RECV actions (torch's lowering pass).
- ``check``: the invariants every generated schedule must satisfy.
- ``simulate``: one training step over all pipeline ranks, with per-chunk times.
"""

from .actions import Action, format_csv, parse_action, read_csv, write_csv
from .schedules import Schedule, build_schedule

__all__ = ["Action", "Schedule", "build_schedule", "format_csv", "parse_action",
           "read_csv", "write_csv"]
