"""Exports against the engines' own run-time rules: what Megatron-LM's validate_args,
Megatron-Core's configs and schedules, torchtitan's Trainer and DeepSpeed's batch check
(without an mpu, as a real run builds it) refuse, and the plans engines.py refuses for it.

Where the engine is installed its own code is the judge (TransformerConfig, OptimizerConfig,
ConfigManager + update_from_config, DeepSpeedConfig); the rules of Megatron-LM's
megatron/training/arguments.py (not in megatron-core) are copied with file and line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from export_cases import MEGATRON, TORCHTITAN, build, scenario
from meshplan.engines import UnsupportedByEngine, engine_violations
from meshplan.export import export, render
from meshplan.export._common import flatten, script_args
from meshplan.export.megatron import megatron_args
from test_export import parse_megatron

FAKE_TORCHRUN = """#!/usr/bin/env python3
import json, os, sys
json.dump({"argv": sys.argv[1:], "cdmc": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")},
          open(os.environ["ARGV_OUT"], "w"))
"""


def launch_megatron(out: Path, tmp: Path) -> tuple[list[str], str | None]:
    """Run megatron_launch.sh --mock-data with torchrun replaced, the caller's environment
    holding CUDA_DEVICE_MAX_CONNECTIONS=1; (pretrain_gpt.py arguments, the variable as the
    trainer sees it)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "torchrun").write_text(FAKE_TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    rec = tmp / "rec.json"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", ARGV_OUT=str(rec),
               CUDA_DEVICE_MAX_CONNECTIONS="1")
    p = subprocess.run(["bash", str(out / "megatron_launch.sh"), "--mock-data"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    r = json.loads(rec.read_text())
    argv = r["argv"]
    at = next(i for i, a in enumerate(argv) if a.endswith("pretrain_gpt.py"))
    return argv[at + 1:], r["cdmc"]


def validate_args_rules(ns, cdmc: str | None, tp: int, cp: int) -> list[str]:
    """The validate_args assertions the exports touch, as read in Megatron-LM's
    megatron/training/arguments.py at d98e8a64 (tests/data/megatron_lm_arguments.tsv), on a
    Hopper GPU. Returns the messages of those that fail."""
    bad = []
    ckpt = ns.ckpt_format or "torch_dist"  # add_argument default
    if ns.overlap_param_gather:  # 1024-1028
        if not (ns.use_distributed_optimizer or ns.use_megatron_fsdp):
            bad.append("--overlap-param-gather only supported with distributed optimizer")
        if not ns.overlap_grad_reduce:
            bad.append("Must use --overlap-param-gather with --overlap-grad-reduce")
    if ns.use_megatron_fsdp:  # 1166-1170
        if cdmc == "1":
            bad.append("FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.")
        if ckpt != "fsdp_dtensor":
            bad.append("Megatron-FSDP requires the `fsdp_dtensor` checkpointing format.")
    elif (tp > 1 or cp > 1) and not ns.overlap_moe_expert_parallel_comm and cdmc != "1":
        bad.append("tp/cp require CUDA_DEVICE_MAX_CONNECTIONS=1")  # 1453-1479
    if ckpt == "fsdp_dtensor" and not ns.use_megatron_fsdp:  # 1675-1676
        bad.append("--ckpt-format fsdp_dtensor is only tested with Megatron FSDP.")
    return bad


FSDP_REPRO = ("fsdp-zero3-repro", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64),
              dict(dp=16, zero=3))


@pytest.mark.parametrize("case", MEGATRON + [FSDP_REPRO], ids=[c[0] for c in MEGATRON] +
                         [FSDP_REPRO[0]])
def test_megatron_launch_passes_validate_args(case, tmp_path):
    """Bug: Megatron FSDP exports kept CUDA_DEVICE_MAX_CONNECTIONS=1 and the torch_dist
    checkpoint format, both refused by validate_args."""
    _, a, kw = case
    sc = build(a, kw)
    export(sc, "megatron", tmp_path / "out")
    argv, cdmc = launch_megatron(tmp_path / "out", tmp_path)
    assert validate_args_rules(parse_megatron(argv), cdmc, sc.plan.tp, sc.plan.cp) == []


def megatron_vp_group_ok(pp: int, m: int, group: int | None) -> bool:
    """megatron/core/pipeline_parallel/schedules.py:995-1015 (megatron-core 0.16.1),
    forward_backward_pipelining_with_interleaving, with the default group = pp
    (megatron/core/model_parallel_config.py:447-448)."""
    g = pp if group is None else group
    return pp <= g <= m and not (0 < m % g < pp)


@pytest.mark.parametrize("model,gpus,seq,batch,kw", [
    ("llama3.1-70b", "32xH100-SXM-80GB", 4096, 12,  # the search's winner: 6 micro-batches
     dict(dp=1, tp=8, pp=4, vpp=7, micro_batch=2)),
    ("llama3.1-70b", "64xH100-SXM-80GB", 4096, 20, dict(dp=2, tp=8, pp=4, vpp=2)),
    ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 40,
     dict(dp=4, tp=2, pp=2, vpp=2, schedule="looped_bfs")),
])
def test_megatron_interleaved_group_is_one_megatron_runs(model, gpus, seq, batch, kw):
    """Bug: no --microbatch-group-size-per-virtual-pipeline-stage, so Megatron-Core used
    pp and raised for 0 < m % pp < pp (m = 6 or 10 on pp = 4)."""
    sc = scenario(model, gpus, seq, batch, sequence_parallel=True, **kw)
    assert engine_violations("megatron", sc.plan, sc.model, sc.workload) == []
    ns = parse_megatron(flatten(megatron_args(sc)[0]))
    g = ns.microbatch_group_size_per_vp_stage
    m = sc.plan.num_microbatches(sc.workload)
    assert megatron_vp_group_ok(sc.plan.pp, m, None if g is None else int(g))
    if sc.plan.schedule == "interleaved_1f1b":  # torch's round: the schedule costed
        assert int(g) == m // max(1, m // sc.plan.pp)


