"""TP costs that depend on the engine (cost/ops.py unfused_norms, gathered_logits) and the
embedding's TP collective. The engine is that of Hagemann et al. 2023 (Aleph Alpha).

Independent truths: the HBM bytes of the PyTorch ops that make up the norm (counted here op
by op, not taken from the module's constant), sequence parallelism dividing the norm's
tokens by TP, and the published ablation in the authors' sheets (github
Aleph-Alpha/NeurIPS-WANT-submission-efficient-parallelization-layouts,
data/llama_65B_bfloat16_128_GPUs_all_runs.xlsx): the fused RMS kernel saves 9.8% of the step
at TP2 PP8, 15.1% at TP4 PP4, 14.2% at TP4 PP8, 22.8% at TP8 PP2, 21.7% at TP8 PP4 and 19.8%
at TP8 PP8 (LLaMA 65B, 128 A100, micro-batch 1, no recomputation, FlashAttention-2 in
both), i.e. the saving grows with TP. These "flash_attention2 + RMS kernel" runs are not in
bench/data/layout_sets.csv: no constant was taken from them.
"""

import pytest

from meshplan.cost import estimate
from meshplan.cost.ops import Shard, layer_ops, unfused_norms
from meshplan.plan import Plan
from meshplan.specs.catalog.presets import preset
from meshplan.validate import prepare

ENGINE = "aleph-alpha"

# The engine's eager norm (Aleph-Alpha/scaling at 78489292, src/scaling/core/nn/norm/
# rms_norm.py, the release with the flash_attn rms_norm option): self._norm(x.float()).type_as(x) * weight, _norm(x) =
# x * rsqrt(x.pow(2).mean(-1) + eps): the power, mean and product run on the fp32 copy.
# .float(): read 2 + write 4; pow: read 4 + write 4; .mean(-1): read 4; x * rsqrt(.):
# read 4 + write 4; .type_as(x): read 4 + write 2; * weight: read 2 + write 2
EAGER_RMSNORM_FWD_BYTES = (2 + 4) + (4 + 4) + 4 + (4 + 4) + (4 + 2) + (2 + 2)
FUSED_FWD_BYTES = 2 + 2  # read x, write y


def _extra_bytes(tp: int, sp: bool) -> float:
    model = preset("llama3.1-8b")
    shard = Shard(seq=4096, micro_batch=1, tp=tp, sp=sp)
    base = layer_ops(model, False, shard).stream_bytes
    return unfused_norms(layer_ops(model, False, shard), ENGINE).stream_bytes - base, model


def test_extra_bytes_match_the_eager_ops():
    extra, model = _extra_bytes(tp=1, sp=False)
    elements = 2 * 4096 * model.hidden  # two norms per layer
    assert extra == pytest.approx(elements * (EAGER_RMSNORM_FWD_BYTES - FUSED_FWD_BYTES))


def test_backward_bytes_exceed_twice_the_forward():
    """The fp32 backward (autograd formulas of each op) moves more than twice the forward."""
    model = preset("llama3.1-8b")
    shard = Shard(seq=4096, micro_batch=1, tp=1)
    ops = unfused_norms(layer_ops(model, False, shard), ENGINE)
    elements = 2 * 4096 * model.hidden
    # grad*w, grad*out, sum (12); cast (6); grad*r, grad*x, row sum (24); mean (4);
    # pow_backward's three ops (28); the two gradients added (12); cast back (6)
    eager_bwd = 12 + 6 + 24 + 4 + 28 + 12 + 6
    assert ops.stream_bwd_extra_bytes == pytest.approx(
        elements * (eager_bwd - 2 * EAGER_RMSNORM_FWD_BYTES))
    assert layer_ops(model, False, shard).stream_bwd_extra_bytes == 0.0


def test_replicated_without_sp_sharded_with_sp():
    no_sp, _ = _extra_bytes(tp=4, sp=False)
    with_sp, _ = _extra_bytes(tp=4, sp=True)
    tp1, _ = _extra_bytes(tp=1, sp=False)
    assert no_sp == pytest.approx(tp1)  # every TP rank runs the whole norm
    assert with_sp == pytest.approx(tp1 / 4)


