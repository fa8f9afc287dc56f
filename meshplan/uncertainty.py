"""How sure a prediction is: a 10th-90th percentile interval for an Estimate.

Two sources of uncertainty, added in quadrature on the log scale:

1. the cross-validated residuals of the prediction's class (GPU generation, dense or MoE,
   scale) on published runs: ``residuals.toml`` beside this module, written by
   ``bench/fit_residuals.py`` (its header says when and with which command). A class with
   few rows is shrunk toward its parent (generation/arch -> generation -> all rows); a GPU
   generation with no rows at all takes the pooled spread widened by how much generations
   differ from each other;
2. the uncertainty of the constants the estimate leans on, weighted by the share of the
   step each part of the breakdown takes (a plan whose step is mostly exposed all-to-all
   is less certain than one that is mostly GEMMs): the relative 1-sigma of each part group
   is in the same file's ``[constants]`` table, each with its source.

The log residual r = ln(measured tokens/s / predicted tokens/s) is modelled as normal with
the class's mean and spread; the 10th and 90th percentiles are mean -+ 1.2816 sigma.

Memory uses r = ln(measured peak / predicted peak) by memory class ``engine/generation``
(memory_class_of): the engine decides how model states are allocated (Megatron's contiguous
buffers, FSDP2's per-parameter shards, DeepSpeed's flat partitions), which loss kernel and
attention path run and what its logs report as the peak; the GPU generation decides the
attention path (no fused attention before Ampere) and the allocator's environment. A class
with few rows is shrunk toward its engine, then all rows; an engine with no memory rows at
all takes the pooled spread widened by how much engines' means differ
(``between_engine_memory_sigma``). Cheap: a few dict lookups per estimate, nothing is
re-estimated.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .specs.hardware import gib_text

Z90 = 1.2815515655446004  # standard normal 90th percentile
SHRINK_ROWS = 3.0  # pseudo-rows of the parent class a class is shrunk with
GiB = 2**30


@dataclass(frozen=True)
class Interval:
    """10th-90th percentile bounds of one prediction (the point value sits inside)."""

    step_time_s: tuple[float, float]
    tokens_per_s_per_gpu: tuple[float, float]
    peak_memory_gib: tuple[float, float]
    throughput_class: str  # the residual class used ("hopper/dense/medium", ...)
    memory_class: str
    capacity_gib: float
    memory_factors: tuple[float, float] = (1.0, 1.0)  # p10, p90 over the point prediction
    # 90th percentile of what tensors hold (the peak less the allocator's cache, which
    # PyTorch gives back before it fails: cost/memory.py); None = use the peak's
    held_p90_gib: float | None = None
    # whether the memory class's engine has measured peaks in the residual model (False:
    # the pooled spread, widened by how much engines differ, stands in for it)
    memory_class_measured: bool = True

    @property
    def may_not_fit(self) -> bool:
        need = self.peak_memory_gib[1] if self.held_p90_gib is None else self.held_p90_gib
        return need > self.capacity_gib

    def to_json(self) -> dict:
        return {"step_time_s_p10_p90": list(self.step_time_s),
                "tokens_per_s_per_gpu_p10_p90": list(self.tokens_per_s_per_gpu),
                "peak_memory_gib_p10_p90": list(self.peak_memory_gib),
                "throughput_class": self.throughput_class, "memory_class": self.memory_class,
                "may_not_fit": self.may_not_fit}


def scale_of(num_gpus: int) -> str:
    """Scale bucket: one to eight nodes, up to 1,024 GPUs, beyond."""
    return "small" if num_gpus <= 64 else "medium" if num_gpus <= 1024 else "large"


def class_of(generation: str, is_moe: bool, num_gpus: int) -> str:
    return f"{generation or 'unknown'}/{'moe' if is_moe else 'dense'}/{scale_of(num_gpus)}"


# Engines that allocate memory as another engine does and share its memory class.
# meshplan's own runtime ("") shards with FSDP2 ``fully_shard`` the way torchtitan does
# (meshplan/runtime/data_parallel.py), calls torch SDPA and torch's cross entropy on upcast
# logits: torchtitan's allocation policy, kernels and peak (torch reserved).
MEMORY_CLASS_OF_ENGINE = {"": "torchtitan"}


def memory_class_of(framework: str, generation: str) -> str:
    """The memory residual class: engine (Workload.framework, through
    MEMORY_CLASS_OF_ENGINE) and GPU generation."""
    eng = MEMORY_CLASS_OF_ENGINE.get(framework or "", framework)
    return f"{eng}/{generation or 'unknown'}"


DEFAULT_PATH = "residuals.toml"


@lru_cache(maxsize=8)
def load(path: str | None = None) -> dict:
    if path is None:
        text = (resources.files(__package__) / DEFAULT_PATH).read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    return tomllib.loads(text)


def _lookup(stats: dict, key: str) -> tuple[float, float, bool]:
    """(mean, sigma, calibrated) of a class, shrunk toward its ancestors."""
    parts = key.split("/")
    chain = ["/".join(parts[:i]) for i in range(len(parts), 0, -1)] + ["all"]
    pooled = stats["all"]
    # start at the broadest level and refine toward the class
    mu, var = pooled["mean"], pooled["sigma"] ** 2
    calibrated = False
    n_eff = float(pooled["n"])
    for k in reversed(chain[:-1]):
        c = stats.get(k)
        if not c or c["n"] < 1:
            continue
        calibrated = True
        n = c["n"]
        w = n / (n + SHRINK_ROWS)
        mu = w * c["mean"] + (1 - w) * mu
        var = w * c["sigma"] ** 2 + (1 - w) * var
        n_eff = n + SHRINK_ROWS
    # a new row's residual around a mean and spread estimated from n_eff rows: Student t
    # with n_eff - 1 degrees of freedom, scale sigma * sqrt(1 + 1/n_eff) (the textbook
    # prediction interval); folded into sigma so that mean +- Z90 * sigma is its 10-90%
    if n_eff >= 2:
        var *= (1 + 1 / n_eff) * (t90(n_eff - 1) / Z90) ** 2
    return mu, math.sqrt(var), calibrated


# Student t 90th percentiles (any statistics table): degrees of freedom -> quantile
_T90 = ((1, 3.078), (2, 1.886), (3, 1.638), (4, 1.533), (5, 1.476), (6, 1.440), (7, 1.415),
        (8, 1.397), (9, 1.383), (10, 1.372), (12, 1.356), (15, 1.341), (20, 1.325),
        (30, 1.310), (60, 1.296), (120, 1.289))


def t90(dof: float) -> float:
    """The Student t 90th percentile, linear in 1/dof between table rows (exact at them)."""
    if dof >= 120:
        x = 1 / dof
        return Z90 + (1.289 - Z90) * x * 120
    for (d0, q0), (d1, q1) in zip(_T90, _T90[1:]):
        if d0 <= dof <= d1:
            f = (1 / dof - 1 / d0) / (1 / d1 - 1 / d0)
            return q0 + f * (q1 - q0)
    return _T90[0][1]


def constants_var(data: dict, parts: dict[str, float]) -> float:
    """Variance (log scale) from the constants, by the share of the step each group takes."""
    total = sum(v for v in parts.values() if v > 0) or 1.0
    var = 0.0
    for spec in data.get("constants", {}).values():
        share = sum(parts.get(p, 0.0) for p in spec["parts"] if parts.get(p, 0.0) > 0) / total
        var += (share * spec["sigma"]) ** 2
    return var


def class_var(stats: dict, key: str, between_sigma: float) -> tuple[float, float]:
    """(mean, variance) of a class's log residual; an uncalibrated generation is widened."""
    mu, sigma, calibrated = _lookup(stats, key)
    return mu, sigma ** 2 + (0.0 if calibrated else between_sigma ** 2)


