"""Writes layout_sets.csv: published sweeps of parallel layouts, one model on one cluster per
`set`, for the ranking report of `meshplan validate` (meshplan/ranking.py).

Every row: the configuration printed next to the number in the source, the source (document,
section/table), how the target was derived, and a trust grade. None of these rows is in
../shared/validation/calibration.csv (the tuning set) and none was used to fit anything.

Re-run after editing: python bench/data/make_layout_sets.py (needs ../shared for the column order).
"""
import csv
import math
from pathlib import Path

HERE = Path(__file__).resolve()
cols = open(HERE.parents[3] / 'shared/validation/calibration.csv').readline().strip().split(',')
cols = cols[:cols.index('attention')] + ['head_dim'] + cols[cols.index('attention'):]
cols = cols[:1] + ['set'] + cols[1:]
cols = cols[:cols.index('num_gpus')] + ['nic_gbps_per_gpu'] + cols[cols.index('num_gpus'):]
cols = cols[:cols.index('oom')] + ['measured_noise'] + cols[cols.index('oom'):]
cols = cols[:cols.index('framework') + 1] + ['norm_kernel'] + cols[cols.index('framework') + 1:]
rows = []

# --- BigScience BLOOM pre-training topology search (Jean Zay, 48 nodes x 8 A100 80GB) -------
# github.com/bigscience-workshop/bigscience, train/tr11-176B-ml/chronicles-prequel.md.
# Model in these sections: NHIDDEN=14336, NLAYERS=72, NHEADS=64 ("all NHEADS=64 (above too)"),
# SEQ_LEN=2048, 250k vocabulary padded to 250880 (tr11-176B-ml.slurm --pad-vocab-size-to),
# BLOOM shape: GELU MLP 4h, tied embeddings, ALiBi (no position table).
# Megatron-DeepSpeed: --checkpoint-activations (tr11 slurm; the page's TFLOPs column is the
# recompute-inclusive 96*B*s*l*h^2*(1+s/6h+V/16lh) formula and matches Sec/it for these rows),
# ZeRO stage 1 ("ZS 1" table of 02-21), fp16 (the 02-28 section says BF16 starts from then on),
# no sequence parallelism; pipeline stages hold equal numbers of transformer layers, the
# embedding on the first and the tied output layer on the last (Megatron-DeepSpeed's
# GPTModelPipe passes partition_method='type:transformer' to DeepSpeed's PipelineModule; the
# page switches to 'type:transformer|embedding' only on 02-28, section 'Rebalancing layers';
# until 2026-11-23 this note said "parameter-balanced", DeepSpeed's own default, which
# GPTModelPipe overrides), i.e. meshplan's balanced split (plan.py layer_split).
# Network: Jean Zay's A100 nodes have "4 Omni-Path 100 Gbps links per node" for 8 GPUs (BLOOM
# paper, arXiv 2211.05100, sec. 3.4 'Hardware'): nic_gbps_per_gpu 50 (until 2026-11-23 left
# blank, i.e. the usual 200 Gb/s HDR NIC per A100, four times too fast).
# Noise: "the data isn't exact and can fluctuate a bit" (section 'Choosing the fastest 3D
# Topology': one snapshot, iteration 2). The page times three configurations of this model
# (72 x 14336, 64 heads, GBS 2048, fp16, ZeRO-1) more than once (REPEATS, Sec/it as printed);
# their pooled within-configuration standard deviation of ln(Sec/it) is the measured_noise of
# every BLOOM row (about 1.0%; meshplan/ranking.py uses it for the noise-aware ranking).
# Target: tokens/s per GPU = GBS * 2048 / (Sec/it * 384). Sec/it is iteration 2 of a short run
# ("the data isn't exact and can fluctuate a bit"): trust B.
SRC = "BigScience bigscience repo train/tr11-176B-ml/chronicles-prequel.md (section '{sec}', {day})"
BLOOM = dict(model='BLOOM-prequel 181B (72x14336)', arch='dense', layers=72, hidden=14336, heads=64,
             kv_heads=64, ffn=4 * 14336, vocab=250880, attention='mha', mlp='gelu', tied_embeddings=1,
             seq_len=2048, gpu='A100-SXM-80GB', nic_gbps_per_gpu=50, num_gpus=384, vpp=1, cp=1, ep=1, etp=1, zero=1,
             sequence_parallel=0, recompute='full', precision='fp16', framework='deepspeed')


REPEATS = [
    # DP=8 TP=4 PP=12 MBS=2, 'GBS Variations' 02-25: printed twice
    (110.48, 113.54),
    # DP=8 TP=8 PP=6 MBS=4: '48 node contenders' 02-21, 'Final round comparison' 02-23,
    # 'NHEADs comparison' 02-23 (NHEADS=64)
    (121.48, 120.85, 120.18),
    # DP=4 TP=8 PP=12 MBS=4: '48 node contenders' 02-21, 'Final round comparison' 02-23
    (123.69, 123.79),
]


def pooled_log_sd(groups):
    ss = df = 0
    for g in groups:
        logs = [math.log(x) for x in g]
        mean = sum(logs) / len(logs)
        ss += sum((v - mean) ** 2 for v in logs)
        df += len(logs) - 1
    return math.sqrt(ss / df)


BLOOM_NOISE = round(pooled_log_sd(REPEATS), 4)


