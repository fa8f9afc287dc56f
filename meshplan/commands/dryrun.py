"""meshplan dryrun: build the real model at full world size on fake tensors, report memory."""

from __future__ import annotations

import argparse
import json

from ._common import add_plan_args, plan_from_args, scenario_from_args

GiB = 2**30


def register(sub) -> None:
    p = sub.add_parser("dryrun", help="per-rank peak memory of the real model on fake tensors "
                       "(needs meshplan[run])", description=__doc__)
    p.add_argument("--scenario", help="TOML file with [model], [cluster], [workload] (and [plan])")
    p.add_argument("--model")
    p.add_argument("--seq-len", type=int)
    p.add_argument("--global-batch", type=int)
    p.add_argument("--gpus", help="COUNTxGPU: the cluster the plan is sized on (dp inferred when not "
                   "stated) and the cost model's breakdown is for, as predict's --gpus")
    p.add_argument("--dtype", choices=("fp32", "bf16", "bf16-mixed"), default=None,
                   help="default: bf16-mixed (fp32 master, bf16 compute) when the workload's "
                   "precision is bf16, else fp32")
    p.add_argument("--json", action="store_true")
    add_plan_args(p)
    p.set_defaults(func=run)


def default_dtype(sc) -> str:
    """What a bf16 workload trains in: mixed precision with fp32 master weights."""
    return "bf16-mixed" if sc.workload.precision == "bf16" else "fp32"


def run(args: argparse.Namespace) -> int:
    from ..runtime.launch import require_torch
    require_torch()
    from ..runtime.dryrun import agreement, dryrun
    from ..runtime.train import RunConfig

    # the scenario and plan as `predict` and `run` read them (commands/_common.py): the
    # cluster of --scenario or --gpus sizes the plan and is checked against it, before the
    # (minutes long) dry run; before, dryrun read the file as run did, its own way, and
    # sized the scenario's plan on the plan's world whatever its [cluster] said
    sc = scenario_from_args(args, local=True)
    plan = plan_from_args(args, sc)
    cfg = RunConfig(sc.model, plan, seq_len=sc.workload.seq_len,
                    global_batch=sc.workload.global_batch, dtype=args.dtype or default_dtype(sc))
    cluster = sc.cluster
    measured = dryrun(cfg)
    pred = None
    if cluster is not None:
        from ..cost import estimate
        est = estimate(sc.model, cluster, sc.workload, plan)
        pred = [dict(m.parts, Total=m.total) for m in est.memory]
    if args.json:
        agree = [agreement(m, p) for m, p in zip(measured, pred)] if pred else None
        print(json.dumps({"measured": measured, "predicted": pred, "agreement": agree}, indent=1))
        return 0
    print(f"dry run: {sc.model.name}, plan {plan.describe()}, seq {cfg.seq_len} x batch "
          f"{cfg.global_batch}, {cfg.dtype}, {plan.world_size} ranks (fake tensors, MemTracker)")
    print(format_stages(measured, pred))
    return 0


def _unit(largest_bytes: float) -> tuple[float, str]:
    """GiB, or MiB where the largest figure of a line is under 1 GiB: a small model's stage
    printed in GiB read 0.00 for every part."""
    return (GiB, "GiB") if largest_bytes >= GiB else (2**20, "MiB")


def format_stages(measured: list[dict], pred: list[dict] | None) -> str:
    """Each pipeline rank's measured peak by category, and the cost model's beside it."""
    from ..runtime.dryrun import agreement
    lines = []
    for r, m in enumerate(measured):
        div, u = _unit(m["Total"])
        lines.append(f"pp rank {r}: measured peak {m['Total'] / div:.2f} {u} = "
                     + ", ".join(f"{k} {v / div:.2f}" for k, v in m.items()
                                 if k != "Total" and v and "_" not in k))
        if pred:
            div, u = _unit(pred[r]["Total"])
            lines.append(f"           cost model {pred[r]['Total'] / div:.2f} {u} = "
                         + ", ".join(f"{k} {v / div:.2f}" for k, v in pred[r].items()
                                     if k != "Total" and v))
            for k, (a, b) in agreement(m, pred[r]).items():
                div, u = _unit(max(a, b))
                lines.append(f"           {k:17s} measured {a / div:7.2f}  cost model "
                             f"{b / div:7.2f} {u}")
        if m.get("host_offloaded"):
            div, u = _unit(m["host_offloaded"])
            lines.append(f"           host (offloaded master, gradient shards, AdamW states) "
                         f"{m['host_offloaded'] / div:.2f} {u}; on CPU the host is the device")
    return "\n".join(lines)
