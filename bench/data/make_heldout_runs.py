"""Writes heldout_runs.csv: published runs NOT used for any fit (see each row's source/derivation).

Re-run after editing: python bench/data/make_heldout_runs.py (needs ../shared for the column order).
"""
import csv, sys
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[2]))
cols = open(__import__('pathlib').Path(__file__).resolve().parents[3] / 'shared/validation/calibration.csv').readline().strip().split(',')
cols = cols[:cols.index('attention')] + ['head_dim'] + cols[cols.index('attention'):]
# optional column: layers per (virtual) pipeline stage recomputed in full, where the source states it
cols = cols[:cols.index('recompute') + 1] + ['recompute_layers'] + cols[cols.index('recompute') + 1:]
cols += [c for c in ('moe_dispatcher', 'ep_overlap', 'schedule') if c not in cols]  # optional engine columns
# optional column: Megatron-Core modules recomputed under selective recomputation, where the source states them
cols = cols[:cols.index('recompute_layers') + 1] + ['recompute_modules'] + cols[cols.index('recompute_layers') + 1:]
rows = []
def add(**kw): rows.append(kw)
LF = "llm-foundry scripts/train/benchmarking/README.md (MPT Training Benchmarks, table '{t}')"
MPT = {  # llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml: d_model, n_heads, n_layers; expansion_ratio 4, vocab 50368
 '125m':(12,768,12),'350m':(24,1024,16),'760m':(24,1536,12),'1b':(24,2048,16),'3b':(32,2560,20),
 '7b':(32,4096,32),'13b':(40,5120,40),'30b':(48,7168,64),'70b':(80,8192,64)}
def mpt(table, gpu, size, seq, n, mb, ga, gbs, tps, ckpt, prec='bf16'):
    l,h,a = MPT[size]
    add(source=LF.format(t=table), trust='A', model=f'MPT-{size}', arch='dense', layers=l, hidden=h, heads=a, kv_heads=a,
        ffn=4*h, vocab=50368, attention='mha', mlp='gelu', tied_embeddings=1, seq_len=seq, global_batch_seqs=gbs,
        micro_batch=mb, gpu=gpu, num_gpus=n, tp=1, pp=1, vpp=1, dp=n, cp=1, ep=1, etp=1, zero=3, sequence_parallel=0,
        recompute='full' if ckpt else 'none', precision=prec, framework='llm-foundry', measured_tokens_per_s_per_gpu=tps, oom=0,
        derivation=f"Throughput (T/s/GPU) column as printed; Composer FSDP FULL_SHARD (zero 3), activation checkpointing {'on (full)' if ckpt else 'off'}, grad accum {ga}; shapes from the mpt-{size}.yaml (expansion_ratio 4, tied embeddings, learned/ALiBi positions not in the schema); framework llm-foundry (Composer trainer, ComposerMPTCausalLM; the source names the engine)")
H='H100 80GB BF16'
for a in [('70b',2048,64,8,4,2048,1039,1),('30b',2048,32,14,3,1344,2308,1),('30b',8192,8,1,21,168,1384,1),
          ('13b',4096,8,10,3,240,4717,1),('13b',2048,64,2,1,128,4800,0),('7b',2048,8,6,1,48,10643,0),
          ('7b',8192,8,8,2,128,6935,1),('7b',32768,8,2,2,32,3318,1),('3b',4096,8,5,6,240,20964,0),
          ('3b',2048,64,6,3,1152,22525,0),('1b',2048,8,14,1,112,45455,0),('1b',32768,8,1,4,32,12025,0),
          ('760m',4096,8,12,2,192,55459,0)]:
    mpt(H,'H100-SXM-80GB',*a)
for a in [('3b',2048,8,10,6,480,30586,0),('3b',8192,8,3,6,144,19146,0),('1b',512,8,56,4,1792,70315,0),('3b',32768,8,3,6,144,5856,1)]:
    mpt('H100 80GB FP8','H100-SXM-80GB',*a,prec='fp8')
