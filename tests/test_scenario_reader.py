"""Every command that takes --scenario reads it through one function (commands/_common.py
scenario_from_args, then plan_from_args): a scenario one command refuses, every command
refuses, in the same one line (exit 2), and before anything runs (no rank is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.cli import main

TINY = ('[model]\npreset = "tiny-llama"\n[cluster]\ngpus = "4xH100-SXM-80GB"\n'
        '[workload]\nseq_len = 16\nglobal_batch = 8\n')
# the stated dp (2) disagrees with the cluster (4 GPUs): predict refuses it
DP_MISMATCH = TINY + "[plan]\ndp = 2\n"
REFUSAL = "dp*cp*tp*pp = 2*1*1*1 = 2 must equal the number of GPUs (4)"
RUNTIME = ["--steps", "1", "--device", "cpu"]


def _refusal(argv, capsys) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def _write(tmp_path, body: str) -> str:
    p = tmp_path / "sc.toml"
    p.write_text(body)
    return str(p)


def test_predict_refuses_a_stated_dp_that_disagrees_with_the_cluster(tmp_path, capsys):
    err = _refusal(["predict", "--scenario", _write(tmp_path, DP_MISMATCH)], capsys)
    assert REFUSAL in err and err.startswith("meshplan predict: error: plan=")


def test_run_refuses_the_scenario_predict_refuses(tmp_path, capsys):
    """Before: run replaced the stated dp=2 by the cluster's 4 and trained dp4, exit 0."""
    sc = _write(tmp_path, DP_MISMATCH)
    err = _refusal(["run", "--scenario", sc, *RUNTIME, "--out", str(tmp_path / "out")], capsys)
    assert REFUSAL in err and err.startswith("meshplan run: error: plan=")
    assert not (tmp_path / "out").exists()  # refused before the run made its folders


def test_dryrun_refuses_the_scenario_predict_refuses(tmp_path, capsys):
    """Before: dryrun read the file run's old way and built the plan on its own world (dp2,
    2 ranks) whatever the scenario's 4 GPUs said, exit 0."""
    err = _refusal(["dryrun", "--scenario", _write(tmp_path, DP_MISMATCH)], capsys)
    assert REFUSAL in err and err.startswith("meshplan dryrun: error: plan=")


POOLS = ('[model]\npreset = "tiny-llama"\n[cluster]\npools = [{gpus = "2xH100-SXM-80GB"}, '
         '{gpus = "2xA100-SXM-80GB"}]\n[workload]\nseq_len = 16\nglobal_batch = 8\n'
         '[plan]\ndp = 2\n')


def _commands(tmp_path) -> dict:
    return {"predict": [], "simulate": [], "run": RUNTIME, "dryrun": [],
            "export": ["--to", "megatron", "--out", str(tmp_path / "ex")]}


@pytest.mark.parametrize("body, needle", [
    (DP_MISMATCH, REFUSAL),
    # run took the first pool as the cluster and ran; predict refuses pools
    (POOLS, "cluster.pools=2: pools are planned by `meshplan plan`"),
], ids=["dp-disagrees-with-cluster", "several-pools"])
def test_every_command_taking_a_scenario_refuses_it_alike(tmp_path, capsys, body, needle):
    sc = _write(tmp_path, body)
    errs = {}
    for cmd, extra in _commands(tmp_path).items():
        err = _refusal([cmd, "--scenario", sc, *extra], capsys)
        assert err.startswith(f"meshplan {cmd}: error: "), err
        errs[cmd] = err.split(": error: ", 1)[1]
    assert needle in errs["predict"]
    assert len(set(errs.values())) == 1, errs
    assert not (tmp_path / "ex").exists()


