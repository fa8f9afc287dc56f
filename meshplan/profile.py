"""Calibration profiles: named constants of ``meshplan/cost/efficiency.py`` measured on a
user's own GPUs (``meshplan calibrate``), used instead of the defaults by ``plan``,
``predict`` and ``validate --profile FILE``.

A profile is TOML::

    # meshplan calibration profile: measured 2026-11-23 on NVIDIA H100 80GB HBM3 x 8
    [meta]
    date = "2026-11-23"
    device = "NVIDIA H100 80GB HBM3"
    gpu = "H100-SXM-80GB"          # the catalog GPU it was measured on
    generation = "hopper"
    [constants]
    "EFFICIENCY.hopper.matmul_bf16" = 0.62   # module global . dict key . dataclass field
    "NETWORK.scaleup" = 0.78                 # module global . dataclass field
    "POWER_CLOCK_EXPONENT" = 0.75            # module global number

Names are resolved at run time against whatever efficiency.py defines, so constants that
are renamed or added there work without a change here; a name that resolves to nothing
is refused with one line (InputError). Frozen dataclasses are replaced, not mutated, and
every meshplan module that imported the replaced object by name is rebound; the cost
model's caches are cleared.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import tomllib
from pathlib import Path

from .errors import InputError
from .inputs import read_input

EFFICIENCY_MODULE = "meshplan.cost.efficiency"


def _module():
    import importlib

    return importlib.import_module(EFFICIENCY_MODULE)


def known_names() -> list[str]:
    """Every overridable name of the efficiency module (numbers only)."""
    mod = _module()
    out = []

    def walk(prefix: str, obj) -> None:
        if isinstance(obj, bool):
            return
        if isinstance(obj, (int, float)):
            out.append(prefix)
        elif isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(k, str):
                    walk(f"{prefix}.{k}", v)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                walk(f"{prefix}.{f.name}", getattr(obj, f.name))

    for name, obj in vars(mod).items():
        if name.isupper() or (dataclasses.is_dataclass(obj) and not isinstance(obj, type)):
            walk(name, obj)
    return out


def _set_path(obj, keys: list[str], value: float, full: str):
    """A copy of ``obj`` with the number at ``keys`` replaced (dicts copied, dataclasses
    replaced); raises InputError when the path names nothing numeric."""
    if not keys:
        if isinstance(obj, bool) or not isinstance(obj, (int, float)):
            raise InputError("profile constant", full, "is not a number in efficiency.py")
        return type(obj)(value) if isinstance(obj, float) else value
    k, rest = keys[0], keys[1:]
    if isinstance(obj, dict):
        if k not in obj:
            raise _unknown(full)
        new = dict(obj)
        new[k] = _set_path(obj[k], rest, value, full)
        return new
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if k not in {f.name for f in dataclasses.fields(obj)}:
            raise _unknown(full)
        return dataclasses.replace(obj, **{k: _set_path(getattr(obj, k), rest, value, full)})
    raise _unknown(full)


def _unknown(name: str) -> InputError:
    names = known_names()
    return InputError("profile constant", name, f"not a constant of {EFFICIENCY_MODULE} "
                      f"({len(names)} known, e.g. {', '.join(names[:4])})")


def apply(constants: dict[str, float]):
    """Override the named constants; returns a function that restores the previous ones."""
    mod = _module()
    saved: dict[str, object] = {}
    staged: dict[str, object] = {}
    for full, value in constants.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise InputError(f"profile constant {full}", value, "must be a finite number >= 0")
        keys = full.split(".")
        top = keys[0]
        if not hasattr(mod, top):
            raise _unknown(full)
        cur = staged.get(top, getattr(mod, top))
        staged[top] = _set_path(cur, keys[1:], float(value), full)  # the name first
        bounds = mod.profile_range(full)
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise InputError(f"profile constant {full}", value,
                             f"must be in [{bounds[0]:g}, {bounds[1]:g}] "
                             "(cost/efficiency.py PROFILE_RANGES)")
    for top, new in staged.items():
        saved[top] = getattr(mod, top)
        _rebind(top, saved[top], new)

    def restore() -> None:
        for top, old in saved.items():
            _rebind(top, getattr(mod, top), old)

    return restore


def _rebind(name: str, old, new) -> None:
    for mname, m in list(sys.modules.items()):
        if not mname.startswith("meshplan") or m is None:
            continue
        if getattr(m, name, None) is old:
            setattr(m, name, new)
    _clear_caches()


def _clear_caches() -> None:
    """Forget every cached result that may have read a constant; a function marked
    ``reads_no_constant`` (pure arithmetic, e.g. stragglers.expected_max_normal) keeps its
    cache: calibrate --from-runs applies and restores a profile a few hundred times."""
    for mname, m in list(sys.modules.items()):
        if not mname.startswith("meshplan.") or m is None:
            continue
        for obj in list(vars(m).values()):
            clear = getattr(obj, "cache_clear", None)
            if (callable(clear) and getattr(obj, "__module__", None) == mname
                    and not getattr(obj, "reads_no_constant", False)):
                clear()


def load(path: str | Path) -> dict:
    """The profile's [meta] and [constants] (InputError on a bad file)."""
    p = Path(path)
    try:
        data = tomllib.loads(read_input(p, "--profile").decode("utf-8").removeprefix("\ufeff"))
    except OSError as e:
        raise InputError("--profile", str(path), f"cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise InputError("--profile", str(path), "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError("--profile", str(path), f"not valid TOML ({e})") from None
    consts = data.get("constants")
    if not isinstance(consts, dict) or not consts:
        raise InputError("--profile", str(path), "needs a non-empty [constants] table")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):  # `meta = 5`: an AttributeError traceback where it is read
        raise InputError("--profile", str(path), "[meta] must be a table (date, device, gpu, "
                         "generation, ...)")
    other = [k for k in data if k not in ("meta", "constants")]
    if other:  # a misspelt [constant] table was ignored without a word
        raise InputError("--profile", str(path), f"unknown table or key {other[0]!r}; a "
                         "profile has [meta] and [constants]")
    return {"meta": meta, "constants": consts}


