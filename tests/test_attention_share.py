"""bench/attention_share.py: the attention-core bound it prints for a runs-CSV row is the cost
model's own attention time, and its unfused-score count is the closed form b h s^2 x 2 bytes."""
import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from attention_share import GIB, attention_parts  # noqa: E402


def _row(rid: str) -> dict:
    rows = csv.DictReader(open(ROOT / "bench" / "data" / "heldout_runs.csv", newline=""))
    return next(r for r in rows if r["id"] == rid)


def test_all_full_causal_figure_is_the_model_without_its_windows():
    # H088: GPT-OSS 120B on 64 GB200, the preset's 18 windowed layers; the same row with its
    # windows removed (sliding_window 0 in the row's own columns) is every layer full causal
    row = _row("H088")
    windowed = attention_parts(row)
    full = attention_parts(dict(row, sliding_window="0", sliding_layers="0"))
    assert full["plan"] == windowed["plan"]
    assert windowed["all_full_causal_s"] == pytest.approx(full["attention_s"], rel=1e-9)
    assert windowed["attention_s"] < full["attention_s"]


def test_unfused_scores_are_b_h_s_squared_in_16_bits_per_layer():
    p = attention_parts(_row("H088"))  # mb 4, 64 heads, tp 1, seq 4096, 36 layers, pp 1
    assert p["unfused_probs_gib"] == pytest.approx(4 * 64 * 4096 ** 2 * 2 * 36 / GIB)
    assert p["unfused_probs_gib"] > p["gpu_gib"]
