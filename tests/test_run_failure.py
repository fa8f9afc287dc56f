"""A run whose workers fail: one line naming what failed and where the full log is, exit 1,
no traceback from meshplan itself (the workers' own tracebacks go to the log file)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.runtime.orchestrate import last_error

ROOT = Path(__file__).resolve().parents[1]

TRACEBACK = """Traceback (most recent call last):
  File "worker.py", line 157, in main
    res = run_worker(run, rank, device)
  File "train.py", line 12, in train_step
    loss = self.step()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB
"""


def test_last_error_is_the_exception_line():
    assert last_error(TRACEBACK) == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert last_error("ValueError: bad\n  some context after\n") == "ValueError: bad"
    assert last_error("no exception here\nlast words\n") == "last words"
    assert last_error("") == "no output"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (meshplan[run])")
def test_a_killed_rank_gives_one_line_and_exit_1(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MESHPLAN_FAULT="1:1")
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "run", "--model", "tiny-llama",
                        "--dp", "2", "--steps", "3", "--device", "cpu", "--seq-len", "32",
                        "--global-batch", "4", "--out", str(tmp_path / "out")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("meshplan run: the run failed (torchrun exit code")
    assert "0 of 2 ranks finished" in lines[0] or "1 of 2 ranks finished" in lines[0]
    log = re.search(r"full log: (\S+)$", lines[0]).group(1)
    assert Path(log).parent == tmp_path / "out" and Path(log).stat().st_size > 0
    assert not list((tmp_path / "out").glob("rank-*.json"))[1:]  # not reported as a result
