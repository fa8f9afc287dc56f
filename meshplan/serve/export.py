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

import shlex
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..specs.hardware import Cluster
from ..specs.hardware import GPU
from ..specs.model import ModelSpec
from .memory import serve_memory
from .spec import MEM_UTIL_MEANINGS, Pool, ServePlan

ENGINES = ("vllm", "sglang")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
MEMORY_FLAGS = {"vllm": "--gpu-memory-utilization", "sglang": "--mem-fraction-static"}
BASE_PORT = 8000  # the first replica's HTTP port on each node; the SGLang router one below
# SGLang 0.5.23 with attention DP takes ports derived from --port on the same host: port + 233
# and the 6 after it (ZMQ_TCP_PORT_DELTA, NUM_DERIVED_PORTS; sglang/srt/server_args.py:728,
# 820-843; one more per DP rank with SGLANG_RUST_SERVER, :835, :855) and port + 13
# (DP_ATTENTION_HANDSHAKE_PORT_DELTA, server_args.py:729, managers/data_parallel_controller.py:
# 505). Replicas on 8000 and 8001 collide there, so each SGLang server owns a block of
# SGLANG_PORT_BLOCK ports on its node, and a prefill server's KV bootstrap server (default
# 8998 for every server, arg_groups/fields/disagg.py:81-83) sits at block + 100, inside it.
SGLANG_PORT_BLOCK = 300
SGLANG_BOOTSTRAP_OFFSET = 100
# The blocks stay below 22000: SGLang picks its NCCL port at random in 22000-29999
# (utils/network.py:205, server_args.py:771-773).
SGLANG_PORT_CEILING = 22000
# SGLang's --max-prefill-tokens default (ServerArgs.max_prefill_tokens, python/sglang/srt/
# arg_groups/fields/schedule.py:71-81 at 0.5.23): the most prompt tokens one prefill batch admits
# (managers/schedule_policy.py PrefillAdder: rem_input_tokens, budget_state), besides the chunk.
SGLANG_MAX_PREFILL_TOKENS = 16384
# --weights fp8 is the engine's --quantization fp8, which needs a CUDA compute capability of at
# least: vLLM 7.5 (Fp8Config.get_min_capability, vllm/model_executor/layers/quantization/
# fp8.py:146-147 at 0.33.0), SGLang 8.0 (Fp8Config.get_min_capability, sglang/srt/layers/
# quantization/fp8.py:329-339 at 0.5.23, checked in model_loader/loader.py:259). GPU.
# compute_capability 0 (AMD, or a part the catalog does not know) is not refused.
FP8_MIN_CAPABILITY = {"vllm": 7.5, "sglang": 8.0}
# The compute capability an engine starts on at all: SGLang 0.5.23 stops at start-up below 7.5
# ("SGLang only supports sm75 and above.": maybe_downgrade_dtype_for_legacy_gpu, sglang/srt/
# model_executor/model_runner_components/load_model_utils.py:80-91). vLLM has no such floor:
# on Volta it serves a bf16 checkpoint in fp16 (CudaPlatform.supported_dtypes, vllm/platforms/
# cuda.py:257-263, and _resolve_auto_dtype, vllm/config/model.py, at 0.33.0).
MIN_CAPABILITY = {"sglang": 7.5}
# Environment an engine needs on a GPU generation to run the kernels the cost model priced.
# meshplan prices attention on CDNA3 / CDNA4 from AMD's aiter kernel table (cost/
# efficiency.py); vLLM leaves aiter off unless VLLM_ROCM_USE_AITER is set ("Disable aiter ops
# unless specifically enabled", vllm/envs.py; default False), and plain `vllm serve` on ROCm
# then runs its Triton unified attention (vLLM's ROCm attention-backend notes: TRITON_ATTN,
# "Both the prefill and decode are triton kernels"). SGLang picks aiter itself on HIP
# (server_args._get_default_attn_backend: `elif is_hip(): return "aiter"`). aiter builds for
# gfx942 / gfx950 only, so MI250X (CDNA2) gets nothing.
ENGINE_ENV = {("vllm", "cdna3"): ("VLLM_ROCM_USE_AITER=1",),
              ("vllm", "cdna4"): ("VLLM_ROCM_USE_AITER=1",)}


