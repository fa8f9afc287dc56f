"""Starting ranks: forked from this process (tests, ``meshplan run`` on one machine) or by
torchrun (users, restarts after a crash).

Facts found with torch 2.13 CPU/gloo: forking from a parent that already imported torch
starts 8 ranks about twice as fast as torchrun; a worker should end with
``destroy_process_group()`` and then ``os._exit`` (an abort at interpreter exit otherwise);
torchrun restarts need ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` (stale rendezvous keys).
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import tempfile
import time
import traceback

from ..errors import InputError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_for(device_type: str) -> str:
    return "nccl" if device_type == "cuda" else "gloo"


_INPUT_ERROR = "InputError"  # the tag of a rank's InputError report (fork_ranks)


def fork_ranks(fn, world: int, *args, timeout_s: float = 300, device_type: str = "cpu",
               threads: int = 1, init_process_group: bool = True):
    """Run ``fn(rank, world, *args)`` in ``world`` forked ranks; return their results by rank.

    Any rank's exception is re-raised here as RuntimeError with that rank's traceback (the
    others are killed); so is a timeout. A rank killed by a signal, with nothing but its
    peers' lost connections reported, raises RankCrashed (a RuntimeError).
    """
    import multiprocessing as mp

    import torch.distributed as dist

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    port = free_port()

    def child(rank):
        code = 0
        try:
            import torch
            torch.set_num_threads(threads)
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                              WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
            if init_process_group:
                dist.init_process_group(backend_for(device_type), rank=rank, world_size=world,
                                        init_method=f"tcp://127.0.0.1:{port}")
            report = (rank, True, fn(rank, world, *args))
        except InputError as e:  # bad input the rank found: the parent raises it as is
            # (as a tuple: an InputError does not unpickle, its args are the message)
            report = (rank, False, (_INPUT_ERROR, e.field, str(e.value) if not isinstance(
                e.value, (int, float, str, type(None))) else e.value, e.allowed))
            code = 2
        except BaseException:  # noqa: BLE001 - report everything to the parent
            report = (rank, False, traceback.format_exc())
            code = 1
        try:
            # the report reaches the pipe before this rank's connections close: a failing
            # rank's peers then fail in a collective, and their reports come after its own
            q.put(report)
            q.close()
            q.join_thread()  # the queue's feeder thread must flush before os._exit
        finally:
            try:
                if dist.is_initialized():
                    dist.destroy_process_group()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)

    procs = [ctx.Process(target=child, args=(r,), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    results, deadline = {}, time.monotonic() + timeout_s
    try:
        while len(results) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"ranks timed out after {timeout_s}s; finished: {sorted(results)}")
            try:
                rank, ok, res = q.get(timeout=min(left, 1.0))
            except Exception:  # queue.Empty
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in results
                        and p.exitcode not in (0, None)]
                if dead:
                    time.sleep(0.5)
                    if q.empty():
                        raise _failure({}, procs, q, results) from None
                continue
            if not ok:
                if isinstance(res, tuple) and res[0] == _INPUT_ERROR:
                    raise InputError(*res[1:])  # one line, exit 2, as `meshplan run` says it
                raise _failure({rank: res}, procs, q, results)
            results[rank] = res
    finally:
        for p in procs:
            if p.is_alive():
                p.join(timeout=5 if len(results) == world else 0)
            if p.is_alive():
                p.kill()
                p.join()
    return [results[r] for r in range(world)]


class RankCrashed(RuntimeError):
    """A rank was killed by a signal (a native crash: no Python report of its own) and every
    other rank's report is only the symptom of losing it."""


# What a rank prints when another rank went away first: a consequence, not the cause.
_PEER_SYMPTOMS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe",
                  "remote worker crashing", "Check the logs of the remote worker")


def _failure(failed: dict, procs, q, results: dict, grace_s: float = 5.0) -> RuntimeError:
    """The error to raise: every failed rank's report, the cause first; RankCrashed where the
    cause is only a rank killed by a signal. ``failed`` may be empty (a rank died silently).

    When one rank fails, its peers fail soon after with a closed connection. A child flushes
    its report before it closes its process group, so the cause is normally first; but a rank
    that closes its group itself before raising, or one killed by a signal, leaves only its
    peers' symptoms. So this waits up to ``grace_s`` for the other ranks to report or exit,
    then puts first the reports that are not a peer's symptom, and names ranks that ended
    without a report (killed by a signal: a negative exit code).
    """
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            rank, ok, res = q.get(timeout=0.2)
        except Exception:  # queue.Empty
            if all(not p.is_alive() for p in procs) and q.empty():
                break
            continue
        if ok:
            results[rank] = res
        else:
            failed[rank] = res
    silent = {r: p.exitcode for r, p in enumerate(procs)
              if r not in failed and r not in results and not p.is_alive()
              and p.exitcode not in (0, None)}

    def symptom(text: str) -> bool:
        return any(s in text for s in _PEER_SYMPTOMS)

    order = sorted(failed, key=lambda r: (symptom(failed[r]), r))
    crashed = (any(c < 0 for c in silent.values())
               and all(symptom(text) for text in failed.values()))
    lines = []
    if silent:
        lines.append("rank(s) ended without a report, exit codes "
                     + ", ".join(f"{r}: {c}" for r, c in sorted(silent.items()))
                     + " (negative: killed by that signal)")
    for r in order:
        tag = " (a peer went away first)" if symptom(failed[r]) else ""
        lines.append(f"rank {r} failed{tag}:\n{failed[r]}")
    return (RankCrashed if crashed else RuntimeError)("\n".join(lines))


def torchrun_command(nproc_per_node: int, nnodes: int, node_rank: int | str, master: str,
                     port: int, worker_args: list[str], max_restarts: int = 0,
                     rdzv_id: str | None = None) -> list[str]:
    """The torchrun command line for one node: a static rendezvous at ``master:port``, or,
    with ``rdzv_id``, a c10d one there (what torch's elastic quickstart gives a
    fault-tolerant job, docs/stable/elastic/quickstart: restarts after a crash need it)."""
    cmd = [sys.executable, "-m", "torch.distributed.run",
           f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}",
           f"--node-rank={node_rank}", f"--master-addr={master}", f"--master-port={port}",
           f"--max-restarts={max_restarts}", "-m", "meshplan.runtime.worker"]
    if rdzv_id is not None:
        cmd[3:3] = ["--rdzv-backend=c10d", f"--rdzv-endpoint={master}:{port}",
                    f"--rdzv-id={rdzv_id}"]
    return cmd + worker_args


def format_command(cmd: list[str]) -> str:
    env = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 "
    return env + " ".join(shlex.quote(c) for c in cmd)


def require_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise InputError("torch", None, "the runtime needs PyTorch: pip install 'meshplan[run]'") from None


def scratch_dir(prefix: str = "meshplan-") -> str:
    return tempfile.mkdtemp(prefix=prefix)