def bloom(set_name, sec, day, dp, tp, pp, mbs, gbs, sec_it, mem='', oom=0, note=''):
    assert dp * tp * pp == 384, (dp, tp, pp)
    tps = round(gbs * 2048 / (sec_it * 384), 2) if sec_it else ''
    der = (f"Sec/it {sec_it} as printed (iteration 2), tokens/s/GPU = {gbs}*2048/(Sec/it*384); "
           if sec_it else "printed as OOM (no throughput); ")
    der += (f"table row DP={dp} TP={tp} PP={pp} MBS={mbs} GBS={gbs} Mem={mem or '-'} (nvidia-smi, "
            "not entered as peak memory: which GPU is not stated); fp16, ZeRO-1, full activation "
            "checkpointing, vocab 250880 per the file notes and tr11 slurm (inferred: trust B)" + note)
    if sec_it:
        der += (f"; measured_noise {BLOOM_NOISE}: pooled run-to-run sd of the configurations the "
                "page times more than once")
    rows.append(dict(set=set_name, source=SRC.format(sec=sec, day=day), trust='B', **BLOOM,
                     measured_noise=BLOOM_NOISE if sec_it else '',
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

# --- Hagemann et al. 2023, "Efficient Parallelization Layouts for Large-Scale Distributed Model
# Training" (arXiv 2311.05610, NeurIPS WANT workshop): the authors' raw sweep results,
# github.com/Aleph-Alpha/NeurIPS-WANT-submission-efficient-parallelization-layouts,
# data/*_all_runs.xlsx (columns: Trial ID, World Size, Average Step Time, ..., Average MFU,
# activation_checkpointing_type, kernel, micro_batch_size, model_parallel_size (TP),
# pipe_parallel_size). One file = one model on one cluster = one set. Entered: every row of
# kernel 'flash_attention2' (the other kernels - torch, fused, FlashAttention 1.0.8, FA2 + a
# fused RMSNorm kernel - are engine variants meshplan does not model), as
# (trial id, world size, checkpointing, micro batch, TP, PP, average step time s or None = the
# sheet's 'OOM Error'). LLaMA-1 shapes (Touvron et al. 2023, Table 2; ffn from the released
# configs). Inferred (trust B): 4,194,304 tokens per step (GBS 2048 at 2k, 512 at 8k) and a
# 128,000-token vocabulary: with them the sheet's MFU column equals
# (6*params + 12*layers*hidden*seq) * tokens / (step time * GPUs * 312 TFLOP/s) in all five
# files (0.02%), while LLaMA's 32,000 vocabulary gives 3-7% off; A100 80GB SXM (MFU against the
# A100's 312 TFLOP/s); bf16; ZeRO stage 1: not in the sheets, but the engine has no other
# sharding (Aleph-Alpha/scaling core/optimizer/optimizer_config.py: ``zero: bool``, "enable
# zero stage 1 optimizer") and without it (16 bytes of optimizer state per parameter) no
# 13B layout at TP1 PP1, which the 13B sheet ran, fits in 80 GB (until 2026-11-23 this was
# left blank and the search chose ZeRO-3 for those rows, a sharding the engine cannot run);
# no sequence parallelism (the paper's separate seqpara sheets are left
# out); checkpointing 'every_layer' = full recompute, 'disabled' = none. DP = GPUs/(TP*PP).
# Engine: framework 'aleph-alpha' = the authors' Aleph Alpha training code (the sheets' 'Average
# TFlops Aleph Alpha' column and kernel options; public release github Aleph-Alpha/scaling):
# kernel 'flash_attention2' runs its eager torch RMSNorm (the 'RMS kernel' variant fuses it) and
# its LM head all-gathers the logits over TP (cost/ops.py UNFUSED_NORM_ENGINES,
# GATHERED_LOGITS_ENGINES). Inferred from the code release, not stated in the paper: trust B.
AA_SRC = ("Hagemann et al. 2023 (arXiv 2311.05610) raw results, Aleph-Alpha/"
          "NeurIPS-WANT-submission-efficient-parallelization-layouts data/{f}")
LLAMA1 = {'13B': (40, 5120, 40, 13824), '30B': (60, 6656, 52, 17920), '65B': (80, 8192, 64, 22016)}
AA_FILES = {  # file: (set, model size, sequence length)
    'llama_13B_bfloat16_64_GPUs_all_runs.xlsx': ('llama13b-2k-a100x64', '13B', 2048),
    'llama_13B_bfloat16_8k_seq_length_128_GPUs_all_runs.xlsx': ('llama13b-8k-a100x128', '13B', 8192),
    'llama_30B_bfloat16_256_GPUs_all_runs.xlsx': ('llama30b-2k-a100x256', '30B', 2048),
    'llama_30B_8k_seq_length_bfloat16_128_GPUs_all_runs.xlsx': ('llama30b-8k-a100x128', '30B', 8192),
    'llama_65B_bfloat16_128_GPUs_all_runs.xlsx': ('llama65b-2k-a100x128', '65B', 2048),
}
AA_TOKENS_PER_STEP = 4_194_304
AA_ROWS = {
    'llama_13B_bfloat16_64_GPUs_all_runs.xlsx': [
        (132314, 64, 'disabled', 1, 1, 1, None),
        (132307, 64, 'disabled', 1, 1, 2, 33.695),
        (132312, 64, 'disabled', 1, 2, 1, 35.541),
        (132316, 64, 'disabled', 1, 2, 2, 39.637),
        (132313, 64, 'disabled', 2, 1, 1, None),
        (132315, 64, 'disabled', 2, 1, 2, 38.274),
        (132317, 64, 'disabled', 2, 2, 1, 33.903),
        (132310, 64, 'disabled', 2, 2, 2, 39.825),
        (132308, 64, 'disabled', 4, 1, 1, None),
        (132306, 64, 'disabled', 4, 1, 2, None),
        (132304, 64, 'disabled', 4, 2, 1, None),
        (132318, 64, 'disabled', 4, 2, 2, None),
        (132305, 64, 'disabled', 8, 1, 2, None),
        (132311, 64, 'disabled', 8, 2, 1, None),
        (132303, 64, 'disabled', 8, 2, 2, None),
        (132405, 64, 'every_layer', 1, 1, 1, 37.513),
        (132404, 64, 'every_layer', 1, 1, 2, 44.133),
        (132403, 64, 'every_layer', 1, 2, 1, 47.123),
        (132401, 64, 'every_layer', 2, 1, 1, 36.686),
        (132399, 64, 'every_layer', 2, 1, 2, 47.367),
        (132397, 64, 'every_layer', 2, 2, 1, 44.448),
        (132396, 64, 'every_layer', 2, 2, 2, 53.565),
        (132394, 64, 'every_layer', 4, 1, 1, 36.661),
        (132393, 64, 'every_layer', 4, 1, 2, 55.605),
        (132392, 64, 'every_layer', 4, 2, 1, 44.104),
        (132390, 64, 'every_layer', 4, 2, 2, 56.609),
        (132337, 64, 'every_layer', 8, 1, 2, 72.819),
        (132336, 64, 'every_layer', 8, 2, 1, 43.24),
        (132335, 64, 'every_layer', 8, 2, 2, 65.468),
    ],
    'llama_13B_bfloat16_8k_seq_length_128_GPUs_all_runs.xlsx': [
        (132474, 128, 'disabled', 1, 1, 1, None),
        (132473, 128, 'disabled', 1, 1, 2, None),
        (132472, 128, 'disabled', 1, 1, 4, None),
        (132471, 128, 'disabled', 1, 2, 1, None),
        (132469, 128, 'disabled', 1, 2, 2, None),
        (132468, 128, 'disabled', 1, 2, 4, 21.927),
        (132466, 128, 'disabled', 1, 4, 1, None),
        (132465, 128, 'disabled', 1, 4, 2, 25.991),
        (132464, 128, 'disabled', 1, 4, 4, 26.942),
        (132461, 128, 'disabled', 2, 1, 1, None),
        (132459, 128, 'disabled', 2, 1, 2, None),
        (132457, 128, 'disabled', 2, 1, 4, None),
        (132456, 128, 'disabled', 2, 2, 1, None),
        (132455, 128, 'disabled', 2, 2, 2, None),
        (132453, 128, 'disabled', 2, 2, 4, None),
        (132450, 128, 'disabled', 2, 4, 1, None),
        (132446, 128, 'disabled', 2, 4, 2, None),
        (132445, 128, 'disabled', 2, 4, 4, None),
        (132443, 128, 'disabled', 4, 1, 1, None),
        (132442, 128, 'disabled', 4, 1, 2, None),
        (132439, 128, 'disabled', 4, 1, 4, None),
        (132438, 128, 'disabled', 4, 2, 1, None),
        (132435, 128, 'disabled', 4, 2, 2, None),
        (132433, 128, 'disabled', 4, 2, 4, None),
        (132432, 128, 'disabled', 4, 4, 1, None),
        (132431, 128, 'disabled', 4, 4, 2, None),
        (132429, 128, 'disabled', 4, 4, 4, None),
        (132428, 128, 'every_layer', 1, 1, 1, 28.147),
        (132426, 128, 'every_layer', 1, 1, 2, 24.62),
        (132425, 128, 'every_layer', 1, 1, 4, 26.285),
        (132422, 128, 'every_layer', 1, 2, 1, 26.625),
        (132420, 128, 'every_layer', 1, 2, 2, 27.417),
        (132419, 128, 'every_layer', 1, 2, 4, 28.083),
        (132418, 128, 'every_layer', 1, 4, 1, 32.572),
        (132416, 128, 'every_layer', 1, 4, 2, 34.764),
        (132415, 128, 'every_layer', 1, 4, 4, 36.71),
        (132413, 128, 'every_layer', 2, 1, 1, None),
        (132411, 128, 'every_layer', 2, 1, 2, 27.532),
        (132333, 128, 'every_layer', 2, 1, 4, 29.085),
        (132329, 128, 'every_layer', 2, 2, 1, None),
        (132328, 128, 'every_layer', 2, 2, 2, 29.189),
        (132331, 128, 'every_layer', 2, 2, 4, 30.082),
        (132327, 128, 'every_layer', 2, 4, 1, 32.127),
        (132325, 128, 'every_layer', 2, 4, 2, 34.636),
        (132324, 128, 'every_layer', 2, 4, 4, 36.074),
        (132319, 128, 'every_layer', 4, 1, 1, None),
        (132323, 128, 'every_layer', 4, 1, 2, None),
        (132332, 128, 'every_layer', 4, 1, 4, None),
        (132330, 128, 'every_layer', 4, 2, 1, None),
        (132321, 128, 'every_layer', 4, 2, 2, None),
        (132334, 128, 'every_layer', 4, 2, 4, None),
        (132320, 128, 'every_layer', 4, 4, 1, None),
        (132322, 128, 'every_layer', 4, 4, 2, None),
        (132326, 128, 'every_layer', 4, 4, 4, None),
    ],
    'llama_30B_bfloat16_256_GPUs_all_runs.xlsx': [
        (132470, 256, 'disabled', 1, 1, 1, None),
        (132467, 256, 'disabled', 1, 1, 2, None),
        (132463, 256, 'disabled', 1, 1, 4, None),
        (132462, 256, 'disabled', 1, 2, 1, None),
        (132460, 256, 'disabled', 1, 2, 2, 29.132),
        (132458, 256, 'disabled', 1, 2, 4, 24.701),
        (132454, 256, 'disabled', 1, 4, 1, 39.808),
        (132452, 256, 'disabled', 1, 4, 2, 31.465),
        (132451, 256, 'disabled', 1, 4, 4, 30.081),
        (132449, 256, 'disabled', 2, 1, 1, None),
        (132448, 256, 'disabled', 2, 1, 2, None),
        (132447, 256, 'disabled', 2, 1, 4, None),
        (132444, 256, 'disabled', 2, 2, 1, None),
        (132441, 256, 'disabled', 2, 2, 2, None),
        (132440, 256, 'disabled', 2, 2, 4, None),
        (132437, 256, 'disabled', 2, 4, 1, None),
        (132436, 256, 'disabled', 2, 4, 2, 31.661),
        (132434, 256, 'disabled', 2, 4, 4, 29.455),
        (132430, 256, 'disabled', 4, 1, 1, None),
        (132427, 256, 'disabled', 4, 1, 2, None),
        (132424, 256, 'disabled', 4, 1, 4, None),
        (132423, 256, 'disabled', 4, 2, 1, None),
        (132421, 256, 'disabled', 4, 2, 2, None),
        (132417, 256, 'disabled', 4, 2, 4, None),
        (132414, 256, 'disabled', 4, 4, 1, None),
        (132412, 256, 'disabled', 4, 4, 2, None),
        (132410, 256, 'disabled', 4, 4, 4, None),
        (132409, 256, 'every_layer', 1, 1, 1, None),
        (132408, 256, 'every_layer', 1, 1, 2, 35.07),
        (132407, 256, 'every_layer', 1, 1, 4, 29.078),
        (132406, 256, 'every_layer', 1, 2, 1, 39.702),
        (132400, 256, 'every_layer', 1, 2, 2, 31.938),
        (132398, 256, 'every_layer', 1, 2, 4, 31.805),
        (132395, 256, 'every_layer', 1, 4, 1, 44.094),
        (132391, 256, 'every_layer', 1, 4, 2, 40.071),
        (132389, 256, 'every_layer', 1, 4, 4, 41.014),
        (132388, 256, 'every_layer', 2, 1, 1, None),
        (132387, 256, 'every_layer', 2, 1, 2, 37.765),
        (132346, 256, 'every_layer', 2, 1, 4, 29.761),
        (132342, 256, 'every_layer', 2, 2, 1, None),
        (132350, 256, 'every_layer', 2, 2, 2, 32.273),
        (132341, 256, 'every_layer', 2, 2, 4, 31.129),
        (132345, 256, 'every_layer', 2, 4, 1, 42.134),
        (132344, 256, 'every_layer', 2, 4, 2, 39.572),
        (132353, 256, 'every_layer', 2, 4, 4, 38.51),
        (132352, 256, 'every_layer', 4, 1, 1, None),
        (132351, 256, 'every_layer', 4, 1, 2, None),
        (132347, 256, 'every_layer', 4, 1, 4, 34.216),
        (132343, 256, 'every_layer', 4, 2, 1, None),
        (132340, 256, 'every_layer', 4, 2, 2, 34.446),
        (132339, 256, 'every_layer', 4, 2, 4, 33.695),
        (132349, 256, 'every_layer', 4, 4, 1, 43.921),
        (132348, 256, 'every_layer', 4, 4, 2, 37.119),
        (132338, 256, 'every_layer', 4, 4, 4, 38.276),
    ],
    'llama_30B_8k_seq_length_bfloat16_128_GPUs_all_runs.xlsx': [
        (132506, 128, 'disabled', 1, 2, 2, None),
        (132505, 128, 'disabled', 1, 2, 4, None),
        (132504, 128, 'disabled', 1, 2, 8, None),
        (132503, 128, 'disabled', 1, 2, 16, None),
        (132502, 128, 'disabled', 1, 4, 2, None),
        (132501, 128, 'disabled', 1, 4, 4, None),
        (132500, 128, 'disabled', 1, 4, 8, None),
        (132499, 128, 'disabled', 1, 4, 16, None),
        (132498, 128, 'disabled', 2, 2, 2, None),
        (132497, 128, 'disabled', 2, 2, 4, None),
        (132496, 128, 'disabled', 2, 2, 8, None),
        (132495, 128, 'disabled', 2, 2, 16, None),
        (132494, 128, 'disabled', 2, 4, 2, None),
        (132493, 128, 'disabled', 2, 4, 4, None),
        (132492, 128, 'disabled', 2, 4, 8, None),
        (132491, 128, 'disabled', 2, 4, 16, None),
        (132490, 128, 'disabled', 4, 2, 2, None),
        (132489, 128, 'disabled', 4, 2, 4, None),
        (132488, 128, 'disabled', 4, 2, 8, None),
        (132487, 128, 'disabled', 4, 2, 16, None),
        (132486, 128, 'disabled', 4, 4, 2, None),
        (132485, 128, 'disabled', 4, 4, 4, None),
        (132484, 128, 'disabled', 4, 4, 8, None),
        (132483, 128, 'disabled', 4, 4, 16, None),
        (132482, 128, 'every_layer', 1, 2, 2, 62.99),
        (132481, 128, 'every_layer', 1, 2, 4, 62.838),
        (132480, 128, 'every_layer', 1, 2, 8, 63.989),
        (132479, 128, 'every_layer', 1, 2, 16, 66.69),
        (132478, 128, 'every_layer', 1, 4, 2, 72.416),
        (132477, 128, 'every_layer', 1, 4, 4, 75.527),
        (132476, 128, 'every_layer', 1, 4, 8, 77.862),
        (132475, 128, 'every_layer', 1, 4, 16, 82.62),
        (132367, 128, 'every_layer', 2, 2, 2, None),
        (132366, 128, 'every_layer', 2, 2, 4, 66.707),
        (132360, 128, 'every_layer', 2, 2, 8, 68.992),
        (132365, 128, 'every_layer', 2, 2, 16, 71.81),
        (132369, 128, 'every_layer', 2, 4, 2, 73.33),
        (132368, 128, 'every_layer', 2, 4, 4, 76.528),
        (132361, 128, 'every_layer', 2, 4, 8, 79.744),
        (132356, 128, 'every_layer', 2, 4, 16, 85.335),
        (132357, 128, 'every_layer', 4, 2, 2, None),
        (132358, 128, 'every_layer', 4, 2, 4, None),
        (132363, 128, 'every_layer', 4, 2, 8, None),
        (132359, 128, 'every_layer', 4, 2, 16, None),
        (132362, 128, 'every_layer', 4, 4, 2, None),
        (132364, 128, 'every_layer', 4, 4, 4, None),
        (132370, 128, 'every_layer', 4, 4, 8, None),
        (132355, 128, 'every_layer', 4, 4, 16, None),
    ],
    'llama_65B_bfloat16_128_GPUs_all_runs.xlsx': [
        (132576, 128, 'disabled', 1, 2, 2, None),
        (132575, 128, 'disabled', 1, 2, 4, None),
        (132574, 128, 'disabled', 1, 2, 8, 88.16),
        (132572, 128, 'disabled', 1, 4, 2, None),
        (132571, 128, 'disabled', 1, 4, 4, 101.966),
        (132570, 128, 'disabled', 1, 4, 8, 107.974),
        (132568, 128, 'disabled', 1, 8, 2, 139.673),
        (132567, 128, 'disabled', 1, 8, 4, 142.769),
        (132566, 128, 'disabled', 1, 8, 8, 151.951),
        (132564, 128, 'disabled', 2, 2, 2, None),
        (132563, 128, 'disabled', 2, 2, 4, None),
        (132562, 128, 'disabled', 2, 2, 8, None),
        (132560, 128, 'disabled', 2, 4, 2, None),
        (132559, 128, 'disabled', 2, 4, 4, None),
        (132558, 128, 'disabled', 2, 4, 8, None),
        (132556, 128, 'disabled', 2, 8, 2, None),
        (132555, 128, 'disabled', 2, 8, 4, None),
        (132554, 128, 'disabled', 2, 8, 8, None),
        (132552, 128, 'disabled', 4, 2, 2, None),
        (132551, 128, 'disabled', 4, 2, 4, None),
        (132548, 128, 'disabled', 4, 2, 8, None),
        (132546, 128, 'disabled', 4, 4, 2, None),
        (132545, 128, 'disabled', 4, 4, 4, None),
        (132544, 128, 'disabled', 4, 4, 8, None),
        (132542, 128, 'disabled', 4, 8, 2, None),
        (132541, 128, 'disabled', 4, 8, 4, None),
        (132539, 128, 'disabled', 4, 8, 8, None),
        (132535, 128, 'every_layer', 1, 2, 2, 118.679),
        (132528, 128, 'every_layer', 1, 2, 4, 111.348),
        (132527, 128, 'every_layer', 1, 2, 8, 118.392),
        (132522, 128, 'every_layer', 1, 4, 2, 136.432),
        (132521, 128, 'every_layer', 1, 4, 4, 140.951),
        (132520, 128, 'every_layer', 1, 4, 8, 156.544),
        (132518, 128, 'every_layer', 1, 8, 2, 192.686),
        (132517, 128, 'every_layer', 1, 8, 4, 209.244),
        (132516, 128, 'every_layer', 1, 8, 8, 237.992),
        (132514, 128, 'every_layer', 2, 2, 2, None),
        (132513, 128, 'every_layer', 2, 2, 4, 107.389),
        (132512, 128, 'every_layer', 2, 2, 8, 112.767),
        (132509, 128, 'every_layer', 2, 4, 4, 129.68),
        (132508, 128, 'every_layer', 2, 4, 8, 141.873),
        (132378, 128, 'every_layer', 2, 8, 2, 174.432),
        (132385, 128, 'every_layer', 2, 8, 4, 180.927),
        (132375, 128, 'every_layer', 2, 8, 8, 203.075),
        (132377, 128, 'every_layer', 4, 2, 2, None),
        (132379, 128, 'every_layer', 4, 2, 4, 109.042),
        (132382, 128, 'every_layer', 4, 2, 8, 114.423),
        (132383, 128, 'every_layer', 4, 4, 2, 126.612),
        (132386, 128, 'every_layer', 4, 4, 4, 125.11),
        (132376, 128, 'every_layer', 4, 4, 8, 133.559),
        (132372, 128, 'every_layer', 4, 8, 2, 164.213),
        (132373, 128, 'every_layer', 4, 8, 4, 168.966),
        (132374, 128, 'every_layer', 4, 8, 8, 184.979),
    ],
}
for f, runs in AA_ROWS.items():
    set_name, size, seq = AA_FILES[f]
    l, h, a, ffn = LLAMA1[size]
    for trial, n, ckpt, mbs, tp, pp, step in runs:
        assert n % (tp * pp) == 0
        der = (f"trial {trial}: Average Step Time {step} s as in the sheet, tokens/s/GPU = "
               f"{AA_TOKENS_PER_STEP}/(step*{n})" if step else f"trial {trial}: 'OOM Error' in the sheet")
        der += (f"; kernel flash_attention2, activation_checkpointing_type {ckpt}, micro_batch_size "
                f"{mbs}, model_parallel_size {tp}, pipe_parallel_size {pp}; tokens per step and vocab "
                "128000 inferred from the MFU column; ZeRO-1 (the engine's only sharding) and no "
                "sequence parallelism inferred, not stated (trust B)")
        rows.append(dict(set=set_name, source=AA_SRC.format(f=f), trust='B', model=f'LLaMA {size}',
                         arch='dense', layers=l, hidden=h, heads=a, kv_heads=a, ffn=ffn, vocab=128000,
                         attention='mha', mlp='swiglu', tied_embeddings=0, seq_len=seq,
                         global_batch_seqs=AA_TOKENS_PER_STEP // seq, micro_batch=mbs,
                         gpu='A100-SXM-80GB', num_gpus=n, tp=tp, pp=pp, vpp=1, dp=n // (tp * pp), cp=1,
                         ep=1, etp=1, zero=1, sequence_parallel=0,
                         recompute='full' if ckpt == 'every_layer' else 'none', precision='bf16',
                         framework='aleph-alpha',
                         measured_tokens_per_s_per_gpu=round(AA_TOKENS_PER_STEP / (step * n), 2) if step else '',
                         measured_step_time_s=step or '', oom=0 if step else 1, derivation=der))

# --- Hagemann et al. 2023, the sequence-parallelism sheets (same repository, data/seqpara/*.xlsx,
# commit e13c2cb5 of Aleph-Alpha/NeurIPS-WANT-submission-efficient-parallelization-layouts; the
# paper's sequence-parallelism figure). Same columns as the sheets above plus
# 'sequence_parallel' (True/False). One file = one model on one cluster = one set (32 or 64
# A100s: other clusters than the sets above). Every row of these sheets has
# activation_checkpointing_type 'disabled' and kernel 'flash_attention2 + RMS kernel': the
# fused RMSNorm, stated per row as norm_kernel 'fused' (Workload.norm_kernel; cost/ops.py
# NORM_KERNELS), else the engine's eager norm would be priced. Entered as (trial, micro batch,
# TP, PP, SP, step s / None = 'OOM Error'). Inferred as above (trust B): 4,194,304 tokens per
# step and a 128,000 vocabulary (the sheets' MFU column equals (6*params + 12*l*h*s) * tokens /
# (step * GPUs * 312 TFLOP/s) within 0.1% on every timed row but one of the 13B-2k sheet,
# 1.75%), ZeRO-1, bf16. Left out: trial 132905 of the 30B-2k sheet ('Other Error', not out of
# memory; the same layout ran as trial 132924). A layout the sheet lists twice is entered once,
# the first in sheet order (all repeats but two are two OOMs); the two timed repeats, both in
# the 30B-2k sheet (TP4 PP2 mb4 SP: 83.105 / 83.760 s; TP4 PP4 mb4 no SP: 86.437 / 86.667 s),
# give that set's measured_noise, the pooled sd of ln(step) (about 0.4%; the other sheets
# repeat nothing, their noise is left blank). Partly seen: six timed rows of the 13B-8k sheet
# (PP2 mb1, TP 2/4/8, SP on/off) are the published pairs of tests/test_tp_engine_costs.py
# test_published_sequence_parallel_saving, written when the serial-TP rule was fixed; the
# other four sheets were not used for anything before they were entered here (2026-11-29).
SP_SRC = AA_SRC.format(f='seqpara/{f}')
SP_FILES = {  # file under data/seqpara/: (set, model size, sequence length)
    'llama_13B_bfloat16_32_GPUs_sequence_parallelism.xlsx': ('llama13b-2k-a100x32', '13B', 2048),
    'llama_13B_bfloat16_8k_seq_length_64_GPUs_sequence_parallelism.xlsx': ('llama13b-8k-a100x64', '13B', 8192),
    'llama_30B_bfloat16_64_GPUs_sequence_parallelism.xlsx': ('llama30b-2k-a100x64', '30B', 2048),
    'llama_30B_8k_seq_length_bfloat16_64_GPUs_sequence_parallelism.xlsx': ('llama30b-8k-a100x64', '30B', 8192),
    'llama_65B_bfloat16_64_GPUs_sequence_parallelism.xlsx': ('llama65b-2k-a100x64', '65B', 2048),
}
SP_ROWS = {  # (trial id, micro_batch_size, TP, PP, sequence_parallel, step s, None = 'OOM Error', or 'Other Error')
    'llama_13B_bfloat16_32_GPUs_sequence_parallelism.xlsx': [
        (132852, 8, 1, 1, 1, None),
        (132854, 4, 1, 2, 1, None),
        (132855, 8, 2, 2, 1, None),
        (132856, 4, 1, 1, 1, None),
        (132857, 8, 1, 2, 1, None),
        (132858, 8, 2, 1, 1, None),
        (132859, 4, 2, 1, 1, None),
        (131869, 2, 1, 1, 1, None),
        (131877, 2, 1, 1, 0, None),
        (132860, 8, 2, 2, 0, None),
        (132861, 8, 2, 1, 0, None),
        (132863, 8, 1, 1, 0, None),
        (132864, 4, 2, 1, 0, None),
        (132865, 4, 1, 2, 0, None),
        (132866, 8, 1, 2, 0, None),
        (132867, 4, 1, 1, 0, None),
        (131873, 1, 1, 1, 0, 53.806),
        (131868, 1, 1, 1, 1, 53.989),
        (131875, 2, 2, 1, 0, 57.606),
        (131694, 1, 1, 2, 1, 58.006),
        (131871, 1, 1, 2, 0, 58.621),
        (131690, 2, 1, 2, 1, 59.553),
        (131866, 2, 2, 1, 1, 61.122),
        (131874, 2, 1, 2, 0, 60.229),
        (131867, 1, 2, 1, 1, 60.963),
        (131876, 1, 2, 1, 0, 62.09),
        (131689, 2, 2, 2, 1, 65.044),
        (131870, 2, 2, 2, 0, 66.126),
        (131695, 1, 2, 2, 1, 66.257),
        (132853, 4, 2, 2, 1, 67.472),
        (131872, 1, 2, 2, 0, 67.937),
        (132862, 4, 2, 2, 0, 68.485),
    ],
    'llama_13B_bfloat16_8k_seq_length_64_GPUs_sequence_parallelism.xlsx': [
        (132875, 4, 2, 2, 1, None),
        (132876, 4, 1, 1, 1, None),
        (132877, 4, 8, 2, 1, None),
        (132878, 4, 8, 4, 1, None),
        (132879, 4, 4, 1, 1, None),
        (132880, 4, 8, 1, 1, None),
        (132881, 4, 4, 4, 1, None),
        (132882, 4, 4, 2, 1, None),
        (132883, 4, 2, 4, 1, None),
        (132884, 4, 1, 2, 1, None),
        (132885, 4, 2, 1, 1, None),
        (132886, 4, 1, 4, 1, None),
        (132887, 4, 8, 2, 0, None),
        (132888, 4, 4, 4, 0, None),
        (132889, 4, 4, 1, 0, None),
        (132890, 4, 2, 4, 0, None),
        (132891, 4, 2, 2, 0, None),
        (132892, 4, 1, 2, 0, None),
        (132893, 4, 2, 1, 0, None),
        (132894, 4, 8, 4, 0, None),
        (132895, 4, 8, 1, 0, None),
        (132896, 4, 4, 2, 0, None),
        (132897, 4, 1, 4, 0, None),
        (132898, 4, 1, 1, 0, None),
        (131674, 2, 8, 1, 1, None),
        (131677, 2, 2, 1, 1, None),
        (131678, 2, 2, 4, 1, None),
        (131680, 2, 4, 2, 1, None),
        (131681, 2, 2, 2, 1, None),
        (131682, 2, 4, 1, 1, None),
        (131702, 1, 2, 1, 1, None),
        (131852, 2, 2, 1, 0, None),
        (131854, 2, 2, 4, 0, None),
        (131856, 2, 8, 2, 0, None),
        (131857, 2, 8, 1, 0, None),
        (131858, 2, 4, 1, 0, None),
        (131859, 2, 2, 2, 0, None),
        (131861, 2, 4, 2, 0, None),
        (131879, 1, 2, 1, 0, None),
        (131701, 1, 2, 2, 1, 34.84),
        (131878, 1, 2, 2, 0, 34.85),
        (131684, 1, 2, 4, 1, 35.797),
        (131865, 1, 2, 4, 0, 36.602),
        (131686, 1, 4, 1, 1, 36.99),
        (131685, 1, 4, 2, 1, 38.847),
        (131860, 1, 4, 1, 0, 38.897),
        (131851, 1, 4, 2, 0, 40.702),
        (131688, 1, 4, 4, 1, 40.824),
        (131676, 2, 4, 4, 1, 41.063),
        (131863, 1, 4, 4, 0, 43.493),
        (131855, 2, 4, 4, 0, 44.026),
        (131679, 1, 8, 1, 1, 46.371),
        (131675, 2, 8, 2, 1, 46.89),
        (131687, 1, 8, 2, 1, 49.956),
        (131864, 1, 8, 1, 0, 51.033),
        (131673, 2, 8, 4, 1, 51.914),
        (131683, 1, 8, 4, 1, 54.781),
        (131862, 1, 8, 2, 0, 56.229),
        (131850, 2, 8, 4, 0, 59.615),
        (131853, 1, 8, 4, 0, 62.043),
    ],
    'llama_30B_bfloat16_64_GPUs_sequence_parallelism.xlsx': [
        (132905, 4, 4, 4, 1, 'Other Error'),
        (132906, 4, 4, 1, 1, None),
        (132907, 4, 1, 1, 1, None),
        (132908, 4, 1, 4, 1, None),
        (132909, 4, 2, 2, 1, None),
        (132910, 4, 1, 2, 1, None),
        (132911, 4, 2, 1, 1, None),
        (132912, 4, 2, 4, 1, None),
        (132921, 4, 4, 1, 1, None),
        (132929, 2, 4, 1, 0, None),
        (132930, 4, 4, 2, 0, None),
        (132934, 4, 4, 1, 0, None),
        (132936, 4, 4, 2, 0, None),
        (132937, 4, 2, 2, 0, None),
        (132938, 4, 4, 1, 0, None),
        (132939, 4, 1, 4, 0, None),
        (132940, 4, 2, 1, 0, None),
        (132941, 4, 1, 2, 0, None),
        (132942, 4, 1, 1, 0, None),
        (132943, 4, 2, 4, 0, None),
        (131666, 2, 1, 2, 1, None),
        (131669, 2, 1, 4, 1, None),
        (131670, 2, 2, 2, 1, None),
        (131671, 1, 1, 2, 1, None),
        (131845, 2, 1, 2, 0, None),
        (131846, 2, 1, 4, 0, None),
        (131847, 2, 2, 2, 0, None),
        (131849, 1, 1, 2, 0, None),
        (131848, 1, 1, 4, 0, 71.995),
        (131665, 1, 1, 4, 1, 72.598),
        (131667, 2, 2, 4, 1, 72.658),
        (131842, 2, 2, 4, 0, 74.855),
        (131664, 1, 2, 4, 1, 76.584),
        (131668, 1, 2, 2, 1, 76.843),
        (132924, 4, 4, 4, 1, 77.586),
        (131844, 1, 2, 4, 0, 78.434),
        (131843, 1, 2, 2, 0, 80.174),
        (132920, 2, 4, 2, 1, 81.061),
        (132918, 2, 4, 4, 1, 82.219),
        (132913, 4, 4, 2, 1, 83.105),
        (132917, 4, 4, 2, 1, 83.76),
        (132928, 2, 4, 2, 0, 84.884),
        (132923, 2, 4, 1, 1, 85.212),
        (132919, 1, 4, 2, 1, 85.47),
        (132935, 4, 4, 4, 0, 86.437),
        (132927, 4, 4, 4, 0, 86.667),
        (132922, 1, 4, 4, 1, 87.684),
        (132925, 1, 4, 1, 1, 89.333),
        (132926, 2, 4, 4, 0, 89.762),
        (132932, 1, 4, 2, 0, 89.864),
        (132933, 1, 4, 1, 0, 94.115),
        (132931, 1, 4, 4, 0, 95.517),
    ],
    'llama_30B_8k_seq_length_bfloat16_64_GPUs_sequence_parallelism.xlsx': [
        (132946, 2, 4, 4, 1, None),
        (132949, 1, 2, 2, 1, None),
        (132950, 2, 2, 4, 1, None),
        (132951, 1, 2, 4, 1, None),
        (132952, 4, 2, 4, 1, None),
        (132953, 4, 2, 2, 1, None),
        (132954, 2, 2, 2, 1, None),
        (132955, 4, 4, 4, 1, None),
        (132956, 4, 4, 2, 1, None),
        (132957, 2, 4, 2, 1, None),
        (132962, 4, 4, 8, 0, None),
        (132963, 4, 2, 16, 0, None),
        (132964, 4, 2, 8, 0, None),
        (132965, 4, 4, 16, 0, None),
        (132966, 4, 4, 4, 0, None),
        (132967, 4, 4, 2, 0, None),
        (132968, 2, 2, 4, 0, None),
        (132969, 2, 4, 2, 0, None),
        (132971, 1, 2, 2, 0, None),
        (132972, 4, 2, 2, 0, None),
        (132973, 2, 2, 2, 0, None),
        (132974, 1, 2, 4, 0, None),
        (132975, 2, 4, 4, 0, None),
        (132976, 4, 2, 4, 0, None),
        (132977, 1, 4, 2, 0, None),
        (132958, 4, 4, 16, 0, None),
        (132959, 4, 2, 16, 0, None),
        (132960, 4, 2, 8, 0, None),
        (132961, 4, 4, 8, 0, None),
        (132948, 1, 4, 2, 1, 84.367),
        (132947, 1, 4, 4, 1, 85.686),
        (131645, 1, 4, 16, 1, 86.155),
        (132590, 1, 4, 8, 1, 86.167),
        (132970, 1, 4, 4, 0, 93.837),
        (132600, 1, 4, 8, 0, 96.699),
        (131807, 1, 4, 16, 0, 98.368),
    ],
    'llama_65B_bfloat16_64_GPUs_sequence_parallelism.xlsx': [
        (132966, 4, 4, 4, 1, None),
        (132967, 4, 4, 2, 1, None),
        (132972, 4, 2, 2, 1, None),
        (132976, 4, 2, 4, 1, None),
        (131651, 2, 4, 2, 1, None),
        (131652, 2, 2, 8, 1, None),
        (131659, 2, 2, 4, 1, None),
        (131662, 2, 2, 2, 1, None),
        (131698, 1, 2, 2, 1, None),
        (131810, 2, 2, 2, 0, None),
        (131814, 2, 4, 2, 0, None),
        (131818, 2, 2, 4, 0, None),
        (131819, 2, 2, 8, 0, None),
        (131840, 1, 2, 4, 0, None),
        (131841, 1, 2, 2, 0, None),
        (132979, 4, 8, 2, 0, None),
        (132980, 4, 4, 2, 0, None),
        (132981, 4, 4, 8, 0, None),
        (132982, 4, 2, 8, 0, None),
        (132983, 4, 4, 4, 0, None),
        (132984, 4, 2, 2, 0, None),
        (132986, 4, 2, 4, 0, None),
        (131697, 1, 2, 4, 1, 147.02),
        (131649, 2, 4, 4, 1, 149.921),
        (131654, 1, 2, 8, 1, 149.967),
        (131820, 1, 2, 8, 0, 152.65),
        (131663, 2, 4, 8, 1, 156.401),
        (131811, 2, 4, 4, 0, 158.736),
        (131660, 1, 4, 4, 1, 159.567),
        (131656, 1, 4, 2, 1, 162.316),
        (131653, 1, 4, 8, 1, 166.359),
        (132985, 4, 8, 4, 0, 166.494),
        (132978, 4, 8, 8, 0, 167.704),
        (131809, 2, 4, 8, 0, 168.704),
        (131823, 1, 4, 2, 0, 169.388),
        (131816, 1, 4, 4, 0, 172.114),
        (131658, 2, 8, 2, 1, 178.639),
        (131822, 1, 4, 8, 0, 179.778),
        (131650, 2, 8, 4, 1, 179.871),
        (131661, 2, 8, 8, 1, 186.537),
        (131655, 1, 8, 2, 1, 192.451),
        (131812, 2, 8, 2, 0, 193.688),
        (131648, 1, 8, 4, 1, 198.113),
        (131657, 1, 8, 8, 1, 201.435),
        (131821, 2, 8, 4, 0, 202.203),
        (131815, 1, 8, 2, 0, 207.262),
        (131817, 1, 8, 4, 0, 220.273),
        (131808, 2, 8, 8, 0, 223.09),
        (131813, 1, 8, 8, 0, 232.997),
    ],
}

SP_REPEATS = [(83.105, 83.76), (86.437, 86.667)]  # 30B-2k sheet, timed twice (above)
SP_NOISE = round(pooled_log_sd(SP_REPEATS), 4)
for f, runs in SP_ROWS.items():
    set_name, size, seq = SP_FILES[f]
    l, h, a, ffn = LLAMA1[size]
    n = 32 if set_name == 'llama13b-2k-a100x32' else 64
    seen = set()
    for trial, mbs, tp, pp, sp, step in runs:
        if step == 'Other Error' or (mbs, tp, pp, sp) in seen:
            continue
        seen.add((mbs, tp, pp, sp))
        assert n % (tp * pp) == 0
        der = (f"trial {trial}: Average Step Time {step} s as in the sheet (rounded to ms), "
               f"tokens/s/GPU = {AA_TOKENS_PER_STEP}/(step*{n})" if step
               else f"trial {trial}: 'OOM Error' in the sheet")
        der += (f"; kernel 'flash_attention2 + RMS kernel' (norm_kernel fused), "
                f"activation_checkpointing_type disabled, micro_batch_size {mbs}, model_parallel_size "
                f"{tp}, pipe_parallel_size {pp}, sequence_parallel {bool(sp)}; world size {n}; tokens "
                "per step and vocab 128000 inferred from the MFU column; ZeRO-1 (the engine's only "
                "sharding) inferred, not stated (trust B)")
        noise = SP_NOISE if set_name == 'llama30b-2k-a100x64' and step else ''
        if noise:
            der += (f"; measured_noise {SP_NOISE}: pooled sd of ln(step) of the sheet's two layouts "
                    "timed twice")
        if set_name == 'llama13b-8k-a100x64' and step and pp == 2 and mbs == 1:
            der += ("; seen before: one of the six SP pairs checked by tests/test_tp_engine_costs.py "
                    "test_published_sequence_parallel_saving")
        rows.append(dict(set=set_name, source=SP_SRC.format(f=f), trust='B', model=f'LLaMA {size}',
                         arch='dense', layers=l, hidden=h, heads=a, kv_heads=a, ffn=ffn, vocab=128000,
                         attention='mha', mlp='swiglu', tied_embeddings=0, seq_len=seq,
                         global_batch_seqs=AA_TOKENS_PER_STEP // seq, micro_batch=mbs,
                         gpu='A100-SXM-80GB', num_gpus=n, tp=tp, pp=pp, vpp=1, dp=n // (tp * pp), cp=1,
                         ep=1, etp=1, zero=1, sequence_parallel=sp, recompute='none', precision='bf16',
                         framework='aleph-alpha', norm_kernel='fused',
                         measured_tokens_per_s_per_gpu=round(AA_TOKENS_PER_STEP / (step * n), 2) if step else '',
                         measured_step_time_s=step or '', measured_noise=noise, oom=0 if step else 1,
                         derivation=der))

for i, r in enumerate(rows, 1):
    r['id'] = f'L{i:03d}'
out = HERE.parent / 'layout_sets.csv'
with open(out, 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=cols, extrasaction='raise')
    w.writeheader()
    for r in rows:
        w.writerow({c: r.get(c, '') for c in cols})
print(f'{len(rows)} rows -> {out}')
