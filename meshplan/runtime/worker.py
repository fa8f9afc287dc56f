"""One rank of ``meshplan run``: started by torchrun (``python -m meshplan.runtime.worker
CONFIG.json``) or forked; trains, checkpoints, measures, writes ``rank-R.json``.

Measurement: step time is wall time per optimizer step (the first step, which builds
caches and pipeline metadata, is reported apart); peak memory is
``torch.cuda.max_memory_allocated`` on a GPU and, on CPU, the peak of PyTorch's
``MemTracker`` (by category: parameters, gradients, optimizer states, activations,
temporaries) over one extra step that is not timed.

Fault injection for the crash test: ``MESHPLAN_FAULT=RANK:STEP`` kills that rank with
SIGKILL when it starts optimizer step STEP, in the first attempt only
(``TORCHELASTIC_RESTART_COUNT`` 0).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist

from ..errors import InputError
from ..plan import Plan
from ..specs.model import ModelSpec
from . import checkpoint
from .launch import backend_for
from .data_parallel import ZERO_BUBBLE
from .train import RunConfig, Trainer


def config_to_json(cfg: RunConfig, **run) -> str:
    d = {k: v for k, v in asdict(cfg).items() if k not in ("spec", "plan")}
    d["spec"] = asdict(cfg.spec)
    d["plan"] = cfg.plan.to_dict()
    d.update(run)
    return json.dumps(d)


def config_from_dict(d: dict) -> tuple[RunConfig, dict]:
    d = dict(d)
    spec = ModelSpec(**d.pop("spec"))
    plan = Plan(**d.pop("plan"))
    fields = set(RunConfig.__dataclass_fields__) - {"spec", "plan"}
    cfg = RunConfig(spec, plan, **{k: d.pop(k) for k in list(d) if k in fields})
    return cfg, d


def _fault(rank: int, step: int) -> None:
    spec = os.environ.get("MESHPLAN_FAULT", "")
    if not spec or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    r, s = (int(x) for x in spec.split(":"))
    if r == rank and s == step:
        os.kill(os.getpid(), signal.SIGKILL)


def step_mem_tracker(split_backward: bool = False):
    """A MemTracker that accepts a root module called once per micro-batch.

    MemTracker refuses a second forward of a root module (it assumes a new iteration);
    gradient accumulation and pipeline schedules do exactly that within one step, so the
    root's per-module record is restarted instead. The global peak by category, which is
    what is reported, is unaffected.
    """
    from copy import deepcopy

    from torch.distributed._tools.mem_tracker import _TOTAL_KEY, MemTracker
    from torch.distributed._tools.mod_tracker import ModTracker

    class LeafSafeModTracker(ModTracker):
        """Hooks the gradients of a module's non-leaf inputs only: torch 2.13's multi-grad
        hook on a leaf (a pipeline stage's received activation) raises inside
        ``autograd.grad``, which zero-bubble schedules use for the input gradient (I)."""

        def _fw_pre_hook(self, mod, input):
            leaf = [isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf
                    for a in (input if isinstance(input, tuple) else (input,))]
            if any(leaf):
                input = tuple(a for a, lf in zip(input, leaf) if not lf)
            super()._fw_pre_hook(mod, input)

    class StepMemTracker(MemTracker):
        def __init__(self):
            super().__init__()
            if split_backward:  # else keep torch's tracker: same figures as before
                self._mod_tracker = LeafSafeModTracker()

        def _pre_fw_hook(self, module, inputs):
            try:
                super()._pre_fw_hook(module, inputs)
            except NotImplementedError:
                self.memory_tracking.pop(module, None)
                super()._pre_fw_hook(module, inputs)

        def _update_peak_stats(self, peak_state) -> None:
            # The global peak only: torch's version also walks every tracked module on
            # each allocation to keep per-module peaks, which nothing here reads (the
            # reports take get_tracker_snapshot("peak"), the global one), at half the
            # time of a dry run of Llama 3.1 8B's stage (2026-11-28, torch 2.13 on CPU).
            for dev, dev_snap in self._curr_mem_snap.items():
                if self._peak_mem.get(dev, 0) < dev_snap[_TOTAL_KEY]:
                    self._peak_mem[dev] = dev_snap[_TOTAL_KEY]
                    self._peak_mem_snap[dev] = deepcopy(dev_snap)

    return StepMemTracker()


def measure_memory_cpu(trainer: Trainer, step: int) -> dict:
    """Peak bytes by category over one step, from PyTorch's MemTracker."""
    plan = trainer.cfg.plan
    mt = step_mem_tracker(plan.pp > 1 and plan.schedule in ZERO_BUBBLE)
    mt.track_external(*trainer.parts, *trainer.optimizers)
    with mt:
        trainer.train_step(step)
    trainer.step_times_s.pop()
    peak = mt.get_tracker_snapshot("peak")
    snap = next(iter(peak.values())) if peak else {}
    return {getattr(k, "value", str(k)): int(v) for k, v in snap.items()}


def run_worker(run: dict, rank: int, device: torch.device) -> dict:
    cfg, extra = config_from_dict(run)
    trainer = Trainer(cfg, device)
    ckpt_dir, every = extra.get("ckpt_dir"), int(extra.get("ckpt_every") or 0)
    start, history = 0, []
    resume = extra.get("resume")
    if not resume and ckpt_dir and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
        resume = True  # torchrun restarted the group after a failure: continue from the last save
    if resume:
        path = Path(resume) if resume is not True else checkpoint.latest(ckpt_dir)
        if path is not None:
            meta = checkpoint.load(trainer, path)
            start, history = int(meta["step"]) + 1, list(meta["losses"])
    resumed_from = start
    for step in range(start, cfg.steps):
        _fault(rank, step)
        history.append(trainer.train_step(step))
        if ckpt_dir and every and ((step + 1) % every == 0 or step == cfg.steps - 1):
            checkpoint.save(trainer, ckpt_dir, step, history)
    mem = {}
    if extra.get("measure_memory"):
        if device.type == "cuda":
            mem = {"Total": int(torch.cuda.max_memory_allocated(device))}
        else:
            mem = measure_memory_cpu(trainer, cfg.steps)
    return {"rank": rank, "coords": trainer.coords, "losses": history,
            "resumed_from": resumed_from, "step_times_s": trainer.step_times_s,
            "memory": mem, "device": str(device)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    run = json.loads(Path(argv[0]).read_text())
    out = Path(run["out"])
    rank = int(os.environ["RANK"])
    use_cuda = run.get("device", "cpu") == "cuda"
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(max(1, int(run.get("threads", 1))))
    dist.init_process_group(backend_for(device.type))
    code = 0
    try:
        res = run_worker(run, rank, device)
        (out / f"rank-{rank}.json").write_text(json.dumps(res))
    except InputError as e:
        # field, value and allowed as they are: the launcher raises the same InputError
        (out / f"error-{rank}.txt").write_text(json.dumps(
            {"field": e.field, "value": e.value, "allowed": e.allowed}, default=str))
        code = 2
    except BaseException:  # noqa: BLE001 - os._exit below would hide it
        import traceback
        text = traceback.format_exc()
        sys.stderr.write(text)
        (out / f"failure-{rank}.txt").write_text(text)
        code = 1
    finally:
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main()
