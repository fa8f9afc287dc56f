"""Procurement: which GPU type, and how many, to train a model by a deadline (or a budget).

For each GPU type the planner searches counts on a ladder (1, 2, 4 GPUs, then whole nodes
times 2^a, 3*2^a, 5*2^a up to --max-gpus, default 16,384): starting at the count whose peak
FLOP/s could meet the deadline at 100% MFU (a true lower bound), each count gets the full
plan search (closed forms, no simulated re-rank, for speed), and the first count whose best
plan meets the deadline and the budget is the fewest. Without a deadline, each type's best
count under the objective is chosen from the power-of-two rungs. The cheapest row overall is
marked. ``curve`` holds (GPUs, time to train, cost) of every count evaluated, for the PNG.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..cost.flops import model_flops_per_token
from ..errors import InputError
from ..specs.hardware import GPU, Cluster
from ..specs.model import ModelSpec
from ..specs.prices import Price, price_of
from ..specs.workload import Workload
from .objective import Goal, Outcome, fmt_duration, fmt_usd
from .search import search

DEFAULT_MAX_GPUS = 16384


@dataclass
class TypeRow:
    gpu: GPU
    price: Price
    num_gpus: int = 0  # 0: no count on the ladder meets the goal
    estimate: object = None  # meshplan.cost.Estimate of the chosen plan
    cluster: Cluster | None = None  # the cluster of the chosen count
    outcome: Outcome | None = None
    reason: str = ""  # why no count qualifies
    curve: list = field(default_factory=list)  # (num_gpus, Outcome) of every count evaluated


@dataclass
class Procurement:
    rows: list[TypeRow]
    goal: Goal
    elapsed_s: float
    searches: int

    @property
    def cheapest(self) -> TypeRow | None:
        ok = [r for r in self.rows if r.outcome is not None]
        if not ok:
            return None
        if self.goal.train_tokens:
            return min(ok, key=lambda r: (r.outcome.cost_to_train_usd, r.num_gpus))
        return min(ok, key=lambda r: r.outcome.usd_per_million_tokens)


def ladder(gpus_per_node: int, max_gpus: int) -> list[int]:
    """Counts tried: 1, 2, 4 (below a node) then nodes x {2^a, 3*2^a, 5*2^a}."""
    out = {c for c in (1, 2, 4) if c < gpus_per_node}
    a = 1
    while gpus_per_node * a <= max_gpus:
        for k in (1, 3, 5):
            if k * a * gpus_per_node <= max_gpus and (k == 1 or k * a >= 3):
                out.add(k * a * gpus_per_node)
        a *= 2
    return sorted(out)


def over_budget_reason(n: int, o: Outcome, goal: Goal) -> str:
    """Why a type that meets the deadline is not chosen: its cheapest count that does (not
    the last count tried, which costs the most) and by how much it misses the budget."""
    return (f"{n} GPUs meet the deadline at the lowest cost ({fmt_duration(o.time_to_train_s)},"
            f" {fmt_usd(o.cost_to_train_usd)}): {fmt_usd(o.cost_to_train_usd - goal.budget_usd)}"
            f" over the budget {fmt_usd(goal.budget_usd)}")


def _best(model, cluster, workload):
    r = search(model, cluster, workload, top_k=1, rerank_k=0, simulate=False)
    return r.best


def procure(model: ModelSpec, workload: Workload, gpus: list[GPU], goal: Goal,
            prices: dict[str, float] | None = None, gpus_per_node: int | None = None,
            nic_gbps_per_gpu: float | None = None) -> Procurement:
    if not gpus:
        raise InputError("--gpu-types", "", "give at least one GPU type")
    t0 = time.perf_counter()
    max_gpus = goal.max_gpus or DEFAULT_MAX_GPUS
    need_tps = goal.train_tokens / goal.deadline_s if goal.deadline_s else 0.0
    flops_per_token = model_flops_per_token(model, workload.seq_len)
    rows, searches = [], 0
    for gpu in gpus:
        row = TypeRow(gpu, price_of(gpu.name, prices))
        gpn = gpus_per_node or gpu.gpus_per_node
        nic = (nic_gbps_per_gpu or 0) / 8 * 1e9
        counts = ladder(gpn, max_gpus)
        floor_n = need_tps * flops_per_token / gpu.flops("bf16")  # 100% MFU: a lower bound
        evaluated: dict[int, object] = {}

        def at(n: int):
            nonlocal searches
            if n not in evaluated:
                searches += 1
                evaluated[n] = _best(model, Cluster(gpu, n, gpn, nic), workload)
            return evaluated[n]

        def outcome(n: int, est) -> Outcome:
            return Outcome(est.tokens_per_s, n * row.price.usd_per_gpu_hour, n, goal.train_tokens)

        if goal.deadline_s:
            row.reason = f"no count up to {max_gpus} meets the deadline"
            over = None  # (n, Outcome): the cheapest count that meets the deadline, not the budget
            for n in (c for c in counts if c >= floor_n):
                est = at(n)
                if est is None:
                    continue
                ok, why = outcome(n, est).meets(goal)
                if ok:
                    row.num_gpus, row.estimate, row.outcome, row.reason = n, est, outcome(n, est), ""
                    row.cluster = Cluster(gpu, n, gpn, nic)
                    break
                o = outcome(n, est)
                if "budget" in why and (over is None
                                        or o.cost_to_train_usd < over[1].cost_to_train_usd):
                    over = (n, o)
            if row.outcome is None and over is not None:
                row.reason = over_budget_reason(*over, goal)
        else:
            best = None
            for n in (c for c in counts if c & (c - 1) == 0):
                est = at(n)
                if est is None:
                    continue
                o = outcome(n, est)
                if o.meets(goal)[0] and (best is None or o.key(goal) < best[1].key(goal)):
                    best = (n, o, est)
            if best:
                row.num_gpus, row.outcome, row.estimate = best[0], best[1], best[2]
                row.cluster = Cluster(gpu, best[0], gpn, nic)
            else:
                row.reason = "no plan fits on any count tried"
        # the curve: every power-of-two count from the first that fits up to max_gpus
        for n in counts:
            if n & (n - 1) == 0 and n >= max(1, floor_n / 2):
                est = at(n)
                if est is not None:
                    row.curve.append((n, outcome(n, est)))
        for n, est in evaluated.items():  # and every other count evaluated
            if est is not None and all(n != c for c, _ in row.curve):
                row.curve.append((n, outcome(n, est)))
        row.curve.sort(key=lambda x: x[0])
        rows.append(row)
    return Procurement(rows, goal, time.perf_counter() - t0, searches)


def curve_png(result: Procurement, path, title: str = ""):
    """Cost of the run against time to train, one line per GPU type, one point per count."""
    from ..export.plots import _pyplot, _save

    if not result.goal.train_tokens:
        raise InputError("--png", path, "the cost-vs-time picture needs --train-tokens")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    for row in result.rows:
        if not row.curve:
            continue
        xs = [o.time_to_train_s / 86400 for _, o in row.curve]
        ys = [o.cost_to_train_usd / 1e6 for _, o in row.curve]
        line, = ax.plot(xs, ys, marker="o", ms=3, label=row.gpu.name)
        for (n, _), x, y in zip(row.curve, xs, ys):
            ax.annotate(str(n), (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
        if row.outcome:
            ax.plot([row.outcome.time_to_train_s / 86400], [row.outcome.cost_to_train_usd / 1e6],
                    marker="*", ms=12, color=line.get_color())
    if result.goal.deadline_s:
        ax.axvline(result.goal.deadline_s / 86400, color="grey", ls="--", lw=1, label="deadline")
    if result.goal.budget_usd:
        ax.axhline(result.goal.budget_usd / 1e6, color="grey", ls=":", lw=1, label="budget")
    ax.set_xscale("log")
    ax.set_xlabel("time to train (days, log scale)")
    ax.set_ylabel("cost of the run (million US$)")
    ax.set_title(title or "cost against time to train, by GPU type and count (labels: GPUs)",
                 fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, path)
