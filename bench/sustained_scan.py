"""1-D scan of SUSTAINED_TENSOR through --profile: for each value, `meshplan validate` on the
calibration rows (the tuning set: pick the value with the smallest median |error| there) and
on the held-out rows (reported, never tuned to). Prints value, calibration median / p90 /
median signed error, held-out median / p90 / median signed error (tokens/s per GPU, trust A
and B rows; signed > 0: predicted too fast).

    PYTHONPATH=$PWD python bench/sustained_scan.py 0.84 0.86 0.88645 0.90 1.0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = ROOT.parent / "shared" / "validation" / "calibration.csv"
HELDOUT = ROOT / "bench" / "data" / "heldout_runs.csv"

PROFILE = """[meta]
date = "scan"
device = "what-if: SUSTAINED_TENSOR scan (bench/sustained_scan.py)"
gpu = "H100-SXM-80GB"
generation = "hopper"
[constants]
"SUSTAINED_TENSOR" = {value}
"""


def figures(csv: Path, profile: Path) -> tuple[float, float, float]:
    """(median |error|, p90 |error|, median signed error) of tokens/s per GPU."""
    out = subprocess.run(
        [sys.executable, "-m", "meshplan", "validate", str(csv), "--json", "--jobs", "1",
         "--profile", str(profile)],
        capture_output=True, text=True, check=True, cwd=tempfile.gettempdir(),
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    data = json.loads(out.stdout)
    signed = [r["tokens_error"] for r in data["rows"]
              if r.get("tokens_error") is not None and r.get("trust") in ("A", "B")]
    s = data["summary"]
    return s["tokens_median_abs_error"], s["tokens_p90_abs_error"], statistics.median(signed)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("values", nargs="+", type=float)
    ap.add_argument("--calibration", default=str(CALIBRATION))
    ap.add_argument("--heldout", default=str(HELDOUT))
    a = ap.parse_args(argv)
    print("value    calibration med / p90 / signed    held-out med / p90 / signed")
    with tempfile.TemporaryDirectory() as tmp:
        for v in a.values:
            prof = Path(tmp) / f"st_{v}.toml"
            prof.write_text(PROFILE.format(value=v))
            c = figures(Path(a.calibration), prof)
            h = figures(Path(a.heldout), prof)
            print(f"{v:<8g} {100 * c[0]:6.2f} / {100 * c[1]:6.2f} / {100 * c[2]:+6.2f}"
                  f"          {100 * h[0]:6.2f} / {100 * h[1]:6.2f} / {100 * h[2]:+6.2f}")


if __name__ == "__main__":
    main()
