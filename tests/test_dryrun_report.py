"""How `meshplan dryrun` prints its figures (commands/dryrun.py format_stages), on hand-made
measurements: no dry run is started."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from meshplan.commands.dryrun import format_stages  # noqa: E402

MiB, GiB = 2**20, 2**30


def test_a_small_stage_is_printed_in_mib_not_as_zeros():
    """A tiny model's stage (4.33 MiB, as tiny-llama's pp rank 0 on dp2 pp2) printed
    'measured peak 0.00 GiB = Parameter 0.00, ...': every figure zero."""
    m = {"Total": int(4.33 * MiB), "Parameter": int(0.56 * MiB), "Activation": int(2.73 * MiB)}
    text = format_stages([m], None)
    assert "measured peak 4.33 MiB = Parameter 0.56, Activation 2.73" in text


def test_a_large_stage_stays_in_gib():
    m = {"Total": 3 * GiB, "Parameter": GiB, "Activation": 2 * GiB}
    assert "measured peak 3.00 GiB = Parameter 1.00, Activation 2.00" in format_stages([m], None)


def test_each_line_names_its_own_unit_beside_the_cost_model():
    m = {"Total": 4 * MiB, "Parameter": MiB, "Optstate": 2 * MiB, "Activation": MiB}
    pred = {"Total": 2 * GiB, "weights": MiB, "gradients": MiB, "optimizer_states": 2 * MiB,
            "activations": MiB, "cuda_context": 2 * GiB - 5 * MiB}
    lines = format_stages([m], [pred]).splitlines()
    assert lines[0].startswith("pp rank 0: measured peak 4.00 MiB")
    assert "cost model 2.00 GiB" in lines[1]
    assert all(ln.rstrip().endswith("MiB") for ln in lines[2:]), lines
