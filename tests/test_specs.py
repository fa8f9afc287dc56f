"""Model, hardware and workload specs: published parameter totals, parsing, bad input."""

import json

from pathlib import Path

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
              "H100-SXM-96GB-500W", "H800-SXM-80GB", "H200-SXM-141GB", "B200", "GB200", "B300",
              "GB300", "MI300X", "MI325X", "MI355X", "MI350X", "MI250X"):
        assert g in GPUS and GPUS[g].source


def test_blackwell_ultra_and_cdna_entries_match_the_datasheet_aggregates():
    """Per-GPU figures reproduce the system totals the datasheets print (dense unless said)."""
    P = 1e15
    gb300, b300, mi355 = GPUS["GB300"], GPUS["B300"], GPUS["MI355X"]
    # GB300 NVL72: 180 PF bf16, 360 PF fp8 dense, 576 TB/s HBM, over 72 GPUs in one NVLink domain
    assert 72 * gb300.flops("bf16") == pytest.approx(180 * P)
    assert 72 * gb300.flops("fp8") == pytest.approx(360 * P)
    assert 72 * gb300.memory_bytes_per_s == pytest.approx(576e12)
    assert make_cluster("144xGB300").domain_size == 72
    # HGX B300: 36 PF bf16 and 72 PF fp8 "with sparsity" over 8 GPUs
    assert 8 * 2 * b300.flops("bf16") == pytest.approx(36 * P)
    assert 8 * 2 * b300.flops("fp8") == pytest.approx(72 * P)
    # MI355X: 256 CUs x 8,192 fp8 FLOPs per CU per clock x 2.4 GHz; bf16 at half that rate
    assert mi355.flops("fp8") == pytest.approx(256 * 8192 * 2.4e9, rel=0.001)
    assert mi355.flops("bf16") == pytest.approx(mi355.flops("fp8") / 2)
    # MI350X: the MI355X's die (256 CUs) at its 2.2 GHz peak engine clock; datasheet 4.6 / 2.3 PF
    mi350 = GPUS["MI350X"]
    assert mi350.flops("fp8") == pytest.approx(256 * 8192 * 2.2e9, rel=0.001)
    assert mi350.flops("fp8") == pytest.approx(4.6 * P, rel=0.01)
    assert mi350.flops("bf16") == pytest.approx(mi350.flops("fp8") / 2)
    assert mi350.memory_bytes == mi355.memory_bytes and mi350.generation == mi355.generation
    # MI250X, one GCD: 110 CUs x 1,024 bf16 FLOPs per CU per clock x 1.7 GHz; two GCDs make the
    # OAM's datasheet 383 TF bf16 and 3.2768 TB/s; one Infinity Fabric link = 25 GT/s x 16 lanes
    # x 2 bytes per transfer / 16 = 50 GB/s each way (ROCm docs, MI250 microarchitecture)
    gcd = GPUS["MI250X"]
    assert gcd.flops("bf16") == pytest.approx(110 * 1024 * 1.7e9, rel=0.001)
    assert 2 * gcd.flops("bf16") == pytest.approx(383e12, rel=0.001)
    assert 2 * gcd.memory_bytes_per_s == pytest.approx(3.2768e12)
    assert gcd.scaleup_bytes_per_s == pytest.approx(25e9 * 16 / 8)
    assert gcd.flops("fp8") == gcd.flops("bf16")  # no FP8 units: 16-bit speed
    # MI325X: the MI300X's compute with 256 GB of HBM3e at 6 TB/s
    assert GPUS["MI325X"].peak_flops == GPUS["MI300X"].peak_flops
    assert GPUS["MI325X"].memory_bytes > GPUS["MI300X"].memory_bytes


def test_nvlink_domain_follows_the_node_given():
    """An HGX-style fabric (the GPU's usual domain is its node) ends at the node the user
    gives: 4-GPU nodes of H100 (or BigScience's 4-V100 Jean Zay nodes) are 4-GPU NVLink
    domains, 16-GPU nodes 16; a fabric that spans nodes (GB200 NVL72, 4 GPUs per tray) keeps
    its 72; an explicit scaleup_domain wins."""
    assert make_cluster("16xH100-SXM-80GB", gpus_per_node=4).domain_size == 4
    assert make_cluster("64xV100-SXM-32GB", gpus_per_node=4).domain_size == 4
    assert make_cluster("32xH100-SXM-80GB", gpus_per_node=16).domain_size == 16
    assert make_cluster("144xGB200", gpus_per_node=4).domain_size == 72
    assert make_cluster("144xGB200", gpus_per_node=8).domain_size == 72
    assert make_cluster("16xH100-SXM-80GB", gpus_per_node=4, scaleup_domain=8).domain_size == 8


