"""Pools, prices, objectives, procurement and plans across pools (issue 11)."""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.cost.hetero import UnevenPlan, pipeline_across_pools
from meshplan.errors import InputError
from meshplan.scenario import load_scenario, make_cluster, make_pools
from meshplan.search.hetero import min_max_split, search_pools, search_split
from meshplan.search.objective import Goal, Outcome, parse_duration_s, parse_tokens, parse_usd
from meshplan.search.procure import ladder, procure
from meshplan.search.search import search
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.catalog.presets import preset
from meshplan.specs.pools import Pool, PoolCluster
from meshplan.specs.prices import catalog_prices, price_of
from meshplan.specs.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
W = Workload(4096, 32)
M = preset("llama3.1-8b")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "meshplan.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


# ---- one pool is today's cluster ----------------------------------------------------
def test_one_pool_gives_exactly_the_homogeneous_result():
    pc = make_pools("16xH100-SXM-80GB")
    assert pc.is_homogeneous and pc.pools[0].cluster == make_cluster("16xH100-SXM-80GB")
    today = search(M, make_cluster("16xH100-SXM-80GB"), W, top_k=1, rerank_k=5)
    r = search_pools(M, pc, W, top_k=1, single_rerank_k=5)
    best = r.best
    assert best.kind == "single" and best.plan == today.best.plan
    sim = today.simulated.get(today.best.plan)
    want = sim.step_time_s if sim else today.best.step_time_s
    assert best.step_time_s == want  # to the last digit
    assert best.estimate.step_time.parts == today.best.step_time.parts


def test_plain_gpus_flag_stays_on_the_homogeneous_path():
    from meshplan.commands._pools import pooled_scenario
    import argparse
    args = argparse.Namespace(gpus="16xH100-SXM-80GB", scenario=None)
    assert pooled_scenario(args) is None


# ---- the layer split ----------------------------------------------------------------
def _fast(gpu, factor, name):
    return dataclasses.replace(gpu, name=name,
                               peak_flops={k: v * factor for k, v in gpu.peak_flops.items()},
                               memory_bytes_per_s=gpu.memory_bytes_per_s * factor,
                               memory_bytes=1024 * 2**30)


def test_a_pool_twice_as_fast_gets_about_twice_the_layers():
    from meshplan.specs.hardware import Cluster
    h = GPUS["H100-SXM-80GB"]
    slow, fast = _fast(h, 1.0, "SLOW"), _fast(h, 2.0, "FAST")
    price = price_of("H100-SXM-80GB")
    pc = PoolCluster((Pool(Cluster(fast, 1), price), Pool(Cluster(slow, 1), price)))
    plan = UnevenPlan(pp=2, micro_batch=1)
    from collections import Counter
    # a small vocabulary: the output layer (on the last stage) would otherwise weigh as much
    # as ~2.4 of llama3.1-8b's layers and rightly take layers off its stage
    m = dataclasses.replace(M, vocab=1024)
    up, ests = search_split(m, pc, Workload(4096, 16), plan, (0, 1), Counter())
    fast_layers, slow_layers = up.split
    assert sum(up.split) == m.layers
    assert 1.75 <= fast_layers / slow_layers <= 2.3, up.split  # 32 layers: about 21 / 11
    # with the real vocabulary the slow last stage holds the output layer: fewer layers
    up2, _ = search_split(M, pc, Workload(4096, 16), plan, (0, 1), Counter())
    assert up2.split[1] < slow_layers
    p = pipeline_across_pools(m, pc, Workload(4096, 16), up, (0, 1), ests)
    assert [s.layers for s in p.stages] == list(up.split)
    assert p.rank_map == [(0, 0, "FAST"), (1, 1, "SLOW")]


def test_min_max_split_balances_and_respects_caps():
    # per-layer 1 s and 2 s, no fixed part: 30 layers -> 20 / 10
    assert min_max_split(30, [(1.0, 0.0), (2.0, 0.0)], [30, 30]) == (20, 10)
    assert min_max_split(30, [(1.0, 0.0), (2.0, 0.0)], [15, 30]) == (15, 15)
    assert min_max_split(30, [(1.0, 0.0), (2.0, 0.0)], [10, 10]) is None


def test_memory_is_judged_per_stage_on_its_own_gpu():
    pc = make_pools("8xH100-SXM-80GB+8xA100-SXM-40GB")
    r = search_pools(M, pc, W, top_k=3, single_rerank_k=0)
    for p in r.ranked:
        for s in p.stages:
            assert s.capacity_bytes == GPUS[s.pool].memory_bytes
            assert s.fits


