"""Which torchtitan 0.3 model (module, config_registry function, flavour) a ModelSpec is.

torchtitan builds a model from its own registry of flavours (``model_registry(flavor)``
in ``torchtitan/models/<family>/__init__.py``); meshplan maps its presets onto them.
Each entry's shape is checked against torchtitan's own model config in the tests.
"""

from __future__ import annotations

from ..specs.catalog.presets import preset

# meshplan preset -> (torchtitan model module, config_registry function, flavor, registry kwargs)
MODELS = {
    "llama3.1-8b": ("llama3", "llama3_8b", "8B", {}),
    "llama3.1-70b": ("llama3", "llama3_70b", "70B", {}),
    "llama3.1-405b": ("llama3", "llama3_405b", "405B", {}),
    "qwen3-30b-a3b": ("qwen3", "qwen3_30b_a3b", "30B-A3B", {}),
    "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b", "671B", {"attn_backend": "flex"}),
}


def torchtitan_model(model) -> tuple[str, str, str, dict] | None:
    """The registry entry whose shape is ``model``'s, or None."""
    for name, entry in MODELS.items():
        if preset(name) == model:
            return entry
    return None


def torchtitan_model_missing(model) -> str:
    """'' when torchtitan has the model, else what is missing, in one sentence."""
    if torchtitan_model(model) is not None:
        return ""
    return ("torchtitan builds models from its own registered flavours; meshplan maps "
            + ", ".join(MODELS) + " (a model of another shape needs a torchtitan model "
            "config written by hand)")
