"""Published runs on clusters of pools (mixed GPU types) -> predictions -> errors.

A runs-CSV row is a *pool row* when its ``gpu`` column holds pools in the ``--gpus`` syntax
(``8xRTX-3090-24GB+16xRTX-2080-Ti-11GB``; ``num_gpus`` is then the sum of the pool counts).
The published plan is given by the usual degree columns (tp, pp, dp, micro_batch, zero,
recompute, sequence_parallel) and by these columns (blank where they do not apply):

| column | meaning |
|---|---|
| pool_plan | ``pipeline``: stages on different pools (Metis, HexiScale, Sailor); ``data``: replicas of one layout on different pools (Cephalo, Whale, Sailor) |
| stage_pools | pipeline: the GPU type of each stage, comma-separated, first stage first |
| layer_split | pipeline: transformer layers per stage, ``4/7/7/6`` (blank: even) |
| pool_replicas | data: replicas per GPU type, ``RTX-3090-24GB:1,TITAN-RTX-24GB:2`` (sums to dp) |
| pool_batch | data: sequences per replica per GPU type, same syntax (blank: the batch split evenly) |
| inter_pool_gbps | the link between pools, Gb/s per GPU one way (blank: the slowest pool's NIC) |
| nic_gbps_per_gpu | as in any row (one figure for every pool), or one per pool: ``RTX-3090-24GB:0.116,TITAN-RTX-24GB:2.86`` |
| baseline_id | a row of the same file this row's throughput is compared with (a ratio) |
| measured_speedup | the ratio a source prints (this row's throughput / the baseline's) when it prints no throughput; blank: the ratio of the two rows' measured tokens/s |

The prediction is the heterogeneous cost model's (cost/hetero.py) for exactly that plan;
its interval is the residual model's interval of the widest pool, applied to the pool
plan's throughput. With ``--search-best`` the pool search (search/hetero.py) runs on the
row's cluster and workload; its best plan's total throughput (which may leave a pool out)
is reported per GPU of the row's cluster, so it compares with the published plan's.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from . import uncertainty
from .cost.hetero import (UnevenPlan, data_across_pools, pipeline_across_pools,
                          pool_estimates)
from .errors import InputError
from .framework_defaults import row_framework
from .plan import Plan
from .row_model import model_from_row
from .runs_csv import count, flag, measured, number, text
from .scenario import make_pools
from .specs.pools import PoolCluster
from .specs.workload import Workload

GiB = 2**30
KINDS = ("pipeline", "data")


def is_pool_row(row: dict) -> bool:
    return "+" in text(row, "gpu") or bool(text(row, "pool_plan"))


@dataclass(frozen=True)
class PoolRow:
    model: object
    pools: PoolCluster
    workload: Workload
    kind: str
    plan: Plan
    stage_pools: tuple = ()  # pipeline: pool index of each stage
    replicas: tuple = ()  # data: ((pool index, replicas), ...)
    batch: tuple = ()  # data: ((pool index, sequences per replica), ...)
    notes: tuple = ()

    @property
    def free_key(self) -> tuple:
        return (self.model, self.pools, self.workload)


def _pool_index(pc: PoolCluster, field: str, name: str) -> int:
    names = [p.name for p in pc.pools]
    low = {n.lower(): i for i, n in enumerate(names)}
    i = low.get(name.strip().lower())
    if i is None:
        raise InputError(field, name, "not a pool of this row's gpu column; pools: "
                         + ", ".join(names))
    return i


def _per_pool(row: dict, field: str, pc: PoolCluster) -> dict[int, int]:
    """``NAME:N,NAME:N`` -> {pool index: N} (N a whole number >= 1)."""
    out: dict[int, int] = {}
    for part in text(row, field).split(","):
        name, sep, n = part.partition(":")
        if not sep or not name.strip():
            raise InputError(field, text(row, field), "expected GPU:N[,GPU:N...]")
        k = _pool_index(pc, field, name)
        v = count({field: n}, field, minimum=1)
        if v is None or k in out:
            raise InputError(field, text(row, field), "one whole number >= 1 per pool, "
                             "each pool once")
        out[k] = v
    return out


def _nic_tables(gpus: str, nic_text: str, gpn: int | None) -> list[dict]:
    """Pool tables for ``make_pools`` from ``GPU:GBPS,GPU:GBPS`` (Gb/s per GPU one way; a
    pool not named keeps its GPU's usual NIC)."""
    from .scenario import gpu_catalog
    from .specs.pools import parse_pools

    pools = parse_pools(gpus, gpu_catalog())
    names = {g.name.lower(): g.name for _, g in pools}
    if len(names) != len(pools):
        raise InputError("gpus", gpus, "each GPU type may appear in one pool only "
                         "(add the counts together)")
    nic: dict[str, float] = {}
    for part in nic_text.split(","):
        name, _, v = part.partition(":")
        key = names.get(name.strip().lower())
        if key is None or key in nic:
            raise InputError("nic_gbps_per_gpu", nic_text, "GBPS, or GPU:GBPS per pool of "
                             "the gpu column, each pool once")
        x = number({"nic_gbps_per_gpu": v}, "nic_gbps_per_gpu", required=True)
        if not x > 0:
            raise InputError("nic_gbps_per_gpu", nic_text, "must be positive")
        nic[key] = x
    out = []
    for n, g in pools:
        t: dict = {"gpus": f"{n}x{g.name}"}
        if gpn is not None:
            t["gpus_per_node"] = gpn
        if g.name in nic:
            t["nic_gbps_per_gpu"] = nic[g.name]
        out.append(t)
    return out


def _plan_knobs(row: dict) -> dict:
    kw: dict = {}
    for key in ("tp", "pp", "dp", "cp", "micro_batch"):
        v = count(row, key, minimum=1)
        if v is not None:
            kw[key] = v
    z = count(row, "zero", minimum=0)
    kw["zero"] = 1 if z is None else z
    if z is not None and z > 3:
        raise InputError("zero", z, "allowed: 0, 1, 2, 3")
    rc = text(row, "recompute").lower() or "none"
    if rc not in ("none", "selective", "full"):
        raise InputError("recompute", rc, "allowed: none, selective, full")
    kw["recompute"] = rc
    sp = flag(row, "sequence_parallel")
    if kw.get("tp", 1) > 1:
        kw["sequence_parallel"] = bool(sp) if sp is not None else None
    vpp = count(row, "vpp", minimum=1)
    if vpp not in (None, 1):
        raise InputError("vpp", vpp, "pool rows take vpp 1 (1F1B across pools)")
    return kw


def prepare_pool_row(row: dict) -> PoolRow:
    """Everything a pool row's prediction needs, checked (InputError names the field)."""
    model, notes = model_from_row(row)
    gpus = text(row, "gpu")
    if not gpus:
        raise InputError("gpu", "", "required (blank)")
    link = number(row, "inter_pool_gbps")
    gpn = count(row, "gpus_per_node", minimum=1)
    nic_text = text(row, "nic_gbps_per_gpu")
    try:
        if ":" in nic_text:  # one NIC per pool: GPU:GBPS,GPU:GBPS
            tables = _nic_tables(gpus, nic_text, gpn)
            pc = make_pools(gpus, inter_pool_gbps=link, pool_tables=tables)
        else:
            pc = make_pools(gpus, gpus_per_node=gpn, inter_pool_gbps=link,
                            nic_gbps_per_gpu=number(row, "nic_gbps_per_gpu"))
    except InputError as e:  # name the CSV column the pools came from
        if e.field in ("gpus", "gpu", "num_gpus") or e.field.startswith("cluster.pools"):
            raise InputError("gpu", gpus, f"{e.field}={e.value!r}: {e.allowed}") from None
        raise
    n = count(row, "num_gpus", required=True, minimum=1)
    if n != pc.num_gpus:
        raise InputError("num_gpus", n, f"the pools in gpu hold {pc.num_gpus} GPUs")
    workload = Workload(count(row, "seq_len", required=True, minimum=1),
                        count(row, "global_batch_seqs", required=True, minimum=1),
                        (text(row, "precision") or "bf16").lower(),
                        framework=row_framework(text(row, "framework"))[0],
                        attention_kernel=text(row, "attention_kernel"))  # optional column
    kind = text(row, "pool_plan").lower()
    if kind not in KINDS:
        raise InputError("pool_plan", kind, "allowed: " + ", ".join(KINDS))
    kw = _plan_knobs(row)
    g = kw.get("tp", 1) * kw.get("cp", 1)
    if kind == "pipeline":
        names = [s for s in text(row, "stage_pools").split(",") if s.strip()]
        if not names:
            raise InputError("stage_pools", "", "required for pool_plan=pipeline: the GPU "
                             "type of each stage, comma-separated")
        stage_pools = tuple(_pool_index(pc, "stage_pools", s) for s in names)
        pp = kw.setdefault("pp", len(stage_pools))
        if pp != len(stage_pools):
            raise InputError("stage_pools", text(row, "stage_pools"), f"one GPU type per "
                             f"stage: pp is {pp}")
        split_text = text(row, "layer_split")
        split: tuple = ()
        if split_text:
            parts = split_text.split("/")
            split = tuple(count({"layer_split": p}, "layer_split", minimum=1) or 0
                          for p in parts)
            if len(split) != pp or sum(split) != model.layers:
                raise InputError("layer_split", split_text, f"{pp} layer counts summing "
                                 f"to the model's {model.layers} layers")
        plan = UnevenPlan(**kw, schedule="1f1b", split=split)
        if not split:
            plan = plan.with_(split=tuple(plan.layer_split(model)))
        used = {}
        for k in stage_pools:
            used[k] = used.get(k, 0) + plan.dp * g
        for k, u in used.items():
            if u > pc.pools[k].num_gpus:
                raise InputError("stage_pools", text(row, "stage_pools"),
                                 f"the stages on {pc.pools[k].name} need {u} GPUs, the pool "
                                 f"has {pc.pools[k].num_gpus}")
        return PoolRow(model, pc, workload, kind, plan, stage_pools, notes=tuple(notes))
    reps = _per_pool(row, "pool_replicas", pc) if text(row, "pool_replicas") else None
    if reps is None:
        raise InputError("pool_replicas", "", "required for pool_plan=data: replicas per "
                         "GPU type, e.g. A100-SXM-80GB:2,V100-SXM-32GB:4")
    dp = kw.setdefault("dp", sum(reps.values()))
    if dp != sum(reps.values()):
        raise InputError("pool_replicas", text(row, "pool_replicas"), f"replicas sum to "
                         f"{sum(reps.values())}, dp is {dp}")
    per_replica = g * kw.get("pp", 1)
    for k, r in reps.items():
        if r * per_replica > pc.pools[k].num_gpus:
            raise InputError("pool_replicas", text(row, "pool_replicas"),
                             f"{r} replicas of {per_replica} GPUs do not fit in "
                             f"{pc.pools[k].num_gpus}x{pc.pools[k].name}")
    if text(row, "pool_batch"):
        batch = _per_pool(row, "pool_batch", pc)
        if set(batch) != set(reps):
            raise InputError("pool_batch", text(row, "pool_batch"), "one entry per pool "
                             "of pool_replicas")
    else:
        if workload.global_batch % dp:
            raise InputError("global_batch_seqs", workload.global_batch,
                             f"does not split evenly over {dp} replicas; give pool_batch")
        batch = {k: workload.global_batch // dp for k in reps}
        notes.append("batch split evenly over the replicas")
    plan = Plan(**kw, schedule="1f1b")
    return PoolRow(model, pc, workload, kind, plan, replicas=tuple(sorted(reps.items())),
                   batch=tuple(sorted(batch.items())), notes=tuple(notes))


def predict_pool_plan(pr: PoolRow):
    """(PoolPlan, the per-pool estimates of the plan) for the row's published plan."""
    if pr.kind == "pipeline":
        ests = pool_estimates(pr.model, pr.pools, pr.workload, pr.plan, set(pr.stage_pools))
        return (pipeline_across_pools(pr.model, pr.pools, pr.workload, pr.plan,
                                      pr.stage_pools, ests), ests)
    reps, batch = dict(pr.replicas), dict(pr.batch)
    pp = data_across_pools(pr.model, pr.pools, pr.workload, pr.plan, reps, batch)
    ests = pool_estimates(pr.model, pr.pools, pr.workload, pr.plan, set(reps))
    return pp, ests


def _interval_factors(pr: PoolRow, ests: dict, data: dict) -> tuple[float, float, str]:
    """The widest 10-90% tokens/s factors over the pools used (and that pool's class):
    uncertainty.widest_throughput_factors over each pool's estimate."""
    from .cost.hetero import pool_cluster_for

    used = []
    for k, e in ests.items():
        c = pool_cluster_for(pr.pools, k, e.world_size)
        used.append((c.gpu.generation, c.num_gpus, e.step_time.parts))
    return uncertainty.widest_throughput_factors(data, pr.model.is_moe, used)


def fill_pool_prediction(res, row: dict, with_search_best: bool, cache: dict,
                         residuals: dict | None) -> None:
    """Fill a validate.RowResult for a pool row (InputError for a bad row)."""
    pr = prepare_pool_row(row)
    res.notes = list(pr.notes)
    res.gpus = text(row, "gpu")
    pp, ests = predict_pool_plan(pr)
    n = pr.pools.num_gpus
    res.predicted_tokens_per_s_per_gpu = pp.tokens_per_s / n
    res.predicted_step_time_s = pp.step_time_s
    res.predicted_peak_mem_gib = max(s.memory_bytes for s in pp.stages) / GiB
    res.predicted_oom = not pp.fits
    res.predicted_mfu = pp.mfu
    res.plan = pp.describe()
    lo, hi, cls = _interval_factors(pr, ests, residuals or uncertainty.load())
    t = res.predicted_tokens_per_s_per_gpu
    res.tokens_p10_p90 = (t * lo, t * hi)
    res.step_time_p10_p90 = (pp.step_time_s / hi, pp.step_time_s / lo)
    res.throughput_class = cls
    res.predicted_may_not_fit = False
    if with_search_best:
        key = ("pool-free",) + pr.free_key
        if key not in cache:
            from .search.hetero import search_pools

            r = search_pools(pr.model, pr.pools, pr.workload, top_k=1)
            cache[key] = ((r.best.tokens_per_s / n, r.best.describe())
                          if r.best is not None else (None, ""))
        res.search_best_tokens_per_s_per_gpu, res.search_best_plan = cache[key]


# ---- ratios and the pool summary -------------------------------------------------------
def ratios(rows: list[dict], results: list) -> list[dict]:
    """Rows with a baseline_id: this row's throughput over the baseline's, measured (the
    printed measured_speedup, else the two measured tokens/s) against predicted."""
    by_id = {r.id: r for r in results}
    out = []
    for row, res in zip(rows, results):
        base_id = text(row, "baseline_id")
        if not base_id or res.error:
            continue
        base = by_id.get(base_id)
        item = {"id": res.id, "baseline_id": base_id, "source": res.source}
        try:
            printed = measured(row, "measured_speedup")
        except InputError as e:
            item["error"] = str(e)
            out.append(item)
            continue
        if base is None or base.error or base.predicted_tokens_per_s_per_gpu is None:
            item["error"] = f"baseline_id {base_id!r}: no such scored row"
            out.append(item)
            continue
        n_row = _num_gpus(row)
        n_base = _num_gpus(next(r for r, x in zip(rows, results) if x is base))
        pred = (res.predicted_tokens_per_s_per_gpu * n_row) / \
            (base.predicted_tokens_per_s_per_gpu * n_base)
        meas = printed
        if meas is None and res.measured_tokens_per_s_per_gpu and base.measured_tokens_per_s_per_gpu:
            meas = (res.measured_tokens_per_s_per_gpu * n_row) / \
                (base.measured_tokens_per_s_per_gpu * n_base)
        if meas is None:
            item["error"] = "no measured_speedup and no measured tokens/s on both rows"
        else:
            item.update(measured=meas, predicted=pred, error_ratio=pred / meas - 1)
        out.append(item)
    return out


def _num_gpus(row: dict) -> int:
    try:
        return count(row, "num_gpus", minimum=1) or 1
    except InputError:
        return 1


def summary(rows: list[dict], results: list) -> dict:
    """Per source of pool rows: rows, median |error| of tokens/s, the ratio checks, and how
    often the pool search's best plan is predicted at least as fast as the published one."""
    pool_ids = {text(r, "id") or str(i + 1) for i, r in enumerate(rows) if is_pool_row(r)}
    mine = [r for r in results if r.id in pool_ids]
    rat = ratios(rows, results)
    per: dict = {}
    for src in sorted({r.source for r in mine if r.error is None}):
        rs = [r for r in mine if r.source == src and r.error is None]
        errs = [abs(r.tokens_error) for r in rs if r.tokens_error is not None]
        signed = [r.tokens_error for r in rs if r.tokens_error is not None]
        rr = [abs(x["error_ratio"]) for x in rat if x["source"] == src and "error_ratio" in x]
        cmp_ = [r for r in rs if r.search_best_tokens_per_s_per_gpu is not None
                and r.predicted_tokens_per_s_per_gpu is not None]
        per[src] = {
            "rows": len(rs),
            "tokens_median_abs_error": statistics.median(errs) if errs else None,
            "tokens_median_error": statistics.median(signed) if signed else None,
            "ratio_rows": len(rr),
            "ratio_median_abs_error": statistics.median(rr) if rr else None,
            "search_compared": len(cmp_),
            "search_at_least_as_fast": sum(
                r.search_best_tokens_per_s_per_gpu >= r.predicted_tokens_per_s_per_gpu * (1 - 1e-9)
                for r in cmp_),
        }
    errs = [abs(r.tokens_error) for r in mine if r.error is None and r.tokens_error is not None]
    return {"rows": len(mine), "scored": sum(r.error is None for r in mine),
            "tokens_median_abs_error": statistics.median(errs) if errs else None,
            "ratios": rat, "per_source": per}
