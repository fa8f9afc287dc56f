"""Published training runs -> predictions -> error table.

Reads the schema of ``shared/validation/calibration.csv`` (runs_csv.py). Every knob a row
gives is pinned; the knobs it leaves blank (micro-batch, vpp, recompute, zero, ...) are
chosen by the search under the row's other settings and reported as ``chosen``. The
pipeline schedule is the one the row's framework runs for its vpp (1F1B, or interleaved
1F1B when vpp > 1): the engines in these sources had no zero-bubble schedules.

A row that cannot be predicted or scored (a blank required field, a fractional count, a
value that is not finite, an unknown GPU, ...) is listed with its reason and left out of
every statistic; the other rows are still scored.

Speed: searches are cached per (model, cluster, workload, pins) and the free search (the
search's own best plan, to compare with the published one) per (model, cluster, workload);
with ``jobs > 1`` rows sharing a free search go to the same worker process.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import (engine_spread, framework_defaults, ranking, runs_csv, uncertainty, validate_pools,
               verdict_lean)
from .cost import estimate
from .engines import framework_zeros
from .errors import InputError, require_choice
from .plan import MOE_DISPATCHERS, MULTI_CHUNK_SCHEDULES, SCHEDULES, Plan
from .recompute_modules import parse_modules
from .row_model import model_from_row
from .runs_csv import count, flag, measured, text
from .scenario import check_precision, make_cluster
from .workers import pool_map, worker_count
from .search.search import SearchResult, search
from .specs.workload import Workload

GiB = 2**30
ENGINE_SCHEDULES = framework_defaults.ENGINE_SCHEDULES
read_rows = runs_csv.read_rows


@dataclass
class RowResult:
    id: str
    trust: str
    model: str
    gpus: str
    measured_tokens_per_s_per_gpu: float | None = None
    measured_step_time_s: float | None = None
    measured_peak_mem_gib: float | None = None
    measured_oom: bool | None = None  # None: not read (the row failed before its oom column)
    measured_noise: float | None = None  # relative run-to-run noise (ranking.py)
    source: str = ""  # the source's key (source_key): the unit left out in leave-one-source-out
    source_text: str = ""  # the row's source cell as written
    layout_set: str = ""  # the optional `set` column: a published sweep (ranking.py)
    predicted_tokens_per_s_per_gpu: float | None = None
    predicted_step_time_s: float | None = None
    predicted_peak_mem_gib: float | None = None
    predicted_oom: bool | None = None
    predicted_may_not_fit: bool | None = None
    predicted_mfu: float | None = None
    tokens_p10_p90: tuple[float, float] | None = None
    step_time_p10_p90: tuple[float, float] | None = None
    peak_mem_p10_p90: tuple[float, float] | None = None
    throughput_class: str = ""
    memory_class: str = ""  # the memory residual class (uncertainty.memory_class_of)
    constants_var: float = 0.0  # the constants' share of the interval (log-scale variance)
    # (ln low, ln high) tokens/s of the blank MoE engine settings over the point's
    # (engine_spread.py): added to the interval's log bounds
    engine_spread: tuple[float, float] = (0.0, 0.0)
    plan: str = ""
    chosen: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    search_best_tokens_per_s_per_gpu: float | None = None
    search_best_plan: str = ""
    error: str | None = None

    @property
    def tokens_error(self) -> float | None:
        if self.predicted_tokens_per_s_per_gpu is None or not self.measured_tokens_per_s_per_gpu:
            return None
        return self.predicted_tokens_per_s_per_gpu / self.measured_tokens_per_s_per_gpu - 1

    @property
    def memory_error(self) -> float | None:
        if self.predicted_peak_mem_gib is None or not self.measured_peak_mem_gib:
            return None
        return self.predicted_peak_mem_gib / self.measured_peak_mem_gib - 1

    @property
    def tokens_residual(self) -> float | None:
        """ln(measured / predicted) tokens/s per GPU: what the interval model is fitted on."""
        e = self.tokens_error
        return None if e is None else -math.log1p(e)

    @property
    def memory_residual(self) -> float | None:
        e = self.memory_error
        return None if e is None else -math.log1p(e)

    def to_json(self) -> dict:
        return {
            "id": self.id, "trust": self.trust, "source": self.source_text or self.source,
            "source_key": self.source, "set": self.layout_set,
            "predicted_tokens_per_s_per_gpu": self.predicted_tokens_per_s_per_gpu,
            "predicted_tokens_per_s_per_gpu_p10_p90": self.tokens_p10_p90,
            "predicted_step_time_s": self.predicted_step_time_s,
            "predicted_step_time_s_p10_p90": self.step_time_p10_p90,
            "predicted_peak_mem_gib": self.predicted_peak_mem_gib,
            "predicted_peak_mem_gib_p10_p90": self.peak_mem_p10_p90,
            "predicted_oom": self.predicted_oom,
            "predicted_may_not_fit": self.predicted_may_not_fit,
            "predicted_mfu": self.predicted_mfu, "throughput_class": self.throughput_class,
            "memory_class": self.memory_class,
            "measured_tokens_per_s_per_gpu": self.measured_tokens_per_s_per_gpu,
            "measured_step_time_s": self.measured_step_time_s,
            "measured_peak_mem_gib": self.measured_peak_mem_gib,
            "measured_oom": self.measured_oom, "measured_noise": self.measured_noise,
            "tokens_error": self.tokens_error, "memory_error": self.memory_error,
            "plan": self.plan, "chosen": self.chosen, "notes": self.notes,
            "search_best_tokens_per_s_per_gpu": self.search_best_tokens_per_s_per_gpu,
            "search_best_plan": self.search_best_plan, "error": self.error,
        }


def source_key(source: str) -> str:
    """The document a row comes from ("torchtitan benchmarks llama3_h100_202412" for all of
    its tables): the unit left out in leave-one-source-out."""
    s = re.split(r"\s+\(|\s+Table\s+\d|,\s", source.strip(), maxsplit=1)[0].strip()
    return s or "(no source)"


def pins_from_row(row: dict) -> dict:
    pins: dict = {}
    for key in ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch"):
        v = count(row, key, minimum=1)
        if v is not None:
            pins[key] = v
    z = count(row, "zero", minimum=0)
    if z is not None:
        pins["zero"] = z
    sp = flag(row, "sequence_parallel")
    if sp is not None and pins.get("tp", 1) > 1:
        pins["sequence_parallel"] = sp
    rc = text(row, "recompute").lower()
    if rc:
        pins["recompute"] = rc
    # optional engine columns: the MoE token dispatcher, expert all-to-all overlap, and a
    # pipeline schedule other than the engine's (1F1B / interleaved), e.g. dualpipev
    disp = text(row, "moe_dispatcher").lower()
    if disp:
        pins["moe_dispatcher"] = require_choice("moe_dispatcher", disp, MOE_DISPATCHERS)
    epo = flag(row, "ep_overlap")
    if epo is not None:
        pins["ep_comm_overlap"] = epo
    ogr = flag(row, "overlap_grad_reduce")  # optional: 0 = gradients reduced after the backward
    if ogr is not None:
        pins["overlap_grad_reduce"] = ogr
    tpo = flag(row, "tp_comm_overlap")  # optional: TP communication overlapped (e.g. async TP)
    if tpo is not None and pins.get("tp", 1) > 1:
        pins["tp_comm_overlap"] = tpo
    sched = text(row, "schedule").lower()
    if sched and pins.get("pp", 1) > 1:
        pins["schedule"] = require_choice("schedule", sched, SCHEDULES)
    mods = text(row, "recompute_modules")  # optional: Megatron-Core modules recomputed
    if mods:
        pins["recompute_modules"] = parse_modules(mods)
        pins.setdefault("recompute", "selective")
    n_rc = count(row, "recompute_layers", minimum=0)  # optional: partial recomputation
    if n_rc:
        pins["recompute_layers"] = n_rc
        pins.setdefault("recompute", "full")
    if pins.get("pp", 1) > 1 and "schedule" not in pins:
        if "vpp" in pins:
            pins["schedule"] = "interleaved_1f1b" if pins["vpp"] > 1 else "1f1b"
        else:
            pins["schedules"] = ENGINE_SCHEDULES
    elif pins.get("pp", 1) == 1:
        pins.pop("vpp", None)
    return pins


@dataclass(frozen=True)
class Prepared:
    model: object
    cluster: object
    workload: Workload
    pins: tuple
    notes: tuple
    # the row names no schedule and its framework may run any (framework_defaults.py)
    schedule_open: bool = False
    # the dtype columns the row left blank (predicted at the framework's default; verdict_lean)
    optimizer_state_blank: bool = True
    grad_reduce_blank: bool = True

    @property
    def free_key(self) -> tuple:
        return (self.model, self.cluster, self.workload)


def prepare(row: dict) -> Prepared:
    """Everything a prediction needs from the row, checked (InputError names the field)."""
    model, notes = model_from_row(row)
    gpu = text(row, "gpu")
    if not gpu:
        raise InputError("gpu", "", "required (blank)")
    cluster = make_cluster(gpu=gpu, num_gpus=count(row, "num_gpus", required=True, minimum=1),
                           gpus_per_node=count(row, "gpus_per_node", minimum=1),
                           nic_gbps_per_gpu=runs_csv.number(row, "nic_gbps_per_gpu"))
    # a blank engine column is what the row's framework runs (framework_defaults.py): the
    # dtypes here, the FP8 recipe and attention kernel in the cost model, the plan knobs
    # (TP / EP overlap, dispatcher) in the search's plan defaults
    framework, note = framework_defaults.row_framework(text(row, "framework"))
    if note:
        notes.append(note)
    # blank: bf16, or fp16 on parts without bf16 tensor cores (as plan and predict); a
    # precision the GPU has no tensor cores for is refused, as plan and predict refuse it
    precision = (text(row, "precision")
                 or ("bf16" if "bf16" in cluster.gpu.peak_flops else "fp16")).lower()
    check_precision(precision, [cluster.gpu])
    workload = Workload(count(row, "seq_len", required=True, minimum=1),
                        count(row, "global_batch_seqs", required=True, minimum=1),
                        precision,
                        framework=framework,
                        compiled_loss=bool(flag(row, "compiled_loss")),  # optional columns
                        attention_full_ac=bool(flag(row, "attention_full_ac")),
                        attention_kernel=text(row, "attention_kernel"),
                        norm_kernel=text(row, "norm_kernel"),
                        cuda_graph=text(row, "cuda_graph"),
                        fp8_recipe=text(row, "fp8_recipe") or "",
                        fp8_param_gather=bool(flag(row, "fp8_param_gather")),
                        ddp_bucket_size=count(row, "ddp_bucket_size", minimum=0) or 0,
                        # optional engine columns: the optimizer's state dtype and the
                        # gradient buffer's dtype (specs/workload.py)
                        optimizer_state_precision=(
                            text(row, "optimizer_state_precision")
                            or framework_defaults.optimizer_state_precision(framework)).lower(),
                        grad_reduce_dtype=(text(row, "grad_reduce_dtype")
                                           or framework_defaults.grad_reduce_dtype(framework)
                                           ).lower())
    pins = pins_from_row(row)
    return Prepared(model, cluster, workload, tuple(sorted(pins.items())), tuple(notes),
                    schedule_open=(not text(row, "schedule")
                                   and framework_defaults.schedule_open(framework)),
                    optimizer_state_blank=not text(row, "optimizer_state_precision"),
                    grad_reduce_blank=not text(row, "grad_reduce_dtype"))


# how far a row's measured step time and tokens/s may disagree before a note says so (the
# step time of a published run is often rounded, or includes a little logging)
STEP_TOKENS_TOLERANCE = 0.05


def measured_tokens(tps: float | None, step_s: float | None, tokens_per_step: int,
                    num_gpus: int) -> tuple[float | None, str]:
    """(measured tokens/s per GPU, a note or ""): the column where the row gives it, else
    tokens per step / step time / GPUs. The one place tokens/s comes from a step time
    (validate and calibrate --from-runs both score this); a row whose two figures disagree
    by more than STEP_TOKENS_TOLERANCE keeps its tokens/s and says so."""
    if step_s is None:
        return tps, ""
    derived = tokens_per_step / step_s / num_gpus
    if tps is None:
        return derived, (f"measured tokens/s per GPU {derived:,.1f} from measured_step_time_s="
                         f"{step_s:g} ({tokens_per_step:,} tokens per step on {num_gpus} GPUs)")
    if abs(derived / tps - 1) > STEP_TOKENS_TOLERANCE:
        return tps, (f"measured_step_time_s={step_s:g} gives {derived:,.1f} tokens/s per GPU, "
                     f"{derived / tps - 1:+.1%} from measured_tokens_per_s_per_gpu={tps:g} "
                     "(the tokens/s is scored)")
    return tps, ""


def _whole(v: str) -> str:
    """'8.0' as '8' (a count the reader accepts as whole), anything else as given."""
    try:
        x = float(v)
    except ValueError:
        return v
    return str(int(x)) if x.is_integer() else v


def _new_result(row: dict) -> RowResult:
    return RowResult(id=text(row, "id"), trust=text(row, "trust").upper(), model=text(row, "model"),
                     gpus=f"{_whole(text(row, 'num_gpus'))}x{text(row, 'gpu')}",
                     source=source_key(text(row, "source")), source_text=text(row, "source"),
                     layout_set=text(row, "set"))


def predict_row(row: dict, with_search_best: bool = True, cache: dict | None = None,
                residuals: dict | None = None) -> RowResult:
    res = _new_result(row)
    cache = {} if cache is None else cache
    try:
        if row.get(runs_csv.EXTRA_FIELDS):  # its cells are not where the header says
            raise InputError("row", res.id, row[runs_csv.EXTRA_FIELDS])
        res.measured_tokens_per_s_per_gpu = measured(row, "measured_tokens_per_s_per_gpu")
        res.measured_step_time_s = measured(row, "measured_step_time_s")
        res.measured_peak_mem_gib = measured(row, "measured_peak_mem_gib")
        # a blank oom cell: the run ran where something was measured, else unknown (None:
        # the row holds no out-of-memory verdict to agree with)
        oom = flag(row, "oom")
        res.measured_oom = oom if oom is not None else (
            False if any(x is not None for x in (res.measured_tokens_per_s_per_gpu,
                                                 res.measured_step_time_s,
                                                 res.measured_peak_mem_gib)) else None)
        res.measured_noise = runs_csv.number(row, "measured_noise")
        if res.measured_noise is not None and not 0 <= res.measured_noise < 1:
            raise InputError("measured_noise", res.measured_noise,
                             "a relative standard deviation in [0, 1)")
        if validate_pools.is_pool_row(row):  # mixed GPU pools: validate_pools.py
            validate_pools.fill_pool_prediction(res, row, with_search_best, cache, residuals)
            return res
        prep = prepare(row)
        res.notes = list(prep.notes)
        res.measured_tokens_per_s_per_gpu, note = measured_tokens(
            res.measured_tokens_per_s_per_gpu, res.measured_step_time_s,
            prep.workload.tokens_per_step, prep.cluster.num_gpus)
        if note:
            res.notes.append(note)
        if res.measured_oom and res.measured_tokens_per_s_per_gpu is not None:
            res.notes.append("oom=1 with a measured tokens/s per GPU: a run that went out of "
                             "memory reports a throughput; both are kept (check the row)")
        if res.measured_oom and res.measured_peak_mem_gib is not None:
            res.notes.append("oom=1 with a measured peak memory: the peak of a run that went "
                             "out of memory is where it stopped, a lower bound of what it "
                             "needed; scored as given (check the row)")
        if res.trust not in runs_csv.TRUST_GRADES:  # predicted, but not counted among A/B
            res.notes.append(f"trust {res.trust!r} is not a grade the schema names (A, B, C): "
                             "not counted among the A/B rows")
        workload = _fill_prediction(res, prep, cache, residuals)
        note = _cluster_tokens_note(res, prep.cluster.num_gpus)
        if note:
            res.notes.append(note)
        if with_search_best:
            # at the dtypes the row's plan was predicted with (the lean ones where the row
            # leaves them blank and only they let its faster plan fit), so the two compare
            key = ("free", prep.model, prep.cluster, workload)
            if key not in cache:
                free = search(prep.model, prep.cluster, workload, {}, top_k=1, rerank_k=1)
                cache[key] = ((free.best.tokens_per_s_per_gpu, free.best.plan.describe())
                              if free.best is not None else (None, ""))
            res.search_best_tokens_per_s_per_gpu, res.search_best_plan = cache[key]
    except InputError as e:
        res.error = str(e)
        _clear_prediction(res)
    except (ArithmeticError, ValueError, KeyError, AssertionError) as e:  # a bug, not the row's
        res.error = f"internal error ({type(e).__name__}: {e}); please report this row"
        _clear_prediction(res)
    return res


def _cluster_tokens_note(res: RowResult, num_gpus: int) -> str:
    """A note when the measured tokens/s per GPU reads like the whole cluster's: above the
    prediction's 90th percentile, while that figure over the GPUs falls inside its 10-90%
    interval (the row is scored as given; the note says what to check)."""
    m, iv = res.measured_tokens_per_s_per_gpu, res.tokens_p10_p90
    if m is None or iv is None or num_gpus < 2 or res.measured_step_time_s is not None:
        return ""
    if m > iv[1] and iv[0] <= m / num_gpus <= iv[1]:
        ratio = m / res.predicted_tokens_per_s_per_gpu
        return (f"measured_tokens_per_s_per_gpu={m:g} is {ratio:.1f}x the prediction; over "
                f"the {num_gpus} GPUs it would be {m / num_gpus:,.1f} per GPU, inside the "
                "10-90% interval: is it the whole cluster's tokens/s? (scored as given)")
    return ""


def _clear_prediction(res: RowResult) -> None:
    for k in ("predicted_tokens_per_s_per_gpu", "predicted_step_time_s",
              "predicted_peak_mem_gib", "predicted_oom", "predicted_may_not_fit",
              "predicted_mfu", "tokens_p10_p90", "step_time_p10_p90", "peak_mem_p10_p90"):
        setattr(res, k, None)


def _pinned_search(prep: Prepared, pins: dict) -> tuple:
    """The search under the row's pins. A row of a framework whose schedule is not known
    (framework_defaults.schedule_open) that names no schedule but whose stated layout the
    engine schedule cannot run (e.g. 120 micro-batches on pp=16 with interleaving) ran
    some other schedule: the schedules that run its vpp are searched instead (noted).
    Returns (search result, the pins searched, a note or "")."""
    sched = pins.get("schedule")
    open_ = prep.schedule_open and sched in ENGINE_SCHEDULES and pins.get("pp", 1) > 1
    first: SearchResult | InputError
    try:
        first = search(prep.model, prep.cluster, prep.workload, pins, top_k=1, rerank_k=5)
        if first.best is not None or not open_:
            return first, pins, ""
        why = "no plan of it runs and fits"
    except InputError as e:
        if not open_:
            raise
        first, why = e, str(e)
    multi = pins.get("vpp", 1) > 1 or sched != "1f1b"
    alt = dict(pins, schedules=tuple(s for s in SCHEDULES if s != sched
                                     and (s in MULTI_CHUNK_SCHEDULES) == multi))
    alt.pop("schedule")
    r = search(prep.model, prep.cluster, prep.workload, alt, top_k=1, rerank_k=5)
    if r.best is None:  # no schedule runs it: the engine schedule's answer stands
        if isinstance(first, InputError):
            raise first
        return first, pins, ""
    return r, alt, (f"schedule: {sched} cannot run the stated layout ({why}); searched "
                    f"{', '.join(alt['schedules'])}")


def _lean_search(prep: Prepared, pins: dict, r: SearchResult):
    """The pinned search again with the engine's lean dtypes in the row's blank dtype columns
    (verdict_lean.py), when that lets a faster plan, or any plan, fit: a blank dtype column
    is a free knob only where it changes what fits. Returns (prepared, result) or None."""
    if not (prep.optimizer_state_blank or prep.grad_reduce_blank):
        return None
    zero = pins.get("zero", r.best.plan.zero if r.best is not None else 3)
    lean = verdict_lean.lean_workload(prep.workload, zero, prep.optimizer_state_blank,
                                      prep.grad_reduce_blank)
    if lean is None:
        return None
    lp = replace(prep, workload=lean)
    try:
        rl, _, _ = _pinned_search(lp, dict(pins))
    except InputError:
        return None
    if rl.best is None:
        return None
    if r.best is not None and (rl.best.plan == r.best.plan
                               or rl.best.tokens_per_s_per_gpu <= r.best.tokens_per_s_per_gpu):
        return None
    return lp, rl


def _fill_prediction(res: RowResult, prep: Prepared, cache: dict, residuals) -> Workload:
    """Fill ``res`` with the row's prediction; returns the workload it was predicted at
    (the row's, or the same with the engine's lean dtypes: verdict_lean.py)."""
    pins = dict(prep.pins)
    # the blank dtype columns are part of the key: a row that states its dtypes is not
    # predicted with the lean ones a row leaving them blank may get (verdict_lean.py)
    key = ("pinned", prep.free_key, prep.pins, prep.optimizer_state_blank,
           prep.grad_reduce_blank)
    if key not in cache:
        r, pins, note = _pinned_search(prep, pins)
        lean = _lean_search(prep, pins, r)
        cache[("lean",) + key] = lean is not None and r.best is None
        if lean is not None:
            prep_l, r = lean
            cache[("workload",) + key] = prep_l.workload
            note = "; ".join(x for x in (note, (
                f"dtypes: {r.best.plan.describe()} fits only with the engine's lean dtypes "
                f"(optimizer states {prep_l.workload.optimizer_state_precision}, gradients "
                f"{prep_l.workload.grad_reduce_dtype}; the row leaves them blank)")) if x)
        cache[("note",) + key] = note
        if r.best is None:  # nothing fits: report the leanest plan the engine runs
            leanest_zero = max(framework_zeros(prep.workload.framework) or (3,))
            lean = dict(pins, zero=pins.get("zero", leanest_zero),
                        recompute=pins.get("recompute", "full"))
            lean.pop("schedules", None)
            fill = {"micro_batch": 1, "vpp": 1, **framework_defaults.plan_defaults(
                prep.workload.framework, pins.get("tp", 1), prep.cluster.scaleup_domain,
                prep.model.is_moe, prep.model.name, prep.cluster.gpu.name,
                prep.workload.precision, prep.workload.fp8_recipe)}
            try:
                cache[key] = estimate(prep.model, prep.cluster, prep.workload,
                                      Plan(**{**fill, **lean}))
            except InputError:  # e.g. micro-batch 1 breaks the schedule's micro-batch rule
                if r.closest is None:
                    raise
                cache[key] = r.closest  # the search's leanest plan that did not fit
        else:
            cache[key] = r.best
    est = cache[key]
    if cache.get(("note",) + key):
        res.notes.append(cache[("note",) + key])
    res.predicted_tokens_per_s_per_gpu = est.tokens_per_s_per_gpu
    res.predicted_step_time_s = est.step_time_s
    res.predicted_peak_mem_gib = est.peak_reserved_bytes / GiB
    res.predicted_oom = not est.fits
    res.predicted_mfu = est.mfu
    res.plan = est.plan.describe()
    # every knob the row leaves to the search, the degrees included (a row giving tp and dp
    # on more GPUs than tp x dp gets cp or pp from the search: it is said here)
    res.chosen = {k: getattr(est.plan, k) for k in
                  ("dp", "tp", "pp", "cp", "ep", "etp", "micro_batch", "vpp", "schedule",
                   "recompute", "recompute_modules", "recompute_layers", "zero",
                   "sequence_parallel", "tp_comm_overlap") if k not in pins}
    data = residuals or uncertainty.load()
    iv = uncertainty.interval(est, prep.model, prep.cluster, data, prep.workload.framework)
    # MoE engine knobs the row leaves blank: the union of the intervals around every setting
    # its framework may have run (engine_spread.py); the point prediction is unchanged
    skey = ("spread",) + key
    if skey not in cache:
        blank = engine_spread.blank_knobs({k for k, _ in prep.pins}, prep.workload.framework)
        cache[skey] = engine_spread.spread(est, prep.model, prep.cluster, prep.workload, blank)
    res.engine_spread = cache[skey].log_bounds
    iv = engine_spread.widen(iv, cache[skey])
    res.tokens_p10_p90 = iv.tokens_per_s_per_gpu
    res.step_time_p10_p90 = iv.step_time_s
    lo, hi = iv.memory_factors
    pm = res.predicted_peak_mem_gib
    res.peak_mem_p10_p90 = (pm * lo, uncertainty.peak_p90_gib(pm, hi, iv.capacity_gib,
                                                             iv.held_p90_gib or 0.0))
    res.predicted_may_not_fit = est.fits and (iv.may_not_fit or cache[("lean",) + key])
    if res.predicted_oom and verdict_lean.fits_only_lean(
            est, prep.model, prep.cluster, prep.workload, prep.optimizer_state_blank,
            prep.grad_reduce_blank):
        # only the engine's lean dtypes, which the row does not rule out, make it fit
        res.predicted_oom, res.predicted_may_not_fit = False, True
        res.notes.append("may not fit: fits only with the engine's lean dtypes "
                         "(optimizer_state_precision / grad_reduce_dtype left blank)")
    res.throughput_class = iv.throughput_class
    res.memory_class = iv.memory_class
    res.constants_var = uncertainty.constants_var(data, est.step_time.parts)
    return cache.get(("workload",) + key, prep.workload)


def quantile(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``xs``: linear interpolation between order statistics
    (numpy's default), the one rule of the accuracy figures (validate, calibrate --from-runs,
    bench/accuracy_table.py)."""
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _inside(x: float | None, iv) -> bool | None:
    if x is None or iv is None:
        return None
    return iv[0] <= x <= iv[1]


