"""What `meshplan run` reports from its ranks' results (runtime/orchestrate.py summarize,
commands/run.py _format), checked on hand-made results without starting a rank."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from meshplan.commands.run import _format  # noqa: E402
from meshplan.plan import Plan  # noqa: E402
from meshplan.runtime.orchestrate import summarize  # noqa: E402
from meshplan.runtime.train import RunConfig  # noqa: E402
from meshplan.specs.catalog.presets import load_model  # noqa: E402


def _results(times_by_rank: list[list[float]]) -> list[dict]:
    return [{"rank": r, "coords": {"pp": 0}, "losses": [5.0] * len(t), "step_times_s": t,
             "memory": {"Total": 1 << 20}, "device": "cpu"} for r, t in enumerate(times_by_rank)]


CFG = RunConfig(load_model("tiny-llama"), Plan(dp=2), seq_len=16, global_batch=4)


def test_step_time_is_the_slowest_rank_mean_after_the_first_step():
    m = summarize(CFG, _results([[9.0, 0.2, 0.4], [8.0, 0.3, 0.1]]))
    assert m["step_time_s"] == pytest.approx((0.3 + 0.4) / 2)
    assert m["steps_timed"] == 2 and m["first_step_s"] == 9.0
    assert m["tokens_per_s_per_gpu"] == pytest.approx(16 * 4 / 0.35 / 2)
    assert "step time  " in _format(CFG, m, None, None)


def test_a_one_step_run_says_its_step_time_is_the_warm_up_step():
    """With --steps 1 nothing after the first step is timed: the step time shown is the
    warm-up step. It was labelled as any step time, steps_timed 1."""
    m = summarize(CFG, _results([[9.0], [8.0]]))
    assert m["step_time_s"] == 9.0 and m["first_step_s"] == 9.0
    assert m["steps_timed"] == 0
    row = next(ln for ln in _format(CFG, m, None, None).splitlines() if ln.startswith("step time"))
    assert "warm-up" in row and "9000.0 ms" in row
