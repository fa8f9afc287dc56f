"""Arguments shared by the subcommands that take a scenario (model x cluster x workload)."""

from __future__ import annotations

import argparse

from ..errors import InputError
from ..plan import Plan
from ..scenario import Scenario, load_scenario, make_cluster
from ..specs.catalog.presets import load_model
from ..specs.workload import Workload

PLAN_FLAGS = {  # flag -> (Plan field, type)
    "dp": int, "tp": int, "pp": int, "cp": int, "ep": int, "etp": int, "zero": int,
    "vpp": int, "micro_batch": int, "hsdp_shard": int,
    "schedule": str, "recompute": str, "cp_kind": str,
}


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scenario (or --scenario FILE.toml)")
    g.add_argument("--scenario", help="TOML file with [model], [cluster], [workload] (and [plan])")
    g.add_argument("--model", help="preset name or path to a HuggingFace config.json")
    g.add_argument("--gpus", help="COUNTxGPU, e.g. 64xH100-SXM-80GB")
    g.add_argument("--gpus-per-node", type=int)
    g.add_argument("--nic-gbps", type=float, help="scale-out bandwidth per GPU, Gb/s one way")
    g.add_argument("--gpu-file", help="TOML file with extra [gpu.NAME] tables")
    g.add_argument("--seq-len", type=int)
    g.add_argument("--global-batch", type=int, help="sequences per step")
    g.add_argument("--global-batch-tokens", type=int)
    g.add_argument("--precision", choices=("bf16", "fp16", "fp8"))


def add_plan_args(p: argparse.ArgumentParser, help_suffix: str = "") -> None:
    g = p.add_argument_group("plan knobs" + help_suffix)
    for flag, typ in PLAN_FLAGS.items():
        g.add_argument("--" + flag.replace("_", "-"), dest=flag, type=typ, default=None)
    g.add_argument("--sequence-parallel", dest="sequence_parallel", default=None,
                   action=argparse.BooleanOptionalAction)
    g.add_argument("--offload-optimizer", dest="offload_optimizer", default=None,
                   action=argparse.BooleanOptionalAction)


def plan_overrides(args: argparse.Namespace) -> dict:
    keys = list(PLAN_FLAGS) + ["sequence_parallel", "offload_optimizer"]
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario from --scenario, with any flags given on top overriding it. (A cluster
    of several pools is read by commands/_pools.py, for `meshplan plan` only.)"""
    if args.scenario:
        sc = load_scenario(args.scenario)
        if sc.pools is not None and not args.gpus:
            raise InputError("cluster.pools", len(sc.pools.pools),
                             "pools are planned by `meshplan plan`; this command takes one GPU type")
        model = load_model(args.model) if args.model else sc.model
        cluster = sc.cluster
        if args.gpus or args.gpus_per_node or args.nic_gbps:
            cluster = make_cluster(args.gpus or f"{sc.cluster.num_gpus}x{sc.cluster.gpu.name}",
                                   gpus_per_node=args.gpus_per_node or sc.cluster.gpus_per_node,
                                   nic_gbps_per_gpu=args.nic_gbps, gpu_file=args.gpu_file)
        w = sc.workload
        workload = Workload(args.seq_len or w.seq_len, args.global_batch or w.global_batch,
                            args.precision or w.precision, w.optimizer, w.optimizer_state_precision)
        return Scenario(model, cluster, workload, sc.plan)
    for name in ("model", "gpus", "seq_len"):
        if getattr(args, name) is None:
            raise InputError("--" + name.replace("_", "-"), None, "required (or give --scenario)")
    model = load_model(args.model)
    cluster = make_cluster(args.gpus, gpus_per_node=args.gpus_per_node,
                           nic_gbps_per_gpu=args.nic_gbps, gpu_file=args.gpu_file)
    if args.global_batch_tokens:
        workload = Workload.from_tokens(args.seq_len, args.global_batch_tokens,
                                        precision=args.precision or "bf16")
    elif args.global_batch is not None:
        workload = Workload(args.seq_len, args.global_batch, args.precision or "bf16")
    else:
        raise InputError("--global-batch", None, "required (sequences per step)")
    return Scenario(model, cluster, workload, None)


def plan_from_args(args: argparse.Namespace, sc: Scenario) -> Plan:
    """A full plan: the scenario's [plan] table with flags on top."""
    base = sc.plan.to_dict() if sc.plan else {}
    base.update(plan_overrides(args))
    if not base:
        raise InputError("plan", None, "give the plan with --dp/--tp/--pp/... or a [plan] table")
    return Plan.from_dict(base)