def loso_coverage(results: list[RowResult], residuals: dict | None = None) -> dict:
    """Interval coverage when the residual model is refitted without each source: the
    honest coverage of the class intervals on this file (tokens/s per GPU). A source with no
    other source's rows to learn from is not scored (None when none is), as in
    loso_memory_coverage."""
    data = residuals or uncertainty.load()
    between = data["meta"].get("between_generation_sigma", 0.0)
    scored = [r for r in results if r.error is None and r.tokens_residual is not None]
    per_source: dict[str, list[bool]] = {}
    for src in sorted({r.source for r in scored}):
        train = [(r.throughput_class, r.tokens_residual) for r in scored if r.source != src]
        if not train:
            continue
        stats = uncertainty.fit_stats(train)
        for r in scored:
            if r.source != src:
                continue
            mu, var = uncertainty.class_var(stats, r.throughput_class, between)
            sd = math.sqrt(var + r.constants_var)
            z = uncertainty.Z90
            # a spread toward lower tokens/s (lo < 0) lets the residual ln(measured /
            # predicted) reach further down, and the other way
            lo, hi = r.engine_spread
            per_source.setdefault(src, []).append(
                mu - z * sd + lo <= r.tokens_residual <= mu + z * sd + hi)
    flat = [x for xs in per_source.values() for x in xs]
    return {"rows": len(flat), "coverage": (sum(flat) / len(flat)) if flat else None,
            "per_source": {s: sum(xs) / len(xs) for s, xs in per_source.items()}}


