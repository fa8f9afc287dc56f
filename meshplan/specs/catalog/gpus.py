"""The built-in GPU catalog: datasheet figures, each with where it comes from.

Conventions: FLOP/s are dense tensor-core peaks (the "with sparsity" datasheet figures halved);
bandwidths are bytes/s one direction per GPU (NVLink "900 GB/s" is 450 GB/s each way);
memory is what the device reports, in GiB. NIC figures are the usual node's scale-out
bandwidth per GPU (one NIC per GPU unless said otherwise).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..hardware import GPU

GiB = 2**30
T = 1e12
GB = 1e9


def _gbps(gbit: float) -> float:
    """NIC line rate in Gb/s to bytes/s."""
    return gbit / 8 * 1e9


# H100 SXM5 dense tensor-core peaks (NVIDIA H100 datasheet), shared by every SXM Hopper part.
HOPPER_PEAKS = {"fp32": 66.9 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T, "fp8": 1978.9 * T}
AMPERE_PEAKS = {"fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T}

GPUS: dict[str, GPU] = {
    # NVIDIA Tesla V100 SXM2 datasheet: 125 TFLOPS tensor (fp16), 15.7 fp32, 32 GB HBM2 at
    # 900 GB/s, NVLink 300 GB/s total. DGX-1/DGX-2: one 100 Gb/s EDR port per 2 GPUs.
    "V100-SXM-32GB": GPU(
        "V100-SXM-32GB", {"fp32": 15.7 * T, "fp16": 125 * T}, 32 * GiB, 900 * GB, 150 * GB,
        nic_bytes_per_s=_gbps(50), generation="volta",
        source="NVIDIA V100 datasheet; DGX-1 4x EDR IB per 8 GPUs"),
    # NVIDIA A100 datasheet: 312 TF bf16/fp16 dense, 156 tf32, 19.5 fp32; 40GB HBM2 1,555
    # GB/s; NVLink3 600 GB/s total. DGX A100: 8x 200 Gb/s HDR, one per GPU.
    "A100-SXM-40GB": GPU(
        "A100-SXM-40GB", AMPERE_PEAKS, 40 * GiB, 1555 * GB, 300 * GB, nic_bytes_per_s=_gbps(200), generation="ampere",
        source="NVIDIA A100 datasheet; DGX A100 user guide"),
    # As above, 80GB HBM2e at 2,039 GB/s. The device gives CUDA 79.14 GiB of it: NVML used +
    # free on two "NVIDIA A100-SXM4-80GB" = 62,853 + 18,185 MiB, "79.14 GiB available to
    # PyTorch" (driver 550.127.05, torch 2.11; a public deployment report, find_string
    # "A100-SXM4-80GB; 79.14"); OOM messages of other A100 80GB boards print 79.25 GiB.
    "A100-SXM-80GB": GPU(
        "A100-SXM-80GB", AMPERE_PEAKS, 79.14 * GiB, 2039 * GB, 300 * GB, nic_bytes_per_s=_gbps(200), generation="ampere",
        source="NVIDIA A100 datasheet; DGX A100 user guide"),
    # NVIDIA H100 SXM5 datasheet: 989.4 TF bf16 dense (1,979 sparse), 1,979 fp8 dense,
    # 494.7 tf32, 66.9 fp32; 80GB HBM3 3.35 TB/s; NVLink4 900 GB/s total.
    # DGX H100: 8x 400 Gb/s ConnectX-7, one per GPU. The device gives CUDA 79.11 GiB of the
    # 80 GB: torch's "GPU 0 has a total capacity of 79.11 GiB" in H100 80GB OOM reports (e.g.
    # vllm-project/vllm#27508) and torchtitan issue #1789's log (73.32 GiB = 92.70%).
    "H100-SXM-80GB": GPU(
        "H100-SXM-80GB",
        HOPPER_PEAKS,
        79.11 * GiB, 3350 * GB, 450 * GB, nic_bytes_per_s=_gbps(400), generation="hopper",
        source="NVIDIA H100 datasheet; DGX H100 user guide"),
    # H100 SXM 96GB HBM2e at a 500 W power limit (Meta Grand Teton, used by the torchtitan
    # benchmarks): same tensor cores, six HBM2e stacks (~2.4 TB/s, six stacks x 1024 bit x
    # 3.2 Gb/s), RoCE 400 Gb/s per GPU. The power cap lowers sustained clocks: modelled by
    # the power-limit factor in cost/efficiency.py, not here.
    "H100-SXM-96GB-500W": GPU(
        "H100-SXM-96GB-500W",
        HOPPER_PEAKS,
        96 * GiB, 2460 * GB, 450 * GB, nic_bytes_per_s=_gbps(400), generation="hopper",
        power_limit_w=500,
        source="H100 SXM tensor peaks; HBM2e stack arithmetic; torchtitan benchmark notes (500 W)"),
    # H800 SXM: H100 compute, NVLink cut to 400 GB/s total (DeepSeek-V3 report, sec. 3.1);
    # 8x 400 Gb/s InfiniBand per node. Memory as the H100 SXM's (the same 80 GB HBM3 part;
    # no H800 report of its own found).
    "H800-SXM-80GB": GPU(
        "H800-SXM-80GB",
        HOPPER_PEAKS,
        79.11 * GiB, 3350 * GB, 200 * GB, nic_bytes_per_s=_gbps(400), generation="hopper",
        source="DeepSeek-V3 technical report; H100 datasheet for compute"),
    # NVIDIA H200 datasheet: H100 compute, 141 GB HBM3e at 4.8 TB/s; the device gives CUDA
    # 139.72 GiB (torch's "total capacity of 139.72 GiB" in H200 OOM reports, e.g.
    # sgl-project/sglang#2895).
    "H200-SXM-141GB": GPU(
        "H200-SXM-141GB",
        HOPPER_PEAKS,
        139.72 * GiB, 4800 * GB, 450 * GB, nic_bytes_per_s=_gbps(400), generation="hopper",
        source="NVIDIA H200 datasheet; DGX H200 user guide"),
    # NVIDIA HGX/DGX B200: 2.25 PF bf16 dense, 4.5 PF fp8 dense, 1.1 PF tf32; 180 GB HBM3e
    # at 8 TB/s (179 GiB reported); NVLink5 1.8 TB/s total; 8x 400 Gb/s ConnectX-7.
    "B200": GPU(
        "B200",
        {"fp32": 75 * T, "tf32": 1100 * T, "bf16": 2250 * T, "fp16": 2250 * T, "fp8": 4500 * T},
        179 * GiB, 8000 * GB, 900 * GB, nic_bytes_per_s=_gbps(400), generation="blackwell",
        source="NVIDIA DGX B200 datasheet"),
    # NVIDIA GB200 NVL72 datasheet: 180 PF bf16 dense over 72 GPUs (2.5 PF each), fp8 5 PF,
    # 13.4 TB HBM3e (186 GB, ~184 GiB per GPU) at 8 TB/s; NVLink5 1.8 TB/s total, all 72 GPUs
    # in one NVLink domain; 4 GPUs per compute tray; 400 Gb/s ConnectX-7 per GPU.
    "GB200": GPU(
        "GB200",
        {"fp32": 80 * T, "tf32": 1250 * T, "bf16": 2500 * T, "fp16": 2500 * T, "fp8": 5000 * T},
        184 * GiB, 8000 * GB, 900 * GB, gpus_per_node=4, scaleup_domain=72,
        nic_bytes_per_s=_gbps(400), generation="blackwell",
        source="NVIDIA GB200 NVL72 datasheet"),
    # Blackwell Ultra. Per-GPU dense figures from NVIDIA's HGX B300 and GB300 NVL72 datasheets
    # (HGX B300: 36 PF bf16 and 72 PF fp8 "with sparsity" over 8 GPUs; GB300 NVL72: 180 PF bf16
    # and 360 PF fp8 dense over 72 GPUs), tabulated per GPU in Verda's "NVIDIA GB300 NVL72: GPU
    # Architecture & Performance" (verda.com/blog/gb300-nvl72-architecture): B300 2.25 PF bf16,
    # 4.5 PF fp8, 1.1 PF tf32, 75 TF fp32; GB300 2.5 / 5 / 1.25 PF, 80 TF; memory as the device
    # reports it, 270 GB (B300) and 279 GB (GB300) of the 288 GB of eight 12-high HBM3e stacks
    # (the same share of the stacks as B200's 179 and GB200's 184 of 192); 8 TB/s (GB300 NVL72:
    # 576 TB/s over 72 GPUs; HGX B300 "up to 8 TB/s"); NVLink5 1.8 TB/s total; one ConnectX-8
    # 800 Gb/s per GPU (HGX B300 networking 1.6 TB/s bidirectional for 8 GPUs; GB300 NVL72: 72
    # ConnectX-8). TDP 1,100 W (B300) and 1,400 W (GB300). Kernel efficiencies: the "blackwell"
    # family (same SM design); Blackwell Ultra's doubled softmax-exponent rate (SFU EX2 10.7 vs 5
    # tera-exponentials/s, same table) is not credited to attention: no published kernel table.
    "B300": GPU(
        "B300",
        {"fp32": 75 * T, "tf32": 1100 * T, "bf16": 2250 * T, "fp16": 2250 * T, "fp8": 4500 * T},
        270 * GiB, 8000 * GB, 900 * GB, nic_bytes_per_s=_gbps(800), generation="blackwell",
        source="NVIDIA HGX B300 datasheet; per-GPU table in Verda's GB300 NVL72 architecture post"),
    "GB300": GPU(
        "GB300",
        {"fp32": 80 * T, "tf32": 1250 * T, "bf16": 2500 * T, "fp16": 2500 * T, "fp8": 5000 * T},
        279 * GiB, 8000 * GB, 900 * GB, gpus_per_node=4, scaleup_domain=72,
        nic_bytes_per_s=_gbps(800), generation="blackwell",
        source="NVIDIA GB300 NVL72 datasheet; per-GPU table in Verda's GB300 NVL72 architecture post"),
    # Consumer / workstation parts of published mixed-GPU runs (Sailor's MIT cluster, 8 per
    # node, PCIe, no NVLink switch). 16-bit peaks are tensor-core FP16 with FP32 accumulate,
    # what PyTorch autocast's cuBLAS GEMMs use (GeForce parts run that at half the
    # FP16-accumulate rate). Turing's tensor cores are Volta's design (sm_75 vs sm_70), so
    # Turing parts take the "volta" kernel-efficiency family. Scale-up: PCIe one direction
    # (3.0 x16: 15.75 GB/s; 4.0 x16: 31.5 GB/s). NIC: no usual node exists for these parts;
    # 10 Gb/s Ethernet per 8-GPU node (1.25 Gb/s per GPU) is an assumption, override it per
    # row (nic_gbps_per_gpu) where a source states the network.
    # NVIDIA Ampere GA102 whitepaper (RTX 3090): 71 TFLOPS FP16 tensor FP32-acc dense, 35.6
    # FP32, 24 GB GDDR6X at 936 GB/s, PCIe 4.0.
    "RTX-3090-24GB": GPU(
        "RTX-3090-24GB", {"fp32": 35.6 * T, "tf32": 35.6 * T, "bf16": 71 * T, "fp16": 71 * T},
        24 * GiB, 936 * GB, 31.5 * GB, nic_bytes_per_s=_gbps(1.25), generation="ampere",
        scaleup_latency_s=10e-6, scaleout_latency_s=30e-6,
        source="NVIDIA Ampere GA102 GPU architecture whitepaper (GeForce RTX 3090); PCIe 4.0 x16"),
    # NVIDIA Turing TU102 whitepaper / TITAN RTX spec: 130.5 TFLOPS FP16 tensor FP32-acc
    # (full rate on TITAN), 16.3 FP32, 24 GB GDDR6 at 672 GB/s, PCIe 3.0.
    "TITAN-RTX-24GB": GPU(
        "TITAN-RTX-24GB", {"fp32": 16.3 * T, "fp16": 130.5 * T}, 24 * GiB, 672 * GB, 15.75 * GB,
        nic_bytes_per_s=_gbps(1.25), generation="volta", scaleup_latency_s=10e-6,
        scaleout_latency_s=30e-6,
        source="NVIDIA Turing architecture whitepaper; NVIDIA TITAN RTX product page; PCIe 3.0 x16"),
    # NVIDIA Turing whitepaper, GeForce RTX 2080 Ti reference clocks: 53.8 TFLOPS FP16 tensor
    # FP32-acc, 13.4 FP32, 11 GB GDDR6 at 616 GB/s, PCIe 3.0. (Sailor's "RTX-2080" has 11 GiB:
    # the 2080 Ti.)
    "RTX-2080-Ti-11GB": GPU(
        "RTX-2080-Ti-11GB", {"fp32": 13.4 * T, "fp16": 53.8 * T}, 11 * GiB, 616 * GB, 15.75 * GB,
        nic_bytes_per_s=_gbps(1.25), generation="volta", scaleup_latency_s=10e-6,
        scaleout_latency_s=30e-6,
        source="NVIDIA Turing architecture whitepaper (GeForce RTX 2080 Ti); PCIe 3.0 x16"),
    # AMD Instinct MI300X datasheet: 1,307.4 TF bf16 dense, 2,614.9 fp8, 653.7 tf32,
    # 163.4 fp32; 192 GB HBM3 at 5.3 TB/s; Infinity Fabric 896 GB/s aggregate peer (7 links
    # x 64 GB/s each way); 8 per node, 400 Gb/s NIC per GPU.
    "MI300X": GPU(
        "MI300X",
        {"fp32": 163.4 * T, "tf32": 653.7 * T, "bf16": 1307.4 * T, "fp16": 1307.4 * T, "fp8": 2614.9 * T},
        192 * GiB, 5300 * GB, 448 * GB, nic_bytes_per_s=_gbps(400), generation="cdna3",
        scaleup_latency_s=5e-6, source="AMD Instinct MI300X datasheet"),
    # AMD Instinct MI325X: the MI300X's CDNA3 compute (1,307.4 TF bf16 dense, 2,614.9 fp8,
    # 653.7 tf32, 163.4 fp32) with 256 GB HBM3e at 6.0 TB/s (AMD MI325X datasheet; eight 12-high
    # stacks of 32 GiB, reported whole as the MI300X's 192 are); same Infinity Fabric (7 links x
    # 64 GB/s each way) and 400 Gb/s NIC per GPU as the MI300X platform; 1,000 W.
    "MI325X": GPU(
        "MI325X",
        {"fp32": 163.4 * T, "tf32": 653.7 * T, "bf16": 1307.4 * T, "fp16": 1307.4 * T, "fp8": 2614.9 * T},
        256 * GiB, 6000 * GB, 448 * GB, nic_bytes_per_s=_gbps(400), generation="cdna3",
        scaleup_latency_s=5e-6, source="AMD Instinct MI325X datasheet"),
    # AMD Instinct MI355X (CDNA4): 256 CUs (8 XCDs x 32, ISSCC 2026) at 2.4 GHz x 8,192 fp8 FLOPs
    # per CU per clock = 5.03 PF fp8 dense, 2.52 PF bf16 (AMD MI355X datasheet: 5.0 / 2.5 PF dense;
    # no TF32 matrix rate, so tf32 work runs at the fp32 vector rate, 157.3 TF); 288 GB HBM3e
    # (eight 36 GiB stacks) at 8 TB/s; Infinity Fabric 7 links x 153.6 GB/s = 1,075 GB/s total,
    # 537.6 each way; 400 Gb/s NIC per GPU (AMD Pollara 400); 1,400 W. Kernel efficiencies:
    # "cdna4" (cost/efficiency.py), the CDNA3 fractions until a CDNA4 table is found.
    "MI355X": GPU(
        "MI355X",
        {"fp32": 157.3 * T, "tf32": 157.3 * T, "bf16": 2516.6 * T, "fp16": 2516.6 * T, "fp8": 5033.2 * T},
        288 * GiB, 8000 * GB, 537.6 * GB, nic_bytes_per_s=_gbps(400), generation="cdna4",
        scaleup_latency_s=5e-6, source="AMD Instinct MI355X datasheet; ISSCC 2026 CDNA4 paper (CU count)"),
    # AMD Instinct MI250X, one GCD (graphics compute die) as one device: the OAM carries two
    # GCDs that ROCm exposes as two GPUs, so Frontier / LUMI nodes of 4 MI250X are 8 devices
    # (and papers' "GPUs" are GCDs). CDNA2, 110 CUs per GCD at 1.7 GHz x 1,024 bf16 / fp16
    # FLOPs per CU per clock = 191.5 TF dense (AMD MI250X datasheet: 383 TF for the OAM);
    # fp32 matrix 256 FLOPs per CU per clock = 47.9 TF (the rate rocBLAS SGEMM uses; no TF32,
    # no FP8); 64 GiB HBM2e at 1.6384 TB/s per GCD (128 GB and 3.2768 TB/s per OAM). Infinity
    # Fabric: 50 GB/s per link each way; the two GCDs of an OAM share four links (200 GB/s),
    # GCDs of different OAMs one link (two for GCD pairs 0-4 and 2-6) (ROCm docs, "AMD
    # Instinct MI250 microarchitecture", node-level architecture): a ring over the node's 8
    # GCDs runs at one link's 50 GB/s, the figure taken (a TP pair inside one OAM has 4x that).
    # Scale-out: HPE Slingshot-11, 4 x 200 Gb/s per node (LUMI-G, Frontier) = 100 Gb/s per
    # GCD. Kernel efficiencies: "cdna2" (cost/efficiency.py), CDNA3's fractions until a CDNA2
    # table is found.
    "MI250X": GPU(
        "MI250X",
        {"fp32": 47.9 * T, "bf16": 191.5 * T, "fp16": 191.5 * T},
        64 * GiB, 1638.4 * GB, 50 * GB, nic_bytes_per_s=_gbps(100), generation="cdna2",
        scaleup_latency_s=5e-6,
        source="AMD Instinct MI250X datasheet (per OAM, halved per GCD); ROCm docs MI250 "
               "microarchitecture (links); LUMI-G node (4 x 200 Gb/s Slingshot-11)"),
    # AMD Instinct MI350X: the MI355X's CDNA4 die (gfx950, 256 CUs, 288 GiB: ROCm docs
    # reference/gpu-specs, Instinct table) in an air-cooled 1,000 W board with a 2.2 GHz peak
    # engine clock (MI355X: 2.4 GHz, 1,400 W): 256 x 8,192 fp8 FLOPs per CU per clock x 2.2 GHz
    # = 4.61 PF fp8 dense, 2.31 PF bf16 (AMD MI350X datasheet: 4.6 / 2.3 PF dense), fp32 vector
    # 256 x 256 x 2.2 GHz = 144.2 TF (no TF32 matrix rate); the same 8 TB/s HBM3e, Infinity
    # Fabric (7 x 153.6 GB/s) and 400 Gb/s NIC per GPU as the MI355X platform. No GEMM or
    # attention measurement of its own: the "cdna4" fractions (cost/efficiency.py).
    "MI350X": GPU(
        "MI350X",
        {"fp32": 144.2 * T, "tf32": 144.2 * T, "bf16": 2306.85 * T, "fp16": 2306.85 * T, "fp8": 4613.7 * T},
        288 * GiB, 8000 * GB, 537.6 * GB, nic_bytes_per_s=_gbps(400), generation="cdna4",
        scaleup_latency_s=5e-6,
        source="AMD Instinct MI350X datasheet; ROCm docs GPU specifications (CUs, memory)"),
}

# CUDA compute capability of each NVIDIA part (NVIDIA's "CUDA GPUs" table, developer.nvidia.com/
# cuda-gpus: V100 7.0; TITAN RTX and GeForce RTX 2080 Ti (Turing) 7.5; A100 8.0; GeForce RTX
# 3090 8.6; H100, H200, H800 9.0; B200, GB200 10.0; B300, GB300 10.3). Engines gate kernels on
# it (e.g. FP8 weights: serve/export.py); the kernel-efficiency family (GPU.generation) puts
# the Turing parts with Volta, which this separates.
CUDA_CAPABILITY = {"V100-SXM-32GB": 7.0, "TITAN-RTX-24GB": 7.5, "RTX-2080-Ti-11GB": 7.5,
                   "A100-SXM-40GB": 8.0, "A100-SXM-80GB": 8.0, "RTX-3090-24GB": 8.6,
                   "H100-SXM-80GB": 9.0, "H100-SXM-96GB-500W": 9.0, "H800-SXM-80GB": 9.0,
                   "H200-SXM-141GB": 9.0, "B200": 10.0, "GB200": 10.0, "B300": 10.3,
                   "GB300": 10.3}
GPUS = {n: replace(g, compute_capability=CUDA_CAPABILITY.get(n, 0.0)) for n, g in GPUS.items()}


# What ``torch.cuda.get_device_name`` reports, matched to catalog ids (first match wins).
# A100 and H100 come in several memory sizes; the reported memory picks the part. PCIe and
# NVL boards have other clocks and links than the SXM parts here, so they are not guessed.
_DEVICE_NAMES = (("GB300", "GB300"), ("B300", "B300"), ("GB200", "GB200"), ("B200", "B200"),
                 ("GH200", None), ("H200", "H200-SXM-141GB"), ("H800", "H800-SXM-80GB"), ("H100", None), ("A100", None),
                 ("V100", "V100-SXM-32GB"), ("MI300X", "MI300X"),
                 ("MI325X", "MI325X"), ("MI355X", "MI355X"), ("MI350X", "MI350X"),
                 ("MI250X", "MI250X"))


def gpu_for_device(name: str, memory_bytes: int) -> str | None:
    """The catalog id of a device PyTorch reports (name, total memory), or None if unknown."""
    upper = name.upper()
    if "PCIE" in upper or "NVL" in upper:
        return None
    for key, gpu_id in _DEVICE_NAMES:
        if key not in upper:
            continue
        if gpu_id is not None or key not in ("H100", "A100"):
            return gpu_id
        if key == "H100":
            return "H100-SXM-96GB-500W" if memory_bytes > 88 * GiB else "H100-SXM-80GB"
        return "A100-SXM-80GB" if memory_bytes > 48 * GiB else "A100-SXM-40GB"
    return None


# A memory figure in a GPU's name ("80GB", "141 GB", "40GiB"): vendors print the marketed size.
_MEMORY_IN_NAME = re.compile(r"(\d+(?:\.\d+)?)\s*GI?B", re.I)
# How far the figure in a name may lie from the part's reported memory and still name it:
# the marketed sizes run up to 7% above what the device reports (B300 "288GB" is 270 GiB,
# B200 "192GB" at launch is 179 GiB); V100 16GB (-50%) is another part.
NAME_MEMORY_TOLERANCE = 0.10


def gpu_for_name(name: str) -> str | None:
    """The catalog id of a GPU named as the vendors' tools print it ("NVIDIA A100-SXM4-80GB",
    "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB", "AMD Instinct MI300X", "H100 SXM5 80GB"),
    or None when the name does not pin one part: ``gpu_for_device``'s rules with the memory
    figure the name carries. V100, A100 and H100 need the figure (each comes in more than one
    size: 16/32, 40/80, 80/94/96 GB); a figure
    more than NAME_MEMORY_TOLERANCE from the part's memory (V100 16GB) names another part."""
    if not isinstance(name, str):
        return None
    figures = _MEMORY_IN_NAME.findall(name)
    gib = float(figures[0]) if len(figures) == 1 else None
    upper = name.upper()
    if gib is None and any(k in upper for k in ("V100", "A100", "H100")):
        return None
    gpu_id = gpu_for_device(name, int((gib or 0) * GiB))
    if gpu_id is None or gib is None:
        return gpu_id
    part = GPUS[gpu_id].memory_bytes / GiB
    return gpu_id if abs(gib - part) <= NAME_MEMORY_TOLERANCE * part else None
