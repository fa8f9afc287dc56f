"""Engine limits (meshplan/engines.py): the search with an engine returns only plans that
engine's exporter writes, and the exporter refuses exactly the plans the limits list."""

from __future__ import annotations

import itertools
import json

import pytest

from meshplan.cli import main
from meshplan.engines import LIMITED_ENGINES, engine_violations, search_hints
from meshplan.errors import InputError
from meshplan.export import UnsupportedByEngine, render
from meshplan.plan import Plan
from meshplan.scenario import Scenario, make_cluster
from meshplan.search.search import search
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload

SCENARIOS = [  # (model, gpus, seq_len, global batch, precision): fast to search
    ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, "bf16"),
    ("llama3.1-70b", "32xH100-SXM-80GB", 4096, 128, "bf16"),
    ("qwen3-30b-a3b", "16xH100-SXM-80GB", 4096, 64, "bf16"),
]


def _scenario(model, gpus, seq, batch, prec):
    return Scenario(load_model(model), make_cluster(gpus), Workload(seq, batch, prec), None)


@pytest.mark.parametrize("engine", LIMITED_ENGINES)
@pytest.mark.parametrize("args", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_every_plan_the_engine_search_returns_exports(engine, args):
    sc = _scenario(*args)
    r = search(sc.model, sc.cluster, sc.workload, top_k=10, rerank_k=10, engine=engine)
    assert r.engine == engine and r.top, f"{engine}: no plan for {args}"
    for est in r.top + r.pareto:
        s = Scenario(sc.model, sc.cluster, sc.workload, est.plan)
        assert engine_violations(engine, est.plan, sc.model, sc.workload, sc.cluster) == []
        files = render(s, engine).files  # raises if the exporter refuses
        assert files


def test_engine_search_is_no_faster_than_the_free_search():
    """The engine's best plan is one of the free search's plans (the free space holds it):
    its predicted step time can only be equal or slower. The check can fail: DeepSpeed
    refuses context parallelism of kind ring, which the free search uses here."""
    sc = _scenario("llama3.1-8b", "16xH100-SXM-80GB", 16384, 64, "bf16")
    free = search(sc.model, sc.cluster, sc.workload, top_k=3, rerank_k=0, simulate=False)
    for engine in LIMITED_ENGINES:
        r = search(sc.model, sc.cluster, sc.workload, top_k=3, rerank_k=0, simulate=False,
                   engine=engine)
        assert r.top[0].step_time_s >= free.top[0].step_time_s * (1 - 1e-9)
    assert engine_violations("deepspeed", free.top[0].plan.with_(cp=2, dp=4, cp_kind="ring"),
                             sc.model, sc.workload)


# A grid of plans touching every limit: each engine's exporter refuses a plan exactly when
# engine_violations lists something, and with its first entry.
def _grid():
    sc = _scenario("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, "bf16")
    moe = _scenario("qwen3-30b-a3b", "16xH100-SXM-80GB", 4096, 64, "bf16")
    out = []
    for (tp, cp, pp), zero, rc, kind, off, sp, order in itertools.product(
            [(1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 2), (1, 1, 2), (1, 1, 4)], (0, 1, 2, 3),
            ("none", "selective", "full"), ("ring", "all_to_all"), (False, True),
            (True, False), ("tp-cp-dp-pp", "tp-cp-pp-dp", "dp-tp-cp-pp")):
        dp = 16 // (tp * cp * pp)
        try:
            p = Plan(dp=dp, tp=tp, cp=cp, pp=pp, zero=zero, recompute=rc, cp_kind=kind,
                     offload_optimizer=off, sequence_parallel=sp, order=order)
        except InputError:
            continue
        out.append(Scenario(sc.model, sc.cluster, sc.workload, p))
    for sched, vpp in [("gpipe", 1), ("zb_h1", 1), ("interleaved_1f1b", 2), ("zb_v", 2),
                       ("dualpipev", 2), ("looped_bfs", 2), ("interleaved_zb", 2)]:
        for zero in (1, 3):
            out.append(Scenario(sc.model, sc.cluster, sc.workload,
                                Plan(dp=4, pp=4, vpp=vpp, schedule=sched, zero=zero)))
    for zero, hsdp in [(1, 8), (2, 8), (3, 4), (3, 16)]:
        out.append(Scenario(sc.model, sc.cluster, sc.workload, Plan(dp=16, zero=zero, hsdp_shard=hsdp)))
    for ep, etp, tp in [(8, 1, 1), (4, 2, 2), (8, 1, 2), (16, 1, 1)]:
        out.append(Scenario(moe.model, moe.cluster, moe.workload,
                            Plan(dp=16 // tp, tp=tp, ep=ep, etp=etp, zero=3)))
    for prec in ("fp16", "fp8"):
        out.append(Scenario(sc.model, sc.cluster, Workload(8192, 64, prec), Plan(dp=16)))
    out.append(Scenario(load_model("gpt2"), make_cluster("8xH100-SXM-80GB"),
                        Workload(1024, 64), Plan(dp=8, zero=3)))
    return out


GRID = _grid()


@pytest.mark.parametrize("engine", LIMITED_ENGINES)
def test_exporter_refuses_exactly_what_the_limits_list(engine):
    refused = accepted = 0
    for sc in GRID:
        try:
            sc.plan.validate(sc.model, sc.workload, sc.cluster.num_gpus)
        except InputError:
            continue
        v = engine_violations(engine, sc.plan, sc.model, sc.workload, sc.cluster)
        try:
            render(sc, engine)
        except UnsupportedByEngine as e:
            assert v, f"{engine} refused {sc.plan.describe()} with no limit listed: {e}"
            assert e.feature == v[0].field
            refused += 1
            continue
        assert not v, f"{engine} wrote {sc.plan.describe()} that the limits refuse: {v}"
        accepted += 1
    assert refused > 10 and accepted > 10  # the grid reaches both sides for every engine


def test_search_hints_cover_the_exporters_schedules():
    """Every schedule the search may try for an engine is one its exporter writes."""
    sc = _scenario("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, "bf16")
    for engine in LIMITED_ENGINES:
        for s in search_hints(engine)["schedules"]:
            vpp = 2 if s not in ("gpipe", "1f1b", "zb_h1") else 1
            render(Scenario(sc.model, sc.cluster, sc.workload,
                            Plan(dp=4, pp=4, vpp=vpp, schedule=s, zero=1 if engine != "torchtitan"
                                 else 3)), engine)


def test_deepspeed_ulysses_config():
    sc = _scenario("llama3.1-8b", "16xH100-SXM-80GB", 16384, 64, "bf16")
    sc = Scenario(sc.model, sc.cluster, sc.workload, Plan(dp=4, cp=4, cp_kind="all_to_all", zero=3))
    cfg = json.loads(render(sc, "deepspeed").files["ds_config.json"])
    assert cfg["sequence_parallel_size"] == 4 and cfg["data_parallel_size"] == 4
    # micro-batches run by the 4 data-parallel ranks, not the 16 ranks
    assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * \
        cfg["gradient_accumulation_steps"] * cfg["data_parallel_size"]
    script = render(sc, "deepspeed").files["deepspeed_launch.sh"]
    assert 'export SEQUENCE_PARALLEL_SIZE="${SEQUENCE_PARALLEL_SIZE:-4}"' in script
    assert "DistributedAttention" in script
    with pytest.raises(UnsupportedByEngine, match="Ulysses"):
        render(Scenario(sc.model, sc.cluster, sc.workload, Plan(dp=4, cp=4, zero=3)), "deepspeed")


def test_deepspeed_refusal_names_the_expert_degree_that_is_set():
    """A plan with expert tensor parallelism and no expert parallelism is refused for its etp,
    not as "cannot run ep=1" (the search counted 1,584 deepseek-v2-lite plans under that
    reason, beside a winner that runs ep=1)."""
    sc = _scenario("qwen3-30b-a3b", "16xH100-SXM-80GB", 4096, 64, "bf16")
    (v,) = engine_violations("deepspeed", Plan(dp=8, tp=2, etp=2, zero=1, sequence_parallel=False),
                             sc.model, sc.workload)
    assert (v.field, v.value) == ("etp", 2)
    (v,) = engine_violations("deepspeed", Plan(dp=16, ep=8, zero=1), sc.model, sc.workload)
    assert (v.field, v.value) == ("ep", 8)


# ---- the CLI: the issue's commands ----------------------------------------------------------
ISSUE = ["plan", "--model", "llama3.1-70b", "--gpus", "64xH100-SXM-80GB", "--seq-len", "8192",
         "--global-batch", "512", "--rerank", "0", "--top", "2"]


@pytest.mark.parametrize("engine", ["torchtitan", "deepspeed"])
def test_issue_commands_export(engine, tmp_path, capsys):
    assert main(ISSUE + ["--export", engine, "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "engine limits: " in out
    assert any((tmp_path / "o").iterdir())


def test_engine_flag_without_export_and_scenario_refusal(capsys):
    assert main(ISSUE + ["--engine", "deepspeed", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["engine"] == "deepspeed"
    for row in d["top"]:
        p = Plan(**row["plan"])
        assert not p.sequence_parallel and (p.cp == 1 or p.cp_kind == "all_to_all")
    rc = main(["plan", "--model", "gpt2", "--gpus", "8xH100-SXM-80GB", "--seq-len", "1024",
               "--global-batch", "64", "--engine", "torchtitan"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "model='gpt2'" in err and "torchtitan" in err
    rc = main(ISSUE + ["--engine", "megatron", "--export", "deepspeed", "--out", "/nonexistent/x"])
    assert rc == 2


def test_a_pin_the_engine_refuses_is_bad_input(capsys):
    """A pinned knob the engine cannot run leaves no plan: one line naming it, exit 2."""
    rc = main(["plan", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len",
               "8192", "--global-batch", "64", "--engine", "deepspeed", "--recompute",
               "selective"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "plan.recompute='selective'" in err and "DeepSpeed" in err


# ---- a plan searched for an engine is costed as that engine runs it ----------------------------
FP8 = ["--model", "llama3.1-8b", "--seq-len", "4096", "--global-batch", "64", "--precision",
       "fp8", "--rerank", "0", "--top", "1", "--json"]


@pytest.mark.parametrize("engine,gpus,recipe,flag", [
    # torchtitan 0.3's Float8LinearConverter writes rowwise only
    ("torchtitan", "16xH100-SXM-80GB", "rowwise", "recipe_name='rowwise'"),
    # Megatron on Blackwell: the export writes MXFP8 (cost/fp8_recipe.py BLACKWELL_DEFAULT)
    ("megatron", "16xB200", "mx", "--fp8-recipe mxfp8"),
])
def test_engine_plans_are_costed_with_the_recipe_their_export_writes(engine, gpus, recipe, flag,
                                                                    tmp_path, capsys):
    """Before: the search for an engine costed FP8 with meshplan's own default (delayed
    scaling, Transformer Engine casts) while the export ran another recipe; torchtitan's
    70B winner was 18% faster than the job written. Now the figures plan prints are those of
    the engine's framework and the recipe in the exported files, and predict --engine
    reproduces them to the last digit."""
    out = tmp_path / "o"
    assert main(["plan", *FP8, "--gpus", gpus, "--export", engine, "--out", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    best = d["top"][0]
    plan = Plan(**best["plan"])
    text = "".join(f.read_text() for f in out.iterdir())
    assert flag in text
    sc = Scenario(load_model("llama3.1-8b"), make_cluster(gpus),
                  Workload(4096, 64, "fp8", framework=engine, fp8_recipe=recipe), plan)
    from meshplan.cost import estimate
    want = estimate(sc.model, sc.cluster, sc.workload, plan).step_time_s
    assert best["step_time_s"] == pytest.approx(want, rel=1e-12)
    # the recipe matters: meshplan's own default prices the same plan differently
    own = estimate(sc.model, sc.cluster, Workload(4096, 64, "fp8"), plan).step_time_s
    assert abs(own / want - 1) > 0.01
    assert main(["predict", *FP8[:-5], "--gpus", gpus, "--engine", engine, "--plan",
                 plan.describe(), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == best["step_time_s"]


def test_torchtitan_refuses_a_recipe_it_cannot_run(capsys):
    rc = main(["predict", *FP8[:-5], "--gpus", "16xH100-SXM-80GB", "--engine", "torchtitan",
               "--fp8-recipe", "tensorwise", "--plan", "dp16 zero2 mb1"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "workload.fp8_recipe='tensorwise'" in err and "rowwise" in err
