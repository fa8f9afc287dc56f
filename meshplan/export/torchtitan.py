"""torchtitan 0.3: a config_registry module and the torchrun line that runs it.

torchtitan 0.3 no longer reads TOML job files: a job is a Python function returning a
``Trainer.Config``, chosen with ``--module MODULE --config FUNCTION`` (see
``torchtitan/config/manager.py``). meshplan writes ``torchtitan_job.py`` whose function
``meshplan_job()`` starts from torchtitan's own registered config for the model and sets
the plan on it, and ``torchtitan_launch.sh`` that runs
``torchrun -m torchtitan.train --module torchtitan_job --config meshplan_job``.

Mapping (field names of torchtitan.config.ParallelismConfig / TrainingConfig):
- data parallel: zero 0 = replicate only (dp_replicate = dp, dp_shard = 1);
  zero 2 = FSDP2 with ``fsdp_reshard_after_forward="never"`` (ZeRO-2: weights stay
  gathered from forward to backward); zero 3 = FSDP2 with ``"always"``. HSDP: dp_shard =
  shard group / cp, dp_replicate = dp*cp / shard group (torchtitan shards over
  dp_shard*cp). ZeRO-1 (optimizer-only sharding) has no torchtitan equivalent: refused.
- pipeline: the schedule names of torch.distributed.pipelining (get_schedule_class), the
  layer split written out as ``module_fqns_per_model_part`` (one list per virtual stage,
  the same numbering as Plan.chunk_of); ZB-H1 on one chunk per rank is not in torch:
  refused.
- micro-batches: with pp > 1 ``local_batch_size`` = global batch / dp, split into
  ``pipeline_parallel_microbatch_size`` pieces; without pp ``local_batch_size`` = the micro
  batch and gradient accumulation = global / (local * dp).
- fp8: ``Float8LinearConverter`` (torchao rowwise) on the model, with torch.compile on.
"""

from __future__ import annotations

import pprint

from ..scenario import Scenario
from ..engines import UnsupportedByEngine, torchtitan_fsdp
from . import Rendered
from ._common import header, launch_script
from .torchtitan_models import MODELS, custom_model, torchtitan_model_missing  # noqa: F401
from .torchtitan_models import torchtitan_model as model_entry

SCHEDULES = {  # meshplan -> torch.distributed.pipelining schedule name
    "gpipe": "GPipe", "1f1b": "1F1B", "interleaved_1f1b": "Interleaved1F1B",
    "looped_bfs": "LoopedBFS", "interleaved_zb": "InterleavedZeroBubble",
    "zb_v": "ZBVZeroBubble", "dualpipev": "DualPipeV",
}


def torchtitan_model(sc: Scenario) -> tuple[str, str, str, dict]:
    """(module, config_registry function, flavour, registry kwargs); a Llama-family model
    outside the registry gets the flavour "meshplan", defined in the job itself."""
    entry = model_entry(sc.model)
    if entry is not None:
        return entry
    custom = custom_model(sc.model)
    if custom is None:
        raise UnsupportedByEngine("torchtitan", "model", sc.model.name,
                                  torchtitan_model_missing(sc.model))
    module, shape = custom
    if module == "llama3":
        base = "llama3_8b"
    else:  # the base job of the registered Qwen3 model nearest in kind
        base = "qwen3_30b_a3b" if shape["num_experts"] else "qwen3_0_6b"
    return (module, base, "meshplan", {})


