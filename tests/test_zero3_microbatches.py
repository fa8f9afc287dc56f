"""Sharded data parallelism (zero 2 / 3) across the micro-batches of one step, per engine
(cost/engine_dp.py sharded_schedule, charged by cost/step.py _dp_comm).

The PyTorch facts are read from the installed torch (FSDP2 and torch.distributed.pipelining);
the others are the engines' code at the commits engine_dp.py cites (Megatron-Core's FSDP,
Composer's FSDP1 trainer, DeepSpeed ZeRO-3, torchtitan's and OLMo-core's train loops)."""

import inspect
import random
from dataclasses import replace

import pytest

from meshplan.cost.collectives import all_gather_s, all_reduce_s
from meshplan.cost.engine_dp import ShardedSchedule, sharded_schedule
from meshplan.cost.step import _dp_comm, placements
from meshplan.plan import Plan
from meshplan.scenario import make_cluster


@pytest.mark.parametrize("engine", ["", "megatron", "nemo", "llm-foundry", "deepspeed",
                                    "torchtitan", "olmo-core"])
def test_without_pipelining_zero3_gathers_twice_and_reduces_once_per_microbatch(engine):
    """Megatron-FSDP optim_grads_params (grad_reduce_every_bprop; release after forward,
    re-gather before backward), FSDP1 FULL_SHARD under Composer (no no_sync for a non-DDP
    model), DeepSpeed ZeRO-3 (reduce in every backward), FSDP2 under torchtitan / OLMo-core
    (reshard_after_forward True without pp, no set_requires_gradient_sync): all the same."""
    for m in (1, 4, 64):
        s = sharded_schedule(engine, 3, m, pp=1)
        assert (s.forward_gathers, s.backward_gathers, s.reduces, s.reduce_hidden) == (
            m, m, m, True)


def test_hsdp_replica_reduction_per_engine():
    # FSDP2 all-reduces across replicas in every post_backward unless told not to:
    # torchtitan never is; OLMo-core's set_requires_all_reduce(is_last_mb) and Megatron-FSDP's
    # outer_fsdp_group_grad_reduce (is_last_microbatch) reduce once per step
    assert sharded_schedule("torchtitan", 3, 8).replica_reduces == 8
    for engine in ("", "megatron", "nemo", "olmo-core"):
        assert sharded_schedule(engine, 3, 8).replica_reduces == 1


def test_fsdp2_defaults_reduce_and_reshard_after_every_backward():
    """The installed FSDP2: a parameter group reduce-scatters, all-reduces (HSDP) and
    reshards after every backward unless the trainer says otherwise; the backward's unshard
    is a no-op when the weights are still unsharded (reshard_after_forward=False), and an
    activation-checkpoint recompute (PRE_BACKWARD) does not gather again."""
    pytest.importorskip("torch")
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group as g
    from torch.distributed.fsdp._fully_shard import _fsdp_state as st
    init = inspect.getsource(g.FSDPParamGroup.__init__)
    for flag in ("self.reduce_grads: bool = True", "self.all_reduce_grads: bool = True",
                 "self.reshard_after_backward: bool = True"):
        assert flag in init
    unshard = inspect.getsource(g.FSDPParamGroup.unshard)
    assert "if self.is_unsharded:" in unshard
    assert "self.unshard(" in inspect.getsource(g.FSDPParamGroup.pre_backward)
    pre_fwd = inspect.getsource(st.FSDPState._pre_forward)
    assert pre_fwd.index("TrainingState.PRE_BACKWARD") < pre_fwd.index("pre_forward(module")
    # so zero 3 gathers before each backward, zero 2 (weights kept from forward) does not
    assert sharded_schedule("torchtitan", 3, 4).backward_gathers == 4
    assert sharded_schedule("torchtitan", 2, 4).backward_gathers == 0
    assert sharded_schedule("torchtitan", 2, 4).reduces == 4


def test_torch_pipelining_reduces_once_after_the_last_backward():
    """torch.distributed.pipelining turns FSDP2's gradient sync and reshard-after-backward off
    for every backward and reduces in perform_reduce_grad, after all of them."""
    pytest.importorskip("torch")
    from torch.distributed.pipelining import stage
    bwd = inspect.getsource(stage._PipelineStageBase.backward_maybe_with_nosync)
    fsdp_branch = bwd[bwd.index("FSDPModule"):]
    assert "set_requires_gradient_sync(False)" in fsdp_branch
    assert "set_reshard_after_backward(False)" in fsdp_branch
    red = inspect.getsource(stage._PipelineStageBase.perform_reduce_grad)
    assert "set_requires_gradient_sync(True)" in red and "post_backward()" in red
    for engine in ("torchtitan", "olmo-core"):
        # 1F1B on the first stage: F^3 (F B)^13 B^3; a forward after a forward and a
        # backward after a forward gather (4 + 13), a backward after a backward keeps them
        assert sharded_schedule(engine, 3, 16, pp=4) == ShardedSchedule(4, 13, 1, False, 1)
        # fewer micro-batches than stages: F^m B^m, m + 1 gathers
        assert sharded_schedule(engine, 3, 2, pp=4) == ShardedSchedule(2, 1, 1, False, 1)
        assert sharded_schedule(engine, 2, 16, pp=4) == ShardedSchedule(1, 0, 1, False, 1)
    # Megatron-FSDP under Megatron's own pipeline schedules: per micro-batch as without pp
    assert sharded_schedule("megatron", 3, 16, pp=4) == ShardedSchedule(16, 16, 16, True, 1)


