"""'may not fit' instead of a hard out-of-memory verdict when only the engine's lean dtypes
would make a runs-CSV row fit and the row does not say which dtypes it ran.

A row that leaves ``optimizer_state_precision`` / ``grad_reduce_dtype`` blank is predicted with
the framework's default (framework_defaults.py: fp32, NeMo's gradients bf16). If the plan does not fit
that way but does with the leanest dtypes the engine lets a user choose, the run may well
have chosen them: the prediction cannot say it went out of memory, only that it may not fit.
A column the row states is never changed, and nothing is changed where the engine offers no
leaner choice.

What each engine permits (Workload's OPTIMIZER_STATE_PRECISIONS / GRAD_REDUCE_DTYPES, the
leanest first; sources as read):
- megatron, nemo (Megatron-Core): github NVIDIA/Megatron-LM at d98e8a64 (2026-08-22),
  megatron/training/arguments.py ``--grad-reduce-in-bf16`` (bf16 gradient buffer) and
  ``--use-precision-aware-optimizer`` with ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` bf16
  while ``--main-params-dtype`` is fp32 or fp16 only: bf16 moments beside an fp32 master
  ("bf16"), never "bf16-no-master". NeMo trains through Megatron-Core (framework_defaults
  NEMO_DTYPES: its performance scripts set grad_reduce_in_fp32 False, its default).
- deepspeed, bf16 runs under ZeRO 1-3: github deepspeedai/DeepSpeed at edaa7221 (2026-08-22),
  deepspeed/runtime/config.py ``bf16_master_weights_and_grads`` with ``bf16_optimizer_states``
  (asserted to need ZeRO stage 1, 2 or 3): bf16 weights as the master, bf16 moments and
  gradients ("bf16-no-master", "bf16"); runtime/constants.py ``data_types.grad_accum_dtype``.
  fp16 runs keep DeepSpeed's fp16 path (cost/memory.py FP16_GRAD_ENGINES): nothing leaner.
- torchtitan: none. github pytorch/torchtitan at b5bcd76c (2026-08-21),
  torchtitan/config/configs.py ``mixed_precision_reduce: Literal["float32"]``, and its AdamW
  steps the fp32 sharded parameters.
- aleph-alpha: none. github Aleph-Alpha/scaling at 737f8558, src/scaling/core/optimizer/
  parameter_group.py always makes fp32 master copies for the optimizer ("the optimizer runs
  only on fp32 parameters"), and its gradients are already the parameters' 16-bit dtype
  (cost/memory.py PARAM_DTYPE_GRAD_ENGINES).
- an engine meshplan does not know ("other", ""): any dtype meshplan models, as
  framework_defaults.SCHEDULE_OPEN lets such a row run any schedule.
Frameworks not listed (maxtext, llm-foundry, paxml, ...) have not been looked up: nothing.
"""

from __future__ import annotations

import dataclasses

from .specs.workload import Workload

OPEN_ENGINES = ("other", "")
# engine -> (optimizer_state_precision choices, grad_reduce_dtype choices), leanest first
LEAN_DTYPES = {
    "megatron": (("bf16",), ("bf16",)),
    "nemo": (("bf16",), ("bf16",)),
    "deepspeed": (("bf16-no-master",), ("bf16",)),
    "torchtitan": ((), ()),
    "aleph-alpha": ((), ()),
}
OPEN_DTYPES = (("bf16-no-master", "bf16"), ("bf16",))
# precisions and ZeRO stages under which DeepSpeed allows its bf16 master/optimizer states
DEEPSPEED_LEAN_PRECISIONS = ("bf16",)
DEEPSPEED_LEAN_ZERO = (1, 2, 3)


def lean_choices(framework: str, precision: str, zero: int) -> tuple[tuple, tuple]:
    """(optimizer-state precisions, gradient-reduce dtypes) the engine lets a run choose
    beyond its default, leanest first (module docstring)."""
    fw = (framework or "").strip().lower()
    if fw in OPEN_ENGINES:
        return OPEN_DTYPES
    if fw == "deepspeed" and (precision not in DEEPSPEED_LEAN_PRECISIONS
                              or zero not in DEEPSPEED_LEAN_ZERO):
        return ((), ())
    return LEAN_DTYPES.get(fw, ((), ()))


def lean_workload(workload: Workload, zero: int, opt_blank: bool,
                  grad_blank: bool) -> Workload | None:
    """The workload with the leanest dtypes the engine permits in the columns the row left
    blank; None when that changes nothing."""
    opts, grads = lean_choices(workload.framework, workload.precision, zero)
    changes = {}
    if opt_blank and opts and opts[0] != workload.optimizer_state_precision:
        changes["optimizer_state_precision"] = opts[0]
    if grad_blank and grads and grads[0] != workload.grad_reduce_dtype:
        changes["grad_reduce_dtype"] = grads[0]
    if not changes:
        return None
    return dataclasses.replace(workload, **changes)


def fits_only_lean(est, model, cluster, workload: Workload, opt_blank: bool,
                   grad_blank: bool) -> bool:
    """Whether ``est`` (a plan predicted not to fit) fits with the engine's leanest dtypes in
    the row's blank dtype columns: then the verdict is 'may not fit', not out of memory."""
    if est.fits:
        return False
    lean = lean_workload(workload, est.plan.zero, opt_blank, grad_blank)
    if lean is None:
        return False
    from .cost import estimate  # the cost model imports nothing from here
    return estimate(model, cluster, lean, est.plan).fits
