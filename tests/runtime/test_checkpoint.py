"""DCP checkpoints: resume with identical losses, into another layout, and after a crash."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.errors import InputError
from meshplan.plan import Plan
from meshplan.runtime import checkpoint
from meshplan.runtime.launch import fork_ranks
from meshplan.runtime.train import RunConfig, reference_run
from meshplan.runtime.worker import run_worker, config_to_json
from meshplan.specs.catalog.presets import preset

from .in_process import cli as _in_process

pytestmark = pytest.mark.slow


def _cfg(plan, steps=4, model="tiny-llama"):
    return RunConfig(preset(model), plan, seq_len=16, global_batch=8, steps=steps,
                     lr=5e-4, adam_eps=1e-6)


def _worker(rank, world, run):
    import torch
    return run_worker(run, rank, torch.device("cpu"))


def _run(cfg, **opts):
    run = json.loads(config_to_json(cfg, **opts))
    return fork_ranks(_worker, cfg.plan.world_size, run, timeout_s=240)


def test_resume_into_a_different_layout_gives_the_same_losses(tmp_path):
    """Save under fsdp4 x tp2 after 2 steps, resume under fsdp8: steps 3-4 match."""
    a = _cfg(Plan(dp=4, tp=2, zero=3))
    full = _run(a, ckpt_dir=str(tmp_path), ckpt_every=2)[0]["losses"]
    ref, _ = reference_run(a)
    assert max(abs(x - y) / y for x, y in zip(full, ref)) < 1e-5
    assert checkpoint.latest(tmp_path).name == "step-3"
    b = _cfg(Plan(dp=8, zero=3))
    res = _run(b, resume=str(tmp_path / "step-1"))[0]
    assert res["resumed_from"] == 2
    assert len(res["losses"]) == 4
    assert max(abs(x - y) / y for x, y in zip(res["losses"], full)) < 1e-5
    # same layout resume is bit-for-bit the uninterrupted run
    c = _run(a, resume=str(tmp_path / "step-1"))[0]
    assert c["losses"] == full


def test_moe_checkpoint_reshards_experts_between_ep_etp_layouts(tmp_path):
    """Experts saved sharded over ep2 x etp2 (8 ranks) resume on ep2 alone (4 ranks)."""
    a = _cfg(Plan(dp=2, tp=2, ep=2, etp=2, zero=3), model="tiny-moe")
    full = _run(a, ckpt_dir=str(tmp_path), ckpt_every=2)[0]["losses"]
    b = _cfg(Plan(dp=4, ep=2, zero=3), model="tiny-moe")
    res = _run(b, resume=str(tmp_path / "step-1"))[0]
    assert res["resumed_from"] == 2
    assert max(abs(x - y) / y for x, y in zip(res["losses"], full)) < 1e-5


def test_missing_or_corrupt_checkpoints_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such checkpoint"):
        checkpoint.check(tmp_path / "nope")
    bad = tmp_path / "step-0"
    bad.mkdir()
    (bad / "meta.json").write_text("{not json")
    (bad / ".metadata").write_bytes(b"garbage")
    with pytest.raises(InputError, match="corrupt"):
        checkpoint.check(bad)
    assert checkpoint.latest(tmp_path / "empty") is None


def _cli(*args, env=None):
    import os
    e = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "meshplan.cli", *args], capture_output=True,
                          text=True, env=e, timeout=300)


def test_crash_restart_resumes_without_losing_or_repeating_a_step(tmp_path):
    """torchrun restarts the group after rank 1 is SIGKILLed at step 2; training resumes
    from the step-1 checkpoint and every step's loss equals the single-process run."""
    out = tmp_path / "out"
    r = _cli("run", "--dp", "2", "--steps", "4", "--seq-len", "16", "--global-batch", "8",
             "--lr", "5e-4", "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "1",
             "--resume", "--max-restarts", "1", "--out", str(out), "--json",
             env={"MESHPLAN_FAULT": "1:2"})
    assert r.returncode == 2 and "holds no complete checkpoint" in r.stderr  # nothing yet
    r = _cli("run", "--dp", "2", "--steps", "4", "--seq-len", "16", "--global-batch", "8",
             "--lr", "5e-4", "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "1",
             "--max-restarts", "1", "--out", str(out), "--json",
             env={"MESHPLAN_FAULT": "1:2"})
    assert r.returncode == 0, r.stderr[-3000:]
    res = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    assert all(x["resumed_from"] == 2 for x in res)  # restarted after steps 0 and 1
    ref, _ = reference_run(RunConfig(preset("tiny-llama"), Plan(), seq_len=16, global_batch=8,
                                     steps=4, lr=5e-4))
    losses = res[0]["losses"]
    assert len(losses) == 4
    assert max(abs(x - y) / y for x, y in zip(losses, ref)) < 1e-5


def test_cli_bad_inputs_are_one_line_exit_2(tmp_path):
    r = _in_process("run", "--dp", "2", "--global-batch", "3")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = _in_process("run", "--model", "gpt2", "--steps", "1")
    assert r.returncode == 2 and "linear bias" in r.stderr
    r = _in_process("run", "--resume", str(tmp_path / "missing"))
    assert r.returncode == 2 and "no such checkpoint" in r.stderr


