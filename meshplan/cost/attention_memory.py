"""Attention scores that an engine materialises when no flash-class kernel exists.

Flash-style kernels (FlashAttention, cuDNN / Transformer Engine fused attention, PyTorch
SDPA's memory-efficient kernel) keep only q, k, v, the output and a log-sum-exp per row
(ops.py). Without them, Megatron-LM's fused scale-mask-softmax path materialises the
scores and keeps for backward, per layer and micro-batch, the softmax output (2 bytes), the
dropout mask (1) and the dropout output (2): 5 * a * s^2 * b bytes before tensor
parallelism (Korthikanti et al. 2022, eq. 1, the 5as/h term; a = heads, s = sequence,
b = micro-batch). Megatron's selective recomputation drops exactly these; full
recomputation rebuilds them for one layer at a time.

When: FlashAttention 2, cuDNN fused attention and Transformer Engine's fused attention need
Ampere or newer (their READMEs; Megatron's --use-flash-attn calls FlashAttention 2), so on
pre-Ampere parts (the catalog's "volta" generation, which also holds its Turing cards) the
Megatron-family engines (Megatron-LM, NeMo, Megatron-DeepSpeed) and eager Hugging Face
attention under DeepSpeed materialise the scores. PyTorch SDPA's memory-efficient kernel
runs there, so engines that call SDPA (torchtitan, meshplan's own runtime "") do not.
Its time is charged too: compute.device marks such a device unfused_attention, and
compute.unfused_attention_s costs the two batched GEMMs and the fused softmax and dropout
passes over the scores (tests/test_unfused_attention_time.py).
"""

from __future__ import annotations

from ..specs.model import ModelSpec
from .efficiency import UNFUSED_KERNELS
from .ops import Shard

# bytes per score element kept for backward: softmax output 2 + dropout mask 1 + dropout
# output 2 (Korthikanti et al. 2022, sec. 4.1)
SCORE_BYTES = 5
# fp32 training (no flash kernel takes fp32): softmax output 4 + mask 1 + dropout output 4
FP32_SCORE_BYTES = 9
NO_FLASH_GENERATIONS = ("volta",)
SDPA_ENGINES = ("torchtitan", "")


def materialises_scores(generation: str, engine: str, kernel: str = "") -> bool:
    """Whether the attention core keeps the s x s scores: no flash kernel on the part for
    this engine, or a run that states its attention ran unfused (``kernel`` "unfused" or
    "unfused-eager": efficiency.UNFUSED_KERNELS). The eager path saves what the fused one
    does: the softmax output, the dropout mask and the dropout output (its scale and mask
    ops need nothing saved: a constant divisor, and a product whose other factor is the
    mask)."""
    if kernel in UNFUSED_KERNELS:
        return True
    return generation in NO_FLASH_GENERATIONS and engine not in SDPA_ENGINES


def scores_bytes(model: ModelSpec, s: Shard) -> float:
    """Saved score bytes of one layer for one micro-batch on one rank (heads split by tp)."""
    return SCORE_BYTES * s.micro_batch * (model.heads / s.tp) * (s.seq / s.cp) * s.seq
