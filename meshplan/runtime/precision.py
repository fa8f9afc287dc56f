"""Precision modes of a run: what the parameters are stored in and what the math runs in.

- ``fp32``: everything fp32 (the equivalence tests' mode).
- ``bf16``: parameters, gradients and AdamW states all bf16 (no master copy).
- ``bf16-mixed``: mixed precision as torchtitan runs it (Micikevicius et al. 2018, "Mixed
  Precision Training"): parameters are fp32 and are the master weights the optimizer
  updates (so AdamW's states are fp32 too), compute runs in bf16 and gradients are reduced
  and accumulated in fp32. Where FSDP2 wraps the model its ``MixedPrecisionPolicy(
  param_dtype=bf16, reduce_dtype=fp32)`` casts the all-gathered parameters to bf16 and
  reduce-scatters fp32 gradients, so the residual stream and the saved activations are
  bf16 as in torchtitan. Where FSDP does not wrap, the model part runs its forward under
  ``torch.autocast(bf16)`` (as torchtitan does); so do, under FSDP, the routed experts,
  whose weights FSDP ignores (the runtime shards them over ep itself). Autocast keeps
  norms and the residual stream in fp32, so the autocast path saves more activation bytes
  than the FSDP path (measured in the dry run).

Per parameter that is 4 bytes of fp32 master + 8 of AdamW moments + 4 of fp32 gradient,
the cost model's 12 + 4 (cost/memory.py), plus bf16 copies that exist only while a layer is
gathered or autocast holds its cast weights: the cost model's 2 bytes of bf16 weights.
"""

from __future__ import annotations

import torch

from ..errors import InputError

PARAM_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "bf16-mixed": torch.float32}
MIXED = "bf16-mixed"


def check_dtype(name: str) -> None:
    if name not in PARAM_DTYPES:
        raise InputError("dtype", name, "allowed: " + ", ".join(PARAM_DTYPES))


def param_dtype(name: str) -> torch.dtype:
    """The dtype parameters (and so gradients and optimizer states) are stored in."""
    return PARAM_DTYPES[name]


def fsdp_policy(name: str):
    """FSDP2 ``MixedPrecisionPolicy`` for the mode (None: FSDP's default, no casting)."""
    if name != MIXED:
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def autocast(name: str, device_type: str):
    """The context the forward runs in: bf16 autocast for the mixed mode, else a no-op."""
    if name != MIXED:
        import contextlib
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=torch.bfloat16)


def apply_mixed(model: torch.nn.Module, name: str, device_type: str, fsdp: bool) -> None:
    """Autocast where FSDP's policy does not cast: the whole part, or only routed experts."""
    if name != MIXED:
        return
    if not fsdp:
        autocast_forward(model, name, device_type)
        return
    for block in model.layers.values():
        if getattr(block, "is_moe", False):
            autocast_forward(block.moe.experts, name, device_type)


def autocast_forward(module: torch.nn.Module, name: str, device_type: str) -> None:
    """Run ``module``'s forward under the mode's autocast (in place; no-op unless mixed).

    Set on the instance so pipeline stages, which call the module, get it too; activation
    checkpointing restores the autocast state when it recomputes a block.
    """
    if name != MIXED:
        return
    fwd = module.forward

    def forward(*args, **kwargs):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            return fwd(*args, **kwargs)
    module.forward = forward
