"""``meshplan calibrate --from-runs my_runs.csv``: refit a few end-to-end constants on the
user's own measured steps, and say honestly whether it helped.

The constants (by default, per GPU generation in the file: the large-GEMM efficiency at the
file's precision, under the part's own key for a part with a measured rate of its own
(efficiency.SKU_MATMUL), and the flash-attention forward efficiency; and the hidden share of
TP communication) are fitted by coordinate search over multiplicative grids around their
current values, minimising the mean |ln(predicted / measured)| tokens/s per GPU. The error
is reported cross-validated: each fold's rows are predicted with constants fitted on the
other folds only; "before" is the defaults' error on the same rows (nothing fitted, so
already out of sample). The folds never split a group of rows that share what a fit could
learn from one and reuse on the other: a file naming two or more sources is cross-validated
leave-one-source-out (each source its own fold: a run predicted from constants fitted on
other publications or clusters, as bench/fit_constants.py reports the shipped constants);
a file of one source is split k-fold by configuration (rows equal in every column but the
id and the measurements, i.e. repeated measurements of one run, stay in one fold). The
profile written holds the constants fitted on every row.
"""

from __future__ import annotations

import datetime
import math
import statistics
import sys
from pathlib import Path

from .. import profile, runs_csv
from ..errors import InputError
from ..progress import Progress
from ..terminal import say
from ..validate import predict_rows, prepare, quantile, read_rows

FACTORS = (0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.4)


def default_names(rows: list[dict]) -> list[str]:
    names = []
    for r in rows:
        try:
            p = prepare(r)
        except InputError:
            continue
        gpu = p.cluster.gpu
        gen = gpu.generation or "hopper"
        fp8 = p.workload.precision == "fp8"
        mm = f"EFFICIENCY.{gen}.matmul_fp8" if fp8 else f"EFFICIENCY.{gen}.matmul_bf16"
        # a part with a GEMM rate of its own (efficiency.SKU_MATMUL: GB200, B300, GB300, V100,
        # MI325X, MI355X) is priced from it, not from its generation's fraction (which then
        # changes nothing of the row): fit the part's key; at fp8 without one of its own, its
        # bf16 fraction, which its fp8 rate scales with (compute._matmul_fraction)
        sku = profile._module().SKU_MATMUL.get(gpu.name, {})
        prec = p.workload.precision
        # fp32 storage runs SGEMMs at the part's measured SGEMM fraction where it has one
        # (V100), as compute._fp32_device reads it; TF32 and the rest the 16-bit fraction
        sgemm = prec == "fp32" or (prec == "tf32" and "tf32" not in gpu.peak_flops)
        dtype = "fp8" if fp8 else "fp32" if sgemm and "fp32" in sku else "bf16"
        if dtype in sku or (fp8 and "bf16" in sku):
            mm = f"SKU_MATMUL.{gpu.name}.{dtype if dtype in sku else 'bf16'}"
        for n in (mm, f"EFFICIENCY.{gen}.attention_fwd"):
            if n not in names:
                names.append(n)
    names.append("NETWORK.tp_overlap")
    known = set(profile.known_names())
    return [n for n in names if n in known]


def split_trust_c(rows: list[dict], include: bool) -> tuple[list[dict], list[str]]:
    """(rows to fit on, ids of the trust-C rows left out): a C row's figure or layout is a
    guess (docs/validation.md), so by default it does not move the constants; ``include``
    keeps every row."""
    if include:
        return rows, []
    low = [r for r in rows if str(r.get("trust", "")).strip().upper() == "C"]
    return ([r for r in rows if str(r.get("trust", "")).strip().upper() != "C"],
            [str(r.get("id", "")) for r in low])