def test_a_domain_smaller_than_the_node_stays_as_stated():
    """examples/my_gpus.toml's H100 PCIe: NVLink bridges join pairs (scaleup_domain = 2), the
    other pairs talk over PCIe. Cluster widened a fabric that ends inside the node to the
    whole node (domain 8). Now the stated pairs stay pairs, within the node given."""
    gf = Path(__file__).resolve().parents[1] / "examples" / "my_gpus.toml"
    assert make_cluster("8xH100-PCIe-80GB", gpu_file=gf).domain_size == 2
    assert make_cluster("16xH100-PCIe-80GB", gpus_per_node=4, gpu_file=gf).domain_size == 2
    assert make_cluster("8xH100-PCIe-80GB", gpus_per_node=1, gpu_file=gf).domain_size == 1
    assert make_cluster("8xH100-PCIe-80GB", scaleup_domain=8, gpu_file=gf).domain_size == 8


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
    ("AMD Instinct MI325X", 274_877_906_944, "MI325X"),
    ("AMD Instinct MI355X", 309_237_645_312, "MI355X"),
    ("AMD Instinct MI350X", 309_237_645_312, "MI350X"),
    ("NVIDIA B300 SXM6 AC", 289_910_292_480, "B300"),
    ("NVIDIA GB300", 299_574_378_496, "GB300"),
    ("NVIDIA GB200", 197_568_495_616, "GB200"),
    ("NVIDIA H100 PCIe", 85_031_714_816, None),  # other clocks and links than the SXM part
    ("NVIDIA GH200 480GB", 102_005_473_280, None),
    ("NVIDIA GeForce RTX 4090", 25_393_692_672, None),
])
def test_gpu_for_device_names(name, mem_bytes, gpu_id):
    from meshplan.specs.catalog.gpus import gpu_for_device
    assert gpu_for_device(name, mem_bytes) == gpu_id


