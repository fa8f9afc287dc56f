"""Pieces every exporter shares: node layout, the torchrun launch script, plan checks."""

from __future__ import annotations

import shlex

from .. import __version__
from ..plan import Plan
from ..scenario import Scenario


def nodes(sc: Scenario) -> tuple[int, int]:
    """(number of nodes, processes per node) for the plan's world size on this cluster."""
    world = sc.plan.world_size
    per_node = min(world, sc.cluster.gpus_per_node)
    return -(-world // per_node), per_node


def effective_order(plan: Plan) -> list[str]:
    """The plan's rank order (innermost first) restricted to axes of size > 1.

    Axes of size 1 do not change the rank layout, so two orders that agree on the rest
    lay ranks out identically."""
    sizes = plan.axis_sizes()
    return [a for a in plan.order.split("-") if sizes[a] > 1]


def same_layout(plan: Plan, engine_order: str) -> bool:
    """Whether ``engine_order`` (innermost first, e.g. "tp-cp-dp-pp") gives the plan's layout."""
    sizes = plan.axis_sizes()
    return effective_order(plan) == [a for a in engine_order.split("-") if sizes[a] > 1]


def header(sc: Scenario, title: str, comment: str = "#") -> list[str]:
    """Comment lines naming what the file is for."""
    w = sc.workload
    return [f"{comment} {title}",
            f"{comment} written by meshplan {__version__}",
            f"{comment} model:    {sc.model.name} ({sc.model.layers} layers, hidden {sc.model.hidden})",
            f"{comment} cluster:  {sc.cluster.describe()}",
            f"{comment} workload: seq_len {w.seq_len}, global batch {w.global_batch} sequences, "
            f"{w.precision}",
            f"{comment} plan:     {sc.plan.describe()}"]


def format_args(args: list[tuple[str, list[str]]], indent: str = "  ") -> str:
    """One flag and its values per line, shell-quoted."""
    return "\n".join(indent + " ".join(shlex.quote(x) for x in [flag, *vals])
                     for flag, vals in args)


def flatten(args: list[tuple[str, list[str]]]) -> list[str]:
    return [x for flag, vals in args for x in (flag, *vals)]


def launch_script(sc: Scenario, filename: str, title: str, args: list[tuple[str, list[str]]],
                  entry: str, notes: list[str], env: dict[str, str] | None = None,
                  extra_comments: list[str] | None = None,
                  before_launch: list[str] | None = None) -> str:
    """A bash script that starts the job on one node with torchrun; run it on every node.

    ``entry`` is what torchrun runs (a script path, or ``-m module``)."""
    n, per = nodes(sc)
    lines = ["#!/usr/bin/env bash", *header(sc, title)]
    lines.append(f"# Run on each of the {n} node(s), MASTER_ADDR = the address of node 0:")
    shown = list(range(n)) if n <= 8 else [0, 1, n - 1]
    for i in shown:
        if n > 8 and i == n - 1:
            lines.append("#   ...")
        lines.append(f"#   node {i}: NODE_RANK={i} MASTER_ADDR=<node-0 address> bash {filename}")
    for c in extra_comments or []:
        lines.append(f"# {c}")
    for note in notes:
        lines.append(f"# note: {note}")
    lines += ["set -euo pipefail", f"NNODES={n}", f"GPUS_PER_NODE={per}",
              'NODE_RANK="${NODE_RANK:-0}"', 'MASTER_ADDR="${MASTER_ADDR:-localhost}"',
              'MASTER_PORT="${MASTER_PORT:-29500}"']
    for k, v in (env or {}).items():
        lines.append(f'export {k}="${{{k}:-{v}}}"')
    lines.append("ARGS=(")
    if args:
        lines.append(format_args(args))
    lines.append(")")
    lines += before_launch or []
    lines.append('torchrun --nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE" '
                 '--node-rank "$NODE_RANK" \\')
    lines.append('  --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" \\')
    lines.append(f'  {entry} "${{ARGS[@]}}" "$@"')
    return "\n".join(lines) + "\n"


def script_args(text: str) -> list[str]:
    """The words of the ``ARGS=( ... )`` array of a script written by launch_script."""
    body = text.split("\nARGS=(\n", 1)[1].split("\n)\n", 1)[0]
    return shlex.split(body)
