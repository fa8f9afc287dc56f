"""Stage-boundary activation buffers that a pipeline engine keeps and Megatron does not.

Megatron-Core sends a stage's output and then frees its storage (github NVIDIA/Megatron-LM at
d98e8a64: megatron/core/pipeline_parallel/schedules.py ``deallocate_output_tensor`` keeps only
the autograd graph, switched on for training by megatron/training/argument_utils.py
``deallocate_pipeline_outputs = True``), and receives into a fresh ``torch.empty`` per
micro-batch (pipeline_parallel/p2p_communication.py), keeping no persistent receive buffer;
meshplan's activation count (ops.py, pipeline.in_flight) is that engine's.
Two engines in the runs CSV (``framework`` column) keep more, per pipeline rank, in units of
one stage-boundary message ``u`` (compute.p2p_message_bytes: 16-bit hidden states of one
micro-batch, the 1/tp slice where the engine partitions it, engine_p2p.py) and ``n``
micro-batches in flight on the rank (pipeline.in_flight):

DeepSpeed's pipeline engine (github deepspeedai/DeepSpeed, deepspeed/runtime/pipe/engine.py
at edaa7221 of 2026-08-22; Megatron-DeepSpeed, the BigScience BLOOM runs, trains through it):
- ``pipe_buffers['outputs'][buffer_id]`` holds the stage output from _exec_forward_pass
  until _exec_backward_pass sets it to None; with ``is_pipe_partitioned`` (TP > 1, config
  default ``pipe_partitioned: True``, runtime/config.py) the full output's storage is
  replaced by ``torch.zeros(1)`` and the 1/tp ``part.data()`` is kept: n * u on every rank
  but the last;
- ``grad_layer``: the gradient receive buffer, allocated once (_exec_recv_grads,
  ``_allocate_or_extend_buffers``) and kept: u on every rank but the last;
- ``pipe_recv_buf``: the activation receive buffer, allocated once (_exec_recv_activations)
  and kept: u on every rank but the first;
- ``pipe_buffers['inputs'][buffer_id]``: ``self.pipe_recv_buf.clone()``, held until
  _exec_send_grads; unpartitioned (TP = 1) the forward runs on a second ``.clone()`` of it
  (_exec_forward_pass: "inputs has no gradient because it is from a cloned tensor"), so the
  buffered original is one more copy per micro-batch in flight: n * u on every rank but the
  first. Partitioned, the buffer is replaced by the gathered input the forward itself uses
  (``self.pipe_buffers['inputs'][buffer_id] = inputs``): nothing more.

Aleph Alpha's scaling (github Aleph-Alpha/scaling at 737f8558 of 2024-10-30,
src/scaling/core/nn/parallel_module/parallel_module.py and communicator.py):
- BufferType.PIPELINE_STAGE_OUTPUT is written by _execute_forward_pass and taken only by
  _execute_receive_gradients: n * u (whole tensors, every TP rank) on every rank but the last
  (the last stage's output, the logits, is ops.BUFFERED_LOGITS_ENGINES);
- PipeCommunicator allocates ``gradient_recv_buffer`` (_send_meta_data) and
  ``activation_recv_buffer`` (_recv_meta_data) once per shape and keeps them: u on every
  rank but the last, u on every rank but the first. recv_data returns ``tensor.clone()``,
  which is the stage input the forward uses: nothing more;
- that stage input is written to BufferType.PIPELINE_STAGE_INPUT (_execute_receive_activations)
  and taken only by _execute_send_gradients after the backward (_execute_forward_pass
  ``get``s it in training): n * u on every rank but the first. meshplan's layer count holds
  it as the first layer's saved norm input, which the engine's eager RMSNorm does not keep
  (Aleph-Alpha/scaling at 78489292, core/nn/norm/rms_norm.py line 52: autograd keeps
  ``x.float()``, not x, ops.UNFUSED_NORM_ENGINES; the residual add keeps nothing), so
  without recomputation the buffer holds it beside the layers' tensors. Under full
  recomputation (activation_checkpointing_type every_layer) the first layer's checkpoint
  keeps that same tensor as its input (ops.LayerOps.input_bytes): nothing more.
"""

from __future__ import annotations

DEEPSPEED_PIPE_ENGINES = ("deepspeed",)
ALEPH_ALPHA_PIPE_ENGINES = ("aleph-alpha",)
BUFFERED_PIPE_ENGINES = DEEPSPEED_PIPE_ENGINES + ALEPH_ALPHA_PIPE_ENGINES


def pipeline_buffer_bytes(engine: str, pp: int, rank: int, in_flight: float,
                          message_bytes: float, partitioned: bool,
                          input_kept_by_layer: bool = True) -> float:
    """Bytes of stage-boundary buffers pipeline rank ``rank`` of ``pp`` keeps beyond
    Megatron's, with ``in_flight`` micro-batches in flight and ``message_bytes`` per
    stage-boundary message (module docstring). ``partitioned``: the engine sends a 1/tp
    slice (engine_p2p.p2p_split > 1). ``input_kept_by_layer``: the layer count already
    holds the stage input (full recomputation's checkpoint, or the saved input of a fused norm
    the run states, ops.eager_norm); False adds Aleph Alpha's held
    stage inputs, which its eager RMSNorm does not keep (module docstring). Zero for engines not in
    BUFFERED_PIPE_ENGINES and without pipeline parallelism."""
    if pp <= 1 or engine not in BUFFERED_PIPE_ENGINES:
        return 0.0
    first, last = rank == 0, rank == pp - 1
    u, n = message_bytes, in_flight
    total = 0.0
    if not last:
        total += n * u + u  # held stage outputs + the gradient receive buffer
    if not first:
        total += u  # the activation receive buffer
        if engine in DEEPSPEED_PIPE_ENGINES and not partitioned:
            total += n * u  # the buffered input beside the clone the forward runs on
        if engine in ALEPH_ALPHA_PIPE_ENGINES and not input_kept_by_layer:
            total += n * u  # PIPELINE_STAGE_INPUT, which no layer keeps
    return total
