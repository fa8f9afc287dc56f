"""The operations of one transformer layer on one rank, for one micro-batch (forward pass).

Each layer is a list of matrix multiplies (m, n, k after TP/EP sharding), one flash-style
attention core, and streaming (memory-bound) element-wise work in bytes. Backward and
recomputation are derived from this list in compute.py; FLOPs for MFU in flops.py.

Shapes follow Megatron-LM's layout (Narayanan et al. 2021; Korthikanti et al. 2022):
column-parallel QKV / FC1, row-parallel output projection / FC2, sequence parallel shards the
norms and residual stream over tp; expert layers per MoE Parallel Folding (Liu et al. 2025).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import InputError
from ..specs.model import ModelSpec
from ..specs.hashing import cached_hash
from . import efficiency, fp8_recipe
from .engine_projections import FUSED, gate_up_parts, input_grad_sum_bytes, qkv_parts


# Transformer Engine's multi-stream cuBLAS backend for per-expert GEMMs: num_streams = 4
# (transformer_engine/common/gemm/cublaslt_gemm.cu, see Shard.per_expert_gemms)
TE_GEMM_STREAMS = 4
# The grouped expert GEMM kernel an engine calls (MatMul.kernel, gemm.kernel_tiles):
# torchtitan's GroupedExperts run torch._grouped_mm (torchtitan/models/moe.py
# _run_experts_grouped_mm: w1, w3 and w2 each one torch._grouped_mm of the sorted tokens)
GROUPED_GEMM_KERNEL = {"torchtitan": "torch_grouped_mm"}


@dataclass(frozen=True)
class MatMul:
    name: str
    m: float  # rows (tokens)
    n: float  # output width
    k: float  # inner dimension
    count: float = 1.0  # identical GEMMs (e.g. local experts of a grouped GEMM)
    # 0: the count GEMMs run as one grouped kernel; s > 0: one kernel each, s side by side
    # (Transformer Engine's multi-stream per-expert cuBLAS GEMMs, see Shard.per_expert_gemms)
    streams: int = 0
    # kept in 16-bit under an FP8 recipe (the output head, the MoE router: fp8_recipe.py)
    high_precision: bool = False
    # the grouped kernel that runs it where that kernel has a fixed tile (gemm.kernel_tiles;
    # "" = a cuBLAS-class kernel choosing its tile)
    kernel: str = ""
    # output widths of the separate GEMMs (one per nn.Linear) that read the same input and
    # together make this record, summing to n (engine_projections: q/k/v, gate/up);
    # () = one GEMM of width n. compute.matmul_s prices each part as its own GEMM.
    parts: tuple[float, ...] = ()

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.count

    @property
    def gemms(self) -> int:
        """GEMM kernels one pass of this record launches (one per part)."""
        return len(self.parts) or 1


@cached_hash
@dataclass(frozen=True)
class Shard:
    """How one rank sees a layer: local tokens and parallel degrees that shape its ops."""

    seq: int  # full sequence length
    micro_batch: int
    tp: int = 1
    cp: int = 1
    sp: bool = False
    ep: int = 1
    etp: int = 1
    fp8: bool = False
    # Transformer Engine FP8 (Megatron-LM, NeMo): the cast is fused into the producing
    # kernel (LayerNormLinear, fused activation + cast) and fp8 weights are cached across
    # micro-batches; other stacks (torchao float8 in torchtitan) cast in separate kernels
    fp8_fused_casts: bool = False
    # Transformer Engine's GroupedLinear (Megatron-LM / NeMo --moe-grouped-gemm) runs one
    # cuBLAS GEMM per local expert over 4 streams ("multi-stream cublas backend",
    # transformer_engine/pytorch/csrc/extensions/gemm.cpp, nvte_multi_stream_cublas_gemm;
    # common/gemm/cublaslt_gemm.cu, num_streams = 4), and FP8 recipes quantize each expert's
    # slice separately; single-kernel grouped GEMMs (DeepGEMM, torch._grouped_mm) launch one
    # kernel per grouped GEMM
    per_expert_gemms: bool = False
    # the FP8 recipe's cast costs (fp8_recipe.resolve); None with fp8 = the engine default
    fp8_recipe: object = None
    # the single-kernel grouped GEMM the engine runs its experts with (GROUPED_GEMM_KERNEL)
    grouped_gemm: str = ""
    # what of each transformer layer is replayed from CUDA graphs (Workload.cuda_graph,
    # CUDA_GRAPHS; graph_replay): "" = nothing (eager)
    cuda_graph: str = ""
    # how the engine's model code builds q/k/v and gate/up: fused or one GEMM each
    # (engine_projections.projections)
    projections: object = FUSED

    @property
    def tokens(self) -> float:
        """Tokens of this rank's attention (its share of the sequence under cp)."""
        return self.seq / self.cp * self.micro_batch

    @property
    def stream_tokens(self) -> float:
        """Tokens of the residual stream on this rank (sequence parallel divides by tp)."""
        return self.tokens / self.tp if self.sp else self.tokens


@dataclass(frozen=True)
class ModuleRecompute:
    """What recomputing one Megatron-Core module of a layer (meshplan/recompute_modules.py)
    frees and re-runs, for one micro-batch on one rank."""

    freed_bytes: float  # saved activations it no longer keeps from forward to backward
    matmuls: tuple[str, ...] = ()  # names of the LayerOps GEMMs it runs again
    stream_bytes: float = 0.0  # element-wise HBM traffic it runs again
    kernels: float = 0.0  # kernels it launches again
    attn_core: bool = False  # runs the attention core again
    ep_comm: bool = False  # runs the expert dispatch and combine again


@dataclass
class LayerOps:
    matmuls: list[MatMul] = field(default_factory=list)
    attn_fwd_flops: float = 0.0  # executed attention-core FLOPs (causal half skipped)
    attn_model_flops: float = 0.0  # attention-core FLOPs by the PaLM convention (full s x s)
    attn_seq: float = 0.0  # key length each attention kernel sees (sets its efficiency)
    # the part of attn_fwd_flops in sliding-window layers and the key length whose
    # full-causal kernel does the same work per query block (attn_window_seq below)
    attn_window_fwd_flops: float = 0.0
    attn_window_seq: float = 0.0
    # attention scores q k^T of this rank (heads x queries x keys, the full s x s square an
    # unfused attention computes) and the head dimension of q k^T (compute.unfused_attention_s)
    score_elements: float = 0.0
    score_head_dim: float = 0.0
    # query/key and value head dims of the attention core (compute.wide_head_factor)
    score_qk_head_dim: float = 0.0
    score_v_head_dim: float = 0.0
    kernels: float = 0.0  # GPU kernels launched in forward (each costs KERNEL_GAP_S)
    # the part of ``kernels`` (and of the FP8 cast kernels, forward and backward) replayed
    # from CUDA graphs: each pays efficiency.GRAPH_LAUNCH_SAVING_S less gap (graph_replay)
    graphed_kernels: float = 0.0
    graphed_fp8_fwd_kernels: float = 0.0
    graphed_fp8_bwd_kernels: float = 0.0
    host_ops: float = 0.0  # framework ops the host issues in forward (efficiency.HOST_OP_FWD_S)
    # host-device synchronisations in forward (efficiency.HOST_SYNC_S each; moe_comm.host_syncs)
    host_syncs: float = 0.0
    stream_bytes: float = 0.0  # element-wise HBM traffic, forward
    # element-wise HBM traffic of the backward beyond STREAM_BWD_BYTE_RATIO x stream_bytes
    # (the fp32 eager RMSNorm's backward, unfused_norms)
    stream_bwd_extra_bytes: float = 0.0
    # FP8 casts (fp8_recipe.py): HBM bytes and kernels in forward and in backward (the
    # output-gradient casts; not a multiple of the forward's like stream_bytes)
    fp8_fwd_bytes: float = 0.0
    fp8_bwd_bytes: float = 0.0
    fp8_fwd_kernels: float = 0.0
    fp8_bwd_kernels: float = 0.0
    act_fn_bytes: float = 0.0  # part of stream_bytes that is the MLP activation function
    norm_bytes: float = 0.0  # part of stream_bytes that is the norms
    selective_matmul_flops: float = 0.0  # GEMM work that selective recomputation repeats
    # stored for backward, bytes per micro-batch, by how recomputation treats them
    saved_bytes: float = 0.0  # everything (no recompute)
    # dropped by selective recomputation: outputs of cheap ops that are recomputed from
    # what stays saved (norm outputs, the attention core's output, the MLP activation)
    recomputable_bytes: float = 0.0
    input_bytes: float = 0.0  # the layer input, the only thing full recompute keeps
    # communication buffers (bytes) for one forward pass
    tp_buffer_bytes: float = 0.0  # hidden-state buffers that TP all-gathers / reduce-scatters
    tp_collectives: int = 0  # number of such collectives (or all-reduces) in forward
    etp_buffer_bytes: float = 0.0
    # a forward-only all-gather over TP whose gathered buffer is this many bytes (the head's
    # logits in engines that gather them, GATHERED_LOGITS_ENGINES); its backward is a split
    tp_gather_bytes: float = 0.0
    ep_send_bytes: float = 0.0  # one all-to-all (dispatch or combine) send volume
    ep_alltoalls: int = 0
    cp_kv_bytes: float = 0.0  # this rank's K and V block, exchanged around the ring
    cp_a2a_bytes: float = 0.0  # Ulysses: q, k, v and output volumes for all-to-all
    params: float = 0.0  # parameters held on this rank (non-expert)
    expert_params: float = 0.0  # routed-expert parameters held on this rank
    # module-level selective recomputation: what each module present in this layer frees
    # and re-runs (absent: nothing of that module in this layer)
    modules: dict = field(default_factory=dict)


