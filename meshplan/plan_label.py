"""A plan's one text form: the label ``meshplan plan`` prints and every command takes back.

    dp2 tp4 pp4 vpp2 cp2 zero1 mb1 zb_v sp tpo

Every field of :class:`~meshplan.plan.Plan` that changes a prediction has a token; tokens for
fields at their default are left out, so ``parse_label(format_label(p)) == p`` for every plan.

    dpN tpN ppN cpN     data, tensor, pipeline, context parallel degrees (always printed but cp)
    vppN                model chunks (virtual stages) per pipeline rank (default 1)
    epN etpN            expert parallel / expert tensor parallel degree (MoE; default 1)
    zeroN               ZeRO stage 0-3 (always printed)
    hsdpN               FSDP shard group size inside dp*cp (HSDP; default: all of dp*cp)
    mbN                 micro-batch size in sequences (always printed)
    rc-selective        activation recomputation (rc-full; default none)
    rc-selective-M+M    selective recomputation of the named Megatron-Core modules (core_attn,
                        layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts; "+"-joined,
                        meshplan/recompute_modules.py), e.g. rc-selective-layernorm+moe_act
    rc-fullN            only the first N layers of each model chunk recomputed in full, the
                        rest not at all (Megatron --recompute-method block --recompute-num-layers N)
    <schedule>          pipeline schedule: gpipe, 1f1b, interleaved_1f1b, looped_bfs, zb_h1,
                        interleaved_zb, zb_v, dualpipev (printed when pp > 1 or not the default)
    sp / no-sp          sequence parallelism (default: on whenever tp > 1)
    offload             optimizer states and master weights in host memory
    cp-a2a              context parallelism by all-to-all (Ulysses); default ring
    tpo                 tensor-parallel communication overlapped with GEMMs (default off)
    deepep              MoE tokens dispatched by DeepEP/HybridEP (default: all-to-all)
    epo                 expert all-to-all overlapped with another micro-batch's compute
    no-ogr              data-parallel gradient reduction not overlapped with backward
    no-opg              ZeRO/FSDP parameter all-gather not overlapped with forward
    order-A-B-C-D       rank order of the axes, innermost first (default tp-cp-dp-pp)
"""

from __future__ import annotations

import re

from .errors import InputError
from .plan import DEFAULT_ORDER, SCHEDULES, Plan
from .recompute_modules import parse_modules

_INT_TOKENS = ("dp", "tp", "pp", "vpp", "cp", "ep", "etp", "zero", "hsdp", "mb")
_INT_FIELD = {"hsdp": "hsdp_shard", "mb": "micro_batch"}
_FLAGS = {  # token -> (field, value)
    "sp": ("sequence_parallel", True), "no-sp": ("sequence_parallel", False),
    "offload": ("offload_optimizer", True),
    "cp-a2a": ("cp_kind", "all_to_all"), "cp-ring": ("cp_kind", "ring"),
    "tpo": ("tp_comm_overlap", True), "no-tpo": ("tp_comm_overlap", False),
    "deepep": ("moe_dispatcher", "deepep"), "a2a": ("moe_dispatcher", "alltoall"),
    "hybridep": ("moe_dispatcher", "hybridep"),
    "epo": ("ep_comm_overlap", True), "no-epo": ("ep_comm_overlap", False),
    "no-ogr": ("overlap_grad_reduce", False), "ogr": ("overlap_grad_reduce", True),
    "no-opg": ("overlap_param_gather", False), "opg": ("overlap_param_gather", True),
}
_RC_LAYERS_RE = re.compile(r"^rc-full(\d+)$")
_RC_MODULES = "rc-selective-"
_INT_RE = re.compile(r"^(" + "|".join(sorted(_INT_TOKENS, key=len, reverse=True)) + r")(\d+)$")
TOKENS_HELP = ("dpN tpN ppN [vppN] [cpN] [epN [etpN]] zeroN [hsdpN] mbN [rc-selective|rc-selective-M+M|rc-full|rc-fullN] "
               "[SCHEDULE] [sp|no-sp] [offload] [cp-a2a] [tpo] [deepep] [epo] [no-ogr] [no-opg] "
               "[order-A-B-C-D]")


