"""What one training step processes: sequence length, global batch, precision, optimizer."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import (InputError, require_bool, require_choice, require_nonneg_int,
                      require_positive_int)

# fp32: fp32 weights and activations, matmuls at the fp32 rate; tf32: the same storage with
# the matmuls on TF32 tensor cores where the GPU has them (Ampere and newer; NVIDIA's PyTorch
# containers turn it on for fp32 matmuls through TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1), at the
# fp32 rate elsewhere. Megatron-LM / Megatron-DeepSpeed train in fp32 when neither --fp16
# nor --bf16 is given (megatron/arguments.py: params_dtype = torch.float).
WORKLOAD_PRECISIONS = ("bf16", "fp16", "fp8", "fp32", "tf32")
FP32_STORAGE = ("fp32", "tf32")
OPTIMIZERS = ("adamw", "adam", "sgd")

# Bytes per parameter kept by the optimizer beyond the 16-bit weights and gradients.
# Mixed-precision Adam (ZeRO paper, sec. 3.1): fp32 master copy + two fp32 moments = 12;
# with bf16 moments 4 + 2 + 2 = 8. SGD with momentum: master + momentum.
# "bf16-no-master": the optimizer keeps its moments in bf16 and no master copy at all, the
# bf16 weights being updated in place: Apex DistributedFusedAdam with dtype=bf16 equal to
# the model's dtype, which NeMo 1.x then builds with store_params=False
# (nemo/collections/nlp/models/language_modeling/megatron_base_model.py, setup_optimization:
# "if optim_dtype == model_dtype: optim_kwargs['store_params'] = False", optim_dtype read from
# the config's optim.dtype since v1.23.0); the NeMo launcher's Nemotron-4 340B configs
# (NeMo-Framework-Launcher conf/training/nemotron/nemotron_340b.yaml at 24.07 and 24.09) set
# optim dtype bf16: 2 + 2 bytes of Adam moments, 2 of SGD momentum.
_OPT_STATE_BYTES = {("adamw", "fp32"): 12, ("adam", "fp32"): 12,
                    ("adamw", "bf16"): 8, ("adam", "bf16"): 8,
                    ("sgd", "fp32"): 8, ("sgd", "bf16"): 6,
                    ("adamw", "bf16-no-master"): 4, ("adam", "bf16-no-master"): 4,
                    ("sgd", "bf16-no-master"): 2}
OPTIMIZER_STATE_PRECISIONS = ("fp32", "bf16", "bf16-no-master")
# Gradient buffer dtype: fp32 by default in Megatron-LM (accumulate_allreduce_grads_in_fp32
# for bf16) and torchtitan (FSDP2 reduce_dtype float32); bf16 where the engine accumulates and
# reduces in bf16: Megatron-LM --grad-reduce-in-bf16, NeMo 1.x optim.grad_sync_dtype bf16 (Apex
# DistributedFusedAdam's contiguous grad buffer is allocated in grad_sync_dtype).
GRAD_REDUCE_DTYPES = ("fp32", "bf16")


# Recipe names a runs CSV (column fp8_recipe) or a scenario may give, and what they mean.
FP8_RECIPES = {
    "delayed": "per-tensor scaling from an amax history (TE DelayedScaling)",
    "cs": "per-tensor current scaling (TE Float8CurrentScaling)",
    "tensorwise": "torchao float8 dynamic per-tensor scaling",
    "rowwise": "torchao float8 per-row scaling (CUTLASS row-wise GEMM)",
    "mx": "MXFP8, 1x32 blocks with E8M0 scales (TE MXFP8BlockScaling, Blackwell)",
    "blockwise": "FP8 block scaling, 1x128 activations / 128x128 weights (TE Float8BlockScaling, DeepSeek-V3)",
}
FP8_RECIPE_ALIASES = {"current": "cs", "fp8-cs": "cs", "mxfp8": "mx", "fp8-mx": "mx", "block": "blockwise",
           "subchannel": "blockwise", "hybrid": "delayed"}


def normalise_fp8_recipe(name: str) -> str:
    """An FP8 recipe name from user input ("" = the engine's default, cost/fp8_recipe.py),
    or InputError naming the allowed ones."""
    n = str(name or "").strip().lower()
    n = FP8_RECIPE_ALIASES.get(n, n)
    if n and n not in FP8_RECIPES:
        raise InputError("fp8_recipe", name, "one of " + ", ".join(FP8_RECIPES) + " (or blank)")
    return n


MAX_TOKENS_PER_STEP = 2**36

@dataclass(frozen=True)
class Workload:
    seq_len: int
    global_batch: int  # sequences per optimizer step
    precision: str = "bf16"  # the linear layers' math: bf16, fp16, fp8, fp32 or tf32
    optimizer: str = "adamw"
    optimizer_state_precision: str = "fp32"
    # the engine that runs the step, when it matters for prediction (its kernels and
    # memory policy): megatron, nemo, torchtitan, deepspeed, maxtext, aleph-alpha (eager
    # RMSNorm, attention and SwiGLU, cost/ops.py UNFUSED_NORM_ENGINES,
    # EAGER_ATTENTION_ENGINES, UNFUSED_SWIGLU_ENGINES), other; "" = meshplan's own runtime
    # (cost/efficiency.py ENGINE_ATTENTION)
    framework: str = ""
    # the loss function is compiled (torch.compile / Inductor fuses the upcast, log-softmax,
    # nll and their backward): torchtitan with --training.compile since 2025-02 (its
    # components/loss.py build_cross_entropy_loss); a runs CSV says so in the optional
    # column ``compiled_loss`` (cost/ops.py logits_bytes)
    compiled_loss: bool = False
    # the attention kernel class the run uses where it differs from its engine's default
    # (cost/efficiency.py ATTENTION_KERNELS: "te", "fa2", "triton-fa1", "unfused",
    # "unfused-eager"); "" = the default.
    # A runs CSV says so in the optional column ``attention_kernel``.
    attention_kernel: str = ""
    # the RMSNorm kernel where the run states one that differs from its engine's default:
    # "fused" = a fused norm kernel (what cost/ops.py layer_ops counts) in an engine whose
    # default is the eager PyTorch norm (cost/ops.py UNFUSED_NORM_ENGINES: Aleph Alpha's
    # kernel option "flash_attention2 + RMS kernel", Hagemann et al. 2023); "" = the default.
    # A runs CSV says so in the optional column ``norm_kernel``.
    norm_kernel: str = ""
    # what of each transformer layer the run replays from CUDA graphs (cost/ops.py CUDA_GRAPHS,
    # graph_replay): "full", or Transformer Engine scopes joined by "+" ("attn", "moe_router",
    # "moe_preprocess"); "" = eager. A runs CSV says so in the optional column ``cuda_graph``
    cuda_graph: str = ""
    # the engine's op-level selective recomputation checkpoints the attention module whole
    # (torchtitan from PR #1683 to PR #2118 with flex attention and the model not compiled:
    # cost/torchtitan_ac.py); a runs CSV says so in the optional column ``attention_full_ac``
    attention_full_ac: bool = False
    # the dtype of the gradient buffer (GRAD_REDUCE_DTYPES); a runs CSV says so in the optional
    # column ``grad_reduce_dtype``
    grad_reduce_dtype: str = "fp32"
    # the FP8 recipe of the linear layers when precision is fp8 (cost/fp8_recipe.py RECIPES:
    # delayed, cs, tensorwise, rowwise, mx, blockwise); "" = the engine's default
    fp8_recipe: str = ""
    # the linear layers' weights are kept in FP8 and all-gathered in FP8 by the data-parallel
    # weight gather (Megatron-Core fp8_param_gather, NeMo fp8_params, torchao's FSDP float8
    # all-gather: cost/param_gather.py); fp8 runs only. A runs CSV says so in the optional column
    # ``fp8_param_gather``
    fp8_param_gather: bool = False
    # Megatron-Core DistributedDataParallelConfig.bucket_size, in parameters, where the run sets
    # one (e.g. NeMo's MLPerf configs: 134217728 or 768000000); 0 = the engine's default
    # (cost/dp_tail.py). A runs CSV says so in the optional column ``ddp_bucket_size``
    ddp_bucket_size: int = 0

    def __post_init__(self) -> None:
        for f in ("seq_len", "global_batch"):
            object.__setattr__(self, f, require_positive_int(f, getattr(self, f)))
        if self.seq_len > 2**24:
            raise InputError("seq_len", self.seq_len, "must be at most 16,777,216 tokens")
        # ~1,000x the largest published batches (Llama 3 405B: 16M tokens; DeepSeek-V3:
        # 15,360 x 4,096 = 63M tokens per step): a larger step is a typo
        if self.seq_len * self.global_batch > MAX_TOKENS_PER_STEP:
            raise InputError("global_batch", self.global_batch,
                             f"seq_len x global_batch must be at most {MAX_TOKENS_PER_STEP:,} "
                             f"tokens per step (seq_len {self.seq_len:,})")
        object.__setattr__(self, "precision",
                           require_choice("precision", self.precision, WORKLOAD_PRECISIONS))
        object.__setattr__(self, "optimizer",
                           require_choice("optimizer", self.optimizer, OPTIMIZERS))
        from ..framework_defaults import ENGINES
        framework = str(self.framework or "").strip().lower()
        if framework not in ENGINES:
            raise InputError("framework", self.framework,
                             "allowed: " + ", ".join(e for e in ENGINES if e))
        object.__setattr__(self, "framework", framework)
        # a bool, not a string: bool("false") is True (errors.require_bool)
        object.__setattr__(self, "compiled_loss", require_bool("compiled_loss", self.compiled_loss))
        object.__setattr__(self, "attention_full_ac",
                           require_bool("attention_full_ac", self.attention_full_ac))
        kernel = str(self.attention_kernel or "").strip().lower()
        if kernel:
            from ..cost.efficiency import ATTENTION_KERNELS
            kernel = require_choice("attention_kernel", kernel, ATTENTION_KERNELS)
        object.__setattr__(self, "attention_kernel", kernel)
        norm = str(self.norm_kernel or "").strip().lower()
        if norm:
            from ..cost.ops import NORM_KERNELS
            norm = require_choice("norm_kernel", norm, NORM_KERNELS)
        object.__setattr__(self, "norm_kernel", norm)
        from ..cost.ops import normalise_cuda_graph
        object.__setattr__(self, "cuda_graph", normalise_cuda_graph(self.cuda_graph))
        object.__setattr__(self, "fp8_recipe", normalise_fp8_recipe(self.fp8_recipe))
        object.__setattr__(self, "fp8_param_gather",
                           require_bool("fp8_param_gather", self.fp8_param_gather))
        if self.fp8_param_gather and self.precision != "fp8":
            raise InputError("fp8_param_gather", True,
                             f"needs precision fp8 (FP8 weights to gather), not {self.precision}")
        object.__setattr__(self, "ddp_bucket_size",
                           require_nonneg_int("ddp_bucket_size", self.ddp_bucket_size))
        object.__setattr__(self, "optimizer_state_precision",
                           require_choice("optimizer_state_precision",
                                          self.optimizer_state_precision,
                                          OPTIMIZER_STATE_PRECISIONS))
        object.__setattr__(self, "grad_reduce_dtype",
                           require_choice("grad_reduce_dtype", self.grad_reduce_dtype,
                                          GRAD_REDUCE_DTYPES))

    @classmethod
    def from_tokens(cls, seq_len: int, global_batch_tokens: int, **kw) -> "Workload":
        require_positive_int("seq_len", seq_len)
        require_positive_int("global_batch_tokens", global_batch_tokens)
        if global_batch_tokens % seq_len:
            raise InputError("global_batch_tokens", global_batch_tokens,
                             f"must be a multiple of seq_len ({seq_len})")
        return cls(seq_len, global_batch_tokens // seq_len, **kw)

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.global_batch

    @property
    def weight_bytes(self) -> int:
        """Bytes per parameter of the working (compute) weights; fp8 keeps bf16 weights."""
        return 2

    @property
    def grad_bytes(self) -> int:
        return 2

    @property
    def master_and_state_bytes(self) -> int:
        state = _OPT_STATE_BYTES[(self.optimizer, self.optimizer_state_precision)]
        # fp32 storage: the weights are the master copy (counted with the weights)
        return state - 4 if self.precision in FP32_STORAGE else state

    @property
    def keeps_master(self) -> bool:
        """Whether the optimizer holds a master copy apart from the 16-bit weights."""
        return self.optimizer_state_precision != "bf16-no-master"

    @property
    def grad_buffer_bytes(self) -> int:
        """Bytes per gradient element in the engine's gradient buffer (16-bit with a bf16
        grad reduce; fp16 engines' own rule is cost/memory.py keeps_16bit_grads)."""
        return 2 if self.grad_reduce_dtype == "bf16" else 4

    @property
    def activation_bytes(self) -> int:
        """Bytes per stored activation element (16-bit; fp8 recipes keep 16-bit activations
        for everything but the linear-layer inputs, see cost/memory.py)."""
        return 2
