"""Activation bytes of one transformer layer in Aleph Alpha's engine (framework
"aleph-alpha", Hagemann et al. 2023), against the source: github Aleph-Alpha/scaling at
78489292 (2024-08-27, the oldest public release, with the flash_attn rms_norm option the
paper's sheets name).

Independent truths:
1. A closed form written here from the cited lines, tensor by tensor (not from the
   constants of cost/ops.py), per token of one micro-batch, 16-bit unless stated:
   - each of the two eager RMSNorms (core/nn/norm/rms_norm.py lines 45-53): the fp32 copy
     x.float() (4 h, kept by pow and by x * rsqrt), the normalised 16-bit output kept by
     ``* weight`` (2 h), and its product, kept by the next linear (2 h);
   - attention (core/nn/attention/attention.py, rotary.py): the fused QKV output, alive
     through the v view flash-attn keeps (q_w + kv_w), the rotated q and k (q_w + kv_w / 2),
     flash-attn's output (o_w), with micro-batch > 1 the dense input, a copy of it (o_w), the
     fp32 log-sum-exp (4 bytes x heads / tp) and four gathered rotary tables (4 x head_dim);
   - the SwiGLU MLP (core/nn/mlp.py lines 157-161): dense_in's output, silu's output,
     siglu_weight's output and their product (4 w).
2. The same forward run op by op in PyTorch on the CPU (the cited lines, with a stand-in
   for flash-attn's varlen function that keeps what FlashAttnVarlenFunc keeps: q, k, v as
   passed when their last stride is 1, the output and a [heads, tokens] fp32 log-sum-exp),
   counting the storages autograd keeps (saved_tensors_hooks), parameters excluded.
"""

import pytest

from meshplan.cost import layer
from meshplan.cost.ops import Shard
from meshplan.specs.catalog.presets import preset
from meshplan.validate import prepare

ENGINE = "aleph-alpha"


def closed_form_bytes_per_token(h: int, heads: int, kv_heads: int, d: int, ffn: int,
                                tp: int, micro_batch: int, sp: bool = False) -> float:
    q_w, kv_w, o_w, w = heads / tp * d, 2 * kv_heads / tp * d, heads / tp * d, ffn / tp
    # sequence parallel: each norm runs on the 1 / tp sequence shard (its fp32 copy and
    # normalised output are the shard's) and gathers its product over the sequence
    # (rms_norm.py lines 94-105 at 737f8558), which the next linear keeps whole
    shard = 1 / tp if sp else 1
    norms = 2 * ((4 * h + 2 * h) * shard + 2 * h)
    fused_qkv = kv_heads == heads  # attention_qkv_in_one, the config default for MHA
    attn = 2 * (q_w + kv_w) if fused_qkv else 2 * kv_w / 2  # QKV storage (or v alone)
    attn += 2 * (q_w + kv_w / 2)  # rotated q and k
    attn += 2 * o_w + (2 * o_w if micro_batch > 1 else 0)  # flash output (+ dense copy)
    attn += 4 * heads / tp  # log-sum-exp, fp32
    attn += 4 * 2 * d  # cos and sin gathered for q and for k
    mlp = 4 * 2 * w
    return norms + attn + mlp


def _hagemann_row(rid: str) -> dict:
    import csv
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "bench" / "data" / "layout_sets.csv"
    with path.open() as f:
        return next(r for r in csv.DictReader(f) if r["id"] == rid)


@pytest.mark.parametrize("rid", ["L061", "L125", "L230", "L215", "L034"])
def test_layer_saved_bytes_match_the_source(rid):
    """No recomputation: what one layer keeps (ops.saved_bytes + recomputable_bytes, what
    layer_cost saves without recomputation) equals the closed form."""
    p = prepare(_hagemann_row(rid))
    m, plan = p.model, dict(p.pins)
    tp, mb = plan["tp"], plan["micro_batch"]
    shard = Shard(seq=p.workload.seq_len, micro_batch=mb, tp=tp)
    ops, _, _ = layer.layer_ops_times(m, p.cluster, "dense", shard, "bf16", ENGINE)
    tokens = p.workload.seq_len * mb
    want = tokens * closed_form_bytes_per_token(m.hidden, m.heads, m.kv_heads, m.head_dim,
                                                m.ffn, tp, mb)
    assert ops.saved_bytes + ops.recomputable_bytes == pytest.approx(want, rel=1e-9)


