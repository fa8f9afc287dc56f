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

Sharded weights (zero 2 and 3) across the micro-batches of one step: ``sharded_schedule``
below is the one table of what each engine's own code does (read at the commits cited there).
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


# ---- sharded weights and gradients (zero 2 / 3) across the micro-batches of one step ------
#
# What each engine's code does with one FSDP unit (a transformer layer) in a step of m
# micro-batches, pipeline parallelism off (pp 1):
#
# - Megatron-Core's FSDP (Megatron-FSDP; NeMo 2 / Megatron-Bridge ``use_megatron_fsdp``),
#   ``data_parallel_sharding_strategy="optim_grads_params"`` (zero 3): the unit's weights are
#   gathered before its forward (``_pre_forward_param_unshard``), released after it
#   (``_post_forward`` -> ``release_module_parameters``), gathered again before its backward
#   (``_pre_backward_param_unshard``) and its gradients reduce-scattered after every backward:
#   ``grad_reduce_every_bprop = strategy in ["optim_grads", "optim_grads_params"]`` ignores
#   ``no_sync`` / ``is_last_microbatch`` (megatron/core/distributed/fsdp/src/megatron_fsdp/
#   megatron_fsdp.py, NVIDIA/Megatron-LM d98e8a64dd; the same hooks in
#   megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py at 40df28b5c2,
#   2025-05-22, the code of the Megatron-MoE-ModelZoo Qwen3-235B FSDP run, main 1e057005;
#   and in the v2 rewrite experimental/module.py post_forward / pre_backward / post_backward).
#   Only the HSDP outer (replica) reduction waits for the last micro-batch
#   (``outer_fsdp_group_grad_reduce = use_hybrid_fsdp and (is_last_microbatch or
#   model_auto_sync)``): once per step.
# - PyTorch FSDP2 (``fully_shard``) as torchtitan and OLMo-core drive it: blocks get
#   ``reshard_after_forward=True`` without pipeline parallelism (torchtitan
#   torchtitan/distributed/fsdp.py get_fsdp_reshard_after_forward_policy "default" ->
#   ``not pp_enabled``, pytorch/torchtitan b5bcd76c66; OLMo-core src/olmo_core/nn/transformer/
#   model.py ``reshard_after_forward = False if pp_enabled else True``, allenai/OLMo-core
#   fa6c5014c9, and the same at e27ba7455, Nov 2024), so the unit is gathered before forward
#   and again before backward (torch 2.13 _fsdp_param_group.py pre_backward -> unshard), and
#   its gradient reduce-scattered in every post_backward, because neither train loop calls
#   ``set_requires_gradient_sync(False)`` between micro-batches (torchtitan/trainer.py
#   train_step: one forward_backward_step per gradient-accumulation step, nothing else, since
#   gradient accumulation landed in 8570415c3, 2025-06-05; OLMo-core train_module.py
#   _train_microbatch_context: ``no_sync`` only for DDP, FSDP gets set_is_last_backward).
#   HSDP: FSDP2 all-reduces across replicas in every post_backward unless
#   ``set_requires_all_reduce(False)``; OLMo-core sets it to ``is_last_mb`` (once per step),
#   torchtitan never calls it (every micro-batch).
#   Zero 2 (``reshard_after_forward=False``, export/torchtitan.py "never"): one gather per
#   micro-batch (post_backward reshards: ``reshard_after_backward`` defaults True) and, the
#   same loop, a reduce-scatter per micro-batch.
#   With pipeline parallelism both run FSDP2 under torch.distributed.pipelining, whose stage
#   (torch 2.13 pipelining/stage.py backward_maybe_with_nosync) calls
#   ``set_reshard_after_backward(False)`` and ``set_requires_gradient_sync(False)`` before
#   every backward and reduces once in ``perform_reduce_grad`` (the REDUCE_GRAD action after
#   all of the stage's backwards): one reduce-scatter per step with no backward left to hide
#   it; the weights a backward gathered stay gathered, so zero 2 gathers once per step and
#   zero 3 ("always": resharded after every forward) gathers before each forward that follows
#   a forward and each backward that follows a forward. On a 1F1B rank with w = min(m, pp - 1)
#   warm-up forwards (F^w, (F B)^(m - w), B^w; the first stage has the most) that is w + 1
#   forwards (all m when m <= w) and m - w backwards (1 when m <= w): m + 1 in all, as in
#   GPipe's F^m B^m.
# - PyTorch FSDP1 FULL_SHARD as Composer / llm-foundry drive it: Composer's trainer enters
#   ``no_sync`` only for a DistributedDataParallel model (``if not isinstance(self.state.model,
#   DistributedDataParallel): sync_context = contextlib.nullcontext()``, composer/trainer/
#   trainer.py, mosaicml/composer ca2e88ab2 2023-06 and 6405188805 2026-04), so FULL_SHARD
#   re-gathers before backward and reduce-scatters after every micro-batch.
# - DeepSpeed ZeRO-3: parameters are fetched per sub-module in forward and in backward
#   (partitioned_param_coordinator.py fetch_sub_module / release_sub_module) and gradients
#   reduce-scattered in every backward into the fp32 partition (stage3.py
#   reduce_ready_partitions_and_remove_grads; partition_grads copies on micro_step_id 0 and
#   adds after), deepspeedai/DeepSpeed edaa722126. (It keeps parameters gathered that reappear
#   within ``stage3_max_reuse_distance`` = 1e9 elements of the trace, i.e. the last ~5e8
#   parameters of the forward for the backward; not modelled.)
#
# Full recomputation does not save the backward's gather in any of them: the gather before the
# backward serves the recomputed forward as well (Megatron-FSDP: the recompute forward runs in
# PRE_BACKWARD state, gathers and lazily releases for the backward; FSDP2: _pre_forward returns
# early in PRE_BACKWARD, the pre_backward hook has already unsharded).
FSDP2_ENGINES = ("torchtitan", "olmo-core")
# engines whose HSDP replica all-reduce runs after every micro-batch (FSDP2's default,
# all_reduce_grads True, which torchtitan's loop never turns off); the others: once per step
HSDP_REDUCE_EACH_MICROBATCH = ("torchtitan",)


