"""A runs CSV's free text (ids, sources, GPU names) reached the terminal raw: an ESC sequence
in a row id recoloured or cleared the screen in ``validate``'s table and ``calibrate
--from-runs``'s list of rows not used. Now every line goes out through terminal.say, which
writes non-printable characters as their escapes."""

from __future__ import annotations

import csv

from meshplan.cli import main
from meshplan.terminal import shown

ROW = {"trust": "A", "model": "llama3.1-8b", "gpu": "H100-SXM-80GB", "num_gpus": "8",
       "seq_len": "1024", "global_batch_seqs": "32", "tp": "1", "pp": "1", "dp": "8",
       "zero": "1", "micro_batch": "1", "recompute": "none", "precision": "bf16",
       "measured_tokens_per_s_per_gpu": "5000"}


def _csv(tmp_path, rows):
    path = tmp_path / "runs.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return str(path)


def test_shown_escapes_controls_and_keeps_printable_text():
    assert shown("a\x1b[2Jb\x07\tc\u202ed\x9b") == "a\\x1b[2Jb\\x07\\tc\\u202ed\\x9b"
    assert shown("Grüße 日本 ok") == "Grüße 日本 ok"


def test_validate_table_escapes_row_ids_and_sources(tmp_path, capsys):
    path = _csv(tmp_path, [dict(ROW, id="r0\x1b[31m", source="s\x1b[2J"),
                           dict(ROW, id="bad\x1b[1A", source="s2", gpu="nope")])
    main(["validate", path])
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "r0\\x1b[31m" in out and "s\\x1b[2J" in out and "bad\\x1b[1A" in out


def test_calibrate_from_runs_escapes_the_rows_it_drops(tmp_path, capsys):
    path = _csv(tmp_path, [dict(ROW, id="ok", source="s"),
                           dict(ROW, id="x\x1b[K", source="s", gpu="nope")])
    assert main(["calibrate", "--from-runs", path, "--out", str(tmp_path / "p.toml")]) == 2
    out = capsys.readouterr().out
    assert "\x1b" not in out and "x\\x1b[K" in out
