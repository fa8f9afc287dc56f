"""The note printed when a profile's [meta] names another GPU generation than the cluster's
says which of its constants apply (commands/_profile.check_generation)."""

import json

import pytest

from meshplan.cli import main
from meshplan.commands._profile import reset

ARGS = ["predict", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "8192",
        "--global-batch", "64", "--plan", "dp2 tp4 pp1 zero1 mb1", "--json"]


@pytest.fixture(autouse=True)
def _undo():
    yield
    reset()


def _step(capsys, *extra):
    assert main([*ARGS, *extra]) == 0
    out, err = capsys.readouterr()
    return json.loads(out)["step_time_s"], err


def test_a_constant_of_this_generation_applies_and_the_note_says_so(tmp_path, capsys):
    """[meta] generation = "ampere" with a Hopper constant, on H100: the note said "only its
    generation-independent constants apply" while the Hopper GEMM efficiency (0.4, half the
    default 0.8) made the step slower; and it printed "ampere (ampere)"."""
    base, _ = _step(capsys)
    p = tmp_path / "edit1.toml"
    p.write_text('[meta]\ngeneration = "ampere"\n[constants]\n'
                 '"EFFICIENCY.hopper.matmul_bf16" = 0.4\n')
    slow, err = _step(capsys, "--profile", str(p))
    assert slow > base * 1.3  # GEMMs at half the rate: the constant is applied
    assert "these apply: EFFICIENCY.hopper.matmul_bf16" in err
    assert "generation-independent" not in err and "ampere (ampere)" not in err


def test_a_constant_of_another_generation_is_named_as_not_applying(tmp_path, capsys):
    base, _ = _step(capsys)
    p = tmp_path / "amp.toml"
    p.write_text('[meta]\ngeneration = "ampere"\ngpu = "A100-SXM-80GB"\n[constants]\n'
                 '"EFFICIENCY.ampere.matmul_bf16" = 0.4\n"NETWORK.tp_overlap" = 0.5\n')
    _, err = _step(capsys, "--profile", str(p))
    assert "measured on A100-SXM-80GB (ampere)" in err
    assert "these apply: NETWORK.tp_overlap" in err
    assert "these do not: EFFICIENCY.ampere.matmul_bf16" in err
