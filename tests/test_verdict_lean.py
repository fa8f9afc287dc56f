"""verdict_lean: a runs-CSV row predicted not to fit is 'may not fit' (not a hard OOM) when
only the dtypes its engine permits, in columns the row left blank, make it fit."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from meshplan import verdict_lean
from meshplan.cost import estimate
from meshplan.validate import predict_row, prepare

RUNS = Path(__file__).resolve().parents[1] / "bench" / "data" / "heldout_runs.csv"
TEMPLATE = next(r for r in csv.DictReader(open(RUNS, newline="")) if r["id"] == "H030")


def _row(**kw) -> dict:
    # Llama 3 8B, seq 7680, on 8 H100 80GB (79.11 GiB as the device reports): dp 8, ZeRO-1,
    # micro-batch 1, selective recompute: 80.6 GiB with fp32 states and gradients, fits lean
    row = dict(TEMPLATE, id="T1", seq_len="7680", zero="1", precision="bf16", fp8_recipe="",
               recompute="selective", recompute_layers="", micro_batch="1",
               global_batch_seqs="16", measured_tokens_per_s_per_gpu="", oom="0",
               optimizer_state_precision="", grad_reduce_dtype="")
    row.update(kw)
    return row


def test_lean_dtypes_per_engine():
    # Megatron-Core: bf16 moments beside an fp32 master (--main-params-dtype fp32|fp16 only)
    # and a bf16 gradient buffer (--grad-reduce-in-bf16)
    assert verdict_lean.lean_choices("megatron", "bf16", 1) == (("bf16",), ("bf16",))
    # DeepSpeed bf16_master_weights_and_grads + bf16_optimizer_states: ZeRO 1-3 and bf16 only
    assert verdict_lean.lean_choices("deepspeed", "bf16", 1) == (("bf16-no-master",), ("bf16",))
    assert verdict_lean.lean_choices("deepspeed", "bf16", 0) == ((), ())
    assert verdict_lean.lean_choices("deepspeed", "fp16", 1) == ((), ())
    assert verdict_lean.lean_choices("torchtitan", "bf16", 3) == ((), ())
    assert verdict_lean.lean_choices("aleph-alpha", "bf16", 1) == ((), ())
    assert verdict_lean.lean_choices("maxtext", "bf16", 1) == ((), ())


def test_megatron_lean_workload_bytes():
    prep = prepare(_row(framework="megatron"))  # fp32 gradients by default (NeMo's are bf16)
    lean = verdict_lean.lean_workload(prep.workload, 1, True, True)
    # fp32 master 4 + bf16 moments 2 + 2 = 8 bytes of optimizer state, 2-byte gradients
    assert lean.master_and_state_bytes == 8 and lean.grad_buffer_bytes == 2
    # a stated column is kept
    assert verdict_lean.lean_workload(prep.workload, 1, False, False) is None
    kept = verdict_lean.lean_workload(prep.workload, 1, False, True)
    assert kept.master_and_state_bytes == 12 and kept.grad_buffer_bytes == 2


def test_the_constructed_row_fits_only_lean():
    prep = prepare(_row())
    pins = dict(prep.pins)
    from meshplan.plan import Plan
    plan = Plan(dp=8, zero=1, micro_batch=1, recompute="selective",
                tp_comm_overlap=False)
    assert pins["dp"] == 8 and pins["zero"] == 1
    default = estimate(prep.model, prep.cluster, prep.workload, plan)
    lean = estimate(prep.model, prep.cluster,
                    verdict_lean.lean_workload(prep.workload, 1, True, True), plan)
    assert not default.fits and lean.fits
    assert verdict_lean.fits_only_lean(default, prep.model, prep.cluster, prep.workload,
                                       True, True)
    assert not verdict_lean.fits_only_lean(default, prep.model, prep.cluster, prep.workload,
                                           False, False)


def test_blank_dtypes_give_may_not_fit():
    res = predict_row(_row(), with_search_best=False)
    assert res.error is None, res.error
    assert res.predicted_oom is False and res.predicted_may_not_fit is True
    assert any("lean dtypes" in n for n in res.notes)


def test_stated_dtypes_keep_the_hard_oom():
    res = predict_row(_row(optimizer_state_precision="fp32", grad_reduce_dtype="fp32"),
                      with_search_best=False)
    assert res.error is None, res.error
    assert res.predicted_oom is True and not res.predicted_may_not_fit


@pytest.mark.parametrize("framework,hard_oom", [("torchtitan", True), ("aleph-alpha", True),
                                                ("other", False)])
def test_the_engine_decides(framework, hard_oom):
    # the same row: torchtitan (mixed_precision_reduce: Literal["float32"]) and Aleph Alpha
    # (fp32 master copies always) permit nothing leaner, an engine meshplan does not know
    # may have run any dtype
    res = predict_row(_row(framework=framework), with_search_best=False)
    assert res.error is None, res.error
    assert res.predicted_oom is hard_oom
    assert res.predicted_may_not_fit is (not hard_oom)


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
def test_a_plan_that_fits_is_left_alone(framework):
    prep = prepare(_row(framework=framework, recompute="full"))
    from meshplan.plan import Plan
    est = estimate(prep.model, prep.cluster, prep.workload,
                   Plan(dp=8, zero=1, micro_batch=1, recompute="full"))
    assert est.fits
    assert not verdict_lean.fits_only_lean(est, prep.model, prep.cluster, prep.workload,
                                           True, True)


def test_blank_dtypes_are_a_free_knob_only_where_they_change_what_fits():
    # The row leaves recompute blank: with fp32 dtypes selective recomputation does not fit
    # (the constructed row above), so the search falls back to full recomputation; with the
    # engine's lean dtypes selective fits and runs faster. The published run fit, and its
    # engine permits those dtypes in the columns the row leaves blank, so the faster plan is
    # predicted, with a note and 'may not fit' (nothing fits at the default dtypes is not the
    # case here: full recomputation does).
    stated = predict_row(_row(recompute="", optimizer_state_precision="fp32",
                              grad_reduce_dtype="fp32"), with_search_best=False)
    blank = predict_row(_row(recompute=""), with_search_best=False)
    assert stated.error is None and blank.error is None, (stated.error, blank.error)
    assert stated.chosen["recompute"] == "full"
    assert blank.chosen["recompute"] != "full"
    assert blank.predicted_tokens_per_s_per_gpu > stated.predicted_tokens_per_s_per_gpu
    assert any("fits only with the engine's lean dtypes" in n for n in blank.notes)
    # an engine that permits nothing leaner keeps the fp32 answer
    tt = predict_row(_row(recompute="", framework="torchtitan"), with_search_best=False)
    assert tt.chosen["recompute"] == "full"
    assert not any("lean dtypes" in n for n in tt.notes)


def test_lean_dtypes_do_not_replace_a_plan_that_already_fits():
    # stated full recomputation fits at fp32: the lean dtypes change nothing the search
    # picks, so the row is predicted at its framework's default dtypes (no note)
    res = predict_row(_row(recompute="full"), with_search_best=False)
    assert res.error is None, res.error
    assert not res.predicted_oom
    assert not any("lean dtypes" in n for n in res.notes)
