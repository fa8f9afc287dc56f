"""What meshplan's runtime keeps for backward per layer per token (saved_tensors_hooks on
its own model, bf16 as FSDP2's mixed-precision policy casts it) against the cost model's
charge for engine "" and against the closed forms of each tensor.

GPU layout (what the dry run measures, runtime/dryrun.py gpu_rms_norm / gpu_attention):
  norm inputs 2 x 2h + rstd 2 x 4, norm outputs (linear inputs) 2 x 2h,
  q and the attention output (= o_proj input) 2 x 2 q_w, k and v with their own (kv)
  heads 2 kv_w (SDPA's enable_gqa: torch's fused kernels keep them unrepeated), lse 4 heads,
  SwiGLU gate, up, silu(gate), product 4 x 2 w, and the rotary cos/sin tables
  2 x 2 (rotary/2) per position.
The CPU kernels alone keep more: torch.rms_norm's decomposition an fp32 copy and the fp32
normalised input (+ 6 bytes per element of each norm over the bf16 input), the CPU SDPA's
contiguous output a copy for o_proj (+ 2 q_w)."""

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from meshplan.cost.layer import layer_ops_times  # noqa: E402
from meshplan.cost.ops import Shard  # noqa: E402
from meshplan.runtime.dryrun import gpu_attention, gpu_rms_norm  # noqa: E402
from meshplan.runtime.model import build_model  # noqa: E402
from meshplan.scenario import make_cluster  # noqa: E402
from meshplan.specs.catalog.presets import preset  # noqa: E402

SPEC = dataclasses.replace(preset("llama3.2-1b"), layers=2, hidden=256, heads=4, kv_heads=2,
                           head_dim=64, ffn=512, vocab=512, tied_embeddings=False)
MB, SEQ = 2, 64


