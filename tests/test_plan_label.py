"""A plan has one text form: what `plan` prints, predict/simulate/export reproduce.

Numbers are compared exactly (JSON floats, last digit) against `plan` output computed in
this test, never against stored step times (the cost model's constants may change)."""

from __future__ import annotations

import json
import random

import pytest

from meshplan.cli import main
from meshplan.errors import InputError
from meshplan.plan import SCHEDULES, Plan
from meshplan.plan_label import format_label, parse_label


def _random_plan(rng: random.Random) -> Plan:
    while True:
        pp = rng.choice((1, 2, 4, 8))
        sched = rng.choice(SCHEDULES) if pp > 1 else rng.choice(("1f1b", "gpipe", "zb_h1"))
        vpp = 2 if sched in ("zb_v", "dualpipev") else (
            rng.choice((2, 3, 4)) if sched in ("interleaved_1f1b", "looped_bfs", "interleaved_zb")
            else 1)
        tp, dp, cp = rng.choice((1, 2, 4, 8)), rng.choice((1, 2, 4)), rng.choice((1, 2, 4))
        zero = rng.choice((0, 1, 2, 3))
        rc = rng.choice(("none", "selective", "full", "partial"))
        try:
            return Plan(dp=dp, tp=tp, pp=pp, cp=cp, vpp=vpp, schedule=sched,
                        ep=rng.choice((1, 2)), etp=rng.choice((1, 1, 2)), zero=zero,
                        hsdp_shard=rng.choice((0, 0, 2)), micro_batch=rng.choice((1, 2, 4)),
                        recompute="full" if rc == "partial" else rc,
                        recompute_layers=rng.choice((1, 2, 7)) if rc == "partial" else 0,
                        sequence_parallel=rng.choice((None, False, True)),
                        offload_optimizer=zero > 0 and rng.random() < 0.3,
                        cp_kind=rng.choice(("ring", "all_to_all")),
                        overlap_grad_reduce=rng.random() < 0.7,
                        overlap_param_gather=rng.random() < 0.7,
                        tp_comm_overlap=rng.random() < 0.5,
                        order=rng.choice(("tp-cp-dp-pp", "tp-dp-cp-pp", "cp-tp-dp-pp")))
        except InputError:
            continue


def test_every_plan_survives_its_label():
    rng = random.Random(15)
    partial = 0
    for _ in range(2000):
        p = _random_plan(rng)
        partial += p.recompute_layers > 0
        assert parse_label(format_label(p)) == p, format_label(p)
    assert partial > 200  # the partial-recomputation token is among the plans covered


def test_label_names_no_context_parallel_kind_without_context_parallelism():
    # DeepSpeed's searched plans default to Ulysses; at cp=1 there is nothing to exchange,
    # and the label must not print a token the plan does not use
    p = Plan(dp=8, cp=1, cp_kind="all_to_all")
    assert "cp-a2a" not in format_label(p) and p == Plan(dp=8)
    q = Plan(dp=4, cp=2, cp_kind="all_to_all")
    assert "cp-a2a" in format_label(q).split() and parse_label(format_label(q)) == q


def test_partial_recompute_label():
    p = parse_label("dp8 tp4 pp4 vpp5 zero1 mb1 rc-full2 interleaved_1f1b sp")
    assert (p.recompute, p.recompute_layers) == ("full", 2)
    assert "rc-full2" in format_label(p).split()
    # rc-full0 would read as recompute_layers 0, i.e. every layer: refused, not guessed
    with pytest.raises(InputError, match="rc-fullN needs N >= 1"):
        parse_label("dp1 tp1 pp1 zero1 mb1 rc-full0")


@pytest.mark.parametrize("label, needle", [
    ("dp2 tp4 pp2 foo", "unknown label token"),
    ("dp2 tp4 tp8 pp1", "gives tp twice"),
    ("", "give a plan label"),
    ("dp1 tp1 pp1 rc-full2 rc-full3", "gives recompute_layers twice"),
    ("dp1 tp1 pp1 rc-full2 rc-selective", "gives recompute twice"),
])
def test_bad_labels_are_refused(label, needle):
    with pytest.raises(InputError, match=needle):
        parse_label(label)


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