# The job's own flavour for a Llama-family shape: torchtitan's llama3 layer configs and
# parameter inits (torchtitan/models/llama3/__init__.py), sized by meshplan.
CUSTOM_LLAMA3 = '''
from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
from torchtitan.models.common.config_utils import (get_attention_config, make_ffn_config,
                                                   make_gqa_config)
from torchtitan.models.llama3 import (_EMBEDDING_INIT, _EMBEDDING_SKIP_INIT, _LINEAR_INIT,
                                      _NORM_INIT, _depth_init, _output_linear_init,
                                      Llama3Model, llama3_configs)
from torchtitan.models.llama3.model import Llama3TransformerBlock

SHAPE = {shape}


def meshplan_model(attn_backend="flex", tp_gemm_backend="default"):
    s = SHAPE
    dim, eps, vocab = s["dim"], s["norm_eps"], s["vocab_size"]
    rope = ComplexRoPE.Config(dim=s["head_dim"], max_seq_len={max_seq_len}, theta=s["rope_theta"],
                              **s["rope"])
    layers = [Llama3TransformerBlock.Config(
        attention_norm=RMSNorm.Config(normalized_shape=dim, eps=eps, param_init=_NORM_INIT),
        ffn_norm=RMSNorm.Config(normalized_shape=dim, eps=eps, param_init=_NORM_INIT),
        attention=make_gqa_config(
            dim=dim, n_heads=s["n_heads"], n_kv_heads=s["n_kv_heads"], head_dim=s["head_dim"],
            wqkv_param_init=_LINEAR_INIT, wo_param_init=_depth_init(i),
            inner_attention=get_attention_config(attn_backend), fuse_qkv=True, rope=rope,
            tp_gemm_backend=tp_gemm_backend),
        feed_forward=make_ffn_config(
            dim=dim, hidden_dim=s["hidden_dim"], w1_param_init=_LINEAR_INIT,
            w2w3_param_init=_depth_init(i), tp_gemm_backend=tp_gemm_backend),
    ) for i in range(s["n_layers"])]
    return Llama3Model.Config(
        dim=dim, vocab_size=vocab, enable_weight_tying=s["tied"],
        tok_embeddings=Embedding.Config(
            num_embeddings=vocab, embedding_dim=dim,
            param_init=_EMBEDDING_SKIP_INIT if s["tied"] else _EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=dim, eps=eps, param_init=_NORM_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab,
                              param_init=_output_linear_init(dim)),
        layers=layers)


llama3_configs["meshplan"] = meshplan_model
'''

# The same for a Qwen3-family shape (dense, or MoE in every layer): torchtitan's qwen3
# layer builders (torchtitan/models/qwen3/__init__.py).
CUSTOM_QWEN3 = '''
from torchtitan.models.common import CosSinRoPE, Embedding, Linear
from torchtitan.models.qwen3 import (_EMBEDDING_INIT, _EMBEDDING_SKIP_INIT, _LINEAR_INIT,
                                     _build_qwen3_layers, _build_qwen3_moe_layers, _qwen3_norm,
                                     Qwen3Model, qwen3_configs)

SHAPE = {shape}


def meshplan_model(attn_backend="flex", moe_comm_backend="standard"):
    s = SHAPE
    dim, vocab = s["dim"], s["vocab_size"]
    common = dict(fuse_qkv=True, n_layers=s["n_layers"], dim=dim, n_heads=s["n_heads"],
                  n_kv_heads=s["n_kv_heads"], head_dim=s["head_dim"], attn_backend=attn_backend,
                  rope=CosSinRoPE.Config(dim=s["head_dim"], max_seq_len={max_seq_len},
                                         theta=s["rope_theta"]))
    if s["num_experts"]:
        layers = _build_qwen3_moe_layers(**common, moe_hidden_dim=s["moe_hidden_dim"],
                                         num_experts=s["num_experts"], top_k=s["top_k"],
                                         moe_comm_backend=moe_comm_backend)
    else:
        layers = _build_qwen3_layers(**common, hidden_dim=s["hidden_dim"])
    return Qwen3Model.Config(
        vocab_size=vocab, dim=dim, norm=_qwen3_norm(dim), enable_weight_tying=s["tied"],
        tok_embeddings=Embedding.Config(
            num_embeddings=vocab, embedding_dim=dim,
            param_init=_EMBEDDING_SKIP_INIT if s["tied"] else _EMBEDDING_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab, param_init=_LINEAR_INIT),
        layers=layers)


qwen3_configs["meshplan"] = meshplan_model
'''
CUSTOM = {"llama3": CUSTOM_LLAMA3, "qwen3": CUSTOM_QWEN3}


