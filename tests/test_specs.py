"""Model, hardware and workload specs: published parameter totals, parsing, bad input."""

import json

import pytest

from meshplan.errors import InputError
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.catalog.presets import PUBLISHED_PARAMS, load_model, preset, preset_names
from meshplan.specs.hf_config import model_from_hf_dict, model_from_hf_file
from meshplan.specs.workload import Workload


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_preset_params_match_published(name):
    total, active = PUBLISHED_PARAMS[name]
    m = preset(name)
    # published totals are rounded to 2-3 significant figures
    assert m.total_params() == pytest.approx(total, rel=0.01)
    if active:
        assert m.active_params() == pytest.approx(active, rel=0.025)


def test_llama3_8b_exact():
    # 8,030,261,248 = sum(p.numel()) of transformers' LlamaForCausalLM(Llama-3.1-8B)
    assert preset("llama3.1-8b").total_params() == 8_030_261_248


def test_llama32_1b_exact():
    # 1,235,814,400 = sum(p.numel()) of LlamaForCausalLM(Llama-3.2-1B), tied head counted once
    assert preset("llama3.2-1b").total_params() == 1_235_814_400


def test_gpt2_exact():
    # 124,439,808 = sum(p.numel()) of GPT2LMHeadModel (tied head counted once)
    assert preset("gpt2").total_params() == 124_439_808


def test_required_presets_present():
    for n in ("llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mixtral-8x7b", "mixtral-8x22b",
              "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "gpt3-175b"):
        assert n in preset_names()


def test_families(tmp_path):
    for cfg, kind in [
        ({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
          "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
          "vocab_size": 32000}, "gqa"),
        ({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
          "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
          "vocab_size": 151936, "tie_word_embeddings": True}, "gqa"),
        ({"model_type": "gpt_neox", "hidden_size": 512, "intermediate_size": 2048,
          "num_hidden_layers": 6, "num_attention_heads": 8, "vocab_size": 50304}, "mha"),
    ]:
        p = tmp_path / "config.json"
        p.write_text(json.dumps(cfg))
        assert model_from_hf_file(p).attention == kind
    # Qwen2-0.5B: 494,032,768 parameters (model card: 0.49B)
    assert model_from_hf_file(p.parent).total_params() > 0


def test_qwen2_05b_exact():
    cfg = {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
           "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
           "vocab_size": 151936, "tie_word_embeddings": True}
    assert model_from_hf_dict(cfg).total_params() == 494_032_768


@pytest.mark.parametrize("text,field", [
    ("{not json", "model"),
    ('{"model_type": "bert"}', "config.json:model_type"),
    ('{"model_type": "llama", "hidden_size": 64}', "config.json:num_attention_heads"),
    ('{"model_type": "llama", "hidden_size": -4, "intermediate_size": 8, "num_hidden_layers": 2,'
     ' "num_attention_heads": 2, "vocab_size": 10}', "config.json:hidden_size"),
])
def test_malformed_config(tmp_path, text, field):
    p = tmp_path / "config.json"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        model_from_hf_file(p)
    assert e.value.field == field


def test_unknown_preset_lists_presets():
    with pytest.raises(InputError, match="llama3.1-8b"):
        load_model("llama9")


def test_gpu_catalog_ids():
    for g in ("V100-SXM-32GB", "A100-SXM-40GB", "A100-SXM-80GB", "H100-SXM-80GB",
              "H100-SXM-96GB-500W", "H800-SXM-80GB", "H200-SXM-141GB", "B200", "GB200", "MI300X"):
        assert g in GPUS and GPUS[g].source


def test_cluster_parse_and_errors():
    c = make_cluster("64xH100-SXM-80GB")
    assert c.num_gpus == 64 and c.gpus_per_node == 8 and c.domain_size == 8
    assert make_cluster("144xGB200").domain_size == 72
    with pytest.raises(InputError, match="gpu"):
        make_cluster("8xH9000")
    with pytest.raises(InputError, match="gpus"):
        make_cluster("eightxH100-SXM-80GB")
    with pytest.raises(InputError, match="multiple of gpus_per_node"):
        make_cluster("12xH100-SXM-80GB")


def test_workload_errors():
    with pytest.raises(InputError, match="seq_len"):
        Workload(0, 8)
    with pytest.raises(InputError, match="global_batch"):
        Workload(128, -1)
    with pytest.raises(InputError, match="precision"):
        Workload(128, 8, "int4")
    assert Workload.from_tokens(4096, 4 * 2**20).global_batch == 1024


@pytest.mark.parametrize("name,mem_bytes,gpu_id", [
    # names and total_memory as torch.cuda.get_device_properties reports them
    ("NVIDIA H100 80GB HBM3", 85_031_714_816, "H100-SXM-80GB"),
    ("NVIDIA H200", 150_110_011_392, "H200-SXM-141GB"),
    ("NVIDIA A100-SXM4-40GB", 42_505_273_344, "A100-SXM-40GB"),
    ("NVIDIA A100-SXM4-80GB", 85_198_045_184, "A100-SXM-80GB"),
    ("Tesla V100-SXM2-32GB", 34_089_730_048, "V100-SXM-32GB"),
    ("AMD Instinct MI300X", 205_822_885_888, "MI300X"),
    ("NVIDIA H100 PCIe", 85_031_714_816, None),  # other clocks and links than the SXM part
    ("NVIDIA GH200 480GB", 102_005_473_280, None),
    ("NVIDIA GeForce RTX 4090", 25_393_692_672, None),
])
def test_gpu_for_device_names(name, mem_bytes, gpu_id):
    from meshplan.specs.catalog.gpus import gpu_for_device
    assert gpu_for_device(name, mem_bytes) == gpu_id
