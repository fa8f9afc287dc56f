"""Megatron-Core's work outside the transformer layers that ops.head_ops / ops.embedding_ops
count generically: its unfused vocab-parallel cross entropy and its embedding gradient.

ops.head_ops charges the loss 12 bytes per logit forward (read 2 + write 4 + read 4 +
write 2) and twice that backward (compute.STREAM_BWD_BYTE_RATIO): 36 in all.

Megatron-LM's loss without ``--cross-entropy-loss-fusion`` (its default: arguments.py,
``action='store_true'``; TransformerConfig.cross_entropy_loss_fusion = False) is
megatron/core/tensor_parallel/cross_entropy.py _VocabParallelCrossEntropy (NVIDIA/Megatron-LM
d98e8a64dd), each line its own kernel over the [tokens, vocab / tp] logits:

- forward: ``vocab_parallel_logits.float()`` (read 2, write 4), ``torch.max(..., dim=-1)``
  (read 4), ``vocab_parallel_logits -= logits_max`` (read 4, write 4), ``torch.exp(...,
  out=exp_logits)`` (read 4, write 4), ``exp_logits.sum(dim=-1)`` (read 4),
  ``exp_logits.div_(sum_exp_logits)`` (read 4, write 4): 38 bytes per logit;
- backward: ``grad_input.mul_(grad_output)`` on the saved fp32 softmax (read 4, write 4; the
  target update touches one element per token), and autograd casts the fp32 gradient the
  Function returns to the 16-bit logits' dtype (torch/csrc/autograd/engine.cpp
  validate_outputs, ``grad.to(metadata.dtype)``: read 4, write 2): 14 bytes per logit.

The fused path (``cross_entropy_loss_fusion``, Megatron-Bridge's recipes turn it on) runs the
same passes in fewer kernels and moves about what head_ops counts; only the ``megatron``
engine, whose default is the unfused path, takes the counts above.

The input embedding's weight gradient (megatron/core/tensor_parallel/layers.py
VocabParallelEmbedding.forward: ``F.embedding(masked_input, self.weight)``, dense
gradient): ATen's embedding_dense_backward allocates the gradient with ``at::zeros`` of
[vocab / tp, hidden] in the 16-bit dtype (write 2) and writes the rows the tokens touch; the
DDP's backward hook then accumulates it into the fp32 main_grad
(megatron/core/distributed/distributed_data_parallel.py _make_backward_post_hook,
``param.main_grad.add_(param.grad.data)``: read 4 + read 2, write 4): 12 bytes per weight
element of the rank's vocabulary slice, per micro-batch. Both Megatron engines (megatron,
nemo) run that hook.
"""

from __future__ import annotations

from ..specs.model import ModelSpec
from ..specs.workload import FP32_STORAGE
from .compute import STREAM_BWD_BYTE_RATIO
from .ops import HEAD_LOSS_FWD_BYTES, LayerOps, Shard

UNFUSED_LOSS_FWD_BYTES = (2 + 4) + 4 + (4 + 4) + (4 + 4) + 4 + (4 + 4)
UNFUSED_LOSS_BWD_BYTES = (4 + 4) + (4 + 2)
# (its ~14 forward and 3 backward kernels are not charged gaps: head_ops counts none for the
# generic loss either, and a gap is 16 us against milliseconds of logits traffic)
UNFUSED_LOSS_ENGINES = ("megatron",)

# the embedding gradient: zero-filled 16-bit gradient (2), main_grad.add_ (4 + 2 + 4)
EMBEDDING_GRAD_BYTES = 2 + (4 + 2 + 4)
EMBEDDING_GRAD_ENGINES = ("megatron", "nemo")


def unfused_loss(ops: LayerOps, model: ModelSpec, s: Shard, engine: str,
                 precision: str = "bf16") -> LayerOps:
    """Adds what Megatron's unfused vocab-parallel cross entropy moves beyond head_ops'
    generic count (module docstring). 16-bit and FP8 runs only (fp32 logits need no cast)."""
    if engine not in UNFUSED_LOSS_ENGINES or precision in FP32_STORAGE:
        return ops
    logits = s.tokens * model.vocab / s.tp
    fwd = logits * (UNFUSED_LOSS_FWD_BYTES - HEAD_LOSS_FWD_BYTES)
    bwd = logits * (UNFUSED_LOSS_BWD_BYTES - STREAM_BWD_BYTE_RATIO * HEAD_LOSS_FWD_BYTES)
    ops.stream_bytes += fwd
    ops.stream_bwd_extra_bytes += bwd - STREAM_BWD_BYTE_RATIO * fwd
    return ops


def embedding_grad(ops: LayerOps, model: ModelSpec, s: Shard, engine: str) -> LayerOps:
    """Adds the dense embedding gradient and its accumulation into main_grad of the Megatron
    engines, per micro-batch (module docstring)."""
    if engine not in EMBEDDING_GRAD_ENGINES:
        return ops
    ops.stream_bwd_extra_bytes += EMBEDDING_GRAD_BYTES * model.vocab * model.hidden / s.tp
    return ops
