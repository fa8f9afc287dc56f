"""bench/data/heldout_runs.csv: each row is consistent, sourced, and not a calibration row."""
import csv
from pathlib import Path

import pytest

from meshplan.validate import pins_from_row, predict_row

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "bench" / "data" / "heldout_runs.csv"
CALIBRATION = ROOT.parent / "shared" / "validation" / "calibration.csv"


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(open(path, newline="")))


def _int(row: dict, key: str, default: int = 1) -> int:
    return int(row.get(key) or default)


def test_every_row_is_sourced_and_its_layout_multiplies_out():
    rows = _rows(HELDOUT)
    assert len(rows) >= 180
    for r in rows:
        assert r["source"] and r["derivation"] and r["trust"] in ("A", "B", "C"), r["id"]
        assert float(r["measured_tokens_per_s_per_gpu"]) > 0, r["id"]
        n = _int(r, "tp") * _int(r, "pp") * _int(r, "dp") * _int(r, "cp")
        assert n == int(r["num_gpus"]), r["id"]
        if r.get("fp8_recipe"):
            assert r["precision"] == "fp8", r["id"]


def _config(r: dict) -> tuple:
    keys = ("layers", "hidden", "gpu", "num_gpus", "tp", "pp", "dp", "cp", "ep", "seq_len",
            "global_batch_seqs", "micro_batch", "precision", "recompute")
    return tuple((r.get(k) or "").strip().lower() for k in keys)


@pytest.mark.skipif(not CALIBRATION.exists(), reason="needs ../shared/validation")
def test_no_held_out_row_repeats_a_calibration_configuration():
    calib = {_config(r) for r in _rows(CALIBRATION)}
    repeated = [r["id"] for r in _rows(HELDOUT) if _config(r) in calib]
    assert repeated == []


def test_tp_comm_overlap_column_pins_the_plan():
    assert pins_from_row({"tp": "8", "tp_comm_overlap": "0"})["tp_comm_overlap"] is False
    assert pins_from_row({"tp": "8", "tp_comm_overlap": "1"})["tp_comm_overlap"] is True
    assert "tp_comm_overlap" not in pins_from_row({"tp": "1", "tp_comm_overlap": "1"})
    assert "tp_comm_overlap" not in pins_from_row({"tp": "8"})


def test_overlap_grad_reduce_column_pins_the_plan_and_exposes_the_reduction():
    """A row whose engine reduces gradients only after the backward (Megatron-LM 2019's
    allreduce_params; the Korthikanti 2022 530B run at DP 8) states overlap_grad_reduce 0,
    and its prediction then charges the whole reduction: never faster than the default."""
    assert pins_from_row({"overlap_grad_reduce": "0"})["overlap_grad_reduce"] is False
    assert "overlap_grad_reduce" not in pins_from_row({"tp": "8"})
    row = next(r for r in _rows(HELDOUT) if r.get("overlap_grad_reduce") == "0"
               and r["model"].startswith("GPT-2 8.3B"))
    stated = predict_row(row, with_search_best=False)
    default = predict_row(dict(row, overlap_grad_reduce=""), with_search_best=False)
    assert "no-ogr" in stated.plan and "no-ogr" not in default.plan
    assert stated.predicted_tokens_per_s_per_gpu < default.predicted_tokens_per_s_per_gpu


def test_async_tp_rows_are_predicted_faster_than_vanilla_tp():
    # torchtitan asyncTP benchmark (June 2025): the same Llama 3.1 8B layout with vanilla TP
    # (4378 tokens/s/GPU) and async TP (4809.4); the pinned overlap must reach the prediction
    rows = {(r["model"], r["precision"], r.get("fp8_recipe"), r["tp_comm_overlap"]): r
            for r in _rows(HELDOUT) if "asyncTP" in r["source"]}
    vanilla = predict_row(rows[("Llama 3.1 8B", "bf16", "", "0")], with_search_best=False)
    async_tp = predict_row(rows[("Llama 3.1 8B", "bf16", "", "1")], with_search_best=False)
    assert vanilla.error is None and async_tp.error is None
    assert async_tp.predicted_tokens_per_s_per_gpu > 1.03 * vanilla.predicted_tokens_per_s_per_gpu


