"""``meshplan simulate``: simulate one training step of a plan's pipeline, event by event.

The plan comes from the scenario's [plan] table and/or the plan flags; with no parallel
degrees given, the search runs (other plan flags pin it) and its winner is simulated.
Prints the per-rank breakdown and the critical path; writes a Perfetto trace (--trace), a
timeline picture (--png), memory per stage over the step (--mem-png) and the per-rank
action lists in torch.distributed.pipelining's CSV format (--schedule-csv).
"""

from __future__ import annotations

import json
import os

from ..errors import InputError, NoPlanFits, require_nonneg_int
from ..inputs import check_not_read
from ..progress import activity
from ._common import (add_engine_arg, add_plan_args, add_scenario_args, check_engine,
                      engine_of, plan_from_args, plan_overrides, scenario_from_args)
from ._profile import add_profile_arg, apply_profile_arg, check_generation

GiB = 2**30
DEGREES = ("dp", "tp", "pp", "cp", "ep", "etp")


OUTPUTS = (("trace", ".json"), ("png", ".png"), ("mem_png", ".png"), ("schedule_csv", ".csv"))


def _check_outputs(args) -> None:
    """Refuse bad output names before any work, so nothing is half written."""
    seen: dict[str, str] = {}
    for flag, suffix in OUTPUTS:
        path = getattr(args, flag)
        name = "--" + flag.replace("_", "-")
        if path and not path.lower().endswith(suffix):
            raise InputError(name, path, f"file name must end in {suffix}")
        if path:  # --png a.png --mem-png a.png: the second picture replaced the first
            real = os.path.realpath(path)
            if real in seen:
                raise InputError(name, path, f"is also {seen[real]}; give each output its "
                                 "own file")
            seen[real] = name


def _check_not_inputs(args) -> None:
    """Refuse an output that is a file this command read (the model's config.json, ...),
    once the inputs are read and before the simulation."""
    for flag, _ in OUTPUTS:
        if getattr(args, flag):
            check_not_read("--" + flag.replace("_", "-"), getattr(args, flag))


def _write_outputs(args, sim, title: str, written: list) -> None:
    """Write the requested files, appending (path, created by this run) for each."""
    from pathlib import Path

    def track(path: str, write) -> None:
        p = Path(path)
        new = not p.exists()
        write()
        written.append((p, new))

    if args.schedule_csv:
        from ..export.trace import atomic_write
        from ..pipeline.actions import format_csv
        track(args.schedule_csv, lambda: atomic_write(Path(args.schedule_csv),
                                                      format_csv(sim.schedule.order)))
    if args.trace:
        from ..export.trace import write_trace
        track(args.trace, lambda: write_trace(sim, args.trace, title))
    if args.png:
        from ..export.plots import schedule_png
        track(args.png, lambda: schedule_png(sim, args.png, title))
    if args.mem_png:
        from ..export.plots import memory_png
        track(args.mem_png, lambda: memory_png(sim, args.mem_png, title))


def _pick_plan(args, sc):
    over = plan_overrides(args)
    if sc.plan is not None or any(k in over for k in DEGREES):
        return plan_from_args(args, sc), None
    from ..search.search import search

    res = search(sc.model, sc.cluster, sc.workload, pins=over, engine=engine_of(args))
    if res.best is None:
        raise NoPlanFits("no plan fits: the search rejected every plan; "
                         "see `meshplan plan` for the reasons")
    return res.best.plan, "winner of the search"


def _run(args) -> int:
    require_nonneg_int("path_lines", args.path_lines)
    _check_outputs(args)
    prof = apply_profile_arg(args)
    sc = scenario_from_args(args)
    _check_not_inputs(args)
    check_generation(prof, sc.cluster.gpu)
    plan, origin = _pick_plan(args, sc)
    check_engine(engine_of(args), sc, plan)
    from ..cost import estimate
    from ..pipeline.from_cost import simulate_estimate
    from ..pipeline.schedules import schedule_for_plan

    est = estimate(sc.model, sc.cluster, sc.workload, plan)
    schedule_for_plan(plan, est.num_microbatches)  # InputError for impossible schedules
    with activity(f"simulating {est.num_microbatches:,} micro-batches on {plan.pp} pipeline "
                  "ranks", quiet=args.json):
        ps = simulate_estimate(est, overlap_p2p=False if args.blocking_p2p else None)
    sim = ps.sim
    title = f"{sc.model.name} on {sc.cluster.num_gpus}x{sc.cluster.gpu.name}: {plan.describe()}"
    # each file is written whole (atomically); if a later one cannot be written, the ones this
    # run created are removed again, so a failure leaves no partial set of outputs
    written = []
    try:
        _write_outputs(args, sim, title, written)
    except (InputError, OSError) as e:
        for path, new in written:
            if new:
                path.unlink(missing_ok=True)
        if isinstance(e, InputError):
            raise
        raise InputError("output", e.filename, f"cannot write ({e.strerror})") from None
    written = [str(p) for p, _ in written]
    iv = _interval(sc, est, ps)
    if args.json:
        out = {"plan": plan.to_dict(), "plan_origin": origin or "given",
               "interval": iv.to_json(),
               "step_time_s": ps.step_time_s, "step_parts": ps.step_parts,
               "closed_form_step_time_s": est.step_time_s,
               "closed_form_parts": est.step_time.parts,
               "tokens_per_s_per_gpu": ps.tokens_per_s_per_gpu, "mfu": ps.mfu,
               "fits": ps.fits, "peak_memory_bytes": ps.peak_memory_bytes,
               "memory_per_rank_bytes": ps.memory_parts, "simulation": sim.summary(),
               "written": written}
        print(json.dumps(out, indent=2))
        return 0
    _print(sc, plan, origin, est, ps, args.path_lines, iv)
    for w in written:
        print(f"wrote {w}")
    return 0


