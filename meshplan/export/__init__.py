"""Export a plan to the engines people train with.

    render(scenario, engine) -> Rendered    # everything computed in memory, nothing written
    export(scenario, engine, out_dir) -> list[Path]

``scenario`` must carry a plan (``Scenario.plan``). Engines: megatron (Megatron-LM
``pretrain_gpt.py`` launch script), torchtitan (a torchtitan 0.3 config_registry module and
its launch script), deepspeed (ds_config.json and launch script), meshplan (the scenario TOML
with a [plan] table that ``meshplan run`` reads).

A plan that uses something an engine cannot express raises :class:`UnsupportedByEngine`
(an InputError) naming the feature, the value and the engine, instead of writing a config
that would silently run something else. Files are written only after every file of the
export has been rendered, each through a temporary file renamed into place, so a failed
export leaves no half-written output.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, require_choice
from ..scenario import Scenario

ENGINES = ("megatron", "torchtitan", "deepspeed", "meshplan")


class UnsupportedByEngine(InputError):
    """A plan feature that ``engine`` cannot express; says which and what would work."""

    def __init__(self, engine: str, feature: str, value: object, reason: str):
        self.engine = engine
        self.feature = feature
        where = {"model": "model", "precision": "workload.precision"}.get(feature, f"plan.{feature}")
        super().__init__(where, value, f"{engine} cannot express this: {reason}")


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
    if engine == "megatron":
        from .megatron import render_megatron as fn
    elif engine == "torchtitan":
        from .torchtitan import render_torchtitan as fn
    elif engine == "deepspeed":
        from .deepspeed import render_deepspeed as fn
    else:
        from .meshplan_plan import render_meshplan as fn
    return fn(sc)


def write(rendered: Rendered, out_dir: str | Path) -> list[Path]:
    """Write rendered files into ``out_dir`` (created if needed); returns their paths."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError("out", str(out_dir), f"cannot create the directory ({e.strerror})") from None
    staged: list[tuple[str, Path]] = []
    try:
        for name, text in rendered.files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.chmod(tmp, 0o755 if name in rendered.executable else 0o644)
            staged.append((tmp, out / name))
    except OSError as e:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise InputError("out", str(out_dir), f"cannot write there ({e.strerror})") from None
    for tmp, final in staged:
        os.replace(tmp, final)
    return [final for _, final in staged]


def export(sc: Scenario, engine: str, out_dir: str | Path) -> list[Path]:
    """Render the plan of ``sc`` for ``engine`` and write the files into ``out_dir``."""
    return write(render(sc, engine), out_dir)