A8='A100 80GB with 1600 Gbps node-node interconnect (RoCE)'
for a in [('70b',2048,64,8,4,2048,410,1),('30b',2048,8,3,21,504,916,1),('13b',2048,8,2,3,48,2262,0),('7b',2048,8,6,2,96,4641,0),
          ('7b',16384,8,4,2,64,2453,1),('3b',8192,8,3,6,144,7695,0),('1b',2048,8,14,4,448,20513,0),('350m',2048,8,32,2,512,58782,0)]:
    mpt(A8,'A100-SXM-80GB',*a)
A4='A100 40GB with 1600 Gbps node-node interconnect (RoCE)'
for a in [('70b',2048,128,4,1,512,376,1),('13b',2048,64,16,1,1024,1976,1),('7b',2048,128,18,1,2304,3623,1),('3b',2048,128,6,1,768,9538,0)]:
    mpt(A4,'A100-SXM-40GB',*a)
# Megatron-Bridge performance summary, 25.11 NeMo container
MB = "Megatron-Bridge docs/performance-summary.md, 25.11 NeMo container, Pre-Training table 'System: {s}'"
SH = dict(
 L8=dict(model='Llama 3 8B', arch='dense', layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, attention='gqa', mlp='swiglu', tied_embeddings=0),
 L70=dict(model='Llama 3 70B', arch='dense', layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256, attention='gqa', mlp='swiglu', tied_embeddings=0),
 L405=dict(model='Llama 3.1 405B', arch='dense', layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256, attention='gqa', mlp='swiglu', tied_embeddings=0),
 Q30=dict(model='Qwen3-30B-A3B', arch='moe', layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn=6144, vocab=151936, moe_experts=128, moe_topk=8, moe_expert_ffn=768, moe_shared_experts=0, moe_dense_layers=0, attention='gqa', mlp='swiglu', tied_embeddings=0),
 Q235=dict(model='Qwen3-235B-A22B', arch='moe', layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128, ffn=12288, vocab=151936, moe_experts=128, moe_topk=8, moe_expert_ffn=1536, moe_shared_experts=0, moe_dense_layers=0, attention='gqa', mlp='swiglu', tied_embeddings=0),
 DS3=dict(model='DeepSeek-V3', arch='moe', layers=61, hidden=7168, heads=128, kv_heads=128, ffn=18432, vocab=129280, moe_experts=256, moe_topk=8, moe_expert_ffn=2048, moe_shared_experts=1, moe_dense_layers=3, attention='mla', mlp='swiglu', tied_embeddings=0),
)
RC_PRESET = ("recompute from the Megatron-Bridge perf preset {p} (scripts/performance/configs/llama/"
             "llama3_workload_base_configs.py: recompute_num_layers={n}), which scripts/performance/utils/"
             "overrides.py (_set_recompute_overrides) sets as recompute_granularity=full, recompute_method=block, "
             "recompute_num_layers={n}: the first {n} layers of each (virtual) pipeline stage recomputed")
# MoE engine settings of the 25.11 recipes (Megatron-Bridge v0.2.0, scripts/performance/configs/
# {qwen3,deepseek}/workload_base_configs.py): moe_flex_dispatcher_backend hybridep/deepep -> the
# DeepEP class of dispatcher, else the model providers' moe_token_dispatcher_type "alltoall";
# moe_a2a_overlap -> --overlap-moe-expert-parallel-comm (set_moe_a2a_overlap_overrides)
REC = "; dispatcher {d} and moe_a2a_overlap={o} from the 25.11 recipe (Megatron-Bridge v0.2.0 scripts/performance/configs)"
# Recompute of the MoE recipes (Megatron-Bridge v0.2.0, the 25.11 release): scripts/performance/configs/
# qwen3/qwen3_llm_pretrain.py (set_qwen3_common_configs) sets recompute_granularity=None for every
# Qwen3 config; deepseek/deepseek_llm_pretrain.py (set_deepseek_v3_common_configs) sets
# recompute_granularity="selective" with recompute_modules from deepseek/workload_base_configs.py
RC_QWEN3 = ("recompute none from the Megatron-Bridge v0.2.0 recipe (scripts/performance/configs/qwen3/"
            "qwen3_llm_pretrain.py, set_qwen3_common_configs: recompute_granularity=None)")
