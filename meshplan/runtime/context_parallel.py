"""Context parallelism: ring attention or DeepSpeed-Ulysses, each with its own autograd.

Ring attention (``cp_kind="ring"``; Liu et al. 2023, "Ring Attention with Blockwise
Transformers"; blockwise softmax merge of Milakov & Gimelshein 2018 and FlashAttention-2's
backward, Dao 2023):

Every cp rank keeps the queries of its two load-balanced sequence chunks; the K/V blocks
travel around the ring by point-to-point messages. Forward merges per-block results through
their log-sum-exp; backward recomputes each block's probabilities from the saved
log-sum-exp and sends the K/V gradient accumulators around the ring with the blocks, so
after ``cp`` hops each block's gradient is back on its owner. Masks use global positions.
PyTorch's own ``context_parallel`` only shards the CUDA SDPA kernels, hence this version,
which runs on CPU/gloo as well as on GPUs.

Ulysses (``cp_kind="all_to_all"``; Jacobs et al. 2023, "DeepSpeed Ulysses", arXiv:2309.14509):
an all-to-all over the cp group turns q, k, v from [b, heads, s/cp, d] (this rank's tokens,
all local heads) into [b, heads/cp, s, d] (every token, a slice of the heads); attention is
then local, causal by the global positions of the gathered tokens (the concatenation of every
cp rank's ``cp_positions``), and a second all-to-all returns the output to [b, heads, s/cp, d].
The local heads (heads / tp) must be divisible by cp.

Grouped-query attention: ring attention takes k and v with their own heads (query head i
reads kv head i // (heads / kv heads), as repeat_interleave would lay them out): the kept
and exchanged K/V blocks are kv heads wide, not query heads wide. Ulysses does too where
cp divides the local kv heads (cp rank j then receives query heads j H/cp.. and exactly
their kv heads j G/cp..); otherwise k and v arrive repeated to the query heads.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..cost.ops import ulysses_grouped_kv
from ..errors import InputError
from .data import cp_positions
from .model import local_causal_attention


def _ring_exchange(t: torch.Tensor, group) -> torch.Tensor:
    """Send ``t`` to the next rank of the ring, return what the previous rank sent."""
    n, r = dist.get_world_size(group), dist.get_rank(group)
    nxt = dist.get_global_rank(group, (r + 1) % n)
    prv = dist.get_global_rank(group, (r - 1) % n)
    t = t.contiguous()
    out = torch.empty_like(t)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, nxt, group),
                                   dist.P2POp(dist.irecv, out, prv, group)])
    for q in reqs:
        q.wait()
    return out


def _scores(q, k, q_pos, k_pos, scale):
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    return s.masked_fill(~(q_pos[:, None] >= k_pos[None, :]), float("-inf"))


class RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, q_pos, seq_len, scale, group):
        n, r = dist.get_world_size(group), dist.get_rank(group)
        # q is [b, G, H/G, s, d] and k, v [b, G, 1, s, d] (G kv heads, make_ring_core):
        # the matmuls broadcast each kv head over its query heads
        dk_, dv_ = k.shape[-1], v.shape[-1]
        out = torch.zeros(*q.shape[:-1], dv_, dtype=q.dtype, device=q.device)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
        kv = torch.cat([k, v], dim=-1)
        for step in range(n):
            src = (r - step) % n
            k_pos = cp_positions(seq_len, n, src).to(q.device)
            kb, vb = kv.split([dk_, dv_], dim=-1)
            s = _scores(q, kb, q_pos, k_pos, scale)
            m = s.amax(dim=-1)
            m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
            p = torch.exp(s - m[..., None])
            blk_lse = m + torch.log(p.sum(dim=-1))
            new_lse = torch.logaddexp(lse, blk_lse)
            a = torch.exp(lse - new_lse).nan_to_num(0.0)
            b = torch.exp(m - new_lse).nan_to_num(0.0)
            out = out * a[..., None] + torch.matmul(p, vb) * b[..., None]
            lse = new_lse
            if step < n - 1:
                kv = _ring_exchange(kv, group)
        ctx.save_for_backward(q, k, v, out, lse, q_pos)
        ctx.seq_len, ctx.scale, ctx.group = seq_len, scale, group
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse, q_pos = ctx.saved_tensors
        group, scale = ctx.group, ctx.scale
        n, r = dist.get_world_size(group), dist.get_rank(group)
        dk_, dv_ = k.shape[-1], v.shape[-1]
        dout = dout.contiguous()
        delta = (dout * out).sum(dim=-1, keepdim=True)
        dq = torch.zeros_like(q)
        buf = torch.cat([k, v, torch.zeros_like(k), torch.zeros_like(v)], dim=-1)
        for step in range(n):
            src = (r - step) % n
            k_pos = cp_positions(ctx.seq_len, n, src).to(q.device)
            kb, vb, dkb, dvb = buf.split([dk_, dv_, dk_, dv_], dim=-1)
            p = torch.exp(_scores(q, kb, q_pos, k_pos, scale) - lse[..., None])
            # a kv head's gradient sums over its query heads (the broadcast dim)
            dvb = dvb + torch.matmul(p.transpose(-1, -2), dout).sum_to_size(dvb.shape)
            ds = p * (torch.matmul(dout, vb.transpose(-1, -2)) - delta)
            dq = dq + torch.matmul(ds, kb) * scale
            dkb = dkb + (torch.matmul(ds.transpose(-1, -2), q) * scale).sum_to_size(dkb.shape)
            buf = torch.cat([kb, vb, dkb, dvb], dim=-1)
            buf = _ring_exchange(buf, group)  # n hops: the accumulators come home
        _, _, dk, dv = buf.split([dk_, dv_, dk_, dv_], dim=-1)
        return dq, dk.contiguous(), dv.contiguous(), None, None, None, None


def make_ring_core(group, cp: int):
    def core(q, k, v, positions, scale):
        b, h, s, _ = q.shape
        g = k.shape[1]  # kv heads (h under MHA and MLA)
        out = RingAttention.apply(q.contiguous().view(b, g, h // g, s, q.shape[-1]),
                                  k.contiguous().unsqueeze(2), v.contiguous().unsqueeze(2),
                                  positions, positions.numel() * cp, scale, group)
        return out.view(b, h, s, out.shape[-1])
    core.grouped_kv = True  # model.takes_grouped_kv
    return core


class _HeadsToSeq(torch.autograd.Function):
    """[b, H, s/cp, d] -> [b, H/cp, s, d] by one all_to_all_single over ``group``.

    Head slice j goes to cp rank j; the received sequence blocks are laid out in cp-rank
    order. Backward is the reverse exchange (``_SeqToHeads`` of the gradient).
    """

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _heads_to_seq(x, group)

    @staticmethod
    def backward(ctx, g):
        return _seq_to_heads(g, ctx.group), None


class _SeqToHeads(torch.autograd.Function):
    """[b, H/cp, s, d] -> [b, H, s/cp, d], the inverse of ``_HeadsToSeq``."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _seq_to_heads(x, group)

    @staticmethod
    def backward(ctx, g):
        return _heads_to_seq(g, ctx.group), None


