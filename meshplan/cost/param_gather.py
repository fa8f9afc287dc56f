"""Bytes per parameter of the data-parallel weight all-gather (ZeRO 1-3, FSDP).

By default the gathered weights are the 16-bit compute copy (2 bytes). A run that keeps its
linear layers' weights in FP8 gathers those in FP8, 1 byte each (Workload.fp8_param_gather;
a runs CSV's optional column ``fp8_param_gather``):

- Megatron-Core: ``DistributedDataParallelConfig.fp8_param_gather`` / ``--fp8-param-gather``
  ("Keep the compute param in fp8 (do not use any other intermediate dtype) and perform the
  param all-gather in fp8", megatron/training/arguments.py); NeMo 2 passes it through
  MegatronMixedPrecision / MegatronStrategy (e.g. the MLPerf v5.0 Llama 3.1 405B pretrain.py:
  ``fp8_param_gather=config.model.optim.fp8_params``, mlcommons/training_results_v5.0 0fdc28f).
- NeMo 1 with ``fp8_params`` and its distributed optimizer: MegatronDistributedFusedAdam
  (nemo/core/optim/distributed_adam.py, init_params / init_params_bucket) puts every
  Float8Tensor parameter in buckets with ``param_sync_dtype=torch.uint8``, i.e. gathers its
  FP8 bytes; the other parameters keep the optimizer's param sync dtype.
- torchao ``Float8LinearConfig(enable_fsdp_float8_all_gather=True)`` under FSDP2 (torchtitan
  ``--float8.enable_fsdp_float8_all_gather``, OLMo-core's Float8Config default): "cast
  Float8Linear.weight from high precision to float8 before FSDP all-gather so we can
  communicate in float8" (torchtitan docs/float8.md).

In all three only the transformer layers' linear weights are FP8 (Transformer Engine modules,
torchao Float8Linear); the embedding and the output layer are gathered in 16 bits. The
layers' norm weights, a few thousandths of a layer, are counted with the linear weights.
"""

from __future__ import annotations

GATHER_BYTES_16BIT = 2.0
GATHER_BYTES_FP8 = 1.0


def layer_gather_bytes(fp8_param_gather: bool) -> float:
    """Bytes per transformer-layer (and expert) weight in the all-gather."""
    return GATHER_BYTES_FP8 if fp8_param_gather else GATHER_BYTES_16BIT


def mean_gather_bytes(fp8_param_gather: bool, layer_params: float, other_params: float) -> float:
    """Bytes per parameter of a rank's gather: its layers' weights at layer_gather_bytes,
    the rest (embedding, output layer) at 16 bits."""
    total = layer_params + other_params
    if total <= 0:
        return GATHER_BYTES_16BIT
    return (layer_gather_bytes(fp8_param_gather) * layer_params
            + GATHER_BYTES_16BIT * other_params) / total
