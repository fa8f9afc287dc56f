"""Fit the interval model (meshplan/residuals.toml) from published runs.

    python bench/fit_residuals.py ../shared/validation/calibration.csv [--out meshplan/residuals.toml]
        [--memory-csv bench/data/heldout_memory.csv ...] [--memory-only]

For every scored row: r = ln(measured / predicted) tokens/s per GPU (and peak memory), keyed
by the row's class (GPU generation / dense or MoE / scale). When bench/fit_constants.py
offers ``loso_predictions(rows) -> {row id: predicted tokens/s per GPU}`` (the constants
refitted without the row's source), those cross-validated predictions are used; otherwise
the shipped constants' predictions are (in-sample for the rows the constants were fitted
on; the header says which). It prints, per source, the interval coverage with the residual
model refitted without that source (leave-one-source-out) and writes the TOML.

Memory: r = ln(measured / predicted) peak memory, keyed by memory class engine/generation
(uncertainty.memory_class_of), over the memory rows of the main CSV and of every
``--memory-csv`` file (published peaks are few; the point predictions of memory have no
fitted constant, so these residuals are out-of-sample for the memory model itself). It
prints the peak-memory interval coverage per source with the memory residual model refitted
without that source. ``--memory-only`` rewrites only the [memory] tables and their meta lines
of the existing TOML and leaves the throughput model as it is.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from meshplan import uncertainty  # noqa: E402
from meshplan.validate import (loso_coverage, loso_memory_coverage, predict_rows,  # noqa: E402
                               read_rows)

# Relative 1-sigma of the constants behind each group of step-time parts. The interval
# widens by (share of the step in the group) x sigma for each group (uncertainty.py).
CONSTANTS = {
    "gemm_attention": (["compute_s", "recompute_s"], 0.05,
                       "GEMM/attention efficiency over one model's shapes: a bf16 8192^3 GEMM "
                       "ran 769-798 TFLOP/s on one H200 run to run (FIELD.md), cuBLAS "
                       "heuristics move real shapes by a few percent more"),
    "collectives": (["tp_exposed_s", "cp_exposed_s", "dp_exposed_s", "pp_p2p_s"], 0.20,
                    "NCCL bus bandwidth 360-380 of 450 GB/s on 8x H100 NVSwitch, 46 of 50 "
                    "GB/s per NDR NIC (nccl-tests); the hidden share of TP communication was "
                    "chosen from a 0-0.8 grid (efficiency.py tp_overlap)"),
    "all_to_all": (["ep_exposed_s"], 0.50,
                   "MoE all-to-all across nodes: engines reach 0.30 of NIC bandwidth (fitted), "
                   "DeepEP 0.85 (40-45 of 50 GB/s on H800): a factor 2.8 taken as +-2 sigma"),
    "pipeline": (["pp_bubble_s"], 0.10,
                 "closed-form bubble vs the event simulation of the same schedule "
                 "(meshplan.pipeline) differ by up to ~10% of the bubble"),
    "host": (["optimizer_s"], 0.30,
             "CPU Adam ~1e9 params/s and PCIe ~25 of 50 GB/s per GPU are vendor-order figures"),
    "overlap": (["overlap_slowdown_s"], 0.50,
                "compute slowdown beside hidden communication: TP overlap kernels 5-15% "
                "(MegaScale, Comet; TE userbuffers 0-16 of 132 SMs), 0.10 +- 0.05; NCCL "
                "collectives on average 18.9%, up to 40% (Lee et al. 2025), 0.19 +- 0.1"),
    "stragglers": (["straggler_s"], 0.6,
                   "per-step spread of a rank's compute across DP ranks 0.45-0.55% on ByteDance's "
                   "traces (OSDI 2025 artifact), ~1.1% on unscreened V100s (Sinha et al. SC22): "
                   "sigma 0.5% +0.6/-0.3 (cost/stragglers.py)"),
}


def _placeholder() -> dict:
    zero = {"all": {"n": 0, "mean": 0.0, "sigma": 0.0}}
    return {"meta": {"between_generation_sigma": 0.0}, "throughput": zero, "memory": zero,
            "constants": {k: {"parts": p, "sigma": s} for k, (p, s, _) in CONSTANTS.items()}}


def _generation(cls: str) -> str:
    return cls.split("/")[0]


def loso_refit(rows: list[dict], results) -> dict:
    """Row id -> tokens/s per GPU predicted with the end-to-end constants refitted on the
    other sources only (meshplan.calibrate.from_runs: one coordinate pass)."""
    from meshplan import profile
    from meshplan.calibrate import from_runs

    src = {r.id: r.source for r in results}
    scored = [row for row, r in zip(rows, results)
              if r.error is None and r.measured_tokens_per_s_per_gpu]
    out = {}
    for s in sorted({src[row["id"]] for row in scored}):
        train = [row for row in scored if src[row["id"]] != s]
        test = [row for row in rows if src.get(row["id"]) == s]
        names = from_runs.default_names(train)
        consts = from_runs.fit(train, names, passes=1)
        restore = profile.apply(consts)
        try:
            for r in predict_rows(test, with_search_best=False, residuals=_placeholder()):
                if r.error is None:
                    out[r.id] = r.predicted_tokens_per_s_per_gpu
        finally:
            restore()
        print(f"  left out {s}: {len(test)} rows, refitted "
              + ", ".join(f"{k.split('.', 1)[-1]}={v:.3g}" for k, v in consts.items()), flush=True)
    return out


def _per_source_errors(results, insample: dict, cross_validated: bool) -> None:
    """Per source: median |error| of tokens/s per GPU with the shipped constants (in-sample
    for the calibration file) and with the constants refitted without the source."""
    print("per source: rows, median |error| in-sample, leave-one-source-out")
    for s in sorted({r.source for r in results}):
        rs = [r for r in results if r.source == s and r.id in insample]
        if not rs:
            continue
        ins = statistics.median(abs(insample[r.id]) for r in rs)
        lo = statistics.median(abs(r.tokens_error) for r in rs) if cross_validated else None
        print(f"  {len(rs):>3}  {ins:6.1%}  " + (f"{lo:6.1%}" if lo is not None else "   -  ")
              + f"  {s}")
    allin = [abs(v) for v in insample.values()]
    allcv = [abs(r.tokens_error) for r in results if r.tokens_error is not None]
    if allin and allcv:
        print(f"  all  {statistics.median(allin):6.1%}  {statistics.median(allcv):6.1%}  "
              f"(90th percentile: in-sample {sorted(allin)[int(0.9 * (len(allin) - 1))]:.1%}, "
              f"LOSO {sorted(allcv)[int(0.9 * (len(allcv) - 1))]:.1%})")


def memory_rows(results, memory_csvs: list[str]) -> list:
    """Rows with a measured and a predicted peak: the main file's and each memory file's."""
    out = [r for r in results if r.error is None and r.memory_residual is not None]
    for p in memory_csvs:
        extra = predict_rows(read_rows(p), with_search_best=False, residuals=_placeholder())
        out += [r for r in extra if r.error is None and r.memory_residual is not None]
    return out


def memory_coverage_loso(mem_rows) -> None:
    """Print the peak-memory interval coverage per source, memory residual model refitted
    without the source (validate.loso_memory_coverage over all memory files together)."""
    cov = loso_memory_coverage(mem_rows)
    print(f"10-90% interval coverage of peak memory, memory residual model left out per source: "
          + (f"{cov['coverage']:.0%} of {cov['rows']} rows" if cov["rows"] else "no rows"))
    for s, c in cov["per_source"].items():
        n = sum(1 for r in mem_rows if r.source == s)
        print(f"  {c:5.0%}  {n:>3}  {s}")


def fit(path: str, refit: bool = True, memory_csvs: list[str] = ()) -> tuple[dict, list]:
    rows = read_rows(path)
    results = predict_rows(rows, with_search_best=False, residuals=_placeholder())
    try:
        import fit_constants  # bench/fit_constants.py, the constants' owner

        loso = fit_constants.loso_predictions(rows)
        method = "leave-one-source-out predictions of bench/fit_constants.py loso_predictions"
    except (ImportError, AttributeError):
        loso = loso_refit(rows, results) if refit else {}
        method = ("leave-one-source-out: the end-to-end constants of `meshplan calibrate "
                  "--from-runs` refitted without each source" if refit else
                  "in-sample residuals of the shipped constants")
    insample = {r.id: r.tokens_error for r in results if r.tokens_error is not None}
    for r in results:
        if r.id in loso and r.error is None:
            r.predicted_tokens_per_s_per_gpu = loso[r.id]
    _per_source_errors(results, insample, bool(loso))
    scored = [r for r in results if r.error is None and r.tokens_residual is not None]
    tput = uncertainty.fit_stats([(r.throughput_class, r.tokens_residual) for r in scored])
    mem_rows = memory_rows(results, memory_csvs)
    mem_records = [(r.memory_class, r.memory_residual) for r in mem_rows]
    mem = uncertainty.fit_stats(mem_records)
    gens = [v["mean"] for k, v in tput.items() if "/" not in k and k != "all"]
    between = statistics.stdev(gens) if len(gens) > 1 else 0.0
    data = _placeholder()
    data["meta"] = {
        "date": datetime.date.today().isoformat(),
        "command": "python bench/fit_residuals.py " + " ".join(sys.argv[1:]),
        "data": Path(path).name, "rows": len(scored), "memory_rows": len(mem_rows),
        "method": method, "between_generation_sigma": between,
        "memory_data": ", ".join([Path(path).name] + [Path(p).name for p in memory_csvs]),
        "between_engine_memory_sigma": uncertainty.between_sigma(mem_records),
    }
    data["throughput"], data["memory"] = tput, mem
    memory_coverage_loso(mem_rows)
    return data, results


def to_toml(data: dict) -> str:
    m = data["meta"]
    out = ["# The interval model of meshplan/uncertainty.py: log residuals ln(measured/predicted)",
           f"# by class. Written by: {m['command']} ({m['date']}). Do not edit by hand."]
    if "memory_command" in m:
        out.append(f"# Memory tables rewritten by: {m['memory_command']} ({m['memory_date']}).")
    out += ["", "[meta]"]
    for k, v in m.items():
        out.append(f"{k} = {v!r}" if isinstance(v, (int, float)) else f'{k} = "{v}"')
    for sec in ("throughput", "memory"):
        for k, v in data[sec].items():
            out += ["", f'[{sec}."{k}"]', f"n = {v['n']}", f"mean = {v['mean']:.5f}",
                    f"sigma = {v['sigma']:.5f}"]
    for k, (parts, sigma, src) in CONSTANTS.items():
        out += ["", f"[constants.{k}]", f"# {src}",
                "parts = [" + ", ".join(f'"{p}"' for p in parts) + "]", f"sigma = {sigma}"]
    return "\n".join(out) + "\n"


MEMORY_META = ("memory_rows", "memory_data", "between_engine_memory_sigma", "memory_command",
               "memory_date")


def memory_only(path: str, memory_csvs: list[str], out: str) -> None:
    """Refit the memory tables alone and splice them into ``out``: its throughput tables,
    constants and other meta lines are kept as they are."""
    import tomllib

    old = tomllib.loads(Path(out).read_text())
    results = predict_rows(read_rows(path), with_search_best=False, residuals=_placeholder())
    mem_rows = memory_rows(results, memory_csvs)
    records = [(r.memory_class, r.memory_residual) for r in mem_rows]
    data = {"meta": {k: v for k, v in old["meta"].items() if k not in MEMORY_META},
            "throughput": old["throughput"], "memory": uncertainty.fit_stats(records)}
    data["meta"].update({
        "memory_rows": len(mem_rows),
        "memory_data": ", ".join([Path(path).name] + [Path(p).name for p in memory_csvs]),
        "between_engine_memory_sigma": uncertainty.between_sigma(records),
        "memory_command": "python bench/fit_residuals.py " + " ".join(sys.argv[1:]),
        "memory_date": datetime.date.today().isoformat()})
    Path(out).write_text(to_toml(data))
    memory_coverage_loso(mem_rows)
    print(f"wrote the memory tables of {out}: {len(mem_rows)} rows, classes "
          + ", ".join(f"{k} ({v['n']})" for k, v in data["memory"].items() if "/" in k))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="runs CSV (docs/validation.md) whose residuals are fitted")
    ap.add_argument("--in-sample", action="store_true",
                    help="residuals of the shipped constants as they are (no refit per source)")
    shipped = Path(uncertainty.__file__).with_name("residuals.toml")
    ap.add_argument("--out", default=str(shipped),
                    help=f"TOML to write (default: {shipped}, the interval model every "
                         "prediction uses: it is overwritten)")
    ap.add_argument("--memory-csv", action="append", default=[],
                    help="another runs CSV whose measured peaks join the memory residuals")
    ap.add_argument("--memory-only", action="store_true",
                    help="rewrite only the memory tables of --out (the throughput model stays)")
    a = ap.parse_args()
    if a.memory_only:
        memory_only(a.csv, a.memory_csv, a.out)
        return
    data, results = fit(a.csv, refit=not a.in_sample, memory_csvs=a.memory_csv)
    text = to_toml(data)
    Path(a.out).write_text(text)
    import tomllib

    data = tomllib.loads(text)
    cov = loso_coverage(results, data)
    print(f"wrote {a.out}: {data['meta']['rows']} throughput rows, "
          f"{data['meta']['memory_rows']} memory rows; {data['meta']['method']}")
    print(f"between-generation sigma {data['meta']['between_generation_sigma']:.3f}; "
          f"pooled throughput sigma {data['throughput']['all']['sigma']:.3f}, "
          f"memory sigma {data['memory']['all']['sigma']:.3f}")
    print(f"10-90% interval coverage of tokens/s per GPU, residual model left out per "
          f"source: {cov['coverage']:.0%} of {cov['rows']} rows")
    for s, c in cov["per_source"].items():
        print(f"  {c:5.0%}  {s}")


if __name__ == "__main__":
    main()
