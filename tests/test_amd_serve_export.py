"""Serving exports on AMD parts run the kernels the cost model priced.

meshplan prices attention on CDNA3 / CDNA4 from AMD's aiter kernel table (cost/efficiency.py,
bench/data/aiter_attention.csv). vLLM's own default leaves aiter off (vllm/envs.py:
VLLM_ROCM_USE_AITER = os.getenv("VLLM_ROCM_USE_AITER", "False"), "Disable aiter ops unless
specifically enabled"), so its launch line must set it; SGLang picks the aiter backend itself
on HIP (server_args._get_default_attn_backend), so its line stays as on NVIDIA. aiter builds
for gfx942 / gfx950 (MI300X, MI325X, MI350X, MI355X), not gfx90a (MI250X).
"""

import pytest

from meshplan.scenario import make_cluster
from meshplan.serve.export import commands
from meshplan.serve.spec import Pool, ServePlan
from meshplan.specs.catalog.presets import preset

VLLM_AITER_DEFAULT = "False"  # vllm/envs.py, the engine's default for VLLM_ROCM_USE_AITER


def _env(engine, gpus):
    plan = ServePlan((Pool(tp=4, replicas=2),))
    cmds = commands(engine, plan, preset("llama3.1-8b"), "org/x", make_cluster(gpus), 2048)
    out = []
    for label, argv in cmds:
        if label.startswith("router"):
            continue
        start = argv.index("vllm" if engine == "vllm" else "python")
        out.append(argv[1:start])  # between `env` and the engine's command
    return out


@pytest.mark.parametrize("gpus", ["8xMI300X", "8xMI325X", "8xMI355X", "8xMI350X"])
def test_vllm_on_cdna3_cdna4_switches_aiter_on(gpus):
    assert VLLM_AITER_DEFAULT.lower() not in ("true", "1")  # off unless the line sets it
    for env in _env("vllm", gpus):
        assert "VLLM_ROCM_USE_AITER=1" in env
        assert any(e.startswith("CUDA_VISIBLE_DEVICES=") for e in env)


@pytest.mark.parametrize("engine, gpus", [("vllm", "8xH100-SXM-80GB"), ("vllm", "16xMI250X"),
                                          ("sglang", "8xMI300X"), ("sglang", "8xMI355X")])
def test_no_aiter_switch_where_it_does_not_apply(engine, gpus):
    for env in _env(engine, gpus):
        assert not any(e.startswith("VLLM_ROCM_USE_AITER") for e in env)