RC_DS3 = ("recompute selective, modules {mods} from the Megatron-Bridge v0.2.0 recipe (scripts/performance/"
          "configs/deepseek/deepseek_llm_pretrain.py sets recompute_granularity='selective'; "
          "workload_base_configs.py {p}: recompute_modules={mods}, its layout {lay} matching the row)")
def mb(sysname, gpu, m, n, prec, gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep, tps, note='', disp='', epo='', rc=None, rcm=None):
    dp = n // (tp*pp*cp)
    rc_text = RC_PRESET.format(p=rc[0], n=rc[1]) if rc else "recompute not stated (blank)"
    rc_kind = 'full' if rc else ''
    if rcm == 'none':
        rc_text, rc_kind = RC_QWEN3, 'none'
    elif rcm:
        rc_text, rc_kind = RC_DS3.format(p=rcm[0], mods=list(rcm[1]), lay=rcm[2]), 'selective'

    if disp:
        note += REC.format(d={'deepep': 'hybridep (DeepEP class)'}.get(disp, disp), o=bool(epo))
    add(moe_dispatcher=disp, ep_overlap=epo, source=MB.format(s=sysname), trust='B', **SH[m], seq_len=seq, global_batch_seqs=gbs, micro_batch=mbs, gpu=gpu,
        num_gpus=n, tp=tp, pp=pp, vpp=vp, dp=dp, cp=cp, ep=ep, etp=1, zero=3 if fsdp else 1,
        sequence_parallel=1 if tp > 1 else 0, recompute=rc_kind, recompute_layers=rc[1] if rc else '',
        recompute_modules='+'.join(rcm[1]) if rcm and rcm != 'none' else '',
        precision='fp8' if prec.startswith('FP8') else 'bf16',
        framework='nemo', measured_tokens_per_s_per_gpu=tps, oom=0,
        derivation=f"Tokens/sec/GPU column as printed ({prec}); zero inferred (FSDP={fsdp}: {'FSDP -> 3' if fsdp else 'distributed optimizer -> 1'}), sequence_parallel inferred from TP>1, {rc_text}; dp = GPUs/(tp*pp*cp){note}")
BAL = "; MoE tokens force-balanced among experts (page footnote)"
mb('DGX-H100','H100-SXM-80GB','L8',8,'FP8-CS',128,1,8192,1,1,1,1,1,1,14451,
   rc=('LLAMA3_8B_H100_FP8_CS (the same in every stored version; its cp=1 and mbs=1 match the row; it sets no FSDP, the table prints FSDP=1)', 5))
