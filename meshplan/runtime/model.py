"""A Llama-style decoder built from the planner's ``ModelSpec``.

RMSNorm (or LayerNorm), rotary embeddings (RoFormer, Su et al. 2021), GQA attention or
DeepSeek multi-head latent attention (DeepSeek-V2 report, section 2.1), SwiGLU (Shazeer 2020)
or GELU MLP, and MoE layers with top-k routing and shared experts (DeepSeek-MoE; the
sigmoid router with a selection-only bias is DeepSeek-V3's, otherwise softmax + top-k with
renormalised weights as in Mixtral/Qwen3).

Like torchtitan the model is defined apart from how it is parallelised: the parallel
modules only swap parameters for DTensors or set hooks (``Attention.core`` for context
parallelism, ``MoE.dispatch`` for expert parallelism). ``layers`` is a ModuleDict keyed by
the global layer index, so a pipeline chunk keeps the fully qualified names of the whole
model and checkpoints reshard between layouts.

Weights are drawn per parameter from a generator seeded by (seed, parameter name), so a
model built whole, a pipeline chunk of it, or the same model on another layout starts from
bit-identical values.
"""

from __future__ import annotations

import functools
import math
import zlib

import torch
import torch.nn.functional as F
from torch import nn

from ..cost.ops import sdpa_expands_gqa
from ..errors import InputError
from ..specs.model import ModelSpec
from .expert_bias import count_load
from .recompute import checkpointed, discarded, kept, recomputed, run_block

INIT_STD = 0.02

# parameter of a pipeline chunk -> the parameter of the whole model it is a copy of: the last
# chunk's output layer of a tied model whose embedding sits on another chunk (Transformer)
TIED_COPY_OF = {"output.weight": "tok_embeddings.weight"}


def tied_copy(model: nn.Module) -> str | None:
    """The name of ``model``'s parameter that is one of two copies of a tied embedding (a
    pipeline chunk holding the embedding or the output layer but not both), else None."""
    spec = getattr(model, "spec", None)
    if spec is None or not spec.tied_embeddings:
        return None
    emb, out = hasattr(model, "tok_embeddings"), hasattr(model, "output")
    if emb == out:  # both ends (one shared parameter) or neither
        return None
    return "tok_embeddings.weight" if emb else "output.weight"


def check_buildable(spec: ModelSpec) -> None:
    """Raise InputError for the model features this runtime does not build."""
    from ..engines import model_features_unbuilt
    unbuilt = model_features_unbuilt(spec)
    if unbuilt:
        raise InputError("model", spec.name, f"the runtime does not build {unbuilt}")
    if spec.linear_bias:
        raise InputError("model", spec.name, "the runtime builds models without linear biases "
                         "(linear_bias=True, e.g. GPT-2/GPT-3/NeoX, is not supported)")
    if spec.position != "rope":
        raise InputError("model", spec.name, "the runtime builds rotary-position models only "
                         f"(position={spec.position!r} is not supported)")
    kind, rs = _rope_kind(spec)
    if kind not in ROPE_SCALINGS:
        raise InputError("rope_scaling", kind, "the runtime builds rotary scaling "
                         + ", ".join(ROPE_SCALINGS) + " only")
    need = {"linear": ("factor",), "default": (),
            "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                       "original_max_position_embeddings"),
            "yarn": ("factor", "original_max_position_embeddings")}[kind]
    for key in need:
        if not isinstance(rs.get(key), (int, float)) or isinstance(rs.get(key), bool):
            raise InputError(f"rope_scaling.{key}", rs.get(key),
                             f"the runtime's {kind} rotary scaling needs a number here")


def make_norm(spec: ModelSpec, width: int) -> nn.Module:
    if spec.norm in ("layernorm", "layernorm_nobias"):
        return nn.LayerNorm(width, eps=spec.norm_eps, bias=spec.norm == "layernorm")
    return nn.RMSNorm(width, eps=spec.norm_eps)


