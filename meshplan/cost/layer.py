"""Per-layer cost on one rank for one micro-batch: times, exposed communication, memory.

Cached on everything that shapes a layer (model, GPU, placements of its groups, sharding,
recomputation): the search evaluates thousands of plans that share the same layers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from .collectives import Placement, all_gather_s, all_reduce_s, all_to_all_s, p2p_s
from ..recompute_modules import modules_of
from .compute import (ATTN_BWD_FLOP_RATIO, STREAM_BWD_BYTE_RATIO, core_attention_efficiency,
                      device, matmul_s, op_times)
from .efficiency import NETWORK
from .mcore_experts import eager_expert_epilogue, fp8_expert_padding
from .mcore_rope import eager_rope
from . import torchtitan_ac
from .attention_memory import FP32_SCORE_BYTES, SCORE_BYTES, scores_bytes
from .dispatcher_buffers import runs_deepep_kernels
from .engine_titan_tp import async_tp_shares, gathers_fuse, sac_regathers
from .fp8_recipe import FP8 as FP8_BYTES
from .moe_comm import (BF16_BYTES_PER_ELEMENT, dispatch_bytes_per_element, exchange_s,
                       host_syncs)
from .mcore_loss import embedding_grad, unfused_loss
from .ops import (ACT, PERMUTE_KERNELS, PERMUTE_PASSES, LayerOps, Shard, attention_part,
                  eager_attention, embedding_ops, expert_rows,
                  gathered_logits, gathered_norm_outputs, graph_replay,
                  head_ops, layer_ops, runtime_saved, unfused_norms,
                  unfused_swiglu)


@dataclass(frozen=True)
class CommPlacements:
    tp: Placement
    cp: Placement
    ep: Placement
    etp: Placement


@dataclass(frozen=True)
class LayerCost:
    """One layer (or the embedding / head) on one rank, one micro-batch. Seconds / bytes."""

    fwd_compute_s: float
    bwd_input_compute_s: float
    bwd_weight_compute_s: float
    recompute_s: float  # extra forward work done during backward
    tp_wire_s: float  # forward + backward (+ recomputed forward) TP collectives
    tp_exposed_s: float
    cp_wire_s: float
    cp_exposed_s: float
    ep_wire_s: float
    ep_exposed_s: float
    hidden_comm_s: float  # communication hidden behind compute (for contention)
    saved_bytes: float  # activations kept from forward to backward
    working_bytes: float  # transient peak while this layer runs backward
    params: float
    expert_params: float
    model_flops: float  # forward + backward, PaLM convention
    hw_flops: float  # executed, recomputation included

    fwd_exposed_s: float  # part of the exposed communication inside the forward pass
    # part of the hidden TP communication issued as plain NCCL calls beside the backward's
    # GEMMs (Megatron's asynchronous column-parallel collectives, megatron_async_dgrad), not
    # by TP-overlap kernels: it slows compute at collective_contention
    tp_nccl_hidden_s: float = 0.0

    @property
    def exposed_s(self) -> float:
        return self.tp_exposed_s + self.cp_exposed_s + self.ep_exposed_s

    @property
    def overlap_slowdown_s(self) -> float:
        """Compute slowdown beside this layer's hidden communication (efficiency.py): TP
        overlap kernels at overlap_contention, the rest (CP ring, EP all-to-all: NCCL) at
        collective_contention."""
        tp_hidden = self.tp_wire_s - self.tp_exposed_s - self.tp_nccl_hidden_s
        return (NETWORK.overlap_contention * tp_hidden
                + NETWORK.collective_contention * (self.hidden_comm_s - tp_hidden))

    @property
    def fwd_s(self) -> float:
        """Forward critical-path time: compute plus the forward pass's exposed comm."""
        return self.fwd_compute_s + self.fwd_exposed_s

    @property
    def bwd_input_s(self) -> float:
        """Backward (input gradients) with recomputation and the rest of the exposed comm."""
        return (self.bwd_input_compute_s + self.recompute_s
                + self.exposed_s - self.fwd_exposed_s)

    @property
    def bwd_weight_s(self) -> float:
        return self.bwd_weight_compute_s


def _tp_time(cluster: Cluster, p: Placement, ops: LayerOps, sp: bool,
             fp8_gathers: bool = False) -> float:
    """One pass (forward or backward) of the layer's TP collectives; ``fp8_gathers``: the
    all-gathers (half of them) move FP8 (fp8_recipe.Fp8Recipe.tp_float8_gather)."""
    if p.size == 1 or not ops.tp_collectives:
        return 0.0
    if sp and fp8_gathers:  # the reduce-scatters stay 16-bit
        return ops.tp_collectives / 2 * (
            all_gather_s(cluster, p, ops.tp_buffer_bytes * FP8_BYTES / ACT)
            + all_gather_s(cluster, p, ops.tp_buffer_bytes))
    if sp:  # all-gather + reduce-scatter pairs of the full hidden state
        return ops.tp_collectives * all_gather_s(cluster, p, ops.tp_buffer_bytes)
    # all-reduce; tp_collectives counts halves of AG+RS pairs, one AR per pair
    return ops.tp_collectives / 2 * all_reduce_s(cluster, p, ops.tp_buffer_bytes)


