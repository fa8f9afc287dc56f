"""Exporters without the engines installed: argument names against the engines' own
sources/docs, round-trips, refusals, and the CLI. Engine-parsed checks are in
test_export_engines.py."""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

import pytest

from export_cases import DEEPSPEED, MEGATRON, TORCHTITAN, build, scenario
from meshplan.cli import main
from meshplan.errors import InputError
from meshplan.export import UnsupportedByEngine, export, render
from meshplan.export._common import script_args
from meshplan.export.megatron import megatron_args
from meshplan.export.torchtitan import torchtitan_settings
from meshplan.plan import Plan
from meshplan.scenario import Scenario, load_scenario, make_cluster
from meshplan.specs.model import ModelSpec
from meshplan.specs.workload import Workload

DATA = Path(__file__).parent / "data"


# ---- Megatron: arguments against the table read from megatron/training/arguments.py -------
def megatron_parser() -> argparse.ArgumentParser:
    """An argparse parser with the option names, arities and choices of Megatron-LM's
    arguments.py (tests/data/megatron_lm_arguments.tsv says which commit)."""
    p = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    for line in (DATA / "megatron_lm_arguments.tsv").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        opt, kind, dest, choices, typ = (line.split("\t") + ["", ""])[:5]
        kw: dict = {"dest": dest}
        if kind in ("flag", "noflag"):
            kw["action"] = "store_true" if kind == "flag" else "store_false"
        else:
            if kind == "list":
                kw["nargs"] = "+"
            if choices:
                kw["choices"] = choices.split(",")
            if typ:  # int/float as Megatron declares them: "1e4" for an int option fails
                kw["type"] = {"int": int, "float": float}[typ]
        p.add_argument(opt, **kw)
    return p


def parse_megatron(argv: list[str]) -> argparse.Namespace:
    parser = megatron_parser()
    ns, unknown = parser.parse_known_args(argv)
    assert not unknown, f"Megatron-LM does not know {unknown}"
    return ns


def test_megatron_parser_rejects_unknown_names():
    """The check can fail: a misspelled name and a bad choice are caught."""
    with pytest.raises(AssertionError):
        parse_megatron(["--tensor-parallel-size", "2"])
    with pytest.raises(argparse.ArgumentError):
        megatron_parser().parse_known_args(["--recompute-granularity", "partial"])


@pytest.mark.parametrize("case", MEGATRON, ids=[c[0] for c in MEGATRON])
def test_megatron_args_known_and_consistent(case, tmp_path):
    _, args, kw = case
    sc = build(args, kw)
    files = export(sc, "megatron", tmp_path)
    text = files[0].read_text()
    ns = parse_megatron(script_args(text))
    p, m, w = sc.plan, sc.model, sc.workload
    assert ns.tensor_model_parallel_size == str(p.tp)
    assert ns.pipeline_model_parallel_size == str(p.pp)
    assert ns.context_parallel_size == str(p.cp)
    assert int(ns.micro_batch_size) * p.dp * p.num_microbatches(w) == int(ns.global_batch_size)
    # Megatron derives dp from the world size: world / (tp*pp*cp) must be the plan's dp
    assert p.world_size // (int(ns.tensor_model_parallel_size) * int(ns.pipeline_model_parallel_size)
                            * int(ns.context_parallel_size)) == p.dp
    assert int(ns.num_layers) == m.layers and int(ns.hidden_size) == m.hidden
    assert ns.sequence_parallel == p.sequence_parallel
    assert ns.use_distributed_optimizer == (p.zero == 1)
    assert ns.use_megatron_fsdp == (p.zero >= 2)
    if m.is_moe:
        assert int(ns.num_experts) == m.moe_experts
        assert int(ns.expert_model_parallel_size) == p.ep
        assert int(ns.expert_tensor_parallel_size) == p.etp
        if ns.moe_layer_freq:  # Megatron evaluates the pattern as a Python list expression
            assert eval(ns.moe_layer_freq) == [int(m.layer_is_moe(i)) for i in range(m.layers)]
    split = p.layer_split(m)
    if ns.pipeline_model_parallel_layout:
        stages = ns.pipeline_model_parallel_layout.split("|")
        assert len(stages) == p.pp * p.vpp
        counts = [sum(int(tok[2:]) for tok in s.split(",") if tok.startswith("t*")) for s in stages]
        assert counts == split
        assert stages[0].startswith("E") and stages[-1].endswith("L")
    elif p.vpp > 1:
        assert int(ns.num_layers_per_virtual_pipeline_stage) * p.pp * p.vpp == m.layers
    assert (ns.fp8 is not None) == (w.precision == "fp8")
    assert ns.fp16 == (w.precision == "fp16") and ns.bf16 == (w.precision != "fp16")
    assert "torchrun --nnodes" in text and "pretrain_gpt.py" in text


