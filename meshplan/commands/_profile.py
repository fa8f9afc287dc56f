"""``--profile FILE``: use a calibration profile (``meshplan calibrate``) instead of the
datasheet-derived defaults of meshplan/cost/efficiency.py."""

from __future__ import annotations

import sys

from .. import profile
from ..errors import InputError

_RESTORE: list = []  # undo functions of the profiles applied in this process


def add_profile_arg(p) -> None:
    p.add_argument("--profile", help="calibration profile TOML written by `meshplan calibrate`")


def _use(path: str, origin: str = "") -> dict:
    """Apply the profile at ``path`` for the rest of the process (undone by reset); says so
    on stderr and returns it ({"meta": ..., "constants": ...})."""
    prof, restore = profile.use(path)
    meta = prof["meta"]
    _RESTORE.append(restore)
    print(f"note: using calibration profile {path}{origin} ({meta.get('device', '?')}, "
          f"{meta.get('date', '?')})", file=sys.stderr)
    return prof


def apply_profile_arg(args, generation: str | None = None) -> dict | None:
    """Apply ``args.profile`` for the rest of the process; returns the profile (meta and
    constants) for check_generation."""
    path = getattr(args, "profile", None)
    return _use(path) if path else None


def apply_scenario_profile(args, path: str, gpu=None) -> None:
    """Apply the profile a scenario file names (``profile = ...``, what `--export meshplan`
    writes beside plan.toml when a profile made the plan), unless --profile named one."""
    if not path or getattr(args, "profile", None):
        return
    try:
        prof = _use(path, " named by the scenario file")
    except InputError as e:  # name the scenario's key, not a --profile the user never gave
        raise InputError("profile (scenario file)", e.value, e.allowed) from None
    if gpu is not None:
        check_generation(prof, gpu)


def check_generation(prof: dict | None, gpu) -> None:
    """Say so when the profile was measured on another GPU generation than the cluster's
    ``gpu``, and which of its constants apply here (profile.applies_to): those of this
    generation or GPU and the generation-free ones; not those of other generations."""
    meta = (prof or {}).get("meta") or {}
    gen = meta.get("generation")
    if not gen or gen == gpu.generation:
        return
    names = list(prof["constants"])
    used = [n for n in names if profile.applies_to(n, gpu)]
    unused = [n for n in names if n not in used]
    where = f"{meta['gpu']} ({gen})" if meta.get("gpu") else gen
    said = [f"these apply: {', '.join(used)}" if used else "none of its constants apply"]
    if unused:
        said.append(f"these do not: {', '.join(unused)}")
    print(f"note: the profile was measured on {where}; this cluster's GPUs are "
          f"{gpu.name} ({gpu.generation}): " + "; ".join(said), file=sys.stderr)


def reset() -> None:
    """Undo every profile applied by a command in this process (tests call it)."""
    while _RESTORE:
        _RESTORE.pop()()