MEGATRON_ENGINES = ("megatron", "nemo")

# The column-parallel linears of a layer (Megatron's ColumnParallelLinear: the QKV projection,
# the MLP's first linear, a shared expert's first linear): their backward ends in the layer's
# TP collective of the input gradient.
COLUMN_PARALLEL = ("qkv", "mlp_fc1", "shared_fc1")


def megatron_async_dgrad(cluster: Cluster, p: Placement, dev, ops: LayerOps,
                         sp: bool) -> tuple[float, float]:
    """(extra wire, hidden) seconds of one backward pass's TP collectives that Megatron-LM
    issues asynchronously beside the GEMMs of its column-parallel linears when TP overlap
    (userbuffers) is off. LinearWithGradAccumulationAndAsyncCommunication.backward
    (NVIDIA/Megatron-LM megatron/mpu/layers.py at d898a8991d, 2022-05-25, the merge of
    sequence parallelism; megatron/core/tensor_parallel/layers.py at d98e8a64dd, 2026-08,
    the same steps): without sequence parallelism the input gradient's all-reduce is
    launched with async_op=True and waited for only after the weight-gradient GEMM
    (added 2021-08-30 in cf7efd4f5a as an opt-in flag, on by default since 3f65246911,
    2021-09-02: --no-async-tensor-model-parallel-allreduce turns it off);
    with it, the forward's all-gather of the layer input is repeated (async) under the
    input-gradient GEMM and the input gradient's reduce-scatter runs (async) under the
    weight-gradient GEMM. Each collective hides up to the time of the GEMM it runs beside;
    the row-parallel linears' backward collectives (all-gathers of the output gradient under
    sequence parallelism) stay blocking. Korthikanti et al. 2022 (arXiv 2205.05198) sec. 6.2
    name this overlap as why full recomputation costs 39%, not 33%, of a 22B layer.
    Runs of Megatron-LM before 2021-09 (Shoeybi et al. 2019, Narayanan et al. 2021) had all
    these collectives blocking; the runs schema cannot say so, and they are charged this too."""
    mms = [mm for mm in ops.matmuls if mm.name in COLUMN_PARALLEL]
    times = [matmul_s(dev, mm) for mm in mms]
    if sp:
        ag = all_gather_s(cluster, p, ops.tp_buffer_bytes)  # reduce-scatter: the same time
        return len(mms) * ag, sum(min(ag, t[1]) + min(ag, t[2]) for t in times)
    ar = all_reduce_s(cluster, p, ops.tp_buffer_bytes)
    return 0.0, sum(min(ar, t[2]) for t in times)

# JAX engines (MaxText, Pax) recompute a checkpointed layer by tracing its forward again inside
# the backward, and only what the backward reads is kept: "any residuals consumed on the
# backward pass are re-computed from those inputs as needed" (JAX docs, "Control autodiff's
# saved values with jax.checkpoint"), and XLA's dead-code elimination removes the rest of the
# replayed forward from the compiled step. The dense MLP's output projection is such a rest:
# its product only feeds the residual add, whose backward is the identity, and its own
# backward reads its input and the output gradient, never its output. Megatron-LM and torch
# (torch.utils.checkpoint, Megatron's CheckpointFunction) re-run the layer's whole forward.
XLA_REMAT_ENGINES = ("maxtext", "paxml")
XLA_UNREPLAYED_GEMMS = ("mlp_fc2",)


def unreplayed(ops: LayerOps, engine: str) -> list:
    """The GEMMs of ``ops`` that ``engine``'s full recomputation does not run again."""
    if engine not in XLA_REMAT_ENGINES:
        return []
    return [mm for mm in ops.matmuls if mm.name in XLA_UNREPLAYED_GEMMS]


def sorts_by_local_expert(model: ModelSpec, shard: Shard, dispatcher: str) -> bool:
    """Whether ``dispatcher`` sorts the received tokens again by local expert
    (sort_by_local_expert): the one way the dispatcher shapes a layer's operations."""
    local = model.moe_experts / shard.ep
    return not (dispatcher != "alltoall" or shard.ep == 1 or local <= 1)


# the DeepEP-class dispatch on a rack-scale NVLink domain, where Megatron-Bridge runs HybridEP
# (dispatcher_buffers.runs_deepep_kernels, framework_defaults.MOE_DISPATCHER_RACK)
HYBRIDEP = "hybridep"


def shaping_dispatcher(model: ModelSpec, cluster: Cluster, kind: str, shard: Shard,
                       dispatcher: str) -> str:
    """The dispatcher as far as it shapes an MoE layer's own operations: "alltoall" where it
    sorts by local expert (sort_by_local_expert), HYBRIDEP where the DeepEP-class dispatch is
    HybridEP, whose dispatch lays each expert's tokens out padded for FP8
    (mcore_experts.fp8_expert_padding), else "" (the key layer_core is cached by)."""
    if kind != "moe":
        return ""
    if sorts_by_local_expert(model, shard, dispatcher):
        return dispatcher
    if dispatcher == HYBRIDEP and shard.ep > 1:  # stated: HybridEP on any NVLink domain
        return HYBRIDEP
    if (dispatcher == "deepep" and shard.ep > 1
            and not runs_deepep_kernels(dispatcher, shard.ep, cluster.scaleup_domain)):
        return HYBRIDEP
    return ""


