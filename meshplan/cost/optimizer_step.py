"""HBM traffic of the optimizer step and of the per-step passes over the gradient buffer, by
engine: what each engine's code reads and writes per parameter, priced at HBM bandwidth.

The optimizer step (``optimizer_s``), per parameter the rank's optimizer owns (its shard under
a distributed optimizer or FSDP):

- GENERIC (engines not read here): read the fp32 gradient, master and two moments, write the
  master, the moments and the 16-bit weight: 4 + 12 + 12 + 2 = 30 bytes (meshplan's count
  before this module).
- Megatron-Core (megatron, nemo), megatron/core/optimizer/optimizer.py and
  distrib_optimizer.py (NVIDIA/Megatron-LM d98e8a64dd), MixedPrecisionOptimizer.step:
  prepare_grads (``_copy_model_grads_to_main_grads``: ``shard_model_grad.float()``, a view of
  an fp32 grad buffer, a copy, read 2 + write 4, of a 16-bit one), ``clip_grad_norm`` ->
  clip_grads.get_grad_norm_fp32 (multi_tensor_l2norm over the main grads: read 4; the scaling
  by multi_tensor_scale runs only when the norm exceeds clip_grad, a data-dependent event not
  charged), the inner ``optimizer.step()`` (Transformer Engine's / apex's FusedAdam,
  multi_tensor_adam: reads the gradient, the fp32 master and both moments, writes the master
  and both moments: 16 + 12), then ``_copy_main_params_to_model_params`` (read the fp32
  master, write the 16-bit parameter: 4 + 2). fp16 adds ``_unscale_main_grads_and_check_for_nan``
  (torch._amp_foreach_non_finite_check_and_unscale_: read + write each main grad, 8).
  count_zeros runs only with --log-num-zeros-in-grad (off by default): not charged.
- torchtitan (FSDP2, torch.optim.AdamW on the fp32 sharded parameters): its clip_grad_norm_
  (torchtitan/distributed/utils.py -> torch.nn.utils.get_total_norm, _foreach_norm: read 4;
  clip_grads_with_norm_ multiplies every gradient by the clamped coefficient whether or not it
  clips: read 4 + write 4) and the fused AdamW kernel (read gradient, parameter, both moments;
  write parameter and moments: 16 + 12). No 16-bit copy: FSDP2 casts at the all-gather
  (fsdp2_copies.py). The fused kernel is torchtitan's default from 2025 (``implementation =
  "fused"``); its 2024 releases defaulted to the foreach path (``--optimizer.fused`` off),
  which moves more (eight foreach passes: about 80 bytes instead of 28); which one a
  published row ran is not in the schema, so the smaller is charged.

The gradient-buffer passes (``grad_buffer_s``), per parameter held on the rank (the whole
local gradient buffer, not the shard), Megatron-Core's DistributedDataParallel with its
contiguous buffers (ZeRO 0 / 1; megatron/core/distributed/distributed_data_parallel.py and
param_and_grad_buffer.py at d98e8a64dd; Megatron-FSDP below):

- ``zero_grad_buffer`` at the start of every iteration: _ParamAndGradBuffer.reset,
  ``self.grad_data.zero_()``: write G bytes (G: the buffer's bytes per element);
- ``check_grads`` before each bucket's collective when ``check_for_nan_in_grad``
  (``self.buckets[i].grad_data.norm(p=2)``): read G. Megatron-LM turns it on by default
  (training.py: ``check_for_nan_in_grad = args.check_for_nan_in_loss_and_grad``, whose flag
  is ``--no-check-for-nan-in-loss-and-grad``); NeMo / Megatron-Bridge recipes set
  ``check_for_nan_in_grad=True`` in their DistributedDataParallelConfig;
- the pre-scaling ``bucket.grad_data *= bucket.gradient_scaling_factor`` (1 / data-parallel
  size unless ``average_in_collective``; Megatron-LM's default is off,
  ``--ddp-average-in-collective``): read G + write G, when the data-parallel group has more
  than one rank. NeMo / Megatron-Bridge recipes set ``average_in_collective=True``: no pass.

Megatron-FSDP (zero 2 / 3 on the Megatron engines) makes the same passes on the unsharded
gradient before its reduce-scatter (megatron/core/distributed/fsdp/src/megatron_fsdp/
param_and_grad_buffer.py reduce_scatter_gradients: ``_check_nan_in_grad(gbuf.data)``, then
``gradient_reduce_preprocessing(gbuf.data, scaling_factor, ...)``) and zeroes its gradient
buffer in zero_grad (``group.main_grad_buffer.data.zero_()``), which is sharded when the
gradients are: charged as the whole local buffer all the same (an overcharge of at most G
bytes per parameter), so that a higher ZeRO stage is never faster by this part alone, the
rule the search's first-fit over ZeRO stages rests on (search/branch.py).
"""

from __future__ import annotations

from ..specs.workload import FP32_STORAGE

GENERIC_STEP_BYTES = 4 + 3 * 4 + 3 * 4 + 2
# Megatron-Core: grad norm 4, FusedAdam 16 + 12, main -> model copy 4 + 2
MCORE_STEP_BYTES = 4 + (4 * 4 + 3 * 4) + (4 + 2)
MCORE_FP16_UNSCALE_BYTES = 4 + 4
MCORE_16BIT_GRAD_COPY_BYTES = 2 + 4
# torchtitan: clip (norm 4, scale 4 + 4), fused AdamW 16 + 12
TORCHTITAN_STEP_BYTES = (4 + 4 + 4) + (4 * 4 + 3 * 4)

MCORE_ENGINES = ("megatron", "nemo")
# engines whose DDP pre-scales the gradient buffer by 1 / dp before the collective
PRESCALE_ENGINES = ("megatron",)


def step_bytes_per_param(engine: str, precision: str = "bf16",
                         grad_buffer_bytes: float = 4.0) -> float:
    """HBM bytes the optimizer step moves per parameter it owns (module docstring). fp32 and
    tf32 storage (no master copy, FP32_STORAGE) keep the generic count."""
    if precision in FP32_STORAGE:
        return float(GENERIC_STEP_BYTES)
    if engine in MCORE_ENGINES:
        b = MCORE_STEP_BYTES
        if precision == "fp16":
            b += MCORE_FP16_UNSCALE_BYTES
        if grad_buffer_bytes < 4:
            b += MCORE_16BIT_GRAD_COPY_BYTES
        return float(b)
    if engine == "torchtitan":
        return float(TORCHTITAN_STEP_BYTES)
    return float(GENERIC_STEP_BYTES)


def grad_buffer_bytes_per_param(engine: str, dp_size: int,
                                grad_buffer_bytes: float = 4.0) -> float:
    """HBM bytes per local parameter of the per-step passes over Megatron-Core's contiguous
    gradient buffer (zero, NaN-check norm, 1/dp pre-scaling; module docstring), at every
    ZeRO stage (Megatron-FSDP's alike); 0 for other engines."""
    if engine not in MCORE_ENGINES:
        return 0.0
    passes = 2.0  # zero_() writes, check_grads' norm reads
    if engine in PRESCALE_ENGINES and dp_size > 1:
        passes += 2.0  # grad_data *= 1 / dp: read and write
    return passes * grad_buffer_bytes
