"""Engines that synchronise data-parallel gradients once, after the last micro-batch's
backward, with nothing left to hide it behind (the pipeline-flush engines).

Megatron-LM (``--overlap-grad-reduce``) and FSDP reduce a gradient bucket as soon as the
backward has produced it, hidden under the rest of the backward (cost/step.py _dp_comm).
Two engines of the published layout sweeps do not:

- DeepSpeed's pipeline engine (deepspeed/runtime/pipe/schedule.py, TrainSchedule.steps:
  on the last step of the schedule ``ReduceTiedGrads(), ReduceGrads(), OptimizerStep()``;
  pipe/engine.py ``_exec_reduce_grads`` runs the data-parallel reduction then, after the
  pipeline has drained). Megatron-DeepSpeed (the BigScience BLOOM runs) trains through it
  whenever PP > 1. Under fp16 (``_exec_reduce_grads`` -> ``allreduce_gradients``) with
  ZeRO stage 1 the fp16 gradients (2 bytes: "fp16 which grad accumulates in fp16",
  bigscience tr11-176B-ml chronicles-prequel.md, 'Rebalancing layers') are reduce-scattered
  to the partition owners (stage_1_and_2.py, ``reduce_scatter`` on by default) and, after
  the optimizer step, the updated 16-bit weights all-gathered. Under bf16 the engine's
  ``_bf16_reduce_grads`` all-reduces the BF16 optimizer's fp32 gradients
  (``buffered_allreduce_fallback(grads=self.optimizer.get_grads_for_reduction())``, 4
  bytes, "not sharded", same section) and that optimizer, DeepSpeed's own ZeRO-1 equivalent
  ("bf16 must use z0! it implements its own zero stage 1 equivalent", tr11-176B-ml.slurm),
  all-gathers the updated bf16 weights.
- Aleph Alpha's training code (Hagemann et al. 2023's engine; public release github
  Aleph-Alpha/scaling, 2024): core/nn/pipeline_schedule/train.py is the same instruction
  schedule (``InstructionReduceTiedGrads``, ``InstructionOptimizerStep`` on the last step);
  core/optimizer/optimizer.py ``step()`` calls ``allreduce_gradients`` there, which
  (optimizer/allreduce.py ``allreduce_no_retain`` -> ``allreduce_tensor_in_float32``)
  all-reduces the full gradient of every parameter in fp32 (16-bit gradients are cast up)
  in 500M-element buckets on the compute stream, with or without pipeline parallelism.
  Its ZeRO (``zero: bool``, "enable zero stage 1 optimizer", optimizer_config.py) keeps
  that all-reduce (it does not reduce-scatter) and then all-gathers the updated 16-bit
  weight partitions (parameter_group.py ``step_sequel``).

So for them the whole reduction (and the weight all-gather under ZeRO-1) is exposed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..plan import Plan

ALEPH_ALPHA = "aleph-alpha"
DEEPSPEED = "deepspeed"
# (Which engines keep 16-bit gradients is memory.py's keeps_16bit_grads.)


@dataclass(frozen=True)
class FlushSync:
    """One step's data-parallel synchronisation of a flush engine, per parameter."""

    reduce: str  # "all-reduce" or "reduce-scatter"
    reduce_bytes_per_param: float
    gather_bytes_per_param: float  # weights all-gathered after the optimizer step (ZeRO-1)


def flush_sync(engine: str, plan: Plan, precision: str) -> FlushSync | None:
    """The engine's exposed data-parallel synchronisation, or None when the engine
    overlaps it with the backward (the default model of cost/step.py)."""
    if engine == ALEPH_ALPHA and plan.zero <= 1:
        return FlushSync("all-reduce", 4.0, 2.0 if plan.zero == 1 else 0.0)
    if engine == DEEPSPEED and plan.pp > 1 and plan.zero <= 1:
        if precision != "fp16":  # BF16 optimizer: fp32 all-reduce, then its own weight gather
            return FlushSync("all-reduce", 4.0, 2.0)
        if plan.zero == 1:
            return FlushSync("reduce-scatter", 2.0, 2.0)
        return FlushSync("all-reduce", 2.0, 0.0)
    return None