def test_other_engines_keep_the_megatron_count():
    """The rules are the engine's: Megatron's layer of the same shape keeps less."""
    p = prepare(_hagemann_row("L230"))
    shard = Shard(seq=2048, micro_batch=2, tp=8)
    aa, _, _ = layer.layer_ops_times(p.model, p.cluster, "dense", shard, "bf16", ENGINE)
    mg, _, _ = layer.layer_ops_times(p.model, p.cluster, "dense", shard, "bf16", "megatron")
    m = p.model
    d, tokens = m.head_dim, 2048 * 2
    extra = tokens * (2 * 4 * m.hidden  # fp32 norm copies (UNFUSED_NORM_ENGINES)
                      + 2 * (m.heads / 8 * d + m.heads / 8 * d)  # rotated q, k
                      + 2 * m.heads / 8 * d  # the dense input copy (micro-batch 2)
                      + 8 * d  # rotary tables
                      + 2 * m.ffn / 8)  # silu's output
    assert (aa.saved_bytes + aa.recomputable_bytes) - (mg.saved_bytes + mg.recomputable_bytes) \
        == pytest.approx(extra, rel=1e-9)


def test_gqa_and_micro_batch_one():
    """Separate q, k, v linears (num_kv_heads set, attention_qkv_in_one off): v keeps only
    its own storage, so nothing beyond the rotated q and k; micro-batch 1: no dense copy."""
    model = preset("llama3.1-8b")  # 32 heads, 8 kv heads
    shard = Shard(seq=4096, micro_batch=1, tp=2)
    p = prepare(_hagemann_row("L061"))
    ops, _, _ = layer.layer_ops_times(model, p.cluster, "dense", shard, "bf16", ENGINE)
    want = 4096 * closed_form_bytes_per_token(model.hidden, model.heads, model.kv_heads,
                                              model.head_dim, model.ffn, 2, 1)
    assert ops.saved_bytes + ops.recomputable_bytes == pytest.approx(want, rel=1e-9)