def fit_stats(records: list[tuple[str, float]]) -> dict:
    """Mean and spread of log residuals at every level of the class key ("all", then
    "hopper", "hopper/dense", "hopper/dense/medium")."""
    groups: dict[str, list[float]] = {}
    for key, r in records:
        parts = key.split("/")
        for k in ["all"] + ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]:
            groups.setdefault(k, []).append(r)
    out = {}
    for k, xs in sorted(groups.items()):
        n = len(xs)
        mean = sum(xs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        out[k] = {"n": n, "mean": mean, "sigma": sd}
    if "all" not in out:
        out["all"] = {"n": 0, "mean": 0.0, "sigma": 0.0}
    return out


def between_sigma(records: list[tuple[str, float]]) -> float:
    """Spread of the mean log residual between top-level classes (engines for memory): how
    far an unseen engine's mean may sit from the pooled one."""
    st = fit_stats(records)
    tops = [v["mean"] for k, v in st.items() if "/" not in k and k != "all"]
    return statistics.stdev(tops) if len(tops) > 1 else 0.0


def throughput_sigma_terms(data: dict, generation: str, is_moe: bool, num_gpus: int,
                           parts: dict[str, float]) -> tuple[float, float, str]:
    key = class_of(generation, is_moe, num_gpus)
    mu, var = class_var(data["throughput"], key, data["meta"].get("between_generation_sigma", 0.0))
    return mu, math.sqrt(var + constants_var(data, parts)), key


def _band(mu: float, sigma: float) -> tuple[float, float]:
    """10th and 90th percentile factors over a point prediction, from its class's log
    residual mean and sigma (throughput_sigma_terms, memory_terms)."""
    return math.exp(mu - Z90 * sigma), math.exp(mu + Z90 * sigma)


def widest_throughput_factors(data: dict, is_moe: bool,
                              pools: list[tuple[str, int, dict[str, float]]]
                              ) -> tuple[float, float, str]:
    """(p10, p90) factors over a point throughput, and the class they come from, for a plan
    across GPU pools: each pool used (its GPU generation, the GPUs it gives, the step parts
    its GPUs spend) is its class's interval (throughput_sigma_terms), and the plan takes the
    widest. One rule for `plan` on pools and `validate` of pool rows: no class holds runs
    across GPU types (bench/data/hetero_runs.csv has six), so none is narrower than the
    least certain pool it uses."""
    best = None
    for generation, num_gpus, parts in pools:
        mu, sigma, key = throughput_sigma_terms(data, generation, is_moe, num_gpus, parts)
        lo, hi = _band(mu, sigma)
        if best is None or hi / lo > best[1] / best[0]:
            best = (lo, hi, key)
    return best


def memory_terms(data: dict, framework: str, generation: str) -> tuple[float, float, str]:
    """(mean, sigma, class) of the log memory residual of a plan run by ``framework`` on a
    GPU of ``generation``. A residual model without engine classes (only "all"/"dense")
    falls back to its pooled figures."""
    key = memory_class_of(framework, generation)
    mu, var = class_var(data["memory"], key, data["meta"].get("between_engine_memory_sigma", 0.0))
    return mu, math.sqrt(var), key


def _memory_band(mu: float, sigma: float) -> tuple[float, float]:
    """10th and 90th percentile of memory over the point prediction, from memory_terms."""
    return _band(mu, sigma)


def memory_p90_factor(framework: str, generation: str, data: dict | None = None) -> float:
    """A plan's 90th percentile of memory over its point prediction when ``framework`` runs it
    on a GPU of ``generation`` (interval()'s memory_factors[1]; the same for every plan of a
    scenario)."""
    mmu, msig, _ = memory_terms(data or load(), framework, generation)
    return _memory_band(mmu, msig)[1]


def memory_class_measured(data: dict, framework: str, generation: str) -> bool:
    """Whether the residual model has peaks measured on this engine (any generation)."""
    eng = memory_class_of(framework, generation).split("/")[0]
    return data["memory"].get(eng, {}).get("n", 0) >= 1


def peak_p90_gib(peak_gib: float, factor: float, capacity_gib: float,
                 held_p90_gib: float) -> float:
    """The 90th percentile of a predicted peak (``peak_gib`` times the class's ``factor``):
    the allocator's cache grows into free memory but not past the GPU (PyTorch frees it
    before it fails an allocation, cost/memory.py), so it is at most the capacity unless what
    tensors hold (``held_p90_gib``, the "may not fit" test) crosses it; the column a user
    reads and the verdict then say the same thing. Never below the point itself."""
    return max(min(peak_gib * factor, max(capacity_gib, held_p90_gib)), peak_gib)


def interval(est, model, cluster, data: dict | None = None, framework: str = "") -> Interval:
    """The 10-90% interval of an Estimate of ``model`` on ``cluster``, run by ``framework``
    (Workload.framework: it picks the memory class)."""
    data = data or load()
    gen = cluster.gpu.generation
    mu, sigma, tkey = throughput_sigma_terms(data, gen, model.is_moe, cluster.num_gpus,
                                             est.step_time.parts)
    lo_f, hi_f = _band(mu, sigma)
    tps = est.tokens_per_s_per_gpu
    step = est.step_time_s
    mmu, msig, mkey = memory_terms(data, framework, gen)
    mf = _memory_band(mmu, msig)
    peak = est.peak_candidates[est.peak_memory_rank].parts
    iv = Interval(
        step_time_s=(step / hi_f, step / lo_f),
        tokens_per_s_per_gpu=(tps * lo_f, tps * hi_f),
        peak_memory_gib=(0.0, 0.0),
        throughput_class=tkey, memory_class=mkey, capacity_gib=est.capacity_bytes / GiB,
        memory_factors=mf, memory_class_measured=memory_class_measured(data, framework, gen))
    return around_peak(iv, est.peak_memory_bytes, peak.get("allocator_fragmentation", 0.0))


def around_peak(iv: Interval, peak_bytes: float, fragmentation_bytes: float) -> Interval:
    """The memory bounds of ``iv`` around a peak of ``peak_bytes`` on the GPU, of which
    ``fragmentation_bytes`` is the allocator's cache: the class's factors times the peak, the
    90th percentile capped as peak_p90_gib caps it, and what tensors hold (the peak less the
    cache) for the "may not fit" test. interval() applies it to the closed-form peak and
    around_simulation() to the simulated one, so both read the same rule. The 10th
    percentile is never above the point, as the 90th is never below it: a class whose peaks
    all ran above the model (deepspeed/ampere, factors 1.015-1.163) would otherwise put the
    point outside its own band (and, on a peak held at the GPU's capacity by the allocator's
    cache, a 10th percentile over the capacity)."""
    mem = peak_bytes / GiB
    held_p90 = (peak_bytes - fragmentation_bytes) / GiB * iv.memory_factors[1]
    return dataclasses.replace(
        iv, peak_memory_gib=(min(mem * iv.memory_factors[0], mem),
                             peak_p90_gib(mem, iv.memory_factors[1], iv.capacity_gib, held_p90)),
        held_p90_gib=held_p90)


def around_simulation(iv: Interval, est, ps) -> Interval:
    """The interval of a plan whose pipeline was simulated (``ps``, a
    pipeline.from_cost.PlanSimulation of ``est``): around the simulated step time and the
    simulated peak memory (the fullest rank's parts). What `meshplan simulate` prints and
    `meshplan plan --json` gives as ``simulated_interval``."""
    parts = max(ps.memory_parts, key=lambda p: sum(p.values()))
    return around_peak(scaled(iv, ps.step_time_s, est.step_time_s), sum(parts.values()),
                       parts.get("allocator_fragmentation", 0.0))


def verdict(est, iv: Interval) -> str:
    """'fits', 'may not fit' (the 90th percentile of what tensors hold crosses capacity) or
    the estimate's own 'does not fit' verdict."""
    if not est.fits:
        return est.verdict
    if iv.may_not_fit:
        need = iv.peak_memory_gib[1] if iv.held_p90_gib is None else iv.held_p90_gib
        why = ("" if iv.memory_class_measured else
               f" (no published peak of engine {iv.memory_class.split('/')[0]!r} was measured: "
               "the pooled memory spread of other engines, widened)")
        return (f"may not fit: 90th percentile {need:.1f} GiB per GPU held by tensors, "
                f"the GPU has {gib_text(iv.capacity_gib * 2**30)} GiB" + why)
    return "fits"


def scaled(iv: Interval, step_time_s: float, point_step_s: float) -> Interval:
    """The same interval around another step time of the same plan (the simulated one)."""
    k = step_time_s / point_step_s
    return dataclasses.replace(
        iv, step_time_s=(iv.step_time_s[0] * k, iv.step_time_s[1] * k),
        tokens_per_s_per_gpu=(iv.tokens_per_s_per_gpu[0] / k, iv.tokens_per_s_per_gpu[1] / k))


def ranking_sigma(a, b, data: dict | None = None) -> float:
    """Relative 1-sigma of the step-time difference between two plans of one scenario.

    The class residual is shared by every plan of a scenario (same model, GPUs and scale),
    so it cancels in a comparison; what differs is how much each plan leans on each group
    of constants."""
    data = data or load()
    return math.sqrt(constants_var(data, a.step_time.parts) + constants_var(data, b.step_time.parts))


def too_close(t1_s: float, t2_s: float, a, b, data: dict | None = None) -> bool:
    """Whether #2 is within the 10-90% band of the difference of #1 (t1 <= t2)."""
    return (t2_s - t1_s) / t1_s < Z90 * ranking_sigma(a, b, data)
