"""``plan --json`` left simulated_step_time_s out of every pp=1 plan (the search re-ranks by
simulation only when a pipeline is among its best), while ``simulate`` gives the same plan
one. Now each plan shown carries the step `simulate --json` gives it, or null with the
reason (not_simulated) when the simulation did not run on it."""

from __future__ import annotations

import json
import math

from meshplan.cli import main

A = ["--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
     "--global-batch", "64"]


def _json(argv, capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_pp1_plans_carry_simulates_step_time(capsys):
    top = _json(["plan", *A, "--pp", "1", "--top", "2", "--json"], capsys)["top"]
    assert len(top) == 2
    for t in top:
        sim = _json(["simulate", *A, "--plan", t["label"], "--json"], capsys)
        assert sim["simulation"]["bubble_fraction"] == 0.0
        assert math.isclose(t["simulated_step_time_s"], sim["step_time_s"], rel_tol=1e-9)


def test_without_the_simulation_the_field_is_null_with_a_reason(capsys):
    top = _json(["plan", *A, "--pp", "1", "--top", "2", "--rerank", "0", "--json"],
                capsys)["top"]
    for t in top:
        assert t["simulated_step_time_s"] is None and "--rerank" in t["not_simulated"]