@pytest.mark.parametrize("typed,gpu_id", [
    # what nvidia-smi / torch.cuda.get_device_name / rocm-smi print (the names above), and
    # how people write them from a spec sheet
    ("NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"), ("A100-SXM4-40GB", "A100-SXM-40GB"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB"), ("H100 SXM5 80GB", "H100-SXM-80GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM-32GB"), ("AMD Instinct MI300X", "MI300X"),
    ("NVIDIA H200", "H200-SXM-141GB"), ("NVIDIA B200", "B200"), ("B300 288GB", "B300"),
    ("h100-sxm-80gb", "H100-SXM-80GB"),
    # not one part: two sizes and no figure, a size the catalog's part does not have,
    # PCIe / NVL boards, parts outside the catalog
    ("H100", None), ("A100", None), ("V100", None), ("Tesla V100-SXM2-16GB", None),
    ("NVIDIA H100 PCIe", None), ("H100 NVL 94GB", None), ("NVIDIA GH200 480GB", None),
    ("NVIDIA GeForce RTX 4090", None),
])
def test_gpu_names_as_the_vendor_tools_print_them(typed, gpu_id):
    """``--gpus 8xNVIDIA A100-SXM4-80GB`` is the catalog's A100-SXM-80GB; a name that does
    not pin one part is refused as before (with the near catalog ids)."""
    from meshplan.specs.hardware import parse_gpus
    if gpu_id is None:
        with pytest.raises(InputError, match="known GPUs: "):
            parse_gpus(f"8x{typed}", GPUS)
    else:
        assert parse_gpus(f"8x{typed}", GPUS) == (8, GPUS[gpu_id])


def test_blackwell_ultra_runs_what_blackwell_cannot_hold():
    """The same plan: on B300 (270 GB) it fits where B200 (179 GB) does not; B300 runs it
    within 3% of B200 (same dense peaks; measured large-GEMM rates 1,769 and 1,745 TFLOP/s),
    and GB300 faster than GB200 (measured large-GEMM rates 2,174 and 1,822 TFLOP/s of the same
    2,500 datasheet peak, efficiency.SKU_MATMUL)."""
    from meshplan.cost import estimate
    from meshplan.plan import Plan
    model, wl = load_model("llama3.1-70b"), Workload(8192, 64, "bf16")
    plan = Plan(dp=8, tp=1, pp=1, zero=3, micro_batch=1, recompute="selective")
    on = {g: estimate(model, make_cluster(f"8x{g}"), wl, plan)
          for g in ("B200", "B300", "GB200", "GB300")}
    assert not on["B200"].fits and on["B300"].fits
    assert not on["GB200"].fits and on["GB300"].fits
    assert on["B300"].step_time_s == pytest.approx(on["B200"].step_time_s, rel=0.03)
    assert on["GB300"].step_time_s < on["GB200"].step_time_s


def test_a_part_with_its_own_gemm_measurement_uses_it():
    """GB200's large-GEMM rate is its measured 1,822 TFLOP/s (MAMF), not the Blackwell
    generation's share of its higher datasheet peak; B200 keeps the generation's."""
    from meshplan.cost import efficiency
    from meshplan.cost.compute import device
    gb200, b200 = device(GPUS["GB200"], "bf16"), device(GPUS["B200"], "bf16")
    clock = efficiency.tensor_derating("blackwell")
    assert gb200.matmul_flops == pytest.approx(1822.0e12 * clock)
    assert b200.matmul_flops == pytest.approx(2250e12 * efficiency.EFFICIENCY["blackwell"].matmul_bf16
                                              * clock)
    assert device(GPUS["GB200"], "fp8").matmul_flops == pytest.approx(3615.6e12 * clock)
    # GB300: Meta's 2,174 TFLOP/s cuBLAS GEMM at 1,400 W (bf16 only), fp8 at the
    # generation's fp8 / bf16 ratio
    bw = efficiency.EFFICIENCY["blackwell"]
    assert device(GPUS["GB300"], "bf16").matmul_flops == pytest.approx(2174.0e12 * clock)
    assert device(GPUS["GB300"], "fp8").matmul_flops == pytest.approx(
        2174.0e12 * 2 * bw.matmul_fp8 / bw.matmul_bf16 * clock)
    # V100: Markidis et al. 2018, cuBLAS 83 TFLOP/s on the tensor cores, a seventh of that
    # in fp32 SGEMM; a Turing part of the same kernel family keeps the generation's figure
    assert device(GPUS["V100-SXM-32GB"], "fp16").matmul_flops == pytest.approx(83e12 * clock)
    assert device(GPUS["V100-SXM-32GB"], "fp32").matmul_flops == pytest.approx(83e12 / 7 * clock)
    volta = efficiency.EFFICIENCY["volta"].matmul_bf16
    assert device(GPUS["TITAN-RTX-24GB"], "fp32").matmul_flops == pytest.approx(
        GPUS["TITAN-RTX-24GB"].flops("fp32") * volta * clock)


def test_amd_fp8_gemm_rates_follow_amds_measured_fp8_over_bf16():
    """CDNA3 / MI325X FP8: the part's MAMF bf16 rate times AMD's own measured FP8 / BF16
    max-achievable ratio on that part (ROCm blogs: MI300X 1,273 / 708, MI325X 1,408.06 /
    831.40 TFLOP/s); MI355X, measured at bf16 only, takes its bf16 rate times CDNA3's ratio."""
    from meshplan.cost import efficiency
    from meshplan.cost.compute import device
    clock = efficiency.tensor_derating("cdna3")
    fp8 = {n: device(GPUS[n], "fp8").matmul_flops / clock for n in ("MI300X", "MI325X", "MI355X")}
    bf16 = {n: device(GPUS[n], "bf16").matmul_flops / clock for n in fp8}
    assert bf16["MI300X"] == pytest.approx(668.4e12) and bf16["MI325X"] == pytest.approx(784.9e12)
    assert fp8["MI300X"] / bf16["MI300X"] == pytest.approx(1273 / 708)
    assert fp8["MI325X"] / bf16["MI325X"] == pytest.approx(1408.06 / 831.40)
    assert bf16["MI355X"] == pytest.approx(1565.0e12)
    # (the ratio of fractions: MI300X's fp8 peak, 2,614.9, is not exactly twice 1,307.4)
    assert fp8["MI355X"] / bf16["MI355X"] == pytest.approx(1273 / 708, rel=1e-4)


def test_an_amd_cluster_names_its_links_infinity_fabric():
    """MI300X-class GPUs are linked by AMD Infinity Fabric; the cluster line said NVLink."""
    assert "Infinity Fabric domain 8," in make_cluster("16xMI300X").describe()
    assert "NVLink domain 8," in make_cluster("16xH100-SXM-80GB").describe()
