"""JAX/XLA engines (MaxText): what a full remat runs again, which attention kernel they use,
and the published MaxText Llama 3 70B runs.

Independent truths:
- closed form: a save-nothing jax.checkpoint of a dense layer replays the forward without
  the MLP's output projection, whose product the backward never reads (JAX docs, "Control
  autodiff's saved values with jax.checkpoint": residuals "re-computed from those inputs as
  needed"; XLA removes the dead rest); that GEMM is 2 x tokens x hidden x ffn FLOPs;
- published: NVIDIA/dgxc-benchmarking maxtext/README_70b.md at 0efdb23, Llama 3 70B BF16 on
  128-2048 H100 (FSDP, per-device batch 2, seq 8192), step times 15.44-15.90 s, with the
  recipe's remat_policy=save_qkv_proj and attention=cudnn_flash_te (maxtext/configure.sh).
"""

import csv
from pathlib import Path

import pytest

from meshplan.cost.collectives import Placement
from meshplan.cost.compute import engine_attention
from meshplan.cost.efficiency import kernel_efficiency
from meshplan.cost.layer import CommPlacements, layer_cost
from meshplan.cost.ops import Shard
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.validate import predict_row

SEQ, MB = 8192, 2
ONE = Placement(1, 1)
PLACES = CommPlacements(tp=ONE, cp=ONE, ep=ONE, etp=ONE)
HELDOUT = Path(__file__).resolve().parents[1] / "bench" / "data" / "heldout_runs.csv"


def _layer(engine: str, recompute: str):
    model = preset("llama3.1-70b")
    cluster = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    shard = Shard(seq=SEQ, micro_batch=MB)
    return model, layer_cost(model, cluster, "dense", shard, recompute, PLACES, False, "bf16",
                             engine=engine)


def test_full_remat_skips_the_mlp_output_projection_flops():
    model, jax_full = _layer("maxtext", "full")
    _, torch_full = _layer("megatron", "full")
    fc2_flops = 2 * SEQ * MB * model.hidden * model.ffn
    assert torch_full.hw_flops - jax_full.hw_flops == pytest.approx(fc2_flops)
    # without recomputation the two engines do the same work
    assert _layer("maxtext", "none")[1].hw_flops == pytest.approx(
        _layer("megatron", "none")[1].hw_flops)


def test_full_remat_time_is_the_forward_less_that_gemm():
    _, jax_full = _layer("maxtext", "full")
    _, torch_full = _layer("megatron", "full")
    assert torch_full.recompute_s == pytest.approx(torch_full.fwd_compute_s)
    saved = torch_full.recompute_s - jax_full.recompute_s
    # the down projection is a third of a SwiGLU MLP's GEMM FLOPs, about a quarter of the
    # layer's forward GEMM FLOPs at Llama 3 70B's shape: it must take a real share of time
    assert 0.15 * torch_full.fwd_compute_s < saved < 0.35 * torch_full.fwd_compute_s


def test_maxtext_runs_te_class_attention():
    e = kernel_efficiency("hopper")
    assert engine_attention("hopper", "maxtext") == (e.attention_fwd, e.attention_bwd)
    assert engine_attention("hopper", "torchtitan") != (e.attention_fwd, e.attention_bwd)


def _rows(precision: str) -> list[dict]:
    if not HELDOUT.exists():
        pytest.skip(f"{HELDOUT} is absent")
    return [r for r in csv.DictReader(HELDOUT.open())
            if r["framework"] == "maxtext" and r["precision"] == precision]


def test_published_maxtext_llama3_70b_bf16_step_times():
    rows = _rows("bf16")
    assert len(rows) == 5
    for row in rows:
        res = predict_row(row, with_search_best=False)
        measured = float(row["measured_step_time_s"])
        # within 12% of the published step time at every scale (it was 17-21% slow
        # when the engine's remat replayed the whole layer with FA2-class attention; 8-10%
        # slow after, 8-11% since FSDP's hidden gathers pay the slowdown measured beside NCCL
        # collectives, efficiency.NetworkEfficiency.collective_contention)
        assert res.predicted_step_time_s == pytest.approx(measured, rel=0.12), row["id"]
        assert not res.predicted_oom, row["id"]


@pytest.mark.parametrize("name,kind", [("llama3.1-8b", "dense"), ("llama3.1-70b", "dense"),
                                       ("mixtral-8x7b", "moe")])
def test_recomputation_still_only_adds(name, kind):
    # the search's floors rest on Lemma R (search/bound.py): the input-gradient pass grows
    # along none -> selective -> full; dropping the replayed output projection must keep it
    model = preset(name)
    cluster = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    for tp in (1, 2, 8):
        for seq, mb in ((2048, 1), (8192, 2)):
            places = CommPlacements(tp=Placement(tp, tp), cp=ONE, ep=ONE, etp=ONE)
            shard = Shard(seq=seq, micro_batch=mb, tp=tp, sp=tp > 1)
            xs = [layer_cost(model, cluster, kind, shard, rc, places, False, "bf16",
                             engine="maxtext") for rc in ("none", "selective", "full")]
            vals = [x.bwd_input_s for x in xs]
            assert vals == sorted(vals), (name, tp, seq, vals)
