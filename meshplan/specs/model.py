"""What is trained: the shape of a decoder-only transformer, dense or mixture-of-experts.

Parameter counts are exact for the architectures described (checked against published
totals and against ``sum(p.numel())`` of a model built on the meta device in the tests).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property

from .hashing import cached_hash
from ..errors import (InputError, require_bool, require_choice, require_nonneg_int,
                      require_plain_text, require_positive_int, require_positive_number)

# "swiglu": a gated MLP of three matrices (its gate: gated_act); "gelu": a non-gated MLP of
# two matrices (its activation: ungated_act)
MLP_KINDS = ("swiglu", "gelu")
# "layernorm_nobias": LayerNorm with a weight and no bias (Cohere, DBRX): RMSNorm's count;
# "layernorm_noparams": LayerNorm without weight or bias (OLMo 1: elementwise_affine=False)
NORM_KINDS = ("rmsnorm", "layernorm", "layernorm_nobias", "layernorm_noparams")
# "alibi": no position weights, a per-head linear bias on the attention scores (BLOOM, MPT)
POSITION_KINDS = ("rope", "learned", "alibi")
MOE_SCORES = ("softmax", "sigmoid")
# activation of a gated MLP's gate: SiLU (SwiGLU, Llama), tanh-approximated GELU (GeGLU,
# Gemma: hidden_activation "gelu_pytorch_tanh") or quick GELU, x * sigmoid(1.702 x) (GPT-OSS:
# transformers modeling_gpt_oss.py GptOssExperts, ``gate * torch.sigmoid(gate * self.alpha)``
# with alpha 1.702; Megatron-Core fusions/fused_bias_geglu.py quick_gelu); same matrices and
# FLOPs, other kernels
GATED_ACTS = ("silu", "gelu_tanh", "quick_gelu")
# activation of a non-gated MLP (mlp "gelu": two matrices): GELU (GPT-2, NeoX, Falcon),
# ReLU (OPT) or squared ReLU (Nemotron-4, Primer); same matrices and FLOPs, other kernels
UNGATED_ACTS = ("gelu", "relu", "relu2")


# The largest shape meshplan takes, about 100x the deepest and widest published transformer
# (Llama 3.1 405B: 126 layers; hidden 16,384-20,480 for PaLM 540B / MT-NLG 530B; FFN 73,728
# for PaLM; vocabularies to ~262k; 256-384 routed experts): a shape past these is a typo,
# and some of the model's per-layer walks are linear in the layer count.
MODEL_SIZE_CAPS = {"layers": 2**14, "hidden": 2**21, "ffn": 2**23, "moe_expert_ffn": 2**23,
                   "vocab": 2**25, "moe_experts": 2**16}



# The numbers of a rope_scaling object that meshplan reads (the Megatron and torchtitan
# exports write them, max_context scales by the factor): each a finite number > 0 where
# given (True: >= 0, as transformers' and Megatron's default mscale_all_dim 0 is). A
# negative factor was written into --rope-scaling-factor; a text one ended the torchtitan
# export in a traceback.
ROPE_NUMBERS = {"factor": False, "low_freq_factor": False, "high_freq_factor": False,
                "original_max_position_embeddings": False, "beta_fast": False,
                "beta_slow": False, "mscale": True, "mscale_all_dim": True,
                "attention_factor": False}
# the scalings transformers requires a factor for (modeling_rope_utils.py validation); the
# exports read rope_scaling["factor"] for llama3 (a KeyError traceback without it)
ROPE_NEEDS_FACTOR = ("linear", "dynamic", "yarn", "llama3")


def check_rope_scaling(field: str, v: dict) -> None:
    """The rule for a rope_scaling object, wherever it comes from (a config.json, a
    scenario's inline model): its kind named, its numbers finite and in range, a factor
    where the kind needs one. ``field`` names it in the error (``config.json:rope_scaling``)."""
    kind = v.get("rope_type", v.get("type"))
    if not isinstance(kind, str):
        raise InputError(f"{field}.rope_type", kind, "must name the scaling "
                         "(llama3, yarn, linear, dynamic, ...)")
    for k, x in v.items():
        if isinstance(x, float) and not math.isfinite(x):
            raise InputError(f"{field}.{k}", x, "must be a finite number")
    if kind in ROPE_NEEDS_FACTOR and v.get("factor") is None:
        raise InputError(f"{field}.factor", None, f"missing; {kind} scaling needs it "
                         "(e.g. \"factor\": 8.0)")
    for k, zero_ok in ROPE_NUMBERS.items():
        x = v.get(k)
        if x is None:
            continue
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0 \
                or (x == 0 and not zero_ok):
            raise InputError(f"{field}.{k}", x, "must be a finite number "
                             + (">= 0" if zero_ok else "> 0"))
        if k == "original_max_position_embeddings" and not float(x).is_integer():
            raise InputError(f"{field}.{k}", x, "must be a positive integer")

@cached_hash
@dataclass(frozen=True)
class ModelSpec:
    """Transformer shape. Sizes are element counts; ``ffn`` is the dense MLP width.

    MLA (DeepSeek multi-head latent attention) is on when ``kv_lora_rank > 0``. MoE is on
    when ``moe_experts > 0``; the first ``moe_dense_layers`` layers then stay dense and
    after that every ``moe_layer_freq``-th layer is MoE.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    head_dim: int = 0  # 0 means hidden // heads
    mlp: str = "swiglu"
    tied_embeddings: bool = False
    norm: str = "rmsnorm"
    linear_bias: bool = False  # biases on every linear layer (GPT-2, GPT-3, GPT-NeoX)
    qkv_bias: bool = False  # biases on q, k, v only (Qwen2)
    # a bias on the attention output projection too (LlamaAttention / Qwen3Attention /
    # GraniteAttention: o_proj takes attention_bias like q, k, v; Qwen2's o_proj has none)
    o_bias: bool = False
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    position: str = "rope"
    max_position: int = 0  # learned position table size (position == "learned")
    # multi-head latent attention (DeepSeek-V2/V3)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # mixture of experts
    moe_experts: int = 0
    moe_topk: int = 0
    moe_expert_ffn: int = 0
    moe_shared_experts: int = 0
    moe_shared_ffn: int = 0  # total width of the shared expert(s); 0 means count * expert ffn
    moe_dense_layers: int = 0
    moe_layer_freq: int = 1
    moe_router_bias: bool = False  # per-expert score-correction bias (DeepSeek-V3)
    # what an engine needs to build the same model (no effect on sizes or FLOPs)
    rope_theta: float = 10000.0  # rotary base
    rope_scaling: str = ""  # the config's rope_scaling object as canonical JSON; "" = none
    rope_fraction: float = 1.0  # share of each head's dims that rotate (GPT-NeoX: 0.25)
    # rotary pairs (2i, 2i+1) of each head, as the checkpoint's q/k rows are laid out (ERNIE
    # 4.5, GLM-4, Cohere in transformers), instead of (i, i + d/2) (rotate_half: Llama, Qwen,
    # Mistral). MLA's rotary part is always interleaved (DeepSeek's checkpoints)
    rope_interleaved: bool = False
    max_context: int = 0  # longest sequence served (hf_config.max_context); 0 unknown
    checkpoint_quant: str = ""  # the checkpoint's quantization_config.quant_method (fp8, mxfp4)
    norm_eps: float = 1e-5
    moe_score: str = "softmax"  # router score function: softmax or sigmoid
    moe_topk_norm: bool = True  # renormalise the top-k routing weights to sum to 1
    moe_routed_scale: float = 1.0  # routed experts' output scale (DeepSeek-V3: 2.5)
    moe_groups: int = 0  # device-limited routing: expert groups (DeepSeek-V3: 8)
    moe_group_topk: int = 0  # groups each token may use (DeepSeek-V3: 4)
    moe_aux_loss_coef: float = 0.0  # load-balancing loss weight the model was trained with
    # local attention: ``sliding_layers`` of the layers let each query see only the last
    # ``sliding_window`` keys (Mistral 7B v0.1, Gemma 2/3, GPT-OSS); 0 layers with a window
    # means every layer
    sliding_window: int = 0
    sliding_layers: int = 0
    gated_act: str = "silu"  # GATED_ACTS (mlp == "swiglu" only)
    # the gated MLP's inputs clamped before the activation: the gate to at most this value,
    # the up projection to [-value, value] (GPT-OSS config ``swiglu_limit`` 7.0); 0 = none
    glu_clamp: float = 0.0
    attention_sinks: bool = False  # one learned sink logit per head and layer (GPT-OSS)
    # q, k and v clamped to [-value, value] after their projection (DBRX attn_config
    # clip_qkv 8: modeling_dbrx.py DbrxAttention); 0 = none. No weights or FLOPs to speak of
    qkv_clip: float = 0.0
    # PhiMoE's SparseMixer router (modeling_phimoe.py sparsemixer: each of the top-2 experts is
    # picked and weighted by a softmax over the scores within a jitter band of the best, not
    # the top-k of one softmax); same router weights and FLOPs
    moe_sparsemixer: bool = False
    # norms per layer beyond the pre-norm(s) (Gemma 2/3: 2 post-norms; Falcon-40B/180B's
    # parallel block: 1, its ln_mlp beside ln_attn)
    extra_layer_norms: int = 0
    # attention and MLP read the same normed input and add to the residual together
    # (Cohere / Command R): one pre-norm per layer instead of two
    parallel_block: bool = False
    # q/k norm weights over the whole projection (q_dim + kv_dim) instead of one head_dim
    # each (OLMoE; Cohere with use_qk_norm); only with qk_norm
    qk_norm_full: bool = False
    # a sigmoid gate, Linear(hidden, 1), scales the shared expert's output (Qwen2-MoE)
    moe_shared_gate: bool = False
    ungated_act: str = "gelu"  # UNGATED_ACTS (mlp == "gelu" only)
    # a norm on the embedding output before the first layer (BLOOM's
    # word_embeddings_layernorm): norm_params(hidden) more weights, no matrix
    embedding_norm: bool = False
    # a bias on the output layer, vocab elements, tied or not (PhiForCausalLM's lm_head;
    # PhiMoE's with lm_head_bias); not written by the exports nor built by the runtime
    output_bias: bool = False
    # layers whose attention uses no rotary positions (SmolLM3's no_rope_layers); same
    # weights and FLOPs
    nope_layers: int = 0
    # Llama 4 (modeling_llama4.py), none with weights or FLOPs to speak of: a weightless L2
    # norm of q and k per head on the RoPE layers (use_qk_norm), attention within
    # attention_chunk_size-key chunks on those layers (0 = none), and the router's sigmoid
    # weight multiplying each routed expert's input (Llama4TextMoe), not its output
    qk_l2_norm: bool = False
    attention_chunk: int = 0
    moe_input_scaled: bool = False
    # each layer's two norms sit on the outputs of attention and MLP, before the residual
    # add, instead of on their inputs (OLMo 2/3, EXAONE 4: Olmo2DecoderLayer); same weights
    # and FLOPs
    norms_after_blocks: bool = False
    # the per-head q/k norms applied to the rotated queries and keys instead of before the
    # rotary embedding (Hunyuan: HunYuanDenseV1Attention); same weights and FLOPs
    qk_norm_after_rope: bool = False
    # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): an indexer picks this many keys per
    # query (0 = dense attention). Not priced: the cost model charges dense attention and the
    # model's description says so; the exports refuse it (engines.model_features_unbuilt)
    dsa_topk: int = 0
    # Granite's scalar multipliers on the embedding, the residual branches, the attention
    # scores and the logits (configuration_granite.py; no weights, no FLOPs to speak of):
    # priced as without them; the exports and the runtime refuse them (model_features_unbuilt)
    activation_multipliers: bool = False
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        require_plain_text("model", self.name)
        for f in ("layers", "hidden", "heads", "kv_heads", "vocab"):
            require_positive_int(f, getattr(self, f))
        for f in ("ffn", "head_dim", "max_position", "max_context", "q_lora_rank", "kv_lora_rank",
                  "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_experts",
                  "moe_topk", "moe_expert_ffn", "moe_shared_experts", "moe_shared_ffn",
                  "moe_dense_layers", "sliding_window", "sliding_layers", "extra_layer_norms",
                  "nope_layers", "dsa_topk", "attention_chunk"):
            require_nonneg_int(f, getattr(self, f))
        require_positive_int("moe_layer_freq", self.moe_layer_freq)
        for f, cap in MODEL_SIZE_CAPS.items():
            if getattr(self, f) > cap:
                raise InputError(f, getattr(self, f), f"must be at most {cap:,}")
        for f in ("moe_groups", "moe_group_topk"):
            require_nonneg_int(f, getattr(self, f))
        if self.moe_groups and self.moe_experts and self.moe_experts % self.moe_groups:
            raise InputError("moe_groups", self.moe_groups,
                             f"must divide the {self.moe_experts} routed experts")
        if self.moe_group_topk > self.moe_groups:
            raise InputError("moe_group_topk", self.moe_group_topk,
                             f"at most moe_groups ({self.moe_groups})")
        for f in ("rope_theta", "norm_eps", "rope_fraction", "moe_routed_scale"):
            object.__setattr__(self, f, require_positive_number(f, getattr(self, f)))
        for f in ("moe_aux_loss_coef", "glu_clamp", "qkv_clip"):
            object.__setattr__(self, f, require_positive_number(f, getattr(self, f),
                                                                allow_zero=True))
        if self.rope_fraction > 1:
            raise InputError("rope_fraction", self.rope_fraction, "must be in (0, 1]")
        for f in ("tied_embeddings", "linear_bias", "qkv_bias", "o_bias", "qk_norm", "moe_router_bias",
                  "rope_interleaved", "moe_sparsemixer", "qk_l2_norm", "moe_input_scaled",
                  "moe_topk_norm", "attention_sinks", "parallel_block", "qk_norm_full",
                  "moe_shared_gate", "embedding_norm", "output_bias",
                  "norms_after_blocks", "activation_multipliers", "qk_norm_after_rope"):
            require_bool(f, getattr(self, f))
        object.__setattr__(self, "gated_act",
                           require_choice("gated_act", self.gated_act, GATED_ACTS))
        object.__setattr__(self, "ungated_act",
                           require_choice("ungated_act", self.ungated_act, UNGATED_ACTS))
        if self.ungated_act != "gelu" and self.mlp != "gelu":
            raise InputError("ungated_act", self.ungated_act, "needs the non-gated MLP (mlp gelu)")
        if self.glu_clamp and self.mlp != "swiglu":
            raise InputError("glu_clamp", self.glu_clamp, "needs the gated MLP (mlp swiglu)")
        if self.nope_layers > self.layers:
            raise InputError("nope_layers", self.nope_layers, f"at most layers ({self.layers})")
        if self.qk_norm_full and not self.qk_norm:
            raise InputError("qk_norm_full", True, "needs qk_norm")
        if self.moe_shared_gate and not (self.moe_experts and self.moe_shared_ffn
                                         or self.moe_shared_experts):
            raise InputError("moe_shared_gate", True, "needs a shared expert")
        if self.sliding_window == 0 and self.sliding_layers:
            raise InputError("sliding_layers", self.sliding_layers,
                             "must be 0 without a sliding_window")
        if self.sliding_window and self.sliding_layers == 0:
            object.__setattr__(self, "sliding_layers", self.layers)
        if self.sliding_layers > self.layers:
            raise InputError("sliding_layers", self.sliding_layers,
                             f"at most layers ({self.layers})")
        object.__setattr__(self, "moe_score",
                           require_choice("moe_score", self.moe_score, MOE_SCORES))
        if not isinstance(self.rope_scaling, str):
            raise InputError("rope_scaling", self.rope_scaling, "must be JSON text ('' for none)")
        if self.rope_scaling:  # (a scenario's inline model gives the text itself)
            try:
                rs = json.loads(self.rope_scaling)
            except (json.JSONDecodeError, RecursionError):
                raise InputError("rope_scaling", self.rope_scaling, "must be JSON text of an "
                                 "object ('' for none)") from None
            if not isinstance(rs, dict):
                raise InputError("rope_scaling", self.rope_scaling, "must be JSON text of an "
                                 "object ('' for none)")
            check_rope_scaling("rope_scaling", rs)
        object.__setattr__(self, "mlp", require_choice("mlp", self.mlp, MLP_KINDS))
        object.__setattr__(self, "norm", require_choice("norm", self.norm, NORM_KINDS))
        object.__setattr__(self, "position",
                           require_choice("position", self.position, POSITION_KINDS))
        if self.head_dim == 0:
            if self.hidden % self.heads:
                raise InputError("heads", self.heads,
                                 f"must divide hidden ({self.hidden}) unless head_dim is given")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.heads % self.kv_heads:
            raise InputError("kv_heads", self.kv_heads, f"must divide heads ({self.heads})")
        if self.position == "learned" and self.max_position <= 0:
            raise InputError("max_position", self.max_position,
                             "learned position embeddings need a positive table size")
        if self.is_mla and (self.qk_rope_head_dim <= 0 or self.v_head_dim <= 0
                            or self.qk_nope_head_dim <= 0):
            raise InputError("kv_lora_rank", self.kv_lora_rank,
                             "MLA needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim > 0")
        if self.is_moe:
            if not 1 <= self.moe_topk <= self.moe_experts:
                raise InputError("moe_topk", self.moe_topk,
                                 f"must be between 1 and moe_experts ({self.moe_experts})")
            if self.moe_expert_ffn <= 0:
                raise InputError("moe_expert_ffn", self.moe_expert_ffn, "must be positive for MoE")
            if self.moe_dense_layers > self.layers:
                raise InputError("moe_dense_layers", self.moe_dense_layers,
                                 f"at most layers ({self.layers})")
            if self.moe_shared_experts and not self.moe_shared_ffn:
                object.__setattr__(self, "moe_shared_ffn",
                                   self.moe_shared_experts * self.moe_expert_ffn)
            if self.num_dense_layers and self.ffn <= 0:
                raise InputError("ffn", self.ffn, "dense layers of an MoE model need ffn > 0")
        elif self.ffn <= 0:
            raise InputError("ffn", self.ffn, "must be a positive integer")

    # ---- kinds -------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.moe_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention(self) -> str:
        if self.is_mla:
            return "mla"
        return "mha" if self.kv_heads == self.heads else "gqa"

    # ---- attention span --------------------------------------------------------------
    def attention_keys(self, seq_len: int) -> float:
        """Keys per query per layer, averaged over layers, in the PaLM convention of
        flops.py (no causal halving): seq_len for full attention, min(window, seq_len) for
        a sliding-window layer."""
        w = min(self.sliding_window, seq_len) if self.sliding_window else seq_len
        return ((self.layers - self.sliding_layers) * seq_len
                + self.sliding_layers * w) / self.layers

    def causal_keys(self, seq_len: int) -> float:
        """Keys a query attends to under the causal mask, averaged over queries and layers:
        seq_len / 2 for full attention; for a window w < seq_len, query i sees min(i, w)
        keys, on average w - w^2 / (2 seq_len)."""
        s = float(seq_len)
        w = self.sliding_window
        windowed = s / 2 if not w or w >= s else w - w * w / (2 * s)
        return ((self.layers - self.sliding_layers) * s / 2
                + self.sliding_layers * windowed) / self.layers

    @property
    def windowed_share(self) -> float:
        """Share of layers with a sliding window."""
        return self.sliding_layers / self.layers

    def layer_is_moe(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) has an MoE block instead of a dense MLP."""
        if not self.is_moe or index < self.moe_dense_layers:
            return False
        return (index - self.moe_dense_layers) % self.moe_layer_freq == 0

    @cached_property
    def num_moe_layers(self) -> int:
        return sum(self.layer_is_moe(i) for i in range(self.layers))

    @cached_property
    def num_dense_layers(self) -> int:
        return self.layers - self.num_moe_layers

    # ---- widths ------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of the query projection output (all heads)."""
        if self.is_mla:
            return self.heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of one of K or V (all kv heads); for MLA the per-head K width times heads."""
        if self.is_mla:
            return self.heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.kv_heads * self.head_dim

    @property
    def attn_out_dim(self) -> int:
        """Width of the attention output that the output projection reads."""
        if self.is_mla:
            return self.heads * self.v_head_dim
        return self.heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "swiglu" else 2

    # ---- parameters --------------------------------------------------------------------
    def norm_params(self, width: int) -> int:
        return width * {"layernorm": 2, "layernorm_noparams": 0}.get(self.norm, 1)

    @property
    def norms_per_layer(self) -> int:
        """Hidden-width norms in one layer: the pre-norms (2, or 1 for a parallel block)
        plus the extra (post-) norms."""
        return (1 if self.parallel_block else 2) + self.extra_layer_norms

    def attention_params(self) -> int:
        """Parameters of one attention block, its input norm included."""
        h = self.hidden
        p = self.norm_params(h)
        if self.is_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                p += h * self.q_lora_rank + self.norm_params(self.q_lora_rank)
                p += self.q_lora_rank * self.heads * qk_head
            else:
                p += h * self.heads * qk_head
            p += h * (self.kv_lora_rank + self.qk_rope_head_dim)
            p += self.norm_params(self.kv_lora_rank)
            p += self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
            p += self.heads * self.v_head_dim * h
            return p
        qkv = self.q_dim + 2 * self.kv_dim
        p += h * qkv + self.attn_out_dim * h
        if self.linear_bias:
            p += qkv + h
        else:
            p += qkv * self.qkv_bias + h * self.o_bias
        if self.qk_norm_full:
            p += self.norm_params(self.q_dim) + self.norm_params(self.kv_dim)
        elif self.qk_norm:
            p += 2 * self.norm_params(self.head_dim)
        if self.attention_sinks:
            p += self.heads
        return p

    def mlp_params(self, width: int) -> int:
        """Parameters of one MLP of intermediate ``width`` (no norm)."""
        p = self.mlp_matrices * self.hidden * width
        if self.linear_bias:
            p += (self.mlp_matrices - 1) * width + self.hidden
        return p

    def layer_norm_params(self) -> int:
        """Norms of a layer outside its attention block: the pre-MLP norm (none in a
        parallel block) and any extra
        (post-) norms."""
        return (self.norms_per_layer - 1) * self.norm_params(self.hidden)

    def dense_layer_params(self) -> int:
        return self.attention_params() + self.layer_norm_params() + self.mlp_params(self.ffn)

    def moe_router_params(self) -> int:
        return self.hidden * self.moe_experts + (self.moe_experts if self.moe_router_bias else 0)

    def moe_expert_params(self) -> int:
        """Parameters of one routed expert."""
        return self.mlp_params(self.moe_expert_ffn)

    def moe_shared_params(self) -> int:
        """The shared expert(s), with their sigmoid gate where the model has one."""
        if not self.moe_shared_ffn:
            return 0
        return self.mlp_params(self.moe_shared_ffn) + (self.hidden if self.moe_shared_gate else 0)

    def moe_layer_params(self, active_only: bool = False) -> int:
        experts = self.moe_topk if active_only else self.moe_experts
        return (self.attention_params() + self.layer_norm_params()
                + self.moe_router_params() + experts * self.moe_expert_params()
                + self.moe_shared_params())

    def embedding_params(self) -> int:
        """Input embedding (+ learned positions, + the embedding norm) and the untied output
        layer (+ its bias)."""
        p = self.vocab * self.hidden
        if self.position == "learned":
            p += self.max_position * self.hidden
        if self.embedding_norm:
            p += self.norm_params(self.hidden)
        if not self.tied_embeddings:
            p += self.vocab * self.hidden
        if self.output_bias:
            p += self.vocab
        return p

    def total_params(self) -> int:
        return (self.num_dense_layers * self.dense_layer_params()
                + self.num_moe_layers * self.moe_layer_params()
                + self.embedding_params() + self.norm_params(self.hidden))

    def active_params(self) -> int:
        """Parameters one token touches (top-k routed experts plus shared ones)."""
        return (self.num_dense_layers * self.dense_layer_params()
                + self.num_moe_layers * self.moe_layer_params(active_only=True)
                + self.embedding_params() + self.norm_params(self.hidden))

    def expert_params(self) -> int:
        """All routed-expert parameters (the part sharded by expert parallelism)."""
        return self.num_moe_layers * self.moe_experts * self.moe_expert_params()

    def with_(self, **changes) -> "ModelSpec":
        return replace(self, **changes)
