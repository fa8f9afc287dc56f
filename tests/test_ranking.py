"""Ranking of measured layout sets (meshplan/ranking.py; issue 9's ranking target)."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from meshplan.cli import main
from meshplan.ranking import average_ranks, set_report, spearman
from meshplan.validate import validate

ROOT = Path(__file__).resolve().parents[1]
LAYOUT_SETS = ROOT / "bench" / "data" / "layout_sets.csv"


def test_average_ranks_ties_share_the_mean_rank():
    assert average_ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]
    assert average_ranks([3, 1, 2]) == [3, 1, 2]
    assert average_ranks([5, 5, 5]) == [2, 2, 2]


def test_spearman_hand_computed():
    # no ties: d = (-1, 1, -1, 1, 0), rho = 1 - 6*sum(d^2)/(n(n^2-1)) = 1 - 24/120
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)
    # ties: ranks x (1, 2.5, 2.5, 4), y (1, 3, 2, 4): Pearson of the ranks = 4.5/sqrt(4.5*5)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(math.sqrt(0.9))
    # monotone transforms do not matter, reversal gives -1
    assert spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [9, 7, 5, 1]) == pytest.approx(-1.0)


def test_spearman_undefined_cases():
    assert spearman([1], [2]) is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    with pytest.raises(ValueError):
        spearman([1, 2], [1, 2, 3])


def _res(i, s, pred, meas, oom=False):
    return SimpleNamespace(id=i, layout_set=s, error=None, predicted_tokens_per_s_per_gpu=pred,
                           measured_tokens_per_s_per_gpu=meas, predicted_oom=oom)


def test_set_report_gap_and_oom_exclusion():
    rs = [_res("a", "S", 100, 90), _res("b", "S", 120, 100, oom=True), _res("c", "S", 110, 95),
          _res("d", "S", 105, None), _res("e", "", 1, 1)]
    d = set_report(rs)["S"]
    assert d["rows"] == 3  # d has no measured throughput, e has no set
    # the planner never proposes b (predicted out of memory): it picks c, measured 95 vs 100
    assert d["predicted_best"] == "c" and d["measured_best"] == "b"
    assert d["best_gap"] == pytest.approx(0.05)
    assert d["spearman"] == pytest.approx(1.0)
    assert set_report([_res("e", "", 1, 1)]) == {}


# synthetic measured values (not published data): only the report's plumbing is tested here
TOY = ("id,set,trust,model,arch,layers,hidden,heads,kv_heads,ffn,vocab,mlp,seq_len,"
       "global_batch_seqs,micro_batch,gpu,num_gpus,tp,pp,dp,recompute,precision,"
       "measured_tokens_per_s_per_gpu\n"
       "1,toyset,A,toy,dense,12,768,12,12,3072,50304,gelu,2048,64,1,A100-SXM-80GB,8,1,1,8,none,bf16,{a}\n"
       "2,toyset,A,toy,dense,12,768,12,12,3072,50304,gelu,2048,64,1,A100-SXM-80GB,8,2,1,4,none,bf16,{b}\n"
       "3,toyset,A,toy,dense,12,768,12,12,3072,50304,gelu,2048,64,1,A100-SXM-80GB,8,4,1,2,none,bf16,{c}\n")


def test_validate_prints_ranking_lines(tmp_path, capsys):
    p = tmp_path / "sets.csv"
    p.write_text(TOY.format(a=30000, b=20000, c=10000))
    assert main(["validate", str(p), "--no-search", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "ranking per layout set" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("toyset:"))
    assert "rows 3" in line and "Spearman" in line and "measured best 1" in line
    assert main(["validate", str(p), "--no-search", "--jobs", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rk = data["summary"]["ranking"]["toyset"]
    assert rk["rows"] == 3 and -1 <= rk["spearman"] <= 1 and 0 <= rk["best_gap"] < 1
    assert {r["set"] for r in data["rows"]} == {"toyset"}


def test_no_set_column_no_ranking(tmp_path, capsys):
    p = tmp_path / "runs.csv"
    p.write_text("\n".join(ln.split(",", 2)[0] + "," + ln.split(",", 2)[2]
                           for ln in TOY.format(a=3, b=2, c=1).splitlines()) + "\n")
    assert main(["validate", str(p), "--no-search", "--jobs", "1"]) == 0
    assert "ranking" not in capsys.readouterr().out


# Measured on bench/data/layout_sets.csv at this commit (`meshplan validate
# bench/data/layout_sets.csv`); the pins catch a change that makes the ranking worse. They are
# far from issue 9's target (Spearman >= 0.9): see the closing note for the diagnosis.
# bloom181b-a100x384-0221 (7 rows) re-pinned at -0.179 with the per-shape GEMM model
# (cost/gemm.py): one swap among predictions within 1.5% of each other (L025-L027).
MEASURED = {"bloom181b-a100x384-0221": -0.179, "bloom181b-a100x384-0225": -0.034,
            "llama13b-2k-a100x64": 0.797, "llama13b-8k-a100x128": 0.528,
            "llama30b-2k-a100x256": 0.397, "llama30b-8k-a100x128": 0.529,
            "llama65b-2k-a100x128": 0.730}
MARGIN = 0.1


@pytest.mark.skipif(not LAYOUT_SETS.exists(), reason=f"no layout sets at {LAYOUT_SETS}")
def test_published_layout_sets_ranking_pinned():
    results, s = validate(LAYOUT_SETS, with_search_best=False)
    assert s["errors"] == 0, [r.error for r in results if r.error]
    rk = s["ranking"]
    for name, rho in MEASURED.items():
        assert rk[name]["rows"] >= 5
        assert rk[name]["spearman"] >= rho - MARGIN, (name, rk[name])
