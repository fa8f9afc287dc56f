"""Collectives inside a full-mesh node (AMD MI300X / MI325X / MI355X) against AMD's own
measurements, and against the switch they differ from.

Source: ROCm blogs, "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct
MI300X" (2025-03-02; ROCm/rocm-blogs blogs/software-tools-optimization/mi300x-rccl-xgmi/
README.md at 0e81c2ca): each MI300X has one 64 GB/s xGMI link to each of its seven peers;
TransferBench measures 45.1-47.2 GB/s on every directly connected pair (mean 46.55), and
"when performing collective operations with only 2 or 4 GPUs, only a fraction of the
available bandwidth on the node is utilized". The model's Infinity Fabric fraction
(efficiency.NETWORK.scaleup_xgmi) was taken from the blog's 8-GPU rccl-tests all-reduce; the
per-pair TransferBench figures were not used by it.
"""

import pytest

from meshplan.cost import collectives as c
from meshplan.scenario import make_cluster
from meshplan.serve.cost import all_reduce_small_s

GIB = 1 << 30
PAIR_GBPS = (45.1, 47.2)  # TransferBench, every directly connected MI300X pair
PAIR_MEAN_GBPS = 46.55


def _ar_busbw_gbps(cluster, n, nbytes=GIB):
    p = c.placement(((n, 1),), cluster.domain_size)
    return 2 * (n - 1) / n * nbytes / c.all_reduce_s(cluster, p, nbytes) / 1e9


def test_two_mi300x_all_reduce_runs_on_their_one_link():
    bw = _ar_busbw_gbps(make_cluster("8xMI300X"), 2)
    assert PAIR_GBPS[0] * 0.95 <= bw <= PAIR_GBPS[1] * 1.05  # was 314 GB/s, the whole node's


def test_mesh_group_bandwidth_grows_with_its_links_a_switch_does_not():
    amd, nv = make_cluster("8xMI300X"), make_cluster("8xH100-SXM-80GB")
    full = _ar_busbw_gbps(amd, 8)
    assert _ar_busbw_gbps(amd, 4) == pytest.approx(full * 3 / 7, rel=0.02)
    assert _ar_busbw_gbps(amd, 2) == pytest.approx(full * 1 / 7, rel=0.02)
    # NVSwitch: any pair gets the whole NVLink bandwidth (no share applied)
    assert c.scaleup_share(nv, 2) == c.scaleup_share(nv, 4) == 1.0
    assert _ar_busbw_gbps(nv, 4) == pytest.approx(_ar_busbw_gbps(nv, 8), rel=0.02)
    # MI250X's GCDs are no full mesh (catalog: uneven Infinity Fabric links)
    assert c.scaleup_share(make_cluster("16xMI250X"), 2) == 1.0


def test_mesh_all_to_all_sends_each_peer_share_on_its_own_link():
    cl = make_cluster("8xMI300X")
    send = 4 * GIB
    t = c.all_to_all_s(cl, c.placement(((4, 1),), cl.domain_size), send)
    per_link = 448e9 / 7 * c.scaleup_efficiency("cdna3")  # one pair's link, as the model has it
    assert t == pytest.approx(send / 4 / per_link, rel=0.02)
    assert per_link / 1e9 == pytest.approx(PAIR_MEAN_GBPS, rel=0.05)


def test_mesh_p2p_is_one_link():
    cl = make_cluster("8xMI300X")
    gbps = (256 << 20) / c.p2p_s(cl, False, 256 << 20) / 1e9
    # NCCL's point-to-point share of a link (NETWORK.p2p_scaleup, an NVLink figure) on the
    # one pair's link: within 15% of TransferBench's pair figure (was 6x above it)
    assert gbps == pytest.approx(PAIR_MEAN_GBPS, rel=0.15)


def test_serving_custom_all_reduce_reads_each_peer_over_its_link():
    # vLLM's one-shot custom all-reduce at a size past its fixed cost: each GPU reads the
    # other's buffer over their one link
    cl = make_cluster("8xMI300X")
    nbytes = 1 << 20
    per_link = 448e9 / 7 * c.scaleup_efficiency("cdna3")
    t = all_reduce_small_s(cl, 2, nbytes)
    assert t >= nbytes / per_link


def test_calibrate_reads_a_small_mesh_group_as_its_share_of_the_node():
    # `meshplan calibrate` on a 2-GPU slice of an MI300X node: the pair's 45.5 GB/s is its
    # one link, the whole node's ring constant the same as from eight GPUs
    from meshplan.calibrate import fit
    from meshplan.specs.catalog.gpus import GPUS
    gpu = GPUS["MI300X"]
    eight = {"collectives": [{"collective": "all_gather", "group": 8, "bytes": 2**30,
                              "bus_bytes_per_s": 318.98e9}]}
    two = {"collectives": [{"collective": "all_gather", "group": 2, "bytes": 2**30,
                            "bus_bytes_per_s": 318.98e9 / 7}]}
    k8, _ = fit.constants_from(eight, gpu)
    k2, _ = fit.constants_from(two, gpu)
    assert k2["NETWORK.scaleup_xgmi"] == pytest.approx(k8["NETWORK.scaleup_xgmi"], rel=1e-9)
    assert k8["NETWORK.scaleup_xgmi"] == pytest.approx(318.98 / 448, rel=1e-9)
