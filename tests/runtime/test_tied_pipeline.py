"""Tied embeddings over pipeline stages (Megatron-LM's layout).

The last chunk holds its own copy of the embedding as its output layer, drawn equal to it;
after the backward the two copies' gradients are summed over the embedding group (the ranks
holding chunk 0 and the last chunk of each pipeline group; one rank under V schedules), so
both take the tied weight's step. Before, Transformer refused the split ("tied embeddings
cannot be split over pipeline stages") while `meshplan plan` proposed such plans.

Checked as test_equivalence.py checks every layout: 3 AdamW steps on forked gloo ranks
against one process training the tied model whole (same tolerance, 1e-5 relative). Without
the gradient sum the pp2 case is off by 1.2e-4 in the loss and 4.9e-2 in the weights
(measured), so the cases fail without it.
"""

import dataclasses
import json

import pytest
import torch

from meshplan.plan import Plan
from meshplan.runtime.launch import fork_ranks
from meshplan.runtime.train import RunConfig, Trainer
from meshplan.specs.catalog.presets import preset

from .crash_retry import equivalence, global_batch
from .in_process import cli

pytestmark = pytest.mark.slow
TOL = 1e-5
TIED = dataclasses.replace(preset("tiny-llama"), name="tiny-tied", tied_embeddings=True)

CASES = {  # 4 layers: chunk 0 holds the embedding, the last chunk the output copy
    "pp2-1f1b": dict(pp=2),  # embedding group = the pp group
    "pp4-zb_h1": dict(pp=4, schedule="zb_h1"),  # group of ranks 0 and 3 of 4
    "pp2-interleaved": dict(pp=2, vpp=2),  # chunk 3 on the last rank
    "pp2-zbv": dict(pp=2, vpp=2, schedule="zb_v"),  # chunk 3 back on rank 0: summed in place
    "dp2-pp2-zero3": dict(dp=2, pp=2, zero=3),  # FSDP2 shards of both copies
    "pp2-tp2": dict(pp=2, tp=2),  # vocab-parallel shards of both copies
}


def _cfg(fields, steps=3, batch=0):
    plan = Plan(**fields)
    return RunConfig(TIED, plan, seq_len=16, global_batch=batch or global_batch(plan),
                     steps=steps, lr=5e-4, adam_eps=1e-6)


@pytest.mark.parametrize("case", list(CASES))
def test_tied_pipeline_layouts_match_single_process(case):
    rep = equivalence(_cfg(CASES[case]), Plan(**CASES[case]).world_size)
    assert rep.loss_rel <= TOL, rep
    assert rep.param_rel <= TOL, rep
    assert rep.grad_rel <= TOL, rep
    assert not rep.missing_grads, rep
    # the tied model's 38 parameters, and the output copy compared with the embedding
    assert rep.names_checked == 39, rep


def _copies(rank, world, cfg):
    tr = Trainer(cfg, torch.device("cpu"))
    for s in range(cfg.steps):
        tr.train_step(s)
    # as numpy arrays: a tensor crosses the result queue through torch's shared-memory
    # reducer, which hung once here (the rank never exited)
    return {n: p.numpy() for n, (p, _) in tr.full_state().items()
            if n in ("tok_embeddings.weight", "output.weight")}


@pytest.mark.parametrize("fields", [dict(dp=2, pp=2, tp=2, zero=3),
                                    dict(pp=2, vpp=2, schedule="zb_v")])
def test_the_two_copies_stay_bit_identical(fields):
    """Same start, same summed gradient, same AdamW step: the copies are equal to the bit
    after the steps, on every rank that holds one (FSDP x TP shards gathered)."""
    res = fork_ranks(_copies, Plan(**fields).world_size, _cfg(fields), timeout_s=300)
    held = [t for r in res for t in r.values()]
    assert len(held) == 2 * Plan(**fields).world_size // Plan(**fields).pp
    assert all((held[0] == t).all() for t in held[1:])


def _worker(rank, world, run):
    from meshplan.runtime.worker import run_worker
    return run_worker(run, rank, torch.device("cpu"))


def _run(cfg, **opts):
    from meshplan.runtime.worker import config_to_json
    run = json.loads(config_to_json(cfg, **opts))
    return fork_ranks(_worker, cfg.plan.world_size, run, timeout_s=240)


@pytest.mark.parametrize("save,load", [(dict(pp=2), dict(dp=2, zero=3)),
                                       (dict(dp=2, zero=3), dict(pp=2, tp=2))])
def test_checkpoint_holds_one_tied_weight_across_layouts(tmp_path, save, load):
    """A checkpoint keeps the tied weight and its AdamW state under the whole model's names
    whatever the layout: saved split over pp 2 and resumed whole (or the reverse), steps 3-4
    give the uninterrupted run's losses."""
    full = _run(_cfg(save, 4, 8), ckpt_dir=str(tmp_path), ckpt_every=2)[0]["losses"]
    res = _run(_cfg(load, 4, 8), resume=str(tmp_path / "step-1"))[0]
    assert res["resumed_from"] == 2
    assert max(abs(x - y) / y for x, y in zip(res["losses"], full)) < TOL, (res["losses"], full)


def test_the_plan_that_plan_proposes_for_a_tied_model_is_run():
    """`meshplan plan` (no --engine) proposes a pipeline plan for Llama 3.2 1B (tied) on 16
    11-GiB GPUs (dp2 tp2 pp2 vpp2 cp2 zb_v since the cost model charges rank 0 under V both
    copies of the tied matrix, as the runtime holds them; dp4 tp2 pp2 vpp2 zb_v before that,
    since the cost model charges the embedding group's all-reduce, which zb_v avoids; dp4 tp2
    pp2 zb_h1 before); every rank of it now builds
    and steps (the dry run builds each pipeline rank's chunks with all wrappers and trains
    two steps on fake tensors). Before, the rank building the last chunk refused it, exit 2."""
    scenario = ("--model", "llama3.2-1b", "--gpus", "16xRTX-2080-Ti-11GB", "--seq-len", "4096",
                "--global-batch", "32")
    r = cli("plan", *scenario, "--top", "1", "--json")
    assert r.returncode == 0, r.stderr
    top = json.loads(r.stdout)["top"][0]["plan"]
    assert top["pp"] > 1
    plan = Plan.from_dict(top)
    r = cli("dryrun", *scenario, "--plan", plan.describe())
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"pp rank {plan.pp - 1}: measured peak" in r.stdout


def test_dry_run_measures_the_copy_the_cost_model_charges():
    """On pp 2 the tied model's last rank holds its copy: the dry run measures there the
    optimizer states of the untied model (same parameters), and the cost model charges the
    same; on rank 0 too (the embedding is the same tensor either way)."""
    from meshplan.cost import estimate
    from meshplan.runtime.dryrun import agreement, dryrun
    from meshplan.scenario import make_cluster
    from meshplan.specs.workload import Workload
    untied = preset("tiny-llama")
    plan = Plan(pp=2)
    got = {}
    for spec in (TIED, untied):
        mem = dryrun(RunConfig(spec, plan, seq_len=64, global_batch=8, dtype="bf16-mixed"))
        est = estimate(spec, make_cluster("2xH100-SXM-80GB"), Workload(64, 8), plan)
        got[spec.name] = [agreement(mem[r], est.memory[r].parts)["optimizer_states"]
                          for r in range(2)]
    assert got[TIED.name] == got[untied.name]
    measured, predicted = got[TIED.name][1]
    assert abs(measured - predicted) / predicted < 1e-3  # 1,306,448 vs 1,306,368 bytes
