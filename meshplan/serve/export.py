"""Launch commands for a serving plan: ``vllm serve`` and SGLang's ``launch_server``.

Flag names were checked with each engine's own argument parser, run here without a GPU:
vLLM 0.33.0 (``vllm.entrypoints.common.cli_args.make_arg_parser`` with
VLLM_TARGET_DEVICE=cpu) and SGLang 0.5.23 (``ServerArgs.add_cli_args``); the flags and
choices those parsers accept are kept in tests/data/serve_engine_flags.json (regenerate with
bench/serve_engine_flags.py), and the tests check every exported flag against it. The
SGLang router (``sglang_router.launch_router``) is a separate package: its flags follow its
documentation (README of sgl-project/sglang's sgl-router), not a parser.

One command per replica (each on its own GPUs and port), plus the router that spreads
requests over them. A plan an engine cannot express is refused with one line; nothing is
silently changed.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

from ..errors import InputError
from ..specs.model import ModelSpec
from .spec import Pool, ServePlan

ENGINES = ("vllm", "sglang")
BASE_PORT = 8000


def _refuse(engine: str, why: str) -> None:
    raise InputError("export", engine, why)


def _gpu_lists(pools: tuple[Pool, ...], gpus_per_node: int) -> list[list[tuple[int, int]]]:
    """(node, local GPU) for each replica, packed in order, replicas not split over nodes
    unless larger than a node."""
    out, g = [], 0
    for pool in pools:
        for _ in range(pool.replicas):
            n = pool.gpus_per_replica
            if n <= gpus_per_node and g % gpus_per_node + n > gpus_per_node:
                g += gpus_per_node - g % gpus_per_node
            out.append([((g + i) // gpus_per_node, (g + i) % gpus_per_node) for i in range(n)])
            g += n
    return out


def vllm_args(pool: Pool, plan: ServePlan, model_id: str) -> list[str]:
    a = ["vllm", "serve", model_id, "--tensor-parallel-size", str(pool.tp)]
    if pool.pp > 1:
        a += ["--pipeline-parallel-size", str(pool.pp)]
    if pool.attn_dp > 1:
        a += ["--data-parallel-size", str(pool.attn_dp)]
    if pool.ep > 1:
        a += ["--enable-expert-parallel"]  # vLLM's EP size is tp x dp, as the plan's
    a += ["--max-num-seqs", str(pool.max_num_seqs),
          "--max-num-batched-tokens", str(pool.max_batched_tokens),
          "--gpu-memory-utilization", f"{pool.gpu_mem_util:g}",
          "--enable-chunked-prefill"]
    if plan.weight_dtype == "fp8":
        a += ["--quantization", "fp8"]
    a += ["--kv-cache-dtype", "fp8" if plan.kv_dtype == "fp8" else "auto"]
    return a


def sglang_args(pool: Pool, plan: ServePlan, model_id: str) -> list[str]:
    # SGLang's --tp-size is the replica's GPU count; attention DP splits it into groups
    a = ["python", "-m", "sglang.launch_server", "--model-path", model_id,
         "--tp-size", str(pool.tp * pool.attn_dp)]
    if pool.pp > 1:
        a += ["--pp-size", str(pool.pp)]
    if pool.attn_dp > 1:
        a += ["--attn-dp-size", str(pool.attn_dp)]
    if pool.ep > 1:
        a += ["--ep-size", str(pool.ep)]
    a += ["--max-running-requests", str(pool.max_num_seqs),
          "--chunked-prefill-size", str(pool.max_batched_tokens),
          "--mem-fraction-static", f"{pool.gpu_mem_util:g}"]
    if plan.weight_dtype == "fp8":
        a += ["--quantization", "fp8"]
    a += ["--kv-cache-dtype", "fp8_e4m3" if plan.kv_dtype == "fp8" else "auto"]
    if pool.role != "both":
        a += ["--disaggregation-mode", pool.role, "--disaggregation-transfer-backend",
              "nixl" if plan.kv_tier == "scale-up" else "mooncake"]
    return a


def check_expressible(engine: str, plan: ServePlan) -> None:
    if engine not in ENGINES:
        raise InputError("export", engine, "allowed: " + ", ".join(ENGINES))
    for p in plan.pools:
        if p.pp > 1 and p.attn_dp > 1:
            _refuse(engine, "pipeline parallel together with attention data parallel is not a"
                    " configuration either engine documents; choose one")
    if engine == "vllm" and plan.disaggregated:
        _refuse(engine, "vLLM runs disaggregated prefill/decode only with an external proxy"
                " (its KV connectors ship example proxies, no launcher): export with --export"
                " sglang, or serve an aggregated plan")


def commands(engine: str, plan: ServePlan, model: ModelSpec, model_id: str,
             gpus_per_node: int = 8) -> list[tuple[str, list[str]]]:
    """(label, argv) per replica, then the router. Environment goes in front of the argv."""
    check_expressible(engine, plan)
    build = vllm_args if engine == "vllm" else sglang_args
    out = []
    port = BASE_PORT
    urls: dict[str, list[str]] = {"both": [], "prefill": [], "decode": []}
    lists = iter(_gpu_lists(plan.pools, gpus_per_node))
    for pool in plan.pools:
        for r in range(pool.replicas):
            gl = next(lists)
            nodes = sorted({n for n, _ in gl})
            argv = build(pool, plan, model_id) + ["--port", str(port)]
            if len(nodes) == 1:
                env = ["env", "CUDA_VISIBLE_DEVICES=" + ",".join(str(i) for _, i in gl)]
            else:
                _refuse(engine, f"a replica of {pool.gpus_per_replica} GPUs spans {len(nodes)}"
                        " nodes; multi-node launch (ray / --nnodes) is not exported yet")
            label = f"{pool.role} replica {r} on node {nodes[0]}"
            out.append((label, env + argv))
            urls[pool.role].append(f"http://node{nodes[0]}:{port}")
            port += 1
    if engine == "sglang":
        router = ["python", "-m", "sglang_router.launch_router"]
        if plan.disaggregated:
            router += ["--pd-disaggregation"]
            for u in urls["prefill"]:
                router += ["--prefill", u]
            for u in urls["decode"]:
                router += ["--decode", u]
        else:
            router += ["--worker-urls", *urls["both"]]
        out.append(("router", router + ["--port", str(BASE_PORT - 1)]))
    elif len(urls["both"]) > 1:
        out.append(("router (any HTTP load balancer; vLLM has no built-in one for separate"
                    " servers)", ["#", "balance", "over", *urls["both"]]))
    return out


def script_text(engine: str, plan: ServePlan, model: ModelSpec, model_id: str) -> str:
    lines = ["#!/bin/sh", f"# meshplan serve export ({engine}): {plan.describe()}",
             f"# model {model.name} as {model_id}; hosts node0, node1, ... stand for your nodes.",
             "# Run each line on the node it names (replicas in the background)."]
    for label, argv in commands(engine, plan, model, model_id):
        lines.append(f"# {label}")
        if argv[0] == "#":
            lines.append("# " + " ".join(argv[1:]))
        else:
            lines.append(" ".join(shlex.quote(a) for a in argv) + " &")
    return "\n".join(lines) + "\nwait\n"


# Every file name a serving export writes (a folder holding only these is a previous export).
SERVE_EXPORT_FILES = ("launch_vllm.sh", "launch_sglang.sh", "plan.json")


def check_out(out_dir: str | Path) -> Path:
    """The --out directory if a serving export may go there, else InputError: the training
    exports' rule (a new or empty directory, or one holding only a previous export)."""
    from ..export import check_out_dir
    return check_out_dir(out_dir, set(SERVE_EXPORT_FILES))