def quantization_args(plan: ServePlan, checkpoint_quant: str = "") -> list[str]:
    """``--quantization fp8`` for --weights fp8, unless the checkpoint declares another method
    in its quantization_config: both engines take the method from the checkpoint and stop at
    start-up when --quantization names a different one (ModelConfig._verify_quantization:
    vllm/config/model.py, vllm-project/vllm commit 0052a5b818980ce8a0477706aaf9f75bd5af72cd;
    python/sglang/srt/configs/model_config.py, whose compatible methods pair no other method
    with fp8). ``notes`` says the checkpoint's method is what the engines load."""
    if plan.weight_dtype == "fp8" and checkpoint_quant in ("", "fp8"):
        return ["--quantization", "fp8"]
    return []


def _refuse(engine: str, why: str) -> None:
    raise InputError("export", engine, why)


@dataclass(frozen=True)
class Server:
    """One exported engine server: a replica of ``pool`` on ``node``'s local ``gpus``."""

    pool: Pool
    index: int  # replica index within its pool
    node: int
    gpus: tuple[int, ...]
    port: int

    @property
    def bootstrap_port(self) -> int:  # SGLang prefill servers only
        return self.port + SGLANG_BOOTSTRAP_OFFSET

    @property
    def url(self) -> str:
        return f"http://node{self.node}:{self.port}"


