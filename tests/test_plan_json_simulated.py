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


def test_simulated_interval_is_simulates_memory_too(capsys):
    """plan --json's simulated_interval kept the closed-form memory band while `simulate`
    scaled its band by the simulated peak over the closed-form one (and scaled the capped
    90th percentile with it). Both come from uncertainty.around_simulation now (the plan's
    text table and verdicts stay on the closed-form peak, as `predict` prints it). The
    table's tok/s/GPU and MFU columns are the simulation's; --json had only the closed-form
    ones (now simulated_tokens_per_s_per_gpu, simulated_mfu). The case: 3 micro-batches
    over 7-8 uneven chunks of 32 layers, which the simulation places one by one (17.15-17.16
    GiB both ways, not to the byte); with --global-batch 2 the two peaks became equal once
    the closed form counted the chunks in flight as the schedule holds them
    (cost/pipeline.in_flight)."""
    a = ["--model", "llama3.1-8b", "--gpus", "16xH200-SXM-141GB", "--seq-len", "2048",
         "--global-batch", "3"]
    top = _json(["plan", *a, "--pp", "2", "--top", "2", "--json"], capsys)["top"]
    assert top
    for t in top:
        sim = _json(["simulate", *a, "--plan", t["label"], "--json"], capsys)
        assert sim["peak_memory_bytes"] != t["peak_memory_gib"] * 2**30  # a case that tells
        assert t["simulated_interval"] == sim["interval"]
        # the text table's tok/s/GPU and MFU follow the simulation: --json gives them too
        assert t["simulated_tokens_per_s_per_gpu"] == sim["tokens_per_s_per_gpu"]
        assert t["simulated_mfu"] == sim["mfu"]
        lo, hi = sim["interval"]["peak_memory_gib_p10_p90"]
        assert lo <= sim["peak_memory_bytes"] / 2**30 <= hi
