"""CLI: the main job works; bad input is one line on stderr, exit 2, no traceback."""

import json
import subprocess
import sys

import pytest


def run(*args):
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", *args], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_plan_readme_example():
    rc, out, err = run("plan", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB",
                       "--seq-len", "4096", "--global-batch", "64")
    assert rc == 0, err
    assert "best plans" in out and "why #1 wins" in out and "Pareto front" in out


def test_plan_json_and_pins():
    rc, out, _ = run("plan", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB",
                     "--seq-len", "4096", "--global-batch", "64", "--tp", "2", "--json")
    data = json.loads(out)
    assert rc == 0 and all(p["plan"]["tp"] == 2 for p in data["top"])


def test_predict(tmp_path):
    rc, out, err = run("predict", "--model", "mixtral-8x7b", "--gpus", "16xH100-SXM-80GB",
                       "--seq-len", "4096", "--global-batch", "64", "--dp", "8", "--tp", "2",
                       "--ep", "8", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["step_time_s"] == pytest.approx(sum(d["step_time_breakdown_s"].values()))


def test_scenario_file(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[model]\npreset = "llama3.1-8b"\n[cluster]\ngpus = "8xH100-SXM-80GB"\n'
                 '[workload]\nseq_len = 4096\nglobal_batch = 32\n[plan]\ndp = 8\n')
    rc, out, err = run("predict", "--scenario", str(f))
    assert rc == 0, err
    assert "plan: dp8 " in out


def test_data_parallel_degree_left_out_is_what_the_gpus_leave(tmp_path):
    # Megatron-LM and torchtitan derive dp from the world size: 16 GPUs / (tp 2 x pp 2) = 4
    rc, out, err = run("predict", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB",
                       "--seq-len", "4096", "--global-batch", "64", "--tp", "2", "--pp", "2")
    assert rc == 0, err
    assert "plan: dp4 tp2 pp2 " in out
    f = tmp_path / "s.toml"  # a [plan] table without dp: the same
    f.write_text('[model]\npreset = "llama3.1-8b"\n[cluster]\ngpus = "8xH100-SXM-80GB"\n'
                 '[workload]\nseq_len = 4096\nglobal_batch = 32\n[plan]\ntp = 2\n')
    rc, out, err = run("predict", "--scenario", str(f))
    assert rc == 0, err
    assert "plan: dp4 tp2 " in out
    # degrees that leave no whole dp: the validity rule names the product, as before
    rc, _, err = run("predict", "--model", "llama3.1-8b", "--gpus", "24xH100-SXM-80GB",
                     "--seq-len", "4096", "--global-batch", "64", "--tp", "8", "--pp", "2")
    assert rc == 2 and "must equal the number of GPUs (24)" in err


@pytest.mark.parametrize("args,needle", [
    (["plan", "--model", "llama3.1-8b", "--gpus", "8xH9000", "--seq-len", "4096",
      "--global-batch", "8"], "gpu='H9000'"),
    (["plan", "--model", "llama99", "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
      "--global-batch", "8"], "model='llama99'"),
    (["predict", "--model", "llama3.1-8b", "--gpus", "24xH100-SXM-80GB", "--seq-len", "4096",
      "--global-batch", "8", "--dp", "8", "--tp", "3"], "tp=3"),
    (["predict", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
      "--global-batch", "12", "--dp", "8"], "global_batch=12"),
    (["predict", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "-5",
      "--global-batch", "8", "--dp", "8"], "seq_len=-5"),
    (["predict", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
      "--global-batch", "8", "--dp", "4"], "must equal the number of GPUs (8)"),
])
def test_bad_input_one_line_exit_2(args, needle):
    rc, out, err = run(*args)
    assert rc == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_malformed_config_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", ')
    rc, _, err = run("plan", "--model", str(p), "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
                     "--global-batch", "8")
    assert rc == 2 and "not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_catalog_commands():
    rc, out, _ = run("gpus", "--json")
    assert rc == 0 and any(g["name"] == "GB200" and g["scaleup_domain"] == 72
                           for g in json.loads(out))
    rc, out, _ = run("models")
    assert rc == 0 and "deepseek-v3" in out


def test_use_scenario_plan_pins_only_the_knobs_the_table_names(tmp_path):
    """A [plan] table with tp = 2 pins tp: the search still chooses dp, the micro-batch and
    the rest, as `--tp 2` does (before, every field was pinned at its default: dp1 failed to
    divide the GPUs, and with dp given the search had one plan)."""
    f = tmp_path / "s.toml"
    f.write_text('[model]\npreset = "llama3.1-8b"\n[cluster]\ngpus = "16xH100-SXM-80GB"\n'
                 '[workload]\nseq_len = 4096\nglobal_batch = 128\n[plan]\ntp = 2\n')
    rc, out, err = run("plan", "--scenario", str(f), "--use-scenario-plan", "--rerank", "0",
                       "--json")
    assert rc == 0, err
    from_file = json.loads(out)
    rc, out, err = run("plan", "--scenario", str(f), "--tp", "2", "--rerank", "0", "--json")
    flags = json.loads(out)
    assert all(p["plan"]["tp"] == 2 for p in from_file["top"])
    assert [p["plan"] for p in from_file["top"]] == [p["plan"] for p in flags["top"]]
    assert len({p["plan"]["micro_batch"] for p in from_file["top"]}) > 1