ACT = 2  # bytes per 16-bit activation element


def _linear_in(bytes_16: float, shard: Shard) -> float:
    """Saved input of a linear layer: FP8 recipes keep the FP8 cast (1 byte) for wgrad."""
    return bytes_16 / 2 if shard.fp8 else bytes_16


def attn_window_seq(window: int, local_seq: float) -> float:
    """Key length of a full causal attention whose work per query equals a sliding
    window's: a causal query block visits s/2 key blocks on average, a windowed one
    ``window`` (FlashAttention-2's local attention skips the blocks outside the band,
    flash_attn ``window_size``), so the windowed kernel is as busy as a causal one at
    2 x window keys, capped by the rank's own sequence."""
    return min(2.0 * window, local_seq)


def attention_kernels(attn: LayerOps) -> float:
    """Forward kernels of the attention block whose GEMMs ``attn`` holds (and no other):
    norm, the projections (one GEMM each where the engine runs them separately: MatMul.gemms),
    rope, the attention core, the residual add."""
    return 4 + sum(mm.gemms for mm in attn.matmuls)


def attention_host_ops(attn: LayerOps) -> float:
    """Host ops of the same block: norm, the projections, q/k/v split and reshape, rope on
    q and k, attention, residual add."""
    return 8 + sum(mm.gemms for mm in attn.matmuls)


def attention_ops(model: ModelSpec, s: Shard, ops: LayerOps) -> None:
    h, tp, T, Ts = model.hidden, s.tp, s.tokens, s.stream_tokens
    heads = model.heads / tp
    if model.is_mla:
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        v = model.v_head_dim
        if model.q_lora_rank:
            ops.matmuls.append(MatMul("q_down", T, model.q_lora_rank, h))
            ops.matmuls.append(MatMul("q_up", T, heads * qk, model.q_lora_rank))
        else:
            ops.matmuls.append(MatMul("q_proj", T, heads * qk, h))
        ops.matmuls.append(MatMul("kv_down", T, model.kv_lora_rank + model.qk_rope_head_dim, h))
        ops.matmuls.append(MatMul("kv_up", T, heads * (model.qk_nope_head_dim + v),
                                  model.kv_lora_rank))
        ops.matmuls.append(MatMul("o_proj", T, h, heads * v))
        q_w, kv_w, o_w = heads * qk, heads * (qk + v), heads * v
        lat = model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim
        ops.saved_bytes += ACT * T * lat
        # head-sharded projections (q_up/q_proj, kv_up, o_proj) split over tp; the
        # low-rank down projections and their norms are replicated
        sharded = model.heads * (v * h + model.kv_lora_rank * (model.qk_nope_head_dim + v)
                                 + (model.q_lora_rank or h) * qk)
        ops.params += model.attention_params() - sharded + sharded / tp
        d_qk, d_v = qk, v
    else:
        kv_heads = max(model.kv_heads / tp, 1.0)  # kv heads are replicated when tp > kv_heads
        q_w = heads * model.head_dim
        kv_w = 2 * kv_heads * model.head_dim
        o_w = heads * model.head_dim
        qkv = MatMul("qkv", T, q_w + kv_w, h, parts=qkv_parts(
            s.projections, q_w, kv_w, model.kv_heads == model.heads))
        ops.matmuls.append(qkv)
        ops.stream_bwd_extra_bytes += input_grad_sum_bytes(qkv.parts, T, h, ACT)
        ops.matmuls.append(MatMul("o_proj", T, h, o_w))
        norm = model.norm_params(h)
        ops.params += norm + (model.attention_params() - norm) / tp
        d_qk = d_v = model.head_dim
    # flash attention: every query attends to s/2 keys on average under the causal mask;
    # with cp the load-balanced chunks give each rank the same average. Sliding-window
    # layers (model.causal_keys) attend to fewer; their share of the work runs at the
    # efficiency of a kernel that sees attn_window_seq keys.
    ops.attn_seq = s.seq / s.cp
    keys = model.causal_keys(s.seq)
    # norm, projections, rope, attention core, residual add
    ops.kernels += attention_kernels(ops)
    # norm, projections, q/k/v split and reshape, rope on q and k, attention, residual add
    ops.host_ops += attention_host_ops(ops)
    ops.attn_fwd_flops += 2 * T * keys * heads * (d_qk + d_v)
    ops.attn_model_flops += 2 * T * model.attention_keys(s.seq) * heads * (d_qk + d_v)
    if model.sliding_window and model.sliding_window < s.seq:
        w = model.sliding_window
        share = model.windowed_share * (w - w * w / (2 * s.seq)) / keys
        ops.attn_window_fwd_flops = share * ops.attn_fwd_flops
        ops.attn_window_seq = attn_window_seq(w, s.seq / s.cp)
    ops.score_elements += T * s.seq * heads
    ops.score_head_dim = (d_qk + d_v) / 2
    ops.score_qk_head_dim, ops.score_v_head_dim = d_qk, d_v
    # streaming: input norm (read+write h), residual add (2 reads + write), rope on q and k
    ops.stream_bytes += ACT * Ts * h * (2 + 3) + ACT * T * 2 * (q_w + kv_w / 2)
    ops.norm_bytes += ACT * Ts * h * 2
    # saved: norm input, QKV input (SP keeps the shard), q/k/v, softmax stats, o_proj input
    ops.saved_bytes += ACT * Ts * h + ACT * T * (q_w + kv_w)
    ops.saved_bytes += 4 * T * heads  # log-sum-exp per head, fp32
    ops.recomputable_bytes += _linear_in(ACT * Ts * h, s) + _linear_in(ACT * T * o_w, s)
    # core_attn: checkpointed with q, k, v as its inputs; with flash attention it frees only
    # the softmax statistics (its output is the saved input of o_proj); layer.py adds the
    # score matrix of engines that materialise it
    ops.modules["core_attn"] = ModuleRecompute(4 * T * heads, attn_core=True, kernels=1)
    if model.is_mla:
        # mla_up_proj: q and k/v after the up projections and RoPE are discarded once the
        # attention core consumed them and rebuilt from the saved latents before its
        # backward (Megatron-Core multi_latent_attention.py, CheckpointWithoutOutput;
        # DeepSeek-V3 report sec. 3.2.3)
        ups = ("q_up", "kv_up") if model.q_lora_rank else ("kv_up",)
        ops.modules["mla_up_proj"] = ModuleRecompute(
            ACT * T * (q_w + kv_w), ups, ACT * T * 2 * (q_w + kv_w / 2), len(ups) + 2)
        # layernorm: MLA's input_layernorm is a separate norm module (its q/kv down
        # projections are two linears), so its output, the down projections' saved input,
        # is what the layernorm module discards; a GQA layer fuses the norm into the QKV
        # linear (TE LayerNormColumnParallelLinear, input_layernorm = IdentityOp)
        ops.modules["layernorm"] = ModuleRecompute(_linear_in(ACT * Ts * h, s),
                                                   stream_bytes=ACT * Ts * h * 2, kernels=1)
    ops.tp_buffer_bytes = ACT * T * h
    ops.tp_collectives += 2 if tp > 1 else 0  # AG + RS (sp) or one AR counted as two halves
    if s.cp > 1:
        ops.cp_kv_bytes += ACT * T * kv_w
        ops.cp_a2a_bytes += ACT * T * (q_w + kv_w + o_w)