def _heads_to_seq(x: torch.Tensor, group) -> torch.Tensor:
    n = dist.get_world_size(group)
    b, h, s, d = x.shape
    send = x.reshape(b, n, h // n, s, d).transpose(0, 1).contiguous()  # [dest, b, h/n, s, d]
    recv = torch.empty_like(send)  # [src, b, h/n, s, d]
    dist.all_to_all_single(recv, send, group=group)
    return recv.permute(1, 2, 0, 3, 4).reshape(b, h // n, n * s, d)


def _seq_to_heads(x: torch.Tensor, group) -> torch.Tensor:
    n = dist.get_world_size(group)
    b, hn, sn, d = x.shape
    send = x.reshape(b, hn, n, sn // n, d).permute(2, 0, 1, 3, 4).contiguous()  # [dest, ...]
    recv = torch.empty_like(send)  # [src = head slice, b, h/n, s/n, d]
    dist.all_to_all_single(recv, send, group=group)
    return recv.transpose(0, 1).reshape(b, n * hn, sn // n, d)


def make_ulysses_core(group, cp: int, grouped_kv: bool = False):
    gathered: dict = {}  # seq_len -> global positions of the gathered tokens

    def core(q, k, v, positions, scale):
        # the gathered positions follow from the sequence length alone (``positions``, this
        # rank's own, is not needed: the dry run leaves it unset)
        seq_len = q.shape[-2] * cp
        pos = gathered.get(seq_len)
        if pos is None:
            pos = torch.cat([cp_positions(seq_len, cp, r) for r in range(cp)]).to(q.device)
            gathered[seq_len] = pos
        q, k, v = (_HeadsToSeq.apply(t, group) for t in (q, k, v))
        out = local_causal_attention(q, k, v, pos, pos, scale)
        return _SeqToHeads.apply(out, group)
    core.grouped_kv = grouped_kv  # model.takes_grouped_kv
    return core


def check_cp(spec, plan) -> None:
    """Raise InputError for context-parallel settings the runtime cannot run."""
    if plan.cp == 1 or plan.cp_kind == "ring":
        return
    local_heads = spec.heads // plan.tp
    if local_heads % plan.cp:
        raise InputError("cp", plan.cp, f"Ulysses (cp_kind=all_to_all) needs the attention heads "
                         f"per tp rank ({spec.heads}/{plan.tp} = {local_heads}) divisible by cp")


def apply_cp(model, plan, group) -> None:
    """Route every attention layer of ``model`` through ring attention or Ulysses over ``group``."""
    if plan.cp == 1:
        return
    check_cp(model.spec, plan)
    if plan.cp_kind == "all_to_all":
        spec = model.spec
        core = make_ulysses_core(group, plan.cp, not spec.is_mla and ulysses_grouped_kv(
            spec.kv_heads, plan.tp, plan.cp))
    else:
        core = make_ring_core(group, plan.cp)
    for block in model.layers.values():
        block.attention.core = core
