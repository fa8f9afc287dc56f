"""The Plan: how the work is split. Degrees, knobs, validation and the rank-to-mesh mapping.

World size = dp * cp * tp * pp. MoE layers fold expert parallelism over the same ranks the
attention uses (MoE Parallel Folding): ep * etp * edp = dp * cp * tp.

Ranks are laid out with the axes of ``order`` from innermost (fastest varying) to outermost;
the default ``tp-cp-dp-pp`` keeps tensor-parallel groups inside a node (Megatron's default).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from math import prod

from .errors import (InputError, require_bool, require_choice, require_nonneg_int,
                     require_positive_int)
from .recompute_modules import parse_modules
from .specs.model import ModelSpec
from .specs.workload import Workload

SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b", "looped_bfs", "zb_h1",
             "interleaved_zb", "zb_v", "dualpipev")
# Schedules whose ranks hold several model chunks (virtual stages).
MULTI_CHUNK_SCHEDULES = ("interleaved_1f1b", "looped_bfs", "interleaved_zb", "zb_v", "dualpipev")
# Schedules that need exactly two chunks per rank (V-shape placement).
V_SCHEDULES = ("zb_v", "dualpipev")
RECOMPUTE = ("none", "selective", "full")
CP_KINDS = ("ring", "all_to_all")
# MoE token dispatchers: "alltoall" sends one copy of a token per selected expert (Megatron's
# alltoall dispatcher, NCCL all-to-all); "deepep" sends one copy per destination GPU inside a
# node and one per destination node across nodes, forwarding over NVLink (DeepEP normal
# kernels; HybridEP on NVL72 is the same class; Megatron --moe-token-dispatcher-type flex).
# "hybridep" is that class run by HybridEP's kernels where a run states it off rack-scale
# NVLink too (Megatron-Bridge v0.4.0 / v0.4.1 scripts/performance/configs/deepseek/
# deepseek_workload_base_configs.py: the B200 and B300 DeepSeek-V3 presets set
# moe_flex_dispatcher_backend="hybridep" on 8-GPU nodes): the same exchange as "deepep",
# with HybridEP's fused permutation and FP8 padding (cost/layer.py shaping_dispatcher) and
# without DeepEP's buffers (cost/dispatcher_buffers.py). The search proposes "alltoall" and
# "deepep" only (search/space.py); "deepep" on rack-scale NVLink already runs HybridEP.
MOE_DISPATCHERS = ("alltoall", "deepep", "hybridep")
DEEPEP_CLASS = ("deepep", "hybridep")
AXES = ("tp", "cp", "dp", "pp")
DEFAULT_ORDER = "tp-cp-dp-pp"

# Long names (config files, CLI) -> field names.
ALIASES = {
    "data_parallel": "dp", "tensor_parallel": "tp", "pipeline_parallel": "pp",
    "context_parallel": "cp", "expert_parallel": "ep", "expert_tensor_parallel": "etp",
    "zero_stage": "zero", "virtual_stages": "vpp", "virtual_pipeline_stages": "vpp",
    "micro_batch_size": "micro_batch", "pipeline_schedule": "schedule",
    "fsdp_shard_group": "hsdp_shard", "context_parallel_kind": "cp_kind",
    "recompute_num_layers": "recompute_layers",
}


@dataclass(frozen=True)
class Plan:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 1
    zero: int = 1  # 0 plain DP, 1 optimizer states, 2 + gradients, 3 + weights (FSDP)
    hsdp_shard: int = 0  # size of the FSDP shard group inside dp*cp (HSDP); 0 = all of it
    sequence_parallel: bool | None = None  # None: on whenever tp > 1
    vpp: int = 1  # model chunks (virtual stages) per pipeline rank
    schedule: str = ""  # "" -> 1f1b, or interleaved_1f1b when vpp > 1
    micro_batch: int = 1
    recompute: str = "none"
    # 0: every layer as ``recompute`` says; N > 0 (with recompute="full"): only the first N
    # transformer layers of each model chunk (virtual stage) are recomputed in full, the rest
    # keep their activations (Megatron-LM --recompute-method block --recompute-num-layers N,
    # which counts per virtual pipeline stage; NeMo docs, activation_recomputation.rst)
    recompute_layers: int = 0
    # with recompute="selective": the Megatron-Core modules recomputed, "+"-joined in
    # canonical order (meshplan/recompute_modules.py); "" = the engine's own selective set
    recompute_modules: str = ""
    offload_optimizer: bool = False
    cp_kind: str = "ring"
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    tp_comm_overlap: bool = False
    order: str = DEFAULT_ORDER
    moe_dispatcher: str = "alltoall"
    # expert all-to-all of one micro-batch hidden under the compute of another (Megatron
    # --overlap-moe-expert-parallel-comm, "combined 1F1B"; DualPipe(V) does it by design)
    ep_comm_overlap: bool = False

    def __post_init__(self) -> None:
        for f in self.__dataclass_fields__:
            if f == "sequence_parallel" and self.sequence_parallel is None:
                continue
            object.__setattr__(self, f, field_value(f, getattr(self, f)))
        if self.sequence_parallel is None:
            object.__setattr__(self, "sequence_parallel", self.tp > 1)
        if self.sequence_parallel and self.tp == 1:
            object.__setattr__(self, "sequence_parallel", False)
        if self.tp_comm_overlap and not self.sequence_parallel:
            # no TP communication to hide (tp1), or none that can be: only SP's all-gather /
            # reduce-scatter are pipelined with the GEMMs (cost/layer.py; Megatron refuses
            # --tp-comm-overlap without --sequence-parallel)
            object.__setattr__(self, "tp_comm_overlap", False)
        if not self.schedule:
            object.__setattr__(self, "schedule", "interleaved_1f1b" if self.vpp > 1 else "1f1b")
        if self.cp == 1:  # no context parallelism: how it would exchange K/V means nothing
            object.__setattr__(self, "cp_kind", "ring")
        if self.recompute_layers and self.recompute != "full":
            raise InputError("recompute_layers", self.recompute_layers,
                             "partial recomputation recomputes whole layers: it needs "
                             f"recompute='full' (got {self.recompute!r})")
        if self.recompute_modules and self.recompute != "selective":
            raise InputError("recompute_modules", self.recompute_modules,
                             "module-level recomputation is selective recomputation: it "
                             f"needs recompute='selective' (got {self.recompute!r})")
        if self.pp == 1 and (self.vpp > 1 or self.schedule in V_SCHEDULES):
            raise InputError("vpp" if self.vpp > 1 else "schedule",
                             self.vpp if self.vpp > 1 else self.schedule,
                             "virtual stages and V schedules need pipeline parallelism (pp > 1)")
        if self.schedule in V_SCHEDULES and self.vpp != 2:
            raise InputError("vpp", self.vpp, f"schedule {self.schedule} places exactly 2 chunks per rank")
        if self.schedule in ("interleaved_1f1b", "looped_bfs", "interleaved_zb") and self.vpp < 2:
            raise InputError("vpp", self.vpp, f"schedule {self.schedule} needs vpp >= 2")
        if self.schedule in ("gpipe", "1f1b", "zb_h1") and self.vpp != 1:
            raise InputError("schedule", self.schedule,
                             f"holds one chunk per rank; vpp={self.vpp} needs interleaved_1f1b, "
                             "looped_bfs, interleaved_zb, zb_v or dualpipev")
        attn_ranks = self.dp * self.cp * self.tp
        if attn_ranks % (self.ep * self.etp):
            raise InputError("ep", self.ep,
                             f"ep*etp ({self.ep}*{self.etp}) must divide dp*cp*tp ({attn_ranks})")
        if self.hsdp_shard == self.dp * self.cp:  # one shard group of all of dp*cp: FSDP
            object.__setattr__(self, "hsdp_shard", 0)
        if self.hsdp_shard and (self.dp * self.cp) % self.hsdp_shard:
            raise InputError("hsdp_shard", self.hsdp_shard,
                             f"must divide dp*cp ({self.dp * self.cp})")
        if self.zero == 0 and self.offload_optimizer:
            raise InputError("offload_optimizer", True, "needs zero >= 1 (a sharded optimizer)")

    # ---- derived sizes ------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.dp * self.cp * self.tp * self.pp

    @property
    def edp(self) -> int:
        """Data-parallel degree of the expert weights (ep*etp*edp = dp*cp*tp)."""
        return self.dp * self.cp * self.tp // (self.ep * self.etp)

    @property
    def fsdp_shard(self) -> int:
        """Ranks one ZeRO/FSDP shard group spans (non-expert weights; dp*cp unless HSDP)."""
        return self.hsdp_shard or self.dp * self.cp

    @property
    def num_chunks(self) -> int:
        """Model chunks (virtual stages) in total: pp * vpp."""
        return self.pp * self.vpp

    def num_microbatches(self, workload: Workload) -> int:
        return workload.global_batch // (self.dp * self.micro_batch)

    # ---- checks against a model, a workload and a world --------------------------------
    def validate(self, model: ModelSpec, workload: Workload, world_size: int | None = None) -> "Plan":
        """Raise InputError naming the rule a plan breaks (the one rule: meshplan/validity.py)."""
        from .validity import check_plan
        check_plan(model, workload, self, world_size)
        return self

    # ---- layers on stages ---------------------------------------------------------------
    def layer_split(self, model: ModelSpec) -> list[int]:
        """Transformer layers in each model chunk, chunk c = virtual stage c (pp*vpp chunks).

        Balanced: chunks differ by at most one layer, the extra layers going to the middle
        chunks (the first holds the embedding and the last the output layer and loss). With
        more chunks than layers the end chunks hold no layer, only the embedding / the
        output layer (Megatron's account-for-embedding/loss-in-pipeline-split).
        """
        n = self.num_chunks
        base, extra = divmod(model.layers, n)
        counts = [base] * n
        # hand the extra layers to the chunks farthest from the ends first
        order = sorted(range(n), key=lambda c: (-min(c, n - 1 - c), c))
        for c in order[:extra]:
            counts[c] += 1
        return counts

    def recomputed_layers(self, chunk_layers: int) -> int:
        """Layers of a chunk holding ``chunk_layers`` that are recomputed in full."""
        if self.recompute != "full":
            return 0
        return min(self.recompute_layers, chunk_layers) if self.recompute_layers else chunk_layers

    def chunk_of(self, rank_in_pp: int, local_chunk: int) -> int:
        """Virtual stage held by pipeline rank ``rank_in_pp`` as its ``local_chunk``-th chunk.

        Interleaved schedules place chunk c*pp + r on rank r; V schedules (zb_v, dualpipev)
        place r and 2*pp-1-r on rank r.
        """
        if self.schedule in V_SCHEDULES:
            return rank_in_pp if local_chunk == 0 else 2 * self.pp - 1 - rank_in_pp
        return local_chunk * self.pp + rank_in_pp

    def output_rank(self) -> int:
        """Pipeline rank holding the last chunk (the output layer; chunk 0, the embedding,
        is on rank 0): pp - 1, or 0 under V schedules, which bring the last chunk back."""
        last = self.num_chunks - 1
        return next(r for r in range(self.pp)
                    if any(self.chunk_of(r, j) == last for j in range(self.vpp)))

    # ---- rank layout ---------------------------------------------------------------------
    def axis_sizes(self) -> dict[str, int]:
        return {"tp": self.tp, "cp": self.cp, "dp": self.dp, "pp": self.pp}

    def axis_stride(self, axis: str) -> int:
        """Distance in global rank between neighbours of a group along ``axis``."""
        sizes = self.axis_sizes()
        stride = 1
        for a in self.order.split("-"):
            if a == axis:
                return stride
            stride *= sizes[a]
        raise KeyError(axis)

    def rank_coords(self, rank: int) -> dict[str, int]:
        sizes = self.axis_sizes()
        coords = {}
        for a in self.order.split("-"):
            coords[a] = rank % sizes[a]
            rank //= sizes[a]
        return coords

    def group_ranks(self, axes: tuple[str, ...] | str, rank: int = 0) -> list[int]:
        """Global ranks in ``rank``'s group along ``axes`` (e.g. ("dp", "cp"))."""
        if isinstance(axes, str):
            axes = (axes,)
        sizes = self.axis_sizes()
        coords = self.rank_coords(rank)
        members = []
        for r in range(self.world_size):
            c = self.rank_coords(r)
            if all(c[a] == coords[a] for a in AXES if a not in axes):
                members.append(r)
        assert len(members) == prod(sizes[a] for a in axes)
        return members

    # ---- presentation --------------------------------------------------------------------
    def describe(self) -> str:
        """The plan's complete label (meshplan/plan_label.py prints and parses it)."""
        from .plan_label import format_label
        return format_label(self)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        """Build from short or long field names; unknown names are an InputError."""
        known = set(cls.__dataclass_fields__)
        kw = {}
        given: dict = {}
        for k, v in d.items():
            key = ALIASES.get(k, k)
            if key not in known:
                raise InputError(f"plan.{k}", v, "unknown plan field; known: "
                                 + ", ".join(sorted(known | set(ALIASES))))
            if key in kw and kw[key] != v:  # dp = 8 and data_parallel = 4
                raise InputError(f"plan.{k}", v, f"contradicts plan.{given[key]} = {kw[key]!r} "
                                 "(the same field); give one of them")
            kw[key] = v
            given[key] = k
        return cls(**kw)

    def with_(self, **changes) -> "Plan":
        return replace(self, **changes)


# the plan fields that hold whole numbers (field_value): at least 1, and at least 0
PLAN_POSITIVE_FIELDS = ("dp", "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch")
PLAN_NONNEG_FIELDS = ("zero", "hsdp_shard", "recompute_layers")
PLAN_INT_FIELDS = PLAN_POSITIVE_FIELDS + PLAN_NONNEG_FIELDS


_BOOL_FIELDS = frozenset(("sequence_parallel", "offload_optimizer", "overlap_grad_reduce",
                          "overlap_param_gather", "tp_comm_overlap", "ep_comm_overlap"))
_CHOICES = {"moe_dispatcher": MOE_DISPATCHERS, "recompute": RECOMPUTE, "cp_kind": CP_KINDS}


def field_value(field: str, value: object) -> object:
    """One plan field's value on its own (type, range, allowed names), normalised; raises
    InputError naming the field. The rules between fields stay in Plan.__post_init__ and
    meshplan/validity.py. Plan() and the search's pins (validity.check_pins) both use it."""
    # each branch first passes a value that is already normal (an int in range, a bool, an
    # allowed name as written): every plan the search builds, checked without the general
    # parsers (a third of the exhaustive enumeration's time went to them)
    if field in PLAN_POSITIVE_FIELDS:
        if type(value) is int and value >= 1:
            return value
        return require_positive_int(field, value)
    if field in PLAN_NONNEG_FIELDS:
        if not (type(value) is int and value >= 0):
            value = require_nonneg_int(field, value)
        if field == "zero" and value > 3:
            raise InputError("zero", value, "allowed: 0, 1, 2, 3")
        return value
    if field in _BOOL_FIELDS:
        return value if type(value) is bool else require_bool(field, value)
    if field == "schedule":
        if value in SCHEDULES:
            return value
        return require_choice("schedule", value, SCHEDULES) if value else ""
    if field in _CHOICES:
        allowed = _CHOICES[field]
        return value if value in allowed else require_choice(field, value, allowed)
    if field == "recompute_modules":
        return parse_modules(value) if value else ""
    if field == "order":
        order = tuple(a.strip().lower() for a in str(value).replace(",", "-").split("-"))
        if sorted(order) != sorted(AXES):
            raise InputError("order", value, "must name each of tp, cp, dp, pp once, innermost first")
        return "-".join(order)
    return value