# ---- the forward of the cited lines, run op by op ----
def _saved_storage_bytes(fn, params):
    """Bytes of the distinct storages autograd keeps while ``fn`` runs forward, parameters
    and per-token scalars (rsqrt's [tokens, 1] output) excluded."""
    import torch
    kept = {}
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in param_ptrs and t.shape[-1] != 1:
            kept[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(kept.values()), out


def _aleph_layer(b: int, sq: int, h: int, heads: int, ffn: int, tp: int, sp: bool = False):
    torch = pytest.importorskip("torch")
    einops = pytest.importorskip("einops")
    rearrange, repeat = einops.rearrange, einops.repeat
    torch.manual_seed(0)
    dt = torch.bfloat16
    np_, d, w = heads // tp, h // heads, ffn // tp

    def lin(i, o):
        return torch.nn.Parameter(torch.randn(o, i, dtype=dt) * 0.02)

    P = dict(n1=torch.nn.Parameter(torch.ones(h, dtype=dt)),
             n2=torch.nn.Parameter(torch.ones(h, dtype=dt)),
             qkv=lin(h, 3 * np_ * d), dense=lin(np_ * d, h),
             w_in=lin(h, w), w_siglu=lin(h, w), w_out=lin(w, h))
    # rotary.py _pre_calculate_cos_sin: (seq, 1, 1, dim) tables in the layer dtype
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    emb = torch.cat([torch.outer(torch.arange(sq).float(), inv)] * 2, dim=-1)
    cos = emb.cos().reshape(sq, 1, 1, d).to(dt)
    sin = emb.sin().reshape(sq, 1, 1, d).to(dt)

    def rms(x, weight):  # rms_norm.py lines 45-53, optimization_type torch
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * weight

    def vector_gather(vectors, indices):  # rotary.py lines 9-23
        vectors = repeat(vectors, "sq b nh d -> sq b B nh d", B=indices.shape[1]).squeeze(1)
        indices = repeat(indices, "sq b -> sq b nh d", nh=vectors.shape[-2], d=vectors.shape[-1])
        return torch.gather(vectors, dim=0, index=indices)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=x1.ndim - 1)

    class FlashVarlen(torch.autograd.Function):
        """Keeps what flash-attn's FlashAttnVarlenFunc keeps (q, k, v after maybe_contiguous,
        out_padded, softmax_lse [heads, total_q] fp32); computes causal attention."""

        @staticmethod
        def forward(ctx, q, k, v):
            q, k, v = [x.contiguous() if x.stride(-1) != 1 else x for x in (q, k, v)]
            qb, kb, vb = [rearrange(x, "(b s) n h -> b n s h", b=b) for x in (q, k, v)]
            out = torch.nn.functional.scaled_dot_product_attention(qb, kb, vb, is_causal=True)
            out = rearrange(out, "b n s h -> (b s) n h").contiguous()
            lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32)
            ctx.save_for_backward(q, k, v, out, lse)
            return out

        @staticmethod
        def backward(ctx, g):  # not run
            raise NotImplementedError

    class Gather(torch.autograd.Function):
        """_GatherFromSequenceParallelRegion (core/nn/linear/utils.py at 737f8558): the
        whole sequence from the tp shards (here tp copies of this rank's), saving nothing."""

        @staticmethod
        def forward(ctx, y):
            return torch.cat([y] * tp, dim=1)

        @staticmethod
        def backward(ctx, g):  # not run
            raise NotImplementedError

    class ReduceScatter(torch.autograd.Function):
        """_AllReduceScatterToSequenceParallel: a new [b, sq / tp, h] tensor, saving nothing."""

        @staticmethod
        def forward(ctx, y):
            return y.narrow(1, 0, y.shape[1] // tp).contiguous()

        @staticmethod
        def backward(ctx, g):  # not run
            raise NotImplementedError

    def norm(x, weight):  # RMSNorm.forward: the gather under sequence parallelism
        y = rms(x, weight)
        return Gather.apply(y) if sp else y

    def scatter(y):  # attention.py line 967, mlp.py line 280
        return ReduceScatter.apply(y) if sp else y

    def forward(x, position_ids):
        # layer.py attention_block (input_layernorm, self_attention, residual add)
        y = norm(x, P["n1"])
        qkv = torch.nn.functional.linear(y, P["qkv"])
        qkv = rearrange(qkv, "b sq (np hn) -> sq b np hn", np=np_)
        q, k, v = torch.split(qkv, d, dim=-1)  # split_tensor_along_last_dim(qkv, 3)
        pos = rearrange(position_ids, "b sq -> sq b")
        cq, sq_, ck, sk = (vector_gather(t, pos) for t in (cos, sin, cos, sin))
        q, k = (q * cq) + (rotate_half(q) * sq_), (k * ck) + (rotate_half(k) * sk)
        q, k, v = (rearrange(t, "s b n h -> (b s) n h") for t in (q, k, v))
        a = FlashVarlen.apply(q, k, v)
        a = rearrange(a, "(b sq) np hn -> (b np) sq hn", b=b)
        a = rearrange(a, "(b np) sq hn -> b sq (np hn)", b=b)
        x = x + scatter(torch.nn.functional.linear(a, P["dense"]))
        # mlp_block (post_attention_layernorm, ParallelSwiGLUMLP, residual add)
        y = norm(x, P["n2"])
        u = torch.nn.functional.silu(torch.nn.functional.linear(y, P["w_in"]))
        u = u * torch.nn.functional.linear(y, P["w_siglu"])
        return x + scatter(torch.nn.functional.linear(u, P["w_out"]))

    x = torch.randn(b, sq // tp if sp else sq, h, dtype=dt, requires_grad=True)
    position_ids = torch.arange(sq).unsqueeze(0).expand(b, sq)
    kept, _ = _saved_storage_bytes(lambda: forward(x, position_ids), list(P.values()))
    return kept


@pytest.mark.parametrize("b,tp", [(1, 1), (2, 1), (2, 2), (3, 4)])
def test_the_forward_keeps_the_closed_form(b, tp):
    """The op-by-op forward keeps what the closed form says (MHA, fused QKV), for micro-batch
    1 (flash's output and the dense input share a storage) and > 1 (they do not)."""
    h, heads, ffn, sq = 256, 8, 704, 64
    kept = _aleph_layer(b, sq, h, heads, ffn, tp)
    want = b * sq * closed_form_bytes_per_token(h, heads, heads, h // heads, ffn, tp, b)
    assert kept == want


def test_meshplan_counts_the_forward():
    """meshplan's layer for this engine keeps what the op-by-op forward keeps."""
    torch = pytest.importorskip("torch")  # noqa: F841
    from dataclasses import replace
    p = prepare(_hagemann_row("L230"))
    model = replace(p.model, hidden=256, heads=8, kv_heads=8, ffn=704, head_dim=32)
    for b, tp in ((1, 2), (2, 4)):
        shard = Shard(seq=64, micro_batch=b, tp=tp)
        ops, _, _ = layer.layer_ops_times(model, p.cluster, "dense", shard, "bf16", ENGINE)
        assert ops.saved_bytes + ops.recomputable_bytes == _aleph_layer(b, 64, 256, 8, 704, tp)


@pytest.mark.parametrize("b,tp", [(1, 2), (2, 4)])
def test_sequence_parallel_forward_keeps_the_gathered_norm_outputs(b, tp):
    """Sequence parallel: the op-by-op forward (norms on the shard, their gathered product
    kept whole by the next linear) keeps the closed form, and meshplan's layer counts it."""
    from dataclasses import replace
    h, heads, ffn, sq = 256, 8, 704, 64
    kept = _aleph_layer(b, sq, h, heads, ffn, tp, sp=True)
    assert kept == b * sq * closed_form_bytes_per_token(h, heads, heads, h // heads, ffn, tp,
                                                        b, sp=True)
    p = prepare(_hagemann_row("L230"))
    model = replace(p.model, hidden=h, heads=heads, kv_heads=heads, ffn=ffn, head_dim=h // heads)
    shard = Shard(seq=sq, micro_batch=b, tp=tp, sp=True)
    ops, _, _ = layer.layer_ops_times(model, p.cluster, "dense", shard, "bf16", ENGINE)
    assert ops.saved_bytes + ops.recomputable_bytes == kept


def test_sequence_parallel_head_keeps_the_gathered_input():
    """The LM head (a ColumnParallelLinear after the final RMSNorm's gather) keeps the whole
    sequence's 16-bit input, 2 h bytes per token; Megatron's keeps the shard's."""
    p = prepare(_hagemann_row("L230"))
    m = p.model
    shard = Shard(seq=2048, micro_batch=2, tp=8, sp=True)
    aa, _, _ = layer.layer_ops_times(m, p.cluster, "head", shard, "bf16", ENGINE)
    mg, _, _ = layer.layer_ops_times(m, p.cluster, "head", shard, "bf16", "megatron")
    tokens = 2048 * 2
    assert aa.saved_bytes + aa.recomputable_bytes == pytest.approx(2 * tokens * m.hidden, rel=1e-12)
    assert mg.saved_bytes + mg.recomputable_bytes == pytest.approx(2 * tokens * m.hidden / 8,
                                                                   rel=1e-12)
