"""Too many GPUs for the work, and the search that used to drop every plan: 405B on 2,048
H100s with 16 sequences per step returns plans, says the cluster is too big for the batch
and shows the best plan where tokens/s per GPU stops improving, reproducible by predict."""

from __future__ import annotations

import json

from meshplan.cli import main

SC = ["--model", "llama3.1-405b", "--seq-len", "8192", "--global-batch", "16"]


def test_405b_on_2048_gpus_batch_16(capsys):
    rc = main(["plan", *SC, "--gpus", "2048xH100-SXM-80GB", "--rerank", "0", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["top"], "no plan fits"
    best = d["top"][0]
    rs = d["right_size"]
    assert rs and rs["num_gpus"] < 2048
    assert rs["tokens_per_s_per_gpu"] > best["tokens_per_s_per_gpu"]
    # tokens/s per GPU stopped improving: the next halving gained less than 5% (or none fit)
    scan = {s["num_gpus"]: s["tokens_per_s_per_gpu"] for s in rs["scanned"]}
    below = scan.get(rs["num_gpus"] // 2)
    assert below is None or below < 1.05 * rs["tokens_per_s_per_gpu"]
    rc = main(["predict", *SC, "--gpus", f"{rs['num_gpus']}xH100-SXM-80GB", "--plan",
               rs["label"], "--json"])
    got = json.loads(capsys.readouterr().out)
    assert rc == 0 and got["step_time_s"] == rs["step_time_s"]


def test_no_right_size_when_the_batch_fills_the_cluster(capsys):
    rc = main(["plan", "--model", "llama3.1-8b", "--gpus", "16xH100-SXM-80GB", "--seq-len",
               "4096", "--global-batch", "64", "--rerank", "0", "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["right_size"] is None


def test_the_scan_keeps_whole_nodes(capsys):
    # 96 -> 48 -> 24 -> 12 was a count no 8-GPU node cluster has (an error, exit 2)
    rc = main(["plan", "--model", "llama3.1-8b", "--seq-len", "8192", "--global-batch", "16",
               "--gpus", "96xH100-SXM-80GB", "--rerank", "0", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["right_size"]
    counts = [s["num_gpus"] for s in d["right_size"]["scanned"]]
    assert counts[:4] == [96, 48, 24, 8]
    assert all(n % 8 == 0 or n < 8 for n in counts)


def test_a_count_no_layout_fills_gets_the_largest_count_that_has_one(capsys):
    # 1,000 = 2^3 x 5^3: with 16 sequences per step no dp x cp x tp x pp equals it
    args = ["--model", "llama3.1-8b", "--seq-len", "8192", "--global-batch", "16"]
    rc = main(["plan", *args, "--gpus", "1000xH100-SXM-80GB", "--rerank", "0"])
    out = capsys.readouterr().out
    assert rc == 1 and "no layout uses all 1,000 GPUs" in out
    rc = main(["plan", *args, "--gpus", "1000xH100-SXM-80GB", "--rerank", "0", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 1 and not d["top"] and d["right_size"]["num_gpus"] == 512
    rc = main(["predict", *args, "--gpus", "512xH100-SXM-80GB", "--plan",
               d["right_size"]["label"], "--json"])
    got = json.loads(capsys.readouterr().out)
    assert rc == 0 and got["step_time_s"] == d["right_size"]["step_time_s"]


def test_scan_counts():
    from meshplan.search.scale import half_count, power_of_two_nodes
    assert [half_count(n, 8) for n in (96, 24, 16, 8, 4)] == [48, 8, 8, 4, 2]
    assert power_of_two_nodes(1000, 8) == 512 and power_of_two_nodes(100_000, 8) == 65_536
    assert power_of_two_nodes(512, 8) == 256 and power_of_two_nodes(6, 8) == 4
