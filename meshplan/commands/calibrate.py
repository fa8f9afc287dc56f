"""``meshplan calibrate``: fit the cost model's constants on the user's own GPUs or runs.

    meshplan calibrate --out my_cluster.toml                 # microbenchmarks on this GPU
    torchrun --nproc-per-node 8 -m meshplan.cli calibrate --out my_cluster.toml  # + NCCL
    meshplan calibrate --from-runs my_runs.csv --out my_cluster.toml

Then ``meshplan plan|predict|validate --profile my_cluster.toml``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

from .. import profile
from ..errors import InputError
from ..scenario import gpu_catalog
from ..specs.hardware import lookup_gpu

MiB = 2**20


def _torch_or_exit():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise InputError("calibrate", "torch", "needs meshplan[run] (pip install "
                         "'meshplan[run]'): the microbenchmarks run on PyTorch") from None
    return torch


def _gpu(args, torch) -> object:
    cat = gpu_catalog(args.gpu_file)
    if args.gpu:
        return lookup_gpu(args.gpu, cat)
    if args.device.startswith("cuda"):
        from ..specs.catalog.gpus import gpu_for_device

        props = torch.cuda.get_device_properties(0)
        gid = gpu_for_device(props.name, props.total_memory)
        if gid is None:
            raise InputError("--gpu", props.name, "not in the GPU catalog: name the catalog "
                             "GPU to compare with (--gpu, --gpu-file)")
        return lookup_gpu(gid, cat)
    raise InputError("--gpu", None, "required with --device cpu (the GPU the stand-in "
                     "stands for)")


def no_gpu() -> InputError:
    """No GPU to measure: what the user can do about it (calibrate has no --device option
    to name; the hidden one is a test stand-in)."""
    return InputError("local GPU", "none", "calibrate measures this machine's GPUs and torch "
                      "sees none (torch.cuda.is_available() is false; check CUDA_VISIBLE_DEVICES "
                      "and the driver): run it where a GPU is visible, or refit on your "
                      "measured runs with --from-runs CSV")


def _measure(args, torch) -> tuple[dict, str]:
    from ..calibrate import fit, micro

    dev = args.device
    if dev.startswith("cuda"):
        if not torch.cuda.is_available():
            raise no_gpu()
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dev = f"cuda:{local}"
        name = torch.cuda.get_device_name(local)
    else:
        name = "CPU stand-in"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dist = None
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl" if dev.startswith("cuda") else "gloo")
        name += f" x {world}"
    small = args.device == "cpu"  # the stand-in: tiny shapes, a few seconds on a laptop
    shapes = ([(d, d, d) for d in (64, 128, 256)] if small else fit.default_shapes(args.quick))
    m = {}
    if small:
        # the sweep's reference size is fit.BIG; the stand-in scales the shapes down to 256
        m["gemm"] = [dict(r, m=r["m"] * 32, n=r["n"] * 32, k=r["k"] * 32)
                     for r in micro.gemm_sweep(dev, "float32", shapes, 1, 3)]
        m["attention"] = micro.attention(dev, "float32", 1, 2, 128, 32, 1, 2)
        m["copy"] = micro.copy_bandwidth(dev, 8 * MiB, 1, 3)
    else:
        m["gemm"] = micro.gemm_sweep(dev, "bfloat16", shapes)
        m["attention"] = micro.attention(dev, "bfloat16", 2, 32, 4096 if not args.quick else 2048,
                                         128)
        m["copy"] = micro.copy_bandwidth(dev, 1024 * MiB)
    if dist is not None:
        sizes = [1 * MiB] if small else [4 * MiB, 64 * MiB, 256 * MiB]
        groups = sorted({g for g in (2, 4, 8, world) if g <= world})
        m["collectives"] = micro.collectives(dev, sizes, groups, 1 if small else 3,
                                             2 if small else 10)
        m["gpus_per_node"] = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        if dist.get_rank() != 0:
            dist.destroy_process_group()
            return {}, ""
        dist.destroy_process_group()
    return m, name


def _check_out(out: str | None, inputs=()) -> None:
    """Refuse an --out the profile cannot be written to, before any measuring or fitting:
    nor one of the files it is fitted from (--from-runs runs.csv --out runs.csv wrote the
    profile over the runs)."""
    if not out:
        return
    from ..export.trace import check_output_file
    from ..inputs import check_not_read, note_read
    check_output_file("--out", out)
    for path in inputs:
        if path:
            note_read(path)
    check_not_read("--out", out)


def _run(args) -> int:
    # flags of the other mode were taken and ignored without a word
    if args.from_runs:
        for flag, v in (("--gpu", args.gpu), ("--gpu-file", args.gpu_file),
                        ("--quick", args.quick or None)):
            if v is not None:
                raise InputError(flag, v, "applies to measuring this machine's GPUs; "
                                 "--from-runs refits on the runs (each row names its GPU)")
    elif args.force:
        raise InputError("--force", True, "applies to --from-runs (writing a refit that does "
                         "not lower the cross-validated error)")
    _check_out(args.out, (args.from_runs, args.gpu_file))
    if args.from_runs:
        from ..calibrate.from_runs import run_from_runs

        return run_from_runs(args)
    if not args.out:
        raise InputError("--out", None, "required: the profile TOML to write")
    torch = _torch_or_exit()

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise no_gpu()
    gpu = _gpu(args, torch)
    measured, device_name = _measure(args, torch)
    if not measured:  # a rank other than 0 under torchrun
        return 0
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": device_name, "gpu": gpu.name, "generation": gpu.generation,
            "torch": torch.__version__,
            "command": "meshplan " + " ".join(sys.argv[1:]) if sys.argv[1:] else "meshplan calibrate"}
    write_profile(measured, gpu, meta, Path(args.out))
    print(f"wrote {args.out}: use it with plan/predict/validate --profile {args.out}")
    return 0


def write_profile(measured: dict, gpu, meta: dict, out: Path) -> None:
    """Fit the constants to ``measured`` (calibrate.micro's results), print them beside the
    defaults and write the profile (whole or not at all); ``meta`` heads it (date, device)."""
    from ..calibrate import fit

    consts, lines = fit.constants_from(measured, gpu)
    print(f"calibrated on {meta['device']}, compared with {gpu.name} "
          f"({gpu.generation}) defaults:")
    print(f"  {'constant':<36}{'default':>10}{'measured':>10}  what")
    for ln in lines:
        d = "-" if ln["default"] is None else f"{ln['default']:.3g}"
        tag = "" if ln["applies"] else "  (no such constant in efficiency.py: not written)"
        print(f"  {ln['name']:<36}{d:>10}{ln['measured']:>10.3g}  {ln['what']}{tag}")
    if not consts:
        raise InputError("calibrate", meta["device"], "nothing measured maps to a constant")
    text = profile.to_toml(meta, consts, {ln["name"]: ln["what"] for ln in lines})
    profile.apply(consts)()  # refuse now, before writing, if a name does not resolve
    from ..export.trace import atomic_write
    atomic_write(out, text)


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="measure this machine's GPUs (or refit on measured "
                                         "runs) and write a profile for --profile")
    p.add_argument("--out", help="profile TOML to write")
    p.add_argument("--from-runs", help="runs CSV of your measured steps: refit the end-to-end "
                                       "constants and report cross-validated error")
    p.add_argument("--gpu", help="catalog GPU to compare with (default: the detected one)")
    p.add_argument("--gpu-file", help="TOML file with extra [gpu.NAME] tables")
    p.add_argument("--quick", action="store_true", help="fewer and smaller shapes")
    p.add_argument("--folds", type=int, default=5, help="--from-runs: cross-validation folds "
                                                         "for a file of one source (default 5; "
                                                         "capped at its configurations; a file "
                                                         "of several sources is cross-validated "
                                                         "leave-one-source-out)")
    p.add_argument("--force", action="store_true",
                   help="--from-runs: write the profile even when the refit does not lower "
                        "the cross-validated error")
    p.add_argument("--include-trust-c", action="store_true",
                   help="--from-runs: fit on rows of trust C too (left out by default: a "
                        "chart reading or an unknown layout)")
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: test stand-in
    p.set_defaults(func=_run)
