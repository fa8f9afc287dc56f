"""The cost model's physics against published kernel and end-to-end figures (issue 9)."""

import csv
from pathlib import Path

import pytest

from meshplan.cost import compute, efficiency, estimate, layer
from meshplan.cost.compute import device, matmul_s, op_times
from meshplan.cost.ops import MatMul, Shard, layer_ops
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "bench" / "data" / "heldout_runs.csv"
CALIB = ROOT.parent / "shared" / "validation" / "calibration.csv"


def _tps(model, gpus, gpu, wl, plan):
    return estimate(model, make_cluster(gpu=gpu, num_gpus=gpus), wl, plan).tokens_per_s_per_gpu


def test_large_gemm_runs_at_measured_fraction_times_sustained():
    # FIELD.md: bf16 8192^3 at ~798 of 989 TFLOP/s on one H100; the step sustains
    # efficiency.tensor_derating of that (held clock x SUSTAINED_TENSOR).
    gpu = make_cluster(gpu="H100-SXM-80GB", num_gpus=8).gpu
    dev = device(gpu, "bf16")
    f, _, _ = matmul_s(dev, MatMul("x", 8192, 8192, 8192))
    tflops = 2 * 8192**3 / f / 1e12
    assert tflops == pytest.approx(798 * efficiency.tensor_derating("hopper"), rel=0.02)


def test_small_gemm_loses_efficiency():
    # tile and wave quantisation: OpenXLA's profiled H100 table (bench/data/gemm_points.csv)
    # runs 256 x 4096 x 4096 at 418 TFLOP/s against 780 for 4096^3, a ratio of 0.54; the
    # shape model (cost/gemm.py) reproduces the ratio within 30%
    gpu = make_cluster(gpu="H100-SXM-80GB", num_gpus=8).gpu
    dev = device(gpu, "bf16")
    big = 2 * 4096**3 / matmul_s(dev, MatMul("b", 4096, 4096, 4096))[0]
    small = 2 * 256 * 4096 * 4096 / matmul_s(dev, MatMul("s", 256, 4096, 4096))[0]
    assert small / big == pytest.approx(418 / 780, rel=0.30)


def test_attention_efficiency_grows_with_sequence_like_fa2_curve():
    # FlashAttention-2 paper Fig. 4 (A100, causal, head dim 128): ~110 TFLOP/s at 512
    # against ~210 at 8k, i.e. a ratio near 0.52.
    m = preset("llama3.1-8b")
    gpu = make_cluster(gpu="A100-SXM-80GB", num_gpus=8).gpu
    dev = device(gpu, "bf16")

    def attn_tflops(seq):
        ops = layer_ops(m, False, Shard(seq, 1))
        return ops.attn_fwd_flops / op_times(dev, ops).attn_fwd_s

    assert attn_tflops(512) / attn_tflops(8192) == pytest.approx(0.52, abs=0.08)


def test_fp8_end_to_end_gain_is_far_below_2x():
    # Published dense runs gain ~1.3-1.6x from FP8 end to end, not the 2x of the GEMM peak:
    # attention, norms, element-wise work and the casts stay 16-bit.
    m = preset("llama3.1-8b")
    plan = Plan(dp=8, zero=3, micro_batch=1, recompute="selective")
    bf = _tps(m, 8, "H100-SXM-80GB", Workload(8192, 64, "bf16"), plan)
    f8 = _tps(m, 8, "H100-SXM-80GB", Workload(8192, 64, "fp8"), plan)
    assert 1.15 <= f8 / bf <= 1.65


def test_engine_attention_kernel_matters_on_hopper_only():
    # Megatron/NeMo run TE's cuDNN (FA3-class) attention on Hopper, torch SDPA engines
    # FA2: ~0.62 vs ~0.35 of peak forward (FA3 paper). On A100 both use FA2.
    m = preset("llama3.1-8b")
    plan = Plan(dp=8, zero=3, micro_batch=1, recompute="full")
    for gpu, differs in (("H100-SXM-80GB", True), ("A100-SXM-80GB", False)):
        te = _tps(m, 8, gpu, Workload(16384, 64, "bf16", framework="megatron"), plan)
        fa2 = _tps(m, 8, gpu, Workload(16384, 64, "bf16", framework="torchtitan"), plan)
        assert (te > 1.05 * fa2) == differs


def test_megatron_selective_recompute_keeps_more_than_torchtitan():
    # Megatron's selective recomputation re-runs only the attention core; torchtitan's
    # op-level policy also drops norms, activations and every other GEMM's input
    m = preset("llama3.1-8b")
    plan = Plan(dp=8, zero=3, micro_batch=1, recompute="selective")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    mem = {fw: estimate(m, c, Workload(8192, 64, "bf16", framework=fw), plan)
           .peak_candidates[0].parts["activations"] for fw in ("megatron", "torchtitan")}
    assert mem["megatron"] > 1.3 * mem["torchtitan"]