def sort_by_local_expert(ops: LayerOps, model: ModelSpec, shard: Shard,
                         dispatcher: str) -> LayerOps:
    """Megatron-Core's all-to-all dispatcher permutes twice on each side when a rank holds
    several experts: after the all-to-all the received tokens arrive grouped by source rank
    and are sorted again by local expert ("Permutation 2", sort_chunks_by_idxs), and before
    the combine's all-to-all they are unsorted ("Unpermutation 2") (megatron/core/
    transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher.dispatch_postprocess /
    combine_preprocess; main as of 2026-08). Each is a read and a write of every token
    copy's hidden state, on top of the first permutation and the final unpermutation that
    ops.moe_ops counts. DeepEP-class dispatchers (flex) receive tokens already laid out per
    rank and permute once on each side."""
    if not sorts_by_local_expert(model, shard, dispatcher):
        return ops
    rows = expert_rows(ops)
    ops.stream_bytes += 2 * 2 * ACT * rows * model.hidden  # sort + unsort, read + write
    ops.kernels += 2
    return ops


def fused_permutation(ops: LayerOps, model: ModelSpec, dispatcher: str) -> LayerOps:
    """HybridEP permutes inside its dispatch and unpermutes inside its combine: its dispatch
    kernel writes the received tokens expert-major, straight into the grouped GEMM's input,
    and its combine reads them from there (megatron-core 0.16.1 token_dispatcher.py
    _HybridEPManager: "Permute tokens for communication, perform all-to-all communication,
    and permute tokens for experts in single step"; its get_permuted_hidden_states_by_experts
    and get_restored_hidden_states_by_experts return the tensor unchanged, where
    _DeepepManager's call permute / unpermute). So the separate permutation passes ops.moe_ops
    counts are not run (their bytes are the dispatch's and combine's, priced as the expert
    exchange), nor run again by the moe recompute module. Other dispatchers: unchanged."""
    if dispatcher != HYBRIDEP:
        return ops
    moved = PERMUTE_PASSES * ACT * expert_rows(ops) * model.hidden
    ops.stream_bytes -= moved
    ops.kernels -= PERMUTE_KERNELS
    m = ops.modules.get("moe")
    if m is not None:
        ops.modules["moe"] = replace(m, stream_bytes=m.stream_bytes - moved,
                                     kernels=m.kernels - PERMUTE_KERNELS)
    return ops


def modules_recompute(dev, ops: LayerOps, modules: str, attn_fwd_s: float
                      ) -> tuple[float, float, float, bool]:
    """(seconds re-spent, bytes freed, GEMM FLOPs re-run, whether the expert all-to-alls
    run again) of recomputing ``modules`` in a layer whose operations are ``ops``: the
    GEMMs they name at their forward time, their element-wise bytes at HBM bandwidth,
    their kernels' launch gaps, the attention core at its forward time."""
    names = modules_of(modules)
    if "moe" in names:  # the whole MoE layer includes its shared experts
        names = tuple(n for n in names if n != "shared_experts")
    parts = [ops.modules[n] for n in names if n in ops.modules]
    gemms = {g for mr in parts for g in mr.matmuls}
    mms = [mm for mm in ops.matmuls if mm.name in gemms]
    rc = sum(matmul_s(dev, mm)[0] for mm in mms)
    rc += sum(mr.stream_bytes for mr in parts) / dev.hbm_bytes_per_s
    rc += sum(mr.kernels for mr in parts) * dev.kernel_gap_s
    rc += attn_fwd_s if any(mr.attn_core for mr in parts) else 0.0
    flops = sum(mm.flops for mm in mms)
    return rc, sum(mr.freed_bytes for mr in parts), flops, any(mr.ep_comm for mr in parts)


def fp32_activations(ops: LayerOps, scale: float) -> LayerOps:
    """fp32 training: the activations that are saved or exchanged over tp/cp are 4-byte
    elements, ``scale`` times the 16-bit bytes ops.py counts (timing: compute.op_times)."""
    return replace(ops, **{f: getattr(ops, f) * scale for f in (
        "saved_bytes", "recomputable_bytes", "input_bytes", "tp_buffer_bytes",
        "tp_gather_bytes", "etp_buffer_bytes", "cp_kv_bytes", "cp_a2a_bytes")})


