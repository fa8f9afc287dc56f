"""torchtitan's whole-attention checkpoint under op-level SAC (cost/torchtitan_ac.py).

Independent truths:
1. PyTorch autograd on the CPU: a pre-norm attention block built as torchtitan's DeepSeek-V3
   block runs it at 8a2686c (models/deepseek_v3/model/model.py: ``attention_norm`` outside
   any wrapper, the MLA ``Attention`` inside a checkpoint, activation_checkpoint.py
   ``_apply_full_ac``), counting the storages autograd keeps (saved_tensors_hooks; the
   reentrant checkpoint keeps its tensor inputs through save_for_backward, the same set the
   non-reentrant one torchtitan uses keeps in its frame), parameters excluded: the
   checkpoint must keep exactly the one 16-bit hidden state torchtitan_ac adds to the norm's
   input.
2. A closed form from the DeepSeek-V3 16B shape (torchtitan flavour "16B": dim 2048, 16
   heads, q_lora_rank 0, kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128) for what the
   checkpoint stops keeping against the op-level branch: the kv latent and k_pe
   (kv_lora_rank + qk_rope), q (heads x 192), k and v (heads x (192 + 128)), in 16-bit, the
   fp32 log-sum-exp per head; less the attention module's input (h), which it keeps.
"""

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from meshplan.cost import estimate, torchtitan_ac
from meshplan.cost.ops import Shard
from meshplan.errors import InputError
from meshplan.specs.workload import Workload
from meshplan.validate import prepare, predict_row

HELDOUT = Path(__file__).resolve().parents[1] / "bench" / "data" / "heldout_runs.csv"
GiB = 2**30


def _row(rid: str) -> dict:
    with HELDOUT.open() as f:
        return next(r for r in csv.DictReader(f) if r["id"] == rid)


def _estimate(row: dict, full_ac: bool):
    prep = prepare(row)
    from meshplan.plan import Plan
    pins = dict(prep.pins)
    fill = {"micro_batch": int(row["micro_batch"]), "vpp": 1}
    plan = Plan(**{**fill, **pins})
    w = replace(prep.workload, attention_full_ac=full_ac)
    return estimate(prep.model, prep.cluster, w, plan), prep


def test_h718_frees_the_closed_form():
    row = _row("H718")
    on, prep = _estimate(row, True)
    off, _ = _estimate(row, False)
    h, heads, T = 2048, 16, 4 * 4096  # micro-batch 4 x seq 4096, one rank (tp 1, cp 1)
    # no longer kept: latent + k_pe, q, k and v, the log-sum-exp; newly kept: the module's
    # input; the norm's input stays kept either way
    per_token = (2 * (512 + 64) + 2 * heads * 192 + 2 * heads * (192 + 128) + 4 * heads
                 - 2 * h)
    layers = 27  # every layer has the attention (one dense, 26 MoE)
    acts = lambda e: e.memory[0].parts["activations"]
    assert acts(off) - acts(on) == pytest.approx(layers * T * per_token, rel=1e-9)
    # the projections run forward again: more recomputation, never less
    assert on.step_time.parts["recompute_s"] > off.step_time.parts["recompute_s"]
    assert on.hw_flops_per_step > off.hw_flops_per_step


def test_tp_repeats_the_attention_collectives():
    # with TP the re-run attention forward repeats its two collectives (all-reduce halves
    # without sequence parallelism): one more attention pass on the TP wire
    from meshplan.cost.layer import _tp_time
    from meshplan.plan import Plan
    row = dict(_row("H718"), tp="2", dp="4")
    prep = prepare(row)
    plan = Plan(**{"micro_batch": 4, "vpp": 1, **dict(prep.pins)})
    on = estimate(prep.model, prep.cluster, replace(prep.workload, attention_full_ac=True), plan)
    off = estimate(prep.model, prep.cluster, replace(prep.workload, attention_full_ac=False),
                   plan)
    from meshplan.cost.step import placements
    from meshplan.cost.ops import Shard as S
    tp_on = next(a for a in on.comm if a.axis == "tp").wire_s
    tp_off = next(a for a in off.comm if a.axis == "tp").wire_s
    shard = S(seq=4096, micro_batch=4, tp=2)
    one = _tp_time(prep.cluster, placements(plan, prep.cluster)["tp"],
                   torchtitan_ac.attention_part(prep.model, shard), False)
    assert one > 0
    # every layer (one dense, 26 MoE) has the attention; m micro-batches per step
    assert tp_on - tp_off == pytest.approx(on.num_microbatches * 27 * one, rel=1e-9)


def test_flag_only_under_the_engines_op_sac():
    assert torchtitan_ac.applies("torchtitan", True, "selective", "", "moe")
    assert not torchtitan_ac.applies("torchtitan", False, "selective", "", "moe")
    assert not torchtitan_ac.applies("megatron", True, "selective", "", "moe")
    assert not torchtitan_ac.applies("torchtitan", True, "full", "", "dense")
    assert not torchtitan_ac.applies("torchtitan", True, "selective", "moe_act", "moe")
    assert not torchtitan_ac.applies("torchtitan", True, "selective", "", "head")


