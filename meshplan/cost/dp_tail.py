"""The part of data-parallel communication that no overlap can hide: the last bucket.

Overlapped gradient reduction launches one collective per bucket as backward fills it; the
bucket holding the first layers' gradients fills when backward ends, so its reduction runs
after all compute (Li et al., "PyTorch Distributed: Experiences on Accelerating Data
Parallel Training", VLDB 2020, sec. 3.2.3 and fig. 2: the final bucket's all-reduce is not
overlapped). With a sharded optimizer the next step's forward likewise waits for the first
bucket's parameter all-gather. So the exposed part is at least one bucket's reduce-scatter
(or all-reduce) plus, with parameter gathering, one bucket's all-gather.

Bucket sizes, per engine:
- Megatron-Core DDP (Megatron-LM, NeMo, Megatron-Bridge): ``bucket_size`` defaults to
  max(40,000,000, 1,000,000 x dp_cp size) parameters, "larger DP sizes need larger buckets
  to ensure collectives do not become latency-bound" (DistributedDataParallelConfig,
  megatron/core/distributed/distributed_data_parallel_config.py; applied in
  DistributedDataParallel.__init__). With interleaving only the first model chunk is
  bucketed (training.py: ``disable_bucketing = model_chunk_idx > 0``), so a bucket is at
  most one chunk's parameters.
- PyTorch DDP: ``bucket_cap_mb`` = 25 MiB of gradients (torch.nn.parallel.DistributedDataParallel).
- FSDP / ZeRO-3 (zero >= 2): one layer (one FSDP unit per transformer block, as torchtitan
  and DeepSpeed wrap them), and never less than the engine's zero-1 bucket, so the tail
  only grows along the ZeRO ladder (search/bound.py's Lemma Z: sharding more never hides
  more).
At 8 GPUs the tail is a few milliseconds; over hundreds of nodes Megatron's bucket grows
with dp and its reduce-scatter over the NICs takes tens of milliseconds.

Megatron-Core never splits a parameter between buckets: walking the parameters in reverse
(backward) order it closes a bucket at the first parameter boundary where the bucket holds at
least ``bucket_size`` elements (param_and_grad_buffer.py, _ParamAndGradBuffer.__init__: "if
(param_end_index - bucket_start_index) >= bucket_size: _update_bucket_metadata"). The rank's
first parameter, the word embedding on the first pipeline stage, is therefore in the last
bucket whole: the tail holds at least vocab x hidden / tp parameters (``first_param``). The
MLPerf v5.1 Llama 3.1 8B logs print it: "Params for bucket 2 (525336576 elements" = 128256 x
4096 (mlcommons/training_results_v5.1 Verda/results/b200_8x8_ngc25.09/llama31_8b/result_0.txt).

The same walk sets how many collectives a step issues: one reduce-scatter per bucket as its
gradients are ready (_ParamAndGradBucketGroup.start_grad_sync) and one all-gather per bucket,
each dispatched when the previous bucket's is waited on in the forward pre-hook
(finish_param_sync: "next_param_gather_bucket_group.start_param_sync()"). Every call pays
NCCL's ring latency, n - 1 steps (cost/collectives.py, NCCL tuning.cc), so at hundreds of
ranks the bucket count matters as much as the bytes (``megatron_bucket_count``).
"""

from __future__ import annotations

from functools import lru_cache

MEGATRON_BUCKET_FLOOR_PARAMS = 40_000_000  # DistributedDataParallelConfig.bucket_size default
MEGATRON_BUCKET_PER_DP_PARAMS = 1_000_000
TORCH_DDP_BUCKET_BYTES = 25 * 2**20  # bucket_cap_mb default


def megatron_bucket_size(n_dp: int) -> float:
    """Megatron-Core's default bucket_size, in parameters, for a data-parallel (x context
    parallel) group of ``n_dp`` ranks."""
    return max(MEGATRON_BUCKET_FLOOR_PARAMS, MEGATRON_BUCKET_PER_DP_PARAMS * n_dp)


def bucket_params(engine_megatron: bool, zero: int, n_dp: int, chunk_params: float,
                  layer_params: float, grad_bytes: float, first_param: float = 0.0,
                  bucket_size: float | None = None) -> float:
    """Parameters in the last (unhideable) bucket of one rank's data-parallel reduction.
    ``first_param``: the rank's first parameter in model order where it is large (the word
    embedding on the first stage); Megatron-Core keeps it whole in the last bucket.
    ``bucket_size``: the run's Megatron-Core bucket_size where it sets one."""
    if engine_megatron:
        b = max(megatron_bucket_size(n_dp) if bucket_size is None else bucket_size,
                first_param)
    else:
        b = TORCH_DDP_BUCKET_BYTES / grad_bytes
    if zero >= 2:  # a unit is a whole layer, and no smaller than the engine's bucket
        b = max(b, layer_params)
    return min(b, chunk_params)


