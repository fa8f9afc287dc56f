"""DeepSpeed: ``ds_config.json`` and a torchrun launch script.

Keys are those DeepSpeed's ``DeepSpeedConfig`` reads (deepspeed/runtime/config.py,
zero/config.py, tensor_parallel/config.py); the tests parse the written file with that
class when DeepSpeed is installed. Batch: DeepSpeed requires
``train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * dp``,
and its pipeline engine runs ``gradient_accumulation_steps`` micro-batches per step, so
gradient_accumulation_steps = the plan's micro-batches either way.

Mapping: zero -> ``zero_optimization.stage``; offload_optimizer ->
``offload_optimizer.device = cpu``; HSDP is refused (DeepSpeed 0.19 removed MiCS); tp -> AutoTP training
(``tensor_parallel.autotp_size``); pp -> the pipeline engine (``pipeline.stages``; the
model must be a ``PipelineModule(num_stages=pp, partition_method="uniform")``), whose
schedule is 1F1B. What DeepSpeed sets in model code rather than in its config (expert
parallelism, Ulysses sequence parallelism) or does not have (interleaved and zero-bubble
schedules, Megatron sequence parallelism, fp8) is refused.
"""

from __future__ import annotations

import json

from ..scenario import Scenario
from . import Rendered, UnsupportedByEngine
from ._common import launch_script, same_layout

ENGINE = "DeepSpeed"


def deepspeed_config(sc: Scenario) -> tuple[dict, list[str]]:
    p, w, m = sc.plan, sc.workload, sc.model
    notes: list[str] = []
    if w.precision == "fp8":
        raise UnsupportedByEngine(ENGINE, "precision", "fp8", "ds_config has no fp8 training "
                                  "setting (fp8 comes from Transformer Engine in model code)")
    if p.cp > 1:
        raise UnsupportedByEngine(ENGINE, "cp", p.cp, "DeepSpeed's sequence parallelism (Ulysses) "
                                  "is built in model code, not set in ds_config")
    if p.ep > 1 or p.etp > 1:
        raise UnsupportedByEngine(ENGINE, "ep", p.ep, "DeepSpeed-MoE sets expert parallelism in "
                                  "model code (deepspeed.moe.layer.MoE(ep_size=...)), not in ds_config")
    if p.pp > 1:
        if p.schedule != "1f1b":
            raise UnsupportedByEngine(ENGINE, "schedule", p.schedule,
                                      "the DeepSpeed pipeline engine runs 1F1B with one chunk per "
                                      "stage only")
        if p.zero >= 2:
            raise UnsupportedByEngine(ENGINE, "zero", p.zero, "ZeRO-2 and ZeRO-3 are incompatible "
                                      "with DeepSpeed's pipeline parallelism; use zero 0 or 1")
        split = p.layer_split(m)
        if len(set(split)) > 1:
            raise UnsupportedByEngine(ENGINE, "pp", p.pp,
                                      f"the layer split {split} is uneven; DeepSpeed's uniform "
                                      "partition gives the extra layers to the first stages, "
                                      "meshplan's plan puts them in the middle")
    if p.tp > 1:
        if p.sequence_parallel:
            raise UnsupportedByEngine(ENGINE, "sequence_parallel", True,
                                      "DeepSpeed AutoTP has no Megatron-style sequence parallelism; "
                                      "use sequence_parallel=false")
        if p.zero >= 3:
            raise UnsupportedByEngine(ENGINE, "zero", p.zero,
                                      "AutoTP training works with ZeRO stages 0-2")
    if p.zero >= 1 and p.hsdp_shard and p.hsdp_shard != p.dp * p.cp:
        raise UnsupportedByEngine(ENGINE, "hsdp_shard", p.hsdp_shard,
                                  "DeepSpeed 0.19 removed MiCS (zero_optimization.mics_shard_size), "
                                  "its only shard-inside-a-group mode; ZeRO++ hpZ still shards the "
                                  "optimizer over all ranks")
    if p.recompute == "selective":
        raise UnsupportedByEngine(ENGINE, "recompute", "selective",
                                  "DeepSpeed checkpoints whole layers (full recompute) only")
    if not same_layout(p, "tp-cp-dp-pp"):
        raise UnsupportedByEngine(ENGINE, "order", p.order,
                                  "DeepSpeed's topology is [pipe, data, model] (model innermost), "
                                  "i.e. order tp-dp-pp")

    cfg: dict = {
        "train_batch_size": w.global_batch,
        "train_micro_batch_size_per_gpu": p.micro_batch,
        "gradient_accumulation_steps": p.num_microbatches(w),
        "gradient_clipping": 1.0,
        "steps_per_print": 1,
    }
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
    return cfg, notes


def render_deepspeed(sc: Scenario) -> Rendered:
    cfg, notes = deepspeed_config(sc)
    text = json.dumps(cfg, indent=2) + "\n"
    script = launch_script(
        sc, "deepspeed_launch.sh", "deepspeed_launch.sh: DeepSpeed training for this plan",
        [("--deepspeed", []), ("--deepspeed_config", ["ds_config.json"])],
        '"${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your training script}"', notes,
        extra_comments=["TRAIN_SCRIPT calls deepspeed.initialize(args=..., model=..., "
                        "config='ds_config.json'). The deepspeed launcher works too: "
                        "deepspeed --hostfile HOSTFILE $TRAIN_SCRIPT --deepspeed "
                        "--deepspeed_config ds_config.json"])
    return Rendered("deepspeed", {"ds_config.json": text, "deepspeed_launch.sh": script},
                    {"deepspeed_launch.sh"}, notes)
