"""Ranking of measured layout sets (meshplan/ranking.py; issue 9's ranking target)."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from meshplan.cli import main
from meshplan.ranking import (average_ranks, expected_ranks, meets_target, set_report, spearman,
                              spearman_noise)
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


def test_expected_ranks_without_noise_are_average_ranks():
    xs = [10, 20, 20, 30, 5]
    assert expected_ranks(xs, [0] * 5) == average_ranks(xs)


def test_expected_ranks_hand_computed():
    # 100 and 101 each with 1% noise: P(Y_100 < Y_101) = Phi(ln(1.01) / (0.01 * sqrt 2))
    # = Phi(0.70359) = 0.75915 (normal table); 1000 is far above both
    r = expected_ranks([100, 101, 1000], [0.01, 0.01, 0.01])
    assert r == pytest.approx([1 + 0.24085, 1 + 0.75915, 3.0], abs=1e-4)
    with pytest.raises(ValueError):
        expected_ranks([1, -2], [0, 0])


def test_noise_forgives_order_within_noise_only():
    pred = [1, 2, 3, 4]
    # the predictor swaps the two layouts measured 0.3% apart, and gets the rest right
    meas = [100, 99.7, 120, 150]
    raw = spearman(pred, meas)
    assert raw == pytest.approx(0.8)
    noisy = spearman_noise(pred, meas, [0.01] * 4)
    assert raw < noisy < 1.0
    assert spearman_noise(pred, meas, [0.0] * 4) == pytest.approx(raw)
    # a swap far outside the noise is not forgiven
    assert spearman_noise(pred, [150, 100, 120, 130], [0.01] * 4) == pytest.approx(
        spearman(pred, [150, 100, 120, 130]), abs=1e-6)


def test_best_gap_allowance_judged():
    d = {"spearman": 0.95, "spearman_noise": 0.95, "best_gap": 0.04,
         "best_gap_allowance": 1.6448536 * 2 ** 0.5 * 0.01}
    assert meets_target(d)  # 4% - 2.3% allowance <= 3%
    assert not meets_target(dict(d, best_gap_allowance=0.0))
    assert not meets_target(dict(d, spearman_noise=0.85))


def _res(i, s, pred, meas, oom=False, noise=None):
    return SimpleNamespace(id=i, layout_set=s, error=None, predicted_tokens_per_s_per_gpu=pred,
                           measured_tokens_per_s_per_gpu=meas, predicted_oom=oom,
                           measured_noise=noise)


def test_set_report_noise_keys():
    rs = [_res("a", "S", 1, 100, noise=0.01), _res("b", "S", 2, 99.7, noise=0.01),
          _res("c", "S", 3, 120, noise=0.01), _res("d", "S", 4, 150, noise=0.01)]
    d = set_report(rs)["S"]
    assert d["spearman"] == pytest.approx(0.8) and d["spearman_noise"] > 0.8
    assert d["noise"] == 0.01 and d["best_gap"] == 0
    assert d["best_gap_allowance"] == pytest.approx(1.6448536 * 2 ** 0.5 * 0.01)
    rs0 = [_res(r.id, "S", r.predicted_tokens_per_s_per_gpu, r.measured_tokens_per_s_per_gpu)
           for r in rs]
    d0 = set_report(rs0)["S"]
    assert d0["spearman_noise"] == d0["spearman"] and d0["best_gap_allowance"] == 0


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


def test_noise_column_checked_and_single_row_set_printed(tmp_path, capsys):
    rows = TOY.format(a=30000, b=20000, c=10000).splitlines()
    p = tmp_path / "sets.csv"
    # one row with an impossible noise (not scored, names the column), one ranked row left
    p.write_text("\n".join([rows[0] + ",measured_noise", rows[1] + ",1.5", rows[2] + ",0.01"])
                 + "\n")
    assert main(["validate", str(p), "--no-search", "--jobs", "1"]) == 1  # a row not scored
    out = capsys.readouterr().out
    assert "measured_noise=1.5" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("toyset:"))
    assert "rows 1" in line and "Spearman - with noise 1.0%" in line


def test_no_set_column_no_ranking(tmp_path, capsys):
    p = tmp_path / "runs.csv"
    p.write_text("\n".join(ln.split(",", 2)[0] + "," + ln.split(",", 2)[2]
                           for ln in TOY.format(a=3, b=2, c=1).splitlines()) + "\n")
    assert main(["validate", str(p), "--no-search", "--jobs", "1"]) == 0
    assert "ranking" not in capsys.readouterr().out


# Measured on bench/data/layout_sets.csv at this commit (2026-11-23, branch rank) (`meshplan validate
# bench/data/layout_sets.csv`); the pins catch a change that makes the ranking worse. They are
# far from issue 9's target (Spearman >= 0.9): see the closing note for the diagnosis.
# Re-measured after the merge of the engines' flush sync and stage split, size-dependent
# collectives and the per-shape GEMM model (2026-11-23); bloom181b-a100x384-0221 (7 rows)
# went 0.179 -> -0.179 with the GEMM model: one swap among predictions within 1.5% (L025-L027).
MEASURED = {"bloom181b-a100x384-0221": -0.179, "bloom181b-a100x384-0225": 0.034,
            "llama13b-2k-a100x64": 0.818, "llama13b-8k-a100x128": 0.832,
            "llama30b-2k-a100x256": 0.667, "llama30b-8k-a100x128": 0.879,
            "llama65b-2k-a100x128": 0.960,
            # the sequence-parallelism sheets of the same authors (data/seqpara; fused norm,
            # no recomputation), held out, entered 2026-11-29 (branch fix-layouts) and
            # measured once, after the norm_kernel column and before any change for them
            "llama13b-2k-a100x32": 0.691, "llama13b-8k-a100x64": 0.994,
            "llama30b-2k-a100x64": 0.922, "llama30b-8k-a100x64": 0.964,
            "llama65b-2k-a100x64": 0.917}
MARGIN = 0.1


@pytest.mark.skipif(not LAYOUT_SETS.exists(), reason=f"no layout sets at {LAYOUT_SETS}")
def test_published_layout_sets_ranking_pinned():
    results, s = validate(LAYOUT_SETS, with_search_best=False)
    assert s["errors"] == 0, [r.error for r in results if r.error]
    rk = s["ranking"]
    for name, rho in MEASURED.items():
        assert rk[name]["rows"] >= 5
        assert rk[name]["spearman"] >= rho - MARGIN, (name, rk[name])


@pytest.mark.skipif(not LAYOUT_SETS.exists(), reason=f"no layout sets at {LAYOUT_SETS}")
def test_bloom_noise_is_the_pooled_sd_of_the_repeated_timings():
    # chronicles-prequel.md times three configurations more than once (Sec/it as printed):
    # (110.48, 113.54), (121.48, 120.85, 120.18), (123.69, 123.79); pooled sd of ln(Sec/it)
    import csv
    groups = [(110.48, 113.54), (121.48, 120.85, 120.18), (123.69, 123.79)]
    ss = sum(sum((math.log(x) - sum(map(math.log, g)) / len(g)) ** 2 for x in g) for g in groups)
    sd = math.sqrt(ss / sum(len(g) - 1 for g in groups))
    rows = [r for r in csv.DictReader(open(LAYOUT_SETS)) if r["set"].startswith("bloom")
            and r["measured_tokens_per_s_per_gpu"]]
    assert rows and all(float(r["measured_noise"]) == pytest.approx(sd, abs=1e-4) for r in rows)
    assert 0.009 < sd < 0.011
