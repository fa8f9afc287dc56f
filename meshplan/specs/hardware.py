"""Where training runs: GPU types and clusters of them. Knows nothing about transformers.

All bandwidths are bytes/s in one direction per GPU; FLOP/s are dense (no sparsity).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import (InputError, did_you_mean, require_plain_text, require_positive_int,
                      require_positive_number)
from ..inputs import read_input
from .hashing import cached_hash

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
# generations whose node is a full mesh of point-to-point links (GPU.scaleup_full_mesh)
FULL_MESH_GENERATIONS = ("cdna3", "cdna4")


def vendor_of(generation: str) -> str:
    """"amd" for a kernel-efficiency generation of AMD Instinct parts (CDNA, run through ROCm),
    else "nvidia": the one rule every AMD-specific path reads."""
    return "amd" if generation.startswith("cdna") else "nvidia"


def gib_text(nbytes: float) -> str:
    """A GPU's memory in GiB as messages print it: whole numbers bare, others to 0.01 GiB
    (79.11 for an H100 80GB, whose device reports that much, not 79 or 80)."""
    return f"{round(nbytes / 2**30, 2):g}"


@cached_hash
@dataclass(frozen=True)
class GPU:
    """One accelerator type with its usual node. Datasheet numbers (see catalog/gpus.py)."""

    name: str
    peak_flops: dict[str, float]  # dense FLOP/s by precision: fp32, tf32, bf16, fp16, fp8
    memory_bytes: float  # usable HBM capacity as the datasheet states it
    memory_bytes_per_s: float  # HBM bandwidth
    scaleup_bytes_per_s: float  # NVLink/xGMI bandwidth per GPU, one direction
    gpus_per_node: int = 8
    scaleup_domain: int = 8  # GPUs reachable over the scale-up fabric (72 on NVL72)
    nic_bytes_per_s: float = 50e9  # scale-out NIC bandwidth per GPU, one direction
    scaleup_latency_s: float = 3e-6
    scaleout_latency_s: float = 8e-6
    generation: str = ""  # kernel-efficiency family: volta, ampere, hopper, blackwell, cdna2, cdna3, cdna4
    power_limit_w: float = 0.0  # board power cap when below the part's usual TDP (0: none)
    compute_capability: float = 0.0  # CUDA compute capability (0: not an NVIDIA part, unknown)
    source: str = field(default="", compare=False)

    def __hash__(self) -> int:  # peak_flops is a dict; the name and sizes identify a part
        return hash((self.name, self.memory_bytes, self.memory_bytes_per_s,
                     self.scaleup_bytes_per_s, self.nic_bytes_per_s, self.power_limit_w))

    @property
    def scaleup_full_mesh(self) -> bool:
        """Whether the node's GPUs are wired point to point, one link per pair, rather than
        through a switch: AMD Instinct MI300X / MI325X (CDNA3) and MI350X / MI355X (CDNA4)
        platforms, "each GPU ... connected to its seven peer GPUs via xGMI links, forming a
        fully connected mesh" (ROCm blogs, "Understanding RCCL Bandwidth and xGMI Performance
        on AMD Instinct MI300X", 2025-03-02; AMD MI355X platform: 7 Infinity Fabric links per
        GPU). A group of g GPUs of such a node reaches its peers over the g - 1 links between
        them only (cost/collectives.py scaleup_share). MI250X (CDNA2) is neither: its GCDs
        share links unevenly (catalog/gpus.py)."""
        return self.generation in FULL_MESH_GENERATIONS

    def flops(self, precision: str) -> float:
        p = "fp16" if precision == "bf16" and "bf16" not in self.peak_flops else precision
        if p not in self.peak_flops:
            if p == "fp8":  # no FP8 units: runs at 16-bit speed
                return self.flops("bf16")
            raise InputError("precision", precision,
                             f"{self.name} supports " + ", ".join(sorted(self.peak_flops)))
        return self.peak_flops[p]

    @property
    def vendor(self) -> str:
        return vendor_of(self.generation)


@cached_hash
@dataclass(frozen=True)
class Cluster:
    """N GPUs of one type; node size and NIC bandwidth may override the GPU's usual node."""

    gpu: GPU
    num_gpus: int
    gpus_per_node: int = 0  # 0: the GPU's usual node
    nic_bytes_per_s: float = 0.0  # 0: the GPU's usual NIC
    scaleup_domain: int = 0  # 0: the GPU's usual domain (at least one node)

    def __post_init__(self) -> None:
        require_positive_int("num_gpus", self.num_gpus)
        if self.num_gpus > MAX_GPUS:
            raise InputError("num_gpus", self.num_gpus, f"must be at most {MAX_GPUS:,}")
        if not self.gpus_per_node:
            object.__setattr__(self, "gpus_per_node", self.gpu.gpus_per_node)
        require_positive_int("gpus_per_node", self.gpus_per_node)
        if not self.nic_bytes_per_s:
            object.__setattr__(self, "nic_bytes_per_s", self.gpu.nic_bytes_per_s)
        if self.nic_bytes_per_s <= 0:
            raise InputError("nic_gbps_per_gpu", self.nic_bytes_per_s * 8 / 1e9, "must be positive")
        if not self.scaleup_domain:
            # a fabric that ends at the GPU's usual node (HGX boards, MI300X platforms) ends
            # at the node given; one that spans nodes (NVL72) keeps its size; one smaller
            # than the node (PCIe H100s joined in pairs by NVLink bridges: the other pairs
            # talk over PCIe) keeps its size too, within the node given
            dom, usual = self.gpu.scaleup_domain, self.gpu.gpus_per_node
            object.__setattr__(self, "scaleup_domain",
                               max(dom, self.gpus_per_node) if dom > usual
                               else min(dom, self.gpus_per_node) if dom < usual
                               else self.gpus_per_node)
        if self.num_gpus > self.gpus_per_node and self.num_gpus % self.gpus_per_node:
            raise InputError("num_gpus", self.num_gpus,
                             f"must be a multiple of gpus_per_node ({self.gpus_per_node})")

    @property
    def domain_size(self) -> int:
        """GPUs in one scale-up (NVLink) domain, capped by the cluster size."""
        return min(self.scaleup_domain, self.num_gpus)

    def describe(self) -> str:
        # AMD Instinct parts (CDNA) link their GPUs with Infinity Fabric, not NVLink
        link = "Infinity Fabric" if self.gpu.vendor == "amd" else "NVLink"
        return (f"{self.num_gpus} x {self.gpu.name} ({self.gpus_per_node} per node, "
                f"{link} domain {self.domain_size}, NIC {self.nic_bytes_per_s * 8 / 1e9:.0f} Gb/s"
                " per GPU)")