def test_other_engines_unchanged():
    model = preset("llama3.1-8b")
    shard = Shard(seq=4096, micro_batch=1, tp=2)
    for engine in ("", "megatron", "torchtitan", "other"):
        assert (unfused_norms(layer_ops(model, False, shard), engine).stream_bytes
                == layer_ops(model, False, shard).stream_bytes)


ROW = dict(model="LLaMA 65B", arch="dense", layers="80", hidden="8192", heads="64",
           kv_heads="64", ffn="22016", vocab="128000", attention="mha", mlp="swiglu",
           tied_embeddings="0", seq_len="2048", global_batch_seqs="2048",
           gpu="A100-SXM-80GB", num_gpus="128", precision="bf16")
# (tp, pp) -> step time saved by the fused RMS kernel, published sheet (see module doc)
PUBLISHED_SAVING = {(2, 8): 0.098, (4, 4): 0.151, (4, 8): 0.142, (8, 2): 0.228,
                    (8, 4): 0.217, (8, 8): 0.198}


def _saving(tp: int, pp: int, monkeypatch) -> float:
    """Step time of the engine with its eager norm minus with a fused one (both variants of
    the published ablation ran the same engine otherwise), over the first."""
    from meshplan.cost import layer, ops
    p = prepare(dict(ROW, framework=ENGINE))
    plan = Plan(tp=tp, pp=pp, dp=128 // (tp * pp), micro_batch=1, recompute="none",
                zero=1, sequence_parallel=False)
    times = []
    for engines in (ops.UNFUSED_NORM_ENGINES, ()):
        monkeypatch.setattr(ops, "UNFUSED_NORM_ENGINES", engines)
        layer.layer_cost.cache_clear()
        times.append(estimate(p.model, p.cluster, p.workload, plan).step_time_s)
    monkeypatch.undo()
    layer.layer_cost.cache_clear()
    return (times[0] - times[1]) / times[0]


def test_published_rms_kernel_ablation(monkeypatch):
    savings = {k: _saving(*k, monkeypatch) for k in PUBLISHED_SAVING}
    for tp_lo, tp_hi in ((2, 4), (4, 8)):  # grows with TP, as published
        assert (max(v for (t, _), v in savings.items() if t == tp_lo)
                < min(v for (t, _), v in savings.items() if t == tp_hi))
    for k, published in PUBLISHED_SAVING.items():
        # the op-by-op byte count (fp32 eager norm) at the HBM roofline: each within 25%
        # of the published saving (with the norm's ops counted in 16 bit, as before
        # 2026-11-23, the model gave 6-16%: 60-70% of it)
        assert savings[k] == pytest.approx(published, rel=0.25), (k, savings[k], published)


# ---- the output layer: logits all-gathered over TP, loss on the whole vocabulary ----------
from meshplan.cost.collectives import Placement  # noqa: E402
from meshplan.cost.layer import CommPlacements, layer_cost  # noqa: E402
from meshplan.cost.ops import head_ops, logits_bytes  # noqa: E402
from meshplan.scenario import make_cluster  # noqa: E402


def _head(engine: str, tp: int):
    model = preset("llama3.1-8b")
    cluster = make_cluster(gpu="A100-SXM-80GB", num_gpus=8)
    one = Placement(1, 1)
    places = CommPlacements(tp=Placement(tp, tp), cp=one, ep=one, etp=one)
    shard = Shard(seq=2048, micro_batch=1, tp=tp)
    return model, cluster, shard, layer_cost(model, cluster, "head", shard, "none", places,
                                             False, "bf16", engine=engine)