def stage_fqns(split: list[int]) -> list[list[str]]:
    """Module names per virtual stage, in torchtitan's naming (tok_embeddings, layers.i,
    norm, lm_head; see torchtitan/distributed/pipeline_parallel.py)."""
    out, first = [], 0
    for c, n in enumerate(split):
        names = [f"layers.{i}" for i in range(first, first + n)]
        first += n
        if c == 0:
            names.insert(0, "tok_embeddings")
        if c == len(split) - 1:
            names += ["norm", "lm_head"]
        out.append(names)
    return out


def torchtitan_settings(sc: Scenario) -> tuple[dict, list[str]]:
    """The values set on the config: {"training": {...}, "parallelism": {...},
    "compile": {...}, "activation_checkpoint": None|"full"|"selective", "float8": bool},
    plus notes. Raises UnsupportedByEngine."""
    p, w = sc.plan, sc.workload
    notes: list[str] = []
    # refusals: meshplan/engines.py (render() checks them before this runs)
    dpcp = p.dp * p.cp
    replicate, shard = torchtitan_fsdp(p)
    reshard = {0: "default", 1: "default", 2: "never", 3: "always"}[p.zero]
    m = p.num_microbatches(w)
    if p.pp > 1:
        training = {"local_batch_size": w.global_batch // p.dp, "global_batch_size": w.global_batch,
                    "seq_len": w.seq_len}
    else:
        training = {"local_batch_size": p.micro_batch, "global_batch_size": w.global_batch,
                    "seq_len": w.seq_len}
    if p.pp > 1 or p.ep > 1:
        # torchtitan/trainer.py:179-210 (Trainer.Config._validate_cuda_graphs) refuses CUDA
        # graphs with pipeline parallelism, and with expert parallelism through the
        # AllToAllTokenDispatcher the models use (it synchronises with the CPU)
        training["disable_cuda_graphs"] = True
    par = {"data_parallel_replicate_degree": replicate, "data_parallel_shard_degree": shard,
           "fsdp_reshard_after_forward": reshard, "tensor_parallel_degree": p.tp,
           "enable_sequence_parallel": bool(p.sequence_parallel),
           "pipeline_parallel_degree": p.pp, "context_parallel_degree": p.cp,
           "expert_parallel_degree": p.ep}
    if p.pp > 1:
        par["pipeline_parallel_schedule"] = SCHEDULES[p.schedule]
        par["pipeline_parallel_microbatch_size"] = p.micro_batch
        par["module_fqns_per_model_part"] = stage_fqns(p.layer_split(sc.model))
    fp8 = w.precision == "fp8"
    compile_ = {"enable": bool(fp8 or p.tp_comm_overlap),
                "enable_async_tensor_parallel": bool(p.tp_comm_overlap and p.tp > 1)}
    if compile_["enable"]:
        # async TP and the fp8 converter compile the model: torchtitan/config/configs.py:303-310
        # (CompileConfig) needs 'model' in components; a base config may list only 'loss'
        # (deepseek_v3_671b: models/deepseek_v3/config_registry.py:241)
        compile_["components"] = ["model", "loss"]
    if p.recompute == "selective":
        notes.append("torchtitan's selective AC is op-level (saves matmul outputs, recomputes "
                     "every second matmul), not Megatron's attention-core recompute")
    if not (p.overlap_grad_reduce and p.overlap_param_gather) and dpcp > 1:
        notes.append("FSDP2 always overlaps its all-gathers and reduce-scatters; the plan's "
                     "overlap_*=false cannot be set")
    # fp8: rowwise, the only recipe torchtitan's Float8LinearConverter takes; the commands
    # cost a torchtitan plan with it (engines.run_by) and refuse any other (scenario_violations)
    if fp8 and sc.model.is_moe:
        notes.append("Float8LinearConverter converts the dense linear layers; expert GEMMs stay bf16")
    settings = {"training": training, "parallelism": par, "compile": compile_,
                "activation_checkpoint": None if p.recompute == "none" else p.recompute,
                "float8": fp8, "microbatches": m}
    return settings, notes


def _py(v) -> str:
    return pprint.pformat(v, width=88, compact=True).replace("\n", "\n        ")