def test_host_bound_small_layers(monkeypatch):
    # a tiny MoE layer at one short micro-batch is never faster than the host issues it, and
    # with no idle time per kernel it is exactly host-bound; a big micro-batch hides the host
    m = preset("qwen3-30b-a3b")
    gpu = make_cluster(gpu="H100-SXM-80GB", num_gpus=8).gpu

    def times(seq):
        dev = device(gpu, "bf16", "megatron")
        ops = layer_ops(m, True, Shard(seq, 1, ep=8))
        return op_times(dev, ops).fwd_s, ops.host_ops * efficiency.HOST_OP_FWD_S

    t = {seq: times(seq) for seq in (256, 16384)}
    assert t[256][0] >= t[256][1] * (1 - 1e-9)
    assert t[16384][0] > 1.5 * t[16384][1]
    monkeypatch.setattr(efficiency, "KERNEL_GAP_S", 0.0)
    device.cache_clear()  # (devices are cached with the constants they were built with)
    try:
        gpu_s, host_s = times(256)
    finally:
        device.cache_clear()
    assert gpu_s == pytest.approx(host_s)


def test_kernel_gaps_weigh_more_on_small_work():
    # a fixed idle time per kernel costs a 125M-parameter model at a short micro-batch a
    # larger share of its step than a 8B model
    small, big = preset("gpt2"), preset("llama3.1-8b")
    old = efficiency.KERNEL_GAP_S
    try:
        out = {}
        for gap in (0.0, 10e-6):
            efficiency.KERNEL_GAP_S = gap
            compute.device.cache_clear()
            layer.layer_cost.cache_clear()
            out[gap] = [_tps(mm, 8, "H100-SXM-80GB", Workload(1024, 64, "bf16"),
                             Plan(dp=8, micro_batch=1)) for mm in (small, big)]
        loss = [1 - a / b for a, b in zip(out[10e-6], out[0.0])]
        assert loss[0] > 2 * loss[1] > 0
    finally:
        efficiency.KERNEL_GAP_S = old
        compute.device.cache_clear()
        layer.layer_cost.cache_clear()


def test_moe_imbalance_slows_the_expert_rank():
    m = preset("qwen3-30b-a3b")
    wl = Workload(4096, 64, "bf16")
    plan = Plan(dp=8, ep=8, micro_batch=1, zero=1)
    old = efficiency.MOE_LOAD_IMBALANCE
    try:
        t = []
        for imb in (1.0, 1.3):
            efficiency.MOE_LOAD_IMBALANCE = imb
            layer.layer_cost.cache_clear()
            t.append(_tps(m, 8, "H100-SXM-80GB", wl, plan))
        assert t[1] < t[0]
    finally:
        efficiency.MOE_LOAD_IMBALANCE = old
        layer.layer_cost.cache_clear()


def test_heldout_csv_is_sourced_and_diverse():
    rows = list(csv.DictReader(open(HELDOUT, newline="")))
    assert len(rows) >= 40
    assert all(r["source"].strip() and r["derivation"].strip() for r in rows)
    assert len({r["gpu"] for r in rows}) >= 5
    assert len({r["framework"] for r in rows}) >= 3
    assert any(r["arch"] == "moe" for r in rows)
    if CALIB.exists():  # held out means: no row shares a source document with the tuning set
        calib = {r["source"].split("(")[0].strip() for r in csv.DictReader(open(CALIB))}
        assert not calib & {r["source"].split("(")[0].strip() for r in rows}


def test_fused_cross_entropy_holds_fewer_logit_bytes():
    # Megatron's vocab-parallel cross entropy keeps one fp32 buffer (2 + 4 bytes per logit);
    # torch cross_entropy on upcast logits holds log_softmax's fp32 output, the incoming
    # fp32 gradient and the one it writes (4 + 4 + 4); flash-attn's fused xentropy
    # (llm-foundry) the 16-bit logits and a 16-bit gradient (2 + 2)
    m = preset("llama3.1-8b")
    plan = Plan(dp=8, zero=3, micro_batch=2, recompute="full")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    ws = {fw: estimate(m, c, Workload(8192, 64, "bf16", framework=fw), plan)
          .peak_candidates[0].parts["activation_working_set"]
          for fw in ("nemo", "torchtitan", "llm-foundry")}
    tokens_vocab = 2 * 8192 * m.vocab
    assert ws["nemo"] == pytest.approx(6 * tokens_vocab, rel=0.01)
    assert ws["torchtitan"] == pytest.approx(12 * tokens_vocab, rel=0.01)
    assert ws["llm-foundry"] == pytest.approx(4 * tokens_vocab, rel=0.01)


