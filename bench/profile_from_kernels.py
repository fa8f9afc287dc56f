"""A ``--profile`` TOML from bench/gpu_kernels.py's measurements, through the same fit and
writer as ``meshplan calibrate`` (meshplan/calibrate/fit.py, commands/calibrate.write_profile).

    python bench/profile_from_kernels.py bench/data/measured/h200_2026-11-27 \\
        --gpu H200-SXM-141GB --out bench/data/measured/h200_2026-11-27/profile.toml

Takes from DIR: the bf16 GEMMs of gemm.csv (the square sweep's 1024-8192 and the transformer
shapes ``meshplan calibrate`` times, there under CUDA graphs), the causal head-dim-128
attention of one SDPA backend at one sequence length from attention.csv (default: cuDNN, the
backend torch's SDPA picks on Hopper, at 8,192 keys, the model's reference length), and the
largest device copy of stream.csv. The profile's header names the device, date and torch of
kernels_meta.json and this command.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from meshplan.commands.calibrate import write_profile  # noqa: E402
from meshplan.specs.catalog.gpus import GPUS  # noqa: E402


def measured_from(folder: Path, backend: str, seq: int) -> dict:
    gemm = [{"m": int(r["m"]), "n": int(r["n"]), "k": int(r["k"]),
             "flops_per_s": float(r["tflops"]) * 1e12}
            for r in csv.DictReader((folder / "gemm.csv").open())
            if r["dtype"] == "bf16" and r["groups"] == "1"]
    att = [r for r in csv.DictReader((folder / "attention.csv").open())
           if r["backend"] == backend and int(r["seq"]) == seq and r["head_dim"] == "128"
           and r["causal"] == "1" and not r.get("error")]
    copies = [r for r in csv.DictReader((folder / "stream.csv").open()) if r["kernel"] == "copy"]
    out = {"gemm": gemm}
    if att:
        a = att[0]
        out["attention"] = {"batch": int(a["batch"]), "heads": int(a["heads"]), "seq": seq,
                            "head_dim": 128, "fwd_flops_per_s": float(a["fwd_tflops"]) * 1e12,
                            "bwd_flops_per_s": float(a["bwd_tflops"]) * 1e12}
    if copies:
        c = max(copies, key=lambda r: int(r["bytes"]))
        out["copy"] = {"bytes": int(c["bytes"]), "bytes_per_s": float(c["gb_per_s"]) * 1e9}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--gpu", required=True, help="catalog GPU the device is")
    ap.add_argument("--out", required=True)
    ap.add_argument("--attention-backend", default="cudnn")
    ap.add_argument("--attention-seq", type=int, default=8192)
    args = ap.parse_args()
    folder = Path(args.folder)
    meta_in = json.loads((folder / "kernels_meta.json").read_text())
    gpu = GPUS[args.gpu]
    meta = {"date": meta_in["date"], "device": meta_in["device"], "gpu": gpu.name,
            "generation": gpu.generation, "torch": meta_in["torch"],
            "command": "python bench/profile_from_kernels.py " + " ".join(sys.argv[1:])}
    write_profile(measured_from(folder, args.attention_backend, args.attention_seq), gpu, meta,
                  Path(args.out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