def attention_part(model: ModelSpec, s: Shard) -> LayerOps:
    """The attention half of one layer's operations (attention_ops), on its own: what a
    graph scope "attn" captures (graph_replay) and what torchtitan's whole-attention
    checkpoint runs again (torchtitan_ac)."""
    ops = LayerOps()
    attention_ops(model, s, ops)
    return ops


def mlp_ops(model: ModelSpec, s: Shard, ops: LayerOps, width: int, name: str = "mlp",
            tp: int | None = None) -> None:
    """A dense (or shared-expert) MLP of intermediate ``width``, sharded over ``tp``."""
    h, T = model.hidden, s.tokens
    tp = s.tp if tp is None else tp
    w = width / tp
    gated = model.mlp == "swiglu"
    fc1 = MatMul(f"{name}_fc1", T, (2 if gated else 1) * w, h,
                 parts=gate_up_parts(s.projections, w, gated))
    ops.matmuls.append(fc1)
    ops.stream_bwd_extra_bytes += input_grad_sum_bytes(fc1.parts, T, h, ACT)
    ops.matmuls.append(MatMul(f"{name}_fc2", T, h, w))
    ops.kernels += 2 + fc1.gemms  # fc1 (gate and up: one GEMM each where separate), act, fc2
    ops.host_ops += 3 + fc1.gemms
    act = ACT * T * w * (3 if gated else 2)
    ops.stream_bytes += act
    ops.act_fn_bytes += act
    # gated MLPs keep the gate output; the up projection is recomputed with the activation
    # (op-level selective checkpointing recomputes every other GEMM, as torchtitan does)
    ops.saved_bytes += ACT * T * w
    ops.recomputable_bytes += _linear_in(ACT * s.stream_tokens * h, s) + _linear_in(ACT * T * w, s)
    if gated:
        ops.recomputable_bytes += ACT * T * w
        ops.selective_matmul_flops += 2 * T * w * h
    # mlp / shared_experts: normal checkpointing keeps only the MLP's input (the norm output,
    # or the MoE layer's input for shared experts) and runs the whole MLP forward again
    ops.modules["mlp" if name == "mlp" else "shared_experts"] = ModuleRecompute(
        ACT * T * w + _linear_in(ACT * T * w, s) + (ACT * T * w if gated else 0.0),
        (f"{name}_fc1", f"{name}_fc2"), act, 3)
    ops.params += model.mlp_params(width) / tp


# The MoE router's kernels: router GEMM, softmax + top-k (one fused kernel under
# moe_router_fusion), auxiliary loss; and its host ops: linear, score, top-k, gather, aux
# loss (Megatron-Core moe/router.py TopKRouter.forward). The dispatcher's preprocessing
# (MoEAlltoAllTokenDispatcher.preprocess, moe/token_dispatcher.py) issues the per-expert
# histogram and the device-to-host copy of the counts from the host; its few tiny kernels
# are not in ``kernels``.
MOE_ROUTER_KERNELS = 3
MOE_ROUTER_HOST_OPS = 5
MOE_PREPROCESS_HOST_OPS = 2
# the token permutation before the experts and the unpermutation after them: a read and a
# write of every token copy's hidden state each (layer.py fused_permutation removes them
# where the dispatch does them)
PERMUTE_PASSES = 4
PERMUTE_KERNELS = 2


def moe_ops(model: ModelSpec, s: Shard, ops: LayerOps) -> None:
    """Router, dispatch over ep, grouped expert GEMMs (etp-sharded), combine, shared experts."""
    h = model.hidden
    tokens_in = s.tokens / s.tp  # MoE input is the sequence-parallel shard
    # token copies this rank's experts process; the busiest rank sets the pace
    rows = tokens_in * model.moe_topk * s.etp * efficiency.MOE_LOAD_IMBALANCE
    local_experts = model.moe_experts / s.ep
    w = model.moe_expert_ffn / s.etp
    gated = model.mlp == "swiglu"
    ops.matmuls.append(MatMul("router", tokens_in, model.moe_experts, h, high_precision=s.fp8))
    m = rows / local_experts
    streams = TE_GEMM_STREAMS if s.per_expert_gemms else 0
    hp = s.fp8 and s.fp8_recipe is not None and not s.fp8_recipe.experts
    kn = "" if s.per_expert_gemms else s.grouped_gemm
    ops.matmuls.append(MatMul("expert_fc1", m, (2 if gated else 1) * w, h, local_experts, streams,
                              hp, kn))
    ops.matmuls.append(MatMul("expert_fc2", m, h, w, local_experts, streams, hp, kn))
    # router (MOE_ROUTER_KERNELS) and the rest: permute, two grouped GEMMs, activation,
    # unpermute, weighted combine (Megatron-Core MoE layer)
    ops.kernels += MOE_ROUTER_KERNELS + 7
    if s.per_expert_gemms and local_experts > 1:
        # the two grouped GEMMs are local_experts GEMM kernels each (the 10 above count them
        # once), plus one quantize kernel per expert and GEMM input under FP8; backward
        # launches twice the GEMMs (data and weight gradients), compute.py scales by that
        ops.kernels += 2 * (local_experts - 1) + (2 * local_experts if s.fp8 else 0)
    # host side of a Megatron-Core MoE layer (router: linear, score, top-k, gather, aux loss;
    # dispatcher: histogram, device-to-host copy of the per-expert counts (a stream sync),
    # sort/permute, all-to-all, unpermute, combine; grouped MLP): ~34 framework ops, plus a
    # per-expert quantisation loop under FP8 (TE GroupedLinear splits the input per expert)
    ops.host_ops += 34 + (4 * local_experts if s.fp8 else 0)
    act = ACT * rows * w * (3 if gated else 2)
    # permute / unpermute token copies (read + write each way) and the activation function
    ops.stream_bytes += act + PERMUTE_PASSES * ACT * rows * h
    ops.act_fn_bytes += act
    ops.saved_bytes += _linear_in(ACT * rows * h, s) + ACT * rows * w * (2 if gated else 1)
    ops.saved_bytes += ACT * rows * h  # combine input
    if not model.moe_shared_ffn:
        # the router GEMM keeps its input (the pre-MLP norm's output) for its weight
        # gradient; with shared experts the shared MLP's saved input is the same tensor
        ops.recomputable_bytes += ACT * tokens_in * h
    ops.recomputable_bytes += _linear_in(ACT * rows * w, s)
    # moe_act: the experts' activation output (fc2's saved input) is discarded and rebuilt
    # from the saved fc1 output before fc2's backward (Megatron-Core experts.py,
    # CheckpointWithoutOutput; DeepSeek-V3 report sec. 3.3.2 recomputes the SwiGLU output)
    ops.modules["moe_act"] = ModuleRecompute(_linear_in(ACT * rows * w, s), stream_bytes=act,
                                             kernels=1)
    # moe: the whole MoE layer checkpointed with its input kept: router, dispatch, experts,
    # combine (and the shared experts inside it) run again, all-to-alls included
    ops.modules["moe"] = ModuleRecompute(
        _linear_in(ACT * rows * h, s) + ACT * rows * w * (2 if gated else 1) + ACT * rows * h
        + _linear_in(ACT * rows * w, s), ("router", "expert_fc1", "expert_fc2"),
        act + PERMUTE_PASSES * ACT * rows * h, 10, ep_comm=True)
    ops.params += model.moe_router_params()
    ops.expert_params += local_experts * model.moe_expert_params() / s.etp
    if s.ep > 1:
        ops.ep_send_bytes = ACT * tokens_in * model.moe_topk * h
        ops.ep_alltoalls += 2  # dispatch + combine
    if s.etp > 1:
        ops.etp_buffer_bytes = ACT * rows * h
    if model.moe_shared_ffn:
        mlp_ops(model, s, ops, model.moe_shared_ffn, "shared")
        sh = ops.modules["shared_experts"]
        mo = ops.modules["moe"]
        ops.modules["moe"] = ModuleRecompute(mo.freed_bytes + sh.freed_bytes,
                                             mo.matmuls + sh.matmuls,
                                             mo.stream_bytes + sh.stream_bytes,
                                             mo.kernels + sh.kernels, ep_comm=True)


