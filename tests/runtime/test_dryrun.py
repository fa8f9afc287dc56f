"""Dry run: the real 8B model on 64 fake ranks, memory from MemTracker against closed forms."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.plan import Plan
from meshplan.runtime.dryrun import dryrun
from meshplan.runtime.train import RunConfig
from meshplan.specs.catalog.presets import preset

pytestmark = pytest.mark.slow
GiB = 2**30


def test_llama8b_on_64_ranks_optimizer_state_matches_the_closed_form():
    """AdamW keeps 2 states per parameter in the parameter dtype (bf16 here), sharded over
    dp*tp: each stage holds 2 * 2 bytes * (its parameters) / 32."""
    spec = preset("llama3.1-8b")
    plan = Plan(dp=8, tp=4, pp=2, zero=3)
    mem = dryrun(RunConfig(spec, plan, seq_len=2048, global_batch=16, dtype="bf16"))
    assert len(mem) == 2
    stage_params = [16 * spec.dense_layer_params() + spec.vocab * spec.hidden,
                    16 * spec.dense_layer_params() + spec.vocab * spec.hidden + spec.hidden]
    for m, n in zip(mem, stage_params):
        assert abs(m["Optstate"] - 2 * 2 * n / 32) / (4 * n / 32) < 0.01
        # FSDP zero3: the shards, plus the unsharded root (embedding or output, /tp) and at
        # most three unsharded layers (current, prefetched, resharding)
        assert 2 * n / 32 < m["Parameter"] < (2 * n / 32 + 2 * spec.vocab * spec.hidden / 4
                                               + 3 * 2 * spec.dense_layer_params() / 4)
        assert m["Activation"] > 0 and m["Total"] >= sum(v for k, v in m.items() if k != "Total")


def test_dryrun_cli_prints_measured_next_to_the_cost_model():
    e = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    r = subprocess.run([sys.executable, "-m", "meshplan.cli", "dryrun", "--model", "tiny-llama",
                        "--seq-len", "64", "--global-batch", "8", "--dp", "2", "--tp", "2",
                        "--zero", "3", "--gpus", "4xH100-SXM-80GB", "--json"],
                       capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["measured"][0]["Total"] > 0 and out["predicted"][0]["weights"] > 0
