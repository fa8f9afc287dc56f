"""Traffic: who asks for what, and when.

Open loop: a request rate (Poisson arrivals by default, or evenly spaced; ``inf`` sends
everything at once, the offline "max throughput" benchmark of trtllm-bench / vllm bench
throughput). Closed loop: a fixed number of clients, each sending its next request when the
previous one finishes (vllm bench serve --max-concurrency, SGLang bench_serving
--max-concurrency). Lengths: a fixed value ``2000``, a uniform range ``1000:3000``, or a
CSV trace with columns arrival_s (optional), input_len, output_len. A shared-prefix share
says which part of every prompt is one common prefix that prefix caching computes once.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..runs_csv import EXTRA_FIELDS, read_csv


# The latest arrival a stream may have: event times are absolute float64 seconds, whose
# resolution at 1e9 s is ~0.1 us (2**-52 x 1e9); at 1e12 s it is ~0.1 ms, coarser than a
# decode step, and latencies measured on top of the arrival read 0.
MAX_ARRIVAL_S = 1e9


@dataclass(frozen=True)
class Request:
    id: int
    arrival_s: float
    input_len: int
    output_len: int


@dataclass(frozen=True)
class Lengths:
    lo: int
    hi: int

    def draw(self, rng: random.Random) -> int:
        return self.lo if self.lo == self.hi else rng.randint(self.lo, self.hi)

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2


def parse_lengths(field: str, text: str | int) -> Lengths:
    """``2000`` or ``1000:3000`` (uniform, inclusive)."""
    s = str(text).strip()
    try:
        if ":" in s:
            a, b = (int(x) for x in s.split(":", 1))
        else:
            a = b = int(s)
    except ValueError:
        raise InputError(field, text, "expected a token count like 2000 or a range 1000:3000") from None
    if a < 1 or b < a:
        raise InputError(field, text, "lengths must be positive and the range ordered (LO:HI)")
    return Lengths(a, b)


@dataclass(frozen=True)
class Traffic:
    """A request stream; exactly one of ``rate_per_s`` and ``concurrency`` is set."""

    requests: tuple[Request, ...]
    rate_per_s: float | None = None
    concurrency: int | None = None
    prefix_share: float = 0.0

    def __post_init__(self) -> None:
        if (self.rate_per_s is None) == (self.concurrency is None):
            raise InputError("traffic", None, "give exactly one of --rate and --concurrency")
        if self.rate_per_s is not None and not self.rate_per_s > 0:
            raise InputError("rate", self.rate_per_s, "must be a positive number of requests/s")
        if self.concurrency is not None and self.concurrency < 1:
            raise InputError("concurrency", self.concurrency, "must be a positive integer")
        if not 0.0 <= self.prefix_share < 1.0:
            raise InputError("prefix_share", self.prefix_share, "must be in [0, 1)")
        if not self.requests:
            raise InputError("requests", 0, "need at least one request")
        last = max(r.arrival_s for r in self.requests)
        if last > MAX_ARRIVAL_S:
            raise InputError("arrival_s", last,
                             f"the last request arrives after {MAX_ARRIVAL_S:g} s, beyond which "
                             "the simulator's float64 clock no longer keeps microseconds: raise "
                             "--rate, send fewer --requests, or shorten the trace")

    @property
    def closed_loop(self) -> bool:
        return self.concurrency is not None

    @property
    def offline(self) -> bool:
        """Every request arrives at once (``--rate inf``, or a trace whose arrivals are all
        equal): the offline max-throughput benchmark, with no latency to keep."""
        if self.closed_loop:
            return False
        first = self.requests[0].arrival_s
        return all(r.arrival_s == first for r in self.requests)

    @property
    def mean_input(self) -> float:
        return sum(r.input_len for r in self.requests) / len(self.requests)

    @property
    def mean_output(self) -> float:
        return sum(r.output_len for r in self.requests) / len(self.requests)

    def describe(self) -> str:
        load = (f"{self.rate_per_s:g} req/s" if self.rate_per_s is not None
                else f"{self.concurrency} concurrent")
        n = len(self.requests)
        s = (f"{n} request{'s' if n != 1 else ''}, {load}, input {self.mean_input:.0f} / output "
             f"{self.mean_output:.0f} tokens (mean)")
        return s + (f", shared prefix {self.prefix_share:.0%}" if self.prefix_share else "")

    def with_rate(self, rate_per_s: float, seed: int = 0) -> "Traffic":
        """The same lengths re-timed at another Poisson rate (for goodput searches)."""
        arr = poisson_arrivals(len(self.requests), rate_per_s, random.Random(seed))
        reqs = tuple(Request(r.id, a, r.input_len, r.output_len) for r, a in zip(self.requests, arr))
        return Traffic(reqs, rate_per_s, None, self.prefix_share)


def poisson_arrivals(n: int, rate_per_s: float, rng: random.Random) -> list[float]:
    if math.isinf(rate_per_s):
        return [0.0] * n
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate_per_s)
    return out


def synthetic(num_requests: int, input_len: Lengths, output_len: Lengths,
              rate_per_s: float | None = None, concurrency: int | None = None,
              poisson: bool = True, prefix_share: float = 0.0, seed: int = 0) -> Traffic:
    if num_requests < 1:
        raise InputError("num_requests", num_requests, "must be a positive integer")
    rng = random.Random(seed)
    lens = [(input_len.draw(rng), output_len.draw(rng)) for _ in range(num_requests)]
    if rate_per_s is not None and rate_per_s > 0:
        if poisson:
            arr = poisson_arrivals(num_requests, rate_per_s, random.Random(seed + 1))
        else:
            arr = [0.0 if math.isinf(rate_per_s) else i / rate_per_s for i in range(num_requests)]
    else:
        arr = [0.0] * num_requests
    reqs = tuple(Request(i, a, li, lo) for i, (a, (li, lo)) in enumerate(zip(arr, lens)))
    return Traffic(reqs, rate_per_s, concurrency, prefix_share)


def load_trace(path: str | Path, prefix_share: float = 0.0,
               concurrency: int | None = None) -> Traffic:
    """A CSV of requests: input_len, output_len and (for open loop) arrival_s."""
    _, rows = read_csv(path, "trace")
    if not rows:
        raise InputError("trace", str(path), "no rows; need columns input_len, output_len, arrival_s")
    need = ("input_len", "output_len") + (() if concurrency else ("arrival_s",))
    for c in need:
        if c not in rows[0]:
            raise InputError("trace", str(path), f"missing column {c!r}; need " + ", ".join(need))
    reqs = []
    for i, r in enumerate(rows, start=2):
        if r.get(EXTRA_FIELDS):  # its cells are not where the header says
            raise InputError("trace", str(path), r[EXTRA_FIELDS])
        if not concurrency and not r.get("arrival_s"):  # (a blank cell was taken as 0)
            raise InputError(f"trace line {i}: arrival_s", "", "blank; every request of an"
                             " open-loop trace needs its arrival (seconds, >= 0)")
        # each cell checked on its own, so the error names the column and its value
        a = 0.0
        if not concurrency:
            try:
                a = float(r["arrival_s"])
            except (TypeError, ValueError):
                a = math.nan
            if not (math.isfinite(a) and a >= 0):
                raise InputError(f"trace line {i}: arrival_s", r["arrival_s"],
                                 "a finite number of seconds >= 0")
        lens = []
        for col in ("input_len", "output_len"):
            try:
                n = int(r[col])
            except (TypeError, ValueError):
                n = 0
            if n < 1:
                raise InputError(f"trace line {i}: {col}", r[col], "a whole number of tokens >= 1")
            lens.append(n)
        reqs.append((a, *lens))
    reqs.sort(key=lambda x: x[0])
    t0 = reqs[0][0]
    out = tuple(Request(i, a - t0, li, lo) for i, (a, li, lo) in enumerate(reqs))
    if concurrency:
        return Traffic(out, None, concurrency, prefix_share)
    span = out[-1].arrival_s
    rate = (len(out) - 1) / span if span > 0 else math.inf
    return Traffic(out, rate, None, prefix_share)