def usable_rows(rows: list[dict]) -> tuple[list[dict], list[tuple[str, str]]]:
    """(rows a fit can score, [(id, why not)] for the others): a row that cannot be
    predicted (validate's reasons, field named) or has no measured tokens/s per GPU (nor a
    step time to derive it from: validate.measured_tokens) would be skipped by every score,
    so the fit would run on fewer rows than it says."""
    keep, dropped = [], []
    for row, res in zip(rows, predict_rows(rows, with_search_best=False, jobs=1)):
        if res.error:
            dropped.append((res.id, res.error))
        elif res.measured_tokens_per_s_per_gpu is None:
            dropped.append((res.id, "measured_tokens_per_s_per_gpu='' and "
                            "measured_step_time_s='': nothing measured to fit on"))
        else:
            keep.append(row)
    return keep, dropped


def log_errors(rows: list[dict], consts: dict[str, float]) -> list[float]:
    restore = profile.apply(consts) if consts else None
    try:
        res = predict_rows(rows, with_search_best=False, jobs=1)
    finally:
        if restore:
            restore()
    return [abs(r.tokens_residual) for r in res if r.error is None and r.tokens_residual is not None]


def _score(rows, consts) -> float:
    e = log_errors(rows, consts)
    return sum(e) / len(e) if e else math.inf


def at_ceiling(names: list[str], consts: dict[str, float]) -> list[str]:
    """The fitted constants that ``fit`` stopped at 1.0, the cap of a share (it caps the
    constants that start at or below 1.0)."""
    from .fit import _value

    return [n for n in names if float(_value(n)) <= 1.0 and consts.get(n, 0.0) >= 1.0]


def fit(rows: list[dict], names: list[str], passes: int = 2) -> dict[str, float]:
    from .fit import _value

    cur = {n: float(_value(n)) for n in names}
    best = _score(rows, cur)
    for _ in range(passes):
        for n in names:
            base = cur[n]
            for f in FACTORS:
                v = base * f
                if base <= 1.0:
                    v = min(v, 1.0)
                if v <= 0 or v == cur[n]:
                    continue
                trial = dict(cur, **{n: v})
                s = _score(rows, trial)
                if s < best - 1e-12:
                    best, cur = s, trial
    return cur


# columns that say which measurement a row is, not which run: left out of a configuration
NOT_CONFIGURATION = ("id", "source", "trust", "derivation", "oom") + runs_csv.MEASURED \
    + runs_csv.KNOWN_NOT_MEASURED


def cv_folds(rows: list[dict], folds: int) -> tuple[list[int], str]:
    """Each row's fold and how the folds were formed (module docstring): one per source
    where the rows name two or more, else ``folds`` (capped at the groups) over the
    configurations, dealt in order of first appearance."""
    sources = [str(r.get("source", "")).strip() for r in rows]
    if len(set(sources)) >= 2:
        order = list(dict.fromkeys(sources))
        return [order.index(x) for x in sources], f"leave-one-source-out ({len(order)} sources)"
    keys = [tuple(sorted((k, str(v).strip()) for k, v in r.items()
                         if k not in NOT_CONFIGURATION)) for r in rows]
    order = list(dict.fromkeys(keys))
    if len(order) < 2:  # one configuration measured several times: folds by row
        k = max(2, min(folds, len(rows)))
        return [j % k for j in range(len(rows))], (f"{k}-fold by row (every row is the same "
                                                    f"configuration)")
    k = max(2, min(folds, len(order)))
    return [order.index(x) % k for x in keys], (f"{k}-fold by configuration ({len(order)} "
                                                f"configurations)")


def cross_validate(rows: list[dict], names: list[str], folds: int, passes: int = 2,
                   progress: Progress | None = None):
    """(errors before, errors after) per row, and how the folds were formed (cv_folds):
    relative |errors| of tokens/s, ``after`` fold by fold. ``progress`` advances once a fold."""
    fold_of, how = cv_folds(rows, folds)
    before = [math.expm1(e) for e in log_errors(rows, {})]
    after: list[float] = []
    for i in sorted(set(fold_of)):
        train = [r for r, f in zip(rows, fold_of) if f != i]
        test = [r for r, f in zip(rows, fold_of) if f == i]
        consts = fit(train, names, passes)
        after += [math.expm1(e) for e in log_errors(test, consts)]
        if progress is not None:
            progress.advance()
    return before, after, how


