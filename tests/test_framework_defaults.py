"""What a blank engine column means per framework (meshplan/framework_defaults.py).

Independent truth: the framework facts cited in framework_defaults.py (checked by hand in
the repositories named there: Megatron-Core model_parallel_config.py / transformer_config.py,
Megatron-LM's README scaling runs, Megatron-Bridge v0.2.0 providers and performance
scripts, torchtitan's job_config.py and published benchmarks, DeepSpeed's AutoTP config,
Transformer Engine's / torchao's default FP8 recipes), and a row's fully stated twin: a row
that leaves a column blank must predict exactly as the same row stating the framework's
default, and differently when it states something else.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from meshplan import framework_defaults as fd
from meshplan import validate
from meshplan.export.deepspeed import deepspeed_config
from meshplan.scenario import Scenario, make_cluster
from meshplan.search.search import search
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

HELDOUT = Path(__file__).resolve().parents[1] / "bench" / "data" / "heldout_runs.csv"


def _rows() -> dict:
    with open(HELDOUT, newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


ROWS = _rows()


def _predict(row: dict) -> validate.RowResult:
    res = validate.predict_row(row, with_search_best=False)
    assert res.error is None, res.error
    return res


def _without(row: dict, *cols: str) -> dict:
    return {k: ("" if k in cols else v) for k, v in row.items()}


# -- the cited facts ------------------------------------------------------------------

@pytest.mark.parametrize("framework, tp, expected", [
    # Megatron-LM README scaling runs: --tp-comm-overlap (code default off)
    ("megatron", 8, True),
    # Megatron-Bridge performance scripts: CommOverlapConfig(tp_comm_overlap=bool(tp > 1))
    ("nemo", 2, True),
    # torchtitan: job_config.py enable_async_tensor_parallel = False (238fa99); its
    # presets with TP do not all enable it (TORCHTITAN_RECIPE)
    ("torchtitan", 8, False),
    # DeepSpeed AutoTP tp_overlap_comm defaults to False
    ("deepspeed", 4, False),
    # nothing to overlap without TP, whatever the framework
    ("megatron", 1, False), ("nemo", 1, False), ("torchtitan", 1, False), ("", 1, False),
])
def test_tp_comm_overlap_follows_the_cited_framework_setting(framework, tp, expected):
    assert fd.tp_comm_overlap(framework, tp) is expected
    assert fd.tp_comm_overlap(framework.upper(), tp) is expected  # names as rows write them


@pytest.mark.parametrize("model, expected", [
    # torchtitan/models/llama3/train_configs at 238fa99: llama3_405b.toml TP 8 with
    # enable_async_tensor_parallel = true; llama3_70b.toml TP 8 without it
    ("Llama 3.1 405B", True), ("meta-llama/Llama-3.1-405B", True), ("llama3.1-405b", True),
    ("Llama 3.1 70B", False),
    # llama3_8b.toml is TP 1: no preset with TP, the code default (job_config.py: False)
    ("Llama 3.1 8B", False), ("GPT 126M", False), ("", False),
])
def test_torchtitan_tp_overlap_is_the_code_default_or_the_family_preset(model, expected):
    assert fd.tp_comm_overlap("torchtitan", 8, model) is expected
    assert fd.plan_defaults("torchtitan", 8, model=model)["tp_comm_overlap"] is expected
    # the preset table is torchtitan's: other frameworks keep their one setting
    assert fd.tp_comm_overlap("megatron", 8, model) is True
    assert fd.tp_comm_overlap("deepspeed", 8, model) is False


def test_every_named_framework_default_has_a_source_in_the_module_docstring():
    doc = fd.__doc__
    for knob in ("tp_comm_overlap", "moe_dispatcher", "ep_comm_overlap"):
        for fw in ("megatron", "nemo", "torchtitan"):
            key = fd.source(knob, fw).split()[0]
            assert key != "NONE" and f"- {key}:" in doc, (knob, fw, key)
    assert f"- {fd.source('tp_comm_overlap', 'deepspeed')}:" in doc
    assert fd.source("tp_comm_overlap", "maxtext") == "NONE"  # said so, not invented


def test_moe_defaults_are_the_providers_alltoall_without_overlap():
    # Megatron-Bridge v0.2.0 model providers: moe_token_dispatcher_type = "alltoall";
    # Megatron-Core overlap_moe_expert_parallel_comm = False
    for fw in ("nemo", "megatron", "torchtitan", "other", ""):
        assert fd.moe_dispatcher(fw) == "alltoall"
        assert fd.ep_comm_overlap(fw) is False


def test_nemo_moe_dispatcher_on_rack_scale_nvlink_is_the_deepep_class():
    # Megatron-Bridge v0.3.0..v0.6.0 GB200 MoE performance recipes: moe_flex_dispatcher_backend
    # "hybridep" (flex dispatcher, DeepEP class); 8-GPU NVLink nodes keep the provider's alltoall
    assert fd.moe_dispatcher("nemo", 72) == "deepep"
    assert fd.moe_dispatcher("NeMo", 72) == "deepep"
    assert fd.moe_dispatcher("nemo", 8) == "alltoall"
    assert fd.moe_dispatcher("nemo") == "alltoall"
    for fw in ("megatron", "torchtitan", "other", ""):  # no rack recipe cited for them
        assert fd.moe_dispatcher(fw, 72) == "alltoall"
    assert fd.ep_comm_overlap("nemo") is False  # moe_a2a_overlap=False in most GB200 presets
    assert fd.plan_defaults("nemo", 1, 72)["moe_dispatcher"] == "deepep"
    key = fd.source("moe_dispatcher", "nemo", 72)
    assert key == "MBRIDGE_PERF_RACK" and f"- {key}:" in fd.__doc__
    assert fd.source("moe_dispatcher", "nemo", 8) == "MBRIDGE_PROVIDER"


def test_fp8_recipe_and_attention_kernel_read_their_one_table():
    # Transformer Engine's default recipe is DelayedScaling; torchao's Float8LinearConfig()
    # is tensorwise; meshplan's Megatron export writes MXFP8 on Blackwell
    assert fd.fp8_recipe("nemo", "hopper") == "delayed"
    assert fd.fp8_recipe("megatron", "hopper") == "delayed"
    assert fd.fp8_recipe("torchtitan", "hopper") == "tensorwise"
    assert fd.fp8_recipe("nemo", "blackwell") == "mx"
    assert fd.fp8_recipe("torchtitan", "blackwell") == "tensorwise"
    # Megatron-LM / NeMo / MaxText on NVIDIA: TE's fused attention; torch SDPA otherwise
    assert fd.attention_kernel("megatron") == "te"
    assert fd.attention_kernel("maxtext") == "te"
    assert fd.attention_kernel("torchtitan") == "fa2"
    assert fd.attention_kernel("deepspeed") == "fa2"
    # llm-foundry's benchmark harness: submit_benchmarks.py --attn_impl default 'triton'
    assert fd.attention_kernel("llm-foundry") == "triton-fa1"


def test_dtypes_default_to_fp32_as_megatron_core_and_torchtitan_run():
    for fw in ("megatron", "nemo", "torchtitan", "deepspeed", "other"):
        assert fd.optimizer_state_precision(fw) == "fp32"
    for fw in ("megatron", "torchtitan", "deepspeed", "other"):
        assert fd.grad_reduce_dtype(fw) == "fp32"


def test_nemo_reduces_gradients_in_bf16_as_its_performance_runs_do():
    """NeMo's published performance runs (its scripts/performance, Megatron-Bridge's, NVIDIA's
    MLPerf NeMo configs) set grad_reduce_in_fp32 False: a NeMo row leaving the column blank
    is predicted with bf16 gradient reduction (it was fp32, Megatron-Core's code default)."""
    assert fd.grad_reduce_dtype("nemo") == fd.grad_reduce_dtype("NeMo") == "bf16"
    assert f"- {fd.GRAD_REDUCE_DTYPE_SOURCE['nemo']}:" in fd.__doc__
    # the held-out NeMo rows that state the column: the performance scripts' bf16, bar the
    # few of NeMo Framework Launcher 1.x configs and NeMo 2.0's general recipe
    nemo = [r["grad_reduce_dtype"] for r in ROWS.values()
            if r["framework"] == "nemo" and r["grad_reduce_dtype"]]
    assert nemo.count("bf16") > 0.9 * len(nemo)


# -- a stripped row predicts as its stated twin ------------------------------------------

def test_blank_tp_overlap_predicts_as_the_stated_framework_default():
    async_tp = ROWS["H101"]  # torchtitan async TP on Llama 3.1 8B, stated tp_comm_overlap 1
    vanilla = ROWS["H100"]  # the same run with vanilla TP (stated 0)
    assert async_tp["tp_comm_overlap"] == "1" and vanilla["tp_comm_overlap"] == "0"
    stated = _predict(async_tp).predicted_tokens_per_s_per_gpu
    blank = _predict(_without(async_tp, "tp_comm_overlap")).predicted_tokens_per_s_per_gpu
    off = _predict(vanilla).predicted_tokens_per_s_per_gpu
    assert blank == off  # torchtitan's code default: no async TP (TORCHTITAN_RECIPE)
    assert off < stated  # the stated value wins and the overlap is costed (not a no-op)
    # Llama 3.1 405B: torchtitan's own preset runs async TP, so a blank row does too
    big = dict(_without(async_tp, "tp_comm_overlap"), model="Llama 3.1 405B", layers="",
               hidden="", heads="", kv_heads="", ffn="", vocab="", head_dim="",
               num_gpus="512", dp="", micro_batch="1", global_batch_seqs="512")
    assert _predict(big).chosen.get("tp_comm_overlap") is True


def test_blank_tp_overlap_of_a_deepspeed_row_is_off():
    row = next(r for r in ROWS.values() if r["framework"] == "deepspeed" and int(r["tp"]) > 1)
    stated_off = _predict(dict(row, tp_comm_overlap="0"))
    blank = _predict(row)
    assert blank.predicted_tokens_per_s_per_gpu == stated_off.predicted_tokens_per_s_per_gpu
    assert blank.chosen.get("tp_comm_overlap") is False


def test_blank_moe_columns_predict_as_alltoall_without_overlap_and_differ_from_deepep():
    row = ROWS["H090"]  # NeMo GPT-OSS 120B on H100: stated alltoall, ep_overlap 0
    assert (row["moe_dispatcher"], row["ep_overlap"]) == ("alltoall", "0")
    stated = _predict(row).predicted_tokens_per_s_per_gpu
    blank = _predict(_without(row, "moe_dispatcher", "ep_overlap"))
    assert blank.predicted_tokens_per_s_per_gpu == stated
    other = _predict(dict(row, moe_dispatcher="deepep", ep_overlap="1"))
    assert other.predicted_tokens_per_s_per_gpu != stated


def test_blank_dispatcher_of_a_gb200_nemo_moe_row_predicts_as_deepep():
    row = ROWS["H042"]  # NeMo Qwen3-30B-A3B on 8 GB200 (NVL72), stated deepep (hybridep recipe)
    assert (row["framework"], row["gpu"], row["moe_dispatcher"]) == ("nemo", "GB200", "deepep")
    stated = _predict(row)
    blank = _predict(_without(row, "moe_dispatcher"))
    assert blank.predicted_tokens_per_s_per_gpu == stated.predicted_tokens_per_s_per_gpu
    assert "deepep" in blank.plan
    a2a = _predict(dict(row, moe_dispatcher="alltoall"))
    assert a2a.predicted_tokens_per_s_per_gpu != stated.predicted_tokens_per_s_per_gpu
    # the same shape under a name no recipe is for, on B200 (8-GPU NVLink nodes), keeps the
    # provider's alltoall (Qwen3-30B-A3B itself has a B200 recipe: MBRIDGE_PERF_MOE)
    b200 = _predict(_without(dict(row, gpu="B200", model="a 30B MoE"), "moe_dispatcher"))
    assert "deepep" not in b200.plan


@pytest.mark.parametrize("gpus, expected", [("8xGB200", "deepep"), ("8xB200", "alltoall")])
def test_search_plans_the_rack_dispatcher_and_the_export_writes_it(gpus, expected):
    from meshplan.export.megatron import megatron_args
    m = preset("tiny-moe")
    cl = make_cluster(gpus)
    w = Workload(1024, 16, framework="nemo")
    r = search(m, cl, w, {"ep": 8}, top_k=1, rerank_k=1)
    assert r.best is not None
    assert r.best.plan.moe_dispatcher == expected
    flags = dict(megatron_args(Scenario(m, cl, w, r.best.plan))[0])
    assert flags["--moe-token-dispatcher-type"] == [{"deepep": "flex"}.get(expected, expected)]
    # the DeepEP class on rack-scale NVLink is HybridEP, as Megatron-Bridge's GB200 recipes
    # set it; the backend flag only with the flex dispatcher
    assert flags.get("--moe-flex-dispatcher-backend") == (["hybridep"] if expected == "deepep"
                                                         else None)


def test_blank_fp8_recipe_predicts_as_the_stated_engine_default():
    row = ROWS["H030"]  # NeMo Llama 3 8B FP8 on H100, stated cs
    delayed = _predict(dict(row, fp8_recipe="delayed")).predicted_tokens_per_s_per_gpu
    blank = _predict(_without(row, "fp8_recipe")).predicted_tokens_per_s_per_gpu
    cs = _predict(row).predicted_tokens_per_s_per_gpu
    assert blank == delayed
    assert cs != delayed


def test_blank_attention_kernel_of_an_llm_foundry_row_is_the_triton_kernel():
    row = ROWS["H008"]  # MPT-7B, 32k sequence on H100: attention is a large share
    assert (row["framework"], row["attention_kernel"]) == ("llm-foundry", "triton-fa1")
    stated = _predict(row).predicted_tokens_per_s_per_gpu
    blank = _predict(_without(row, "attention_kernel")).predicted_tokens_per_s_per_gpu
    fa2 = _predict(dict(row, attention_kernel="fa2")).predicted_tokens_per_s_per_gpu
    assert blank == stated
    assert fa2 > 1.2 * stated  # the kernel is costed: FA2 is 1.4x / 2x faster


def test_blank_dtypes_predict_as_the_frameworks_where_they_fit():
    row = ROWS["H030"]  # NeMo Llama 3 8B FP8 on 8 H100: fits with NeMo's default dtypes
    fp32 = dict(row, optimizer_state_precision="fp32", grad_reduce_dtype="bf16")
    blank = _without(row, "optimizer_state_precision", "grad_reduce_dtype")
    a, b = _predict(fp32), _predict(blank)
    assert not a.predicted_oom
    assert a.predicted_tokens_per_s_per_gpu == b.predicted_tokens_per_s_per_gpu
    assert a.predicted_peak_mem_gib == b.predicted_peak_mem_gib
    assert not any("lean dtypes" in n for n in b.notes)


def test_blank_dtypes_take_the_lean_ones_where_only_they_fit():
    # NeMo Nemotron-4 340B with every knob stated: at fp32 it does not fit (the recipe runs
    # bf16 moments without a master and bf16 gradients); left blank, the engine's lean dtypes
    # (verdict_lean: bf16 moments beside an fp32 master, bf16 gradients) are predicted, noted
    # and 'may not fit', at the stated row's speed (the bf16 gradient reduction)
    row = ROWS["H115"]
    fp32 = dict(row, optimizer_state_precision="fp32", grad_reduce_dtype="fp32")
    blank = _without(row, "optimizer_state_precision", "grad_reduce_dtype")
    a, b, stated = _predict(fp32), _predict(blank), _predict(row)
    assert a.predicted_oom and not b.predicted_oom and b.predicted_may_not_fit
    assert any("lean dtypes" in n for n in b.notes)
    assert b.predicted_tokens_per_s_per_gpu == stated.predicted_tokens_per_s_per_gpu
    assert stated.predicted_peak_mem_gib < b.predicted_peak_mem_gib < a.predicted_peak_mem_gib


def test_qwen3_row_without_head_dim_takes_the_presets():
    row = _without(ROWS["H057"], "head_dim")
    model, _ = validate.model_from_row(row)
    # Qwen3-30B-A3B config.json: head_dim 128, hidden 2048 / 32 heads = 64
    assert model.head_dim == 128 == preset("qwen3-30b-a3b").head_dim


# -- the search and the exporters read the same defaults ---------------------------------

@pytest.mark.parametrize("engine, framework, expected", [
    ("deepspeed", "", False), ("megatron", "", True), (None, "deepspeed", False),
    (None, "torchtitan", False), (None, "", True),
])
def test_search_plans_tp_overlap_as_the_framework_runs(engine, framework, expected):
    m = preset("tiny-llama")
    cl = make_cluster("8xH100-SXM-80GB")
    w = Workload(1024, 16, framework=framework)
    r = search(m, cl, w, {"tp": 2, "pp": 1}, top_k=1,
               rerank_k=1, engine=engine)
    assert r.best is not None
    assert r.best.plan.tp_comm_overlap is expected
    if engine == "deepspeed":  # the export writes what was planned
        cfg, _ = deepspeed_config(Scenario(m, cl, w, r.best.plan))
        assert cfg["tensor_parallel"]["tp_overlap_comm"] is False


# -- rows whose schedule is unknown -----------------------------------------------------

def test_unknown_framework_row_gets_a_schedule_that_runs_its_layout():
    # pp 4 x 2 chunks, 9 micro-batches per pipeline (18 sequences over dp 2): interleaving
    # runs them in rounds of 9 // 4 = 2, which does not divide 9 (validity.py); a
    # V-shape schedule runs them
    row = {"id": "T1", "trust": "A", "model": "llama3.2-1b", "seq_len": "1024",
           "global_batch_seqs": "18", "micro_batch": "1", "gpu": "H100-SXM-80GB",
           "num_gpus": "8", "tp": "1", "pp": "4", "vpp": "2", "dp": "2", "cp": "1",
           "precision": "bf16", "measured_tokens_per_s_per_gpu": "1000"}
    other = validate.predict_row(dict(row, framework="other"), with_search_best=False)
    assert other.error is None, other.error
    assert other.plan and "interleaved_1f1b" not in other.plan
    assert any(n.startswith("schedule: interleaved_1f1b cannot run") for n in other.notes)
    megatron = validate.predict_row(dict(row, framework="megatron"), with_search_best=False)
    assert megatron.error and "micro" in megatron.error  # Megatron runs interleaved only


def test_stripped_deepseek_v3_row_is_scored():
    # H051 without its engine columns (DualPipe, recompute modules) fits no plan; the lean
    # micro-batch-1 plan breaks interleaving's micro-batch rule, so the closest plan the
    # search found is reported instead of leaving the row unscored
    row = _without(ROWS["H051"], "schedule", "recompute_modules", "moe_dispatcher",
                   "ep_overlap", "micro_batch")
    res = validate.predict_row(row, with_search_best=False)
    assert res.error is None, res.error
    assert res.predicted_oom is True and res.predicted_tokens_per_s_per_gpu > 0


def test_a_dense_model_gets_no_token_dispatcher_on_rack_scale_nemo():
    """NeMo's rack-scale default dispatcher (DeepEP class) is an MoE knob: a dense model's
    plans keep the Plan's neutral alltoall and no expert overlap, so no label says 'deepep';
    an MoE model on the same cluster still takes it."""
    from meshplan.scenario import make_cluster
    from meshplan.search.search import search
    from meshplan.specs.catalog.presets import load_model
    from meshplan.specs.workload import Workload
    cluster, wl = make_cluster("72xGB200"), Workload(4096, 72, "bf16", framework="nemo")
    dense = search(load_model("llama3.1-8b"), cluster, wl, {}, top_k=1, rerank_k=1).best.plan
    assert dense.moe_dispatcher == "alltoall" and not dense.ep_comm_overlap
    assert "deepep" not in dense.describe()
    moe = search(load_model("qwen3-30b-a3b"), cluster, wl, {}, top_k=1, rerank_k=1).best.plan
    assert moe.moe_dispatcher == "deepep"


# -- NeMo MoE rows of a model family Megatron-Bridge ships a performance recipe for -------
# Megatron-Bridge scripts/performance workload base configs at v0.2.0, v0.3.1, v0.4.2, v0.5.1
# (default variant v2, else v1): moe_flex_dispatcher_backend (hybridep / deepep: the DeepEP
# class; None: alltoall) and moe_a2a_overlap. A knob is the recipes' where all releases that
# ship the recipe agree.

@pytest.mark.parametrize("model, gpu, precision, expected", [
    # DEEPSEEK_V3 ..._H100_V2 / H100_FP8_CS_BASE_CONFIG: hybridep in all four releases; the
    # overlap on at v0.2.0 only -> (deepep, provider's no overlap)
    ("DeepSeek-V3", "H100-SXM-80GB", "fp8", ("deepep", None)),
    # QWEN3_235B_A22B ..._H100_FP8_CS: alltoall, hybridep (v0.3.1), alltoall, alltoall; the
    # overlap on in all four
    ("Qwen3-235B-A22B", "H100-SXM-80GB", "fp8", (None, True)),
    # QWEN3_30B_A3B ..._GB200_BF16: hybridep, no overlap in all four
    ("Qwen3-30B-A3B", "GB200", "bf16", ("deepep", False)),
    # GPT_OSS_120B ..._H100_BF16: no flex backend, no overlap in all four
    ("openai/gpt-oss-120b", "H100-SXM-80GB", "bf16", ("alltoall", False)),
    # DEEPSEEK_V3 ..._B200_FP8_MX (NeMo's Blackwell FP8 default is MXFP8): alltoall at v0.2.0,
    # then deepep; overlap off, off, on, on -> neither knob
    ("DeepSeek-V3", "B200", "fp8", (None, None)),
])
def test_nemo_moe_recipe_of_the_model_family_on_the_gpu(model, gpu, precision, expected):
    assert fd.recipe_moe("nemo", model, gpu, precision) == expected
    d = fd.plan_defaults("nemo", 1, 8, True, model, gpu, precision)
    # a knob the releases disagree on keeps the provider's default (alltoall, no overlap)
    assert d["moe_dispatcher"] == (expected[0] or "alltoall")
    assert d["ep_comm_overlap"] is bool(expected[1])
    # Megatron-Bridge's recipes are NeMo's, not Megatron-LM's or torchtitan's
    for fw in ("megatron", "torchtitan", "other"):
        assert fd.recipe_moe(fw, model, gpu, precision) is None


def test_nemo_moe_without_a_recipe_keeps_the_provider_default():
    # no Megatron-Bridge recipe for Mixtral, nor for H800 / H200: MBRIDGE_PROVIDER alltoall
    assert fd.recipe_moe("nemo", "Mixtral 8x7B", "B200", "fp8") is None
    assert fd.recipe_moe("nemo", "DeepSeek-V3", "H800-SXM-80GB", "fp8") is None
    assert fd.plan_defaults("nemo", 1, 8, True, "Mixtral 8x7B", "B200", "fp8")[
        "moe_dispatcher"] == "alltoall"
    # a dense model has no dispatcher whatever its name
    assert fd.plan_defaults("nemo", 1, 8, False, "DeepSeek-V3", "GB200", "bf16")[
        "moe_dispatcher"] == "alltoall"
    # a stated FP8 recipe picks the recipe's variant: current scaling on B200 -> fp8_cs
    # (alltoall at v0.2.0, hybridep after; overlap off in all four)
    assert fd.recipe_moe("nemo", "DeepSeek-V3", "B200", "fp8", "cs") == (None, False)
    # on rack-scale NVLink a knob the recipes disagree on keeps the rack default (deepep)
    assert fd.plan_defaults("nemo", 1, 72, True, "GPT-OSS 120B", "GB200", "fp8")[
        "moe_dispatcher"] == "deepep"


def test_blank_moe_columns_of_a_nemo_recipe_row_predict_as_the_recipe():
    row = ROWS["H064"]  # NeMo Qwen3-235B-A22B on 256 H100, FP8: states alltoall, ep_overlap 1
    assert (row["moe_dispatcher"], row["ep_overlap"]) == ("alltoall", "1")
    blank = _predict(_without(row, "moe_dispatcher", "ep_overlap"))
    stated = _predict(row)
    assert blank.predicted_tokens_per_s_per_gpu == stated.predicted_tokens_per_s_per_gpu
    off = _predict(dict(row, ep_overlap="0"))
    assert off.predicted_tokens_per_s_per_gpu != stated.predicted_tokens_per_s_per_gpu
