"""What a plan is worth to its user: throughput, cost, time to train, and the constraints.

    --objective throughput   tokens/s (the default; what the search ranks by)
    --objective cost         dollars per million tokens (= $/h of the GPUs used / tokens per h)
    --objective time         time to train --train-tokens
    --train-tokens 15T  --deadline 90d  --budget 2.5M  --max-gpus 4096

Cost of a run = sum over pools of (GPUs used x $/GPU-hour) x hours to train, exactly: no
utilisation discount, no storage or egress (list prices are per GPU-hour of rental).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import InputError

OBJECTIVES = ("throughput", "cost", "time")

_SI = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_DURATION_S = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_NUM = r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*"


def _number(field: str, text: str, units: dict[str, float], allowed: str) -> float:
    m = re.fullmatch(_NUM + r"([a-z]*)\s*", str(text).strip().lower().lstrip("$"))
    if not m or m.group(2) not in units:
        raise InputError(field, text, allowed)
    v = float(m.group(1)) * units[m.group(2)]
    if not math.isfinite(v) or v <= 0:
        raise InputError(field, text, allowed)
    return v


def parse_tokens(text: str, field: str = "--train-tokens") -> float:
    """``15T`` -> 1.5e13 tokens (suffixes k, M, B/G, T, P)."""
    return _number(field, text, _SI, "a positive token count, e.g. 2T, 300B, 1.5e12")


def parse_duration_s(text: str, field: str = "--deadline") -> float:
    """``90d`` -> seconds (suffixes s, m/min, h, d, w; a bare number is days)."""
    units = dict(_DURATION_S, **{"": 86400.0})
    return _number(field, text, units, "a positive duration, e.g. 90d, 12w, 36h (bare number: days)")


def parse_usd(text: str, field: str = "--budget") -> float:
    """``2.5M`` -> 2.5e6 dollars (suffixes k, M, B)."""
    return _number(field, text, {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9},
                   "a positive number of US dollars, e.g. 2.5M, 800k, 120000")


@dataclass(frozen=True)
class Goal:
    objective: str = "throughput"
    train_tokens: float = 0.0  # 0: no training run given (time and cost per run not shown)
    deadline_s: float = 0.0  # 0: none
    budget_usd: float = 0.0  # 0: none
    max_gpus: int = 0  # 0: none

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InputError("--objective", self.objective, "allowed: " + ", ".join(OBJECTIVES))
        if self.objective == "time" and not self.train_tokens:
            raise InputError("--train-tokens", None, "required with --objective time")
        if (self.deadline_s or self.budget_usd) and not self.train_tokens:
            raise InputError("--train-tokens", None, "required with --deadline or --budget")
        if self.max_gpus < 0:
            raise InputError("--max-gpus", self.max_gpus, "must be a positive integer")


@dataclass(frozen=True)
class Outcome:
    """Throughput and money of one plan on the GPUs it uses."""

    tokens_per_s: float
    usd_per_hour: float  # GPUs used x their $/GPU-hour
    num_gpus: int
    train_tokens: float = 0.0

    @property
    def usd_per_million_tokens(self) -> float:
        return self.usd_per_hour / 3600.0 / self.tokens_per_s * 1e6

    @property
    def time_to_train_s(self) -> float:
        return self.train_tokens / self.tokens_per_s if self.train_tokens else 0.0

    @property
    def cost_to_train_usd(self) -> float:
        """GPUs x price x time, exactly."""
        return self.usd_per_hour * self.time_to_train_s / 3600.0

    def meets(self, goal: Goal) -> tuple[bool, str]:
        """Whether the constraints hold, and the first one that does not."""
        if goal.max_gpus and self.num_gpus > goal.max_gpus:
            return False, f"uses {self.num_gpus} GPUs, more than --max-gpus {goal.max_gpus}"
        if goal.deadline_s and self.time_to_train_s > goal.deadline_s:
            return False, (f"takes {fmt_duration(self.time_to_train_s)}, past the deadline "
                           f"{fmt_duration(goal.deadline_s)}")
        if goal.budget_usd and self.cost_to_train_usd > goal.budget_usd:
            return False, (f"costs {fmt_usd(self.cost_to_train_usd)}, over the budget "
                           f"{fmt_usd(goal.budget_usd)}")
        return True, ""

    def key(self, goal: Goal) -> float:
        """Smaller is better under ``goal.objective``."""
        if goal.objective == "cost":
            return self.usd_per_million_tokens
        if goal.objective == "time":
            return self.time_to_train_s
        return -self.tokens_per_s


def fmt_duration(s: float) -> str:
    if s >= 2 * 86400:
        return f"{s / 86400:.1f} d"
    if s >= 2 * 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.0f} min"


def fmt_usd(x: float) -> str:
    if x >= 1e6:
        return f"${x / 1e6:.2f}M"
    if x >= 1e3:
        return f"${x / 1e3:.1f}k"
    return f"${x:.2f}"
