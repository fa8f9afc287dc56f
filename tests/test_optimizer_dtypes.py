"""Optimizer-state and gradient-buffer dtypes (Workload.optimizer_state_precision,
Workload.grad_reduce_dtype; the runs CSV's optional columns of the same names).

Independent truths:
- closed forms: Apex DistributedFusedAdam with dtype bf16 equal to the model's dtype and
  NeMo's store_params=False keeps two bf16 moments per sharded parameter and no master copy
  (4 bytes / d), its contiguous grad buffer in grad_sync_dtype bf16 (2 bytes, unsharded);
  the default is the ZeRO paper's 12 bytes / d with fp32 gradients (4 bytes);
- published: NVIDIA/dgxc-benchmarking nemotron/README_340b.md at 35a9aec, Nemotron-4 340B
  BF16 on 128 H100 (TP8 PP8 VP12, DP2, GBS 32): 4.61 s a step, the same per-GPU work and
  step time as on 256 GPUs (4.67 s), so it ran without full recomputation; its
  nemotron4-340b-synth.yaml states selective recomputation and that optimizer.
"""

import csv
from pathlib import Path

import pytest

from meshplan.cost import estimate
from meshplan.errors import InputError
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload
from meshplan.validate import predict_row

HELDOUT = Path(__file__).resolve().parents[1] / "bench" / "data" / "heldout_runs.csv"
D = 8


def _parts(zero: int, **kw):
    m = preset("llama3.1-8b")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=D)
    w = Workload(4096, 8, "bf16", framework="nemo", **kw)
    est = estimate(m, c, w, Plan(dp=D, zero=zero, micro_batch=1, recompute="full"))
    return est.peak_candidates[0].parts


def test_bf16_no_master_and_bf16_grads_closed_form():
    base = _parts(1)
    params = base["weights"] / 2  # zero 1 keeps every parameter in bf16
    assert base["gradients"] == pytest.approx(4 * params)
    assert base["optimizer_states"] == pytest.approx(12 * params / D)
    lean = _parts(1, optimizer_state_precision="bf16-no-master", grad_reduce_dtype="bf16")
    assert lean["weights"] == pytest.approx(base["weights"])
    assert lean["gradients"] == pytest.approx(2 * params)
    assert lean["optimizer_states"] == pytest.approx(4 * params / D)


def test_zero3_without_master_keeps_its_16_bit_shard():
    # zero 3: the fp32 master shard is what FSDP gathers; without a master, the bf16 shard
    # itself stays (2 bytes / d more weights than the two gathered units)
    with_master = _parts(3)
    no_master = _parts(3, optimizer_state_precision="bf16-no-master")
    params = _parts(1)["weights"] / 2
    assert no_master["weights"] - with_master["weights"] == pytest.approx(2 * params / D,
                                                                          rel=1e-6)
    assert no_master["optimizer_states"] == pytest.approx(4 * params / D, rel=1e-6)


def test_bad_dtypes_are_refused():
    with pytest.raises(InputError, match="grad_reduce_dtype"):
        Workload(4096, 8, grad_reduce_dtype="fp16")
    with pytest.raises(InputError, match="optimizer_state_precision"):
        Workload(4096, 8, optimizer_state_precision="int8")


def test_published_nemotron_340b_on_128_gpus_runs_without_full_recompute():
    if not HELDOUT.exists():
        pytest.skip(f"{HELDOUT} is absent")
    row = next(r for r in csv.DictReader(HELDOUT.open()) if r["id"] == "H115")
    assert row["num_gpus"] == "128" and row["grad_reduce_dtype"] == "bf16"
    res = predict_row(row, with_search_best=False)
    assert not res.predicted_oom
    assert "rc-full" not in res.plan
    # within 10% of the published 4.61 s (full recomputation made it 36% slow)
    assert res.predicted_step_time_s == pytest.approx(4.61, rel=0.10)
    # with fp32 gradients and a 12-byte optimizer stated, the same layout does not fit
    # without full recomputation: that is what sent the planner to rc-full
    fp32 = dict(row, optimizer_state_precision="fp32", grad_reduce_dtype="fp32", recompute="")
    assert "rc-full" in predict_row(fp32, with_search_best=False).plan
    # left blank, the dtypes are searched where they decide the fit (validate._lean_search):
    # the engine's lean dtypes let the faster layout fit, and the row says so
    blank = predict_row(dict(row, optimizer_state_precision="", grad_reduce_dtype="",
                             recompute=""), with_search_best=False)
    assert "rc-full" not in blank.plan
    assert any("lean dtypes" in n for n in blank.notes)


def test_megatron_export_reduces_grads_in_bf16():
    # the flag exists in Megatron-LM's own argument table (tests/data, read from
    # megatron/training/arguments.py), and the export says what it cannot reproduce
    from meshplan.export.megatron import megatron_args
    from meshplan.scenario import Scenario
    table = Path(__file__).resolve().parent / "data" / "megatron_lm_arguments.tsv"
    known = {line.split("\t")[0] for line in table.read_text().splitlines()
             if line and not line.startswith("#")}
    m = preset("llama3.1-8b")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    w = Workload(4096, 8, "bf16", optimizer_state_precision="bf16-no-master",
                 grad_reduce_dtype="bf16")
    flags, notes = megatron_args(Scenario(m, c, w, Plan(dp=8, zero=1, micro_batch=1)))
    names = [f for f, _ in flags]
    assert "--grad-reduce-in-bf16" in names and set(names) <= known
    assert any("fp32 main copy" in n for n in notes)
    plain, _ = megatron_args(Scenario(m, c, Workload(4096, 8, "bf16"),
                                      Plan(dp=8, zero=1, micro_batch=1)))
    assert "--grad-reduce-in-bf16" not in [f for f, _ in plain]


