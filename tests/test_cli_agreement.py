"""What one command prints for a plan, the others reproduce; and inputs that used to crash or
to be read silently wrong (found by driving the CLI as a user, 2026-11-27)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.cli import main
from meshplan.commands import _profile

A = ["--model", "llama3.1-70b", "--gpus", "64xH100-SXM-80GB", "--seq-len", "8192",
     "--global-batch", "256"]
PROFILE = ('[meta]\ndevice = "test"\ndate = "2026-11-27"\n[constants]\n'
           '"SUSTAINED_TENSOR" = 0.6\n"NETWORK.scaleout" = 0.5\n')


@pytest.fixture(autouse=True)
def _no_profile_left():
    yield
    _profile.reset()


def _json(argv, capsys) -> dict:
    rc = main(argv + ["--json"])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def test_a_plan_made_with_a_profile_is_reproduced_from_its_plan_toml(tmp_path, capsys):
    prof = tmp_path / "p.toml"
    prof.write_text(PROFILE)
    out = tmp_path / "pe"
    assert main(["plan", *A, "--top", "1", "--profile", str(prof), "--export", "meshplan",
                 "--out", str(out)]) == 0
    plan_text = capsys.readouterr().out
    _profile.reset()
    toml = (out / "plan.toml").read_text()
    # a copy of the profile travels with the plan (the file names it relative to itself)
    assert 'profile = "profile.toml"' in toml
    assert (out / "profile.toml").read_text() == PROFILE
    label = toml.split("# plan:", 1)[1].splitlines()[0].strip()
    step = float(plan_text.split(label, 1)[1].split()[0])
    # predict from the file alone applies the profile the file names ...
    d = _json(["predict", "--scenario", str(out / "plan.toml")], capsys)
    assert round(d["step_time_s"], 2) == step
    _profile.reset()
    # ... and simulate and export take --profile as plan and predict do
    sim = _json(["simulate", *A, "--plan", label, "--profile", str(prof)], capsys)
    _profile.reset()
    sim0 = _json(["simulate", *A, "--plan", label], capsys)
    assert sim["step_time_s"] != sim0["step_time_s"]
    assert main(["export", *A, "--plan", label, "--profile", str(prof), "--to", "meshplan",
                 "--out", str(tmp_path / "mx")]) == 0
    assert (tmp_path / "mx/profile.toml").read_text() == PROFILE


@pytest.mark.parametrize("args", [
    ["--model", "llama3.1-405b", "--gpus", "512xH100-SXM-80GB", "--seq-len", "8192",
     "--global-batch", "512"],
    # MoE: predict widens by the engine knobs the label leaves to the engine (engine_spread)
    ["--model", "mixtral-8x7b", "--gpus", "64xH100-SXM-80GB", "--seq-len", "4096",
     "--global-batch", "256"]], ids=["dense-405b", "moe-mixtral"])
def test_plan_json_intervals_are_predicts_and_simulates(args, capsys):
    top = _json(["plan", *args, "--top", "3"], capsys)["top"]
    piped = [t for t in top if "simulated_interval" in t and t["plan"]["pp"] > 1]
    assert piped, "no simulated pipeline plan in the top 3"
    t = piped[0]
    pred = _json(["predict", *args, "--plan", t["label"]], capsys)
    assert t["interval"]["step_time_s_p10_p90"] == pytest.approx(pred["interval"]["step_time_s_p10_p90"])
    assert t["step_time_s"] == pytest.approx(pred["step_time_s"])
    sim = _json(["simulate", *args, "--plan", t["label"]], capsys)
    assert (t["simulated_interval"]["step_time_s_p10_p90"]
            == pytest.approx(sim["interval"]["step_time_s_p10_p90"]))


def test_a_sequence_shorter_than_tp_plans_without_sequence_parallelism(capsys):
    d = _json(["plan", "--model", "tiny-moe", "--gpus", "8xH100-SXM-80GB", "--seq-len", "1",
               "--global-batch", "1"], capsys)
    assert d["top"] and all(not t["plan"].get("sequence_parallel") for t in d["top"]
                            if t["plan"]["tp"] > 1)


def test_a_non_ascii_model_name_prints_under_an_ascii_terminal(tmp_path):
    src = Path(__file__).resolve().parents[1] / "meshplan/specs/catalog/models/llama3.1-8b.json"
    f = tmp_path / "模型.json"
    f.write_text(src.read_text())
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "predict", "--model", str(f),
                        "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "64",
                        "--plan", "dp8 tp1 pp1 zero3 mb2"], capture_output=True, text=True,
                       env=env, timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert p.returncode == 0, p.stderr
    assert "\\u6a21\\u578b" in p.stdout and "Traceback" not in p.stderr


def test_a_profile_that_is_not_utf8_is_one_line(tmp_path, capsys):
    f = tmp_path / "b.toml"
    f.write_bytes(b"\xff\xfe[constants]\n")
    rc = main(["predict", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len",
               "4096", "--global-batch", "64", "--plan", "dp8 tp1 pp1 zero3 mb2", "--profile",
               str(f)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "not UTF-8 text" in err[0]


def test_runs_csv_trust_and_framework_cells(tmp_path):
    from meshplan.validate import validate
    head = "id,trust,model,gpu,num_gpus,seq_len,global_batch_seqs,framework,tp,pp,dp\n"
    f = tmp_path / "r.csv"
    f.write_text(head + "1,Z,llama3.1-8b,H100-SXM-80GB,8,4096,32,nemo,1,1,8\n"
                        "2,a,llama3.1-8b,H100-SXM-80GB,8,4096,32,jax,1,1,8\n")
    rows, summary = validate(f, with_search_best=False)
    # an unknown grade is predicted and said so, but not counted among the A/B rows
    assert not rows[0].error and rows[0].predicted_tokens_per_s_per_gpu
    assert any("trust 'Z'" in n for n in rows[0].notes)
    # a lower-case grade is the grade; a framework the schema does not name is 'other', said so
    assert rows[1].trust == "A" and not rows[1].error
    assert any("predicted as 'other'" in n for n in rows[1].notes)


def test_a_row_wider_than_its_header_is_refused_alone(tmp_path):
    from meshplan.validate import validate
    f = tmp_path / "w.csv"
    f.write_text("id,model,gpu,num_gpus,seq_len,global_batch_seqs,derivation\n"
                 "1,llama3.1-8b,H100-SXM-80GB,8,4096,32,a note, with a comma\n"
                 "2,llama3.1-8b,H100-SXM-80GB,8,4096,32,fine\n")
    rows, _ = validate(f, with_search_best=False)
    assert "more non-blank field" in rows[0].error and "line 2" in rows[0].error
    assert not rows[1].error and rows[1].predicted_tokens_per_s_per_gpu


def test_plan_pinned_by_a_label_keeps_predicts_interval(tmp_path, capsys):
    """A label names the plan's knobs as search pins, but `predict --plan LABEL` still counts
    the MoE engine knobs as unnamed (and widens): plan --json must give that interval."""
    sc = tmp_path / "moe.toml"
    sc.write_text('[model]\npreset = "mixtral-8x7b"\n[cluster]\ngpus = "32xH100-SXM-80GB"\n'
                  '[workload]\nseq_len = 4096\nglobal_batch = 256\nframework = "megatron"\n')
    label = "dp16 tp1 pp2 vpp2 ep8 zero1 mb1 zb_v"
    top = _json(["plan", "--scenario", str(sc), "--plan", label, "--top", "1"], capsys)["top"]
    pred = _json(["predict", "--scenario", str(sc), "--plan", label], capsys)
    assert top[0]["label"] == label
    assert (top[0]["interval"]["step_time_s_p10_p90"]
            == pytest.approx(pred["interval"]["step_time_s_p10_p90"]))


def test_a_row_on_a_preset_with_experts_its_groups_do_not_divide():
    from meshplan.row_model import model_from_row
    m, notes = model_from_row({"model": "DeepSeek-V3", "arch": "moe", "moe_experts": "12"})
    assert m.moe_experts == 12 and m.moe_groups == 0
    assert any("routing groups do not divide" in n for n in notes)


M = ["--model", "mixtral-8x7b", "--gpus", "16xH100-SXM-80GB", "--seq-len", "4096",
     "--global-batch", "64"]


def test_a_searched_plan_whose_label_names_epo_gets_predicts_interval(capsys):
    """plan --json widened every MoE plan over both engine knobs, while `predict --plan LABEL`
    counts a knob its label names (epo, deepep) as stated: for a plan the search gave `epo`
    the two printed different 90th percentiles (2.30 s against 1.99 s on mixtral-8x22b,
    128 x H100, --engine megatron)."""
    top = _json(["plan", *M, "--engine", "megatron", "--tp", "1", "--pp", "1", "--top", "3"],
                capsys)["top"]
    named = [t for t in top if t["plan"]["ep_comm_overlap"]]
    assert named, "no plan with epo among the top 3"
    for t in named:
        pred = _json(["predict", *M, "--engine", "megatron", "--plan", t["label"]], capsys)
        assert t["interval"] == pred["interval"]


@pytest.mark.parametrize("label", ["dp8 tp1 pp1 ep8 zero1 mb1", "dp8 tp1 pp1 ep8 zero1 mb1 deepep"])
def test_plan_toml_reads_back_predicts_interval_and_plan(tmp_path, capsys, label):
    """`export --to meshplan` wrote the MoE engine knobs the plan left to the engine as stated
    values, so `predict --scenario plan.toml` did not widen over the engine's other settings
    and printed a narrower interval than `predict --plan LABEL` (README: the same numbers).
    They stay blank in the file now, commented out at the value `run` takes."""
    sc = tmp_path / "s.toml"
    sc.write_text('[model]\npreset = "mixtral-8x7b"\n[cluster]\ngpus = "8xH100-SXM-80GB"\n'
                  '[workload]\nseq_len = 4096\nglobal_batch = 64\nframework = "megatron"\n')
    pred = _json(["predict", "--scenario", str(sc), "--plan", label], capsys)
    out = tmp_path / "pe"
    assert main(["export", "--scenario", str(sc), "--plan", label, "--to", "meshplan",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    back = _json(["predict", "--scenario", str(out / "plan.toml")], capsys)
    assert back["label"] == label and back["plan"] == pred["plan"]
    assert back["step_time_s"] == pred["step_time_s"]
    assert back["interval"] == pred["interval"]
    # and the same file exported again keeps the knobs blank
    assert main(["export", str(out / "plan.toml"), "--to", "meshplan", "--out",
                 str(tmp_path / "again")]) == 0
    capsys.readouterr()
    assert (tmp_path / "again/plan.toml").read_text() == (out / "plan.toml").read_text()


def test_a_plan_searched_for_an_engine_goes_through_plan_toml(tmp_path, capsys):
    """`plan --engine megatron` costs plans as Megatron-LM runs them, but `export --to
    meshplan` took no --engine, so plan.toml could only be predicted as meshplan's own runtime
    runs it (its kernels, FP8 recipe and memory class). export takes --engine now; plan.toml names the framework and
    `predict --scenario` prints what `predict --engine megatron --plan LABEL` prints."""
    t = _json(["plan", *M, "--engine", "megatron", "--tp", "1", "--pp", "1", "--top", "1"],
              capsys)["top"][0]
    out = tmp_path / "pe"
    assert main(["export", *M, "--plan", t["label"], "--engine", "megatron", "--to", "meshplan",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    back = _json(["predict", "--scenario", str(out / "plan.toml")], capsys)
    assert back["label"] == t["label"]
    assert back["step_time_s"] == t["step_time_s"] and back["interval"] == t["interval"]
    assert 'framework = "megatron"' in (out / "plan.toml").read_text()
    # an engine that is not the one written for is refused in one line, nothing written
    rc = main(["export", *M, "--plan", t["label"], "--engine", "torchtitan", "--to", "megatron",
               "--out", str(tmp_path / "mg")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--engine='torchtitan'" in err[0]
    assert not (tmp_path / "mg").exists()


@pytest.mark.parametrize("label", ["dp2 tp2 pp4 vpp4 zero1 mb1 interleaved_1f1b sp tpo",
                                   "dp2 tp2 pp4 zero1 mb1 zb_h1 sp tpo"])
def test_predict_memory_per_stage_is_simulates_per_rank(label, capsys):
    """`predict` counted the micro-batches in flight on pipeline rank r as Korthikanti's rank-0
    figure times (pp - r)/pp, and for interleaving always in rounds of pp micro-batches, while
    `simulate` holds what the schedule's action lists hold (torch's rounds of m // max(1,
    m // pp); ZB-H1 keeps p on every rank, Qi et al. 2023). Here (m = 15 on pp 4) predict
    printed 28.3, 22.0, 19.1, 23.0 GiB per stage where simulate gave 30.1, 25.5, 24.3, 29.8
    for the interleaved plan. The same schedule now gives the same memory to 1%."""
    a = ["--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len", "4096",
         "--global-batch", "30", "--plan", label]
    pred = _json(["predict", *a], capsys)
    sim = _json(["simulate", *a], capsys)
    closed = [s["total"] for s in pred["memory_per_stage_gib"]]
    simulated = [sum(r.values()) / 2**30 for r in sim["memory_per_rank_bytes"]]
    assert closed == pytest.approx(simulated, rel=0.01)
    assert pred["peak_memory_gib"] == pytest.approx(sim["peak_memory_bytes"] / 2**30, rel=0.01)
