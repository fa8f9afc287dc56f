"""How each engine's code builds the projections that read one input: the attention's q, k
and v, and a gated MLP's gate and up projections. One fused GEMM (one weight, the outputs
side by side) or one GEMM per projection.

The FLOPs are the same either way; the time is not. Separate GEMMs are narrower (under TP a
GQA model's k and v projections can be one head wide: Llama 3.1 8B at TP 8 has wk and wv of
1024 / 8 = 128 output columns), so they fill fewer tiles and waves of the GPU (gemm.py), and
each is a kernel of its own, in forward and in both backward GEMMs (autograd runs the input-
and weight-gradient GEMM of every nn.Linear). ops.py builds the MatMul records with the
widths this module gives (MatMul.parts); compute.matmul_s prices each part as its own GEMM.

Engines, from their model code (the version the runs they name were measured with):
- Megatron-LM / NeMo (Megatron-Core): fused. ``linear_qkv`` (TE LayerNormColumnParallelLinear,
  megatron/core/transformer/attention.py SelfAttention) and ``linear_fc1`` of width
  2 x ffn for gated MLPs (megatron/core/transformer/mlp.py, ``ffn_hidden_size *= 2`` when
  gated_linear_unit). DeepSpeed's Megatron-DeepSpeed: one ``query_key_value`` of
  3 x heads x head_dim and one ``dense_h_to_4h`` (microsoft/Megatron-DeepSpeed
  megatron/model/transformer.py ParallelAttention / ParallelMLP at 066632b27c). Fused.
- torchtitan: separate. ``wq``, ``wk``, ``wv`` and ``w1``, ``w3`` are separate nn.Linear in
  torchtitan/models/llama3/model/model.py (also llama4 and qwen3 model.py, and the
  shared/dense FeedForward of models/moe/moe.py) at v0.2.2 (73a0e6979d, 2026-02-20), the
  code of every published torchtitan run. Later torchtitan (3396a4b37d, 2026-06-24, "Enable
  Fused qkv by default") builds llama3's q/k/v as one ``wqkv`` (models/common/attention.py
  FusedQKVLinear) and keeps w1 / w3 separate (models/common/feed_forward.py FeedForward):
  not modelled, the measured runs predate it. torch.compile does not merge them: Inductor's
  horizontal linear fusions (torch/_inductor/fx_passes/group_batch_fusion.py, batch_linear
  and friends) run only when listed in ``pre_grad_fusion_options`` /
  ``post_grad_fusion_options``, both ``{}`` by default (torch/_inductor/config.py, torch
  2.13.0), and torchtitan sets neither. DeepSeek-V3's MLA projections are separate
  modules in every engine (ops.attention_ops builds them one by one).
- meshplan's own runtime (engine ""): separate ``wq``, ``wk``, ``wv`` and ``w1``, ``w3``
  (meshplan/runtime/model.py Attention, MLP).
- llm-foundry (MPT): fused q/k/v, ``Wqkv`` (llmfoundry/models/layers/attention.py
  GroupedQueryAttention, ``fused_qkv: bool = True``), but a gated MLP's ``gate_proj`` and
  ``up_proj`` are separate (llmfoundry/models/layers/ffn.py MPTGLU), at mosaicml/llm-foundry
  8c8dd48f72 (2025-07-21).
- Aleph Alpha's scaling: one QKV linear with ``attention_qkv_in_one`` (its default), which a
  separate key/value width (num_kv_heads) requires off (attention.py, see
  ops.EAGER_ATTENTION_ENGINES); the SwiGLU's ``dense_in`` and ``siglu_weight`` are separate
  linears (mlp.py ParallelSwiGLUMLP.forward, see ops.UNFUSED_SWIGLU_ENGINES), at
  Aleph-Alpha/scaling 78489292.
Other frameworks (maxtext, paxml, olmo-core, other) keep the fused count: their choice
depends on configuration the rows do not state (MaxText ``fused_qkv`` / ``fused_mlp``;
OLMo-core at e27ba7455 fuses q/k/v only with ``fused_ops``, which depends on torch.compile
and flash-attn being installed).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Projections:
    """qkv: "fused" (one GEMM), "separate" (q, k, v each one), or "fused_mha" (one GEMM
    where k/v are as wide as q, separate otherwise); gate_up: "fused" or "separate"."""

    qkv: str = "fused"
    gate_up: str = "fused"


FUSED = Projections()
SEPARATE = Projections("separate", "separate")
PROJECTIONS = {
    "torchtitan": SEPARATE,
    "": SEPARATE,
    "llm-foundry": Projections("fused", "separate"),
    "llmfoundry": Projections("fused", "separate"),
    "aleph-alpha": Projections("fused_mha", "separate"),
}


def projections(engine: str) -> Projections:
    """The projection layout of ``engine``'s model code (PROJECTIONS; fused elsewhere)."""
    return PROJECTIONS.get(engine, FUSED)


def qkv_parts(p: Projections, q_w: float, kv_w: float, mha: bool) -> tuple[float, ...]:
    """Output widths of the q/k/v GEMMs one rank runs (() = one fused GEMM of q_w + kv_w);
    ``kv_w`` is k and v together, ``mha``: as many kv heads as query heads."""
    if p.qkv == "separate" or (p.qkv == "fused_mha" and not mha):
        return (q_w, kv_w / 2, kv_w / 2)
    return ()


def gate_up_parts(p: Projections, w: float, gated: bool) -> tuple[float, ...]:
    """Output widths of a gated MLP's gate and up GEMMs (() = one fused GEMM of 2 w)."""
    return (w, w) if gated and p.gate_up == "separate" else ()


def input_grad_sum_bytes(parts: tuple[float, ...], tokens: float, width: float,
                         elem_bytes: float) -> float:
    """HBM bytes of summing the input gradients of ``parts`` separate linears that read the
    same [tokens, width] input (autograd accumulates the gradients of every use of a tensor:
    torch/csrc/autograd/input_buffer.cpp InputBuffer::add); a fused linear's one dgrad GEMM
    writes it whole. Counted as one pass that reads each gradient and writes their sum
    (len(parts) + 1 tensors: what a fused element-wise kernel, e.g. Inductor's, moves);
    eager autograd's pairwise adds move 3 (len(parts) - 1), the same for two parts."""
    if len(parts) < 2:
        return 0.0
    return (len(parts) + 1) * tokens * width * elem_bytes