def gpu_from_dict(d: dict, name: str) -> GPU:
    """A GPU from a TOML table: peak_tflops = {bf16 = ...}, memory_gib or memory_gb, ..."""
    # the keys this function reads: every GPU field, in the units of a datasheet (the byte
    # and FLOP fields of the GPU class under their own names were taken and ignored, as
    # were the latencies and the compute capability)
    known = {"peak_tflops", "memory_gb", "memory_gib", "memory_tb_per_s", "scaleup_gb_per_s",
             "gpus_per_node", "scaleup_domain", "nic_gbps", "scaleup_latency_s",
             "scaleout_latency_s", "generation", "power_limit_w", "compute_capability",
             "source"}
    for k in d:
        if k not in known:
            raise InputError(f"gpu.{name}.{k}", d[k], "unknown key; known: " + ", ".join(sorted(known)))
    f = f"gpu.{name}"
    if "memory_gib" in d and "memory_gb" in d:  # memory_gib was taken, memory_gb ignored
        raise InputError(f"{f}.memory_gb", d["memory_gb"], f"contradicts memory_gib = "
                         f"{d['memory_gib']!r} (the same field); give one of them")

    def num(key: str, default: object = ..., allow_zero: bool = False) -> float:
        if key not in d:
            if default is ...:
                raise InputError(f"{f}.{key}", None, "missing; required key")
            return float(default)
        return require_positive_number(f"{f}.{key}", d[key], allow_zero)

    def count(key: str, default: int) -> int:
        return require_positive_int(f"{f}.{key}", d[key]) if key in d else default

    peaks = d.get("peak_tflops")
    if not isinstance(peaks, dict) or not peaks:
        raise InputError(f"{f}.peak_tflops", peaks, "a table of TFLOP/s per precision, "
                         "e.g. {bf16 = 989, fp8 = 1979}")
    for k, v in peaks.items():  # a misspelt precision ("fp08") was kept and never read
        if k not in PRECISIONS:
            raise InputError(f"{f}.peak_tflops.{k}", v, "unknown precision; allowed: "
                             + ", ".join(PRECISIONS))
    peak = {k: require_positive_number(f"{f}.peak_tflops.{k}", v) * 1e12 for k, v in peaks.items()}
    if "bf16" not in peak and "fp16" not in peak:  # every step and listing reads the 16-bit peak
        raise InputError(f"{f}.peak_tflops", peaks, "needs bf16 (or fp16) TFLOP/s, e.g. "
                         "{bf16 = 989, fp8 = 1979}")
    from ..cost.efficiency import EFFICIENCY  # the kernel-efficiency families
    generation = d.get("generation", "hopper")
    if generation not in EFFICIENCY:  # any other name fell back to hopper without a word
        raise InputError(f"{f}.generation", generation, "allowed: " + ", ".join(EFFICIENCY))
    mem = num("memory_gib") * 2**30 if "memory_gib" in d else num("memory_gb") * 1e9
    per_node = count("gpus_per_node", 8)
    return GPU(
        name=name,
        peak_flops=peak,
        memory_bytes=mem,
        memory_bytes_per_s=num("memory_tb_per_s") * 1e12,
        scaleup_bytes_per_s=num("scaleup_gb_per_s") * 1e9,
        gpus_per_node=per_node,
        scaleup_domain=count("scaleup_domain", per_node),
        nic_bytes_per_s=num("nic_gbps", 400) / 8 * 1e9,
        scaleup_latency_s=num("scaleup_latency_s", GPU.scaleup_latency_s, allow_zero=True),
        scaleout_latency_s=num("scaleout_latency_s", GPU.scaleout_latency_s, allow_zero=True),
        generation=generation,
        power_limit_w=num("power_limit_w", 0, allow_zero=True),
        compute_capability=num("compute_capability", 0, allow_zero=True),
        source=str(d.get("source", "user file")),
    )


