"""Adds the BigScience rows (M101...) to heldout_memory.csv; rows M001-M011 (torchtitan,
entered by hand, sourced in their own derivation column) are kept as they are.

Source: github.com/bigscience-workshop/bigscience, train/tr11-176B-ml/chronicles-prequel.md
(the BLOOM-176B topology search on Jean Zay, A100 80GB SXM, 8 per node, Megatron-DeepSpeed).
Its tables print, per run, DP/TP/PP/MBS/GBS and a `Mem` column. What Mem is, from the same
document: "*Mem = max memory used by the first (last) nodes with the word embedding matrix"
(02-17 tables) and "was quickly getting the memory snapshot with: pdsh -w jean-zay-iam01
... nvidia-smi" (02-28): nvidia-smi's memory-used on the first node, i.e. the first pipeline
stage (Megatron's rank order puts TP innermost, PP outermost), which holds the word
embedding. nvidia-smi prints MiB; the tables round to whole "GB" = GiB. nvidia-smi counts
the CUDA context, which meshplan's reported peak (PyTorch reserved) excludes: the same
document measures it as 1573 MiB on an A100 ("40GB A100 takes 1573MiB for cuda kernels
... probably about the same for 80GB"), so measured_peak_mem_gib = Mem - 1.54 (rounded
to 0.01). Rounding of Mem to 1 GiB is +-0.5 GiB (+-1% at 50 GiB).

Configuration common to these rows (trust C: the Mem column is one nvidia-smi snapshot
of one node, and several settings are carried over from the file's other sections):
- seq 2048, vocab 250880 (tr11 slurm --pad-vocab-size-to 250880; the tables say "250k"),
  GELU MLP 4h, tied embeddings, ALiBi (no position table), NHEADS 64 unless the table
  prints NHEADS ("all NHEADS=64 (above too)", section 'Final round comparison');
- fp16 (the 02-28 section: "from now on the testing is happening with BF16 optimizer ...
  compared to fp16 which grad accumulates in fp16"): only rows before 02-28 are entered;
- ZeRO stage 1 (the 02-21 "ZS" table; a ZS 0 row is entered with zero=0), full
  activation checkpointing (tr11 slurm --checkpoint-activations), no sequence parallelism,
  DeepSpeed's default pipeline partitioning 'parameters' by transformer blocks (the
  embedding sits on the first and last stage in addition to their blocks).
Left out: rows without a Mem value; the 02-28 rows (bf16 with fp32 accumulation and the
'type:transformer|embedding' partitioning meshplan does not express); 78-layer PP=12 rows
(the document: 78/12 leaves the last stage with 1 block); configurations printed twice
with two different Mem at the same setting (DP8 TP4 PP12 MBS2 at 44 and 38 GB, 02-25) and
the 84x13824 PP6 pair whose Mem falls as MBS doubles (65 GB at MBS 2, 56 GB at MBS 4:
one of the two is misrecorded, which one is not knowable); the 18B single-node rows (their
heading and table disagree on the batch); the 02-20 rows whose layer count is not printed.

Second source, same team and engine: experiments/tr3m-1B3.md ('32GB node' tables), the
1.3B model of train/tr3-1B3-baseline/tr3m-1B3-emb-norm-pile.slurm (the page names it:
NLAYERS 24, NHIDDEN 2048, NHEADS 16, FFN 8192, SEQ_LEN 2048, GPT-2 vocabulary 50257 padded
by Megatron to a multiple of 128 x TP, learned positions (4.2M parameters, not a column:
left out, 0.3% of the model), fp16, ZeRO_STAGE=1, GBS 512 "w/o BS-rampup", tied
embeddings (Megatron GPT default)) on 2 nodes x 4 V100 32GB; one table with
--checkpoint-activations, one "after removing --checkpoint-activations". The Notes column
prints the memory ("16GB"); not said how it was read: taken as nvidia-smi as in the
prequel, less the CUDA context the prequel measured on the 32 GB V100s ("the cuda kernels
(1271MiB)"): peak = Mem - 1.24. Trust C. V100 has no FlashAttention (sm70): the engine's
fused softmax keeps the attention scores.

Re-run: python bench/data/make_heldout_memory.py
"""
import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "heldout_memory.csv"
SRC = ("BigScience bigscience repo train/tr11-176B-ml/chronicles-prequel.md "
       "(section '{sec}', {day})")
