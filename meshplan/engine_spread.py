"""How much an MoE prediction depends on engine settings the run did not state.

A published MoE run rarely says which token dispatcher it ran (all-to-all or the DeepEP /
HybridEP class) or whether the expert all-to-all overlapped another micro-batch's compute.
The point prediction takes the framework's default (framework_defaults.py); the framework's
own recipes choose these two knobs per model and GPU (Megatron-Bridge: framework_defaults
MBRIDGE_PROVIDER, MBRIDGE_PERF_RACK), so the default is right for most runs, not all. The
10-90% interval is widened to cover that: the chosen plan is re-estimated at every
combination of the blank knobs the framework can run, and the interval becomes the union of
the class interval (uncertainty.py) around each of those predictions, i.e.

    p10' = p10 * min(1, min_k tokens_k / tokens_point)
    p90' = p90 * max(1, max_k tokens_k / tokens_point)

The point prediction is unchanged; rows that state both knobs, dense models and plans without
expert parallelism (no expert all-to-all to dispatch or hide) are unchanged.

Which settings a framework can run (engines.py, _common): Megatron-LM and the engines built
on Megatron-Core (NeMo / Megatron-Bridge) run both dispatchers and both overlap settings;
torchtitan and DeepSpeed dispatch with an all-to-all and do not overlap it, so a blank knob
has one value there; frameworks meshplan knows nothing about ("other", "", MaxText's MoE)
may run any.

TP communication overlap is the same kind of knob for any model: a run with tensor
parallelism that does not say whether it overlapped the TP collectives with the GEMMs is
predicted with its framework's default (framework_defaults.tp_comm_overlap), and every
framework with a switch for it may have run the other setting (Megatron / NeMo
--tp-comm-overlap, torchtitan enable_async_tensor_parallel, DeepSpeed AutoTP
tp_overlap_comm, XLA's collective matmul); Aleph Alpha's engine has none
(framework_defaults ALEPH_ALPHA). It only changes a plan with TP > 1 and sequence
parallelism (plan.py drops the overlap without it).

The attention kernel is the third: where a framework's published runs on a GPU generation
use more than one kernel class (framework_defaults.ATTENTION_CHOICES: Pax with and without
Transformer Engine; Megatron on Volta with and without its fused softmax), a row that leaves
``attention_kernel`` blank is re-estimated with each (the workload's kernel, not the plan's).
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from .errors import InputError
from .plan import MOE_DISPATCHERS

# knob -> the values a framework that runs every setting may take (plan.MOE_DISPATCHERS less
# "hybridep", the DeepEP class's other kernels, which the search does not propose either;
# expert all-to-all overlap on or off; TP communication overlap on or off)
KNOB_VALUES = {"moe_dispatcher": tuple(d for d in MOE_DISPATCHERS if d != "hybridep"),
               "ep_comm_overlap": (False, True), "tp_comm_overlap": (False, True)}
MOE_KNOBS = ("moe_dispatcher", "ep_comm_overlap")
# frameworks with one setting of both MoE knobs: alltoall, no overlap (engines.py _common:
# "dispatches MoE tokens with an all-to-all (no DeepEP backend)", "does not overlap the
# expert all-to-all with another micro-batch's compute")
SINGLE_SETTING = ("torchtitan", "deepspeed")
# frameworks with no TP communication overlap to switch on (framework_defaults ALEPH_ALPHA)
NO_TP_OVERLAP = ("aleph-alpha",)


@dataclasses.dataclass(frozen=True)
class Spread:
    """Tokens/s per GPU of the other settings over the point prediction's (min, max), and
    the settings that gave them."""

    low_ratio: float = 1.0
    high_ratio: float = 1.0
    settings: tuple = ()  # ((knob, value), ...) per alternative estimated

    @property
    def log_bounds(self) -> tuple[float, float]:
        """(ln low, ln high), clipped so that the point's own band is never narrowed."""
        return math.log(min(1.0, self.low_ratio)), math.log(max(1.0, self.high_ratio))

    @property
    def widens(self) -> bool:
        return self.low_ratio < 1.0 or self.high_ratio > 1.0


NONE = Spread()