# rotary scalings the runtime builds, as transformers' modeling_rope_utils.py computes them
ROPE_SCALINGS = ("default", "linear", "llama3", "yarn")


def _rope_kind(spec: ModelSpec) -> tuple[str, dict]:
    from ..engines import rope_scaling
    rs = rope_scaling(spec)
    return str(rs.get("rope_type", rs.get("type", "default"))), rs


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature, 0.1 mscale ln(s) + 1 (Peng et al. 2023, eq. 22;
    DeepSeek-V3's yarn_get_mscale; 1 for s <= 1)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_inv_freq(spec: ModelSpec, dim: int) -> tuple[list[float], float]:
    """(inverse frequencies [dim/2], factor on cos and sin) of the model's rotary embedding
    over ``dim`` rotating dims at base ModelSpec.rope_theta, with its rope_scaling: linear
    (positions / factor), llama3 (Llama 3.1's wavelength bands) or yarn (Peng et al. 2023:
    NTK-by-parts ramp between beta_fast and beta_slow, cos/sin times the mscale ratio), as
    transformers' _compute_*_parameters (modeling_rope_utils.py, 4.57) compute them. Plain
    Python floats (float64), so the model can be built under FakeTensorMode or on meta."""
    kind, rs = _rope_kind(spec)
    base = spec.rope_theta
    inv = [1.0 / base ** (i / dim) for i in range(0, dim, 2)]
    if kind == "default":
        return inv, 1.0
    factor = float(rs["factor"])
    if kind == "linear":
        return [f / factor for f in inv], 1.0
    old = float(rs["original_max_position_embeddings"])
    if kind == "llama3":
        low, high = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        out = []
        for f in inv:
            wavelen = 2 * math.pi / f
            if wavelen < old / high:  # high frequencies kept
                out.append(f)
            elif wavelen > old / low:  # low frequencies interpolated
                out.append(f / factor)
            else:  # between: smooth blend
                smooth = (old / wavelen - low) / (high - low)
                out.append((1 - smooth) * f / factor + smooth * f)
        return out, 1.0
    # yarn
    attn = rs.get("attention_factor")
    ms, ms_all = rs.get("mscale"), rs.get("mscale_all_dim")
    if attn is None:
        attn = (yarn_mscale(factor, ms) / yarn_mscale(factor, ms_all) if ms and ms_all
                else yarn_mscale(factor))
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def corr(rot):  # the dim that turns ``rot`` times over the original context
        return dim * math.log(old / (rot * 2 * math.pi)) / (2 * math.log(base))
    lo, hi = corr(beta_fast), corr(beta_slow)
    if rs.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    out = []
    for i, f in enumerate(inv):
        extrapolate = 1 - min(max((i - lo) / (hi - lo), 0.0), 1.0)
        out.append(f / factor * (1 - extrapolate) + f * extrapolate)
    return out, float(attn)


def mla_softmax_scale(spec: ModelSpec) -> float:
    """MLA's attention scale: 1/sqrt(qk head dim), times yarn_mscale(factor, mscale_all_dim)^2
    under YaRN (DeepSeek-V3's DeepseekV3Attention.softmax_scale; 1.87x for V3's factor 40)."""
    scale = (spec.qk_nope_head_dim + spec.qk_rope_head_dim) ** -0.5
    kind, rs = _rope_kind(spec)
    if kind == "yarn" and rs.get("mscale_all_dim"):
        m = yarn_mscale(float(rs["factor"]), float(rs["mscale_all_dim"]))
        scale *= m * m
    return scale


def rope_cos_sin(positions: torch.Tensor, dim: int, dtype: torch.dtype, theta=10000.0,
                 freqs: tuple[list[float], float] | None = None):
    """cos, sin of shape [s, dim/2] for the given integer positions (RoFormer eq. 34) at
    rotary base ``theta``, or from ``freqs`` (rope_inv_freq: the model's base and scaling)."""
    if freqs is None:
        inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64,
                                            device=positions.device) / dim))
        mul = 1.0
    else:
        inv = torch.tensor(freqs[0], dtype=torch.float64, device=positions.device)
        mul = freqs[1]
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    return (ang.cos() * mul).to(dtype), (ang.sin() * mul).to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[2i], x[2i+1]) of the last dim (interleaved: DeepSeek's checkpoints,
    transformers' DeepseekV3 rope_interleave); x is [b, heads, s, d]."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    r1 = x1 * cos - x2 * sin
    r2 = x1 * sin + x2 * cos
    return torch.stack((r1, r2), dim=-1).flatten(-2)


def apply_rope_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[i], x[i + d/2]) of the last dim (rotate_half: the layout of Llama,
    Qwen, Mistral/Mixtral checkpoints in transformers, whose conversion permutes Meta's
    interleaved q/k rows); x is [b, heads, s, d]."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def local_causal_attention(q, k, v, q_pos, k_pos, scale):
    """softmax(q k^T * scale + causal mask by global position) v, all heads at once. k and
    v may hold fewer heads than q (grouped-query attention: query head i reads kv head
    i // (q heads / kv heads), what repeat_interleave would lay out)."""
    gqa = q.shape[-3] != k.shape[-3]
    vendor = "amd" if torch.version.hip else "nvidia"
    if gqa and sdpa_expands_gqa(vendor, q.dtype == torch.float32, q.shape[-1],
                                q_pos is not None):
        # no fused kernel for grouped k/v here: repeat them for the efficient kernel rather
        # than have the math backend repeat them and keep its fp32 scores besides
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
        gqa = False
    if q_pos is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale,
                                              enable_gqa=gqa)
    mask = q_pos[:, None] >= k_pos[None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)


