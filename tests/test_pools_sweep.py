"""Procurement and pools: what the tables quote and which input they take (a tester's sweep)."""

import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.search.objective import Goal, fmt_usd, parse_duration_s, parse_tokens, parse_usd
from meshplan.search.procure import procure
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
M = preset("llama3.1-8b")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "meshplan.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_over_budget_quotes_the_cheapest_count_that_meets_the_deadline():
    """The reason quoted the cost at the last count tried (16,384 H100: $97.1k); it must quote
    the cheapest count that meets 3 days (64-256 GPUs at about $12.1k against $10k: several
    counts lie within 0.5% of each other, so which one is cheapest follows the cost model;
    the rule is that the reason names the curve's own minimum, not the last count)."""
    goal = Goal("throughput", parse_tokens("100B"), parse_duration_s("3d"), parse_usd("10k"))
    row = procure(M, Workload(8192, 256), [GPUS["H100-SXM-80GB"]], goal).rows[0]
    assert row.outcome is None
    meeting = [(o.cost_to_train_usd, n) for n, o in row.curve
               if o.time_to_train_s <= goal.deadline_s]
    cost, n = min(meeting)
    last = row.curve[-1][0]
    assert n != last and dict(row.curve)[last].cost_to_train_usd > 5 * cost
    # n GPUs x 3.99 $/h x the hours at that count
    hours = dict(row.curve)[n].time_to_train_s / 3600
    assert cost == pytest.approx(n * 3.99 * hours, rel=1e-12)
    assert row.reason.startswith(f"{n} GPUs meet the deadline")
    assert fmt_usd(cost) in row.reason and fmt_usd(cost - 10e3) + " over the budget" in row.reason


def test_pools_list_each_plan_once():
    """The H100 pool's best (dp8 tp2) and the A100 pool's (dp16 tp2) differ only in dp and
    gave the same data-parallel plan across pools twice (#1 and #2)."""
    from meshplan.scenario import make_pools
    from meshplan.search.hetero import search_pools

    pc = make_pools("16xH100-SXM-80GB+32xA100-SXM-80GB", prices={"A100-SXM-80GB": 1.5})
    r = search_pools(M, pc, Workload(8192, 256), top_k=10)
    labels = [p.describe() for p in r.ranked]
    assert len(labels) == len(set(labels)), labels
    assert sum(p.kind == "data" for p in r.ranked) >= 1


@pytest.mark.parametrize("price, per_hour", [("", "$64/h"), (", price = 2.0", "$32/h")])
def test_one_pool_scenario_is_an_ordinary_cluster(tmp_path, price, per_hour):
    """`plan --scenario` with one pool was refused ("pools are planned by `meshplan plan`")
    by meshplan plan itself. It plans as --gpus 16xH100-SXM-80GB does, at the pool's price
    where it gives one (16 x 3.99 = $64/h at the catalog price, 16 x 2.0 = $32/h)."""
    s = tmp_path / "s.toml"
    s.write_text('[model]\npreset = "llama3.1-8b"\n[cluster]\n'
                 f'pools = [ {{ gpus = "16xH100-SXM-80GB"{price} }} ]\n'
                 "[workload]\nseq_len = 4096\nglobal_batch = 64\n")
    r = cli("plan", "--scenario", str(s), "--train-tokens", "10B")
    assert r.returncode == 0, r.stderr
    plain = cli("plan", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len",
                "4096", "--global-batch", "64", "--train-tokens", "10B")
    best = [ln for ln in r.stdout.splitlines() if ln.startswith(" 1 ")]
    assert best and best == [ln for ln in plain.stdout.splitlines() if ln.startswith(" 1 ")]
    money = [ln for ln in r.stdout.splitlines() if ln.startswith("money")]
    assert len(money) == 1 and per_hour in money[0]


PROC = ["plan", "--model", "llama3.1-8b", "--seq-len", "8192", "--global-batch", "256",
        "--train-tokens", "100B", "--deadline", "10d"]


@pytest.mark.parametrize("extra, needle", [
    (["--gpu-types", "H100-SXM-80GB,H100-SXM-80GB"], "--gpu-types='H100-SXM-80GB,H100-SXM-80GB'"
     ": names H100-SXM-80GB twice"),                       # was printed twice
    (["--gpu-types", "H100-SXM-80GB,,MI300X"], "has an empty entry"),  # was skipped silently
    (["--gpu-types", ""], "--gpu-types='': is blank"),     # said --gpus=None: required
    (["--gpu-types", "MI300X", "--gpus", "8xH100-SXM-80GB"], "not taken with --gpu-types"),
    (["--gpu-types", "H100-SXM-80GB", "--png", "/nonexist/x.png"],  # after the search, 'output'
     "--png='/nonexist/x.png': its directory does not exist"),
])
def test_procurement_input_refused_in_one_line_before_the_search(extra, needle):
    r = cli(*PROC, *extra)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