def _refused(sc, field: str, tmp_path) -> None:
    """engines.py names ``field`` first, and the export refuses it writing nothing."""
    v = engine_violations("megatron", sc.plan, sc.model, sc.workload, sc.cluster)
    assert v and v[0].field == field, v
    with pytest.raises(UnsupportedByEngine):
        export(sc, "megatron", tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_megatron_param_gather_overlap_without_grad_overlap_refused(tmp_path):
    """Bug: --overlap-param-gather was written without --overlap-grad-reduce."""
    sc = scenario("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, dp=16, zero=1,
                  overlap_grad_reduce=False)
    ns = parse_megatron(flatten(megatron_args(sc)[0]))
    assert "Must use --overlap-param-gather with --overlap-grad-reduce" in \
        validate_args_rules(ns, "1", 1, 1)
    _refused(sc, "overlap_param_gather", tmp_path)


def _optimizer_config(sc):
    """megatron.core OptimizerConfig as Megatron-LM builds it from the arguments (its
    __post_init__ holds the precision-aware optimizer's rules)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("megatron.core", reason="megatron-core not installed")
    from megatron.core.optimizer import OptimizerConfig
    ns = parse_megatron(flatten(megatron_args(sc)[0]))
    dt = {None: torch.float32, "fp32": torch.float32, "bf16": torch.bfloat16}
    return OptimizerConfig(
        optimizer=ns.optimizer, bf16=bool(ns.bf16), fp16=bool(ns.fp16),
        use_distributed_optimizer=bool(ns.use_distributed_optimizer or ns.use_megatron_fsdp),
        use_precision_aware_optimizer=bool(ns.use_precision_aware_optimizer),
        optimizer_cpu_offload=bool(ns.optimizer_cpu_offload),
        exp_avg_dtype=dt[ns.exp_avg_dtype], exp_avg_sq_dtype=dt[ns.exp_avg_sq_dtype])


def _opt_scenario(optimizer: str, states: str, **plan):
    from meshplan.plan import Plan
    from meshplan.scenario import Scenario, make_cluster
    from meshplan.specs.catalog.presets import load_model
    from meshplan.specs.workload import Workload
    return Scenario(load_model("llama3.1-8b"), make_cluster("8xH100-SXM-80GB"),
                    Workload(4096, 64, optimizer=optimizer, optimizer_state_precision=states),
                    Plan(dp=8, **plan))


@pytest.mark.parametrize("optimizer,states,plan,field", [
    ("adamw", "bf16", dict(zero=0), "optimizer_state_precision"),
    ("sgd", "bf16", dict(zero=1), "optimizer_state_precision"),
])
def test_megatron_precision_aware_optimizer_limits(optimizer, states, plan, field, tmp_path):
    """Bug: --use-precision-aware-optimizer was written without the distributed optimizer
    or with sgd, which megatron-core's OptimizerConfig refuses."""
    sc = _opt_scenario(optimizer, states, **plan)
    with pytest.raises(AssertionError, match="precision-aware-optimizer"):
        _optimizer_config(sc)
    _refused(sc, field, tmp_path)


def test_megatron_precision_aware_optimizer_kept_where_megatron_runs_it():
    """The rules pass (adam, distributed optimizer); what megatron-core checks next is that
    Transformer Engine's FusedAdam can be imported, which it cannot here."""
    sc = _opt_scenario("adamw", "bf16", zero=1)
    assert engine_violations("megatron", sc.plan, sc.model, sc.workload) == []
    try:
        assert _optimizer_config(sc).use_precision_aware_optimizer
    except (RuntimeError, TypeError) as e:  # past the asserts: TE missing or its version
        assert "TransformerEngine" in str(e) or "Version" in str(e)


EPO = dict(dp=16, tp=2, ep=8, ep_comm_overlap=True)


@pytest.mark.parametrize("gpus,plan,core_refuses", [
    ("32xH100-SXM-80GB", dict(EPO, recompute="full"), True),
    ("64xH100-SXM-80GB", dict(EPO, pp=2), True),
    ("32xH100-SXM-80GB", dict(EPO, ep=1), True),
    # megatron-core 0.16.1 takes it; Megatron-LM main transformer_config.py ~3002 refuses
    ("32xH100-SXM-80GB", dict(EPO, recompute="selective", recompute_modules="moe"), False),
])
def test_megatron_ep_overlap_limits(gpus, plan, core_refuses, tmp_path):
    """Bug: --overlap-moe-expert-parallel-comm was written with full recomputation, with
    pp > 1 without virtual stages, with 'moe' recomputed, and with ep 1, which Megatron-Core
    refuses."""
    sc = scenario("qwen3-30b-a3b", gpus, 4096, 256, **plan)
    if core_refuses:
        pytest.importorskip("megatron.core", reason="megatron-core not installed")
        from test_export_engines import megatron_transformer_config
        with pytest.raises(AssertionError, match="overlap_moe_expert_parallel_comm|EP A2A"):
            megatron_transformer_config(flatten(megatron_args(sc)[0]))
    _refused(sc, "ep_comm_overlap", tmp_path)


def test_megatron_ep_overlap_kept_where_megatron_runs_it():
    pytest.importorskip("megatron.core", reason="megatron-core not installed")
    from test_export_engines import megatron_transformer_config
    sc = scenario("qwen3-30b-a3b", "64xH100-SXM-80GB", 4096, 256, **dict(EPO, pp=2, vpp=2))
    assert engine_violations("megatron", sc.plan, sc.model, sc.workload) == []
    cfg, _ = megatron_transformer_config(flatten(megatron_args(sc)[0]))
    assert cfg.overlap_moe_expert_parallel_comm



@pytest.mark.parametrize("gpus,recipe,modules,core_refuses", [
    ("32xH100-SXM-80GB", "", "layernorm+moe_act", True),  # Megatron's default on Hopper: delayed
    ("32xH100-SXM-80GB", "delayed", "moe_act", True),
    ("32xH100-SXM-80GB", "delayed", "layernorm", True),
    ("32xH100-SXM-80GB", "tensorwise", "layernorm+moe_act", False),
    ("32xH100-SXM-80GB", "", "core_attn", False),
    ("32xB200", "", "layernorm+moe_act", False),  # mxfp8 on Blackwell
])
def test_megatron_fp8_delayed_with_output_discarding_recompute(gpus, recipe, modules,
                                                               core_refuses, tmp_path,
                                                               monkeypatch):
    """Bug: an fp8 plan recomputing moe_act or layernorm was exported with --fp8-recipe
    delayed (named, or Megatron's default on Hopper), which Megatron-Core's TransformerConfig
    refuses ("Delayed scaling does not support moe_act and layernorm recompute for fp8")."""
    pytest.importorskip("megatron.core", reason="megatron-core not installed")
    import megatron.core.transformer.transformer_config as tc
    from test_export_engines import megatron_transformer_config
    from meshplan.plan import Plan
    from meshplan.scenario import Scenario, make_cluster
    from meshplan.specs.catalog.presets import load_model
    from meshplan.specs.workload import Workload

    monkeypatch.setattr(tc, "is_te_min_version", lambda *a, **k: True)  # a run has TE 2.6+
    sc = Scenario(load_model("qwen3-30b-a3b"), make_cluster(gpus),
                  Workload(4096, 256, "fp8", fp8_recipe=recipe),
                  Plan(dp=16, tp=2, ep=8, recompute="selective", recompute_modules=modules))
    argv = flatten(megatron_args(sc)[0])
    if core_refuses:
        with pytest.raises(ValueError, match="Delayed scaling does not support"):
            megatron_transformer_config(argv)
        _refused(sc, "recompute_modules", tmp_path)
    else:
        megatron_transformer_config(argv)
        assert engine_violations("megatron", sc.plan, sc.model, sc.workload, sc.cluster) == []


def test_search_for_megatron_leaves_out_delayed_fp8_with_moe_act():
    """The search for Megatron walks only plans it can export: on Hopper (delayed FP8 by
    default) no moe_act / layernorm rung."""
    from meshplan.search.search import _engine_filter
    from meshplan.plan import Plan
    from collections import Counter
    sc = scenario("qwen3-30b-a3b", "32xH100-SXM-80GB", 4096, 256, "fp8", dp=32)
    ok = _engine_filter("megatron", sc.model, sc.workload, Counter(), {}, sc.cluster)
    assert not ok(Plan(dp=16, tp=2, ep=8, recompute="selective", recompute_modules="moe_act"))
    assert ok(Plan(dp=16, tp=2, ep=8, recompute="selective", recompute_modules="moe"))


def megatron_parallel_state(world: int, tp: int, pp: int, cp: int, ep: int, etp: int,
                            instances: int, order: str = "tp-cp-ep-dp-pp") -> str:
    """Megatron-Core's initialize_model_parallel (megatron/core/parallel_state.py) run for
    ``world`` ranks with the process groups stubbed: "" when it builds the groups, else the
    assertion it fails."""
    pytest.importorskip("megatron.core", reason="megatron-core not installed")
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    saved = (dist.is_initialized, dist.get_world_size, dist.get_rank, ps.create_group)
    dist.is_initialized = lambda: True
    dist.get_world_size = lambda group=None: world
    dist.get_rank = lambda group=None: 0
    ps.create_group = lambda *a, **k: object()
    try:
        ps.initialize_model_parallel(
            tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
            context_parallel_size=cp, expert_model_parallel_size=ep,
            expert_tensor_parallel_size=etp, num_distributed_optimizer_instances=instances,
            create_gloo_process_groups=False, order=order)
        return ""
    except AssertionError as e:
        return str(e)
    finally:
        dist.is_initialized, dist.get_world_size, dist.get_rank, ps.create_group = saved
        ps.destroy_model_parallel()


@pytest.mark.parametrize("plan,core_refuses", [
    (dict(dp=16, ep=8, zero=1, hsdp_shard=4), True),  # 2 expert-dp ranks, 4 instances
    (dict(dp=8, tp=2, ep=16, zero=1, hsdp_shard=4), True),  # 1 expert-dp rank, 2 instances
    (dict(dp=16, ep=4, zero=1, hsdp_shard=8), False),
    (dict(dp=8, tp=2, ep=4, etp=2, zero=1, hsdp_shard=4), False),
])
def test_megatron_hsdp_instances_divide_the_expert_data_parallel_group(plan, core_refuses,
                                                                       tmp_path):
    """Bug: a MoE plan with the distributed optimizer's HSDP (zero 1, hsdp_shard) was
    exported with --num-distributed-optimizer-instances not dividing the expert
    data-parallel group, which Megatron-Core's initialize_model_parallel refuses."""
    sc = scenario("qwen3-30b-a3b", "16xH100-SXM-80GB", 4096, 256, **plan)
    p = sc.plan
    why = megatron_parallel_state(p.world_size, p.tp, p.pp, p.cp, p.ep, p.etp,
                                  p.dp * p.cp // p.hsdp_shard)
    assert bool(why) == core_refuses, why
    if core_refuses:
        assert "Expert data parallel size should be divisible" in why
        _refused(sc, "hsdp_shard", tmp_path)
    else:
        assert engine_violations("megatron", p, sc.model, sc.workload, sc.cluster) == []
        ns = parse_megatron(flatten(megatron_args(sc)[0]))
        assert int(ns.num_distributed_optimizer_instances) == p.dp * p.cp // p.hsdp_shard


@pytest.mark.parametrize("model,plan,core_refuses", [
    ("qwen3-30b-a3b", dict(dp=4, tp=2, pp=2, ep=8, order="tp-cp-pp-dp"), True),  # expert dp 1
    ("qwen3-30b-a3b", dict(dp=4, tp=2, pp=2, ep=2, order="tp-cp-pp-dp"), False),  # ep*etp == tp*cp
    ("qwen3-30b-a3b", dict(dp=4, tp=2, pp=2, ep=8), False),  # the default order ends in pp
    # a dense model: Megatron's expert groups are ep 1, etp = tp, so cp > 1 breaks it
    ("llama3.1-8b", dict(dp=4, pp=2, cp=2, order="tp-cp-pp-dp"), True),
    ("llama3.1-8b", dict(dp=4, tp=2, pp=2, order="tp-cp-pp-dp"), False),
])
def test_megatron_tp_pp_dp_mapping_with_experts(model, plan, core_refuses, tmp_path):
    """Bug: --use-tp-pp-dp-mapping was written for a pipelined plan whose expert
    data-parallel size (MoE, or a dense model with context parallelism) differs from the
    dense one, which initialize_model_parallel refuses."""
    sc = scenario(model, "16xH100-SXM-80GB", 4096, 256, **plan)
    p = sc.plan
    ns = parse_megatron(flatten(megatron_args(sc)[0]))
    etp = int(ns.expert_tensor_parallel_size or p.tp)  # validate_args' default: tp
    ep = int(ns.expert_model_parallel_size or 1)
    why = megatron_parallel_state(p.world_size, p.tp, p.pp, p.cp, ep, etp, 1,
                                  "tp-cp-ep-pp-dp" if ns.use_tp_pp_dp_mapping
                                  else "tp-cp-ep-dp-pp")
    assert bool(why) == core_refuses, why
    if core_refuses:
        assert "data parallel size of the attention and moe layers must be the same" in why
        _refused(sc, "order", tmp_path)
    else:
        assert engine_violations("megatron", p, sc.model, sc.workload, sc.cluster) == []


# ---- torchtitan: the Trainer's own checks ----------------------------------------------------
def _tt_job(sc, tmp_path):
    """The exported job as torchtitan's ConfigManager parses it (Trainer.Config's
    __post_init__ checks included), then update_from_config as the Trainer calls it."""
    pytest.importorskip("torchtitan.config", reason="torchtitan not installed")
    from test_export_engines import _load_job
    export(sc, "torchtitan", tmp_path / "out")
    cfg = _load_job(tmp_path / "out")
    cfg.model_spec.model.update_from_config(config=cfg)
    return cfg


def test_torchtitan_moe_ep_without_pp_runs_without_cuda_graphs(tmp_path):
    """Bug: ep > 1 with pp = 1 left CUDA graphs on, which torchtitan refuses with the
    AllToAllTokenDispatcher (trainer.py _validate_cuda_graphs)."""
    sc = scenario("qwen3-30b-a3b", "16xH100-SXM-80GB", 4096, 64, dp=16, ep=8, zero=3)
    cfg = _tt_job(sc, tmp_path)
    assert cfg.parallelism.expert_parallel_degree == 8 and cfg.training.disable_cuda_graphs


def test_torchtitan_deepseek_async_tp_compiles_the_model(tmp_path):
    """Bug: the DeepSeek-V3 base config compiles only the loss; async TP needs 'model'
    (torchtitan/config/configs.py CompileConfig)."""
    sc = scenario("deepseek-v3", "256xH100-SXM-80GB", 4096, 1024, dp=8, tp=8, pp=4, ep=32,
                  zero=3, sequence_parallel=True, tp_comm_overlap=True)
    assert engine_violations("torchtitan", sc.plan, sc.model, sc.workload) == []
    cfg = _tt_job(sc, tmp_path)
    assert cfg.compile.enable_async_tensor_parallel and "model" in cfg.compile.components


def test_torchtitan_tied_embeddings_with_pp_refused(tmp_path):
    """Bug: Llama 3.2 1B (tied embeddings) with pp 2 was exported; torchtitan's
    update_from_config raises "Weight tying is not supported with Pipeline Parallel"."""
    pytest.importorskip("torchtitan.config", reason="torchtitan not installed")
    from test_export_engines import _load_job
    export(scenario("llama3.2-1b", "16xH100-SXM-80GB", 4096, 64, dp=16, zero=3),
           "torchtitan", tmp_path / "pp1")
    cfg = _load_job(tmp_path / "pp1")
    cfg.parallelism.pipeline_parallel_degree = 2  # torchtitan's own verdict on pp 2
    with pytest.raises(NotImplementedError, match="Weight tying"):
        cfg.model_spec.model.update_from_config(config=cfg)
    sc = scenario("llama3.2-1b", "16xH100-SXM-80GB", 4096, 64, dp=8, pp=2, zero=3)
    v = engine_violations("torchtitan", sc.plan, sc.model, sc.workload, sc.cluster)
    assert [x.field for x in v] == ["pp"], v
    with pytest.raises(UnsupportedByEngine):
        export(sc, "torchtitan", tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_torchtitan_405b_on_ampere_refused(tmp_path):
    """Bug: a bf16 Llama 3.1 405B plan on A100s was exported; the job starts from torchtitan's
    llama3_405b(), whose Float8LinearConverter refuses any GPU below SM89 (this machine has
    none either), so every rank fails before training."""
    pytest.importorskip("torchtitan.config", reason="torchtitan not installed")
    import torch
    if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
        pytest.skip("needs a machine without an SM89+ GPU, as an A100 node is")
    from torchtitan.models.llama3.config_registry import llama3_405b
    with pytest.raises(ValueError, match="SM89"):
        llama3_405b()
    sc = scenario("llama3.1-405b", "128xA100-SXM-80GB", 4096, 128, dp=2, tp=8, pp=8, zero=3)
    v = engine_violations("torchtitan", sc.plan, sc.model, sc.workload, sc.cluster)
    assert [x.field for x in v] == ["gpu"], v
    with pytest.raises(UnsupportedByEngine):
        export(sc, "torchtitan", tmp_path / "out")
    sc = scenario("llama3.1-405b", "128xH100-SXM-80GB", 4096, 128, dp=2, tp=8, pp=8, zero=3)
    assert engine_violations("torchtitan", sc.plan, sc.model, sc.workload, sc.cluster) == []


def test_torchtitan_rope_table_is_torchtitans():
    """engines.TORCHTITAN_ROPE_MAX equals the registered flavours' RoPE length."""
    pytest.importorskip("torchtitan.config", reason="torchtitan not installed")
    import importlib
    from meshplan.engines import TORCHTITAN_ROPE_MAX
    from meshplan.export.torchtitan import MODELS
    assert sorted(TORCHTITAN_ROPE_MAX) == sorted(f"{m}/{f}" for m, _, f, _ in MODELS.values())
    for mod, _, flavor, kw in MODELS.values():
        reg = importlib.import_module(f"torchtitan.models.{mod}").model_registry
        assert reg(flavor, **kw).model.max_seq_len == TORCHTITAN_ROPE_MAX[f"{mod}/{flavor}"]


@pytest.mark.parametrize("name,seq,cap,plan", [
    ("deepseek-v3", 16384, 16384, dict(dp=32, pp=8, ep=32, zero=2, vpp=2, schedule="dualpipev")),
    ("qwen3-30b-a3b", 40960, 40960, dict(dp=16, tp=2, ep=8, zero=3)),
])
def test_torchtitan_seq_len_beyond_the_flavours_rope_refused(name, seq, cap, plan, tmp_path):
    """Bug: a seq_len above the registered flavour's RoPE length was exported and failed in
    update_from_config (models/common/decoder.py)."""
    gpus = "256xH100-SXM-80GB" if name == "deepseek-v3" else "32xH100-SXM-80GB"
    ok = scenario(name, gpus, seq, 1024, **plan)
    assert _tt_job(ok, tmp_path / "ok").training.seq_len == cap  # at the limit: runs
    over = scenario(name, gpus, 2 * seq, 1024, **plan)
    pytest.importorskip("torchtitan.config")
    with pytest.raises(ValueError, match="exceeds attention RoPE maximum"):
        from test_export_engines import _load_job
        from meshplan.export.torchtitan import render_torchtitan
        job = tmp_path / "over"
        job.mkdir()
        for f, text in render_torchtitan(over).files.items():  # written past the refusal
            (job / f).write_text(text)
        cfg = _load_job(job)
        cfg.model_spec.model.update_from_config(config=cfg)
    v = engine_violations("torchtitan", over.plan, over.model, over.workload)
    assert v and v[0].field == "seq_len" and str(cap) in v[0].allowed
    with pytest.raises(UnsupportedByEngine):
        export(over, "torchtitan", tmp_path / "refused")



@pytest.mark.parametrize("seq,plan,refused", [
    # 1040 % (8 * 2*2): refused, though 1040 % 2cp == 0 and (1040 / cp) % tp == 0 (Plan's rules)
    (1040, dict(dp=1, tp=8, cp=2, zero=3), True),
    (1040, dict(dp=1, tp=8, cp=2, zero=3, sequence_parallel=False), False),
    (4100, dict(dp=8, cp=2, zero=3), False),  # 4100 % 4 == 0
    (4096, dict(dp=1, tp=8, cp=2, zero=3), False),
])
def test_torchtitan_seq_len_divisible_for_sp_and_cp(seq, plan, refused, tmp_path):
    """Bug: jobs were exported whose seq_len torchtitan's Trainer refuses: it must divide by
    (tp with sequence parallelism) * 2*cp (torchtitan/trainer.py:306-315 at 0.3.0, in
    Trainer.__init__ after the process groups start; the rule is read from the parsed job)."""
    sc = scenario("llama3.1-8b", "16xH100-SXM-80GB", seq, 64, **plan)
    p = sc.plan
    if refused:
        v = engine_violations("torchtitan", p, sc.model, sc.workload, sc.cluster)
        assert v and v[0].field == "seq_len", v
        with pytest.raises(UnsupportedByEngine):
            export(sc, "torchtitan", tmp_path / "out")
        return
    from torchtitan.distributed.parallel_dims import ParallelDims
    cfg = _tt_job(sc, tmp_path)
    dims = ParallelDims.from_config(cfg.parallelism, p.world_size)
    div = (dims.tp if cfg.parallelism.enable_sequence_parallel else 1) * \
        (2 * dims.cp if dims.cp > 1 else 1)
    assert cfg.training.seq_len % div == 0

# ---- DeepSpeed: the config deepspeed.initialize builds for a real run ------------------------
@pytest.mark.parametrize("args,plan", [
    (("gpt-neox-20b", "32xA100-SXM-80GB", 2048, 256),
     dict(dp=16, tp=2, zero=1, sequence_parallel=False)),
    (("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64),
     dict(dp=8, tp=2, zero=1, sequence_parallel=False, recompute="full")),
    (("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=16, zero=3)),
    # AutoTP with ZeRO-3: "supported for both inference and training" (deepspeed/runtime/
    # engine.py:952 at 0.19.8); it was refused as "ZeRO stages 0-2"
    (("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64),
     dict(dp=8, tp=2, zero=3, sequence_parallel=False)),
])
def test_deepspeed_config_at_the_real_world_size(args, plan, tmp_path, monkeypatch):
    """Bug: AutoTP exports gave train_batch_size = the global batch, which DeepSpeedConfig
    without an mpu (deepspeed.initialize for a non-pipeline model) checks against
    micro * gas * every rank and refuses."""
    pytest.importorskip("deepspeed", reason="deepspeed not installed")
    from deepspeed.runtime import config as C
    sc = scenario(*args, **plan)
    p, w = sc.plan, sc.workload
    monkeypatch.setattr(C.dist, "get_world_size", lambda group=None: p.world_size)
    monkeypatch.setattr(C.dist, "get_rank", lambda group=None: 0)
    export(sc, "deepspeed", tmp_path)
    cfg = C.DeepSpeedConfig(json.loads((tmp_path / "ds_config.json").read_text()), None)
    assert cfg.world_size == p.world_size
    # the samples of one step: micro * gas on each of the dp groups of tp ranks
    assert cfg.train_micro_batch_size_per_gpu * cfg.gradient_accumulation_steps * p.dp == \
        w.global_batch


def test_megatron_mla_builds_the_latent_norms():
    """Bug: MLA models were written without --qk-layernorm, so Megatron-Core's MLA layer
    spec left out DeepSeek's q_a_layernorm / kv_a_layernorm (IdentityOp)."""
    pytest.importorskip("megatron.core", reason="megatron-core not installed")
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.identity_op import IdentityOp
    from test_export_engines import megatron_transformer_config
    sc = build(*next(c[1:] for c in MEGATRON if c[0] == "deepseek-v3"))
    cfg, _ = megatron_transformer_config(flatten(megatron_args(sc)[0]))
    spec = get_gpt_layer_local_spec(num_experts=cfg.num_moe_experts, moe_grouped_gemm=True,
                                    qk_layernorm=cfg.qk_layernorm, multi_latent_attention=True,
                                    normalization="RMSNorm")
    attn = spec.submodules.self_attention.submodules
    assert attn.q_layernorm is not IdentityOp and attn.kv_layernorm is not IdentityOp


@pytest.mark.parametrize("gpus,kw,warned", [
    ("16xH100-SXM-80GB", dict(dp=16, ep=8, moe_dispatcher="deepep"), False),
    ("16xH100-SXM-80GB", dict(dp=8, tp=2, ep=8), True),  # Hopper, tp > 1: the warning branch
    ("16xB200", dict(dp=8, tp=2, ep=8), False),  # Blackwell: no CUDA_DEVICE_MAX_CONNECTIONS rule
])
def test_megatron_expert_overlap_gets_more_than_one_connection(gpus, kw, warned, tmp_path):
    """Bug: a plan with the expert all-to-all overlap (epo, which the search now proposes with
    --engine megatron) launched with CUDA_DEVICE_MAX_CONNECTIONS=1, which Megatron-Core's MoE
    README names as what the overlap must not run with ("Requirements for EP A2A Overlap: ...
    CUDA_DEVICE_MAX_CONNECTIONS > 1")."""
    sc = scenario("mixtral-8x7b", gpus, 4096, 64, ep_comm_overlap=True, **kw)
    assert engine_violations("megatron", sc.plan, sc.model, sc.workload, sc.cluster) == []
    export(sc, "megatron", tmp_path / "out")
    notes = render(sc, "megatron").notes
    argv, cdmc = launch_megatron(tmp_path / "out", tmp_path)
    ns = parse_megatron(argv)
    assert ns.overlap_moe_expert_parallel_comm
    assert cdmc is not None and int(cdmc) > 1
    assert validate_args_rules(ns, cdmc, sc.plan.tp, sc.plan.cp) == []
    assert any("CUDA_DEVICE_MAX_CONNECTIONS=32" in n for n in notes) == warned


@pytest.mark.parametrize("args,plan", [
    (("llama3.1-70b", "32xH100-SXM-80GB", 4096, 6), dict(dp=1, tp=8, pp=4, zero=1)),
    (("llama3.1-8b", "16xH100-SXM-80GB", 4096, 32), dict(dp=4, tp=2, pp=2, zero=1)),
])
def test_deepspeed_autotp_with_the_pipeline_engine_refused(args, plan, tmp_path):
    """Bug: tp > 1 with pp > 1 was exported for DeepSpeed (and `plan --engine deepspeed` chose
    dp1 tp8 pp4 for Llama 3.1 70B on 32 H100, global batch 6). AutoTP builds (data, tensor)
    groups over every rank, data = world // tp (deepspeed/utils/groups.py
    _init_tp_mesh_device at 0.19.8), and swaps them in as the engine's mpu
    (runtime/engine.py _configure_tensor_parallel_states); PipelineEngine's grid has data =
    world // pp and it asserts the two equal (runtime/pipe/engine.py:103). With tp = pp the
    assertion passes but the tensor groups are the stage's data-parallel groups. Refused in
    one line naming tp, as Ulysses with pp or tp is."""
    sc = scenario(*args, **dict(plan, sequence_parallel=False))
    bad = engine_violations("deepspeed", sc.plan, sc.model, sc.workload)
    assert [v.field for v in bad] == ["tp"], bad
    with pytest.raises(UnsupportedByEngine, match="AutoTP"):
        render(sc, "deepspeed")


def test_search_for_deepspeed_keeps_autotp_and_the_pipeline_apart():
    from meshplan.scenario import make_cluster
    from meshplan.search.search import search
    from meshplan.specs.catalog.presets import preset
    from meshplan.specs.workload import Workload
    """Llama 3.1 70B on 16 B200, seq 8192, global batch 30: the winner was dp2 tp4 pp2, and
    four of the five plans shown mixed AutoTP and the pipeline engine."""
    r = search(preset("llama3.1-70b"), make_cluster("16xB200"), Workload(8192, 30),
               engine="deepspeed", top_k=5)
    assert r.top, "the case must have plans"
    assert all(not (e.plan.tp > 1 and e.plan.pp > 1) for e in r.top + r.pareto), \
        [e.plan.describe() for e in r.top]


@pytest.mark.parametrize("model,tied", [("llama3.2-1b", True), ("llama3.1-8b", False)])
def test_deepspeed_pipeline_of_a_tied_model_names_tiedlayerspec(model, tied):
    """Bug: the DeepSpeed export of a tied model on pp > 1 told the user to build the
    PipelineModule with the embedding and head outside the partition, and nothing about tying:
    built that way the head is an untied matrix, not the model predicted (one tied weight whose
    gradient the first and last stages all-reduce, tied_embedding_s). DeepSpeed ties layers
    across stages with deepspeed.pipe.TiedLayerSpec (runtime/pipe/module.py)."""
    from meshplan.export.deepspeed import deepspeed_config

    sc = scenario(model, "8xH100-SXM-80GB", 4096, 32, dp=4, pp=2, micro_batch=1, zero=1,
                  schedule="1f1b")
    _, notes = deepspeed_config(sc)
    assert any("TiedLayerSpec" in n for n in notes) == tied, notes
    ds = pytest.importorskip("deepspeed", reason="deepspeed not installed")
    import deepspeed.pipe
    assert hasattr(ds.pipe, "TiedLayerSpec")  # the name the note gives is DeepSpeed's
