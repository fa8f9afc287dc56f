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
    on stderr and returns its [meta]."""
    meta, restore = profile.use(path)
    _RESTORE.append(restore)
    print(f"note: using calibration profile {path}{origin} ({meta.get('device', '?')}, "
          f"{meta.get('date', '?')})", file=sys.stderr)
    return meta


def apply_profile_arg(args, generation: str | None = None) -> dict | None:
    """Apply ``args.profile`` for the rest of the process; returns its [meta]."""
    path = getattr(args, "profile", None)
    return _use(path) if path else None


def apply_scenario_profile(args, path: str, generation: str | None = None) -> None:
    """Apply the profile a scenario file names (``profile = ...``, what `--export meshplan`
    writes beside plan.toml when a profile made the plan), unless --profile named one."""
    if not path or getattr(args, "profile", None):
        return
    try:
        meta = _use(path, " named by the scenario file")
    except InputError as e:  # name the scenario's key, not a --profile the user never gave
        raise InputError("profile (scenario file)", e.value, e.allowed) from None
    if generation:
        check_generation(meta, generation)


def check_generation(meta: dict | None, generation: str) -> None:
    """Say so when the profile was measured on another GPU generation than the scenario's:
    its per-generation constants then do not apply, only the generation-free ones."""
    if meta and meta.get("generation") and meta["generation"] != generation:
        print(f"note: the profile was measured on {meta.get('gpu', meta['generation'])} "
              f"({meta['generation']}); this cluster's GPUs are {generation}: only its "
              "generation-independent constants apply", file=sys.stderr)


def reset() -> None:
    """Undo every profile applied by a command in this process (tests call it)."""
    while _RESTORE:
        _RESTORE.pop()()
