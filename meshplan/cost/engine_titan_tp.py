"""torchtitan's tensor parallelism as its code runs it: which collectives its async TP can
hide, by pass, and the all-gathers its per-op selective checkpointing runs again.

torchtitan's async TP (``--parallelism.enable_async_tensor_parallel``) is not a separate set
of overlap kernels like Transformer Engine's userbuffers: it turns on torch._inductor's
micro-pipeline TP pass (torch/_inductor/fx_passes/micro_pipeline_tp.py), which rewrites
two patterns of the compiled graph and leaves every other collective as it was:

- an all-gather whose result is the left operand of matmuls (``_find_consumer_matmuls``:
  users that are ``aten.mm``, ``aten._scaled_mm`` or reshape -> mm -> reshape) becomes
  ``symm_mem.fused_all_gather_matmul``;
- a reduce-scatter whose input a matmul produces (``_find_producer_matmul``: the input node
  itself is ``aten.mm`` / ``aten._scaled_mm`` or reshape(mm(reshape))) becomes
  ``symm_mem.fused_matmul_reduce_scatter``.
(pytorch/pytorch torch 2.13.0's file; the 2024 version, pytorch/pytorch at 00122fb1,
``fuse_matmul_reduce_scatter``, has the same producer rule: "Not matmul -> return". The
benchmark's torch 38410cf9, 2025-06-14, lies between.)

In a torchtitan Llama block with sequence parallelism (torchtitan/models/llama3/
parallelize.py apply_tp: attention and feed_forward inputs Shard(1) -> Replicate, wo and w2
outputs Partial -> Shard(1); model.py keeps wq, wk, wv and w1, w3 as separate nn.Linear):
- forward: the two input all-gathers feed wq/wk/wv and w1/w3 (fusable); the two output
  reduce-scatters take wo's and w2's matmul output (fusable);
- backward: the all-gathers of the output gradient (the backward of those reduce-scatters)
  feed the input-gradient matmuls of wo and w2 (fusable); the reduce-scatters of the input
  gradient (the backward of the input all-gathers) take the SUM of the input gradients of
  wq + wk + wv, of w1 + w3 (autograd accumulates the uses of the gathered input): the
  producer is an add, not a matmul, so they stay plain collectives on the critical path.
  Forward and recomputed forward: every collective fusable; backward: half of them.

Float8 recipes change the forward and backward all-gathers' consumers. torchtitan uses
torchao's float8-aware TP (Float8ColwiseParallel / Float8RowwiseParallel /
PrepareFloat8ModuleInput, torchao/float8/float8_tensor_parallel.py: cast to float8 BEFORE
the all-gather, forward input and backward output gradient) only for tensorwise scaling:
``enable_float8_tensorwise_tp = enable_float8_linear and not float8_is_rowwise`` with the
comment "For rowwise recipes, we use regular TP and all-gather happens in high precision"
(torchtitan parallelize.py). Under any other recipe the gathered 16-bit tensor is first
quantised inside the linear, so the all-gather's users are the cast's element-wise ops, not a
matmul, and neither all-gather fuses; the forward reduce-scatters still take the scaled
matmul's output (the row-wise forward GEMM writes the scaled 16-bit output itself, fast
accumulation, torchao float8_ops.py), the backward ones stay unfused as above. This is what
pytorch/torchtitan#866 reports ("Rowwise with AsyncTP runs at roughly same perf as vanilla
TP").
"""

from __future__ import annotations

ASYNC_TP_ENGINES = ("torchtitan",)
# the one recipe whose TP casts before the all-gather (torchtitan enable_float8_tensorwise_tp)
FLOAT8_AWARE_TP_RECIPES = ("tensorwise",)


def gathers_fuse(fp8_recipe: str = "") -> bool:
    """Whether the TP all-gathers of a torchtitan block feed matmuls directly (16-bit, or
    FP8 gathered by float8-aware TP) and so fuse under async TP."""
    return not fp8_recipe or fp8_recipe in FLOAT8_AWARE_TP_RECIPES


def async_tp_shares(engine: str, kind: str, fp8_recipe: str = "") -> tuple[float, float] | None:
    """(forward, backward) share of one pass's TP collective time that the engine's TP
    overlap can hide in a ``kind`` layer, or None where the engine's overlap is not
    torchtitan's async TP on a dense block (callers keep their uniform share). A forward
    pass (and a recomputed one) has two all-gathers and two reduce-scatters of one size:
    each is half of the pass. ``fp8_recipe``: the recipe's name under FP8, "" in 16-bit."""
    if engine not in ASYNC_TP_ENGINES or kind != "dense":
        return None
    fuse = gathers_fuse(fp8_recipe)
    fwd = 0.5 + (0.5 if fuse else 0.0)  # reduce-scatters always, gathers if fusable
    bwd = 0.5 if fuse else 0.0  # output-gradient gathers; input-grad RS never
    return fwd, bwd


# torchtitan's per-op selective activation checkpointing (``--activation_checkpoint.mode
# selective --activation_checkpoint.selective_ac_option op``; torchtitan models/llama3/
# parallelize.py, later distributed/activation_checkpoint.py, ``_save_list``): it saves
# aten.mm (all but every second one), the flash / efficient SDPA outputs,
# _c10d_functional.reduce_scatter_tensor and aten.max, and marks every other op
# PREFER_RECOMPUTE. The all-gather is not in the list, and torch's partitioner saves a
# collective only when it is not marked for recomputation
# (torch/_functorch/partitioners.py force_save_collectives, must_recompute: PREFER_RECOMPUTE
# counts): so the two sequence-parallel input all-gathers of a block (attention, MLP) run
# again in backward, where the weight-gradient GEMMs of wq/wk/wv and w1/w3 need the gathered
# input. Their consumers there include the recomputed GEMMs (the second of each pair: wk, w3),
# so async TP can fuse them as it fuses the forward's.
SAC_REGATHER_ENGINES = ("torchtitan",)


def sac_regathers(engine: str, kind: str, recompute: str, modules: str = "") -> bool:
    """Whether a ``kind`` layer's sequence-parallel input all-gathers (half of a forward
    pass's TP collectives) run once more in backward: torchtitan's op-level selective
    checkpointing (recompute "selective" with no Megatron module list)."""
    return (engine in SAC_REGATHER_ENGINES and kind == "dense" and recompute == "selective"
            and not modules)