@lru_cache(maxsize=1 << 16)
def layer_ops_times(model: ModelSpec, cluster: Cluster, kind: str, shard: Shard,
                    precision: str, engine: str = "", moe_dispatcher: str = "alltoall",
                    attention_kernel: str = "",
                    norm_kernel: str = "",
                    cp_kind: str = "ring") -> tuple[LayerOps, object, object]:
    """(the layer's operations, the device, their times): what layer_cost reads that does
    not depend on recomputation, placements or overlap. Cached: the search asks for the same
    layer shape under many placements and recomputation settings (DeepSeek-V3 on 2,048
    H800 with --engine megatron: 12,435 distinct layer_cost calls, 7,257 distinct
    layer_core calls, 5,877 distinct shapes). The results are immutable. ``cp_kind``: the
    context-parallel attention, which decides for engine "" whether k/v are kept repeated
    (ops.runtime_saved)."""
    if kind == "embedding":
        ops = embedding_grad(embedding_ops(model, shard), model, shard, engine)
    elif kind == "head":
        ops = unfused_loss(gathered_logits(head_ops(model, shard), model, shard, engine),
                           model, shard, engine, precision)
        ops = gathered_norm_outputs(ops, model, shard, engine, linears=1)
    else:
        ops = unfused_norms(layer_ops(model, kind == "moe", shard), engine, norm_kernel)
        ops = eager_attention(ops, model, shard, engine)
        ops = eager_rope(ops, model, shard, engine)
        ops = gathered_norm_outputs(ops, model, shard, engine, linears=2)
        if kind == "dense":
            ops = unfused_swiglu(ops, model, shard, engine)
        ops = runtime_saved(ops, model, shard, engine, dense=kind == "dense",
                            gpu=cluster.gpu, precision=precision, cp_kind=cp_kind)
        if kind == "moe":
            ops = sort_by_local_expert(ops, model, shard, moe_dispatcher)
            ops = fused_permutation(ops, model, moe_dispatcher)
            ops = eager_expert_epilogue(ops, model, shard, engine)
            ops = fp8_expert_padding(ops, model, shard, engine,
                                     padded_by_dispatch=moe_dispatcher == HYBRIDEP)
        ops = graph_replay(ops, model, shard, moe=kind == "moe")
        if kind == "moe":
            ops = replace(ops, host_syncs=host_syncs(engine, shard.cuda_graph))
    share = shard.fp8_recipe.gemm_share if shard.fp8_recipe is not None else 1.0
    dev = device(cluster.gpu, precision, engine, attention_kernel, share)
    if dev.act_scale != 1.0:
        ops = fp32_activations(ops, dev.act_scale)
    return ops, dev, op_times(dev, ops)


@lru_cache(maxsize=1 << 15)
def layer_cost(model: ModelSpec, cluster: Cluster, kind: str, shard: Shard, recompute: str,
               places: CommPlacements, tp_overlap: bool, precision: str,
               cp_kind: str = "ring", engine: str = "", moe_dispatcher: str = "alltoall",
               ep_overlap: bool = False, modules: str = "",
               attention_kernel: str = "", norm_kernel: str = "",
               attention_full_ac: bool = False) -> LayerCost:
    """``kind`` is "dense", "moe", "embedding" or "head"; ``engine`` the framework whose
    kernels run it (Workload.framework); ``moe_dispatcher`` the token dispatcher
    (moe_comm.py); ``ep_overlap``: the expert all-to-all of one micro-batch runs under the
    compute of another (Megatron's combined 1F1B, DualPipe); ``modules``: with recompute
    "selective", the Megatron-Core modules recomputed (Plan.recompute_modules; "" = the
    engine's own selective recomputation); ``attention_kernel``: the attention kernel class
    the run states (Workload.attention_kernel; "" = the engine's default); ``norm_kernel``
    likewise for the RMSNorm (Workload.norm_kernel); ``attention_full_ac``: the engine's
    op-level selective recomputation checkpoints the attention module whole
    (Workload.attention_full_ac, torchtitan_ac.py)."""
    if kind != "moe":  # only the MoE layer has an expert all-to-all (ops.moe_ops)
        moe_dispatcher, ep_overlap = "alltoall", False
    c = layer_core(model, cluster, kind, shard, recompute, places.tp, places.cp, places.etp,
                   tp_overlap, precision, cp_kind, engine,
                   shaping_dispatcher(model, cluster, kind, shard, moe_dispatcher),
                   modules, attention_kernel, norm_kernel, attention_full_ac)
    ep_wire = ep_hidden = ep_fwd = 0.0
    if c.ops.ep_alltoalls and places.ep.size > 1:
        ep_wire, ep_hidden, ep_fwd = _ep_times(model, cluster, c, places.ep, recompute,
                                               moe_dispatcher, ep_overlap, modules,
                                               precision, engine)
    tp_wire, tp_hidden, gather, passes = c.tp_wire, c.tp_hidden, c.gather, c.passes
    t, ops = c.t, c.ops
    return LayerCost(
        fwd_compute_s=t.fwd_s, bwd_input_compute_s=t.bwd_input_s,
        bwd_weight_compute_s=t.bwd_weight_s, recompute_s=c.rc,
        tp_wire_s=tp_wire, tp_exposed_s=tp_wire - tp_hidden, tp_nccl_hidden_s=c.tp_async,
        cp_wire_s=c.cp_wire, cp_exposed_s=c.cp_wire - c.cp_hidden,
        ep_wire_s=ep_wire, ep_exposed_s=ep_wire - ep_hidden,
        hidden_comm_s=tp_hidden + c.cp_hidden + ep_hidden,
        saved_bytes=c.saved, working_bytes=c.working,
        params=ops.params, expert_params=ops.expert_params,
        model_flops=c.model_flops, hw_flops=c.hw_flops,
        fwd_exposed_s=((tp_wire - gather - c.regather - (tp_hidden - c.tp_async)) / passes
                       if c.tp_fwd_hidden is None
                       else (tp_wire - c.regather_sac) / passes - c.tp_fwd_hidden)
        + ep_fwd + c.cp_fwd_exposed
        + gather)


