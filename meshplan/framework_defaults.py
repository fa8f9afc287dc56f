"""What a blank engine column means, per framework: the one place that says it.

A published run names its framework (runs CSV ``framework``: megatron, nemo, torchtitan,
deepspeed, maxtext, paxml, other) but usually not its engine settings (TP communication
overlap, FP8 recipe, MoE dispatcher, ...). A blank setting is predicted as that framework
runs it. The rule for each default, in this order:

1. what the framework's own published performance runs and recipes use, where they use one
   setting (ablation baselines aside): Megatron-LM's README scaling runs and NeMo /
   Megatron-Bridge's performance recipes overlap TP communication;
2. otherwise the framework's code default at a cited version (what it does unless told),
   or, where the framework ships a preset for the row's model family, that preset's value
   (torchtitan's train_configs with TP: TORCHTITAN_RECIPE).

Where a framework's performance recipes choose a knob per model and GPU (Megatron-Bridge's
MoE dispatcher and expert all-to-all overlap), a row of a model family the framework ships a
recipe for, on a GPU it ships one for, takes that recipe's setting (MBRIDGE_PERF_MOE:
DeepSeek-V3, Qwen3-30B-A3B, Qwen3-235B-A22B, GPT-OSS 120B on H100, B200, B300, GB200,
GB300); other models and GPUs take the model provider's default (rule 2), except the
dispatcher on rack-scale NVLink (GB200 NVL72), where nearly every recipe uses one setting
(MBRIDGE_PERF_RACK): rule 1. NeMo's gradient-reduction dtype: NEMO_DTYPES. Intervals of
rows that leave these knobs blank cover the other settings (engine_spread.py). A row that
states a value always wins (validate.pins_from_row, Workload).

Who reads this: ``meshplan validate`` (validate.prepare / pins_from_row), the search's plan
defaults (search._base_fields, search/exhaustive.py) for the workload's framework or the
``--engine`` it plans for, and so the exporters (they write the plan the search returns:
export/megatron.py --tp-comm-overlap, export/torchtitan.py enable_async_tensor_parallel,
export/deepspeed.py tp_overlap_comm). The FP8 recipe defaults stay in cost/fp8_recipe.py
(ENGINE_DEFAULT / BLACKWELL_DEFAULT, with their sources) and the attention kernels in
cost/efficiency.py (ENGINE_ATTENTION); ``fp8_recipe`` and ``attention_kernel`` below read
them, so there is one table per knob and one entry point for all of them.

Sources (versions as read; each value below names its source key):
- MCORE: Megatron-LM main at d98e8a64dd (2026-08-22), megatron/core/model_parallel_config.py
  ``tp_comm_overlap: bool = False``, ``overlap_moe_expert_parallel_comm: bool = False``;
  megatron/core/transformer/transformer_config.py ``moe_token_dispatcher_type = "allgather"``
  (meshplan has no all-gather dispatcher cost: see MOE_DISPATCHER below);
  megatron/training/arguments.py validate_args sets ``accumulate_allreduce_grads_in_fp32 =
  True`` for bf16 (fp32 gradient reduction) and keeps fp32 main params and Adam moments.
- MEGATRON_README: Megatron-LM README "Training Speed and Scalability" (core_r0.8.0, r0.9.0:
  the 2024 H100 model table and scaling figures): "We perform fine-grained overlapping of
  data-parallel (--overlap-grad-reduce --overlap-param-gather), tensor-parallel
  (--tp-comm-overlap) and pipeline-parallel communication"; the code default is off (MCORE).
- MBRIDGE_PERF: NVIDIA-NeMo/Megatron-Bridge scripts/performance at v0.2.0 (llama31 configs
  the same at v0.5.0): llama3/llama31 pretrain configs ``CommOverlapConfig(tp_comm_overlap=
  bool(tp > 1))`` (off only for nvfp4, and under v0.5.0's --deterministic), qwen3 configs ``CommOverlapConfig(tp_comm_overlap=True)``; NeMo
  Framework Launcher performance configs llama2_70b.yaml / llama3_70b.yaml
  ``ub_tp_comm_overlap: true`` (its gpt3/175b.yaml has false).
- MBRIDGE_PROVIDER: Megatron-Bridge v0.2.0 model providers (deepseek, gpt_oss, qwen, llama4,
  glm45, olmoe) ``moe_token_dispatcher_type = "alltoall"``; CommOverlapConfig
  ``overlap_moe_expert_parallel_comm`` unset (off). Its performance base configs choose the
  dispatcher per model and GPU (e.g. v0.2.0 DeepSeek-V3 H100 deepep + overlap, Qwen3-235B
  H100 alltoall + overlap, GPT-OSS H100 alltoall without overlap, GB200 hybridep), so no
  one value is "the recipe's".
- TORCHTITAN_RECIPE: torchtitan's TP communication overlap (async TP) is off unless a run
  enables it: torchtitan/config/job_config.py ``Parallelism.enable_async_tensor_parallel: bool
  = False`` (pytorch/torchtitan at 238fa99, 2026-02-23, the last commit with the TOML presets
  before #2386 moved them to config_registry.py). Its model presets with TP do not use one
  setting (torchtitan/models/*/train_configs/*.toml at 238fa99): llama3_405b.toml
  ``tensor_parallel_degree = 8``, ``enable_async_tensor_parallel = true``; llama3_70b.toml
  ``tensor_parallel_degree = 8`` without it (off); llama4_17bx16e.toml and llama4_17bx128e.toml
  TP 8, ``enable_async_tensor_parallel = false``; the rest (llama3_8b, qwen3, deepseek_v3)
  TP 1. Its published benchmarks do not use one setting either
  (benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md is an A/B of the feature;
  llama3_h100_202412_torchtitan.md Table 4 has "2D" and "2D + AsyncTP"). So rule 2: the code
  default (off), and the model family's own preset where torchtitan ships one with TP
  (TORCHTITAN_TP_OVERLAP_PRESETS: Llama 3.1 405B on, 70B off).
- TORCHTITAN: FSDP2 MixedPrecisionPolicy
  ``mixed_precision_reduce = "float32"``; MoE token exchange by all-to-all
  (torchtitan/distributed/expert_parallel.py), no overlap.
- DEEPSPEED: deepspeed/runtime/tensor_parallel/config.py ``tp_overlap_comm: bool = False``
  (AutoTP; Megatron-DeepSpeed's tensor parallelism is Megatron's of 2021, before TE's
  userbuffers overlap); fp32 master weights and optimizer states (ZeRO / BF16_Optimizer).
- ALEPH_ALPHA: Aleph-Alpha/scaling (the engine of Hagemann et al. 2023's layout sheets)
  core/nn/linear/utils.py calls torch.distributed.all_reduce, all_gather_into_tensor and
  reduce_scatter_tensor whole inside the parallel linears' autograd functions, on the compute
  stream: nothing overlaps them (Megatron/TE's --tp-comm-overlap and torchtitan's async TP
  split them into chunks pipelined with the GEMMs; cost/layer.py hides them only then).
- MBRIDGE_PERF_RACK: Megatron-Bridge performance recipes for GB200 (NVL72: 72 GPUs on one
  NVLink domain) MoE models set ``moe_flex_dispatcher_backend = "hybridep"``, which
  apply_flex_dispatcher_backend (src/megatron/bridge/training/flex_dispatcher_backend.py,
  v0.3.0) turns into ``moe_token_dispatcher_type = "flex"``: tags v0.3.0, v0.3.1, v0.4.0,
  v0.4.2, v0.5.0, v0.5.1, scripts/performance/configs/*/*_workload_base_configs.py, GB200
  pretrain preset names with expert parallelism (aliases counted): 25 of 29, 32 of 36, 52
  of 54, 50 of 54, 51 of 58, 51 of 58 HybridEP, the others GPT-OSS (all releases) and
  Qwen3-Next (v0.3.x), left to the provider's alltoall; v0.6.0
  src/megatron/bridge/perf_recipes/*/gb200/*.py: every MoE recipe (deepseek_v3 through
  deepseek/common.py _deepseek_v3_common, deepseek_v4, kimi_k2, qwen3_moe, qwen3_vl,
  qwen35_vl, glm5, nemotronh) sets ``moe_token_dispatcher_type = "flex"``, hybridep, except
  gpt_oss.py. On 8-GPU NVLink
  nodes the same releases mostly keep alltoall (B200: 9 of 29 flex at v0.3.0, 22 of 54 at
  v0.5.0; H100: 11 of 24, 14 of 39), so the rack default applies only where the scale-up
  domain is larger than one 8-GPU node. meshplan costs HybridEP as the DeepEP class
  (plan.MOE_DISPATCHERS "deepep", cost/moe_comm.py). Expert all-to-all overlap stays off
  (``moe_a2a_overlap=False`` in most of those GB200 presets: MBRIDGE_PROVIDER).
- MBRIDGE_PERF_MOE: Megatron-Bridge scripts/performance at v0.2.0, v0.3.1, v0.4.2 and v0.5.1
  (2026-07-20): the workload base configs (configs/{deepseek,qwen3,gpt_oss}/
  workload_base_configs.py at v0.2.0, configs/{deepseek,qwen,gpt_oss}/
  *_workload_base_configs.py after), at the variant the launcher picks by default
  (argument_parser.py ``--config_variant`` default "v2", "v1" where no v2 exists:
  utils.get_workload_base_config), per model, GPU (h100, b200, b300, gb200, gb300) and
  compute dtype (bf16, fp8_cs, fp8_mx): ``moe_flex_dispatcher_backend`` ("hybridep" or
  "deepep": the flex dispatcher, costed as the DeepEP class; None: alltoall, which v0.5.1's
  overrides.py set_workload_base_configs then sets) and ``moe_a2a_overlap``
  (_set_moe_a2a_overlap_overrides: ``overlap_moe_expert_parallel_comm``). The releases
  disagree on some (Qwen3-235B-A22B on H100: alltoall, deepep, alltoall, alltoall; its
  overlap is on in all four), so a knob is taken from the recipes only where every release
  that ships the recipe uses one setting (rule 1), else the provider's default stands and
  the interval covers both (engine_spread.py). apply_flex_dispatcher_backend
  (src/megatron/bridge/training/flex_dispatcher_backend.py) runs HybridEP on compute
  capability 8.x-10.x, H100 included. A blank fp8 row reads the fp8_mx recipe where the FP8
  recipe it is predicted with is MXFP8 (fp8_recipe below: NeMo's Blackwell default), else
  fp8_cs (the one FP8 recipe of these models on H100).
- PAX_ATTENTION: NVIDIA/JAX-Toolbox rosetta/rosetta/projects/pax/README.md (12d19d5c): Pax on
  GPUs is published with two attention paths, its results table giving "Sequences/Sec (bf16 /
  TE bf16)": Pax's own attention (praxis DotProductAttention, an einsum, a softmax and an
  einsum compiled by XLA: the scores materialised) and Transformer Engine's (``ENABLE_TE=1``:
  TE's fused attention). meshplan's point default for paxml is the unlisted engines' fa2
  (cost/efficiency.py ENGINE_ATTENTION); the interval covers both published paths.
- MEGATRON_VOLTA_SOFTMAX: on Volta no flash kernel runs (cost/attention_memory.py
  NO_FLASH_GENERATIONS), so Megatron's attention core is unfused; its scale, mask and softmax
  run as one fused kernel since megatron/model/fused_softmax.py (FusedScaleMaskSoftmax), as
  separate PyTorch ops in the Megatron-LM paper's code (mpu/transformer.py at abe36e2e5f,
  2019-07: cost/efficiency.py "unfused-eager"). A V100 row may be of either era: the point is
  the fused softmax, the interval covers both.
- NONE: no cited default; meshplan's previous behaviour is kept (TP overlap assumed when
  TP > 1: maxtext, paxml, other, and "" = meshplan's own runtime / the plain planner).
- NEMO_DTYPES: NeMo's published performance runs reduce gradients in bf16 (rule 1): NeMo 2.0's
  performance scripts (NVIDIA/NeMo scripts/performance/llm/pretrain_*.py and helpers.py, the
  scripts behind the NeMo performance summaries 24.12-25.07 and the DGX Cloud benchmarking
  recipes: ``recipe.trainer.plugins.grad_reduce_in_fp32 = False``), Megatron-Bridge's
  scripts/performance v0.1.0rc4..v0.6.0 (``cfg.ddp.grad_reduce_in_fp32 = False`` in every
  family's common config) and NVIDIA's MLPerf Training NeMo configs (``grad_sync_dtype: bf16``,
  v3.0-v5.1). NeMo 2.0's general training recipe (bf16_mixed, ``grad_reduce_in_fp32=True``,
  nemo/collections/llm/recipes/precision/mixed_precision.py) and NeMo Framework Launcher 1.x
  configs (6 of them set grad_sync_dtype bf16) keep fp32: a run of those states fp32. The
  optimizer states stay fp32 (every one of those scripts keeps fp32 master weights and
  moments; NeMo's Nemotron-4 340B recipe is the exception, and states it).
"""