CONTEXT_GIB = 1573 / 1024  # the document's measured CUDA-kernel footprint (nvidia-smi)

# (section, day, layers, hidden, heads, dp, tp, pp, mbs, gbs, Mem GB or 'OOM', zero)
ROWS = [
    # 02-17 'Best TFLOPs', fp16 subsection: 20B = 8 x 14400 (NHEADS=32), 200B = 80 x 14400 (NHEADS=96)
    ("Best TFLOPs / fp16", "02-17", 8, 14400, 32, 1, 8, 1, 1, 2048, 67, 1),
    ("Best TFLOPs / fp16", "02-17", 80, 14400, 96, 1, 8, 10, 1, 2048, 73, 1),
    ("Best TFLOPs / fp16", "02-17", 80, 14400, 96, 2, 8, 10, 1, 2048, 51, 1),
    # 02-20 'tile and wave quantization': 187B = NHIDDEN 13824 / NLAYERS 80 (printed later
    # in 'NHIDDEN=13824 / NLAYERS=80 ... 187B')
    ("tile and wave quantization", "02-20", 80, 13824, 64, 4, 8, 10, 1, 2048, 33, 1),
    ("tile and wave quantization", "02-20", 80, 13824, 64, 4, 8, 10, 2, 2048, 39, 1),
    ("tile and wave quantization", "02-20", 80, 13824, 64, 4, 8, 10, 4, 2048, 53, 1),
    ("tile and wave quantization", "02-20", 80, 13824, 64, 4, 8, 10, 8, 2048, 73, 1),
    # 02-21 '48 node contenders': NHIDDEN 14336 / NLAYERS 72
    ("48 node contenders", "02-21", 72, 14336, 64, 4, 8, 12, 1, 2048, 29, 1),
    ("48 node contenders", "02-21", 72, 14336, 64, 4, 8, 12, 2, 2048, 37, 1),
    ("48 node contenders", "02-21", 72, 14336, 64, 4, 8, 12, 4, 2048, 49, 1),
    ("48 node contenders", "02-21", 72, 14336, 64, 4, 8, 12, 8, 2048, 69, 1),
    ("48 node contenders", "02-21", 72, 14336, 64, 8, 8, 6, 1, 2048, 38, 1),
    ("48 node contenders", "02-21", 72, 14336, 64, 8, 8, 6, 2, 2048, 44, 1),
    ("48 node contenders", "02-21", 72, 14336, 64, 8, 8, 6, 4, 2048, 56, 1),
    ("48 node contenders", "02-21", 84, 13824, 64, 4, 8, 12, 2, 2048, 39, 1),
    ("48 node contenders", "02-21", 84, 13824, 64, 4, 8, 12, 4, 2048, 52, 1),
    # 02-21 'Trying with ZeRO_STAGE=0/1' (the ZS 1 row repeats the contenders' 37 GB)
    ("48 node contenders / ZeRO_STAGE=0", "02-21", 72, 14336, 64, 4, 8, 12, 2, 2048, 72, 0),
    # 02-23/24 'NHEADs comparison', 72 x 14336, DP8 TP8 PP6 MBS4
    ("NHEADs comparison", "02-24", 72, 14336, 16, 8, 8, 6, 4, 2048, 54, 1),
    ("NHEADs comparison", "02-23", 72, 14336, 32, 8, 8, 6, 4, 2048, 55, 1),
    ("NHEADs comparison", "02-23", 72, 14336, 64, 8, 8, 6, 4, 2048, 55, 1),
    ("NHEADs comparison", "02-23", 72, 14336, 112, 8, 8, 6, 4, 2048, 53, 1),
    ("NHEADs comparison", "02-23", 72, 14336, 128, 8, 8, 6, 4, 2048, 55, 1),
    ("NHEADs comparison", "02-24", 72, 14336, 256, 8, 8, 6, 4, 2048, 54, 1),
    ("NHEADs comparison", "02-23", 78, 13824, 96, 8, 8, 6, 4, 2048, 59, 1),
    ("NHEADs comparison", "02-23", 78, 13824, 128, 8, 8, 6, 4, 2048, 54, 1),
    # 02-25 'GBS Variations', 72 x 14336, NHEADS 64
    ("GBS Variations", "02-25", 72, 14336, 64, 8, 8, 6, 4, 1568, 56, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 8, 8, 6, 4, 2048, 55, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 8, 8, 6, 6, 2016, 66, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 4, 8, 12, 4, 2048, 49, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 6, 8, 8, 4, 2016, 52, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 12, 8, 4, 2, 2016, 53, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 12, 8, 4, 4, 2016, 59, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 24, 8, 2, 1, 2016, 65, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 24, 8, 2, 2, 2016, 76, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 48, 8, 1, 1, 2016, "OOM", 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 8, 4, 12, 4, 2048, 60, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 16, 4, 6, 4, 2048, 75, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 16, 4, 6, 2, 2048, 57, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 16, 2, 12, 2, 2048, 63, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 32, 2, 6, 2, 2048, "OOM", 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 32, 2, 6, 1, 2048, "OOM", 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 8, 2, 24, 1, 2048, 44, 1),
    ("GBS Variations", "02-25", 72, 14336, 64, 8, 2, 24, 2, 2048, 53, 1),
    ("GBS Variations", "02-25", 96, 12288, 64, 8, 1, 48, 1, 2048, 58, 1),
    # 02-27 'Re-do', 78 x 13824, NHEADS 96 (the DP8 TP8 PP6 MBS4 row repeats 59 GB of 02-23)
    ("Re-do", "02-27", 78, 13824, 96, 16, 4, 6, 4, 2048, 75, 1),
]


