"""Serving export: every flag is one the engine's own parser accepts (snapshot of vLLM 0.33.0
and SGLang 0.5.23 parsers, tests/data/serve_engine_flags.json); refusals are one line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.errors import InputError
from meshplan.scenario import make_cluster
from meshplan.serve.export import commands, export_plan
from meshplan.serve.spec import Pool, ServePlan
from meshplan.specs.catalog.presets import load_model

H100X16 = make_cluster("16xH100-SXM-80GB")
LEN = 2300  # the longest request (prompt + output) the exported servers take
FLAGS = json.loads((Path(__file__).parent / "data" / "serve_engine_flags.json").read_text())

CASES = [
    ("llama3.1-70b", ServePlan((Pool(tp=4, replicas=2, max_num_seqs=64, max_batched_tokens=2048),),
                               "fp8", "fp8")),
    ("deepseek-v3", ServePlan((Pool(tp=1, attn_dp=8, ep=8),), "fp8", "bf16")),
    ("qwen3-235b-a22b", ServePlan((Pool(tp=8, ep=8),), "fp8", "fp8")),
]


def _check(engine, argv):
    known = FLAGS[engine]["flags"]
    for i, a in enumerate(argv):
        if a.startswith("--"):
            assert a in known, f"{engine} does not know {a}"
            choices = known[a]
            if choices and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                assert argv[i + 1] in choices, (a, argv[i + 1], choices)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("name,plan", CASES)
def test_flags_known_to_engine_parser(engine, name, plan):
    cmds = commands(engine, plan, load_model(name), "org/x", H100X16, LEN)
    replicas = [argv for label, argv in cmds if not label.startswith("router")]
    assert len(replicas) == plan.pools[0].replicas
    for argv in replicas:
        _check(engine, argv)
    flat = " ".join(replicas[0])
    if engine == "vllm":
        assert f"--tensor-parallel-size {plan.pools[0].tp}" in flat
        assert ("--enable-expert-parallel" in flat) == (plan.pools[0].ep > 1)
    else:
        p = plan.pools[0]
        assert f"--tp-size {p.tp * p.attn_dp}" in flat
        assert (f"--ep-size {p.ep}" in flat) == (p.ep > 1)
    # replicas get disjoint GPUs
    gpus = [a for argv in replicas for a in argv if a.startswith("CUDA_VISIBLE_DEVICES")]
    assert len(set(gpus)) == len(gpus)


def test_sglang_disaggregated_modes():
    plan = ServePlan((Pool(tp=4, replicas=2, role="prefill"), Pool(tp=8, role="decode")),
                     kv_tier="scale-out")
    cmds = commands("sglang", plan, load_model("llama3.1-70b"), "org/x", H100X16, LEN)
    modes = [argv[argv.index("--disaggregation-mode") + 1] for l, argv in cmds if l != "router"]
    assert modes == ["prefill", "prefill", "decode"]
    for l, argv in cmds:
        if l != "router":
            _check("sglang", argv)
    router = dict(cmds)["router"]
    assert "--pd-disaggregation" in router and router.count("--prefill") == 2


def test_refusals_are_input_errors(tmp_path):
    dis = ServePlan((Pool(role="prefill"), Pool(role="decode")))
    with pytest.raises(InputError, match="proxy"):
        export_plan("vllm", dis, load_model("llama3.1-8b"), "x", tmp_path / "o", H100X16, LEN)
    assert not (tmp_path / "o").exists()  # nothing half-written
    with pytest.raises(InputError, match="nodes"):
        commands("vllm", ServePlan((Pool(tp=8, pp=2),)), load_model("llama3.1-405b"), "x", H100X16,
                 LEN)


def test_cli_export_writes_files(tmp_path):
    out = tmp_path / "exp"
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "serve", "--model", "llama3.1-8b",
                        "--gpus", "2xH100-SXM-80GB", "--input-len", "500", "--output-len", "50",
                        "--rate", "2", "--requests", "60", "--plan", "tp1x2", "--no-goodput",
                        "--export", "sglang", "--out", str(out), "--model-id",
                        "meta-llama/Llama-3.1-8B-Instruct"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    sh = (out / "launch_sglang.sh").read_text()
    assert sh.count("sglang.launch_server") == 2 and "sglang_router.launch_router" in sh
    assert json.loads((out / "plan.json").read_text())["pools"][0]["replicas"] == 2
    assert not [f for f in out.iterdir() if f.name.startswith(".meshplan-")]


def test_export_over_a_previous_one_replaces_it_whole(tmp_path):
    """A second export into the folder of a first (the one kind of non-empty folder --out
    accepts) leaves only the second's files: no launch script of the first beside it."""
    model = load_model("llama3.1-8b")
    out = tmp_path / "exp"
    export_plan("sglang", ServePlan((Pool(tp=2),)), model, "m", out, H100X16, LEN)
    export_plan("vllm", ServePlan((Pool(tp=1),)), model, "m", out, H100X16, LEN)
    assert sorted(f.name for f in out.iterdir()) == ["launch_vllm.sh", "plan.json"]
    assert json.loads((out / "plan.json").read_text())["engine"] == "vllm"


