"""Exports parsed back by the engines' own configuration code, where installed.

Install (no GPU, no other torch): see the README, "Checking with the engines".
Each engine's tests skip with the reason when its package is missing.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import socket
import sys
from pathlib import Path

import pytest

from export_cases import DEEPSPEED, MEGATRON, TORCHTITAN, build, scenario
from meshplan.engines import engine_violations
from meshplan.export import export
from meshplan.export._common import script_args
from meshplan.export.torchtitan import MODELS, stage_fqns
from meshplan.plan import Plan
from meshplan.scenario import Scenario, make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload
from test_export import parse_megatron


# ---- Megatron-Core: TransformerConfig built the way Megatron-LM builds it ---------------------
def _num(v):
    if isinstance(v, str):
        for cast in (int, float):
            try:
                return cast(v)
            except ValueError:
                pass
    return v


def _noflags() -> dict[str, str]:
    rows = [line.split("\t") for line in
            (Path(__file__).parent / "data" / "megatron_lm_arguments.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    return {r[0]: r[2] for r in rows if r[1] == "noflag"}


def megatron_transformer_config(argv: list[str]):
    """TransformerConfig from pretrain_gpt.py arguments, following
    core_transformer_config_from_args and validate_args in megatron/training/arguments.py:
    every argument whose dest names a config field is passed through, plus the renames
    and derived values that function applies."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from megatron.core.transformer import MLATransformerConfig, TransformerConfig

    ns = parse_megatron(argv)
    args = {k: _num(v) for k, v in vars(ns).items()}
    for k in ("moe_router_load_balancing_type", "moe_aux_loss_coeff", "cp_comm_type"):
        if isinstance(args.get(k), list) and len(args[k]) == 1:
            args[k] = _num(args[k][0])
    if isinstance(args.get("moe_layer_freq"), str):
        args["moe_layer_freq"] = eval(args["moe_layer_freq"])  # moe_freq_type
    if args.get("num_layers_per_virtual_pipeline_stage"):
        args["virtual_pipeline_model_parallel_size"] = (
            args["num_layers"] // args["pipeline_model_parallel_size"]
            // args["num_layers_per_virtual_pipeline_stage"])
    cls = MLATransformerConfig if args["multi_latent_attention"] else TransformerConfig
    names = {f.name for f in dataclasses.fields(cls)}
    kw = {k: v for k, v in args.items() if k in names and v is not None}
    for opt, k in _noflags().items():
        if opt not in argv:
            kw.pop(k, None)  # a store_false option not given: the config's own default applies
    kw["num_moe_experts"] = args.get("num_experts")
    kw["num_query_groups"] = args["num_query_groups"] if args["group_query_attention"] else None
    params_dtype = torch.float16 if args["fp16"] else torch.bfloat16
    kw["params_dtype"] = params_dtype
    kw["pipeline_dtype"] = params_dtype
    kw["num_layers_in_first_pipeline_stage"] = args.get("decoder_first_pipeline_num_layers")
    kw["num_layers_in_last_pipeline_stage"] = args.get("decoder_last_pipeline_num_layers")
    if args["swiglu"]:
        kw["gated_linear_unit"] = True
        kw["activation_func"] = F.silu
    return cls(**kw), args


@pytest.mark.parametrize("case", MEGATRON, ids=[c[0] for c in MEGATRON])
def test_megatron_core_builds_transformer_config(case, tmp_path):
    pytest.importorskip("megatron.core", reason="megatron-core not installed (pip install "
                        "--no-deps megatron-core==0.16.1)")
    _, a, kw = case
    sc = build(a, kw)
    export(sc, "megatron", tmp_path)
    cfg, args = megatron_transformer_config(script_args((tmp_path / "megatron_launch.sh").read_text()))
    p, m = sc.plan, sc.model
    assert (cfg.tensor_model_parallel_size, cfg.pipeline_model_parallel_size,
            cfg.context_parallel_size) == (p.tp, p.pp, p.cp)
    assert cfg.num_layers == m.layers and cfg.hidden_size == m.hidden
    assert cfg.sequence_parallel == p.sequence_parallel
    if p.recompute_modules:  # Megatron-Core's own checks on the module list passed
        assert cfg.recompute_granularity == "selective"
        assert sorted(cfg.recompute_modules) == sorted(p.recompute_modules.split("+"))
    if m.is_moe:
        assert cfg.num_moe_experts == m.moe_experts and cfg.moe_router_topk == m.moe_topk
        assert cfg.expert_model_parallel_size == p.ep
        assert cfg.expert_tensor_parallel_size == p.etp
    if args.get("pipeline_model_parallel_layout"):
        from megatron.core.transformer.enums import LayerType
        from megatron.core.transformer.pipeline_parallel_layer_layout import (
            PipelineParallelLayerLayout)
        layout = PipelineParallelLayerLayout(args["pipeline_model_parallel_layout"], p.pp)
        layout.validate_layer_layout(m.layers, 0)
        split = p.layer_split(m)
        for r in range(p.pp):
            for v in range(p.vpp):
                decoders = sum(t == LayerType.decoder for t in layout.layout[r][v])
                assert decoders == split[p.chunk_of(r, v)]
    elif p.vpp > 1:
        assert cfg.virtual_pipeline_model_parallel_size == p.vpp


def test_megatron_core_rejects_a_wrong_value():
    """The check can fail: TransformerConfig refuses heads not divisible by tp."""
    pytest.importorskip("megatron.core", reason="megatron-core not installed")
    sc = scenario("llama3.1-8b", "8xH100-SXM-80GB", 4096, 64, dp=1, tp=8)
    from meshplan.export.megatron import megatron_args
    argv = [x for f, v in megatron_args(sc)[0] for x in (f, *v)]
    argv[argv.index("--num-attention-heads") + 1] = "30"
    with pytest.raises((ValueError, AssertionError)):
        megatron_transformer_config(argv)


# ---- torchtitan: ConfigManager parses the exported job -----------------------------------------
def _torchtitan():
    return pytest.importorskip("torchtitan.config", reason="torchtitan not installed (see "
                               "the README for the no-deps install)")


def _need_float8_gpu():
    """torchtitan's Float8LinearConverter refuses to build without an SM89+ GPU, and its
    llama3_405b() base config uses it."""
    import torch
    if not (torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)):
        pytest.skip("torchtitan builds float8 models only on an SM89+ GPU "
                    "(Float8LinearConverter); no such GPU here")


