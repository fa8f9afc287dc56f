"""``meshplan simulate``, the trace / PNG / CSV outputs, and the bridge to the cost model."""

from __future__ import annotations

import json

import pytest

from meshplan.errors import InputError

from meshplan.cli import main
from meshplan.cost import estimate
from meshplan.pipeline.actions import read_csv
from meshplan.pipeline.from_cost import from_estimate, simulate_estimate, simulate_plan
from meshplan.pipeline.schedules import build_schedule
from meshplan.pipeline.simulate import simulate_schedule, uniform_chunks
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload

BASE = ["simulate", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len",
        "4096", "--global-batch", "32", "--dp", "2", "--tp", "2", "--pp", "4"]


def test_trace_has_one_track_per_rank_and_stream_with_stage_and_microbatch():
    from meshplan.export.trace import trace_events

    res = simulate_schedule("dualpipev", 4, 2, 8, uniform_chunks(8, 1e-3, 1e-3, 1e-3, p2p_s=1e-4))
    tr = trace_events(res)
    ev = tr["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in ev if e["name"] == "thread_name"}
    assert {(r, "compute") for r in range(4)} <= names
    compute = [e for e in ev if e["ph"] == "X" and e["tid"] == 0]
    assert len(compute) == res.schedule.num_actions()
    over = [e for e in compute if e["cat"] == "overlap_forward_backward"]
    assert over and {"forward_stage", "backward_microbatch"} <= set(over[0]["args"])
    plain = [e for e in compute if e["cat"] == "forward"]
    assert {"stage", "microbatch"} <= set(plain[0]["args"])
    sends = [e for e in ev if e.get("cat") == "p2p"]
    assert len(sends) == len(res.transfers) > 0
    end_us = max(e["ts"] + e["dur"] for e in compute)
    assert end_us == pytest.approx(res.step_time_s * 1e6, rel=1e-6)


def test_cli_writes_trace_png_memory_png_and_csv(tmp_path, capsys):
    files = {"trace": tmp_path / "t.json", "png": tmp_path / "s.png",
             "mem-png": tmp_path / "m.png", "schedule-csv": tmp_path / "s.csv"}
    argv = BASE + ["--vpp", "2"] + [a for k, v in files.items() for a in ("--" + k, str(v))]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "interleaved_1f1b" in out and "critical path" in out
    for p in (files["png"], files["mem-png"]):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trace = json.loads(files["trace"].read_text())
    assert {e["pid"] for e in trace["traceEvents"]} == {0, 1, 2, 3}
    order = read_csv(files["schedule-csv"])
    m = 32 // 2
    assert order == build_schedule("interleaved_1f1b", 4, 2, m).order


def test_cli_json_matches_the_library(capsys):
    assert main(BASE + ["--schedule", "zb_h1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model, cluster = load_model("llama3.1-8b"), make_cluster("16xH100-SXM-80GB")
    ps = simulate_plan(model, cluster, Workload(4096, 32, "bf16"),
                       Plan(dp=2, tp=2, pp=4, schedule="zb_h1"))
    assert out["step_time_s"] == pytest.approx(ps.step_time_s)
    assert sum(out["step_parts"].values()) == pytest.approx(out["step_time_s"])
    assert out["simulation"]["schedule"] == "zb_h1"


@pytest.mark.parametrize("extra,needle", [
    (["--schedule", "zb_x"], "schedule="),
    (["--tp", "3"], "tp=3: must divide"),  # (uneven virtual stages are valid: validity.py)
    (["--schedule", "dualpipev", "--vpp", "2", "--global-batch", "8"], "dualpipev needs"),
    (["--png", "out.jpg"], "must end in .png"),
])
def test_cli_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, extra, needle,
                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = BASE + extra + ["--trace", "t.json"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_from_estimate_puts_the_cost_models_work_on_the_bottleneck_rank():
    model, cluster = load_model("llama3.1-8b"), make_cluster("16xH100-SXM-80GB")
    w = Workload(4096, 32, "bf16")
    est = estimate(model, cluster, w, Plan(dp=2, tp=2, pp=4, recompute="selective"))
    chunks = from_estimate(est)
    assert len(chunks) == 4
    ps = simulate_estimate(est)
    p = est.step_time.parts
    work = p["compute_s"] + p["recompute_s"] + p["tp_exposed_s"] + p["cp_exposed_s"] \
        + p["ep_exposed_s"]
    assert ps.sim.ranks[est.bottleneck_rank].busy_s == pytest.approx(work, rel=1e-9)
    # the simulated 1F1B bubble of uneven stages is at least the closed form's equal-stage one
    assert ps.step_parts["pp_bubble_s"] > 0
    assert ps.step_time_s == pytest.approx(sum(ps.step_parts.values()))


def test_simulate_plan_memory_uses_the_schedules_real_peak():
    model, cluster = load_model("llama3.1-8b"), make_cluster("16xH100-SXM-80GB")
    w = Workload(4096, 32, "bf16")
    ps = simulate_plan(model, cluster, w, Plan(dp=2, tp=2, pp=4))
    est = ps.estimate
    # 1F1B: rank r holds pp - r micro-batches of its chunk's activations
    for r in range(4):
        assert ps.memory_parts[r]["activations"] == pytest.approx(
            (4 - r) * est.chunks[r].act_bytes)


def test_rerank_orders_by_simulated_step_and_drops_unrunnable_schedules():
    from meshplan.pipeline.from_cost import rerank

    model, cluster = load_model("llama3.1-8b"), make_cluster("16xH100-SXM-80GB")
    w = Workload(4096, 36, "bf16")  # 9 micro-batches per pipeline at dp 4
    plans = [Plan(dp=4, tp=1, pp=4, schedule=s, vpp=v)
             for s, v in (("1f1b", 1), ("zb_h1", 1), ("zb_v", 2), ("interleaved_1f1b", 2))]
    # torch's interleaved and zero-bubble classes (zb_h1 is the latter with one chunk) need
    # 9 micro-batches on 4 ranks to be a multiple of 9 // 4 = 2: the one validity rule
    # (meshplan/validity.py) refuses both before any estimate or simulation
    ests = []
    for p in plans:
        try:
            ests.append(estimate(model, cluster, w, p))
        except InputError as e:
            assert "rounds of max(1, m // pp) = 2" in e.allowed
    assert len(ests) == 2
    sims, dropped = rerank(ests)
    assert not dropped
    steps = [s.step_time_s for s in sims]
    assert steps == sorted(steps)
    assert [s.plan.schedule for s in sims] == ["zb_v", "1f1b"]


def test_json_memory_carries_its_unit_and_sums_to_the_peak(capsys):
    """simulate --json gave its per-rank memory as 'memory_parts', in bytes with no unit in
    the name (plan and predict give 'memory_per_stage_gib'): now 'memory_per_rank_bytes',
    whose fullest rank sums to peak_memory_bytes, and each part, activations and the
    allocator's cache aside (simulated), is the closed form's that predict prints in GiB."""
    assert main(BASE + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "memory_parts" not in d
    ranks = d["memory_per_rank_bytes"]
    assert max(sum(r.values()) for r in ranks) == pytest.approx(d["peak_memory_bytes"], rel=1e-12)
    assert main(["predict"] + BASE[1:] + ["--json"]) == 0
    pred = json.loads(capsys.readouterr().out)["memory_per_stage_gib"]
    for r, p in zip(ranks, pred):
        for k, v in r.items():
            if k not in ("activations", "allocator_fragmentation"):
                assert v / 2**30 == pytest.approx(p[k], rel=1e-12), k


def test_simulated_allocator_cache_is_never_negative(capsys):
    """The simulation replaced a rank's activations and shifted the closed form's allocator
    cache by its share of the change; where the closed form had capped that cache at the
    GPU's capacity, a smaller simulated activation took it below zero (-0.27 GiB on ranks 1-7
    here). Now it is recomputed from the uncapped share and capped again
    (cost/memory.refragment): never negative, never past the capacity, and equal to the share
    of the fragmented bytes where there is room. (Seq 14848: since the cost model charges the
    runtime's repeated k/v and the H800's capacity is the 79.11 GiB the device reports,
    longer sequences hold more than the GPU on ranks 1-7; at 14848 they hold 77.9 GiB and
    the cap binds, 1.2 GiB room for an 11.5 share.)"""
    from meshplan.cost.efficiency import HOST
    assert main(["simulate", "--model", "qwen3-235b-a22b", "--gpus", "512xH800-SXM-80GB",
                 "--seq-len", "14848", "--global-batch", "2048", "--plan",
                 "dp8 tp4 pp8 vpp2 cp2 ep8 zero1 mb1 rc-selective-moe_act dualpipev sp tpo",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    from meshplan.specs.catalog.gpus import GPUS
    cap = GPUS["H800-SXM-80GB"].memory_bytes
    for r in d["memory_per_rank_bytes"]:
        assert all(v >= 0 for v in r.values()), r
        held = sum(v for k, v in r.items() if k != "allocator_fragmentation")
        # meshplan's own runtime (FSDP2-style): every part but the cache and context fragments
        share = HOST.allocator_fragmentation * sum(
            v for k, v in r.items() if k not in ("allocator_fragmentation", "cuda_context"))
        assert r["allocator_fragmentation"] == pytest.approx(min(share, cap - held), rel=1e-9)
        assert sum(r.values()) <= cap * (1 + 1e-12)