@dataclass(frozen=True)
class ShardedSchedule:
    """One step's collectives of every FSDP unit under zero 2 / 3 (engine's own code)."""

    forward_gathers: int  # weight all-gathers before a forward
    backward_gathers: int  # ... and before a backward
    reduces: int  # gradient reduce-scatters
    reduce_hidden: bool  # each beside a backward; False: after the last, nothing to hide it
    replica_reduces: int  # HSDP all-reduces across replicas

    @property
    def gathers(self) -> int:
        return self.forward_gathers + self.backward_gathers


def sharded_schedule(engine: str, zero: int, microbatches: int, pp: int = 1
                     ) -> ShardedSchedule | None:
    """The engine's schedule of sharded collectives in one step, None below zero 2. The
    planner's own engine "" (and every engine not named above) takes the rule Megatron-FSDP,
    FSDP1 under Composer, DeepSpeed ZeRO-3 and FSDP2 without pipelining share: zero 3 gathers
    before every forward and backward and reduce-scatters after every backward, and HSDP
    all-reduces across replicas once per step (Megatron-FSDP, OLMo-core; torchtitan every
    micro-batch); zero 2 keeps meshplan's earlier rule (a gather per micro-batch, one
    reduce-scatter per step) outside FSDP2."""
    m = max(1, microbatches)
    if zero < 2:
        return None
    rep = m if engine in HSDP_REDUCE_EACH_MICROBATCH else 1
    if engine in FSDP2_ENGINES and pp > 1:  # torch.distributed.pipelining stage
        if zero == 2:
            return ShardedSchedule(1, 0, 1, False, 1)
        fwd = min(m, pp)  # the first stage's warm-up forwards and the first steady one
        return ShardedSchedule(fwd, m + 1 - fwd, 1, False, 1)
    if zero == 2:
        return ShardedSchedule(m, 0, m if engine in FSDP2_ENGINES else 1, True, rep)
    return ShardedSchedule(m, m, m, True, rep)