class LayerCore(NamedTuple):
    """What layer_cost computes before the expert all-to-all (layer_core)."""

    ops: LayerOps
    dev: object
    t: object  # compute.OpTimes
    rc: float
    passes: int
    saved: float
    working: float
    ep_again: bool
    tp_wire: float
    tp_hidden: float
    gather: float
    cp_wire: float
    cp_hidden: float
    cp_fwd_exposed: float
    model_flops: float
    hw_flops: float
    regather: float = 0.0  # backward-only TP wire (megatron_async_dgrad)
    tp_async: float = 0.0  # its hidden part, also in tp_hidden
    # the forward pass's hidden TP time where it differs from tp_hidden / passes (async TP)
    tp_fwd_hidden: float | None = None
    regather_sac: float = 0.0  # backward-only TP wire (engine_titan_tp.sac_regathers)


@lru_cache(maxsize=1 << 15)
def layer_core(model: ModelSpec, cluster: Cluster, kind: str, shard: Shard, recompute: str,
               tp_place: Placement, cp_place: Placement, etp_place: Placement,
               tp_overlap: bool, precision: str, cp_kind: str, engine: str,
               sort_dispatcher: str, modules: str, attention_kernel: str,
               norm_kernel: str = "", attention_full_ac: bool = False) -> LayerCore:
    """layer_cost less the expert all-to-all: compute, recomputation, memory, TP and CP
    communication and FLOPs, which neither the expert-parallel placement, nor the expert
    overlap, nor the dispatcher change, except through the dispatcher's second permutation
    (``sort_dispatcher``: shaping_dispatcher's answer). Cached apart:
    the search prices each MoE layer under every setting of rule 8's knobs
    (search/space.py moe_comm_knobs), and those share this part."""
    ops, dev, t = layer_ops_times(model, cluster, kind, shard, precision, engine,
                                  sort_dispatcher, attention_kernel, norm_kernel, cp_kind)
    # attention scores a device without flash-class kernels keeps (attention_memory.py;
    # compute.device decides, materialises_scores); fp32: softmax output 4 + dropout mask 1
    # + dropout output 4 bytes per score
    scores = 0.0
    if dev.unfused_attention and kind in ("dense", "moe"):
        scores = scores_bytes(model, shard) * (FP32_SCORE_BYTES / SCORE_BYTES
                                               if dev.act_scale != 1.0 else 1.0)
    ep_again = False  # module-level recomputation of the whole MoE layer (dispatch included)
    attn_rerun_flops = 0.0  # the attention's projections run again (torchtitan_ac.py)
    routed_rerun_flops = 0.0  # the routed experts' GEMMs run again (torchtitan_ac.py)
    # recomputation: full repeats the forward; selective repeats the attention core, the
    # norms and the MLP activation function
    skipped = unreplayed(ops, engine) if recompute == "full" else []
    if recompute == "full" and kind in ("dense", "moe"):
        rc, passes = t.fwd_s - sum(matmul_s(dev, mm)[0] for mm in skipped), 3
        saved = ops.input_bytes
        # the recomputed activations plus their gradients while the layer runs backward
        working = 2 * (ops.saved_bytes + ops.recomputable_bytes + scores)
    elif recompute == "selective" and modules and kind in ("dense", "moe"):
        # module-level selective recomputation (Megatron-Core --recompute-modules): each
        # module present in the layer frees what it discards and runs its forward again
        # (ops.ModuleRecompute); the recomputed tensors of one layer live while it runs
        # backward. The attention core also frees an engine's materialised score matrix.
        rc, freed, rc_flops, ep_again = modules_recompute(dev, ops, modules, t.attn_fwd_s)
        if "core_attn" in modules_of(modules):
            freed += scores
        passes = 2
        saved = ops.saved_bytes + ops.recomputable_bytes + scores - freed
        working = freed
    elif recompute == "selective" and kind == "dense" and engine in MEGATRON_ENGINES:
        # Megatron-LM / NeMo selective recomputation (recompute_granularity=selective,
        # modules core_attn): only the attention core is recomputed, everything else stays
        # saved. With flash attention the core keeps only q, k, v and its output anyway,
        # so memory is that of no recomputation (Korthikanti et al. 2022 sec. 5 without
        # the 5as/h term) and the cost is one more attention forward. MoE layers keep the
        # op-level branch below: Megatron-Core's MoE recipes add the moe_act / layernorm
        # recompute modules (an assumption: the calibration rows do not print them).
        rc = t.attn_fwd_s
        passes = 2
        saved = ops.saved_bytes + ops.recomputable_bytes
        working = scores  # what it recomputes: the scores, rebuilt one layer at a time
    elif recompute == "selective" and kind in ("dense", "moe"):
        # torchtitan-style op-level selective checkpointing: norms, the attention core,
        # the MLP activation and every other GEMM of a gated MLP are recomputed
        rc = t.attn_fwd_s + t.act_fn_fwd_s + t.norm_fwd_s
        rc += ops.selective_matmul_flops / (dev.matmul_flops * 0.9)
        passes = 2
        saved = ops.saved_bytes
        working = ops.recomputable_bytes + scores
        if torchtitan_ac.applies(engine, attention_full_ac, recompute, modules, kind):
            # the attention module checkpointed whole (torchtitan_ac.py): it keeps its
            # input, rebuilds the rest in backward and runs its projections again
            freed = torchtitan_ac.freed_bytes(model, shard)
            saved -= freed
            working += freed
            names = torchtitan_ac.rerun_matmul_names(model, shard)
            again = [mm for mm in ops.matmuls if mm.name in names]
            rc += sum(matmul_s(dev, mm)[0] for mm in again)
            attn_rerun_flops = sum(mm.flops for mm in again)
        if torchtitan_ac.routed_applies(engine, recompute, modules, kind):
            # the routed experts' grouped GEMMs are not in the save list (torchtitan_ac.py):
            # only the all-to-all outputs stay, the experts run forward again in backward
            freed = torchtitan_ac.routed_freed_bytes(model, shard, ops)
            saved -= freed
            working += freed
            again = [mm for mm in ops.matmuls if mm.name in torchtitan_ac.ROUTED_MATMULS]
            rc += sum(matmul_s(dev, mm)[0] for mm in again)
            routed_rerun_flops = sum(mm.flops for mm in again)
    else:
        rc, passes = 0.0, 2
        saved = ops.saved_bytes + ops.recomputable_bytes + scores
        working = 0.0
    # TP: one set of collectives per pass (forward, backward, recomputed forward)
    fp8_gathers = kind == "dense" and bool(shard.fp8_recipe
                                           and shard.fp8_recipe.tp_float8_gather)
    tp_pass = _tp_time(cluster, tp_place, ops, shard.sp, fp8_gathers)
    if ops.etp_buffer_bytes and etp_place.size > 1:
        tp_pass += 2 * all_gather_s(cluster, etp_place, ops.etp_buffer_bytes)
    tp_wire = tp_pass * passes
    # the input all-gathers torchtitan's per-op checkpointing runs again in backward
    # (engine_titan_tp.sac_regathers): half of a pass's collectives, at the gathers' bytes
    regather_sac = 0.0
    if shard.sp and tp_place.size > 1 and sac_regathers(engine, kind, recompute, modules):
        regather_sac = ops.tp_collectives / 2 * all_gather_s(
            cluster, tp_place, ops.tp_buffer_bytes * (FP8_BYTES / ACT if fp8_gathers else 1))
        if attn_rerun_flops:
            # the attention's input all-gather re-runs with the whole attention (below):
            # only the MLP's is left to count here
            regather_sac /= 2
        tp_wire += regather_sac
    if attn_rerun_flops:  # the re-run attention forward repeats its TP collectives
        tp_wire += _tp_time(cluster, tp_place, attention_part(model, shard),
                            shard.sp)
    gather = 0.0  # forward only (its backward is a split), exposed in the forward pass
    if ops.tp_gather_bytes and tp_place.size > 1:
        gather = all_gather_s(cluster, tp_place, ops.tp_gather_bytes)
        tp_wire += gather
    # Only sequence-parallel TP can be overlapped: Megatron/TE's --tp-comm-overlap and
    # torchtitan's async TP split SP's all-gather / reduce-scatter into chunks pipelined with
    # the GEMMs that consume / produce them (Megatron-LM arguments: '--tp-comm-overlap
    # requires --sequence-parallel'); plain TP's all-reduce needs the whole GEMM output and
    # the next op needs the whole reduced tensor, so it stays on the critical path
    # (Shoeybi et al. 2019, the 'g' all-reduce of the MLP and attention blocks).
    tp_hidden = NETWORK.tp_overlap * tp_wire if tp_overlap and shard.sp else 0.0
    # torchtitan's async TP fuses only some of a pass's collectives (engine_titan_tp.py):
    # its share of the forward (and recomputed forward) and of the backward pass
    tp_fwd_hidden = None
    recipe = shard.fp8_recipe.name if shard.fp8_recipe else ""
    shares = async_tp_shares(engine, kind, recipe)
    if tp_overlap and shard.sp and shares is not None and not gather:
        tp_fwd_hidden = NETWORK.tp_overlap * shares[0] * tp_pass
        tp_hidden = tp_fwd_hidden * (passes - 1) + NETWORK.tp_overlap * shares[1] * tp_pass
        if gathers_fuse(recipe):  # the re-run gathers fuse where the forward's do
            tp_hidden += NETWORK.tp_overlap * regather_sac
    # Without those kernels Megatron still hides the backward collectives of its
    # column-parallel linears behind their own GEMMs (megatron_async_dgrad).
    regather = tp_async = 0.0
    if (engine in MEGATRON_ENGINES and not (tp_overlap and shard.sp) and tp_place.size > 1
            and kind in ("dense", "moe") and ops.tp_collectives):
        regather, tp_async = megatron_async_dgrad(cluster, tp_place, dev, ops, shard.sp)
        tp_wire += regather
        tp_hidden = tp_async
    # CP ring: (cp-1) K/V blocks forward, K/V plus their gradients backward, each step
    # overlapped with the attention block it feeds; Ulysses all-to-all is not overlapped.
    cp_wire = cp_hidden = cp_fwd_exposed = 0.0
    if cp_place.size > 1 and kind in ("dense", "moe"):
        n = cp_place.size
        if cp_kind == "ring":
            step = p2p_s(cluster, cp_place.nodes > 1, ops.cp_kv_bytes)
            fwd_c, bwd_c = (n - 1) * step, 2 * (n - 1) * step
            attn_f = t.attn_fwd_s
            attn_b = attn_f * (ATTN_BWD_FLOP_RATIO
                               * core_attention_efficiency(dev, ops)
                               / core_attention_efficiency(dev, ops, backward=True))
            cp_wire = fwd_c * (passes - 1) + bwd_c
            cp_hidden = min(fwd_c, attn_f) * (passes - 1) + min(bwd_c, attn_b)
            cp_fwd_exposed = fwd_c - min(fwd_c, attn_f)
        else:
            a2a = all_to_all_s(cluster, cp_place, ops.cp_a2a_bytes)
            cp_wire = a2a * (passes - 1) + a2a
            cp_fwd_exposed = a2a
    mm_flops = sum(mm.flops for mm in ops.matmuls)
    model_flops = 3 * (mm_flops + ops.attn_model_flops)
    hw_flops = 3 * mm_flops + 3.5 * ops.attn_fwd_flops
    if recompute == "full" and kind in ("dense", "moe"):  # the embedding / output layer
        hw_flops += mm_flops + ops.attn_fwd_flops        # are not recomputed (rc above)
        hw_flops -= sum(mm.flops for mm in skipped)
    elif recompute == "selective" and modules and kind in ("dense", "moe"):
        hw_flops += rc_flops + (ops.attn_fwd_flops if "core_attn" in modules_of(modules)
                                else 0.0)
    elif recompute == "selective" and engine in MEGATRON_ENGINES and kind == "dense":
        hw_flops += ops.attn_fwd_flops
    elif recompute == "selective":
        hw_flops += (ops.attn_fwd_flops + ops.selective_matmul_flops + attn_rerun_flops
                     + routed_rerun_flops)
    return LayerCore(ops, dev, t, rc, passes, saved, working, ep_again, tp_wire, tp_hidden,
                     gather, cp_wire, cp_hidden, cp_fwd_exposed, model_flops, hw_flops,
                     regather, tp_async, tp_fwd_hidden, regather_sac)