def load_gpu_toml(path: str | Path) -> dict[str, GPU]:
    """User GPUs: ``[gpu.NAME]`` tables (see examples/my_gpus.toml)."""
    try:
        data = tomllib.loads(read_input(path, "gpu_file").decode("utf-8").removeprefix("\ufeff"))
    except IsADirectoryError:
        raise InputError("gpu_file", str(path), "is a directory; give a TOML file") from None
    except OSError as e:
        raise InputError("gpu_file", str(path), f"cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise InputError("gpu_file", str(path), "not a text file (not UTF-8)") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError("gpu_file", str(path), f"not valid TOML ({e})") from None
    table = data.get("gpu")
    if not isinstance(table, dict) or not table:
        raise InputError("gpu_file", str(path), "needs at least one [gpu.NAME] table")
    for name, d in table.items():
        if not isinstance(d, dict):
            raise InputError(f"gpu.{name}", d, "must be a table ([gpu.NAME] with its keys)")
        if not name or "+" in name or any(c.isspace() for c in name):
            # --gpus takes COUNTxNAME, and '+' joins pools there (--gpus 8xA+8xB)
            raise InputError("gpu_file", name, "a [gpu.NAME] name must be non-empty, without "
                             "spaces and without '+' (it joins pools in --gpus A+B)")
        require_plain_text("gpu_file", name)  # the name goes into scripts and listings
    return {name: gpu_from_dict(d, name) for name, d in table.items()}


# The largest cluster meshplan plans for: 2**20 GPUs (5x the largest announced training
# clusters of 2025, ~200k GPUs); the search over its divisors still answers in seconds.
MAX_GPUS = 2**20
# the name may hold spaces, as nvidia-smi prints it ("8xNVIDIA H100 80GB HBM3")
_GPUS_RE = re.compile(r"^\s*(\d+)\s*[x×*]\s*(\S.*?)\s*$", re.I)


def parse_gpus(text: str, catalog: dict[str, GPU]) -> tuple[int, GPU]:
    """Parse ``64xH100-SXM-80GB`` into (64, GPU)."""
    if not isinstance(text, str):
        raise InputError("gpus", text, "expected COUNTxGPU text, e.g. \"64xH100-SXM-80GB\"")
    m = _GPUS_RE.match(text)
    if not m:
        raise InputError("gpus", text, "expected COUNTxGPU, e.g. 64xH100-SXM-80GB")
    count = int(m.group(1))
    if count < 1:
        raise InputError("gpus", text, "the GPU count must be a positive integer")
    if count > MAX_GPUS:
        raise InputError("gpus", text, f"the GPU count must be at most {MAX_GPUS:,} "
                         "(meshplan plans single clusters up to 2**20 GPUs)")
    return count, lookup_gpu(m.group(2), catalog)


def lookup_gpu(name: str, catalog: dict[str, GPU]) -> GPU:
    if not isinstance(name, str):
        raise InputError("gpu", name, "expected a GPU name, e.g. \"H100-SXM-80GB\"; known GPUs: "
                         + ", ".join(catalog))
    key = {k.lower(): k for k in catalog}.get(name.strip().lower())
    if key is None:  # a name as nvidia-smi / torch / rocm-smi print it ("A100-SXM4-80GB")
        from .catalog.gpus import gpu_for_name
        key = gpu_for_name(name)
        key = key if key in catalog else None
    if key is None:
        raise InputError("gpu", name, did_you_mean(name, catalog) + "known GPUs: "
                         + ", ".join(catalog))
    return catalog[key]