def _interval(sc, est, ps):
    """The 10-90% interval (meshplan.uncertainty) around the simulated step and memory."""
    from ..uncertainty import around_simulation, interval

    return around_simulation(interval(est, sc.model, sc.cluster,
                                      framework=sc.workload.framework), est, ps)


def _print(sc, plan, origin, est, ps, path_lines: int, iv=None) -> None:
    sim = ps.sim
    sched = sim.schedule
    print(f"{sc.model.name} on {sc.cluster.num_gpus}x{sc.cluster.gpu.name}, "
          f"seq {sc.workload.seq_len}, global batch {sc.workload.global_batch}")
    print(f"plan: {plan.describe()}" + (f"  ({origin})" if origin else ""))
    print(f"schedule {sched.name}: pp={sched.pp} vpp={sched.vpp} "
          f"micro-batches={sched.num_microbatches}, {sched.num_actions()} compute actions")
    print(f"step time: simulated {ps.step_time_s:.4f} s, closed form {est.step_time_s:.4f} s; "
          f"{ps.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, MFU {ps.mfu:.1%}")
    print("  " + ", ".join(f"{k.removesuffix('_s')} {max(v, 0.0):.4f} s"
                           for k, v in ps.step_parts.items()))
    print(f"memory: peak {ps.peak_memory_bytes / GiB:.1f} GiB per GPU "
          f"(closed form {est.peak_memory_bytes / GiB:.1f}), capacity "
          f"{est.capacity_bytes / GiB:.0f} GiB: {'fits' if ps.fits else 'DOES NOT FIT'}"
          + ("; may not fit at the 90th percentile" if iv and ps.fits and iv.may_not_fit else ""))
    if iv:
        print(f"10-90% interval: step time {iv.step_time_s[0]:.4f}-{iv.step_time_s[1]:.4f} s, "
              f"tokens/s/GPU {iv.tokens_per_s_per_gpu[0]:,.0f}-{iv.tokens_per_s_per_gpu[1]:,.0f}"
              f", peak memory {iv.peak_memory_gib[0]:.1f}-{iv.peak_memory_gib[1]:.1f} GiB")
    print()
    print(f"{'rank':>4} {'stages':<10}{'busy s':>10}{'idle s':>10}{'bubble':>8}"
          f"{'in flight':>10}{'act GiB':>9}{'mem GiB':>9}")
    for r in sim.ranks:
        stages = ",".join(str(s) for s in sched.rank_stages(r.rank))
        mem = sum(ps.memory_parts[r.rank].values()) / GiB
        print(f"{r.rank:>4} {stages:<10}{r.busy_s:>10.4f}{r.idle_s:>10.4f}"
              f"{r.bubble_fraction:>8.1%}{r.peak_in_flight:>10}"
              f"{r.peak_act_bytes / GiB:>9.2f}{mem:>9.1f}")
    path = sim.critical_path
    if path:
        comp = sum(e - s for k, *_, s, e in path if k == "compute")
        p2p = sum(e - s for k, *_, s, e in path if k == "p2p")
        print()
        print(f"critical path: {len(path)} segments, compute {comp:.4f} s, "
              f"transfers {p2p:.4f} s, outside the pipeline {ps.step_time_s - comp - p2p:.4f} s")
        show = path if len(path) <= path_lines else path[:path_lines // 2] + [None] + \
            path[-(path_lines - path_lines // 2):]
        for seg in show:
            if seg is None:
                print("    ...")
                continue
            kind, where, label, s, e = seg
            print(f"    {s:10.4f} - {e:10.4f} s  {kind:<9} {where!s:<8} {label}")


def register(sub) -> None:
    p = sub.add_parser("simulate", help="simulate a plan's pipeline step event by event "
                                        "(or the search's winner), write trace and pictures")
    add_scenario_args(p)
    add_plan_args(p, " (none: simulate the search's winner)")
    add_profile_arg(p)
    add_engine_arg(p)
    o = p.add_argument_group("output")
    o.add_argument("--trace", metavar="FILE.json", help="Chrome/Perfetto trace")
    o.add_argument("--png", metavar="FILE.png", help="timeline picture")
    o.add_argument("--mem-png", dest="mem_png", metavar="FILE.png",
                   help="activation memory per stage over the step")
    o.add_argument("--schedule-csv", dest="schedule_csv", metavar="FILE.csv",
                   help="per-rank action lists in torch.distributed.pipelining's CSV format")
    o.add_argument("--json", action="store_true", help="print JSON instead of the table")
    o.add_argument("--blocking-p2p", action="store_true",
                   help="sends block the compute stream (default: as the engine runs the "
                        "schedule, cost/engine_p2p.py: torch's and Megatron's 1F1B and "
                        "DeepSpeed block, the others send asynchronously)")
    o.add_argument("--path-lines", type=int, default=12, help="critical-path lines to print")
    p.set_defaults(func=_run)
