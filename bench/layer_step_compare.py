"""The cost model's dense layer against a layer stack measured by bench/gpu_layer_step.py:
per layer, the model's GEMM, attention and streaming (with kernel gaps) time next to the
device time of the measured step's kernels of each class (torch.profiler, after the held run),
and the model's layers against the CUDA-graph step held at the power cap.

    PYTHONPATH=$PWD python bench/layer_step_compare.py bench/data/measured/h200_2026-11-28/layer_*
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dense_breakdown import layer_parts  # noqa: E402

from meshplan.cost.engine_projections import FUSED  # noqa: E402
from meshplan.plan import Plan  # noqa: E402
from meshplan.validate import prepare  # noqa: E402

GPU = {"NVIDIA H200": "H200-SXM-141GB", "NVIDIA H100 80GB HBM3": "H100-SXM-80GB"}
KERNEL = {"cudnn": "te", "flash": "fa2"}  # SDPA backend -> meshplan's attention kernel class


def measured(run_dir: Path) -> dict:
    """The measured run: its layer_step.json, and per layer the hot profile's device seconds
    by kernel class."""
    meta = json.loads((run_dir / "layer_step.json").read_text())
    layers = meta["shape"]["layers"]
    per_layer = {c: 0.0 for c in ("gemm", "attention", "other")}
    with (run_dir / "layer_kernels.csv").open() as fh:
        for r in csv.DictReader(fh):
            if r["phase"] == "hot":
                per_layer[r["class"]] += float(r["device_us"]) / 1e6 / layers
    return {"meta": meta, "per_layer_s": per_layer,
            "step_held_s": meta["results"].get("graph_held_s")}


def model(meta: dict) -> dict:
    """The cost model's seconds per layer (forward + backward) for the measured shape: one
    GPU, bf16, the measured SDPA backend's kernel class; the engine is torchtitan for a
    compiled stack (its compiled runs) and meshplan's own runtime ("") for an eager one, but
    with the measured stack's projections: gpu_layer_step.py's Layer runs q/k/v as one
    nn.Linear(hidden, 3 hidden) and gate/up as one nn.Linear(hidden, 2 ffn), fused, where
    both engines' own code runs one GEMM each (cost/engine_projections.py)."""
    sh = meta["shape"]
    row = {"id": "layer-stack", "model": "layer stack", "arch": "dense",
           "layers": str(sh["layers"]), "hidden": str(sh["hidden"]), "heads": str(sh["heads"]),
           "kv_heads": str(sh["heads"]), "ffn": str(sh["ffn"]), "vocab": "32000",
           "attention": "mha", "mlp": "swiglu", "tied_embeddings": "0",
           "seq_len": str(sh["seq"]), "global_batch_seqs": str(sh["micro_batch"]),
           "micro_batch": str(sh["micro_batch"]), "gpu": GPU[meta["device"]], "num_gpus": "1",
           "precision": "bf16", "framework": "torchtitan" if sh.get("compile") else "",
           "attention_kernel": KERNEL[str(sh["backend"]).split()[0]],
           "measured_tokens_per_s_per_gpu": "1"}
    prep = prepare(row)
    plan = Plan(dp=1, tp=1, pp=1, micro_batch=sh["micro_batch"], recompute="none")
    p = layer_parts(prep, plan, projections=FUSED)
    return {"gemm": p["gemm_fwd_s"] + p["gemm_bwd_s"],
            "attention": p["attention_fwd_s"] + p["attention_bwd_s"],
            "other": p["stream_fwd_s"] + p["stream_bwd_s"] + p["kernel_gaps_fwd_s"]
            + p["kernel_gaps_bwd_s"], "layers": sh["layers"]}


def compare(run_dir: Path) -> dict:
    m = measured(run_dir)
    p = model(m["meta"])
    step_model = p["layers"] * (p["gemm"] + p["attention"] + p["other"])
    return {"run": run_dir.name, "device": m["meta"]["device"],
            "measured_per_layer_s": m["per_layer_s"],
            "model_per_layer_s": {c: p[c] for c in ("gemm", "attention", "other")},
            "step_held_s": m["step_held_s"], "model_layers_s": step_model}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args(argv)
    print("| device | run | GEMM ms meas / model | attention | other (element-wise, gaps) |"
          " step ms held / model | model error |")
    print("|---|---|---|---|---|---|---|")
    for d in a.runs:
        c = compare(Path(d))
        me, mo = c["measured_per_layer_s"], c["model_per_layer_s"]
        cells = " | ".join(f"{me[k] * 1e3:.2f} / {mo[k] * 1e3:.2f}"
                           for k in ("gemm", "attention", "other"))
        held, pred = c["step_held_s"], c["model_layers_s"]
        print(f"| {c['device']} | {c['run']} | {cells} | {held * 1e3:.1f} / {pred * 1e3:.1f} |"
              f" {pred / held - 1:+.1%} |")


if __name__ == "__main__":
    main()
