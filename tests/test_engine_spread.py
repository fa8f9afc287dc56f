"""MoE rows that leave the dispatcher or the expert all-to-all overlap blank (engine_spread.py).

Independent truth: the row's stated twins. The widened interval of a blank row must be the
union of the class intervals around the predictions of every setting its framework may
have run (each such setting predicted by stating it on the row), with the point prediction
unchanged; a framework with one setting (torchtitan: engines.py) and a dense model get no
widening.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from meshplan import engine_spread as es
from meshplan import validate

HELDOUT = Path(__file__).resolve().parents[1] / "bench" / "data" / "heldout_runs.csv"
ROWS = {r["id"]: r for r in csv.DictReader(HELDOUT.open(newline=""))}


def _predict(row: dict) -> validate.RowResult:
    res = validate.predict_row(row, with_search_best=False)
    assert res.error is None, res.error
    return res


def _blank(row: dict, *cols: str) -> dict:
    return {k: ("" if k in cols else v) for k, v in row.items()}


def test_blank_moe_knobs_widen_to_the_union_of_the_stated_settings():
    row = ROWS["H042"]  # NeMo Qwen3-30B-A3B on 8 GB200, stated deepep, no overlap
    assert (row["framework"], row["moe_dispatcher"], row["ep_overlap"]) == ("nemo", "deepep", "0")
    stated = _predict(row)
    blank = _predict(_blank(row, "moe_dispatcher", "ep_overlap"))
    # the point is the framework default's (deepep on NVL72, no overlap): unchanged
    assert blank.predicted_tokens_per_s_per_gpu == stated.predicted_tokens_per_s_per_gpu
    point = stated.predicted_tokens_per_s_per_gpu
    lo_f = stated.tokens_p10_p90[0] / point
    hi_f = stated.tokens_p10_p90[1] / point
    alts = [_predict(dict(row, moe_dispatcher=d, ep_overlap=o)).predicted_tokens_per_s_per_gpu
            for d in ("alltoall", "deepep") for o in ("0", "1")]
    assert len({round(a) for a in alts}) > 1  # the settings are costed differently
    lo, hi = blank.tokens_p10_p90
    assert lo == pytest.approx(lo_f * min(alts), rel=1e-9)
    assert hi == pytest.approx(hi_f * max(alts), rel=1e-9)
    assert lo < stated.tokens_p10_p90[0] or hi > stated.tokens_p10_p90[1]
    # step time moves the other way, by the same factors
    s_lo, s_hi = blank.step_time_p10_p90
    assert s_lo == pytest.approx(stated.step_time_p10_p90[0] * point / max(alts), rel=1e-9)
    assert s_hi == pytest.approx(stated.step_time_p10_p90[1] * point / min(alts), rel=1e-9)
    assert blank.engine_spread == pytest.approx((math.log(min(alts) / point),
                                                 math.log(max(alts) / point)))


def test_only_the_blank_knob_is_varied():
    row = ROWS["H042"]
    stated = _predict(row)
    point = stated.predicted_tokens_per_s_per_gpu
    overlap_blank = _predict(_blank(row, "ep_overlap"))
    on = _predict(dict(row, ep_overlap="1")).predicted_tokens_per_s_per_gpu
    lo_f, hi_f = (x / point for x in stated.tokens_p10_p90)
    assert overlap_blank.tokens_p10_p90[0] == pytest.approx(lo_f * min(point, on), rel=1e-9)
    assert overlap_blank.tokens_p10_p90[1] == pytest.approx(hi_f * max(point, on), rel=1e-9)


def test_rows_that_state_both_knobs_and_dense_rows_are_not_widened():
    row = ROWS["H042"]
    assert _predict(row).engine_spread == (0.0, 0.0)
    dense = next(r for r in ROWS.values() if not r["moe_experts"] and r["framework"] == "nemo")
    assert _predict(dense).engine_spread == (0.0, 0.0)


def test_a_single_setting_framework_is_not_widened():
    # torchtitan dispatches with an all-to-all and does not overlap it (engines.py); its TP
    # overlap (async TP) is a switch like any framework's
    assert es.blank_knobs(set(), "torchtitan") == ("tp_comm_overlap",)
    assert es.blank_knobs({"tp_comm_overlap"}, "DeepSpeed") == ()
    assert es.blank_knobs(set(), "nemo") == ("moe_dispatcher", "ep_comm_overlap",
                                             "tp_comm_overlap")
    assert es.blank_knobs({"moe_dispatcher", "tp_comm_overlap"}, "other") == ("ep_comm_overlap",)
    # Aleph Alpha's engine has no TP overlap to switch on (framework_defaults ALEPH_ALPHA)
    assert es.blank_knobs(set(), "aleph-alpha") == ("moe_dispatcher", "ep_comm_overlap")
    row = dict(_blank(ROWS["H042"], "moe_dispatcher", "ep_overlap"), framework="torchtitan")
    res = _predict(row)
    assert res.engine_spread == (0.0, 0.0)


def test_blank_tp_overlap_widens_to_both_settings():
    # torchtitan's async TP A/B (benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md):
    # H100 states vanilla TP, H101 the same run with async TP
    off_row, on_row = ROWS["H100"], ROWS["H101"]
    assert (off_row["tp_comm_overlap"], on_row["tp_comm_overlap"]) == ("0", "1")
    off, on = _predict(off_row), _predict(on_row)
    blank = _predict(_blank(off_row, "tp_comm_overlap"))
    point = off.predicted_tokens_per_s_per_gpu
    assert blank.predicted_tokens_per_s_per_gpu == point  # the point: the code default (off)
    assert on.predicted_tokens_per_s_per_gpu > point  # the overlap is costed
    assert off.engine_spread == (0.0, 0.0)  # stated: not widened
    lo_f, hi_f = (x / point for x in off.tokens_p10_p90)
    assert blank.tokens_p10_p90[0] == pytest.approx(lo_f * point, rel=1e-9)
    assert blank.tokens_p10_p90[1] == pytest.approx(
        hi_f * on.predicted_tokens_per_s_per_gpu, rel=1e-9)
    # without TP there is nothing to overlap: no widening
    tp1 = next(r for r in ROWS.values() if r["tp"] == "1" and not r["moe_experts"]
               and r["framework"] == "torchtitan")
    assert _predict(tp1).engine_spread == (0.0, 0.0)


@pytest.mark.parametrize("rid, kernels", [
    # Pax on GPUs is published with its own XLA attention and with Transformer Engine's
    # (JAX-Toolbox rosetta pax README: "Sequences/Sec (bf16 / TE bf16)")
    ("H252", ("te", "unfused")),
    # Megatron on V100: fused softmax, or the 2019 paper code's eager ops (unfused-eager)
    ("H231", ("unfused", "unfused-eager")),
])
def test_blank_attention_kernel_widens_to_the_frameworks_published_kernels(rid, kernels):
    row = ROWS[rid]
    assert row["attention_kernel"]  # the full row states it
    blank = _predict(_blank(row, "attention_kernel"))
    # the other blank engine columns as the blank row has them, only the kernel stated
    twins = [_predict(dict(_blank(row, "attention_kernel"), attention_kernel=k))
             for k in kernels]
    point = blank.predicted_tokens_per_s_per_gpu
    alts = [t.predicted_tokens_per_s_per_gpu for t in twins]
    assert len({round(a) for a in alts}) == len(kernels)  # the kernels are costed apart
    assert twins[0].engine_spread == (0.0, 0.0)  # a stated kernel is not widened
    # the blank row's interval spans every kernel's prediction over its point
    assert blank.engine_spread == pytest.approx((math.log(min(1.0, min(alts) / point)),
                                                 math.log(max(1.0, max(alts) / point))))
    assert blank.engine_spread != (0.0, 0.0)
    # a framework whose published runs use one kernel is not widened for it
    assert "attention_kernel" not in es.blank_knobs(set(), "torchtitan")


def test_widen_never_narrows_and_keeps_the_point_inside():
    s = es.Spread(1.2, 1.5)  # every other setting faster: only the top moves
    assert es.widen_tokens((80.0, 120.0), s) == pytest.approx((80.0, 180.0))
    assert es.widen_step((1.0, 2.0), s) == pytest.approx((1.0 / 1.5, 2.0))
    s = es.Spread(0.5, 0.9)  # every other setting slower: only the bottom moves
    assert es.widen_tokens((80.0, 120.0), s) == pytest.approx((40.0, 120.0))
    assert not es.NONE.widens and es.NONE.log_bounds == (0.0, 0.0)


def test_loso_coverage_uses_the_widened_bounds():
    res = [_predict(ROWS[i]) for i in ("H042", "H043", "H044")]
    res[1].source = "elsewhere"  # the refit leaves each source out: two sources needed
    res[0].measured_tokens_per_s_per_gpu = res[0].predicted_tokens_per_s_per_gpu * 3.0
    assert validate.loso_coverage(res)["per_source"][res[0].source] < 1.0
    res[0].engine_spread = (0.0, math.log(3.5))  # another setting 3.5x faster
    assert validate.loso_coverage(res)["per_source"][res[0].source] == 1.0


PREDICT = """
[model]
preset = "qwen3-30b-a3b"
[cluster]
gpus = "8xGB200"
[workload]
seq_len = 4096
global_batch = 512
framework = "nemo"
[plan]
data_parallel = 8
expert_parallel = 8
zero = 1
micro_batch = 1
recompute = "full"
{knobs}
"""


def test_predict_widens_a_plan_that_does_not_name_the_moe_knobs(tmp_path):
    import contextlib
    import io
    import json

    from meshplan.cli import main

    out = {}
    for name, knobs in (("blank", ""),
                        ("stated", 'moe_dispatcher = "alltoall"\nep_comm_overlap = false')):
        f = tmp_path / f"{name}.toml"
        f.write_text(PREDICT.format(knobs=knobs))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["predict", "--scenario", str(f), "--json"]) in (0, None)
        out[name] = json.loads(buf.getvalue())
    blank, stated = out["blank"], out["stated"]
    assert blank["tokens_per_s_per_gpu"] == stated["tokens_per_s_per_gpu"]  # same plan
    b = blank["interval"]["tokens_per_s_per_gpu_p10_p90"]
    s = stated["interval"]["tokens_per_s_per_gpu_p10_p90"]
    assert b[0] <= s[0] and b[1] >= s[1] and (b[0] < s[0] or b[1] > s[1])