def test_resume_refusals_are_one_line_exit_2(tmp_path):
    """A checkpoint of another model, --steps not past the checkpoint, --checkpoint-every
    without a folder: one line each, exit 2 (before: a RuntimeError traceback through DCP's
    CheckpointException, a BaseException; a ZeroDivisionError after a run of no step; a run
    that silently wrote no checkpoint)."""
    ck = tmp_path / "ck"
    _run(_cfg(Plan(dp=2), steps=2), ckpt_dir=str(ck), ckpt_every=2)
    step = checkpoint.latest(ck)
    assert step is not None and step.name == "step-1"
    base = ("run", "--seq-len", "16", "--global-batch", "8", "--dp", "2", "--device", "cpu",
            "--lr", "5e-4")  # the checkpoint's (a resume under another lr is refused)
    r = _in_process(*base, "--model", "tiny-llama", "--steps", "2", "--resume", str(step))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--steps=2: the checkpoint is after step 2" in r.stderr
    r = _in_process(*base, "--model", "tiny-moe", "--steps", "3", "--resume", str(step))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "cannot be loaded into this model and plan (RuntimeError: Missing key" in r.stderr
    r = _in_process(*base, "--model", "tiny-llama", "--checkpoint-every", "1")
    assert r.returncode == 2 and "needs --checkpoint-dir" in r.stderr


def test_resume_refuses_another_data_stream(tmp_path):
    """The batches of step s are a function of (data, seed, seq_len, global_batch): a resume
    under another value trained on other batches than the run it continues and printed the
    two runs' losses as one history (before: exit 0). Likewise --lr: the load restores the
    optimizer's param_groups, so the resumed run went on at the checkpoint's lr whatever
    --lr said (before: exit 0, ran at 5e-4 when given 1e-2). Now one line naming the field, exit 2,
    before any worker starts; the same values still resume."""
    ck = tmp_path / "ck"
    _run(_cfg(Plan(), steps=2), ckpt_dir=str(ck), ckpt_every=2)
    step = checkpoint.latest(ck)
    meta = checkpoint.check(step)
    assert meta["data_stream"] == {"data": "synthetic", "seed": 0, "seq_len": 16,
                                   "global_batch": 8}
    assert meta["optimizer"] == {"lr": 5e-4}
    base = ("run", "--model", "tiny-llama", "--device", "cpu", "--steps", "3",
            "--resume", str(step))
    for extra, field in ((("--seed", "7"), "seed=7"), (("--data", "corpus"), "data='corpus'"),
                         (("--seq-len", "32"), "seq_len=32"),
                         (("--global-batch", "4"), "global_batch=4"),
                         (("--lr", "0.01"), "lr=0.01")):
        args = {"--seq-len": "16", "--global-batch": "8"} | dict([extra])
        r = _in_process(*base, *[x for kv in args.items() for x in kv],
                 "--out", str(tmp_path / "out"))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr[-2000:]
        assert field in r.stderr and "the checkpoint" in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()
    checkpoint.check_same_data(meta, _cfg(Plan(), steps=3))  # same stream: accepted


def test_run_sizes_a_scenario_plan_on_its_cluster_as_predict_does(tmp_path):
    """[cluster] 4 GPUs, [plan] tp=2: `predict --scenario` prints dp2 tp2; `run` ran dp1 tp2
    on 2 ranks and predicted for 2 GPUs (before: plan dp1, exit 0). Now it runs the plan
    predict prints."""
    sc = tmp_path / "sc.toml"
    body = ('[model]\npreset = "tiny-llama"\n[cluster]\ngpus = "4xH100-SXM-80GB"\n'
            '[workload]\nseq_len = 16\nglobal_batch = 4\n[plan]\n')
    sc.write_text(body + "tp = 2\n")
    r = _in_process("run", "--scenario", str(sc), "--steps", "1", "--device", "cpu", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert (res["plan"]["dp"], res["plan"]["tp"]) == (2, 2)
    p = _in_process("predict", "--scenario", str(sc), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["plan"]["dp"] == 2


def test_run_refuses_zero_sizes_and_another_gpu_count():
    """--seq-len 0 and --global-batch 0 were taken for the defaults (64, 8); --gpus with
    another count than the plan's ranks was predicted for the plan's count without a word."""
    for flag in ("--seq-len", "--global-batch"):
        r = _in_process("run", "--dp", "2", flag, "0")
        assert r.returncode == 2 and "must be a positive integer" in r.stderr, r.stderr
    r = _in_process("run", "--dp", "2", "--gpus", "8xH100-SXM-80GB")
    assert r.returncode == 2 and "must equal the number of GPUs (8)" in r.stderr, r.stderr


def test_run_predicts_the_configuration_it_runs():
    """Knobs the runtime does not implement (tpo here) are named and left out of the
    prediction beside the measurement: the runtime's figures compare with `predict` of the
    plan as run, not of the label given (tpo made the prediction faster than what ran)."""
    r = _in_process("run", "--model", "tiny-llama", "--seq-len", "32", "--global-batch", "8",
             "--steps", "2", "--device", "cpu", "--plan", "dp1 tp2 pp1 zero1 mb1 sp tpo",
             "--gpus", "2xH100-SXM-80GB", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["not_run"] == ["tpo (TP communication overlap)"] and not d["plan"]["tp_comm_overlap"]
    p = _in_process("predict", "--model", "tiny-llama", "--seq-len", "32", "--global-batch", "8",
             "--gpus", "2xH100-SXM-80GB", "--plan", "dp1 tp2 pp1 zero1 mb1 sp", "--json")
    assert d["predicted"]["step_time_s"] == json.loads(p.stdout)["step_time_s"]