@pytest.mark.parametrize("flag, needle", [
    ("--seq-len", "seq_len=0: must be a positive integer"),
    ("--global-batch", "global_batch=0: must be a positive integer"),
    ("--global-batch-tokens", "global_batch_tokens=0: must be a positive integer"),
    ("--gpus-per-node", "gpus_per_node=0: must be a positive integer"),
    ("--nic-gbps", "nic_gbps_per_gpu=0"),
])
@pytest.mark.parametrize("with_scenario", [True, False], ids=["scenario", "flags"])
def test_a_zero_flag_is_refused_with_or_without_a_scenario(tmp_path, capsys, flag, needle,
                                                           with_scenario):
    """Before: on top of --scenario a 0 was read as "not given" (`or`) and the file's value
    predicted without a word, exit 0; without --scenario the same flag was refused (and
    --global-batch-tokens 0 was asked for as a missing --global-batch)."""
    given = (["--scenario", _write(tmp_path, TINY)] if with_scenario else
             ["--model", "tiny-llama", "--gpus", "4xH100-SXM-80GB", "--seq-len", "16"]
             + ([] if flag == "--global-batch-tokens" else ["--global-batch", "8"]))
    given = [a for i, a in enumerate(given) if a != flag and (i == 0 or given[i - 1] != flag)]
    err = _refusal(["predict", *given, "--dp", "4", flag, "0"], capsys)
    assert needle in err, err