def servers(engine: str, plan: ServePlan, cluster: Cluster) -> list[Server]:
    """Each replica's node, GPUs and port: replicas packed in order, none split over nodes
    (check_expressible refuses a replica larger than a node); ports unique on each node."""
    per_node, nodes = cluster.gpus_per_node, max(1, -(-cluster.num_gpus // cluster.gpus_per_node))
    stride = SGLANG_PORT_BLOCK if engine == "sglang" else 1
    out, g, on_node = [], 0, {}
    for pool in plan.pools:
        n = pool.gpus_per_replica
        for r in range(pool.replicas):
            if g % per_node + n > per_node:
                g += per_node - g % per_node
            node = g // per_node
            if node >= nodes:
                _refuse(engine, f"the replicas of {plan.describe()} do not pack onto the"
                        f" cluster's {nodes} node(s) of {per_node} GPUs without splitting one")
            k = on_node[node] = on_node.get(node, -1) + 1
            port = BASE_PORT + stride * k
            if engine == "sglang" and port + SGLANG_PORT_BLOCK > SGLANG_PORT_CEILING:
                _refuse(engine, f"more than {(SGLANG_PORT_CEILING - BASE_PORT) // stride} SGLang"
                        " servers on one node: their port blocks would reach the NCCL port range")
            out.append(Server(pool, r, node, tuple(range(g % per_node, g % per_node + n)), port))
            g += n
    return out


def memory_flag_value(engine: str, pool: Pool, plan: ServePlan, model: ModelSpec,
                      gpu: GPU) -> float:
    """The value of ``engine``'s memory flag that gives each GPU the KV cache the plan was
    simulated with. ``pool.gpu_mem_util`` has the meaning of ``plan.scheduler``'s engine
    (serve/memory.py; a TensorRT-LLM plan's is its free_gpu_memory_fraction): passed as it
    is when the engines agree, else converted from the simulated split:
    - to SGLang's --mem-fraction-static, the static share (weights + KV cache) of the memory
      free before the weights load: (weights + kv) / (memory - runtime), which leaves
      outside it the activations and vLLM's unused (1 - util) x memory;
    - to vLLM's --gpu-memory-utilization, what its share holds over the memory: (weights +
      activations + kv) / memory, the runtime sitting outside the share (serve/memory.py).
    Rounded down to 4 decimals: at most 1e-4 of the memory less cache, never less room for
    the activations than simulated."""
    # each scheduler reads the share with its own engine's meaning (vLLM, SGLang and
    # TensorRT-LLM all differ): only the same engine passes it through
    if engine == plan.scheduler:
        return pool.gpu_mem_util
    mem = serve_memory(model, gpu, pool, plan.weight_dtype, plan.kv_dtype,
                       scheduler=plan.scheduler)
    if engine == "sglang":
        x = (mem.weights_bytes + mem.kv_bytes) / (gpu.memory_bytes - mem.runtime_bytes)
    else:
        x = (mem.weights_bytes + mem.activation_bytes + mem.kv_bytes) / gpu.memory_bytes
    return max(1e-4, min(1.0, int(x * 1e4) / 1e4))


def vllm_args(pool: Pool, plan: ServePlan, model_id: str, max_len: int,
              mem_fraction: float | None = None, checkpoint_quant: str = "") -> list[str]:
    """``mem_fraction``: --gpu-memory-utilization (default ``pool.gpu_mem_util``; commands()
    passes ``memory_flag_value``). ``checkpoint_quant``: ModelSpec.checkpoint_quant
    (``quantization_args``)."""
    a = ["vllm", "serve", model_id, "--tensor-parallel-size", str(pool.tp)]
    if pool.pp > 1:
        a += ["--pipeline-parallel-size", str(pool.pp)]
    if pool.attn_dp > 1:
        a += ["--data-parallel-size", str(pool.attn_dp)]
    if pool.ep > 1:
        a += ["--enable-expert-parallel"]  # vLLM's EP size is tp x dp, as the plan's
    # --max-num-seqs is per DP engine, as the simulator's per-rank figure. --max-model-len:
    # without it vLLM sizes for the model's whole context (vllm/config/model.py:2642-2652 at
    # 0.33.0) and refuses to start when the KV cache cannot hold one such request
    # (vllm/v1/core/kv_cache_planning.py:67-86); the planned traffic's longest request is what
    # the simulator checked fits.
    a += ["--max-num-seqs", str(pool.max_num_seqs),
          "--max-num-batched-tokens", str(pool.max_batched_tokens),
          "--max-model-len", str(max_len),
          MEMORY_FLAGS["vllm"],
          f"{pool.gpu_mem_util if mem_fraction is None else mem_fraction:g}",
          "--enable-chunked-prefill"]
    a += quantization_args(plan, checkpoint_quant)
    a += ["--kv-cache-dtype", "fp8" if plan.kv_dtype == "fp8" else "auto"]
    return a


def sglang_args(pool: Pool, plan: ServePlan, model_id: str, max_len: int,
                mem_fraction: float | None = None, checkpoint_quant: str = "") -> list[str]:
    """``mem_fraction``: --mem-fraction-static, SGLang's meaning (default
    ``pool.gpu_mem_util`` as it is; commands() passes ``memory_flag_value``).
    ``checkpoint_quant``: ModelSpec.checkpoint_quant (``quantization_args``)."""
    # SGLang's --tp-size is the replica's GPU count; attention DP splits it into groups
    a = ["python", "-m", "sglang.launch_server", "--model-path", model_id,
         "--tp-size", str(pool.tp * pool.attn_dp)]
    if pool.pp > 1:
        a += ["--pp-size", str(pool.pp)]
    if pool.attn_dp > 1:
        a += ["--attn-dp-size", str(pool.attn_dp)]
    if pool.ep > 1:
        a += ["--ep-size", str(pool.ep)]
    # With attention DP SGLang divides both limits by the DP size (max_running_requests //
    # attn_dp_size: model_executor/pool_configurator.py:956, 1142, pd_disaggregation_hook.py:136;
    # chunked_prefill_size // attn_dp_size: arg_groups/parallel_hook.py:331); the plan's
    # figures are per DP rank, as the simulator runs them.
    a += ["--max-running-requests", str(pool.max_num_seqs * pool.attn_dp),
          "--chunked-prefill-size", str(pool.max_batched_tokens * pool.attn_dp)]
    if pool.max_batched_tokens > SGLANG_MAX_PREFILL_TOKENS:
        # SGLang stops adding prompts to a prefill batch once they hold --max-prefill-tokens
        # (PrefillAdder.budget_state: rem_input_tokens <= 0), whatever the chunk size; the
        # simulated budget is the per-rank chunk, so a larger one is written out (the flag is
        # not divided by the attention-DP size: arg_groups/parallel_hook.py divides only
        # chunked_prefill_size)
        a += ["--max-prefill-tokens", str(pool.max_batched_tokens)]
    a += ["--context-length", str(max_len),
          MEMORY_FLAGS["sglang"],
          f"{pool.gpu_mem_util if mem_fraction is None else mem_fraction:g}"]
    if pool.role == "both":
        # the simulator mixes decode tokens and prefill chunks in one step; SGLang does only
        # with --enable-mixed-chunk (arg_groups/fields/schedule.py:208-211, off by default;
        # managers/scheduler.py:1376)
        a += ["--enable-mixed-chunk"]
    a += quantization_args(plan, checkpoint_quant)
    a += ["--kv-cache-dtype", "fp8_e4m3" if plan.kv_dtype == "fp8" else "auto"]
    if pool.role != "both":
        a += ["--disaggregation-mode", pool.role, "--disaggregation-transfer-backend",
              "nixl" if plan.kv_tier == "scale-up" else "mooncake"]
    return a


def server_args(engine: str, s: Server, plan: ServePlan, model_id: str, max_len: int,
                mem_fraction: float | None = None, checkpoint_quant: str = "") -> list[str]:
    if engine == "vllm":  # vLLM's server binds every interface by default
        return vllm_args(s.pool, plan, model_id, max_len, mem_fraction,
                         checkpoint_quant) + ["--port", str(s.port)]
    # SGLang's HTTP server, and a prefill server's bootstrap server with it, bind --host,
    # 127.0.0.1 by default (arg_groups/fields/serving.py:65, managers/disagg_service.py:46-47):
    # the router and decode servers on other nodes could not reach them
    a = sglang_args(s.pool, plan, model_id, max_len, mem_fraction, checkpoint_quant) + [
        "--host", "0.0.0.0", "--port", str(s.port)]
    if s.pool.role == "prefill":
        a += ["--disaggregation-bootstrap-port", str(s.bootstrap_port)]
    return a


def check_expressible(engine: str, plan: ServePlan, cluster: Cluster,
                      checkpoint_quant: str = "") -> None:
    """InputError if ``engine`` cannot launch ``plan`` on ``cluster`` from the exported script;
    the search with --export keeps only the plans that pass."""
    if engine not in ENGINES:
        raise InputError("export", engine, "allowed: " + ", ".join(ENGINES))
    for p in plan.pools:
        if p.pp > 1 and p.attn_dp > 1:
            _refuse(engine, "pipeline parallel together with attention data parallel is not a"
                    " configuration either engine documents; choose one")
        if p.gpus_per_replica > cluster.gpus_per_node:
            _refuse(engine, f"a replica of {p.gpus_per_replica} GPUs spans nodes"
                    f" ({cluster.gpus_per_node} GPUs per node); multi-node launch (ray /"
                    " --nnodes) is not exported yet")
    if engine == "vllm" and plan.disaggregated:
        _refuse(engine, "vLLM runs disaggregated prefill/decode only with an external proxy"
                " (its KV connectors ship example proxies, no launcher): export with --export"
                " sglang, or serve an aggregated plan")
    cc, need = cluster.gpu.compute_capability, FP8_MIN_CAPABILITY[engine]
    if 0 < cc < MIN_CAPABILITY.get(engine, 0):
        _refuse(engine, f"{ENGINE_NAMES[engine]} starts only from compute capability"
                f" {MIN_CAPABILITY[engine]:g} on; {cluster.gpu.name} is {cc:g}: export with"
                " --export vllm")
    # (only where the flag is written: a checkpoint of another method loads as that method)
    if quantization_args(plan, checkpoint_quant) and 0 < cc < need:
        _refuse(engine, f"--weights fp8 is --quantization fp8, which {ENGINE_NAMES[engine]} loads"
                f" only from compute capability {need:g} on; {cluster.gpu.name} is {cc:g}: use"
                " --weights bf16")


# The one file name a checkpoint folder's config is read from: vLLM looks for
# <model>/config.json (transformers.utils.CONFIG_NAME, via file_or_path_exists in
# vllm/transformers_utils/repo_utils.py and get_config in vllm/transformers_utils/config.py at
# 0.33.0), SGLang the same name (sglang/srt/utils/hf_transformers/common.py at 0.5.23). A
# config saved under another name (qwen3-32b.config.json) does not make its folder that
# model's checkpoint.
CHECKPOINT_CONFIG_NAME = "config.json"


def default_model_id(model_arg: str) -> str:
    """--model-id when not given: a config.json's folder (the engines load a checkpoint
    folder, not its config file), else --model as given (``notes`` says when that is a file
    the engines cannot load)."""
    path = Path(model_arg)
    if path.name == CHECKPOINT_CONFIG_NAME and path.is_file():
        # absolute: the script runs from wherever each node's shell is (`--model config.json`
        # gave `vllm serve .`)
        return str(path.resolve().parent)
    return model_arg


def notes(plan: ServePlan, model: ModelSpec, model_id: str, preset: bool) -> list[str]:
    """What the launch lines cannot say for themselves: a preset name where the engines need
    a HuggingFace id, a checkpoint whose own quantization overrides the simulated weights."""
    out = []
    if preset and model_id == model.name:
        out.append(f"{model_id!r} is meshplan's preset name, not a HuggingFace id or a folder:"
                   " set --model-id (e.g. the checkpoint's org/name) before launching")
    elif Path(model_id).is_file():
        out.append(f"{model_id!r} is a file, not a checkpoint folder or a HuggingFace id: the"
                   f" engines read a folder's {CHECKPOINT_CONFIG_NAME} and the weights beside"
                   " it; set --model-id (the checkpoint's folder or org/name) before launching")
    q = model.checkpoint_quant
    if q and q != plan.weight_dtype:
        # vLLM takes the checkpoint's quantization_config over --quantization or its absence
        # (vllm/config/model.py:1388-1460 at 0.33.0: an override method such as gpt_oss_mxfp4
        # replaces the flag's, and with no flag the config's method is used)
        out.append(f"the checkpoint's weights are {q} (its config's quantization_config) and"
                   f" the engines load them so; this plan was simulated with {plan.weight_dtype}"
                   " weights" + (": rerun with --weights fp8" if q == "fp8" else "")
                   + ("; the launch lines leave out --quantization fp8, which both engines"
                      f" refuse for a {q} checkpoint" if plan.weight_dtype == "fp8" else ""))
    return out


def commands(engine: str, plan: ServePlan, model: ModelSpec, model_id: str, cluster: Cluster,
             max_len: int) -> list[tuple[str, list[str]]]:
    """(label, argv) per replica, then the router. Environment goes in front of the argv.
    ``max_len``: the longest request (prompt + output) the servers must take."""
    check_expressible(engine, plan, cluster, model.checkpoint_quant)
    out = []
    placed = servers(engine, plan, cluster)
    for s in placed:
        env = ["env", "CUDA_VISIBLE_DEVICES=" + ",".join(map(str, s.gpus)),
               *ENGINE_ENV.get((engine, cluster.gpu.generation), ())]
        mem = memory_flag_value(engine, s.pool, plan, model, cluster.gpu)
        out.append((f"{s.pool.role} replica {s.index} on node {s.node}",
                    env + server_args(engine, s, plan, model_id, max_len, mem,
                                      model.checkpoint_quant)))
    if engine == "sglang":
        router = ["python", "-m", "sglang_router.launch_router"]
        if plan.disaggregated:
            router += ["--pd-disaggregation"]
            for s in placed:
                # --prefill URL BOOTSTRAP_PORT: without the port the router sends none and the
                # decode server falls back to 8998 (sglang_router/router_args.py:351-356,
                # 977-1006 at sglang-router 0.3.2; sglang managers/scheduler.py:2970-2971)
                if s.pool.role == "prefill":
                    router += ["--prefill", s.url, str(s.bootstrap_port)]
            for s in placed:
                if s.pool.role == "decode":
                    router += ["--decode", s.url]
        else:
            router += ["--worker-urls", *(s.url for s in placed)]
        out.append(("router", router + ["--port", str(BASE_PORT - 1)]))
    elif len(placed) > 1:
        out.append(("router (any HTTP load balancer; vLLM has no built-in one for separate"
                    " servers)", ["#", "balance", "over", *(s.url for s in placed)]))
    return out


def script_text(engine: str, plan: ServePlan, model: ModelSpec, model_id: str, cluster: Cluster,
                max_len: int, notes_: list[str] = ()) -> str:
    lines = ["#!/bin/sh", f"# meshplan serve export ({engine}): {plan.describe()}",
             f"# model {model.name} as {model_id}; hosts node0, node1, ... stand for your nodes"
             f" ({cluster.gpus_per_node} GPUs each).",
             "# Run each line on the node it names (replicas in the background)."]
    lines += [f"# note: {n}" for n in notes_]
    for label, argv in commands(engine, plan, model, model_id, cluster, max_len):
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


def plan_json(engine: str, plan: ServePlan, model: ModelSpec, model_id: str,
              cluster: Cluster) -> dict:
    """plan.json: the plan as exported for ``engine``. Each pool's ``gpu_mem_util`` is the
    value of the engine's memory flag on the launch line (``memory_flag``, converted by
    ``memory_flag_value`` when the plan was simulated with another engine's meaning), and
    ``gpu_mem_util_meaning`` says what that number is to the engine; the share the plan was
    simulated with stays as ``simulated_gpu_mem_util``, meaning
    ``simulated_gpu_mem_util_meaning`` (the ``scheduler``'s)."""
    d = plan.to_dict()
    for pool, p in zip(plan.pools, d["pools"]):
        p["simulated_gpu_mem_util"] = p["gpu_mem_util"]
        p["gpu_mem_util"] = memory_flag_value(engine, pool, plan, model, cluster.gpu)
        p["memory_flag"] = MEMORY_FLAGS[engine]
    d["simulated_gpu_mem_util_meaning"] = d["gpu_mem_util_meaning"]
    d["gpu_mem_util_meaning"] = MEM_UTIL_MEANINGS[engine]
    return d | {"engine": engine, "model": model_id}


def render_plan(engine: str, plan: ServePlan, model: ModelSpec, model_id: str,
                cluster: Cluster, max_len: int, notes_: list[str] = ()):
    """The files of a serving export (``launch_<engine>.sh`` and ``plan.json``), computed
    in memory; an engine's refusal is raised here, before anything is written."""
    import json

    from ..export import Rendered
    text = script_text(engine, plan, model, model_id, cluster, max_len, notes_)
    files = {f"launch_{engine}.sh": text,
             "plan.json": json.dumps(plan_json(engine, plan, model, model_id, cluster),
                                     indent=2) + "\n"}
    return Rendered(engine, files, executable={f"launch_{engine}.sh"})


def write_plan(rendered, out_dir: str | Path) -> list[Path]:
    """Write a rendered serving export into ``out_dir`` the way the training exports are
    written (export.write): staged in a temporary folder that takes the place of ``out_dir``
    in one rename, so a failure leaves the old folder or the new one, never a mix (files were
    replaced one by one: a failure between them lost the previous export's first file)."""
    from ..export import write
    return write(rendered, out_dir, known=set(SERVE_EXPORT_FILES))


def export_plan(engine: str, plan: ServePlan, model: ModelSpec, model_id: str,
                out_dir: str | Path, cluster: Cluster, max_len: int,
                notes_: list[str] = ()) -> list[Path]:
    """Write ``launch_<engine>.sh`` and ``plan.json`` into ``out_dir``, whole or not at all."""
    return write_plan(render_plan(engine, plan, model, model_id, cluster, max_len, notes_),
                      out_dir)
