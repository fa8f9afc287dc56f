"""Progress on stderr: shown on a terminal (a pseudo-terminal here), silent with --json or
when stderr is not a terminal."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

from meshplan.progress import Progress, activity

# a search that takes well over the 0.5 s before progress shows (about 3 s on the 2-core
# development machine; the 70B search this used to run now ends in about 0.5 s)
PLAN = [sys.executable, "-m", "meshplan.cli", "plan", "--model", "deepseek-v3", "--gpus",
        "256xH800-SXM-80GB", "--seq-len", "4096", "--global-batch", "4096", "--rerank", "0",
        "--top", "1"]


def _run_on_pty(argv: list[str], env: dict) -> tuple[int, str, str]:
    """stderr on a pseudo-terminal, stdout on a pipe."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out = p.stdout.read().decode()
    rc = p.wait()
    os.close(master)
    return rc, out, b"".join(chunks).decode(errors="replace")


def _env(**kw) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MESHPLAN_PROGRESS"}
    env.update(kw)
    return env


def test_search_shows_progress_on_a_terminal_only():
    rc, out, err = _run_on_pty(PLAN, _env())
    assert rc == 0 and "winner:" in out
    assert "searching (degree points):" in err and "%" in err and "\r" in err
    assert "searching" not in out  # the report itself is untouched
    # --json on the same terminal: silent
    rc, out, err = _run_on_pty(PLAN + ["--json"], _env())
    assert rc == 0 and err == ""
    # not a terminal: silent
    p = subprocess.run(PLAN, capture_output=True, text=True, env=_env(), timeout=120)
    assert p.returncode == 0 and p.stderr == ""


def test_forced_progress_writes_lines():
    buf = io.StringIO()
    os.environ["MESHPLAN_PROGRESS"] = "1"
    try:
        with Progress("rows", total=4, stream=buf, delay_s=0, interval_s=0) as p:
            for _ in range(4):
                p.advance()
        with Progress("quiet", total=4, stream=buf, quiet=True, delay_s=0) as p:
            p.advance()
    finally:
        del os.environ["MESHPLAN_PROGRESS"]
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("rows: 1/4 (25%)") and lines[-1].startswith("rows: 4/4 (100%)")
    assert not any(line.startswith("quiet") for line in lines)


def test_activity_ticks_and_quick_work_draws_nothing():
    import time
    buf = io.StringIO()
    os.environ["MESHPLAN_PROGRESS"] = "1"
    try:
        with activity("simulating", stream=buf, delay_s=0.1, interval_s=0.05):
            time.sleep(0.4)
        n = len(buf.getvalue().splitlines())
        with activity("quick", stream=buf):  # ends before the 0.5 s delay
            pass
    finally:
        del os.environ["MESHPLAN_PROGRESS"]
    assert n >= 2 and buf.getvalue().startswith("simulating: ")
    assert "quick" not in buf.getvalue()
