"""Module-level selective recomputation: which parts of a transformer layer are recomputed.

Megatron-Core's ``--recompute-granularity selective --recompute-modules M [M ...]``
(megatron/core/transformer/transformer_config.py, ``recompute_modules``; main as of 2026-08)
names the submodules a layer recomputes in backward:

    core_attn       the attention core (normal checkpointing: q, k, v kept as its inputs)
    layernorm       input_layernorm and pre_mlp_layernorm (output discarded, recomputed)
    mla_up_proj     MLA's q/kv up projections and RoPE (output discarded, recomputed)
    mlp             the dense MLP (normal checkpointing: only its input kept)
    moe             the whole MoE layer, dispatch and combine included (normal checkpointing)
    moe_act         the routed experts' activation function (output discarded, recomputed)
    shared_experts  the shared experts' MLP (normal checkpointing)

"Output-discarding" modules (moe_act, layernorm, mla_up_proj) free their output after the
next op consumed it and recompute it just before that op's backward
(CheckpointWithoutOutput); the others keep only their input. The DeepSeek-V3 report (arXiv
2412.19437) does the same by hand: sec. 3.2.3 recomputes all RMSNorms and the MLA
up-projections, sec. 3.3.2 caches the SwiGLU inputs and recomputes its output.

A plan names its set as ``Plan.recompute_modules``: the modules joined by "+" in the
canonical order below (e.g. "layernorm+mla_up_proj+moe_act"); "" with recompute="selective"
is the engine's own selective recomputation (cost/layer.py). This module only names, parses
and checks the sets; what each costs and frees is cost/ops.py and cost/layer.py.
"""

from __future__ import annotations

from .errors import InputError

# canonical order (Megatron's documentation order)
MODULES = ("core_attn", "layernorm", "mla_up_proj", "mlp", "moe", "moe_act", "shared_experts")
SEP = "+"


def parse_modules(value: object, field: str = "recompute_modules") -> str:
    """Canonical "+"-joined form of a module set given as a string ("a+b", "a b", "a;b",
    "[a, b]") or a list; "" for none. Unknown or repeated modules are an InputError."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        names = [str(v) for v in value]
    elif isinstance(value, str):
        s = value.strip().strip("[]")
        for ch in ",; '\"":
            s = s.replace(ch, SEP)
        names = [n for n in s.split(SEP) if n]
    else:
        raise InputError(field, value, "give recompute modules as text, e.g. 'layernorm+moe_act'")
    names = [n.strip().lower() for n in names if n.strip()]
    bad = [n for n in names if n not in MODULES]
    if bad:
        raise InputError(field, bad[0], "unknown recompute module; known: " + ", ".join(MODULES))
    if len(set(names)) != len(names):
        raise InputError(field, value, "names a recompute module twice")
    if "moe" in names and "moe_act" in names:
        raise InputError(field, value, "'moe' already recomputes the whole MoE layer, its "
                         "activation included; drop 'moe_act'")
    return SEP.join(m for m in MODULES if m in names)


def modules_of(value: str) -> tuple[str, ...]:
    """The modules of a canonical set (Plan.recompute_modules)."""
    return tuple(value.split(SEP)) if value else ()


def inapplicable(modules: str, model) -> tuple[str, str] | None:
    """(module, why) for the first module that has nothing to recompute in ``model``."""
    for m in modules_of(modules):
        if m == "mla_up_proj" and not model.is_mla:
            return m, f"{model.name} has no multi-latent attention"
        if m in ("moe", "moe_act") and not model.is_moe:
            return m, f"{model.name} is dense: it has no MoE layer"
        if m == "shared_experts" and not (model.is_moe and model.moe_shared_ffn):
            return m, f"{model.name} has no shared experts"
        if m == "mlp" and not model.num_dense_layers:
            return m, f"{model.name} has no dense MLP layer (every layer is MoE)"
    return None