def test_moe_engine_settings_come_from_a_named_recipe():
    """A Megatron-Bridge MoE row that states its dispatcher, expert-comm overlap or recompute
    names the release tag and preset it came from; a row whose recipe was looked up but had
    another layout leaves them blank."""
    import re

    for r in _rows(HELDOUT):
        if r["arch"] != "moe" or not r["source"].startswith("Megatron-Bridge"):
            continue
        d = r["derivation"]
        if r["moe_dispatcher"]:
            assert r["ep_overlap"] in ("0", "1"), r["id"]
            assert re.search(r"v0\.\d\.\d", d), r["id"]
            assert "scripts/performance" in d or "perf_recipes" in d or "configs/" in d, r["id"]
            if r["recompute_modules"]:
                assert r["recompute"] == "selective", r["id"]
        if "recipe looked up but its layout differs" in d:
            assert not (r["moe_dispatcher"] or r["ep_overlap"] or r["recompute"]), r["id"]


MB_MIRROR = Path("/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo")


def test_megatron_bridge_and_nemo_rows_state_their_recipes_gradient_dtype():
    """Every row printed by a Megatron-Bridge release states grad_reduce_dtype bf16 and names
    the tag and recipe file that set grad_reduce_in_fp32 False; the dgxc-benchmarking NeMo 1
    rows name their YAML's grad_sync_dtype bf16."""
    import re

    mb = nemo1 = 0
    for r in _rows(HELDOUT):
        d = r["derivation"]
        if r["source"].startswith("Megatron-Bridge"):
            mb += 1
            assert r["grad_reduce_dtype"] == "bf16", r["id"]
            assert re.search(r"grad_reduce_dtype bf16 \(16-bit gradient buffer and reduction\) from "
                             r"Megatron-Bridge v0\.\d", d), r["id"]
            assert "grad_reduce_in_fp32" in d, r["id"]
        elif re.search(r"dgxc-benchmarking (llama3\.1|nemotron|nemo_megatron)/", r["source"]):
            nemo1 += 1
            assert r["grad_reduce_dtype"] == "bf16" and "grad_sync_dtype bf16" in d, r["id"]
            assert r["recompute"] in ("none", "selective") and r["zero"] == "1", r["id"]
            if r["precision"] == "fp8":
                assert r["fp8_recipe"] == "delayed", r["id"]
    # 59 DGX-H100/B200/GB200 rows + 31 DGX-GB300/B300 rows (H181-H211) + Qwen3-30B-A3B H296-H298
    # (26.04.01 GB300, B300, GB200) and H299 (25.09 DGX-H100)
    assert mb == 94 and nemo1 == 60


@pytest.mark.skipif(not MB_MIRROR.exists(), reason="needs a local clone of NVIDIA-NeMo/Megatron-Bridge")
def test_each_cited_megatron_bridge_file_sets_16_bit_gradients():
    """The files the derivations cite do set grad_reduce_in_fp32 False at the cited tags."""
    import re
    import subprocess

    cited = set()
    for r in _rows(HELDOUT):
        m = re.search(r"grad_reduce_dtype bf16 \(16-bit gradient buffer and reduction\) from "
                      r"Megatron-Bridge (v[\d.rc]+)[^;]*? (scripts/performance/configs/\S+|"
                      r"src/megatron/bridge/perf_recipes/_common\.py)", r["derivation"])
        if m:
            cited.add((m.group(1), m.group(2).rstrip(":")))
    assert len(cited) >= 8
    for tag, path in cited:
        text = subprocess.run(["git", "-C", str(MB_MIRROR), "show", f"{tag}:{path}"],
                              capture_output=True, text=True, check=True).stdout
        assert re.search(r"grad_reduce_in_fp32(: false| = False)", text), (tag, path)


