"""What each training engine can run: the one place the exporters and the search read.

    engine_violations(engine, plan, model, workload, cluster=None) -> list[Violation]
    cluster_plan_violations(engine, plan, cluster, workload=None) -> list[Violation]
    scenario_violations(engine, model, workload, cluster=None) -> list[Violation]
    search_hints(engine) -> dict            # how the search walks only runnable plans

A Violation is (field, value, allowed): the plan field (or "model" / "precision"), the
value the plan has, and what the engine allows instead. An empty list means the engine
can run the plan as meshplan planned it; the exporters (meshplan/export/*.py) refuse
exactly when the list is not empty, with its first entry, and ``meshplan plan --engine E``
/ ``--export E`` search only plans whose list is empty.

Sources per engine (versions the exports target):
- Megatron-LM (megatron/training/arguments.py, validate_args; main as of 2026-08): 1F1B and
  interleaved 1F1B only; rank orders tp-cp-ep-dp-pp or tp-cp-ep-pp-dp (--use-tp-pp-dp-mapping);
  expert parallelism with fp16 too (validate_args' "Expert parallelism is not supported with
  fp16 training" was removed by Megatron-LM 4193f3aa, 2025-12, in core_v0.16.0 and main);
  --tp-comm-overlap needs --sequence-parallel; the CPU
  optimizer offload is Adam only; HSDP only through the distributed optimizer's instances.
- torchtitan 0.3 (torchtitan/config/job_config.py, distributed/parallel_dims.py): bf16/fp32
  only; FSDP2 (no ZeRO-1 when anything is sharded); ring context parallelism; no expert
  tensor parallelism; EP folded over dp_shard*cp*tp; CPU offload moves weights and grads too;
  schedules of torch.distributed.pipelining (no single-chunk ZB-H1); models from its own
  registry (meshplan/export/torchtitan.py maps them).
- DeepSpeed 0.19 (deepspeed/runtime/config.py, pipe/engine.py, __init__.py): no fp8 in
  ds_config; no expert parallelism in ds_config; Ulysses sequence parallelism through
  ``sequence_parallel_size`` + ``data_parallel_size`` (a (dp, sp) mesh, sp innermost) only
  without AutoTP and without the pipeline engine; the pipeline engine runs 1F1B on one chunk
  per stage, ZeRO 0-1, uniform layer partition; AutoTP has no sequence parallelism (it runs
  with every ZeRO stage: "AutoTP + ZeRO stage 3 is supported for both inference and
  training", deepspeed/runtime/engine.py:952 at 0.19.8); no MiCS/HSDP; full-layer
  checkpointing only.
Partial recomputation (plan.recompute_layers = N: the first N layers of each model chunk):
- Megatron-LM: --recompute-granularity full --recompute-method block --recompute-num-layers N,
  counted per TransformerBlock, i.e. per virtual pipeline stage (megatron/core/recompute.py,
  block branch: layer l of the block is checkpointed when l < recompute_num_layers);
- torchtitan 0.3: refused. Its activation checkpointing (torchtitan/distributed/
  activation_checkpoint.py: FullAC, SelectiveAC, RegionAC) applies one policy to every
  transformer block ("per-block remat policies are not currently supported"); the layer
  frequency of older releases (selective_ac_option = "N", every N-th block) is gone;
- DeepSpeed: refused (activation_checkpoint_interval groups layers, it skips none).
Module-level selective recomputation (plan.recompute_modules, meshplan/recompute_modules.py):
- Megatron-LM: every module, --recompute-granularity selective --recompute-modules M ...;
- torchtitan 0.3: refused. SelectiveAC is op-level (a save list of ops: matmuls, attention)
  or every N-th block, not a list of Megatron submodules;
- DeepSpeed: refused (whole layers only).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from .errors import InputError, require_choice

LIMITED_ENGINES = ("megatron", "torchtitan", "deepspeed")
ENGINE_NAMES = {"megatron": "Megatron-LM", "torchtitan": "torchtitan 0.3",
                "deepspeed": "DeepSpeed 0.19"}

# Pipeline schedules each engine runs (meshplan names).
SCHEDULES = {
    "megatron": ("1f1b", "interleaved_1f1b", "looped_bfs"),
    "torchtitan": ("gpipe", "1f1b", "interleaved_1f1b", "looped_bfs", "interleaved_zb", "zb_v",
                   "dualpipev"),
    "deepspeed": ("1f1b",),
}
SCHEDULE_REASONS = {
    "megatron": {
        "gpipe": "Megatron-LM trains with 1F1B or interleaved 1F1B only (no GPipe schedule)",
        "zb_h1": "Megatron-LM has no zero-bubble schedule; use 1f1b",
        "interleaved_zb": "Megatron-LM has no zero-bubble schedule; use interleaved_1f1b",
        "zb_v": "Megatron-LM has no V-shape zero-bubble schedule; use interleaved_1f1b",
        "dualpipev": "DualPipeV is not in Megatron-LM; use interleaved_1f1b",
    },
    "torchtitan": {"zb_h1": "torch.distributed.pipelining has no single-chunk ZB-H1 schedule; "
                            "use interleaved_zb or zb_v"},
    "deepspeed": {},
}
# Fewer micro-batches per step than pipeline stages (m < pp), per runner: the engine named
# (run_by makes it the workload's framework), else the workload's framework ("": meshplan's
# own runtime). Read by validity.py (_batch_rules), so by every command and the search.
# - Megatron-LM / NeMo (Megatron-Core, megatron/core/pipeline_parallel/schedules.py at
#   Megatron-LM d98e8a64): 1F1B, forward_backward_pipelining_without_interleaving, warms up
#   min(pp - rank - 1, m) forwards and runs the other m - warm-up as 1F1B pairs: any m >= 1.
#   Interleaved 1F1B, forward_backward_pipelining_with_interleaving, raises ValueError unless
#   microbatch_group_size_per_vp_stage lies in [pp, m] (so m >= pp), and RuntimeError when
#   0 < m % group < pp (_megatron_overlaps checks the group the export writes);
#   get_pp_rank_microbatches caps its warm-up at m * vpp.
# - DeepSpeed 0.19 (deepspeed/runtime/pipe/schedule.py TrainSchedule: 2 * (m + stages - 1)
#   steps, num_pipe_buffers = max(2, min(stages - stage_id, m)); pipe/engine.py takes
#   m = gradient_accumulation_steps and checks it against nothing): any m >= 1.
# - torch.distributed.pipelining 2.13 (meshplan's runtime; torchtitan 0.3, whose
#   build_pipeline_schedule only warns when m < stages): Schedule1F1B raises for m < pp,
#   ScheduleDualPipeV for m < 2 pp (pipeline/schedules.py torch_min_microbatches); the
#   interleaved and zero-bubble classes take any m in rounds of max(1, m // pp).
# - A framework whose pipeline code meshplan has not read (maxtext, paxml, other, ...): torch's
#   floors, the strictest of those above.
# Every runner: interleaved 1F1B, looped BFS and the zero-bubble schedules need m >= pp in
# meshplan itself: cost/pipeline.py's closed forms for them (the bubble divided by vpp, or
# filled with weight-gradient work) assume a full pipeline; with m < pp one micro-batch
# crosses all pp * vpp chunks in turn and the bubble is not divided (m = 1: (pp - 1) t, not
# (pp - 1) t / vpp). GPipe and 1F1B: (pp - 1) t for any m, so they carry over.
RUNNERS_1F1B_ANY_M = {
    "megatron": "Megatron-Core's forward_backward_pipelining_without_interleaving",
    "nemo": "Megatron-Core's forward_backward_pipelining_without_interleaving",
    "deepspeed": "DeepSpeed's PipelineEngine TrainSchedule",
}
RUNNER_NAMES = {"": "meshplan's runtime", "torchtitan": "torchtitan",
                "megatron": "Megatron-LM", "nemo": "NeMo", "deepspeed": "DeepSpeed"}


def pipeline_min_microbatches(runner: str | None, schedule: str, pp: int,
                              vpp: int) -> tuple[int, str]:
    """(fewest micro-batches per step, why) for ``schedule`` on ``pp`` ranks run by
    ``runner`` (an engine or a framework name; None or "": meshplan's own runtime); why is
    '' when the floor is 1. The rules and their sources are in the comment above."""
    from .pipeline.schedules import torch_min_microbatches

    runner = (runner or "").strip().lower()
    if pp == 1 or schedule == "gpipe":
        return 1, ""
    who = RUNNER_NAMES.get(runner, f"framework {runner!r}")
    if schedule == "1f1b":
        if runner in RUNNERS_1F1B_ANY_M:
            return 1, ""
        return pp, (f"{who} runs 1F1B as torch.distributed.pipelining's Schedule1F1B, which "
                    "needs at least as many micro-batches as stages"
                    + ("" if runner in RUNNER_NAMES else " (its own pipeline code is not known "
                       "to take fewer)"))
    if schedule in ("interleaved_1f1b", "looped_bfs") and runner in ("megatron", "nemo"):
        return pp, ("Megatron-Core's interleaved schedule needs "
                    "microbatch_group_size_per_vp_stage in [pp, m]")
    need = torch_min_microbatches(schedule, pp, vpp)
    if need > pp:  # DualPipeV
        return need, ("torch.distributed.pipelining's ScheduleDualPipeV needs at least as many "
                      f"micro-batches as stages (pp*vpp = {need})")
    return pp, (f"meshplan prices {schedule} only with a full pipeline (m >= pp): "
                "cost/pipeline.py's closed form divides or fills a bubble that m < pp leaves "
                "undivided")


# Rank orders (innermost first, axes of size 1 ignored) each engine lays out.
ORDERS = {"megatron": ("tp-cp-dp-pp", "tp-cp-pp-dp"), "torchtitan": ("tp-cp-dp-pp",),
          "deepspeed": ("tp-cp-dp-pp",)}
ORDER_REASONS = {
    "megatron": "Megatron lays ranks out as tp-cp-dp-pp (default) or tp-cp-pp-dp "
                "(--use-tp-pp-dp-mapping), innermost first",
    "torchtitan": "torchtitan's device mesh is [pp, dp_replicate, dp_shard, cp, tp] "
                  "(tp innermost), i.e. order tp-cp-dp-pp",
    "deepspeed": "DeepSpeed's topology is [pipe, data, model] (model innermost) and its "
                 "Ulysses mesh [data, sequence], i.e. order tp-cp-dp-pp",
}


# The FP8 recipe an engine's export writes where the workload names none and it differs from
# the recipe the cost model assumes for the engine's published runs (cost/fp8_recipe.py
# ENGINE_DEFAULT, torchao's tensorwise for torchtitan's 2024-25 runs): torchtitan 0.3's
# Float8LinearConverter takes recipe_name "rowwise" (its default) or "rowwise_with_gw_hp"
# (torchtitan/components/quantization/float8.py, Float8Linear config), no tensorwise.
EXPORT_FP8_RECIPES = {"torchtitan": ("rowwise",)}
# The frameworks (Workload.framework) that run an engine's code: a NeMo workload planned for
# Megatron-LM keeps NeMo's defaults (both are Megatron-Core).
ENGINE_FRAMEWORKS = {"megatron": ("megatron", "nemo"), "torchtitan": ("torchtitan",),
                     "deepspeed": ("deepspeed",)}


def run_by(engine: str | None, workload):
    """The workload as ``engine`` runs it (None or "meshplan": unchanged): the engine as its
    framework, so the cost model gives the plan that engine's kernels, FP8 casts and defaults
    (the attention kernel, cost/efficiency.py ENGINE_ATTENTION; the FP8 recipe, cost/
    fp8_recipe.py), and the FP8 recipe its export writes where the workload names none.
    ``meshplan plan --engine/--export``, ``predict/simulate --engine`` and ``export --to``
    all read it, so the figures printed for a plan are those of the job exported."""
    if engine not in LIMITED_ENGINES:
        return workload
    framework = (workload.framework if workload.framework in ENGINE_FRAMEWORKS[engine]
                 else engine)
    recipe = workload.fp8_recipe
    if workload.precision == "fp8" and not recipe and engine in EXPORT_FP8_RECIPES:
        recipe = EXPORT_FP8_RECIPES[engine][0]
    if (framework, recipe) == (workload.framework, workload.fp8_recipe):
        return workload
    return replace(workload, framework=framework, fp8_recipe=recipe)


class Violation(NamedTuple):
    field: str
    value: object
    allowed: str


def _engine(engine: str) -> str:
    return require_choice("engine", engine, LIMITED_ENGINES)


def _layout_ok(plan, order: str) -> bool:
    sizes = plan.axis_sizes()
    mine = [a for a in plan.order.split("-") if sizes[a] > 1]
    return mine == [a for a in order.split("-") if sizes[a] > 1]


def scenario_violations(engine: str, model, workload, cluster=None) -> list[Violation]:
    """What the engine refuses whatever the plan: the model, the precision, the GPUs."""
    engine = _engine(engine)
    out: list[Violation] = []
    prec = workload.precision
    if engine == "torchtitan":
        if prec == "fp16":
            out.append(Violation("precision", "fp16", "torchtitan trains in bf16 "
                                 "(mixed_precision_param) or fp32 only"))
        if prec in ("fp32", "tf32"):  # the exporter writes the bf16 mixed-precision policy
            out.append(Violation("precision", prec, "meshplan's torchtitan export writes "
                                 "the bf16 mixed-precision policy only"))
        if (prec == "fp8" and workload.fp8_recipe
                and workload.fp8_recipe not in EXPORT_FP8_RECIPES["torchtitan"]):
            out.append(Violation("fp8_recipe", workload.fp8_recipe, "torchtitan's "
                                 "Float8LinearConverter runs rowwise scaling only (recipe_name "
                                 "rowwise); give --fp8-recipe rowwise or leave it out"))
        from .export.torchtitan_models import torchtitan_model, torchtitan_model_missing
        missing = torchtitan_model_missing(model)
        if missing:
            out.append(Violation("model", model.name, missing))
        entry = torchtitan_model(model)
        cap = entry and TORCHTITAN_ROPE_MAX.get(entry[0] + "/" + entry[2])
        if cap and workload.seq_len > cap:
            out.append(Violation("seq_len", workload.seq_len, f"torchtitan's registered "
                                 f"{entry[0]} {entry[2]} flavour holds RoPE for at most {cap} "
                                 "positions (update_from_config refuses longer training "
                                 f"sequences); use seq_len <= {cap}"))
        if (entry and entry[1] == "llama3_405b" and cluster is not None
                and cluster.gpu.generation in ("volta", "ampere")):
            # the job starts from llama3_405b(), whose Float8LinearConverter is built when it is
            # called and refuses GPUs below SM89 (components/quantization/float8.py:85-96)
            out.append(Violation("gpu", cluster.gpu.name, "torchtitan's llama3_405b() base "
                                 "config builds Float8LinearConverter, which refuses GPUs "
                                 "below SM89 / gfx942 even for a bf16 run; use Hopper, Ada, "
                                 "Blackwell or MI300 and newer"))
    if engine == "megatron":
        out += _megatron_model(model)
    if engine == "megatron" and prec == "fp8" and workload.fp8_recipe == "rowwise":
        out.append(Violation("fp8_recipe", "rowwise", "Megatron-LM's --fp8-recipe is "
                             "tensorwise (current scaling), delayed, mxfp8 or blockwise; "
                             "rowwise is torchao's (torchtitan)"))
    if engine == "deepspeed" and prec == "fp8":
        out.append(Violation("precision", "fp8", "ds_config has no fp8 training setting "
                             "(fp8 comes from Transformer Engine in model code)"))
    if (prec == "fp8" and cluster is not None
            and cluster.gpu.generation in ("volta", "ampere")):
        out.append(Violation("precision", "fp8", f"{cluster.gpu.name} ({cluster.gpu.generation}) "
                             "has no fp8 tensor cores; Transformer Engine and torchao need "
                             "Hopper, Ada or newer"))
    return out


# The RoPE length of torchtitan 0.3's registered flavours (rope max_seq_len in
# torchtitan/models/<module>/__init__.py): models/common/decoder.py:164-174 refuses a
# training seq_len above it ("exceeds attention RoPE maximum supported sequence length").
# The flavours the job builds itself ("meshplan") size RoPE for the plan's seq_len.
TORCHTITAN_ROPE_MAX = {
    "llama3/8B": 131072,  # models/llama3/__init__.py:267
    "llama3/70B": 131072,  # models/llama3/__init__.py:308
    "llama3/405B": 131072,  # models/llama3/__init__.py:349
    "qwen3/30B-A3B": 40960,  # models/qwen3/__init__.py:549
    "deepseek_v3/671B": 16384,  # models/deepseek_v3/__init__.py:577 (4096 * 4)
}


# Megatron's llama3 rope scaling fixes these (megatron/core/models/common/embeddings/
# rotary_pos_embedding.py, _apply_scaling); only the factor is an argument.
MEGATRON_LLAMA3_ROPE = {"low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192}
# YaRN's parameters beside the factor and mscales, as a config.json's rope_scaling names them,
# with the defaults of Megatron's MLATransformerConfig (its --yarn-original-max-position-
# embeddings, --yarn-beta-fast, --yarn-beta-slow: megatron/training/arguments.py at d98e8a64,
# tests/data/megatron_lm_arguments.tsv), which the export writes.
MEGATRON_MLA_YARN = {"original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1}


# how model_features_unbuilt names a gated MLP's activation other than SiLU
GATED_ACT_LABELS = {"gelu_tanh": "gelu_tanh gated MLP (GeGLU)",
                    "quick_gelu": "quick-GELU gated MLP (x * sigmoid(1.702 x))"}


def model_features_unbuilt(model) -> str:
    """Model features that meshplan's exports and runtime do not write or build: sliding-
    window attention, GeGLU or quick-GELU gates, clamped gated-MLP inputs, attention sinks,
    post-norms, parallel blocks, full-width q/k norms, a gated shared expert, ALiBi, NoPE
    layers, an embedding norm, an output-layer bias, non-parametric LayerNorm, norms after
    the blocks, q/k norms after the rotary embedding, Ministral 3's query scale,
    ReLU / squared-ReLU MLPs, Granite's activation multipliers, DeepSeek Sparse
    Attention, DBRX's q/k/v clamp, PhiMoE's SparseMixer router, Llama 4's L2 q/k norm,
    chunked attention and router-scaled expert inputs ('' when the model has none)."""
    out = []
    if model.sliding_window:
        out.append(f"sliding-window attention ({model.sliding_layers} layers, "
                   f"{model.sliding_window} keys)")
    if model.gated_act != "silu":
        out.append(GATED_ACT_LABELS[model.gated_act])
    if model.glu_clamp:
        out.append(f"gated-MLP inputs clamped at {model.glu_clamp:g}")
    if model.attention_sinks:
        out.append("attention sinks")
    if model.qkv_clip:
        out.append(f"q/k/v clamped at {model.qkv_clip:g} (DBRX clip_qkv)")
    if model.moe_sparsemixer:
        out.append("SparseMixer routing (PhiMoE)")
    if model.qk_l2_norm:
        out.append("a weightless L2 q/k norm (Llama 4)")
    if model.attention_chunk:
        out.append(f"chunked attention ({model.attention_chunk}-key chunks, Llama 4)")
    if model.moe_input_scaled:
        out.append("expert inputs scaled by the router weight (Llama 4)")
    if model.extra_layer_norms:
        out.append("post-attention/post-MLP norms" if not model.parallel_block
                   else "a second norm in the parallel block")
    if model.parallel_block:
        out.append("parallel attention/MLP blocks")
    if model.qk_norm_full:
        out.append("full-width q/k norms")
    if model.moe_shared_gate:
        out.append("a gated shared expert")
    if model.position == "alibi":
        out.append("ALiBi attention biases")
    if model.nope_layers:
        out.append(f"layers without rotary positions ({model.nope_layers} NoPE layers)")
    if model.embedding_norm:
        out.append("an embedding LayerNorm")
    if model.output_bias:
        out.append("an output-layer bias")
    if model.norm == "layernorm_noparams":
        out.append("non-parametric LayerNorm")
    if model.norms_after_blocks:
        out.append("norms after attention/MLP instead of before (OLMo 2 block)")
    if model.qk_norm_after_rope:
        out.append("q/k norms after the rotary embedding (Hunyuan)")
    beta = rope_scaling(model).get("llama_4_scaling_beta")
    if beta:
        out.append(f"a position-dependent query scale (llama_4_scaling_beta {beta:g}, "
                   "Ministral 3)")
    if model.ungated_act != "gelu":
        out.append(f"{model.ungated_act} MLP activation")
    if model.activation_multipliers:
        out.append("embedding / residual / attention / logits multipliers (Granite)")
    if model.dsa_topk:
        out.append(f"DeepSeek Sparse Attention (an indexer selecting {model.dsa_topk} keys "
                   "per query)")
    return ", ".join(out)


def rope_scaling(model) -> dict:
    """The model's rope_scaling object ({} when none)."""
    import json
    return json.loads(model.rope_scaling) if model.rope_scaling else {}


def _megatron_model(m) -> list[Violation]:
    out = []
    unbuilt = model_features_unbuilt(m)
    if m.norm == "layernorm_nobias":  # Megatron's LayerNorm (TE or Apex) always has a bias
        unbuilt = ", ".join(x for x in (unbuilt, "bias-free LayerNorm") if x)
    if unbuilt:
        out.append(Violation("model", m.name, f"meshplan's Megatron-LM export does not write "
                             f"{unbuilt}"))
    if m.o_bias and not m.linear_bias:
        out.append(Violation("model", m.name, "a bias on the attention output projection "
                             "without MLP biases (Llama/Qwen3 attention_bias): Megatron-LM's "
                             "--add-qkv-bias covers q, k and v, --add-bias-linear every "
                             "linear layer"))
    if m.position == "rope" and not float(m.rope_theta).is_integer():
        out.append(Violation("model", m.name, f"rope_theta {m.rope_theta} is not an integer "
                             "(Megatron's --rotary-base is an int)"))
    rs = rope_scaling(m)
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "llama3":
        bad = {k: rs.get(k) for k, v in MEGATRON_LLAMA3_ROPE.items() if rs.get(k, v) != v}
        if bad:
            out.append(Violation("model", m.name, f"llama3 rope scaling with {bad}: Megatron's "
                                 f"--use-rope-scaling fixes {MEGATRON_LLAMA3_ROPE}"))
    elif kind == "yarn":
        if not m.is_mla:  # --rope-type yarn is MLA's (MLATransformerConfig); GPT's
            # --position-embedding-type has no yarn (learned_absolute, rope, mrope, relative)
            out.append(Violation("model", m.name, "YaRN rope scaling is written for Megatron only "
                                 "with multi-latent attention"))
    elif kind is not None:
        out.append(Violation("model", m.name, f"rope scaling {kind!r}: Megatron-LM has llama3 "
                             "scaling (--use-rope-scaling) and YaRN for MLA only"))
    if m.is_moe and m.moe_score == "sigmoid" and not m.moe_topk_norm:
        out.append(Violation("model", m.name, "Megatron renormalises sigmoid top-k router "
                             "weights always; the model does not (norm_topk_prob=false)"))
    return out


def plan_violations(engine: str, plan, model, workload) -> list[Violation]:
    """What the engine refuses in this plan (the scenario-level limits not included)."""
    engine = _engine(engine)
    return _PLAN_CHECKS[engine](plan, model, workload)


def engine_violations(engine: str, plan, model, workload, cluster=None) -> list[Violation]:
    """Every reason ``engine`` cannot run ``plan`` for this model and workload (empty: it can)."""
    return scenario_violations(engine, model, workload, cluster) + \
        plan_violations(engine, plan, model, workload) + \
        (cluster_plan_violations(engine, plan, cluster, workload) if cluster is not None else [])


def cluster_plan_violations(engine: str, plan, cluster, workload=None) -> list[Violation]:
    """What the engine refuses in this plan on this cluster: Megatron-LM's DeepEP backend
    (written where the NVLink domain is one node) on expert groups DeepEP has no config for
    (the search does not offer them: space.moe_comm_knobs); with the workload, Megatron's
    FP8 recipe on this GPU (the default differs by generation) against the plan's
    recomputed modules."""
    from .cost.dispatcher_buffers import deepep_group_refusal

    if _engine(engine) != "megatron":
        return []
    out = []
    why = deepep_group_refusal(plan.moe_dispatcher, plan.ep, plan.etp, cluster.scaleup_domain)
    if why:
        out.append(Violation("moe_dispatcher", plan.moe_dispatcher, why))
    if workload is not None:
        out += _megatron_fp8_recompute(plan, workload, cluster.gpu.generation)
    return out


def _megatron_fp8_recompute(p, w, generation: str) -> list[Violation]:
    # megatron/core/transformer/transformer_config.py:1241-1247 at megatron-core 0.16.1
    # (2001-2006 at Megatron-LM d98e8a64), TransformerConfig.__post_init__: with fp8 and
    # recompute_modules holding "moe_act" or "layernorm", fp8_recipe == "delayed" raises
    # "Delayed scaling does not support moe_act and layernorm recompute for fp8" (their
    # output-discarding recompute re-quantises the output). The recipe is the one the export
    # writes: the workload's, else Megatron's default on this generation (cost/fp8_recipe.py)
    from .cost import fp8_recipe

    mods = set(p.recompute_modules.split("+")) & {"moe_act", "layernorm"}
    if not mods or p.recompute != "selective" or w.precision != "fp8":
        return []
    try:
        r = fp8_recipe.resolve("fp8", w.fp8_recipe, "megatron", generation)
    except InputError:
        return []  # the recipe does not run on this GPU: refused as such elsewhere
    if r is None or fp8_recipe.MEGATRON_FLAG.get(r.name) != "delayed":
        return []
    named = "" if w.fp8_recipe else f" (Megatron's default on {generation})"
    return [Violation("recompute_modules", p.recompute_modules,
                      f"Megatron-Core refuses {'/'.join(sorted(mods))} recompute with the "
                      f"fp8 recipe delayed{named}: TransformerConfig's \"Delayed scaling does "
                      "not support moe_act and layernorm recompute for fp8\"; use --fp8-recipe "
                      "tensorwise (or blockwise / mxfp8), or leave those modules out")]


def _common(engine: str, p) -> list[Violation]:
    out = []
    if p.pp > 1 and p.schedule not in SCHEDULES[engine]:
        out.append(Violation("schedule", p.schedule, SCHEDULE_REASONS[engine].get(
            p.schedule, f"{ENGINE_NAMES[engine]} runs " + ", ".join(SCHEDULES[engine]))))
    if not any(_layout_ok(p, o) for o in ORDERS[engine]):
        out.append(Violation("order", p.order, ORDER_REASONS[engine]))
    if engine != "megatron" and p.moe_dispatcher != "alltoall":
        out.append(Violation("moe_dispatcher", p.moe_dispatcher, f"{ENGINE_NAMES[engine]} "
                             "dispatches MoE tokens with an all-to-all (no DeepEP backend)"))
    if engine != "megatron" and p.ep_comm_overlap:
        out.append(Violation("ep_comm_overlap", True, f"{ENGINE_NAMES[engine]} does not overlap "
                             "the expert all-to-all with another micro-batch's compute"))
    return out


def _partial_recompute_torchtitan(p) -> list[Violation]:
    if not p.recompute_layers:
        return []
    return [Violation("recompute_layers", p.recompute_layers,
                      "torchtitan 0.3 applies one activation-checkpointing policy to every "
                      "transformer block (FullAC/SelectiveAC/RegionAC), not to the first N of "
                      "a stage; use recompute full or selective")]


def _recompute_modules(engine: str, p) -> list[Violation]:
    if not p.recompute_modules:
        return []
    how = {"torchtitan": "its selective activation checkpointing is op-level (a save list of "
                         "ops) or every N-th block, not a list of layer submodules",
           "deepspeed": "DeepSpeed checkpoints whole layers (full recompute) only"}[engine]
    return [Violation("recompute_modules", p.recompute_modules,
                      f"module-level recomputation is Megatron-Core's; {how}")]


def _megatron(p, m, w) -> list[Violation]:
    out = _common("megatron", p)
    if p.zero >= 2 and p.hsdp_shard and p.hsdp_shard != p.dp * p.cp:
        out.append(Violation("hsdp_shard", p.hsdp_shard,
                             "meshplan writes HSDP for Megatron only with the distributed "
                             "optimizer (zero=1, --num-distributed-optimizer-instances)"))
    elif p.zero == 1 and p.hsdp_shard and m.is_moe:
        # megatron/core/parallel_state.py:1263-1265 at megatron-core 0.16.1 (1447-1449 at
        # Megatron-LM d98e8a64), initialize_model_parallel: "Expert data parallel size should
        # be divisible by partial DistOpt shard factor" -- the expert weights' data-parallel
        # group, dp*cp*tp / (ep*etp) ranks, is split into the same number of optimizer
        # instances as the dense one
        instances, edp = p.dp * p.cp // p.hsdp_shard, p.dp * p.cp * p.tp // (p.ep * p.etp)
        if edp % instances:
            out.append(Violation("hsdp_shard", p.hsdp_shard, f"gives {instances} distributed-"
                                 f"optimizer instances (--num-distributed-optimizer-instances); "
                                 f"Megatron splits the expert data-parallel group ({edp} ranks: "
                                 f"dp*cp*tp / (ep*etp)) into as many and needs them to divide "
                                 "it; use a larger hsdp_shard or a smaller ep*etp"))
    # the expert group ep*etp Megatron builds: the plan's for a MoE model; ep 1 and etp = tp
    # (validate_args' default, megatron/training/arguments.py:587-588 at d98e8a64) for a dense one
    expert = p.ep * p.etp if m.is_moe else p.tp
    if (p.pp > 1 and expert != p.tp * p.cp
            and not _layout_ok(p, "tp-cp-dp-pp") and _layout_ok(p, "tp-cp-pp-dp")):
        # megatron/core/parallel_state.py:808-812 at megatron-core 0.16.1 (898-902 at
        # Megatron-LM d98e8a64), initialize_model_parallel with --use-tp-pp-dp-mapping (order
        # tp-cp-ep-pp-dp): "When not using pp-last rank ordering, the data parallel size of the
        # attention and moe layers must be the same", i.e. dp*cp*tp / (ep*etp) == dp: with
        # context parallelism a dense model fails it too
        out.append(Violation("order", p.order, f"Megatron's tp-cp-pp-dp mapping "
                             "(--use-tp-pp-dp-mapping) with pipeline parallelism needs the "
                             f"expert group ep*etp ({expert}{'' if m.is_moe else ', etp = tp'}) "
                             f"to equal tp*cp ({p.tp * p.cp}); use the default order "
                             "tp-cp-dp-pp"))
    if p.tp_comm_overlap and not p.sequence_parallel:
        out.append(Violation("tp_comm_overlap", True, "--tp-comm-overlap needs sequence parallelism"))
    if w.optimizer == "sgd" and p.offload_optimizer:
        out.append(Violation("offload_optimizer", True, "the CPU-offloaded optimizer is Adam only"))
    out += _megatron_optimizer(p, w) + _megatron_overlaps(p, w)
    return out


def megatron_vp_group(p, w) -> int:
    """--microbatch-group-size-per-virtual-pipeline-stage for an interleaved plan: the
    micro-batches that pass one virtual stage before the next starts. looped_bfs: all of
    them; interleaved_1f1b: torch's round of m / max(1, m // pp) (pipeline/schedules.py
    rounds_fit), the schedule the cost model prices. Megatron-Core's default is pp
    (megatron/core/model_parallel_config.py:447-448 at 0.16.1)."""
    m = p.num_microbatches(w)
    return m if p.schedule == "looped_bfs" else m // max(1, m // p.pp)


def _megatron_optimizer(p, w) -> list[Violation]:
    # --use-precision-aware-optimizer (written for bf16 optimizer states, and for the CPU
    # offload, which needs it: megatron/training/arguments.py:1884-1887 at d98e8a64; the
    # offload needs zero >= 1 anyway, Plan checks it) is "only supported with adam" and
    # "only supported with distributed optimizer" (megatron/core/optimizer/
    # optimizer_config.py:375-381 at megatron-core 0.16.1); Megatron FSDP (zero 2/3) turns
    # the distributed optimizer on (arguments.py:1130-1137)
    out = []
    states = w.optimizer_state_precision
    need = "--use-precision-aware-optimizer, which needs the distributed optimizer: use zero >= 1"
    if states in ("bf16", "bf16-no-master"):
        if w.optimizer == "sgd":
            out.append(Violation("optimizer_state_precision", states, "Megatron keeps bf16 "
                                 "optimizer states with --use-precision-aware-optimizer, Adam "
                                 "only (the workload's optimizer is sgd)"))
        if p.zero == 0:
            out.append(Violation("optimizer_state_precision", states, "Megatron keeps bf16 "
                                 f"optimizer states with {need}"))
    return out


def _megatron_overlaps(p, w) -> list[Violation]:
    out = []
    if p.overlap_param_gather and p.zero >= 1 and not p.overlap_grad_reduce:
        # megatron/training/arguments.py:1024-1028 at d98e8a64: "Must use
        # --overlap-param-gather with --overlap-grad-reduce"
        out.append(Violation("overlap_param_gather", True, "Megatron overlaps the parameter "
                             "all-gather only together with the gradient reduce "
                             "(--overlap-param-gather needs --overlap-grad-reduce); set "
                             "overlap_param_gather=false too, or overlap_grad_reduce=true"))
    if p.pp > 1 and p.vpp > 1:
        # megatron/core/pipeline_parallel/schedules.py:995-1015 at megatron-core 0.16.1: the
        # group must lie in [pp, m], and m % group must be 0 or >= pp
        m, g = p.num_microbatches(w), megatron_vp_group(p, w)
        if not (p.pp <= g <= m) or 0 < m % g < p.pp:
            out.append(Violation("micro_batch", p.micro_batch, f"gives {m} micro-batches in "
                                 f"groups of {g} per virtual stage; Megatron's interleaved "
                                 f"schedule needs a group in [pp={p.pp}, m] whose remainder "
                                 "m % group is 0 or >= pp"))
    if p.ep_comm_overlap:
        # megatron/core/transformer/transformer_config.py at megatron-core 0.16.1:
        # 1857-1861 (pp > 1 needs virtual stages), 1871-1879 (no full recomputation, no
        # recompute method or layer count); Megatron-LM main transformer_config.py ~3002:
        # no "moe" in recompute_modules
        # 1862-1865: "only supported with expert model parallelism" (ep > 1)
        why = ("ep = 1 (no expert all-to-all to overlap)" if p.ep == 1 else
               "pp > 1 without virtual stages (vpp)" if p.pp > 1 and p.vpp == 1 else
               "full recomputation" if p.recompute == "full" else
               "'moe' in recompute_modules" if "moe" in p.recompute_modules.split("+") else "")
        if why:
            out.append(Violation("ep_comm_overlap", True, "Megatron-Core refuses "
                                 f"--overlap-moe-expert-parallel-comm with {why}"))
    return out


def torchtitan_fsdp(p) -> tuple[int, int]:
    """(dp_replicate, dp_shard) of torchtitan's mesh for the plan (FSDP spans dp_shard*cp)."""
    if p.zero == 0 or (p.zero == 1 and p.dp * p.cp == 1):
        return p.dp, 1
    group = p.fsdp_shard
    return p.dp * p.cp // group, group // p.cp


def _torchtitan(p, m, w) -> list[Violation]:
    out = (_common("torchtitan", p) + _partial_recompute_torchtitan(p)
           + _recompute_modules("torchtitan", p))
    if p.tp > 1 and not m.is_mla and m.kv_heads % p.tp:
        # torchtitan 0.3 models/common/decoder.py: "tensor_parallel_degree ({tp}) must divide
        # n_kv_heads" (its TP shards wk / wv by whole heads; no KV-head replication)
        out.append(Violation("tp", p.tp, f"torchtitan's tensor parallelism splits whole kv "
                             f"heads: tp must divide the kv heads ({m.kv_heads})"))
    if p.pp > 1 and m.tied_embeddings:
        # torchtitan 0.3 models/common/decoder.py update_from_config: "Weight tying is not
        # supported with Pipeline Parallel." (the embedding and the output sit on other stages)
        out.append(Violation("pp", p.pp, "torchtitan does not pipeline a model with tied "
                             "embeddings (weight tying is not supported with pipeline "
                             "parallel); use pp=1"))
    div = (p.tp if p.sequence_parallel else 1) * (2 * p.cp if p.cp > 1 else 1)
    if w.seq_len % div:
        # torchtitan/trainer.py:306-315 at torchtitan 0.3.0 (Trainer.__init__): "Training
        # sequence length must be divisible by (tp if sequence parallel) * 2*cp"; stricter
        # than validity.py's seq_len % 2cp and (seq_len / cp) % tp (1040 on tp 8, cp 2)
        out.append(Violation("seq_len", w.seq_len, f"torchtitan's Trainer needs seq_len "
                             f"divisible by {div} (tp with sequence parallelism times 2*cp)"))
    if p.etp > 1:
        out.append(Violation("etp", p.etp, "torchtitan has no expert tensor parallelism (experts "
                             "are not split over TP ranks; EP borrows FSDP and TP ranks)"))
    if p.cp > 1 and p.cp_kind != "ring":
        out.append(Violation("cp_kind", p.cp_kind,
                             "torchtitan's context parallelism is ring attention only"))
    if p.offload_optimizer:
        out.append(Violation("offload_optimizer", True, "training.enable_cpu_offload offloads "
                             "parameters and gradients too, not only the optimizer states"))
    dpcp = p.dp * p.cp
    if p.zero == 0 and p.cp > 1:
        out.append(Violation("zero", 0, "torchtitan always shards the weights over the cp ranks "
                             "with FSDP; use zero=2 or 3"))
    elif p.zero == 1 and dpcp > 1:
        out.append(Violation("zero", 1, "torchtitan shards with FSDP2 only: zero=2 "
                             "(reshard_after_forward=never) or zero=3; optimizer-only sharding "
                             "(ZeRO-1) is not there"))
    elif p.zero >= 2 and p.fsdp_shard % p.cp:
        out.append(Violation("hsdp_shard", p.hsdp_shard, "torchtitan's FSDP group is dp_shard*cp: "
                             f"the shard group must be a multiple of cp ({p.cp})"))
    else:
        _, shard = torchtitan_fsdp(p)
        if p.ep > 1 and (shard * p.cp * p.tp) % p.ep:
            out.append(Violation("ep", p.ep, "torchtitan folds EP over dp_shard*cp*tp = "
                                 f"{shard * p.cp * p.tp} ranks (not over dp_replicate); ep must "
                                 "divide it"))
    return out


def _deepspeed(p, m, w) -> list[Violation]:
    out = _common("deepspeed", p)
    if p.cp > 1:
        if p.cp_kind != "all_to_all":
            out.append(Violation("cp_kind", p.cp_kind, "DeepSpeed's sequence parallelism is "
                                 "Ulysses (all-to-all); ring attention is not in DeepSpeed"))
        elif p.pp > 1 or p.tp > 1:
            out.append(Violation("cp", p.cp, "Ulysses (sequence_parallel_size) builds a (data, "
                                 "sequence) mesh without the pipeline engine or AutoTP; use "
                                 "pp=1 and tp=1 with cp"))
        elif m.heads % p.cp or (not m.is_mla and m.kv_heads % p.cp):
            out.append(Violation("cp", p.cp, f"Ulysses scatters attention heads: cp must divide "
                                 f"the heads ({m.heads}) and the kv heads ({m.kv_heads})"))
    if p.ep > 1 or p.etp > 1:  # named by the degree that is set (etp alone: etp)
        out.append(Violation(*(("ep", p.ep) if p.ep > 1 else ("etp", p.etp)),
                             "DeepSpeed-MoE sets expert parallelism in model code "
                             "(deepspeed.moe.layer.MoE(ep_size=...)), not in ds_config"))
    if p.pp > 1:
        if p.zero >= 2:
            out.append(Violation("zero", p.zero, "ZeRO-2 and ZeRO-3 are incompatible with "
                                 "DeepSpeed's pipeline parallelism; use zero 0 or 1"))
        split = p.layer_split(m)
        if p.schedule in SCHEDULES["deepspeed"] and len(set(split)) > 1:
            out.append(Violation("pp", p.pp, f"the layer split {split} is uneven; DeepSpeed's "
                                 "uniform partition gives the extra layers to the first stages, "
                                 "meshplan's plan puts them in the middle"))
    if p.tp > 1 and p.pp > 1:
        # AutoTP (tensor_parallel.autotp_size) builds its own (data, tensor) groups over every
        # rank, data = world // tp (deepspeed/utils/groups.py _init_tp_mesh_device, called by
        # runtime/engine.py _configure_tensor_parallel_states, which also replaces the engine's
        # mpu with them), while the pipeline engine's grid has data = world // pp
        # (PipelineModule's PipeDataParallelTopology) and asserts the two equal
        # (runtime/pipe/engine.py:103, `assert self.dp_world_size ==
        # self.grid.data_parallel_size`; deepspeed 0.19.8); even where tp = pp they pass it,
        # AutoTP's tensor groups are the grid's data-parallel groups
        out.append(Violation("tp", p.tp, "DeepSpeed's AutoTP builds (data, tensor) groups "
                             "over every rank, not within a pipeline stage: with the pipeline "
                             "engine its data-parallel size (world // tp) is not the pipeline "
                             "grid's (world // pp) and PipelineEngine refuses it; use tp=1 "
                             "with pp, or pp=1 with tp"))
    if p.tp > 1:
        if p.sequence_parallel:
            out.append(Violation("sequence_parallel", True, "DeepSpeed AutoTP has no "
                                 "Megatron-style sequence parallelism; use sequence_parallel=false"))
    if p.zero >= 1 and p.hsdp_shard and p.hsdp_shard != p.dp * p.cp:
        out.append(Violation("hsdp_shard", p.hsdp_shard, "DeepSpeed 0.19 removed MiCS "
                             "(zero_optimization.mics_shard_size), its only shard-inside-a-group "
                             "mode; ZeRO++ hpZ still shards the optimizer over all ranks"))
    if p.recompute_modules:
        out += _recompute_modules("deepspeed", p)
    elif p.recompute == "selective":
        out.append(Violation("recompute", "selective",
                             "DeepSpeed checkpoints whole layers (full recompute) only"))
    if p.recompute_layers:
        out.append(Violation("recompute_layers", p.recompute_layers,
                             "DeepSpeed checkpoints every layer (activation_checkpoint_interval "
                             "groups layers, it does not leave some out); use recompute full"))
    return out


_PLAN_CHECKS = {"megatron": _megatron, "torchtitan": _torchtitan, "deepspeed": _deepspeed}


# ZeRO stages the code of a framework that is not an export target has, when
# ``Workload.framework`` names it (the search walks only these unless the plan pins one).
# Aleph Alpha's training code (Hagemann et al. 2023, arXiv 2311.05610; public release
# github Aleph-Alpha/scaling, src/scaling/core/optimizer/optimizer_config.py
# ``zero: bool = Field(False, description="enable zero stage 1 optimizer")``; parameter_group.py:
# "each data-parallel worker will still have _all_ original-precision weights as well as
# gradients"): stage 1 at most; zero 0 holds more than zero 1 and moves the same bytes.
FRAMEWORK_ZEROS = {"aleph-alpha": (1,)}


def framework_zeros(framework: str) -> tuple[int, ...] | None:
    """The ZeRO stages ``framework``'s code has (None: not known to be limited)."""
    return FRAMEWORK_ZEROS.get(framework)


def search_hints(engine: str) -> dict:
    """How the search walks only plans the engine runs:

    - ``schedules``: the pipeline schedules to try;
    - ``zeros``: the ZeRO ladder (torchtitan has no ZeRO-1, so plain replication competes);
    - ``defaults``: plan fields the search sets unless pinned (DeepSpeed AutoTP without
      sequence parallelism, DeepSpeed context parallelism as Ulysses)."""
    engine = _engine(engine)
    hints: dict = {"schedules": SCHEDULES[engine], "zeros": (1, 2, 3), "defaults": {}}
    if engine == "torchtitan":
        hints["zeros"] = (0, 1, 2, 3)
    if engine == "deepspeed":
        hints["defaults"] = {"sequence_parallel": False, "cp_kind": "all_to_all"}
    return hints


def check(engine: str, sc) -> None:
    """Raise UnsupportedByEngine (an InputError) with the first reason ``engine`` cannot run
    the scenario's plan."""
    v = engine_violations(engine, sc.plan, sc.model, sc.workload, sc.cluster)
    if v:
        raise UnsupportedByEngine(engine, *v[0])


class UnsupportedByEngine(InputError):
    """A plan feature that ``engine`` cannot express; says which and what would work."""

    def __init__(self, engine: str, feature: str, value: object, reason: str):
        self.engine = engine
        self.feature = feature
        where = {"model": "model", "precision": "workload.precision",
                 "fp8_recipe": "workload.fp8_recipe",
                 "optimizer_state_precision": "workload.optimizer_state_precision",
                 "seq_len": "workload.seq_len"}.get(feature, f"plan.{feature}")
        name = ENGINE_NAMES.get(engine, engine)
        super().__init__(where, value, f"{name} cannot express this: {reason}")