def loso_memory_coverage(results: list[RowResult]) -> dict:
    """Peak-memory interval coverage with the memory residual model refitted on this file's
    other sources for each source (uncertainty.memory_terms' classes, shrinkage and
    between-engine widening). A source with no other source's memory rows to learn from
    is not scored (None when none is)."""
    scored = [r for r in results if r.error is None and r.memory_residual is not None
              and r.memory_class]
    per_source: dict[str, list[bool]] = {}
    for src in sorted({r.source for r in scored}):
        train = [(r.memory_class, r.memory_residual) for r in scored if r.source != src]
        if not train:
            continue
        data = {"memory": uncertainty.fit_stats(train),
                "meta": {"between_engine_memory_sigma": uncertainty.between_sigma(train)}}
        for r in scored:
            if r.source == src:
                eng, gen = r.memory_class.split("/", 1)
                mu, sd, _ = uncertainty.memory_terms(data, eng, gen)
                z = uncertainty.Z90
                per_source.setdefault(src, []).append(
                    mu - z * sd <= r.memory_residual <= mu + z * sd)
    flat = [x for xs in per_source.values() for x in xs]
    return {"rows": len(flat), "coverage": (sum(flat) / len(flat)) if flat else None,
            "per_source": {s: sum(xs) / len(xs) for s, xs in per_source.items()}}