# What of each transformer layer a run replays from CUDA graphs (Workload.cuda_graph; a runs
# CSV's optional column ``cuda_graph``): "full" = the whole layer, forward and backward
# (Megatron-Core's cuda_graph_impl "local" with the default scope, the legacy
# enable_cuda_graph, and "full_iteration", which captures the whole step); or the
# Transformer Engine scopes it captures (cuda_graph_impl "transformer_engine" with
# cuda_graph_scope), joined by "+": "attn" (input norm, self-attention, residual add),
# "moe_router", "moe_preprocess" (Megatron-Core transformer_config.py cuda_graph_scope).
# "" or "none" = eager; "full_iteration" (Megatron-Bridge's perf recipes, e.g. v0.6.0
# perf_recipes/deepseek/common.py _enable_deepseek_full_iteration_mxfp8) is read as "full".
# A captured kernel runs without a host launch or eager dispatch: it pays KERNEL_GAP_S less
# the measured efficiency.GRAPH_LAUNCH_SAVING_S (compute.op_times), and the captured ops cost
# the host one graph launch.
CUDA_GRAPH_FULL = "full"
CUDA_GRAPH_FULL_ITERATION = "full_iteration"
CUDA_GRAPH_SCOPES = ("attn", "moe_router", "moe_preprocess")
CUDA_GRAPHS = ("none", CUDA_GRAPH_FULL) + CUDA_GRAPH_SCOPES
GRAPH_LAUNCH_HOST_OPS = 1  # one cudaGraphLaunch (torch.cuda.CUDAGraph.replay) a graph


def normalise_cuda_graph(value) -> str:
    """The column's value as graph_replay reads it: "" (eager), "full", or TE scopes in
    CUDA_GRAPH_SCOPES order joined by "+". Raises InputError naming what is allowed."""
    text = str(value or "").strip().lower()
    if text in ("", "none"):
        return ""
    parts = [p.strip() for p in text.split("+")]
    allowed = ("allowed: none, full (or full_iteration), or Transformer Engine scopes joined by '+' from "
               + ", ".join(CUDA_GRAPH_SCOPES))
    if parts in ([CUDA_GRAPH_FULL], [CUDA_GRAPH_FULL_ITERATION]):
        return CUDA_GRAPH_FULL
    if not parts or any(p not in CUDA_GRAPH_SCOPES for p in parts):
        raise InputError("cuda_graph", value, allowed)
    return "+".join(p for p in CUDA_GRAPH_SCOPES if p in parts)


def graph_replay(ops: LayerOps, model: ModelSpec, s: Shard, moe: bool) -> LayerOps:
    """``ops`` of a transformer layer with the part s.cuda_graph captures marked as replayed
    from CUDA graphs (graphed_* kernels) and its host ops folded into one launch a graph."""
    graph = s.cuda_graph
    if not graph:
        return ops
    if graph == CUDA_GRAPH_FULL:
        return replace(ops, graphed_kernels=ops.kernels,
                       graphed_fp8_fwd_kernels=ops.fp8_fwd_kernels,
                       graphed_fp8_bwd_kernels=ops.fp8_bwd_kernels,
                       host_ops=min(ops.host_ops, GRAPH_LAUNCH_HOST_OPS))
    scopes = graph.split("+")
    kernels = host = 0.0
    if "attn" in scopes:
        attn = attention_part(model, s)
        kernels += attention_kernels(attn)
        host += attention_host_ops(attn) - GRAPH_LAUNCH_HOST_OPS
    if moe and "moe_router" in scopes:
        kernels += MOE_ROUTER_KERNELS
        host += MOE_ROUTER_HOST_OPS - GRAPH_LAUNCH_HOST_OPS
    if moe and "moe_preprocess" in scopes:
        host += MOE_PREPROCESS_HOST_OPS - GRAPH_LAUNCH_HOST_OPS
    return replace(ops, graphed_kernels=min(kernels, ops.kernels),
                   host_ops=max(ops.host_ops - host, 0.0))


def expert_rows(ops: LayerOps) -> float:
    """Token copies this rank's experts process (the expert GEMMs' rows, all local
    experts), read off the expert_fc1 record moe_ops wrote."""
    return next(mm.m * mm.count for mm in ops.matmuls if mm.name == "expert_fc1")


def layer_ops(model: ModelSpec, moe: bool, s: Shard) -> LayerOps:
    """All forward operations of one transformer layer on one rank for one micro-batch."""
    ops = LayerOps()
    attention_ops(model, s, ops)
    h, Ts = model.hidden, s.stream_tokens
    # second norm + residual add
    ops.stream_bytes += ACT * Ts * h * (2 + 3)
    ops.norm_bytes += ACT * Ts * h * 2
    ops.kernels += 2  # second norm, residual add
    ops.host_ops += 2
    ops.saved_bytes += ACT * Ts * h
    ops.params += model.layer_norm_params()
    if model.extra_layer_norms:  # post-norms (Gemma 2/3): each reads and writes the stream
        n = model.extra_layer_norms
        ops.stream_bytes += ACT * Ts * h * 2 * n
        ops.norm_bytes += ACT * Ts * h * 2 * n
        ops.kernels += n
        ops.host_ops += n
        ops.saved_bytes += ACT * Ts * h * n
    if moe:
        moe_ops(model, s, ops)
        # layernorm: an MoE layer's pre_mlp_layernorm is a separate norm module (the router,
        # the experts and the shared experts all read its output); its output, held as the
        # router's saved input, is discarded and recomputed
        norm = ModuleRecompute(_linear_in(ACT * Ts * h, s), stream_bytes=ACT * Ts * h * 2,
                               kernels=1)
        ln = ops.modules.get("layernorm")
        ops.modules["layernorm"] = norm if ln is None else ModuleRecompute(
            ln.freed_bytes + norm.freed_bytes, stream_bytes=ln.stream_bytes + norm.stream_bytes,
            kernels=ln.kernels + norm.kernels)
        if model.moe_shared_ffn and s.tp > 1:
            ops.tp_collectives += 2
    else:
        mlp_ops(model, s, ops, model.ffn)
        ops.tp_collectives += 2 if s.tp > 1 else 0
    if s.fp8:
        fp8_casts(ops, s, model.mlp == "swiglu")
    ops.input_bytes = ACT * Ts * h
    return ops


