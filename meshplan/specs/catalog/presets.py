"""Model presets shipped with meshplan: HuggingFace-style config files in ``models/``.

Each preset goes through the same parser as a user's ``config.json``.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from ...errors import InputError, did_you_mean
from ..hf_config import model_from_hf_dict, model_from_hf_file
from ..model import ModelSpec

# Published parameter totals (total, active) the presets are tested against.
# Sources: Llama 3 paper / model cards (8.03B, 70.6B, 405.9B); Mixtral paper (46.7B total,
# 12.9B active; 8x22B: 141B, 39B); Qwen3 technical report (30.5B/3.3B, 235B/22B);
# DeepSeek-V3 report (671B total, 37B activated, MTP module excluded); GPT-3 paper (175B);
# GPT-2 small (124M); GPT-NeoX-20B paper (20.55B); gpt-oss model card table 1 (116.83B,
# 20.91B; its active counts leave out the embedding lookup: tests/test_hf_families.py).
PUBLISHED_PARAMS: dict[str, tuple[float, float | None]] = {
    "llama3.2-1b": (1.24e9, None),
    "llama3.1-8b": (8.03e9, None),
    "llama3.1-70b": (70.6e9, None),
    "llama3.1-405b": (405.9e9, None),
    "mixtral-8x7b": (46.7e9, 12.9e9),
    "mixtral-8x22b": (141e9, 39e9),
    "qwen3-30b-a3b": (30.5e9, 3.3e9),
    "qwen3-235b-a22b": (235e9, 22e9),
    "deepseek-v3": (671e9, 37e9),
    "gpt3-175b": (175e9, None),
    "gpt2": (124e6, None),
    "gpt-neox-20b": (20.55e9, None),
    "gpt-oss-120b": (116.83e9, None),
    "gpt-oss-20b": (20.91e9, None),
}


def _models_dir():
    return resources.files(__package__) / "models"


# Spelling suggestions for a model name that is no preset: a near spelling of another model
# (deepseek-v2 / deepseek-v3, mistral-7b / mixtral-8x7b) must not be offered as the one
# meant, so only very close spellings (difflib ratio 0.9: 'lama3.1-8b') are, beside names
# that match once case and punctuation are dropped (errors.suggestions).
PRESET_CUTOFF = 0.9


@lru_cache(maxsize=None)
def preset_names() -> tuple[str, ...]:
    return tuple(sorted(p.name[:-5] for p in _models_dir().iterdir() if p.name.endswith(".json")))


@lru_cache(maxsize=None)
def preset(name: str) -> ModelSpec:
    import json

    key = name.strip().lower()
    if key not in preset_names():
        raise InputError("model", name,
                         "not a preset or an existing config.json; "
                         + did_you_mean(name, preset_names(), PRESET_CUTOFF) + "presets: "
                         + ", ".join(preset_names()))
    cfg = json.loads((_models_dir() / f"{key}.json").read_text(encoding="utf-8"))
    return model_from_hf_dict(cfg, name=key)


def load_model(name_or_path: str) -> ModelSpec:
    """A preset by name, or a HuggingFace config.json (file or folder holding one)."""
    if not str(name_or_path).strip():  # an unset shell variable: Path("") is the current
        # folder, whose config.json was read (or "model='.': cannot read file")
        raise InputError("model", name_or_path, "must name a preset or a config.json; presets: "
                         + ", ".join(preset_names()))
    p = Path(name_or_path)
    if name_or_path.strip().lower() in preset_names():
        return preset(name_or_path)
    if p.suffix == ".json" or p.is_dir() or p.exists():
        return model_from_hf_file(p)
    return preset(name_or_path)  # raises the listing error
