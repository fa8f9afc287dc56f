"""The copies FSDP2 runs on the compute stream around its collectives.

PyTorch's per-parameter FSDP (``torch.distributed.fsdp.fully_shard``, "FSDP2") keeps no
flat parameter: every collective goes through a flat staging buffer, and two of the copies
into and out of it run on the compute ("current") stream, so each delays the layer that
waits for it (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, torch 2.13.0; the
same stream placement since FSDP2's first release):

- all-gather copy-out: ``foreach_all_gather_copy_out`` makes the current stream wait for the
  all-gather, then ``torch.ops.fsdp.split_with_sizes_copy`` copies the gathered flat buffer
  into each parameter's unsharded tensor: it reads and writes every gathered element once
  (2 x the gathered bytes per parameter);
- reduce-scatter copy-in: ``foreach_reduce`` allocates the reduce-scatter input in
  ``reduce_dtype`` and ``foreach_reduce_scatter_copy_in`` (``torch._chunk_cat``) copies the
  unsharded 16-bit gradients into it on the current stream before the reduce-scatter stream
  may start ("Only after the copy-in finishes can we free the gradients"): it reads the
  16-bit gradient and writes the reduce dtype (2 + 2, or 2 + 4 with an fp32 reduce).

The all-gather copy-in (``all_gather_copy_in``, its own stream) and the accumulation of the
reduce-scatter output into the sharded gradient touch 1/dp of the elements and run beside
the compute; they are not counted. Megatron-Core's DDP / FSDP and FSDP1 (a FlatParameter
whose unsharded tensors are views of the gathered buffer) gather and reduce in place.

How many of each a step runs is the engine's schedule of sharded collectives
(engine_dp.sharded_schedule, the table cost/step.py's _dp_comm charges too, with the sources:
per micro-batch under zero 3 without pipelining, once per step under torch.distributed.pipelining
for the reduce-scatter).

The time is those bytes over the HBM bandwidth the rest of the cost model uses for streaming
work (compute.device().hbm_bytes_per_s), on the critical path of every rank.
"""

from __future__ import annotations

from .engine_dp import FSDP2_ENGINES, sharded_schedule

# engines that shard with FSDP2 (engine_dp.FSDP2_ENGINES): torchtitan (its apply_fsdp calls
# fully_shard per block and on the whole model: torchtitan/parallelisms/parallelize_llama.py in
# 2024), OLMo-core (src/olmo_core/nn/transformer/model.py apply_fsdp, "Adapted from" that
# torchtitan function, allenai/OLMo-core e27ba7455)
# the gathered parameter's bytes: MixedPrecisionPolicy(param_dtype=bfloat16), 2 bytes; with
# torchao's float8 all-gather the Float8Linear weights arrive as FP8 and are copied out as such
# (the caller passes the mean of param_gather.py, the bytes _dp_comm gathers)
GATHERED_PARAM_BYTES = 2.0
# the unsharded gradient autograd writes: the parameter's compute dtype (bf16)
UNSHARDED_GRAD_BYTES = 2.0


def collectives_per_step(zero: int, microbatches: int, engine: str = "torchtitan",
                         pp: int = 1) -> tuple[int, int]:
    """(all-gathers, reduce-scatters) of every FSDP unit in one step, as _dp_comm counts
    them (engine_dp.sharded_schedule); (0, 0) below zero 2, where nothing is gathered per
    micro-batch."""
    s = sharded_schedule(engine, zero, microbatches, pp)
    return (s.gathers, s.reduces) if s else (0, 0)


def copy_bytes_per_param(zero: int, microbatches: int, reduce_bytes: float,
                         gathered_bytes: float = GATHERED_PARAM_BYTES,
                         engine: str = "torchtitan", pp: int = 1) -> float:
    """HBM bytes the compute stream moves per parameter per step for FSDP2's copies."""
    gathers, reduces = collectives_per_step(zero, microbatches, engine, pp)
    return (gathers * 2.0 * gathered_bytes
            + reduces * (UNSHARDED_GRAD_BYTES + reduce_bytes))


def fsdp2_copy_s(engine: str, zero: int, microbatches: int, params: float,
                 reduce_bytes: float, hbm_bytes_per_s: float,
                 gathered_bytes: float = GATHERED_PARAM_BYTES, pp: int = 1) -> float:
    """Seconds of FSDP2 copy-out / copy-in one rank runs per step on its compute stream,
    for ``params`` parameters in its FSDP units (0 for engines that do not run FSDP2)."""
    if engine not in FSDP2_ENGINES or hbm_bytes_per_s <= 0:
        return 0.0
    return (params * copy_bytes_per_param(zero, microbatches, reduce_bytes, gathered_bytes,
                                          engine, pp)
            / hbm_bytes_per_s)