from __future__ import annotations

from functools import lru_cache

# the frameworks a runs CSV names (shared/validation/README.md), plus "" (meshplan's own)
FRAMEWORKS = ("megatron", "nemo", "torchtitan", "deepspeed", "maxtext", "paxml", "other", "")
# ... and the engines whose own kernels the cost model names (llm-foundry's Triton attention
# and fused loss, Aleph Alpha's eager norms and attention: cost/efficiency.py, cost/ops.py;
# OLMo-core's FSDP2: cost/fsdp2_copies.py):
# every framework a workload may name. Another name would be predicted as no engine at all
# without saying so: Workload refuses it, and `meshplan validate` reads it as "other" with a
# note (validate.prepare).
ENGINES = FRAMEWORKS + ("llm-foundry", "llmfoundry", "aleph-alpha", "olmo-core")


# other names people write for the same engines (a runs CSV's `framework` cell): read as
# that engine, not as 'other' with its defaults (attention kernel, TP overlap, dtypes)
ENGINE_ALIASES = {"megatron-lm": "megatron", "megatron lm": "megatron", "megatronlm": "megatron",
                  "megatron-core": "megatron", "megatron core": "megatron", "mcore": "megatron",
                  "nemo 2.0": "nemo", "nemo2": "nemo", "nemo-2.0": "nemo", "nemo 2": "nemo"}


