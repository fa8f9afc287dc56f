"""Megatron-LM: the arguments of ``pretrain_gpt.py`` and a torchrun launch script.

Argument names and meanings are those of ``megatron/training/arguments.py`` in
NVIDIA/Megatron-LM (checked in tests/data/megatron_lm_arguments.tsv, and through
megatron-core's TransformerConfig when it is installed). Mapping of the plan:

- degrees: --tensor/--pipeline/--context/--expert-model-parallel-size,
  --expert-tensor-parallel-size; rank order tp-cp-(ep)-dp-pp is Megatron's default,
  tp-cp-pp-dp is ``--use-tp-pp-dp-mapping``; other orders are refused.
- ZeRO: 0 plain DDP; 1 ``--use-distributed-optimizer`` (optimizer states sharded over
  dp*cp; HSDP via ``--num-distributed-optimizer-instances``); 2 and 3 Megatron FSDP
  (``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads`` /
  ``optim_grads_params``).
- pipeline: 1f1b; interleaved_1f1b with ``--num-layers-per-virtual-pipeline-stage`` and
  ``--microbatch-group-size-per-virtual-pipeline-stage`` = torch's round, m / max(1, m // pp)
  (engines.megatron_vp_group; Megatron-Core's default, pp, is another schedule and fails
  when 0 < m % pp < pp); looped_bfs as interleaving with the group equal to the number of
  micro-batches (every micro-batch passes a chunk before the next chunk starts). GPipe and
  the zero-bubble / DualPipe schedules are not in Megatron-LM's training loop and are
  refused. An uneven layer split is written as
  ``--pipeline-model-parallel-layout`` (stage i of the layout = virtual stage i, the same
  numbering as Plan.chunk_of).
- recompute: selective = ``--recompute-granularity selective --recompute-modules core_attn``
  (Korthikanti et al. 2022, the attention core), or with plan.recompute_modules
  ``--recompute-modules M [M ...]`` of those modules; full = whole layers, uniform, 1 layer
  per checkpoint.
  Partial (plan.recompute_layers = N) = ``--recompute-method block --recompute-num-layers N``:
  the first N layers of each TransformerBlock, i.e. of each virtual pipeline stage.
"""

from __future__ import annotations

from ..cost import efficiency, fp8_recipe
from ..recompute_modules import modules_of
from ..scenario import Scenario
from ..engines import MEGATRON_MLA_YARN, megatron_vp_group, rope_scaling
from ..framework_defaults import rack_scale
from . import Rendered
from ._common import launch_script, same_layout

def _moe_layer_freq(model) -> str | None:
    """Megatron's --moe-layer-freq pattern ("[0]*3+[1]*58"), or None for every layer MoE."""
    flags = [1 if model.layer_is_moe(i) else 0 for i in range(model.layers)]
    if all(flags):
        return None
    runs: list[list[int]] = []
    for f in flags:
        if runs and runs[-1][0] == f:
            runs[-1][1] += 1
        else:
            runs.append([f, 1])
    return "+".join(f"[{f}]*{n}" for f, n in runs)


def pipeline_layout(split: list[int]) -> str:
    """Megatron's --pipeline-model-parallel-layout for layers per virtual stage."""
    stages = []
    last = len(split) - 1
    for c, n in enumerate(split):
        parts = (["E"] if c == 0 else []) + ([f"t*{n}"] if n else []) + (["L"] if c == last else [])
        stages.append(",".join(parts))
    return "|".join(stages)


