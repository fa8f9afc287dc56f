"""Real HuggingFace config.json files users bring (tests/data/hf_configs, sources in its
README): the parameter counts meshplan derives match the published ones, and families it
does not model fail with one line naming the field, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.errors import InputError
from meshplan.specs.hf_config import model_from_hf_dict, model_from_hf_file

DATA = Path(__file__).parent / "data" / "hf_configs"

# (file, published total parameters, source). Model cards state counts to 2-3 significant
# figures, so the tolerance is 1% (half a unit of the last stated digit is at most 0.7%).
PUBLISHED = [
    ("qwen2.5-7b.json", 7.61e9, "huggingface.co/Qwen/Qwen2.5-7B model card: 7.61B"),
    ("qwen3-8b.json", 8.2e9, "huggingface.co/Qwen/Qwen3-8B model card: 8.2B"),
    ("mistral-7b-v0.3.json", 7.25e9, "huggingface.co/mistralai/Mistral-7B-v0.3: 7.25B params"),
    ("llama-3.1-8b.json", 8.03e9, "huggingface.co/meta-llama/Llama-3.1-8B: 8.03B params"),
    ("qwen2.5-0.5b.json", 0.49e9, "huggingface.co/Qwen/Qwen2.5-0.5B model card: 0.49B "
     "(tied embeddings)"),
    ("mistral-nemo-12b.json", 12.2e9, "huggingface.co/mistralai/Mistral-Nemo-Base-2407: 12.2B "
     "params (head_dim 128 != hidden/heads 160)"),
    ("phi-4.json", 14.7e9, "huggingface.co/microsoft/phi-4: 14.7B params; Phi-4 technical "
     "report (arXiv 2412.08905): 14B"),
    ("olmo-2-7b.json", 7.3e9, "huggingface.co/allenai/OLMo-2-1124-7B: 7.3B params"),
]


@pytest.mark.parametrize("name,total,source", PUBLISHED)
def test_total_params_match_published(name, total, source):
    spec = model_from_hf_file(DATA / name)
    assert spec.total_params() == pytest.approx(total, rel=0.01), source
    assert spec.active_params() == spec.total_params()  # dense


def test_a_wrong_count_would_fail():
    # Guard: the 1% tolerance separates neighbouring sizes (Qwen2.5-7B vs Qwen3-8B).
    a = model_from_hf_file(DATA / "qwen2.5-7b.json").total_params()
    assert a != pytest.approx(8.2e9, rel=0.01)


def test_olmo2_count_is_its_modules_sum():
    """OLMo-2-1124-7B, summed from modeling_olmo2.py's modules: embed_tokens and lm_head
    (vocab x hidden each), per layer q/k/v/o (hidden x heads*head_dim each, no biases), q_norm
    over heads*head_dim and k_norm over kv_heads*head_dim (one weight per element, whole
    projections), gate/up/down (3 x hidden x intermediate), the post-attention and
    post-feedforward norms (hidden each), and the final norm. meshplan counted one head_dim
    per q/k norm (253,952 short)."""
    v, h, f, layers, heads, kv, d = 100352, 4096, 11008, 32, 32, 32, 128
    layer = 4 * h * heads * d + heads * d + kv * d + 3 * h * f + 2 * h
    assert layer == 202_391_552
    assert model_from_hf_file(DATA / "olmo-2-7b.json").total_params() \
        == 2 * v * h + layers * layer + h == 7_298_617_344


# Families meshplan does not model: Qwen3-Next (gated DeltaNet linear attention mixed
# with full attention; model_type from configuration_qwen3_next.py) and Mamba (a state-space
# model, configuration_mamba.py).
UNSUPPORTED = [
    ({"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48,
      "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 151936,
      "layer_types": ["linear_attention"] * 3 + ["full_attention"]}, "qwen3_next"),
    ({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24,
      "vocab_size": 50280, "state_size": 16}, "mamba"),
]


@pytest.mark.parametrize("cfg,model_type", UNSUPPORTED)
def test_unsupported_family_is_one_line_naming_the_field(cfg, model_type, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="model_type"):
        model_from_hf_file(path)
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "predict", "--model",
                        str(path), "--gpus", "16xH100-SXM-80GB", "--seq-len", "4096",
                        "--global-batch", "256", "--plan", "dp16 tp1 pp1 zero1 mb1"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "config.json:model_type" in lines[0] and model_type in lines[0]
    assert "gpt_oss" in lines[0] and "gemma3" in lines[0]  # what is supported is listed
    assert "Traceback" not in p.stderr


CATALOG = Path(__file__).parents[1] / "meshplan" / "specs" / "catalog" / "models"

# MoE: (catalog config.json, total, active, tolerance, source). "37B" has two significant
# figures (+-1.4%), so DeepSeek-V3 gets 2%; MTP layers (14B) are not counted, as in the paper.
MOE = [
    ("qwen3-30b-a3b.json", 30.5e9, 3.3e9, 0.02,
     "huggingface.co/Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"),
    ("deepseek-v3.json", 671e9, 37e9, 0.02,
     "DeepSeek-V3 technical report (arXiv 2412.19437) abstract: 671B total, 37B activated"),
    ("mixtral-8x7b.json", 46.7e9, 12.9e9, 0.01,
     "Mixtral of Experts (arXiv 2401.04088) sec. 2: 47B total, 13B active; "
     "mistral.ai/news/mixtral-of-experts: 46.7B total, 12.9B per token"),
]
# Kimi K2 (tests/data/hf_configs): model card huggingface.co/moonshotai/Kimi-K2-Base "1 trillion
# total parameters, 32 billion activated"; one significant figure there, so 3%.
KIMI = ("kimi-k2.json", 1.0e12, 32e9, 0.03, "Kimi-K2 model card: 1T total, 32B activated")


@pytest.mark.parametrize("name,total,active,rel,source", MOE + [KIMI])
def test_moe_total_and_active_match_published(name, total, active, rel, source):
    spec = model_from_hf_file(CATALOG / name if (CATALOG / name).exists() else DATA / name)
    assert spec.total_params() == pytest.approx(total, rel=rel), source
    assert spec.active_params() == pytest.approx(active, rel=rel), source


def test_deepseek_v2_lite_mla_without_q_lora():
    # q_lora_rank: null (no query down-projection) is the path real DeepSeek-V2-Lite takes.
    # Published (huggingface.co/deepseek-ai/DeepSeek-V2-Lite model card; DeepSeek-V2 paper,
    # arXiv 2405.04434, appendix B): 15.7B total, 2.4B activated. DeepSeek's "activated"
    # leaves out the input-embedding lookup (it does no FLOPs): 2.66B with it, 2.45B without;
    # the same convention gives DeepSeek-V3 36.6B against its "37B".
    spec = model_from_hf_file(DATA / "deepseek-v2-lite.json")
    assert spec.total_params() == pytest.approx(15.7e9, rel=0.01)
    lookup = spec.vocab * spec.hidden
    assert spec.active_params() - lookup == pytest.approx(2.4e9, rel=0.025)
    assert spec.num_dense_layers == 1 and spec.num_moe_layers == 26


@pytest.mark.parametrize("name,plan", [("deepseek-v2-lite.json", "dp8 tp1 pp2 ep8 zero3 mb1"),
                                       ("qwen2.5-7b.json", "dp8 tp2 pp1 zero1 mb1 sp")])
def test_megatron_export_of_a_real_config_parses(name, plan, tmp_path):
    from meshplan.export._common import script_args
    from test_export import parse_megatron
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "export", "--to", "megatron",
                        "--out", str(tmp_path), "--model", str(DATA / name), "--gpus",
                        "16xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "256",
                        "--plan", plan], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ns = parse_megatron(script_args((tmp_path / "megatron_launch.sh").read_text()))
    spec = model_from_hf_file(DATA / name)
    assert int(ns.num_layers) == spec.layers and int(ns.hidden_size) == spec.hidden


def test_qwen3_without_head_dim_takes_the_families_default(tmp_path):
    """Qwen3Config declares head_dim = 128 (transformers configuration_qwen3.py): a Qwen3-32B
    config.json without it is still 32.8B (hidden 5120 / 64 heads = 80 gave 30.5B);
    Qwen3MoeConfig declares none, so there hidden / heads stands."""
    cfg = json.loads((DATA / "qwen3-8b.json").read_text())
    cfg.update(hidden_size=5120, intermediate_size=25600, num_hidden_layers=64,
               num_attention_heads=64, num_key_value_heads=8)
    cfg.pop("head_dim", None)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    spec = model_from_hf_file(f)
    # huggingface.co/Qwen/Qwen3-32B model card: 32.8B parameters
    assert spec.head_dim == 128 and spec.total_params() == pytest.approx(32.8e9, rel=0.01)
    moe = json.loads((CATALOG / "qwen3-30b-a3b.json").read_text())
    moe.pop("head_dim", None)
    f.write_text(json.dumps(moe))
    spec = model_from_hf_file(f)
    assert spec.head_dim in (0, moe["hidden_size"] // moe["num_attention_heads"])


def test_multi_token_prediction_layers_are_named_as_left_out():
    spec = model_from_hf_file(CATALOG / "deepseek-v3.json")
    assert "1 multi-token-prediction layer (num_nextn_predict_layers) not modelled" in \
        spec.description
    assert "multi-token" not in model_from_hf_file(DATA / "qwen3-8b.json").description


def _as_transformers5(cfg: dict, per_layer_type: bool = False) -> dict:
    """The file as transformers 5 saves it: the rotary base and scaling in one
    rope_parameters object (rope_type "default" without scaling), no rope_theta /
    rope_scaling keys; Gemma 3 holds one such object per layer type."""
    if "text_config" in cfg:
        return dict(cfg, text_config=_as_transformers5(cfg["text_config"], per_layer_type))
    rp = dict(cfg.get("rope_scaling") or {"rope_type": "default"})
    if "rope_theta" in cfg:
        rp["rope_theta"] = cfg["rope_theta"]
    out = {k: v for k, v in cfg.items() if k not in ("rope_theta", "rope_scaling")}
    out["rope_parameters"] = ({"full_attention": rp, "sliding_attention": {
        "rope_type": "default", "rope_theta": 10000.0}} if per_layer_type else rp)
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.json")))
def test_transformers5_rope_parameters_give_the_same_model(name, tmp_path):
    """A config.json saved by transformers 5 (rope_parameters, no rope_theta) is the same
    model: the rotary base was read as the 10,000 default and the scaling dropped, so the
    Megatron export of Qwen3-8B wrote --rotary-base 10000 for its 1,000,000."""
    cfg = json.loads((DATA / name).read_text())
    legacy = model_from_hf_file(DATA / name)
    for per_layer_type in (False, True):
        f = tmp_path / name
        f.write_text(json.dumps(_as_transformers5(cfg, per_layer_type)))
        assert model_from_hf_file(f) == legacy


def test_transformers5_rope_theta_reaches_the_megatron_export(tmp_path):
    from meshplan.export._common import script_args
    from test_export import parse_megatron
    f = tmp_path / "config.json"
    f.write_text(json.dumps(_as_transformers5(json.loads((DATA / "qwen3-8b.json").read_text()))))
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "export", "--to", "megatron",
                        "--out", str(tmp_path / "out"), "--model", str(f), "--gpus",
                        "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "64",
                        "--plan", "dp8 tp1 pp1 zero1 mb1"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ns = parse_megatron(script_args((tmp_path / "out" / "megatron_launch.sh").read_text()))
    assert int(ns.rotary_base) == 1_000_000


def test_llama_mlp_bias_is_counted_or_refused(tmp_path):
    """LlamaMLP's gate, up and down take mlp_bias, LlamaAttention's q, k, v and o take
    attention_bias (modeling_llama.py). mlp_bias was ignored: the count left out 2 x
    intermediate + hidden per layer and the Megatron export wrote --disable-bias-linear."""
    cfg = json.loads((DATA / "llama-3.1-8b.json").read_text())
    base = model_from_hf_file(DATA / "llama-3.1-8b.json").total_params()
    h, f, layers, q, kv = 4096, 14336, 32, 32 * 128, 8 * 128
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(cfg, attention_bias=True, mlp_bias=True)))
    m = model_from_hf_file(path)
    assert m.total_params() == base + layers * (q + 2 * kv + h + 2 * f + h)
    path.write_text(json.dumps(dict(cfg, mlp_bias=True)))
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "predict", "--model", str(path),
                        "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch",
                        "64"], capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "mlp_bias=True" in p.stderr


@pytest.mark.parametrize("first_k,freq", [(1, 1), (1, 2), (3, 2), (0, 3), (2, 2)])
def test_deepseek_moe_layers_follow_the_reference_rule(first_k, freq, tmp_path):
    """DeepseekV2DecoderLayer (DeepSeek's modeling_deepseek.py; vLLM and SGLang the same):
    layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0. meshplan
    counted the frequency from first_k_dense_replace (layers 1, 3, 5, ... for 1 and 2, where
    the model has 2, 4, 6, ...)."""
    cfg = json.loads((DATA / "deepseek-v2-lite.json").read_text())
    f = tmp_path / "config.json"
    f.write_text(json.dumps(dict(cfg, first_k_dense_replace=first_k, moe_layer_freq=freq)))
    m = model_from_hf_file(f)
    layers = cfg["num_hidden_layers"]
    assert [i for i in range(layers) if m.layer_is_moe(i)] \
        == [i for i in range(layers) if i >= first_k and i % freq == 0]


def test_transformers5_rope_parameters_without_a_rope_type(tmp_path):
    """Qwen3-VL files written by transformers 5 hold {"rope_theta", "mrope_section",
    "mrope_interleaved"} without rope_type (default): the same model as the older file's
    rope_scaling {"rope_type": "default", "mrope_section": ...}; it was refused as
    rope_scaling.rope_type=None."""
    cfg = json.loads((DATA / "qwen3-8b.json").read_text())
    mrope = {"mrope_section": [24, 20, 20], "mrope_interleaved": True}
    old, new = tmp_path / "a" / "config.json", tmp_path / "b" / "config.json"
    old.parent.mkdir(), new.parent.mkdir()
    old.write_text(json.dumps(dict(cfg, rope_scaling=dict(mrope, rope_type="default"))))
    new.write_text(json.dumps(dict({k: v for k, v in cfg.items() if k != "rope_theta"},
                                   rope_parameters=dict(mrope, rope_theta=cfg["rope_theta"]))))
    assert model_from_hf_file(new) == model_from_hf_file(old).with_(name="b")



@pytest.mark.parametrize("key", ["n_routed_experts", "q_lora_rank", "n_shared_experts",
                                 "first_k_dense_replace"])
def test_deepseek_keys_whose_default_is_ambiguous_must_be_given(key):
    """transformers' DeepseekV3Config defaults to 256 routed experts, 1 shared, 3 dense
    layers and q_lora_rank 1536 (DeepseekV2Config: 64, 2, 0, 1536); the reader took 0 for
    each (a file without n_shared_experts was counted with no shared expert where
    transformers builds one). A file without them is refused naming the key."""
    cfg = json.loads((DATA / "deepseek-v2-lite.json").read_text())
    model_from_hf_dict(cfg)  # the released file gives them all (q_lora_rank: null)
    for model_type in ("deepseek_v2", "deepseek_v3"):
        partial = {k: v for k, v in cfg.items() if k != key} | {"model_type": model_type}
        with pytest.raises(InputError) as e:
            model_from_hf_dict(partial)
        assert e.value.field == f"config.json:{key}"
    dense = dict(cfg, n_routed_experts=0)  # a dense file needs no MoE keys
    del dense["n_shared_experts"], dense["first_k_dense_replace"]
    assert model_from_hf_dict(dense).moe_experts == 0