def test_megatron_selective_is_attention_core():
    """meshplan's selective recompute (Korthikanti et al.) = Megatron's core_attn module."""
    sc = scenario("llama3.1-8b", "8xH100-SXM-80GB", 4096, 64, dp=8, recompute="selective")
    ns = parse_megatron([x for f, v in megatron_args(sc)[0] for x in (f, *v)])
    assert ns.recompute_granularity == "selective" and ns.recompute_modules == ["core_attn"]


def test_megatron_launch_script_nodes(tmp_path):
    sc = scenario("llama3.1-70b", "64xH100-SXM-80GB", 8192, 512, dp=2, tp=8, pp=4)
    text = export(sc, "megatron", tmp_path)[0].read_text()
    assert "NNODES=8" in text and "GPUS_PER_NODE=8" in text
    assert all(f"NODE_RANK={i} " in text for i in range(8))


# ---- torchtitan --------------------------------------------------------------------------
# torch.distributed.pipelining.schedules.get_schedule_class accepts these names
# (torch 2.13 schedules.py, _PipelineSchedule registry); torchtitan passes them through.
TORCH_SCHEDULES = {"1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble",
                   "ZBVZeroBubble", "DualPipeV"}
# Field names of torchtitan 0.3 ParallelismConfig / TrainingConfig / CompileConfig
# (torchtitan/config/configs.py of the 0.3.0 release).
TT_FIELDS = {
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree",
                    "fsdp_reshard_after_forward", "tensor_parallel_degree",
                    "enable_sequence_parallel", "pipeline_parallel_degree",
                    "module_fqns_per_model_part", "pipeline_parallel_schedule",
                    "pipeline_parallel_microbatch_size", "context_parallel_degree",
                    "expert_parallel_degree"},
    "training": {"local_batch_size", "global_batch_size", "seq_len", "disable_cuda_graphs"},
    "compile": {"enable", "enable_async_tensor_parallel", "components", "backend"},
}


@pytest.mark.parametrize("case", TORCHTITAN, ids=[c[0] for c in TORCHTITAN])
def test_torchtitan_settings(case, tmp_path):
    _, args, kw = case
    sc = build(args, kw)
    s, _ = torchtitan_settings(sc)
    p, w = sc.plan, sc.workload
    for sec, names in TT_FIELDS.items():
        assert set(s[sec]) <= names, set(s[sec]) - names
    par = s["parallelism"]
    # torchtitan's ParallelDims rule: dp_replicate * dp_shard * cp * tp * pp == world size
    assert (par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
            * par["context_parallel_degree"] * par["tensor_parallel_degree"]
            * par["pipeline_parallel_degree"]) == p.world_size
    # batch: local batch * batch-mesh (dp) * gradient accumulation = global
    local = s["training"]["local_batch_size"]
    assert w.global_batch % (local * p.dp) == 0
    if p.pp > 1:
        assert par["pipeline_parallel_schedule"] in TORCH_SCHEDULES
        assert local // par["pipeline_parallel_microbatch_size"] == p.num_microbatches(w)
        fqns = par["module_fqns_per_model_part"]
        assert len(fqns) == p.pp * p.vpp
        flat = [n for stage in fqns for n in stage]
        assert flat == (["tok_embeddings"] + [f"layers.{i}" for i in range(sc.model.layers)]
                        + ["norm", "lm_head"])
        assert [sum(n.startswith("layers.") for n in st) for st in fqns] == p.layer_split(sc.model)
    else:
        assert local == p.micro_batch
    files = export(sc, "torchtitan", tmp_path)
    module = (tmp_path / "torchtitan_job.py").read_text()
    compile(module, "torchtitan_job.py", "exec")  # valid Python
    assert "def meshplan_job():" in module
    assert script_args((tmp_path / "torchtitan_launch.sh").read_text()) == [
        "--module", "torchtitan_job", "--config", "meshplan_job"]
    assert len(files) == 2


# ---- DeepSpeed -----------------------------------------------------------------------------
# Top-level keys documented at https://www.deepspeed.ai/docs/config-json/ (and
# "tensor_parallel" in the AutoTP training tutorial).
DS_KEYS = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
           "gradient_clipping", "steps_per_print", "bf16", "fp16", "optimizer",
           "zero_optimization", "tensor_parallel", "pipeline", "activation_checkpointing",
           # Ulysses: read by deepspeed.initialize (deepspeed/__init__.py) to build its mesh
           "sequence_parallel_size", "data_parallel_size"}