def test_gathered_logits_all_gather_closed_form():
    model, cluster, shard, other = _head("other", 4)
    _, _, _, aa = _head(ENGINE, 4)
    logits = 2 * 2048 * model.vocab  # 16-bit, whole vocabulary
    # one ring all-gather of the whole logits on the 4 GPUs of one NVLink domain
    from meshplan.cost.collectives import all_gather_s
    expect = all_gather_s(cluster, Placement(4, 4), logits)
    assert aa.tp_wire_s - other.tp_wire_s == pytest.approx(expect)
    # the gather runs in the forward pass only: all of it is forward time
    assert aa.fwd_s - other.fwd_s == pytest.approx(expect + aa.fwd_compute_s
                                                   - other.fwd_compute_s)
    assert aa.fwd_compute_s > other.fwd_compute_s  # the loss runs on the whole vocabulary


def test_gathered_logits_loss_bytes_and_memory():
    model = preset("llama3.1-8b")
    s = Shard(seq=2048, micro_batch=1, tp=4)
    from meshplan.cost.ops import gathered_logits
    base = head_ops(model, s).stream_bytes
    full = 2048 * model.vocab
    got = gathered_logits(head_ops(model, s), model, s, ENGINE).stream_bytes - base
    assert got == pytest.approx(full * 3 / 4 * 12 + full * 4)
    # the whole vocabulary on each of the 4 TP ranks; one micro-batch's 16-bit logits also
    # sit in the pipeline output buffer (ops.BUFFERED_LOGITS_ENGINES): 12 + 2 bytes per logit
    assert logits_bytes(model, s, ENGINE) == pytest.approx(
        4 * logits_bytes(model, s, "other") * (12 + 2) / 12)
    one = Shard(seq=2048, micro_batch=1, tp=1)  # nothing to gather without TP
    assert gathered_logits(head_ops(model, one), model, one, ENGINE).tp_gather_bytes == 0


# ---- the vocab-parallel embedding's collective (every engine) --------------------------------
def _embedding_wire(sp: bool) -> tuple[float, object, object]:
    model = preset("llama3.1-8b")
    cluster = make_cluster(gpu="A100-SXM-80GB", num_gpus=8)
    one = Placement(1, 1)
    places = CommPlacements(tp=Placement(4, 4), cp=one, ep=one, etp=one)
    shard = Shard(seq=2048, micro_batch=1, tp=4, sp=sp)
    cost = layer_cost(model, cluster, "embedding", shard, "none", places, False, "bf16")
    return cost.tp_wire_s, model, cluster


def test_embedding_all_reduce_closed_form():
    from meshplan.cost.efficiency import NETWORK
    wire, model, cluster = _embedding_wire(sp=False)
    from meshplan.cost.collectives import all_gather_s, all_reduce_s
    nbytes = 2 * 2048 * model.hidden
    p4 = Placement(4, 4)
    # one all-reduce in forward, none backward
    assert wire == pytest.approx(all_reduce_s(cluster, p4, nbytes))
    # with SP: reduce-scatter forward, all-gather backward
    wire_sp, _, _ = _embedding_wire(sp=True)
    assert wire_sp == pytest.approx(2 * all_gather_s(cluster, p4, nbytes))


# ---- what the eager fp32 norm keeps for backward, and the sheets' out-of-memory verdicts ----
def test_saved_bytes_of_the_fp32_norm():
    """x.float() (4 B, saved by pow and by x*rsqrt: one storage) and the 16-bit normalised
    output (2 B, saved by *weight) instead of the fused norm's 16-bit input (2 B)."""
    model = preset("llama3.1-8b")
    shard = Shard(seq=4096, micro_batch=1, tp=1)
    elements = 2 * 4096 * model.hidden
    extra = (unfused_norms(layer_ops(model, False, shard), ENGINE).saved_bytes
             - layer_ops(model, False, shard).saved_bytes)
    assert extra == pytest.approx(elements * ((4 + 2) - 2))


def _hagemann_rows():
    import csv
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "bench" / "data" / "layout_sets.csv"
    with path.open() as f:
        return [r for r in csv.DictReader(f) if r["framework"] == ENGINE]


