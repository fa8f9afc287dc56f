"""Take a runs-CSV row apart: the predicted step's named parts, then one dense layer's forward
and backward split into GEMMs (with each GEMM's rate), the attention core (with its rate),
streaming work (norms, activations, adds, FP8 casts) and kernel gaps, to hold each part
against published kernel-level figures (tests/test_kernel_tables.py).

    PYTHONPATH=$PWD python bench/dense_breakdown.py ../shared/validation/calibration.csv 53 54
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from meshplan import runs_csv
from meshplan.cost.compute import STREAM_BWD_BYTE_RATIO, matmul_s
from meshplan.cost.layer import layer_ops_times
from meshplan.cost.step import training_shard
from meshplan.search.search import search
from meshplan.validate import prepare


def layer_parts(prep, plan, projections=None) -> dict:
    """Seconds of one dense layer, one micro-batch, on one rank, by kind of work (forward and
    backward; recomputation not included), and the GEMM and attention rates in FLOP/s.
    ``projections``: the q/k/v and gate/up layout of the code measured
    (engine_projections.Projections) where it is not the engine's own; None = the engine's."""
    wl = prep.workload
    shard = training_shard(wl, prep.cluster, plan.micro_batch, plan.tp, plan.cp,
                           bool(plan.sequence_parallel), plan.ep, plan.etp)
    if projections is not None:
        shard = replace(shard, projections=projections)
    ops, dev, t = layer_ops_times(prep.model, prep.cluster, "dense", shard, wl.precision,
                                  wl.framework, "alltoall", wl.attention_kernel)
    times = [matmul_s(dev, mm) for mm in ops.matmuls]
    gemm_f = sum(x[0] for x in times)
    gemm_b = sum(x[1] + x[2] for x in times)
    flops = sum(mm.flops for mm in ops.matmuls)
    gaps_f = (ops.kernels + ops.fp8_fwd_kernels) * dev.kernel_gap_s
    gaps_b = STREAM_BWD_BYTE_RATIO * ops.kernels * dev.kernel_gap_s \
        + ops.fp8_bwd_kernels * dev.kernel_gap_s
    stream_f = t.fwd_s - gemm_f - t.attn_fwd_s
    stream_b = STREAM_BWD_BYTE_RATIO * (ops.stream_bytes * dev.act_scale / dev.hbm_bytes_per_s
                                        + ops.kernels * dev.kernel_gap_s) \
        + ops.fp8_bwd_bytes / dev.hbm_bytes_per_s + ops.fp8_bwd_kernels * dev.kernel_gap_s
    attn_b = t.bwd_input_s + t.bwd_weight_s - gemm_b - stream_b
    return {
        "gemm_fwd_s": gemm_f, "gemm_bwd_s": gemm_b,
        "attention_fwd_s": t.attn_fwd_s, "attention_bwd_s": attn_b,
        "stream_fwd_s": stream_f - gaps_f, "stream_bwd_s": stream_b - gaps_b,
        "kernel_gaps_fwd_s": gaps_f, "kernel_gaps_bwd_s": gaps_b,
        "gemm_flops_per_s": flops / gemm_f if gemm_f else 0.0,
        "attention_fwd_flops_per_s": ops.attn_fwd_flops / t.attn_fwd_s if t.attn_fwd_s else 0.0,
        "gemms": [(mm.name, mm.m, mm.n, mm.k, mm.flops / x[0]) for mm, x in zip(ops.matmuls,
                                                                               times)],
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("ids", nargs="+")
    a = ap.parse_args(argv)
    rows = [r for r in runs_csv.read_rows(a.csv) if r.get("id") in a.ids]
    for row in rows:
        prep = prepare(row)
        best = search(prep.model, prep.cluster, prep.workload, dict(prep.pins), top_k=1,
                      rerank_k=5).best
        if best is None:
            print(f"row {row['id']}: no plan fits")
            continue
        meas = float(row.get("measured_tokens_per_s_per_gpu") or "nan")
        pred = best.tokens_per_s_per_gpu
        print(f"row {row['id']} {row.get('model')} on {row.get('num_gpus')}x{row.get('gpu')} "
              f"{prep.workload.precision} seq {prep.workload.seq_len}: {best.plan.describe()}, "
              f"{best.num_microbatches} micro-batches")
        print(f"  tokens/s/GPU predicted {pred:.0f}, measured {meas:.0f} ({pred / meas - 1:+.1%});"
              f" step {best.step_time_s:.3f} s (measured {best.step_time_s * pred / meas:.3f} s)")
        for k, v in best.step_time.parts.items():
            if abs(v) > 1e-9:
                print(f"    {k:22s} {v:9.3f} s  {v / best.step_time_s:6.1%}")
        p = layer_parts(prep, best.plan)
        print("  one dense layer, one micro-batch (ms):")
        for k in ("gemm", "attention", "stream", "kernel_gaps"):
            print(f"    {k:12s} fwd {p[k + '_fwd_s'] * 1e3:9.3f}  bwd {p[k + '_bwd_s'] * 1e3:9.3f}")
        print(f"  rates: GEMMs {p['gemm_flops_per_s'] / 1e12:.0f} TFLOP/s, attention forward "
              f"{p['attention_fwd_flops_per_s'] / 1e12:.0f} TFLOP/s (executed FLOPs, causal half)")
        for name, m, n, k, r in p["gemms"]:
            print(f"    {name:10s} {m:.0f} x {n:.0f} x {k:.0f}: {r / 1e12:.0f} TFLOP/s forward")


if __name__ == "__main__":
    main()
