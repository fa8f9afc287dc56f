"""The pipeline runtime's schedule checks and its meshplan schedule source, without ranks.

torch's schedule classes and ``_PipelineScheduleRuntime`` build and lower their lists in
the constructor from a few stage fields, so stand-in stages (as in tests/test_schedules.py)
let these tests ask torch itself, in one process: which micro-batch counts its classes
refuse, and what the runtime will execute for meshplan's lists.
"""

from types import SimpleNamespace

import pytest

from meshplan.errors import InputError
from meshplan.pipeline.lowering import add_send_recv
from meshplan.pipeline.schedules import schedule_for_plan
from meshplan.plan import Plan
from meshplan.runtime import pipeline as P

from .in_process import cli  # refusals, in this process

S = pytest.importorskip("torch.distributed.pipelining.schedules")


def _stages(pp: int, vpp: int):
    return [SimpleNamespace(num_stages=pp * vpp, group_size=pp, group_rank=0, submod=None)
            for _ in range(vpp)]


def _torch_builds(name: str, pp: int, vpp: int, m: int) -> bool:
    cls = getattr(S, P.SCHEDULE_CLASSES[name])
    stages = _stages(pp, vpp)
    try:
        cls(stages[0], m) if name in P.SINGLE_STAGE else cls(stages, m)
    except ValueError:
        return False
    return True


def _vpp(name: str) -> int:
    return 1 if name in P.SINGLE_STAGE else 2


@pytest.mark.parametrize("name", list(P.SCHEDULE_CLASSES))
@pytest.mark.parametrize("pp", [2, 3, 4])
def test_check_refuses_exactly_the_microbatch_counts_torch_refuses(name, pp):
    vpp = _vpp(name)
    plan = Plan(pp=pp, vpp=vpp, schedule=name)
    refused = []
    for m in range(1, 3 * pp + 2):
        ok = _torch_builds(name, pp, vpp, m)
        try:
            P.check_schedule(plan, m, "torch")
            ours = True
        except InputError as e:
            assert e.field == "n_microbatches" and "\n" not in str(e)
            ours = False
        assert ours == ok, (name, pp, m)
        refused += [m] if not ok else []
    if name in ("1f1b", "interleaved_1f1b", "interleaved_zb", "dualpipev"):
        assert refused  # the sweep reaches counts torch refuses: the check can fail


def test_schedule_source_defaults_and_refusals():
    assert P.schedule_source(Plan(pp=2)) == "torch"
    assert P.schedule_source(Plan(pp=2, schedule="zb_h1")) == "meshplan"
    assert P.schedule_source(Plan(pp=2), "meshplan") == "meshplan"
    with pytest.raises(InputError, match="schedule_source='torch'"):
        P.check_schedule(Plan(pp=2, schedule="zb_h1"), 4, "torch")
    with pytest.raises(InputError, match="allowed: torch, meshplan"):
        P.check_schedule(Plan(pp=2), 4, "deepspeed")
    with pytest.raises(InputError, match="n_microbatches=5"):
        P.check_schedule(Plan(pp=2, schedule="zb_h1"), 5)  # 5 % max(1, 5 // 2) != 0
    P.check_schedule(Plan(pp=2, schedule="zb_h1"), 6)


CASES = [("zb_h1", 2, 1, 4), ("zb_h1", 4, 1, 8), ("zb_h1", 3, 1, 5), ("gpipe", 2, 1, 3),
         ("1f1b", 4, 1, 6), ("interleaved_1f1b", 2, 2, 4), ("looped_bfs", 2, 2, 3),
         ("interleaved_zb", 4, 2, 8), ("zb_v", 2, 2, 5), ("dualpipev", 2, 2, 4)]


def _kinds(acts, keep):
    return [str(a) for a in acts if a.computation_type.value in keep or a.sub_actions]


@pytest.mark.parametrize("name,pp,vpp,m", CASES)
def test_runtime_executes_meshplans_lists(name, pp, vpp, m):
    """The lowered list torch's runtime steps through holds meshplan's compute actions in
    meshplan's order and the sends/receives of meshplan's lowering (the simulator's input)."""
    plan = Plan(pp=pp, vpp=vpp, schedule=name)
    sched = schedule_for_plan(plan, m)
    rt = S._PipelineScheduleRuntime(_stages(pp, vpp), n_microbatches=m, loss_fn=None)
    rt.pipeline_order = P.meshplan_actions(plan, m)
    rt._prepare_schedule_with_comms(rt.pipeline_order)
    ours = add_send_recv(sched, reduce_grad=True)
    for r in range(pp):
        run = rt.pipeline_order_with_comms[r]
        assert _kinds(run, ("F", "B", "I", "W")) == [str(a) for a in sched.order[r]]
        comm = ("F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD")
        assert _kinds(run, comm) == [str(a) for a in ours[r]]
    assert rt.stage_index_to_group_rank == {s: sched.stage_to_rank(s) for s in range(pp * vpp)}



def _cli(*args):
    import os
    import subprocess
    import sys
    from pathlib import Path
    e = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    return subprocess.run([sys.executable, "-m", "meshplan.cli", "run", *args],
                          capture_output=True, text=True, env=e, timeout=300)


@pytest.mark.slow
def test_cli_runs_a_zb_h1_plan_end_to_end(tmp_path):
    """torchrun, 2 ranks, ZB-H1 (meshplan's lists): the losses are the single process's and
    the memory measurement (MemTracker) works with the split backward."""
    import json

    from meshplan.runtime.train import RunConfig, reference_run
    from meshplan.specs.catalog.presets import preset
    r = _cli("--pp", "2", "--schedule", "zb_h1", "--steps", "3", "--seq-len", "16",
             "--global-batch", "8", "--lr", "5e-4", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    measured = json.loads(r.stdout)["measured"]
    ref, _ = reference_run(RunConfig(preset("tiny-llama"), Plan(), seq_len=16, global_batch=8,
                                     steps=3, lr=5e-4))
    assert max(abs(x - y) / y for x, y in zip(measured["losses"], ref)) < 1e-5
    assert all(m["Total"] > 0 for m in measured["memory_by_pp_rank"].values())


def test_cli_refuses_bad_microbatch_counts_and_sources_in_one_line():
    r = cli("run", "--pp", "2", "--vpp", "2", "--global-batch", "5")
    # the one validity rule (meshplan/validity.py) refuses it before torch is asked
    assert r.returncode == 2 and "gives 5 micro-batches" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("run", "--pp", "2", "--schedule", "zb_h1", "--schedule-source", "torch")
    assert r.returncode == 2 and "no class for zb_h1" in r.stderr, r.stderr


def test_schedule_source_survives_the_worker_config_round_trip():
    import json

    from meshplan.runtime.train import RunConfig
    from meshplan.runtime.worker import config_from_dict, config_to_json
    from meshplan.specs.catalog.presets import preset
    cfg = RunConfig(preset("tiny-llama"), Plan(pp=2), schedule_source="meshplan")
    back, _ = config_from_dict(json.loads(config_to_json(cfg, device="cpu")))
    assert back.schedule_source == "meshplan" and back.plan == cfg.plan