def test_published_out_of_memory_verdicts():
    """Hagemann et al.'s sheets mark each layout 'OOM Error' or give its step time (80 GB
    A100). No layout that ran may be predicted not to fit; of the 126 that ran out of memory,
    meshplan flagged 100 (does not fit, or may not fit) with the norm's saved tensors counted
    in 16 bit (before 2026-11-23), 123 with them in fp32, and all 126 with the eager
    attention's and SwiGLU's tensors counted too (cost/ops.py EAGER_ATTENTION_ENGINES,
    UNFUSED_SWIGLU_ENGINES; tests/test_aleph_alpha_memory.py), and 125 once the fp32
    gradient copy is held only during the optimizer step, as the engine's code does
    (cost/memory.py STEP_ONLY_MAIN_GRAD_ENGINES, 2026-11-29): L230 (65B, TP8 PP8 DP2,
    micro-batch 2, 72.6 GiB predicted) went from 'may not fit' to 'fits'. The rule is kept
    because the code shows it. With the A100's capacity at the 79.14 GiB the device gives CUDA
    (not 80: specs/catalog/gpus.py, 2026-11-29) L230 is 'may not fit' again: all 126."""
    from meshplan.validate import predict_row
    rows = [r for r in _hagemann_rows() if not r["norm_kernel"]]  # the five main sheets
    res = [predict_row(r, with_search_best=False) for r in rows]
    ran_flagged = [r.id for r in res if not r.measured_oom and r.predicted_oom]
    assert ran_flagged == []
    ooms = [r for r in res if r.measured_oom]
    flagged = [r for r in ooms if r.predicted_oom or r.predicted_may_not_fit]
    assert len(ooms) == 126
    missed = sorted(set(r.id for r in ooms) - set(r.id for r in flagged))
    assert missed == [], missed


def test_sequence_parallel_sheets_out_of_memory_verdicts():
    """The five sequence-parallelism sheets (data/seqpara/*.xlsx; norm_kernel fused, no
    recomputation), held out, entered 2026-11-29: of their 126 'OOM Error' layouts meshplan
    flags 124 (misses L325: 13B, 8k, 64 GPUs, TP4 PP2 SP micro-batch 2, 71.6 GiB predicted,
    and L331: TP8 PP2 without SP, 65.6 GiB; L322 is flagged since the linears after a norm
    keep the gathered sequence, cost/ops.py SEQUENCE_GATHERED_NORM_ENGINES), and it calls 2
    layouts that ran "does not fit" (L467, L468: 65B TP8 micro-batch 4 without SP, 84-86
    GiB; L282 and L283, 13B TP1 PP1 DP32, were 'may not fit' since the fp32 gradient copy is
    held only at the optimizer step, cost/memory.py STEP_ONLY_MAIN_GRAD_ENGINES, and are
    'does not fit' since the A100's capacity is the 79.14 GiB its device reports, 2026-11-29:
    4 layouts that ran). Pinned so that a change that makes these verdicts worse fails; not a
    target met."""
    from meshplan.validate import predict_row
    rows = [r for r in _hagemann_rows() if r["norm_kernel"] == "fused"]
    res = [predict_row(r, with_search_best=False) for r in rows]
    ran_flagged = [r.id for r in res if not r.measured_oom and r.predicted_oom]
    ooms = [r for r in res if r.measured_oom]
    flagged = [r for r in ooms if r.predicted_oom or r.predicted_may_not_fit]
    assert len(rows) == 219 and len(ooms) == 126
    assert len(flagged) >= 124, sorted(set(r.id for r in ooms) - set(r.id for r in flagged))
    assert len(ran_flagged) <= 4, ran_flagged


