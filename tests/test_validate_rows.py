"""validate: rows that cannot be scored are listed, not scored; robust CSV reading;
preset shapes and MLA columns; intervals on every prediction."""

import json
import math

import pytest

from meshplan.cli import main
from meshplan.errors import InputError
from meshplan.row_model import match_preset, model_from_row
from meshplan.specs.catalog.presets import PUBLISHED_PARAMS, preset
from meshplan.validate import read_rows, summarize, validate, predict_row

HEADER = ("id,trust,source,model,arch,layers,hidden,heads,kv_heads,ffn,vocab,mlp,seq_len,"
          "global_batch_seqs,gpu,num_gpus,tp,pp,dp,precision,measured_tokens_per_s_per_gpu,"
          "measured_peak_mem_gib")
GOOD = "{id},A,S{id},toy,dense,12,768,12,12,3072,50304,gelu,2048,64,A100-SXM-80GB,8,1,1,8,bf16,{tps},"


def _csv(tmp_path, lines, header=HEADER, name="runs.csv", newline="\n", bom=False):
    p = tmp_path / name
    text = newline.join([header] + lines) + newline
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return p


def test_garbage_rows_listed_and_excluded(tmp_path, capsys):
    lines = [GOOD.format(id=1, tps=30000), GOOD.format(id=2, tps="nan"),
             GOOD.format(id=3, tps=30000).replace(",12,768,", ",24.5,768,"),
             GOOD.format(id=4, tps=30000).replace("A100-SXM-80GB", "H9000"),
             GOOD.format(id=5, tps="inf"), GOOD.format(id=6, tps=-5)]
    p = _csv(tmp_path, lines)
    results, s = validate(p, with_search_best=False)
    err = {r.id: r.error for r in results}
    assert err["1"] is None
    assert "measured_tokens_per_s_per_gpu" in err["2"] and "finite" in err["2"]
    assert "layers" in err["3"] and "whole number" in err["3"]
    assert "H9000" in err["4"]
    assert "finite" in err["5"] and "positive" in err["6"]
    assert s["predicted"] == 1 and s["errors"] == 5
    assert s["tokens_rows_trust_ab"] == 1
    assert math.isfinite(s["tokens_median_abs_error"])
    # the failed rows carry no prediction, so nothing of them can leak into statistics
    assert all(r.predicted_tokens_per_s_per_gpu is None for r in results if r.error)
    assert main(["validate", str(p), "--no-search", "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert "rows not scored (5)" in out and "nan" not in out.split("rows not scored")[0].lower()


def test_every_row_failing_exits_nonzero(tmp_path, capsys):
    p = _csv(tmp_path, [GOOD.format(id=1, tps=1000).replace("A100-SXM-80GB", "H9000")])
    assert main(["validate", str(p), "--no-search", "--jobs", "1"]) == 1


def test_bom_crlf_any_order_blank_lines(tmp_path):
    cols = HEADER.split(",")
    vals = GOOD.format(id=7, tps=30000).split(",")
    order = list(reversed(range(len(cols))))
    header = ",".join(["extra"] + [cols[i].upper() for i in order])
    line = ",".join(["zzz"] + [vals[i] for i in order])
    p = _csv(tmp_path, [line, ",,,"], header=header, newline="\r\n", bom=True)
    rows = read_rows(p)
    assert len(rows) == 1 and rows[0]["id"] == "7" and rows[0]["model"] == "toy"
    results, s = validate(p, with_search_best=False)
    assert results[0].error is None and s["predicted"] == 1


@pytest.mark.parametrize("content,field", [
    ("", "csv"),
    ("id,gpu,num_gpus,layers,hidden,heads,vocab,seq_len\n1,A100-SXM-80GB,8,2,64,2,100,128\n",
     "global_batch_seqs"),
    ("id,gpu,num_gpus,seq_len,global_batch_seqs,hidden,heads,vocab\n1,A100-SXM-80GB,8,128,8,64,2,100\n",
     "layers"),
    ("id,gpu,num_gpus,layers,hidden,heads,vocab,seq_len,global_batch_seqs\n", "csv"),
])
def test_unusable_file_one_line_exit_2(tmp_path, capsys, content, field):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(InputError) as e:
        read_rows(p)
    assert e.value.field == field
    assert main(["validate", str(p), "--no-search"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err


def test_unterminated_quote_refuses_the_file(tmp_path, capsys):
    """A quote that never closes swallowed every later row into one field (4 rows read as
    1, exit 0); the file is refused in one line naming the line the quote opens on, exit 2,
    by validate and by calibrate --from-runs (the same reader)."""
    p = tmp_path / "q.csv"
    p.write_text("id,gpu,num_gpus,seq_len,global_batch_seqs,model,source,"
                 "measured_tokens_per_s_per_gpu,tp,dp\n"
                 '1,H100-SXM-80GB,8,8192,64,llama3.1-8b,"my lab,9000,1,8\n'
                 "2,H100-SXM-80GB,8,8192,64,llama3.1-8b,my lab,9000,2,4\n"
                 "3,H100-SXM-80GB,8,8192,64,llama3.1-8b,my lab,9000,4,2\n")
    with pytest.raises(InputError) as e:
        read_rows(p)
    assert "line 2" in str(e.value) and "never closes" in str(e.value)
    for argv in (["validate", str(p), "--no-search"],
                 ["calibrate", "--from-runs", str(p), "--out", str(tmp_path / "o.toml")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "my lab" in err
    assert not (tmp_path / "o.toml").exists()


@pytest.mark.parametrize("name,expected", [
    ("DeepSeek-V3", "deepseek-v3"), ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
    ("Llama 3.1 405B", "llama3.1-405b"), ("meta-llama/Llama-3.1-70B-Instruct", "llama3.1-70b"),
    ("Mixtral 8x7B", "mixtral-8x7b"), ("Qwen3-235B-A22B", "qwen3-235b-a22b"),
    # HuggingFace ids ending in a release tag (they were not matched)
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"),
    ("deepseek-ai/DeepSeek-V3-Base", "deepseek-v3"), ("deepseek-ai/DeepSeek-V2.5", None),
    ("Llama 3 70B", None), ("GPT 1.7B (Megatron weak-scaling family)", None), ("", None),
])
def test_preset_name_matching(name, expected):
    assert match_preset(name) == expected


def test_deepseek_v3_row_from_preset(tmp_path):
    row = {"id": "1", "model": "DeepSeek-V3", "arch": "moe", "attention": "mla",
           "gpu": "H800-SXM-80GB", "num_gpus": "2048", "seq_len": "4096",
           "global_batch_seqs": "15360", "tp": "1", "pp": "16", "dp": "128", "ep": "64",
           "precision": "fp8", "measured_tokens_per_s_per_gpu": "1000"}
    model, notes = model_from_row(row)
    total, active = PUBLISHED_PARAMS["deepseek-v3"]
    # the DeepSeek-V3 report: 671B total, 37B activated (independent of our preset file)
    assert model.is_mla and abs(model.total_params() / total - 1) < 0.01
    assert notes and "preset deepseek-v3" in notes[0]
    res = predict_row(row, with_search_best=False)
    assert res.error is None, res.error
    assert res.predicted_tokens_per_s_per_gpu > 0 and any("deepseek-v3" in n for n in res.notes)


def test_mla_columns_without_preset():
    row = {"model": "my-mla", "arch": "dense", "attention": "mla", "layers": "4",
           "hidden": "1024", "heads": "8", "ffn": "2816", "vocab": "32000",
           "q_lora_rank": "256", "kv_lora_rank": "128", "qk_rope_head_dim": "32",
           "qk_nope_head_dim": "64", "v_head_dim": "64"}
    m, notes = model_from_row(row)
    assert (m.kv_lora_rank, m.q_lora_rank, m.qk_rope_head_dim, m.v_head_dim) == (128, 256, 32, 64)
    assert m.q_dim == 8 * (64 + 32) and not notes
    with pytest.raises(InputError) as e:
        model_from_row(dict(row, kv_lora_rank=""))
    assert e.value.field == "kv_lora_rank"


def test_blank_vocab_preset_or_field_name():
    base = {"layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "8", "ffn": "14336",
            "vocab": ""}
    with pytest.raises(InputError) as e:
        model_from_row(dict(base, model="some model"))
    assert e.value.field == "vocab"
    m, notes = model_from_row(dict(base, model="Llama-3.1-8B"))
    assert m.vocab == preset("llama3.1-8b").vocab and notes == ["vocab from preset llama3.1-8b"]


def test_dense_row_with_expert_columns_says_they_are_ignored():
    base = {"model": "some model", "arch": "dense", "layers": "32", "hidden": "4096",
            "heads": "32", "ffn": "14336", "vocab": "32000"}
    plain, none = model_from_row(base)
    assert not plain.is_moe and not none
    # a zero is how a dense row fills the column: nothing to say
    _, zero = model_from_row(dict(base, moe_experts="0"))
    assert not zero
    m, notes = model_from_row(dict(base, moe_experts="8", moe_topk="2"))
    assert m == plain and not m.is_moe
    assert len(notes) == 1 and "moe_experts, moe_topk ignored" in notes[0] and "arch=moe" in notes[0]


def test_moe_row_without_experts_names_the_field():
    base = {"model": "some model", "arch": "moe", "layers": "32", "hidden": "4096",
            "heads": "32", "ffn": "14336", "vocab": "32000"}
    with pytest.raises(InputError) as e:
        model_from_row(base)  # was predicted as a dense model without a word
    assert e.value.field == "moe_experts"
    with pytest.raises(InputError) as e:
        model_from_row(dict(base, model="Llama-3.1-8B"))  # a dense preset gives no experts
    assert e.value.field == "moe_experts"
    m, _ = model_from_row(dict(base, moe_experts="8", moe_topk="2", moe_expert_ffn="14336"))
    assert m.is_moe and m.moe_experts == 8
    m, _ = model_from_row(dict(base, model="Mixtral 8x7B", layers="", hidden="", heads="",
                               ffn="", vocab=""))
    assert m.is_moe  # the preset gives them


def test_every_prediction_has_an_interval(tmp_path):
    p = _csv(tmp_path, [GOOD.format(id=i, tps=30000) for i in (1, 2)])
    results, s = validate(p, with_search_best=False)
    r = results[0]
    lo, hi = r.tokens_p10_p90
    assert lo < r.predicted_tokens_per_s_per_gpu < hi
    slo, shi = r.step_time_p10_p90
    assert slo < r.predicted_step_time_s < shi
    mlo, mhi = r.peak_mem_p10_p90
    assert mlo < r.predicted_peak_mem_gib < mhi
    assert s["tokens_interval_rows"] == 2
    j = r.to_json()
    assert j["predicted_tokens_per_s_per_gpu_p10_p90"] == [lo, hi] or \
        tuple(j["predicted_tokens_per_s_per_gpu_p10_p90"]) == (lo, hi)
    json.dumps(j)


def test_jobs_give_the_same_results(tmp_path):
    lines = [GOOD.format(id=i, tps=30000) for i in (1, 2, 3)]
    lines[2] = lines[2].replace(",8,1,1,8,", ",8,2,1,4,")
    p = _csv(tmp_path, lines)
    one, _ = validate(p, with_search_best=False, jobs=1)
    two, _ = validate(p, with_search_best=False, jobs=2)
    assert [r.to_json() for r in one] == [r.to_json() for r in two]


def test_summary_ignores_failed_rows():
    from meshplan.validate import RowResult
    bad = RowResult(id="x", trust="A", model="m", gpus="8xA", error="layers: bad")
    bad.predicted_tokens_per_s_per_gpu = 1.0
    bad.measured_tokens_per_s_per_gpu = float("nan")
    s = summarize([bad])
    assert s["tokens_median_abs_error"] is None and s["errors"] == 1


def test_a_crash_inside_the_model_fails_only_that_row(tmp_path, monkeypatch):
    import meshplan.validate as V

    real = V._fill_prediction

    def boom(res, prep, cache, residuals):
        if res.id == "2":
            raise ZeroDivisionError("division by zero")
        return real(res, prep, cache, residuals)

    monkeypatch.setattr(V, "_fill_prediction", boom)
    p = _csv(tmp_path, [GOOD.format(id=1, tps=30000), GOOD.format(id=2, tps=30000)])
    results, s = validate(p, with_search_best=False)
    assert results[0].error is None and "internal error" in results[1].error
    assert s["predicted"] == 1 and s["errors"] == 1


def test_dense_row_without_ffn_names_the_blank_field():
    """A dense row naming no preset and leaving ffn blank failed as "ffn=0: must be a
    positive integer", a value the row never gave; it is a blank required field."""
    row = {"model": "my-1b", "arch": "dense", "layers": "16", "hidden": "2048", "heads": "16",
           "vocab": "32000"}
    with pytest.raises(InputError) as e:
        model_from_row(row)
    assert e.value.field == "ffn" and e.value.value == "" and "required" in str(e.value)
    # an MoE row without leading dense layers needs no ffn
    m, _ = model_from_row(dict(row, arch="moe", moe_experts="8", moe_topk="2",
                               moe_expert_ffn="1024"))
    assert m.is_moe and m.ffn == 0


def test_attention_column_is_not_ignored():
    """The row's `attention` column was read only for mla: gqa without kv_heads was predicted
    as mha, MLA columns under a blank attention were dropped, and a preset's attention won
    over the row's without a word."""
    base = {"model": "my-model", "layers": "8", "hidden": "1024", "heads": "16",
            "ffn": "4096", "vocab": "32000"}
    with pytest.raises(InputError) as e:
        model_from_row(dict(base, attention="gqa"))  # kv_heads blank: was 16 (mha)
    assert e.value.field == "kv_heads"
    m, _ = model_from_row(dict(base, attention="gqa", kv_heads="4"))
    assert m.kv_heads == 4
    with pytest.raises(InputError) as e:
        model_from_row(dict(base, attention="mha", kv_heads="4"))
    assert e.value.field == "attention"
    mla = {"q_lora_rank": "256", "kv_lora_rank": "128", "qk_rope_head_dim": "32",
           "qk_nope_head_dim": "64", "v_head_dim": "64"}
    m, notes = model_from_row(dict(base, **mla))  # attention blank, MLA dims given
    assert m.is_mla and m.kv_lora_rank == 128 and any("mla" in n for n in notes)
    with pytest.raises(InputError) as e:
        model_from_row(dict(base, attention="gqa", kv_heads="4", **mla))
    assert e.value.field == "attention"
    # a preset: DeepSeek-V3 is MLA (its config.json has kv_lora_rank 512), not gqa
    with pytest.raises(InputError) as e:
        model_from_row({"model": "DeepSeek-V3", "attention": "gqa"})
    assert e.value.field == "attention"
    # the row's mha wins over Llama 3.1 8B's 8 key/value heads, and says so
    m, notes = model_from_row({"model": "Llama 3.1 8B", "attention": "mha"})
    assert m.heads == 32 and m.kv_heads == 32
    assert notes[0] == "shape from preset llama3.1-8b" and "attention=mha" in notes[1]
    m, notes = model_from_row({"model": "Llama 3.1 8B", "attention": "gqa"})
    assert m.kv_heads == 8 and notes == ["shape from preset llama3.1-8b"]


def test_dense_arch_on_an_moe_preset_says_what_it_drops():
    """arch=dense on Mixtral 8x7B predicts a dense model (ffn 14336 in every layer, the
    preset's dense width) while the only note said "shape from preset mixtral-8x7b"."""
    m, notes = model_from_row({"model": "Mixtral 8x7B", "arch": "dense"})
    assert not m.is_moe and m.ffn == 14336 and m.layers == 32
    assert notes[0] == "shape from preset mixtral-8x7b"
    assert len(notes) == 2 and "arch is dense" in notes[1] and "experts (8, top 2)" in notes[1]


def test_cluster_tokens_in_the_per_gpu_column_are_pointed_out(tmp_path):
    """A team that wrote its cluster's tokens/s (8 GPUs x ~9,500) in the per-GPU column got
    -87% and no word on why; the row is still scored as given, with a note."""
    header = ("id,model,gpu,num_gpus,seq_len,global_batch_seqs,tp,pp,dp,"
              "measured_tokens_per_s_per_gpu")
    base = "{id},Llama 3.1 8B,H100-SXM-80GB,8,8192,32,1,1,8,{tps}"
    p = _csv(tmp_path, [base.format(id=1, tps=9500), base.format(id=2, tps=8 * 9500)],
             header=header)
    per_gpu, cluster = validate(p, with_search_best=False)[0]
    lo, hi = per_gpu.tokens_p10_p90
    assert lo <= 9500 <= hi and not any("whole cluster" in n for n in per_gpu.notes)
    assert cluster.tokens_error < -0.8  # scored as given
    assert any("whole cluster" in n and "9,500.0 per GPU" in n for n in cluster.notes), \
        cluster.notes


def test_oom_row_with_a_peak_says_the_peak_is_a_lower_bound(tmp_path):
    """A row with oom=1 and measured_peak_mem_gib was scored on memory without a word,
    though a run that went out of memory stopped before its peak."""
    header = "id,model,gpu,num_gpus,seq_len,global_batch_seqs,tp,pp,dp,measured_peak_mem_gib,oom"
    p = _csv(tmp_path, ["1,Llama 3.1 70B,H100-SXM-80GB,64,8192,128,8,1,8,79.0,1",
                        "2,Llama 3.1 70B,H100-SXM-80GB,64,8192,128,8,1,8,79.0,0"], header=header)
    oom, ran = validate(p, with_search_best=False)[0]
    assert oom.error is None and oom.measured_oom and oom.memory_error is not None
    assert any("lower bound" in n for n in oom.notes)
    assert not any("lower bound" in n for n in ran.notes)


def test_a_row_stating_its_dtypes_is_not_given_a_blank_rows_lean_ones(tmp_path):
    """Rows sharing a model, cluster, workload and layout shared one cached prediction even
    when one stated its dtypes (fp32) and the other left them blank: whichever came first
    decided both, so the row stating fp32 was predicted with bf16 states and a note saying
    it left them blank. Each row must be predicted as it is predicted alone."""
    header = ("id,model,gpu,num_gpus,seq_len,global_batch_seqs,tp,pp,dp,framework,"
              "optimizer_state_precision,grad_reduce_dtype,measured_tokens_per_s_per_gpu")
    stated = "s,Llama 3.1 70B,H100-SXM-80GB,64,8192,128,8,2,4,megatron,fp32,fp32,1000"
    blank = "b,Llama 3.1 70B,H100-SXM-80GB,64,8192,128,8,2,4,megatron,,,1000"
    alone = {}
    for name, line in (("s", stated), ("b", blank)):
        r, = validate(_csv(tmp_path, [line], header=header, name=f"{name}.csv"),
                      with_search_best=False)[0]
        alone[name] = (r.predicted_tokens_per_s_per_gpu, r.plan, r.notes)
    assert alone["s"] != alone["b"]  # the blank row gets the engine's lean dtypes here
    for order in ([blank, stated], [stated, blank]):
        res = validate(_csv(tmp_path, order, header=header, name="both.csv"),
                       with_search_best=False)[0]
        for r in res:
            assert (r.predicted_tokens_per_s_per_gpu, r.plan, r.notes) == alone[r.id], r.id


def test_search_best_is_searched_at_the_dtypes_the_row_was_predicted_with(tmp_path):
    """A row leaving its dtype columns blank may be predicted with the engine's lean dtypes
    (verdict_lean.py); the search's own best plan was searched at the default dtypes only,
    so it came out slower than the row's plan (8B on 8 B200 at fp8: 28,947 against 29,254
    tokens/s per GPU) although the row's plan at those dtypes is one it could choose."""
    header = ("id,model,gpu,num_gpus,seq_len,global_batch_seqs,tp,pp,dp,precision,framework,"
              "measured_tokens_per_s_per_gpu")
    p = _csv(tmp_path, ["1,Llama 3.1 8B,B200,8,8192,64,1,1,8,fp8,megatron,26000"],
             header=header)
    (r,), s = validate(p, with_search_best=True)
    assert any("lean dtypes" in n for n in r.notes)  # the case this is about
    assert r.search_best_tokens_per_s_per_gpu >= r.predicted_tokens_per_s_per_gpu * (1 - 1e-9)
    assert s["search_at_least_as_fast"] == s["search_compared"] == 1


def test_moe_row_with_blank_topk_or_width_names_the_blank_field():
    """moe_experts given with moe_topk or moe_expert_ffn blank failed as "moe_topk=0: must be
    between 1 and moe_experts" / "moe_expert_ffn=0: must be positive", values the row never
    gave."""
    base = {"model": "my-moe", "arch": "moe", "layers": "16", "hidden": "2048", "heads": "16",
            "vocab": "32000", "moe_experts": "64", "moe_topk": "8", "moe_expert_ffn": "1024"}
    m, _ = model_from_row(base)
    assert m.is_moe and (m.moe_topk, m.moe_expert_ffn) == (8, 1024)
    for c in ("moe_topk", "moe_expert_ffn"):
        with pytest.raises(InputError) as e:
            model_from_row(dict(base, **{c: ""}))
        assert e.value.field == c and e.value.value == "" and "required" in str(e.value)
    with pytest.raises(InputError) as e:  # experts on a dense preset: its width is not given
        model_from_row({"model": "Llama 3.1 8B", "moe_experts": "8", "moe_topk": "2"})
    assert e.value.field == "moe_expert_ffn" and e.value.value == ""


def test_a_precision_the_gpu_lacks_is_refused_as_predict_refuses_it(tmp_path):
    """plan and predict refuse bf16 on a V100 and fp8 on an A100 (no such tensor cores);
    validate predicted both rows as if the GPU had them. A blank precision on a V100 is
    fp16, as plan and predict take it."""
    header = ("id,model,gpu,num_gpus,seq_len,global_batch_seqs,tp,pp,dp,precision,"
              "measured_tokens_per_s_per_gpu")
    p = _csv(tmp_path, ["1,Llama 3.1 8B,V100-SXM-32GB,8,2048,32,1,1,8,bf16,900",
                        "2,Llama 3.1 8B,A100-SXM-80GB,8,4096,32,1,1,8,fp8,3000",
                        "3,Llama 3.1 8B,V100-SXM-32GB,8,2048,32,1,1,8,,900",
                        "4,Llama 3.1 8B,V100-SXM-32GB,8,2048,32,1,1,8,fp16,900"], header=header)
    v100_bf16, a100_fp8, v100_blank, v100_fp16 = validate(p, with_search_best=False)[0]
    assert v100_bf16.error and "precision='bf16'" in v100_bf16.error
    assert a100_fp8.error and "precision='fp8'" in a100_fp8.error
    assert v100_blank.error is None and v100_fp16.error is None
    assert v100_blank.predicted_tokens_per_s_per_gpu == v100_fp16.predicted_tokens_per_s_per_gpu
    assert main(["predict", "--model", "llama3.1-8b", "--gpus", "8xA100-SXM-80GB",
                 "--precision", "fp8", "--seq-len", "4096", "--global-batch", "32"]) == 2


def test_a_misspelt_measured_column_is_named_not_silently_ignored(tmp_path, capsys):
    """Unknown columns are ignored, so a team writing `tokens_per_s_per_gpu` or
    `step_time_s` saw its rows predicted as not measured, without a word."""
    header = ("id,model,gpu,num_gpus,seq_len,global_batch_seqs,tp,pp,dp,tokens_per_s_per_gpu,"
              "step_time_s,measured_noise,notes")
    p = _csv(tmp_path, ["1,Llama 3.1 8B,H100-SXM-80GB,8,8192,32,1,1,8,9000,3.6,,run 1"],
             header=header)
    (r,), s = validate(p, with_search_best=False)
    assert r.measured_tokens_per_s_per_gpu is None  # still not read: the schema's names
    assert s["columns_not_read"] == [
        {"column": "tokens_per_s_per_gpu", "did_you_mean": "measured_tokens_per_s_per_gpu"},
        {"column": "step_time_s", "did_you_mean": "measured_step_time_s"}]
    assert main(["validate", str(p), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "column 'tokens_per_s_per_gpu' is not read" in out and "measured_step_time_s?" in out
    good = _csv(tmp_path, [GOOD.format(id=1, tps=30000)], name="good.csv")
    assert validate(good, with_search_best=False)[1]["columns_not_read"] == []


@pytest.mark.parametrize("written, engine", [
    ("Megatron-LM", "megatron"), ("Megatron-Core", "megatron"), ("MCore", "megatron"),
    ("NeMo 2.0", "nemo"), ("megatron", "megatron"), ("Composer", "other")])
def test_framework_names_people_write(written, engine):
    """'Megatron-LM' (the engine's own name) was read as 'other' and predicted with other
    defaults (FA2 attention instead of TE's, its dtypes): it is megatron, with no note."""
    from meshplan.validate import prepare

    row = {"model": "Llama 3.1 8B", "gpu": "H100-SXM-80GB", "num_gpus": "8", "seq_len": "4096",
           "global_batch_seqs": "32", "framework": written}
    p = prepare(row)
    assert p.workload.framework == engine
    assert (engine == "other") == any("not one the schema names" in n for n in p.notes)


def test_an_id_shared_by_rows_is_named(tmp_path, capsys):
    """Two rows with one id were both reported under it without a word: the report could
    not be joined back to the file (nor a pool row's baseline_id resolved)."""
    p = _csv(tmp_path, [GOOD.format(id=1, tps=30000), GOOD.format(id=1, tps=31000),
                        GOOD.format(id=2, tps=30000)])
    results, s = validate(p, with_search_best=False)
    assert len(results) == 3 and s["predicted"] == 3
    assert s["duplicate_ids"] == {"1": 2}
    assert main(["validate", str(p), "--jobs", "1"]) == 0
    assert "id '1' names 2 rows" in capsys.readouterr().out


def test_a_row_with_nothing_measured_holds_no_out_of_memory_verdict(tmp_path):
    """Bug: a row with the oom cell blank and nothing measured counted as a run that did not
    go out of memory, so the summary's "out-of-memory verdicts agreeing" grew with rows that
    say nothing. A blank cell beside a measurement still means the run ran."""
    path = tmp_path / "oom.csv"
    head = ("id,source,trust,model,gpu,num_gpus,seq_len,global_batch_seqs,micro_batch,tp,pp,"
            "dp,zero,recompute,precision,measured_tokens_per_s_per_gpu,oom")
    scen = "llama3.1-8b,H100-SXM-80GB,8,4096,64,1,1,1,8,1,none,bf16"
    path.write_text("\n".join([head, f"1,s,A,{scen},9000,", f"2,s,A,{scen},,",
                               f"3,s,A,{scen},,1", f"4,s,A,{scen},,0"]) + "\n")
    res = {r.id: r for r in validate(str(path), with_search_best=False, jobs=1)[0]}
    assert res["1"].measured_oom is False and res["2"].measured_oom is None
    assert res["3"].measured_oom is True and res["4"].measured_oom is False
    assert summarize(list(res.values()))["oom_rows"] == 3
