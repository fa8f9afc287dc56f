"""Prices: US dollars per GPU-hour by GPU type (catalog/prices.toml), with per-type overrides.

The catalog holds on-demand list prices read from public cloud price pages, each with its
provider, page and date, and a flag where the figure is a stated estimate. A user's own
price (``--price H100-SXM-80GB=2.49`` or ``price = ...`` in a pool table) replaces it.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import InputError

CATALOG = Path(__file__).parent / "catalog" / "prices.toml"


@dataclass(frozen=True)
class Price:
    usd_per_gpu_hour: float
    provider: str = ""
    source: str = ""
    date: str = ""
    estimate: bool = False

    @property
    def usd_per_gpu_s(self) -> float:
        return self.usd_per_gpu_hour / 3600.0


def check_usd(field: str, value: object) -> float:
    """A price in dollars: a finite number >= 0 (free GPUs are allowed: owned hardware)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(field, value, "must be a number of US dollars per GPU-hour") from None
    if not math.isfinite(v) or v < 0:
        raise InputError(field, value, "must be a finite number of dollars >= 0")
    return v


@lru_cache(maxsize=1)
def catalog_prices() -> dict[str, Price]:
    data = tomllib.loads(CATALOG.read_text(encoding="utf-8"))["price"]
    return {name: Price(float(d["usd_per_gpu_hour"]), d.get("provider", ""), d.get("source", ""),
                        d.get("date", ""), bool(d.get("estimate", False)))
            for name, d in data.items()}


def parse_price_overrides(items: list[str] | None, known: dict) -> dict[str, float]:
    """``["H100-SXM-80GB=2.49", ...]`` -> {catalog name: usd per GPU-hour}."""
    out: dict[str, float] = {}
    lower = {k.lower(): k for k in known}
    for item in items or []:
        for part in str(item).split(","):
            if not part.strip():
                continue
            name, sep, usd = part.partition("=")
            if not sep:
                raise InputError("--price", part, "expected GPU=USD_PER_GPU_HOUR, e.g. H100-SXM-80GB=2.49")
            key = lower.get(name.strip().lower())
            if key is None:
                raise InputError("--price", part, "unknown GPU; known: " + ", ".join(known))
            out[key] = check_usd("--price", usd.strip())
    return out


def price_of(gpu_name: str, overrides: dict[str, float] | None = None) -> Price:
    """The price of one GPU type: the override if given, else the catalog's."""
    if overrides and gpu_name in overrides:
        return Price(overrides[gpu_name], "your price", "given on the command line or scenario",
                     "yours")
    p = catalog_prices().get(gpu_name)
    if p is None:
        raise InputError("price", gpu_name,
                         "no catalog price for this GPU; give one with --price NAME=USD")
    return p