def torchtitan_module(sc: Scenario, settings: dict, notes: list[str]) -> str:
    mod, fn, flavor, kw = torchtitan_model(sc)
    doc = ["torchtitan 0.3 job for a meshplan plan (torchtitan_launch.sh runs it).", ""]
    doc += [s.strip() for s in header(sc, "torchtitan_job.py", comment="")]
    doc += ["", "Run: torchrun ... -m torchtitan.train --module torchtitan_job --config meshplan_job",
            "(with this file's folder on PYTHONPATH)."]
    doc += [f"note: {n}" for n in notes]
    # the docstring holds names from the user's files (a model folder's, a GPU's): a quote
    # or backslash in one is escaped, so that '"""' in a name cannot end the docstring and
    # run the rest of the name as Python on every rank
    doc = [x.replace("\\", "\\\\").replace('"', '\\"') for x in doc]
    lines = ['"""' + doc[0], *doc[1:]]
    lines += ['"""', "", f"from torchtitan.models.{mod} import model_registry",
              f"from torchtitan.models.{mod}.config_registry import {fn}"]
    shape = custom_model(sc.model)[1] if flavor == "meshplan" else None
    ac = settings["activation_checkpoint"]
    if ac:
        cls = "FullAC" if ac == "full" else "SelectiveAC"
        lines.append(f"from torchtitan.distributed.activation_checkpoint import {cls}")
    if settings["float8"]:
        lines.append("from torchtitan.components.quantization import Float8LinearConverter")
    if shape is not None:
        lines.insert(lines.index('"""', 1) + 2, "import os\n")
        lines += CUSTOM[mod].format(shape=pprint.pformat(shape, width=88, sort_dicts=False),
                                      max_seq_len=max(sc.workload.seq_len, 8192)).split("\n")
    lines += ["", "", "def meshplan_job():", f"    config = {fn}()"]
    kwargs = "".join(f", {k}={_py(v)}" for k, v in kw.items())
    if settings["float8"]:
        lines.append(f"    config.model_spec = model_registry({flavor!r}{kwargs}, converters=["
                     "Float8LinearConverter.Config(model_compile_enabled=True, "
                     "recipe_name='rowwise')])")
    else:
        lines.append(f"    config.model_spec = model_registry({flavor!r}{kwargs})")
    if shape is not None:  # the base config's loss is sized for its own model's vocabulary
        lines.append("    config.loss.loss_fn.global_vocab_size = config.model_spec.model.vocab_size")
        lines.append("    config.hf_assets_path = os.environ.get('HF_ASSETS_PATH', "
                     "config.hf_assets_path)  # this model's tokenizer")
    for section in ("training", "parallelism", "compile"):
        for k, v in settings[section].items():
            lines.append(f"    config.{section}.{k} = {_py(v)}")
    if ac is None:
        lines.append("    config.activation_checkpoint = None")
    else:
        lines.append(f"    config.activation_checkpoint = {cls}.Config()")
    lines += ["    return config", ""]
    return "\n".join(lines)


def render_torchtitan(sc: Scenario) -> Rendered:
    flavor = torchtitan_model(sc)[2]
    settings, notes = torchtitan_settings(sc)
    if flavor == "meshplan":
        notes.append(f"{sc.model.name} is built by the job itself (torchtitan's own layers, "
                     "sized as planned); set HF_ASSETS_PATH to the folder of its tokenizer")
    module = torchtitan_module(sc, settings, notes)
    script = launch_script(
        sc, "torchtitan_launch.sh", "torchtitan_launch.sh: torchtitan 0.3 training for this plan",
        [("--module", ["torchtitan_job"]), ("--config", ["meshplan_job"])],
        "-m torchtitan.train", notes,
        extra_comments=["torchtitan_job.py (next to this script) holds the plan; download the "
                        "model's tokenizer into the hf_assets_path that torchtitan's config names."])
    script = script.replace("set -euo pipefail\n",
                            'set -euo pipefail\nexport PYTHONPATH="$(cd "$(dirname "$0")" && pwd)'
                            '${PYTHONPATH:+:$PYTHONPATH}"\n', 1)
    return Rendered("torchtitan", {"torchtitan_job.py": module, "torchtitan_launch.sh": script},
                    {"torchtitan_launch.sh"}, notes)
