"""FP8 recipes on AMD Instinct parts against ROCm Transformer Engine's own checks.

ROCm/TransformerEngine transformer_engine/pytorch/quantization.py at commit
030b79214fa6655f7840669aabef3ae22ad4a587 (the fork AMD's Megatron-LM and Primus images
build), transcribed below: on a HIP device

- check_fp8_support (delayed / current scaling): arch (9, 4), (9, 5) or (12, 5);
- check_mxfp8_support: NVTE_ROCM_ENABLE_MXFP8 not "0" (unset reads "0"), and arch (9, 5)
  or (12, 5);
- check_fp8_block_scaling_support: False on every HIP device ("FP8 block scaled gemm not
  yet supported for ROCm").

The architecture each catalog part reports (torch.cuda.get_device_capability on ROCm is
the gfx number: gfx942 -> (9, 4)): ROCm documentation, "GPU hardware specifications"
(rocm.docs.amd.com reference/gpu-arch-specs): MI300X and MI325X gfx942, MI350X and MI355X
gfx950, MI250X gfx90a.
"""

import pytest

from meshplan.cost import fp8_recipe
from meshplan.errors import InputError
from meshplan.export.megatron import render_megatron
from meshplan.plan import Plan
from meshplan.scenario import Scenario, make_cluster
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

ARCH = {"MI300X": (9, 4), "MI325X": (9, 4), "MI350X": (9, 5), "MI355X": (9, 5)}


def te_rocm_accepts(recipe: str, arch: tuple, mxfp8_env: str = "0") -> bool:
    """ROCm TE's check_recipe_support, transcribed (module docstring)."""
    if recipe in ("delayed", "cs"):
        return arch in ((9, 4), (9, 5), (12, 5))
    if recipe == "mx":
        return mxfp8_env != "0" and arch in ((9, 5), (12, 5))
    if recipe == "blockwise":
        return False
    raise AssertionError(recipe)


def _meshplan_accepts(recipe: str, gpu: str) -> bool:
    try:
        return fp8_recipe.resolve("fp8", recipe, "megatron", GPUS[gpu].generation) is not None
    except InputError:
        return False


@pytest.mark.parametrize("gpu", sorted(ARCH))
@pytest.mark.parametrize("recipe", ["delayed", "cs", "mx", "blockwise"])
def test_amd_recipes_are_those_rocm_te_runs(gpu, recipe):
    # meshplan plans a recipe exactly where ROCm TE runs it once the export's environment
    # (fp8_recipe.launch_env) is set
    env = fp8_recipe.launch_env("fp8", recipe, "megatron", GPUS[gpu].generation) \
        if _meshplan_accepts(recipe, gpu) else {}
    assert _meshplan_accepts(recipe, gpu) == te_rocm_accepts(
        recipe, ARCH[gpu], env.get("NVTE_ROCM_ENABLE_MXFP8", "0"))


def test_refusals_name_what_the_part_runs():
    with pytest.raises(InputError, match="ROCm Transformer Engine.*CDNA4 runs .*or mx"):
        fp8_recipe.resolve("fp8", "blockwise", "megatron", "cdna4")
    with pytest.raises(InputError, match="CDNA4.*CDNA3 runs delayed, cs, tensorwise or rowwise"):
        fp8_recipe.resolve("fp8", "mx", "megatron", "cdna3")
    # NVIDIA parts unchanged: Hopper has no MX cores and runs blockwise
    with pytest.raises(InputError, match="Blackwell.*Hopper runs .*rowwise or blockwise"):
        fp8_recipe.resolve("fp8", "mx", "nemo", "hopper")
    assert fp8_recipe.resolve("fp8", "blockwise", "megatron", "hopper").name == "blockwise"


def _megatron_script(gpus: str, recipe: str) -> str:
    sc = Scenario(preset("llama3.1-8b"), make_cluster(gpus),
                  Workload(8192, 64, "fp8", fp8_recipe=recipe), Plan(dp=4, tp=2))
    return render_megatron(sc).files["megatron_launch.sh"]


def test_megatron_export_switches_on_rocm_mxfp8():
    text = _megatron_script("8xMI355X", "mx")
    assert "--fp8-recipe mxfp8" in text
    # set before torchrun, over a caller's 0, beside the usual CUDA_DEVICE_MAX_CONNECTIONS
    env_line = "\nexport NVTE_ROCM_ENABLE_MXFP8=1 "
    assert env_line in text and text.index(env_line) < text.index("\ntorchrun ")
    assert 'export CUDA_DEVICE_MAX_CONNECTIONS="${CUDA_DEVICE_MAX_CONNECTIONS:-1}"' in text
    # nothing for NVIDIA's TE or for a per-tensor recipe on AMD
    assert "NVTE_ROCM_ENABLE_MXFP8" not in _megatron_script("8xB200", "mx")
    assert "NVTE_ROCM_ENABLE_MXFP8" not in _megatron_script("8xMI355X", "delayed")


# ROCm TE's CK attention backward defaults to fp32 dQ atomics (ROCm/TransformerEngine
# transformer_engine/common/fused_attn_rocm/fused_attn_ck.cpp:
# getenv<int>("NVTE_CK_IS_V3_ATOMIC_FP32", 1)); meshplan prices CDNA4's backward at aiter's
# 16-bit-atomics rate (cost/efficiency.py, AMD's MI355X MLPerf / Primus settings), CDNA3's at
# the fp32 one
TE_CK_ATOMIC_FP32_DEFAULT = "1"


def test_megatron_export_runs_the_priced_attention_backward():
    from meshplan.cost import efficiency
    # the aiter table's MI355X backward with 16-bit atomics is the priced fraction, not fp32's
    assert efficiency.EFFICIENCY["cdna4"].attention_bwd == pytest.approx(1066.7 / 2516.6)
    for gpus, recipe in (("8xMI355X", "delayed"), ("8xMI350X", "mx")):
        text = _megatron_script(gpus, recipe)
        assert "\nexport NVTE_CK_IS_V3_ATOMIC_FP32=0 " in text
        assert text.index("NVTE_CK_IS_V3_ATOMIC_FP32=0") < text.index("\ntorchrun ")
    # MI300X was priced at TE's default (fp32 atomics): nothing to set; NVIDIA: no CK at all
    assert efficiency.EFFICIENCY["cdna3"].attention_bwd == pytest.approx(433.3 / 1307.4)
    for gpus in ("8xMI300X", "8xH100-SXM-80GB"):
        assert "NVTE_CK_IS_V3_ATOMIC_FP32" not in _megatron_script(gpus, "delayed")
    assert TE_CK_ATOMIC_FP32_DEFAULT != "0"
