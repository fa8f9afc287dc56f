"""Closed forms for the pipeline: bubble time and micro-batches in flight per rank.

Per micro-batch and rank r: F_r forward, B_r input-gradient backward, W_r weight-gradient
backward (B_r + W_r is the full backward). For equal stages:
- GPipe, 1F1B: bubble (p-1)(F+B+W) (Narayanan et al. 2021 sec. 2.2; Huang et al. 2019).
- Interleaved 1F1B / looped BFS with v chunks per rank: bubble divided by v.
- ZB-H1: (p-1)(F+B-W); interleaved ZB divides it by v; ZB-V: (p-1)(F+B-2W) with F, B, W
  per chunk (Qi et al. 2023, table 1 and sec. 4).
- DualPipeV: (p/2-1)(F&B+B-3W) per chunk (DeepSeek-V3 report, table 2), F&B ~ F+B.
Unequal stages: the slowest rank sets the steady state, the others add their fill/drain
time once, i.e. m*t_max + (sum_r t_r - t_max) for 1F1B, divided by v when interleaved.
The event simulator (meshplan.pipeline) replaces these for the top candidates.
"""

from __future__ import annotations

from ..pipeline.check import promised_in_flight  # the schedules' own rule, one place
from ..plan import Plan
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from .collectives import Placement, all_reduce_s, group_placement


def bubble_s(plan: Plan, m: int, f: list[float], b: list[float], w: list[float]) -> float:
    """Pipeline bubble of one step; f, b, w are per-rank per-micro-batch seconds."""
    p, v = plan.pp, plan.vpp
    if p == 1:
        return 0.0
    t = [fi + bi + wi for fi, bi, wi in zip(f, b, w)]
    t_max = max(t)
    fill = sum(t) - t_max  # (p-1) * t for equal stages
    F, B, W = sum(f) / p, sum(b) / p, sum(w) / p
    s = plan.schedule
    if s in ("gpipe", "1f1b"):
        return fill
    if s in ("interleaved_1f1b", "looped_bfs"):
        return fill / v
    if s == "zb_h1":
        return fill * max(0.0, F + B - W) / (F + B + W)
    if s == "interleaved_zb":
        return fill * max(0.0, F + B - W) / (F + B + W) / v
    # V schedules: each rank holds two chunks, so per-chunk times are half the rank's
    if s == "zb_v":
        return fill * max(0.0, F + B - 2 * W) / (F + B + W) / 2
    if s == "dualpipev":
        return (p / 2 - 1) / (p - 1) * fill * max(0.0, F + 2 * B - 3 * W) / (F + B + W) / 2 \
            if p > 2 else 0.0
    raise AssertionError(s)


def in_flight(plan: Plan, m: int, rank: int) -> float:
    """Micro-batches whose activations rank ``rank`` holds at its peak, in units of one
    micro-batch through all of the rank's layers: the chunk-micro-batches the schedule's own
    action lists hold on that rank (pipeline/check.promised_in_flight, which
    tests/test_schedules.py checks against the lists the simulator and the runtime run),
    divided by the chunks per rank. On rank 0 of interleaved 1F1B with m a multiple of pp
    that is Korthikanti et al. 2022's p * (1 + (p-1)/(p v)) (sec. 4.2.3); the later ranks
    hold (v-1) rounds + 2 (p-1-r) + 1 chunks, not (p-r)/p of it, and a round is
    m // max(1, m // p) micro-batches, not always p (torch's flexible interleaving, and
    Megatron-LM with export/megatron.py's --microbatch-group-size-per-virtual-pipeline-stage).
    ZB-H1 and interleaved ZB hold the first rank's peak on every rank (Qi et al. 2023)."""
    if plan.pp == 1:
        return 1.0
    return promised_in_flight(plan.schedule, plan.pp, plan.vpp, m, rank) / plan.vpp


def combined_1f1b_unpaired(plan: Plan, m: int, rank: int) -> float:
    """Micro-batches (in passes through all of ``rank``'s layers) whose forward runs with no
    backward beside it, and as many whose backward runs alone, under Megatron-Core's combined
    1F1B (--overlap-moe-expert-parallel-comm): there the expert all-to-alls have no other
    micro-batch's compute to hide under. megatron-core 0.16.1 pipeline_parallel/
    combined_1f1b.py: without pipelining "the forward step for the first microbatch is
    executed alone" and so is the backward of the last; with interleaving, schedules.py
    get_pp_rank_microbatches gives rank r (pp - r - 1) * 2 + (vpp - 1) * group warm-up
    chunk forwards (group: microbatch_group_size_per_vp_stage, default pp) "+ 1" with this
    overlap, and as many cool-down backwards; a chunk holds 1 / vpp of the rank's layers.
    (Megatron refuses the overlap with pp > 1 and no interleaving; such a plan is given the
    non-interleaved warm-up, pp - r - 1, plus the same one.)"""
    p, v = plan.pp, plan.vpp
    if p == 1:
        return min(1.0, m)
    warm = (p - rank - 1) * 2 + (v - 1) * p + 1 if v > 1 else p - rank
    return min(warm, m * v) / v


def tied_embedding_group(plan: Plan, cluster: Cluster) -> Placement:
    """Where the embedding group sits: pipeline rank 0 (the embedding) and the rank holding
    the last chunk (Plan.output_rank), one pipeline group's two ends."""
    return group_placement(cluster, (2, plan.output_rank() * plan.axis_stride("pp")))


def tied_embedding_sync(model: ModelSpec, plan: Plan, cluster: Cluster,
                        grad_bytes: float) -> tuple[float, float, Placement | None]:
    """(bytes, seconds, the group's placement) of one step's all-reduce that keeps the two
    copies of a tied embedding equal when the embedding and the output layer sit on different
    pipeline ranks; (0, 0, None) when the model is untied, pp is 1 or a V schedule puts both
    on rank 0.

    Megatron-Core: the last stage holds its own copy of the word embedding as the output
    layer (LanguageModule.setup_embeddings_and_output_layer), and finalize_model_grads.py
    _allreduce_word_embedding_grads all-reduces the shared weight's gradient over the
    embedding group (parallel_state: the first and last rank of each pipeline group) after
    the pipeline's backward and before the optimizer step, with nothing to overlap it: all of
    it is exposed. The whole gradient of the rank's vocab-parallel shard, vocab x hidden /
    tp elements (a Megatron-FSDP gradient is unsharded for it, _unshard_if_dtensor), at
    ``grad_bytes`` per element (the main_grad buffer: Workload.grad_buffer_bytes). The last
    rank's copy itself (weights, gradient, optimizer states) is already charged: its head
    holds vocab x hidden / tp parameters, and only a chunk holding both ends (pp = 1) stores
    the matrix once (step.py; a V schedule's rank 0 holds two chunks, two copies).
    DeepSpeed's pipeline engine does the same for tied layers
    (PipelineEngine._exec_reduce_tied_grads); torchtitan refuses the layout (engines.py)."""
    if not model.tied_embeddings or plan.pp == 1 or plan.output_rank() == 0:
        return 0.0, 0.0, None
    nbytes = grad_bytes * model.vocab * model.hidden / plan.tp
    place = tied_embedding_group(plan, cluster)
    return nbytes, all_reduce_s(cluster, place, nbytes), place
