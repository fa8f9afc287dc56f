"""Fewer micro-batches per step than pipeline stages (m < pp): each runner's own rule.

Independent truths:
- Megatron-Core (megatron/core/pipeline_parallel/schedules.py,
  forward_backward_pipelining_without_interleaving): warm-up min(pp - rank - 1, m), so 1F1B
  runs any m >= 1; the interleaved schedule needs microbatch_group_size_per_vp_stage in
  [pp, m]. DeepSpeed's TrainSchedule: 2 * (m + stages - 1) steps, min(stages - stage_id, m)
  buffers, any m >= 1.
- torch 2.13's Schedule1F1B raises for m < pp (the class itself, when torch is installed).
- 1F1B on p equal stages: step = (m + p - 1)(f + b) for every m >= 1 (every micro-batch
  crosses p stages forward and back; the last one starts its forward after m - 1 others);
  rank r holds min(p - r, m) micro-batches.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.cli import main
from meshplan.cost import estimate
from meshplan.cost.pipeline import bubble_s, in_flight
from meshplan.engines import pipeline_min_microbatches, run_by
from meshplan.errors import InputError
from meshplan.pipeline.check import in_flight_peaks
from meshplan.pipeline.from_cost import simulate_estimate
from meshplan.pipeline.schedules import build_schedule
from meshplan.pipeline.simulate import simulate_schedule, uniform_chunks
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.search.space import schedule_choices
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload

ANY_M = ("megatron", "nemo", "deepspeed")
TORCH = ("", "torchtitan")
times = st.sampled_from([0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0])


# ---- the rule, per runner ------------------------------------------------------------------

@pytest.mark.parametrize("runner", ANY_M)
def test_megatron_nemo_deepspeed_run_1f1b_with_any_m(runner):
    assert pipeline_min_microbatches(runner, "1f1b", 8, 1) == (1, "")


@pytest.mark.parametrize("runner", TORCH + ("maxtext", "other"))
def test_torch_runners_keep_schedule1f1b_floor_and_say_why(runner):
    need, why = pipeline_min_microbatches(runner, "1f1b", 8, 1)
    assert need == 8 and "Schedule1F1B" in why


def test_torch_refuses_1f1b_with_fewer_microbatches_than_stages():
    S = pytest.importorskip("torch.distributed.pipelining.schedules")
    stage = SimpleNamespace(num_stages=4, group_size=4, group_rank=0, submod=None)
    with pytest.raises(ValueError, match="greater than"):
        S.Schedule1F1B(stage, 3)
    S.Schedule1F1B(stage, 4)


def test_interleaved_and_zero_bubble_keep_a_full_pipeline_everywhere():
    for runner in ANY_M + TORCH:
        for sched, v in (("interleaved_1f1b", 2), ("looped_bfs", 2), ("zb_h1", 1),
                         ("interleaved_zb", 2), ("zb_v", 2)):
            assert pipeline_min_microbatches(runner, sched, 4, v)[0] == 4
    assert "microbatch_group_size_per_vp_stage" in pipeline_min_microbatches(
        "megatron", "interleaved_1f1b", 4, 2)[1]
    assert pipeline_min_microbatches("megatron", "dualpipev", 4, 2)[0] == 8
    assert pipeline_min_microbatches("", "gpipe", 4, 1) == (1, "")


# ---- validity, with and without an engine -------------------------------------------------

MODEL = "llama3.1-8b"


def _w(framework: str, global_batch: int = 4) -> Workload:
    return Workload(4096, global_batch, "bf16", framework=framework)


@pytest.mark.parametrize("framework", ANY_M)
def test_plan_with_m_below_pp_is_valid_for_engines_that_run_it(framework):
    plan = Plan(dp=2, tp=1, pp=4, schedule="1f1b", micro_batch=1)  # m = 2
    plan.validate(load_model(MODEL), _w(framework), 8)


@pytest.mark.parametrize("framework", TORCH)
def test_plan_with_m_below_pp_is_refused_for_torch_runners(framework):
    plan = Plan(dp=2, tp=1, pp=4, schedule="1f1b", micro_batch=1)
    with pytest.raises(InputError) as e:
        plan.validate(load_model(MODEL), _w(framework), 8)
    assert e.value.field == "global_batch" and "Schedule1F1B" in str(e.value)
    assert "\n" not in str(e.value)


# ---- closed forms -----------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(p=st.integers(2, 10), data=st.data(), f=times, bi=times, bw=times)
def test_1f1b_closed_form_and_simulator_agree_for_m_below_pp(p, data, f, bi, bw):
    m = data.draw(st.integers(1, p - 1))
    t = f + bi + bw
    plan = Plan(pp=p, schedule="1f1b")
    bubble = bubble_s(plan, m, [f] * p, [bi] * p, [bw] * p)
    assert m * t + bubble == pytest.approx((m + p - 1) * t, rel=1e-12)
    res = simulate_schedule("1f1b", p, 1, m, uniform_chunks(p, f, bi, bw))
    assert res.step_time_s == (m + p - 1) * t  # binary fractions: exact
    # in flight: the cost model's count, the lists' peaks and min(p - r, m) are one number
    peaks = in_flight_peaks(build_schedule("1f1b", p, 1, m)).peak_in_flight
    assert peaks == [min(p - r, m) for r in range(p)]
    assert [in_flight(plan, m, r) for r in range(p)] == peaks


# ---- predict, simulate, the search, exports, validate ----------------------------------------

def test_predict_and_simulate_agree_for_megatron_m_below_pp():
    model, cluster = load_model(MODEL), make_cluster("16xH100-SXM-80GB")
    w = run_by("megatron", Workload(4096, 8, "bf16"))  # dp 4: m = 2 on pp 4
    plan = Plan(dp=4, tp=1, pp=4, schedule="1f1b", micro_batch=1)
    est = estimate(model, cluster, w, plan)
    assert est.num_microbatches == 2
    ps = simulate_estimate(est)
    assert ps.step_time_s == pytest.approx(est.step_time_s, rel=0.02)
    # rank r holds min(pp - r, m) micro-batches of its chunk's activations
    for r in range(4):
        assert ps.memory_parts[r]["activations"] == pytest.approx(
            min(4 - r, 2) * est.chunks[r].act_bytes)


def test_search_offers_1f1b_below_pp_only_where_the_runner_runs_it():
    model = load_model(MODEL)
    assert (1, "1f1b") in schedule_choices(model, 4, 2, {}, "megatron")
    assert schedule_choices(model, 4, 2, {}, "") == [(1, "gpipe")]
    assert schedule_choices(model, 4, 2, {"schedule": "1f1b"}, "torchtitan") == []
    assert schedule_choices(model, 4, 2, {"schedule": "1f1b"}, "deepspeed") == [(1, "1f1b")]


CLI = ["--model", "llama3.1-70b", "--gpus", "64xH100-SXM-80GB", "--seq-len", "4096",
       "--global-batch", "16", "--plan", "dp8 tp2 pp4 mb1 1f1b"]


def test_cli_predicts_megatron_and_refuses_torchtitan_in_one_line(capsys):
    assert main(["predict", *CLI, "--engine", "megatron", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_microbatches"] == 2
    for extra in (["--engine", "torchtitan"], []):
        assert main(["predict", *CLI, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Schedule1F1B" in err
        assert "global_batch=16" in err


def test_cli_run_keeps_torch_refusal(capsys):
    pytest.importorskip("torch")
    assert main(["run", "--plan", "dp1 tp1 pp4 mb1 1f1b", "--global-batch", "2",
                 "--device", "cpu", "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Schedule1F1B" in err


def test_megatron_export_writes_the_plan_as_given(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["export", *CLI, "--to", "megatron", "--out", str(out)]) == 0
    text = (out / "megatron_launch.sh").read_text()
    for flag in ("--global-batch-size 16", "--micro-batch-size 1",
                 "--pipeline-model-parallel-size 4", "--tensor-model-parallel-size 2"):
        assert flag in text
    assert "--num-layers-per-virtual-pipeline-stage" not in text
    assert "--microbatch-group-size-per-virtual-pipeline-stage" not in text


def test_deepspeed_export_accumulates_m_below_pp(tmp_path, capsys):
    out = tmp_path / "d"
    argv = ["export", "--model", "llama3.1-70b", "--gpus", "64xH100-SXM-80GB", "--seq-len",
            "4096", "--global-batch", "32", "--plan", "dp16 tp1 pp4 mb1 zero1 rc-full 1f1b",
            "--to", "deepspeed", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    cfg = json.loads(next(out.glob("*.json")).read_text())
    assert cfg["gradient_accumulation_steps"] == 2  # 32 / (16 * 1) on 4 stages
    assert cfg["train_micro_batch_size_per_gpu"] == 1


HEADER = ("id,trust,model,gpu,num_gpus,seq_len,global_batch_seqs,micro_batch,tp,pp,dp,"
          "schedule,framework,precision,measured_tokens_per_s_per_gpu")


def test_validate_row_predicts_as_it_ran_for_megatron_not_torchtitan(tmp_path):
    from meshplan.validate import validate

    p = tmp_path / "runs.csv"
    p.write_text("\n".join([HEADER,
                            "a,A,llama3.1-8b,H100-SXM-80GB,8,4096,4,1,1,4,2,1f1b,megatron,bf16,1000",
                            "b,A,llama3.1-8b,H100-SXM-80GB,8,4096,4,1,1,4,2,1f1b,torchtitan,bf16,"
                            "1000"]) + "\n")
    results, _ = validate(p, with_search_best=False)
    by = {r.id: r for r in results}
    assert by["a"].error is None and by["a"].predicted_tokens_per_s_per_gpu
    assert "Schedule1F1B" in by["b"].error