def dense_layer_tensors(model, tp: int) -> tuple[tuple[float, bool], ...] | None:
    """(elements on one rank, is a linear weight) of each parameter tensor of one dense
    transformer layer in the order Megatron-Core registers them (Transformer Engine modules:
    the attention norm fused into the QKV linear, QKV, output projection, the MLP norm fused
    into fc1, fc1, fc2, with their biases); None for a layer the list does not describe (MLA,
    parallel blocks, extra norms, QK norms), counted at layer granularity instead."""
    if (model.is_mla or model.parallel_block or model.extra_layer_norms or model.qk_norm
            or model.attention_sinks):
        return None
    h = model.hidden
    qkv = model.q_dim + 2 * model.kv_dim
    norm = [(float(h), False)] * (2 if model.norm == "layernorm" else
                                  0 if model.norm == "layernorm_noparams" else 1)
    bias = model.linear_bias
    out = list(norm) + [(h * qkv / tp, True)]
    if bias or model.qkv_bias:
        out.append((qkv / tp, False))
    out.append((model.attn_out_dim * h / tp, True))
    if bias or model.o_bias:
        out.append((float(h), False))
    out += list(norm)
    m = model.mlp_matrices
    out.append(((m - 1) * h * model.ffn / tp, True))
    if bias:
        out.append(((m - 1) * model.ffn / tp, False))
    out.append((h * model.ffn / tp, True))
    if bias:
        out.append((float(h), False))
    return tuple(out)


@lru_cache(maxsize=4096)
def _walk(tensors: tuple[float, ...], b: float) -> tuple[float, ...]:
    """The buckets (their sizes) Megatron-Core's walk makes over ``tensors`` (in backward
    order)."""
    out, acc = [], 0.0
    for t in tensors:
        acc += t
        if acc >= b:
            out.append(acc)
            acc = 0.0
    return tuple(out + ([acc] if acc > 0 else []))


def megatron_buckets(n_dp: int, layers: int, layer_params: float,
                     vocab_matrices: tuple[float, ...] = (), vpp: int = 1,
                     separate_vocab_buffer: bool = False, bucket_size: float | None = None,
                     layer_tensors: tuple[tuple[float, bool], ...] | None = None
                     ) -> tuple[tuple[float, str], ...]:
    """The buckets of one rank's non-expert parameters in one step under Megatron-Core's DDP,
    each one reduce-scatter and one all-gather: (parameters, buffer), buffer "fp8" for the
    FP8 linear weights' buffer, "16bit" for the 16-bit one, "chunk" for an unbucketed
    interleaved chunk (both kinds). The walk above runs over the first model chunk's
    parameters in backward order, per tensor where ``layer_tensors`` (dense_layer_tensors)
    lists a layer's, else per layer of ``layer_params``. ``separate_vocab_buffer``: the
    layers' linear weights are FP8 parameters (fp8_param_gather), so the 16-bit tensors
    (embedding / output matrices, norms, biases) sit in a buffer, and buckets, of their own
    (_allocate_buffers_for_parameters groups parameters by dtype). With interleaving only
    the first model chunk is bucketed; each other chunk is one bucket (training.py:
    ``disable_bucketing = model_chunk_idx > 0``). ``layers``: the rank's layers over all its
    chunks; ``vocab_matrices``: the sizes of its embedding / output matrices in the first
    chunk; ``bucket_size``: Megatron-Core's default (megatron_bucket_size) if None, else the
    run's DistributedDataParallelConfig.bucket_size."""
    b = megatron_bucket_size(n_dp) if bucket_size is None else bucket_size
    nv = max(vpp, 1)
    chunk_layers = -(-max(layers, 0) // nv)
    per_layer = layer_tensors or ((float(max(layer_params, 1.0)), True),)
    body = list(reversed(per_layer)) * chunk_layers
    vocab = [float(v) for v in vocab_matrices]
    if separate_vocab_buffer:
        out = tuple((x, "fp8") for x in _walk(tuple(t for t, lin in body if lin), b))
        # the output matrix comes first in backward order, the embedding last
        out += tuple((x, "16bit") for x in _walk(
            tuple(vocab[1:] + [t for t, lin in body if not lin] + vocab[:1]), b))
    else:
        # the output matrix comes first in backward order, the embedding last
        out = tuple((x, "16bit") for x in _walk(tuple(vocab[1:] + [t for t, _ in body]
                                                      + vocab[:1]), b))
    chunk = sum(t for t, _ in per_layer) * chunk_layers
    return out + ((chunk, "chunk"),) * (nv - 1)


def megatron_bucket_count(*args, **kw) -> int:
    """How many buckets megatron_buckets makes (its arguments)."""
    return max(1, len(megatron_buckets(*args, **kw)))
