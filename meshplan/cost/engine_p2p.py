"""What a pipeline engine sends between stages per micro-batch.

Without sequence parallelism every tensor-parallel rank holds the whole activation at a
stage boundary. DeepSpeed's pipeline engine (deepspeed/runtime/pipe/engine.py, 2021-2023:
``self.is_pipe_partitioned = self.is_model_parallel``, ``self.is_grad_partitioned =
self.is_model_parallel``) sends only each TP rank's 1/tp slice of the activation (and of its
gradient) and all-gathers it inside the node after the receive: the scatter/gather
optimisation of Narayanan et al. 2021 (sec. 4.1). Megatron-DeepSpeed (the BigScience BLOOM
runs) trains through that engine. Aleph Alpha's code sends the whole tensor from every TP
rank (Aleph-Alpha/scaling core/nn/parallel_module/communicator.py: blocking
``torch.distributed.send``/``recv`` of the full tensors), as meshplan's default does.
"""

from __future__ import annotations

PARTITIONED_P2P_ENGINES = ("deepspeed",)

# Engines that overlap stage-to-stage transfers with compute under the interleaved schedule.
# Megatron-LM: ``--no-overlap-p2p-communication`` (overlap_p2p_comm is on by default) and
# megatron/training/arguments.py turns it off only when virtual_pipeline_model_parallel_size
# is None ("non-interleaved schedule does not support overlapping p2p communication"); the
# interleaved schedule (megatron/core/pipeline_parallel/schedules.py) posts the next chunk's
# receive and its send asynchronously and waits only before the tensor is used. NeMo 2.0 /
# Megatron-Bridge (MegatronCommOverlapCallback / comm_overlap.py) set overlap_p2p_comm when
# the virtual pipeline size is > 1. Others (torchtitan's torch.distributed.pipelining,
# DeepSpeed's engine) are charged the transfer in line.
P2P_OVERLAP_ENGINES = ("megatron", "nemo")


def p2p_split(engine: str, tp: int, sequence_parallel: bool) -> int:
    """By how much the engine divides the stage-boundary message (1 = the whole tensor
    from every TP rank; with sequence parallelism the tensor is already a 1/tp shard)."""
    if engine in PARTITIONED_P2P_ENGINES and tp > 1 and not sequence_parallel:
        return tp
    return 1


def p2p_exposed_s(engine: str, vpp: int, p2p_one_s: float, chunk_compute_s: float) -> float:
    """Seconds one stage-boundary transfer adds to a chunk: all of it, or, where the engine
    overlaps transfers under the interleaved schedule, what the next chunk's compute
    (``chunk_compute_s``) does not cover."""
    if engine in P2P_OVERLAP_ENGINES and vpp > 1:
        return max(0.0, p2p_one_s - chunk_compute_s)
    return p2p_one_s
