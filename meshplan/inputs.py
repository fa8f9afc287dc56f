"""The files the running command has read, so that no output is written over one of them.

Every reader of a user's file (config.json, scenario, GPU file, profile, runs or trace CSV)
notes the file here; the writers (``export.trace.atomic_write`` for single files,
``export.check_out_dir`` for export folders) refuse a path the command read:
``simulate --model m.json --trace m.json`` overwrote the model's config with a trace,
``calibrate --from-runs runs.csv --out runs.csv`` the runs with a profile, and ``export
--scenario out/plan.toml --out out`` deleted the plan file it was exporting. The CLI forgets
the list at the start of each command (``cli.main`` runs several in one process in tests).
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError

_READ: set[str] = set()


def _real(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def note_read(path: str | Path) -> None:
    """Record that this command reads ``path``."""
    try:
        _READ.add(_real(path))
    except (OSError, ValueError, TypeError):  # a path that cannot be resolved: nothing to note
        pass


def forget_all() -> None:
    _READ.clear()


def check_not_read(field: str, path: str | Path, folder: bool = False) -> None:
    """InputError when ``path`` (or, with ``folder``, a file inside it) is one this command
    reads."""
    real = _real(path)
    hit = [r for r in _READ if r == real or (folder and r.startswith(real.rstrip(os.sep) + os.sep))]
    if hit:
        what = "is" if hit[0] == real else f"holds {os.path.relpath(hit[0], real)},"
        raise InputError(field, str(path), f"{what} a file this command reads; give another "
                         "path (meshplan never writes over its own input)")


# The most meshplan reads of one input file. The largest real inputs are runs CSVs of a few
# MiB; without a bound, --model /dev/zero (or a multi-GB file given by mistake) was read
# until memory ran out (a MemoryError traceback, or the machine swapping first).
MAX_INPUT_BYTES = 64 * 2**20


def read_input(path: str | Path, field: str) -> bytes:
    """The bytes of an input file, noted as read; InputError naming ``field`` when it holds
    more than MAX_INPUT_BYTES. OSError (missing, a directory, ...) is the caller's to word."""
    note_read(path)
    with open(path, "rb") as f:
        data = f.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(field, str(path), f"holds more than {MAX_INPUT_BYTES >> 20} MiB; "
                         "meshplan's inputs (configs, scenarios, GPU files, profiles, CSVs) "
                         "are far smaller: the wrong file?")
    return data
