"""Which rows a fit or a score can use: rows that cannot be predicted are listed and left
out of calibrate --from-runs (not fitted on silently), and tokens/s per GPU comes from the
step time the same way in validate and calibrate (validate.measured_tokens)."""

import json

from meshplan.cli import main

HEADER = "id,gpu,num_gpus,seq_len,global_batch_seqs,model,measured_tokens_per_s_per_gpu,tp,dp"


def _write(tmp_path, lines, header=HEADER):
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([header, *lines]) + "\n")
    return p


def test_calibrate_every_row_unpredictable_refused_one_line(tmp_path, capsys):
    """Two rows with an unknown GPU crashed with StatisticsError (exit 1)."""
    p = _write(tmp_path, ["1,H100X,8,8192,64,llama3.1-8b,9000,1,8",
                          "2,H100X,8,8192,64,llama3.1-8b,9000,2,4"])
    out_toml = tmp_path / "ab.toml"
    assert main(["calibrate", "--from-runs", str(p), "--out", str(out_toml)]) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "0 of 2" in err
    assert "rows not used (2)" in out and out.count("gpu='H100X'") == 2
    assert not out_toml.exists()


def test_calibrate_counts_only_predictable_rows(tmp_path, capsys):
    """One good row and one with tp=3 (3 divides neither 32 heads nor 8 GPUs) was fitted on
    "2 measured runs" while every score saw the good row alone."""
    p = _write(tmp_path, ["1,H100-SXM-80GB,8,8192,64,llama3.1-8b,9000,1,8",
                          "2,H100-SXM-80GB,8,8192,64,llama3.1-8b,9000,3,4"])
    out_toml = tmp_path / "mb.toml"
    assert main(["calibrate", "--from-runs", str(p), "--out", str(out_toml)]) == 2
    out, err = capsys.readouterr()
    assert "fitting" not in out and "rows not used (1)" in out
    assert "   2 tp=3" in out
    assert len(err.strip().splitlines()) == 1 and "1 of 2" in err
    assert not out_toml.exists()


def test_validate_derives_tokens_from_the_step_time(tmp_path, capsys):
    """validate ignored measured_step_time_s; a row with only a step time was not scored.
    64 sequences x 8192 tokens / 7.5 s / 8 GPUs = 8,738.13 tokens/s per GPU. A row with
    both (9.0 s -> 7,281.8, against 5,000 stated: +45.6%) keeps its tokens/s and says so."""
    p = _write(tmp_path, ["s1,H100-SXM-80GB,8,8192,64,llama3.1-8b,,7.5,2,4",
                          "s3,H100-SXM-80GB,8,8192,64,llama3.1-8b,5000,9.0,8,1",
                          "s4,H100-SXM-80GB,8,8192,64,llama3.1-8b,7300,9.0,8,1"],
               header="id,gpu,num_gpus,seq_len,global_batch_seqs,model,"
                      "measured_tokens_per_s_per_gpu,measured_step_time_s,tp,dp")
    assert main(["validate", str(p), "--no-search", "--json", "--jobs", "1"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert abs(rows["s1"]["measured_tokens_per_s_per_gpu"] - 64 * 8192 / 7.5 / 8) < 1e-6
    assert rows["s1"]["tokens_error"] is not None
    assert rows["s3"]["measured_tokens_per_s_per_gpu"] == 5000
    assert any("+45.6%" in n for n in rows["s3"]["notes"])
    # 7,281.8 against 7,300: -0.2%, within a few percent, no note
    assert not any("measured_step_time_s" in n for n in rows["s4"]["notes"])


def test_validate_text_marks_a_row_that_does_not_fit(tmp_path, capsys):
    """dp16 zero0 on 16 H100: 8.0B parameters x 16 bytes (bf16 weights and gradients, fp32
    master and two Adam moments), unsharded, are 120 GiB before any activation, over 80 GiB.
    The JSON said predicted_oom true; the text table marked nothing."""
    p = _write(tmp_path, ["a6,H100-SXM-80GB,16,8192,128,llama3.1-8b,,1,16,0,4,1"],
               header="id,gpu,num_gpus,seq_len,global_batch_seqs,model,"
                      "measured_tokens_per_s_per_gpu,tp,dp,zero,micro_batch,oom")
    assert main(["validate", str(p), "--no-search", "--jobs", "1"]) == 0
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.lstrip().startswith("a6")]
    assert len(row) == 1 and row[0].endswith("[does not fit]"), row


def test_leave_one_source_out_needs_another_source(tmp_path, capsys):
    """With one source the tokens/s coverage 'without the source' was fitted on no rows
    and still reported; it is not scored (null, '-'), as the memory version does."""
    lines = ["1,H100-SXM-80GB,8,8192,64,llama3.1-8b,9000,2,4,lab",
             "2,H100-SXM-80GB,8,8192,64,llama3.1-8b,8000,4,2,lab"]
    header = HEADER + ",source"
    p = _write(tmp_path, lines, header=header)
    assert main(["validate", str(p), "--no-search", "--json", "--jobs", "1"]) == 0
    s = json.loads(capsys.readouterr().out)["summary"]
    assert s["tokens_interval_coverage_loso"] is None
    assert "loso_interval_coverage" not in s["per_source"]["lab"]
    p = _write(tmp_path, [lines[0], lines[1].replace(",lab", ",other")], header=header)
    assert main(["validate", str(p), "--no-search", "--json", "--jobs", "1"]) == 0
    s = json.loads(capsys.readouterr().out)["summary"]
    assert s["tokens_interval_coverage_loso"] is not None


def test_small_row_details(tmp_path, capsys):
    """num_gpus=8.0 is 8 GPUs and printed '8x', not '8.0x'; oom=1 beside a measured tokens/s
    is noted; a row that failed before its oom column was read says null, not false."""
    p = _write(tmp_path, ["1,H100-SXM-80GB,8.0,8192,64,llama3.1-8b,9000,2,4,yes",
                          "2,H100-SXM-80GB,8,8192,64,llama3.1-8b,nan,2,4,"],
               header=HEADER + ",oom")
    assert main(["validate", str(p), "--no-search", "--json", "--jobs", "1"]) == 1
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["1"]["measured_oom"] is True
    assert any(n.startswith("oom=1 with a measured tokens/s") for n in rows["1"]["notes"])
    assert rows["2"]["error"] and rows["2"]["measured_oom"] is None
    assert main(["validate", str(p), "--no-search", "--jobs", "1"]) == 1
    assert " 8xH100-SXM-80GB " in capsys.readouterr().out