mb('DGX-H100','H100-SXM-80GB','L70',64,'FP8-CS',128,1,8192,0,4,8,1,5,1,1602)
mb('DGX-H100','H100-SXM-80GB','L405',1024,'FP8-CS',512,1,8192,0,8,8,2,8,1,292)
mb('DGX-H100','H100-SXM-80GB','Q30',16,'FP8-CS',512,2,4096,0,1,2,1,24,8,5275,BAL,'alltoall',1, rcm='none')
mb('DGX-B200','B200','L8',8,'FP8-CS',128,2,8192,0,1,1,1,1,1,30624)
mb('DGX-B200','B200','L405',128,'FP8-CS',64,1,8192,0,4,8,2,8,1,661)
mb('DGX-B200','B200','Q30',8,'FP8-MX',512,1,4096,0,1,1,1,1,8,9299,BAL,'alltoall',0, rcm='none')
mb('DGX-B200','B200','Q235',64,'FP8-MX',1024,1,4096,0,1,8,1,2,8,3269,BAL,'alltoall',1, rcm='none')
mb('DGX-B200','B200','DS3',256,'FP8-MX',2048,1,4096,0,1,16,1,1,8,2139,BAL,'alltoall',0, rcm=('DEEPSEEK_V3_B200_BASE_CONFIG', ('mla_up_proj',), 'pp16 ep8 gbs2048'))
mb('DGX-GB200','GB200','L8',8,'FP8-CS',128,2,8192,0,1,1,1,1,1,31508)
mb('DGX-GB200','GB200','L70',64,'FP8-CS',256,2,8192,1,1,1,1,1,1,4312)
mb('DGX-GB200','GB200','L405',256,'FP8-CS',1536,1,8192,0,4,16,1,4,1,813)
mb('DGX-GB200','GB200','Q30',8,'FP8-MX',512,4,4096,0,1,1,1,1,8,23766,BAL,'deepep',0, rcm='none')
mb('DGX-GB200','GB200','Q235',256,'BF16',8192,1,4096,0,1,8,1,3,32,4916,BAL,'deepep',0, rcm='none')
mb('DGX-GB200','GB200','DS3',256,'BF16',4096,1,4096,0,1,4,1,4,64,3139,BAL,'deepep',0, rcm=('DEEPSEEK_V3_GB200_BASE_CONFIG', ('mla_up_proj',), 'pp4 vpp4 ep64'))
mb('DGX-GB200','GB200','DS3',256,'FP8-MX',4096,1,4096,0,1,8,1,4,32,4018,BAL,'deepep',0)
# Llama 3 paper (Dubey et al. 2024, "The Llama 3 Herd of Models"), Table 4
from meshplan.specs.model import ModelSpec
from meshplan.cost.flops import model_flops_per_token
m405 = ModelSpec(name='l405', layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256, mlp='swiglu')
for n, cp, dp, seq, tf, gbs in [(8192,1,64,8192,430,2048),(16384,1,128,8192,400,2048),(16384,16,8,131072,380,128)]:
    fpt = model_flops_per_token(m405, seq)
    add(source="Llama 3 paper (Dubey et al. 2024), Table 4 (405B pre-training configurations)", trust='B', **SH['L405'],
        seq_len=seq, global_batch_seqs=gbs, micro_batch='', gpu='H100-SXM-80GB', num_gpus=n, tp=8, pp=16, vpp='', dp=dp, cp=cp,
        ep=1, etp=1, zero=1, sequence_parallel=1, recompute='', precision='bf16', framework='other',
        measured_tokens_per_s_per_gpu=round(tf*1e12/fpt,1), oom=0,
        derivation=f"from TFLOPs/GPU {tf}: / PaLM-convention model FLOPs per token 6N+12*l*h*s = {fpt:.4e} (meshplan.cost.flops at s={seq}); 16M tokens per batch; Meta's FLOP convention not stated (trust B); zero 1 inferred (FSDP with ZeRO-1-like sharding per paper sec 3.3.2); 700 W H100 80GB (Grand Teton), vpp unstated")
# BLOOM
mbl = ModelSpec(name='bloom', layers=70, hidden=14336, heads=112, kv_heads=112, ffn=57344, vocab=250880, mlp='gelu', tied_embeddings=True)
f = model_flops_per_token(mbl, 2048)
add(source="BLOOM paper (BigScience 2022, arXiv 2211.05100), sec. 3.4 (Engineering: 156 TFLOPs per GPU on 384 A100 80GB)", trust='B', model='BLOOM 176B', arch='dense', layers=70, hidden=14336, heads=112, kv_heads=112, ffn=57344, vocab=250880, attention='mha', mlp='gelu', tied_embeddings=1,
    seq_len=2048, global_batch_seqs=2048, micro_batch=2, gpu='A100-SXM-80GB', num_gpus=384, tp=4, pp=12, vpp=1, dp=8, cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='', precision='bf16', framework='deepspeed',
    measured_tokens_per_s_per_gpu=round(156e12/f,1), oom=0, derivation=f"from 156 TFLOPs/GPU / 6N+12lhs = {f:.4e} FLOP/token; TP4 PP12 DP8 ZeRO-1 bf16 Megatron-DeepSpeed per paper; micro batch 2 per the BLOOM training README (trust B)")
