"""The cost of a tied embedding split over pipeline ranks (cost/pipeline.py
tied_embedding_sync): the last rank's copy of the embedding, and the all-reduce of the two
copies' gradients over the embedding group each step (Megatron-Core finalize_model_grads.py
_allreduce_word_embedding_grads), which the step time did not charge before."""

import dataclasses

import pytest

from meshplan.cost import estimate
from meshplan.pipeline.from_cost import simulate_plan
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

LLAMA = preset("llama3.2-1b")  # tied, vocab 128,256, hidden 2,048
UNTIED = dataclasses.replace(LLAMA, name="llama3.2-1b-untied", tied_embeddings=False)
CLUSTER = make_cluster("16xRTX-2080-Ti-11GB")  # 8 per node: the two pp stages on two nodes
WL = Workload(4096, 32)
PLAN = Plan(dp=4, tp=2, pp=2, zero=1, schedule="zb_h1")


def _emb(est):
    return next((c for c in est.comm if c.axis == "emb"), None)


def test_the_embedding_group_all_reduce_is_charged_and_exposed():
    est = estimate(LLAMA, CLUSTER, WL, PLAN)
    c = _emb(est)
    # the rank's vocab-parallel gradient, fp32 main_grad: 4 x 128,256 x 2,048 / tp 2
    assert c.bytes_per_step == 4 * 128_256 * 2_048 / 2
    assert c.group_size == 2 and c.tier == "scale-out"  # stage 1 starts on the second node
    # nothing overlaps it (finalize_model_grads runs after the backward): wire = exposed
    assert est.step_time.parts["tied_embedding_s"] == c.wire_s == c.exposed_s > 0
    # a 2-rank all-reduce sends the whole buffer once: no faster than the NIC moves it
    assert c.wire_s >= c.bytes_per_step / CLUSTER.nic_bytes_per_s
    # the step is the untied model's plus this part (same layers, same parameter counts)
    untied = estimate(UNTIED, CLUSTER, WL, PLAN)
    assert est.step_time_s == pytest.approx(untied.step_time_s + c.wire_s, rel=1e-12)


@pytest.mark.parametrize("model,plan", [
    (UNTIED, PLAN),  # no copy
    (LLAMA, PLAN.with_(pp=1, dp=8)),  # no pipeline
    (LLAMA, PLAN.with_(vpp=2, schedule="zb_v")),  # V: the last chunk is back on rank 0
])
def test_no_all_reduce_where_one_rank_holds_both_ends(model, plan):
    est = estimate(model, CLUSTER, WL, plan)
    assert est.step_time.parts["tied_embedding_s"] == 0.0 and _emb(est) is None


def test_the_last_rank_holds_its_copy_as_an_untied_output_layer():
    """The copy costs the last rank what an untied output layer costs (weights, gradients,
    optimizer states: the same parameter count)."""
    tied, untied = estimate(LLAMA, CLUSTER, WL, PLAN), estimate(UNTIED, CLUSTER, WL, PLAN)
    for k in ("weights", "gradients", "optimizer_states"):
        assert tied.memory[1].parts[k] == untied.memory[1].parts[k] > 0


@pytest.mark.parametrize("schedule", ["zb_v", "dualpipev"])
def test_v_schedule_rank_0_holds_both_copies_as_the_runtime_builds_them(schedule):
    """Bug: under a V schedule the cost model stored the tied matrix once on rank 0, but the
    runtime builds chunk 0 and the last chunk there as two modules, each with its own copy
    (runtime/model.py Transformer; TiedEmbedding.copies: 2 under V), so weights, gradients
    and AdamW states are held twice (`meshplan dryrun` of a tied tiny Qwen3, pp2 dualpipev,
    rank 0: gradients 0.53 MiB and optimizer states 1.60 MiB measured, 0.41 / 1.22 charged).
    Truth: the parameters of the runtime's own chunk modules of each rank."""
    torch = pytest.importorskip("torch")
    from meshplan.cost.memory import PARAM_BYTES
    from meshplan.runtime.model import Transformer
    from meshplan.runtime.pipeline import chunk_layers, local_chunks

    tiny = dataclasses.replace(preset("tiny-llama"), name="tiny-tied", tied_embeddings=True)
    plan = Plan(pp=2, vpp=2, zero=0, schedule=schedule, micro_batch=1)
    est = estimate(tiny, make_cluster("2xH100-SXM-80GB"), Workload(32, 8), plan)
    layers, last = chunk_layers(tiny, plan), plan.num_chunks - 1
    with torch.device("meta"):
        for r in range(plan.pp):
            built = sum(p.numel() for c in local_chunks(plan, r)
                        for p in Transformer(tiny, layers[c], c == 0, c == last).parameters())
            assert est.memory[r].parts["weights"] / PARAM_BYTES == built, r


def test_simulate_carries_the_part_outside_the_pipeline():
    sim = simulate_plan(LLAMA, CLUSTER, WL, PLAN)
    est = estimate(LLAMA, CLUSTER, WL, PLAN)
    assert sim.step_parts["tied_embedding_s"] == est.step_time.parts["tied_embedding_s"] > 0
