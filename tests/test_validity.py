"""One validity rule: the same random plans fed to every command are accepted or refused alike,
and an impossible pin is refused with the rule it breaks (exit 2, one line)."""

from __future__ import annotations

import random

import pytest

from meshplan.cli import main
from meshplan.errors import InputError
from meshplan.plan import SCHEDULES, Plan

SC = ["--model", "tiny-llama", "--gpus", "8xH100-SXM-80GB", "--seq-len", "2048",
      "--global-batch", "12"]


def _labels(n: int) -> list[str]:
    rng = random.Random(7)
    out = []
    while len(out) < n:
        try:
            if rng.random() < 0.8:  # dp*tp*pp*cp = 8 GPUs
                dp, tp, pp, cp = rng.choice([(a, b, c, 8 // (a * b * c)) for a in (1, 2, 4, 8)
                                             for b in (1, 2, 4, 8) for c in (1, 2, 4, 8)
                                             if 8 % (a * b * c) == 0])
            else:
                dp, tp, pp, cp = (rng.choice((1, 2, 3, 4)) for _ in range(4))
            p = Plan(dp=dp, tp=tp, pp=pp, cp=cp, vpp=rng.choice((1, 2, 3)),
                     schedule=rng.choice(SCHEDULES), micro_batch=rng.choice((1, 2, 3)),
                     zero=rng.choice((0, 1, 3)))
        except InputError:
            continue
        out.append(p.describe())
    return out


def _rc(capsys, *argv) -> tuple[int, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, err


def test_every_command_accepts_and_refuses_alike(capsys, tmp_path):
    verdicts = {"ok": 0, "refused": 0}
    for label in _labels(40):
        rcs = {
            "predict": _rc(capsys, "predict", *SC, "--plan", label)[0],
            "simulate": _rc(capsys, "simulate", *SC, "--plan", label)[0],
            "export": _rc(capsys, "export", *SC, "--plan", label, "--to", "meshplan",
                          "--out", str(tmp_path / "x"))[0],
        }
        # the search with every knob pinned: refuses (2) what is invalid; otherwise that plan
        rc, err = _rc(capsys, "plan", *SC, "--plan", label, "--rerank", "0")
        rcs["plan"] = 2 if rc == 2 else 0
        assert len(set(rcs.values())) == 1, (label, rcs, err)
        verdicts["ok" if rcs["predict"] == 0 else "refused"] += 1
    assert verdicts["ok"] >= 5 and verdicts["refused"] >= 5, verdicts  # both sides exercised


def test_predict_and_simulate_agree_on_uneven_virtual_stages(capsys):
    sc = ["--model", "llama3.1-70b", "--gpus", "64xH100-SXM-80GB", "--seq-len", "8192",
          "--global-batch", "512"]
    for cmd in ("predict", "simulate"):  # 80 layers on pp8*vpp3 = 24 chunks: uneven, valid
        rc, err = _rc(capsys, cmd, *sc, "--dp", "2", "--tp", "4", "--pp", "8", "--vpp", "3")
        assert rc == 0, (cmd, err)


@pytest.mark.parametrize("extra, needle", [
    (["--tp", "3"], "tp=3: must divide the 32 attention heads and the 8 GPUs"),
    (["--tp", "16"], "tp=16: must divide the 8 GPUs"),
    (["--global-batch", "3", "--dp", "8"], "global_batch=3: must be a multiple of dp*micro_batch"),
    (["--pp", "5"], "pp=5: must divide the 8 GPUs"),
    (["--ep", "2"], "dense: expert parallelism needs an MoE model"),
])
def test_impossible_pins_exit_2_naming_the_rule(capsys, extra, needle):
    rc, err = _rc(capsys, "plan", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB",
                  "--seq-len", "4096", "--global-batch", "64", *extra)
    assert rc == 2 and needle in err and err.count("\n") == 1, err


def test_valid_pins_nothing_fits_names_the_closest_plan(capsys):
    rc = main(["plan", "--model", "llama3.1-70b", "--gpus", "8xH100-SXM-80GB", "--seq-len",
               "8192", "--global-batch", "64", "--tp", "2", "--rerank", "0"])
    out = capsys.readouterr().out
    assert rc == 1 and "no plan fits" in out
    line = next(x for x in out.splitlines() if x.startswith("closest plan: "))
    need, cap, short = (float(x) for x in __import__("re").findall(r"([\d.]+) GiB", line))
    assert need > cap and short == pytest.approx(need - cap, abs=0.06)
    assert "try unpinning --tp" in out
