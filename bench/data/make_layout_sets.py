"""Writes layout_sets.csv: published sweeps of parallel layouts, one model on one cluster per
`set`, for the ranking report of `meshplan validate` (meshplan/ranking.py).

Every row: the configuration printed next to the number in the source, the source (document,
section/table), how the target was derived, and a trust grade. None of these rows is in
../shared/validation/calibration.csv (the tuning set) and none was used to fit anything.

Re-run after editing: python bench/data/make_layout_sets.py (needs ../shared for the column order).
"""
import csv
from pathlib import Path

HERE = Path(__file__).resolve()
cols = open(HERE.parents[3] / 'shared/validation/calibration.csv').readline().strip().split(',')
cols = cols[:cols.index('attention')] + ['head_dim'] + cols[cols.index('attention'):]
cols = cols[:1] + ['set'] + cols[1:]
rows = []

# --- BigScience BLOOM pre-training topology search (Jean Zay, 48 nodes x 8 A100 80GB) -------
# github.com/bigscience-workshop/bigscience, train/tr11-176B-ml/chronicles-prequel.md.
# Model in these sections: NHIDDEN=14336, NLAYERS=72, NHEADS=64 ("all NHEADS=64 (above too)"),
# SEQ_LEN=2048, 250k vocabulary padded to 250880 (tr11-176B-ml.slurm --pad-vocab-size-to),
# BLOOM shape: GELU MLP 4h, tied embeddings, ALiBi (no position table).
# Megatron-DeepSpeed: --checkpoint-activations (tr11 slurm; the page's TFLOPs column is the
# recompute-inclusive 96*B*s*l*h^2*(1+s/6h+V/16lh) formula and matches Sec/it for these rows),
# ZeRO stage 1 ("ZS 1" table of 02-21), fp16 (the 02-28 section says BF16 starts from then on),
# no sequence parallelism, DeepSpeed's default parameter-balanced pipeline partitioning.
# Target: tokens/s per GPU = GBS * 2048 / (Sec/it * 384). Sec/it is iteration 2 of a short run
# ("the data isn't exact and can fluctuate a bit"): trust B.
SRC = "BigScience bigscience repo train/tr11-176B-ml/chronicles-prequel.md (section '{sec}', {day})"
BLOOM = dict(model='BLOOM-prequel 181B (72x14336)', arch='dense', layers=72, hidden=14336, heads=64,
             kv_heads=64, ffn=4 * 14336, vocab=250880, attention='mha', mlp='gelu', tied_embeddings=1,
             seq_len=2048, gpu='A100-SXM-80GB', num_gpus=384, vpp=1, cp=1, ep=1, etp=1, zero=1,
             sequence_parallel=0, recompute='full', precision='fp16', framework='deepspeed')


def bloom(set_name, sec, day, dp, tp, pp, mbs, gbs, sec_it, mem='', oom=0, note=''):
    assert dp * tp * pp == 384, (dp, tp, pp)
    tps = round(gbs * 2048 / (sec_it * 384), 2) if sec_it else ''
    der = (f"Sec/it {sec_it} as printed (iteration 2), tokens/s/GPU = {gbs}*2048/(Sec/it*384); "
           if sec_it else "printed as OOM (no throughput); ")
    der += (f"table row DP={dp} TP={tp} PP={pp} MBS={mbs} GBS={gbs} Mem={mem or '-'} (nvidia-smi, "
            "not entered as peak memory: which GPU is not stated); fp16, ZeRO-1, full activation "
            "checkpointing, vocab 250880 per the file notes and tr11 slurm (inferred: trust B)" + note)
    rows.append(dict(set=set_name, source=SRC.format(sec=sec, day=day), trust='B', **BLOOM,
                     global_batch_seqs=gbs, micro_batch=mbs, tp=tp, pp=pp, dp=dp,
                     measured_tokens_per_s_per_gpu=tps, measured_step_time_s=sec_it or '',
                     oom=oom, derivation=der))


S1, SEC1, D1 = 'bloom181b-a100x384-0225', 'GBS Variations', '02-25'
for dp, tp, pp, mbs, gbs, mem, s in [
        (8, 8, 6, 4, 2048, '55GB', 114.11), (8, 8, 6, 6, 2016, '66GB', 123.57),
        (4, 8, 12, 4, 2048, '49GB', 117.07), (4, 8, 12, 2, 2048, '', 128.82),
        (6, 8, 8, 4, 2016, '52GB', 113.16), (12, 8, 4, 2, 2016, '53GB', 125.52),
        (12, 8, 4, 4, 2016, '59GB', 114.81), (24, 8, 2, 1, 2016, '65GB', 145.45),
        (24, 8, 2, 2, 2016, '76GB', 136.13), (8, 4, 12, 4, 2048, '60GB', 111.89),
        (8, 4, 12, 2, 2048, '44GB', 110.48), (16, 4, 6, 4, 2048, '75GB', 117.11),
        (16, 4, 6, 2, 2048, '57GB', 111.71), (16, 2, 12, 2, 2048, '63GB', 112.50),
        (8, 2, 24, 1, 2048, '44GB', 119.53), (8, 2, 24, 2, 2048, '53GB', 122.75),
        (4, 4, 24, 1, 2048, '', 130.60)]:
    bloom(S1, SEC1, D1, dp, tp, pp, mbs, gbs, s, mem,
          note="; the same table prints DP=8 TP=4 PP=12 MBS=2 twice (110.48 s at 44GB, 113.54 s at "
               "38GB, an unstated difference): only the first is entered" if (tp, pp, mbs) == (4, 12, 2) else "")
for dp, tp, pp, mbs, gbs in [(48, 8, 1, 1, 2016), (32, 2, 6, 2, 2048), (32, 2, 6, 1, 2048)]:
    bloom(S1, SEC1, D1, dp, tp, pp, mbs, gbs, None, 'OOM', oom=1)
# the 1568-sequence rows of that table are left out: a different global batch (workload), not a layout.

S2, SEC2, D2 = 'bloom181b-a100x384-0221', '48 node contenders', '02-21'
for dp, tp, pp, mbs, mem, s in [(4, 8, 12, 1, '29GB', 143.31), (4, 8, 12, 2, '37GB', 134.02),
                                (4, 8, 12, 4, '49GB', 123.69), (4, 8, 12, 8, '69GB', 129.26),
                                (8, 8, 6, 1, '38GB', 139.82), (8, 8, 6, 2, '44GB', 131.02),
                                (8, 8, 6, 4, '56GB', 121.48)]:
    bloom(S2, SEC2, D2, dp, tp, pp, mbs, 2048, s, mem)

for i, r in enumerate(rows, 1):
    r['id'] = f'L{i:03d}'
out = HERE.parent / 'layout_sets.csv'
with open(out, 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=cols, extrasaction='raise')
    w.writeheader()
    for r in rows:
        w.writerow({c: r.get(c, '') for c in cols})
print(f'{len(rows)} rows -> {out}')