def run_from_runs(args) -> int:
    if args.folds < 2:
        raise InputError("folds", args.folds, "must be at least 2 (cross-validation folds; "
                         "capped at the row count)")
    every, header = runs_csv.read_rows_and_header(args.from_runs)
    for col, near in runs_csv.unread_measured_columns(header):
        say(f"note: column {col!r} is not read (not a column of the schema, so its figures "
              f"are not fitted on): did you mean {near}?")
    every, low = split_trust_c(every, getattr(args, "include_trust_c", False))
    if low:
        say(f"rows of trust C (weak: chart reading, unknown layout) left out of the fit "
              f"({len(low)}; --include-trust-c fits on them too): {', '.join(low)}")
    rows, dropped = usable_rows(every)
    if dropped:
        say(f"rows not used ({len(dropped)}):")
        for rid, why in dropped:
            say(f"  {rid:>4} {why}")
    if len(rows) < 2:
        raise InputError("--from-runs", args.from_runs,
                         f"needs at least 2 rows that can be predicted and have a measured "
                         f"tokens/s or step time; {len(rows)} of {len(every)} have"
                         + (" (the others are listed above)" if dropped else ""))
    names = default_names(rows)
    if not names:
        raise InputError("--from-runs", args.from_runs, "no constant of efficiency.py to fit")
    say(f"fitting {', '.join(names)} on {len(rows)} measured runs")
    # every fold is a fit of its own (each of them predicts the fold's training rows once per
    # trial value of each constant), then one fit on every row: minutes for a few hundred
    # rows of many sources, so the count is shown on stderr (progress.py's rules)
    n_fits = len(set(cv_folds(rows, args.folds)[0])) + 1
    with Progress("calibrate --from-runs: fits done (one per fold, then all rows)",
                  total=n_fits) as bar:
        before, after, how = cross_validate(rows, names, args.folds, progress=bar)
        consts = fit(rows, names)
        bar.advance()
    insample = [math.expm1(e) for e in log_errors(rows, consts)]
    say(f"tokens/s per GPU error (max(pred/meas, meas/pred) - 1), cross-validated {how}:")
    for label, xs in (("defaults", before), ("refitted (CV)", after), ("refitted (in-sample)",
                                                                      insample)):
        if xs:
            say(f"  {label:<22} median {statistics.median(xs):6.1%}   90th percentile "
                  f"{quantile(xs, 0.9):6.1%}   ({len(xs)} rows)")
    from .fit import _value

    for n in names:
        say(f"  {n:<36} {_value(n):.4g} -> {consts[n]:.4g}"
            + ("   (at its ceiling)" if n in at_ceiling(names, consts) else ""))
    if at_ceiling(names, consts):
        say("  a constant at its ceiling is a share of a peak (1 = all of it: the datasheet's, "
            "or the part's measured rate) and stopped there: the runs ask for at least that "
            "much, so what else they differ in from the model is left to the other constants")
    worse = statistics.median(after) >= statistics.median(before)
    if worse:
        say("the refit does not lower the cross-validated error: the defaults predict runs "
              "like these at least as well" + ("" if getattr(args, "force", False) else
                                               " (no profile written; --force writes it)"))
    if args.out and (not worse or getattr(args, "force", False)):
        meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "device": f"end-to-end fit on {Path(args.from_runs).name} ({len(rows)} runs)",
                "command": "meshplan " + " ".join(sys.argv[1:]),
                "cv_median_error_before": statistics.median(before) if before else -1.0,
                "cv_median_error_after": statistics.median(after) if after else -1.0}
        gens = {n.split(".")[1] for n in names if n.startswith("EFFICIENCY.")}
        if len(gens) == 1:
            meta["generation"] = gens.pop()
        from ..export.trace import atomic_write
        atomic_write(Path(args.out), profile.to_toml(meta, consts))  # whole or not at all
        say(f"wrote {args.out}")
    return 0