def test_gpt_oss_b200_row_fits_with_its_recipes_16_bit_gradients():
    # H089: GPT-OSS 120B, 64 B200, EP8, MBS 4: the run fit (it printed 13568 tokens/s/GPU);
    # with fp32 gradient buffers the model read 201.8 GiB, an OOM verdict
    row = next(r for r in _rows(HELDOUT) if r["id"] == "H089")
    assert row["grad_reduce_dtype"] == "bf16"
    p = predict_row(row, with_search_best=False)
    assert p.error is None and not p.predicted_oom


def test_recipe_tp_comm_overlap_and_dgxc_deepseek_settings_are_stated():
    """Rows whose recipe sets TP communication overlap state it and name the file; the dgxc
    DeepSeek-V3 rows state what NeMo 7a8f1cc's perf script sets for a BF16 run."""
    rows = {r["id"]: r for r in _rows(HELDOUT)}
    for r in rows.values():
        if r["source"].startswith("Megatron-Bridge") and r["tp_comm_overlap"]:
            assert int(r["tp"]) > 1, r["id"]
            assert "CommOverlapConfig(tp_comm_overlap=" in r["derivation"], r["id"]
        if "deepseek_v3/pretraining" in r["source"]:
            assert (r["moe_dispatcher"], r["tp_comm_overlap"], r["grad_reduce_dtype"]) == \
                ("alltoall", "0", "fp32"), r["id"]
            assert "7a8f1cc" in r["derivation"], r["id"]
    stated = {i: rows[i]["tp_comm_overlap"] for i in ("H064", "H071", "H085", "H086")}
    assert stated == {"H064": "0", "H071": "0", "H085": "0", "H086": "1"}


def test_megatron_bridge_fp8_rows_name_their_scaling_recipe():
    # the Megatron-Bridge pages print FP8-CS / FP8-MX (25.09, 25.11) or FP8 / MXFP8 (26.02+);
    # v0.3.0-v0.5.x hold only *_FP8_CS_* and *_FP8_MX_* presets, so every FP8 row names one
    for r in _rows(HELDOUT):
        if r["source"].startswith("Megatron-Bridge") and r["precision"] == "fp8":
            assert r["fp8_recipe"] in ("cs", "mx"), r["id"]
            if "precision printed 'FP8'" in r["derivation"]:
                assert r["fp8_recipe"] == "cs" and "_FP8_CS_" in r["derivation"], r["id"]


def test_moedata_rows_agree_with_their_printed_step_times():
    """The H700+ MoE rows (issue 9: MoE training runs from outside NVIDIA's tables): where the
    source prints a step time next to tokens/s (xtuner's Qwen3-235B table) the two agree with
    GBS x seq / step / GPUs; every row names the commit, tag or issue it was read from."""
    import re

    rows = [r for r in _rows(HELDOUT) if r["id"] >= "H700" and r["id"] < "H800"]
    assert len(rows) == 19 and all(r["arch"] == "moe" for r in rows)
    assert len({r["source"].split(" ")[0] for r in rows}) >= 4  # xtuner, FlagPerf, torchao, torchtitan
    for r in rows:
        assert re.search(r" at [0-9a-f]{7}|issue #\d+", r["source"]), r["id"]
        if r["source"].startswith("InternLM/xtuner"):
            derived = (int(r["global_batch_seqs"]) * int(r["seq_len"])
                       / float(r["measured_step_time_s"]) / int(r["num_gpus"]))
            assert derived == pytest.approx(float(r["measured_tokens_per_s_per_gpu"]), rel=2e-3), r["id"]