def test_cli_export_searches_only_expressible_plans(tmp_path):
    out = tmp_path / "v"
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "serve", "--model", "llama3.1-8b",
                        "--gpus", "2xH100-SXM-80GB", "--input-len", "2000", "--output-len", "100",
                        "--rate", "4", "--requests", "60", "--no-goodput", "--export", "vllm",
                        "--out", str(out), "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert all(t["plan"]["kind"] == "aggregated" for t in d["top"])
    assert "vllm serve" in (out / "launch_vllm.sh").read_text()


def _live_parser(engine):
    """The engine's own parser, when the package imports here (CI: skipped without it)."""
    import argparse
    import os
    try:
        if engine == "sglang":
            from sglang.srt.server_args import ServerArgs
            p = argparse.ArgumentParser()
            ServerArgs.add_cli_args(p)
            return p
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        from vllm.entrypoints.common.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser
        return make_arg_parser(FlexibleArgumentParser())
    except Exception as e:  # not installed, or needs what this machine lacks
        pytest.skip(f"{engine} parser unavailable here ({type(e).__name__}); the flag snapshot"
                    " test covers the names")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_live_engine_parser_accepts_exports(engine):
    p = _live_parser(engine)
    for name, plan in CASES:
        for label, argv in commands(engine, plan, load_model(name), "org/x", H100X16, LEN):
            if label.startswith("router"):
                continue
            start = argv.index("serve" if engine == "vllm" else "sglang.launch_server") + 1
            ns = p.parse_args(argv[start:])
            tp = ns.tensor_parallel_size if engine == "vllm" else ns.tp_size
            assert tp == plan.pools[0].tp * (1 if engine == "vllm" else plan.pools[0].attn_dp)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_cli_export_when_nothing_fits_says_why(tmp_path, engine):
    """gpt3-175b's 350 GB of bf16 weights exceed 8 x 40 GB: no plan fits, and with or without
    --export the command says so (NoPlanFits, exit 1). With --export it said "no plan on this
    cluster can be exported: " and no reason (the engine refused nothing: there was nothing
    to refuse), exit 2, as if the engine were at fault."""
    def run(*extra):
        return subprocess.run([sys.executable, "-m", "meshplan.cli", "serve", "--model",
                               "gpt3-175b", "--gpus", "8xA100-SXM-40GB", "--input-len", "1000",
                               "--output-len", "100", "--rate", "1", "--requests", "20",
                               "--jobs", "1", *extra], capture_output=True, text=True,
                              timeout=120)
    plain = run()
    assert plain.returncode == 1 and "no serving plan fits" in plain.stderr
    out = tmp_path / "x"
    p = run("--export", engine, "--out", str(out))
    assert (p.returncode, p.stderr) == (plain.returncode, plain.stderr)
    assert not out.exists()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_quantization_flag_never_contradicts_the_checkpoint(engine):
    """vLLM and SGLang take the quantization method from the checkpoint's
    quantization_config and stop at start-up when --quantization names another one
    ("Quantization method specified in the model config (mxfp4) does not match the
    quantization method specified in the `quantization` argument (fp8)":
    ModelConfig._verify_quantization in vllm/config/model.py, vllm-project/vllm commit
    0052a5b8, and in sglang python/sglang/srt/configs/model_config.py, where fp8 is
    compatible with no other method). --weights fp8 on gpt-oss (an mxfp4 checkpoint) wrote
    --quantization fp8: a launch line that cannot start."""
    one = make_cluster("1xH100-SXM-80GB")
    oss = load_model("gpt-oss-20b")
    assert oss.checkpoint_quant == "mxfp4"
    plan = ServePlan((Pool(tp=1),), "fp8", "fp8")
    for _, argv in commands(engine, plan, oss, "openai/gpt-oss-20b", one, 600):
        assert "--quantization" not in argv
    # a checkpoint without its own quantization still gets the flag the plan was simulated with
    llama = load_model("llama3.1-8b")
    assert not llama.checkpoint_quant
    argv = commands(engine, plan, llama, "meta-llama/Llama-3.1-8B", one, 600)[0][1]
    assert argv[argv.index("--quantization") + 1] == "fp8"


def test_cli_export_simulates_the_engine_it_exports(tmp_path):
    """`serve --export E` prints what E's launch lines serve: the plans are simulated with E's
    scheduler (SGLang runs prompt iterations eagerly: a 64-token prefill of Llama 3.1 8B waits
    its 512 forward ops' launches, 13.5 ms, serve/cost.py), not vLLM's for every engine (the
    SGLang export printed vLLM's 6.4 ms TTFT)."""
    ttft = {}
    for engine in ("vllm", "sglang"):
        p = subprocess.run([sys.executable, "-m", "meshplan.cli", "serve", "--model", "llama3.1-8b",
                            "--gpus", "2xH100-SXM-80GB", "--input-len", "64", "--output-len", "50",
                            "--rate", "2", "--requests", "60", "--plan", "tp1x2", "--no-goodput",
                            "--export", engine, "--out", str(tmp_path / engine), "--json"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        assert d["engine_simulated"] == engine
        ttft[engine] = d["top"][0]["ttft_s"]["p50"]
    assert ttft["sglang"] >= 512 * 82.64e-3 / 3131 > 1.5 * ttft["vllm"]