def row_framework(name: str | None) -> tuple[str, str]:
    """A runs CSV's ``framework`` cell as the cost model reads it, and a note ('' if none):
    another name of a listed engine (ENGINE_ALIASES) is that engine; a name the schema does
    not list is its catch-all, 'other', said so."""
    fw = _fw(name)
    fw = ENGINE_ALIASES.get(fw, fw)
    if fw in ENGINES:
        return fw, ""
    return "other", f"framework {fw!r} is not one the schema names: predicted as 'other'"

# TP communication overlap when TP > 1 (TE userbuffers / Megatron --tp-comm-overlap,
# torchtitan async TP, DeepSpeed AutoTP tp_overlap_comm). Frameworks not listed: NONE.
TP_COMM_OVERLAP = {"megatron": True, "nemo": True, "torchtitan": False, "deepspeed": False,
                   "aleph-alpha": False}
TP_COMM_OVERLAP_SOURCE = {"megatron": "MEGATRON_README", "nemo": "MBRIDGE_PERF",
                          "torchtitan": "TORCHTITAN_RECIPE", "deepspeed": "DEEPSPEED",
                          "aleph-alpha": "ALEPH_ALPHA"}
# ... and where the framework ships a preset for the model family that sets it with TP
# (framework -> meshplan preset -> setting; the model is matched by name as a runs CSV's
# `model` is, row_model.match_preset): TORCHTITAN_RECIPE
TP_COMM_OVERLAP_PRESETS = {"torchtitan": {"llama3.1-405b": True, "llama3.1-70b": False}}

