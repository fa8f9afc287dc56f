"""torchtitan's op-level selective checkpointing with the attention module checkpointed whole.

From torchtitan 0943771 (PR #1683, 2025-09-24, "Separate SAC Wrapping of MoE and Attention
Modules to Enable Flex Attention Compilation") to 575674a (PR #2118, 2025-12-08, "Remove the
hack for SAC + FlexAttention"), a model built with ``use_flex_attn`` and trained with
``activation_checkpoint.mode = "selective"``, ``selective_ac_option = "op"`` and the model not
compiled (``compile.components`` without "model") was wrapped by
torchtitan/distributed/activation_checkpoint.py ``_apply_op_sac_to_transformer_block_with_flex``
(at 8a2686c): an MoE block's ``moe`` and a dense block's ``feed_forward`` get op-level SAC,
but the ``attention`` module gets ``_apply_full_ac`` (ptd_checkpoint_wrapper): it keeps only
its input, the output of ``attention_norm``, which stays outside every wrapper and keeps its
own input. Every DeepSeek-V3 flavour but the debug model sets ``use_flex_attn=True``
(torchtitan/models/deepseek_v3/__init__.py at 8a2686c: 16B, 236B, 671B) and their train
configs compile the loss only (deepseek_v3_16b.toml, deepseek_v3_671b.toml: components =
["loss"]). Before #1683 and after #2118 the whole block gets op-level SAC (the engine's default
selective branch in cost/layer.py). A runs CSV says a run had the whole-attention wrapping in
the optional column ``attention_full_ac`` (Workload.attention_full_ac).

What it changes, per micro-batch of one layer, against the op-level branch (which keeps
ops.LayerOps.saved_bytes and drops recomputable_bytes): the attention's own saved tensors
(attention_ops: the norm input, the latents or q/k/v, the log-sum-exp) are replaced by the
norm's input and the attention module's input (two hidden states of the stream); the
attention is rebuilt in backward, so its tensors join the layer's backward working set and its
projection GEMMs and TP collectives run forward again (the core already does in the op-level
branch). Its element-wise work (kv_norm, RoPE) re-runs too and is not charged: a few bytes per
token against the projections' GEMMs.
"""

from __future__ import annotations

from ..specs.model import ModelSpec
from .ops import ACT, LayerOps, Shard, attention_part, expert_rows

ENGINE = "torchtitan"


def applies(engine: str, attention_full_ac: bool, recompute: str, modules: str,
            kind: str) -> bool:
    """Whether a layer of ``kind`` has its attention module checkpointed whole: the engine's
    op-level selective recomputation (recompute "selective" without Megatron modules) under
    the wrapping of the module docstring, in a transformer layer."""
    return (attention_full_ac and engine == ENGINE and recompute == "selective"
            and not modules and kind in ("dense", "moe"))


def freed_bytes(model: ModelSpec, shard: Shard) -> float:
    """Bytes per micro-batch the whole-attention checkpoint stops keeping: the attention's
    saved tensors less the two stream-sized inputs that stay (the norm's input, the module's
    input)."""
    kept = 2 * ACT * shard.stream_tokens * model.hidden
    return attention_part(model, shard).saved_bytes - kept


def rerun_matmul_names(model: ModelSpec, shard: Shard) -> tuple[str, ...]:
    """The attention's projection GEMMs, which the checkpoint runs forward again."""
    return tuple(mm.name for mm in attention_part(model, shard).matmuls)


# --- the routed experts under the same op-level SAC ------------------------------------------
# torchtitan's op-level SAC saves the outputs of the ops in its save list and recomputes every
# other op in backward. The DeepSeek-V3 list (models/deepseek_v3/infra/parallelize.py
# _op_sac_save_list at 8a2686c: aten.mm, the SDPA kernels, reduce_scatter_tensor,
# _c10d_functional.all_to_all_single, aten.max, flex_attention) and the shared one at later
# commits (distributed/activation_checkpoint.py _get_default_save_ops at b5bcd76: linear, topk,
# the attention kernels, reduce_scatter, all_to_all_single, DeepEP / HybridEP dispatch and
# combine) do not name torch._grouped_mm, which runs the routed experts (models/moe.py
# _run_experts_grouped_mm at 8a2686c: w1, w3 and w2 each one _grouped_mm). So the experts'
# GEMM outputs, their activation and the token permutations are recomputed from what is saved:
# with expert parallelism the dispatch and the combine all-to-all outputs
# (distributed/expert_parallel.py _token_dispatch / _token_combine: all_to_all_single_autograd,
# whose forward runs _c10d_functional.all_to_all_single), in 16-bit: the experts' input rows
# and the combined rows (tokens x top-k x hidden) returned to this rank. Without expert
# parallelism nothing of the routed path is saved. Against ops.moe_ops' count (the experts'
# input, their fc1 output, the combine input) that frees the difference; the recomputation
# runs the expert GEMMs forward again and holds their tensors while the layer runs backward.
# Not charged: the permutation copies the recomputation repeats (element-wise).


def routed_applies(engine: str, recompute: str, modules: str, kind: str) -> bool:
    """Whether an MoE layer runs torchtitan's op-level SAC (the engine's own selective
    recomputation, without Megatron modules)."""
    return engine == ENGINE and recompute == "selective" and not modules and kind == "moe"


def routed_freed_bytes(model: ModelSpec, shard: Shard, ops: LayerOps) -> float:
    """Bytes per micro-batch of the routed experts that op-level SAC does not keep: what
    ops.moe_ops counts as their saved tensors (its 'moe' module record, less the shared
    experts' and the activation's, which the op-level branch already drops) less the
    all-to-all outputs the save list keeps."""
    moe = ops.modules["moe"].freed_bytes
    shared = ops.modules["shared_experts"].freed_bytes if "shared_experts" in ops.modules else 0.0
    routed_saved = moe - shared - ops.modules["moe_act"].freed_bytes
    kept = 0.0
    if shard.ep > 1:
        rows = expert_rows(ops)
        returned = shard.tokens / shard.tp * model.moe_topk
        kept = ACT * rows * model.hidden + ACT * returned * model.hidden
    return routed_saved - kept


ROUTED_MATMULS = ("expert_fc1", "expert_fc2")
