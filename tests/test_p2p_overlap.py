"""Stage-to-stage transfers under the interleaved schedule (cost/engine_p2p.py): Megatron-LM
and NeMo overlap them with the next chunk's compute (overlap_p2p_comm, on by default and
only with virtual stages); other engines and the plain 1F1B schedule wait for them."""

from __future__ import annotations

import dataclasses

import pytest

from meshplan.cost import estimate
from meshplan.cost.engine_p2p import p2p_exposed_s
from meshplan.plan_label import parse_label
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

MODEL = preset("llama3.1-70b")
CLUSTER = make_cluster("64xH100-SXM-80GB")


def _est(framework: str, label: str):
    w = Workload(seq_len=4096, global_batch=256, framework=framework)
    return estimate(MODEL, CLUSTER, w, parse_label(label))


INTERLEAVED = "dp4 tp4 pp4 vpp4 zero1 mb1 rc-full interleaved_1f1b sp"
PLAIN = "dp4 tp4 pp4 zero1 mb1 rc-full 1f1b sp"


def test_exposed_part_is_what_the_next_chunk_does_not_cover():
    assert p2p_exposed_s("megatron", 4, 1.0, 0.25) == 0.75
    assert p2p_exposed_s("nemo", 4, 1.0, 2.0) == 0.0
    assert p2p_exposed_s("megatron", 1, 1.0, 2.0) == 1.0  # 1F1B: no overlap in Megatron
    assert p2p_exposed_s("torchtitan", 4, 1.0, 2.0) == 1.0


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
def test_megatron_hides_interleaved_transfers_and_keeps_their_wire_time(framework):
    hidden, shown = _est(framework, INTERLEAVED), _est("torchtitan", INTERLEAVED)
    pp_h = next(c for c in hidden.comm if c.axis == "pp")
    pp_s = next(c for c in shown.comm if c.axis == "pp")
    assert pp_s.exposed_s > 0 and pp_s.exposed_s == pytest.approx(pp_s.wire_s)
    # a 70B chunk of 5 layers computes far longer than one 4096 x 8192 bf16 send over NVLink
    assert hidden.step_time.parts["pp_p2p_s"] == 0.0 and pp_h.exposed_s == 0.0
    assert pp_h.wire_s == pytest.approx(pp_s.wire_s)
    # the step's parts still sum to the step
    assert sum(hidden.step_time.parts.values()) == pytest.approx(hidden.step_time_s)


def test_plain_1f1b_waits_for_every_transfer_in_every_engine():
    a, b = _est("megatron", PLAIN), _est("torchtitan", PLAIN)
    assert a.step_time.parts["pp_p2p_s"] > 0
    assert a.step_time.parts["pp_p2p_s"] == pytest.approx(b.step_time.parts["pp_p2p_s"])