def _ep_times(model: ModelSpec, cluster: Cluster, c: LayerCore, place: Placement,
              recompute: str, moe_dispatcher: str, ep_overlap: bool, modules: str,
              precision: str, engine: str) -> tuple[float, float, float]:
    """(wire, hidden, forward-exposed) seconds of the MoE layer's expert all-to-alls over
    ``place``, the layer's other parts being ``c``."""
    ops, t, rc, passes, ep_again = c.ops, c.t, c.rc, c.passes, c.ep_again
    ep_hidden = 0.0
    # EP: dispatch + combine forward, their mirror images backward (the backward of the
    # combine is dispatch-shaped, the backward of the dispatch combine-shaped)
    tokens = ops.ep_send_bytes / (ACT * model.moe_topk * model.hidden)
    d = exchange_s(cluster, place, model, tokens, moe_dispatcher,
                   dispatch_bytes_per_element(moe_dispatcher, precision, engine))
    comb = exchange_s(cluster, place, model, tokens, moe_dispatcher, BF16_BYTES_PER_ELEMENT)
    ep_fwd = d + comb
    ep_wire = ep_fwd * (3 if recompute == "selective" and modules and ep_again else passes)
    if ep_overlap and engine in MEGATRON_ENGINES:
        # a forward and a backward run as one block: what the pair leaves exposed is counted
        # in the backward, so the forward pass is the same at every recomputation setting
        # (search/bound.py's floors and the module ladder rely on that) and more
        # recomputation, which only lengthens attn_bwd, never shortens the backward
        exposed = combined_1f1b_exposed_s(c, d, comb, ep_wire - 2 * ep_fwd)
        ep_hidden = ep_wire - exposed
        ep_fwd = 0.0
    elif ep_overlap:
        # two micro-batches interleaved: the forward's all-to-alls run under the other
        # micro-batch's backward compute, the backward's (recomputed forward included)
        # under its forward compute (DeepSeek-V3 report sec. 3.2.1, Fig. 4, DualPipe)
        bwd_comp = t.bwd_input_s + t.bwd_weight_s + rc
        exp_f = max(0.0, ep_fwd - bwd_comp)
        exp_b = max(0.0, ep_wire - ep_fwd - t.fwd_s)
        ep_hidden = ep_wire - exp_f - exp_b
        ep_fwd = exp_f
    return ep_wire, ep_hidden, ep_fwd