def _dp_axis(**kw):
    m = preset("llama3.1-8b")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=16)  # two nodes: DP over the NICs
    w = Workload(4096, 32, "bf16", framework="nemo", **kw)
    est = estimate(m, c, w, Plan(dp=16, zero=1, micro_batch=1, recompute="full"))
    return next(a for a in est.comm if a.axis == "dp")


def test_bf16_gradient_reduction_sends_half_the_gradient_bytes():
    # Megatron-Core reduces in the gradient buffer's dtype (param_and_grad_buffer.py:
    # "torch.float if grad_reduce_in_fp32, else param.dtype"). Closed form of a ring
    # reduce-scatter + all-gather of P parameters over d ranks, bytes sent per rank:
    # (g + 2) * P * (d - 1) / d, g = 4 (fp32 gradients) or 2 (bf16); the weights' all-gather
    # is bf16 either way.
    fp32, bf16 = _dp_axis(), _dp_axis(grad_reduce_dtype="bf16")
    params = fp32.bytes_per_step / (6 * 15 / 16)
    assert bf16.bytes_per_step == pytest.approx(4 * params * 15 / 16, rel=1e-9)
    # the reduce-scatter's bandwidth time halves, the all-gather's stays, and both pay the same
    # fixed latency per Megatron-Core bucket (one NCCL call each, cost/dp_tail.py): with
    # bandwidth parts 2u (fp32 reduce-scatter) and u (bf16 all-gather) and latency L,
    # fp32 = 3u + L and bf16 = 2u + L, so L = fp32 - 3 (fp32 - bf16). L must be what NCCL's
    # ring charges for n buckets over 16 ranks on 2 nodes (src/graph/tuning.cc, as in
    # tests/test_dp_buckets.py: LL128 1.9 / 4.0 us intra / inter per step at least, Simple
    # 3.4 / 9.6 us plus one pipeline fill at most), for each of the two collectives.
    import math
    from meshplan.cost.collectives import all_gather_s
    from meshplan.cost.dp_tail import megatron_bucket_size
    from meshplan.cost.step import placements
    assert bf16.wire_s < fp32.wire_s
    latency = fp32.wire_s - 3 * (fp32.wire_s - bf16.wire_s)
    n = math.ceil(params / megatron_bucket_size(16))
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=16)
    place = placements(Plan(dp=16, zero=1, micro_batch=1, recompute="full"), c)["dp"]
    assert (place.size, place.nodes) == (16, 2)
    ll128 = (16 - 2) * 1.9e-6 + (2 - 1) * 4.0e-6
    simple = (16 - 2) * 3.4e-6 + (2 - 1) * 9.6e-6
    assert 2 * (n - 1) * ll128 <= latency <= 2 * n * (simple + all_gather_s(c, place, 1.0))


def test_cli_grad_reduce_dtype_flag_reaches_the_estimate(tmp_path):
    """--grad-reduce-dtype sets the workload's gradient dtype, on flags alone and over a
    scenario's [workload]; the predicted gradient memory is the closed form 2 vs 4 bytes."""
    import contextlib
    import io
    import json

    from meshplan.cli import main

    def run(argv):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(argv + ["--json"]) in (0, None)
        return json.loads(buf.getvalue())

    base = ["predict", "--model", "llama3.1-8b", "--gpus", f"{D}xH100-SXM-80GB", "--seq-len",
            "4096", "--global-batch", "8", "--plan", f"dp{D} tp1 pp1 zero1 mb1 rc-full"]
    direct = {g: estimate(preset("llama3.1-8b"), make_cluster(gpu="H100-SXM-80GB", num_gpus=D),
                          Workload(4096, 8, "bf16", grad_reduce_dtype=g),
                          Plan(dp=D, zero=1, micro_batch=1, recompute="full"))
              for g in ("fp32", "bf16")}
    flags = {g: run(base + ["--grad-reduce-dtype", g]) for g in ("fp32", "bf16")}
    for g in ("fp32", "bf16"):
        assert flags[g]["tokens_per_s_per_gpu"] == pytest.approx(
            direct[g].tokens_per_s_per_gpu, rel=1e-9)
    # zero 1 keeps every gradient: 4 vs 2 bytes a parameter, the bf16 weights' 2 bytes beside them
    g32, g16 = (flags[g]["memory_per_stage_gib"][0] for g in ("fp32", "bf16"))
    assert g32["gradients"] == pytest.approx(2 * g32["weights"], rel=1e-9)
    assert g16["gradients"] == pytest.approx(g16["weights"], rel=1e-9)
    f = tmp_path / "s.toml"
    f.write_text('[model]\npreset = "llama3.1-8b"\n[cluster]\ngpus = "%dxH100-SXM-80GB"\n'
                 '[workload]\nseq_len = 4096\nglobal_batch = 8\ngrad_reduce_dtype = "fp32"\n' % D)
    over = run(["predict", "--scenario", str(f), "--plan", f"dp{D} tp1 pp1 zero1 mb1 rc-full",
                "--grad-reduce-dtype", "bf16"])
    assert over["tokens_per_s_per_gpu"] == pytest.approx(flags["bf16"]["tokens_per_s_per_gpu"],
                                                         rel=1e-9)
