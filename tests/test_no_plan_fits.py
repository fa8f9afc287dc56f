"""Valid input on which nothing fits exits 1 with one line, as `plan` does; exit 2 stays for
input that is wrong in itself (errors.NoPlanFits against errors.InputError)."""

import pytest

from meshplan.cli import main


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "gpt-neox-20b", "--gpus", "1xH100-SXM-80GB", "--seq-len", "2048",
     "--global-batch", "96", "--rerank", "0"],
    ["simulate", "--model", "gpt-neox-20b", "--gpus", "1xH100-SXM-80GB", "--seq-len", "2048",
     "--global-batch", "96"],
    ["serve", "--model", "llama3.1-70b", "--gpus", "1xH100-SXM-80GB", "--input-len", "2000",
     "--output-len", "200", "--rate", "1", "--requests", "20"],
])
def test_nothing_fits_is_exit_1(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 1
    said = (out + err).lower()
    assert "no plan fits" in said or "no serving plan fits" in said
    assert "Traceback" not in err
    if argv[0] != "plan":
        assert len(err.strip().splitlines()) == 1 and out == ""


def test_export_when_nothing_fits_keeps_the_diagnostics(tmp_path, capsys):
    """`plan --export` on valid input that nothing fits: the search's report (the rejections,
    the closest plan) as without --export, exit 1, nothing written (it was a bare one-line
    error, exit 2, that hid which plan came closest)."""
    out = tmp_path / "o"
    rc = main(["plan", "--model", "llama3.1-405b", "--gpus", "8xH100-SXM-80GB", "--seq-len",
               "8192", "--global-batch", "64", "--rerank", "0", "--export", "megatron",
               "--out", str(out)])
    o, err = capsys.readouterr()
    assert rc == 1 and "closest plan: " in o and "no plan fits" in err
    assert not out.exists()


def test_volta_defaults_to_fp16(capsys):
    # no bf16 tensor cores before Ampere: without --precision the run is fp16, as on V100s
    rc = main(["predict", "--model", "llama3.1-8b", "--gpus", "16xV100-SXM-32GB", "--seq-len",
               "2048", "--global-batch", "64", "--plan", "dp16 tp1 pp1 zero1 mb1", "--json"])
    import json
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["scenario"].endswith(", fp16")


@pytest.mark.parametrize("engine", ["megatron", "torchtitan", "deepspeed"])
def test_closest_plan_of_an_engine_search_is_one_the_engine_runs(engine, capsys):
    """`plan --engine E` where nothing fits shows a closest plan that E's own export takes:
    for DeepSpeed it showed dp1 tp4 pp1 cp4 ep16 zero3 ... (expert parallelism and Ulysses
    beside tensor parallelism, both refused by DeepSpeed's export)."""
    from meshplan.export import render
    from meshplan.scenario import Scenario, make_cluster
    from meshplan.search.search import search
    from meshplan.specs.catalog.presets import load_model
    from meshplan.specs.workload import Workload
    model, cluster, work = (load_model("qwen3-235b-a22b"), make_cluster("16xH100-SXM-80GB"),
                            Workload(4096, 64))
    r = search(model, cluster, work, rerank_k=0, engine=engine)
    assert not r.top and r.closest is not None
    assert render(Scenario(model, cluster, work, r.closest.plan), engine).files
