"""A simulated step as a Chrome / Perfetto trace (JSON "Trace Event Format").

Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
(complete events ``ph: "X"`` with ``ts``/``dur`` in microseconds, metadata events
``ph: "M"`` naming processes and threads). Open the file in https://ui.perfetto.dev or
chrome://tracing. One process per pipeline rank, one track (thread) per stream:
compute, sends towards the next stage, sends towards the previous stage, data parallel.
Every compute event carries its stage and micro-batch in ``args``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..errors import InputError
from ..inputs import check_not_read
from ..pipeline.simulate import SimResult

TRACKS = {"compute": 0, "send_fwd": 1, "send_bwd": 2, "dp": 3}
TRACK_NAMES = {0: "compute", 1: "p2p send (activations)", 2: "p2p send (gradients)",
               3: "data parallel"}
CATEGORY = {"F": "forward", "B": "backward", "I": "backward_input", "W": "backward_weight",
            "OVERLAP_F_B": "overlap_forward_backward"}


def _us(t: float) -> float:
    return round(t * 1e6, 3)


def trace_events(res: SimResult, title: str = "") -> dict:
    """The trace as a JSON-ready dict."""
    ev: list[dict] = []
    for r in range(res.schedule.pp):
        ev.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                   "args": {"name": f"pp rank {r}"}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0,
                   "args": {"sort_index": r}})
        for tid, name in TRACK_NAMES.items():
            ev.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid,
                       "args": {"name": name}})
        for a, st, en in zip(res.schedule.order[r], res.starts[r], res.ends[r]):
            if a.sub is not None:
                args = {"forward_stage": a.sub[0].stage, "forward_microbatch": a.sub[0].mb,
                        "backward_stage": a.sub[1].stage, "backward_microbatch": a.sub[1].mb}
            else:
                args = {"stage": a.stage, "microbatch": a.mb}
            ev.append({"ph": "X", "name": str(a), "cat": CATEGORY[a.kind], "pid": r,
                       "tid": TRACKS["compute"], "ts": _us(st), "dur": _us(en - st),
                       "args": args})
    for src, dst, stage, mb, d, st, en in res.transfers:
        tid = TRACKS["send_fwd"] if d == "F" else TRACKS["send_bwd"]
        kind = "SEND_F" if d == "F" else "SEND_B"
        ev.append({"ph": "X", "name": f"{stage}{kind}{mb}", "cat": "p2p", "pid": src,
                   "tid": tid, "ts": _us(st), "dur": _us(en - st),
                   "args": {"stage": stage, "microbatch": mb, "to_rank": dst}})
    for r, what, stage, st, en in res.dp_events:
        ev.append({"ph": "X", "name": f"{stage} {what}", "cat": "data_parallel", "pid": r,
                   "tid": TRACKS["dp"], "ts": _us(st), "dur": _us(en - st),
                   "args": {"stage": stage}})
    meta = {"schedule": res.schedule.name, "pp": res.schedule.pp, "vpp": res.schedule.vpp,
            "num_microbatches": res.schedule.num_microbatches,
            "step_time_s": res.step_time_s, "bubble_fraction": res.bubble_fraction}
    if title:
        meta["title"] = title
    return {"traceEvents": ev, "displayTimeUnit": "ms", "otherData": meta}


def write_trace(res: SimResult, path: str | Path, title: str = "") -> Path:
    """Write the trace JSON to ``path`` atomically (temporary file renamed into place)."""
    p = Path(path)
    text = json.dumps(trace_events(res, title), separators=(",", ":"))
    atomic_write(p, text)
    return p


def check_output_file(field: str, path: str | Path, suffix: str = "") -> Path:
    """Refuse (InputError naming ``field``) a file that cannot be written: a directory, or in
    a directory that does not exist, or (``suffix``) not named as what is written there.
    Commands call it before their work, not after."""
    p = Path(path)
    if suffix and not str(path).lower().endswith(suffix):  # plan --png m.json wrote a PNG
        raise InputError(field, str(path), f"file name must end in {suffix}")  # there
    if p.is_dir():
        raise InputError(field, str(path), "is a directory; give the file to write")
    if not (p.parent if str(p.parent) else Path(".")).is_dir():
        raise InputError(field, str(path), "its directory does not exist")
    return p


def atomic_write(p: Path, data: str | bytes) -> None:
    parent = p.parent if str(p.parent) else Path(".")
    check_output_file("output", p)
    check_not_read("output", p)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=parent)
    except OSError as e:
        raise InputError("output", str(p), f"cannot write ({e.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a plain file is wanted
        os.replace(tmp, p)
    except BaseException as e:  # a full disk, Ctrl-C: the temporary file goes too
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise InputError("output", str(p), f"cannot write ({e.strerror})") from None
        raise