# Every layout of the five Hagemann sheets that ran with both norms (kernel
# "flash_attention2", the row in bench/data/layout_sets.csv, and "flash_attention2 + RMS
# kernel", not in any CSV here): the published step time with the fused norm, s. Read from
# the sheets' "Average Step Time" (data/llama_*_all_runs.xlsx of
# Aleph-Alpha/NeurIPS-WANT-submission-efficient-parallelization-layouts).
FUSED_NORM_STEP_S = {
    "L029": 31.058, "L030": 31.286, "L031": 34.842, "L033": 33.110, "L034": 29.704,
    "L035": 35.047,  # 13B, 2k, 64 GPUs
    "L062": 19.320, "L064": 21.942, "L065": 23.459,  # 13B, 8k, 128 GPUs
    "L115": 28.336, "L116": 22.667, "L117": 31.770, "L118": 26.935, "L119": 26.279,
    "L127": 26.260, "L128": 25.323,  # 30B, 2k, 256 GPUs
    "L215": 79.540, "L217": 86.615, "L218": 92.614, "L219": 107.851, "L220": 111.831,
    "L221": 121.932,  # 65B, 2k, 128 GPUs
}


def test_fused_norm_saving_on_every_published_pair(monkeypatch):
    """The step time the fused norm saves, modelled over published, on all 22 pairs: the
    median within 15% of 1 and at least 16 of 22 within 35% (now: median 1.06, 18 of 22; with
    the norm counted in 16 bit, before 2026-11-23: median 0.67, 12 of 22)."""
    from meshplan.cost import layer, ops
    from meshplan.search.search import search
    rows = {r["id"]: r for r in _hagemann_rows() if r["id"] in FUSED_NORM_STEP_S}
    assert len(rows) == len(FUSED_NORM_STEP_S)
    ratios = []
    for rid, fused_s in FUSED_NORM_STEP_S.items():
        p = prepare(rows[rid])
        times = []
        for engines in (ops.UNFUSED_NORM_ENGINES, ()):
            monkeypatch.setattr(ops, "UNFUSED_NORM_ENGINES", engines)
            layer.layer_cost.cache_clear()
            times.append(search(p.model, p.cluster, p.workload, dict(p.pins), top_k=1,
                                rerank_k=5).best.step_time_s)
        monkeypatch.undo()
        eager_s = float(rows[rid]["measured_step_time_s"])
        ratios.append((times[0] - times[1]) / (eager_s - fused_s))
    layer.layer_cost.cache_clear()
    ratios.sort()
    median = (ratios[10] + ratios[11]) / 2
    assert 0.85 <= median <= 1.15, ratios
    assert sum(1 for r in ratios if 0.65 <= r <= 1.35) >= 16, ratios