def _load_job(out: Path):
    from torchtitan.config import ConfigManager
    sys.path.insert(0, str(out))
    sys.modules.pop("torchtitan_job", None)
    try:
        return ConfigManager().parse_args(["--module", "torchtitan_job", "--config", "meshplan_job"])
    finally:
        sys.path.remove(str(out))
        sys.modules.pop("torchtitan_job", None)


@pytest.mark.parametrize("case", TORCHTITAN, ids=[c[0] for c in TORCHTITAN])
def test_torchtitan_config_manager_parses_job(case, tmp_path):
    _torchtitan()
    from torch.distributed.pipelining.schedules import get_schedule_class
    from torchtitan.distributed.parallel_dims import ParallelDims

    _, a, kw = case
    sc = build(a, kw)
    if sc.workload.precision == "fp8" or sc.model.name == "llama3.1-405b":
        _need_float8_gpu()
    export(sc, "torchtitan", tmp_path)
    cfg = _load_job(tmp_path)
    p, w = sc.plan, sc.workload
    dims = ParallelDims.from_config(cfg.parallelism, p.world_size)  # checks the product
    assert (dims.cp, dims.tp, dims.pp, dims.ep) == (p.cp, p.tp, p.pp, p.ep)
    assert dims.dp_replicate * dims.dp_shard == p.dp
    assert cfg.training.seq_len == w.seq_len
    assert cfg.training.global_batch_size == w.global_batch
    assert len(cfg.model_spec.model.layers) == sc.model.layers
    if p.pp > 1:
        get_schedule_class(cfg.parallelism.pipeline_parallel_schedule)
    ac = cfg.activation_checkpoint
    assert (ac is None) == (p.recompute == "none")
    if ac is not None:
        assert type(ac).__qualname__ == {"full": "FullAC.Config",
                                         "selective": "SelectiveAC.Config"}[p.recompute]


def test_torchtitan_rejects_an_unknown_field(tmp_path):
    """The check can fail: a misspelled field in the job is refused (slots dataclasses)."""
    _torchtitan()
    sc = build(*TORCHTITAN[0][1:])
    export(sc, "torchtitan", tmp_path)
    job = tmp_path / "torchtitan_job.py"
    job.write_text(job.read_text().replace("tensor_parallel_degree", "tensor_parallel_degre"))
    with pytest.raises(AttributeError):
        _load_job(tmp_path)


@pytest.mark.parametrize("name", list(MODELS))
def test_torchtitan_model_table_matches_shapes(name):
    """meshplan's preset -> torchtitan flavour table agrees with torchtitan's own model."""
    _torchtitan()
    mod, fn, flavor, kw = MODELS[name]
    registry = importlib.import_module(f"torchtitan.models.{mod}")
    spec = registry.model_registry(flavor, **kw)
    m = preset(name)
    cfg = spec.model
    assert len(cfg.layers) == m.layers
    assert cfg.dim == m.hidden
    assert cfg.vocab_size == m.vocab
    attn = cfg.layers[-1].attention
    assert getattr(attn, "n_heads") == m.heads
    moe = getattr(cfg.layers[-1], "moe", None)
    if m.is_moe:
        assert moe is not None
        assert moe.num_experts == m.moe_experts