def blank_knobs(stated: set[str] | frozenset[str], framework: str) -> tuple[str, ...]:
    """The engine knobs a run left blank that its framework may have set otherwise (the
    attention kernel: where the framework has choices on some GPU generation; spread()
    drops it where the workload states one or the GPU's generation has none)."""
    from .framework_defaults import attention_kernel_open
    fw = str(framework or "").strip().lower()
    knobs = () if fw in SINGLE_SETTING else MOE_KNOBS
    if fw not in NO_TP_OVERLAP:
        knobs += ("tp_comm_overlap",)
    if attention_kernel_open(fw):
        knobs += ("attention_kernel",)
    return tuple(k for k in knobs if k not in stated)


def has_expert_all_to_all(model, plan) -> bool:
    """Only an MoE model with expert parallelism has an expert all-to-all to dispatch or hide:
    elsewhere the knobs change nothing."""
    return bool(model.is_moe) and plan.ep > 1


def applies(knob: str, model, plan) -> bool:
    """Whether ``knob`` can change ``plan``'s prediction: the MoE knobs where there is an
    expert all-to-all, TP overlap where there are TP collectives it can hide (TP > 1 with
    sequence parallelism, which plan.py requires of it)."""
    if knob == "tp_comm_overlap":
        return plan.tp > 1 and plan.sequence_parallel
    if knob == "attention_kernel":  # every plan has an attention core (spread checks the GPU)
        return True
    return has_expert_all_to_all(model, plan)


def blank_knobs_of(plan, model, stated, framework: str) -> tuple[str, ...]:
    """The blank knobs of ``plan`` as `meshplan predict --plan LABEL` counts them: the fields
    a command named (``stated``) and those the plan's own label names (plan_label.py prints
    every knob off its default, e.g. ``epo``, ``deepep``) are stated. Every command that
    shows or writes a plan's interval takes its blank knobs from here, so that ``plan
    --json``, ``predict --plan LABEL`` and ``predict --scenario plan.toml`` widen alike."""
    from .plan_label import format_label, label_fields
    return tuple(k for k in blank_knobs(set(stated) | set(label_fields(format_label(plan))),
                                        framework) if applies(k, model, plan))


def spread(est, model, cluster, workload, blank: tuple[str, ...]) -> Spread:
    """Re-estimate ``est``'s plan at every other combination of the ``blank`` knobs."""
    from .framework_defaults import attention_kernel_choices
    plan = est.plan
    kernels = (() if workload.attention_kernel else
               attention_kernel_choices(workload.framework, cluster.gpu.generation))
    blank = tuple(k for k in blank if applies(k, model, plan)
                  and (k != "attention_kernel" or kernels))
    if not blank:
        return NONE
    from .cost import estimate
    point = est.tokens_per_s_per_gpu
    ratios, settings = [], []
    values_of = {k: (kernels if k == "attention_kernel" else KNOB_VALUES[k]) for k in blank}
    for values in itertools.product(*(values_of[k] for k in blank)):
        alt = dict(zip(blank, values))
        kernel = alt.pop("attention_kernel", "")
        if not kernel and all(getattr(plan, k) == v for k, v in alt.items()):
            continue
        try:
            other = estimate(model, cluster,
                             dataclasses.replace(workload, attention_kernel=kernel) if kernel
                             else workload, dataclasses.replace(plan, **alt))
        except InputError:  # a setting this plan cannot take
            continue
        if kernel:
            alt["attention_kernel"] = kernel
        ratios.append(other.tokens_per_s_per_gpu / point)
        settings.append(tuple(alt.items()))
    if not ratios:
        return NONE
    return Spread(min(ratios), max(ratios), tuple(settings))


def widen_tokens(iv: tuple[float, float], s: Spread) -> tuple[float, float]:
    lo, hi = s.log_bounds
    return iv[0] * math.exp(lo), iv[1] * math.exp(hi)


def widen_step(iv: tuple[float, float], s: Spread) -> tuple[float, float]:
    """Step time is tokens per step over tokens/s: its bounds move the other way."""
    lo, hi = s.log_bounds
    return iv[0] * math.exp(-hi), iv[1] * math.exp(-lo)


def widen(interval, s: Spread):
    """An uncertainty.Interval with its tokens/s and step-time bounds widened by ``s``."""
    if not s.widens:
        return interval
    return dataclasses.replace(
        interval, tokens_per_s_per_gpu=widen_tokens(interval.tokens_per_s_per_gpu, s),
        step_time_s=widen_step(interval.step_time_s, s))
