"""bench/fit_constants.py on a user's runs CSV: the rows it fits on are the ones `meshplan
validate` counts among its trust A/B figures (blank and lower-case grades included), and a
file with none is refused instead of "fitted" on nothing."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
try:
    import fit_constants
finally:
    sys.path.pop(0)

from meshplan.validate import RowResult, summarize  # noqa: E402


@pytest.mark.parametrize("trust", ["A", "B", "a", "b", "", " A ", "C", "c"])
def test_fitted_rows_are_validates_trust_ab_rows(trust):
    # validate's own count: a predicted row with a tokens error, graded `trust`
    r = RowResult(id="1", trust=trust.strip().upper(), model="m", gpus="8xH100-SXM-80GB",
                  measured_tokens_per_s_per_gpu=100.0, predicted_tokens_per_s_per_gpu=110.0)
    counted = summarize([r])["tokens_rows_trust_ab"] == 1
    assert fit_constants.graded_ab({"trust": trust}) == counted


def test_no_rows_to_fit_on_is_refused(tmp_path, capsys):
    """A file of grade-C rows (or, before, of ungraded ones) printed the grid's first point
    as the constants "fitted on all calibration sources" with every error n/a."""
    p = tmp_path / "runs.csv"
    p.write_text("id,trust,model,gpu,num_gpus,seq_len,global_batch_seqs,"
                 "measured_tokens_per_s_per_gpu\n"
                 "1,C,Llama 3.1 8B,H100-SXM-80GB,8,4096,64,9000\n")
    with pytest.raises(SystemExit) as e:
        fit_constants.main(str(p))
    assert "no trust A/B" in str(e.value.code)
    assert "fitted on" not in capsys.readouterr().out
