"""What a serving plan is: per-replica parallelism, the engine's batching limits, and pools.

An aggregated plan has one pool whose replicas do both prefill and decode. A disaggregated
plan (Splitwise, DistServe; xPyD in SGLang and vLLM) has a prefill pool and a decode pool,
each with its own parallelism and replica count, and moves each request's KV cache from
one to the other over the tier it crosses. A plan is frozen and checked when built;
``check(model, cluster)`` raises InputError for what cannot run that model on that cluster.

Attention data parallelism (DeepSeek-V3 / SGLang ``--enable-dp-attention``, vLLM
``--data-parallel-size`` with ``--enable-expert-parallel``): ``attn_dp`` ranks each run the
attention of their own requests with tensor parallel size ``tp`` and together hold the
experts (``ep = tp * attn_dp``), as both engines deploy it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import InputError, require_choice, require_positive_int
from ..specs.hardware import Cluster
from ..specs.model import ModelSpec

WEIGHT_DTYPES = ("bf16", "fp8")
KV_DTYPES = ("bf16", "fp8")
ROLES = ("both", "prefill", "decode")
TIERS = ("scale-up", "scale-out")
# How the engine admits requests into the KV cache: vllm / sglang allocate as tokens are
# computed and preempt (recompute) when the cache runs out; trtllm reserves the whole
# request at admission and never evicts (its default GUARANTEED_NO_EVICT policy).
SCHEDULERS = ("vllm", "sglang", "trtllm")
# What Pool.gpu_mem_util means to each engine (serve/memory.py derives the KV cache from it
# so); JSON output names it, since the three give different caches for one number.
MEM_UTIL_MEANINGS = {
    "vllm": "vLLM --gpu-memory-utilization: share of the whole GPU memory for weights,"
            " activations and KV cache together (the CUDA context and communicators outside it)",
    "sglang": "SGLang --mem-fraction-static: share, for weights and KV pool, of the GPU memory"
              " free before the weights load",
    "trtllm": "TensorRT-LLM kv_cache_config.free_gpu_memory_fraction: share, for the KV cache,"
              " of the GPU memory free after the weights, activations and runtime",
}
DTYPE_BYTES = {"bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class Pool:
    """Identical engine replicas. One replica spans ``tp * pp * attn_dp`` GPUs."""

    tp: int = 1
    pp: int = 1
    ep: int = 1  # expert-parallel ranks: 1 (experts split by tp) or tp * attn_dp
    attn_dp: int = 1
    replicas: int = 1
    max_num_seqs: int = 256  # running requests per replica (vLLM default 256 before V1 tuning)
    max_batched_tokens: int = 8192  # tokens per iteration: chunked-prefill budget
    # the engine's memory share, read with the plan's scheduler's meaning (MEM_UTIL_MEANINGS;
    # 0.9 is vLLM's and TensorRT-LLM's default)
    gpu_mem_util: float = 0.90
    role: str = "both"

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "ep", "attn_dp", "replicas", "max_num_seqs", "max_batched_tokens"):
            object.__setattr__(self, f, require_positive_int(f, getattr(self, f)))
        object.__setattr__(self, "role", require_choice("role", self.role, ROLES))
        if not 0.1 <= float(self.gpu_mem_util) <= 1.0:
            raise InputError("gpu_mem_util", self.gpu_mem_util, "must be between 0.1 and 1.0")
        if self.ep not in (1, self.tp * self.attn_dp):
            raise InputError("ep", self.ep, f"must be 1 or tp * attn_dp ({self.tp * self.attn_dp})"
                             " (experts spread over every GPU of the replica, as vLLM and SGLang do)")
        if self.attn_dp > 1 and self.ep == 1:
            raise InputError("attn_dp", self.attn_dp, "attention data parallel needs expert parallel"
                             " (ep = tp * attn_dp)")
        if self.max_batched_tokens < self.max_num_seqs and self.role != "prefill":
            raise InputError("max_batched_tokens", self.max_batched_tokens,
                             f"must be at least max_num_seqs ({self.max_num_seqs}): every running"
                             " request decodes one token per iteration")

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.attn_dp

    @property
    def gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    def describe(self) -> str:
        s = f"tp{self.tp}"
        if self.pp > 1:
            s += f" pp{self.pp}"
        if self.attn_dp > 1:
            s += f" dp-attn{self.attn_dp}"
        if self.ep > 1:
            s += f" ep{self.ep}"
        return f"{self.replicas}x({s}) seqs{self.max_num_seqs} tok{self.max_batched_tokens}"

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("role", "tp", "pp", "ep", "attn_dp", "replicas",
                                              "max_num_seqs", "max_batched_tokens", "gpu_mem_util")}


@dataclass(frozen=True)
class ServePlan:
    pools: tuple[Pool, ...]
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    kv_tier: str = "scale-up"  # disaggregated: where the KV cache travels
    scheduler: str = "vllm"
    name: str = field(default="", compare=False)
    # Whether an iteration mixes decode tokens with prefill chunks (vLLM, TensorRT-LLM, and
    # SGLang with --enable-mixed-chunk, which serve/export.py writes), or runs a prefill
    # batch alone whenever one can be formed and decodes only when none can: SGLang's
    # default (ServerArgs.enable_mixed_chunk = False; Scheduler.get_next_batch_to_run takes
    # get_new_batch_prefill() first and update_running_batch() only when it returns None).
    mixed_chunk: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "pools", tuple(self.pools))
        object.__setattr__(self, "weight_dtype",
                           require_choice("weight_dtype", self.weight_dtype, WEIGHT_DTYPES))
        object.__setattr__(self, "kv_dtype", require_choice("kv_dtype", self.kv_dtype, KV_DTYPES))
        object.__setattr__(self, "kv_tier", require_choice("kv_tier", self.kv_tier, TIERS))
        object.__setattr__(self, "scheduler",
                           require_choice("scheduler", self.scheduler, SCHEDULERS))
        if not self.mixed_chunk and self.scheduler != "sglang":
            raise InputError("mixed_chunk", self.mixed_chunk, "only SGLang (without"
                             " --enable-mixed-chunk) runs prefill and decode in separate iterations")
        roles = tuple(p.role for p in self.pools)
        if roles not in (("both",), ("prefill", "decode")):
            raise InputError("pools", roles, "one 'both' pool (aggregated) or a 'prefill' pool"
                             " then a 'decode' pool (disaggregated)")

    @property
    def disaggregated(self) -> bool:
        return len(self.pools) == 2

    @property
    def prefill(self) -> Pool:
        return self.pools[0]

    @property
    def decode(self) -> Pool:
        return self.pools[-1]

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    def describe(self) -> str:
        dt = f"w{self.weight_dtype} kv{self.kv_dtype}"
        if not self.disaggregated:
            return f"aggregated {self.pools[0].describe()} {dt}"
        p, d = self.pools
        return (f"disaggregated {p.replicas}P{d.replicas}D prefill {p.describe()} | decode "
                f"{d.describe()} kv over {self.kv_tier} {dt}")

    def to_dict(self) -> dict:
        return {"kind": "disaggregated" if self.disaggregated else "aggregated",
                "weight_dtype": self.weight_dtype, "kv_dtype": self.kv_dtype,
                "kv_tier": self.kv_tier if self.disaggregated else None,
                "gpus": self.gpus, "scheduler": self.scheduler,
                "gpu_mem_util_meaning": MEM_UTIL_MEANINGS[self.scheduler],
                "pools": [p.to_dict() for p in self.pools]}

    def with_pools(self, *pools: Pool) -> "ServePlan":
        return replace(self, pools=tuple(pools))

    def check(self, model: ModelSpec, cluster: Cluster) -> None:
        """Raise InputError if this plan cannot run ``model`` on ``cluster``."""
        for p in self.pools:
            check_pool(p, model, cluster)
        if self.gpus > cluster.num_gpus:
            raise InputError("gpus", self.gpus, f"the plan needs more GPUs than the cluster has"
                             f" ({cluster.num_gpus})")
        if self.disaggregated and self.kv_tier == "scale-up" and self.gpus > cluster.domain_size:
            raise InputError("kv_tier", self.kv_tier, f"the pools span {self.gpus} GPUs, more than"
                             f" one scale-up domain ({cluster.domain_size}); use scale-out")


def check_pool(p: Pool, model: ModelSpec, cluster: Cluster) -> None:
    if model.heads % p.tp:
        raise InputError("tp", p.tp, f"must divide the attention heads ({model.heads})")
    if p.pp > model.layers:
        raise InputError("pp", p.pp, f"at most the layers ({model.layers})")
    if p.ep > 1 or p.attn_dp > 1:
        if not model.is_moe:
            raise InputError("ep", p.ep, f"{model.name} has no experts; expert and attention data"
                             " parallel need an MoE model")
        if model.moe_experts % p.ep:
            raise InputError("ep", p.ep, f"must divide the experts ({model.moe_experts})")
    if p.tp > cluster.domain_size:
        raise InputError("tp", p.tp, f"tensor parallel stays inside one scale-up domain"
                         f" ({cluster.domain_size} GPUs)")
