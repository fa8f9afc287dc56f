"""The action vocabulary of a pipeline schedule, as ``torch.distributed.pipelining`` spells it.

A schedule is, for every pipeline rank, an ordered list of actions on (stage, micro-batch).
The names, the string form and the CSV layout follow ``_ComputationType``, ``_Action`` and
``_PipelineScheduleRuntime._load_csv`` / ``_dump_csv`` in
``torch/distributed/pipelining/schedules.py`` (torch 2.13):

- ``F`` forward, ``B`` full backward, ``I`` backward for inputs only, ``W`` backward for
  weights only; ``SEND_F`` / ``RECV_F`` (activations) and ``SEND_B`` / ``RECV_B`` (gradients);
  ``OVERLAP_F_B`` a forward and a backward of two different chunks run together (DualPipeV),
  written ``(0F3;7B1)OVERLAP_F_B``. ``UNSHARD``, ``RESHARD`` and ``REDUCE_GRAD`` are parsed
  (torch writes them into lowered schedules) but never generated here.
- String form ``<stage><type><micro-batch>``: ``0F1`` is the forward of micro-batch 1 on
  stage (virtual stage / model chunk) 0, ``3SEND_B2`` sends stage 3's input gradient of
  micro-batch 2 to stage 2.
- CSV: one row per pipeline rank, one cell per action, an empty cell for an idle slot.
  ``_PipelineScheduleRuntime._load_csv(path, format="compute_only")`` reads a file of compute
  actions and lowers it itself; ``format="compute_comms"`` reads one with sends and receives.

This module does not import torch.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import NamedTuple

from ..errors import InputError

F, B, I, W = "F", "B", "I", "W"
SEND_F, RECV_F, SEND_B, RECV_B = "SEND_F", "RECV_F", "SEND_B", "RECV_B"
OVERLAP_F_B = "OVERLAP_F_B"
UNSHARD, RESHARD, REDUCE_GRAD = "UNSHARD", "RESHARD", "REDUCE_GRAD"

COMPUTE = (F, B, I, W, OVERLAP_F_B)
COMMS = (SEND_F, RECV_F, SEND_B, RECV_B)
KINDS = COMPUTE + COMMS + (UNSHARD, RESHARD, REDUCE_GRAD)

# Same alternation order as torch's ``_action_regex`` (longest names cannot be shadowed
# because the single letters are followed by digits or the end of the string).
_ACTION_RE = re.compile(
    r"^(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)$")


class Action(NamedTuple):
    """One step of a rank's list: ``kind`` applied to micro-batch ``mb`` of ``stage``.

    ``sub`` holds the two actions of an ``OVERLAP_F_B`` (whose own stage is -1 and mb None,
    as in torch).
    """

    stage: int
    kind: str
    mb: int | None = None
    sub: tuple["Action", ...] | None = None

    def __str__(self) -> str:
        if self.sub is not None:
            return "(" + ";".join(str(a) for a in self.sub) + ")" + self.kind
        return f"{self.stage}{self.kind}{'' if self.mb is None else self.mb}"

    __repr__ = __str__

    @property
    def is_compute(self) -> bool:
        return self.kind in COMPUTE

    def leaves(self) -> tuple["Action", ...]:
        """The action itself, or the actions an OVERLAP_F_B runs together."""
        return self.sub if self.sub is not None else (self,)


def overlap(fwd: Action, bwd: Action) -> Action:
    """An OVERLAP_F_B running ``fwd`` and ``bwd`` (two different chunks) together."""
    return Action(-1, OVERLAP_F_B, None, (fwd, bwd))


def parse_action(text: str) -> Action | None:
    """Inverse of ``str(action)``; an empty cell is ``None`` (an idle slot)."""
    s = text.strip()
    if not s:
        return None
    if s.startswith("("):
        close = s.find(")")
        kind = s[close + 1:] if close > 0 else ""
        if close < 0 or kind != OVERLAP_F_B:
            raise InputError("action", text, "expected (ACTION;ACTION)OVERLAP_F_B")
        subs = tuple(a for a in (parse_action(p) for p in s[1:close].split(";")) if a)
        if not subs or any(a.sub is not None for a in subs):
            raise InputError("action", text, "OVERLAP_F_B needs plain actions inside")
        return overlap(*subs) if len(subs) == 2 else Action(-1, OVERLAP_F_B, None, subs)
    m = _ACTION_RE.match(s)
    if not m:
        raise InputError("action", text,
                         "expected <stage><type><micro-batch> such as 2F0 or 3SEND_B1, type one "
                         "of " + ", ".join(KINDS[:-3] + (UNSHARD, RESHARD, REDUCE_GRAD)))
    stage, kind, mb = m.groups()
    return Action(int(stage), kind, int(mb) if mb else None)


def format_csv(order: dict[int, list[Action | None]]) -> str:
    """The CSV text torch's ``_load_csv`` reads: one row per rank, ranks in order."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for rank in sorted(order):
        w.writerow(["" if a is None else str(a) for a in order[rank]])
    return buf.getvalue()


def write_csv(order: dict[int, list[Action | None]], path: str | Path) -> None:
    Path(path).write_text(format_csv(order))


def read_csv(path_or_text: str | Path, *, text: bool = False) -> dict[int, list[Action | None]]:
    """Per-rank action lists from a CSV file (or from CSV ``text`` when ``text=True``)."""
    if text:
        data = str(path_or_text)
    else:
        try:
            data = Path(path_or_text).read_text(encoding="utf-8").removeprefix("\ufeff")
        except OSError as e:
            raise InputError("schedule_csv", str(path_or_text),
                             f"cannot read ({e.strerror})") from None
        except UnicodeDecodeError:
            raise InputError("schedule_csv", str(path_or_text), "not UTF-8 text") from None
    rows = csv.reader(io.StringIO(data))
    return {rank: [parse_action(c) for c in row] for rank, row in enumerate(rows)}
