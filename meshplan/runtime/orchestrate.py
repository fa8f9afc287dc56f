"""What ``meshplan run`` does on the launching machine: check, start ranks, collect, report.

Local runs start torchrun (a c10d rendezvous on a free port) with one process per rank
(GPUs if the plan's device is cuda, else CPU/gloo); several machines get the torchrun command
of each node printed instead. Results come back as ``rank-R.json`` files from the workers.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from ..errors import InputError, RunFailed
from .launch import format_command, free_port, scratch_dir, torchrun_command
from .train import RunConfig
from .worker import config_to_json


def start_local(cfg: RunConfig, run: dict, out_dir: str | None = None, max_restarts: int = 0,
                env: dict | None = None, timeout_s: float | None = None) -> dict:
    """Run ``cfg`` on this machine with torchrun; return the per-rank results."""
    world = cfg.plan.world_size
    out = Path(out_dir or scratch_dir())
    out.mkdir(parents=True, exist_ok=True)
    for f in [*out.glob("rank-*.json"), *out.glob("error-*.txt"), *out.glob("failure-*.txt")]:
        f.unlink()
    conf = out / "run.json"
    conf.write_text(config_to_json(cfg, out=str(out), **run))
    port = free_port()
    # the c10d rendezvous (restarts after a crash need it) listens on --rdzv-endpoint, not on
    # --master-port: without one every run took 127.0.0.1:29400, and a second run started
    # while the first ran (or a leftover one) failed to connect
    cmd = torchrun_command(world, 1, 0, "127.0.0.1", port, [str(conf)], max_restarts,
                           rdzv_id=f"meshplan-{os.getpid()}-{port}")
    e = dict(os.environ)
    e["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    e.setdefault("OMP_NUM_THREADS", "1")
    e["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2])]
                                      + [p for p in [e.get("PYTHONPATH")] if p])
    e.update(env or {})
    proc = _run_torchrun(cmd, e, timeout_s)
    errors = sorted(out.glob("error-*.txt"))
    if errors:
        raise InputError(*_split_error(errors[0].read_text()))
    results = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    if proc.returncode != 0 or len(results) != world:
        log = out / "torchrun.log"
        log.write_text((proc.stdout or "") + (proc.stderr or ""))
        failures = sorted(out.glob("failure-*.txt"))
        where = (f"rank {failures[0].stem.split('-')[1]}: {last_error(failures[0].read_text())}"
                 if failures else last_error(proc.stderr))
        raise RunFailed(f"the run failed (torchrun exit code {proc.returncode}, "
                        f"{len(results)} of {world} ranks finished; {where}); full log: {log}")
    return {"results": sorted(results, key=lambda r: r["rank"]), "out": str(out),
            "log": proc.stderr}


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; torch's workers run in sessions of their own,
    so a process-group signal would miss them)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def stop_tree(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """Stop torchrun and its workers: SIGTERM to each (torchrun forwards it too), then
    SIGKILL to any still alive after ``grace_s``; only the processes this run started."""
    import signal
    import time

    pids = [proc.pid] + _descendants(proc.pid)
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    pids += [p for p in _descendants(proc.pid) if p not in pids]
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _run_torchrun(cmd: list[str], env: dict, timeout_s: float | None):
    """subprocess.run for torchrun, but a Ctrl-C, a SIGTERM (``timeout``, a batch scheduler's
    cancel) or a timeout stops every worker it started: torchrun runs in a session of its
    own, so a signal to this process alone left it and its workers training."""
    import signal
    import threading

    def terminated(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup
        raise SystemExit(128 + signum)

    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, terminated) if main else None
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException:
        stop_tree(proc)
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, old)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def last_error(log: str | None) -> str:
    """The last exception line a worker printed (``SomeError: message``), else the last line."""
    lines = [ln.strip() for ln in (log or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        head = ln.split(":", 1)[0].split(".")[-1]
        if ":" in ln and (head.endswith("Error") or head.endswith("Exception")) and " " not in head:
            return ln
    return lines[-1] if lines else "no output"


def _split_error(text: str) -> tuple[str, object, str]:
    """A worker's InputError (worker.main writes its field, value and allowed as JSON)."""
    d = json.loads(text)
    return d["field"], d["value"], d["allowed"]


def check_nnodes(world: int, nnodes: int) -> None:
    """Refuse a node count that does not divide the plan's ranks (each node runs as many)."""
    if world % nnodes:
        raise InputError("nnodes", nnodes, f"must divide the plan's world size ({world})")


def node_commands(cfg: RunConfig, run: dict, nnodes: int, master: str, port: int,
                  conf_path: str, max_restarts: int = 0) -> list[str]:
    """The command to start on each node of a multi-machine run. With ``max_restarts`` the
    nodes restart after a crash (before, it was dropped: every node printed
    --max-restarts=0 whatever was asked) through a c10d rendezvous at ``master:port`` with
    one id shared by the nodes (torchrun's static one is not for restarts)."""
    world = cfg.plan.world_size
    check_nnodes(world, nnodes)
    Path(conf_path).write_text(config_to_json(cfg, **run))
    rdzv_id = f"meshplan-{port}" if max_restarts else None
    return [format_command(torchrun_command(world // nnodes, nnodes, n, master, port, [conf_path],
                                            max_restarts, rdzv_id))
            for n in range(nnodes)]


def summarize(cfg: RunConfig, results: list[dict]) -> dict:
    """Measured step time (mean over steps after the first), throughput, memory per rank.

    A run of one step has no step after the first: its step time is that first step (caches,
    pipeline metadata, the allocator's first requests), reported with ``steps_timed`` 0 (it
    said 1, as if a step after the first had been timed)."""
    times = [max(r["step_times_s"][i] for r in results)
             for i in range(len(results[0]["step_times_s"]))]
    steady = times[1:]
    step_s = sum(steady or times) / len(steady or times)
    tokens = cfg.seq_len * cfg.global_batch
    pp_peak: dict[int, dict] = {}
    for r in results:
        p = r["coords"]["pp"]
        tot = r["memory"].get("Total", 0)
        if tot >= pp_peak.get(p, {}).get("Total", -1):
            pp_peak[p] = r["memory"]
    return {"step_time_s": step_s, "first_step_s": times[0] if times else 0.0,
            "tokens_per_s": tokens / step_s, "tokens_per_s_per_gpu": tokens / step_s / len(results),
            "losses": results[0]["losses"], "memory_by_pp_rank": pp_peak,
            "device": results[0]["device"], "steps_timed": len(steady)}
