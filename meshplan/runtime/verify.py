"""Equivalence check: a plan's run against the single-process reference.

The reference (``train.reference_run``) trains the same model from the same weights on the
same batches in one process; every rank of the parallel run then compares its losses and,
for each parameter it holds, the full (gathered) parameter and gradient after the last step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .launch import fork_ranks
from .model import TIED_COPY_OF
from .train import RunConfig, Trainer, reference_run, rel_diff


@dataclass
class Report:
    losses: list[float]
    ref_losses: list[float]
    loss_rel: float  # worst |loss - ref| / |ref| over steps and ranks
    param_rel: float  # worst ||p - p_ref|| / ||p_ref|| over parameters
    grad_rel: float
    worst_param: str
    worst_grad: str
    names_checked: int  # distinct parameter names compared (must cover the whole model)
    missing_grads: list[str]


def _ref_name(name: str, ref_state: dict) -> str:
    """The reference's name for a parameter: itself, or for the last pipeline chunk's copy
    of a tied embedding the embedding, which the whole model shares with its output layer."""
    return name if name in ref_state else TIED_COPY_OF[name]


def _rank_check(rank: int, world: int, cfg: RunConfig, ref_state: dict):
    tr = Trainer(cfg, torch.device("cpu"))
    losses = [tr.train_step(s) for s in range(cfg.steps)]
    out = {}
    for name, (p, g) in tr.full_state().items():
        rp, rg = ref_state[_ref_name(name, ref_state)]
        out[name] = (rel_diff(p, rp), None if g is None or rg is None else rel_diff(g, rg),
                     g is None)
    return losses, out


def check_equivalence(cfg: RunConfig, world: int, timeout_s: float = 300) -> Report:
    torch.set_num_threads(1)
    ref_losses, ref_state = reference_run(cfg)
    results = fork_ranks(_rank_check, world, cfg, ref_state, timeout_s=timeout_s)
    loss_rel, per_name = 0.0, {}
    for losses, diffs in results:
        loss_rel = max([loss_rel] + [abs(a - b) / abs(b) for a, b in zip(losses, ref_losses)])
        for n, d in diffs.items():
            prev = per_name.get(n, (0.0, 0.0, False))
            per_name[n] = (max(prev[0], d[0]), max(prev[1], d[1] or 0.0), prev[2] or d[2])
    wp = max(per_name, key=lambda n: per_name[n][0])
    wg = max(per_name, key=lambda n: per_name[n][1])
    missing = sorted(n for n, d in per_name.items()
                     if d[2] and ref_state[_ref_name(n, ref_state)][1] is not None)
    return Report(results[0][0], ref_losses, loss_rel, per_name[wp][0], per_name[wg][1], wp, wg,
                  len(per_name), missing)