def _saved_per_layer(gpu: bool, kv_pick: slice | None = None) -> float:
    """Bytes autograd keeps in layer 0 for one micro-batch (parameters excluded);
    ``kv_pick``: every rank's one kv head, as tensor parallelism over more ranks than kv
    heads sets it (runtime/tensor_parallel.py)."""
    m = build_model(SPEC, dtype=torch.bfloat16)
    if gpu:
        gpu_rms_norm(m)
        gpu_attention(m)
    if kv_pick is not None:
        for blk in m.layers.values():
            blk.attention.kv_pick = kv_pick
    params = {p.untyped_storage().data_ptr() for p in m.parameters()}
    seen: dict[int, int] = {}
    where = ["-"]

    def pack(t):
        st = t.untyped_storage()
        if where[0] == "0" and st.data_ptr() not in params:
            seen.setdefault(st.data_ptr(), st.nbytes())
        return t
    blk = m.layers["0"]
    blk.register_forward_pre_hook(lambda *_: where.__setitem__(0, "0"))
    blk.register_forward_hook(lambda *_: where.__setitem__(0, "-"))
    x = torch.randint(0, SPEC.vocab, (MB, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(x)
    out.float().sum().backward()  # the graph is whole (and runs) with the dry run's kernels
    return float(sum(seen.values()))


def _closed_form_gpu(kv_heads: int = SPEC.kv_heads) -> float:
    h, w, q_w, heads = SPEC.hidden, SPEC.ffn, SPEC.heads * SPEC.head_dim, SPEC.heads
    kv_w = 2 * kv_heads * SPEC.head_dim  # k and v
    tokens = MB * SEQ
    per_token = (2 * 2 * h + 2 * 4 / h * h + 2 * 2 * h + 2 * 2 * q_w + 2 * kv_w + 4 * heads
                 + 4 * 2 * w)
    rope_tables = 2 * 2 * (SPEC.head_dim // 2) * SEQ  # cos, sin per position, bf16
    return per_token * tokens + rope_tables


def test_runtime_keeps_the_closed_form_per_token_per_layer():
    assert _saved_per_layer(gpu=True) == _closed_form_gpu()


def test_a_picked_kv_head_keeps_its_own_k_and_v_only():
    """tp over more ranks than kv heads: each rank's one kv head (k and v of d per token),
    not every query head's copy (repeat_interleave before this change: 2 q_w), nor the whole
    wv output a view of the picked head would keep (kv_heads d)."""
    assert _saved_per_layer(gpu=True, kv_pick=slice(1, 2)) == _closed_form_gpu(kv_heads=1)


def test_grouped_kv_attention_equals_the_repeated_one():
    """SDPA's enable_gqa reads kv head i // (heads / kv_heads) for query head i: output and
    every gradient equal those of k/v repeated by repeat_interleave (the runtime's attention
    before this change), fp32 within rounding."""
    from meshplan.runtime.model import local_causal_attention

    def repeated(q, k, v, positions, scale):  # a core that takes repeated k/v
        rep = q.shape[1] // k.shape[1]
        return local_causal_attention(q, k.repeat_interleave(rep, 1),
                                      v.repeat_interleave(rep, 1), positions, positions, scale)
    x = torch.randint(0, SPEC.vocab, (MB, SEQ))
    runs = []
    for core in (None, repeated):
        torch.manual_seed(0)
        m = build_model(SPEC, dtype=torch.float32)
        for blk in m.layers.values():
            blk.attention.core = core
        m(x).float().pow(2).mean().backward()
        runs.append((m(x).detach(), {n: p.grad for n, p in m.named_parameters()}))
    (out_g, grads_g), (out_r, grads_r) = runs
    torch.testing.assert_close(out_g, out_r, rtol=1e-5, atol=1e-5)
    for n, g in grads_g.items():
        torch.testing.assert_close(g, grads_r[n], rtol=1e-4, atol=1e-6, msg=n)


def test_cpu_kernels_keep_the_fp32_norm_copies_and_the_output_copy_on_top():
    h, q_w = SPEC.hidden, SPEC.heads * SPEC.head_dim
    extra = (2 * 6 * h + 2 * q_w) * MB * SEQ
    assert _saved_per_layer(gpu=False) - _saved_per_layer(gpu=True) == extra


def test_cost_model_charges_what_the_runtime_keeps():
    """Engine "" (meshplan's runtime), recompute none: saved + recomputable bytes of a dense
    layer within the rstd and rotary tables it does not count (under 2% here)."""
    ops, _dev, _t = layer_ops_times(SPEC, make_cluster("1xH100-SXM-80GB"), "dense",
                                    Shard(SEQ, MB), "bf16", "")
    charged = ops.saved_bytes + ops.recomputable_bytes
    kept = _closed_form_gpu()
    uncounted = 2 * 4 * MB * SEQ + 2 * 2 * (SPEC.head_dim // 2) * SEQ
    assert charged == kept - uncounted
    assert uncounted / kept < 0.02
    # beyond Megatron's count: silu's output; k and v stay grouped (no repeat on an H100)
    w = SPEC.ffn
    megatron, _d, _t = layer_ops_times(SPEC, make_cluster("1xH100-SXM-80GB"), "dense",
                                       Shard(SEQ, MB), "bf16", "megatron")
    assert charged - (megatron.saved_bytes + megatron.recomputable_bytes) == 2 * MB * SEQ * w


@pytest.mark.parametrize("gpus,precision,tp,cp,cp_kind,repeated", [
    ("1xH100-SXM-80GB", "bf16", 1, 1, "ring", False),  # flash (or cuDNN) takes GQA
    ("1xH100-SXM-80GB", "fp32", 1, 1, "ring", False),  # no fp32 flash; CUDA efficient takes GQA
    ("1xMI300X", "bf16", 1, 1, "ring", False),  # ROCm flash takes GQA
    ("1xMI300X", "fp32", 1, 1, "ring", True),  # ROCm efficient refuses GQA: math repeats
    ("2xH100-SXM-80GB", "bf16", 1, 2, "ring", False),  # ring attention takes grouped k/v
    ("2xH100-SXM-80GB", "bf16", 1, 2, "all_to_all", False),  # Ulysses: cp divides 2 kv heads
    ("4xH100-SXM-80GB", "bf16", 1, 4, "all_to_all", True),  # ... not 4: k/v repeated
    ("4xH100-SXM-80GB", "bf16", 2, 2, "all_to_all", True),  # ... nor 1 kv head per tp rank
    ("2xMI300X", "bf16", 1, 2, "all_to_all", True),  # masked: ROCm flash refuses, repeated
    ("2xMI300X", "bf16", 1, 2, "ring", False),  # ring runs no SDPA
])
def test_cost_model_charges_repeated_kv_where_torch_or_the_runtime_repeats(
        gpus, precision, tp, cp, cp_kind, repeated):
    """Engine "": the repeated k/v (2 (2 q_w - kv_w) bytes per token) are charged only where
    the SDPA backend torch 2.13 picks on the GPU expands them (sdp_utils.cpp: GQA admitted
    by flash and cuDNN, and by the efficient kernel except on ROCm; the math fallback
    repeats) or a context-parallel core takes them repeated (Ulysses where cp does not
    divide the rank's kv heads)."""
    cluster = make_cluster(gpus)
    q_w, kv_w = SPEC.heads * SPEC.head_dim / tp, 2 * SPEC.kv_heads * SPEC.head_dim / tp
    shard = Shard(SEQ * cp, MB, tp=tp, cp=cp)
    ours, _d, _t = layer_ops_times(SPEC, cluster, "dense", shard, precision, "",
                                   cp_kind=cp_kind)
    mega, _d, _t = layer_ops_times(SPEC, cluster, "dense", shard, precision, "megatron",
                                   cp_kind=cp_kind)
    extra = (ours.saved_bytes + ours.recomputable_bytes
             - mega.saved_bytes - mega.recomputable_bytes)
    scale = 2.0 if precision == "fp32" else 1.0  # fp32 activations (compute.device act_scale)
    want = 2 * MB * SEQ * (SPEC.ffn / tp + (2 * q_w - kv_w if repeated else 0)) * scale
    assert extra == pytest.approx(want)


@pytest.mark.parametrize("hip,masked,dtype,repeated", [
    (None, True, torch.float32, False),  # CUDA (and CPU): fused kernels take GQA
    ("6.4", False, torch.bfloat16, False),  # ROCm flash takes GQA
    ("6.4", True, torch.bfloat16, True),  # ROCm: flash refuses masks, efficient GQA
    ("6.4", False, torch.float32, True),  # ROCm: flash refuses fp32
])
def test_sdpa_gets_repeated_kv_only_where_no_fused_kernel_takes_grouped(
        monkeypatch, hip, masked, dtype, repeated):
    """local_causal_attention repeats k/v itself where torch 2.13's SDPA would send grouped
    ones to the math backend (ops.sdpa_expands_gqa: ROCm with a mask, fp32 or a large
    head dim), else hands them grouped; the result is the same either way."""
    from meshplan.runtime.model import local_causal_attention
    monkeypatch.setattr(torch.version, "hip", hip)
    b, h, g, s, d = 1, 4, 2, 8, 16
    q, k, v = (torch.randn(b, n, s, d, dtype=dtype) for n in (h, g, g))
    pos = torch.arange(s) if masked else None
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def sdpa(q, k, *a, **kw):
        seen.append(k.shape[1])
        return real(q, k, *a, **kw)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", sdpa)
    out = local_causal_attention(q, k, v, pos, pos, 0.25)
    assert seen == [h if repeated else g]
    monkeypatch.setattr(torch.version, "hip", None)
    ref = local_causal_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                 pos, pos, 0.25)
    torch.testing.assert_close(out, ref)


def test_ring_attention_keeps_grouped_kv(monkeypatch):
    """Ring attention (one rank, whose hop hands its own block back; the multi-rank exchange
    is test_equivalence's cp cases) on 4 query heads over 2 kv heads: output and gradients
    equal SDPA on k/v repeated by repeat_interleave, and autograd keeps q, k and v at their
    own heads, the output and the log-sum-exp (before: k and v repeated, 4 heads each)."""
    import torch.distributed as dist

    from meshplan.runtime import context_parallel
    from meshplan.runtime.context_parallel import make_ring_core
    from meshplan.runtime.model import local_causal_attention, takes_grouped_kv
    b, h, g, s, d, scale = 2, 4, 2, 16, 8, 0.3
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, s, d, dtype=torch.float64, requires_grad=True)
               for n in (h, g, g))
    pos = torch.arange(s)
    # a ring of one: gloo does not send to itself
    monkeypatch.setattr(context_parallel, "_ring_exchange", lambda t, group: t.clone())
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        core = make_ring_core(dist.group.WORLD, 1)
        kept: dict[int, int] = {}

        def pack(t):
            kept.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = core(q, k, v, pos, scale)
        grads = torch.autograd.grad(out.pow(2).sum(), (q, k, v))
    finally:
        dist.destroy_process_group()
    assert takes_grouped_kv(core)
    ref = local_causal_attention(q, k.repeat_interleave(h // g, 1),
                                 v.repeat_interleave(h // g, 1), pos, pos, scale)
    torch.testing.assert_close(out, ref)
    for got, want in zip(grads, torch.autograd.grad(ref.pow(2).sum(), (q, k, v))):
        torch.testing.assert_close(got, want)
    e = 8  # float64
    assert sum(kept.values()) == (2 * b * h * s * d + 2 * b * g * s * d + b * h * s) * e + s * 8
