"""The model of one runs-CSV row: its shape columns, or the preset its `model` names.

A row whose `model` names a preset (matched the way people write names: "DeepSeek-V3",
"deepseek-ai/DeepSeek-V3", "Llama 3.1 405B", "llama3.1-405b") takes the preset's shape for
every shape column it leaves blank, and for the MLA dimensions when it says `attention=mla`
without giving them; the row's own columns win where it gives them. ``model_from_row``
returns the notes that say so. A row that names no preset needs layers, hidden, heads,
vocab (and ffn for dense layers); a blank one fails with its field name.
"""

from __future__ import annotations

import dataclasses
import re

from .errors import InputError
from .runs_csv import count, flag, text
from .specs.catalog.presets import preset, preset_names
from .specs.model import ModelSpec

# column -> ModelSpec field (the same name)
INT_COLUMNS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "head_dim",
               "moe_experts", "moe_topk", "moe_expert_ffn", "moe_shared_experts",
               "moe_dense_layers", "sliding_window", "sliding_layers")
MLA_COLUMNS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
               "v_head_dim")
NEEDED = ("layers", "hidden", "heads", "vocab")
_SUFFIXES = ("instruct", "base", "hf", "chat")


def _norm(name: str) -> str:
    s = name.strip().lower().rsplit("/", 1)[-1]
    # a release tag with a dot ends some HuggingFace ids ("Mixtral-8x7B-Instruct-v0.1"): not
    # the model's version, which has no dot in the names matched here ("DeepSeek-V3")
    s = re.sub(r"[-_ ]v\d+(\.\d+)+$", "", s)
    s = re.sub(r"[^a-z0-9]", "", s)
    if s.startswith("metallama"):
        s = s[4:]
    for suf in _SUFFIXES:
        if s.endswith(suf) and len(s) > len(suf):
            s = s[: -len(suf)]
    return s


def match_preset(name: str) -> str | None:
    """The preset a model name refers to, or None. Exact after normalising case,
    punctuation, an organisation prefix ("meta-llama/") and an -Instruct/-Base suffix; a
    name that differs in version or size ("Llama 3 70B", "GPT 1.7B") matches nothing."""
    if not name.strip():
        return None
    key = _norm(name)
    for p in preset_names():
        if _norm(p) == key:
            return p
    return None


