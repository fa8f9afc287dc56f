"""meshplan calibrate and --profile: the real benchmark code on a CPU stand-in, the profile
written and read back, name-mapped overrides, refusals; --from-runs cross-validation."""

import csv
import math
import tomllib

import pytest

from meshplan import profile
from meshplan.calibrate import fit
from meshplan.cli import main
from meshplan.commands._profile import reset
from meshplan.cost import efficiency, estimate
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.gpus import GPUS
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload

torch = pytest.importorskip("torch")
DEFAULT_MM = efficiency.EFFICIENCY["hopper"].matmul_bf16


@pytest.fixture(autouse=True)
def _undo_profiles():
    yield
    reset()
PREDICT = ["predict", "--model", "llama3.1-8b", "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
           "--global-batch", "16", "--dp", "8", "--zero", "3", "--micro-batch", "1",
           "--recompute", "full", "--json"]


def _step(m="llama3.1-8b"):
    return estimate(load_model(m), make_cluster("8xH100-SXM-80GB"), Workload(4096, 16),
                    Plan(dp=8, zero=3, micro_batch=1, recompute="full"))


def test_apply_overrides_by_name_and_restores():
    base = _step()
    e0 = efficiency.EFFICIENCY["hopper"].matmul_bf16
    restore = profile.apply({"EFFICIENCY.hopper.matmul_bf16": e0 / 2, "NETWORK.scaleup": 0.5})
    try:
        slow = _step()
        from meshplan.cost import collectives
        assert collectives.NETWORK.scaleup == 0.5  # rebound where it was imported by name
        # half the GEMM efficiency: the GEMM part of compute takes twice as long
        assert slow.step_time.parts["compute_s"] > 1.5 * base.step_time.parts["compute_s"]
    finally:
        restore()
    assert efficiency.EFFICIENCY["hopper"].matmul_bf16 == e0
    assert math.isclose(_step().step_time_s, base.step_time_s)


