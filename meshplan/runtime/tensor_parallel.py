"""Tensor and sequence parallelism with DTensor ``parallelize_module`` (Megatron-LM layout).

Shoeybi et al. 2019: the first linear of attention (q, k, v) and of the MLP (w1, w3) is
split by columns (output features), the second (wo, w2) by rows, so one reduction per block
joins the halves. Korthikanti et al. 2022 (sequence parallelism): norms and the residual
stream stay split along the sequence, the reductions become reduce-scatter + all-gather.
The output layer is split over the vocabulary and the loss is computed on the split logits
("loss parallel"), never gathering [b, s, vocab].

MLA's latent projections (``wkv_a``, ``kv_norm``, ``wq_a``, ``q_norm``) stay replicated:
their input is the gathered sequence and their output gradient arrives already reduced by
the column-parallel ``wkv_b``/``wq_b`` input hook. MoE layers take the sequence shard as
plain tensors; router and shared-expert gradients are then partial sums that
``tp_partial_params`` lists for a sum over the tp group (data_parallel.reduce_grads).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               RowwiseParallel, SequenceParallel,
                                               loss_parallel, parallelize_module)

from ..errors import InputError
from ..plan import Plan
from .model import Transformer, cross_entropy


def check_tp(model: Transformer, plan: Plan) -> None:
    spec = model.spec
    if plan.tp == 1:
        return
    if not spec.is_mla and spec.kv_heads % plan.tp and plan.tp % spec.kv_heads:
        raise InputError("tp", plan.tp, f"must divide, or be a multiple of, the kv heads "
                         f"({spec.kv_heads})")
    if spec.is_moe and not plan.sequence_parallel:
        raise InputError("sequence_parallel", False,
                         "the runtime needs sequence parallelism for MoE models with tp > 1")


class _ReduceInBackward(torch.autograd.Function):
    """Identity forward, all-reduce of the gradient over tp backward (Megatron's "f")."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g, group=ctx.group)
        return g, None


def vocab_parallel_embedding(emb: torch.nn.Embedding, tp_mesh) -> None:
    """Look tokens up in this rank's vocabulary rows only (Megatron-LM's
    VocabParallelEmbedding, core/tensor_parallel/layers.py), on the Shard(0) DTensor weight
    RowwiseParallel gave ``emb``: tokens of other ranks' rows read row 0 and are zeroed, and
    the partial outputs are summed by RowwiseParallel's output redistribution.

    RowwiseParallel alone runs DTensor's embedding op, whose forward does the same
    (MaskPartial), but torch 2.13 has no vocabulary-sharded strategy for its backward
    (distributed/tensor/_ops/_embedding_ops.py embedding_dense_backward_strategy: weight
    gradient Shard(1), or Partial from a batch- or sequence-sharded gradient): each rank
    built a Partial gradient of the whole [vocab, hidden] weight, which FSDP2 casts to its
    fp32 reduce dtype and keeps while gradient sync is deferred
    (FSDPParam.to_accumulated_grad_if_needed) and reduce-scatters to the Shard(0) rows only
    at the reduction (_get_grad_inner_tensor). Here the lookup runs on the local rows
    (``to_local``, whose backward hands the gradient back as Shard(0)): a
    [vocab/tp, hidden] gradient, the rows' Shard(0) offset as torch.chunk splits them (the
    Shard placement's rule)."""
    import torch.nn.functional as F

    def forward(tokens):
        idx = tokens.to_local() if isinstance(tokens, DTensor) else tokens
        local = emb.weight.to_local()
        rows = -(-emb.weight.shape[0] // tp_mesh.size())  # torch.chunk's chunk size
        start = min(tp_mesh.get_local_rank() * rows, emb.weight.shape[0])
        mine = (idx >= start) & (idx < start + local.shape[0])
        out = F.embedding(torch.where(mine, idx - start, 0), local)
        out = out.masked_fill(~mine.unsqueeze(-1), 0.0)
        return DTensor.from_local(out, tp_mesh, [Partial()], run_check=False)
    emb.forward = forward


def apply_tp(model: Transformer, plan: Plan, tp_mesh) -> list[str]:
    """Parallelise ``model`` (whole or a pipeline chunk) in place.

    Returns the names of the tp-partial parameters (resolve them after FSDP wrapping, which
    replaces parameter objects).
    """
    if plan.tp == 1:
        return []
    check_tp(model, plan)
    sp = plan.sequence_parallel
    seq = Shard(1) if sp else Replicate()
    top = {}
    if hasattr(model, "tok_embeddings"):
        top["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)
    if hasattr(model, "output"):
        if sp:
            top["norm"] = SequenceParallel()
        top["output"] = ColwiseParallel(input_layouts=seq, output_layouts=Shard(-1),
                                        use_local_output=True)
    if top:
        parallelize_module(model, tp_mesh, top)
    if hasattr(model, "tok_embeddings"):
        vocab_parallel_embedding(model.tok_embeddings, tp_mesh)
    if model.spec.tied_embeddings and hasattr(model, "output") \
            and hasattr(model, "tok_embeddings"):
        # both layers split the [vocab, hidden] weight by vocabulary rows (Shard(0)): tie the
        # DTensors again (parallelize_module made one parameter each). A pipeline chunk with
        # one end holds its own copy, split the same way: the local shards of the two
        # copies are the same rows (pipeline.TiedEmbedding sums their gradients)
        model.output.weight = model.tok_embeddings.weight
    partial = []
    for key, block in model.layers.items():
        att = block.attention
        mla = hasattr(att, "wkv_b")
        # MLA's replicated latent layers take plain tensors: hand the gathered input over local
        lp = {"attention": PrepareModuleInput(input_layouts=(seq, None),
                                              desired_input_layouts=(Replicate(), None),
                                              use_local_output=mla),
              "attention.wo": RowwiseParallel(output_layouts=seq)}
        if mla:
            # the shared rotary key part feeds every local head: its gradient is a tp partial sum
            group = tp_mesh.get_group()
            att.kpe_region = lambda t, g=group: _ReduceInBackward.apply(t, g)
            lp["attention.wkv_b"] = ColwiseParallel()
            lp["attention.wq_b" if hasattr(att, "wq_b") else "attention.wq"] = ColwiseParallel()
        elif plan.tp > att.kv_heads:
            # more tp ranks than kv heads (Megatron replicates them): wq splits by heads,
            # wk/wv stay whole on every rank, which keeps the kv head of its query heads
            lp["attention"] = PrepareModuleInput(input_layouts=(seq, None),
                                                 desired_input_layouts=(Replicate(), None),
                                                 use_local_output=True)
            lp["attention.wq"] = ColwiseParallel()
            group, r = tp_mesh.get_group(), tp_mesh.get_local_rank()
            head = r * att.kv_heads // plan.tp
            att.kv_pick = slice(head, head + 1)
            att.kv_region = lambda t, g=group: _ReduceInBackward.apply(t, g)
            partial += [f"layers.{key}.attention.{n}.{w}" for n in ("wk", "wv")
                        for w, _ in getattr(att, n).named_parameters()]
        else:
            for n in ("wq", "wk", "wv"):
                lp[f"attention.{n}"] = ColwiseParallel()
        if hasattr(att, "q_norm") and not mla:
            # per-head norms applied to this rank's heads: their weight gradient is a tp partial sum
            partial += [f"layers.{key}.attention.{n}.{w}" for n in ("q_norm", "k_norm")
                        for w, _ in getattr(att, n).named_parameters()]
        if sp:
            lp["attention_norm"] = SequenceParallel()
        if block.is_moe:
            if sp:
                lp["ffn_norm"] = SequenceParallel(use_local_output=True)
            partial += [n for n, _ in model.named_parameters()
                        if n.startswith(f"layers.{key}.moe.") and ".experts." not in n]
        else:
            if sp:
                lp["ffn_norm"] = SequenceParallel()
            lp["feed_forward"] = PrepareModuleInput(input_layouts=(seq,),
                                                    desired_input_layouts=(Replicate(),))
            lp["feed_forward.w1"] = ColwiseParallel()
            lp["feed_forward.w2"] = RowwiseParallel(output_layouts=seq)
            if block.feed_forward.swiglu:
                lp["feed_forward.w3"] = ColwiseParallel()
        parallelize_module(block, tp_mesh, lp)
    return partial


def make_loss_fn(plan: Plan, tp_mesh):
    """loss(logits, labels): plain cross entropy, or loss parallel on vocab-split logits.

    The returned function must run inside ``loss_context(plan)`` (forward and backward).
    """
    if plan.tp == 1:
        return cross_entropy

    def tp_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        d = DTensor.from_local(logits, tp_mesh, [Shard(-1)], run_check=False)
        loss = cross_entropy(d, labels)
        return loss.to_local() if isinstance(loss, DTensor) else loss

    return tp_loss


def loss_context(plan: Plan):
    import contextlib
    return loss_parallel() if plan.tp > 1 else contextlib.nullcontext()