# ---- adding a slower pool -------------------------------------------------------------
def test_adding_a_slower_pool_never_lowers_the_best_throughput():
    alone = search_pools(M, make_pools("8xH100-SXM-80GB"), W, top_k=1, single_rerank_k=5)
    both = search_pools(M, make_pools("8xH100-SXM-80GB+8xA100-SXM-80GB"), W, top_k=3,
                        single_rerank_k=5)
    assert both.best.tokens_per_s >= alone.best.tokens_per_s
    kinds = {p.kind for p in both.ranked}
    assert kinds & {"pipeline", "data"}  # plans across pools were found and ranked


def test_objective_cost_can_leave_the_expensive_pool_out():
    pc = make_pools("8xH100-SXM-80GB+8xA100-SXM-80GB")
    cheap = search_pools(M, pc, W, Goal("cost"), top_k=5, single_rerank_k=0)
    o = [Outcome(p.tokens_per_s, p.usd_per_hour, p.num_gpus) for p in cheap.ranked]
    assert [x.usd_per_million_tokens for x in o] == sorted(x.usd_per_million_tokens for x in o)


# ---- money ---------------------------------------------------------------------------
def test_cost_is_gpus_times_price_times_time_exactly():
    o = Outcome(tokens_per_s=1.0e6, usd_per_hour=512 * 3.99, num_gpus=512, train_tokens=2e12)
    hours = 2e12 / 1.0e6 / 3600
    assert o.cost_to_train_usd == pytest.approx(512 * 3.99 * hours, rel=1e-15)
    assert o.usd_per_million_tokens == pytest.approx(512 * 3.99 / 3600 / 1.0e6 * 1e6, rel=1e-15)


def test_procurement_row_cost_and_fewest_count():
    goal = Goal("throughput", parse_tokens("20B"), parse_duration_s("7d"))
    res = procure(M, W, [GPUS["H100-SXM-80GB"]], goal)
    row = res.rows[0]
    assert row.num_gpus > 0
    tps = row.estimate.tokens_per_s
    hours = goal.train_tokens / tps / 3600
    assert row.outcome.cost_to_train_usd == pytest.approx(
        row.num_gpus * catalog_prices()["H100-SXM-80GB"].usd_per_gpu_hour * hours, rel=1e-12)
    assert row.outcome.time_to_train_s <= goal.deadline_s
    # the rung below on the ladder either has no fitting plan or misses the deadline
    below = [n for n in ladder(8, 16384) if n < row.num_gpus]
    if below:
        prev = dict(row.curve).get(below[-1])
        assert prev is None or prev.time_to_train_s > goal.deadline_s


def test_units_parse():
    assert parse_tokens("15T") == 15e12 and parse_tokens("300B") == 300e9
    assert parse_duration_s("90d") == 90 * 86400 and parse_duration_s("36h") == 36 * 3600
    assert parse_usd("2.5M") == 2.5e6 and parse_usd("$800k") == 800e3
    for bad in ("", "-1T", "2X", "nan"):
        with pytest.raises(InputError):
            parse_tokens(bad)


def test_every_catalog_gpu_has_a_dated_sourced_price():
    prices = catalog_prices()
    for name in GPUS:
        p = prices[name]
        assert p.usd_per_gpu_hour > 0 and p.source and p.date


# ---- scenario files ------------------------------------------------------------------
def test_scenario_pools_with_prices(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[model]\npreset = "llama3.1-8b"\n[cluster]\ninter_pool_gbps = 100\n'
                 'pools = [{gpus = "8xH100-SXM-80GB", price = 2.49},'
                 ' {gpus = "16xA100-SXM-80GB", nic_gbps_per_gpu = 100}]\n'
                 '[workload]\nseq_len = 4096\nglobal_batch = 32\n')
    sc = load_scenario(f)
    assert [p.num_gpus for p in sc.pools.pools] == [8, 16]
    assert sc.pools.pools[0].price.usd_per_gpu_hour == 2.49
    assert sc.pools.pools[1].price == catalog_prices()["A100-SXM-80GB"]
    assert sc.pools.inter_pool_bytes_per_s == 100 / 8 * 1e9
    r = cli("predict", "--scenario", str(f), "--dp", "8")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


