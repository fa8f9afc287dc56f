"""The README's tokens/s accuracy table, from `meshplan validate --json` outputs.

Runs `meshplan validate --json` on the calibration rows, the held-out rows (with their engine
columns and cut to the shared schema, bench/shared_schema.py) and the layout sets, then prints
one markdown row per set and split: trust A/B rows, median and linear-interpolated 90th
percentile of |error| of tokens/s per GPU, and the median signed error. With --previous DIR
(the JSON files of an earlier run, as --save-json DIR writes them) each figure is followed by
the earlier one on the same rows, in brackets.

    PYTHONPATH=$PWD python bench/accuracy_table.py [--save-json DIR] [--previous DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from meshplan.validate import quantile  # noqa: E402  the one percentile rule

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "validation" / "calibration.csv"
HELDOUT = ROOT / "bench" / "data" / "heldout_runs.csv"
LAYOUTS = ROOT / "bench" / "data" / "layout_sets.csv"
# the GPU ids the shared schema lists (../shared/validation/README.md, column gpu)
SCHEMA_GPUS = {"V100-SXM-32GB", "A100-SXM-40GB", "A100-SXM-80GB", "H100-SXM-80GB",
               "H100-SXM-96GB-500W", "H800-SXM-80GB", "H200-SXM-141GB", "B200", "GB200"}


def validate_json(csv_path: Path, out: Path) -> dict:
    # validate exits 1 when a row cannot be predicted (the cut to the shared schema drops the
    # MLA columns a row without a preset needs); such rows stay in the JSON with their error
    # and are not scored, as validate itself counts them
    with open(out, "w") as f:
        done = subprocess.run([sys.executable, "-m", "meshplan", "validate", str(csv_path),
                               "--json", "--jobs", "2"], stdout=f, cwd=ROOT)
    if done.returncode not in (0, 1):
        raise subprocess.CalledProcessError(done.returncode, done.args)
    return json.loads(out.read_text())


def _hid(i: str) -> int:
    return int(i[1:]) if i[:1] == "H" and i[1:].isdigit() else -1


def splits(heldout_src: dict) -> list[tuple[str, object]]:
    """(label, row-id predicate) of the held-out splits the table shows."""
    def src(i):
        return heldout_src.get(i, {})
    return [
        ("held-out runs, all", lambda i: True),
        ("held-out, rows H001-H290 (the set before this release's rows)", lambda i: 1 <= _hid(i) <= 290),
        ("held-out, rows H296-H299 (Qwen3-30B-A3B, Megatron-Bridge tables, added this release)",
         lambda i: 296 <= _hid(i) <= 299),
        ("held-out, rows H400-H409 (AMD Instinct, added this release)", lambda i: 400 <= _hid(i) <= 409),
        ("held-out, rows H500-H531 (OLMo-core, MLPerf GPT-3 / 405B, added this release)",
         lambda i: 500 <= _hid(i) <= 531),
        ("held-out, rows H600-H611 (MLPerf v5.1 Llama 3.1 8B, added this release)",
         lambda i: 600 <= _hid(i) <= 611),
        ("held-out, rows H700-H718 (MoE from xtuner, FlagPerf, torchao, torchtitan, added this "
         "release)", lambda i: 700 <= _hid(i) <= 718),
        ("held-out, the shared schema's GPUs only", lambda i: src(i).get("gpu") in SCHEMA_GPUS),
        ("held-out, dense models", lambda i: src(i).get("arch") == "dense"),
        ("held-out, MoE models", lambda i: src(i).get("arch") == "moe"),
        ("held-out, FP8 rows", lambda i: src(i).get("precision") == "fp8"),
        ("held-out, BF16 rows", lambda i: src(i).get("precision") == "bf16"),
    ]


def figures(rows: list[dict], keep) -> tuple[int, float, float, float] | None:
    errs = [r["tokens_error"] for r in rows
            if r.get("trust") in ("A", "B") and r.get("tokens_error") is not None and keep(r["id"])]
    if not errs:
        return None
    a = [abs(e) for e in errs]
    return len(errs), quantile(a, 0.5), quantile(a, 0.9), quantile(errs, 0.5)


def cell(now: float, before: float | None, signed: bool = False) -> str:
    f = "{:+.1%}" if signed else "{:.1%}"
    return f.format(now) + ("" if before is None else " (" + f.format(before) + ")")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--save-json", help="folder to keep the validate JSON files in")
    ap.add_argument("--previous", help="folder of an earlier run's JSON files")
    a = ap.parse_args()
    if not SHARED.exists():
        sys.exit(f"{SHARED} is absent: the calibration rows and the shared schema come from it")
    work = Path(a.save_json or tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    cut = work / "heldout_shared_schema.csv"
    subprocess.run([sys.executable, str(ROOT / "bench" / "shared_schema.py"), str(HELDOUT),
                    "-o", str(cut)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    runs = {"calibration": SHARED, "heldout": HELDOUT, "heldout_cut": cut, "layouts": LAYOUTS}
    now = {k: validate_json(p, work / f"{k}.json")["rows"] for k, p in runs.items()}
    before = ({k: json.loads((Path(a.previous) / f"{k}.json").read_text())["rows"]
               for k in runs} if a.previous else None)
    heldout_src = {r["id"]: r for r in csv.DictReader(open(HELDOUT, newline=""))}
    table = [("calibration, in-sample", "calibration", lambda i: True,
              "`meshplan validate ../shared/validation/calibration.csv`")]
    for label, keep in splits(heldout_src):
        table.append((label, "heldout", keep, "`meshplan validate bench/data/heldout_runs.csv`"))
    table.append(("held-out cut to the shared schema (engine columns blank)", "heldout_cut",
                  lambda i: True, "`python bench/shared_schema.py bench/data/heldout_runs.csv -o "
                  "/tmp/h.csv`, then `meshplan validate /tmp/h.csv`"))
    table.append(("the same cut, rows H001-H290", "heldout_cut", lambda i: 1 <= _hid(i) <= 290,
                  "same"))
    table.append(("layout sets (measured layouts)", "layouts", lambda i: True,
                  "`meshplan validate bench/data/layout_sets.csv`"))
    print("| set | rows | median abs error | 90th percentile | median signed | command |")
    print("|---|---|---|---|---|---|")
    last = None
    for label, key, keep, cmd in table:
        f = figures(now[key], keep)
        if f is None:
            continue
        ids = {r["id"] for r in now[key]}
        b = figures([r for r in before[key] if r["id"] in ids], keep) if before else None
        n, med, p90, signed = f
        print(f"| {label} | {n} | {cell(med, b and b[1])} | {cell(p90, b and b[2])} | "
              f"{cell(signed, b and b[3], True)} | {'same' if cmd == last else cmd} |")
        last = cmd


if __name__ == "__main__":
    main()
