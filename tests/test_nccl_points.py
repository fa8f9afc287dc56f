"""cost/collectives.py against published nccl-tests measurements (bench/data/nccl_points.csv)
and against the closed forms it is built from."""

from __future__ import annotations

import importlib.util
import math
import statistics
from pathlib import Path

import pytest

from meshplan.cost.collectives import (Placement, all_gather_s, all_reduce_algo_s, all_reduce_s,
                                       all_to_all_s, p2p_s, scaleup_efficiency)
from meshplan.cost.efficiency import NETWORK
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.hardware import Cluster

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("nccl_fit", ROOT / "bench" / "nccl_fit.py")
nccl_fit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nccl_fit)

ROWS = nccl_fit.load()
SCORED = nccl_fit.scored(ROWS)


def _abs_err(rows):
    return [abs(math.exp(e) - 1) for e in nccl_fit.log_errors(rows)]


def test_data_file_is_sourced_and_split():
    assert len(SCORED) >= 40
    assert all(r["source"].strip() for r in ROWS)
    assert {r["split"] for r in ROWS} == {"fit", "check"}
    assert {r["collective"] for r in SCORED} >= {"all_reduce", "all_gather", "reduce_scatter",
                                                 "all_to_all", "sendrecv"}
    assert any(int(r["nodes"]) > 1 for r in SCORED)


def test_every_published_point_within_35_percent():
    """Stated tolerance: every scored point's bus bandwidth within 35% (small messages on a
    g8-mode harness are the loosest); medians below."""
    for r, e in zip(SCORED, _abs_err(SCORED)):
        assert e <= 0.35, (r["gpu"], r["collective"], r["size_bytes"], r["busbw_GBps"],
                           nccl_fit.predicted_busbw_GBps(r))


def test_held_out_points_median_within_10_percent():
    check = nccl_fit.scored(ROWS, "check")
    assert len(check) >= 15
    assert statistics.median(_abs_err(check)) <= 0.10


def test_large_messages_within_12_percent():
    big = [r for r in SCORED if int(r["size_bytes"]) >= 2**28]
    assert len(big) >= 12
    assert max(_abs_err(big)) <= 0.12


def _cl(gpu: str, n: int, per_node: int = 8) -> Cluster:
    return Cluster(GPUS[gpu], n, gpus_per_node=per_node, scaleup_domain=per_node)


def test_bus_bandwidth_ramps_with_message_size():
    c = _cl("H100-SXM-80GB", 8)
    p = Placement(8, 8)
    sizes = [2**k for k in range(12, 34)]
    times = [all_gather_s(c, p, s) for s in sizes]
    assert all(b >= a for a, b in zip(times, times[1:]))  # more bytes never faster
    busbw = [7 / 8 * s / t for s, t in zip(sizes, times)]
    assert all(b >= a * 0.999 for a, b in zip(busbw, busbw[1:]))
    peak = c.gpu.scaleup_bytes_per_s * NETWORK.scaleup
    assert busbw[-1] == pytest.approx(peak, rel=0.02)
    assert busbw[sizes.index(2**25)] < 0.75 * peak  # 32 MB: well below the peak


def test_cross_node_ring_is_bounded_by_the_node_nics():
    """Ring across nodes with g GPUs per node: 1/g of each GPU's ring traffic on its NIC,
    the rest on NVLink, concurrently (nccl-tests: ~8 x 46 GB/s on 8x 400G per node)."""
    S = 2**33
    for k in (2, 4, 16):
        c = _cl("H100-SXM-80GB", 8 * k)
        p = Placement(8 * k, 8)
        n = 8 * k
        t = all_reduce_algo_s(c, p, S, "ring")
        busbw = 2 * (n - 1) / n * S / t
        nic = c.nic_bytes_per_s * NETWORK.scaleout
        up = c.gpu.scaleup_bytes_per_s * NETWORK.scaleup
        assert busbw == pytest.approx(min(8 * nic, up * 8 / 7), rel=0.03)
    # one GPU per node: the GPU's own NIC
    c = _cl("H100-SXM-80GB", 64)
    t = all_gather_s(c, Placement(8, 1), S)
    assert 7 / 8 * S / t == pytest.approx(c.nic_bytes_per_s * NETWORK.scaleout, rel=0.02)