def _predicted_plan(argv, capsys) -> dict:
    import json
    assert main(["predict", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["plan"]


def _run_config(argv, out, capsys) -> dict:
    """The configuration `run` hands its workers, without starting one: --nnodes 2 prints
    each node's torchrun command and writes the config into --out."""
    import json
    assert main(["run", *argv, "--nnodes", "2", "--out", str(out) + "/"]) == 0, \
        capsys.readouterr().err
    capsys.readouterr()
    return json.loads((out / "meshplan-run.json").read_text())


@pytest.mark.parametrize("how", ["scenario", "flags"])
def test_run_trains_the_plan_predict_prints(tmp_path, capsys, how):
    """The plan is sized on the cluster of --scenario or --gpus as predict sizes it (dp
    inferred from 4 GPUs over tp 2). Before, `run --tp 2 --gpus 4x...` kept dp 1 and refused
    the 4 GPUs, where `predict` with the same flags printed dp2 tp2."""
    argv = (["--scenario", _write(tmp_path, TINY + "[plan]\ntp = 2\n")] if how == "scenario"
            else ["--model", "tiny-llama", "--gpus", "4xH100-SXM-80GB", "--seq-len", "16",
                  "--global-batch", "8", "--tp", "2"])
    cfg = _run_config(argv, tmp_path / "out", capsys)
    assert cfg["plan"] == _predicted_plan(argv, capsys)
    assert (cfg["plan"]["dp"], cfg["plan"]["tp"]) == (2, 2)
    assert (cfg["seq_len"], cfg["global_batch"]) == (16, 8)


@pytest.mark.parametrize("slash", ["", "/"], ids=["no-slash", "slash"])
def test_run_nnodes_out_is_always_a_folder(tmp_path, capsys, slash):
    """--out is a folder (its help): a new one without a trailing slash was written as the
    nodes' config file itself; now the folder is made and the config goes inside it."""
    out = tmp_path / "new" / "out"
    argv = ["run", "--scenario", _write(tmp_path, TINY + "[plan]\ntp = 2\n"), "--nnodes", "2",
            "--out", str(out) + slash]
    assert main(argv) == 0, capsys.readouterr().err
    conf = str(out / "meshplan-run.json")
    assert out.is_dir() and (out / "meshplan-run.json").is_file()
    assert conf in capsys.readouterr().out  # the commands printed read it there


@pytest.mark.parametrize("restarts", [0, 2])
def test_run_nnodes_commands_keep_max_restarts(tmp_path, capsys, restarts):
    """--max-restarts reaches every node's torchrun, read back by torchrun's own parser
    (torch.distributed.run.get_args_parser). Before, node_commands dropped it: each node
    printed --max-restarts=0 whatever was asked. Restarts get the c10d rendezvous at
    --master:--port, one id for all nodes (torch's elastic quickstart for a fault-tolerant
    job); without them the static rendezvous stays."""
    pytest.importorskip("torch")
    import shlex

    from torch.distributed.run import get_args_parser

    argv = ["run", "--scenario", _write(tmp_path, TINY + "[plan]\ntp = 2\n"), "--nnodes", "2",
            "--max-restarts", str(restarts), "--master", "node0", "--port", "29511",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 0, capsys.readouterr().err
    cmds = [ln for ln in capsys.readouterr().out.splitlines() if not ln.startswith("#")]
    assert len(cmds) == 2
    parsed = [get_args_parser().parse_args(shlex.split(c)[4:]) for c in cmds]
    assert [a.max_restarts for a in parsed] == [restarts, restarts]
    assert {a.nnodes for a in parsed} == {"2"}
    if restarts:
        assert {(a.rdzv_backend, a.rdzv_endpoint) for a in parsed} == {("c10d", "node0:29511")}
        assert len({a.rdzv_id for a in parsed}) == 1
    else:
        assert {(a.rdzv_backend, a.master_addr, a.master_port) for a in parsed} == \
            {("static", "node0", 29511)}


def test_run_nnodes_refused_before_out_is_made(tmp_path, capsys):
    """A node count that does not divide the ranks is refused before --out is created."""
    out = tmp_path / "out"
    err = _refusal(["run", "--scenario", _write(tmp_path, TINY + "[plan]\ntp = 2\n"),
                    "--nnodes", "3", "--out", str(out)], capsys)
    assert "nnodes=3: must divide the plan's world size (4)" in err
    assert not out.exists()


def test_a_cluster_flag_on_top_of_a_scenario_keeps_the_rest_of_its_cluster(tmp_path, capsys):
    """--gpus-per-node on top of --scenario rebuilt the cluster from the GPU name alone: the
    file's nic_gbps_per_gpu (100) and scaleup_domain went back to the GPU's defaults (400)
    without a word, and a GPU of the file's gpu_file became unknown (refused)."""
    from meshplan.commands._common import scenario_from_args
    from meshplan.cli import build_parser

    def cluster(argv):
        return scenario_from_args(build_parser().parse_args(["predict", *argv])).cluster

    sc = _write(tmp_path, TINY.replace('gpus = "4xH100-SXM-80GB"\n', 'gpus = "16xH100-SXM-80GB"\n'
                                       'nic_gbps_per_gpu = 100\nscaleup_domain = 4\n'))
    c = cluster(["--scenario", sc, "--gpus-per-node", "4"])
    assert (c.num_gpus, c.gpus_per_node, c.scaleup_domain) == (16, 4, 4)
    assert c.nic_bytes_per_s == 100 / 8 * 1e9
    c = cluster(["--scenario", sc, "--gpus", "8xH100-SXM-80GB", "--nic-gbps", "200"])
    assert (c.num_gpus, c.scaleup_domain, c.nic_bytes_per_s) == (8, 4, 200 / 8 * 1e9)
    (tmp_path / "my_gpus.toml").write_text(
        (Path(__file__).resolve().parents[1] / "examples" / "my_gpus.toml").read_text())
    gf = tmp_path / "gf.toml"
    gf.write_text(TINY.replace('gpus = "4xH100-SXM-80GB"\n', 'gpus = "16xH100-PCIe-80GB"\n'
                               'gpu_file = "my_gpus.toml"\n'))
    for extra in (["--gpus-per-node", "4"], ["--gpus", "8xH100-PCIe-80GB"]):
        assert cluster(["--scenario", str(gf), *extra]).gpu.name == "H100-PCIe-80GB"


def test_a_cluster_flag_on_top_of_a_one_pool_scenario_keeps_what_the_pool_stated(tmp_path):
    """A [cluster] of one pool is an ordinary cluster (docs/pools.md), but a cluster flag on
    top rebuilt it from the pool's GPU name alone: the pool's own nic_gbps_per_gpu (100) and
    scaleup_domain (4) went back to the GPU's defaults (400, the node), and a GPU of the
    file's gpu_file became unknown (refused)."""
    from meshplan.commands._common import scenario_from_args
    from meshplan.cli import build_parser

    def cluster(argv):
        return scenario_from_args(build_parser().parse_args(["predict", *argv])).cluster

    one_pool = ('[cluster]\npools = [{gpus = "16xH100-SXM-80GB", nic_gbps_per_gpu = 100, '
                'scaleup_domain = 4, price = 2.0}]\n')
    sc = _write(tmp_path, TINY.replace('[cluster]\ngpus = "4xH100-SXM-80GB"\n', one_pool))
    c = cluster(["--scenario", sc, "--gpus-per-node", "4"])
    assert (c.num_gpus, c.gpus_per_node, c.scaleup_domain) == (16, 4, 4)
    assert c.nic_bytes_per_s == 100 / 8 * 1e9
    c = cluster(["--scenario", sc, "--nic-gbps", "200"])
    assert (c.gpus_per_node, c.scaleup_domain, c.nic_bytes_per_s) == (8, 4, 200 / 8 * 1e9)
    # the node size given for every pool holds for the one pool too
    sc = _write(tmp_path, TINY.replace('[cluster]\ngpus = "4xH100-SXM-80GB"\n',
                                       '[cluster]\ngpus_per_node = 4\npools = '
                                       '[{gpus = "16xH100-SXM-80GB"}]\n'))
    assert cluster(["--scenario", sc, "--nic-gbps", "200"]).gpus_per_node == 4
    (tmp_path / "my_gpus.toml").write_text(
        (Path(__file__).resolve().parents[1] / "examples" / "my_gpus.toml").read_text())
    gf = tmp_path / "gf.toml"
    gf.write_text(TINY.replace('[cluster]\ngpus = "4xH100-SXM-80GB"\n',
                               '[cluster]\ngpu_file = "my_gpus.toml"\n'
                               'pools = [{gpus = "16xH100-PCIe-80GB", price = 2.0}]\n'))
    assert cluster(["--scenario", str(gf), "--gpus-per-node", "4"]).gpu.name == "H100-PCIe-80GB"


def test_export_carries_the_scenario_predict_reads(tmp_path, capsys, monkeypatch):
    """export rebuilt the Scenario from model, cluster, workload and plan alone: what the
    file stated (plan_stated, cluster_stated), its pool and its profile were dropped. Now the
    scenario export renders is predict's, and what it writes is the plan predict prints."""
    import json

    from meshplan.cli import build_parser
    from meshplan.commands import export as export_cmd
    from meshplan.commands._common import plan_from_args, scenario_from_args
    from meshplan.scenario import load_scenario

    one_pool = ('[cluster]\npools = [{gpus = "4xH100-SXM-80GB", nic_gbps_per_gpu = 100, '
                'price = 2.0}]\n')
    sc_path = _write(tmp_path, TINY.replace('[cluster]\ngpus = "4xH100-SXM-80GB"\n', one_pool)
                     + "[plan]\ntp = 2\nzero = 1\n")
    rendered = []
    real = export_cmd.render
    monkeypatch.setattr(export_cmd, "render", lambda sc, to: rendered.append(sc) or real(sc, to))
    out = tmp_path / "ex"
    assert main(["export", sc_path, "--to", "meshplan", "--out", str(out)]) == 0
    args = build_parser().parse_args(["predict", "--scenario", sc_path])
    want = scenario_from_args(args)
    (got,) = rendered
    assert got.plan == plan_from_args(args, want)
    assert (got.plan_stated, got.cluster_stated, got.profile) == (
        want.plan_stated, want.cluster_stated, want.profile) and got.plan_stated
    assert got.pools == want.pools and got.pools is not None
    capsys.readouterr()
    assert main(["predict", "--scenario", sc_path, "--json"]) == 0
    pred = json.loads(capsys.readouterr().out)
    written = load_scenario(out / "plan.toml")
    assert written.plan.to_dict() == pred["plan"] and pred["plan"]["dp"] == 2
    assert written.cluster.num_gpus == 4 and "on 4 x H100-SXM-80GB" in pred["scenario"]
