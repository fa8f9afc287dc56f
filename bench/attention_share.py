"""How much of a runs-CSV row's step the attention core can explain: per row, the measured and
predicted step, the model's attention-core time per step (forward and backward, every layer of
the busiest stage, every micro-batch, recomputation not included), what that time would be if
every sliding-window layer ran full causal attention, and the scores an unfused attention
(Transformer Engine's UnfusedDotProductAttention, Megatron-Core's local DotProductAttention)
would keep for backward: the b x h x s x s probabilities in 16 bits per layer, against the
GPU's memory.

A row predicted too fast by more than the attention core could add, and whose unfused scores
could not fit, is not explained by its attention backend.

    PYTHONPATH=$PWD python bench/attention_share.py bench/data/heldout_runs.csv \
        --model "GPT-OSS 120B"
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from meshplan.cost.compute import (ATTN_BWD_FLOP_RATIO, attention_occupancy,  # noqa: E402
                                   core_attention_efficiency)
from meshplan.cost.layer import layer_ops_times  # noqa: E402
from meshplan.cost.step import estimate, training_shard  # noqa: E402
from meshplan.validate import predict_row, prepare  # noqa: E402
from meshplan.plan_label import parse_label  # noqa: E402

GIB = 2 ** 30


def attention_parts(row: dict) -> dict:
    """The row's predicted plan and step, and its attention-core figures (module docstring)."""
    res = predict_row(row, with_search_best=False)
    if res.error:
        raise SystemExit(f"{row['id']}: {res.error}")
    prep = prepare(row)
    wl, model = prep.workload, prep.model
    plan = parse_label(res.plan)
    shard = training_shard(wl, prep.cluster, plan.micro_batch, plan.tp, plan.cp,
                           bool(plan.sequence_parallel), plan.ep, plan.etp)
    ops, dev, _ = layer_ops_times(model, prep.cluster, "moe" if model.is_moe else "dense", shard,
                                  wl.precision, wl.framework, plan.moe_dispatcher or "alltoall",
                                  wl.attention_kernel)
    ef, eb = core_attention_efficiency(dev, ops), core_attention_efficiency(dev, ops, True)
    g = dev.generation

    def seconds(flops: float, keys: float) -> float:
        if not flops:
            return 0.0
        return (flops / (dev.attn_flops * ef * attention_occupancy(keys, False, g))
                + ATTN_BWD_FLOP_RATIO * flops
                / (dev.attn_flops * eb * attention_occupancy(keys, True, g)))

    layer = (seconds(ops.attn_fwd_flops - ops.attn_window_fwd_flops, ops.attn_seq)
             + seconds(ops.attn_window_fwd_flops, ops.attn_window_seq))
    s = wl.seq_len
    full = seconds(ops.attn_fwd_flops * (s / 2) / model.causal_keys(s), ops.attn_seq)
    est = estimate(model, prep.cluster, wl, plan)
    per_step = est.num_microbatches * model.layers / plan.pp
    probs = plan.micro_batch * model.heads / plan.tp * (s / plan.cp) * s * 2
    measured_step = wl.tokens_per_step / prep.cluster.num_gpus / res.measured_tokens_per_s_per_gpu
    return dict(plan=res.plan, predicted_s=res.predicted_step_time_s, measured_s=measured_step,
                attention_s=layer * per_step, all_full_causal_s=full * per_step,
                unfused_probs_gib=probs * model.layers / plan.pp / GIB,
                gpu_gib=prep.cluster.gpu.memory_bytes / GIB)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--model", default="", help="only rows whose model column is this")
    ap.add_argument("ids", nargs="*", help="only these row ids")
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.csv, newline=""))
            if (not a.model or r["model"] == a.model) and (not a.ids or r["id"] in a.ids)]
    print("id    gpu            step meas/pred s   gap s  attention s  all-full-causal s  "
          "unfused probs GiB/GPU")
    for r in rows:
        p = attention_parts(r)
        print(f"{r['id']:5} {r['gpu']:14} {p['measured_s']:6.2f} / {p['predicted_s']:5.2f}"
              f"  {p['measured_s'] - p['predicted_s']:+6.2f}  {p['attention_s']:10.3f}"
              f"  {p['all_full_causal_s']:17.3f}  {p['unfused_probs_gib']:8.0f} / "
              f"{p['gpu_gib']:.0f}   {p['plan']}")


if __name__ == "__main__":
    main()
