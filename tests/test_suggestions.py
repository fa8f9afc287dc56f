"""Spelling suggestions in bad-input errors (errors.suggestions): a name that only differs in
case and punctuation, or is short of a catalog name, points at it; a near spelling of another
model does not (deepseek-v2 is not deepseek-v3), so a user is never steered to a different
model or part by a suggestion."""

from __future__ import annotations

import pytest

from meshplan.errors import InputError, did_you_mean, require_choice, suggestions
from meshplan.specs.catalog.presets import PRESET_CUTOFF, load_model, preset_names
from meshplan.specs.catalog.gpus import GPUS as CATALOG
from meshplan.specs.hardware import lookup_gpu

GPUS = list(CATALOG)


@pytest.mark.parametrize("typed, meant", [
    ("H100", ["H100-SXM-80GB", "H100-SXM-96GB-500W"]),  # a family: every part of it
    ("a100", ["A100-SXM-40GB", "A100-SXM-80GB"]),
    ("mi300", ["MI300X"]),
    ("h100 sxm 80gb", ["H100-SXM-80GB"]),  # punctuation and case dropped
    ("h100-80gb", ["H100-SXM-80GB"]),  # a close spelling with the same digits
    ("B200X", ["B200"]),  # holds a name whole
])
def test_gpu_suggestions(typed, meant):
    assert suggestions(typed, GPUS) == meant


@pytest.mark.parametrize("typed", ["RTX4090", "TPUv5", "H10-SXM-80GB", "x"])
def test_gpu_without_a_close_name(typed):
    assert suggestions(typed, GPUS) == []


@pytest.mark.parametrize("typed, meant", [
    ("Llama-3.1-8B", ["llama3.1-8b"]),
    ("meta-llama/Llama-3.1-70B", ["llama3.1-70b"]),
    ("lama3.1-8b", ["llama3.1-8b"]),
    ("mixtral", ["mixtral-8x22b", "mixtral-8x7b"]),
])
def test_model_suggestions(typed, meant):
    assert suggestions(typed, preset_names(), PRESET_CUTOFF) == meant


@pytest.mark.parametrize("typed", ["deepseek-v2", "mistral-7b", "qwen3-32b", "llama3-8b"])
def test_other_models_are_not_suggested(typed):
    assert suggestions(typed, preset_names(), PRESET_CUTOFF) == []


def test_errors_carry_the_suggestion_and_the_full_list():
    with pytest.raises(InputError) as e:
        lookup_gpu("H100", CATALOG)
    msg = str(e.value)
    assert msg.startswith("gpu='H100': did you mean H100-SXM-80GB or H100-SXM-96GB-500W? known GPUs: ")
    assert all(g in msg for g in GPUS) and "\n" not in msg
    with pytest.raises(InputError, match=r"did you mean llama3\.1-8b\? presets: "):
        load_model("Llama-3.1-8B")
    with pytest.raises(InputError, match=r"did you mean bf16\? allowed: "):
        require_choice("precision", "BF-16", ("bf16", "fp16", "fp8"))
    assert did_you_mean("zzz", ("bf16", "fp8")) == ""
