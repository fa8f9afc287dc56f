"""meshplan's own plan file: the scenario TOML of meshplan/scenario.py with a [plan] table.

This is what ``meshplan run`` reads; ``load_scenario`` on the written file gives back the
same model, cluster, workload and plan. A preset model is written by name, any other
model inline with every ModelSpec field; a GPU that is not in the catalog goes into a
``gpus.toml`` next to it (``cluster.gpu_file``).
"""

from __future__ import annotations

import json
import math
from dataclasses import fields

from ..errors import InputError
from ..plan import ALIASES
from ..scenario import Scenario
from ..specs.catalog.gpus import GPUS
from ..specs.catalog.presets import preset, preset_names
from ..specs.model import ModelSpec
from . import Rendered
from ._common import header

# Plan field -> the long name written in the file (the first alias naming it).
LONG_NAMES: dict[str, str] = {}
for _long, _short in ALIASES.items():
    LONG_NAMES.setdefault(_short, _long)


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quote, backslash and control characters escaped,
    every other character as it is (the file is UTF-8). JSON's escapes were used before, and
    JSON writes a character past U+FFFF (an emoji in a model's folder name) as two surrogate
    escapes, which TOML refuses: the plan.toml written could not be read back."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise InputError("value", v, "only finite numbers can be written")
        return repr(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise InputError("value", v, "cannot be written to TOML")


def toml_table(name: str, d: dict) -> str:
    return f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in d.items() if v is not None)


def _model_table(m: ModelSpec) -> dict:
    if m.name in preset_names() and preset(m.name) == m:
        return {"preset": m.name}
    return {f.name: getattr(m, f.name) for f in fields(ModelSpec)}


def _gpu_table(g) -> dict:
    return {"peak_tflops": {k: v / 1e12 for k, v in g.peak_flops.items()},
            "memory_gib": g.memory_bytes / 2**30, "memory_tb_per_s": g.memory_bytes_per_s / 1e12,
            "scaleup_gb_per_s": g.scaleup_bytes_per_s / 1e9, "gpus_per_node": g.gpus_per_node,
            "scaleup_domain": g.scaleup_domain, "nic_gbps": g.nic_bytes_per_s * 8 / 1e9,
            "scaleup_latency_s": g.scaleup_latency_s, "scaleout_latency_s": g.scaleout_latency_s,
            "generation": g.generation, "power_limit_w": g.power_limit_w,
            "compute_capability": g.compute_capability, "source": g.source}


def scenario_toml(sc: Scenario) -> dict[str, str]:
    """File name -> text: plan.toml (and gpus.toml for a GPU outside the catalog)."""
    c, w, p = sc.cluster, sc.workload, sc.plan
    files: dict[str, str] = {}
    cluster = {"gpus": f"{c.num_gpus}x{c.gpu.name}", "gpus_per_node": c.gpus_per_node,
               "nic_gbps_per_gpu": c.nic_bytes_per_s * 8 / 1e9, "scaleup_domain": c.scaleup_domain}
    if GPUS.get(c.gpu.name) != c.gpu:
        files["gpus.toml"] = toml_table(f"gpu.{toml_string(c.gpu.name)}", _gpu_table(c.gpu))
        cluster["gpu_file"] = "gpus.toml"
    workload = {"seq_len": w.seq_len, "global_batch": w.global_batch, "precision": w.precision,
                "optimizer": w.optimizer, "optimizer_state_precision": w.optimizer_state_precision,
                "grad_reduce_dtype": w.grad_reduce_dtype}
    # what else the predictions depend on (the engine's kernels and defaults), where set
    for k in ("framework", "fp8_recipe", "attention_kernel", "norm_kernel", "compiled_loss",
              "fp8_param_gather", "cuda_graph"):
        if getattr(w, k):
            workload[k] = getattr(w, k)
    plan = {LONG_NAMES.get(k, k): v for k, v in p.to_dict().items()}
    # MoE engine knobs the plan left to the engine (not named by the command nor by the
    # plan's label) stay blank in the file, commented out at the value `run` takes, so that
    # `predict --scenario plan.toml` widens the interval over the engine's other settings as
    # `predict --plan LABEL` did (engine_spread.blank_knobs_of)
    from ..engine_spread import blank_knobs_of
    blank = {LONG_NAMES.get(k, k) for k in blank_knobs_of(p, sc.model, sc.plan_stated, w.framework)}
    from ..profile import active
    prof = active()  # a profile in use made the predictions: a copy travels with the plan
    top = []
    if prof:
        from pathlib import Path
        files["profile.toml"] = Path(prof).read_text(encoding="utf-8")
        top = ['profile = "profile.toml"  # the calibration profile the plan was made with '
               f'(a copy of {json.dumps(prof)[1:-1]})', ""]
    text = "\n".join(["\n".join(header(sc, "plan.toml: the plan `meshplan run` reads")), "",
                      *top,
                      toml_table("model", _model_table(sc.model)), toml_table("cluster", cluster),
                      toml_table("workload", workload),
                      toml_table("plan", {k: v for k, v in plan.items() if k not in blank}),
                      *(f"# {k} = {toml_value(plan[k])}  # not stated: the engine's choice"
                        for k in plan if k in blank)])
    files["plan.toml"] = text
    return files


def render_meshplan(sc: Scenario) -> Rendered:
    return Rendered("meshplan", scenario_toml(sc))
