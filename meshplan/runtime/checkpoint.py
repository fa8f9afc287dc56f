"""Distributed checkpoints (torch.distributed.checkpoint, DCP) of model and optimizer state.

State is keyed by the parameter names of the whole model (``layers.7.attention.wq.weight``
and, flattened, ``state.layers.7.attention.wq.weight.exp_avg``), never by rank, so a
checkpoint written under one layout loads under another: DCP reshards DTensors (FSDP,
TP, EP shards) and pipeline chunks pick their own keys.

A checkpoint is written to ``step-N.tmp`` and renamed to ``step-N`` only after every rank
finished writing and ``meta.json`` is in place, so a crash or a corrupt write never
replaces the last good checkpoint; ``latest`` returns the newest complete one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_optimizer_state_dict,
                                                     set_model_state_dict,
                                                     set_optimizer_state_dict)

from ..errors import InputError
from .model import TIED_COPY_OF, tied_copy

META = "meta.json"


def _optim_key(model, key: str) -> str:
    """The checkpoint's name for a flattened optimizer-state key of ``model``: itself, but
    for the last pipeline chunk's copy of a tied embedding (model.TIED_COPY_OF) the
    embedding's. A tied model whole has one parameter and keys its AdamW state by the
    embedding's name (``state.tok_embeddings.weight.exp_avg``); the two copies of a split
    one hold equal state (pipeline.TiedEmbedding), so both write that key and any layout
    reads it back (the model keys need no renaming: a whole tied model's state dict has
    both ``tok_embeddings.weight`` and ``output.weight``)."""
    copy = tied_copy(model)
    if copy in TIED_COPY_OF:
        section, _, rest = key.partition(".")
        if rest.startswith(copy + "."):
            return f"{section}.{TIED_COPY_OF[copy]}{rest[len(copy):]}"
    return key


def _state(trainer) -> dict:
    opts = StateDictOptions(flatten_optimizer_state_dict=True)
    sd: dict = {}
    for m, opt in zip(trainer.parts, trainer.optimizers):
        sd.update({f"model.{k}": v for k, v in get_model_state_dict(m).items()})
        sd.update({f"optim.{_optim_key(m, k)}": v for k, v in
                   get_optimizer_state_dict(m, opt, options=opts).items()})
    return sd


def save(trainer, root: str | Path, step: int, history: list[float]) -> Path:
    """Write the state after optimizer step ``step`` (0-based) to ``root/step-{step}``."""
    root = Path(root)
    final, tmp = root / f"step-{step}", root / f"step-{step}.tmp"
    if dist.get_rank() == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    dcp.save(_state(trainer), checkpoint_id=str(tmp))
    dist.barrier()
    if dist.get_rank() == 0:
        (tmp / META).write_text(json.dumps({"step": step, "losses": history,
                                            "plan": trainer.cfg.plan.to_dict(),
                                            "data_stream": data_stream(trainer.cfg),
                                            "optimizer": {k: getattr(trainer.cfg, k)
                                                          for k in OPTIMIZER}}))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    dist.barrier()
    return final


# What decides the batches of step s (data.py: a pure function of seed and step, shaped by
# seq_len and global_batch): a resume under other values trains on other batches than the
# run it continues, and its loss history would splice two runs together.
DATA_STREAM = ("data", "seed", "seq_len", "global_batch")


# AdamW's hyper-parameters live in the optimizer state's param_groups, which a load restores:
# a resume under another --lr ran silently at the checkpoint's (weight decay and epsilon are
# restored the same way; `run` has no flag for them)
OPTIMIZER = ("lr",)


def data_stream(cfg) -> dict:
    return {k: getattr(cfg, k) for k in DATA_STREAM}


def check_same_data(meta: dict, cfg) -> None:
    """InputError naming the first field of the data stream a resume would change
    (checkpoints written before the stream was recorded are not checked)."""
    for section, fields, why in (
            ("data_stream", DATA_STREAM, "the checkpoint was trained with {k}={v!r}; resume "
             "with the same {k} (the batches of each step depend on it)"),
            ("optimizer", OPTIMIZER, "the checkpoint's optimizer state carries {k}={v!r}, "
             "which a resume restores; resume with the same {k}")):
        saved = meta.get(section) or {}
        for k in fields:
            if k in saved and saved[k] != getattr(cfg, k):
                raise InputError(k, getattr(cfg, k), why.format(k=k, v=saved[k]))


def latest(root: str | Path) -> Path | None:
    """Newest complete checkpoint under ``root`` (one with meta.json and DCP metadata)."""
    root = Path(root)
    if not root.is_dir():
        return None
    done = [p for p in root.glob("step-*") if not p.name.endswith(".tmp")
            and (p / META).is_file() and (p / ".metadata").is_file()]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def check(path: str | Path) -> dict:
    """Read a checkpoint's metadata without a process group; InputError if it is unusable."""
    p = Path(path)
    if not p.is_dir():
        raise InputError("checkpoint", str(path), "no such checkpoint directory")
    try:
        meta = json.loads((p / META).read_text())
        int(meta["step"])
        dcp.FileSystemReader(str(p)).read_metadata()
    except (OSError, ValueError, KeyError, TypeError, EOFError, Exception) as e:  # noqa: B014
        raise InputError("checkpoint", str(path),
                         f"missing or corrupt ({type(e).__name__}: {e})".splitlines()[0]) from None
    return meta


def load(trainer, path: str | Path) -> dict:
    """Load model and optimizer state into this layout; returns the checkpoint's meta."""
    meta = check(path)
    sd = _state(trainer)
    try:
        dcp.load(sd, checkpoint_id=str(path))
    # a truncated or mismatched file (another model): a user-facing error. DCP raises
    # CheckpointException, a BaseException, not an Exception (torch 2.13)
    except (Exception, dcp.api.CheckpointException) as e:
        if isinstance(e, dcp.api.CheckpointException) and e.failures:
            e = next(iter(e.failures.values()))[0]  # the first rank's own exception
        why = f"{type(e).__name__}: {e}".splitlines()[0]
        raise InputError("checkpoint", str(path),
                         f"cannot be loaded into this model and plan ({why[:300]})") from None
    opts = StateDictOptions(flatten_optimizer_state_dict=True, strict=False)
    for m, opt in zip(trainer.parts, trainer.optimizers):
        keys = set(get_model_state_dict(m))
        set_model_state_dict(m, {k: sd[f"model.{k}"] for k in keys}, options=opts)
        okeys = set(get_optimizer_state_dict(m, opt, options=opts))
        set_optimizer_state_dict(m, opt, {k: sd[f"optim.{_optim_key(m, k)}"] for k in okeys},
                                 options=opts)
    return meta
