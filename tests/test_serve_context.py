"""A served request is at most the model's context, read from the config as vLLM 0.33.0 reads
it (vllm/transformers_utils/model_arch_config_convertor.py:376-406, vllm/config/model.py:
2598-2634): longer ones are refused in one line, exit 2."""

import json
import subprocess
import sys

import pytest

from meshplan.specs.catalog.presets import load_model
from meshplan.specs.hf_config import model_from_hf_dict

LLAMA = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
         "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
         "vocab_size": 1000, "max_position_embeddings": 4096}


@pytest.mark.parametrize("extra,want", [
    ({}, 4096),
    ({"rope_scaling": {"rope_type": "linear", "factor": 4.0}}, 16384),  # vLLM multiplies
    ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, 8192),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0,  # already scaled: not again
                       "original_max_position_embeddings": 1024}}, 4096),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 512}}, 4096),
    ({"seq_length": 2048}, 2048),  # the smallest key
    ({"model_max_length": 8192}, 8192),  # overrides them
])
def test_max_context_as_vllm_reads_it(extra, want):
    assert model_from_hf_dict(LLAMA | extra).max_context == want


@pytest.mark.parametrize("name,want", [("llama3.1-8b", 131072), ("deepseek-v3", 163840),
                                       ("qwen3-30b-a3b", 40960), ("gpt-oss-20b", 131072)])
def test_presets_carry_the_context_of_their_hf_config(name, want):
    # the published config.json of each: max_position_embeddings, its rope scaling (llama3,
    # yarn) leaving it as written
    assert load_model(name).max_context == want


def _serve(*args):
    return subprocess.run([sys.executable, "-m", "meshplan.cli", "serve", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_refuses_a_request_longer_than_the_context():
    p = _serve("--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--input-len", "200000",
               "--output-len", "100", "--rate", "1", "--ttft-p90", "20s", "--tpot-p90", "50ms")
    assert p.returncode == 2 and p.stdout == ""
    line, = p.stderr.strip().splitlines()
    assert "--input-len" in line and "200000" in line and "131,072" in line


def test_cli_refuses_a_config_json_by_its_own_context(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    p = _serve("--model", str(tmp_path / "config.json"), "--gpus", "1xH100-SXM-80GB",
               "--input-len", "4000", "--output-len", "200", "--rate", "1", "--requests", "20")
    assert p.returncode == 2 and "4,096" in p.stderr, p.stderr


def test_cli_refuses_a_range_whose_upper_end_is_longer_than_the_context():
    """1000:131000 prompts with 100 output tokens: a request of 131,100 tokens is in the
    stated traffic, over Llama 3.1's 131,072, though three draws fall short of it."""
    p = _serve("--model", "llama3.1-8b", "--gpus", "1xH100-SXM-80GB", "--input-len",
               "1000:131000", "--output-len", "100", "--rate", "1", "--requests", "3",
               "--plan", "tp1x1", "--no-goodput")
    assert p.returncode == 2 and p.stdout == "", p.stderr
    line, = p.stderr.strip().splitlines()
    assert "131,100" in line and "131,072" in line