C = make_cluster(gpu="H100-SXM-80GB", num_gpus=64)
P = 7e9


def _wire_exposed(plan, engine, m, f=0.0, b=0.0):
    pl = placements(plan, C)
    return _dp_comm(plan, C, pl, P, 0.0, m, f, b, engine, "bf16", 4.0)[:2], pl


def test_wire_counts_the_engine_collectives():
    plan = Plan(dp=64, zero=3, micro_batch=1)
    (wire, exposed), pl = _wire_exposed(plan, "megatron", 4)
    ag, rs = all_gather_s(C, pl["dp"], 2.0 * P), all_gather_s(C, pl["dp"], 4.0 * P)
    assert wire == pytest.approx(4 * (2 * ag + rs), rel=1e-12)
    # no compute to hide behind: everything exposed
    assert exposed == pytest.approx(wire, rel=1e-12)
    # torchtitan with pp 2, 1F1B's F (F B)^3 B: 2 forwards and 3 backwards gather, one
    # reduction
    plan2 = Plan(dp=32, pp=2, zero=3, micro_batch=1)
    (wire2, exposed2), pl2 = _wire_exposed(plan2, "torchtitan", 4, f=1e3, b=1e3)
    ag2, rs2 = all_gather_s(C, pl2["dp"], 2.0 * P), all_gather_s(C, pl2["dp"], 4.0 * P)
    assert wire2 == pytest.approx((2 + 3) * ag2 + rs2, rel=1e-12)
    # long windows hide every gather; the reduction after the last backward stays exposed
    assert exposed2 == pytest.approx(rs2, rel=1e-12)


def test_hsdp_replica_term_per_engine():
    plan = Plan(dp=64, zero=3, micro_batch=1, hsdp_shard=8)
    (w_t, _), pl = _wire_exposed(plan, "torchtitan", 4, 1e3, 1e3)
    (w_m, _), _ = _wire_exposed(plan, "megatron", 4, 1e3, 1e3)
    rep = all_reduce_s(C, pl["dp_replicate"], 4.0 * P / 8)
    assert w_t - w_m == pytest.approx(3 * rep, rel=1e-9)


@pytest.mark.parametrize("engine, pp, hsdp", [("torchtitan", 1, 0), ("torchtitan", 2, 0),
                                               ("olmo-core", 2, 0), ("torchtitan", 1, 8)])
def test_sharding_more_never_exposes_less_for_the_engine(engine, pp, hsdp):
    """search/bound.py's Lemma Z with the engine's schedule: exposed and wire nondecreasing
    along zero 1 -> 2 -> 3 (both overlap switches on)."""
    rng = random.Random(11)
    base = Plan(dp=64 // pp, pp=pp, micro_batch=1, hsdp_shard=hsdp)
    pl = placements(base, C)
    for _ in range(200):
        params = 10 ** rng.uniform(5, 10)
        f, b, m = 10 ** rng.uniform(-5, 0), 10 ** rng.uniform(-5, 0), rng.choice((1, 2, 8))
        out = [_dp_comm(replace(base, zero=z), C, pl, params, 0.0, m, f, b, engine)[:2]
               for z in (1, 2, 3)]
        for i in (0, 1):
            assert out[i][0] <= out[i + 1][0] * (1 + 1e-12)
            # (zero 1 subtracts the hidden parts from the wire: float noise of 1e-20 s)
            assert out[i][1] <= out[i + 1][1] * (1 + 1e-12) + 1e-15, (params, f, b, m, out)


def test_the_backward_window_holds_the_recomputed_forward():
    """The backward's gather of an FSDP unit is issued before its recomputation (it serves
    it: Megatron-FSDP gathers in the PRE_BACKWARD forward, FSDP2's pre_backward unshards
    before the checkpoint replays) and the reduce-scatters run on while later layers
    recompute: where the communication outlasts every backward, full recomputation hides
    exactly its own time more of it (each micro-batch's max(0, X - B) falls by RC)."""
    from meshplan.cost import estimate
    from meshplan.specs.catalog.presets import preset
    from meshplan.specs.workload import Workload
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=64)
    w = Workload(4096, 64, "bf16", framework="megatron")
    out = {}
    for rc in ("none", "full"):
        plan = Plan(dp=8, tp=8, micro_batch=1, recompute=rc, zero=3, sequence_parallel=True)
        e = estimate(preset("llama3.1-70b"), c, w, plan)
        out[rc] = (e.step_time.parts["dp_exposed_s"], e.step_time.parts["recompute_s"],
                   e.num_microbatches)
    (x_none, _, m), (x_full, rc_s, _) = out["none"], out["full"]
    assert m == 8 and rc_s > 0
    assert x_none - x_full == pytest.approx(rc_s, rel=1e-9)
