"""meshplan run: execute a plan on torch.distributed and report measured next to predicted."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import InputError, require_nonneg_int, require_positive_int
from ..progress import activity
from ._common import add_plan_args, plan_from_args, scenario_from_args
from ..scenario import Scenario, make_cluster

GiB = 2**30


def register(sub) -> None:
    p = sub.add_parser("run", help="train a plan for real on torch.distributed (needs meshplan[run])",
                       description=__doc__)
    p.add_argument("--scenario", help="TOML file with [model], [workload], [plan] (and [cluster])")
    p.add_argument("--model", help="preset or config.json (default tiny-llama)")
    p.add_argument("--seq-len", type=int)
    p.add_argument("--global-batch", type=int)
    p.add_argument("--gpus", help="COUNTxGPU, e.g. 8xH100-SXM-80GB: the cluster the plan is sized on (dp inferred "
                   "when not stated) and predicted for, as predict's --gpus")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", choices=("synthetic", "corpus"), default="synthetic")
    p.add_argument("--dtype", choices=("fp32", "bf16", "bf16-mixed"), default=None,
                   help="default fp32 on CPU; on GPU bf16-mixed (fp32 master, bf16 compute) "
                   "for a bf16 workload")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--schedule-source", choices=("torch", "meshplan"), default="",
                   help="pipeline lists from torch's schedule classes or meshplan's own "
                        "(default: torch where it has the schedule, meshplan for zb_h1)")
    p.add_argument("--checkpoint-dir")
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--resume", nargs="?", const=True, default=None,
                   help="resume from the latest checkpoint in --checkpoint-dir, or from PATH")
    p.add_argument("--max-restarts", type=int, default=0, help="torchrun restarts after a crash")
    p.add_argument("--nnodes", type=int, default=1, help=">1: print the torchrun command per node")
    p.add_argument("--master", default="NODE0_ADDRESS", help="rendezvous host for --nnodes > 1")
    p.add_argument("--port", type=int, default=29500)
    p.add_argument("--out", help="folder for the workers' result files")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_plan_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..runtime.launch import require_torch
    require_torch()
    import torch

    from ..runtime import checkpoint, orchestrate
    from ..runtime.train import RunConfig, as_run

    # the scenario and plan as `predict` reads them (commands/_common.py): the cluster of
    # --scenario or --gpus sizes the plan (dp inferred when not stated, the world checked
    # against it, a stated dp that disagrees refused); before, run read the file its own
    # way, dropped which plan fields it stated and ran a dp that `predict` refused
    sc = scenario_from_args(args, local=True)
    plan = plan_from_args(args, sc, default_plan=True)
    plan, not_run = as_run(plan)
    device = args.device
    if args.nnodes > 1:
        # the commands printed here run on other machines: this one's GPUs (a login node
        # has none) say nothing about theirs; CUDA unless --device cpu says otherwise
        device = "cuda" if device == "auto" else device
    elif device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available() and args.nnodes == 1:
        raise InputError("--device", "cuda", "no CUDA device is visible to PyTorch")
    if device == "cuda" and plan.world_size > torch.cuda.device_count() and args.nnodes == 1:
        raise InputError("plan", plan.describe(), f"needs {plan.world_size} GPUs on this machine, "
                         f"{torch.cuda.device_count()} visible (use --nnodes for several machines)")
    dtype = args.dtype or ("bf16-mixed" if device == "cuda" and sc.workload.precision == "bf16"
                           else "fp32")
    cfg = RunConfig(sc.model, plan, seq_len=sc.workload.seq_len,
                    global_batch=sc.workload.global_batch, steps=args.steps, lr=args.lr,
                    seed=args.seed, data=args.data, dtype=dtype,
                    schedule_source=args.schedule_source)
    cfg.check(plan.world_size)
    if args.steps < 1:
        raise InputError("--steps", args.steps, "must be at least 1")
    # launcher settings: refused here, not by torchrun on the workers (exit 1)
    require_nonneg_int("max_restarts", args.max_restarts)
    require_positive_int("nnodes", args.nnodes)
    require_nonneg_int("checkpoint_every", args.checkpoint_every)
    if not 1 <= args.port <= 65535:
        raise InputError("--port", args.port, "must be a TCP port, 1-65535")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError("--out", args.out, "is a file; give a folder for the workers' result files")
    if args.checkpoint_every and not args.checkpoint_dir:
        raise InputError("--checkpoint-every", args.checkpoint_every,
                         "needs --checkpoint-dir (where the checkpoints go)")
    meta = None
    if args.resume not in (None, True):
        meta = checkpoint.check(args.resume)
    elif args.resume and args.checkpoint_dir:
        latest = checkpoint.latest(args.checkpoint_dir)
        if latest is None:
            raise InputError("--resume", args.checkpoint_dir, "holds no complete checkpoint")
        meta = checkpoint.check(latest)
    elif args.resume:
        raise InputError("--resume", True, "needs --checkpoint-dir or a checkpoint PATH")
    if meta is not None:
        checkpoint.check_same_data(meta, cfg)
    if meta is not None and args.steps <= int(meta["step"]) + 1:
        # --steps counts from the run's start: the checkpoint holds steps 0..step done
        raise InputError("--steps", args.steps,
                         f"the checkpoint is after step {int(meta['step']) + 1} of the run; "
                         f"give more steps than that to train on from it")
    if device == "cpu" and args.nnodes == 1:
        _check_host_memory(sc.model)
    if args.nnodes > 1:  # refused before any folder is made
        orchestrate.check_nnodes(plan.world_size, args.nnodes)
    cluster = sc.cluster  # (--gpus or the scenario's: plan_from_args checked its count)
    if cluster is None and device == "cuda" and torch.cuda.is_available():
        cluster = _local_cluster(torch, plan.world_size)
    # the folders the run writes, made now (the run makes them anyway): one that cannot be
    # was a FileNotFoundError traceback (--out) or a failure on every worker, exit 1
    # (--checkpoint-dir naming a file, or a folder under /proc)
    if args.checkpoint_dir:
        _make_folder("--checkpoint-dir", args.checkpoint_dir, "the checkpoints")
    if args.out is not None:  # a folder whatever --nnodes (its help says so)
        _make_folder("--out", args.out, "the workers' result files")
    run_opts = {"device": device, "ckpt_dir": args.checkpoint_dir,
                "ckpt_every": args.checkpoint_every, "resume": args.resume,
                "measure_memory": True}
    if args.nnodes > 1:
        import os
        # --out is a folder (made above): the nodes' config goes inside it. Before, a new
        # --out without a trailing slash was written as the config file itself
        conf = os.path.abspath(Path(args.out or ".") / "meshplan-run.json")
        for n, cmd in enumerate(orchestrate.node_commands(cfg, dict(run_opts, out="."),
                                                          args.nnodes, args.master, args.port, conf,
                                                          args.max_restarts)):
            print(f"# node {n}\n{cmd}")
        return 0
    with activity(f"training {args.steps} step(s)", quiet=args.json):
        res = orchestrate.start_local(cfg, run_opts, args.out, args.max_restarts)
    summary = orchestrate.summarize(cfg, res["results"])
    pred = _predict(sc, cluster, plan)
    if args.json:
        print(json.dumps({"plan": plan.to_dict(), "not_run": not_run, "measured": summary,
                          "predicted": pred}, indent=1))
        return 0
    print(_format(cfg, summary, pred, cluster))
    if not_run:
        print("note: meshplan's runtime does not run " + ", ".join(not_run) + "; the plan "
              "ran and was predicted without " + ("it" if len(not_run) == 1 else "them"))
    return 0


# Bytes per parameter the runtime's ranks hold at the least, summed over the ranks: an fp32
# weight, its fp32 gradient and AdamW's two fp32 moments (sharding spreads them over the ranks,
# replication only adds copies), before any activation.
STATE_BYTES_PER_PARAM = 16


def _check_host_memory(model) -> None:
    """Refuse (one line, exit 2) a CPU run whose model states alone exceed this machine's
    memory: the ranks would allocate until the kernel kills a worker (exit 1), or swap."""
    import os
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no such figure on this platform
        return
    need = STATE_BYTES_PER_PARAM * model.total_params()
    if need > total:
        raise InputError("--device", "cpu", f"{model.name}'s weights, gradients and AdamW "
                         f"states alone need {need / 2**30:,.0f} GiB over the ranks; this "
                         f"machine has {total / 2**30:,.0f} GiB (a smaller model, or "
                         "--device cuda on GPUs)")


def _make_folder(flag: str, path: str, what: str) -> None:
    """Create the folder ``path`` for ``what`` if missing; InputError naming ``flag`` when it
    is a file or cannot be created or written."""
    import os

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(flag, path, f"is a file; give a folder for {what}")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(flag, path, f"cannot be created ({e.strerror})") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise InputError(flag, path, f"is not writable (it is for {what})")


def _local_cluster(torch, world: int):
    """The GPUs of this machine as a catalog cluster, so a GPU run is compared by default."""
    from ..specs.catalog.gpus import gpu_for_device
    props = torch.cuda.get_device_properties(0)
    gpu_id = gpu_for_device(props.name, props.total_memory)
    if gpu_id is None:
        print(f"meshplan: {props.name} is not in the GPU catalog; give --gpus COUNTxGPU "
              "for a prediction", flush=True)
        return None
    return make_cluster(f"{world}x{gpu_id}")


def _predict(sc: Scenario, cluster, plan) -> dict | None:
    if cluster is None:
        return None
    try:
        from ..cost import estimate
    except ImportError:  # the cost model is not on this branch yet
        return None
    if cluster.num_gpus != plan.world_size:
        cluster = make_cluster(f"{plan.world_size}x{cluster.gpu.name}")
    est = estimate(sc.model, cluster, sc.workload, plan)
    return {"gpu": cluster.gpu.name, "step_time_s": est.step_time_s,
            "tokens_per_s_per_gpu": est.tokens_per_s_per_gpu,
            "memory_by_pp_rank": {r: {k: v for k, v in m.parts.items()} | {"Total": m.total}
                                  for r, m in enumerate(est.memory)},
            "step_time_parts": est.step_time.parts}


def _format(cfg, m: dict, pred: dict | None, cluster) -> str:
    lines = [f"plan {cfg.plan.describe()} | model {cfg.spec.name} | seq {cfg.seq_len} x batch "
             f"{cfg.global_batch} | {cfg.dtype} on {m['device'].split(':')[0]} "
             f"({cfg.plan.world_size} ranks)",
             "losses: " + " ".join(f"{x:.4f}" for x in m["losses"])]
    p = pred
    where = f"predicted ({p['gpu']})" if p else "predicted"
    lines.append(f"{'':26}{'measured':>14}{where:>28}")

    def row(name, a, b):
        lines.append(f"{name:26}{a:>14}{b:>28}")

    # the mean over the steps after the first; a one-step run has only the warm-up step
    row("step time" if m["steps_timed"] else "step time (1st, warm-up)",
        f"{m['step_time_s'] * 1e3:.1f} ms", f"{p['step_time_s'] * 1e3:.2f} ms" if p else "-")
    row("tokens/s per rank", f"{m['tokens_per_s_per_gpu']:.0f}",
        f"{p['tokens_per_s_per_gpu']:.0f}" if p else "-")
    for r, mem in sorted(m["memory_by_pp_rank"].items(), key=lambda kv: int(kv[0])):
        pm = p["memory_by_pp_rank"].get(int(r)) if p else None
        row(f"peak memory, pp rank {r}", f"{mem.get('Total', 0) / 2**20:.2f} MiB",
            f"{pm['Total'] / 2**20:.2f} MiB" if pm else "-")
    r0 = sorted(m["memory_by_pp_rank"], key=int)[0]
    cats = {k: v for k, v in m["memory_by_pp_rank"][r0].items() if k != "Total" and v}
    if cats:
        lines.append(f"measured peak by category, pp rank {r0} (MemTracker): "
                     + ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in cats.items()))
    if p:
        parts = {k: v for k, v in p["memory_by_pp_rank"][int(r0)].items() if k != "Total" and v}
        lines.append(f"predicted memory parts, pp rank {r0}: "
                     + ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in parts.items()))
    if not p:
        lines.append("(no prediction: give --gpus COUNTxGPU to compare with the planner)")
    elif m["device"].startswith("cpu"):
        lines.append(f"(measured on CPU/gloo in {cfg.dtype}; the prediction is for {p['gpu']} in "
                     "the workload's precision: compare shapes, not values)")
    return "\n".join(lines)
