"""One Megatron-LM transformer layer on A100 against its published per-layer times
(bench/data/korthikanti2022_layer_times.csv: Korthikanti et al. 2022, Table 4 and sec. 6.2):
the model's forward and backward of the same layer, one micro-batch on one TP rank, and its
parts (GEMMs, attention core, element-wise work, kernel gaps, exposed and hidden TP
communication, recomputation).

The model's backward holds the input- and weight-gradient passes, the recomputed forward
and the compute slowdown beside the TP collectives it hides (LayerCost.overlap_slowdown_s,
which estimate() charges to the step outside the layers): the paper's backward is wall time.

    PYTHONPATH=$PWD python bench/korthikanti_layer.py
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dense_breakdown import layer_parts  # noqa: E402

from meshplan.cost.layer import CommPlacements, layer_cost  # noqa: E402
from meshplan.cost.step import placements, training_shard  # noqa: E402
from meshplan.plan import Plan  # noqa: E402
from meshplan.validate import prepare  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "korthikanti2022_layer_times.csv"


def read_rows(path: Path = DATA) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def baseline_of(row: dict, rows: list[dict]) -> dict:
    """The same layer without recomputation or sequence parallelism (the paper's baseline)."""
    return {**row, "sequence_parallel": "0", "recompute": "none"}


def layer(row: dict) -> dict:
    """The model's seconds for one layer of ``row`` (a korthikanti2022_layer_times.csv row):
    forward, backward (wall: with recomputation and the slowdown beside hidden TP
    communication), and the parts."""
    tp, mb = int(row["tp"]), int(row["micro_batch"])
    run = {"id": row["id"], "model": row["model"], "arch": "dense", "layers": "1",
           "hidden": row["hidden"], "heads": row["heads"], "kv_heads": row["heads"],
           "ffn": row["ffn"], "vocab": row["vocab"], "attention": "mha", "mlp": "gelu",
           "tied_embeddings": "1", "seq_len": row["seq_len"], "global_batch_seqs": str(mb),
           "micro_batch": str(mb), "gpu": row["gpu"], "num_gpus": str(tp),
           "precision": row["precision"], "framework": row["framework"],
           "attention_kernel": row["attention_kernel"], "measured_tokens_per_s_per_gpu": "1"}
    prep = prepare(run)
    wl, cl = prep.workload, prep.cluster
    sp, rc = row["sequence_parallel"] == "1", row["recompute"]
    plan = Plan(dp=1, tp=tp, pp=1, micro_batch=mb, recompute=rc, sequence_parallel=sp)
    shard = training_shard(wl, cl, mb, tp, 1, sp, 1, 1)
    pl = placements(plan, cl)
    c = layer_cost(prep.model, cl, "dense", shard, rc,
                   CommPlacements(pl["tp"], pl["cp"], pl["ep"], pl["etp"]), False,
                   wl.precision, "ring", wl.framework, "alltoall", False, "",
                   wl.attention_kernel)
    out = {"fwd_s": c.fwd_s,
           "bwd_s": c.bwd_input_s + c.bwd_weight_s + c.overlap_slowdown_s,
           "tp_fwd_exposed_s": c.fwd_exposed_s,
           "tp_bwd_exposed_s": c.tp_exposed_s - c.fwd_exposed_s,
           "tp_hidden_s": c.tp_wire_s - c.tp_exposed_s,
           "contention_s": c.overlap_slowdown_s, "recompute_s": c.recompute_s}
    out.update(layer_parts(prep, plan))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(DATA))
    a = ap.parse_args(argv)
    rows = read_rows(Path(a.csv))
    print("| row | experiment | fwd ms paper / model | bwd ms paper / model | overhead % paper /"
          " model | model parts fwd: GEMM, attention, element-wise+gaps, TP exposed | bwd: "
          "TP exposed, hidden, contention, recompute |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        m = layer(r)
        base = layer(baseline_of(r, rows))
        ov = ((m["fwd_s"] + m["bwd_s"]) / (base["fwd_s"] + base["bwd_s"]) - 1) * 100
        f = r["measured_fwd_ms"] or "-"
        b = r["measured_bwd_ms"] or "-"
        po = r["measured_overhead_pct"] or "0"
        ms = 1e3
        print(f"| {r['id']} | {r['experiment']} | {f} / {m['fwd_s'] * ms:.2f} | "
              f"{b} / {m['bwd_s'] * ms:.2f} | {po} / {ov:.1f} | "
              f"{m['gemm_fwd_s'] * ms:.2f}, {m['attention_fwd_s'] * ms:.2f}, "
              f"{(m['stream_fwd_s'] + m['kernel_gaps_fwd_s']) * ms:.2f}, "
              f"{m['tp_fwd_exposed_s'] * ms:.2f} | {m['tp_bwd_exposed_s'] * ms:.2f}, "
              f"{m['tp_hidden_s'] * ms:.2f}, {m['contention_s'] * ms:.2f}, "
              f"{m['recompute_s'] * ms:.2f} |")
    # the GEMM rate the published times leave room for, if the model's other parts are right
    print("\n| row | GEMM TFLOP/s model | implied by the paper's forward | implied by its backward |")
    print("|---|---|---|---|")
    for r in rows:
        if r["measured_fwd_ms"] and r["recompute"] == "none":
            m = layer(r)
            f_s, b_s = implied_gemm_s(r, m)
            flops = m["gemm_flops_per_s"] * m["gemm_fwd_s"]
            print(f"| {r['id']} | {m['gemm_flops_per_s'] / 1e12:.0f} | {flops / f_s / 1e12:.0f} | "
                  f"{2 * flops / b_s / 1e12:.0f} |")


def implied_gemm_s(row: dict, m: dict) -> tuple[float, float]:
    """(forward, backward) seconds left for the GEMMs of a row without recomputation: the
    published time less the model's attention, element-wise work, kernel gaps, exposed TP
    communication and (backward) the slowdown beside the hidden collectives."""
    fwd = float(row["measured_fwd_ms"]) / 1e3 - (
        m["attention_fwd_s"] + m["stream_fwd_s"] + m["kernel_gaps_fwd_s"] + m["tp_fwd_exposed_s"])
    bwd = float(row["measured_bwd_ms"]) / 1e3 - (
        m["attention_bwd_s"] + m["stream_bwd_s"] + m["kernel_gaps_bwd_s"]
        + m["tp_bwd_exposed_s"] + m["contention_s"])
    return fwd, bwd


if __name__ == "__main__":
    main()