ROUTED_EXPERT_GEMMS = ("expert_fc1", "expert_fc2")


def combined_1f1b_exposed_s(c: LayerCore, dispatch_s: float, combine_s: float,
                            again_s: float = 0.0) -> float:
    """Expert all-to-all time left exposed, per layer, when Megatron-Core runs the layers'
    forward of a micro-batch beside their backward of another (--overlap-moe-expert-parallel-
    comm, combined 1F1B). megatron-core 0.16.1 models/common/model_chunk_schedule_plan.py
    TransformerLayerSchedulePlan.run issues, for each pair of layers, on two streams::

        comm: combine_bwd | dispatch_fwd -> dispatch_bwd           | combine_fwd
        comp: attn_fwd    | mlp_bwd -> mlp_bwd_dw -> mlp_fwd       | attn_bwd -> attn_dw

    where "attn" is everything outside the routed experts (attention, norms, router, shared
    experts, permutation: fine_grained_callables.py submodule_attn_forward) and "mlp" the
    routed experts (submodule_moe_forward). Each stream runs its kernels in issue order; the
    nodes of one micro-batch wait for each other through that micro-batch's event
    (pipeline_parallel/utils.py ScheduleNode: "each microbatch ... shares the same event"):
    forward attn -> dispatch -> mlp -> combine -> the next layer's attn; backward combine ->
    mlp -> dispatch -> attn -> the next layer's combine; the two micro-batches do not wait
    for each other. The layers are run one after another as the schedule issues them and
    the exposed time is the steady per-layer span less the compute. ``dispatch_s`` /
    ``combine_s``: one dispatch- and one combine-shaped all-to-all (the backward of the
    combine is dispatch-shaped, that of the dispatch combine-shaped); ``again_s``: the
    all-to-alls of a recomputed MoE layer, issued before its backward (counted with
    combine_bwd). Recomputation runs in attn_bwd."""
    t, dev = c.t, c.dev
    mlp_f = mlp_b = mlp_w = 0.0
    for mm in c.ops.matmuls:
        if mm.name in ROUTED_EXPERT_GEMMS:
            f, i, w = matmul_s(dev, mm)
            mlp_f, mlp_b, mlp_w = mlp_f + f, mlp_b + i, mlp_w + w
    act = t.act_fn_fwd_s
    mlp_f += act
    mlp_b += STREAM_BWD_BYTE_RATIO * act
    return combined_1f1b_exposed_parts(
        attn_f=max(0.0, t.fwd_s - mlp_f), attn_b=max(0.0, t.bwd_input_s - mlp_b) + c.rc,
        attn_w=max(0.0, t.bwd_weight_s - mlp_w), mlp_f=mlp_f, mlp_b=mlp_b, mlp_w=mlp_w,
        dispatch=dispatch_s, combine=combine_s, again=again_s)