def summarize(results: list[RowResult], residuals: dict | None = None) -> dict:
    ok = [r for r in results if r.error is None]
    ab = [r for r in ok if runs_csv.counted(r.trust, "AB")]
    tok = [abs(r.tokens_error) for r in ab if r.tokens_error is not None]
    mem = [abs(r.memory_error) for r in ab if r.memory_error is not None]
    mem_all = [abs(r.memory_error) for r in ok if r.memory_error is not None]
    beats = [r for r in ok if r.search_best_tokens_per_s_per_gpu is not None
             and r.predicted_tokens_per_s_per_gpu is not None]
    tin = [_inside(r.measured_tokens_per_s_per_gpu, r.tokens_p10_p90) for r in ok]
    tin = [x for x in tin if x is not None]
    min_ = [_inside(r.measured_peak_mem_gib, r.peak_mem_p10_p90) for r in ok]
    min_ = [x for x in min_ if x is not None]
    per_source: dict[str, dict] = {}
    for src in sorted({r.source for r in ok}):
        errs = [abs(r.tokens_error) for r in ok if r.source == src and r.tokens_error is not None]
        if errs:
            per_source[src] = {"rows": len(errs), "tokens_median_abs_error": statistics.median(errs)}
    loso = loso_coverage(results, residuals)
    mloso = loso_memory_coverage(results)
    for src, cov in loso["per_source"].items():
        per_source.setdefault(src, {})["loso_interval_coverage"] = cov
    oom_rows = [r for r in ok if r.predicted_oom is not None and r.measured_oom is not None]
    return {
        "rows": len(results),
        "predicted": len(ok),
        "errors": len(results) - len(ok),
        "failed_rows": [{"id": r.id, "error": r.error} for r in results if r.error],
        "tokens_rows_trust_ab": len(tok),
        "tokens_median_abs_error": statistics.median(tok) if tok else None,
        "tokens_p90_abs_error": quantile(tok, 0.9) if tok else None,
        "memory_rows_trust_ab": len(mem),
        "memory_median_abs_error": statistics.median(mem) if mem else None,
        "memory_p90_abs_error": quantile(mem, 0.9) if mem else None,
        "memory_rows_all": len(mem_all),
        "memory_median_abs_error_all": statistics.median(mem_all) if mem_all else None,
        "memory_p90_abs_error_all": quantile(mem_all, 0.9) if mem_all else None,
        "tokens_interval_rows": len(tin),
        "tokens_interval_coverage": sum(tin) / len(tin) if tin else None,
        "memory_interval_rows": len(min_),
        "memory_interval_coverage": sum(min_) / len(min_) if min_ else None,
        "tokens_interval_coverage_loso": loso["coverage"],
        "memory_interval_coverage_loso": mloso["coverage"],
        "memory_interval_rows_loso": mloso["rows"],
        "oom_rows": len(oom_rows),
        "oom_rows_agreeing": sum(r.predicted_oom == r.measured_oom for r in oom_rows),
        "oom_measured": sum(r.measured_oom for r in oom_rows),
        "oom_flagged": sum(r.measured_oom and (r.predicted_oom or bool(r.predicted_may_not_fit))
                           for r in oom_rows),
        "may_not_fit": sum(bool(r.predicted_may_not_fit) for r in ok),
        "search_at_least_as_fast": sum(
            r.search_best_tokens_per_s_per_gpu >= r.predicted_tokens_per_s_per_gpu * (1 - 1e-9)
            for r in beats),
        "search_compared": len(beats),
        "per_source": per_source,
        "ranking": ranking.set_report(ok),
    }