# ---- no TP communication overlap in engines that run their collectives whole ---------------
def _sp_row(tp: int, sp: int, framework: str = ENGINE) -> dict:
    """LLaMA 13B, 8k, 64 A100, PP2, micro-batch 1, no recomputation: the shape and workload of
    the 13B-8k set (4,194,304 tokens per step, the sheets' MFU column), on 64 GPUs as in the
    authors' sequence-parallelism sheet."""
    base = next(r for r in _hagemann_rows() if r["set"] == "llama13b-8k-a100x128")
    return dict(base, framework=framework, num_gpus="64", tp=str(tp), pp="2",
                dp=str(64 // (tp * 2)), micro_batch="1", recompute="none",
                sequence_parallel=str(sp), oom="0", measured_step_time_s="",
                measured_tokens_per_s_per_gpu="")


def _searched(row: dict):
    from meshplan.search.search import search
    p = prepare(row)
    return search(p.model, p.cluster, p.workload, dict(p.pins), top_k=1, rerank_k=5).best


def test_serial_tp_engines_do_not_overlap_tp_collectives():
    """Aleph Alpha's parallel linears call all_gather / reduce_scatter whole on the compute
    stream (Aleph-Alpha/scaling core/nn/linear/utils.py): the search must not plan
    tp_comm_overlap for it, so its sequence-parallel TP time stays exposed; Megatron keeps it."""
    from meshplan.framework_defaults import tp_comm_overlap
    assert tp_comm_overlap("aleph-alpha", 8) is False
    assert tp_comm_overlap("deepspeed", 8) is False
    assert tp_comm_overlap("megatron", 8) is True
    est = _searched(_sp_row(tp=8, sp=1))
    assert not est.plan.tp_comm_overlap
    assert est.step_time.parts["tp_exposed_s"] > 0
    assert _searched(_sp_row(tp=8, sp=1, framework="megatron")).plan.tp_comm_overlap


def test_published_sequence_parallel_saving(monkeypatch):
    """Hagemann et al.'s sequence-parallelism sheet (data/seqpara/llama_13B_bfloat16_8k_seq_
    length_64_GPUs_sequence_parallelism.xlsx, fused RMS kernel, PP2, mb1, no recomputation):
    step time without / with SP 34.85 / 34.84 s at TP2, 40.70 / 38.85 at TP4, 56.23 / 49.96 at
    TP8: saving 0.0%, 4.5%, 11.2%. The model's saving grows with TP and stays within 6 points
    of each (with the TP collectives wrongly hidden under SP, TP8 gave 18.9%)."""
    from meshplan.cost import layer, ops
    monkeypatch.setattr(ops, "UNFUSED_NORM_ENGINES", ())  # the sheet ran the fused norm
    layer.layer_cost.cache_clear()
    published = {2: 0.000, 4: 0.045, 8: 0.112}
    saving = {}
    for tp in published:
        t0 = _searched(_sp_row(tp, 0)).step_time_s
        t1 = _searched(_sp_row(tp, 1)).step_time_s
        saving[tp] = 1 - t1 / t0
    monkeypatch.undo()
    layer.layer_cost.cache_clear()
    assert saving[2] < saving[4] < saving[8], saving
    for tp, s in published.items():
        assert abs(saving[tp] - s) <= 0.06, (tp, saving[tp], s)


# ---- a run that states the fused norm kernel (runs CSV column norm_kernel) -----------------
def _stated_fused(rid: str) -> tuple[dict, dict]:
    row = next(r for r in _hagemann_rows() if r["id"] == rid)
    return row, dict(row, norm_kernel="fused", measured_step_time_s="",
                     measured_tokens_per_s_per_gpu="")


@pytest.mark.parametrize("rid", ["L034", "L215"])
def test_norm_kernel_fused_prices_the_published_rms_kernel_runs(rid, monkeypatch):
    """Hagemann et al.'s sheets run each layout with kernel "flash_attention2" (eager norm) and
    "flash_attention2 + RMS kernel" (fused); FUSED_NORM_STEP_S gives the fused step, faster in
    every pair. A row stating norm_kernel "fused" is priced as the engine without its eager
    norm (UNFUSED_NORM_ENGINES emptied, the representation test_published_sequence_parallel_
    saving uses), in step time and in peak memory, and faster than the same row without it."""
    from meshplan.cost import layer, ops
    from meshplan.validate import predict_row
    row, fused_row = _stated_fused(rid)
    eager = predict_row(row, with_search_best=False)
    stated = predict_row(fused_row, with_search_best=False)
    assert eager.error is None and stated.error is None
    monkeypatch.setattr(ops, "UNFUSED_NORM_ENGINES", ())
    layer.layer_cost.cache_clear()
    emptied = predict_row(row, with_search_best=False)
    monkeypatch.undo()
    layer.layer_cost.cache_clear()
    assert stated.predicted_step_time_s == pytest.approx(emptied.predicted_step_time_s, rel=1e-12)
    assert stated.predicted_peak_mem_gib == pytest.approx(emptied.predicted_peak_mem_gib, rel=1e-12)
    published_eager = float(row["measured_step_time_s"])
    assert FUSED_NORM_STEP_S[rid] < published_eager
    assert stated.predicted_step_time_s < eager.predicted_step_time_s


def test_norm_kernel_bad_value_names_the_field():
    from meshplan.errors import InputError
    from meshplan.specs.workload import Workload
    with pytest.raises(InputError, match="norm_kernel"):
        Workload(2048, 8, "bf16", framework=ENGINE, norm_kernel="triton")
    assert Workload(2048, 8, "bf16", framework=ENGINE, norm_kernel=" Fused ").norm_kernel == "fused"
    assert Workload(2048, 8, "bf16", framework=ENGINE).norm_kernel == ""
