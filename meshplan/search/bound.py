"""Lower bounds on the step time of parts of the plan space, for branch and bound.

The search (search.py) orders its (degree point, micro-batch) points by a cheap lower bound
and skips every part of the space whose bound is slower than the k-th best step time found
so far. The bounds are theorems about the closed forms of meshplan.cost; their conditions
are stated here, and tests/test_search_bound.py checks each against estimate().

Notation (cost/step.py). For pipeline rank r and one micro-batch, f_r, b_r and w_r are the
forward, input-gradient and weight-gradient times of the rank's layers (LayerCost.fwd_s,
.bwd_input_s, .bwd_weight_s summed over its chunks), f_r and b_r each with the rank's
pipeline sends added (vpp * p2p); t_r = f_r + b_r + w_r. estimate() writes the step as

    step = m * t_{r*} + bubble(f, b, w) + dp_exposed(r*) + optimizer + overlap_slowdown(r*)

with r* = argmax_r t_r: its parts compute, recompute, tp/cp/ep exposed and pp_p2p sum to
m * t_{r*}; the bubble's closed forms are clamped at 0, the optimizer step is >= 0, and
overlap_slowdown = m * slowdown(r*) + collective_contention * (the hidden pipeline sends and
the hidden part of dp) >= m * slowdown(r*) + collective_contention * (the hidden part of dp),
slowdown being LayerCost.overlap_slowdown_s summed over the rank's layers (its TP overlap at
overlap_contention, the rest of its hidden communication at collective_contention).

Lemma R (recomputation only adds). For every layer kind, LayerCost.fwd_s, .bwd_weight_s,
the compute windows (.fwd_compute_s, .bwd_*_compute_s) and the parameters do not depend on
the recomputation setting, and .bwd_input_s and .overlap_slowdown_s (the TP transfers hidden
behind compute and the others, each at its own contention share) are nondecreasing along
none -> selective -> full (space.RECOMPUTE_ORDER). Proof (cost/layer.py): the recomputed forward (recompute_s,
0 without recomputation) is charged to the input-gradient pass; the forward pass's exposed
tp/ep communication is one pass of it whatever the number of passes, the cp forward
exposure does not depend on it, and the other passes' exposures grow with the number of
passes (2, or 3 under full recomputation), as do the tp and cp transfers hidden behind
compute. Tested on random shards.

Lemma P (the closed-form bubbles grow with b). At fixed f and w, cost/pipeline.bubble_s is
nondecreasing in every b_r: fill = sum(t) - max(t) is the sum of the p-1 smallest t_r, each
nondecreasing; the zero-bubble factors (F+B-W)/(F+B+W), (F+B-2W)/(F+B+W) and
(F+2B-3W)/(F+B+W) have derivatives 2W, 3W and F+5W (over (F+B+W)^2) in B, all >= 0, and
are clamped at 0; a product of nonnegative nondecreasing factors is nondecreasing.

Lemma E (experts shape only the MoE layer). The dense layer, the embedding and the output
layer cost the same whatever ep and etp are (cost/ops.py gives them no expert all-to-all
and no etp buffer, the only places ep and etp enter cost/layer.py). So the bounds compute
them once per (tp, cp, micro-batch, recomputation). Tested on random shards.

Lemma Z (the ZeRO ladder only adds exposure). With both overlap switches on, the
data-parallel time cost/step._dp_comm leaves exposed is nondecreasing along ZeRO 1 -> 2 -> 3:
with rs, ag the reduce-scatter and all-gather times and the forward/backward windows F, B,
stage 1 exposes max(0, rs - B) + max(0, ag - F), stage 2 m * max(0, ag - F) + max(0, rs - B),
stage 3 m * (max(0, ag - F) + max(0, rs + ag - B)), each plus the same HSDP replica term,
and m >= 1. The engines whose schedule differs (engine_dp.sharded_schedule) keep the order:
FSDP2 without pipelining reduce-scatters per micro-batch at stage 2 too (m * max(0, rs - B),
between stage 1's term and stage 3's) and all-reduces across HSDP replicas m times from
stage 2 on (more than stage 1's once); under torch.distributed.pipelining stage 2 exposes
max(0, ag - F) + rs and stage 3 k * max(0, ag - F) + (m + 1 - k) * max(0, ag - B) + rs
(1 <= k <= m), both at least stage 1's, in order, with wires ag + rs <= (m + 1) ag + rs.
(Not used when the ladder holds ZeRO 0 or an overlap switch is off.) The last
bucket's tail (cost/dp_tail.py) raises a stage's reduce term to at least tail_r and its
first gather to at least tail_a; the tail never shrinks along the ladder, so the order holds
with it, and the bounds call _dp_comm without it (a lower figure, so still a bound). The
per-bucket calls (dp_tail.megatron_bucket_count) raise rs and ag alike at every stage (k calls
of p / k never take less than one of p: each protocol's time is affine with a nonnegative
fixed part), so the order holds with them too, and the bounds leave them out as well. The
wire time (rs + ag, m * ag + rs, m * (2 ag + rs), plus the replica term) is nondecreasing
along the ladder too, so exposed + c * (wire - exposed) = (1 - c) exposed + c wire, the
exposed part plus the compute slowdown beside the hidden rest (0 <= c <= 1), is as well.

The backward window B of estimate() holds the rank's recomputed forward (cost/step.py), which
grows with recomputation: the floors take B at full recomputation of every layer, the largest
any rung has, so dp_r(z) below is no larger than at any rung's own B (every exposure term is
nonincreasing in B).

Theorem B1 (rung bound). At fixed degrees, micro-batch, vpp and schedule (a "row") and a
recomputation setting rc, the plan with ZeRO stage z takes at least

    Z(rc) + min_{r in S} [dp_r(z) + m * slowdown_r(rc)],

Z(rc) = m * max_r t_r(rc) + bubble(f, b(rc), w), where dp_r(z) is the exposed time
cost/step._dp_comm gives for rank r's parameters and compute windows plus
collective_contention times its hidden rest, and S the ranks whose
t_r is within SLACK of the largest (r* is one of them, whatever the order of float sums).
With S taken as the union of those sets over rc and every later recomputation of the ladder,
the same expression bounds all those rungs too (Lemmas R and P: Z and slowdown only grow;
dp_r does not depend on rc), and under Lemma Z every higher ZeRO stage as well.

Theorem B2 (point bound). At fixed degrees and micro-batch, every plan (any vpp, schedule,
recomputation, ZeRO stage) takes at least

    m * (sum_k N_k T_k(rc0) / pp + 2 * p2p [pp > 1]),

where N_k counts the layers of kind k (and one embedding, one output layer), T_k = fwd_s +
bwd_input_s + bwd_weight_s of kind k at rc0, p2p the time of one pipeline send. Proof:
max_r t_r >= mean_r t_r = (sum_k N_k T_k(rc) + 2 * vpp * pp * p2p) / pp whatever the layer
split and chunk placement, vpp >= 1, Lemma R, and the other parts are >= 0.

Theorem B3 (point bound with the bubble). Every closed form of cost/pipeline.bubble_s is
fill * c, with fill = sum_r t_r - max_r t_r and 0 <= c <= 1 a function of the rank averages
F, B, W (and p, v, m, the schedule), which do not depend on the layer split. So
m * max t + c * fill = (m - c) max t + c sum t >= m * mean t + c (p - 1) mean t, which is
what bubble_s gives for equal ranks f_r = F, b_r = B, w_r = W. The minimum of that over the
rows of a point bounds all its plans (Lemma R for the least recomputation).

Theorem M (memory floor). At fixed degrees, micro-batch, row, recomputation and ZeRO stage,
estimate() takes the peak memory over one rank per distinct set of layers (the one with the
most micro-batches in flight), each as memory_parts of its parameters, activations, in-flight
count and working set, the last stage's working set being max(working set, logits), and a
plan fits when the bytes its tensors hold (held_bytes: all parts but the allocator cache,
which PyTorch frees before it fails) fit. The same held bytes with the layers' working set
alone are no larger (memory_parts grows with it), so when any such rank's exceed the GPU's
capacity the plan does not fit. (estimate() also takes the first and last ranks as candidates
and adds the stage-boundary buffers of DeepSpeed / Aleph Alpha, cost/pipeline_buffers.py,
Aleph Alpha's buffered logits and DeepEP's buffers, cost/dispatcher_buffers.py: all only add
to the peak, so the floor stays a floor.)

Lemma O (the expert all-to-all overlap). estimate() overlaps a plan's expert all-to-all
when the plan says so or its schedule is DualPipeV; the overlap only hides all-to-all time
(cost/layer.py: compute unchanged). The per-row floors (B1, B3, B4, M) take each row's own
setting, exactly as estimate() does; the point floor B2, which bounds every row, takes the
overlapped layer whenever a DualPipeV row is possible.

Theorem B4 (partial recomputation, search.py's rule 6). At fixed degrees, micro-batch, row
and ZeRO stage, the plan recomputing the first n layers of each chunk (1 <= n <= L-1, L the
layers of the fullest chunk) has, per rank, the layers it does not recompute at
recomputation none and the recomputed ones at full (estimate()'s six kinds). (a) B1 with
those kinds, with the data-parallel and hidden-communication terms each at their least over
the ranks, is a floor on its step; it is nondecreasing in n (Lemma R per kind: moving a
layer from none to full adds to b and to the hidden communication; Lemma P). (b) Theorem M
with the working set replaced by the largest working set of the kinds present at every
n >= 1 on the rank (the embedding, the output layer and the full-recomputation kinds of the
layers recomputed at n = 1, which stay recomputed as n grows: the first n layers) is a floor
on the held bytes; when no kind saves more activations under full recomputation than under
none (checked at run time), it is nonincreasing in n. So every partial plan that fits has
n >= n0, the least n whose memory floor fits (bisection under the check, else a scan), and
its step is at least (a) at n0. With no n0, no partial plan of the row fits at that stage.

Cost-model properties these floors rely on (re-check them when the cost model changes):
Lemma R (recomputation only adds time; forward, weight-gradient, compute windows and
parameters independent of it), Lemma P (bubble_s nondecreasing in b, the closed forms
fill * c with 0 <= c <= 1), Lemma E (dense, embedding and output layers independent of
ep/etp), Lemma O (the expert overlap hides only communication), Lemma Z (the ZeRO ladder's
exposure grows, with both overlap switches on), Theorem M (memory_parts and held_bytes
nondecreasing in the activations and the working set), Theorem B4 (b) (saved bytes under
full recomputation no larger than under none: checked at run time, a scan otherwise). All
floors call the cost model's own functions (layer_cost, p2p_s, bubble_s, in_flight,
_dp_comm, memory_parts, held_bytes), never copies of its constants.
tests/test_search_bound.py checks each against estimate() on random plans.

Bounds are compared against step times with a relative margin (SLACK) that absorbs the
different order of floating-point sums in estimate().
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from functools import lru_cache
from math import inf
from typing import NamedTuple

from ..cost.collectives import Placement, p2p_s
from ..cost.compute import p2p_message_bytes
from ..cost.engine_p2p import may_overlap_p2p, p2p_exposed_s, p2p_overlapped
from ..cost.efficiency import NETWORK
from ..specs.workload import FP32_STORAGE
from ..cost.layer import CommPlacements, LayerCost, layer_cost
from ..cost.ops import Shard
from ..cost.memory import RankState, keeps_16bit_grads, held_bytes_of, main_grad_at_step_only
from ..cost.pipeline import bubble_s, in_flight
from ..cost.param_gather import layer_gather_bytes
from ..cost.engine_dp import flush_sync
from ..cost.step import (_chunk_counts, _dp_comm, _placement_of_chunks, placement_key,
                         placements, training_shard)
from ..errors import InputError
from ..plan import V_SCHEDULES, Plan
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from ..specs.workload import Workload
from .space import rung_fields

SLACK = 1e-9  # relative; float sums in another order differ by ~1e-15 per term

# Plan fields that shape the per-layer costs and the data-parallel communication
LAYOUT_FIELDS = ("dp", "tp", "pp", "cp", "ep", "etp", "hsdp_shard", "sequence_parallel",
                 "tp_comm_overlap", "cp_kind", "order", "overlap_grad_reduce",
                 "overlap_param_gather", "offload_optimizer", "moe_dispatcher", "ep_comm_overlap")


def _with_p2p(compute: list, framework: str, schedule: str, vpp: int, p2p: float) -> list:
    """Per-rank forward (or backward) seconds plus the exposed stage transfers, as
    estimate() adds them (engine_p2p.p2p_exposed_s per chunk)."""
    return [c + vpp * p2p_exposed_s(framework, schedule, vpp, p2p, c / vpp) for c in compute]


class PointCosts(NamedTuple):
    """Per-layer costs of a (degrees, micro-batch, recomputation) point, as estimate() builds
    them: kinds = (dense or MoE, MoE or dense, embedding, output layer), p2p = one send."""

    kinds: tuple[LayerCost, ...]
    p2p_s: float


class _Pipe(NamedTuple):  # what cost/pipeline.bubble_s reads of a plan
    pp: int
    vpp: int
    schedule: str


def layout_plan(fields: dict) -> Plan:
    """A plan carrying only the degrees and layout of ``fields``."""
    return Plan(**{k: fields[k] for k in LAYOUT_FIELDS if k in fields})


def _layer_time(x: LayerCost) -> float:
    return x.fwd_s + x.bwd_input_s + x.bwd_weight_s


@lru_cache(maxsize=256)
def _model_counts(model: ModelSpec) -> tuple[int, int, int, int]:
    """(dense layers, MoE layers, embedding, output layer) of the whole model."""
    return tuple(_chunk_counts(model, (model.layers,))[0])


@lru_cache(maxsize=4096)
def rank_layout(model: ModelSpec, pp: int, vpp: int, v_shape: bool):
    """The distinct (dense, MoE, embedding, output) counts of the pipeline ranks and the
    index of each rank's counts, as estimate() splits and places the chunks."""
    plan = Plan(pp=pp, vpp=vpp, schedule="zb_v" if v_shape else "")
    chunk_counts = _chunk_counts(model, tuple(plan.layer_split(model)))
    _, per_rank = _placement_of_chunks(pp, vpp, v_shape)
    rank_counts = [tuple(sum(chunk_counts[c][i] for c in cs) for i in range(4))
                   for cs in per_rank]
    uniq = list(dict.fromkeys(rank_counts))
    return tuple(uniq), tuple(uniq.index(rc) for rc in rank_counts)


