"""Megatron-Core DDP issues one reduce-scatter and one all-gather per bucket (cost/dp_tail.py
megatron_buckets), and each call pays NCCL's ring latency (cost/step.py _dp_comm)."""

import pytest

from meshplan.cost.collectives import all_gather_s
from meshplan.cost.dp_tail import dense_layer_tensors, megatron_bucket_count, megatron_buckets
from meshplan.cost.step import _dp_comm, placements
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset

# Llama 3.1 8B at tp 1: one layer's weights (fused QKV 4096 x 6144, proj 4096 x 4096, fc1
# 4096 x 28672, fc2 14336 x 4096) and its two norms; the embedding / output matrix.
LAYER = 4096 * 6144 + 4096 * 4096 + 4096 * 28672 + 14336 * 4096 + 2 * 4096
VOCAB = 128256 * 4096


@pytest.mark.parametrize("bucket_size, printed", [
    # mlcommons/training_results_v5.1 441d65f, rank-0 DDP log ("Number of buckets for gradient
    # all-reduce / reduce-scatter"), bf16 buffer + fp8 buffer:
    (134217728, 2 + 33),  # Verda/results/b200_8x8_ngc25.09/llama31_8b/result_0.txt
    (768000000, 1 + 9),   # Oracle/results/8xBM.GPU.B200.8/llama31_8b/result_0.txt
])
def test_bucket_count_matches_the_printed_layout(bucket_size, printed):
    tensors = dense_layer_tensors(preset("llama3.1-8b"), 1)
    assert sum(t for t, _ in tensors) == LAYER
    assert megatron_bucket_count(32, 32, LAYER, (VOCAB, VOCAB), 1, separate_vocab_buffer=True,
                                 bucket_size=bucket_size, layer_tensors=tensors) == printed
    # at layer granularity (a layer the tensor list does not describe) at most one fewer
    # per buffer: the walk closes buckets mid-layer
    n = megatron_bucket_count(32, 32, LAYER, (VOCAB, VOCAB), 1, separate_vocab_buffer=True,
                              bucket_size=bucket_size)
    assert printed - 2 <= n <= printed


def test_bucket_sizes_match_the_printed_layout():
    """The same log prints each bucket's elements: fp8 buffer 176160768 (the last layer's fc2
    and fc1), 31 x 218103808 (a layer's linear weights, across layer boundaries), 41943040
    (the first layer's proj and QKV); bf16 buffer 525336576 (the output layer) and
    525602816 (the 65 norms and the embedding)."""
    tensors = dense_layer_tensors(preset("llama3.1-8b"), 1)
    got = megatron_buckets(32, 32, LAYER, (VOCAB, VOCAB), 1, separate_vocab_buffer=True,
                           bucket_size=134217728, layer_tensors=tensors)
    fp8 = [x for x, kind in got if kind == "fp8"]
    assert fp8 == [176160768] + [218103808] * 31 + [41943040]
    assert [x for x, kind in got if kind == "16bit"] == [VOCAB, VOCAB + 64 * 4096]


def test_a_tiny_bucket_size_makes_every_parameter_a_bucket():
    """Cisco's MLPerf v5.1 Llama 3.1 8B code passes conf/custom.yaml's default bucket_size 64
    to DistributedDataParallelConfig: each of the 6 tensors of the 32 layers (TE: norm fused
    into QKV and fc1) and the embedding and output matrices closes a bucket of its own (the
    final norm, not in the list, would be one more)."""
    tensors = dense_layer_tensors(preset("llama3.1-8b"), 1)
    assert len(tensors) == 6
    assert megatron_bucket_count(64, 32, LAYER, (VOCAB, VOCAB), 1, separate_vocab_buffer=True,
                                 bucket_size=64, layer_tensors=tensors) == 32 * 6 + 2


def test_the_bucket_size_column_is_read_and_checked():
    from meshplan.errors import InputError
    from meshplan.specs.workload import Workload
    from meshplan.validate import prepare
    row = {"model": "Llama 3.1 8B", "layers": "32", "hidden": "4096", "heads": "32",
           "kv_heads": "8", "ffn": "14336", "vocab": "128256", "seq_len": "8192",
           "global_batch_seqs": "64", "gpu": "H100-SXM-80GB", "num_gpus": "64",
           "precision": "fp8", "framework": "nemo", "ddp_bucket_size": "64"}
    assert prepare(row).workload.ddp_bucket_size == 64
    assert prepare(dict(row, ddp_bucket_size="")).workload.ddp_bucket_size == 0
    with pytest.raises(InputError, match="ddp_bucket_size"):
        prepare(dict(row, ddp_bucket_size="-1"))
    with pytest.raises(InputError, match="ddp_bucket_size"):
        Workload(8192, 64, ddp_bucket_size=-5)


def test_default_bucket_size_and_interleaving():
    # Megatron-Core's default bucket_size max(40M, 1M x dp): 256M at dp 256 -> 2 layers a bucket
    assert megatron_bucket_count(256, 32, LAYER) == 16
    assert megatron_bucket_count(256, 32, LAYER, bucket_size=LAYER) == 32
    # only the first of 4 model chunks is bucketed; the other three are one bucket each
    assert megatron_bucket_count(256, 32, LAYER, vpp=4) == 4 + 3


def test_each_bucket_pays_the_ring_latency():
    """NCCL's ring latency per call (src/graph/tuning.cc: (nsteps - nInterSteps) x intraLat +
    nInterSteps x interLat; all-gather / reduce-scatter nsteps = n - 1, nInterSteps = nodes - 1;
    hwLat Ring NVLink / network: LL128 1.9 / 4.0 us, Simple 3.4 / 9.6 us): 35 buckets over 256
    ranks on 32 nodes add 34 calls' latency to each of the reduce-scatter and the all-gather,
    at least LL128's (NCCL picks the cheaper protocol per call) and at most Simple's plus its
    pipeline fill."""
    c = make_cluster(gpu="B200", num_gpus=256)
    plan = Plan(dp=128, cp=2, micro_batch=1)
    pl = placements(plan, c)
    place = pl.get("dp_shard", pl["dp"])
    assert (place.size, place.nodes) == (256, 32)
    params = 8.03e9
    one = _dp_comm(plan, c, pl, params, 0.0, 1, 1.0, 1.0, "megatron", "fp8", 2.0)[0]
    many = _dp_comm(plan, c, pl, params, 0.0, 1, 1.0, 1.0, "megatron", "fp8", 2.0,
                    buckets=((1 / 35, 2.0),) * 35)[0]
    ll128 = (256 - 32) * 1.9e-6 + (32 - 1) * 4.0e-6
    simple = (256 - 32) * 3.4e-6 + (32 - 1) * 9.6e-6
    assert 2 * 34 * ll128 <= many - one <= 2 * 34 * (simple + all_gather_s(c, place, 1.0))