def export_plan(engine: str, plan: ServePlan, model: ModelSpec, model_id: str,
                out_dir: str | Path) -> list[Path]:
    """Write ``launch_<engine>.sh`` and ``plan.json`` into ``out_dir``, atomically: all
    files appear together or none (a temporary folder renamed into place per file)."""
    import json

    text = script_text(engine, plan, model, model_id)  # refuses before anything is written
    out = check_out(out_dir)
    files = {f"launch_{engine}.sh": text,
             "plan.json": json.dumps(plan.to_dict() | {"engine": engine, "model": model_id},
                                     indent=2) + "\n"}
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".meshplan-", dir=out))
    except OSError as e:  # the training exports' message (export.check_out_dir's writer)
        raise InputError("--out", str(out_dir), f"cannot write there ({e.strerror})") from None
    written = []
    try:
        for name, body in files.items():
            (tmp / name).write_text(body)
        for name in files:
            os.replace(tmp / name, out / name)
            written.append(out / name)
        os.chmod(out / f"launch_{engine}.sh", 0o755)
        for name in set(SERVE_EXPORT_FILES) - set(files):  # a previous export's other
            (out / name).unlink(missing_ok=True)            # engine script: not this plan's
    except OSError as e:
        for f in written:
            f.unlink(missing_ok=True)
        raise InputError("--out", str(out_dir), f"cannot write there ({e.strerror})") from None
    finally:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
    return written