@lru_cache(maxsize=4096)
def partial_rank_layout(model: ModelSpec, pp: int, vpp: int, v_shape: bool, n: int):
    """Rule 6's plan recomputing the first n layers of each chunk: the distinct
    (dense, MoE, embedding, output, recomputed dense, recomputed MoE) counts of the pipeline
    ranks, each rank's index, and the layers of the fullest chunk, as estimate() splits and
    places the chunks."""
    split = tuple(Plan(pp=pp, vpp=vpp, schedule="zb_v" if v_shape else "").layer_split(model))
    chunk_counts = _chunk_counts(model, split, n)
    per_rank = _placement_of_chunks(pp, vpp, v_shape)[1]
    counts = [tuple(sum(chunk_counts[c][i] for c in cs) for i in range(6)) for cs in per_rank]
    uniq = list(dict.fromkeys(counts))
    return tuple(uniq), tuple(uniq.index(c) for c in counts), max(split)


def _agg(counts, kinds, attr: str) -> float:
    return sum(k * getattr(x, attr) for k, x in zip(counts, kinds) if k)




class Bounds:
    """The floors of one search: its model, cluster, workload and ZeRO ladder."""

    def __init__(self, model: ModelSpec, cluster: Cluster, workload: Workload,
                 zeros: list[int], dualpipe: bool = True, modules: str = ""):
        self.model, self.cluster, self.workload = model, cluster, workload
        # pinned module-level selective recomputation (Plan.recompute_modules): the floors
        # of the selective rung take those modules, as estimate() does
        self.modules = modules
        # whether the walk may choose DualPipeV, whose expert all-to-all is always
        # overlapped (Lemma O: the floors then take the overlapped MoE layer)
        self.dualpipe = dualpipe
        self.zeros = list(zeros)
        self.capacity_bytes = cluster.gpu.memory_bytes
        self._fixed: dict = {}
        self._pc: dict = {}
        self._totals: dict = {}
        self._pl: dict = {}
        self._pl_of: dict = {}  # step.placement_key -> placements
        self._zplans: dict = {}
        self._in_flight: dict = {}
        self._vec: dict = {}
        self._fbw: dict = {}
        self._ranks: dict = {}  # (id of the PointCosts at rc0, pp, vpp, v_shape) -> ranks
        self._fast: dict = {}  # (id of the layout, micro-batch, rc, ep_overlap) -> costs
        # the same costs as _pc's, keyed by the placements dict (_pl_of's, one per
        # placement_key, alive as long as self) instead of the Placements it holds, whose
        # hashing made most of a hit's time
        self._pc_by_pl: dict = {}
        self._held = None

    def held_args(self) -> tuple:
        """The workload's arguments of held_bytes_of (Theorem M), the same for every rank:
        optimizer state bytes, fp16_grads, fp32_weights, grad_buffer_bytes, keeps_master,
        step_main_grad."""
        out = self._held
        if out is None:
            w = self.workload
            out = self._held = (w.master_and_state_bytes,
                                keeps_16bit_grads(w.precision, w.framework),
                                w.precision in FP32_STORAGE, w.grad_buffer_bytes,
                                w.keeps_master, main_grad_at_step_only(w.framework))
        return out

    def placements(self, layout: Plan) -> dict:
        pl = self._pl.get(id(layout))
        if pl is None:
            # shared by the layouts placements() does not tell apart (e.g. the points that
            # differ in rule 8's knobs alone, space.moe_comm_knobs); read, never changed
            key = placement_key(layout)
            shared = self._pl_of.get(key)
            if shared is None:
                shared = self._pl_of[key] = placements(layout, self.cluster)
            pl = self._pl[id(layout)] = (layout, shared)
        return pl[1]

    def zero_plans(self, layout: Plan) -> list[Plan]:
        """``layout`` at each ZeRO stage of the ladder."""
        zp = self._zplans.get(id(layout))
        if zp is None:
            plans = []
            for z in self.zeros:
                try:
                    plans.append(replace(layout, zero=z))
                except InputError:  # e.g. zero 0 with the optimizer offloaded: no floor
                    plans.append(None)
            zp = self._zplans[id(layout)] = (layout, plans)
        return zp[1]

    def costs(self, layout: Plan, mb: int, rc: str, ep_overlap: bool | None = None
              ) -> PointCosts:
        """The layer costs estimate() uses at this layout, micro-batch and recomputation
        (the dense, embedding and output layers computed with ep = etp = 1: Lemma E).

        ``ep_overlap`` None: the MoE layer's expert all-to-all overlapped whenever a plan the
        walk may choose overlaps it (pinned, or DualPipeV possible at pp > 1). Lemma O: the
        overlap only hides all-to-all time (cost/layer.py: exposed = what compute cannot
        cover, compute unchanged), so every time part of the overlapped layer is at most the
        plain one's and the floors built on it hold for both."""
        fast = (id(layout), mb, rc, ep_overlap)  # (the layout lives in self._pl)
        pc = self._fast.get(fast)
        if pc is not None and self._pl.get(id(layout), (None,))[0] is layout:
            return pc
        pc = self._costs(layout, mb, rc, ep_overlap)
        self._fast[fast] = pc
        return pc

    def _costs(self, layout: Plan, mb: int, rc: str, ep_overlap: bool | None) -> PointCosts:
        model, cluster, w = self.model, self.cluster, self.workload
        if ep_overlap is None:
            ep_overlap = layout.ep_comm_overlap or (self.dualpipe and layout.pp > 1)
        pl = self.placements(layout)
        sp = bool(layout.sequence_parallel)
        fast = (id(pl), layout.tp, layout.cp, layout.ep, layout.etp, sp, layout.tp_comm_overlap,
                layout.cp_kind, layout.pp > 1, mb, rc, layout.moe_dispatcher, ep_overlap)
        pc = self._pc_by_pl.get(fast)
        if pc is not None:
            return pc
        across = layout.pp > 1 and pl["pp_across_nodes"].nodes > 1
        key = (layout.tp, layout.cp, layout.ep, layout.etp, sp, layout.tp_comm_overlap,
               layout.cp_kind, pl["tp"], pl["cp"], pl["ep"], pl["etp"], layout.pp > 1, across,
               mb, rc, layout.moe_dispatcher, ep_overlap)
        pc = self._pc.get(key)
        if pc is not None:
            self._pc_by_pl[fast] = pc
            return pc

        # a rung of rule 7's module ladder ("selective:<modules>", space.module_ladder)
        # names its modules; the plain selective rung takes the pinned ones
        f = rung_fields(rc)
        rc_kind = f["recompute"]
        modules = f.get("recompute_modules", self.modules if rc == "selective" else "")

        def cost(kind: str, ep: int, etp: int, ep_pl, etp_pl) -> LayerCost:
            shard = training_shard(w, cluster, mb, layout.tp, layout.cp, sp, ep, etp)
            places = CommPlacements(pl["tp"], pl["cp"], ep_pl, etp_pl)
            return layer_cost(model, cluster, kind, shard, rc_kind, places,
                              layout.tp_comm_overlap, w.precision, layout.cp_kind, w.framework,
                              layout.moe_dispatcher, ep_overlap, modules, w.attention_kernel,
                              w.norm_kernel, w.attention_full_ac)

        dkey = (layout.tp, layout.cp, sp, layout.tp_comm_overlap, layout.cp_kind,
                pl["tp"], pl["cp"], mb, rc)
        fixed = self._fixed.get(dkey)
        if fixed is None:
            one = Placement(1, 1)
            fixed = self._fixed[dkey] = (
                cost("dense", 1, 1, one, one) if model.num_dense_layers else None,
                cost("embedding", 1, 1, one, one), cost("head", 1, 1, one, one),
                p2p_s(cluster, False, p2p_message_bytes(
                    model.hidden, Shard(w.seq_len, mb, layout.tp, layout.cp, sp), w.precision,
                    w.framework)),
                p2p_s(cluster, True, p2p_message_bytes(
                    model.hidden, Shard(w.seq_len, mb, layout.tp, layout.cp, sp), w.precision,
                    w.framework)))
        dense, emb, head, p2p_in, p2p_across = fixed
        moe = cost("moe", layout.ep, layout.etp, pl["ep"], pl["etp"]) if model.is_moe else None
        p2p = 0.0
        if layout.pp > 1:
            p2p = p2p_across if across else p2p_in
        # (the last two: estimate()'s recomputed-layer kinds, weighed 0 at a ladder rung)
        pc = self._pc[key] = self._pc_by_pl[fast] = PointCosts(
            (dense or moe, moe or dense, emb, head, dense or moe, moe or dense), p2p)
        return pc

    def vectors(self, pc: PointCosts) -> dict:
        """The attributes of ``pc``'s kinds as vectors (cached: pc lives in self._pc)."""
        out = self._vec.get(id(pc))
        if out is None:
            out = self._vec[id(pc)] = {a: tuple(getattr(x, a) for x in pc.kinds)
                                       for a in _ATTRS}
        return out

    def point_s(self, pc: PointCosts, m: int, pp: int) -> float:
        """Theorem B2: a floor on every plan of a (degrees, micro-batch) point; ``pc`` at the
        least recomputation of the ladder."""
        total = self._totals.get(id(pc))
        if total is None:
            total = sum(n * _layer_time(x) for n, x in zip(_model_counts(self.model), pc.kinds)
                        if n)
            self._totals[id(pc)] = total  # pc lives in self._pc as long as self
        # engines that hide transfers under some schedule may expose none (engine_p2p.py)
        p2p = 0.0 if may_overlap_p2p(self.workload.framework) else pc.p2p_s
        return m * (total / pp + (2 * p2p if pp > 1 else 0.0)) * (1 - SLACK)

    def pipe_s(self, pc: PointCosts, m: int, pp: int, rows) -> dict:
        """Theorem B3 per schedule row of a (degrees, micro-batch) point: row -> a floor on
        its plans; ``pc`` at the least recomputation of the ladder."""
        if pp == 1:
            return {vs: self.point_s(pc, m, pp) for vs in rows}
        tot = self._fbw.get(id(pc))
        if tot is None:  # (pc lives in self._pc as long as self)
            counts = _model_counts(self.model)
            tot = self._fbw[id(pc)] = tuple(
                sum(n * getattr(x, a) for n, x in zip(counts, pc.kinds) if n)
                for a in ("fwd_s", "bwd_input_s", "bwd_weight_s"))
        f0, b0, w0 = (x / pp for x in tot)
        out = {}
        for vpp, schedule in rows:
            fw = self.workload.framework  # estimate()'s exposed transfers (engine_p2p.py)
            f = f0 + vpp * p2p_exposed_s(fw, schedule, vpp, pc.p2p_s, f0 / vpp)
            b = b0 + vpp * p2p_exposed_s(fw, schedule, vpp, pc.p2p_s, b0 / vpp)
            out[(vpp, schedule)] = (m * (f + b + w0) + bubble_s(
                _Pipe(pp, vpp, schedule), m, [f] * pp, [b] * pp, [w0] * pp)) * (1 - SLACK)
        return out

    def in_flight_most(self, pp: int, vpp: int, schedule: str, m: int, idx) -> tuple:
        """Per distinct rank layout: the most micro-batches in flight on its ranks."""
        key = (pp, vpp, schedule, m, idx)
        out = self._in_flight.get(key)
        if out is None:
            most: dict = {}
            pipe = _Pipe(pp, vpp, schedule)
            for r, u in enumerate(idx):
                n = in_flight(pipe, m, r)
                if n > most.get(u, -1.0):
                    most[u] = n
            out = self._in_flight[key] = tuple(most[u] for u in range(len(most)))
        return out

    def pair(self, layout: Plan, mb: int, m: int, rcs) -> "PairBounds":
        return PairBounds(self, layout, mb, m, rcs)