# the profile files applied in this process, latest last (what an exported plan.toml names)
_ACTIVE: list[str] = []


def use(path: str | Path):
    """Load a profile and apply it; returns (the profile: its meta and constants, restore)."""
    prof = load(path)
    restore = apply(prof["constants"])
    _ACTIVE.append(str(Path(path).resolve()))

    def undo() -> None:
        restore()
        _ACTIVE.pop()

    return prof, undo


def applies_to(name: str, gpu) -> bool:
    """Whether the constant ``name`` changes a prediction on ``gpu`` (a catalog GPU): not when
    it sits in a table keyed by another GPU generation (``EFFICIENCY.ampere.matmul_bf16`` on
    a Hopper part) or by another GPU (``SKU_MATMUL.B200.bf16`` on an H100)."""
    mod = _module()
    parts = name.split(".")
    if len(parts) < 2:
        return True
    table = getattr(mod, parts[0], None)
    if not isinstance(table, dict) or parts[1] not in table:
        return True
    gens = set(mod.EFFICIENCY) | set(mod.TENSOR_FLOPS_PER_SM_CLOCK)
    if parts[1] in gens:
        return parts[1] == gpu.generation
    from .specs.catalog.gpus import GPUS
    if parts[1] in GPUS:
        return parts[1] == gpu.name
    return True


def active() -> str | None:
    """The profile file the cost model runs with now (absolute path), or None."""
    return _ACTIVE[-1] if _ACTIVE else None


def to_toml(meta: dict, constants: dict[str, float], comments: dict[str, str] | None = None) -> str:
    comments = comments or {}
    head = (f"# meshplan calibration profile: measured {meta.get('date', '?')} on "
            f"{meta.get('device', '?')}")
    out = [head, "[meta]"]
    for k, v in meta.items():
        out.append(f"{k} = {v!r}" if isinstance(v, (int, float)) and not isinstance(v, bool)
                   else f"{k} = {_q(str(v))}")
    out += ["", "[constants]"]
    for k, v in constants.items():
        c = comments.get(k)
        # the shortest text that reads back as the same float (a 6-digit rounding changed
        # constants a profile keeps at their default, e.g. 0.5112436897659476 -> 0.511244)
        out.append(f'"{k}" = {float(v)!r}' + (f"  # {c}" if c else ""))
    return "\n".join(out) + "\n"


def _q(s: str) -> str:
    from .export.meshplan_plan import toml_string  # control characters escaped too
    return toml_string(s)
