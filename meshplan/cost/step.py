"""estimate(model, cluster, workload, plan) -> Estimate: the one function at the centre.

Composition: per-layer costs (layer.py) are summed into model chunks (virtual stages),
chunks into pipeline ranks; the slowest rank sets the steady state, the schedule's closed
form adds the bubble (pipeline.py), then data-parallel communication that backward and
forward could not hide, and the optimizer step. Every result is a named breakdown whose
parts sum to its total.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from ..plan import V_SCHEDULES, Plan
from ..specs.hardware import Cluster, gib_text
from ..specs.model import ModelSpec
from ..specs.workload import FP32_STORAGE, Workload
from .collectives import Placement, all_gather_s, all_reduce_s, group_placement, p2p_s
from .compute import device, p2p_message_bytes
from .engine_p2p import p2p_exposed_s, p2p_overlapped
from .efficiency import HOST, NETWORK
from .engine_dp import flush_sync, sharded_schedule
from . import engine_projections, fp8_recipe
from .engine_split import engine_layer_split
from .flops import model_flops_per_token
from .layer import MEGATRON_ENGINES, CommPlacements, LayerCost, layer_cost
from .memory import (RankState, keeps_16bit_grads, main_grad_at_step_only, memory_parts,
                     reserved_bytes)
from .ops import ACT, GROUPED_GEMM_KERNEL, Shard, eager_norm, logits_bytes
from .pipeline_buffers import pipeline_buffer_bytes
from .dispatcher_buffers import dispatcher_buffer_bytes
from .engine_p2p import p2p_split
from .pipeline import bubble_s, combined_1f1b_unpaired, in_flight, tied_embedding_sync
from .stragglers import straggler_s, straggler_units
from .dp_tail import bucket_params, dense_layer_tensors, megatron_buckets
from .fsdp2_copies import fsdp2_copy_s
from .optimizer_step import grad_buffer_bytes_per_param, step_bytes_per_param
from .param_gather import GATHER_BYTES_16BIT, layer_gather_bytes, mean_gather_bytes

GiB = 2**30


@dataclass(frozen=True)
class Breakdown:
    """Named parts (seconds or bytes) and their total."""

    parts: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.parts.values())


@dataclass(frozen=True)
class CommAxis:
    axis: str  # tp, cp, ep, pp, dp; emb (tied embedding group, cost/pipeline.py)
    collective: str
    group_size: int
    tier: str  # scale-up, scale-out, none
    bytes_per_step: float  # per GPU, sent
    wire_s: float  # time on the wire per step (bottleneck rank)
    exposed_s: float  # the part not hidden by overlap


@dataclass(frozen=True)
class ChunkCost:
    """One virtual stage, one micro-batch (the simulator's input)."""

    index: int  # virtual stage id
    rank: int  # pipeline rank holding it
    layers: int
    fwd_s: float
    bwd_input_s: float
    bwd_weight_s: float
    act_bytes: float  # held from this chunk's forward to its backward
    p2p_bytes: float  # activation (or gradient) sent to the neighbouring stage
    p2p_s: float


@dataclass(frozen=True)
class Estimate:
    plan: Plan
    num_microbatches: int
    step_time: Breakdown  # seconds
    peak_candidates: dict  # pipeline rank -> memory Breakdown, for the ranks that can peak
    rank_memory: object  # rank -> memory Breakdown (bytes), computed on demand
    comm: list[CommAxis]
    chunk_inputs: tuple  # what `chunks` is built from, on demand (the search never asks)
    model_flops_per_step: float
    hw_flops_per_step: float
    tokens_per_step: int
    world_size: int
    peak_flops_per_gpu: float  # 16-bit dense datasheet peak (MFU denominator)
    capacity_bytes: float
    bottleneck_rank: int
    notes: list[str] = field(default_factory=list)
    # the engine keeps the model states in contiguous buffers the allocator does not
    # fragment (memory.memory_parts's contiguous_states; memory.refragment)
    contiguous_states: bool = False
    # the engine's schedule lets compute run while stage transfers are on the wire
    # (engine_p2p.p2p_overlapped); the event simulation sends them the same way
    overlaps_p2p: bool = False

    @cached_property
    def chunks(self) -> list[ChunkCost]:
        """One cost record per virtual stage, per micro-batch (the simulator's input)."""
        counts, rank_of, kinds, split, p2p_one, p2p_bytes = self.chunk_inputs

        sums: dict = {}  # chunks with the same layer counts cost the same: sum once

        def agg(cc):
            if cc not in sums:
                sums[cc] = tuple(sum(k * getattr(x, a) for k, x in zip(cc, kinds) if k)
                                 for a in ("fwd_s", "bwd_input_s", "bwd_weight_s", "saved_bytes"))
            return sums[cc]

        out = []
        for c, cc in enumerate(counts):
            f, bi, bw, act = agg(tuple(cc))
            out.append(ChunkCost(index=c, rank=rank_of[c], layers=split[c], fwd_s=f + p2p_one,
                                 bwd_input_s=bi + p2p_one, bwd_weight_s=bw, act_bytes=act,
                                 p2p_bytes=p2p_bytes, p2p_s=p2p_one))
        return out

    @property
    def step_time_s(self) -> float:
        return self.step_time.total

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.world_size

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation against the GPU's dense 16-bit peak (PaLM convention)."""
        return self.model_flops_per_step / (
            self.step_time_s * self.world_size * self.peak_flops_per_gpu)

    @property
    def hfu(self) -> float:
        return self.hw_flops_per_step / (
            self.step_time_s * self.world_size * self.peak_flops_per_gpu)

    @cached_property
    def memory(self) -> list[Breakdown]:
        """Memory per GPU of every pipeline rank (bytes)."""
        return [self.peak_candidates.get(r) or self.rank_memory(r)
                for r in range(self.plan.pp)]

    @property
    def peak_memory_rank(self) -> int:
        return max(self.peak_candidates, key=lambda r: (self.peak_candidates[r].total, -r))

    @property
    def peak_memory_bytes(self) -> float:
        return self.peak_candidates[self.peak_memory_rank].total

    @property
    def peak_reserved_bytes(self) -> float:
        """Peak as PyTorch reports it (reserved; the CUDA context excluded)."""
        return max(reserved_bytes(m.parts) for m in self.peak_candidates.values())

    @property
    def fits(self) -> bool:
        return self.peak_memory_bytes <= self.capacity_bytes

    @property
    def verdict(self) -> str:
        r = self.peak_memory_rank
        need = self.peak_memory_bytes / GiB
        where = f" on pipeline stage {r}" if self.plan.pp > 1 else ""
        word = "fits" if self.fits else "does not fit"
        return (f"{word}: needs {need:.1f} GiB per GPU{where}, the GPU has "
                f"{gib_text(self.capacity_bytes)} GiB")

    @property
    def bottleneck(self) -> str:
        """The largest part of the step after compute: why this plan is as fast as it is."""
        parts = {k: v for k, v in self.step_time.parts.items() if k != "compute_s"}
        k = max(parts, key=parts.get)
        share = parts[k] / self.step_time_s
        if share < 0.05:
            return "compute-bound (every overhead under 5% of the step)"
        return f"{k.removesuffix('_s').replace('_', ' ')} ({share:.0%} of the step)"


# the step's parts that run after the pipeline has drained, outside its schedule: the
# simulator (pipeline/from_cost.py) and the mixed-pool model (hetero.py) add them to the
# pipeline's own span
OUTSIDE_PIPELINE = ("dp_exposed_s", "fsdp_copy_s", "optimizer_s", "grad_buffer_s",
                    "overlap_slowdown_s", "straggler_s", "tied_embedding_s")


def placement_key(plan: Plan) -> tuple:
    """The Plan fields placements() reads: plans equal in these have the same placements."""
    return (plan.tp, plan.cp, plan.dp, plan.pp, plan.ep, plan.etp, plan.hsdp_shard,
            plan.order)


def placements(plan: Plan, cluster: Cluster) -> dict[str, Placement]:
    st = plan.axis_stride
    dom = cluster.domain_size
    out = {
        "tp": group_placement(cluster, (plan.tp, st("tp"))),
        "cp": group_placement(cluster, (plan.cp, st("cp"))),
        "dp": group_placement(cluster, (plan.cp, st("cp")), (plan.dp, st("dp"))),
        # expert groups fold over the dp*cp*tp block: etp innermost, then ep, then edp
        "etp": group_placement(cluster, (plan.etp, 1)),
        "ep": group_placement(cluster, (plan.ep, plan.etp)),
        "edp": group_placement(cluster, (plan.edp, plan.ep * plan.etp)),
    }
    if plan.hsdp_shard and plan.hsdp_shard < plan.dp * plan.cp:
        shard_dp = max(1, plan.hsdp_shard // plan.cp)
        out["dp_shard"] = group_placement(cluster, (plan.cp, st("cp")), (shard_dp, st("dp")))
        out["dp_replicate"] = group_placement(
            cluster, (plan.dp * plan.cp // plan.hsdp_shard, st("dp") * shard_dp))
    # a pipeline's sends cross the network when any two neighbouring stages sit in different
    # scale-up domains: its group spans more than one (a stride below the domain size does
    # not keep it inside one: pp 8 at stride 2 on 8-GPU nodes puts stages 4-7 on the next
    # node); the slowest hop paces every micro-batch through the pipeline
    spans = group_placement(cluster, (plan.pp, st("pp"))).nodes > 1
    out["pp_across_nodes"] = Placement(2, 1 if st("pp") >= dom or spans else 2)
    return out


def _dp_comm(plan: Plan, cluster: Cluster, pl: dict, params: float, expert_params: float,
             m: int, fwd_window: float, bwd_window: float, engine: str = "",
             precision: str = "bf16", grad_bytes: float = 4.0,
             tail_params: float = 0.0, gather_bytes: float = 2.0,
             expert_gather_bytes: float = 2.0,
             buckets: tuple[tuple[float, float], ...] = ()) -> tuple[float, float, float]:
    """(wire, exposed, bytes sent) of one step's data-parallel communication on a rank.
    ``grad_bytes``: bytes per gradient element reduced (Workload.grad_buffer_bytes: 4 for an
    fp32 gradient buffer, 2 when the engine reduces in the 16-bit buffer, e.g. Megatron-Core's
    DistributedDataParallelConfig.grad_reduce_in_fp32=False: the reduce-scatter / all-reduce
    runs on the bf16 main_grad buffer: megatron/core/distributed/param_and_grad_buffer.py
    group_params_for_buffers, "grad_dtype: gradient reduction dtype (torch.float if
    grad_reduce_in_fp32, else param.dtype)", NVIDIA/Megatron-LM d98e8a6).
    ``tail_params``: parameters in the last bucket, whose reduction no overlap hides
    (dp_tail.py). ``gather_bytes`` / ``expert_gather_bytes``: bytes per parameter of the
    weight all-gather (param_gather.py: 2, or 1 for FP8-gathered weights). ``buckets``: the
    collectives the rank's (non-expert) parameters are reduced and gathered in, one per bucket
    (dp_tail.megatron_buckets), as (share of ``params``, gather bytes per parameter); each
    pays the collective's fixed latency. Empty: one call of all of them."""
    grad = grad_bytes
    shard_pl = pl.get("dp_shard", pl["dp"])
    n_dp = plan.dp * plan.cp
    sync = flush_sync(engine, plan, precision)
    if sync is not None:  # reduced after the pipeline flush: nothing hides it (engine_dp.py)
        red = all_reduce_s if sync.reduce == "all-reduce" else all_gather_s
        wire = (red(cluster, shard_pl, sync.reduce_bytes_per_param * params)
                + red(cluster, pl["edp"], sync.reduce_bytes_per_param * expert_params))
        if sync.gather_bytes_per_param:
            wire += (all_gather_s(cluster, shard_pl, sync.gather_bytes_per_param * params)
                     + all_gather_s(cluster, pl["edp"],
                                    sync.gather_bytes_per_param * expert_params))
        ring = 2.0 if sync.reduce == "all-reduce" else 1.0
        sent = ((ring * sync.reduce_bytes_per_param + sync.gather_bytes_per_param)
                * (params + expert_params) * (n_dp - 1) / max(n_dp, 1))
        return wire, wire, sent

    def coll(place: Placement, p: float, gb: float = gather_bytes) -> tuple[float, float, float]:
        """(reduce, gather, allreduce-replicate) times for p parameters on ``place``."""
        if plan.zero == 0:
            return all_reduce_s(cluster, place, grad * p), 0.0, 0.0
        rs = all_gather_s(cluster, place, grad * p)
        ag = all_gather_s(cluster, place, gb * p)
        return rs, ag, 0.0

    if buckets:  # one call per bucket; the walk's buckets are mostly of a few sizes
        per = [(k, coll(shard_pl, params * share, gb))
               for (share, gb), k in Counter(buckets).items()]
        rs_n, ag_n = sum(k * x[0] for k, x in per), sum(k * x[1] for k, x in per)
    else:
        rs_n, ag_n, _ = coll(shard_pl, params)
    # the last bucket's reduction and the first bucket's gather wait for no compute to hide
    # behind (dp_tail.py); never more than the whole collective
    tail_r, tail_a, _ = coll(shard_pl, min(tail_params, params)) if tail_params else (0, 0, 0)
    rs_e, ag_e, _ = coll(pl["edp"], expert_params, expert_gather_bytes)
    rs, ag = rs_n + rs_e, ag_n + ag_e
    rep = 0.0
    if "dp_replicate" in pl:  # HSDP: all-reduce the shard across replicas
        rep = all_reduce_s(cluster, pl["dp_replicate"], grad * params / plan.hsdp_shard)
    gathered = (gather_bytes * params + expert_gather_bytes * expert_params if plan.zero
                else grad * (params + expert_params))
    sent = (grad * (params + expert_params) + gathered) * (n_dp - 1) / max(n_dp, 1)
    if plan.zero <= 1:
        wire = rs + ag + rep
        hide_r = min(rs - min(tail_r, rs_n), bwd_window) if plan.overlap_grad_reduce else 0.0
        hide_a = min(ag - min(tail_a, ag_n), fwd_window) if plan.overlap_param_gather else 0.0
        return wire, wire - hide_r - hide_a, sent
    # zero 2 / 3: the engine's own schedule across the step's micro-batches (engine_dp.py
    # sharded_schedule, with its sources); without pipelining, zero 3 gathers before every
    # forward and backward and reduce-scatters after every backward in every engine read
    sch = sharded_schedule(engine, plan.zero, m, plan.pp)
    # the backward's collectives share its window: a gather and the reduce-scatter beside one
    # backward, or only one of them
    both = min(sch.backward_gathers, sch.reduces if sch.reduce_hidden else 0)
    gather_only = sch.backward_gathers - both
    reduce_only = (sch.reduces if sch.reduce_hidden else 0) - both
    hide_reduce = plan.zero == 3 or plan.overlap_grad_reduce
    x_fwd = max(0.0, ag - fwd_window)
    exposed = (sch.forward_gathers * x_fwd + both * max(0.0, ag + rs - bwd_window)
               + gather_only * max(0.0, ag - bwd_window))
    if reduce_only:
        exposed += (reduce_only * max(0.0, rs - bwd_window) if hide_reduce
                    else reduce_only * rs)
    if not sch.reduce_hidden:  # after the last backward: nothing left to hide it behind
        exposed += sch.reduces * rs
    # the step's first gather and last reduce-scatter expose at least one unit each
    if sch.forward_gathers:
        exposed += max(0.0, min(tail_a, ag_n) - x_fwd)
    if sch.reduce_hidden and (hide_reduce or both):
        x_last = (max(0.0, ag + rs - bwd_window) if both
                  else max(0.0, rs - bwd_window))
        exposed += max(0.0, min(tail_r, rs_n) - x_last)
    exposed += sch.replica_reduces * rep
    wire = sch.gathers * ag + sch.reduces * rs + sch.replica_reduces * rep
    sent = ((sch.reduces * grad * (params + expert_params) + sch.gathers * gathered)
            * (n_dp - 1) / max(n_dp, 1))
    return wire, exposed, sent


@lru_cache(maxsize=4096)
def _chunk_counts(model: ModelSpec, split: tuple[int, ...], recompute_layers: int = 0
                  ) -> list[tuple[int, ...]]:
    """(dense layers, MoE layers, has embedding, has output layer, recomputed dense layers,
    recomputed MoE layers) of every chunk. With partial recomputation (``recompute_layers``
    N > 0) the first N layers of each chunk are the recomputed ones (Megatron-LM's block
    method: layer l of a chunk is checkpointed when l < recompute_num_layers,
    TransformerBlock._checkpointed_forward); the first two counts hold the rest."""
    out, start = [], 0
    for c, n in enumerate(split):
        k = min(recompute_layers, n)
        rc_moe = _moe_layers_between(model, start, start + k)
        n_moe = _moe_layers_between(model, start + k, start + n)
        start += n
        out.append((n - k - n_moe, n_moe, int(c == 0), int(c == len(split) - 1),
                    k - rc_moe, rc_moe))
    return out


@lru_cache(maxsize=4096)
def _placement_of_chunks(pp: int, vpp: int, v_shape: bool) -> tuple[dict, list[list[int]]]:
    """Pipeline rank of each chunk, and each rank's chunks (see Plan.chunk_of)."""
    plan = Plan(pp=pp, vpp=vpp, schedule="zb_v" if v_shape else "")
    rank_of = {plan.chunk_of(r, j): r for r in range(pp) for j in range(vpp)}
    per_rank: list[list[int]] = [[] for _ in range(pp)]
    for c in range(pp * vpp):
        per_rank[rank_of[c]].append(c)
    return rank_of, per_rank


def _moe_layers_between(model: ModelSpec, start: int, end: int) -> int:
    if not model.is_moe:
        return 0
    return _moe_prefix(model)[end] - _moe_prefix(model)[start]


@lru_cache(maxsize=256)
def _moe_prefix(model: ModelSpec) -> tuple[int, ...]:
    """Number of MoE layers among the first i layers, for i = 0..layers."""
    out = [0]
    for i in range(model.layers):
        out.append(out[-1] + model.layer_is_moe(i))
    return tuple(out)


def training_shard(workload: Workload, cluster: Cluster, micro_batch: int, tp: int, cp: int,
                   sp: bool, ep: int, etp: int) -> Shard:
    """The slice of a layer one rank computes in a training step, with the engine's kernels
    (Megatron/NeMo fuse the FP8 casts and run per-expert GEMMs; torchtitan's experts run
    torch._grouped_mm, ops.GROUPED_GEMM_KERNEL; q/k/v and gate/up fused or one GEMM
    each, engine_projections) and the FP8 recipe the step runs: the one rule estimate()
    and the search's floors (search/bound.py) both use."""
    fp8 = workload.precision == "fp8"
    megatron = workload.framework in MEGATRON_ENGINES
    return Shard(workload.seq_len, micro_batch, tp, cp, sp, ep, etp, fp8, fp8 and megatron,
                 megatron, fp8_recipe.resolve(workload.precision, workload.fp8_recipe,
                                              workload.framework, cluster.gpu.generation),
                 GROUPED_GEMM_KERNEL.get(workload.framework, ""), workload.cuda_graph,
                 engine_projections.projections(workload.framework))


def estimate(model: ModelSpec, cluster: Cluster, workload: Workload, plan: Plan) -> Estimate:
    """Predict one training step of ``plan``. Raises InputError if the plan is invalid."""
    plan.validate(model, workload, cluster.num_gpus)
    m = plan.num_microbatches(workload)
    shard = training_shard(workload, cluster, plan.micro_batch, plan.tp, plan.cp,
                           bool(plan.sequence_parallel), plan.ep, plan.etp)
    pl = placements(plan, cluster)
    places = CommPlacements(pl["tp"], pl["cp"], pl["ep"], pl["etp"])

    # partial recomputation: the layers it does not recompute run as with none
    rc_rest = "none" if plan.recompute_layers else plan.recompute

    def cost(kind: str, recompute: str = rc_rest) -> LayerCost:
        return layer_cost(model, cluster, kind, shard, recompute, places,
                          plan.tp_comm_overlap, workload.precision, plan.cp_kind,
                          workload.framework, plan.moe_dispatcher,
                          plan.ep_comm_overlap or plan.schedule == "dualpipev",
                          plan.recompute_modules if recompute == "selective" else "",
                          workload.attention_kernel, workload.norm_kernel,
                          workload.attention_full_ac)

    dense = cost("dense") if model.num_dense_layers else None
    moe = cost("moe") if model.is_moe else None
    emb, head = cost("embedding"), cost("head")
    # ---- chunks: counts of (dense, moe, embedding, head, recomputed dense, recomputed moe)
    # parts in each (the last two only with partial recomputation) ----------------------------
    kinds = (dense or moe, moe or dense, emb, head)
    if plan.recompute_layers:
        dense_rc = cost("dense", "full") if model.num_dense_layers else None
        moe_rc = cost("moe", "full") if model.is_moe else None
        kinds += (dense_rc or moe_rc, moe_rc or dense_rc)
    else:
        kinds += kinds[:2]  # counts 0: never weighed
    split = (engine_layer_split(workload.framework, model.layers, plan.pp, plan.vpp)
             or plan.layer_split(model))
    p2p_bytes = p2p_message_bytes(model.hidden, shard, workload.precision, workload.framework)
    p2p_one = p2p_s(cluster, pl["pp_across_nodes"].nodes > 1, p2p_bytes) if plan.pp > 1 else 0.0
    chunk_counts = _chunk_counts(model, tuple(split), plan.recompute_layers)

    memo: dict = {}

    def agg(counts, attr: str) -> float:
        key = (counts, attr)
        v = memo.get(key)
        if v is None:
            v = memo[key] = sum(k * getattr(x, attr) for k, x in zip(counts, kinds) if k)
        return v

    rank_of, per_rank = _placement_of_chunks(plan.pp, plan.vpp, plan.schedule in V_SCHEDULES)
    rank_counts = [tuple(sum(chunk_counts[c][i] for c in cs) for i in range(6)) for cs in per_rank]
    nv = plan.vpp
    # stage-boundary transfers: in line, or hidden behind the next chunk (engine_p2p.py)
    fx = [p2p_exposed_s(workload.framework, plan.schedule, nv, p2p_one, agg(rc, "fwd_s") / nv)
          for rc in rank_counts]
    bx = [p2p_exposed_s(workload.framework, plan.schedule, nv, p2p_one,
                        agg(rc, "bwd_input_s") / nv)
          for rc in rank_counts]
    f = [agg(rc, "fwd_s") + nv * x for rc, x in zip(rank_counts, fx)]
    b = [agg(rc, "bwd_input_s") + nv * x for rc, x in zip(rank_counts, bx)]
    w = [agg(rc, "bwd_weight_s") for rc in rank_counts]
    t = [fi + bi + wi for fi, bi, wi in zip(f, b, w)]
    r_star = max(range(plan.pp), key=lambda r: t[r])
    bubble = bubble_s(plan, m, f, b, w)
    # ---- data parallel ------------------------------------------------------------------
    dp_wire = dp_exposed = dp_bytes = 0.0
    rank_params = [agg(rc, "params") for rc in rank_counts]
    if model.tied_embeddings:
        # a chunk holding both ends (pp = 1) stores the shared matrix once; a V schedule's
        # rank 0 holds chunk 0 and the last chunk as two modules, each with its own copy
        # (runtime/model.py Transformer, pipeline.py TiedEmbedding.copies: 2 under V), so
        # it keeps both, as the last rank of any other schedule keeps its one copy
        rank_params = [p - model.vocab * model.hidden / shard.tp
                       * sum(1 for c in cs if chunk_counts[c][2] and chunk_counts[c][3])
                       for p, cs in zip(rank_params, per_rank)]
    rank_eparams = [agg(rc, "expert_params") for rc in rank_counts]
    rs = rank_counts[r_star]
    # bytes per parameter of the rank's weight all-gather: FP8 for its layers' weights where the
    # run gathers FP8 weights, 16-bit for the embedding and output layer (param_gather.py)
    layer_p = sum(rs[i] * kinds[i].params for i in (0, 1, 4, 5) if rs[i])
    gather_b = mean_gather_bytes(workload.fp8_param_gather, layer_p,
                                 max(0.0, rank_params[r_star] - layer_p))
    expert_gather_b = layer_gather_bytes(workload.fp8_param_gather)
    if plan.dp * plan.cp > 1:
        fwd_win = agg(rs, "fwd_compute_s")
        # the backward's collectives run beside the recomputed forward too: an FSDP unit's
        # backward gather is issued before its recomputation, which it serves (Megatron-FSDP
        # _pre_forward_param_unshard in PRE_BACKWARD state, lazy release; FSDP2 pre_backward
        # unshards before the checkpointed forward replays: engine_dp.py), and a reduction
        # issued after a layer's backward proceeds while the next layers recompute and
        # backpropagate
        bwd_win = (agg(rs, "bwd_input_compute_s") + agg(rs, "bwd_weight_compute_s")
                   + agg(rs, "recompute_s"))
        n_layers = sum(rs[i] for i in (0, 1, 4, 5)) or 1
        megatron = workload.framework in MEGATRON_ENGINES
        # the rank's embedding (first parameter of stage 0) ends the last bucket whole, and
        # each bucket is one collective (dp_tail.py)
        emb_p = kinds[2].params if rs[2] else 0.0
        bucket_size = workload.ddp_bucket_size or None
        tail = bucket_params(megatron, plan.zero, plan.dp * plan.cp, rank_params[r_star] / nv,
                             rank_params[r_star] / n_layers, workload.grad_buffer_bytes,
                             emb_p, bucket_size)
        buckets: tuple = ()
        if megatron and plan.overlap_grad_reduce:  # no overlap: bucket_size None, one bucket
            vocab = tuple([emb_p] if rs[2] else []) + tuple(
                [kinds[3].params] if rs[3] and nv == 1 else [])
            walk = megatron_buckets(
                plan.dp * plan.cp, n_layers, layer_p / n_layers, vocab, nv,
                workload.fp8_param_gather, bucket_size,
                None if model.is_moe else dense_layer_tensors(model, plan.tp))
            # shares of the rank's parameters (the walk's tensor list leaves out a few small
            # ones: the final norm, MoE routers), gathered at each buffer's bytes
            total = sum(x for x, _ in walk) or 1.0
            gb_of = {"fp8": layer_gather_bytes(workload.fp8_param_gather),
                     "16bit": GATHER_BYTES_16BIT, "chunk": gather_b}
            buckets = tuple((x / total, gb_of[kind]) for x, kind in walk)
        dp_wire, dp_exposed, dp_bytes = _dp_comm(
            plan, cluster, pl, rank_params[r_star], rank_eparams[r_star], m, fwd_win, bwd_win,
            workload.framework, workload.precision, workload.grad_buffer_bytes, tail,
            gather_b, expert_gather_b, buckets)
    # FSDP2's copy-out after each all-gather and copy-in before each reduce-scatter run on
    # the compute stream (fsdp2_copies.py)
    fsdp_copy = (fsdp2_copy_s(workload.framework, plan.zero, m,
                              rank_params[r_star] + rank_eparams[r_star],
                              workload.grad_buffer_bytes,
                              device(cluster.gpu, workload.precision).hbm_bytes_per_s,
                              (gather_b * rank_params[r_star] + expert_gather_b * rank_eparams[r_star])
                              / max(rank_params[r_star] + rank_eparams[r_star], 1.0), plan.pp)
                 if plan.dp * plan.cp > 1 else 0.0)
    # ---- optimizer step -----------------------------------------------------------------
    sh = plan.fsdp_shard if plan.zero >= 1 else 1
    she = plan.edp if plan.zero >= 1 else 1
    opt_params = max(rp / sh + re / she for rp, re in zip(rank_params, rank_eparams))
    hbm = device(cluster.gpu, workload.precision).hbm_bytes_per_s
    if plan.offload_optimizer:
        opt_s = (opt_params / HOST.cpu_adam_params_per_s
                 + opt_params * (4 + 2) / HOST.pcie_bytes_per_s)
    else:
        # the engine's optimizer kernels: gradient norm, Adam, master -> model copy
        # (optimizer_step.py)
        opt_s = opt_params * step_bytes_per_param(
            workload.framework, workload.precision, workload.grad_buffer_bytes) / hbm
    # zeroing, NaN-checking and pre-scaling the whole local gradient buffer every step
    # (Megatron-Core's DDP; optimizer_step.py)
    grad_buffer = (max(rp + re for rp, re in zip(rank_params, rank_eparams))
                   * grad_buffer_bytes_per_param(workload.framework, plan.dp * plan.cp,
                                                 workload.grad_buffer_bytes) / hbm)
    # ---- tied embedding split over pipeline ranks: its two copies' gradients summed -----
    tied_bytes, tied_s, tied_place = tied_embedding_sync(model, plan, cluster,
                                                         workload.grad_buffer_bytes)
    # ---- step breakdown -----------------------------------------------------------------
    p2p_exposed = nv * (fx[r_star] + bx[r_star])
    # compute slowed beside hidden communication (efficiency.py): the layers' own (TP overlap
    # kernels, CP ring, EP all-to-all; LayerCost.overlap_slowdown_s), then the NCCL pipeline
    # sends and data-parallel collectives
    nccl_hidden = (dp_wire - dp_exposed) + m * (2 * nv * p2p_one - p2p_exposed)
    # Megatron's combined 1F1B pairs a forward with a backward; the micro-batches that run
    # alone (pipeline.combined_1f1b_unpaired) leave their all-to-alls exposed
    ep_unpaired = 0.0
    if (plan.ep_comm_overlap and workload.framework in MEGATRON_ENGINES
            and plan.schedule != "dualpipev"):
        ep_unpaired = (combined_1f1b_unpaired(plan, m, r_star)
                       * (agg(rs, "ep_wire_s") - agg(rs, "ep_exposed_s")))
        nccl_hidden -= ep_unpaired
    parts = {
        "compute_s": m * (agg(rs, "fwd_compute_s") + agg(rs, "bwd_input_compute_s")
                          + agg(rs, "bwd_weight_compute_s")),
        "recompute_s": m * agg(rs, "recompute_s"),
        "tp_exposed_s": m * agg(rs, "tp_exposed_s"),
        "cp_exposed_s": m * agg(rs, "cp_exposed_s"),
        "ep_exposed_s": m * agg(rs, "ep_exposed_s") + ep_unpaired,
        "pp_p2p_s": m * p2p_exposed,
        "pp_bubble_s": bubble,
        "dp_exposed_s": dp_exposed,
        "fsdp_copy_s": fsdp_copy,
        "optimizer_s": opt_s,
        "grad_buffer_s": grad_buffer,
        "tied_embedding_s": tied_s,
        "overlap_slowdown_s": (m * agg(rs, "overlap_slowdown_s")
                               + NETWORK.collective_contention * nccl_hidden),
    }
    # the step waits for the slowest data-parallel replica of every stage (stragglers.py)
    parts["straggler_s"] = straggler_s(parts, straggler_units(plan.dp, plan.pp))
    # ---- communication report -----------------------------------------------------------
    def axis(name: str, coll: str, size: int, place: Placement, nbytes: float, wire: float,
             exposed: float) -> CommAxis:
        return CommAxis(name, coll, size, place.tier, nbytes, wire, exposed)

    tp_bytes = m * sum(k for k, x in zip(rs, kinds) if x.tp_wire_s) * 2 * ACT * shard.tokens \
        * model.hidden * (plan.tp - 1) / plan.tp
    comm = [
        axis("tp", "all-gather + reduce-scatter" if plan.sequence_parallel else "all-reduce",
             plan.tp, pl["tp"], tp_bytes, m * agg(rs, "tp_wire_s"),
             parts["tp_exposed_s"]),
        axis("cp", "ring K/V exchange" if plan.cp_kind == "ring" else "all-to-all", plan.cp,
             pl["cp"], 0.0, m * agg(rs, "cp_wire_s"), parts["cp_exposed_s"]),
        axis("ep", "all-to-all dispatch + combine", plan.ep, pl["ep"], 0.0,
             m * agg(rs, "ep_wire_s"), parts["ep_exposed_s"]),
        axis("pp", "send/recv", plan.pp, pl["pp_across_nodes"] if plan.pp > 1 else Placement(1, 1),
             m * 2 * nv * p2p_bytes if plan.pp > 1 else 0.0, m * 2 * nv * p2p_one,
             parts["pp_p2p_s"]),
        axis("dp", {0: "all-reduce"}.get(plan.zero, "reduce-scatter + all-gather"),
             plan.dp * plan.cp, pl["dp"], dp_bytes, dp_wire, dp_exposed),
    ]
    if tied_bytes:
        # all-reduce over two ranks: each sends and receives the buffer once (ring, n = 2)
        comm.append(axis("emb", "all-reduce (tied embedding)", 2, tied_place, tied_bytes,
                         tied_s, tied_s))
    # ---- memory -------------------------------------------------------------------------
    logits = logits_bytes(model, shard, workload.framework, workload.compiled_loss, m)

    memory_of: dict = {}  # pipeline rank -> its Breakdown, computed once
    dispatcher_bytes = (dispatcher_buffer_bytes(model.hidden, plan.moe_dispatcher, plan.ep,
                                                plan.etp, cluster.scaleup_domain)
                        if model.is_moe else 0.0)

    contiguous = plan.zero <= 1 and workload.framework in MEGATRON_ENGINES

    def rank_memory(r: int) -> Breakdown:
        if r in memory_of:
            return memory_of[r]
        rc = rank_counts[r]
        present = [x for k, x in zip(rc, kinds) if k]
        working = max(x.working_bytes for x in present)
        if rc[3]:
            working = max(working, logits)
        state = RankState(
            params=rank_params[r], expert_params=rank_eparams[r],
            largest_layer_params=max(x.params + x.expert_params for x in present),
            act_per_microbatch_bytes=agg(rc, "saved_bytes"),
            in_flight=in_flight(plan, m, r), working_bytes=working)
        memory_of[r] = Breakdown(memory_parts(
            plan, state, workload.master_and_state_bytes, m,
            contiguous, cluster.gpu.memory_bytes,
            fp16_grads=keeps_16bit_grads(workload.precision, workload.framework),
            step_main_grad=main_grad_at_step_only(workload.framework),
            fp32_weights=workload.precision in FP32_STORAGE,
            grad_buffer_bytes=workload.grad_buffer_bytes, keeps_master=workload.keeps_master,
            pipeline_buffer_bytes=pipeline_buffer_bytes(
                workload.framework, plan.pp, r, state.in_flight, p2p_bytes,
                p2p_split(workload.framework, plan.tp, plan.sequence_parallel) > 1,
                # the first layer keeps the stage input: as full recomputation's
                # checkpoint, or as a fused norm's saved input (pipeline_buffers.py)
                input_kept_by_layer=(plan.recompute == "full" or not eager_norm(
                    workload.framework, workload.norm_kernel))),
            dispatcher_buffer_bytes=dispatcher_bytes))
        return memory_of[r]

    # ranks holding the same layers differ only in micro-batches in flight: the one with the
    # most is the fullest of its group, so only those are candidates for the peak
    # (the first and last ranks are candidates of their own: pipeline_buffers.py gives them
    # fewer stage-boundary buffers than the ranks between)
    fullest: dict = {}
    for r in range(plan.pp):
        rc = (rank_counts[r], r == 0, r == plan.pp - 1)
        if rc not in fullest or in_flight(plan, m, r) > in_flight(plan, m, fullest[rc]):
            fullest[rc] = r
    candidates = {r: rank_memory(r) for r in fullest.values()}
    tokens = workload.tokens_per_step
    mf = model_flops_per_token(model, workload.seq_len) * tokens
    hw = sum(agg(rc, "hw_flops") for rc in rank_counts) * m * plan.tp * plan.cp * plan.dp
    chunk_inputs = (chunk_counts, rank_of, kinds, tuple(split), p2p_one, p2p_bytes)
    return Estimate(
        plan=plan, num_microbatches=m, step_time=Breakdown(parts), peak_candidates=candidates,
        rank_memory=rank_memory, comm=comm,
        chunk_inputs=chunk_inputs, model_flops_per_step=mf, hw_flops_per_step=hw, tokens_per_step=tokens,
        world_size=cluster.num_gpus, peak_flops_per_gpu=cluster.gpu.flops("bf16"),
        capacity_bytes=cluster.gpu.memory_bytes, bottleneck_rank=r_star,
        contiguous_states=contiguous,
        overlaps_p2p=p2p_overlapped(workload.framework, plan.schedule, plan.vpp))
