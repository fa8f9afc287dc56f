"""A meshplan command run in the test's own process: (exit code, stdout, stderr) as a
subprocess.CompletedProcess. The runtime tests share one pytest worker, which has imported
torch.distributed once; a subprocess pays that import (4-8 s on the 2-core machine) again per
call. Refusals are checked this way, and `run` commands whose workers torchrun starts as
processes of their own anyway; test_checkpoint's crash restart and the dry run's CLI test
still go through a real process, which is what a user's shell runs."""

import contextlib
import io
import subprocess


def cli(*args: str) -> subprocess.CompletedProcess:
    from meshplan.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())