def takes_grouped_kv(core) -> bool:
    """Whether an attention core takes k and v with their own (fewer) heads: the local SDPA
    (``core`` None) does, through ``enable_gqa``; a core says so by ``core.grouped_kv``.

    torch 2.13's SDPA hands grouped k/v as they are to every fused backend that accepts
    them (aten/src/ATen/native/transformers/attention.cpp scaled_dot_product_attention: the
    cudnn, flash and efficient cases pass key/value unchanged; sdp_utils.cpp admits GQA in
    can_use_flash_attention, can_use_cudnn_attention and, except on ROCm,
    can_use_mem_efficient_attention; the CPU flash kernel likewise), and those keep the
    grouped k/v for backward. Only the math fallback expands them
    (pre_process_group_query_attention_input: repeat_interleave). Repeating them here
    instead allocated and kept k and v at the query head count in every layer."""
    return core is None or getattr(core, "grouped_kv", False)


class Attention(nn.Module):
    """GQA attention. ``core(q, k, v, positions, scale)`` is replaceable (ring attention)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        h, d = spec.hidden, spec.head_dim
        self.heads, self.kv_heads, self.head_dim = spec.heads, spec.kv_heads, d
        # partial rotary (ModelSpec.rope_fraction): the first dims of each head rotate, the
        # rest pass through (GPT-NeoX's rotary_pct, Phi's partial_rotary_factor)
        self.rotary = 2 * int(d * spec.rope_fraction / 2)
        # the model's base and rope_scaling; pairs as the checkpoint holds q and k: (i, i +
        # rotary/2) (rotate_half) or (2i, 2i+1) (ModelSpec.rope_interleaved)
        self.freqs = rope_inv_freq(spec, self.rotary)
        self.rope_fn = apply_rope if spec.rope_interleaved else apply_rope_half
        self.wq = nn.Linear(h, spec.heads * d, bias=spec.qkv_bias)
        self.wk = nn.Linear(h, spec.kv_heads * d, bias=spec.qkv_bias)
        self.wv = nn.Linear(h, spec.kv_heads * d, bias=spec.qkv_bias)
        self.wo = nn.Linear(spec.heads * d, h, bias=spec.o_bias)
        if spec.qk_norm:
            self.q_norm = make_norm(spec, d)
            self.k_norm = make_norm(spec, d)
        self.core = None  # set by context parallelism
        # tensor parallelism with more ranks than kv heads: wk/wv stay replicated, each rank
        # picks the kv head of its query heads, and the input's gradient is reduced over tp
        self.kv_pick: slice | None = None
        self.kv_region = None

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        xkv = x if self.kv_region is None else self.kv_region(x)
        k = self.wk(xkv).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(xkv).view(b, s, -1, self.head_dim).transpose(1, 2)
        if self.kv_pick is not None:
            # v is passed on as it is (k gets new storage from rotary): a copy of the picked
            # head, or SDPA would keep the whole wv output for backward
            k, v = k[:, self.kv_pick], v[:, self.kv_pick].contiguous()
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        pos = positions if positions is not None else torch.arange(s, device=x.device)
        cos, sin = rope_cos_sin(pos, self.rotary, q.dtype, freqs=self.freqs)
        r = self.rotary
        if r == self.head_dim:
            q, k = self.rope_fn(q, cos, sin), self.rope_fn(k, cos, sin)
        else:
            q = torch.cat([self.rope_fn(q[..., :r], cos, sin), q[..., r:]], dim=-1)
            k = torch.cat([self.rope_fn(k[..., :r], cos, sin), k[..., r:]], dim=-1)
        rep = q.shape[1] // k.shape[1]  # local heads per local kv head (TP shards both)
        if rep > 1 and not takes_grouped_kv(self.core):
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        with recomputed():
            out = checkpointed("core_attn", functools.partial(attend, self.core), q, k, v,
                               positions, 1.0 / math.sqrt(self.head_dim))
            return self.wo(out.transpose(1, 2).reshape(b, s, -1))


def attend(core, q, k, v, positions, scale):
    if core is not None:
        return core(q, k, v, positions, scale)
    return local_causal_attention(q, k, v, positions, positions, scale)


class MLAttention(nn.Module):
    """DeepSeek multi-head latent attention (training form, no weight absorption)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        h = spec.hidden
        self.heads = spec.heads
        self.nope, self.rope, self.vdim = spec.qk_nope_head_dim, spec.qk_rope_head_dim, spec.v_head_dim
        self.kv_lora = spec.kv_lora_rank
        # DeepSeek's checkpoints rotate interleaved pairs; YaRN also scales the softmax
        self.freqs = rope_inv_freq(spec, self.rope)
        self.scale = mla_softmax_scale(spec)
        qk = self.nope + self.rope
        if spec.q_lora_rank:
            self.wq_a = nn.Linear(h, spec.q_lora_rank, bias=False)
            self.q_norm = make_norm(spec, spec.q_lora_rank)
            self.wq_b = nn.Linear(spec.q_lora_rank, spec.heads * qk, bias=False)
        else:
            self.wq = nn.Linear(h, spec.heads * qk, bias=False)
        self.wkv_a = nn.Linear(h, spec.kv_lora_rank + self.rope, bias=False)
        self.kv_norm = make_norm(spec, spec.kv_lora_rank)
        self.wkv_b = nn.Linear(spec.kv_lora_rank, spec.heads * (self.nope + self.vdim), bias=False)
        self.wo = nn.Linear(spec.heads * self.vdim, h, bias=False)
        self.core = None
        self.kpe_region = None  # tensor parallelism: all-reduce of k_pe's gradient

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        b, s, _ = x.shape
        qk = self.nope + self.rope
        lora = hasattr(self, "wq_a")
        q_in = self.q_norm(self.wq_a(x)) if lora else self.wq(x)
        kv_a = self.wkv_a(x)
        c_kv, k_pe = kv_a.split([self.kv_lora, self.rope], dim=-1)
        c_kv = self.kv_norm(c_kv)
        if self.kpe_region is not None:
            k_pe = self.kpe_region(k_pe)
        pos = positions if positions is not None else torch.arange(s, device=x.device)

        def up_proj(q_in, c_kv, k_pe):  # Megatron-Core's "mla_up_proj": up projections, RoPE
            q = self.wq_b(q_in) if lora else q_in
            q = q.view(b, s, -1, qk).transpose(1, 2)  # local heads under TP
            kv = self.wkv_b(c_kv).view(b, s, -1, self.nope + self.vdim).transpose(1, 2)
            k_nope, v = kv.split([self.nope, self.vdim], dim=-1)
            cos, sin = rope_cos_sin(pos, self.rope, q.dtype, freqs=self.freqs)
            q_nope, q_pe = q.split([self.nope, self.rope], dim=-1)
            q = torch.cat([q_nope, apply_rope(q_pe, cos, sin)], dim=-1)
            k_pe = apply_rope(k_pe.unsqueeze(1), cos, sin).expand(-1, k_nope.shape[1], -1, -1)
            return q, torch.cat([k_nope, k_pe], dim=-1), v.contiguous()

        def core(qkv):
            with recomputed():
                out = checkpointed("core_attn", functools.partial(attend, self.core), *qkv,
                                   positions, self.scale)
                return self.wo(out.transpose(1, 2).reshape(b, s, -1))

        return discarded("mla_up_proj", up_proj, core, q_in, c_kv, k_pe)


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec, width: int):
        super().__init__()
        self.swiglu = spec.mlp == "swiglu"
        self.w1 = nn.Linear(spec.hidden, width, bias=False)
        self.w2 = nn.Linear(width, spec.hidden, bias=False)
        if self.swiglu:
            self.w3 = nn.Linear(spec.hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.w1(x)  # kept under selective recomputation, the rest is recomputed
        with recomputed():
            if self.swiglu:
                return self.w2(F.silu(gate) * self.w3(x))
            return self.w2(F.gelu(gate))


class GroupedExperts(nn.Module):
    """``num`` routed experts as stacked weights [E, ...] (Shard(0) under expert parallelism)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        e, h, f = spec.moe_experts, spec.hidden, spec.moe_expert_ffn
        self.swiglu = spec.mlp == "swiglu"
        self.w1 = nn.Parameter(torch.empty(e, f, h))
        self.w2 = nn.Parameter(torch.empty(e, h, f))
        if self.swiglu:
            self.w3 = nn.Parameter(torch.empty(e, f, h))

    def local(self, name: str) -> torch.Tensor:
        p = getattr(self, name)
        return p.to_local() if hasattr(p, "to_local") else p

    def forward(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """x: tokens sorted by local expert, ``counts[e]`` rows each."""
        w1, w2 = self.local("w1"), self.local("w2")
        w3 = self.local("w3") if self.swiglu else None
        outs = []
        for e, part in enumerate(torch.split(x, counts, dim=0)):
            gate = part @ w1[e].t()
            # the activation is Megatron-Core's "moe_act" module, fc2 its consumer
            if self.swiglu:
                y = discarded("moe_act", lambda g, u: F.silu(g) * u,
                              lambda hdn: hdn @ w2[e].t(), gate, part @ w3[e].t())
            else:
                y = discarded("moe_act", F.gelu, lambda hdn: hdn @ w2[e].t(), gate)
            outs.append(y)
        return torch.cat(outs, dim=0) if outs else x.new_zeros((0, x.shape[-1]))


def local_dispatch(x: torch.Tensor, expert_ids: torch.Tensor, experts: GroupedExperts,
                   num_experts: int) -> torch.Tensor:
    """Each (token, choice) row through its expert, all experts in this process.

    x: [n, h]; expert_ids: [n*k] expert of each row of x (x already repeated k times).
    Returns the expert outputs in the order of x.
    """
    order = torch.argsort(expert_ids, stable=True)
    counts = torch.bincount(expert_ids, minlength=num_experts).tolist()
    y_sorted = experts(x[order], counts)
    # back to the order of x: argsort of a permutation is its inverse
    return y_sorted[torch.argsort(order)]


class MoE(nn.Module):
    """Router + routed experts + shared experts. ``dispatch`` is swapped by expert parallelism."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.num_experts, self.topk = spec.moe_experts, spec.moe_topk
        self.gate = nn.Linear(spec.hidden, spec.moe_experts, bias=False)
        # the model's router (ModelSpec): score function, selection-only score-correction
        # bias (DeepSeek-V3, updated outside autograd), device-limited groups, top-k
        # renormalisation and the routed experts' scale
        self.sigmoid_router = spec.moe_score == "sigmoid"
        if spec.moe_router_bias:
            self.register_buffer("expert_bias", torch.zeros(spec.moe_experts), persistent=True)
            # tokens routed to each expert this step (expert_bias.py updates the bias from it)
            self.register_buffer("expert_load", torch.zeros(spec.moe_experts, dtype=torch.int64),
                                 persistent=False)
        self.groups, self.group_topk = spec.moe_groups, spec.moe_group_topk
        self.topk_norm, self.routed_scale = spec.moe_topk_norm, spec.moe_routed_scale
        self.experts = GroupedExperts(spec)
        if spec.moe_shared_ffn:
            self.shared = MLP(spec, spec.moe_shared_ffn)
        self.dispatch = None  # (x_rows, expert_ids, experts) -> y_rows

    def route(self, x: torch.Tensor):
        """(expert ids, weights) of each row's top-k experts, as the model's own router picks
        them: DeepSeek-V3's (modeling_deepseek.py MoEGate, noaux_tc) ranks groups by the sum
        of their two best bias-corrected scores (the one, in a group of one expert), DeepSeek-V2's (group_limited_greedy) by
        their best score; the experts of the best ``group_topk`` groups compete."""
        logits = self.gate(x)
        scores = torch.sigmoid(logits) if self.sigmoid_router else torch.softmax(logits, dim=-1)
        choice = scores + self.expert_bias if hasattr(self, "expert_bias") else scores
        if self.groups and self.group_topk < self.groups:
            g = choice.view(-1, self.groups, self.num_experts // self.groups)
            rank = (g.topk(min(2, g.shape[-1]), dim=-1).values.sum(-1)
                    if hasattr(self, "expert_bias") else g.max(dim=-1).values)
            keep = torch.zeros_like(rank).scatter_(1, rank.topk(self.group_topk, dim=-1).indices,
                                                   1.0)
            choice = choice.masked_fill(~keep.bool().repeat_interleave(g.shape[-1], dim=1),
                                        float("-inf"))
        idx = torch.topk(choice, self.topk, dim=-1).indices
        if hasattr(self, "expert_load"):
            count_load(self, idx)
        w = scores.gather(-1, idx)
        if self.topk_norm:
            w = w / w.sum(dim=-1, keepdim=True)
        return idx, w * self.routed_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        idx, w = self.route(xf)
        rows = xf.repeat_interleave(self.topk, dim=0)
        ids = idx.reshape(-1)
        if self.dispatch is None:
            y = local_dispatch(rows, ids, self.experts, self.num_experts)
        else:
            y = self.dispatch(rows, ids, self.experts)
        out = (y.view(-1, self.topk, shape[-1]) * w.unsqueeze(-1)).sum(dim=1)
        if hasattr(self, "shared"):
            out = out + checkpointed("shared_experts", self.shared, xf)
        return out.view(shape)


class Block(nn.Module):
    def __init__(self, spec: ModelSpec, index: int):
        super().__init__()
        self.attention_norm = make_norm(spec, spec.hidden)
        self.attention = MLAttention(spec) if spec.is_mla else Attention(spec)
        self.is_mla = spec.is_mla
        self.ffn_norm = make_norm(spec, spec.hidden)
        self.is_moe = spec.layer_is_moe(index)
        if self.is_moe:
            self.moe = MoE(spec)
        else:
            self.feed_forward = MLP(spec, spec.ffn)

    recompute: str = "none"  # "full" or "selective" (recompute.py; set by train.py)

    def forward(self, x, positions):
        return run_block(self._forward, self.recompute, x, positions)

    def _forward(self, x, positions):
        # module-level recomputation (recompute.py): a norm is a "layernorm" module where
        # Megatron-Core's is its own module (MLA's input norm, an MoE layer's pre-MLP norm;
        # elsewhere TE fuses it into the next linear); the MLP is "mlp", the MoE layer "moe"
        a = discarded("layernorm" if self.is_mla else "", self.attention_norm,
                      lambda n: self.attention(n, positions), x)
        with kept():  # the residual stream between attention and MLP
            x = x + a
        if self.is_moe:
            z = discarded("layernorm", self.ffn_norm,
                          lambda y: checkpointed("moe", self.moe, y), x)
        else:
            z = checkpointed("mlp", self.feed_forward, self.ffn_norm(x))
        return x + z


class Transformer(nn.Module):
    """The decoder, or one pipeline chunk of it (``layer_ids``, ``first``, ``last``).

    ``positions`` (global positions of the local tokens, set by context parallelism) is an
    attribute rather than an argument so pipeline stages pass only the hidden states.
    """

    def __init__(self, spec: ModelSpec, layer_ids=None, first: bool = True, last: bool = True):
        super().__init__()
        check_buildable(spec)
        self.spec = spec
        layer_ids = range(spec.layers) if layer_ids is None else layer_ids
        if first:
            self.tok_embeddings = nn.Embedding(spec.vocab, spec.hidden)
        self.layers = nn.ModuleDict({str(i): Block(spec, i) for i in layer_ids})
        if last:
            self.norm = make_norm(spec, spec.hidden)
            self.output = nn.Linear(spec.hidden, spec.vocab, bias=False)
            if spec.tied_embeddings and first:
                self.output.weight = self.tok_embeddings.weight
            # tied, on another chunk than the embedding: output.weight is this chunk's own
            # copy of the embedding (Megatron-Core's LanguageModule
            # setup_embeddings_and_output_layer: the last stage's output layer holds the
            # word embedding), drawn equal to it (init_weights, TIED_COPY_OF) and kept equal
            # by summing the two copies' gradients (pipeline.TiedEmbedding)
        self.positions: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(x) if hasattr(self, "tok_embeddings") else x
        for layer in self.layers.values():
            h = layer(h, self.positions)
        if hasattr(self, "output"):
            h = self.output(self.norm(h))
        return h

    def set_positions(self, positions: torch.Tensor | None) -> None:
        self.positions = positions


def init_weights(model: nn.Module, seed: int) -> None:
    """Deterministic per-parameter init: norms to one (LayerNorm bias zero), the rest normal(0, 0.02).

    Each parameter's values come from a generator seeded with (seed, its name), so they do
    not depend on which other parameters the module holds.
    """
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            is_norm = "norm" in name.rsplit(".", 2)[-2] if "." in name else False
            if is_norm:
                p.fill_(1.0 if leaf == "weight" else 0.0)
                continue
            # a tied embedding's copy on the last chunk is drawn as the embedding itself
            key = TIED_COPY_OF.get(name, name) if name == tied_copy(model) else name
            g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(key.encode()))
            full = torch.empty(p.shape, dtype=torch.float32).normal_(0.0, INIT_STD, generator=g)
            p.copy_(full.to(p.dtype))


def build_model(spec: ModelSpec, seed: int = 0, layer_ids=None, first=True, last=True,
                dtype: torch.dtype = torch.float32) -> Transformer:
    m = Transformer(spec, layer_ids, first, last)
    init_weights(m, seed)
    if dtype != torch.float32:  # by hand: Module.to cannot swap fake tensors (dry run)
        memo: dict = {}
        for mod in m.modules():
            for k, p in mod._parameters.items():
                if p is not None:
                    if id(p) not in memo:
                        memo[id(p)] = nn.Parameter(p.detach().to(dtype), p.requires_grad)
                    mod._parameters[k] = memo[id(p)]
    return m


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean token cross entropy (the loss of every trainer here, parallel or not)."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
