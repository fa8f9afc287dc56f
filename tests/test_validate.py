"""Accuracy on the published runs in ../shared/validation (skips when absent)."""

import json
from pathlib import Path

import pytest

from meshplan.cli import main
from meshplan.validate import predict_row, read_rows, summarize, validate

CSV = Path(__file__).resolve().parents[1].parent / "shared" / "validation" / "calibration.csv"
needs_csv = pytest.mark.skipif(not CSV.exists(), reason=f"calibration data not found at {CSV}")


@pytest.fixture(scope="module")
def summary():
    if not CSV.exists():
        pytest.skip(f"calibration data not found at {CSV}")
    return validate(CSV, with_search_best=False)


@needs_csv
def test_throughput_accuracy_targets(summary):
    # issue 2's bar: median |error| <= 10%, 90th percentile <= 25% on trust A/B rows
    results, s = summary
    assert s["errors"] == 0, [r.error for r in results if r.error]
    assert s["tokens_rows_trust_ab"] >= 40
    assert s["tokens_median_abs_error"] <= 0.10
    assert s["tokens_p90_abs_error"] <= 0.25


@needs_csv
def test_memory_accuracy_target(summary):
    _, s = summary
    assert s["memory_rows_trust_ab"] >= 10
    assert s["memory_median_abs_error"] <= 0.10


@needs_csv
def test_published_value_pinned():
    # Megatron-LM README (r0.8.0): GPT 7.1B, TP2 on 96 H100, 465.9 TFLOP/s per GPU
    # = 10,239.6 tokens/s/GPU; our prediction must stay within 12% (the calibration's in-sample
    # median is 7.7%, p90 20%; this row is +10.2% with the per-shape GEMM model and the
    # constants of 2026-11-23, +8.5% before it).
    row = next(r for r in read_rows(CSV) if r["id"].strip() == "2")
    res = predict_row(row, with_search_best=False)
    assert res.tokens_error is not None and abs(res.tokens_error) <= 0.12


def test_columns_in_any_order_unknown_ignored(tmp_path):
    header = ("extra,seq_len,id,trust,model,arch,layers,hidden,heads,kv_heads,ffn,vocab,mlp,"
              "global_batch_seqs,gpu,num_gpus,tp,pp,dp,precision,measured_tokens_per_s_per_gpu")
    row = "x,2048,7,A,toy,dense,12,768,12,12,3072,50304,gelu,64,A100-SXM-80GB,8,1,1,8,bf16,1000"
    p = tmp_path / "runs.csv"
    p.write_text(header + "\n" + row + "\n")
    results, s = validate(p, with_search_best=False)
    assert results[0].error is None and results[0].predicted_tokens_per_s_per_gpu > 0
    assert "micro_batch" in results[0].chosen  # blank knobs chosen by the search
    assert s["rows"] == 1


def test_bad_row_reported_not_raised(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_text("id,gpu,num_gpus,layers,hidden,heads,vocab,seq_len,global_batch_seqs,tp,ffn\n"
                 "1,H9000,8,12,768,12,50304,2048,64,1,3072\n")
    results, _ = validate(p, with_search_best=False)
    assert "H9000" in results[0].error


def test_cli_json_shape(tmp_path, capsys):
    p = tmp_path / "runs.csv"
    p.write_text("id,trust,gpu,num_gpus,layers,hidden,heads,vocab,ffn,seq_len,global_batch_seqs\n"
                 "1,A,H100-SXM-80GB,8,12,768,12,50304,3072,2048,64\n")
    assert main(["validate", str(p), "--json", "--no-search"]) == 0
    out = json.loads(capsys.readouterr().out)
    row = out["rows"][0]
    for k in ("id", "predicted_tokens_per_s_per_gpu", "predicted_step_time_s",
              "predicted_peak_mem_gib", "predicted_oom", "chosen", "error"):
        assert k in row
    assert "tokens_median_abs_error" in out["summary"]


def test_degrees_the_search_fills_in_are_reported_as_chosen(tmp_path):
    """A row giving tp 1 and dp 4 on 8 GPUs leaves a factor of 2 to the search (cp or pp):
    the plan predicted uses it, and ``chosen`` says which, as it does for the knobs."""
    p = tmp_path / "runs.csv"
    p.write_text("id,gpu,num_gpus,seq_len,global_batch_seqs,model,source,"
                 "measured_tokens_per_s_per_gpu,tp,dp\n"
                 "1,H100-SXM-80GB,8,8192,64,llama3.1-8b,lab,9000,1,4\n")
    (res,), _ = validate(p, with_search_best=False)
    assert res.error is None
    assert res.chosen["cp"] * res.chosen["pp"] == 2
    assert "tp" not in res.chosen and "dp" not in res.chosen  # the row's own


def test_json_keeps_the_source_as_written(tmp_path):
    """The --json row's source is the row's own cell; the shortened key that groups sources
    for leave-one-source-out is beside it."""
    p = tmp_path / "runs.csv"
    p.write_text("id,gpu,num_gpus,seq_len,global_batch_seqs,model,source,"
                 "measured_tokens_per_s_per_gpu,tp,dp\n"
                 '1,H100-SXM-80GB,8,8192,64,llama3.1-8b,"lab, run 1",9000,1,8\n')
    (res,), _ = validate(p, with_search_best=False)
    js = res.to_json()
    assert js["source"] == "lab, run 1" and js["source_key"] == "lab"
