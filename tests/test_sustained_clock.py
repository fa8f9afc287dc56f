"""The clock a part holds under sustained load, apart from the rest of the end-to-end derating
(efficiency.KernelEfficiency.sustained_clock, efficiency.tensor_derating).

Independent truth: the 8192^3 bf16 GEMM held for a minute at the 700 W cap on a lent H100
(bench/data/measured/h100_2026-11-27/sustained_bf16.csv, 670.6 TFLOP/s from 10 s on), and
AMD's Max-Achievable-FLOPs table, taken by method at the clock a warmed-up part holds
("Measuring Max-Achievable FLOPs - Part 2", ROCm blogs 2025-02-28, Table 1: MI300X 708
TFLOP/s bf16 at 1,207 MHz, MI325X 843 at 1,447 MHz), under which the MAMF rates the cost
model uses for CDNA3 sit (668.4, 784.9). Two GEMM rates that are both held under load must
keep their ratio in the model's whole-step rates; before the split the model took NVIDIA's
burst-to-held clock drop off AMD's held-clock rates as well (MI300X over H100: 0.845 instead
of 0.997).
"""

from __future__ import annotations

import csv
from pathlib import Path
from statistics import median

import pytest

from meshplan.cost import compute, efficiency
from meshplan.specs.catalog.gpus import GPUS

ROOT = Path(__file__).resolve().parents[1]
H100_SUSTAINED = ROOT / "bench" / "data" / "measured" / "h100_2026-11-27" / "sustained_bf16.csv"
MAF_HELD_TFLOPS = {"MI300X": 708.0, "MI325X": 843.0}  # AMD MAF Table 1, bf16, at the held clock


def _h100_held_tflops() -> float:
    rows = csv.DictReader(open(H100_SUSTAINED))
    return median(float(r["tflops"]) for r in rows if float(r["t_s"]) >= 10)


def test_amd_gemm_tables_sit_at_or_under_the_held_clock_rate():
    """The premise: the CDNA3 GEMM rates the model uses are no burst above AMD's held-clock
    MAF figures on the same parts."""
    mi300x = efficiency.EFFICIENCY["cdna3"].matmul_bf16 * GPUS["MI300X"].flops("bf16") / 1e12
    mi325x = efficiency.SKU_MATMUL["MI325X"]["bf16"] * GPUS["MI325X"].flops("bf16") / 1e12
    assert mi300x <= MAF_HELD_TFLOPS["MI300X"] and mi325x <= MAF_HELD_TFLOPS["MI325X"]
    for gen in ("cdna2", "cdna3", "cdna4"):
        assert efficiency.EFFICIENCY[gen].sustained_clock == 1.0


@pytest.mark.parametrize("amd,table_tflops", [("MI300X", 668.4), ("MI325X", 784.9)])
def test_whole_step_gemm_rates_keep_the_ratio_of_held_rates(amd, table_tflops):
    """An AMD part's whole-step large-GEMM rate over the H100's equals the ratio of the two
    rates held under load (AMD's table at the held clock; the H100 measured for a minute at its
    cap), within 2%."""
    compute.device.cache_clear()
    ratio = (compute.device(GPUS[amd], "bf16").matmul_flops
             / compute.device(GPUS["H100-SXM-80GB"], "bf16").matmul_flops)
    assert ratio == pytest.approx(table_tflops / _h100_held_tflops(), rel=0.02)


def test_nvidia_whole_step_derating_is_unchanged_by_the_split():
    """The split moves no NVIDIA prediction: the fitted 0.75 of the burst-table rate."""
    for gen in ("volta", "ampere", "hopper", "blackwell"):
        assert efficiency.tensor_derating(gen) == pytest.approx(0.75)
