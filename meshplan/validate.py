"""Published training runs -> predictions -> error table.

Reads the schema of ``shared/validation/calibration.csv`` (its README): columns in any
order, a missing optional column is blank, unknown columns are ignored. Every knob a row
gives is pinned; the knobs it leaves blank (micro-batch, vpp, recompute, zero, ...) are
chosen by the search under the row's other settings and reported as ``chosen``. The
pipeline schedule is the one the row's framework runs for its vpp (1F1B, or interleaved
1F1B when vpp > 1): the engines in these sources had no zero-bubble schedules.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from .cost import estimate
from .errors import InputError
from .plan import Plan
from .scenario import make_cluster
from .search.search import search
from .specs.model import ModelSpec
from .specs.workload import Workload

GiB = 2**30
ENGINE_SCHEDULES = ("1f1b", "interleaved_1f1b")


@dataclass
class RowResult:
    id: str
    trust: str
    model: str
    gpus: str
    measured_tokens_per_s_per_gpu: float | None
    measured_step_time_s: float | None
    measured_peak_mem_gib: float | None
    measured_oom: bool
    predicted_tokens_per_s_per_gpu: float | None = None
    predicted_step_time_s: float | None = None
    predicted_peak_mem_gib: float | None = None
    predicted_oom: bool | None = None
    predicted_mfu: float | None = None
    plan: str = ""
    chosen: dict = field(default_factory=dict)
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

    def to_json(self) -> dict:
        return {
            "id": self.id, "trust": self.trust,
            "predicted_tokens_per_s_per_gpu": self.predicted_tokens_per_s_per_gpu,
            "predicted_step_time_s": self.predicted_step_time_s,
            "predicted_peak_mem_gib": self.predicted_peak_mem_gib,
            "predicted_oom": self.predicted_oom, "predicted_mfu": self.predicted_mfu,
            "measured_tokens_per_s_per_gpu": self.measured_tokens_per_s_per_gpu,
            "measured_peak_mem_gib": self.measured_peak_mem_gib,
            "tokens_error": self.tokens_error, "memory_error": self.memory_error,
            "plan": self.plan, "chosen": self.chosen,
            "search_best_tokens_per_s_per_gpu": self.search_best_tokens_per_s_per_gpu,
            "search_best_plan": self.search_best_plan, "error": self.error,
        }


def _num(row: dict, key: str, kind=float):
    v = (row.get(key) or "").strip()
    if v == "":
        return None
    try:
        x = float(v)
    except ValueError:
        raise InputError(key, v, "must be a number") from None
    return int(x) if kind is int else x


def model_from_row(row: dict) -> ModelSpec:
    moe = (row.get("arch") or "").strip().lower() == "moe"
    attn = (row.get("attention") or "").strip().lower()
    if attn == "mla":
        raise InputError("attention", "mla", "MLA rows need q/kv low-rank dims the CSV does not have")
    kw = dict(
        name=(row.get("model") or "row").strip(),
        layers=_num(row, "layers", int), hidden=_num(row, "hidden", int),
        heads=_num(row, "heads", int), kv_heads=_num(row, "kv_heads", int) or _num(row, "heads", int),
        head_dim=_num(row, "head_dim", int) or 0,  # optional column (Qwen3: 128 != hidden/heads)
        ffn=_num(row, "ffn", int) or 0, vocab=_num(row, "vocab", int),
        mlp=(row.get("mlp") or "swiglu").strip().lower(),
        tied_embeddings=bool(_num(row, "tied_embeddings", int) or 0),
    )
    for k in ("layers", "hidden", "heads", "vocab"):
        if kw[k] is None:
            raise InputError(k, "", "required for a prediction")
    if moe:
        kw.update(moe_experts=_num(row, "moe_experts", int) or 0,
                  moe_topk=_num(row, "moe_topk", int) or 0,
                  moe_expert_ffn=_num(row, "moe_expert_ffn", int) or 0,
                  moe_shared_experts=_num(row, "moe_shared_experts", int) or 0,
                  moe_dense_layers=_num(row, "moe_dense_layers", int) or 0)
    return ModelSpec(**kw)


def pins_from_row(row: dict) -> dict:
    pins: dict = {}
    for col, key in (("tp", "tp"), ("pp", "pp"), ("dp", "dp"), ("cp", "cp"), ("ep", "ep"),
                     ("etp", "etp"), ("zero", "zero"), ("vpp", "vpp"),
                     ("micro_batch", "micro_batch")):
        v = _num(row, col, int)
        if v is not None:
            pins[key] = v
    sp = _num(row, "sequence_parallel", int)
    if sp is not None and pins.get("tp", 1) > 1:
        pins["sequence_parallel"] = bool(sp)
    rc = (row.get("recompute") or "").strip().lower()
    if rc:
        pins["recompute"] = rc
    if pins.get("pp", 1) > 1:
        if "vpp" in pins:
            pins["schedule"] = "interleaved_1f1b" if pins["vpp"] > 1 else "1f1b"
        else:
            pins["schedules"] = ENGINE_SCHEDULES
    else:
        pins.pop("vpp", None)
    return pins


def predict_row(row: dict, with_search_best: bool = True) -> RowResult:
    res = RowResult(
        id=str(row.get("id", "")).strip(), trust=(row.get("trust") or "").strip(),
        model=(row.get("model") or "").strip(),
        gpus=f"{row.get('num_gpus', '')}x{row.get('gpu', '')}",
        measured_tokens_per_s_per_gpu=_safe(row, "measured_tokens_per_s_per_gpu"),
        measured_step_time_s=_safe(row, "measured_step_time_s"),
        measured_peak_mem_gib=_safe(row, "measured_peak_mem_gib"),
        measured_oom=bool(_safe(row, "oom") or 0))
    try:
        model = model_from_row(row)
        cluster = make_cluster(gpu=(row.get("gpu") or "").strip(),
                               num_gpus=_num(row, "num_gpus", int),
                               gpus_per_node=_num(row, "gpus_per_node", int),
                               nic_gbps_per_gpu=_num(row, "nic_gbps_per_gpu"))
        workload = Workload(_num(row, "seq_len", int), _num(row, "global_batch_seqs", int),
                            (row.get("precision") or "bf16").strip().lower(),
                            framework=(row.get("framework") or "").strip().lower())
        pins = pins_from_row(row)
        r = search(model, cluster, workload, pins, top_k=1, rerank_k=5)
        if r.best is None:  # nothing fits: report the leanest plan's numbers
            lean = dict(pins, zero=pins.get("zero", 3), recompute=pins.get("recompute", "full"))
            lean.pop("schedules", None)
            fill = {"micro_batch": 1, "vpp": 1}
            est = estimate(model, cluster, workload, Plan(**{**fill, **lean}))
        else:
            est = r.best
        res.predicted_tokens_per_s_per_gpu = est.tokens_per_s_per_gpu
        res.predicted_step_time_s = est.step_time_s
        res.predicted_peak_mem_gib = est.peak_reserved_bytes / GiB
        res.predicted_oom = not est.fits
        res.predicted_mfu = est.mfu
        res.plan = est.plan.describe()
        res.chosen = {k: getattr(est.plan, k) for k in
                      ("micro_batch", "vpp", "schedule", "recompute", "zero", "sequence_parallel",
                       "tp_comm_overlap") if k not in pins}
        if with_search_best:
            free = search(model, cluster, workload, {}, top_k=1, rerank_k=1)
            if free.best is not None:
                res.search_best_tokens_per_s_per_gpu = free.best.tokens_per_s_per_gpu
                res.search_best_plan = free.best.plan.describe()
    except InputError as e:
        res.error = str(e)
    return res


def _safe(row: dict, key: str) -> float | None:
    try:
        return _num(row, key)
    except InputError:
        return None


def read_rows(path: str | Path) -> list[dict]:
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise InputError("csv", str(path), f"cannot read ({e.strerror})") from None
    except csv.Error as e:
        raise InputError("csv", str(path), f"malformed CSV ({e})") from None
    if not rows:
        raise InputError("csv", str(path), "has no data rows")
    need = {"gpu", "num_gpus", "layers", "hidden", "seq_len", "global_batch_seqs"}
    missing = need - set(rows[0])
    if missing:
        raise InputError("csv", str(path), "missing columns: " + ", ".join(sorted(missing)))
    return rows


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(results: list[RowResult]) -> dict:
    ab = [r for r in results if r.trust in ("A", "B")]
    tok = [abs(r.tokens_error) for r in ab if r.tokens_error is not None]
    mem = [abs(r.memory_error) for r in ab if r.memory_error is not None]
    beats = [r for r in results if r.search_best_tokens_per_s_per_gpu is not None
             and r.predicted_tokens_per_s_per_gpu is not None]
    return {
        "rows": len(results),
        "predicted": sum(r.error is None for r in results),
        "errors": sum(r.error is not None for r in results),
        "tokens_rows_trust_ab": len(tok),
        "tokens_median_abs_error": statistics.median(tok) if tok else None,
        "tokens_p90_abs_error": _pct(tok, 0.9) if tok else None,
        "memory_rows_trust_ab": len(mem),
        "memory_median_abs_error": statistics.median(mem) if mem else None,
        "memory_p90_abs_error": _pct(mem, 0.9) if mem else None,
        "oom_rows_agreeing": sum(r.predicted_oom == r.measured_oom for r in results
                                 if r.predicted_oom is not None),
        "search_at_least_as_fast": sum(
            r.search_best_tokens_per_s_per_gpu >= r.predicted_tokens_per_s_per_gpu * (1 - 1e-9)
            for r in beats),
        "search_compared": len(beats),
    }


def validate(path: str | Path, with_search_best: bool = True) -> tuple[list[RowResult], dict]:
    rows = read_rows(path)
    results = [predict_row(r, with_search_best) for r in rows]
    return results, summarize(results)
