"""Export a plan to the engines people train with.

    render(scenario, engine) -> Rendered    # everything computed in memory, nothing written
    export(scenario, engine, out_dir) -> list[Path]

``scenario`` must carry a plan (``Scenario.plan``). Engines: megatron (Megatron-LM
``pretrain_gpt.py`` launch script), torchtitan (a torchtitan 0.3 config_registry module and
its launch script), deepspeed (ds_config.json and launch script), meshplan (the scenario TOML
with a [plan] table that ``meshplan run`` reads).

A plan that uses something an engine cannot express raises :class:`UnsupportedByEngine`
(an InputError) naming the feature, the value and the engine, instead of writing a config
that would silently run something else. What each engine can express lives in
meshplan/engines.py, which the search reads too. Files are written only after every file of the
export has been rendered, each through a temporary file renamed into place, so a failed
export leaves no half-written output.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..engines import LIMITED_ENGINES, UnsupportedByEngine, check
from ..errors import InputError, require_choice
from ..inputs import check_not_read
from ..scenario import Scenario

ENGINES = ("megatron", "torchtitan", "deepspeed", "meshplan")



@dataclass
class Rendered:
    """The files of one export (name -> text, executable names) and notes for the user."""

    engine: str
    files: dict[str, str]
    executable: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def render(sc: Scenario, engine: str) -> Rendered:
    """Compute every file of the export for ``engine``; writes nothing."""
    engine = require_choice("engine", engine, ENGINES)
    if sc.plan is None:
        raise InputError("plan", None, "the scenario has no plan to export; give a [plan] "
                         "table or plan flags (--dp/--tp/--pp/...)")
    sc.plan.validate(sc.model, sc.workload, sc.cluster.num_gpus)
    if engine in LIMITED_ENGINES:
        check(engine, sc)  # the limits the search reads too (meshplan/engines.py)
    if engine == "megatron":
        from .megatron import render_megatron as fn
    elif engine == "torchtitan":
        from .torchtitan import render_torchtitan as fn
    elif engine == "deepspeed":
        from .deepspeed import render_deepspeed as fn
    else:
        from .meshplan_plan import render_meshplan as fn
    return fn(sc)


def _found(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def check_out_dir(out_dir: str | Path, names: set[str] | None = None) -> Path:
    """The --out directory if an export may go there, else InputError.

    Allowed: a path that does not exist yet (its nearest existing parent a writable
    directory), an empty directory, or a directory holding only files an export writes
    (``names``; a previous export being replaced whole)."""
    if not str(out_dir).strip():  # Path("") is the current folder: a slip, not a choice
        raise InputError("--out", str(out_dir), "must name a directory (give . for this one)")
    out = Path(out_dir)
    allowed = ("allowed: a new or empty directory, or one holding only a previous export "
               "(meshplan never overwrites part of a folder)")
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise InputError("--out", str(out_dir), "is a file; " + allowed)
        try:
            held = sorted(x.name for x in out.iterdir())
        except OSError as e:
            raise InputError("--out", str(out_dir), f"cannot list it ({e.strerror})") from None
        known = names if names is not None else set(ALL_EXPORT_FILES)
        # a folder named like an export file (plan.toml/) is not one: replacing the export
        # deleted it and everything in it
        foreign = [n for n in held if n not in known
                   or ((out / n).is_dir() and not (out / n).is_symlink())]
        if foreign:
            raise InputError("--out", str(out_dir), f"holds other files ({_found(foreign)}); "
                             + allowed)
        if not os.access(out, os.W_OK):
            raise InputError("--out", str(out_dir), "is not writable")
        check_not_read("--out", out, folder=True)  # a previous export being read now
        return out
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("--out", str(out_dir), f"cannot be created ({parent} is not a writable "
                         "directory)")
    return out


def write(rendered: Rendered, out_dir: str | Path, known: set[str] | None = None) -> list[Path]:
    """Write rendered files into ``out_dir``; returns their paths.

    Every file is written into a temporary directory beside ``out_dir`` first, which then
    takes its place in one rename: a failure leaves either the old folder or the new one,
    never a mix. An existing ``out_dir`` must be empty or hold only a previous export (of
    the files ``known``: by default every training export's)."""
    known = set(ALL_EXPORT_FILES) if known is None else known
    out = check_out_dir(out_dir, known | set(rendered.files)).resolve()
    try:
        out.absolute().parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.absolute().parent))
    except OSError as e:
        raise InputError("--out", str(out_dir), f"cannot create the directory ({e.strerror})") from None
    try:
        for name, text in rendered.files.items():
            (tmp / name).write_text(text, encoding="utf-8")
            os.chmod(tmp / name, 0o755 if name in rendered.executable else 0o644)
        os.chmod(tmp, 0o755)
        if out.is_dir() and Path.cwd().resolve().is_relative_to(out):
            # the shell stands in it: renaming the folder would leave the shell in the old one,
            # so move the staged files in (same filesystem: renames) and drop the old export's
            for name in rendered.files:
                os.replace(tmp / name, out / name)
            for stale in set(p.name for p in out.iterdir()) - set(rendered.files):
                (out / stale).unlink()
            tmp.rmdir()
        elif out.is_dir():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.absolute().parent))
            os.replace(out, old)  # onto the empty temporary folder
            try:
                os.replace(tmp, out)
            except OSError:
                os.replace(old, out)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException as e:  # Ctrl-C or text that cannot be encoded too: no staging
        shutil.rmtree(tmp, ignore_errors=True)  # folder is left beside --out
        if isinstance(e, OSError):
            raise InputError("--out", str(out_dir), f"cannot write there ({e.strerror})") from None
        raise
    return [out / name for name in rendered.files]


# Every file name an export writes (a folder holding only these is a previous export).
ALL_EXPORT_FILES = ("megatron_launch.sh", "torchtitan_job.py", "torchtitan_launch.sh",
                    "ds_config.json", "deepspeed_launch.sh", "plan.toml", "gpus.toml",
                    "profile.toml")  # (the meshplan export's copy of --profile)


def export(sc: Scenario, engine: str, out_dir: str | Path) -> list[Path]:
    """Render the plan of ``sc`` for ``engine`` and write the files into ``out_dir``."""
    return write(render(sc, engine), out_dir)
