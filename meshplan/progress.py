"""Progress of long work on stderr: one line redrawn in place on a terminal.

    with Progress("searching", total=n, quiet=args.json) as p:
        for ...: p.advance()
    with activity("simulating 4096 micro-batches", quiet=args.json):
        long_call()          # a ticker thread shows the elapsed time

Shown only when stderr is a terminal and the output is not machine-readable (``quiet``,
e.g. --json). MESHPLAN_PROGRESS=1 forces it on (lines, not redraws, when stderr is not a
terminal: what the tests read), MESHPLAN_PROGRESS=0 off. Nothing is drawn for work that ends
within ``delay_s`` (0.5 s), so quick commands print exactly what they printed before.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager


def enabled(stream=None, quiet: bool = False) -> bool:
    if quiet:
        return False
    env = os.environ.get("MESHPLAN_PROGRESS", "")
    if env in ("0", "1"):
        return env == "1"
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A counted task: 'label: done/total (pct) elapsed'; without a total, done and time."""

    def __init__(self, label: str, total: int | None = None, *, quiet: bool = False,
                 stream=None, delay_s: float = 0.5, interval_s: float = 0.1):
        self.label, self.total, self.done = label, total, 0
        self.stream = stream or sys.stderr
        self.on = enabled(self.stream, quiet)
        self.tty = self.on and _isatty(self.stream)
        self.delay_s, self.interval_s = delay_s, interval_s
        self.t0 = time.monotonic()
        self._last = 0.0
        self.drawn = 0  # how many times a line was written
        self._lock = threading.Lock()

    def text(self) -> str:
        el = time.monotonic() - self.t0
        if self.total:
            pct = 100.0 * self.done / self.total
            return f"{self.label}: {self.done:,}/{self.total:,} ({pct:.0f}%) {el:.1f} s"
        return f"{self.label}: {self.done:,} done, {el:.1f} s" if self.done else \
            f"{self.label}: {el:.1f} s"

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.draw()

    def draw(self, force: bool = False) -> None:
        if not self.on:
            return
        now = time.monotonic()
        if not force and (now - self.t0 < self.delay_s or now - self._last < self.interval_s):
            return
        with self._lock:
            self._last = now
            line = self.text()
            self.stream.write(f"\r{line}\x1b[K" if self.tty else line + "\n")
            self.stream.flush()
            self.drawn += 1

    def close(self) -> None:
        if self.on and self.drawn and self.tty:
            with self._lock:
                self.stream.write("\r\x1b[K")  # leave the terminal as the output left it
                self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def activity(label: str, *, quiet: bool = False, stream=None, delay_s: float = 0.5,
             interval_s: float = 0.5):
    """Work without a count: a daemon thread redraws the label and the elapsed time."""
    p = Progress(label, quiet=quiet, stream=stream, delay_s=delay_s, interval_s=interval_s)
    if not p.on:
        yield p
        return
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(min(interval_s, 0.1)):
            p.draw()

    t = threading.Thread(target=tick, daemon=True)
    t.start()
    try:
        yield p
    finally:
        stop.set()
        t.join()
        p.close()
