"""Work the search's floors (search/bound.py) repeat on their cache hits.

DeepSeek-V3 on 2,048 H800 (bench/bench_search.py) asks Bounds.costs for 47,942 layer-cost
sets (31,592 of them already computed), PairBounds._rc_parts 108,286 times (18,415
distinct) and Theorem M's held bytes for 102,455 rank states; what a hit costs is the
search's own time. These tests count the work a hit used to redo.
"""

from __future__ import annotations

import pytest

from meshplan.cost.collectives import Placement
from meshplan.scenario import make_cluster
from meshplan.search import bound
from meshplan.search.bound import Bounds, layout_plan
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

FIELDS = dict(dp=64, tp=4, pp=8, cp=1, ep=32, etp=1)  # 2,048 GPUs, edp 8


@pytest.fixture()
def bounds():
    return Bounds(preset("deepseek-v3"), make_cluster("2048xH800-SXM-80GB"),
                  Workload(4096, 15360), [1, 2, 3])


def test_a_cost_hit_hashes_no_placement(bounds, monkeypatch):
    """A layout the bounds have not seen, with the placements of one they have: the costs
    are found by the placements dict, without hashing the four Placements again."""
    first = bounds.costs(layout_plan(FIELDS), 1, "none")
    hashed = []
    plain = Placement.__hash__
    monkeypatch.setattr(Placement, "__hash__", lambda self: hashed.append(self) or plain(self))
    again = bounds.costs(layout_plan(FIELDS), 1, "none")  # another object, same placements
    assert again is first
    assert not hashed


def test_rank_parts_hit_and_held_bytes_read_the_workload_once(bounds, monkeypatch):
    pb = bounds.pair(layout_plan(FIELDS), 1, 15360 // 64, ["none", "selective", "full"])
    parts = pb._rc_parts(2, "interleaved_zb", "none")
    asked = []
    plain = bound.p2p_overlapped
    monkeypatch.setattr(bound, "p2p_overlapped", lambda *a: asked.append(a) or plain(*a))
    assert pb._rc_parts(2, "interleaved_zb", "none") is parts
    assert not asked  # the hit no longer works out the key's schedule traits
    read = []
    state = Workload.master_and_state_bytes
    monkeypatch.setattr(Workload, "master_and_state_bytes",
                        property(lambda w: read.append(1) or state.fget(w)))
    bounds._held = None
    for vpp, sched in ((2, "interleaved_zb"), (2, "zb_v"), (4, "interleaved_1f1b")):
        for b in range(3):
            pb.may_fit(vpp, sched, "none", b)
    assert len(read) == 1  # once per search, not once per rank state


def test_rank_sums_take_one_call_per_vector(bounds, monkeypatch):
    """A pair's rank parts sum each vector over the distinct rank layouts in one call
    (_dots over their nonzero counts; 643,360 calls of _sum4 per DeepSeek-V3 search, one
    per layout and vector, were the search's largest own entry in the profile), to the
    same floats as _sum4."""
    pb = bounds.pair(layout_plan(FIELDS), 1, 15360 // 64, ["none", "selective", "full"])
    calls = []
    plain = bound._sum4
    monkeypatch.setattr(bound, "_sum4", lambda c, v: calls.append(c) or plain(c, v))
    fu, bu, wu, slow, acts = pb._rc_parts(2, "interleaved_zb", "full")[:5]
    uniq, _, params, eparams, _, wins = pb._ranks(2, False)
    assert not calls
    pc, v = pb.costs("full", False)
    assert wu == [plain(c, v["bwd_weight_s"]) for c in uniq]
    assert acts == [plain(c, v["saved_bytes"]) for c in uniq]
    assert len(uniq) > 1 and eparams == [plain(c, pb.costs("none")[1]["expert_params"])
                                         for c in uniq]
