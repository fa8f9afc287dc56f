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