def test_gpt_oss_rows_state_the_local_attention_they_are_predicted_with():
    """The GPT-OSS rows' shape columns cannot say which layers are windowed; their `model`
    names the gpt-oss-120b preset, and the prediction takes its 18 windowed layers and sinks
    from the config.json it was built from (18 "sliding_attention" entries of layer_types,
    sliding_window 128). Their derivations said full causal attention on every layer (the
    bug: the text contradicted what the tool predicts); now they say what the engine ran."""
    import json

    from meshplan.row_model import model_from_row

    cfg = json.loads((ROOT / "meshplan" / "specs" / "catalog" / "models" /
                      "gpt-oss-120b.json").read_text())
    windowed = sum(t == "sliding_attention" for t in cfg["layer_types"])
    rows = [r for r in _rows(HELDOUT) if r["model"] == "GPT-OSS 120B"]
    assert len(rows) == 14
    for r in rows:
        m, notes = model_from_row(r)
        assert (m.sliding_layers, m.sliding_window) == (windowed, cfg["sliding_window"])
        assert windowed == 18 and cfg["sliding_window"] == 128
        assert m.attention_sinks and m.glu_clamp == cfg["swiglu_limit"], r["id"]
        assert any("sliding window (18 layers, 128 keys) from preset gpt-oss-120b" in n
                   for n in notes), r["id"]
        d = r["derivation"]
        assert "full causal attention on every layer" not in d, r["id"]
        assert "fused cuDNN attention with the sinks and the window" in d, r["id"]


@pytest.mark.skipif(not MB_MIRROR.exists(), reason="needs a local clone of NVIDIA-NeMo/Megatron-Bridge")
def test_gpt_oss_rows_cite_their_containers_transformer_engine_and_cudnn():
    """Every GPT-OSS row's container ships TE >= 2.8 (Megatron-Bridge's local-attention
    fallback for sinks does not trigger) and cuDNN >= 9.13.1 (TE's fused attention takes
    learnable softmax): the versions cited are the ones software-versions.md lists."""
    import re
    import subprocess

    git = ["git", "-C", str(MB_MIRROR), "show"]
    versions = subprocess.run(git + ["e49e451:docs/releases/software-versions.md"],
                              capture_output=True, text=True, check=True).stdout
    listed = {}
    for block in re.split(r"\n## NeMo Framework ", versions)[1:]:
        te = re.search(r"\| Transformer Engine \| (\S+) \|", block).group(1)
        cudnn = re.search(r"\| cuDNN \| (\S+?)(-1)? \|", block).group(1)
        listed[block.split()[0]] = (te, cudnn)
    for r in _rows(HELDOUT):
        if r["model"] != "GPT-OSS 120B":
            continue
        cont = re.search(r"\((\S+) NeMo container", r["source"]).group(1)
        m = re.search(r"TE (\S+), cuDNN (\d+\.\d+\.\d+(\.\d+)*)", r["derivation"])
        base = cont.split(".01")[0] if cont.endswith(".01") else cont
        if base in listed:
            te, cudnn = listed[base]
            assert (m.group(1), m.group(2)) == (te, cudnn), r["id"]
        else:  # 26.08: not listed; the derivation quotes the newest entry, 26.06
            assert "not listed" in r["derivation"], r["id"]
            assert (m.group(1), m.group(2)) == listed["26.06"], r["id"]
        assert tuple(int(x) for x in re.findall(r"\d+", m.group(1))[:2]) >= (2, 8), r["id"]
        assert tuple(int(x) for x in m.group(2).split(".")[:3]) >= (9, 13, 1), r["id"]
    for tag in ("v0.2.0", "v0.3.0"):
        provider = subprocess.run(git + [f"{tag}:src/megatron/bridge/models/gpt_oss/"
                                         "gpt_oss_provider.py"],
                                  capture_output=True, text=True, check=True).stdout
        assert re.search(r'if not is_te_min_version\("2\.8"\):\s+logger\.info\([^)]*\)\s+'
                         r'self\.attention_backend = AttnBackend\.local', provider), tag