def test_kept_bytes_match_autograd():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint
    torch.manual_seed(0)
    dt = torch.bfloat16
    b, s, h, heads, nope, rope, v, lat = 2, 16, 64, 4, 16, 8, 16, 32

    def lin(i, o):
        return torch.nn.Parameter(torch.randn(o, i, dtype=dt) * 0.05)

    P = dict(norm=torch.nn.Parameter(torch.ones(h, dtype=dt)),
             kv_norm=torch.nn.Parameter(torch.ones(lat, dtype=dt)),
             wq=lin(h, heads * (nope + rope)), wkv_a=lin(h, lat + rope),
             wkv_b=lin(lat, heads * (nope + v)), wo=lin(heads * v, h))

    def attention(x):  # models/deepseek_v3/model/model.py Attention.forward, rope left out
        q = torch.nn.functional.linear(x, P["wq"]).view(b, s, heads, nope + rope)
        kv, k_pe = torch.split(torch.nn.functional.linear(x, P["wkv_a"]), [lat, rope], -1)
        kv = torch.nn.functional.linear(torch.rms_norm(kv, (lat,), P["kv_norm"]), P["wkv_b"])
        k_nope, vv = torch.split(kv.view(b, s, heads, nope + v), [nope, v], -1)
        k = torch.cat([k_nope, k_pe.unsqueeze(2).expand(-1, -1, heads, -1)], -1)
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), vv.transpose(1, 2), is_causal=True)
        return torch.nn.functional.linear(o.transpose(1, 2).reshape(b, s, -1), P["wo"])

    x = torch.randn(b, s, h, dtype=dt, requires_grad=True)
    params = {p.untyped_storage().data_ptr() for p in P.values()}
    kept: dict = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            kept[st.data_ptr()] = st.nbytes()
        return t

    # the norm outside the hooks: on CUDA torch.rms_norm runs the fused kernel, which keeps
    # its 16-bit input (and an fp32 rstd per token), what ops.layer_ops counts; the CPU
    # decomposes it into fp32 ops, so only the checkpoint's own keep is measured here
    normed = torch.rms_norm(x, (h,), P["norm"])
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = x + checkpoint(attention, normed, use_reentrant=True)
    y.float().sum().backward()  # the recomputed forward runs and gives gradients
    assert x.grad is not None
    T = b * s
    measured = sum(kept.values())
    toy, shard = _toy_model(h, heads, nope, rope, v, lat), Shard(seq=s, micro_batch=b)
    kept_model = (torchtitan_ac.attention_part(toy, shard).saved_bytes
                  - torchtitan_ac.freed_bytes(toy, shard))
    norm_input = 2 * T * h  # the 16-bit norm input, kept with or without the checkpoint
    assert measured == kept_model - norm_input == 2 * T * h


def _toy_model(h, heads, nope, rope, v, lat):
    from meshplan.specs.catalog.presets import preset
    base = preset("DeepSeek-V3")
    return replace(base, hidden=h, heads=heads, kv_heads=heads, qk_nope_head_dim=nope,
                   qk_rope_head_dim=rope, v_head_dim=v, kv_lora_rank=lat, q_lora_rank=0)


def test_h718_and_the_default_toml_verdicts():
    # the run at local batch 4 ran (73.32 GiB reserved, H718); the toml it lowered, local
    # batch 8 (deepseek_v3_16b.toml at 8a2686c: global batch 8 x 8), went out of memory
    # (issue #1789's description): both verdicts right with the engine's wrapping
    ran = predict_row(_row("H718"), False)
    toml = dict(_row("H718"), id="H718-lbs8", micro_batch="8", global_batch_seqs="64",
                measured_tokens_per_s_per_gpu="", measured_peak_mem_gib="", oom="1")
    oom = predict_row(toml, False)
    # the same issue: "If we set the expert_parallel_degree to 1, instead of lowering
    # local_batch_size, the workload runs as well, but at almost 96% memory usage"
    ep1 = predict_row(dict(toml, id="H718-lbs8-ep1", ep="1", oom="0"), False)
    assert ran.error is None and oom.error is None and ep1.error is None
    assert ran.predicted_oom is False and ran.measured_oom is False
    assert oom.predicted_oom is True and oom.measured_oom is True
    assert ep1.predicted_oom is False


def test_bad_flag_is_refused():
    with pytest.raises(InputError, match="attention_full_ac"):
        Workload(4096, 32, attention_full_ac="yes")
    row = dict(_row("H718"), attention_full_ac="maybe")
    res = predict_row(row, False)
    assert res.error and "attention_full_ac" in res.error


def _moe_core(ep: int, engine: str = "torchtitan", recompute: str = "selective"):
    from meshplan.cost import layer
    from meshplan.cost.collectives import Placement
    prep = prepare(_row("H718"))
    shard = Shard(seq=4096, micro_batch=4, ep=ep)
    one = Placement(1, 1)
    return layer.layer_core(prep.model, prep.cluster, "moe", shard, recompute, one, one, one,
                            False, "bf16", "ring", engine, "alltoall", "", "", "", False)


def test_routed_experts_keep_the_all_to_all_outputs():
    # torchtitan's save list names all_to_all_single, not _grouped_mm: with expert
    # parallelism the routed path keeps the dispatch output (the experts' input rows) and
    # the combine output (tokens x top-k rows back on this rank), 16-bit; without it, nothing
    from meshplan.cost.efficiency import MOE_LOAD_IMBALANCE
    T, h, k = 4 * 4096, 2048, 6
    rows = T * k * MOE_LOAD_IMBALANCE
    assert _moe_core(8).saved - _moe_core(1).saved == pytest.approx(2 * h * (rows + T * k),
                                                                      rel=1e-9)
    # the rule is the engine's: Megatron's op-level count does not depend on ep here
    assert _moe_core(8, "megatron").saved == pytest.approx(_moe_core(1, "megatron").saved)
    # the experts' GEMMs run forward again: more recomputation than the same layer keeps
    # under the count that saves their outputs
    tt, mg = _moe_core(8), _moe_core(8, "megatron")
    experts = sum(mm.flops for mm in tt.ops.matmuls if mm.name in ("expert_fc1", "expert_fc2"))
    assert experts > 0
    assert tt.hw_flops - mg.hw_flops == pytest.approx(experts, rel=1e-9)
    assert tt.rc > mg.rc