def model_from_row(row: dict) -> tuple[ModelSpec, list[str]]:
    name = text(row, "model") or "row"
    given: dict = {}
    for c in INT_COLUMNS + MLA_COLUMNS:
        v = count(row, c, minimum=0)
        if v is not None:
            given[c] = v
    mlp = text(row, "mlp").lower()
    if mlp:
        given["mlp"] = mlp
    tied = flag(row, "tied_embeddings")
    if tied is not None:
        given["tied_embeddings"] = tied
    arch = text(row, "arch").lower()
    if arch and arch not in ("dense", "moe"):
        raise InputError("arch", arch, "allowed: dense, moe")
    attn = text(row, "attention").lower()
    if attn and attn not in ("mha", "gqa", "mla"):
        raise InputError("attention", attn, "allowed: mha, gqa, mla")
    notes: list[str] = []
    if arch == "dense":
        dropped = []
        for c in ("moe_experts", "moe_topk", "moe_expert_ffn", "moe_shared_experts",
                  "moe_dense_layers"):
            if given.pop(c, None):  # a dense row's MoE columns mean nothing
                dropped.append(c)
        if dropped:  # but a non-zero one may be a mislabelled MoE row: say so
            notes.append(f"arch is dense: {', '.join(dropped)} ignored (set arch=moe to "
                         "predict it as a mixture of experts)")
    base_name = match_preset(name)
    if base_name:
        base = preset(base_name)
        blank = [c for c in NEEDED + ("kv_heads", "ffn") if c not in given]
        if attn == "mla" and not base.is_mla and "kv_lora_rank" not in given:
            raise InputError("kv_lora_rank", "", "MLA row: give q_lora_rank, kv_lora_rank, "
                             "qk_rope_head_dim, qk_nope_head_dim, v_head_dim")
        kw = dict(given)
        if ("hidden" in kw and kw["hidden"] != base.hidden) or \
                ("heads" in kw and kw["heads"] != base.heads):
            kw.setdefault("head_dim", 0)  # derive it from the row's hidden / heads
        if arch == "dense" and base.is_moe:
            kw.update(moe_experts=0, moe_topk=0, moe_expert_ffn=0, moe_shared_experts=0,
                      moe_shared_ffn=0, moe_dense_layers=0)
        if "moe_shared_experts" in kw and "moe_expert_ffn" in kw:
            kw.setdefault("moe_shared_ffn", 0)
        if kw.get("moe_experts") and base.moe_groups and kw["moe_experts"] % base.moe_groups:
            # the preset's device-limited routing groups do not divide the row's experts:
            # not the row's routing (it states no groups); priced without them
            kw.update(moe_groups=0, moe_group_topk=0)
            notes.append(f"{base_name}'s {base.moe_groups} routing groups do not divide the "
                         f"row's {kw['moe_experts']} experts: no group-limited routing")
        if kw.get("moe_experts") and not base.is_moe:
            _require_moe_columns(given, f"preset {base_name} is dense")
        spec = dataclasses.replace(base, name=name, **kw)
        if arch == "moe" and not spec.is_moe:
            raise InputError("moe_experts", "", f"required for an MoE row (arch=moe): preset "
                             f"{base_name} is dense")
        extra: list[str] = []  # said after where the shape came from
        if arch == "dense" and base.is_moe:  # the row's arch wins: say what it drops
            extra.append(f"arch is dense: preset {base_name}'s experts ({base.moe_experts}, "
                         f"top {base.moe_topk}) ignored, its dense MLP (ffn {spec.ffn}) used "
                         "in every layer (set arch=moe to predict it as a mixture of experts)")
        spec, attn_note = _row_attention(attn, spec, given, f"preset {base_name}")
        if attn_note:
            extra.append(attn_note)
        if spec.is_moe and spec.num_dense_layers == 0 and "ffn" in blank:
            blank.remove("ffn")  # no dense layer uses it
        if set(blank) >= set(NEEDED):
            notes.append(f"shape from preset {base_name}")
        elif blank:
            notes.append(f"{', '.join(blank)} from preset {base_name}")
        if attn == "mla" and not any(c in given for c in MLA_COLUMNS):
            notes.append(f"MLA dims from preset {base_name}")
        if spec.sliding_window and "sliding_window" not in given:
            notes.append(f"sliding window ({spec.sliding_layers} layers, {spec.sliding_window} "
                         f"keys) from preset {base_name}")
        return spec, notes + extra
    for c in NEEDED:
        if c not in given:
            raise InputError(c, "", "required for a prediction (blank, and `model` names "
                             "no preset: " + ", ".join(preset_names()) + ")")
    if attn == "mla" and "kv_lora_rank" not in given:
        raise InputError("kv_lora_rank", "", "MLA row: give q_lora_rank, kv_lora_rank, "
                         "qk_rope_head_dim, qk_nope_head_dim, v_head_dim, or name a preset")
    if arch == "moe" and not given.get("moe_experts"):
        raise InputError("moe_experts", given.get("moe_experts", ""),
                         "required for an MoE row (arch=moe): the number of routed experts, "
                         "or a `model` that names a preset")
    kw = dict(given, name=name)
    if attn == "gqa" and "kv_heads" not in given:
        raise InputError("kv_heads", "", "required for attention=gqa (the number of key/value "
                         "heads; blank would mean one per query head, i.e. mha)")
    kw.setdefault("kv_heads", kw["heads"])
    if arch == "dense" or (not arch and not kw.get("moe_experts")):
        for c in ("moe_experts", "moe_topk", "moe_expert_ffn", "moe_shared_experts",
                  "moe_dense_layers"):
            kw.pop(c, None)
    if kw.get("moe_experts"):
        _require_moe_columns(given, "`model` names no preset")
    if "ffn" not in given and (not kw.get("moe_experts") or kw.get("moe_dense_layers")):
        raise InputError("ffn", "", "required for a prediction (blank, and `model` names no "
                         "preset): the dense MLP's intermediate size"
                         + (f", used by the {kw['moe_dense_layers']} leading dense layers"
                            if kw.get("moe_experts") else ""))
    kw.setdefault("ffn", 0)
    mla_given = [c for c in MLA_COLUMNS if given.get(c)]
    if attn in ("mha", "gqa") and mla_given:  # they were dropped without a word
        raise InputError("attention", attn, f"contradicts the row's MLA columns "
                         f"({', '.join(f'{c}={given[c]}' for c in mla_given)}): set "
                         "attention=mla, or leave those columns blank")
    if not attn and given.get("kv_lora_rank"):  # MLA is on when kv_lora_rank > 0 (ModelSpec)
        notes.append(f"attention blank: mla from kv_lora_rank={given['kv_lora_rank']}")
    elif attn != "mla":
        for c in MLA_COLUMNS:
            kw.pop(c, None)
    spec = ModelSpec(**kw)
    _row_attention(attn, spec, given, "")
    return spec, notes


def _require_moe_columns(given: dict, why: str) -> None:
    """An MoE row's experts need their top-k and width; a blank one failed as "=0" (a value
    the row never gave)."""
    for c, what in (("moe_topk", "the number of experts each token is routed to"),
                    ("moe_expert_ffn", "each expert's MLP intermediate size")):
        if c not in given:
            raise InputError(c, "", f"required for an MoE row (moe_experts="
                             f"{given['moe_experts']}; {why}): {what}")


def _row_attention(attn: str, spec: ModelSpec, given: dict, base: str) -> tuple[ModelSpec, str]:
    """The row's `attention` column against the model it describes: (the model, a note or
    ""). The row's column wins over a preset where the row says enough (mha: one key/value
    head per query head, noted); a row whose columns contradict each other, or that names
    an attention the preset's shape cannot take without more columns, fails with the field
    named (it was predicted with the other attention without a word)."""
    if attn not in ("mha", "gqa"):
        return spec, ""
    if spec.is_mla:
        if given.get("kv_lora_rank"):
            raise InputError("attention", attn, f"contradicts the row's kv_lora_rank="
                             f"{given['kv_lora_rank']} (MLA): set attention=mla, or leave "
                             "the MLA columns blank")
        raise InputError("attention", attn, f"contradicts {base}, which uses mla: leave "
                         "attention blank (or mla), or give the model's own shape columns "
                         "under a model name that names no preset")
    if attn == "mha" and spec.kv_heads != spec.heads:
        if "kv_heads" in given:
            raise InputError("attention", attn, f"contradicts kv_heads={spec.kv_heads} "
                             f"(mha has one key/value head per query head, {spec.heads})")
        note = (f"attention=mha: kv_heads = heads ({spec.heads}) where {base} has "
                f"{spec.kv_heads} (gqa)")
        return dataclasses.replace(spec, kv_heads=spec.heads), note
    if attn == "gqa" and spec.kv_heads == spec.heads and "kv_heads" not in given:
        raise InputError("kv_heads", "", f"required for attention=gqa: {base} is mha "
                         f"({spec.heads} key/value heads)")
    return spec, ""
