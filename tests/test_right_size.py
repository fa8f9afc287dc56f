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