# MoE token dispatcher (plan.MOE_DISPATCHERS). Megatron-LM's own default is all-gather,
# which meshplan does not cost; its MoE documentation and Megatron-Bridge's providers run
# all-to-all with expert parallelism, which is what is costed for every framework.
MOE_DISPATCHER = {"megatron": "alltoall", "nemo": "alltoall", "torchtitan": "alltoall"}
MOE_DISPATCHER_SOURCE = {"megatron": "MCORE (allgather, not costed: alltoall)",
                         "nemo": "MBRIDGE_PROVIDER", "torchtitan": "TORCHTITAN"}
# ... and on rack-scale NVLink (a scale-up domain larger than one 8-GPU node: GB200 / GB300
# NVL72), where the framework's recipes use another dispatcher (MBRIDGE_PERF_RACK). The
# 8-GPU node is DGX/HGX H100 and B200's NVLink island (specs/catalog GPU table,
# GPU.scaleup_domain 8; NVL72: 72).
NODE_SCALEUP_GPUS = 8
MOE_DISPATCHER_RACK = {"nemo": "deepep"}
MOE_DISPATCHER_RACK_SOURCE = {"nemo": "MBRIDGE_PERF_RACK"}
# ... and where Megatron-Bridge ships a performance recipe for the model family on the GPU
# (MBRIDGE_PERF_MOE): (meshplan preset, GPU id, compute dtype) -> the (dispatcher, expert
# all-to-all overlap) of each release's recipe, MBRIDGE_PERF_RELEASES in order (None: that
# release ships no recipe for it). A knob is the recipe's where every release that ships
# the recipe uses one setting of it (rule 1); where they differ, the provider's default.
MBRIDGE_PERF_RELEASES = ("v0.2.0", "v0.3.1", "v0.4.2", "v0.5.1")
MBRIDGE_PERF_MOE = {
    ("deepseek-v3", "B200", "bf16"): (("alltoall", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "B200", "fp8_cs"): (("alltoall", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "B200", "fp8_mx"): (("alltoall", False), ("deepep", False), ("deepep", True), ("deepep", True)),
    ("deepseek-v3", "B300", "bf16"): (None, ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "B300", "fp8_cs"): (None, ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "B300", "fp8_mx"): (None, ("deepep", False), ("deepep", False), ("deepep", True)),
    ("deepseek-v3", "GB200", "bf16"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "GB200", "fp8_cs"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "GB200", "fp8_mx"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", True)),
    ("deepseek-v3", "GB300", "bf16"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "GB300", "fp8_cs"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "GB300", "fp8_mx"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", True)),
    ("deepseek-v3", "H100-SXM-80GB", "bf16"): (("deepep", True), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("deepseek-v3", "H100-SXM-80GB", "fp8_cs"): (("deepep", True), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-235b-a22b", "B200", "bf16"): (("alltoall", True), ("deepep", False), ("alltoall", False), ("alltoall", False)),
    ("qwen3-235b-a22b", "B200", "fp8_cs"): (("alltoall", True), ("deepep", False), ("alltoall", False), ("alltoall", False)),
    ("qwen3-235b-a22b", "B200", "fp8_mx"): (("alltoall", True), ("deepep", False), ("alltoall", False), ("deepep", True)),
    ("qwen3-235b-a22b", "B300", "bf16"): (None, ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-235b-a22b", "B300", "fp8_cs"): (None, ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-235b-a22b", "B300", "fp8_mx"): (None, ("deepep", False), ("deepep", False), ("deepep", True)),
    ("qwen3-235b-a22b", "GB200", "bf16"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-235b-a22b", "GB200", "fp8_cs"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-235b-a22b", "GB200", "fp8_mx"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", True)),
    ("qwen3-235b-a22b", "GB300", "bf16"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-235b-a22b", "GB300", "fp8_cs"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-235b-a22b", "GB300", "fp8_mx"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", True)),
    ("qwen3-235b-a22b", "H100-SXM-80GB", "bf16"): (("alltoall", True), ("deepep", True), ("alltoall", True), ("alltoall", True)),
    ("qwen3-235b-a22b", "H100-SXM-80GB", "fp8_cs"): (("alltoall", True), ("deepep", True), ("alltoall", True), ("alltoall", True)),
    ("qwen3-30b-a3b", "B200", "bf16"): (("alltoall", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "B200", "fp8_cs"): (("alltoall", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "B200", "fp8_mx"): (("alltoall", False), ("deepep", False), ("deepep", False), ("deepep", True)),
    ("qwen3-30b-a3b", "B300", "bf16"): (None, ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "B300", "fp8_cs"): (None, ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "B300", "fp8_mx"): (None, ("deepep", False), ("deepep", False), ("deepep", True)),
    ("qwen3-30b-a3b", "GB200", "bf16"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "GB200", "fp8_cs"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "GB200", "fp8_mx"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", True)),
    ("qwen3-30b-a3b", "GB300", "bf16"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "GB300", "fp8_cs"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "GB300", "fp8_mx"): (("deepep", False), ("deepep", False), ("deepep", False), ("deepep", True)),
    ("qwen3-30b-a3b", "H100-SXM-80GB", "bf16"): (("alltoall", True), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("qwen3-30b-a3b", "H100-SXM-80GB", "fp8_cs"): (("alltoall", True), ("deepep", False), ("deepep", False), ("deepep", False)),
    ("gpt-oss-120b", "B200", "bf16"): (("alltoall", False), ("alltoall", False), ("alltoall", False), ("alltoall", False)),
    ("gpt-oss-120b", "B200", "fp8_mx"): (None, None, ("alltoall", False), ("alltoall", False)),
    ("gpt-oss-120b", "B300", "bf16"): (None, ("alltoall", False), ("deepep", False), ("deepep", False)),
    ("gpt-oss-120b", "B300", "fp8_mx"): (None, None, ("deepep", False), ("deepep", False)),
    ("gpt-oss-120b", "GB200", "bf16"): (("alltoall", False), ("alltoall", False), ("alltoall", True), ("alltoall", True)),
    ("gpt-oss-120b", "GB200", "fp8_mx"): (None, None, ("alltoall", True), ("deepep", True)),
    ("gpt-oss-120b", "GB300", "bf16"): (("alltoall", False), ("alltoall", False), ("alltoall", False), ("alltoall", False)),
    ("gpt-oss-120b", "GB300", "fp8_mx"): (None, None, ("alltoall", False), ("deepep", True)),
    ("gpt-oss-120b", "H100-SXM-80GB", "bf16"): (("alltoall", False), ("alltoall", False), ("alltoall", False), ("alltoall", False)),
    ("gpt-oss-120b", "H100-SXM-80GB", "fp8_cs"): (None, None, ("alltoall", False), ("alltoall", False)),
}
MBRIDGE_PERF_MOE_FRAMEWORKS = ("nemo",)  # Megatron-Bridge is NeMo's training library
# expert all-to-all overlapped with compute (Megatron-Core overlap_moe_expert_parallel_comm)
EP_COMM_OVERLAP = {"megatron": False, "nemo": False, "torchtitan": False}
EP_COMM_OVERLAP_SOURCE = {"megatron": "MCORE", "nemo": "MBRIDGE_PROVIDER",
                          "torchtitan": "TORCHTITAN"}

# optimizer-state and gradient-reduction dtypes (specs/workload.py choices): fp32 in every
# framework's default (MCORE, TORCHTITAN, DEEPSPEED), except NeMo's gradients, which its
# published performance runs reduce in bf16 (NEMO_DTYPES). NeMo's Nemotron-4 340B recipe
# (bf16 moments, no master) differs: a row states it.
OPTIMIZER_STATE_PRECISION = "fp32"
GRAD_REDUCE_DTYPE = "fp32"
GRAD_REDUCE_DTYPE_BY_FRAMEWORK = {"nemo": "bf16"}
GRAD_REDUCE_DTYPE_SOURCE = {"nemo": "NEMO_DTYPES"}

# selective recomputation without a module list: Megatron-Core recompute_modules None ->
# ["core_attn"] (MCORE transformer_config.py __post_init__); meshplan's "" module set is the
# engine's own selective recomputation (cost/layer.py), the attention core for Megatron/NeMo.
RECOMPUTE_MODULES = ""


def _fw(framework: str | None) -> str:
    return str(framework or "").strip().lower()


def tp_comm_overlap(framework: str | None, tp: int, model: str = "") -> bool:
    """Whether ``framework`` overlaps TP communication with compute when a run of the model
    named ``model`` (a preset name or a name that matches one; "" = none) does not say."""
    if tp <= 1:
        return False
    fw = _fw(framework)
    preset = _preset_of(model) if fw in TP_COMM_OVERLAP_PRESETS else None
    if preset in TP_COMM_OVERLAP_PRESETS.get(fw, {}):
        return TP_COMM_OVERLAP_PRESETS[fw][preset]
    return TP_COMM_OVERLAP.get(fw, True)


@lru_cache(maxsize=256)
def _preset_of(model: str) -> str | None:
    from .row_model import match_preset
    return match_preset(model or "")


def rack_scale(scaleup_domain_gpus: int) -> bool:
    """Whether a scale-up (NVLink) domain of this many GPUs is rack-scale (NVL72)."""
    return scaleup_domain_gpus > NODE_SCALEUP_GPUS


def recipe_moe(framework: str | None, model: str = "", gpu: str = "", precision: str = "",
               fp8_recipe_name: str = "") -> tuple[str | None, bool | None] | None:
    """(dispatcher, expert all-to-all overlap) of the framework's performance recipes for the
    model family named ``model`` on the GPU ``gpu`` (a catalog id) at ``precision`` (and the
    FP8 recipe the run states, "" = the framework's default): each knob where every release
    that ships the recipe uses one setting, else None; None where no release ships one
    (MBRIDGE_PERF_MOE)."""
    fw = _fw(framework)
    if fw not in MBRIDGE_PERF_MOE_FRAMEWORKS or not model or not gpu:
        return None
    preset = _preset_of(model)
    if preset is None:
        return None
    prec = str(precision or "bf16").lower()
    if prec == "fp8":
        from .specs.catalog.gpus import GPUS
        part = GPUS.get(gpu)
        recipe = fp8_recipe_name or (fp8_recipe(fw, part.generation) if part else "")
        prec = "fp8_mx" if recipe == "mx" else "fp8_cs"
    releases = [r for r in MBRIDGE_PERF_MOE.get((preset, gpu, prec), ()) if r is not None]
    if not releases:
        return None
    dispatchers = {d for d, _ in releases}
    overlaps = {o for _, o in releases}
    return (dispatchers.pop() if len(dispatchers) == 1 else None,
            overlaps.pop() if len(overlaps) == 1 else None)


def moe_dispatcher(framework: str | None, scaleup_domain_gpus: int = NODE_SCALEUP_GPUS,
                   recipe: tuple | None = None) -> str:
    """The MoE token dispatcher ``framework`` runs on a cluster whose scale-up domain holds
    ``scaleup_domain_gpus`` GPUs (Cluster.scaleup_domain) when a run does not say;
    ``recipe``: the framework's recipe for the model and GPU (recipe_moe), where it has one."""
    if recipe is not None and recipe[0] is not None:
        return recipe[0]
    fw = _fw(framework)
    if rack_scale(scaleup_domain_gpus) and fw in MOE_DISPATCHER_RACK:
        return MOE_DISPATCHER_RACK[fw]
    return MOE_DISPATCHER.get(fw, "alltoall")


def ep_comm_overlap(framework: str | None, recipe: tuple | None = None) -> bool:
    if recipe is not None and recipe[1] is not None:
        return recipe[1]
    return EP_COMM_OVERLAP.get(_fw(framework), False)


def fp8_recipe(framework: str | None, generation: str) -> str:
    """The FP8 recipe ``framework`` runs on ``generation`` (cost/fp8_recipe.default_recipe)."""
    from .cost.fp8_recipe import default_recipe
    return default_recipe(_fw(framework), generation)


def attention_kernel(framework: str | None) -> str:
    """The attention kernel class ``framework`` runs (cost/compute.attention_kernel_of)."""
    from .cost.compute import attention_kernel_of
    return attention_kernel_of(_fw(framework))


# Attention kernel classes (cost/efficiency.py ATTENTION_KERNELS) a framework's runs on a GPU
# generation ("" = any) are published with where they do not use one: a row that leaves
# attention_kernel blank is predicted with the engine's default (attention_kernel above) and
# its interval covers these (engine_spread.py). Sources: PAX_ATTENTION,
# MEGATRON_VOLTA_SOFTMAX.
ATTENTION_CHOICES = {("paxml", ""): ("te", "unfused"),
                     ("megatron", "volta"): ("unfused", "unfused-eager")}


def attention_kernel_choices(framework: str | None, generation: str) -> tuple[str, ...]:
    """The attention kernel classes ``framework`` may have run on ``generation`` where its
    published runs do not use one (ATTENTION_CHOICES); () where they do."""
    fw = _fw(framework)
    return ATTENTION_CHOICES.get((fw, generation or ""), ATTENTION_CHOICES.get((fw, ""), ()))


def attention_kernel_open(framework: str | None) -> bool:
    """Whether ``framework`` has attention kernel choices on some generation."""
    return any(fw == _fw(framework) for fw, _ in ATTENTION_CHOICES)


def optimizer_state_precision(framework: str | None) -> str:
    return OPTIMIZER_STATE_PRECISION


def grad_reduce_dtype(framework: str | None) -> str:
    return GRAD_REDUCE_DTYPE_BY_FRAMEWORK.get(_fw(framework), GRAD_REDUCE_DTYPE)


def plan_defaults(framework: str | None, tp: int,
                  scaleup_domain_gpus: int = NODE_SCALEUP_GPUS, moe: bool = True,
                  model: str = "", gpu: str = "", precision: str = "",
                  fp8_recipe_name: str = "") -> dict:
    """Plan fields a search sets for ``framework`` unless pinned, at TP degree ``tp`` on a
    cluster whose scale-up domain holds ``scaleup_domain_gpus`` GPUs, for the model named
    ``model`` (its family's preset or recipe, where the framework ships one) on the GPU
    ``gpu`` (catalog id) at ``precision`` / ``fp8_recipe_name`` ("" = the default). A dense
    model (``moe`` False) has no token dispatcher and no expert all-to-all to overlap: the
    Plan's neutral values (validity._expert_rules)."""
    recipe = recipe_moe(framework, model, gpu, precision, fp8_recipe_name) if moe else None
    return {"tp_comm_overlap": tp_comm_overlap(framework, tp, model),
            "moe_dispatcher": (moe_dispatcher(framework, scaleup_domain_gpus, recipe) if moe
                               else "alltoall"),
            "ep_comm_overlap": ep_comm_overlap(framework, recipe) and moe}


def source(knob: str, framework: str | None,
           scaleup_domain_gpus: int = NODE_SCALEUP_GPUS) -> str:
    """The source key (module docstring) of ``knob``'s default for ``framework``."""
    fw = _fw(framework)
    if (knob == "moe_dispatcher" and rack_scale(scaleup_domain_gpus)
            and fw in MOE_DISPATCHER_RACK_SOURCE):
        return MOE_DISPATCHER_RACK_SOURCE[fw]
    table = {"tp_comm_overlap": TP_COMM_OVERLAP_SOURCE, "moe_dispatcher": MOE_DISPATCHER_SOURCE,
             "ep_comm_overlap": EP_COMM_OVERLAP_SOURCE}.get(knob)
    if table is None:
        raise KeyError(knob)
    return table.get(fw, "NONE")


# Pipeline schedules a framework's published runs use, when a row names none: Megatron-Core
# (Megatron-LM, NeMo, Megatron-DeepSpeed) runs 1F1B or, with virtual stages, interleaved
# 1F1B (megatron/core/pipeline_parallel/schedules.py get_forward_backward_func); so do the
# engines of the other sources (validate.py). Frameworks meshplan does not know ("other",
# "") may run any schedule (DeepSeek-V3's DualPipe, arXiv 2412.19437 sec. 3.2.1): when the
# engine schedule cannot run the row's stated layout, validate searches the schedules that
# can (SCHEDULE_OPEN).
ENGINE_SCHEDULES = ("1f1b", "interleaved_1f1b")
SCHEDULE_OPEN = ("other", "")


def schedule_open(framework: str | None) -> bool:
    """Whether a row of ``framework`` that names no schedule may have run any schedule."""
    return _fw(framework) in SCHEDULE_OPEN
