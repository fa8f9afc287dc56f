"""Every valid plan of a (small) space, estimated one by one: the reference the pruned search
is tested against (tests/test_search_complete.py). No pruning, no caps: each knob the search
varies takes every value the validity rule (meshplan/validity.py) accepts (partial
recomputation: every layer count below the fullest chunk's; module-level recomputation: the
module sets of search.py's rule 7); the knobs the
search holds at a fixed setting (sequence parallel on when tp > 1 and divides the sequence,
tp communication overlap
and the MoE dispatcher as the workload's framework runs them (framework_defaults), the other
overlaps on, ring context parallelism, no HSDP, no offload, the default rank order) are held alike here;
with an ``engine`` named, the MoE communication knobs take every setting search.py's rule 8
gives them (space.moe_comm_knobs) and plans the engine refuses (engines.plan_violations and,
on the cluster, cluster_plan_violations) are left out, as the search leaves them out.
"""

from __future__ import annotations

from ..cost import Estimate, estimate
from ..framework_defaults import plan_defaults, tp_comm_overlap
from ..engines import cluster_plan_violations, plan_violations
from ..errors import InputError
from ..plan import SCHEDULES, Plan
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec
from ..specs.workload import Workload
from .space import divisors, module_ladder, moe_comm_knobs, rung_fields, sequence_parallel_off


def all_plans(model: ModelSpec, cluster: Cluster, workload: Workload, pins: dict | None = None,
              engine: str | None = None):
    """Every valid plan (pinned knobs held at their pinned value) that ``engine`` runs."""
    pins = pins or {}
    for p in _all_plans(model, cluster, workload, pins, engine):
        if engine is None or not (plan_violations(engine, p, model, workload)
                                  or cluster_plan_violations(engine, p, cluster, workload)):
            yield p


def _all_plans(model: ModelSpec, cluster: Cluster, workload: Workload, pins: dict,
               engine: str | None):
    n = cluster.num_gpus

    def opts(k, values):
        return [pins[k]] if k in pins else values

    # rule 7's module ladder (space.module_ladder) where recomputation is not pinned
    ladder = () if {"recompute", "recompute_modules", "recompute_layers"} & set(pins) else (
        module_ladder(model, engine or workload.framework))
    shapes: dict = {}

    def shape_ok(pp: int, vpp: int, schedule: str) -> bool:
        """Plan's own rules on (pp, vpp, schedule) alone, asked once per shape: a shape it
        refuses is refused in every plan (5 in 6 of the plans built before were)."""
        if (pp, vpp, schedule) not in shapes:
            try:
                Plan(pp=pp, vpp=vpp, schedule=schedule)
                shapes[pp, vpp, schedule] = True
            except InputError:
                shapes[pp, vpp, schedule] = False
        return shapes[pp, vpp, schedule]

    moe_default = plan_defaults(workload.framework, 1, cluster.scaleup_domain, model.is_moe,
                                model.name, cluster.gpu.name, workload.precision,
                                workload.fp8_recipe)
    disp = pins.get("moe_dispatcher", moe_default["moe_dispatcher"])
    epo = pins.get("ep_comm_overlap", moe_default["ep_comm_overlap"])
    for tp in opts("tp", divisors(n)):
        tpo = tp_comm_overlap(workload.framework, tp, model.name)
        sp = False if sequence_parallel_off(workload.seq_len, tp) else None  # as the search
        for cp in opts("cp", [c for c in divisors(n // tp) if n % (tp * c) == 0] if n % tp == 0 else []):
            rest = n // (tp * cp)
            for pp in opts("pp", [p for p in divisors(rest) if p <= model.layers + 2]):
                if rest % pp:
                    continue
                dp = rest // pp
                if "dp" in pins and pins["dp"] != dp or workload.global_batch % dp:
                    continue
                attn = dp * cp * tp
                experts = [(1, 1)]
                if model.is_moe:
                    experts = [(e, t) for e in divisors(model.moe_experts)
                               for t in divisors(model.moe_expert_ffn) if attn % (e * t) == 0]
                experts = [(e, t) for e, t in experts if pins.get("ep", e) == e
                           and pins.get("etp", t) == t]
                for mb in opts("micro_batch", divisors(workload.global_batch // dp)):
                    for v in opts("vpp", range(1, max(1, (model.layers + 2) // pp) + 1)):
                        for s in opts("schedule", SCHEDULES):
                            if not shape_ok(pp, v, s):
                                continue
                            for ep, etp, knobs in [(e, t, k) for e, t in experts for k in
                                                   moe_comm_knobs(model, cluster, engine,
                                                                  pins, e, t)]:
                                for z in opts("zero", (0, 1, 2, 3)):
                                    for rc in opts("recompute", ("full",) if pins.get("recompute_layers")
                                                   else ("none", "selective", "full")
                                                   + ladder):
                                        try:
                                            p = Plan(**dict(
                                                dict(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp,
                                                     zero=z, vpp=v, schedule=s, micro_batch=mb,
                                                     tp_comm_overlap=tpo, moe_dispatcher=disp,
                                                     ep_comm_overlap=epo,
                                                     sequence_parallel=sp, **rung_fields(rc)),
                                                **dict(knobs)))
                                        except InputError:
                                            continue
                                        if rc == "full" and pins.get("recompute_layers"):
                                            yield p.with_(recompute_layers=pins["recompute_layers"])
                                            continue
                                        yield p
                                        if rc == "full":  # partial: N < the fullest chunk
                                            for k in range(1, max(p.layer_split(model))):
                                                yield p.with_(recompute_layers=k)


def exhaustive_best(model: ModelSpec, cluster: Cluster, workload: Workload,
                    pins: dict | None = None, engine: str | None = None
                    ) -> tuple[Estimate | None, int]:
    """The fastest plan that fits (closed forms) and how many valid plans there were."""
    best, count = None, 0
    for p in all_plans(model, cluster, workload, pins, engine):
        try:
            e = estimate(model, cluster, workload, p)
        except InputError:
            continue
        count += 1
        if e.fits and (best is None or e.step_time_s < best.step_time_s):
            best = e
    return best, count