# Engines whose RMSNorm is plain PyTorch eager code, not a fused kernel. Aleph Alpha's
# training code used by Hagemann et al. 2023 (arXiv 2311.05610): their sheets run it with
# kernel "flash_attention2" (torch norm) and "flash_attention2 + RMS kernel" (fused). The
# release of that code that has the "RMS kernel" option (Aleph-Alpha/scaling at 78489292,
# src/scaling/core/nn/norm/rms_norm.py: an optional ``flash_attn.ops.rms_norm`` import) runs,
# for optimization_type "torch",
#   output = self._norm(x.float()).type_as(x); output = output * weight
#   _norm(x) = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
# so the power, mean and scaling run on an fp32 copy of the 16-bit input, each a separate
# kernel. Without sequence parallelism every TP rank runs it on the full hidden state
# (Korthikanti et al. 2022 sec. 4.2.2: norms are replicated across the TP group), so its
# share of a step grows with TP while the GEMMs shrink by 1/TP.
UNFUSED_NORM_ENGINES = ("aleph-alpha",)
# Norm kernels a run may state (Workload.norm_kernel; a runs CSV's optional column
# ``norm_kernel``) over its engine's default: "fused" = the fused kernel layer_ops counts,
# e.g. Aleph Alpha's "RMS kernel" option (flash-attn's rms_norm, the optional import above),
# so unfused_norms adds nothing.
NORM_KERNELS = ("fused",)
# HBM bytes per hidden-state element of that forward (read + write of each full-size op):
# .float() (2+4), pow (4+4), mean (4), x*rsqrt (4+4), .type_as (4+2), *weight (2+2) = 36;
# 8 kernels (the two per-token ones, + eps and rsqrt, move negligible bytes). A fused kernel
# (flash-attn's rms_norm) reads x and writes y: 4 bytes (what layer_ops counts).
UNFUSED_NORM_FWD_BYTES = 36.0
FUSED_NORM_FWD_BYTES = 2.0 * ACT
UNFUSED_NORM_KERNELS = 8
# Its backward, from the autograd formulas (PyTorch tools/autograd/derivatives.yaml) of each
# op, bytes per element: *weight: grad*w (2+2), grad*out (2+2+2) and its sum over tokens (2)
# = 12; .type_as: cast to fp32 (2+4) = 6; x*rsqrt: grad*r (4+4), grad*x (4+4+4) and its sum
# over the row (4) = 24; mean: expand / h (4); pow: pow_backward = grad * (2 * x.pow(1)),
# three full-size ops (4+4, 4+4, 4+4+4) = 28; the two gradients of the fp32 x added
# (4+4+4) = 12; .float(): cast back (4+2) = 6. Total 92 bytes; the fused backward reads dy
# and x and writes dx (6, counted as 2 x 4 = 8 by STREAM_BWD_BYTE_RATIO).
UNFUSED_NORM_BWD_BYTES = 92.0
# What autograd keeps for that backward, bytes per element: the fp32 copy x.float() (saved
# by pow and by x*rsqrt, one storage: 4) and the normalised 16-bit output before the weight
# (saved by *weight: 2), where a fused norm keeps its 16-bit input (2, what layer_ops counts
# as the norm input): 4 more per element of each norm.
UNFUSED_NORM_SAVED_EXTRA_BYTES = 4.0


def eager_norm(engine: str, norm_kernel: str = "") -> bool:
    """Whether the run's RMSNorm is the eager one: its engine's default
    (UNFUSED_NORM_ENGINES) unless the run states the fused kernel (NORM_KERNELS)."""
    return engine in UNFUSED_NORM_ENGINES and norm_kernel != "fused"


def unfused_norms(ops: LayerOps, engine: str, norm_kernel: str = "") -> LayerOps:
    """Adds what an unfused eager RMSNorm costs over the fused one that ``ops`` counts;
    nothing where the run states the fused kernel (``norm_kernel`` "fused")."""
    if not eager_norm(engine, norm_kernel) or not ops.norm_bytes:
        return ops
    elements = ops.norm_bytes / FUSED_NORM_FWD_BYTES
    extra = elements * (UNFUSED_NORM_FWD_BYTES - FUSED_NORM_FWD_BYTES)
    ops.stream_bytes += extra
    ops.norm_bytes += extra
    # what the backward moves beyond STREAM_BWD_BYTE_RATIO (2) x the forward's bytes
    ops.stream_bwd_extra_bytes += elements * (
        UNFUSED_NORM_BWD_BYTES - 2 * UNFUSED_NORM_FWD_BYTES)
    ops.saved_bytes += elements * UNFUSED_NORM_SAVED_EXTRA_BYTES
    norms = 2  # attention and MLP norm of one layer
    ops.kernels += norms * (UNFUSED_NORM_KERNELS - 1)
    ops.host_ops += norms * (UNFUSED_NORM_KERNELS - 1)
    return ops


# Engines whose SwiGLU MLP is eager PyTorch, not a fused activation kernel. Aleph Alpha's
# scaling (github Aleph-Alpha/scaling at 78489292, src/scaling/core/nn/mlp.py
# ParallelSwiGLUMLP.forward, lines 157-161):
#   x_intermediate = self.dense_in(x); x_intermediate = torch.nn.functional.silu(x_intermediate)
#   x_intermediate = x_intermediate * self.siglu_weight(x); x_intermediate = self.dense_out(...)
# Autograd keeps (PyTorch tools/autograd/derivatives.yaml): silu its input (dense_in's
# output), the product both factors (silu's output and siglu_weight's output) and dense_out
# its input (the product): four 16-bit tensors of the MLP width w per token. mlp_ops counts
# Megatron's fused SwiGLU, which keeps the fc1 output (gate and up, 2 w) and fc2's input (w):
# silu's output is the one more tensor, w per token.
UNFUSED_SWIGLU_ENGINES = ("aleph-alpha",)
UNFUSED_SWIGLU_SAVED_EXTRA = 1  # 16-bit tensors of width w per token beyond mlp_ops


def unfused_swiglu(ops: LayerOps, model: ModelSpec, s: Shard, engine: str) -> LayerOps:
    """Adds what the eager SwiGLU of a dense layer keeps beyond mlp_ops' fused one."""
    if engine not in UNFUSED_SWIGLU_ENGINES or model.mlp != "swiglu":
        return ops
    ops.saved_bytes += UNFUSED_SWIGLU_SAVED_EXTRA * ACT * s.tokens * model.ffn / s.tp
    return ops


# meshplan's own runtime (engine "", meshplan/runtime/model.py), eager PyTorch: what autograd
# keeps per layer beyond attention_ops' and mlp_ops' count, read from
# torch.autograd.graph.saved_tensors_hooks on its model (tests/runtime/test_saved_activations.py):
# - k and v repeated to every local query head (repeat_interleave), where the runtime still
#   repeats them or torch's SDPA does: k and v of q_w each, not the kv_w of both. See
#   runtime_repeats_kv for when.
# - MLP.forward runs ``w2(F.silu(gate) * w3(x))`` eagerly: silu keeps the gate, the product
#   both factors (silu's output and the up projection), w2 its input: silu's output is the
#   one tensor of width w beyond mlp_ops' gate + up + fc2 input.
# Both sit in the runtime's ``recomputed()`` regions (repeat after the kept q/k/v
# projections, activation and product after the kept gate), so they are recomputable.
# Its RMSNorm (torch.rms_norm) runs the fused kernel on CUDA when input and weight share a
# dtype (aten _fused_rms_norm, which keeps the input and the fp32 rstd: what layer_ops
# counts); the CPU dry run decomposes it and is corrected there (runtime/dryrun.py).
RUNTIME_ENGINE = ""
# ROCm's flash SDPA takes head dims up to aotriton_max_hdim(): 512 from AOTriton 0.9 on
# (256 on gfx11, not a training part), torch 2.13 aten/src/ATen/native/transformers/cuda/
# sdp_utils.cpp check_head_dim_size_flash
ROCM_FLASH_MAX_HEAD_DIM = 512


