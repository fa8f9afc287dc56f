"""docs/exports.md shows what the exporters write now: its generated blocks equal a fresh run
of bench/doc_exports.py (re-run `python bench/doc_exports.py` after changing an exporter)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_export_listings_are_current():
    spec = importlib.util.spec_from_file_location("doc_exports", ROOT / "bench" / "doc_exports.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.rewrite(ROOT / "docs" / "exports.md", check=True), \
        "docs/exports.md is stale: run python bench/doc_exports.py"