def test_megatron_state_buffers_do_not_fragment():
    # Megatron-LM keeps weights, grads and optimizer shards in contiguous buffers: the
    # allocator's fragmentation share applies to the transient part only
    m = preset("llama3.1-8b")
    plan = Plan(dp=8, zero=1, micro_batch=1, recompute="full")
    c = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
    parts = {fw: estimate(m, c, Workload(8192, 64, "bf16", framework=fw), plan)
             .peak_candidates[0].parts for fw in ("megatron", "deepspeed")}
    frac = efficiency.HOST.allocator_fragmentation
    p = parts["megatron"]
    transient = p["activations"] + p["activation_working_set"] + p["comm_buffers"]
    assert p["allocator_fragmentation"] == pytest.approx(frac * transient, rel=1e-6)
    assert parts["deepspeed"]["allocator_fragmentation"] > 2 * p["allocator_fragmentation"]


def test_heldout_accuracy_does_not_regress():
    # published runs never fitted (bench/data/heldout_runs.csv): 179 trust A/B rows since the
    # Megatron-Bridge containers 25.09-26.08 (with GPT-OSS 120B), MT-NLG 530B, torchtitan's
    # async-TP benchmark and NVIDIA's DGXC recipes (NeMo GPT-3 175B, Llama 3.1 8B/70B/405B,
    # Nemotron-4 15B/340B, DeepSeek-V3; MaxText Llama 3 70B) were added: 8.9% median, 28.1% p90 (the 50
    # rows before: 8.2% / 30.5%). The target is 8% / 20%; this guards the way there.
    from meshplan.validate import validate

    _, s = validate(HELDOUT, with_search_best=False)
    assert s["tokens_rows_trust_ab"] >= 179
    assert s["tokens_median_abs_error"] <= 0.12
    assert s["tokens_p90_abs_error"] <= 0.40


def test_tp_past_a_bridged_pair_is_charged_at_the_slower_tier():
    """H100 PCIe with NVLink bridge pairs (examples/my_gpus.toml, scaleup_domain 2): a tp2
    group sits in one pair (NVLink), a tp4 group spans two pairs and crosses the slower tier
    (the cost model's scale-out link, the NIC's 200 Gb/s). Closed forms for an 8 GiB buffer,
    where bandwidth dominates (a pipeline fill and hops add < 0.5%):
      tp2 ring inside the pair: 2(n-1)/n S = S over NVLink:  S / (nvlink * scaleup)
      tp4, two pairs: ring 2*3/4 S, half of it on the NIC: 0.75 S / (nic * scaleout); tree,
      two domains: each sends S/g = S/2 on its NIC: S / 2 / (nic * scaleout * tree); NCCL
      (and the model) takes the faster."""
    from meshplan.cost.collectives import all_reduce_algo_s, all_reduce_s, group_placement
    from meshplan.cost.efficiency import NETWORK

    c = make_cluster("8xH100-PCIe-80GB", gpu_file=ROOT / "examples" / "my_gpus.toml")
    S = float(2**33)
    nvlink, nic = c.gpu.scaleup_bytes_per_s, c.nic_bytes_per_s
    assert nic == 200 / 8 * 1e9
    tp2, tp4 = group_placement(c, (2, 1)), group_placement(c, (4, 1))
    assert (tp2.tier, tp4.tier, tp4.per_node, tp4.nodes) == ("scale-up", "scale-out", 2, 2)
    assert all_reduce_s(c, tp2, S) == pytest.approx(S / (nvlink * NETWORK.scaleup), rel=5e-3)
    ring = 0.75 * S / (nic * NETWORK.scaleout)
    tree = S / 2 / (nic * NETWORK.scaleout * NETWORK.tree)
    assert all_reduce_algo_s(c, tp4, S, "ring") == pytest.approx(ring, rel=5e-3)
    assert all_reduce_s(c, tp4, S) == pytest.approx(min(ring, tree), rel=5e-3)
    # the step reports the tp axis on the tier it crosses
    wl = Workload(seq_len=2048, global_batch=8)
    model = preset("llama3.1-8b")
    tiers = {tp: next(a.tier for a in estimate(model, c, wl, Plan(dp=8 // tp, tp=tp)).comm
                      if a.axis == "tp") for tp in (2, 4)}
    assert tiers == {2: "scale-up", 4: "scale-out"}