# ---- bad input: one line, exit 2 -------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["--gpus", "8xH100-SXM-80GB+8xNOPE"],                  # unknown GPU in a pool
    ["--gpus", "8xH100-SXM-80GB++8xA100-SXM-80GB"],        # malformed pool string
    ["--gpus", "8xH100-SXM-80GB+A100-SXM-80GB"],           # a pool without a count
    ["--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB", "--price", "A100-SXM-80GB=cheap"],
    ["--gpus", "8xH100-SXM-80GB", "--price", "H100-SXM-80GB=-2"],
    ["--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB", "--price", "NOPE=2"],
    ["--gpus", "8xH100-SXM-80GB+8xH100-SXM-80GB"],         # one type twice
    ["--gpus", "8xH100-SXM-80GB", "--deadline", "30d"],   # deadline without tokens
    ["--gpus", "8xH100-SXM-80GB", "--train-tokens", "1T", "--deadline", "soon"],
    ["--gpu-types", "H100-SXM-80GB,NOPE", "--train-tokens", "1T"],
    ["--gpus", "8xH100-SXM-80GB", "--max-gpus", "0"],     # 0 was read as "no limit"
    ["--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB", "--inter-pool-gbps", "0"],
    ["--gpus", "8xH100-SXM-80GB", "--budget", "-5"],
    ["--gpus", "8xH100-SXM-80GB", "--objective", "time"],   # time needs --train-tokens
])
def test_bad_input_is_one_line_exit_2(args):
    r = cli("plan", "--model", "llama3.1-8b", "--seq-len", "4096", "--global-batch", "32", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert r.stdout == ""


# ---- exports ---------------------------------------------------------------------------
def test_pipeline_across_pools_exports_to_megatron_and_deepspeed_refuses():
    from meshplan.commands._pools import export_pool_plan
    from meshplan.scenario import Scenario
    from meshplan.specs.hardware import Cluster
    from meshplan.export import UnsupportedByEngine
    pc = make_pools("8xH100-SXM-80GB+8xA100-SXM-80GB")
    from collections import Counter
    plan = UnevenPlan(tp=8, pp=2)
    up, ests = search_split(M, pc, W, plan, (0, 1), Counter())
    p = pipeline_across_pools(M, pc, W, up, (0, 1), ests)
    sc = Scenario(M, pc.pools[0].cluster, W, None, pc)
    rendered = export_pool_plan(sc, p, "megatron")
    text = "\n".join(rendered.files.values())
    if len(set(up.split)) > 1:
        assert "--pipeline-model-parallel-layout" in text
    assert any("ranks 0-7: H100-SXM-80GB" in n for n in rendered.notes)
    with pytest.raises(UnsupportedByEngine):
        export_pool_plan(sc, p, "deepspeed")


def test_export_meshplan_of_pools_takes_a_single_pool(tmp_path):
    # `meshplan run` takes one GPU type per job: the export ranks only single-pool plans
    # (this raised KeyError before)
    r = cli("plan", "--model", "llama3.1-8b", "--seq-len", "4096", "--global-batch", "32",
            "--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB", "--export", "meshplan",
            "--out", str(tmp_path), "--top", "1")
    assert r.returncode == 0, r.stderr
    assert "only]" in r.stdout and "Traceback" not in r.stderr
    text = (tmp_path / "plan.toml").read_text()
    assert 'gpus = "8xH100-SXM-80GB"' in text or 'gpus = "8xA100-SXM-80GB"' in text


def test_data_parallel_across_pools_splits_the_batch_by_speed():
    from meshplan.cost.hetero import data_across_pools
    from meshplan.plan import Plan
    pc = make_pools("8xH100-SXM-80GB+8xA100-SXM-80GB")
    plan = Plan(dp=16, zero=3, micro_batch=2)
    p = data_across_pools(M, pc, Workload(4096, 64), plan, {0: 8, 1: 8}, {0: 6, 1: 2})
    assert p.kind == "data" and p.num_gpus == 16
    assert p.rank_map == [(0, 7, "H100-SXM-80GB"), (8, 15, "A100-SXM-80GB")]
    assert p.step_parts["cross_pool_reduce_s"] > 0
    assert p.step_time_s == pytest.approx(sum(p.step_parts.values()))
    with pytest.raises(InputError):  # the replicas must hold the global batch
        data_across_pools(M, pc, Workload(4096, 64), plan, {0: 8, 1: 8}, {0: 4, 1: 2})
    r = search_pools(M, pc, Workload(4096, 64), top_k=20, single_rerank_k=0)
    data = [c for c in r.ranked if c.kind == "data"]
    assert data
    # each replica's share of the batch follows its speed: an H100 runs this model ~2.8x an
    # A100 (bf16 peaks 989 / 312 TFLOP/s, less the H100's lower share of its peak)
    shares = {gpu: int(n) for n, gpu in re.findall(r"x (\d+) seq on (\S+) \(", data[0].detail)}
    assert 2.0 <= shares["H100-SXM-80GB"] / shares["A100-SXM-80GB"] <= 4.0, data[0].detail
    steps = list(data[0].pool_step_s.values())
    assert max(steps) / min(steps) < 1.2  # the split balances the pools' own steps


def test_procurement_cli_table_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "cost.png"
    r = cli("plan", "--model", "llama3.1-8b", "--seq-len", "4096", "--global-batch", "64",
            "--train-tokens", "50B", "--deadline", "10d",
            "--gpu-types", "H100-SXM-80GB,MI300X", "--png", str(png))
    assert r.returncode == 0, r.stderr
    assert "<- cheapest" in r.stdout and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gpus_lists_prices_and_overrides():
    r = cli("gpus", "--price", "H100-SXM-80GB=2.49")
    assert r.returncode == 0
    line = next(x for x in r.stdout.splitlines() if x.startswith("H100-SXM-80GB "))
    assert "2.49" in line
    line = next(x for x in r.stdout.splitlines() if x.startswith("GB200 "))
    assert "estimate" in line


def test_export_torchtitan_searches_what_it_can_run(tmp_path):
    r = cli("plan", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB",
            "--seq-len", "4096", "--global-batch", "64", "--top", "1", "--json",
            "--export", "torchtitan", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    import json
    best = json.loads(r.stdout)["ranked"][0]
    assert best["plan"]["zero"] in (2, 3) and best["plan"]["schedule"] != "zb_h1"
    job = (tmp_path / "torchtitan_job.py").read_text()
    if best["kind"] == "pipeline":
        split = best["plan"]["split"]
        assert len(split) == 2 and job.count("'layers.") == sum(split)
        pools = re.search(r"ranks 0-7: (\S+); ranks 8-15: (\S+)", r.stderr)
        assert pools and {pools.group(1), pools.group(2).rstrip(".;")} == \
            {"H100-SXM-80GB", "A100-SXM-80GB"}, r.stderr


def test_pool_search_counts_every_plan_it_rejects(capsys):
    """considered = fitting + the rejections it lists: the pools searched alone included."""
    from meshplan.cli import main
    rc = main(["plan", "--model", "llama3.1-8b", "--gpus", "1xH100-SXM-80GB+1xV100-SXM-32GB",
               "--seq-len", "4096", "--global-batch", "8", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 1 and not d["ranked"]
    assert d["considered"] == sum(d["rejected"].values())
    assert any(k.startswith("V100-SXM-32GB alone:") for k in d["rejected"])


def test_procurement_says_which_plans_may_not_fit():
    """Each row's memory verdict is what `predict` says of that plan on that many GPUs (the
    70B / MI300X row was marked cheapest at 192.0 of 192 GiB with no word of it). Deadline 90
    days: both rows may not fit (with 60 days the H100 row, a DualPipeV plan, stopped crossing
    80 GiB at its 90th percentile once the closed form held 2p + 1 chunks, not 2p + 2)."""
    r = cli("plan", "--model", "llama3.1-70b", "--seq-len", "8192", "--global-batch", "512",
            "--gpu-types", "H100-SXM-80GB,MI300X", "--train-tokens", "2T", "--deadline", "90d",
            "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    for row in rows:
        p = cli("predict", "--model", "llama3.1-70b", "--seq-len", "8192", "--global-batch",
                "512", "--gpus", f"{row['num_gpus']}x{row['gpu']}", "--plan", row["plan"],
                "--json")
        assert p.returncode == 0, p.stderr
        assert row["may_not_fit"] is json.loads(p.stdout)["interval"]["may_not_fit"]
    assert any(row["may_not_fit"] for row in rows)  # the case that tells


def test_every_plan_across_pools_says_how_sure_it_is(capsys):
    """`plan` on pools printed and carried no interval (every prediction carries one). Each
    ranked plan now has the rule `validate` gives pool rows (uncertainty.
    widest_throughput_factors: each used pool's class interval, the widest): the point inside
    it, and a plan on one pool the same interval `predict` gives its estimate."""
    from meshplan.cli import main
    from meshplan.uncertainty import interval

    rc = main(["plan", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB+16xA100-SXM-80GB",
               "--seq-len", "4096", "--global-batch", "64", "--json", "--top", "20"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["ranked"]
    kinds = set()
    for p in d["ranked"]:
        kinds.add(p["kind"])
        s10, s90 = p["step_time_s_p10_p90"]
        t10, t90 = p["tokens_per_s_p10_p90"]
        assert s10 < p["step_time_s"] < s90 and t10 < p["tokens_per_s"] < t90
        assert p["throughput_class"].split("/")[0] in ("hopper", "ampere")
    assert "pipeline" in kinds
    # one pool alone: the estimate's own interval, as `predict` gives it
    from types import SimpleNamespace

    from meshplan.commands._pools import pool_plan_interval
    from meshplan.cost.hetero import pool_cluster_for

    pools = make_pools("16xH100-SXM-80GB+16xA100-SXM-80GB")
    r = search_pools(M, pools, Workload(4096, 64), top_k=50)
    one = next(p for p in r.ranked if p.kind == "single")
    k = next(i for i, pool in enumerate(pools.pools) if one.gpus_by_pool.get(pool.name))
    iv = interval(one.estimate, M, pool_cluster_for(pools, k, one.estimate.world_size))
    step_iv, _, cls = pool_plan_interval(SimpleNamespace(model=M, pools=pools), one)
    assert step_iv == pytest.approx(iv.step_time_s) and cls == iv.throughput_class
