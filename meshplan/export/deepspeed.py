"""DeepSpeed: ``ds_config.json`` and a torchrun launch script.

Keys are those DeepSpeed's ``DeepSpeedConfig`` reads (deepspeed/runtime/config.py,
zero/config.py, tensor_parallel/config.py); the tests parse the written file with that
class when DeepSpeed is installed. Batch: DeepSpeed requires
``train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * dp``
(with AutoTP and no mpu its dp is every rank, so there only micro and gas are written),
and its pipeline engine runs ``gradient_accumulation_steps`` micro-batches per step, so
gradient_accumulation_steps = the plan's micro-batches either way.

Mapping: zero -> ``zero_optimization.stage``; offload_optimizer ->
``offload_optimizer.device = cpu``; HSDP is refused (DeepSpeed 0.19 removed MiCS); tp -> AutoTP training
(``tensor_parallel.autotp_size``); pp -> the pipeline engine (``pipeline.stages``; the
model must be a ``PipelineModule(num_stages=pp, partition_method="uniform")``), whose
schedule is 1F1B. What DeepSpeed sets in model code rather than in its config (expert
parallelism) or does not have (interleaved and zero-bubble schedules, Megatron sequence
parallelism, ring attention, fp8) is refused (meshplan/engines.py). Context parallelism of
kind all_to_all is DeepSpeed-Ulysses: ``sequence_parallel_size`` = cp and
``data_parallel_size`` = dp in ds_config, from which ``deepspeed.initialize`` builds its
(data, sequence) mesh (deepspeed/__init__.py), sequence innermost.
"""

from __future__ import annotations

import json

from ..scenario import Scenario
from . import Rendered
from ._common import launch_script


def deepspeed_config(sc: Scenario) -> tuple[dict, list[str]]:
    p, w, m = sc.plan, sc.workload, sc.model
    notes: list[str] = []
    # refusals: meshplan/engines.py (render() checks them before this runs)
    cfg: dict = {
        "train_batch_size": w.global_batch,
        "train_micro_batch_size_per_gpu": p.micro_batch,
        "gradient_accumulation_steps": p.num_microbatches(w),
        "gradient_clipping": 1.0,
        "steps_per_print": 1,
    }
    if p.tp > 1 and p.pp == 1:
        # AutoTP without an mpu: deepspeed.initialize builds DeepSpeedConfig(config, None),
        # whose world size is every rank (deepspeed/runtime/config.py:466-471 at 0.19.8), so
        # its check train_batch_size == micro * gas * world (config.py:602) fails with the
        # global batch; DeepSpeed's AutoTP training tutorial gives micro and gas only
        del cfg["train_batch_size"]
        reported = p.micro_batch * p.num_microbatches(w) * p.world_size
        notes.append(f"AutoTP: DeepSpeed counts all {p.world_size} ranks as data parallel and "
                     f"reports train_batch_size {reported}; the global batch is "
                     f"{w.global_batch} ({p.tp} tensor-parallel ranks share each sample)")
    if w.precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    else:
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    opt = {"adamw": "AdamW", "adam": "Adam", "sgd": "SGD"}[w.optimizer]
    params: dict = {"lr": 3.0e-4, "weight_decay": 0.1}
    if opt != "SGD":
        params["betas"] = [0.9, 0.95]
    cfg["optimizer"] = {"type": opt, "params": params}
    zero: dict = {"stage": p.zero}
    if p.zero >= 1:
        zero["overlap_comm"] = bool(p.overlap_grad_reduce)
        zero["contiguous_gradients"] = True
    if p.zero >= 2:
        zero["reduce_scatter"] = True
    if p.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    cfg["zero_optimization"] = zero
    if p.cp > 1:  # Ulysses: deepspeed.initialize builds a (data, sequence) mesh from these two
        cfg["sequence_parallel_size"] = p.cp
        cfg["data_parallel_size"] = p.dp
        notes.append(f"Ulysses sequence parallelism over {p.cp} ranks: wrap each attention in "
                     "deepspeed.sequence.layer.DistributedAttention(local_attention, "
                     "sequence_parallel_group) and give each rank its 1/"
                     f"{p.cp} slice of every sequence (ranks r*{p.cp}..r*{p.cp}+{p.cp - 1} "
                     "share one sequence)")
    if p.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": p.tp, "tp_overlap_comm": bool(p.tp_comm_overlap)}
    if p.pp > 1:
        cfg["pipeline"] = {"stages": p.pp, "partition": "uniform",
                           "activation_checkpoint_interval": 1 if p.recompute == "full" else 0}
    elif p.recompute == "full":
        cfg["activation_checkpointing"] = {"partition_activations": False,
                                           "contiguous_memory_optimization": False,
                                           "cpu_checkpointing": False}
        notes.append("full recompute: wrap every transformer layer with "
                     "deepspeed.checkpointing.checkpoint (or model.gradient_checkpointing_enable() "
                     "for Hugging Face models); ds_config only configures it")
    if p.pp > 1:
        notes.append(f"build the model as deepspeed.pipe.PipelineModule(layers, num_stages={p.pp}, "
                     "partition_method='uniform') with the embedding and the output head outside "
                     "the uniform partition")
        if m.tied_embeddings:
            # deepspeed/runtime/pipe/module.py TiedLayerSpec (0.19.8): layers sharing a key
            # share one weight; the stages holding them all-reduce its gradient
            # (PipelineEngine._exec_reduce_tied_grads), the step part tied_embedding
            notes.append("the model's embeddings are tied: make the embedding and the output "
                         "head deepspeed.pipe.TiedLayerSpec with one key (the head's forward_fn "
                         "multiplies by the embedding's weight), so the first and last stages "
                         "hold one tied weight and all-reduce its gradient, as predicted "
                         "(tied_embedding)")
    return cfg, notes


def render_deepspeed(sc: Scenario) -> Rendered:
    cfg, notes = deepspeed_config(sc)
    text = json.dumps(cfg, indent=2) + "\n"
    script = launch_script(
        sc, "deepspeed_launch.sh", "deepspeed_launch.sh: DeepSpeed training for this plan",
        [("--deepspeed", []), ("--deepspeed_config", ["ds_config.json"])],
        '"${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your training script}"', notes,
        # Ulysses: the training script builds DistributedAttention over groups of this size
        # (the same number as ds_config's sequence_parallel_size)
        env={"SEQUENCE_PARALLEL_SIZE": str(sc.plan.cp)} if sc.plan.cp > 1 else None,
        extra_comments=["TRAIN_SCRIPT calls deepspeed.initialize(args=..., model=..., "
                        "config='ds_config.json'). The deepspeed launcher works too: "
                        "deepspeed --hostfile HOSTFILE $TRAIN_SCRIPT --deepspeed "
                        "--deepspeed_config ds_config.json"])
    return Rendered("deepspeed", {"ds_config.json": text, "deepspeed_launch.sh": script},
                    {"deepspeed_launch.sh"}, notes)