def test_stage_fqns_equals_torchtitan_generator_on_even_split():
    _torchtitan()
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part
    for stages, layers in [(2, 8), (4, 16), (8, 32)]:
        ours = stage_fqns([layers // stages] * stages)
        assert ours == _generate_llm_fqn_per_model_part(stages, layers, 0, 0)


# ---- DeepSpeed: DeepSpeedConfig parses ds_config.json ----------------------------------------
class DataParallelGroup:
    """The one method of Megatron's mpu interface DeepSpeedConfig asks for its batch check."""

    def __init__(self, dp: int):
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


@pytest.fixture(scope="module")
def one_rank_group():
    """DeepSpeedConfig reads the data-parallel size from mpu only inside an initialised
    process group (otherwise it assumes 1 rank): start a 1-rank gloo group."""
    deepspeed = pytest.importorskip("deepspeed", reason="deepspeed not installed "
                                    "(DS_BUILD_OPS=0 pip install --no-deps deepspeed==0.19.8)")
    import torch.distributed as tdist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0",
           "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    # DeepSpeed's torch backend JIT-compiles its CPU shared-memory all-reduce op
    # (deepspeed/comm/torch.py build_shm_op: about 1-2 min of C++ on a clean machine, CI's
    # case) for inference_all_reduce only; the config classes never call it
    backend = importlib.import_module("deepspeed.comm.torch")  # deepspeed.comm.torch is torch
    build_shm_op = backend.build_shm_op
    backend.build_shm_op = lambda: None
    try:
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    finally:
        backend.build_shm_op = build_shm_op
    yield
    if tdist.is_initialized():
        tdist.destroy_process_group()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.mark.parametrize("case", DEEPSPEED, ids=[c[0] for c in DEEPSPEED])
def test_deepspeed_config_class_parses(case, tmp_path, one_rank_group):
    from deepspeed.runtime.config import DeepSpeedConfig

    _, a, kw = case
    sc = build(a, kw)
    export(sc, "deepspeed", tmp_path)
    p = sc.plan
    cfg = DeepSpeedConfig(str(tmp_path / "ds_config.json"), mpu=DataParallelGroup(p.dp))
    assert cfg.train_batch_size == sc.workload.global_batch
    assert cfg.gradient_accumulation_steps == p.num_microbatches(sc.workload)
    assert cfg.zero_optimization_stage == p.zero
    assert cfg.bfloat16_config.enabled == (sc.workload.precision == "bf16")
    assert cfg.float16_config.enabled == (sc.workload.precision == "fp16")
    zero = cfg.zero_config
    assert (zero.offload_optimizer is not None and zero.offload_optimizer.device == "cpu") == \
        p.offload_optimizer
    if p.pp > 1:
        assert cfg.pipeline["stages"] == p.pp
    assert cfg.tensor_parallel_config.autotp_size == (p.tp if p.tp > 1 else 0)


def test_deepspeed_rejects_an_unknown_zero_key(tmp_path, one_rank_group):
    """The check can fail: DeepSpeed's pydantic ZeRO config forbids unknown keys."""
    from deepspeed.runtime.config import DeepSpeedConfig

    sc = build(*DEEPSPEED[0][1:])
    export(sc, "deepspeed", tmp_path)
    cfg = json.loads((tmp_path / "ds_config.json").read_text())
    cfg["zero_optimization"]["overlap_com"] = True
    with pytest.raises(Exception, match="overlap_com"):
        DeepSpeedConfig(cfg, mpu=DataParallelGroup(sc.plan.dp))


# ---- torchtitan: models outside its registry (any Llama-family config.json) ------------------
def _hf_file(tmp_path, name: str, **changes) -> str:
    """A preset's config.json, changed, in a folder of its own (loaded as a user's file)."""
    from meshplan.specs.catalog.presets import _models_dir
    cfg = json.loads((_models_dir() / f"{name}.json").read_text())
    cfg.update(changes)
    d = tmp_path / "hf"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


@pytest.mark.parametrize("source,changes", [
    ("tiny-llama", {}),
    ("llama3.2-1b", {}),  # tied embeddings, rope scaling factor 32
    ("llama3.1-8b", {"num_hidden_layers": 12, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6}),
    ("llama3.1-8b", {"model_type": "mistral", "rope_scaling": None, "head_dim": 160,
                     "sliding_window": None}),  # v0.2+ configs: null; absent means 4,096 (HF default)
    ("qwen3-30b-a3b", {"num_hidden_layers": 6, "num_experts": 64, "num_experts_per_tok": 4}),
    ("qwen3-30b-a3b", {"model_type": "qwen3", "num_hidden_layers": 4, "intermediate_size": 3072,
                       "tie_word_embeddings": True}),
])
def test_torchtitan_builds_llama_family_configs_of_any_shape(source, changes, tmp_path):
    """The job's own flavour builds, on the meta device, a model with exactly meshplan's
    parameter count, norm epsilon and rotary settings."""
    _torchtitan()
    import torch
    from meshplan.specs.catalog.presets import load_model

    m = load_model(_hf_file(tmp_path, source, **changes))
    sc = Scenario(m, make_cluster("8xH100-SXM-80GB"), Workload(4096, 64), Plan(dp=8, zero=3))
    export(sc, "torchtitan", tmp_path / "out")
    cfg = _load_job(tmp_path / "out")
    mc = cfg.model_spec.model
    with torch.device("meta"):
        model = mc.build()
    assert sum(p.numel() for p in model.parameters()) == m.total_params()
    assert cfg.loss.loss_fn.global_vocab_size == m.vocab
    assert len(mc.layers) == m.layers and mc.norm.eps == m.norm_eps
    rope = mc.layers[0].attention.rope
    assert rope.theta == m.rope_theta and rope.dim == m.head_dim
    assert getattr(rope, "scaling", "none") == ("llama" if m.rope_scaling else "none")


@pytest.mark.parametrize("changes", [{}, {"quantization_config": None}])
def test_torchtitan_knows_a_registered_model_by_its_config_json(changes, tmp_path):
    """DeepSeek-V3's config.json in a folder of its own (the model named after the folder; the
    bf16 copies leave out the fp8 quantization_config) is torchtitan's registered 671B flavour:
    it was refused as a Llama-family model with latent attention, while --model deepseek-v3,
    the same file, exported."""
    _torchtitan()
    from meshplan.specs.catalog.presets import load_model
    m = load_model(_hf_file(tmp_path, "deepseek-v3", **changes))
    assert m.name != "deepseek-v3"
    sc = Scenario(m, make_cluster("256xH100-SXM-80GB"), Workload(4096, 1024),
                  Plan(dp=32, pp=8, ep=32, zero=1))
    assert engine_violations("torchtitan", sc.plan, m, sc.workload, sc.cluster) \
        == engine_violations("torchtitan", sc.plan, preset("deepseek-v3"), sc.workload, sc.cluster)
    sc = Scenario(m, sc.cluster, sc.workload, Plan(dp=32, pp=8, ep=32, zero=2))
    export(sc, "torchtitan", tmp_path / "out")
    mc = _load_job(tmp_path / "out").model_spec.model
    assert len(mc.layers) == m.layers and mc.dim == m.hidden and mc.vocab_size == m.vocab
    assert mc.layers[-1].moe.num_experts == m.moe_experts


def test_torchtitan_refusal_names_what_is_missing(tmp_path):
    from meshplan.export import UnsupportedByEngine
    from meshplan.specs.catalog.presets import load_model
    m = load_model(_hf_file(tmp_path, "deepseek-v3", n_routed_experts=64))
    sc = Scenario(m, make_cluster("8xH100-SXM-80GB"), Workload(4096, 64), Plan(dp=8, zero=3))
    with pytest.raises(UnsupportedByEngine, match="mixture-of-experts"):
        export(sc, "torchtitan", tmp_path / "x")


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_torchtitan_tp_limit_agrees_with_torchtitan(tp):
    """Qwen3-30B-A3B has 4 kv heads. torchtitan's own model config refuses a TP degree that
    does not divide them (models/common/decoder.py update_from_config); meshplan's torchtitan
    limit refuses exactly those, while Megatron-Core (which replicates a kv head over the TP
    ranks that share it, TransformerConfig: tp may be a multiple of num_query_groups) takes
    them all."""
    _torchtitan()
    from types import SimpleNamespace

    from torchtitan.config import ParallelismConfig

    mod, fn, flavor, kw = MODELS["qwen3-30b-a3b"]
    spec = importlib.import_module(f"torchtitan.models.{mod}").model_registry(flavor, **kw)
    try:
        spec.model.update_from_config(
            config=SimpleNamespace(parallelism=ParallelismConfig(tensor_parallel_degree=tp)))
        torchtitan_ok = True
    except ValueError as e:
        assert "n_kv_heads" in str(e)
        torchtitan_ok = False
    m = preset("qwen3-30b-a3b")
    plan = Plan(dp=8 // tp, tp=tp, ep=8, zero=3, sequence_parallel=True)
    w = Workload(4096, 64)
    ours = [v.field for v in engine_violations("torchtitan", plan, m, w)]
    assert ("tp" not in ours) == torchtitan_ok
    assert "tp" not in [v.field for v in engine_violations("megatron", plan, m, w)]
