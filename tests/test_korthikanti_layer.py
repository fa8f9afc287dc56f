"""One Megatron-LM transformer layer on A100 against the per-layer times Korthikanti et al.
2022 publish (bench/data/korthikanti2022_layer_times.csv: Table 4, the 22B layer's forward
and backward in five settings, and sec. 6.2's recomputation overheads of the 530B and 1T
layers). No constant was set from this table: it is a held-out, kernel-level check of the
layer cost model (bench/korthikanti_layer.py prints the comparison with the model's parts).

What the tolerances say:
- the shape of the layer (backward over forward, the overhead of each setting over the
  baseline) is what the engine's schedule decides: recomputation, sequence parallelism, and
  which TP collectives Megatron runs beside its GEMMs (cost/layer.megatron_async_dgrad).
  Backward over forward within 5%, overheads within 2.5 points of the printed percentages
  (printed as integers; the table's milliseconds carry one decimal).
- the level: every forward and backward within 15%. The model is 12-14% slower than the
  table in every setting (uniformly: the tensor-core rate it gives an A100, see the report of
  the branch that added this file), so 15% is a pin, not a claim of accuracy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
try:
    from korthikanti_layer import baseline_of, implied_gemm_s, layer, read_rows
finally:
    sys.path.pop(0)

ROWS = read_rows()
TABLE4 = [r for r in ROWS if r["measured_fwd_ms"]]


def test_the_published_rows_are_there():
    """Table 4's five settings and sec. 6.2's four overheads, each with its derivation; the
    table's combined column is forward + backward as printed."""
    assert [r["id"] for r in TABLE4] == ["T4-baseline", "T4-sp", "T4-full", "T4-selective",
                                         "T4-selective-sp"]
    assert len(ROWS) == 9
    for r in ROWS:
        assert r["source"] and r["derivation"] and r["trust"] in ("A", "B", "C")
    for r in TABLE4:
        assert float(r["measured_fwd_ms"]) + float(r["measured_bwd_ms"]) == pytest.approx(
            float(r["measured_combined_ms"]), abs=0.051)


@pytest.mark.parametrize("row", TABLE4, ids=lambda r: r["id"])
def test_backward_over_forward(row):
    """Before Megatron's asynchronous column-parallel collectives were modelled, the model's
    backward carried the whole backward TP communication on its critical path: 1.73 against
    1.55 for the baseline, 1.87 against 1.71 with selective recomputation, 2.73 against 2.53
    with full recomputation."""
    m = layer(row)
    measured = float(row["measured_bwd_ms"]) / float(row["measured_fwd_ms"])
    assert m["bwd_s"] / m["fwd_s"] == pytest.approx(measured, rel=0.05)


@pytest.mark.parametrize("row", [r for r in ROWS if r["measured_overhead_pct"]],
                         ids=lambda r: r["id"])
def test_overhead_over_the_baseline(row):
    """Full recomputation costs 39% on the 22B layer and 36% on the 530B and 1T layers,
    not 33%, because the baseline's backward hides its TP all-reduces behind the
    weight-gradient GEMMs (sec. 6.2); sequence parallelism with selective recomputation
    costs 4% / 2%. Before the overlap was modelled: 36.6%, -0.7% (22B), -0.9% (530B)."""
    m, b = layer(row), layer(baseline_of(row, ROWS))
    overhead_pct = ((m["fwd_s"] + m["bwd_s"]) / (b["fwd_s"] + b["bwd_s"]) - 1) * 100
    assert overhead_pct == pytest.approx(float(row["measured_overhead_pct"]), abs=2.5)


@pytest.mark.parametrize("row", TABLE4, ids=lambda r: r["id"])
def test_forward_and_backward_level(row):
    m = layer(row)
    assert m["fwd_s"] * 1e3 == pytest.approx(float(row["measured_fwd_ms"]), rel=0.15)
    assert m["bwd_s"] * 1e3 == pytest.approx(float(row["measured_bwd_ms"]), rel=0.15)


@pytest.mark.parametrize("row", [r for r in TABLE4 if r["recompute"] == "none"],
                         ids=lambda r: r["id"])
def test_forward_and_backward_leave_the_gemms_the_same_rate(row):
    """The published forward and backward, less the model's non-GEMM parts, leave the GEMMs
    one rate (230-237 TFLOP/s: bench/korthikanti_layer.py), as one set of kernels on one
    clock must. With the backward's TP all-reduces on the critical path (before
    megatron_async_dgrad) the backward left them 276 against the forward's 232."""
    m = layer(row)
    f_s, b_s = implied_gemm_s(row, m)
    assert b_s / (2 * f_s) == pytest.approx(1.0, rel=0.05)