def combined_1f1b_exposed_parts(attn_f: float, attn_b: float, attn_w: float, mlp_f: float,
                                mlp_b: float, mlp_w: float, dispatch: float, combine: float,
                                again: float = 0.0) -> float:
    """combined_1f1b_exposed_s from the nodes' seconds (forward, backward, weight gradient of
    attn and mlp; one dispatch- and one combine-shaped all-to-all)."""
    comb_b = dispatch + again
    comp = comm = f_ready = b_ready = 0.0  # stream clocks, inputs of the next layer
    ends = []
    for _ in range(COMBINED_LAYERS):
        cb_end = max(comm, b_ready) + comb_b
        af_end = max(comp, f_ready) + attn_f
        t1 = max(af_end, cb_end)  # mlp_bwd and dispatch_fwd start
        mb_end = t1 + mlp_b
        df_end = t1 + dispatch
        db_end = max(df_end, mb_end) + combine
        mf_end = max(mb_end + mlp_w, df_end) + mlp_f
        f_ready = comm = max(db_end, mf_end) + combine
        b_ready = max(mf_end, db_end) + attn_b
        comp = b_ready + attn_w
        ends.append(max(comp, comm))
    half = COMBINED_LAYERS // 2
    period = (ends[-1] - ends[half - 1]) / (COMBINED_LAYERS - half)
    return max(0.0, period - (attn_f + mlp_b + mlp_w + mlp_f + attn_b + attn_w))


# layers run through combined_1f1b_exposed_s's streams; the span of the later half is the
# steady state (the first layer of a chunk starts on idle streams: its combine_bwd and
# attn_fwd both start at once)
COMBINED_LAYERS = 8


_clear_layer_cost = layer_cost.cache_clear


def _clear_layer_caches() -> None:
    """layer_cost.cache_clear() also forgets the layer shapes' operations and times (callers
    clear it after changing a constant of the cost model)."""
    _clear_layer_cost()
    layer_core.cache_clear()
    layer_ops_times.cache_clear()


layer_cost.cache_clear = _clear_layer_caches