mop = ModelSpec(name='opt', layers=96, hidden=12288, heads=96, kv_heads=96, ffn=49152, vocab=50272, mlp='gelu', tied_embeddings=True)
f = model_flops_per_token(mop, 2048)
add(source="OPT paper (Zhang et al. 2022, arXiv 2205.01068), sec. 2.4 (147 TFLOP/s per GPU on 992 A100 80GB)", trust='C', model='OPT-175B', arch='dense', layers=96, hidden=12288, heads=96, kv_heads=96, ffn=49152, vocab=50272, attention='mha', mlp='gelu', tied_embeddings=1,
    seq_len=2048, global_batch_seqs=992, micro_batch='', gpu='A100-SXM-80GB', num_gpus=992, tp=8, pp=1, vpp=1, dp=124, cp=1, ep=1, etp=1, zero=3, sequence_parallel=0, recompute='', precision='fp16', framework='other',
    measured_tokens_per_s_per_gpu=round(147e12/f,1), oom=0, derivation=f"from 147 TFLOP/s/GPU / 6N+12lhs = {f:.4e} FLOP/token; FSDP (zero 3) with Megatron TP8, ~2M-token batch given as 992 sequences (the nearest multiple of dp=124; the paper's exact count is not printed), fp16 (paper sec 2.2-2.4); metaseq (trust C)")
add(source="DeepSeek-V3 technical report (arXiv 2412.19437), sec. 3.1 and Table 1 (180K H800 GPU hours per trillion tokens, 2048 H800)", trust='B', **SH['DS3'],
    seq_len=4096, global_batch_seqs=15360, micro_batch='', gpu='H800-SXM-80GB', num_gpus=2048, tp=1, pp=16, vpp=2, dp=128, cp=1, ep=64, etp=1, zero=1, sequence_parallel=0, recompute='selective', recompute_modules='layernorm+mla_up_proj+moe_act', precision='fp8', framework='other',
    moe_dispatcher='deepep', ep_overlap=1, schedule='dualpipev',
    measured_tokens_per_s_per_gpu=round(1e12/(180e3*3600),1), oom=0, derivation="1e12 tokens / (180e3 GPU h * 3600) = 1543.2 tokens/s/GPU averaged over pre-training (includes MTP module and non-steady-state time, trust B); PP16 DualPipe, EP64 over 8 nodes, ZeRO-1 DP, no TP, FP8 fine-grained recipe, seq 4096, final batch 15360; schedule dualpipev with vpp 2 (DualPipe holds two chunks per rank; its bubble is DualPipeV's, report Table 2), dispatcher deepep and ep_overlap 1 (sec. 3.2.1-3.2.2: IB-then-NVLink dispatch, at most 4 nodes per token, all-to-all hidden by DualPipe); recompute selective of layernorm+mla_up_proj+moe_act (sec. 3.2.3: all RMSNorm operations and the MLA up-projections recomputed in back-propagation; sec. 3.3.2: the SwiGLU inputs cached, its output recomputed), no full-layer recompute")
w = csv.DictWriter(open(__import__('pathlib').Path(__file__).with_name('heldout_runs.csv'), 'w', newline=''), fieldnames=cols)
w.writeheader()
for i, r in enumerate(rows):
    r['id'] = f'H{i+1:03d}'
    w.writerow({k: r.get(k, '') for k in cols})
print(len(rows))