@pytest.mark.parametrize("name", ["EFFICIENCY.hopper.nope", "NOPE", "NETWORK", "EFFICIENCY.x.y"])
def test_unknown_constant_refused_one_line(tmp_path, capsys, name):
    p = tmp_path / "bad.toml"
    p.write_text(f'[constants]\n"{name}" = 0.5\n')
    assert main(PREDICT + ["--profile", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and name in err[0]


def test_no_gpu_one_line_exit_2(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["calibrate", "--out", str(tmp_path / "p.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # calibrate has no --device option the user could change (it named --device='cuda')
    assert len(err) == 1 and "--device" not in err[0], err
    assert "local GPU='none'" in err[0] and "--from-runs" in err[0]
    assert not (tmp_path / "p.toml").exists()


def test_cpu_stand_in_writes_a_profile_that_predict_uses(tmp_path, capsys):
    out = tmp_path / "cpu.toml"
    assert main(["calibrate", "--out", str(out), "--device", "cpu", "--gpu", "H100-SXM-80GB"]) == 0
    text = capsys.readouterr().out
    default = f"{efficiency.EFFICIENCY['hopper'].matmul_bf16:.3g}"
    assert any("EFFICIENCY.hopper.matmul_bf16" in line and default in line.split()
               for line in text.splitlines())  # default beside measured
    data = tomllib.loads(out.read_text())
    assert data["meta"]["device"] == "CPU stand-in" and data["meta"]["date"]
    assert out.read_text().startswith("# meshplan calibration profile: measured")
    c = data["constants"]
    # a CPU is thousands of times slower than an H100's datasheet: the fractions say so
    assert 0 < c["EFFICIENCY.hopper.matmul_bf16"] < 0.01
    assert 0 < c["EFFICIENCY.hopper.memory"] < 0.5
    assert main(PREDICT) == 0
    import json
    default = json.loads(capsys.readouterr().out)["step_time_s"]
    assert main(PREDICT + ["--profile", str(out)]) == 0
    cal = json.loads(capsys.readouterr().out)["step_time_s"]
    assert cal > 50 * default
    assert efficiency.EFFICIENCY["hopper"].matmul_bf16 < 0.01  # applied for the process
    reset()
    assert efficiency.EFFICIENCY["hopper"].matmul_bf16 == DEFAULT_MM


def test_fit_from_a_known_sweep():
    gpu = GPUS["H100-SXM-80GB"]
    peak = gpu.flops("bf16")
    lat = 5e-6
    # a synthetic sweep that follows the GEMM shape model with 5 us per tile, 70% at 8192
    hbm = efficiency.EFFICIENCY["hopper"].memory * gpu.memory_bytes_per_s
    per_byte = efficiency.EFFICIENCY["hopper"].gemm_flop_per_load_byte
    sweep = [{"m": d, "n": d, "k": d,
              "flops_per_s": fit.square_gemm_flops(gpu, d, 0.7 * peak, lat, per_byte, hbm)}
             for d in (1024, 2048, 4096, 8192)]
    meas = {"gemm": sweep, "copy": {"bytes_per_s": 0.9 * gpu.memory_bytes_per_s},
            "collectives": [{"collective": "all_reduce", "group": 8, "bytes": 2**28,
                             "bus_bytes_per_s": 0.8 * gpu.scaleup_bytes_per_s}]}
    meas["collectives"] += _ramp(gpu, 0.75, fill=10e6, ll_base=8e-6)
    consts, lines = fit.constants_from(meas, gpu)
    assert math.isclose(consts["EFFICIENCY.hopper.matmul_bf16"], 0.7)
    assert abs(consts["EFFICIENCY.hopper.gemm_tile_latency_s"] - lat) <= 0.5e-6
    assert math.isclose(consts["EFFICIENCY.hopper.memory"], 0.9)
    # the ring's (all-gather's) figure at its largest message (1 GiB: 1% short of the peak)
    assert consts["NETWORK.scaleup"] == pytest.approx(0.75, rel=0.02)
    assert consts["NETWORK.simple_fill_bytes"] == pytest.approx(10e6, rel=0.05)
    assert consts["NETWORK.ll_base_s"] == pytest.approx(8e-6, rel=0.01)
    assert all(ln["applies"] for ln in lines)
    # only an all-reduce on an NVLS node: the ring is that over the model's NVLS factor
    only_ar = {"collectives": [{"collective": "all_reduce", "group": 8, "bytes": 2**28,
                                "bus_bytes_per_s": 1.04 * gpu.scaleup_bytes_per_s}]}
    consts, _ = fit.constants_from(only_ar, gpu)
    from meshplan.cost.efficiency import NETWORK
    assert math.isclose(consts["NETWORK.scaleup"], 1.04 / NETWORK.nvls_allreduce)


def _ramp(gpu, frac, fill, ll_base):
    """Synthetic inside-node sweep that follows cost/collectives.py's Simple and LL forms."""
    from meshplan.cost.collectives import _LL_HOP
    from meshplan.cost.efficiency import NETWORK
    peak = frac * gpu.scaleup_bytes_per_s
    out = []
    for nbytes in (2**20, 2**22, 2**24, 2**26, 2**30):
        vol = 7 / 8 * nbytes
        t = fill / peak + 7 * NETWORK.hop_nvlink_s + vol / peak
        out.append({"collective": "all_gather", "group": 8, "bytes": nbytes, "seconds": t,
                    "bus_bytes_per_s": vol / t})
    t = ll_base + 14 * NETWORK.hop_nvlink_s * _LL_HOP["nvlink"]
    out.append({"collective": "all_reduce", "group": 8, "bytes": 1024, "seconds": t,
                "bus_bytes_per_s": 2 * 7 / 8 * 1024 / t})
    return out


def test_collectives_on_two_gloo_ranks():
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.start_processes(_coll_worker, args=(2, q, port), nprocs=2, start_method="spawn")
    res = q.get()
    ok = [r for r in res if "bus_bytes_per_s" in r]
    assert {r["collective"] for r in ok} >= {"all_reduce", "all_gather"}
    assert all(r["group"] == 2 and r["bus_bytes_per_s"] > 0 for r in ok)


def _coll_worker(rank, world, q, port):
    import os

    import torch.distributed as dist

    from meshplan.calibrate import micro

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    res = micro.collectives("cpu", [2**16], [2], 1, 2)
    if rank == 0:
        q.put(res)
    dist.destroy_process_group()


def _write_rows(path, rows: list[dict]):
    """``rows`` as a runs CSV at ``path`` (the first row's keys the header); returns path."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _runs_csv(tmp_path, factor):
    """Measured runs made by the planner itself with GEMMs `factor` x faster than the
    defaults: a refit must find it and lower the cross-validated error. An 8B model, so the
    step is GEMM-bound (a tiny model's layers wait on the host and GEMM speed does not show)."""
    rows = []
    for i, (n, gb, tp) in enumerate([(8, 16, 1), (8, 32, 2), (16, 32, 1), (16, 64, 2),
                                     (8, 64, 1), (16, 16, 4)]):
        rows.append({"id": str(i), "source": f"s{i}", "model": "llama3.1-8b", "gpu": "H100-SXM-80GB",
                     "num_gpus": str(n), "seq_len": "1024", "global_batch_seqs": str(gb),
                     "tp": str(tp), "pp": "1", "dp": str(n // tp), "zero": "1",
                     "micro_batch": "1", "recompute": "none", "precision": "bf16"})
    from meshplan.validate import predict_rows
    e0 = efficiency.EFFICIENCY["hopper"].matmul_bf16
    restore = profile.apply({"EFFICIENCY.hopper.matmul_bf16": e0 * factor})
    try:
        res = predict_rows(rows, with_search_best=False, jobs=1)
    finally:
        restore()
    for r, p in zip(rows, res):
        r["measured_tokens_per_s_per_gpu"] = repr(p.predicted_tokens_per_s_per_gpu)
    path = tmp_path / "runs.csv"
    return _write_rows(path, rows)


def test_from_runs_refit_lowers_cv_error(tmp_path, capsys):
    path = _runs_csv(tmp_path, 1.25)
    out = tmp_path / "fit.toml"
    assert main(["calibrate", "--from-runs", str(path), "--out", str(out), "--folds", "3"]) == 0
    text = capsys.readouterr().out
    # six rows of six sources: each source is a fold (--folds applies to one-source files)
    assert "cross-validated leave-one-source-out (6 sources)" in text
    assert "defaults" in text and "refitted (CV)" in text
    c = tomllib.loads(out.read_text())["constants"]
    assert math.isclose(c["EFFICIENCY.hopper.matmul_bf16"],
                        efficiency.EFFICIENCY["hopper"].matmul_bf16 * 1.25, rel_tol=0.02)


def test_from_runs_says_when_a_share_stops_at_its_ceiling(tmp_path, capsys):
    """Runs measured 1.5x faster than the defaults predict ask for GEMMs above the whole
    peak (the default share is 0.8): the fit stops at 1.0, the cap, and the report says the
    constant is at its ceiling; runs made with a share of 0.88 (1.1x) say nothing of it."""
    assert DEFAULT_MM * 1.1 < 1.0
    for factor, speedup, flagged in ((1.0, 1.5, True), (1.1, 1.0, False)):
        path = _runs_csv(tmp_path, factor)
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))[:3]  # three sources: three folds (the fit's cost)
        for r in rows:
            r["measured_tokens_per_s_per_gpu"] = repr(
                float(r["measured_tokens_per_s_per_gpu"]) * speedup)
        _write_rows(path, rows)
        assert main(["calibrate", "--from-runs", str(path), "--folds", "2"]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines()
                    if x.strip().startswith("EFFICIENCY.hopper.matmul_bf16"))
        assert line.rstrip().endswith("(at its ceiling)") is flagged, line


def test_validate_uses_the_profile_in_every_worker(tmp_path, capsys):
    import json

    path = _runs_csv(tmp_path, 1.0)  # measured = the defaults' own predictions
    assert main(["validate", str(path), "--json", "--jobs", "2"]) == 0
    base = json.loads(capsys.readouterr().out)["summary"]["tokens_median_abs_error"]
    assert base < 1e-9
    prof = tmp_path / "p.toml"
    mm = efficiency.EFFICIENCY["hopper"].matmul_bf16
    prof.write_text(f'[meta]\ndevice = "test"\n[constants]\n"EFFICIENCY.hopper.matmul_bf16" = {mm / 2}\n')
    assert main(["validate", str(path), "--json", "--jobs", "2", "--profile", str(prof)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(r["tokens_error"] < -0.1 for r in out["rows"])  # slower GEMMs in both workers


@pytest.mark.parametrize("extra, needle", [
    (["--folds", "0"], "folds=0"),
    (["--folds", "-3"], "folds=-3"),
    (["--out", "{d}"], "is a directory"),
    (["--out", "{d}/no/such/fit.toml"], "its directory does not exist"),
])
def test_from_runs_bad_folds_or_out_one_line_before_fitting(tmp_path, capsys, extra, needle):
    """--folds below 2 was taken as 2 without a word; an --out that is a directory or in
    a missing directory ended, after the whole fit, in an OSError traceback. Now one line,
    exit 2, before anything is fitted, and nothing written."""
    path = _runs_csv(tmp_path, 1.25)
    capsys.readouterr()
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = ["calibrate", "--from-runs", str(path), "--out", str(tmp_path / "fit.toml"),
            *[a.replace("{d}", str(tmp_path)) for a in extra]]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and needle in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_part_with_its_own_gemm_rate_is_calibrated_under_its_own_key():
    """GB200 carries a measured large-GEMM fraction of its own (efficiency.SKU_MATMUL): a
    sweep measured on it writes that key, which the cost model then reads, and leaves the
    Blackwell generation's fraction (B200's) alone."""
    gpu = GPUS["GB200"]
    peak = gpu.flops("bf16")
    sweep = [{"m": 8192, "n": 8192, "k": 8192, "flops_per_s": 0.6 * peak * fit.clock_factor(gpu)}]
    consts, _ = fit.constants_from({"gemm": sweep}, gpu)
    assert math.isclose(consts["SKU_MATMUL.GB200.bf16"], 0.6)
    assert "EFFICIENCY.blackwell.matmul_bf16" not in consts
    from meshplan.cost.compute import device
    restore = profile.apply({"SKU_MATMUL.GB200.bf16": 0.6})
    try:
        assert device(gpu, "bf16").matmul_flops == pytest.approx(
            peak * 0.6 * efficiency.tensor_derating("blackwell"))
    finally:
        restore()
    assert device(gpu, "bf16").matmul_flops == pytest.approx(1822.0e12 * efficiency.tensor_derating("blackwell"))


def test_scale_out_constants_reproduce_the_measured_bus_bandwidth():
    """Across nodes the model prices a ring's NIC share as 1/g of each rank's volume and an
    all-to-all's as (n - g)/n of its data (cost/collectives.py): the fitted shares, put back
    into the model, give the measured bus bandwidths again, and a profile takes them."""
    from meshplan import profile
    from meshplan.cost import collectives
    from meshplan.cost.collectives import Placement
    from meshplan.scenario import make_cluster
    gpu = GPUS["H100-SXM-80GB"]
    n, s = 16, 2**30
    meas = {"gpus_per_node": 8, "collectives": [
        {"collective": "all_reduce", "group": n, "bytes": s, "bus_bytes_per_s": 360e9},
        {"collective": "all_to_all", "group": n, "bytes": s, "bus_bytes_per_s": 85e9}]}
    consts, _ = fit.constants_from(meas, gpu)
    assert 0 < consts["NETWORK.scaleout"] <= 1 and 0 < consts["NETWORK.alltoall_scaleout"] <= 1
    restore = profile.apply(consts)
    try:
        c = make_cluster("16xH100-SXM-80GB")
        p = Placement(n, 8)
        a2a = (n - 1) / n * s / collectives.all_to_all_s(c, p, s)  # bus bandwidth
        assert a2a == pytest.approx(85e9, rel=0.05)
        ring_nic = 2 * (n - 1) / n * s / 8 / (c.nic_bytes_per_s * consts["NETWORK.scaleout"])
        assert 2 * (n - 1) / n * s / ring_nic == pytest.approx(360e9, rel=1e-9)
    finally:
        restore()


def test_attention_timed_at_4k_keys_is_stored_at_the_8k_reference():
    """A flash-attention timing at 4,096 keys that follows the model's own curve
    (efficiency.ATTN_HALF_SEQ / _BWD) gives back the generation's 8k-key fractions, not the
    4k-key ones (5% / 8% lower)."""
    from meshplan.cost.compute import attention_occupancy

    gpu = GPUS["H100-SXM-80GB"]
    e = efficiency.EFFICIENCY["hopper"]
    peak = gpu.flops("bf16") * fit.clock_factor(gpu)
    att = {"batch": 2, "heads": 32, "seq": 4096, "head_dim": 128,
           "fwd_flops_per_s": peak * e.attention_fwd * attention_occupancy(4096),
           "bwd_flops_per_s": peak * e.attention_bwd * attention_occupancy(4096, True)}
    consts, _ = fit.constants_from({"attention": att}, gpu)
    assert consts["EFFICIENCY.hopper.attention_fwd"] == pytest.approx(e.attention_fwd, rel=1e-9)
    assert consts["EFFICIENCY.hopper.attention_bwd"] == pytest.approx(e.attention_bwd, rel=1e-9)
    assert attention_occupancy(4096) < 0.96 and attention_occupancy(4096, True) < 0.93


def test_profile_reads_back_the_very_constants_written(tmp_path):
    """to_toml wrote each constant to 6 significant digits, so a profile holding a
    constant at its default (calibrate --from-runs writes every constant it fitted, moved
    or not) read back another value: EFFICIENCY.cdna3.matmul_bf16 0.5112436897659476 as
    0.511244. Every float must read back equal."""
    consts = {"EFFICIENCY.cdna3.matmul_bf16": efficiency.EFFICIENCY["cdna3"].matmul_bf16,
              "EFFICIENCY.hopper.matmul_bf16": 0.8 * 1.1 * 0.9, "NETWORK.tp_overlap": 1.0,
              "EFFICIENCY.hopper.gemm_tile_latency_s": 1.75e-06}
    path = tmp_path / "p.toml"
    path.write_text(profile.to_toml({"date": "2026-11-28", "device": "test"}, consts))
    assert profile.load(path)["constants"] == consts


def test_from_runs_fits_the_gemm_rate_a_part_is_priced_from():
    """GB200 is priced from its own GEMM fraction (efficiency.SKU_MATMUL.GB200), not from
    Blackwell's: --from-runs fitted EFFICIENCY.blackwell.matmul_bf16, which changes nothing
    of a GB200 row, so runs whose GEMMs were 0.8x the model's were left as they were."""
    from meshplan.calibrate import from_runs
    from meshplan.validate import predict_rows

    rows = [{"id": str(i), "source": "s", "model": "llama3.1-8b", "gpu": "GB200",
             "num_gpus": str(n), "seq_len": "4096", "global_batch_seqs": str(gb), "tp": "1",
             "pp": "1", "dp": str(n), "zero": "1", "micro_batch": "1", "recompute": "none",
             "precision": "bf16"} for i, (n, gb) in enumerate([(4, 16), (8, 32), (8, 64)])]
    sku = efficiency.SKU_MATMUL["GB200"]["bf16"]
    restore = profile.apply({"SKU_MATMUL.GB200.bf16": sku * 0.8})
    try:
        truth = predict_rows(rows, with_search_best=False, jobs=1)
    finally:
        restore()
    for r, t in zip(rows, truth):
        r["measured_tokens_per_s_per_gpu"] = repr(t.predicted_tokens_per_s_per_gpu)
    names = from_runs.default_names(rows)
    assert "SKU_MATMUL.GB200.bf16" in names and "EFFICIENCY.blackwell.matmul_bf16" not in names
    consts = from_runs.fit(rows, names, passes=1)
    assert consts["SKU_MATMUL.GB200.bf16"] == pytest.approx(sku * 0.8, rel=1e-9)
    assert max(from_runs.log_errors(rows, consts)) < 1e-6


def test_validate_text_names_the_constants_it_used(tmp_path, capsys):
    """Under --profile the per-source errors are the profile's, not the shipped constants'
    that the header named."""
    path = _runs_csv(tmp_path, 1.0)
    assert main(["validate", str(path), "--jobs", "1"]) == 0
    assert "(shipped constants)" in capsys.readouterr().out
    prof = tmp_path / "p.toml"
    prof.write_text('[meta]\ndevice = "test"\n[constants]\n"EFFICIENCY.hopper.matmul_bf16" = 0.4\n')
    assert main(["validate", str(path), "--jobs", "1", "--profile", str(prof)]) == 0
    out = capsys.readouterr().out
    assert "shipped constants" not in out and "(the profile's constants)" in out


def test_from_runs_fits_the_sgemm_rate_of_an_fp32_v100_row():
    """An fp32 row on a V100 runs its GEMMs at the part's measured SGEMM fraction
    (SKU_MATMUL.V100-SXM-32GB.fp32); the key fitted must be one that moves its prediction."""
    from meshplan.calibrate import from_runs
    from meshplan.validate import predict_row

    row = {"id": "1", "model": "llama3.2-1b", "gpu": "V100-SXM-32GB", "num_gpus": "8",
           "seq_len": "1024", "global_batch_seqs": "32", "tp": "1", "pp": "1", "dp": "8",
           "zero": "1", "micro_batch": "1", "recompute": "full", "precision": "fp32"}
    names = from_runs.default_names([row])
    mm = [n for n in names if "matmul" in n or n.startswith("SKU_MATMUL")]
    assert mm == ["SKU_MATMUL.V100-SXM-32GB.fp32"]
    base = predict_row(row, with_search_best=False).predicted_tokens_per_s_per_gpu
    restore = profile.apply({mm[0]: 0.5 * efficiency.SKU_MATMUL["V100-SXM-32GB"]["fp32"]})
    try:
        slower = predict_row(row, with_search_best=False).predicted_tokens_per_s_per_gpu
    finally:
        restore()
    assert slower < 0.9 * base


def test_cv_folds_never_split_a_source_or_a_repeated_configuration():
    """Bug: folds dealt rows round-robin, so repeated measurements of one run (or rows of one
    publication) sat on both sides of a fold and the cross-validated error leaked."""
    from meshplan.calibrate.from_runs import cv_folds

    def row(i, source, gpus, step=""):
        return {"id": str(i), "source": source, "model": "llama3.1-8b", "gpu": "H100-SXM-80GB",
                "num_gpus": str(gpus), "measured_step_time_s": step}

    # two sources: one fold each, whatever --folds says
    rows = [row(0, "a", 8), row(1, "b", 8), row(2, "a", 16), row(3, "b", 16)]
    fold, how = cv_folds(rows, 5)
    assert fold == [0, 1, 0, 1] and how == "leave-one-source-out (2 sources)"
    # one source: repeats of a configuration (only the id and measurements differ) stay together
    rows = [row(0, "a", 8, "1.0"), row(1, "a", 8, "1.1"), row(2, "a", 16, "2.0"),
            row(3, "a", 32, "3.0"), row(4, "a", 16, "2.1"), row(5, "a", 64, "4.0")]
    fold, how = cv_folds(rows, 3)
    assert fold[0] == fold[1] and fold[2] == fold[4]
    assert len(set(fold)) == 3 and how == "3-fold by configuration (4 configurations)"
    # one configuration measured three times: nothing to group by, folds by row
    rows = [row(i, "a", 8, str(1 + i / 10)) for i in range(3)]
    fold, how = cv_folds(rows, 5)
    assert sorted(fold) == [0, 1, 2] and how.startswith("3-fold by row")


def _with_trust_c_rows(tmp_path):
    """The six planner-made rows (GEMMs 1.25x the defaults) graded A, and two rows of trust
    C measured at 0.4x the planner's own speed (a misread chart)."""
    path = _runs_csv(tmp_path, 1.25)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["trust"] = "A"
    for i in range(2):
        c = dict(rows[i], id=f"c{i}", source=f"chart{i}", trust="C")
        c["measured_tokens_per_s_per_gpu"] = repr(float(rows[i]["measured_tokens_per_s_per_gpu"])
                                                  / 1.25 * 0.4)
        rows.append(c)
    return _write_rows(path, rows)


def test_from_runs_leaves_trust_c_rows_out_unless_asked(tmp_path, capsys):
    """calibrate --from-runs fitted on trust-C rows too (weak figures moved the constants).
    Now they are left out, counted and named; --include-trust-c fits on all 8."""
    path = _with_trust_c_rows(tmp_path)
    out = tmp_path / "fit.toml"
    assert main(["calibrate", "--from-runs", str(path), "--out", str(out), "--force"]) == 0
    text = capsys.readouterr().out
    assert "left out of the fit (2; --include-trust-c fits on them too): c0, c1" in text
    assert "on 6 measured runs" in text
    c = tomllib.loads(out.read_text())["constants"]
    assert math.isclose(c["EFFICIENCY.hopper.matmul_bf16"],
                        efficiency.EFFICIENCY["hopper"].matmul_bf16 * 1.25, rel_tol=0.02)
    assert main(["calibrate", "--from-runs", str(path), "--out", str(out), "--force",
                 "--include-trust-c"]) == 0
    text = capsys.readouterr().out
    assert "trust C" not in text and "on 8 measured runs" in text


def test_from_runs_counts_its_fits_on_stderr(tmp_path, capsys, monkeypatch):
    """`calibrate --from-runs` fits once per fold and once on every row; on a few hundred rows
    of many sources that is minutes of silence, so it counts the fits on stderr (progress.py:
    shown on a terminal or with MESHPLAN_PROGRESS=1, never on stdout). Three rows of three
    sources: three folds and the final fit, four fits."""
    path = _runs_csv(tmp_path, 1.0)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))[:3]
    _write_rows(path, rows)
    monkeypatch.setenv("MESHPLAN_PROGRESS", "1")
    assert main(["calibrate", "--from-runs", str(path), "--folds", "2"]) == 0
    cap = capsys.readouterr()
    lines = [x for x in cap.err.splitlines() if x.startswith("calibrate --from-runs: fits done")]
    assert lines and "4/4 (100%)" in lines[-1], cap.err
    assert "fits done" not in cap.out
