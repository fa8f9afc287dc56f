"""Attention time without flash-class kernels (pre-Ampere parts under Megatron-family engines).

FlashAttention 2 and cuDNN / Transformer Engine fused attention need Ampere or newer, so a
Megatron-LM run on V100 materialises the s x s scores (cost/attention_memory.py) and its
attention core is two batched GEMMs plus Megatron's fused scale-mask-softmax kernel and a
dropout over the scores. The closed form below (each pass reads or writes the whole score
tensor at HBM speed) is what the step must charge; engines that call PyTorch SDPA keep its
memory-efficient kernel on the same part.
"""
import pytest

from meshplan.cost.compute import device, gemm_time_s
from meshplan.cost.layer import layer_ops_times
from meshplan.scenario import make_cluster
from meshplan.cost.ops import Shard
from meshplan.specs.catalog.presets import load_model

SEQ = 4096


def _attn(engine: str, gpu: str = "V100-SXM-32GB"):
    model = load_model("llama3.1-8b")
    ops, dev, t = layer_ops_times(model, make_cluster(f"8x{gpu}"), "dense",
                                  Shard(SEQ, 1, tp=8), "fp16", engine)
    return ops, dev, t


def test_megatron_on_v100_charges_the_scores_passes():
    ops, dev, t = _attn("megatron")
    assert dev.unfused_attention
    e, b, hbm = ops.score_elements, dev.matmul_bytes, dev.hbm_bytes_per_s
    s, d = ops.attn_seq, ops.score_head_dim
    gemm = gemm_time_s(dev, s, s, d, count=e / (s * s))
    # q k^T writes the scores and probs x v reads them; fused softmax (read + write) and
    # dropout (read + write + a 1-byte mask): 4 score passes and one mask pass
    expected = 2 * max(gemm, b * e / hbm) + (4 * b + 1) * e / hbm
    assert t.attn_fwd_s == pytest.approx(expected, rel=1e-9)
    # 32 heads / tp 8 x 4096^2 fp16 scores: 128 MiB; each pass alone costs ~0.2 ms on V100
    assert e * b / 2**20 == pytest.approx(128)
    assert t.attn_fwd_s > (4 * b + 1) * e / hbm


def test_sdpa_engines_and_ampere_keep_the_flash_path():
    _, dev_tt, t_tt = _attn("torchtitan")  # PyTorch SDPA's memory-efficient kernel
    _, dev_mg, t_mg = _attn("megatron")
    assert not dev_tt.unfused_attention
    assert t_mg.attn_fwd_s > t_tt.attn_fwd_s
    _, dev_a100, _ = _attn("megatron", "A100-SXM-80GB")
    assert not dev_a100.unfused_attention
    # the fp32 device keeps torch's unfused softmax (8 forward passes), not the fused one
    assert device(load_gpu("A100-SXM-80GB"), "fp32").unfused_passes[0] == 8


def load_gpu(name):
    from meshplan.specs.catalog.gpus import GPUS
    return GPUS[name]


def test_a_run_that_states_unfused_attention_gets_it_on_any_part():
    """JAX-Toolbox's Pax GPT-126M numbers were taken without flash attention (its README):
    attention_kernel 'unfused' puts the scores' passes and memory on an H100 too."""
    from meshplan.cost.attention_memory import materialises_scores
    from meshplan.specs.workload import Workload
    assert Workload(2048, 8, "bf16", attention_kernel="unfused").attention_kernel == "unfused"
    assert materialises_scores("hopper", "paxml", "unfused")
    assert not materialises_scores("hopper", "paxml")
    model = load_model("llama3.1-8b")
    cluster = make_cluster("8xH100-SXM-80GB")
    _, dev_u, t_u = layer_ops_times(model, cluster, "dense", Shard(SEQ, 1, tp=8), "bf16", "paxml",
                                    attention_kernel="unfused")
    _, dev_f, t_f = layer_ops_times(model, cluster, "dense", Shard(SEQ, 1, tp=8), "bf16", "paxml")
    assert dev_u.unfused_attention and not dev_f.unfused_attention
    assert t_u.attn_fwd_s > 2 * t_f.attn_fwd_s


def test_eager_attention_charges_each_op_its_own_passes():
    """Megatron-LM's 2019 attention (the paper's GPT-2 runs) has no fused softmax kernel: the
    scale, the mask (a product and a difference), the softmax and the dropout each read and
    write the fp16 scores, 10 passes forward and 9 backward, against the fused kernel's 4 and
    5 (compute.EAGER_SOFTMAX_PASSES: counted from that code). The two batched GEMMs do not
    change."""
    from meshplan.specs.workload import Workload
    assert Workload(1024, 8, "fp16", attention_kernel="unfused-eager").attention_kernel \
        == "unfused-eager"
    model = load_model("llama3.1-8b")
    cluster = make_cluster("8xV100-SXM-32GB")
    shard = Shard(SEQ, 1, tp=8)
    ops, dev, t = layer_ops_times(model, cluster, "dense", shard, "fp16", "megatron",
                                  attention_kernel="unfused-eager")
    _, dev_f, t_f = layer_ops_times(model, cluster, "dense", shard, "fp16", "megatron")
    assert dev.unfused_attention and dev_f.unfused_attention
    e, b, hbm = ops.score_elements, dev.matmul_bytes, dev.hbm_bytes_per_s
    s, d = ops.attn_seq, ops.score_head_dim
    gemm = gemm_time_s(dev, s, s, d, count=e / (s * s))
    assert t.attn_fwd_s == pytest.approx(2 * max(gemm, b * e / hbm) + (10 * b + 1) * e / hbm,
                                         rel=1e-9)
    # the extra passes alone: 6 more forward, 4 more backward, each b bytes per score
    assert t.attn_fwd_s - t_f.attn_fwd_s == pytest.approx(6 * b * e / hbm, rel=1e-9)
    assert t.bwd_input_s - t_f.bwd_input_s == pytest.approx(4 * b * e / hbm, rel=1e-9)
    assert t.bwd_weight_s == t_f.bwd_weight_s
    # stated on a part with flash kernels, the scores are materialised there too
    from meshplan.cost.attention_memory import materialises_scores
    assert materialises_scores("hopper", "megatron", "unfused-eager")