def megatron_args(sc: Scenario) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """(flags with their values, notes) for pretrain_gpt.py; raises UnsupportedByEngine."""
    m, w, p = sc.model, sc.workload, sc.plan
    notes: list[str] = []
    a: list[tuple[str, list[str]]] = []

    def add(flag: str, *vals: object) -> None:
        a.append((flag, [str(v) for v in vals]))

    # refusals: meshplan/engines.py (render() checks them before this runs)
    tp_pp_dp = not same_layout(p, "tp-cp-dp-pp") and same_layout(p, "tp-cp-pp-dp")

    # ---- model shape ---------------------------------------------------------------------
    add("--num-layers", m.layers)
    add("--hidden-size", m.hidden)
    add("--ffn-hidden-size", m.ffn or m.moe_expert_ffn)
    add("--num-attention-heads", m.heads)
    if m.is_mla:
        add("--multi-latent-attention")
        if m.q_lora_rank:
            add("--q-lora-rank", m.q_lora_rank)
        add("--kv-lora-rank", m.kv_lora_rank)
        add("--qk-head-dim", m.qk_nope_head_dim)
        add("--qk-pos-emb-head-dim", m.qk_rope_head_dim)
        add("--v-head-dim", m.v_head_dim)
    else:
        if m.kv_heads != m.heads:
            add("--group-query-attention")
            add("--num-query-groups", m.kv_heads)
        if m.head_dim * m.heads != m.hidden:
            add("--kv-channels", m.head_dim)
    if m.mlp == "swiglu":
        add("--swiglu")
    add("--normalization", "RMSNorm" if m.norm == "rmsnorm" else "LayerNorm")
    add("--norm-epsilon", m.norm_eps)
    if m.position == "rope":
        add("--position-embedding-type", "rope")
        add("--max-position-embeddings", w.seq_len)
        add("--rotary-base", int(m.rope_theta))
        if m.rope_fraction != 1:
            add("--rotary-percent", m.rope_fraction)
        if m.rope_interleaved and not m.is_mla:  # pairs (2i, 2i+1), not (i, i + d/2)
            add("--rotary-interleaved")  # TransformerConfig.rotary_interleaved
        rs = rope_scaling(m)
        if rs.get("rope_type", rs.get("type")) == "llama3":
            add("--use-rope-scaling")
            add("--rope-scaling-factor", rs["factor"])
        elif rs.get("rope_type", rs.get("type")) == "yarn":  # MLA (engines.py checks)
            add("--rope-type", "yarn")
            add("--rotary-scaling-factor", rs.get("factor", 1.0))
            add("--mscale", rs.get("mscale", 1.0))
            add("--mscale-all-dim", rs.get("mscale_all_dim", 0.0))
            yarn = {k: rs.get(k, v) for k, v in MEGATRON_MLA_YARN.items()}
            add("--yarn-original-max-position-embeddings",
                int(yarn["original_max_position_embeddings"]))
            add("--yarn-beta-fast", float(yarn["beta_fast"]))
            add("--yarn-beta-slow", float(yarn["beta_slow"]))
    else:
        add("--position-embedding-type", "learned_absolute")
        add("--max-position-embeddings", max(m.max_position, w.seq_len))
    if not m.tied_embeddings:
        add("--untie-embeddings-and-output-weights")
    if not m.linear_bias:
        add("--disable-bias-linear")
        if m.qkv_bias:
            add("--add-qkv-bias")
    if m.qk_norm or m.is_mla:
        # MLA: the norms after the q and kv down-projections (DeepSeek's q_a_layernorm,
        # kv_a_layernorm) are Megatron-Core's q_layernorm / kv_layernorm, built only with
        # qk_layernorm (megatron/core/models/gpt/gpt_layer_specs.py, MLA branches, 0.16.1)
        add("--qk-layernorm")
    add("--seq-length", w.seq_len)
    # Megatron pads the vocabulary to a multiple of this times tp; 1 keeps the planned size
    # (padded only up to a multiple of tp when tp does not divide it)
    add("--make-vocab-size-divisible-by", 1)
    if m.vocab % p.tp:
        notes.append(f"Megatron pads the vocabulary {m.vocab} to {-(-m.vocab // p.tp) * p.tp} "
                     f"(a multiple of tp={p.tp})")
    if m.is_moe:
        add("--num-experts", m.moe_experts)
        add("--moe-router-topk", m.moe_topk)
        add("--moe-ffn-hidden-size", m.moe_expert_ffn)
        if m.moe_shared_ffn:
            add("--moe-shared-expert-intermediate-size", m.moe_shared_ffn)
        freq = _moe_layer_freq(m)
        if freq:
            add("--moe-layer-freq", freq)
        add("--moe-grouped-gemm")
        if p.moe_dispatcher == "hybridep":  # stated HybridEP (plan.MOE_DISPATCHERS)
            add("--moe-token-dispatcher-type", "flex")
            add("--moe-flex-dispatcher-backend", "hybridep")
        elif p.moe_dispatcher == "deepep":  # Megatron-Core's flex dispatcher, DeepEP class:
            # DeepEP's kernels on 8-GPU NVLink nodes, HybridEP on rack-scale NVLink (NVL72),
            # as Megatron-Bridge's GB200 / GB300 MoE recipes set moe_flex_dispatcher_backend
            # (framework_defaults MBRIDGE_PERF_RACK); TransformerConfig.moe_flex_dispatcher_
            # backend (Literal deepep / hybridep at megatron-core 0.16.1; --moe-enable-deepep,
            # which selected deepep, is deprecated at d98e8a64 and refused beside hybridep)
            add("--moe-token-dispatcher-type", "flex")
            add("--moe-flex-dispatcher-backend",
                "hybridep" if rack_scale(sc.cluster.scaleup_domain) else "deepep")
        else:
            add("--moe-token-dispatcher-type", "alltoall")
        if p.ep_comm_overlap:  # MCore v0.14 batch-level EP all-to-all overlap
            add("--overlap-moe-expert-parallel-comm")
        add("--moe-router-dtype", "fp32")
        add("--moe-router-score-function", m.moe_score)
        if m.moe_score == "softmax" and not m.moe_topk_norm:
            add("--moe-router-pre-softmax")  # softmax over all experts, top-k not renormalised
        if m.moe_routed_scale != 1:
            add("--moe-router-topk-scaling-factor", m.moe_routed_scale)
        if m.moe_groups:
            add("--moe-router-num-groups", m.moe_groups)
            add("--moe-router-group-topk", m.moe_group_topk)
        if m.moe_router_bias:  # DeepSeek-V3 aux-loss-free balancing (sigmoid scores + bias)
            add("--moe-router-enable-expert-bias")
            add("--moe-router-load-balancing-type", "seq_aux_loss")
            # the sequence-wise balance loss weight of the DeepSeek-V3 report (alpha = 1e-4)
            add("--moe-aux-loss-coeff", "1e-4")
        else:
            add("--moe-router-load-balancing-type", "aux_loss")
            add("--moe-aux-loss-coeff", m.moe_aux_loss_coef or "1e-2")

    # ---- parallelism -----------------------------------------------------------------------
    add("--tensor-model-parallel-size", p.tp)
    add("--pipeline-model-parallel-size", p.pp)
    add("--context-parallel-size", p.cp)
    if p.cp > 1:
        add("--cp-comm-type", "p2p" if p.cp_kind == "ring" else "a2a")
    if m.is_moe:
        add("--expert-model-parallel-size", p.ep)
        add("--expert-tensor-parallel-size", p.etp)
    if p.sequence_parallel:
        add("--sequence-parallel")
    if tp_pp_dp:
        add("--use-tp-pp-dp-mapping")
    split = p.layer_split(m)
    if p.pp > 1:
        if len(set(split)) > 1:
            add("--pipeline-model-parallel-layout", pipeline_layout(split))
        elif p.vpp > 1:
            add("--num-layers-per-virtual-pipeline-stage", split[0])
        if p.vpp > 1:  # Megatron-Core's default group is pp, not the schedule priced
            add("--microbatch-group-size-per-virtual-pipeline-stage", megatron_vp_group(p, w))
    if p.zero == 1:
        add("--use-distributed-optimizer")
        if p.hsdp_shard and p.hsdp_shard != p.dp * p.cp:
            add("--num-distributed-optimizer-instances", p.dp * p.cp // p.hsdp_shard)
    elif p.zero >= 2:
        add("--use-megatron-fsdp")
        add("--data-parallel-sharding-strategy", "optim_grads" if p.zero == 2 else "optim_grads_params")
        # megatron/training/arguments.py:1169-1170 at d98e8a64: Megatron FSDP "requires the
        # `fsdp_dtensor` checkpointing format" (the default is torch_dist)
        add("--ckpt-format", "fsdp_dtensor")
    if p.offload_optimizer:
        add("--optimizer-cpu-offload")
        add("--optimizer-offload-fraction", "1.0")
    if p.overlap_grad_reduce:
        add("--overlap-grad-reduce")
    if p.overlap_param_gather and p.zero >= 1:
        add("--overlap-param-gather")
    if p.tp_comm_overlap:
        add("--tp-comm-overlap")

    # ---- batch, precision, recompute ---------------------------------------------------------
    add("--micro-batch-size", p.micro_batch)
    add("--global-batch-size", w.global_batch)
    if w.precision == "fp16":
        add("--fp16")
    else:
        add("--bf16")
    if w.precision == "fp8":
        # the recipe the cost model priced (cost/fp8_recipe.py: the workload's, or the default)
        name = fp8_recipe.resolve("fp8", w.fp8_recipe, "megatron",
                                  sc.cluster.gpu.generation).name
        flag = fp8_recipe.MEGATRON_FLAG[name]  # rowwise is refused by engines.violations
        # TE's formats: hybrid (E4M3 forward, E5M2 gradients) for per-tensor scaling, E4M3
        # throughout for the block-scaled recipes (TE mxfp8.rst, fp8_blockwise_scaling.rst)
        add("--fp8-format", "e4m3" if flag in ("mxfp8", "blockwise") else "hybrid")
        add("--fp8-recipe", flag)
        if flag == "delayed":
            add("--fp8-amax-history-len", 1024)
            add("--fp8-amax-compute-algo", "max")
    if p.recompute == "full" and p.recompute_layers:
        # the first N layers of every TransformerBlock (one per virtual stage) are
        # checkpointed, the rest keep their activations (megatron/core/recompute.py, block)
        add("--recompute-granularity", "full")
        add("--recompute-method", "block")
        add("--recompute-num-layers", p.recompute_layers)
    elif p.recompute == "full":
        add("--recompute-granularity", "full")
        add("--recompute-method", "uniform")
        add("--recompute-num-layers", 1)
    elif p.recompute == "selective":
        add("--recompute-granularity", "selective")
        # the plan's modules (meshplan/recompute_modules.py; Megatron takes them as nargs='+')
        # or, without a list, the attention core
        add("--recompute-modules", *(modules_of(p.recompute_modules) or ("core_attn",)))

    # ---- optimizer ---------------------------------------------------------------------------
    add("--optimizer", "sgd" if w.optimizer == "sgd" else "adam")
    bf16_states = w.optimizer_state_precision in ("bf16", "bf16-no-master")
    if p.offload_optimizer or bf16_states:
        add("--use-precision-aware-optimizer")
    if bf16_states:
        add("--exp-avg-dtype", "bf16")
        add("--exp-avg-sq-dtype", "bf16")
    if w.optimizer_state_precision == "bf16-no-master":
        notes.append("Megatron's distributed optimizer keeps an fp32 main copy of the weights: "
                     "4 bytes a parameter more than the bf16-no-master state the plan assumed")
    if w.grad_reduce_dtype == "bf16":
        add("--grad-reduce-in-bf16")
    if p.pp > 1 and p.schedule == "looped_bfs":
        notes.append("looped_bfs is Megatron's interleaved schedule with every micro-batch "
                     "grouped per virtual stage")
    return a, notes


def training_args(sc: Scenario) -> list[tuple[str, list[str]]]:
    """Schedule and logging settings (data and tokenizer come from the script's options)."""
    return [("--train-iters", ["100"]), ("--eval-iters", ["0"]),
            ("--lr", ["3.0e-4"]), ("--min-lr", ["3.0e-5"]), ("--lr-decay-style", ["cosine"]),
            ("--lr-warmup-iters", ["10"]), ("--weight-decay", ["0.1"]),
            ("--adam-beta2", ["0.95"]), ("--clip-grad", ["1.0"]),
            ("--log-interval", ["1"]), ("--log-throughput", [])]


USAGE = ("usage: bash megatron_launch.sh --data-path PREFIX [PREFIX ...] --tokenizer-model "
         "TOKENIZER [more pretrain_gpt.py options], or bash megatron_launch.sh --mock-data")


def data_block(sc: Scenario) -> list[str]:
    """Bash lines choosing the tokenizer from the script's own options: real data with a
    Hugging Face tokenizer (--data-path + --tokenizer-model), or --mock-data with
    Megatron's NullTokenizer. NullTokenizer adds an end-of-document id after --vocab-size
    ids, so --vocab-size is the planned vocabulary minus one."""
    return [
        'case " $* " in',
        f'  *" --mock-data "*) ARGS+=(--tokenizer-type NullTokenizer --vocab-size {sc.model.vocab - 1}) ;;',
        '  *" --data-path "*)',
        '    if [[ " $* " != *" --tokenizer-model "* ]]; then',
        f'      echo "megatron_launch.sh: --data-path needs --tokenizer-model; {USAGE}" >&2; exit 2',
        '    fi',
        '    ARGS+=(--tokenizer-type HuggingFaceTokenizer) ;;',
        f'  *) echo "megatron_launch.sh: no data given; {USAGE}" >&2; exit 2 ;;',
        'esac',
    ]


def render_megatron(sc: Scenario) -> Rendered:
    plan_args, notes = megatron_args(sc)
    args = plan_args + training_args(sc)
    fsdp = sc.plan.zero >= 2
    # megatron/training/arguments.py at d98e8a64: Megatron FSDP asserts
    # CUDA_DEVICE_MAX_CONNECTIONS != "1" (1166-1167; Megatron's examples/megatron_fsdp/
    # sbatch_mfsdp_deepseek_v3.sh unsets it); otherwise tp > 1 or cp > 1 before Blackwell
    # asserts it is "1" (1453-1479)
    unset = ["unset CUDA_DEVICE_MAX_CONNECTIONS  # Megatron FSDP refuses 1 (arguments.py:1166)"]
    force = unset if fsdp else []
    if sc.plan.ep_comm_overlap and not fsdp:
        # the expert all-to-all overlap needs CUDA_DEVICE_MAX_CONNECTIONS > 1 (Megatron-LM
        # megatron/core/transformer/moe/README.md at d98e8a64, "Requirements for EP A2A
        # Overlap"), set over a caller's 1 as FSDP's unset is; with tp or cp > 1 before
        # Blackwell validate_args then warns instead of asserting 1, naming "1 or 32, which
        # depends on which parallelization you want to prioritize" (arguments.py 1466-1474):
        # 32, the overlap the plan was costed with
        force = ["export CUDA_DEVICE_MAX_CONNECTIONS=32  # the expert all-to-all overlap "
                 "needs > 1 (Megatron-Core MoE README)"]
        if (sc.plan.tp > 1 or sc.plan.cp > 1) and sc.cluster.gpu.compute_capability < 10:
            notes.append("CUDA_DEVICE_MAX_CONNECTIONS=32 for the expert all-to-all overlap "
                         "(epo): before Blackwell Megatron-LM asks for 1 to order TP/CP "
                         "communication first and warns that the two overlaps compete; the "
                         "plan's step time assumes both")
    # ROCm TE runs MXFP8 only with its switch on (cost/fp8_recipe.py ROCM_MXFP8_ENV), and its
    # attention with the dQ atomics the generation's attention was priced with (cost/
    # efficiency.py TE_ATTENTION_ENV): forced over a caller's value as the overlaps' settings are
    w, gen = sc.workload, sc.cluster.gpu.generation
    recipe_env = [f"export {k}={v}  # ROCm Transformer Engine runs MXFP8 only with this set "
                  "(check_mxfp8_support)" for k, v in fp8_recipe.launch_env(
                      w.precision, w.fp8_recipe, "megatron", gen).items()]
    recipe_env += [f"export {k}={v}  # the attention backward the plan was priced with "
                   "(meshplan cost/efficiency.py TE_ATTENTION_ENV; TE's default differs)"
                   for k, v in efficiency.TE_ATTENTION_ENV.get(gen, {}).items()]
    text = launch_script(
        sc, "megatron_launch.sh", "megatron_launch.sh: Megatron-LM pretrain_gpt.py for this plan",
        args, '"${MEGATRON_LM:-.}/pretrain_gpt.py"', notes,
        env=None if force else {"CUDA_DEVICE_MAX_CONNECTIONS": "1"},
        extra_comments=["MEGATRON_LM = a Megatron-LM checkout. Data: --data-path PREFIX "
                        "(Megatron's indexed dataset) --tokenizer-model HF_NAME_OR_PATH, or "
                        "--mock-data for a throughput run on synthetic tokens. Options after "
                        "these go to pretrain_gpt.py as they are."],
        before_launch=force + recipe_env + data_block(sc))
    return Rendered("megatron", {"megatron_launch.sh": text}, {"megatron_launch.sh"}, notes)