def sdpa_expands_gqa(vendor: str, fp32: bool, head_dim: int, masked: bool) -> bool:
    """Whether torch 2.13's SDPA on a GPU of ``vendor`` ("nvidia", "amd") has no fused
    kernel for grouped k/v (enable_gqa), so that the math backend would repeat them
    (attention.cpp pre_process_group_query_attention_input) and keep them and its fp32
    scores for backward. Backend admission in transformers/cuda/sdp_utils.cpp: on CUDA,
    flash and cuDNN admit GQA and so does the memory-efficient kernel, which takes fp32,
    masks and any aligned head dim: always a fused kernel. Under ROCm the efficient kernel
    refuses GQA (``supports_gqa = false`` under USE_ROCM) and flash refuses masks
    (check_for_attn_mask), fp32 (check_dtypes_flash_attention) and head dims over
    ROCM_FLASH_MAX_HEAD_DIM. The runtime repeats k/v itself where this holds
    (runtime/model.py local_causal_attention), so the efficient kernel runs instead."""
    if vendor != "amd":
        return False
    return masked or fp32 or head_dim > ROCM_FLASH_MAX_HEAD_DIM


def ulysses_grouped_kv(kv_heads: int, tp: int, cp: int) -> bool:
    """Whether the runtime's Ulysses attention takes k and v with their own heads: cp
    divides the rank's kv heads (one where tp is over more ranks than kv heads,
    runtime/tensor_parallel.py kv_pick); runtime/context_parallel.py reads this rule."""
    return max(kv_heads // tp, 1) % cp == 0


def runtime_repeats_kv(model: ModelSpec, s: Shard, gpu=None, precision: str = "bf16",
                       cp_kind: str = "ring") -> bool:
    """Whether meshplan's runtime keeps a GQA layer's k and v at the query head count.

    Without context parallelism the runtime hands grouped k/v to torch's SDPA
    (F.scaled_dot_product_attention(..., enable_gqa=True), runtime/model.py
    takes_grouped_kv). torch 2.13 passes them unexpanded to the fused kernels, which keep
    them so for backward (aten/src/ATen/native/transformers/attention.cpp
    scaled_dot_product_attention), wherever one admits GQA: on NVIDIA GPUs always; on
    AMD ones where sdpa_expands_gqa says no, and elsewhere the runtime repeats them for the
    efficient kernel. Under context parallelism (runtime/context_parallel.py) ring
    attention takes grouped k/v; Ulysses (``cp_kind`` "all_to_all") where cp divides the
    rank's kv heads (ulysses_grouped_kv), then into a masked SDPA, repeated otherwise."""
    from ..specs.workload import FP32_STORAGE
    if model.kv_heads >= model.heads:
        return False
    vendor = gpu.vendor if gpu is not None else "nvidia"
    fp32 = precision in FP32_STORAGE
    if s.cp > 1 and cp_kind != "ring":
        return (not ulysses_grouped_kv(model.kv_heads, s.tp, s.cp)
                or sdpa_expands_gqa(vendor, fp32, model.head_dim, masked=True))
    if s.cp > 1:
        return False
    return sdpa_expands_gqa(vendor, fp32, model.head_dim, masked=False)


def runtime_saved(ops: LayerOps, model: ModelSpec, s: Shard, engine: str,
                  dense: bool = True, gpu=None, precision: str = "bf16",
                  cp_kind: str = "ring") -> LayerOps:
    """Adds what meshplan's runtime keeps in a layer beyond the fused count (the SwiGLU
    part in a ``dense`` layer's MLP only) on ``gpu`` (hardware.GPU; None: an NVIDIA part)
    at the workload's ``precision`` under context parallelism ``cp_kind``."""
    if engine != RUNTIME_ENGINE or model.is_mla:
        return ops
    T, tp, d = s.tokens, s.tp, model.head_dim
    if runtime_repeats_kv(model, s, gpu, precision, cp_kind):
        q_w = model.heads / tp * d
        kv_w = 2 * max(model.kv_heads / tp, 1.0) * d
        ops.recomputable_bytes += ACT * T * (2 * q_w - kv_w)
    if dense and model.mlp == "swiglu":
        ops.recomputable_bytes += ACT * T * model.ffn / tp
    return ops


# Engines whose attention calls flash-attn's varlen kernel from eager PyTorch with einops
# reshapes and a gathered rotary table. Aleph Alpha's scaling (github Aleph-Alpha/scaling at
# 78489292, src/scaling/core/nn/attention/attention.py and rotary.py); what autograd keeps
# beyond attention_ops' count (q, k, v, the log-sum-exp, o_proj's input), per token:
# - rotary.py apply_rotary_pos_emb (line 139), ``query * cos_q + rotate_half(query) * sin_q``
#   and the same for the key, with cos_q = vector_gather(cos, position_ids) (lines 129-137):
#   four gathered [sq, b, 1, rotary_dim] tables in the layer's 16-bit dtype
#   (_pre_calculate_cos_sin casts them, RotaryEmbedding is built with the layer's dtype),
#   each kept by its product (mul keeps the factor that does not require grad). Training
#   batches always carry position_ids (transformer/data/text_dataset_batch.py line 118
#   get_position_ids), so the gather runs in every layer: 4 x rotary_dim 16-bit elements,
#   not divided by TP.
# - attention.py forward (lines 509-517): with attention_qkv_in_one (its config default,
#   transformer/context/config.py line 205; a separate key/value width, num_kv_heads,
#   requires it off, attention.py line 350) q, k and v are views of one fused QKV output.
#   Rotary writes new q and k; v stays a view, and flash_attention's
#   rearrange "s_k b n h -> (b s_k) n h" (line 240) of a [b, sq, ...]-ordered view is a
#   view too, which flash-attn keeps as passed (flash_attn_interface.py maybe_contiguous
#   copies only a tensor whose last stride is not 1; FlashAttnVarlenFunc saves q, k, v,
#   out_padded, softmax_lse). So the whole fused QKV storage stays alive beside the rotated
#   q and k: q_w + kv_w / 2 more per token than attention_ops' q, k, v.
# - attention.py lines 259 and 616: the output is rearranged "(b sq) np hn -> (b np) sq hn"
#   and back to "b sq (np hn)"; with micro-batch b > 1 neither is a view, so the dense
#   (row-parallel) input that F.linear keeps is a copy beside the out_padded flash-attn keeps
#   (b = 1: both reshapes are views of one storage): o_w more per token when b > 1.
# Dropout is off by default (config.py lines 241-252: 0.0; torch dropout with p = 0 returns
# its input and keeps no mask) and the residual adds keep nothing.
EAGER_ATTENTION_ENGINES = ("aleph-alpha",)
ROTARY_GATHERED_TABLES = 4  # cos and sin for the query and for the key


def eager_attention(ops: LayerOps, model: ModelSpec, s: Shard, engine: str) -> LayerOps:
    """Adds what the eager attention around flash-attn keeps beyond attention_ops' count."""
    if engine not in EAGER_ATTENTION_ENGINES or model.is_mla:
        return ops
    T, tp, d = s.tokens, s.tp, model.head_dim
    q_w = model.heads / tp * d
    kv_w = 2 * max(model.kv_heads / tp, 1.0) * d
    if model.position == "rope":
        ops.saved_bytes += ROTARY_GATHERED_TABLES * ACT * T * d
    if model.kv_heads == model.heads:  # attention_qkv_in_one: the fused QKV storage stays
        ops.saved_bytes += ACT * T * (q_w + kv_w / 2)
    if s.micro_batch > 1:  # the dense input is a copy of flash-attn's output
        ops.saved_bytes += ACT * T * q_w
    return ops


# Engines whose norms gather their output over the sequence-parallel group, so that the
# linear after the norm keeps the gathered, whole-sequence input. Megatron-LM's
# sequence-parallel linears keep their sequence shard and gather it again in backward (what
# attention_ops, mlp_ops and head_ops count: stream_tokens). Aleph Alpha's scaling (github
# Aleph-Alpha/scaling at 737f8558): RMSNorm.forward (core/nn/norm/rms_norm.py lines 94-105,
# and LayerNorm, layernorm.py line 185) ends with gather_from_sequence_parallel_region,
# whose autograd Function (core/nn/linear/utils.py _GatherFromSequenceParallelRegion)
# saves nothing; ColumnParallelLinear.forward (core/nn/linear/column_parallel_linear.py
# lines 253-279) under sequence parallelism runs F.linear on that gathered x, and F.linear
# keeps its input for the weight gradient. So the QKV linear (attention.py line 789), the
# SwiGLU's dense_in and siglu_weight (mlp.py lines 270-271: one storage, kept once) and the
# LM head (after the final LayerNormWrapper) keep 2 h bytes per token of the whole
# sequence, not of the shard: (1 - 1 / tp) of it more than the Megatron count.
SEQUENCE_GATHERED_NORM_ENGINES = ("aleph-alpha",)


def gathered_norm_outputs(ops: LayerOps, model: ModelSpec, s: Shard, engine: str,
                          linears: int) -> LayerOps:
    """Adds what the ``linears`` norm-fed linears of an engine in
    SEQUENCE_GATHERED_NORM_ENGINES keep beyond their sequence shard (2 in a transformer
    layer: attention and MLP; 1 in the head)."""
    if engine not in SEQUENCE_GATHERED_NORM_ENGINES or not s.sp or s.tp == 1:
        return ops
    extra = linears * _linear_in(ACT * (s.tokens - s.stream_tokens) * model.hidden, s)
    ops.recomputable_bytes += extra
    return ops


# Linears whose input a norm produces in the same kernel under Transformer Engine
# (LayerNormLinear: the QKV projection of a GQA/MHA layer, a dense MLP's fc1); MLA's and the
# MoE layer's norms are separate modules (see the layernorm module records above)
NORM_FED = ("qkv", "mlp_fc1")


# Linears of one MatMul record that are separate modules reading the same input in engines
# whose FP8 linears cast per module (fp8_recipe.Fp8Recipe.per_module_casts): q, k, v; the
# gated MLP's gate and up projections
PER_MODULE = {"qkv": 3, "mlp_fc1": 2, "shared_fc1": 2}
# Under float8-aware TP (fp8_recipe.Fp8Recipe.tp_float8_gather, sequence parallelism): the
# linears whose input is cast on the sequence shard before the all-gather, once for all of
# them, and those whose output gradient is (the row-parallel ones)
FLOAT8_TP_GATHERED_INPUT = ("qkv", "mlp_fc1")
FLOAT8_TP_GATHERED_GRAD = ("o_proj", "mlp_fc2")


def fp8_casts(ops: LayerOps, s: Shard, gated: bool = True) -> LayerOps:
    """Adds the FP8 recipe's cast traffic of every low-precision GEMM of ``ops`` (``gated``:
    the MLP's fc1 is a gate and an up projection)."""
    r = s.fp8_recipe or fp8_recipe.resolve("fp8", "", "megatron" if s.fp8_fused_casts
                                           else "", "hopper")
    for mm in ops.matmuls:
        if mm.high_precision:
            continue
        x, dy, w = mm.m * mm.k * mm.count, mm.m * mm.n * mm.count, mm.n * mm.k * mm.count
        fed = s.fp8_fused_casts and mm.name in NORM_FED
        copies = PER_MODULE.get(mm.name, 1) if r.per_module_casts else 1
        if mm.name.endswith("_fc1") and not gated:
            copies = 1
        f8tp = r.tp_float8_gather and s.sp and s.tp > 1
        if f8tp and mm.name in FLOAT8_TP_GATHERED_INPUT:  # one cast, of the shard
            ops.fp8_fwd_bytes += x * (fp8_recipe.FLOAT8_TP_SHARD_BYTES / s.tp
                                      + fp8_recipe.FLOAT8_TP_GATHERED_BYTES)
            ops.fp8_fwd_kernels += r.kernels_per_tensor + 1
        else:
            ops.fp8_fwd_bytes += copies * x * (r.norm_input_bytes if fed else r.act_bytes)
            ops.fp8_fwd_kernels += copies * r.kernels_per_tensor
        if r.weights_every_microbatch:
            ops.fp8_fwd_bytes += w * r.weight_bytes
            ops.fp8_fwd_kernels += r.weight_kernels
        gathered_dy = f8tp and mm.name in FLOAT8_TP_GATHERED_GRAD  # cast on the shard
        ops.fp8_bwd_bytes += r.bwd_output_bytes * (x + w) + dy * (
            fp8_recipe.FLOAT8_TP_SHARD_BYTES / s.tp + fp8_recipe.FLOAT8_TP_GATHERED_BYTES
            if gathered_dy else r.act_bytes)
        ops.fp8_bwd_kernels += (r.kernels_per_tensor + (2 if r.bwd_output_bytes else 0)
                                + (1 if gathered_dy else 0))
    if r.amax_allreduce and s.sp and s.tp > 1:
        # the inputs all-gathered in forward and the gradients all-gathered in backward
        ops.fp8_fwd_kernels += ops.tp_collectives / 2
        ops.fp8_bwd_kernels += ops.tp_collectives / 2
    return ops


def embedding_ops(model: ModelSpec, s: Shard) -> LayerOps:
    """Input embedding on the first stage: a gather of T rows of h."""
    ops = LayerOps()
    ops.stream_bytes = 2 * ACT * s.stream_tokens * model.hidden
    ops.params = model.vocab * model.hidden / s.tp
    # vocab-parallel embedding (Megatron-LM VocabParallelEmbedding, Shoeybi et al. 2019):
    # each TP rank looks up its vocabulary slice and zeroes the rest, then the output is
    # all-reduced in forward (its backward is the identity), or reduce-scattered with SP
    # (its backward an all-gather). Counted as halves like the layers' pairs: one per pass.
    ops.tp_buffer_bytes = ACT * s.tokens * model.hidden
    ops.tp_collectives = 1 if s.tp > 1 else 0
    if model.position == "learned":
        ops.params += model.max_position * model.hidden
    if model.embedding_norm:  # BLOOM's word_embeddings_layernorm: reads and writes the stream
        ops.params += model.norm_params(model.hidden)
        ops.stream_bytes += 2 * ACT * s.stream_tokens * model.hidden
    return ops


# The loss's forward traffic per logit that head_ops charges every engine: the logits read
# in 16-bit and written in fp32, the fp32 softmax / loss read and its 16-bit gradient
# written (read 2 + write 4 + read 4 + write 2); engines that move more add the difference
# (mcore_loss.unfused_loss).
HEAD_LOSS_FWD_BYTES = 2 + 4 + 4 + 2


def head_ops(model: ModelSpec, s: Shard) -> LayerOps:
    """Final norm, output layer and cross-entropy loss on the last stage."""
    ops = LayerOps()
    h, T, V = model.hidden, s.tokens, model.vocab / s.tp
    ops.matmuls.append(MatMul("output", T, V, h, high_precision=s.fp8))
    # logits written in 16-bit, softmax/loss in fp32 (HEAD_LOSS_FWD_BYTES per logit)
    ops.stream_bytes = T * V * HEAD_LOSS_FWD_BYTES + ACT * s.stream_tokens * h * 2
    ops.saved_bytes = _linear_in(ACT * s.stream_tokens * h, s)
    ops.params = model.norm_params(h) + (model.vocab * h / s.tp)
    if model.output_bias:  # vocab-parallel like the weight
        ops.params += model.vocab / s.tp
    ops.tp_buffer_bytes = ACT * T * h
    ops.tp_collectives = 1 if s.tp > 1 else 0  # all-gather of the sequence-parallel input
    return ops


# Engines whose output layer all-gathers the vocabulary-parallel logits over TP and computes
# the loss on the full vocabulary on every TP rank, instead of Megatron's vocab-parallel
# cross entropy. Aleph Alpha's training code (Hagemann et al. 2023; its public release
# github Aleph-Alpha/scaling): TransformerLMHead is a ColumnParallelLinear with
# parallel_output=False, whose forward all-gathers the shards (torch.distributed.all_gather
# into a list, then torch.cat) and whose backward keeps this rank's slice; CrossEntropyLoss
# runs torch cross_entropy on ``output.activations.float()`` of the whole vocabulary.
GATHERED_LOGITS_ENGINES = ("aleph-alpha",)
LOGIT_BYTES = 2  # 16-bit logits


def gathered_logits(ops: LayerOps, model: ModelSpec, s: Shard, engine: str) -> LayerOps:
    """The head of an engine in GATHERED_LOGITS_ENGINES: the logits all-gather (forward) and
    the loss on the full vocabulary on every TP rank (head_ops counts vocab / tp)."""
    if engine not in GATHERED_LOGITS_ENGINES or s.tp == 1:
        return ops
    full = s.tokens * model.vocab  # logits on every rank after the gather
    ops.tp_gather_bytes = LOGIT_BYTES * full
    # the loss's 12 bytes per logit (head_ops) on the other ranks' shards too, and the
    # torch.cat copy of the gathered list (read + write 16-bit)
    ops.stream_bytes += full * (1 - 1 / s.tp) * 12 + full * 2 * LOGIT_BYTES
    ops.kernels += 2  # all-gather, cat
    ops.host_ops += 2
    return ops


# Bytes per logit the loss path holds at its peak, by engine (see logits_bytes).
# torch ``cross_entropy(logits.float())``: backward of log_softmax holds its saved fp32
# output, the fp32 gradient from nll_loss and the fp32 gradient it writes (4 + 4 + 4);
# the 16-bit logits are freed after the upcast (torchtitan ``del pred`` before backward).
UNFUSED_CE_BYTES_PER_LOGIT = 12
# The same torch cross entropy compiled (Workload.compiled_loss): torchtitan compiles its
# loss function with torch.compile when --training.compile is on, from 2025-02 (github
# pytorch/torchtitan, torchtitan/components/loss.py build_cross_entropy_loss: "Compiling
# the loss function with torch.compile", at e7c0cae of 2025-06-13; the Dec-2024 release
# compiled the transformer blocks only). AOTAutograd differentiates
# cross_entropy(pred.float()) as one graph and Inductor fuses the upcast, log-softmax and
# nll into a reduction that saves the 16-bit logits and a per-row log-sum-exp; the backward
# is one kernel writing (softmax - one_hot) * grad straight into the 16-bit gradient of
# pred. What the loss path holds is the saved 16-bit logits and that gradient: 2 + 2 bytes,
# the same as flash-attn's fused xentropy. The fp32 logits-shaped buffers of the eager path
# are gone: torchtitan docs/chunked_loss.md measures a 5.80 GiB fp32 buffer (40,960 tokens x
# 151,936 / 4 vocabulary x 4 bytes) in the eager cross-entropy backward that Inductor removes.
COMPILED_CE_BYTES_PER_LOGIT = 4
# Megatron-Core vocab_parallel_cross_entropy (and TE's fused one): the 16-bit logits and
# one fp32 softmax buffer into which the gradient is written in place (2 + 4).
MEGATRON_CE_BYTES_PER_LOGIT = 6
# flash-attn's fused CrossEntropyLoss (xentropy kernel), llm-foundry's default loss
# (ComposerMPTCausalLM ``loss_fn: fused_crossentropy``): it saves the 16-bit logits and
# a per-row log-sum-exp and writes a 16-bit gradient (2 + 2).
FUSED_XENTROPY_BYTES_PER_LOGIT = 4
# DTensor loss parallel (torch.distributed.tensor.parallel.loss_parallel), torchtitan's
# loss under tensor parallelism: the nll_loss backward handler fuses log_softmax's backward
# as ``(grad_input + exp(x)) * grad_output`` on fp32 shards, holding the saved output x,
# grad_input, exp(x) and their sum (or the product) at once (4 x 4).
LOSS_PARALLEL_BYTES_PER_LOGIT = 16
LOSS_BYTES_PER_LOGIT = {"megatron": MEGATRON_CE_BYTES_PER_LOGIT,
                        "nemo": MEGATRON_CE_BYTES_PER_LOGIT,
                        "llm-foundry": FUSED_XENTROPY_BYTES_PER_LOGIT,
                        "llmfoundry": FUSED_XENTROPY_BYTES_PER_LOGIT,
                        "composer": FUSED_XENTROPY_BYTES_PER_LOGIT}


# Engines whose pipeline keeps the last stage's 16-bit logits in a per-micro-batch output
# buffer, BUFFERED_LOGITS_MICROBATCHES of them at once. Aleph Alpha's scaling (github
# Aleph-Alpha/scaling at 737f8558 of 2024-10-30): the LM head's output (transformer/model/
# layers/lm_head.py, ``TransformerLayerIO(activations=logits)``, the whole vocabulary after the
# gather, GATHERED_LOGITS_ENGINES) is written to BufferType.PIPELINE_STAGE_OUTPUT by
# core/nn/parallel_module/parallel_module.py _execute_forward_pass and never taken on the last
# stage (only _execute_receive_gradients takes it, which the last stage does not run), so
# a slot is freed only when a later micro-batch overwrites it; core/nn/pipeline_schedule/
# train.py required_buffer_count gives the last stage (and a run without pipeline
# parallelism) max(2, min(pp - rank + 1, gradient_accumulation_steps)) = 2 slots,
# ``micro_batch_id % 2``. While micro-batch k's loss runs backward the 16-bit logits of k
# and of k - 1 are held, on top of the loss's fp32 buffers (CrossEntropyLoss upcasts
# ``output.activations.float()``, transformer/model/losses/cross_entropy.py).
BUFFERED_LOGITS_ENGINES = ("aleph-alpha",)
BUFFERED_LOGITS_MICROBATCHES = 2


def logits_bytes(model: ModelSpec, s: Shard, engine: str = "",
                 compiled_loss: bool = False, microbatches: int = 1) -> float:
    """Transient logits on the last stage while the loss runs backward, for the loss
    implementation of ``engine`` (Workload.framework); unknown engines take torch's
    unfused cross entropy on upcast logits, the most common path, or its compiled form
    when ``compiled_loss`` (Workload.compiled_loss). Engines with their own loss kernel
    (LOSS_BYTES_PER_LOGIT) and torchtitan's loss_parallel under TP (a DTensor op whose
    compiled form is not documented) keep their own figure. Engines in
    BUFFERED_LOGITS_ENGINES also hold the 16-bit logits of up to BUFFERED_LOGITS_MICROBATCHES
    of the step's ``microbatches`` in their pipeline output buffers."""
    per_logit = LOSS_BYTES_PER_LOGIT.get(engine, UNFUSED_CE_BYTES_PER_LOGIT)
    if engine == "torchtitan" and s.tp > 1:  # loss_parallel is on by default with TP
        per_logit = LOSS_PARALLEL_BYTES_PER_LOGIT
    elif compiled_loss and engine not in LOSS_BYTES_PER_LOGIT:
        per_logit = COMPILED_CE_BYTES_PER_LOGIT
    vocab = model.vocab if engine in GATHERED_LOGITS_ENGINES else model.vocab / s.tp
    if engine in BUFFERED_LOGITS_ENGINES:
        per_logit += LOGIT_BYTES * min(BUFFERED_LOGITS_MICROBATCHES, microbatches)
    return s.tokens * vocab * per_logit