def _work(args):
    rows, with_search_best, residuals = args
    cache: dict = {}
    return [(i, predict_row(r, with_search_best, cache, residuals)) for i, r in rows]


def _group_key(row: dict):
    try:
        return prepare(row).free_key
    except (InputError, ArithmeticError, ValueError, KeyError, AssertionError):
        return None  # predict_row reports it


def predict_rows(rows: list[dict], with_search_best: bool = True, jobs: int = 1,
                 residuals: dict | None = None) -> list[RowResult]:
    """Predict every row; ``jobs`` worker processes (0: one per CPU), rows that share a
    (model, cluster, workload) in the same worker so its searches are done once."""
    if worker_count(jobs, len(rows)) <= 1:
        return [r for _, r in _work((list(enumerate(rows)), with_search_best, residuals))]
    groups: dict = {}
    for i, r in enumerate(rows):
        groups.setdefault(_group_key(r) or ("row", i), []).append((i, r))
    tasks = sorted(groups.values(), key=len, reverse=True)
    out: list = [None] * len(rows)
    for part in pool_map(_work, [((t, with_search_best, residuals),) for t in tasks], jobs):
        for i, res in part:
            out[i] = res
    return out


def validate(path: str | Path, with_search_best: bool = True, jobs: int = 1,
             residuals: dict | None = None) -> tuple[list[RowResult], dict]:
    rows, header = runs_csv.read_rows_and_header(path)
    results = predict_rows(rows, with_search_best, jobs, residuals)
    summary = summarize(results, residuals)
    summary["columns_not_read"] = [{"column": c, "did_you_mean": m}
                                   for c, m in runs_csv.unread_measured_columns(header)]
    # an id shared by several rows (each is still predicted and scored): what joins the
    # report to the file, and what a pool row's baseline_id names, is ambiguous
    summary["duplicate_ids"] = runs_csv.duplicate_ids(r.id for r in results)
    if any(validate_pools.is_pool_row(r) for r in rows):
        summary["pools"] = validate_pools.summary(rows, results)
    return results, summary