def test_tree_beats_ring_on_two_nodes_and_for_small_messages_at_scale():
    c = _cl("A100-SXM-80GB", 16)
    p = Placement(16, 8)
    S = 2**30
    assert all_reduce_algo_s(c, p, S, "tree") < 0.7 * all_reduce_algo_s(c, p, S, "ring")
    # DP over 1024 nodes, one GPU each: ring latency grows with 2(k-1) hops, tree with log2(k)
    big = _cl("H100-SXM-80GB", 8192)
    q = Placement(1024, 1)
    small = 2**20
    ring, tree = all_reduce_algo_s(big, q, small, "ring"), all_reduce_algo_s(big, q, small, "tree")
    assert ring > 2 * 1023 * NETWORK.hop_net_s * 2.7 / 9.6  # at least LL's hop latency
    assert tree < ring / 5
    assert all_reduce_s(big, q, small) == pytest.approx(min(ring, tree))


def test_nvls_only_on_hopper_and_later():
    """NVLS all-reduce beats the ring on Hopper (1.30x) and Blackwell (1.14x), not on
    Ampere or AMD parts."""
    S = 2**33
    for gpu, nvls in (("H100-SXM-80GB", True), ("A100-SXM-80GB", False), ("B200", True),
                      ("MI300X", False)):
        c = _cl(gpu, 8)
        t = all_reduce_s(c, Placement(8, 8), S)
        ring = 2 * 7 / 8 * S / (c.gpu.scaleup_bytes_per_s * scaleup_efficiency(c.gpu.generation))
        assert (t < 0.92 * ring) == nvls, gpu


def test_physical_floors_hold():
    """No collective beats its bytes at the links' line rate (the search bounds use the cost
    model's own times; this checks the model never goes below physics)."""
    for gpu in ("A100-SXM-80GB", "H100-SXM-80GB", "GB200", "RTX-3090-24GB"):
        c = _cl(gpu, 64, GPUS[gpu].gpus_per_node)
        up, nic = c.gpu.scaleup_bytes_per_s, c.nic_bytes_per_s
        for n, g in ((8, 8), (4, 4), (16, 8), (8, 1), (64, 4)):
            if g > c.gpus_per_node:
                continue
            p = Placement(n, g)
            for S in (1e3, 1e6, 1e8, 1e10):
                k = n // g
                floor_ag = (n - 1) / n * S / (up if k == 1 else max(up, g * nic) * 2)
                assert all_gather_s(c, p, S) >= floor_ag
                assert all_reduce_s(c, p, S) >= floor_ag
                assert all_to_all_s(c, p, S) > 0
        assert p2p_s(c, True, 1e9) >= 1e9 / nic
        assert p2p_s(c, False, 1e9) >= 1e9 / up


def test_xgmi_ring_follows_amds_rccl_table():
    """8x MI300X all-reduce (AMD's rccl-tests table, bench/data/nccl_points.csv): the ring on
    Infinity Fabric levels off at 0.712 of the 448 GB/s links (NETWORK.scaleup_xgmi, chosen on
    the 16 GiB row alone), not NVLink's 0.80, which had every held-out row from 256 MiB up
    10-12.5% fast. The held-out rows (16 MiB - 8 GiB) now come within 8% each, median 3%."""
    rows = [r for r in nccl_fit.scored(ROWS, "check") if r["gpu"] == "MI300X"]
    assert len(rows) == 10
    errs = _abs_err(rows)
    assert max(errs) <= 0.08, list(zip((r["size_bytes"] for r in rows), errs))
    assert statistics.median(errs) <= 0.03
    assert scaleup_efficiency("cdna3") == pytest.approx(318.98 / 448)
    assert scaleup_efficiency("hopper") == NETWORK.scaleup  # NVLink parts unchanged