SCENARIOS = [  # (scenario flags, extra plan flags)
    (["--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len", "4096",
      "--global-batch", "64"], []),
    (["--model", "llama3.1-8b", "--gpus", "32xH100-SXM-80GB", "--seq-len", "65536",
      "--global-batch", "16"], []),  # long context
    (["--model", "mixtral-8x7b", "--gpus", "32xH100-SXM-80GB", "--seq-len", "4096",
      "--global-batch", "128"], []),  # MoE
    (["--model", "qwen3-30b-a3b", "--gpus", "16xH100-SXM-80GB", "--seq-len", "4096",
      "--global-batch", "64"], []),  # MoE, fine-grained experts
    (["--model", "llama3.2-1b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "2048",
      "--global-batch", "32", "--precision", "fp8"], []),  # fp8, tied embeddings
    (["--model", "llama3.1-8b", "--gpus", "8xA100-SXM-40GB", "--seq-len", "4096",
      "--global-batch", "32"], ["--offload-optimizer"]),  # offload
    (["--model", "gpt2", "--gpus", "4xA100-SXM-80GB", "--seq-len", "1024",
      "--global-batch", "32"], []),  # biases, learned positions
    (["--model", "gpt-neox-20b", "--gpus", "32xA100-SXM-80GB", "--seq-len", "2048",
      "--global-batch", "256"], []),
    (["--model", "llama3.1-405b", "--gpus", "2048xH100-SXM-80GB", "--seq-len", "8192",
      "--global-batch", "16"], []),  # global batch < pp
    (["--model", "tiny-moe", "--gpus", "8xH100-SXM-80GB", "--seq-len", "2048",
      "--global-batch", "16"], ["--order", "tp-dp-cp-pp", "--no-overlap-grad-reduce",
                                "--cp-kind", "all_to_all"]),  # non-default tokens
    (["--model", "tiny-llama", "--gpus", "8xH100-SXM-80GB", "--seq-len", "2048",
      "--global-batch", "16"], ["--no-overlap-param-gather", "--zero", "3",
                                "--no-sequence-parallel"]),
]
KEYS = ("step_time_s", "tokens_per_s", "mfu", "peak_memory_gib", "step_time_breakdown_s",
        "label")


@pytest.mark.parametrize("scenario, extra", SCENARIOS,
                         ids=[s[1] + ("+" + x[0] if x else "") for s, x in SCENARIOS])
def test_plan_label_predict_round_trip(capsys, tmp_path, scenario, extra):
    rc, out, err = _cli(capsys, "plan", *scenario, *extra, "--top", "3", "--rerank", "0",
                        "--json")
    assert rc == 0, err
    top = json.loads(out)["top"]
    assert top
    for i, row in enumerate(top):
        rc, out, err = _cli(capsys, "predict", *scenario, "--plan", row["label"], "--json")
        assert rc == 0, err
        got = json.loads(out)
        for k in KEYS:
            assert got[k] == row[k], (row["label"], k)
    # --json -> plan.toml -> predict --scenario, for the winner
    best = top[0]
    rc, out, err = _cli(capsys, "export", *scenario, "--plan", best["label"], "--to", "meshplan",
                        "--out", str(tmp_path))
    assert rc == 0, err
    toml = [line for line in out.splitlines() if line.endswith(".toml")][0]
    rc, out, err = _cli(capsys, "predict", "--scenario", toml, "--json")
    assert rc == 0, err
    got = json.loads(out)
    for k in KEYS:
        assert got[k] == best[k], k


def test_readme_example_winner_reproduces(capsys):
    sc = ["--model", "llama3.1-70b", "--gpus", "64xH100-SXM-80GB", "--seq-len", "8192",
          "--global-batch", "512"]
    rc, out, err = _cli(capsys, "plan", *sc, "--top", "2", "--rerank", "8", "--json")
    assert rc == 0, err
    best = json.loads(out)["top"][0]
    rc, out, err = _cli(capsys, "predict", *sc, "--plan", best["label"], "--json")
    assert json.loads(out)["step_time_s"] == best["step_time_s"]
    rc, out, err = _cli(capsys, "simulate", *sc, "--plan", best["label"], "--json")
    sim = json.loads(out)
    assert sim["step_time_s"] == best["simulated_step_time_s"]
    assert sim["closed_form_step_time_s"] == best["step_time_s"]


def test_flags_override_the_label(capsys):
    sc = ["--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
          "--global-batch", "32"]
    rc, out, _ = _cli(capsys, "predict", *sc, "--plan", "dp2 tp4 pp1 zero1 mb1 sp tpo",
                      "--no-tp-comm-overlap", "--json")
    assert rc == 0 and json.loads(out)["label"] == "dp2 tp4 pp1 zero1 mb1 sp"


def test_one_plan_one_label():
    """Knobs that mean nothing on a plan are dropped, as sp on tp1 always was: TP overlap
    without TP, and an HSDP shard group that is all of dp x cp (plain FSDP)."""
    assert format_label(parse_label("dp8 tp1 pp1 zero1 mb1 tpo")) == "dp8 tp1 pp1 zero1 mb1"
    assert parse_label("dp4 tp1 pp1 zero3 hsdp4 mb1") == parse_label("dp4 tp1 pp1 zero3 mb1")
    assert "hsdp2" in format_label(parse_label("dp4 tp2 pp1 zero3 hsdp2 mb1"))