DS_ZERO_KEYS = {"stage", "overlap_comm", "contiguous_gradients", "reduce_scatter",
                "offload_optimizer"}


@pytest.mark.parametrize("case", DEEPSPEED, ids=[c[0] for c in DEEPSPEED])
def test_deepspeed_config(case, tmp_path):
    _, args, kw = case
    sc = build(args, kw)
    export(sc, "deepspeed", tmp_path)
    cfg = json.loads((tmp_path / "ds_config.json").read_text())
    p = sc.plan
    assert set(cfg) <= DS_KEYS
    assert set(cfg["zero_optimization"]) <= DS_ZERO_KEYS
    # DeepSpeed's batch rule (runtime/config.py _batch_assertion); AutoTP writes micro and
    # gas only (without an mpu DeepSpeed's dp is every rank: test_export_engine_rules.py)
    assert cfg.get("train_batch_size", sc.workload.global_batch) == sc.workload.global_batch
    assert sc.workload.global_batch == (cfg["train_micro_batch_size_per_gpu"]
                                        * cfg["gradient_accumulation_steps"] * p.dp)
    assert cfg["zero_optimization"]["stage"] == p.zero
    assert ("offload_optimizer" in cfg["zero_optimization"]) == p.offload_optimizer
    assert cfg.get("pipeline", {}).get("stages", 1) == p.pp
    assert cfg.get("tensor_parallel", {}).get("autotp_size", 1) == p.tp
    assert script_args((tmp_path / "deepspeed_launch.sh").read_text()) == [
        "--deepspeed", "--deepspeed_config", "ds_config.json"]


# ---- refusals ------------------------------------------------------------------------------
REFUSED = [
    ("megatron", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=4, pp=4, vpp=2, schedule="zb_v"), "schedule"),
    ("megatron", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=4, pp=4, schedule="gpipe"), "schedule"),
    ("megatron", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=4, tp=2, pp=2, order="dp-tp-cp-pp"), "order"),
    ("megatron", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=16, zero=3, hsdp_shard=8), "hsdp_shard"),
    ("torchtitan", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=16, zero=1), "zero"),
    ("torchtitan", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=8, pp=2, schedule="zb_h1", zero=3), "schedule"),
    ("torchtitan", ("gpt2", "8xH100-SXM-80GB", 1024, 64), dict(dp=8, zero=3), "model"),
    ("torchtitan", ("tiny-moe", "8xH100-SXM-80GB", 256, 64), dict(dp=8, zero=3), "model"),
    ("torchtitan", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=8, cp=2, zero=3, cp_kind="all_to_all"), "cp_kind"),
    ("torchtitan", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, "fp16"), dict(dp=16, zero=3), "precision"),
    ("torchtitan", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=16, zero=3, offload_optimizer=True), "offload_optimizer"),
    ("torchtitan", ("qwen3-30b-a3b", "32xH100-SXM-80GB", 4096, 256), dict(dp=16, tp=2, ep=4, etp=2, zero=3), "etp"),
    ("deepspeed", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=8, pp=2, zero=2), "zero"),
    ("deepspeed", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=8, tp=2), "sequence_parallel"),
    ("deepspeed", ("llama3.1-70b", "48xH100-SXM-80GB", 8192, 96), dict(dp=8, pp=6), "pp"),
    ("deepspeed", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, "fp8"), dict(dp=16), "precision"),
    ("deepspeed", ("mixtral-8x7b", "16xH100-SXM-80GB", 4096, 64), dict(dp=16, ep=8), "ep"),
    ("deepspeed", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=4, pp=4, vpp=2), "schedule"),
    ("deepspeed", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=16, recompute="selective"), "recompute"),
    ("deepspeed", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=16, zero=3, hsdp_shard=8), "hsdp_shard"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(REFUSED)])
def test_unsupported_feature_is_refused_and_nothing_written(case, tmp_path):
    engine, args, kw, feature = case
    sc = build(args, kw)
    out = tmp_path / "out"
    with pytest.raises(UnsupportedByEngine) as e:
        export(sc, engine, out)
    assert e.value.feature == feature
    assert isinstance(e.value, InputError)
    assert "cannot express" in str(e.value) and feature in str(e.value)
    assert not out.exists()