SRC_1B3 = "BigScience bigscience repo experiments/tr3m-1B3.md ('32GB node', {t})"
V100_CONTEXT_GIB = 1271 / 1024
# (table, tp, pp, dp, mbs, Mem GB or 'OOM')
ROWS_1B3 = [(t, *r) for t, rs in (
    ("with --checkpoint-activations", [
        (1, 1, 8, 1, 16), (1, 1, 8, 2, 17), (1, 1, 8, 4, 20), (1, 1, 8, 8, 25),
        (1, 2, 4, 1, 10), (1, 2, 4, 2, 11), (1, 2, 4, 8, 15), (1, 2, 4, 16, "OOM"),
        (1, 4, 2, 1, 9), (1, 4, 2, 8, 13), (2, 1, 4, 1, 11)]),
    ("without --checkpoint-activations", [
        (1, 1, 8, 1, 27), (1, 2, 4, 1, 21), (1, 4, 2, 1, 19), (1, 4, 2, 2, 30),
        (2, 1, 4, 1, 21)])) for r in rs]


def row_1b3(i, table, tp, pp, dp, mbs, mem):
    oom = mem == "OOM"
    ckpt = table.startswith("with ")
    vocab = -(-50257 // (128 * tp)) * 128 * tp
    der = (f"table row TP={tp} PP={pp} DP={dp} MBS={mbs} Notes={'OOM' if oom else f'{mem}GB'}; "
           + ("printed as OOM; " if oom else
              f"peak = {mem} - 1.24 (CUDA context the prequel measured on 32 GB V100s, 1271 MiB) "
              f"= {mem - V100_CONTEXT_GIB:.2f} GiB; ")
           + f"GBS 512, fp16, ZeRO-1, {'full' if ckpt else 'no'} activation checkpointing, "
           f"vocab 50257 padded to {vocab}, from tr3m-1B3-emb-norm-pile.slurm (trust C); "
           f"8 V100 32GB (2 nodes x 4; the file has no gpus_per_node column: memory does not "
           f"depend on it)")
    return dict(
        id=f"M{201 + i}", source=SRC_1B3.format(t=table), trust="C",
        model="BigScience tr3m 1.3B (24x2048)", arch="dense", layers=24, hidden=2048,
        heads=16, kv_heads=16, ffn=8192, vocab=vocab, attention="mha", mlp="gelu",
        tied_embeddings=1, seq_len=2048, global_batch_seqs=512, micro_batch=mbs,
        gpu="V100-SXM-32GB", num_gpus=8, tp=tp, pp=pp, vpp=1, dp=dp, cp=1,
        ep=1, etp=1, zero=1, sequence_parallel=0, recompute="full" if ckpt else "none",
        precision="fp16", framework="deepspeed",
        measured_peak_mem_gib="" if oom else f"{mem - V100_CONTEXT_GIB:.2f}",
        oom=1 if oom else 0, derivation=der)


def bloom_row(i, sec, day, layers, hidden, heads, dp, tp, pp, mbs, gbs, mem, zero):
    n = dp * tp * pp
    oom = mem == "OOM"
    size_b = (layers * (12 * hidden**2 + 13 * hidden) + 250880 * hidden) / 1e9
    der = (f"table row DP={dp} TP={tp} PP={pp} MBS={mbs} GBS={gbs} NLAYERS={layers} "
           f"NHIDDEN={hidden} NHEADS={heads} Mem={'OOM' if oom else f'{mem}GB'}"
           + ("" if zero == 1 else " ZS=0") + "; ")
    if oom:
        der += "printed as OOM; "
    else:
        der += (f"Mem is nvidia-smi on the first node (first pipeline stage, word embedding), "
                f"MiB/1024 rounded: peak = {mem} - 1.54 (the document's measured CUDA "
                f"context, 1573 MiB) = {mem - CONTEXT_GIB:.2f} GiB (PyTorch reserved); ")
    der += (f"fp16, ZeRO-{zero}, full activation checkpointing, seq 2048, vocab 250880, "
            f"no SP, Megatron-DeepSpeed (inferred from the file's other sections and the tr11 "
            f"slurm: trust C); {n} A100 80GB")
    return dict(
        id=f"M{101 + i}", source=SRC.format(sec=sec, day=day), trust="C",
        model=f"BLOOM-prequel {size_b:.0f}B ({layers}x{hidden})", arch="dense",
        layers=layers, hidden=hidden, heads=heads, kv_heads=heads, ffn=4 * hidden,
        vocab=250880, attention="mha", mlp="gelu", tied_embeddings=1, seq_len=2048,
        global_batch_seqs=gbs, micro_batch=mbs, gpu="A100-SXM-80GB", num_gpus=n,
        tp=tp, pp=pp, vpp=1, dp=dp, cp=1, ep=1, etp=1, zero=zero, sequence_parallel=0,
        recompute="full", precision="fp16", framework="deepspeed",
        measured_peak_mem_gib="" if oom else f"{mem - CONTEXT_GIB:.2f}",
        oom=1 if oom else 0, derivation=der)


def main():
    with open(OUT, newline="") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames
        kept = [r for r in reader if int(r["id"][1:]) < 100]
    new = [bloom_row(i, *r) for i, r in enumerate(ROWS)]
    new += [row_1b3(i, *r) for i, r in enumerate(ROWS_1B3)]
    with open(OUT, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, restval="")
        w.writeheader()
        w.writerows(kept + new)
    print(f"{OUT.name}: {len(kept)} kept + {len(new)} BigScience rows")


if __name__ == "__main__":
    main()