def format_label(p: Plan) -> str:
    """The complete label of ``p``: parse_label(format_label(p)) == p."""
    parts = [f"dp{p.dp}", f"tp{p.tp}", f"pp{p.pp}"]
    if p.vpp > 1:
        parts.append(f"vpp{p.vpp}")
    if p.cp > 1:
        parts.append(f"cp{p.cp}")
    if p.ep > 1 or p.etp > 1:
        parts.append(f"ep{p.ep}")
        if p.etp > 1:
            parts.append(f"etp{p.etp}")
    parts.append(f"zero{p.zero}")
    if p.hsdp_shard:
        parts.append(f"hsdp{p.hsdp_shard}")
    parts.append(f"mb{p.micro_batch}")
    if p.recompute != "none":
        parts.append(f"rc-{p.recompute}" + (str(p.recompute_layers) if p.recompute_layers else "")
                     + (f"-{p.recompute_modules}" if p.recompute_modules else ""))
    if p.pp > 1 or p.schedule != Plan(vpp=p.vpp, pp=p.pp).schedule:
        parts.append(p.schedule)
    if p.sequence_parallel:
        parts.append("sp")
    elif p.tp > 1:
        parts.append("no-sp")
    if p.offload_optimizer:
        parts.append("offload")
    if p.cp_kind != "ring":
        parts.append("cp-a2a")
    if p.tp_comm_overlap:
        parts.append("tpo")
    if p.moe_dispatcher != "alltoall":
        parts.append(p.moe_dispatcher)
    if p.ep_comm_overlap:
        parts.append("epo")
    if not p.overlap_grad_reduce:
        parts.append("no-ogr")
    if not p.overlap_param_gather:
        parts.append("no-opg")
    if p.order != DEFAULT_ORDER:
        parts.append("order-" + p.order)
    return " ".join(parts)


def label_fields(label: str) -> dict:
    """The fields a label names (those it leaves out are at their defaults)."""
    if not isinstance(label, str) or not label.strip():
        raise InputError("--plan", label, "give a plan label, e.g. 'dp2 tp4 pp4 zero1 mb1 1f1b sp'")
    out: dict = {}
    for tok in label.replace(",", " ").split():
        t = tok.strip().lower()
        m = _INT_RE.match(t)
        if m:
            key, val = _INT_FIELD.get(m.group(1), m.group(1)), int(m.group(2))
        elif t in _FLAGS:
            key, val = _FLAGS[t]
        elif _RC_LAYERS_RE.match(t):
            n = int(_RC_LAYERS_RE.match(t).group(1))
            if n < 1:  # rc-full0 would read as recompute_layers 0 = every layer
                raise InputError("--plan", label, f"{t}: rc-fullN needs N >= 1 layers "
                                 "(rc-full recomputes every layer; omit rc- for none)")
            if out.get("recompute_layers", n) != n:
                raise InputError("--plan", label, f"gives recompute_layers twice "
                                 f"({out['recompute_layers']} and {n})")
            out["recompute_layers"] = n
            key, val = "recompute", "full"
        elif t.startswith(_RC_MODULES) and len(t) > len(_RC_MODULES):
            try:
                mods = parse_modules(t[len(_RC_MODULES):])
            except InputError as e:  # name the label and its token, not the bare module
                raise InputError("--plan", label, f"{t}: recompute_modules={e.value!r}: "
                                 f"{e.allowed}") from None
            if out.get("recompute_modules", mods) != mods:
                raise InputError("--plan", label, f"gives recompute_modules twice "
                                 f"({out['recompute_modules']} and {mods})")
            out["recompute_modules"] = mods
            key, val = "recompute", "selective"
        elif t.startswith("rc-"):
            key, val = "recompute", t[3:]
        elif t.startswith("order-"):
            key, val = "order", t[6:]
        elif t in SCHEDULES:
            key, val = "schedule", t
        else:
            raise InputError("--plan", tok, f"unknown label token in {label!r}; tokens: "
                             + TOKENS_HELP)
        if key in out and out[key] != val:
            raise InputError("--plan", label, f"gives {key} twice ({out[key]} and {val})")
        out[key] = val
    return out


def parse_label(label: str) -> Plan:
    """The plan a label names; InputError for unknown tokens or impossible combinations."""
    return Plan(**label_fields(label))
