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
# the virtual pipeline size is > 1. DeepSpeed's pipeline engine is charged the transfer in
# line.
P2P_OVERLAP_ENGINES = ("megatron", "nemo")

# Engines that run torch.distributed.pipelining's schedule classes: meshplan's own runtime
# (framework "", runtime/pipeline.py SCHEDULE_CLASSES, and its own lists through
# _PipelineScheduleRuntime) and torchtitan. In torch 2.13 (torch/distributed/pipelining/
# schedules.py) every schedule but Schedule1F1B issues its sends without waiting for them:
# _PipelineScheduleRuntime._step_microbatches (interleaved 1F1B, looped BFS, interleaved ZB,
# ZB-V, DualPipeV, and the lists meshplan hands it, ZB-H1) appends each SEND_F / SEND_B work
# to ``send_ops`` and waits for them only after the last action, posts each RECV_F / RECV_B
# where _add_send_recv places it and waits for it only right before the FORWARD / BACKWARD
# that reads it; ScheduleGPipe defers its send waits to the end of each phase. Schedule1F1B
# waits for its fused ``fwd_send_bwd_recv`` / ``bwd_send_fwd_recv`` batches before the next
# compute: in line.
TORCH_PIPELINING_ENGINES = ("", "torchtitan")
TORCH_IN_LINE_SCHEDULES = ("1f1b",)


def p2p_overlapped(engine: str, schedule: str, vpp: int) -> bool:
    """Whether the engine's ``schedule`` lets compute run while a stage-boundary transfer is
    on the wire (a rank then waits only for what it receives), or waits for each in line."""
    if engine in P2P_OVERLAP_ENGINES:
        return vpp > 1
    if engine in TORCH_PIPELINING_ENGINES:
        return schedule not in TORCH_IN_LINE_SCHEDULES
    return False


def may_overlap_p2p(engine: str) -> bool:
    """Whether some schedule of ``engine`` hides its transfers (for lower bounds that hold
    over every schedule: search/bound.py)."""
    return engine in P2P_OVERLAP_ENGINES or engine in TORCH_PIPELINING_ENGINES


def p2p_split(engine: str, tp: int, sequence_parallel: bool) -> int:
    """By how much the engine divides the stage-boundary message (1 = the whole tensor
    from every TP rank; with sequence parallelism the tensor is already a 1/tp shard)."""
    if engine in PARTITIONED_P2P_ENGINES and tp > 1 and not sequence_parallel:
        return tp
    return 1


def p2p_exposed_s(engine: str, schedule: str, vpp: int, p2p_one_s: float,
                  chunk_compute_s: float) -> float:
    """Seconds one stage-boundary transfer adds to a chunk: all of it, or, where the engine's
    schedule overlaps transfers (``p2p_overlapped``), what the next chunk's compute
    (``chunk_compute_s``) does not cover."""
    if p2p_overlapped(engine, schedule, vpp):
        return max(0.0, p2p_one_s - chunk_compute_s)
    return p2p_one_s