_ATTRS = ("fwd_s", "bwd_input_s", "bwd_weight_s", "overlap_slowdown_s", "saved_bytes",
          "working_bytes", "params", "expert_params", "fwd_compute_s", "bwd_input_compute_s",
          "bwd_weight_compute_s", "recompute_s")


def _sum4(c, v) -> float:
    """sum(k * x for k, x in zip(counts, values) if k), as estimate()'s agg adds them."""
    t = 0
    for k, x in zip(c, v):
        if k:
            t += k * x
    return t


@lru_cache(maxsize=4096)
def _nonzero(uniq: tuple) -> tuple:
    """Per counts tuple of ``uniq``, its (index, count) pairs with a nonzero count."""
    return tuple(tuple((i, k) for i, k in enumerate(c) if k) for c in uniq)


def _dots(terms: tuple, v) -> list[float]:
    """[_sum4(c, v) for c in uniq] from ``terms`` = _nonzero(uniq): the same products
    added in the same order, one call per vector instead of one per rank layout."""
    out = []
    for tc in terms:
        t = 0
        for i, k in tc:
            t += k * v[i]
        out.append(t)
    return out


class PairBounds:
    """Floors of one (degree point, micro-batch) pair, per schedule row and ladder rung."""

    def __init__(self, bounds: Bounds, layout: Plan, mb: int, m: int, rcs):
        self.b, self.layout, self.mb, self.m = bounds, layout, mb, m
        self.rcs, self.rc0 = list(rcs), rcs[0]
        self._later: dict = {}
        self._costs: dict = {}
        self._lay: dict = {}
        self._dp: dict = {}
        self._per_rc: dict = {}
        self._rc_of: dict = {}  # (vpp, schedule, rc) -> _per_rc's entry, without its key
        self._z: dict = {}
        self._fit: dict = {}
        self._partial: dict = {}
        self._prow: dict = {}
        self._pstatic: dict = {}
        zs = bounds.zeros
        # Lemma Z's condition: the floors grow along the ZeRO ladder
        self.zero_monotone = (all(z in (1, 2, 3) for z in zs) and list(zs) == sorted(zs)
                              and layout.overlap_grad_reduce and layout.overlap_param_gather)

    def costs(self, rc: str, ep_overlap: bool | None = None):
        """(PointCosts, the attributes of its kinds as vectors) at recomputation rc (the
        expert all-to-all overlapped as Bounds.costs says; ``ep_overlap`` fixes it)."""
        key = (rc, ep_overlap)
        out = self._costs.get(key)
        if out is None:
            pc = self.b.costs(self.layout, self.mb, rc, ep_overlap)
            out = self._costs[key] = (pc, self.b.vectors(pc))
        return out

    def _ranks(self, vpp: int, v_shape: bool):
        """Distinct rank layouts and what recomputation does not change on them (Lemma R):
        parameters (non-expert, expert, largest layer) and compute windows."""
        key = (vpp, v_shape)
        out = self._lay.get(key)
        if out is not None:
            return out
        layout, model = self.layout, self.b.model
        pc, v = self.costs(self.rc0)
        shared = (id(pc), layout.pp, vpp, v_shape)  # the same for every pair with these costs
        out = self.b._ranks.get(shared)
        if out is not None:
            self._lay[key] = out
            return out
        uniq, idx = rank_layout(model, layout.pp, vpp, v_shape)
        kinds = pc.kinds
        # stored once only where one chunk holds both ends (pp = 1): cost/step.py estimate
        tied = (model.vocab * model.hidden / layout.tp
                if model.tied_embeddings and layout.pp * vpp == 1 else 0.0)
        terms = _nonzero(uniq)
        params = [x - (tied if c[2] and c[3] else 0.0)
                  for x, c in zip(_dots(terms, v["params"]), uniq)]
        eparams = _dots(terms, v["expert_params"])
        largest = [max(x.params + x.expert_params for k, x in zip(c, kinds) if k) for c in uniq]
        # estimate()'s backward window holds the rank's recomputation too (cost/step.py): at
        # its largest, full recomputation of every layer (no rung recomputes more: Lemma R),
        # so the exposure below is no larger than any rung's
        vf = self.costs("full")[1]
        wins = [(f, b + w + r) for f, b, w, r in zip(
            _dots(terms, v["fwd_compute_s"]), _dots(terms, v["bwd_input_compute_s"]),
            _dots(terms, v["bwd_weight_compute_s"]), _dots(terms, vf["recompute_s"]))]
        out = self._lay[key] = self.b._ranks[shared] = (uniq, idx, params, eparams, largest,
                                                        wins)
        return out

    def _dp_floor(self, vpp: int, v_shape: bool, b: int) -> list[float]:
        """dp_exposed plus the slowdown beside the hidden rest (collective_contention) of each
        distinct rank layout at the ladder's b-th ZeRO stage."""
        key = (vpp, v_shape, b)
        out = self._dp.get(key)
        if out is None:
            bd, layout = self.b, self.layout
            uniq, _, params, eparams, _, wins = self._ranks(vpp, v_shape)
            pz = bd.zero_plans(layout)[b]
            if layout.dp * layout.cp == 1:
                out = [0.0] * len(uniq)
            elif pz is None:
                out = [-inf] * len(uniq)
            else:
                pl = bd.placements(layout)
                gb = bd.workload.grad_buffer_bytes
                # every weight at the layers' gather bytes: never more than estimate()'s mean
                # (param_gather.py), so still a floor
                ag = layer_gather_bytes(bd.workload.fp8_param_gather)
                c = NETWORK.collective_contention
                # the engine's schedule of sharded collectives (engine_dp.sharded_schedule);
                # a flush engine's exposed reduction (engine_dp.flush_sync) is left out, as
                # before: the default overlap gives the lower figure
                fw = bd.workload.framework
                eng = fw if flush_sync(fw, pz, bd.workload.precision) is None else ""
                out = []
                for p, e, (f, w) in zip(params, eparams, wins):
                    wire, exposed, _ = _dp_comm(pz, bd.cluster, pl, p, e, self.m, f, w,
                                                eng, grad_bytes=gb, gather_bytes=ag,
                                                expert_gather_bytes=ag)
                    out.append(exposed + c * (wire - exposed))
            self._dp[key] = out
        return out

    def overlaps(self, schedule: str) -> bool:
        """Whether the row's plans overlap the expert all-to-all: as estimate() decides it
        (the plan's switch, or DualPipeV), exact per schedule row."""
        return bool(self.layout.ep_comm_overlap or schedule == "dualpipev")

    def _rc_parts(self, vpp: int, schedule: str, rc: str):
        """Per distinct rank layout at recomputation rc: f, b, w, contention * m * hidden
        communication, activations of one micro-batch, working set."""
        out = self._rc_of.get((vpp, schedule, rc))
        if out is not None:
            return out
        v_shape = schedule in V_SCHEDULES
        ov = self.overlaps(schedule)
        fw = self.b.workload.framework
        key = (vpp, v_shape, ov, p2p_overlapped(fw, schedule, vpp), rc)
        out = self._per_rc.get(key)
        if out is not None:
            self._rc_of[(vpp, schedule, rc)] = out
            return out
        uniq = self._ranks(vpp, v_shape)[0]
        # the row's own expert all-to-all overlap (estimate(): the plan's switch or DualPipeV)
        pc, v = self.costs(rc, ov)
        vw = v["working_bytes"]
        terms = _nonzero(uniq)
        fu = _with_p2p(_dots(terms, v["fwd_s"]), fw, schedule, vpp, pc.p2p_s)
        bu = _with_p2p(_dots(terms, v["bwd_input_s"]), fw, schedule, vpp, pc.p2p_s)
        wu = _dots(terms, v["bwd_weight_s"])
        t = [f + b + w for f, b, w in zip(fu, bu, wu)]
        top = max(t) * (1 - SLACK)
        slowest = [u for u, tu in enumerate(t) if tu >= top]  # where r* can be
        out = self._per_rc[key] = self._rc_of[(vpp, schedule, rc)] = (
            fu, bu, wu, [self.m * x for x in _dots(terms, v["overlap_slowdown_s"])],
            _dots(terms, v["saved_bytes"]),
            [max(x for k, x in zip(c, vw) if k) for c in uniq], slowest)
        return out

    def _pipeline_s(self, vpp: int, schedule: str, rc: str) -> float:
        """m * max_r t_r + bubble at rc."""
        key = (vpp, schedule, rc)
        z = self._z.get(key)
        if z is None:
            v_shape = schedule in V_SCHEDULES
            pp, m = self.layout.pp, self.m
            idx = self._ranks(vpp, v_shape)[1]
            fu, bu, wu = self._rc_parts(vpp, schedule, rc)[:3]
            z = m * max(f + b + w for f, b, w in zip(fu, bu, wu))
            if pp > 1:
                z += bubble_s(_Pipe(pp, vpp, schedule), m, [fu[i] for i in idx],
                              [bu[i] for i in idx], [wu[i] for i in idx])
            self._z[key] = z
        return z

    def time_floor(self, vpp: int, schedule: str, rc: str, b: int) -> float:
        """Theorem B1: a floor on the step time at rc and the ladder's b-th ZeRO stage."""
        v_shape = schedule in V_SCHEDULES
        parts = self._rc_parts(vpp, schedule, rc)
        hu, slowest = parts[3], parts[6]
        dp = self._dp_floor(vpp, v_shape, b)
        return (self._pipeline_s(vpp, schedule, rc)
                + min(dp[u] + hu[u] for u in slowest)) * (1 - SLACK)

    def time_floors(self, vpp: int, schedule: str, rc: str) -> list[float]:
        return [self.time_floor(vpp, schedule, rc, b) for b in range(len(self.b.zeros))]

    def _all_fit(self, pz, states) -> bool:
        """Theorem M's test: every rank's held bytes (model states at ``pz``'s ZeRO stage plus
        what ``states`` hold), less the slack, within the capacity."""
        bd = self.b
        state_b, fp16, fp32, grad_b, master, step_grad = bd.held_args()
        cap, m = bd.capacity_bytes, self.m
        return all(held_bytes_of(pz, st, state_b, m, fp16_grads=fp16, fp32_weights=fp32,
                                 grad_buffer_bytes=grad_b, keeps_master=master,
                                 step_main_grad=step_grad) * (1 - SLACK) <= cap
                   for st in states)

    def states_fit(self, vpp: int, v_shape: bool, b: int) -> bool:
        """Theorem M with no activations and no working set (a floor for every
        recomputation, Lemma R): False when the ladder's b-th ZeRO stage cannot fit."""
        def states():
            _, _, params, eparams, largest, _ = self._ranks(vpp, v_shape)
            return (RankState(
                params=params[u], expert_params=eparams[u], largest_layer_params=largest[u],
                act_per_microbatch_bytes=0.0, in_flight=0.0, working_bytes=0.0)
                for u in range(len(params)))
        return self._fits_at((vpp, v_shape, b), b, states)

    def may_fit(self, vpp: int, schedule: str, rc: str, b: int) -> bool:
        """Theorem M at rc and the ladder's b-th ZeRO stage: False when no plan can fit."""
        key = (vpp, schedule, rc, b)
        out = self._fit.get(key)
        if out is not None:
            return out
        if not self.states_fit(vpp, schedule in V_SCHEDULES, b):
            self._fit[key] = False
            return False
        bd, layout, m = self.b, self.layout, self.m
        pz = bd.zero_plans(layout)[b]
        out = True
        if pz is not None:
            v_shape = schedule in V_SCHEDULES
            _, idx, params, eparams, largest, _ = self._ranks(vpp, v_shape)
            acts, working = self._rc_parts(vpp, schedule, rc)[4:6]
            most = bd.in_flight_most(layout.pp, vpp, schedule, m, idx)
            # any rank over the capacity: the peak is too
            out = self._all_fit(pz, (RankState(
                params=params[u], expert_params=eparams[u], largest_layer_params=largest[u],
                act_per_microbatch_bytes=acts[u], in_flight=most[u], working_bytes=working[u])
                for u in range(len(params))))
        self._fit[key] = out
        return out

    def dp_floor_any(self, vpp: int, schedule: str) -> float:
        """A floor on dp_exposed + nothing else, for every plan of the row that may fit
        (Theorem B3's companion): the least over the rank layouts and the ZeRO stages whose
        model states fit (Theorem M without activations); inf when none fits."""
        v_shape = schedule in V_SCHEDULES
        key = (vpp, v_shape, "dp")
        out = self._later.get(key)
        if out is None:
            out = inf
            for b in range(len(self.b.zeros)):
                if self.states_fit(vpp, v_shape, b):
                    out = min(out, min(self._dp_floor(vpp, v_shape, b)))
                    if self.zero_monotone:  # Lemma Z: the higher stages expose no less
                        break
            self._later[key] = out
        return out

    def _partial_kinds(self, schedule: str):
        """estimate()'s six layer kinds of a partial-recomputation plan of the row: the
        layers it does not recompute (and the embedding and output layer) at recomputation
        none, the recomputed ones at full."""
        ov = self.overlaps(schedule)
        none, full = self.costs("none", ov)[0], self.costs("full", ov)[0]
        return none.kinds[:4] + full.kinds[:2], none.p2p_s

    def _partial_static(self, vpp: int, schedule: str):
        """What the layer count n does not change of the row's partial-recomputation plans:
        the six kinds as vectors, one pipeline send, and per pipeline rank the working set
        that Theorem M weighs (the largest of the kinds every plan of rule 6 holds on the
        rank: the embedding, the output layer and the layers recomputed at n = 1, which stay
        recomputed at every n >= 1; so the floor falls with n, Theorem B4)."""
        key = (vpp, schedule)
        out = self._pstatic.get(key)
        if out is not None:
            return out
        kinds, p2p = self._partial_kinds(schedule)
        vec = {a: [getattr(x, a) for x in kinds] for a in
               ("fwd_s", "bwd_input_s", "bwd_weight_s", "overlap_slowdown_s", "params",
                "expert_params", "saved_bytes")}
        vec["largest"] = [x.params + x.expert_params for x in kinds]
        uniq1, idx1, _ = partial_rank_layout(self.b.model, self.layout.pp, vpp,
                                             schedule in V_SCHEDULES, 1)
        w1 = [max((x.working_bytes for k, x in zip(uniq1[i][2:], kinds[2:]) if k),
                  default=0.0) for i in idx1]
        out = self._pstatic[key] = (vec, p2p, w1)
        return out

    def _partial_parts(self, vpp: int, schedule: str, n: int):
        """What the ZeRO stage does not change of the row's plan recomputing n layers per
        chunk: m * max_r t_r + bubble + contention * m * (least hidden communication over
        the ranks), and per distinct rank layout the RankState that Theorem M weighs."""
        key = (vpp, schedule, n)
        out = self._prow.get(key)
        if out is not None:
            return out
        bd, layout, m = self.b, self.layout, self.m
        model, pp = bd.model, layout.pp
        uniq, idx, _ = partial_rank_layout(model, pp, vpp, schedule in V_SCHEDULES, n)
        vec, p2p, w1 = self._partial_static(vpp, schedule)
        fw = bd.workload.framework
        fu = _with_p2p([_sum4(c, vec["fwd_s"]) for c in uniq], fw, schedule, vpp, p2p)
        bu = _with_p2p([_sum4(c, vec["bwd_input_s"]) for c in uniq], fw, schedule, vpp, p2p)
        wu = [_sum4(c, vec["bwd_weight_s"]) for c in uniq]
        z = m * max(f + b_ + w for f, b_, w in zip(fu, bu, wu))
        if pp > 1:
            z += bubble_s(_Pipe(pp, vpp, schedule), m, [fu[i] for i in idx],
                          [bu[i] for i in idx], [wu[i] for i in idx])
        z += m * min(_sum4(c, vec["overlap_slowdown_s"]) for c in uniq)
        work = [inf] * len(uniq)
        for r, u in enumerate(idx):
            if w1[r] < work[u]:
                work[u] = w1[r]
        most = bd.in_flight_most(pp, vpp, schedule, m, idx)
        tied = (model.vocab * model.hidden / layout.tp
                if model.tied_embeddings and pp * vpp == 1 else 0.0)  # as in _layouts
        big = vec["largest"]
        states = [RankState(
            params=_sum4(c, vec["params"]) - (tied if c[2] and c[3] else 0.0),
            expert_params=_sum4(c, vec["expert_params"]),
            largest_layer_params=max(x for k, x in zip(c, big) if k),
            act_per_microbatch_bytes=_sum4(c, vec["saved_bytes"]), in_flight=most[u],
            working_bytes=work[u]) for u, c in enumerate(uniq)]
        out = self._prow[key] = (z, states)
        return out

    def _partial_fits(self, vpp: int, schedule: str, b: int, n: int) -> bool:
        """Theorem M for the row's plan recomputing n layers per chunk at the ladder's b-th
        ZeRO stage: False when it cannot fit."""
        return self._fits_at(("partial-fit", vpp, schedule, b, n), b,
                             lambda: self._partial_parts(vpp, schedule, n)[1])

    def _fits_at(self, key: tuple, b: int, states) -> bool:
        """Theorem M, memoised under ``key``, for the ladder's b-th ZeRO stage and the rank
        states ``states()`` gives: True where the ladder has no such stage."""
        out = self._fit.get(key)
        if out is None:
            pz = self.b.zero_plans(self.layout)[b]
            out = self._fit[key] = pz is None or self._all_fit(pz, states())
        return out

    def _partial_time(self, vpp: int, schedule: str, b: int, n: int) -> float:
        """Theorem B1 for the row's plan recomputing n layers per chunk at the ladder's b-th
        ZeRO stage, with the data-parallel and hidden-communication terms each at their
        least over the ranks (r* among them, whichever it is)."""
        z = self._partial_parts(vpp, schedule, n)[0]
        return (z + min(self._dp_floor(vpp, schedule in V_SCHEDULES, b))) * (1 - SLACK)

    def partial_floor(self, vpp: int, schedule: str, b: int, kth: float = inf) -> float:
        """Theorem B4: a floor on the step time of every partial-recomputation plan of the
        row (search.py's rule 6: the first n layers of each chunk recomputed in full,
        1 <= n <= L-1, L the layers of the fullest chunk) at the ladder's b-th ZeRO stage;
        inf when none can fit (Theorem M). It is B1 at n0, the least n that Theorem M does
        not rule out (found by bisection when the memory floor falls with n, see the module
        docstring, else by a scan). Where the floor at n = 1 (no larger: the floor grows
        with n) already exceeds ``kth`` it is returned instead: that decides as well."""
        key = (vpp, schedule, b)
        out = self._partial.get(key)
        if out is not None:
            return out
        v_shape = schedule in V_SCHEDULES
        out = inf
        most = partial_rank_layout(self.b.model, self.layout.pp, vpp, v_shape, 1)[2]
        if most >= 2 and self.states_fit(vpp, v_shape, b):
            first = self._partial_time(vpp, schedule, b, 1)
            if first > kth:  # (not cached: a later, smaller kth may need the tight floor)
                return first
            kinds, _ = self._partial_kinds(schedule)
            falls = all(full.saved_bytes <= none.saved_bytes
                        for none, full in zip(kinds[:2], kinds[4:]))
            n0 = None
            if falls:  # memory floor nonincreasing in n: bisect for the least n that may fit
                if self._partial_fits(vpp, schedule, b, most - 1):
                    lo, hi = 0, most - 1  # lo: 0 or ruled out, hi: may fit
                    while hi - lo > 1:
                        mid = (lo + hi) // 2
                        if self._partial_fits(vpp, schedule, b, mid):
                            hi = mid
                        else:
                            lo = mid
                    n0 = hi
            else:
                n0 = next((n for n in range(1, most)
                           if self._partial_fits(vpp, schedule, b, n)), None)
            if n0 is not None:
                out = self._partial_time(vpp, schedule, b, n0)
        self._partial[key] = out
        return out

    def _slowest_from(self, vpp: int, schedule: str, a: int) -> list[int]:
        """The rank layouts that can be r* at recomputation rcs[a] or any later one."""
        key = (vpp, schedule in V_SCHEDULES, self.overlaps(schedule), a)
        out = self._later.get(key)
        if out is None:
            us = set()
            for rc in self.rcs[a:]:
                us.update(self._rc_parts(vpp, schedule, rc)[6])
            out = self._later[key] = sorted(us)
        return out

    def floor_from(self, vpp: int, schedule: str, a: int, b: int) -> float:
        """Theorem B1 for the rungs (rcs[a'], b') with a' >= a and, under Lemma Z's
        condition, b' >= b (else b' = b): nondecreasing in a and b."""
        v_shape = schedule in V_SCHEDULES
        hu = self._rc_parts(vpp, schedule, self.rcs[a])[3]
        dp = self._dp_floor(vpp, v_shape, b)
        return (self._pipeline_s(vpp, schedule, self.rcs[a])
                + min(dp[u] + hu[u] for u in self._slowest_from(vpp, schedule, a))) \
            * (1 - SLACK)

    def row_floor(self, vpp: int, schedule: str, kth: float) -> float:
        """A floor on every plan of the row that may fit (inf when none may), exact enough
        to compare with ``kth``: the least floor_from among the rungs Theorem M allows,
        found best first over the (recomputation, ZeRO) grid."""
        rcs = self.rcs
        v_shape = schedule in V_SCHEDULES
        cols = [b for b in range(len(self.b.zeros)) if self.states_fit(vpp, v_shape, b)]
        if not cols:
            return inf
        seeds = cols[:1] if self.zero_monotone else cols
        heap = [(self.floor_from(vpp, schedule, 0, b), 0, b) for b in seeds]
        heapq.heapify(heap)
        seen = {(0, b) for b in seeds}
        while heap:
            f, a, b = heapq.heappop(heap)
            if f > kth or self.may_fit(vpp, schedule, rcs[a], b):
                return f
            nxt = [(a + 1, b)]
            if self.zero_monotone and b != cols[-1]:
                nxt.append((a, cols[cols.index(b) + 1]))
            for a2, b2 in nxt:
                if a2 < len(rcs) and (a2, b2) not in seen:
                    seen.add((a2, b2))
                    heapq.heappush(heap, (self.floor_from(vpp, schedule, a2, b2), a2, b2))
        return inf
