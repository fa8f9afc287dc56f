"""Exports launch as written: each launch script is run by bash with a stand-in torchrun
that records its arguments, and Megatron-LM's argument table parses what arrives."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from export_cases import MEGATRON, build
from meshplan.export import export
from meshplan.plan import Plan
from meshplan.scenario import Scenario, make_cluster
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload
from test_export import parse_megatron

FAKE_TORCHRUN = """#!/usr/bin/env python3
import json, os, sys
json.dump(sys.argv[1:], open(os.environ["ARGV_OUT"], "w"))
"""


def launch(script: Path, tmp: Path, *opts: str) -> tuple[int, list[str], str]:
    """Run the script with torchrun replaced; (exit code, pretrain_gpt.py arguments, stderr)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "torchrun").write_text(FAKE_TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    out = tmp / "argv.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", ARGV_OUT=str(out))
    p = subprocess.run(["bash", str(script), *opts], env=env, capture_output=True, text=True,
                       timeout=60)
    argv = json.loads(out.read_text()) if out.exists() else []
    # torchrun's own options come before the training script
    script_at = next((i for i, a in enumerate(argv) if a.endswith("pretrain_gpt.py")), None)
    return p.returncode, argv[script_at + 1:] if script_at is not None else [], p.stderr


@pytest.mark.parametrize("case", MEGATRON, ids=[c[0] for c in MEGATRON])
def test_megatron_script_launches_with_mock_data(case, tmp_path):
    _, args, kw = case
    sc = build(args, kw)
    export(sc, "megatron", tmp_path / "out")
    rc, argv, err = launch(tmp_path / "out" / "megatron_launch.sh", tmp_path, "--mock-data")
    assert rc == 0, err
    ns = parse_megatron(argv)
    m = sc.model
    assert ns.mock_data and ns.tokenizer_type == "NullTokenizer"
    # NullTokenizer's vocabulary is --vocab-size plus one end-of-document id
    assert int(ns.vocab_size) + 1 == m.vocab
    assert int(ns.make_vocab_size_divisible_by) == 1
    assert float(ns.norm_epsilon) == m.norm_eps
    assert ns.untie_embeddings_and_output_weights == (not m.tied_embeddings)
    if m.position == "rope":
        assert ns.rotary_base == int(m.rope_theta)


# the published values in each model's config.json on the Hugging Face hub
PUBLISHED = [
    ("llama3.1-70b", {"rotary_base": 500000, "norm_epsilon": "1e-05", "use_rope_scaling": True,
                      "rope_scaling_factor": 8.0}),
    ("qwen3-30b-a3b", {"rotary_base": 1000000, "norm_epsilon": "1e-06",
                       "moe_router_pre_softmax": False, "moe_aux_loss_coeff": [0.001]}),
    ("mixtral-8x7b", {"rotary_base": 1000000, "moe_aux_loss_coeff": [0.02]}),
    ("deepseek-v3", {"rotary_base": 10000, "rope_type": "yarn", "rotary_scaling_factor": 40.0,
                     "mscale_all_dim": 1.0, "moe_router_score_function": "sigmoid",
                     "moe_router_topk_scaling_factor": "2.5", "moe_router_num_groups": "8",
                     "moe_router_group_topk": "4", "yarn_original_max_position_embeddings": 4096,
                     "yarn_beta_fast": 32.0, "yarn_beta_slow": 1.0}),
]


@pytest.mark.parametrize("name,want", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_megatron_model_settings_match_published_configs(name, want, tmp_path):
    m = load_model(name)
    n = 256 if m.is_moe else 64
    sc = Scenario(m, make_cluster(f"{n}xH100-SXM-80GB"), Workload(4096, 1024),
                  Plan(dp=n // 8, pp=8, ep=8 if m.is_moe else 1))
    export(sc, "megatron", tmp_path / "o")
    rc, argv, err = launch(tmp_path / "o" / "megatron_launch.sh", tmp_path, "--mock-data")
    assert rc == 0, err
    ns = vars(parse_megatron(argv))
    for k, v in want.items():
        assert ns[k] == v, (k, ns[k], v)


def test_megatron_script_real_data_and_usage(tmp_path):
    sc = build(*MEGATRON[0][1:])
    export(sc, "megatron", tmp_path / "o")
    script = tmp_path / "o" / "megatron_launch.sh"
    rc, argv, err = launch(script, tmp_path, "--data-path", "/data/web_text_document",
                           "--tokenizer-model", "meta-llama/Llama-3.1-70B")
    assert rc == 0, err
    ns = parse_megatron(argv)
    assert ns.data_path == ["/data/web_text_document"] and not ns.mock_data
    assert ns.tokenizer_type == "HuggingFaceTokenizer"
    assert ns.tokenizer_model == "meta-llama/Llama-3.1-70B"
    for opts in [(), ("--data-path", "/data/x")]:  # no data, or no tokenizer: refused
        rc, argv, err = launch(script, tmp_path, *opts)
        assert rc == 2 and argv == [] and "usage:" in err


def test_megatron_refuses_what_it_cannot_build(tmp_path):
    """A rope scaling Megatron has no argument for is refused, not silently dropped."""
    from dataclasses import replace

    from meshplan.export import UnsupportedByEngine
    m = replace(load_model("llama3.1-8b"),
                rope_scaling=json.dumps({"rope_type": "dynamic", "factor": 2.0}))
    sc = Scenario(m, make_cluster("8xH100-SXM-80GB"), Workload(4096, 64), Plan(dp=8))
    with pytest.raises(UnsupportedByEngine, match="dynamic"):
        export(sc, "megatron", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_megatron_writes_an_mla_models_own_yarn(tmp_path):
    """YaRN parameters other than Megatron's MLA defaults were refused as having no argument;
    Megatron-LM has --yarn-original-max-position-embeddings / --yarn-beta-fast /
    --yarn-beta-slow (arguments.py at d98e8a64): the export writes the config's values."""
    import dataclasses
    import json
    m = load_model("deepseek-v3")
    rs = dict(json.loads(m.rope_scaling), original_max_position_embeddings=8192,
              beta_fast=16, beta_slow=2)
    m = dataclasses.replace(m, rope_scaling=json.dumps(rs))
    sc = Scenario(m, make_cluster("256xH100-SXM-80GB"), Workload(4096, 1024),
                  Plan(dp=32, pp=8, ep=8))
    export(sc, "megatron", tmp_path / "o")
    rc, argv, err = launch(tmp_path / "o" / "megatron_launch.sh", tmp_path, "--mock-data")
    assert rc == 0, err
    ns = vars(parse_megatron(argv))
    assert (ns["yarn_original_max_position_embeddings"], ns["yarn_beta_fast"],
            ns["yarn_beta_slow"]) == (8192, 16.0, 2.0)
