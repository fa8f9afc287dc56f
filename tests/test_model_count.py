"""A model is counted once: the memory the cost model holds for the weights of an unsharded
plan is the header's parameter count (tying, biases, MLA, experts), for every preset.
(tests/runtime/test_model.py checks ModelSpec.total_params against the runtime model's real
parameters on the meta device.)"""

from __future__ import annotations

import pytest

from meshplan.cost import estimate
from meshplan.cost.memory import PARAM_BYTES
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload

PRESETS = ["tiny-llama", "tiny-moe", "gpt2", "llama3.2-1b", "llama3.1-8b", "mixtral-8x7b",
           "qwen3-30b-a3b", "deepseek-v3", "gpt-neox-20b"]


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("pp", [1, 2])
def test_weights_in_memory_are_the_parameter_count(name, pp):
    model = load_model(name)
    e = estimate(model, make_cluster(f"{pp}xH100-SXM-80GB"), Workload(1024, 8),
                 Plan(pp=pp, zero=0))
    held = sum(m.parts["weights"] for m in e.memory) / PARAM_BYTES
    # pipelining a tied model keeps a copy of the embedding on the last stage (Megatron-LM)
    extra = model.vocab * model.hidden if model.tied_embeddings and pp > 1 else 0
    assert held == pytest.approx(model.total_params() + extra, rel=1e-12)


@pytest.mark.parametrize("extra", [["--global-batch-tokens", "8192"],
                                   ["--global-batch-tokens", "4096", "--global-batch", "512"]])
def test_contradicting_batch_flags_exit_2(capsys, extra):
    from meshplan.cli import main
    rc = main(["predict", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len",
               "8192", "--global-batch", "512", *extra, "--dp", "8"])
    err = capsys.readouterr().err
    assert rc == 2 and "--global-batch-tokens" in err and err.count("\n") == 1, err