def test_export_needs_a_plan_and_a_known_engine(tmp_path):
    sc = scenario("llama3.1-8b", "8xH100-SXM-80GB", 4096, 64, dp=8)
    with pytest.raises(InputError, match="engine"):
        export(sc, "nemo", tmp_path / "x")
    with pytest.raises(InputError, match="plan"):
        export(Scenario(sc.model, sc.cluster, sc.workload, None), "megatron", tmp_path / "x")
    with pytest.raises(InputError, match="must equal the number of GPUs"):
        export(Scenario(sc.model, make_cluster("16xH100-SXM-80GB"), sc.workload, sc.plan),
               "megatron", tmp_path / "x")
    assert not (tmp_path / "x").exists()


# ---- meshplan's own plan file ------------------------------------------------------------------
ROUND_TRIP = [
    scenario("llama3.1-70b", "64xH100-SXM-80GB", 8192, 512, dp=2, tp=8, pp=4, vpp=2, zero=3,
             hsdp_shard=1, recompute="selective", schedule="interleaved_zb", tp_comm_overlap=True),
    scenario("deepseek-v3", "256xH100-SXM-80GB", 4096, 1024, "fp8", dp=32, pp=8, vpp=2, ep=32,
             schedule="dualpipev", offload_optimizer=True, order="tp-cp-pp-dp"),
    Scenario(ModelSpec("custom", layers=6, hidden=96, heads=6, kv_heads=3, ffn=288, vocab=1000,
                       mlp="gelu", norm="layernorm", linear_bias=True, position="learned",
                       max_position=512, description="a \"quoted\" model"),
             make_cluster("12xH100-SXM-80GB", gpus_per_node=4, nic_gbps_per_gpu=200),
             Workload(512, 48, "fp16", "sgd", "bf16"),
             Plan(dp=2, tp=3, pp=2, cp=1, micro_batch=2, cp_kind="all_to_all",
                  overlap_grad_reduce=False, sequence_parallel=False)),
]


@pytest.mark.parametrize("sc", ROUND_TRIP, ids=["llama70b", "deepseek", "inline-model"])
def test_meshplan_plan_round_trips(sc, tmp_path):
    files = export(sc, "meshplan", tmp_path)
    assert [f.name for f in files] == ["plan.toml"]
    tomllib.loads(files[0].read_text())
    back = load_scenario(files[0])
    assert back == sc
    assert back.model.description == sc.model.description


def test_meshplan_plan_round_trips_custom_gpu(tmp_path):
    src = tmp_path / "my_gpus.toml"
    src.write_text('[gpu.MyGPU]\npeak_tflops = {bf16 = 500, fp8 = 1000}\nmemory_gib = 96\n'
                   'memory_tb_per_s = 4\nscaleup_gb_per_s = 300\ngpus_per_node = 4\n'
                   'nic_gbps = 200\ngeneration = "hopper"\n')
    sc = Scenario(load_scenario_model(), make_cluster("8xMyGPU", gpu_file=src),
                  Workload(4096, 64), Plan(dp=8))
    files = export(sc, "meshplan", tmp_path / "out")
    assert {f.name for f in files} == {"plan.toml", "gpus.toml"}
    assert load_scenario(tmp_path / "out" / "plan.toml") == sc


def load_scenario_model():
    from meshplan.specs.catalog.presets import load_model
    return load_model("llama3.1-8b")


# ---- CLI -------------------------------------------------------------------------------------
def test_cli_export_from_plan_file_and_flags(tmp_path, capsys):
    sc = scenario("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, dp=8, tp=2, zero=3)
    plan_file = export(sc, "meshplan", tmp_path / "p")[0]
    assert main(["export", str(plan_file), "--to", "torchtitan", "--out", str(tmp_path / "tt")]) == 0
    assert (tmp_path / "tt" / "torchtitan_job.py").exists()
    # flags on top of the file override its [plan]
    assert main(["export", str(plan_file), "--to", "megatron", "--out", str(tmp_path / "mg"),
                 "--tp", "4", "--dp", "4"]) == 0
    ns = parse_megatron(script_args((tmp_path / "mg" / "megatron_launch.sh").read_text()))
    assert ns.tensor_model_parallel_size == "4"
    # scenario and plan flags only
    assert main(["export", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
                 "--global-batch", "64", "--dp", "8", "--zero", "3", "--to", "deepspeed",
                 "--out", str(tmp_path / "ds")]) == 0
    assert json.loads((tmp_path / "ds" / "ds_config.json").read_text())["zero_optimization"]["stage"] == 3


def test_cli_refusal_is_one_line_exit_2_no_output(tmp_path, capsys):
    rc = main(["export", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len", "8192",
               "--global-batch", "64", "--dp", "16", "--zero", "1", "--to", "torchtitan",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "torchtitan" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
