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


def p2p_split(engine: str, tp: int, sequence_parallel: bool) -> int:
    """By how much the engine divides the stage-boundary message (1 = the whole tensor
    from every TP rank; with sequence parallelism the tensor is already a 1/tp shard)."""
    if engine in PARTITIONED_P2P_ENGINES and tp > 1 and not sequence_parallel:
        return tp
    return 1
