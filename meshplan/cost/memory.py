"""Memory per GPU of one pipeline rank, as a breakdown in bytes.

Model states (ZeRO, Rajbhandari et al. 2020), with gradients accumulated and reduced in
fp32 as Megatron-LM (``accumulate_allreduce_grads_in_fp32``) and torchtitan (FSDP2
``reduce_dtype=float32``) do by default:
- weights 2 bytes/param (bf16), gradients 4, optimizer 12 (fp32 master + Adam moments);
- zero 1 shards the optimizer over the data-parallel group; zero 2 also the gradients,
  with the weights kept gathered (FSDP without resharding after forward) and, under
  gradient accumulation, the gradients accumulated unsharded until the last micro-batch
  (torch.distributed.pipelining and FSDP2 ``set_requires_gradient_sync``); zero 3 shards
  everything, gathering a layer at a time (plus one prefetched). Under zero 3 the fp32
  shard IS the master copy: FSDP (FSDP1 ``MixedPrecision`` and FSDP2
  ``MixedPrecisionPolicy``) keeps only the fp32 sharded parameter and casts it to bf16
  when it gathers a unit, so there is no separate 16-bit shard; 4 (master) + 4 (grad) +
  8 (Adam moments) = 16 bytes per sharded parameter, the ZeRO paper's 16 psi / N_d;
- expert weights are sharded over their own data-parallel group (edp);
- fp16 under Megatron-LM and DeepSpeed (``fp16_grads``): the gradients stay fp16 (2 bytes,
  Megatron's ``accumulate_allreduce_grads_in_fp32`` is forced on only for bf16; DeepSpeed's
  fp16 optimizers accumulate in fp16) and the optimizer keeps an fp32 copy of the gradient
  next to the fp32 master, sharded like it: Megatron-LM README "Distributed Optimizer"
  table, fp16 param/fp16 grads 20 bytes (4 + 16/d distributed) against bf16 param/fp32
  grads 18 (6 + 12/d); the BLOOM chronicles (bigscience tr11-176B-ml
  chronicles-prequel.md, 'Rebalancing layers') state the same for Megatron-DeepSpeed
  ("fp16 which grad accumulates in fp16"; bf16 adds "4bytes x params ... not sharded").
Activations: the layer's saved tensors (ops.py, after Korthikanti et al. 2022) times the
schedule's micro-batches in flight (pipeline.py), plus the working set of one layer's
backward, plus the last stage's logits. On top: communication buffers, the caching
allocator's fragmentation, the CUDA context (efficiency.HostCosts), and the buffers a
token dispatcher allocates outside PyTorch (DeepEP, dispatcher_buffers.py).

What must fit and what is reported differ. PyTorch's caching allocator keeps freed blocks
cached and, once split, a cached block cannot serve a larger request, so what it has
reserved runs above what tensors hold (``allocator_fragmentation``). But it never fails
while cache can be given back: when cudaMalloc fails it frees its unused cached blocks
and retries before raising out-of-memory (c10/cuda/CUDACachingAllocator.cpp,
``release_cached_blocks``; PyTorch "CUDA semantics: memory management"). So the
fragmentation share fills at most the memory the device has left after the held bytes
and the CUDA context: a run fits when what it holds fits, and the reported reserved
peak saturates below capacity instead of crossing it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..plan import Plan
from .efficiency import HOST

PARAM_BYTES = 2
# parts PyTorch's caching allocator does not hold: not in its reserved figure, never
# fragmented by it (the CUDA context; DeepEP's cudaMalloc'd and NVSHMEM buffers)
OUTSIDE_ALLOCATOR = ("cuda_context", "dispatcher_buffers")
FP32_PARAM_BYTES = 4
GRAD_BYTES = 4
FP16_GRAD_BYTES = 2  # fp16 gradients (module docstring)
FP32_MAIN_GRAD_BYTES = 4  # the optimizer's fp32 gradient copy under fp16, sharded
# engines whose fp16 path keeps fp16 gradients and an fp32 main-gradient copy
FP16_GRAD_ENGINES = ("megatron", "nemo", "deepspeed")
# engines that keep the gradients in the parameters' own 16-bit dtype at every precision
# and copy the owned ZeRO-1 slice to an fp32 gradient for the optimizer: the same 2 +
# 4/d bytes. Aleph Alpha's training code (Hagemann et al. 2023; public release github
# Aleph-Alpha/scaling, src/scaling/core/optimizer/parameter_group.py: "each data-parallel
# worker will still have _all_ original-precision weights as well as gradients";
# step_prequel copies the owned slice into ``float_parameter_partition_owned.grad``, an
# fp32 tensor the size of the partition, and drops the 16-bit grads it has copied).
PARAM_DTYPE_GRAD_ENGINES = ("aleph-alpha",)


# engines of PARAM_DTYPE_GRAD_ENGINES whose fp32 gradient copy exists only while the optimizer
# steps, not at the backward's activation peak: Aleph Alpha's scaling (github
# Aleph-Alpha/scaling at 737f8558, src/scaling/core/optimizer/parameter_group.py)
# step_prequel first drops the gradients of the parameters it does not own (lines 361-363),
# then allocates ``float_parameter_partition_owned.grad = torch.zeros_like(...)`` (line 368)
# and drops each 16-bit gradient once copied (line 399); step_sequel sets it back to None
# (line 435) before the next step's forward. Its peak is therefore the larger of the
# backward's (16-bit gradients of every parameter, activations, working set) and the
# step's (the owned 16-bit gradients, at most, beside the fp32 copy: no activations).
STEP_ONLY_MAIN_GRAD_ENGINES = PARAM_DTYPE_GRAD_ENGINES


def main_grad_at_step_only(framework: str) -> bool:
    """Whether the engine's fp32 gradient copy (keeps_16bit_grads) lives only during the
    optimizer step (STEP_ONLY_MAIN_GRAD_ENGINES)."""
    return framework in STEP_ONLY_MAIN_GRAD_ENGINES


def keeps_16bit_grads(precision: str, framework: str) -> bool:
    """Whether the engine keeps 16-bit gradients plus a sharded fp32 copy (fp16_grads)."""
    return ((precision == "fp16" and framework in FP16_GRAD_ENGINES)
            or framework in PARAM_DTYPE_GRAD_ENGINES)


@dataclass(frozen=True)
class RankState:
    """What one pipeline rank holds, before sharding by data parallelism."""

    params: float  # non-expert parameters of its layers (after tp)
    expert_params: float  # routed-expert parameters (after ep, etp)
    largest_layer_params: float  # for zero-3 gather buffers
    act_per_microbatch_bytes: float
    in_flight: float
    working_bytes: float  # one layer's backward working set / logits


def _state_bytes(plan: Plan, st: RankState, optimizer_state_bytes: float, microbatches: int,
                 fp16_grads: bool, fp32_weights: bool, grad_buffer_bytes: float = GRAD_BYTES,
                 keeps_master: bool = True,
                 step_main_grad: bool = False) -> tuple[float, float, float, float]:
    """(weights, gradients, optimizer states, fp32 gradient copy made at the step) in bytes:
    memory_parts' model states. The last is nonzero only with ``step_main_grad``
    (main_grad_at_step_only); otherwise the copy is part of the optimizer states."""
    sh = plan.fsdp_shard if plan.zero >= 1 else 1
    she = plan.edp if plan.zero >= 1 else 1
    p, e = st.params, st.expert_params
    # fp32 training (Workload precision fp32/tf32): the 4-byte weights are the master copy,
    # so the optimizer state holds only the moments (Workload.master_and_state_bytes)
    pb = FP32_PARAM_BYTES if fp32_weights else PARAM_BYTES
    if plan.zero == 3:
        # no 16-bit shard: the fp32 master shard (in optimizer_state_bytes) is gathered
        # and cast per unit; one unit in use and one prefetched
        weights = 2 * pb * st.largest_layer_params
        if plan.offload_optimizer or fp32_weights or not keeps_master:
            # the master lives on the host: a 16-bit shard stays; fp32: the weight shard
            weights += pb * (p / sh + e / she)
    else:
        weights = pb * (p + e)
    sharded_grads = plan.zero == 3 or (plan.zero == 2 and microbatches == 1)
    fp16_grads = fp16_grads and plan.zero < 3
    grad_bytes = FP16_GRAD_BYTES if fp16_grads else grad_buffer_bytes
    grads = grad_bytes * ((p / sh + e / she) if sharded_grads else (p + e))
    step_grad = 0.0
    if fp16_grads and step_main_grad:
        step_grad = 0.0 if plan.offload_optimizer else FP32_MAIN_GRAD_BYTES * (p / sh + e / she)
    elif fp16_grads:
        optimizer_state_bytes += FP32_MAIN_GRAD_BYTES
    opt = 0.0 if plan.offload_optimizer else optimizer_state_bytes * (p / sh + e / she)
    return weights, grads, opt, step_grad


def step_excess_bytes(grads: float, step_grad: float, plan: Plan, acts: float,
                      working: float) -> float:
    """What the optimizer step of a STEP_ONLY_MAIN_GRAD_ENGINES engine needs beyond the
    backward's peak: at the step the fp32 copy sits beside at most the owned share of the
    16-bit gradients (the others were dropped first), where the backward held all 16-bit
    gradients, the activations and the working set."""
    if not step_grad:
        return 0.0
    sh = plan.fsdp_shard if plan.zero >= 1 else 1
    return max(0.0, grads / sh + step_grad - (grads + acts + working))


def memory_parts(plan: Plan, st: RankState, optimizer_state_bytes: float,
                 microbatches: int = 1, contiguous_states: bool = False,
                 capacity_bytes: float = float("inf"),
                 fp16_grads: bool = False, fp32_weights: bool = False,
                 grad_buffer_bytes: float = GRAD_BYTES, keeps_master: bool = True,
                 pipeline_buffer_bytes: float = 0.0,
                 dispatcher_buffer_bytes: float = 0.0,
                 step_main_grad: bool = False) -> dict[str, float]:
    """Named parts in bytes; their sum is what the GPU must hold at the rank's peak.

    ``contiguous_states``: the engine keeps weights, gradients and optimizer states in a few
    large buffers allocated once (Megatron-LM's param-and-grad buffers and distributed
    optimizer shards), which the caching allocator cannot fragment; only the transient part
    (activations, working set, communication buffers) fragments. Engines that allocate
    per-parameter tensors and gather/free them per layer (FSDP2) fragment everything.

    ``grad_buffer_bytes``: bytes per gradient element (Workload.grad_buffer_bytes: 2 with a
    bf16 grad reduce). ``keeps_master`` False: the optimizer has no master copy
    (Workload.keeps_master), so under zero 3 the 16-bit shard itself is kept.
    ``pipeline_buffer_bytes``: stage-boundary buffers the pipeline engine keeps beyond
    Megatron's (pipeline_buffers.py), a named part of their own.
    ``dispatcher_buffer_bytes``: what the MoE token dispatcher allocates outside PyTorch's
    allocator (dispatcher_buffers.py), outside the fragmented and reserved bytes."""
    weights, grads, opt, step_grad = _state_bytes(plan, st, optimizer_state_bytes, microbatches,
                                                  fp16_grads, fp32_weights, grad_buffer_bytes,
                                                  keeps_master, step_main_grad)
    acts = st.act_per_microbatch_bytes * st.in_flight
    parts = {
        "weights": weights,
        "gradients": grads,
        "optimizer_states": opt,
        "activations": acts,
        "activation_working_set": st.working_bytes,
        "comm_buffers": HOST.comm_buffer_bytes,
        "pipeline_buffers": pipeline_buffer_bytes,
    }
    if step_grad:  # the fp32 gradient copy made at the step (main_grad_at_step_only)
        parts["optimizer_step_excess"] = step_excess_bytes(grads, step_grad, plan, acts,
                                                           st.working_bytes)
    parts["allocator_fragmentation"] = 0.0
    parts["cuda_context"] = HOST.runtime_reserved_bytes
    if dispatcher_buffer_bytes:
        parts["dispatcher_buffers"] = dispatcher_buffer_bytes
    return refragment(parts, contiguous_states, capacity_bytes)


# parts the caching allocator does not cut up: its own cache, the CUDA context, and what the
# MoE dispatcher allocates outside PyTorch (dispatcher_buffers.py)
NOT_FRAGMENTED = ("allocator_fragmentation", "cuda_context", "dispatcher_buffers")
CONTIGUOUS_STATES = ("weights", "gradients", "optimizer_states")


def refragment(parts: dict[str, float], contiguous_states: bool,
               capacity_bytes: float) -> dict[str, float]:
    """Set ``parts``' allocator_fragmentation from the other parts (HOST.allocator_fragmentation
    of the bytes the allocator cuts up: all but NOT_FRAGMENTED, and but the model states when
    ``contiguous_states``), capped at what the device has left (cap_fragmentation).
    memory_parts() builds it; the pipeline simulation (pipeline/from_cost.py) applies it again
    after it replaces the activations, so a cap the closed form hit is not carried over."""
    fragmented = sum(v for k, v in parts.items() if k not in NOT_FRAGMENTED
                     and not (contiguous_states and k in CONTIGUOUS_STATES))
    parts["allocator_fragmentation"] = HOST.allocator_fragmentation * fragmented
    return cap_fragmentation(parts, capacity_bytes)


def held_bytes(parts: dict[str, float]) -> float:
    """Bytes that tensors hold at the peak plus the CUDA context (no allocator cache)."""
    return sum(v for k, v in parts.items() if k != "allocator_fragmentation")


def held_bytes_of(plan: Plan, st: RankState, optimizer_state_bytes: float,
                  microbatches: int = 1, fp16_grads: bool = False,
                  fp32_weights: bool = False, grad_buffer_bytes: float = GRAD_BYTES,
                  keeps_master: bool = True, pipeline_buffer_bytes: float = 0.0,
                  step_main_grad: bool = False) -> float:
    """``held_bytes(memory_parts(...))`` without building the parts (the search's memory
    floors ask it tens of thousands of times): the same terms summed in the same order."""
    weights, grads, opt, step_grad = _state_bytes(plan, st, optimizer_state_bytes, microbatches,
                                                  fp16_grads, fp32_weights, grad_buffer_bytes,
                                                  keeps_master, step_main_grad)
    acts = st.act_per_microbatch_bytes * st.in_flight
    total = sum((weights, grads, opt, acts,
                 st.working_bytes, HOST.comm_buffer_bytes, pipeline_buffer_bytes,
                 HOST.runtime_reserved_bytes))
    if step_grad:
        total += step_excess_bytes(grads, step_grad, plan, acts, st.working_bytes)
    return total


def cap_fragmentation(parts: dict[str, float], capacity_bytes: float) -> dict[str, float]:
    """Cap the allocator's cache at what the device has left: PyTorch frees its unused
    cached blocks and retries before it raises out-of-memory (module docstring)."""
    if "allocator_fragmentation" in parts:
        room = max(0.0, capacity_bytes - held_bytes(parts))
        parts["allocator_fragmentation"] = min(parts["allocator_fragmentation"], room)
    return parts


def reserved_bytes(parts: dict[str, float]) -> float:
    """What PyTorch reports as reserved (everything its allocator holds: all parts but
    OUTSIDE_ALLOCATOR)."""
    return sum(v for k, v in parts.items() if k not in OUTSIDE_ALLOCATOR)
