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
# optional: fp8_recipe, descriptive only (no reader uses it yet): the FP8 recipe as the source prints it; and
# tp_comm_overlap (1 = TP communication overlapped with GEMMs, e.g. torchtitan async TP) where the source says (validate pins it)
# (cs = per-tensor current scaling, mx = MXFP8 32-element blocks, blockwise = 128x128 weights / 1x128 activations,
#  tensorwise / rowwise = torchao float8 scaling granularity)
cols += ['fp8_recipe', 'tp_comm_overlap', 'nic_gbps_per_gpu']  # nic: Gb/s per GPU where the source states it
cols += ['gpus_per_node']  # the schema's optional node size, where the source's nodes differ from the GPU's usual node
# optional: 0 where the source's engine all-reduces gradients only after the whole backward (validate pins
# Plan.overlap_grad_reduce; blank = the engine's default, overlapped with the backward)
cols += ['overlap_grad_reduce']
# optional: the attention kernel class where the source's scripts state one that differs from the
# engine's default (cost/efficiency.py ATTENTION_KERNELS; validate pins it)
cols += ['attention_kernel']
# optional column: Megatron-Core modules recomputed under selective recomputation, where the source states them
cols = cols[:cols.index('recompute_layers') + 1] + ['recompute_modules'] + cols[cols.index('recompute_layers') + 1:]
# optional engine columns (meshplan/specs/workload.py): the optimizer's state dtype (fp32, bf16 = fp32 master and bf16
# moments, bf16-no-master = bf16 moments and the bf16 weights updated in place) and the gradient buffer's dtype
cols += ['optimizer_state_precision', 'grad_reduce_dtype']
cols += [c for c in ('q_lora_rank', 'kv_lora_rank', 'qk_rope_head_dim', 'qk_nope_head_dim', 'v_head_dim') if c not in cols]  # MLA dims (meshplan/row_model.py MLA_COLUMNS), where a row gives them
cols += ['compiled_loss']  # optional: 1 where torchtitan compiled its loss (--training.compile; cost/ops.py logits_bytes)
# optional: 1 where the run keeps its linear weights in FP8 and all-gathers them in FP8 (Megatron-Core fp8_param_gather,
# NeMo fp8_params with its distributed optimizer, torchao enable_fsdp_float8_all_gather: cost/param_gather.py)
cols += ['fp8_param_gather']
# optional: Megatron-Core DistributedDataParallelConfig.bucket_size (parameters per DDP bucket) where the run sets one
# (printed in the logs' DDP config line, or the config script / conf/custom.yaml default); blank = the engine's
# default (cost/dp_tail.py)
cols += ['ddp_bucket_size']
# optional: 1 where the engine's op-level selective recomputation checkpoints the attention module whole (torchtitan
# from PR #1683 to PR #2118 with flex attention and the model not compiled: meshplan/cost/torchtitan_ac.py)
cols += ['attention_full_ac']
rows = []
def add(**kw): rows.append(kw)
LF = "llm-foundry scripts/train/benchmarking/README.md (MPT Training Benchmarks, table '{t}')"
MPT = {  # llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml: d_model, n_heads, n_layers; expansion_ratio 4, vocab 50368
 '125m':(12,768,12),'350m':(24,1024,16),'760m':(24,1536,12),'1b':(24,2048,16),'3b':(32,2560,20),
 '7b':(32,4096,32),'13b':(40,5120,40),'30b':(48,7168,64),'70b':(80,8192,64)}
# The benchmark harness sets model.attn_config.attn_impl from its --attn_impl flag, default 'triton'
# (scripts/train/benchmarking/submit_benchmarks.py in every version from 300cc5c (2023-05-03, the A100
# tables) to b2a43a1 (2023-10-19, the H100 tables); sweep.sh never passes it), i.e. llmfoundry/models/
# layers/flash_attn_triton.py, the first-generation FlashAttention in Triton on triton-pre-mlir (setup.py of
# v0.3.0, the release the H100 runs installed).
ATTN_LF = ("attention_kernel triton-fa1: the harness's --attn_impl default 'triton' (scripts/train/"
           "benchmarking/submit_benchmarks.py, 300cc5c and b2a43a1; sweep.sh does not override it) = "
           "llmfoundry/models/layers/flash_attn_triton.py on triton-pre-mlir (llm-foundry v0.3.0)")
def mpt(table, gpu, size, seq, n, mb, ga, gbs, tps, ckpt, prec='bf16'):
    l,h,a = MPT[size]
    add(source=LF.format(t=table), trust='A', model=f'MPT-{size}', arch='dense', layers=l, hidden=h, heads=a, kv_heads=a,
        ffn=4*h, vocab=50368, attention='mha', mlp='gelu', tied_embeddings=1, seq_len=seq, global_batch_seqs=gbs,
        micro_batch=mb, gpu=gpu, num_gpus=n, tp=1, pp=1, vpp=1, dp=n, cp=1, ep=1, etp=1, zero=3, sequence_parallel=0,
        recompute='full' if ckpt else 'none', precision=prec, framework='llm-foundry', measured_tokens_per_s_per_gpu=tps, oom=0,
        attention_kernel='triton-fa1',
        derivation=f"Throughput (T/s/GPU) column as printed; Composer FSDP FULL_SHARD (zero 3), activation checkpointing {'on (full)' if ckpt else 'off'}, grad accum {ga}; shapes from the mpt-{size}.yaml (expansion_ratio 4, tied embeddings, learned/ALiBi positions not in the schema); framework llm-foundry (Composer trainer, ComposerMPTCausalLM; the source names the engine); " + ATTN_LF)
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
# Gradient buffer dtype of every Megatron-Bridge performance recipe that printed these rows (NVIDIA-NeMo/
# Megatron-Bridge tags, `git grep -n grad_reduce_in_fp32 <tag> -- scripts/performance src/megatron/bridge/perf_recipes`):
# each model's per-GPU config functions all call one common function that sets grad_reduce_in_fp32 = False on both the
# mixed-precision and the DDP config, i.e. 16-bit (bf16) gradient buffers and bf16 gradient reduce-scatter / all-reduce.
# 25.09 = v0.1.0rc4: the model's YAML under scripts/performance/configs sets mixed_precision.grad_reduce_in_fp32: false
# (applied over the recipe by run_script.py; MixedPrecisionConfig.setup copies it onto the DDP config).
# 26.08 = v0.6.0: src/megatron/bridge/perf_recipes/_common.py _benchmark_common (and _perf_precision) set it False for
# every flat perf recipe; the DeepSeek-V3 / Qwen3 / GPT-OSS GB200 recipes of these rows do not set it back.
GRAD_FILES = {  # model -> (v0.1.0rc4 YAML, v0.2.0 file, v0.3.0..v0.5.x file, common function, v0.6.0 recipe)
 'L8': ('llama3/llama3_8b_llm_pretrain.yaml', 'llama3/llama3_llm_pretrain.py', 'llama/llama3_llm_pretrain.py', 'set_llama3_common_configs', 'llama/*/llama3.py'),
 'L70': ('llama3/llama3_70b_llm_pretrain.yaml', 'llama3/llama3_llm_pretrain.py', 'llama/llama3_llm_pretrain.py', 'set_llama3_common_configs', 'llama/*/llama3.py'),
 'L405': ('llama31/llama31_405b_llm_pretrain.yaml', 'llama31/llama31_llm_pretrain.py', 'llama/llama31_llm_pretrain.py', 'set_llama31_common_configs', 'llama/*/llama31.py'),
 'Q30': ('qwen3/qwen3_30b_a3b_llm_pretrain.yaml', 'qwen3/qwen3_llm_pretrain.py', 'qwen/qwen3_llm_pretrain.py', 'set_qwen3_common_configs', 'qwen/gb200/qwen3_moe.py'),
 'Q235': ('qwen3/qwen3_235b_a22b_llm_pretrain.yaml', 'qwen3/qwen3_llm_pretrain.py', 'qwen/qwen3_llm_pretrain.py', 'set_qwen3_common_configs', 'qwen/gb200/qwen3_moe.py'),
 'DS3': ('deepseek/deepseek_v3_llm_pretrain.yaml', 'deepseek/deepseek_llm_pretrain.py', 'deepseek/deepseek_llm_pretrain.py', 'set_deepseek_v3_common_configs', 'deepseek/gb200/deepseek_v3.py'),
 'GOSS': (None, 'gpt_oss/gpt_oss_llm_pretrain.py', 'gpt_oss/gpt_oss_llm_pretrain.py', 'set_gpt_oss_common_configs', 'gpt_oss/gb200/gpt_oss.py'),
}
GRAD_TAGS = {'25.09': 'v0.1.0rc4', '25.11': 'v0.2.0', '26.02': 'v0.3.0', '26.02.01': 'v0.3.0 and v0.3.1', '26.04': 'v0.4.0 / v0.4.1',
             '26.04.01': 'v0.4.0 / v0.4.1', '26.06': 'v0.5.0 / v0.5.1', '26.08': 'v0.6.0'}
# GPT-OSS attention as the engine ran it, per NeMo container: Transformer Engine and cuDNN of the container from
# Megatron-Bridge docs/releases/software-versions.md at e49e451 (no separate entry for the .01 patch releases; no 26.08
# entry: its newest is 26.06). Megatron-Bridge v0.2.0 / v0.3.0 src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py
# provide() falls back to Megatron-Core's unfused local attention only when TE < 2.8 (later releases have no fallback and
# leave the backend to TE); Megatron-Core core_v0.15.0 extensions/transformer_engine.py TEDotProductAttention passes
# softmax_type and, on the windowed layers, window_size to TE; TE transformer_engine/common/fused_attn/fused_attn.cpp
# nvte_get_fused_attn_backend (v2.9 .. v2.16) admits learnable softmax on cuDNN >= 9.13.1 and a (left, 0) window with the
# causal mask, and pytorch/attention/dot_product_attention/utils.py only drops FlashAttention for sinks. The unfused
# path keeps the b x h x s x s probabilities (mb 4 x 64 heads x 4096^2 x 2 B = 8.6 GB a layer): these runs could not hold it.
_GOSS_FUSED = ("attention: Transformer Engine's fused cuDNN attention with the sinks and the window (no unfused fallback: "
               "{why}; TE fused_attn.cpp admits learnable softmax from cuDNN 9.13.1), container {cont}")
_GOSS_OLD = "Megatron-Bridge {tag} gpt_oss_provider.py falls back to local attention only under TE < 2.8"
_GOSS_NEW = "Megatron-Bridge {tag} has no GPT-OSS fallback and leaves the backend to TE"
GOSS_ATTN = {
 '25.11': _GOSS_FUSED.format(why=_GOSS_OLD.format(tag='v0.2.0'), cont='TE 2.9, cuDNN 9.13.1.26'),
 '26.02': _GOSS_FUSED.format(why=_GOSS_OLD.format(tag='v0.3.0'), cont='TE 2.12, cuDNN 9.18.0.50'),
 '26.04.01': _GOSS_FUSED.format(why=_GOSS_NEW.format(tag='v0.4.0 / v0.4.1'),
                                cont='26.04 entry TE 2.14+71bbefb, cuDNN 9.20.0.48'),
 '26.06': _GOSS_FUSED.format(why=_GOSS_NEW.format(tag='v0.5.0 / v0.5.1'), cont='TE 2.16, cuDNN 9.21.1.3'),
 '26.08': _GOSS_FUSED.format(why=_GOSS_NEW.format(tag='v0.6.0'),
                             cont='not listed, later than 26.06 (TE 2.16, cuDNN 9.21.1.3)'),
}
def grad_bf16(ver, m, sysdir='gb200'):
    """The derivation text of grad_reduce_dtype bf16 for a Megatron-Bridge row of container ver, model key m
    (sysdir: the system's folder under v0.6.0 perf_recipes/<model>/, for the 26.08 rows)."""
    yml, f2, f3, fn, f6 = GRAD_FILES[m]
    f6 = f6.replace('/gb200/', f'/{sysdir}/')
    tag = GRAD_TAGS[ver]
    if ver == '25.09':
        where = f"scripts/performance/configs/{yml}: mixed_precision.grad_reduce_in_fp32: false"
    elif ver == '26.08':
        where = (f"src/megatron/bridge/perf_recipes/_common.py _benchmark_common / _perf_precision: grad_reduce_in_fp32 = False, "
                 f"not set back by perf_recipes/{f6}")
    else:
        where = (f"scripts/performance/configs/{f2 if ver == '25.11' else f3} {fn}: mixed_precision and ddp "
                 f"grad_reduce_in_fp32 = False, called by every config of the model")
    return f"; grad_reduce_dtype bf16 (16-bit gradient buffer and reduction) from Megatron-Bridge {tag} {where}"
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
    note += grad_bf16('25.11', m)
    add(moe_dispatcher=disp, ep_overlap=epo, grad_reduce_dtype='bf16', source=MB.format(s=sysname), trust='B', **SH[m], seq_len=seq, global_batch_seqs=gbs, micro_batch=mbs, gpu=gpu,
        num_gpus=n, tp=tp, pp=pp, vpp=vp, dp=dp, cp=cp, ep=ep, etp=1, zero=3 if fsdp else 1,
        sequence_parallel=1 if tp > 1 else 0, recompute=rc_kind, recompute_layers=rc[1] if rc else '',
        recompute_modules='+'.join(rcm[1]) if rcm and rcm != 'none' else '',
        precision='fp8' if prec.startswith('FP8') else 'bf16', fp8_recipe={'FP8-CS': 'cs', 'FP8-MX': 'mx'}.get(prec, ''),
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
        grad_reduce_dtype='fp32',
        measured_tokens_per_s_per_gpu=round(tf*1e12/fpt,1), oom=0,
        derivation=f"from TFLOPs/GPU {tf}: / PaLM-convention model FLOPs per token 6N+12*l*h*s = {fpt:.4e} (meshplan.cost.flops at s={seq}); 16M tokens per batch; Meta's FLOP convention not stated (trust B); zero 1 inferred (FSDP with ZeRO-1-like sharding per paper sec 3.3.2); 700 W H100 80GB (Grand Teton), vpp unstated; grad_reduce_dtype fp32 (sec. 3.3.4: FP32 gradient accumulation over micro-batches and FP32 reduce-scatter across data-parallel workers in FSDP); optimizer state dtype unstated")
# Runs of 2021-22 on Megatron-LM and its forks predate flash attention in those engines (FlashAttention: Dao et
# al., arXiv 2205.14135, 2022-05-27; Megatron-LM's --use-flash-attn came in 2023): their attention materialised the
# s x s scores as two batched GEMMs around Megatron's fused scale-mask-softmax kernel, meshplan's 'unfused' class
# (cost/efficiency.py ATTENTION_KERNELS). Until 2026-11-28 these rows left the column blank and were costed with the
# engine's present-day kernel (Transformer Engine / cuDNN flash attention).
PRE_FLASH = ("attention_kernel unfused: the run predates flash attention in its engine (FlashAttention, arXiv 2205.14135, "
             "2022-05-27; Megatron-LM --use-flash-attn 2023): the scores are materialised around Megatron's fused "
             "scale-mask-softmax kernel")
# BLOOM
mbl = ModelSpec(name='bloom', layers=70, hidden=14336, heads=112, kv_heads=112, ffn=57344, vocab=250880, mlp='gelu', tied_embeddings=True)
f = model_flops_per_token(mbl, 2048)
add(source="BLOOM paper (BigScience 2022, arXiv 2211.05100), sec. 3.4 (Engineering: 156 TFLOPs per GPU on 384 A100 80GB)", trust='B', model='BLOOM 176B', arch='dense', layers=70, hidden=14336, heads=112, kv_heads=112, ffn=57344, vocab=250880, attention='mha', mlp='gelu', tied_embeddings=1,
    seq_len=2048, global_batch_seqs=2048, micro_batch=2, gpu='A100-SXM-80GB', num_gpus=384, tp=4, pp=12, vpp=1, dp=8, cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='', precision='bf16', framework='deepspeed',
    measured_tokens_per_s_per_gpu=round(156e12/f,1), oom=0, derivation=f"from 156 TFLOPs/GPU / 6N+12lhs = {f:.4e} FLOP/token; TP4 PP12 DP8 ZeRO-1 bf16 Megatron-DeepSpeed per paper; micro batch 2 per the BLOOM training README (trust B); " + PRE_FLASH + " (bigscience-workshop/Megatron-DeepSpeed megatron/model/transformer.py at 06dc2d7: torch.baddbmm of the scores into the ALiBi tensor, FusedScaleMaskSoftmax, dropout, torch.bmm; training ran 2022-03 to 2022-07)", attention_kernel='unfused')
mop = ModelSpec(name='opt', layers=96, hidden=12288, heads=96, kv_heads=96, ffn=49152, vocab=50272, mlp='gelu', tied_embeddings=True)
f = model_flops_per_token(mop, 2048)
add(source="OPT paper (Zhang et al. 2022, arXiv 2205.01068), sec. 2.4 (147 TFLOP/s per GPU on 992 A100 80GB)", trust='C', model='OPT-175B', arch='dense', layers=96, hidden=12288, heads=96, kv_heads=96, ffn=49152, vocab=50272, attention='mha', mlp='gelu', tied_embeddings=1,
    seq_len=2048, global_batch_seqs=992, micro_batch='', gpu='A100-SXM-80GB', num_gpus=992, tp=8, pp=1, vpp=1, dp=124, cp=1, ep=1, etp=1, zero=3, sequence_parallel=0, recompute='', precision='fp16', framework='other',
    optimizer_state_precision='fp32',
    measured_tokens_per_s_per_gpu=round(147e12/f,1), oom=0, derivation=f"from 147 TFLOP/s/GPU / 6N+12lhs = {f:.4e} FLOP/token; FSDP (zero 3) with Megatron TP8, ~2M-token batch given as 992 sequences (the nearest multiple of dp=124; the paper's exact count is not printed), fp16 (paper sec 2.2-2.4); optimizer_state_precision fp32 (sec. 2.3: Adam state kept in FP32, sharded across hosts, weights in FP16); gradient dtype unstated; metaseq (trust C); " + PRE_FLASH + " (metaseq uses Megatron-LM's fused kernels; training ran 2021-10 to 2022-01)", attention_kernel='unfused')
add(source="DeepSeek-V3 technical report (arXiv 2412.19437), sec. 3.1 and Table 1 (180K H800 GPU hours per trillion tokens, 2048 H800)", trust='B', **SH['DS3'],
    seq_len=4096, global_batch_seqs=15360, micro_batch='', gpu='H800-SXM-80GB', num_gpus=2048, tp=1, pp=16, vpp=2, dp=128, cp=1, ep=64, etp=1, zero=1, sequence_parallel=0, recompute='selective', recompute_modules='layernorm+mla_up_proj+moe_act', precision='fp8', framework='other',
    moe_dispatcher='deepep', ep_overlap=1, schedule='dualpipev',
    measured_tokens_per_s_per_gpu=round(1e12/(180e3*3600),1), oom=0, derivation="1e12 tokens / (180e3 GPU h * 3600) = 1543.2 tokens/s/GPU averaged over pre-training (includes MTP module and non-steady-state time, trust B); PP16 DualPipe, EP64 over 8 nodes, ZeRO-1 DP, no TP, FP8 fine-grained recipe, seq 4096, final batch 15360; schedule dualpipev with vpp 2 (DualPipe holds two chunks per rank; its bubble is DualPipeV's, report Table 2), dispatcher deepep and ep_overlap 1 (sec. 3.2.1-3.2.2: IB-then-NVLink dispatch, at most 4 nodes per token, all-to-all hidden by DualPipe); recompute selective of layernorm+mla_up_proj+moe_act (sec. 3.2.3: all RMSNorm operations and the MLA up-projections recomputed in back-propagation; sec. 3.3.2: the SwiGLU inputs cached, its output recomputed), no full-layer recompute")
# Megatron-Bridge performance summaries of other containers (docs/performance-summary.md at
# 26.08 and docs/performance-summary-archive.md: 26.06.01 ... 25.09, NVIDIA-NeMo/Megatron-Bridge
# commit 067f987, 2026-08-22), plus the 25.11 rows the set above left out (the FP8-MX variants in
# parentheses, H100 Qwen3-235B). Kept: DGX-H100/B200/GB200 (GB300/B300: MBA_ROWS_BLACKWELL_ULTRA at the end),
# Llama 3 / 3.1, DeepSeek-V3, Qwen3, GPT-OSS 120B (Nemotron 3: hybrid Mamba;
# Kimi-K2: GB300 only), no NVFP4 (not a schema precision). One row per distinct configuration
# (system, model, recipe, GPUs, GBS, MBS, seq, FSDP, TP, PP, CP, VP, EP): the newest container's
# number; the other containers' numbers for the same configuration are listed in the derivation.
# Configurations equal to a 25.11 row above are not repeated (two 25.09 'tokendrop' Qwen3-30B rows:
# GB200 MX 23723 vs 25.11's 23766, H100 10494 vs 25.11's 5275 at the same layout).
MBA = "Megatron-Bridge docs/performance-summary{f}.md ({v} NeMo container, Pre-Training, {t})"
MBA_ROWS = [  # (container, system, model, flag, precision, GPUs, GBS, MBS, seq, FSDP, TP, PP, CP, VP, EP, tokens/s/GPU, other containers)
('26.08', 'DGX-GB200', 'DS3', '', 'MXFP8', 256, 4096, 1, 4096, None, 1, 4, 1, 4, 64, 4912, '26.06.01: 4928; 26.06: 4969; 26.04.01: 4256; 26.04: 4193; 26.02.01: 4021; 26.02: 3955'),
('26.08', 'DGX-GB200', 'Q235', '', 'MXFP8', 256, 8192, 1, 4096, None, 1, 8, 1, 3, 32, 7280, '26.06.01: 7360; 26.06: 7376; 26.04.01: 5680; 26.04: 5672'),
('26.06', 'DGX-GB200', 'L405', '', 'FP8', 256, 1536, 1, 8192, None, 4, 16, 1, 4, 1, 843, '26.04.01: 864; 26.04: 842; 26.02.01: 818; 26.02: 793'),
('26.06', 'DGX-GB200', 'L405', '', 'MXFP8', 256, 1536, 1, 8192, None, 4, 16, 1, 8, 1, 783, '26.04.01: 800; 26.04: 793; 26.02.01: 775; 26.02: 786'),
('26.06', 'DGX-H100', 'L405', '', 'FP8', 1024, 1536, 1, 8192, None, 8, 8, 2, 8, 1, 326, '26.04.01: 328; 26.02: 311'),
('26.06', 'DGX-H100', 'Q30', '', 'FP8', 16, 1024, 1, 4096, None, 1, 1, 1, 1, 16, 8826, '26.04.01: 8960; 26.04: 8901'),
('26.04.01', 'DGX-GB200', 'L70', '', 'FP8', 64, 256, 2, 8192, 64, 1, 1, 1, 1, 1, 4224, '26.04: 4143; 26.02.01: 4357; 26.02: 4040'),
('26.04.01', 'DGX-GB200', 'L70', '', 'MXFP8', 64, 256, 1, 8192, 0, 2, 4, 1, 5, 1, 3712, '26.04: 3828; 26.02.01: 3837; 26.02: 3613'),
('26.04.01', 'DGX-H100', 'L70', '', 'FP8', 64, 256, 1, 8192, 0, 4, 8, 1, 5, 1, 1664, '26.04: 1633; 26.02.01: 1639; 26.02: 1621'),
('26.04.01', 'DGX-B200', 'DS3', '', 'MXFP8', 256, 4096, 1, 4096, 0, 1, 8, 1, 2, 32, 3328, ''),
('26.04.01', 'DGX-B200', 'Q30', '', 'MXFP8', 8, 512, 4, 4096, 0, 1, 1, 1, 1, 8, 27136, '26.04: 26859; 26.02.01: 26695'),
('26.04.01', 'DGX-B200', 'Q235', '', 'MXFP8', 256, 8192, 1, 4096, 0, 1, 8, 1, 1, 8, 3776, '26.02: 3805'),
('26.04.01', 'DGX-H100', 'Q235', '', 'FP8', 256, 8192, 1, 4096, 0, 2, 8, 1, 4, 32, 1712, '26.04: 1686; 26.02.01: 1611; 26.02: 1633'),
('26.04', 'DGX-B200', 'DS3', '', 'MXFP8', 256, 4096, 1, 4096, 0, 1, 16, 1, 1, 8, 2815, '26.02.01: 2790; 26.02: 2689'),
('26.02.01', 'DGX-H100', 'Q30', '', 'FP8', 16, 1024, 1, 4096, 0, 1, 2, 1, 12, 8, 9058, '26.02: 5113'),
('26.02.01', 'DGX-GB200', 'Q235', '', 'MXFP8', 256, 8192, 1, 4096, 0, 1, 8, 1, 1, 32, 5530, '26.02: 5448'),
('25.11', 'DGX-GB200', 'L8', '', 'FP8-MX', 8, 128, 2, 8192, 0, 1, 1, 1, 1, 1, 29789, '25.09: 29925'),
('25.11', 'DGX-B200', 'L8', '', 'FP8-MX', 8, 128, 2, 8192, 0, 1, 1, 1, 1, 1, 29521, '25.09: 29388'),
('25.11', 'DGX-B200', 'L405', '', 'FP8-MX', 128, 64, 1, 8192, 0, 4, 8, 2, 8, 1, 624, '25.09: 622'),
('25.11', 'DGX-H100', 'Q235', '', 'FP8-CS', 256, 2048, 1, 4096, 0, 2, 8, 1, 4, 32, 1575, ''),
('25.09', 'DGX-GB200', 'L70', '', 'FP8-CS', 64, 128, 2, 8192, 64, 1, 1, 1, 1, 1, 3986, ''),
('25.09', 'DGX-GB200', 'L70', '', 'FP8-MX', 64, 128, 2, 8192, 0, 2, 4, 1, 5, 1, 3546, ''),
('25.09', 'DGX-GB200', 'L405', '', 'FP8-CS', 128, 64, 1, 8192, 64, 2, 1, 1, 1, 1, 729, ''),
('25.09', 'DGX-GB200', 'L405', '', 'FP8-MX', 128, 64, 1, 8192, 0, 4, 8, 2, 8, 1, 578, ''),
('25.09', 'DGX-GB200', 'DS3', 'tokendrop', 'FP8-CS', 256, 2048, 1, 4096, 0, 1, 4, 1, 4, 64, 3454, ''),
# ('25.09', 'DGX-GB200', 'DS3', 'tokendrop', 'FP8-MX', ...): left out, the page prints PP 4 (8), VP 4 (2) and EP 64 for both
#   numbers, but EP 64 cannot divide DP*CP*TP = 256/8 = 32 at PP 8 (Megatron-Core's expert mapping): the row is inconsistent as printed
('25.09', 'DGX-GB200', 'Q30', 'tokendrop', 'FP8-CS', 8, 512, 4, 4096, 0, 1, 1, 1, 1, 8, 22775, ''),
('25.09', 'DGX-GB200', 'Q235', 'tokendrop', 'FP8-CS', 64, 1024, 1, 4096, 0, 2, 1, 1, 1, 64, 4452, ''),
('25.09', 'DGX-GB200', 'Q235', 'tokendrop', 'FP8-MX', 64, 1024, 1, 4096, 0, 2, 1, 1, 1, 64, 4416, ''),
('25.09', 'DGX-B200', 'DS3', 'tokendrop', 'FP8-CS', 256, 2048, 1, 4096, 0, 1, 16, 1, 1, 8, 2265, ''),
('25.09', 'DGX-B200', 'DS3', 'tokendrop', 'FP8-MX', 256, 2048, 1, 4096, 0, 1, 16, 1, 1, 8, 2159, ''),
('25.09', 'DGX-B200', 'Q30', 'tokendrop', 'FP8-CS', 8, 512, 1, 4096, 0, 1, 1, 1, 1, 8, 18066, ''),
('25.09', 'DGX-B200', 'Q235', 'tokendrop', 'FP8-CS', 64, 1024, 1, 4096, 0, 1, 8, 1, 2, 8, 4104, ''),
('25.09', 'DGX-B200', 'Q235', 'tokendrop', 'FP8-MX', 64, 1024, 1, 4096, 0, 1, 8, 1, 2, 8, 4275, ''),
('25.09', 'DGX-H100', 'DS3', 'dropless', 'FP8-CS', 1024, 8192, 1, 4096, 0, 2, 8, 1, 4, 64, 1297, ''),
('25.09', 'DGX-H100', 'Q235', 'tokendrop', 'FP8-CS', 256, 2048, 1, 4096, 0, 2, 8, 1, 4, 32, 1204, ''),
('26.08', 'DGX-GB200', 'GOSS', '', 'MXFP8', 64, 1280, 4, 4096, None, 1, 1, 1, 1, 64, 28672, '26.06.01: 18304; 26.06: 28947'),
('26.04.01', 'DGX-GB200', 'GOSS', '', 'BF16', 64, 1280, 4, 4096, 0, 1, 1, 1, 1, 64, 16640, '26.04: 15938; 26.02.01: 15754; 26.02: 15784'),
('26.04.01', 'DGX-B200', 'GOSS', '', 'BF16', 64, 1280, 4, 4096, 0, 1, 1, 1, 1, 8, 13568, '26.04: 13045; 26.02.01: 13722'),
('26.04.01', 'DGX-H100', 'GOSS', '', 'BF16', 64, 1280, 1, 4096, 0, 1, 4, 1, 1, 8, 5824, '26.04: 5810; 26.02.01: 5984; 26.02: 5993'),
('26.02', 'DGX-B200', 'GOSS', '', 'BF16', 64, 1280, 4, 4096, 0, 1, 1, 1, 1, 64, 8047, ''),
('25.11', 'DGX-GB200', 'GOSS', '', 'BF16', 64, 1280, 1, 8192, 0, 1, 1, 1, 1, 64, 15876, ''),
('25.11', 'DGX-B200', 'GOSS', '', 'BF16', 64, 512, 4, 4096, 0, 1, 1, 1, 1, 8, 8213, ''),
('25.11', 'DGX-H100', 'GOSS', '', 'BF16', 64, 512, 4, 4096, 0, 1, 4, 1, 1, 8, 5630, ''),
]
# gpt-oss-120b config.json (openai/gpt-oss-120b) as copied in two stored test fixtures found by find_string
# '"num_local_experts": 128' (hidden 2880, intermediate 2880, 36 layers, 64 heads, 8 KV heads, head_dim 64,
# 128 experts top-4, sliding_window 128 on every other layer) and a third (vocab 201088); untied embeddings
SH['GOSS'] = dict(model='GPT-OSS 120B', arch='moe', layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn=2880, vocab=201088,
                  moe_experts=128, moe_topk=4, moe_expert_ffn=2880, moe_shared_experts=0, moe_dense_layers=0, attention='gqa',
                  mlp='swiglu', tied_embeddings=0)
GPU_OF = {'DGX-H100': 'H100-SXM-80GB', 'DGX-B200': 'B200', 'DGX-GB200': 'GB200', 'DGX-GB300': 'GB300', 'DGX-B300': 'B300'}
# MoE engine settings of these rows from the performance recipes of the release that printed them
# (NVIDIA-NeMo/Megatron-Bridge tags, fetched): 25.09 = v0.1.0rc4 (its docs/performance-summary.md is the 25.09
# page), 25.11 = v0.2.0, 26.02 = v0.3.0, 26.02.01 = v0.3.0 or v0.3.1 (both checked), 26.04 / 26.04.01 = v0.4.0,
# v0.4.1 and the 26.04-alpha branch (identical presets for these systems), 26.06 = v0.5.0 / v0.5.1 (v0.5.1's page
# prints 26.06), 26.08 = v0.6.0. Filled only where the recipe's layout (GPUs, GBS, MBS, TP, PP, VP, EP) equals the
# row's. Mapping: moe_flex_dispatcher_backend hybridep / deepep (moe_token_dispatcher_type flex) -> moe_dispatcher
# deepep (the DeepEP class: one NIC crossing per destination node, then NVLink); no flex backend -> alltoall
# (scripts/performance/utils/overrides.py set_workload_base_configs, or the model provider's default
# moe_token_dispatcher_type='alltoall'); moe_a2a_overlap / overlap_moe_expert_parallel_comm -> ep_overlap;
# recompute_granularity None -> recompute none; recompute_modules M with granularity selective -> selective M
# (overrides.py _set_recompute_overrides sets selective whenever recompute_modules is given).
QWEN_COMMON = "set_qwen3_common_configs: recompute_granularity=None"
MB_RECIPE = {  # (container, system, model, precision) -> (dispatcher, ep_overlap, recompute, modules, source)
 ('25.09', 'DGX-GB200', 'DS3', 'FP8-CS'): ('alltoall', 0, 'selective', 'mla_up_proj',
    "v0.1.0rc4 scripts/performance/run_script.py (DeepSeek-V3 on gb200: use_tokendrop -> enable_deepep False, "
    "overlap_moe_expert_parallel_comm=False, recompute_modules=['mla_up_proj']) and configs/deepseek/deepseek_v3_llm_pretrain.yaml "
    "(recompute_granularity selective; gb200 num_gpus_256: tp1 pp4 vp4 ep64 gbs2048 mbs1)"),
 ('25.09', 'DGX-B200', 'DS3', 'FP8-CS'): ('alltoall', 0, 'selective', 'mla_up_proj',
    "v0.1.0rc4 scripts/performance/run_script.py (b200: tokendrop, no DeepEP, no a2a overlap, recompute_modules=['mla_up_proj']) "
    "and configs/deepseek/deepseek_v3_llm_pretrain.yaml (b200 num_gpus_256: tp1 pp16 ep8 gbs2048 mbs1)"),
 ('25.09', 'DGX-H100', 'DS3', 'FP8-CS'): ('deepep', 1, 'selective', 'mla_up_proj+mlp',
    "v0.1.0rc4 scripts/performance/run_script.py (h100: enable_deepep, overlap_moe_expert_parallel_comm=True, "
    "recompute_modules=['mla_up_proj', 'mlp'], pp layout Et|(tt|)*30mL) and configs/deepseek/deepseek_v3_llm_pretrain.yaml "
    "(h100 num_gpus_1024: tp2 pp8 vp4 ep64 gbs8192 mbs1, cuda_graphs false)"),
 ('25.09', 'DGX-GB200', 'Q30', 'FP8-CS'): ('alltoall', 0, 'none', '',
    "v0.1.0rc4 configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml (recompute_granularity null; gb200 num_gpus_8: ep8 mbs4 gbs512) and "
    "run_script.py (token drop, no DeepEP); dispatcher = QwenProvider default moe_token_dispatcher_type 'alltoall'"),
 ('25.09', 'DGX-B200', 'Q30', 'FP8-CS'): ('alltoall', 0, 'none', '',
    "v0.1.0rc4 configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml (recompute_granularity null; b200 num_gpus_8: ep8 mbs1 gbs512); "
    "dispatcher = QwenProvider default 'alltoall'"),
 ('25.09', 'DGX-H100', 'Q235', 'FP8-CS'): ('alltoall', 0, 'none', '',
    "v0.1.0rc4 configs/qwen3/qwen3_235b_a22b_llm_pretrain.yaml (recompute_granularity null; h100 num_gpus_256: tp2 pp8 vp4 ep32 "
    "gbs2048); dispatcher = QwenProvider default 'alltoall'"),
 ('25.11', 'DGX-H100', 'Q235', 'FP8-CS'): ('alltoall', 1, 'none', '',
    "v0.2.0 configs/qwen3/workload_base_configs.py QWEN3_235B_A22B_H100_FP8_CS_BASE_CONFIG (256 GPUs tp2 pp8 vp4 ep32 gbs2048, "
    "moe_a2a_overlap=True, no flex backend) and qwen3_llm_pretrain.py " + QWEN_COMMON),
 ('26.02', 'DGX-B200', 'GOSS', 'BF16'): ('alltoall', 0, 'selective', 'layernorm+moe_act',
    "v0.3.0 configs/gpt_oss/gpt_oss_workload_base_configs.py GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2 (ep64 mbs4 gbs1280, "
    "recompute_modules=['layernorm', 'moe_act'], no flex backend: GPTOSSProvider moe_token_dispatcher_type 'alltoall')"),
 ('26.02.01', 'DGX-GB200', 'Q235', 'MXFP8'): ('deepep', 0, 'none', '',
    "v0.3.0 and v0.3.1 (same preset) configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2 "
    "(256 GPUs pp8 ep32 gbs8192, moe_flex_dispatcher_backend='hybridep', moe_a2a_overlap default False) and "
    "qwen3_llm_pretrain.py " + QWEN_COMMON),
 ('26.04', 'DGX-B200', 'DS3', 'MXFP8'): ('deepep', 0, 'selective', 'mla_up_proj',
    "v0.4.0 / v0.4.1 configs/deepseek/deepseek_workload_base_configs.py DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 (pp16 ep8 "
    "gbs4096, recompute_modules=['mla_up_proj'], hybridep, moe_a2a_overlap=False)"),
 ('26.04.01', 'DGX-B200', 'Q30', 'MXFP8'): ('deepep', 0, 'none', '',
    "v0.4.1 configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1 (8 GPUs ep8 mbs4 gbs512, "
    "hybridep, moe_a2a_overlap default False) and qwen3_llm_pretrain.py (flex dispatcher; " + QWEN_COMMON + ")"),
 ('26.04.01', 'DGX-B200', 'Q235', 'MXFP8'): ('alltoall', 0, 'none', '',
    "v0.4.1 configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2 (256 GPUs pp8 ep8 gbs8192, "
    "moe_a2a_overlap=False) and qwen3_llm_pretrain.py qwen3_235b_a22b_pretrain_config_b200 (moe_token_dispatcher_type "
    "'alltoall'; " + QWEN_COMMON + ")"),
 ('26.04.01', 'DGX-H100', 'Q235', 'FP8'): ('alltoall', 1, 'none', '',
    "v0.4.1 configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2 (256 GPUs tp2 pp8 vp4 "
    "ep32 gbs8192, moe_a2a_overlap=True) and qwen3_llm_pretrain.py qwen3_235b_a22b_pretrain_config_h100 ('alltoall'; "
    + QWEN_COMMON + ")"),
 ('26.04.01', 'DGX-GB200', 'GOSS', 'BF16'): ('deepep', 1, 'selective', 'layernorm+moe_act',
    "v0.4.1 configs/gpt_oss/gpt_oss_workload_base_configs.py GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2 (ep64 mbs4 gbs1280, "
    "recompute_modules=['layernorm', 'moe_act'], hybridep, moe_a2a_overlap=True)"),
 ('26.04.01', 'DGX-B200', 'GOSS', 'BF16'): ('deepep', 0, 'selective', 'layernorm+moe_act',
    "v0.4.1 configs/gpt_oss/gpt_oss_workload_base_configs.py GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2 (ep8 mbs4 gbs1280, "
    "recompute_modules=['layernorm', 'moe_act'], hybridep, moe_a2a_overlap default False)"),
 ('26.04.01', 'DGX-H100', 'GOSS', 'BF16'): ('alltoall', 0, 'selective', 'layernorm+moe_act',
    "v0.4.1 configs/gpt_oss/gpt_oss_workload_base_configs.py GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2 (pp4 ep8 mbs1 gbs1280, "
    "recompute_modules=['layernorm', 'moe_act'], no flex backend: GPTOSSProvider 'alltoall')"),
 ('26.06', 'DGX-H100', 'Q30', 'FP8'): ('deepep', 0, 'none', '',
    "v0.5.0 / v0.5.1 configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 (16 GPUs ep16 "
    "gbs1024, moe_a2a_overlap=False, moe_flex_dispatcher_backend='hybridep') and qwen3_llm_pretrain.py "
    "qwen3_30b_a3b_pretrain_config_h100 (moe_token_dispatcher_type 'flex'; " + QWEN_COMMON + ")"),
 ('26.08', 'DGX-GB200', 'DS3', 'MXFP8'): ('deepep', 1, 'selective', 'mla_up_proj',
    "v0.6.0 src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v3.py deepseek_v3_pretrain_256gpu_gb200_fp8mx_config "
    "(pp4 vp4 ep64 gbs4096 mbs1, recompute_modules=['mla_up_proj'], common.py _deepseek_v3_common: granularity selective; "
    "_enable_deepseek_full_iteration_mxfp8: flex hybridep, overlap_moe_expert_parallel_comm=True, full-iteration CUDA graph)"),
 ('26.08', 'DGX-GB200', 'Q235', 'MXFP8'): ('deepep', 1, 'none', '',
    "v0.6.0 src/megatron/bridge/perf_recipes/qwen/gb200/qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config "
    "(pp8 vp3 ep32 gbs8192, recompute_granularity=None, flex hybridep; qwen/common.py _enable_hybridep_full_iteration_mxfp8: "
    "overlap_moe_expert_parallel_comm=True, full-iteration CUDA graph)"),
 ('26.08', 'DGX-GB200', 'GOSS', 'MXFP8'): ('deepep', 1, 'none', '',
    "v0.6.0 src/megatron/bridge/perf_recipes/gpt_oss/gb200/gpt_oss.py gpt_oss_120b_pretrain_64gpu_gb200_fp8mx_config (ep64 mbs4 "
    "gbs1280; recompute_granularity selective with recompute_modules=[]: nothing recomputed; gpt_oss/common.py "
    "_apply_gpt_oss_120b_full_iter_fp8mx_configs: flex hybridep, overlap_moe_expert_parallel_comm=True, FP8 attention, "
    "full-iteration CUDA graph)"),
}
MB_RECIPE[('25.09', 'DGX-B200', 'DS3', 'FP8-MX')] = MB_RECIPE[('25.09', 'DGX-B200', 'DS3', 'FP8-CS')]
MB_RECIPE[('25.09', 'DGX-B200', 'Q235', 'FP8-CS')] = MB_RECIPE[('25.09', 'DGX-B200', 'Q235', 'FP8-MX')] = ('alltoall', 0, 'none', '',
    "v0.1.0rc4 configs/qwen3/qwen3_235b_a22b_llm_pretrain.yaml (recompute_granularity null; b200 num_gpus_64: pp8 vp2 ep8 "
    "gbs1024); dispatcher = QwenProvider default 'alltoall'")
MB_RECIPE_MISMATCH = {  # looked up, but no preset of that release has the row's layout: left blank
 ('26.04.01', 'DGX-B200', 'DS3', 'MXFP8'): "v0.4.0 / v0.4.1 / 26.04-alpha B200 DeepSeek-V3 presets are pp16 ep8, the row pp8 vp2 ep32",
 ('26.02.01', 'DGX-H100', 'Q30', 'FP8'): "v0.3.0's H100 preset has the row's layout (deepep, a2a overlap) but v0.3.1's is ep16 hybridep: which tag built 26.02.01 is not known",
 ('25.09', 'DGX-GB200', 'Q235', 'FP8-CS'): "v0.1.0rc4's gb200 qwen3_235b preset is tp1 pp8 ep8, the row tp2 pp1 ep64",
 ('25.09', 'DGX-GB200', 'Q235', 'FP8-MX'): "v0.1.0rc4's gb200 qwen3_235b preset is tp1 pp8 ep8, the row tp2 pp1 ep64",
 ('25.11', 'DGX-GB200', 'GOSS', 'BF16'): "v0.2.0's GB200 preset is seq 4096 mbs4 gbs512, the row seq 8192 mbs1 gbs1280",
 ('25.11', 'DGX-B200', 'GOSS', 'BF16'): "v0.2.0's B200 preset is ep64, the row ep8",
 ('25.11', 'DGX-H100', 'GOSS', 'BF16'): "v0.2.0's H100 preset is mbs1, the row mbs4",
}
MB_RECIPE_NOTE = {}  # looked up, the layout matches, but the recipe sets something the schema cannot state: left blank
# TP communication overlap of the rows with TP > 1 whose recipe sets it (Megatron-Bridge CommOverlapConfig.tp_comm_overlap):
# the value and where it is set; the model-wide code path, so the preset's layout need not match the row's
MB_TPO = {
 ('25.09', 'DGX-H100', 'DS3', 'FP8-CS'): (0, "v0.1.0rc4 scripts/performance/run_script.py passes no comm_overlap_config for "
    "DeepSeek-V3, so src/megatron/bridge/recipes/deepseek/deepseek_v3.py sets CommOverlapConfig(tp_comm_overlap=False)"),
 ('25.11', 'DGX-H100', 'Q235', 'FP8-CS'): (0, "v0.2.0 scripts/performance/configs/qwen3/qwen3_llm_pretrain.py "
    "qwen3_235b_a22b_h100_config: comm_overlap_config=CommOverlapConfig(tp_comm_overlap=False)"),
 ('26.04.01', 'DGX-H100', 'Q235', 'FP8'): (0, "v0.4.0 / v0.4.1 scripts/performance/configs/qwen/qwen3_llm_pretrain.py "
    "qwen3_235b_a22b_pretrain_config_h100: cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False)"),
}
for _sys, _prec in (('DGX-H100', 'FP8-CS'), ('DGX-GB200', 'FP8-CS'), ('DGX-GB200', 'FP8-MX')):  # one code path for all
    MB_TPO[('25.09', _sys, 'Q235', _prec)] = (1, "v0.1.0rc4 scripts/performance/run_script.py: qwen3 235b_a22b "
                                                 "comm_overlap_config=CommOverlapConfig(tp_comm_overlap=True)")
def add_mba(ver, sysn, m, flag, prec, n, gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep, tps, others, fsdp_note='', extra=''):
    """One Megatron-Bridge summary row (an MBA_ROWS tuple) with the recipe settings MB_RECIPE / MB_TPO name for it."""
    recipe = {'FP8-CS': 'cs', 'FP8-MX': 'mx', 'MXFP8': 'mx', 'FP8-blockwise': 'blockwise'}.get(prec, '')
    where = ('' if ver == '26.08' else '-archive')
    table = f"table 'System: {sysn}'" if ver in ('25.09', '25.11') else f"table 'Model: ...' row {sysn}"
    notes = []
    if ver == '25.09':
        notes.append("the 25.09 tables print no precision column: FP8 inferred from the footnote (numbers in parentheses = other "
                     "quantization granularity: 32x32 MXFP8 on B200/GB200, 128x128/1x128 blockwise on H100), the plain number "
                     "taken as per-tensor FP8 current scaling as in 25.11 (trust B)")
    if prec == 'FP8':
        # v0.3.0 ... v0.5.x scripts/performance/configs/*/*_workload_base_configs.py hold, for FP8, only *_FP8_CS_* (per-tensor
        # current scaling) and *_FP8_MX_* presets; the page prints the latter as MXFP8, so its 'FP8' is FP8_CS
        recipe = 'cs'
        notes.append("precision printed 'FP8'; fp8_recipe cs: the FP8 presets of Megatron-Bridge " + GRAD_TAGS[ver] +
                     " (scripts/performance/configs/*/*_workload_base_configs.py) are only *_FP8_CS_* (per-tensor current "
                     "scaling) and *_FP8_MX_* (printed MXFP8), no delayed-scaling preset")
    if flag == 'tokendrop':
        notes.append("MoE 'tokendrop' run (token dropping with a capacity factor; the schema models dropless balanced routing)")
    if flag == 'dropless':
        notes.append("MoE dropless, tokens force-balanced (page footnote)")
    elif m in ('DS3', 'Q30', 'Q235') and ver != '25.09':
        notes.append("MoE tokens force-balanced among experts, dropless (page footnote)")
    if m == 'GOSS':
        notes.append("GPT-OSS: the shape columns cannot state its 128-key sliding window on 18 of 36 layers, learnable attention "
                     "sinks, q/k/v/o and expert biases, clamped quick-GEGLU experts and YaRN RoPE; model 'GPT-OSS 120B' names the "
                     "preset gpt-oss-120b (meshplan/row_model.py match_preset), which carries them from openai/gpt-oss-120b "
                     "config.json; " + GOSS_ATTN[ver])
    if fsdp is None:
        notes.append(fsdp_note or "this container's table has no FSDP column: FSDP 0 (distributed optimizer, zero 1) inferred as in the earlier containers' same layout")
    fs = bool(fsdp)
    key = (ver, sysn, m, prec)
    disp, epo, rc, mods = '', '', '', ''
    if key in MB_RECIPE:
        disp, epo, rc, mods, src = MB_RECIPE[key]
        engine = (f"MoE dispatcher {disp}, ep_overlap {epo}, recompute {rc}{' ' + mods if mods else ''} from the recipe of "
                  f"this release (NVIDIA-NeMo/Megatron-Bridge {src})")
        if SH[m]['arch'] == 'dense':  # a dense row's entry states recompute only
            engine = (f"recompute {rc}{' ' + mods if mods else ''} from the recipe of this release (NVIDIA-NeMo/Megatron-Bridge "
                      f"{src}); no MoE dispatcher (dense model)")
    elif key in MB_RECIPE_NOTE:
        engine = ("recompute not printed; recipe looked up (" + MB_RECIPE_NOTE[key] + "): blank, the row is predicted with "
                  "the planner's choice")
    elif key in MB_RECIPE_MISMATCH:
        engine = ("recompute, MoE dispatcher and expert-comm overlap not printed; recipe looked up but its layout differs ("
                  + MB_RECIPE_MISMATCH[key] + "): blank, the row is predicted with the planner's choice")
    else:
        engine = ("recompute, MoE dispatcher and expert-comm overlap not printed and the recipe of this container not looked up "
                  "(blank: the row is predicted with the planner's choice)")
    notes.append(f"zero {'3 (FSDP ' + str(fsdp) + ')' if fs else '1 (FSDP 0: distributed optimizer)'} inferred; sequence_parallel inferred from TP>1; "
                 + engine)
    tpo = ''
    if key in MB_TPO and tp > 1:
        tpo, tpo_src = MB_TPO[key]
        notes.append(f"tp_comm_overlap {tpo} from NVIDIA-NeMo/Megatron-Bridge {tpo_src}")
    if others:
        notes.append(f"same configuration in other containers: {others} tokens/s/GPU")
    if extra:
        notes.append(extra)
    add(source=MBA.format(f=where, v=ver, t=table), trust='B', **SH[m], grad_reduce_dtype='bf16', seq_len=seq, global_batch_seqs=gbs, micro_batch=mbs,
        gpu=GPU_OF[sysn], num_gpus=n, tp=tp, pp=pp, vpp=vp, dp=n // (tp * pp * cp), cp=cp, ep=ep, etp=1, zero=3 if fs else 1,
        sequence_parallel=1 if tp > 1 else 0, recompute=rc, recompute_modules=mods, moe_dispatcher=disp, ep_overlap=epo,
        tp_comm_overlap=tpo,
        precision='bf16' if prec == 'BF16' else 'fp8', fp8_recipe=recipe, framework='nemo',
        measured_tokens_per_s_per_gpu=tps, oom=0,
        derivation=f"Tokens / sec / GPU as printed ({prec}{', ' + flag if flag else ''}); dp = GPUs/(tp*pp*cp); " + '; '.join(notes)
                   + grad_bf16(ver, m, {'DGX-GB300': 'gb300', 'DGX-B300': 'b300'}.get(sysn, 'gb200')))
for _row in MBA_ROWS:
    add_mba(*_row)
# Megatron-Turing NLG 530B (Smith et al. 2022, arXiv 2201.11990), sec. 2.4 (system performance) as transcribed in
# cli99/llm-analysis examples/megatron-turing-nlg (README: GBS 1920, 280/350/420 DGX A100 servers, 60.1/50.2/44.4 s
# per iteration, 126/121/113 TFLOP/s per GPU; run_train.sh: TP 8, PP 35)
for nodes, it_s, tf in [(280, 60.1, 126), (350, 50.2, 121), (420, 44.4, 113)]:
    n = nodes * 8
    add(source="Megatron-Turing NLG 530B paper (Smith et al. 2022, arXiv 2201.11990), sec. 2.4 (iteration time at GBS 1920 on 280/350/420 DGX A100), as transcribed in github.com/cli99/llm-analysis examples/megatron-turing-nlg/README.md and run_train.sh",
        trust='B', model='MT-NLG 530B', arch='dense', layers=105, hidden=20480, heads=128, kv_heads=128, ffn=81920, vocab=50272,
        attention='mha', mlp='gelu', tied_embeddings=1, seq_len=2048, global_batch_seqs=1920, micro_batch='', gpu='A100-SXM-80GB',
        num_gpus=n, tp=8, pp=35, vpp=1, dp=n // 280, cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='full',
        precision='bf16', framework='deepspeed', measured_step_time_s=it_s,
        measured_tokens_per_s_per_gpu=round(1920 * 2048 / (it_s * n), 1), oom=0,
        derivation=f"1920 seqs x 2048 tokens / ({it_s} s x {n} GPUs); the paper's {tf} TFLOP/s/GPU printed beside it; TP8 (within a DGX) x PP35 x DP{n // 280}, Megatron-DeepSpeed 3D parallelism; "
                   "A100 80GB per the Microsoft/NVIDIA announcement (Selene DGX A100 80GB; llm-analysis assumes 40GB); zero 1 inferred (DeepSpeed's pipeline engine allows ZeRO-1 at most), "
                   "full activation checkpointing inferred (llm-analysis activation_recomputation 2), micro batch not printed, mixed precision (fp16 vs bf16 not checked: same A100 peak), vocab 50257 padded to 50272 as in Megatron (trust B); " + PRE_FLASH + " (paper of 2022-01)", attention_kernel='unfused')
# torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (pytorch/torchtitan; torch 38410cf9, torchtitan
# 820504e, June 2025): Grand Teton, 8 H100 96GB HBM2e per host at the default 500 W, 400 Gb/s RDMA per GPU; tokens/sec
# as printed (torchtitan logs tokens/s per device). seq_len 8192 from train_configs llama3_{8b,70b}.toml at 820504e.
# Left out: Llama 3 70B float8 tensorwise (809.8 vanilla / 942.4 async): the same configuration (256 GPUs, FSDP 32 x
# TP 8, full AC, local batch 16, float8) is in the calibration set (torchtitan llama3_h100_202412 rows 61/62); 70B
# float8 rowwise (599.6 / 624.8) too: the schema's precision 'fp8' makes it the same configuration as those rows.
TT = "torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (table '{t}')"
TT70 = 'Llama3 70b on 256 H100s with FSDP=32, TP=8, torch.compile, full AC,  local batch size 16'
TT8 = 'Llama3 8b on 64 H100s with FSDP=8, TP=8, torch.compile, per op SAC, local batch size 12'
L31 = dict(SH['L8'], model='Llama 3.1 8B'), dict(SH['L70'], model='Llama 3.1 70B')
for shape, table, n, dp, lbs, rc, quant, vanilla, async_tp in [
        (L31[1], TT70, 256, 32, 16, 'full', 'bf16', 597.3, 652.4),
        (L31[0], TT8, 64, 8, 12, 'selective', 'bf16', 4378, 4809.4),
        (L31[0], TT8, 64, 8, 12, 'selective', 'tensorwise', 5078.1, 5570.1),
        (L31[0], TT8, 64, 8, 12, 'selective', 'rowwise', 3708.5, 3914.9)]:
    for overlap, tps in ((0, vanilla), (1, async_tp)):
        note = ("; float8 rowwise: the page notes the vanilla-TP rowwise baseline is low (torchtitan issue 1207), trust B"
                if quant == 'rowwise' else '')
        add(source=TT.format(t=table), trust='B' if quant == 'rowwise' else 'A', **shape, seq_len=8192,
            global_batch_seqs=lbs * dp, micro_batch=lbs, gpu='H100-SXM-96GB-500W', nic_gbps_per_gpu=400, num_gpus=n,
            tp=8, pp=1, vpp=1, dp=dp, cp=1, ep=1, etp=1, zero=3, sequence_parallel=1, recompute=rc,
            precision='bf16' if quant == 'bf16' else 'fp8', fp8_recipe='' if quant == 'bf16' else quant,
            tp_comm_overlap=overlap, framework='torchtitan', measured_tokens_per_s_per_gpu=tps, oom=0,
            derivation=(f"{'Async' if overlap else 'Vanilla'} TP tokens/sec column as printed ({'None (bfloat16)' if quant == 'bf16' else 'float8 ' + quant}); "
                        f"FSDP2 {dp} (zero 3) x TP 8 (torchtitan TP shards norms/dropout on the sequence: sequence_parallel 1), "
                        f"{'full AC' if rc == 'full' else 'per-op selective AC'}, torch.compile on; local batch {lbs} per DP rank, no "
                        f"gradient accumulation (global {lbs * dp} seqs); tp_comm_overlap {overlap} = {'async TP (micro-pipelined all-gather/reduce-scatter matmuls)' if overlap else 'vanilla TP'} "
                        f"(validate pins this column); seq 8192 from the train config toml{note}"))
# NVIDIA/dgxc-benchmarking (DGX Cloud benchmarking recipes) READMEs, "Expected Performance" tables on H100:
# training step time and "Throughput in tokens per second" (= seq x GBS / step time, all GPUs) per GPU count.
# tokens/s/GPU = printed throughput / GPUs. Shapes as the calibration set codes the same NeMo workloads (its
# NeMo 24.07 rows: GPT-3 175B vocab 51200 tied; Nemotron-4 340B squared-ReLU MLP coded gelu, untied).
# Left out: the 128-GPU FP8 points of GPT-3 175B (93190/128 = 728) and Nemotron-4 340B (41478/128 = 324),
# whose configurations are calibration rows (NeMo 24.07: 726 and 322). The 256-2048 GPU FP8 points are the same
# per-GPU work at larger DP (weak scaling, GBS grows with the GPUs): held out, but close to calibrated configurations.
DGXC = "NVIDIA/dgxc-benchmarking {f} at {c} ({d}), table '{t}'"
GPT3 = dict(model='GPT-3 175B', arch='dense', layers=96, hidden=12288, heads=96, kv_heads=96, ffn=49152, vocab=51200,
            attention='mha', mlp='gelu', tied_embeddings=1)
N340 = dict(model='Nemotron-4 340B', arch='dense', layers=96, hidden=18432, heads=96, kv_heads=8, ffn=73728, vocab=256000,
            attention='gqa', mlp='gelu', tied_embeddings=0)
GPUS = (128, 256, 512, 1024, 2048)
for f, c, d, t, shape, seq, tp, pp, vp, gbs0, prec, steps, tputs in [
        ('nemo_megatron/README_175b.md', '0efdb23', '2025-07-23', 'NeMo Megatron BF16', GPT3, 2048, 4, 8, 6, 256, 'bf16',
         (8.309, 8.408, 8.42, 8.453, 8.49), (63099, 124712, 249068, 496191, 988057)),
        ('nemo_megatron/README_175b.md', '0efdb23', '2025-07-23', 'NeMo Megatron FP8', GPT3, 2048, 4, 8, 6, 256, 'fp8',
         (5.626, 5.725, 5.774, 5.82, 5.96), (93190, 183157, 363206, 720671, 1407485)),
        ('nemotron/README_340b.md', '35a9aec', '2025-06-09', 'Nemotron4 340b 24.11 BF16 (TP=8, PP=8, MBS=1, GA=16, VP=12)', N340, 4096, 8, 8, 12, 32, 'bf16',
         (4.61, 4.67, 4.7, 4.73, 4.84), (28432, 56134, 111551, 221686, 433296)),
        ('nemotron/README_340b.md', '35a9aec', '2025-06-09', 'Nemotron4 340b 24.11 FP8 (TP=8, PP=8, MBS=1, GA=16, VP=12)', N340, 4096, 8, 8, 12, 32, 'fp8',
         (3.16, 3.21, 3.26, 3.34, 3.49), (41478, 81665, 160825, 313945, 600903))]:
    for n, step, tput in zip(GPUS, steps, tputs):
        if prec == 'fp8' and n == 128:
            continue  # a calibration configuration (see above)
        gbs = gbs0 * n // 128
        dp = n // (tp * pp)
        typo = (" (the README's layout table prints GBS 1204 at 512 GPUs; seq x 1024 / step time reproduces the printed throughput)"
                if shape is GPT3 and n == 512 else '')
        # Nemotron-4 340B: the recipe's own config (nemotron/nemotron4-340b-synth.yaml at 35a9aec) states the engine settings
        yaml = shape is N340
        engine = (dict(zero=1, recompute='selective', optimizer_state_precision='bf16-no-master', grad_reduce_dtype='bf16',
                       tp_comm_overlap=1)
                  if yaml else dict(zero=1, recompute='none', grad_reduce_dtype='bf16', tp_comm_overlap=1))
        if prec == 'fp8':
            engine['fp8_recipe'] = 'delayed'
        settings = ("zero 1, recompute selective, optimizer bf16-no-master, grad_reduce_dtype bf16 from the recipe's "
                    "nemotron/nemotron4-340b-synth.yaml at 35a9aec (activations_checkpoint_granularity: selective; optim: "
                    "distributed_fused_adam, dtype bf16, grad_sync_dtype bf16, contiguous_grad_buffer: Apex DistributedFusedAdam, "
                    "optimizer states sharded over DP, bf16 moments, and NeMo >= 1.23 sets store_params False when the optimizer "
                    "dtype is the model's, so no master copy; FP8 rows add fp8_params, whose bf16 param shard (store_params) "
                    "offsets the 1-byte FP8 weights at DP 2: coded the same); tp_comm_overlap 1: nemotron/configure.sh at 35a9aec "
                    "passes model.ub_tp_comm_overlap=True over the YAML's False"
                    if yaml else "zero 1, recompute none, grad_reduce_dtype bf16, tp_comm_overlap 1 from the recipe's "
                    "nemo_megatron/cfg/gpt3_175b_hydra.yaml at 0efdb23 (activations_checkpoint_granularity null and configure.sh "
                    "passes no recompute override; optim distributed_fused_adam with grad_sync_dtype bf16 and contiguous_grad_buffer: "
                    "Apex DistributedFusedAdam, optimizer states sharded over DP, bf16 gradient buffer and reduction, fp32 states "
                    "(no optim dtype given); ub_tp_comm_overlap true)")
        fp8_text = ("FP8 recipe delayed: the recipe's YAML sets fp8_hybrid, fp8_amax_history_len 1024, fp8_amax_compute_algo max "
                    "(Transformer Engine DelayedScaling), and configure.sh turns model.fp8 on for DTYPE fp8"
                    if prec == 'fp8' else "BF16 run (model.fp8 False)")
        add(source=DGXC.format(f=f, c=c, d=d, t=t), trust='A', **shape, seq_len=seq, global_batch_seqs=gbs, micro_batch=1,
            gpu='H100-SXM-80GB', num_gpus=n, tp=tp, pp=pp, vpp=vp, dp=dp, cp=1, ep=1, etp=1, sequence_parallel=1,
            precision=prec, framework='nemo', measured_tokens_per_s_per_gpu=round(tput / n, 1),
            measured_step_time_s=step, oom=0, **engine,
            derivation=(f"printed throughput {tput} tokens/s over {n} GPUs (= {seq} x {gbs} / {step} s); TP {tp} PP {pp} VP {vp} MBS 1 "
                        f"GA {gbs // (dp)} from the README's layout table and the table title{typo}; sequence_parallel 1 as NeMo's "
                        f"recipes and the calibration rows of this workload; {settings}; {fp8_text}"))
# MaxText Llama 3 70B (dgxc-benchmarking maxtext/README_70b.md at 0efdb23, 2025-07-23): JAX, FSDP within the node
# (ici_FSDP 8) and across nodes (dcn_FSDP 16 or 32), pure DP across the rest (dcn_DP), per-device batch 2, no GA;
# maxtext/configure.sh at 0efdb23: POLICY="save_qkv_proj", attention=cudnn_flash_te, latency-hiding scheduler with
# PGLE, pipelined all-gather / reduce-scatter, XLA's rematerialization pass disabled, memory fraction 0.94
MT = "NVIDIA/dgxc-benchmarking maxtext/README_70b.md at 0efdb23 (2025-07-23), table 'Maxtext Llama3 70b {p}'"
for prec, steps, tputs in [('BF16', (15.563, 15.444, 15.519, 15.603, 15.898), (134752.43, 271581.46, 540537.92, 1075255.78, 2110607.12)),
                           ('FP8', (9.074, 9.488, 9.244, 9.483, 9.339), (231116.60, 442064.08, 907465.17, 1769188.65, 3592936.29))]:
    for n, step, tput in zip(GPUS, steps, tputs):
        fsdp = 8 * (32 if n == 256 else 16)
        add(source=MT.format(p=prec), trust='B', **SH['L70'], seq_len=8192, global_batch_seqs=2 * n, micro_batch=2,
            gpu='H100-SXM-80GB', num_gpus=n, tp=1, pp=1, vpp=1, dp=n, cp=1, ep=1, etp=1, zero=3, sequence_parallel=0,
            recompute='full', precision=prec.lower(), framework='maxtext', measured_tokens_per_s_per_gpu=round(tput / n, 1),
            measured_step_time_s=step, oom=0,
            derivation=(f"printed throughput {tput} tokens/s over {n} GPUs (= 8192 x {2 * n} / {step} s); MaxText (JAX/XLA) sharding "
                        f"ici_FSDP 8 x dcn_FSDP {fsdp // 8} x dcn_DP {n // fsdp}: parameters sharded over {fsdp} GPUs"
                        f"{' (all)' if fsdp == n else ', replicated over ' + str(n // fsdp) + ' groups: hybrid sharding, which the schema codes as zero 3 over all DP (trust B)'}; "
                        "per_device_batch_size 2, GA 1; recompute full: the recipe's configure.sh at the same commit sets "
                        "remat_policy=save_qkv_proj (MaxText: jax.checkpoint saving only the query/key/value projections, "
                        "everything else recomputed), coded full, the nearest schema value (the Q/K/V GEMMs it keeps, 9% of a "
                        "layer's forward FLOPs, are counted as recomputed); attention=cudnn_flash_te; Llama 3 70B shape"))
# dgxc-benchmarking llama3.1/README_{8b,70b,405b}.md and nemotron/README_15b.md at 35a9aec (2025-06-09), NeMo 24.09 / 24.11
# on H100, weak scaling (GBS grows with the GPUs); seq from the printed throughput (= seq x GBS / step time). Left out:
# the 8B and 70B FP8 base points (8 and 64 GPUs), whose configurations are calibration rows (NeMo 24.07 Llama 3 8B / 70B),
# and the 405B rows on 32-192 GPUs (truncated 7/21/42-layer models). Nemotron-4 15B shape: NeMo Nemotron4Config15B
# (nemo/collections/llm/gpt/model/nemotron.py: 32 layers, hidden 6144, ffn 24576, 48 heads, 8 query groups, squared ReLU
# coded gelu, untied), vocab 256000 as the 340B row.
N15 = dict(N340, model='Nemotron-4 15B', layers=32, hidden=6144, heads=48, kv_heads=8, ffn=24576)
L405_31 = SH['L405']
L70_31 = dict(SH['L70'], model='Llama 3.1 70B')
L8_31 = dict(SH['L8'], model='Llama 3.1 8B')
for f, t, shape, seq, tp, pp, cp, vp, mbs, n0, gbs0, prec, ns, steps, tputs, skip in [
        ('llama3.1/README_8b.md', 'Llama 3.1 8b 24.09 BF16 (TP=1, PP=1, CP=2, MBS=1, GA=32)', L8_31, 8192, 1, 1, 2, 1, 1, 8, 128, 'bf16',
         (8, 16, 32, 64, 128), (12.91, 13.00, 13.05, 13.08, 13.10), (81222, 161319, 321403, 641331, 1280704), ()),
        ('llama3.1/README_8b.md', 'Llama 3.1 8b 24.09 FP8 (TP=1, PP=1, CP=2, MBS=1, GA=32)', L8_31, 8192, 1, 1, 2, 1, 1, 8, 128, 'fp8',
         (8, 16, 32, 64, 128), (9.67, 9.73, 9.75, 9.80, 9.82), (108436, 215535, 430185, 855980, 1708474), (8,)),
        ('llama3.1/README_70b.md', 'Llama 3.1 70b 24.09 BF16 (TP=4, PP=4, CP=2, VP=5, MBS=1, GA=64)', L70_31, 8192, 4, 4, 2, 5, 1, 64, 128, 'bf16',
         (64, 128, 256, 512, 1024, 2048), (14.72, 14.73, 14.8, 14.89, 14.92, 14.98), (71235, 142373, 283399, 563372, 1124478, 2248957), ()),
        ('llama3.1/README_70b.md', 'Llama 3.1 70b 24.09 FP8 (TP=4, PP=4, CP=2, VP=5, MBS=1, GA=64)', L70_31, 8192, 4, 4, 2, 5, 1, 64, 128, 'fp8',
         (64, 128, 256, 512, 1024, 2048), (11.01, 10.93, 11.16, 11.18, 11.28, 11.39), (95239, 191871, 375834, 750323, 1487342, 2945955), (64,)),
        ('llama3.1/README_405b.md', 'Llama 3.1 405b 24.09 BF16 (TP=8, PP=9, CP=2, VP=7, MBS=1, GA=63)', L405_31, 8192, 8, 9, 2, 7, 1, 576, 252, 'bf16',
         (576, 1152, 2304), (17.20, 17.52, 17.62), (120022, 235660, 468646), ()),
        ('llama3.1/README_405b.md', 'Llama 3.1 405b 24.09 FP8 (TP=8, PP=9, CP=2, VP=7, MBS=1, GA=63)', L405_31, 8192, 8, 9, 2, 7, 1, 576, 252, 'fp8',
         (576, 1152, 2304), (11.24, 11.31, 12.35), (183664, 365055, 668626), ()),
        ('nemotron/README_15b.md', 'Nemotron4 15b 24.11 BF16 (TP=4, PP=1, MBS=4, GA=4)', N15, 4096, 4, 1, 1, 1, 4, 16, 64, 'bf16',
         (16, 32, 64, 128, 256, 512, 1024, 2048), (2.83, 2.86, 2.86, 2.89, 2.88, 2.92, 2.92, 2.96),
         (92630, 183317, 366635, 725658, 1456356, 2872811, 5745622, 11335957), ()),
        ('nemotron/README_15b.md', 'Nemotron4 15b 24.11 FP8 (TP=4, PP=1, MBS=4, GA=4)', N15, 4096, 4, 1, 1, 1, 4, 16, 64, 'fp8',
         (16, 32, 64, 128, 256, 512, 1024, 2048), (2.08, 2.07, 2.09, 2.08, 2.1, 2.12, 2.12, 2.18),
         (126031, 253279, 501711, 1008246, 1997288, 3956891, 7913781, 15391941), ())]:
    yml = {'llama3.1/README_8b.md': 'llama3.1/llama3.1_8b.yaml', 'llama3.1/README_70b.md': 'llama3.1/llama3.1_70b.yaml',
           'llama3.1/README_405b.md': 'llama3.1/llama3.1_405b.yaml', 'nemotron/README_15b.md': 'nemotron/nemotron4-15b-synth.yaml'}[f]
    for n, step, tput in zip(ns, steps, tputs):
        if n in skip:
            continue  # a calibration configuration (see above)
        gbs = gbs0 * n // n0
        dp = n // (tp * pp * cp)
        add(source=DGXC.format(f=f, c='35a9aec', d='2025-06-09', t=t), trust='A', **shape, seq_len=seq, global_batch_seqs=gbs,
            micro_batch=mbs, gpu='H100-SXM-80GB', num_gpus=n, tp=tp, pp=pp, vpp=vp, dp=dp, cp=cp, ep=1, etp=1, zero=1,
            sequence_parallel=1 if tp > 1 else 0, recompute='none', precision=prec, framework='nemo',
            grad_reduce_dtype='bf16', tp_comm_overlap=1 if tp > 1 else '', fp8_recipe='delayed' if prec == 'fp8' else '',
            measured_tokens_per_s_per_gpu=round(tput / n, 1), measured_step_time_s=step, oom=0,
            derivation=(f"printed throughput {tput} tokens/s over {n} GPUs (= {seq} x {gbs} / {step} s, which fixes seq {seq}); layout from the "
                        f"table title, GBS scaled with the GPUs as the column heads print (GA {gbs // (dp * mbs)}); sequence_parallel from TP>1; "
                        f"engine settings from the recipe's own NeMo config at 35a9aec ({yml}, run by {'llama3.1' if yml.startswith('llama') else 'nemotron'}/configure.sh "
                        "through megatron_gpt_pretraining.py): zero 1 (optim distributed_fused_adam: Apex DistributedFusedAdam, optimizer "
                        "states sharded over DP, fp32 states: no optim dtype given), grad_reduce_dtype bf16 (optim grad_sync_dtype bf16, "
                        "contiguous_grad_buffer), recompute none (activations_checkpoint_granularity null, no override in configure.sh)"
                        + (", tp_comm_overlap 1 (" + ("ub_tp_comm_overlap true in the YAML" if yml.startswith('llama') else
                                                      "configure.sh passes model.ub_tp_comm_overlap=True") + ")" if tp > 1 else "")
                        + ("; FP8 recipe delayed: configure.sh sets model.fp8 and model.fp8_hybrid for DTYPE fp8 and the YAML "
                           "fp8_amax_history_len 1024, fp8_amax_compute_algo max (Transformer Engine DelayedScaling)" if prec == 'fp8' else "")))
# dgxc-benchmarking deepseek_v3/pretraining/README.md at c5c765f (2025-10-22): DeepSeek-V3 671B BF16, seq 4096, MBS 1,
# layouts from its tables (TP 2, ETP 1, VP 1), step time and throughput per GPU count; routing balance, MTP,
# dispatcher not printed (blank / the preset's shape without MTP): trust B. Recompute from the recipe's launch.sh at
# c5c765f (NeMo 25.04.01 container, scripts.performance.llm.pretrain_deepseek_v3 with --recompute_modules $RM;
# NeMo's scripts/performance/llm/pretrain_deepseek_v3.py sets recompute_granularity='selective', as read at
# NVIDIA/NeMo 0349f23, a stored version not checked to be 25.04.01's): RM='mla_up_proj' on h100, 'core_attn' on gb200.
for gpu, n, pp, ep, gbs, step, tput in [('H100-SXM-80GB', 512, 8, 64, 4096, 48.948, 342755.90),
                                       ('H100-SXM-80GB', 1024, 16, 64, 8192, 52.04, 644781.55),
                                       ('GB200', 128, 4, 32, 1024, 34.168, 122755.33),
                                       ('GB200', 256, 4, 64, 2048, 34.194, 245323.97),
                                       ('GB200', 512, 4, 64, 4096, 34.274, 489502.71)]:
    dp = n // (2 * pp)
    add(source=DGXC.format(f='deepseek_v3/pretraining/README.md', c='c5c765f', d='2025-10-22',
                           t=f"Deepseek V3 BF16 {'H100' if gpu.startswith('H100') else 'GB200'}"),
        trust='B', **SH['DS3'], seq_len=4096, global_batch_seqs=gbs, micro_batch=1, gpu=gpu, num_gpus=n, tp=2, pp=pp, vpp=1,
        dp=dp, cp=1, ep=ep, etp=1, zero='', sequence_parallel=1, recompute='selective',
        moe_dispatcher='alltoall', tp_comm_overlap=0, grad_reduce_dtype='fp32',
        recompute_modules='mla_up_proj' if gpu.startswith('H100') else 'core_attn', precision='bf16', framework='nemo',
        measured_tokens_per_s_per_gpu=round(tput / n, 1), measured_step_time_s=step, oom=0,
        derivation=(f"printed throughput {tput} tokens/s over {n} GPUs (= 4096 x {gbs} / {step} s); TP 2 PP {pp} EP {ep} ETP 1 DP {dp} "
                    f"VP 1 MBS 1 GA {gbs // dp} from the layout table; expert routing balance, MTP, dispatcher "
                    "and zero not printed (blank: planner's choice; shape from the DeepSeek-V3 preset dims); recompute selective of "
                    f"{'mla_up_proj' if gpu.startswith('H100') else 'core_attn'} from deepseek_v3/pretraining/launch.sh at c5c765f "
                    f"(RM='{'mla_up_proj' if gpu.startswith('H100') else 'core_attn'}' for GPU_TYPE={'h100' if gpu.startswith('H100') else 'gb200'}, "
                    "passed as --recompute_modules to NeMo 25.04.01's scripts.performance.llm.pretrain_deepseek_v3, which sets granularity "
                    "selective as read at NVIDIA/NeMo 0349f23, a version not checked to be the container's); the scripts that "
                    "ran are NVIDIA/NeMo 7a8f1cc (setup.sh at c5c765f: NEMO_COMMIT, 'Llmb nemo r2.3.0'), whose "
                    "scripts/performance/llm/pretrain_deepseek_v3.py also sets recompute_granularity 'selective', "
                    "MegatronCommOverlapCallback(tp_comm_overlap=False) -> tp_comm_overlap 0, USE_TOKEN_DROP = True "
                    "(MegatronTokenDropCallback: capacity-factor token dropping, not in the schema), and leaves the "
                    "DeepSeekV3Config default moe_token_dispatcher_type 'alltoall' (nemo/collections/llm/gpt/model/deepseek.py) "
                    "-> moe_dispatcher alltoall; grad_reduce_dtype fp32: scripts/performance/utils.py set_primary_perf_configs "
                    "sets grad_reduce_in_fp32 False only for FP8, and these BF16 runs keep bf16_mixed()'s "
                    "grad_reduce_in_fp32=True (nemo/collections/llm/recipes/precision/mixed_precision.py)"
                    + ("; NB the GB200 rows are 3.3x below Megatron-Bridge's own 25.11 GB200 DeepSeek-V3 BF16 number at 256 GPUs (3139, "
                       "TP 1 PP 4 VP 4 EP 64, force-balanced); the README prints step time, throughput and TFLOPS_per_GPU (249, MFU 10.2%) "
                       "consistently (4096 x GBS / step = the printed throughput; GBS = 8 x GPUs as launch.sh sets it): kept as printed" if gpu == 'GB200' else '')))
# Megatron-Bridge performance summaries, DGX-GB300 and DGX-B300 rows (added after the GPU catalog gained GB300 and B300;
# appended last so that every earlier row keeps its id): docs/performance-summary.md at 26.08 and
# docs/performance-summary-archive.md (26.06.01 ... 25.11; 25.09 has no GB300/B300 table), NVIDIA-NeMo/Megatron-Bridge
# commit 067f987 (2026-08-22). Same conventions as MBA_ROWS above: one row per distinct configuration (system, model,
# precision, GPUs, GBS, MBS, seq, FSDP, TP, PP, CP, VP, EP; no FSDP column (26.06+) = FSDP 0, VP n/a = 1, MXFP8 = FP8-MX,
# but 'FP8' (26.02+) and 'FP8-CS' (25.11) kept apart as for the GB200 Llama rows H040/H058 and H041/H054), the newest
# container's number, the other containers' numbers in the derivation. Skipped: NVFP4 rows (not a schema precision),
# Nemotron 3 Nano / Super / Ultra (hybrid Mamba), Kimi-K2 and DeepSeek-V4 Flash (no shape in SH), SFT and LoRA tables
# (not pre-training).
MBA_ROWS_BLACKWELL_ULTRA = [  # as MBA_ROWS: (container, system, model, flag, precision, GPUs, GBS, MBS, seq, FSDP, TP, PP, CP, VP, EP, tokens/s/GPU, others)
('26.08', 'DGX-GB300', 'DS3', '', 'MXFP8', 256, 4096, 1, 4096, None, 1, 2, 1, 8, 32, 6288, '26.06.01: 6304; 26.06: 6338'),
('26.08', 'DGX-GB300', 'GOSS', '', 'MXFP8', 64, 1280, 4, 4096, None, 1, 1, 1, 1, 16, 33024,
 '26.06.01: 20288 (its Model TFLOP column footnoted as a known performance regression, cudnn-frontend issue 256); 26.06: 33166'),
('26.08', 'DGX-GB300', 'Q30', '', 'MXFP8', 8, 512, 8, 4096, None, 1, 1, 1, 1, 8, 44544,
 '26.06.01: 44544; 26.06: 45275; 26.04.01: 31744; 26.04: 31470; 26.02.01: 30411; 26.02: 30376'),
('26.08', 'DGX-GB300', 'Q235', '', 'MXFP8', 256, 8192, 2, 4096, None, 1, 4, 1, 12, 32, 8816,
 '26.06.01: 9008; 26.06: 9015; 26.04.01: 6944; 26.04: 6994'),
('26.06', 'DGX-GB300', 'L405', '', 'FP8', 256, 1536, 1, 8192, None, 4, 8, 1, 4, 1, 1048, '26.04.01: 1024; 26.04: 1036; 26.02: 988'),
('26.06', 'DGX-GB300', 'L405', '', 'MXFP8', 256, 1536, 1, 8192, None, 2, 8, 2, 4, 1, 952,
 '26.04.01: 960; 26.04: 968; 26.02.01: 949; 26.02: 931'),
('26.06', 'DGX-GB300', 'DS3', '', 'MXFP8', 256, 15360, 1, 4096, None, 1, 2, 1, 8, 32, 6422, ''),
('26.06', 'DGX-B300', 'DS3', '', 'MXFP8', 256, 4096, 2, 4096, None, 1, 8, 1, 1, 8, 3541, '26.04.01: 3456'),
('26.06', 'DGX-B300', 'GOSS', '', 'MXFP8', 64, 1280, 4, 4096, None, 1, 1, 1, 1, 8, 18534, ''),
('26.06', 'DGX-B300', 'Q30', '', 'MXFP8', 8, 512, 8, 4096, None, 1, 1, 1, 1, 8, 40769,
 '26.04.01: 30720; 26.04: 30553; 26.02.01: 29454; 26.02: 29521'),
('26.04.01', 'DGX-GB300', 'L70', '', 'FP8', 64, 256, 2, 8192, 64, 1, 1, 1, 1, 1, 5248, '26.04: 5243; 26.02.01: 5243; 26.02: 5003'),
('26.04.01', 'DGX-GB300', 'L70', '', 'MXFP8', 64, 256, 1, 8192, 0, 1, 4, 1, 5, 1, 4864, '26.04: 4742; 26.02: 4596'),
('26.04.01', 'DGX-GB300', 'DS3', '', 'MXFP8', 256, 4096, 2, 4096, 0, 1, 2, 1, 8, 32, 4992, '26.04: 4965; 26.02.01: 4691; 26.02: 4612'),
('26.04.01', 'DGX-GB300', 'GOSS', '', 'BF16', 64, 1280, 4, 4096, 0, 1, 1, 1, 1, 64, 19200, '26.04: 19275; 26.02.01: 19366; 26.02: 19412'),
('26.04.01', 'DGX-B300', 'GOSS', '', 'BF16', 64, 1280, 4, 4096, 0, 1, 1, 1, 1, 8, 15232, '26.04: 15114; 26.02.01: 15031'),
('26.04.01', 'DGX-B300', 'Q235', '', 'MXFP8', 256, 8192, 2, 4096, 0, 1, 8, 1, 1, 8, 5936, '26.04: 4865'),
('26.04', 'DGX-B300', 'DS3', '', 'MXFP8', 256, 4096, 1, 4096, 0, 1, 16, 1, 1, 8, 3131, '26.02.01: 3099; 26.02: 2983'),
('26.02.01', 'DGX-GB300', 'L70', '', 'MXFP8', 64, 256, 2, 8192, 0, 1, 4, 1, 1, 1, 4798, ''),
('26.02.01', 'DGX-GB300', 'L405', '', 'FP8', 256, 1536, 1, 8192, 0, 2, 8, 2, 4, 1, 1024, ''),
('26.02.01', 'DGX-GB300', 'Q235', '', 'MXFP8', 256, 8192, 2, 4096, 0, 1, 4, 1, 1, 32, 6583, '26.02: 6583'),
('26.02.01', 'DGX-B300', 'Q235', '', 'MXFP8', 256, 8192, 1, 4096, 0, 1, 8, 1, 4, 8, 2644, '26.02: 2691'),
('26.02', 'DGX-B300', 'GOSS', '', 'BF16', 64, 1280, 4, 4096, 0, 1, 1, 1, 1, 64, 8359, ''),
('25.11', 'DGX-GB300', 'L8', '', 'FP8-CS', 8, 128, 2, 8192, 0, 1, 1, 1, 1, 1, 37556, ''),
('25.11', 'DGX-GB300', 'L8', '', 'FP8-MX', 8, 128, 2, 8192, 0, 1, 1, 1, 1, 1, 36108, ''),
('25.11', 'DGX-GB300', 'L70', '', 'FP8-CS', 64, 256, 2, 8192, 64, 1, 1, 1, 1, 1, 4520, ''),
('25.11', 'DGX-GB300', 'L405', '', 'FP8-CS', 256, 1536, 1, 8192, 0, 2, 8, 2, 4, 1, 999, ''),
('25.11', 'DGX-GB300', 'DS3', 'w/o MTP', 'BF16', 256, 4096, 1, 4096, 0, 1, 2, 1, 4, 32, 3848, ''),
('25.11', 'DGX-GB300', 'DS3', 'w/o MTP', 'FP8-MX', 256, 4096, 1, 4096, 0, 1, 2, 1, 4, 32, 4357, ''),
('25.11', 'DGX-GB300', 'GOSS', '', 'BF16', 64, 1280, 2, 8192, 0, 1, 1, 1, 1, 64, 18347, ''),
('25.11', 'DGX-GB300', 'Q30', '', 'FP8-MX', 8, 512, 4, 4096, 0, 1, 1, 1, 1, 8, 28934, ''),
('25.11', 'DGX-GB300', 'Q235', '', 'BF16', 256, 8192, 2, 4096, 0, 1, 4, 1, 12, 16, 6131, ''),
]
MBA_EXTRA = {  # (container, system, model, flag, precision) -> a note on the row as printed
 ('25.11', 'DGX-GB300', 'Q235', '', 'BF16'): "NB the page prints GA 32, but GBS/(DP x MBS) = 8192/(64 x 2) = 64 at the printed "
    "PP 4: one of MBS, PP or GA is misprinted; kept as printed (GPUs, GBS, MBS, PP, VP, EP), which is exactly Megatron-Bridge "
    "v0.3.0's QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_BF16_V2 (256 GPUs tp1 pp4 vp12 ep16 mbs2 gbs8192): GA 32 the likely misprint",
}
# Engine settings of these rows from the recipes of the release that printed them (tags as for MBA_ROWS; the GB300 / B300
# presets of v0.4.0 and v0.4.1 are identical, the 26.04-alpha branch not checked for them); same mapping and same rule
# (only where the preset's GPUs, GBS, MBS, TP, PP, CP, VP and EP equal the row's). Dense rows: recompute only (the
# Llama recipes set no recompute unless a preset gives recompute_num_layers or cpu_offloading_num_layers).
_V6 = "v0.6.0 src/megatron/bridge/perf_recipes/"
_FULL_ITER_DS = ("_enable_deepseek_full_iteration_mxfp8: flex hybridep, overlap_moe_expert_parallel_comm=True, full-iteration "
                 "CUDA graph")
_FULL_ITER_QWEN = ("qwen/common.py _enable_hybridep_full_iteration_mxfp8: overlap_moe_expert_parallel_comm=True, full-iteration "
                   "CUDA graph")
_L405_NONE = ("and src/megatron/bridge/recipes/llama/llama3.py llama31_405b_pretrain_config: recompute_granularity=None")
MB_RECIPE.update({
 ('26.08', 'DGX-GB300', 'DS3', 'MXFP8'): ('deepep', 1, 'none', '',
    _V6 + "deepseek/gb300/deepseek_v3.py deepseek_v3_pretrain_256gpu_gb300_fp8mx_config (pp2 vp8 ep32 gbs4096 mbs1, pp layout "
    "Et*4|(t*4|)*14tmL whose 'm' is an MTP layer the schema does not count; recompute_modules=[] under common.py "
    "_deepseek_v3_common's granularity selective: nothing recomputed; " + _FULL_ITER_DS + ", FP8 attention)"),
 ('26.08', 'DGX-GB300', 'GOSS', 'MXFP8'): ('deepep', 1, 'none', '',
    _V6 + "gpt_oss/gb300/gpt_oss.py gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config (ep16 mbs4 gbs1280, no recompute set: its "
    "base src/megatron/bridge/recipes/gpt_oss/h100/gpt_oss.py gpt_oss_120b_pretrain_64gpu_h100_bf16_config sets "
    "recompute_granularity=None; gpt_oss/common.py _apply_gpt_oss_120b_full_iter_fp8mx_configs: flex hybridep, "
    "overlap_moe_expert_parallel_comm=True, FP8 attention, full-iteration CUDA graph)"),
 ('26.08', 'DGX-GB300', 'Q30', 'MXFP8'): ('deepep', 1, 'none', '',
    _V6 + "qwen/gb300/qwen3_moe.py qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config (ep8 mbs8 gbs512, recompute_granularity=None, "
    "flex hybridep; " + _FULL_ITER_QWEN + ")"),
 ('26.08', 'DGX-GB300', 'Q235', 'MXFP8'): ('deepep', 1, 'none', '',
    _V6 + "qwen/gb300/qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_gb300_fp8mx_config (pp4 vp12 ep32 gbs8192 mbs2, "
    "recompute_granularity=None, flex hybridep; " + _FULL_ITER_QWEN + ")"),
 ('26.06', 'DGX-GB300', 'L405', 'FP8'): ('', '', 'none', '',
    "v0.5.0 / v0.5.1 (same preset) scripts/performance/configs/llama/llama31_workload_base_configs.py "
    "LLAMA31_405B_PRETRAIN_CONFIG_GB300_FP8_CS_V2 (256 GPUs tp4 pp8 cp1 vp4 gbs1536, no FSDP, no recompute or CPU offloading) "
    + _L405_NONE),
 ('26.06', 'DGX-GB300', 'L405', 'MXFP8'): ('', '', 'none', '',
    "v0.5.0 / v0.5.1 (same preset) scripts/performance/configs/llama/llama31_workload_base_configs.py "
    "LLAMA31_405B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 (256 GPUs tp2 pp8 cp2 vp4 gbs1536, no recompute or CPU offloading) "
    + _L405_NONE),
 ('26.06', 'DGX-B300', 'GOSS', 'MXFP8'): ('deepep', 0, 'none', '',
    "v0.5.0 / v0.5.1 (same preset) configs/gpt_oss/gpt_oss_workload_base_configs.py GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2 "
    "= ..._B300_BF16_V2 (ep8 mbs4 gbs1280, hybridep, moe_a2a_overlap default False, no recompute_modules) and "
    "src/megatron/bridge/recipes/gpt_oss/gpt_oss.py gpt_oss_120b_pretrain_config (recompute_granularity=None)"),
 ('26.06', 'DGX-B300', 'Q30', 'MXFP8'): ('deepep', 1, 'none', '',
    "v0.5.0 / v0.5.1 (same preset) configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1 "
    "(8 GPUs ep8 mbs8 gbs512, hybridep, moe_a2a_overlap=True, full-iteration CUDA graph) and qwen3_llm_pretrain.py "
    "qwen3_30b_a3b_pretrain_config_b300 (moe_token_dispatcher_type 'flex'; " + QWEN_COMMON + ")"),
 ('26.04.01', 'DGX-GB300', 'L70', 'MXFP8'): ('', '', 'none', '',
    "v0.4.0 / v0.4.1 scripts/performance/configs/llama/llama3_workload_base_configs.py LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 "
    "(64 GPUs pp4 vp5 mbs1 gbs256, no recompute or CPU offloading) and src/megatron/bridge/recipes/llama/llama3.py "
    "llama3_70b_pretrain_config: recompute_granularity=None"),
 ('26.04.01', 'DGX-GB300', 'DS3', 'MXFP8'): ('deepep', 0, 'selective', 'mla_up_proj',
    "v0.4.0 / v0.4.1 configs/deepseek/deepseek_workload_base_configs.py DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_V2 = "
    "..._GB300_V2 (256 GPUs pp2 vp8 ep32 mbs2 gbs4096, pp layout Et*4|(t*4|)*14tmL with an MTP layer, recompute_modules="
    "['mla_up_proj'], hybridep, moe_a2a_overlap=False) and deepseek_llm_pretrain.py set_deepseek_v3_common_configs: "
    "recompute_granularity selective"),
 ('26.04.01', 'DGX-GB300', 'GOSS', 'BF16'): ('alltoall', 0, 'none', '',
    "v0.4.0 / v0.4.1 configs/gpt_oss/gpt_oss_workload_base_configs.py GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2 (ep64 mbs4 "
    "gbs1280, no flex backend, moe_a2a_overlap default False, no recompute_modules) and src/megatron/bridge/recipes/gpt_oss/"
    "gpt_oss.py gpt_oss_120b_pretrain_config (moe_token_dispatcher_type 'alltoall', recompute_granularity=None)"),
 ('26.04.01', 'DGX-B300', 'GOSS', 'BF16'): ('deepep', 0, 'none', '',
    "v0.4.0 / v0.4.1 configs/gpt_oss/gpt_oss_workload_base_configs.py GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2 (ep8 mbs4 "
    "gbs1280, hybridep, moe_a2a_overlap default False, no recompute_modules) and src/megatron/bridge/recipes/gpt_oss/"
    "gpt_oss.py gpt_oss_120b_pretrain_config (recompute_granularity=None)"),
 ('26.04.01', 'DGX-B300', 'Q235', 'MXFP8'): ('alltoall', 0, 'none', '',
    "v0.4.0 / v0.4.1 configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2 = "
    "..._B300_FP8_CS_V2 (256 GPUs pp8 ep8 mbs2 gbs8192, moe_a2a_overlap=False, no flex backend) and qwen3_llm_pretrain.py "
    "qwen3_235b_a22b_pretrain_config_b300 (moe_token_dispatcher_type 'alltoall'; " + QWEN_COMMON + ")"),
 ('26.04', 'DGX-B300', 'DS3', 'MXFP8'): ('deepep', 0, 'selective', 'mla_up_proj',
    "v0.4.0 / v0.4.1 configs/deepseek/deepseek_workload_base_configs.py DEEPSEEK_V3_PRETRAIN_CONFIG_B300_FP8_MX_V2 = "
    "..._B300_V2 (256 GPUs pp16 ep8 mbs1 gbs4096, recompute_modules=['mla_up_proj'], hybridep, moe_a2a_overlap=False) and "
    "deepseek_llm_pretrain.py set_deepseek_v3_common_configs: recompute_granularity selective"),
 ('26.02.01', 'DGX-GB300', 'Q235', 'MXFP8'): ('deepep', 0, 'none', '',
    "v0.3.0 and v0.3.1 (both this layout) configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 "
    "(256 GPUs pp4 ep32 mbs2 gbs8192, moe_flex_dispatcher_backend='hybridep', moe_a2a_overlap default False) and "
    "qwen3_llm_pretrain.py " + QWEN_COMMON),
 ('26.02', 'DGX-B300', 'GOSS', 'BF16'): ('alltoall', 0, 'none', '',
    "v0.3.0 configs/gpt_oss/gpt_oss_workload_base_configs.py GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2 (ep64 mbs4 gbs1280, no "
    "flex backend, no recompute_modules: GPTOSSProvider moe_token_dispatcher_type 'alltoall', recompute left at "
    "Megatron-Core's default None)"),
})
MB_RECIPE_NOTE.update({
 ('26.04.01', 'DGX-GB300', 'L70', 'FP8'): "v0.4.0 / v0.4.1 scripts/performance/configs/llama/llama3_workload_base_configs.py "
    "LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_CS_V2 has the row's layout (Megatron FSDP, mbs2, gbs256) and no recompute "
    "(recipes/llama/llama3.py llama3_70b_pretrain_config: recompute_granularity=None), but cpu_offloading_num_layers=20 "
    "(scripts/performance/utils/overrides.py _set_recompute_overrides: the activations of 20 layers offloaded to host "
    "memory), which the schema cannot state",
})
MB_RECIPE_MISMATCH.update({
 ('26.06', 'DGX-GB300', 'DS3', 'MXFP8'): "v0.5.0 / v0.5.1 GB300 DeepSeek-V3 FP8_MX presets are pp2 vp8 ep32 mbs1 at gbs 2048 "
    "(V1) and 4096 (V2), the row gbs 15360",
 ('26.06', 'DGX-B300', 'DS3', 'MXFP8'): "v0.5.0's B300 FP8_MX_V2 preset has the row's layout (pp8 ep8 mbs2 gbs4096, hybridep, "
    "no a2a overlap, mla_up_proj) but v0.5.1's is mbs1 pp8 vp2 (a2a overlap, full-iteration CUDA graph): which tag built "
    "26.06 is not known",
 ('26.02.01', 'DGX-GB300', 'L70', 'MXFP8'): "v0.3.0 / v0.3.1 GB300 Llama 3 70B FP8_MX presets are pp4 vp5 mbs1, the row mbs2 "
    "pp4 without VP",
 ('26.02.01', 'DGX-GB300', 'L405', 'FP8'): "v0.3.0 / v0.3.1 GB300 Llama 3.1 405B FP8_CS presets are 128 GPUs tp2 Megatron "
    "FSDP gbs64 (V1) and 256 GPUs tp4 pp8 cp1 vp4 gbs1536 (V2), the row tp2 pp8 cp2 vp4",
 ('26.02.01', 'DGX-B300', 'Q235', 'MXFP8'): "v0.3.0's B300 FP8_MX_V2 preset has the row's layout (pp8 vp4 ep8 mbs1, a2a "
    "overlap, no flex backend) but v0.3.1's is pp8 ep8 without VP: which tag built 26.02.01 is not known",
 ('25.11', 'DGX-GB300', 'L8', 'FP8-CS'): "v0.2.0's GB300 Llama 3 8B FP8 preset is mbs4 (full-iteration CUDA graph), the row mbs2",
 ('25.11', 'DGX-GB300', 'L8', 'FP8-MX'): "v0.2.0's GB300 Llama 3 8B FP8 preset is mbs4 (full-iteration CUDA graph), the row mbs2",
 ('25.11', 'DGX-GB300', 'L70', 'FP8-CS'): "v0.2.0's GB300 Llama 3 70B FP8_CS preset is gbs128 (Megatron FSDP, mbs2, 20 layers' "
    "activations offloaded to host memory), the row gbs256",
 ('25.11', 'DGX-GB300', 'L405', 'FP8-CS'): "v0.2.0's GB300 Llama 3.1 405B FP8_CS preset is 128 GPUs tp2 Megatron FSDP gbs64, "
    "the row 256 GPUs tp2 pp8 cp2 vp4 gbs1536",
 ('25.11', 'DGX-GB300', 'DS3', 'BF16'): "v0.2.0's GB300 DeepSeek-V3 preset is pp4 vp4 ep64 gbs2048, the row pp2 vp4 ep32 gbs4096",
 ('25.11', 'DGX-GB300', 'DS3', 'FP8-MX'): "v0.2.0's GB300 DeepSeek-V3 preset is pp4 vp4 ep64 gbs2048, the row pp2 vp4 ep32 gbs4096",
 ('25.11', 'DGX-GB300', 'GOSS', 'BF16'): "v0.2.0's GB300 GPT-OSS 120B preset is seq 4096 mbs4 gbs512, the row seq 8192 mbs2 gbs1280",
 ('25.11', 'DGX-GB300', 'Q30', 'FP8-MX'): "v0.2.0's GB300 Qwen3-30B-A3B preset is mbs8, the row mbs4",
 ('25.11', 'DGX-GB300', 'Q235', 'BF16'): "v0.2.0's GB300 Qwen3-235B-A22B preset is 64 GPUs tp2 ep64 mbs4 gbs1024, the row 256 "
    "GPUs pp4 vp12 ep16 mbs2 gbs8192",
})
_TPO_405 = ("src/megatron/bridge/recipes/llama/llama3.py llama31_405b_pretrain_config: CommOverlapConfig(tp_comm_overlap=True, "
            "...), kept by scripts/performance/configs/{f} {fn} for every precision but NVFP4")
MB_TPO.update({
 ('26.06', 'DGX-GB300', 'L405', 'FP8'): (1, "v0.5.0 / v0.5.1 " + _TPO_405.format(f='llama/llama31_llm_pretrain.py', fn='llama31_405b_pretrain_config_gb300')),
 ('26.06', 'DGX-GB300', 'L405', 'MXFP8'): (1, "v0.5.0 / v0.5.1 " + _TPO_405.format(f='llama/llama31_llm_pretrain.py', fn='llama31_405b_pretrain_config_gb300')),
 ('26.02.01', 'DGX-GB300', 'L405', 'FP8'): (1, "v0.3.0 / v0.3.1 " + _TPO_405.format(f='llama/llama31_llm_pretrain.py', fn='llama31_405b_pretrain_config_gb300')),
 ('25.11', 'DGX-GB300', 'L405', 'FP8-CS'): (1, "v0.2.0 " + _TPO_405.format(f='llama31/llama31_llm_pretrain.py', fn='llama31_405b_gb300_config')),
})
# FSDP of the 26.06+ rows whose layout no earlier container printed (the default note cites the earlier same layout)
FSDP_NOTE_NEW = ("this container's table has no FSDP column and no earlier container printed this layout: FSDP 0 (distributed "
                 "optimizer, zero 1) inferred, as every earlier GB300/B300 row of this model prints FSDP 0")
for _row in MBA_ROWS_BLACKWELL_ULTRA:
    _new_layout = _row[:3] in (('26.08', 'DGX-GB300', 'DS3'), ('26.08', 'DGX-GB300', 'GOSS'), ('26.06', 'DGX-GB300', 'DS3'),
                               ('26.06', 'DGX-B300', 'GOSS'))
    add_mba(*_row, fsdp_note=FSDP_NOTE_NEW if _new_layout else '', extra=MBA_EXTRA.get(_row[:5], ''))
# ======================================================================================================
# BEGIN SECTION heldout-nemo-legacy: NeMo performance summaries of the releases before Megatron-Bridge
# (NeMo containers 24.07 .. 25.07). Appended after every row above; ids continue the sequence.
#
# Sources, read for this section:
#  * NVIDIA/NeMo docs/source/performance/performance_summary.md (fetched mirror). The file exists only from
#    2024-08-12 (7831735) to 2024-12-12 (a2aa70a, "perf summary docs link": deleted, README points to
#    docs.nvidia.com); every version prints the NeMo 24.07 container's DGX-H100 FP8 pre-training table. Tags
#    holding it: 24.09-alpha.rc0 and v2.0.0 (blob eca42f2, commit 141aa8e 2024-08-21 "175b 512gpus"), v2.1.0 and
#    v2.1.0rc0..rc2 (blob 98dae2d, commit 8e3d65d 2024-09-09 "24.07 perf numbers (#10253)", the newest). Earlier
#    blobs: 5877cf2 (7831735) and c5bdda7 (4c73f77) print the numbers calibration.csv took (726, 782, 1707, 322,
#    1533, 12036); 4905931 (cd17e09 "24.07 vboost numbers") = eca42f2 in the pre-training table. The v2.1.0 blob is
#    also the table of docs.nvidia.com/nemo-framework/user-guide/24.09/performance/performance_summary.html.
#    No tag v2.2.0 .. v2.5.0rc0 holds the file (git ls-tree), so NeMo 24.09 .. 25.07 numbers come from:
#  * docs.nvidia.com/nemo-framework/user-guide/latest/performance/performance_summary.html and
#    .../performance/archive/25.04-performance-summary.html as stored in the `pages` corpus of the search tool
#    (stored copies of several dates; each answer is the page's first ~3000 characters): the 25.02 page's whole
#    DGX-B200 table, the 25.04 page's DGX-GB200 table and the 25.07 page's DGX-GB200 rows up to Llama 4. The H100
#    tables of 24.12/25.02/25.04/25.07 and the B200 tables of 25.04/25.07 lie past that window: not read (the 25.02
#    DGX-H100 table's first row, GPT3-175B 512 GPUs GBS 2048 MBS 2 TP4 PP8 VP6 = 866, is calibration id 101's
#    configuration).
# Engine settings of the NeMo 2.0 rows from the performance scripts of the release (NVIDIA/NeMo tags, read with
# git show): 25.02 = v2.2.0 (scripts/llm/performance/), 25.04 = v2.3.0 (scripts/performance/), the container's
# NeMo release as NVIDIA numbers them (not checked inside the containers). At both tags no recipe, model config or
# performance script sets recompute_granularity for these models (v2.3.0's presets: recompute_layers 0, no
# recompute_modules) -> recompute none; nemo/collections/llm/recipes/optim/adam.py distributed_fused_adam_with_
# cosine_annealing sets use_distributed_optimizer=True -> zero 1 (zero 3 where the page prints FSDP 1: v2.3.0
# use_mcore_fsdp); every FP8 script sets recipe.trainer.plugins.grad_reduce_in_fp32 = False -> grad_reduce_dtype bf16.
# Left out (rows above already hold the configuration with a newer container's number, or schema limits):
#  25.02 B200 LLAMA3-8B 128/2 (26006, delayed scaling) and LLAMA3-405B 128 GPUs TP4 PP8 CP2 VP8 (625): the 25.11
#  Megatron-Bridge B200 rows (30624, 661); 25.04 GB200 LLAMA3-8B (33099) and 25.07 GB200 LLAMA3-8B (31737): the
#  25.11 GB200 row (31508); 25.07 GB200 LLAMA3.1-405B FSDP TP2 (706): the 25.09 GB200 FP8-CS row (729); 25.07
#  parenthesised numbers (the stored excerpt does not say what the parentheses mean); Llama 4 Scout/Maverick
#  (no cited shape here); the fine-tuning (SFT/LoRA) tables; the 24.07 GPT3-175B x2, LLAMA2-70B, Nemotron-340B,
#  LLAMA3-8B, LLAMA3-70B rows (calibration ids 100-105).
# Shapes (new SH entries), each from the NeMo model config at the cited tag:
#  GPT3-5B / 20B: v2.1.0 nemo/collections/llm/gpt/model/base.py GPTConfig5B (24 layers, hidden 4096, ffn 16384,
#   32 heads) / GPTConfig20B (44, 6144, 24576, 48); MHA, GeLU MLP, tied embeddings (GPTConfig default); vocab 51200
#   as the GPT-3 175B rows (GPT-2 BPE, the scripts' nvidia/megatron-gpt2-345m tokenizer, padded; not printed).
#  LLAMA2-7B / 13B: v2.1.0 nemo/collections/llm/gpt/model/llama.py Llama2Config7B (32, 4096, 32 heads, 32 query
#   groups, ffn 11008) / Llama2Config13B (40, 5120, 40, 40, 13824); vocab 32000 (Llama 2 tokenizer), untied, SwiGLU.
#  Nemotron-8B / 22B (Nemotron-3): v2.1.0 nemo/collections/llm/gpt/model/nemotron.py Nemotron3Config8B (32, 4096,
#   ffn 16384, 32 heads, num_query_groups None = MHA) / Nemotron3Config22B (40, 6144, 24576, 48, MHA); squared-ReLU
#   MLP coded gelu (non-gated) and untied as the Nemotron-4 rows; vocab 256000 (v2.2.0 scripts/llm/performance/
#   pretrain_nemotron3_8b.py / _22b.py NullTokenizer vocab_size=256000).
#  Mixtral-8x7B / 8x22B: v2.3.0 nemo/collections/llm/gpt/model/mixtral.py MixtralConfig8x7B (32 layers, 4096, 32
#   heads, 8 query groups, ffn 14336) / MixtralConfig8x22B (56, 6144, 48, 8, 16384); MixtralConfig: 8 experts top-2,
#   every layer MoE, SwiGLU, untied, moe_token_dispatcher_type 'alltoall', moe_router_load_balancing_type
#   'aux_loss'; vocab 32000 (the scripts' hf_tokenizer mistralai/Mixtral-8x7B-v0.1 / -8x22B-v0.1; config.json
#   vocab_size 32000 in both, the 8x22B one as copied in two stored test fixtures found by find_string).
SH['GPT5'] = dict(model='GPT-3 5B', arch='dense', layers=24, hidden=4096, heads=32, kv_heads=32, ffn=16384, vocab=51200,
                  attention='mha', mlp='gelu', tied_embeddings=1)
SH['GPT20'] = dict(model='GPT-3 20B', arch='dense', layers=44, hidden=6144, heads=48, kv_heads=48, ffn=24576, vocab=51200,
                   attention='mha', mlp='gelu', tied_embeddings=1)
SH['L2_7'] = dict(model='Llama 2 7B', arch='dense', layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11008, vocab=32000,
                  attention='mha', mlp='swiglu', tied_embeddings=0)
SH['L2_13'] = dict(model='Llama 2 13B', arch='dense', layers=40, hidden=5120, heads=40, kv_heads=40, ffn=13824, vocab=32000,
                   attention='mha', mlp='swiglu', tied_embeddings=0)
SH['N3_8'] = dict(model='Nemotron-3 8B', arch='dense', layers=32, hidden=4096, heads=32, kv_heads=32, ffn=16384, vocab=256000,
                  attention='mha', mlp='gelu', tied_embeddings=0)
SH['N3_22'] = dict(model='Nemotron-3 22B', arch='dense', layers=40, hidden=6144, heads=48, kv_heads=48, ffn=24576, vocab=256000,
                   attention='mha', mlp='gelu', tied_embeddings=0)
SH['MX7'] = dict(model='Mixtral 8x7B', arch='moe', layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000,
                 moe_experts=8, moe_topk=2, moe_expert_ffn=14336, moe_shared_experts=0, moe_dense_layers=0,
                 attention='gqa', mlp='swiglu', tied_embeddings=0)
SH['MX22'] = dict(model='Mixtral 8x22B', arch='moe', layers=56, hidden=6144, heads=48, kv_heads=8, ffn=16384, vocab=32000,
                  moe_experts=8, moe_topk=2, moe_expert_ffn=16384, moe_shared_experts=0, moe_dense_layers=0,
                  attention='gqa', mlp='swiglu', tied_embeddings=0)
SH['N15'] = N15
SH['N340'] = N340
SH['GPT175'] = GPT3
# --- NeMo 24.07, DGX-H100, FP8: the configurations calibration.csv does not hold ---
NM2407 = ("NVIDIA/NeMo docs/source/performance/performance_summary.md at v2.1.0 (NeMo 24.07 container), "
          "Pretraining table (DGX-H100, FP8)")
for m, n, gbs, mbs, seq, tp, pp, cp, vp, tps, older in [
        ('GPT5', 64, 2048, 4, 2048, 1, 1, 1, 1, 23406, 'v2.0.0 / 24.09-alpha.rc0 (eca42f2): 23574; 7831735 (5877cf2): 22521'),
        ('GPT20', 64, 256, 2, 2048, 2, 1, 1, 1, 5851, 'v2.0.0 / 24.09-alpha.rc0 (eca42f2): 5894; 7831735 (5877cf2): 5851'),
        ('L2_7', 8, 128, 1, 4096, 1, 1, 1, 1, 16934, 'v2.0.0 / 24.09-alpha.rc0 (eca42f2): 16634; 7831735 (5877cf2): 16847'),
        ('L2_13', 16, 128, 1, 4096, 1, 4, 1, 10, 8715, 'v2.0.0 / 24.09-alpha.rc0 (eca42f2): 8715; 7831735 (5877cf2): 8646'),
        ('N3_8', 64, 256, 4, 4096, 2, 1, 1, 1, 12507, 'v2.0.0 / 24.09-alpha.rc0 (eca42f2): 12507; 7831735 (5877cf2): 12701'),
        ('N3_22', 64, 256, 2, 4096, 2, 4, 1, 10, 4312, 'v2.0.0 / 24.09-alpha.rc0 (eca42f2): 4289; 7831735 (5877cf2): 4256')]:
    dp = n // (tp * pp * cp)
    add(source=NM2407, trust='A', **SH[m], seq_len=seq, global_batch_seqs=gbs, micro_batch=mbs, gpu='H100-SXM-80GB',
        num_gpus=n, tp=tp, pp=pp, vpp=vp, dp=dp, cp=cp, ep=1, etp=1, zero='', sequence_parallel=1 if tp > 1 else 0,
        recompute='', precision='fp8', framework='nemo', measured_tokens_per_s_per_gpu=tps, oom=0,
        derivation=(f"'Tokens / sec / GPU' column as printed in the newest version of the page (blob 98dae2d, commit 8e3d65d "
                    f"2024-09-09, at tag v2.1.0; the same table on the docs.nvidia.com 24.09 user guide); other versions of the "
                    f"same row: {older}; GPUs, GBS, MBS, sequence length, TP, PP, CP, VP printed; dp = GPUs/(tp*pp*cp), GA "
                    f"{gbs // (dp * mbs)}; sequence_parallel inferred from TP>1; FP8 recipe, zero, recompute, TP overlap and "
                    f"gradient dtype not printed and the NeMo 1.0 (NeMo-Framework-Launcher) configs of the 24.07 runs not looked "
                    f"up: blank; shape from the NeMo config named in this section's header"))
# --- NeMo 25.02 (DGX-B200) and 25.04 / 25.07 (DGX-GB200), FP8, NeMo 2.0 performance scripts ---
UG = ("NeMo Framework User Guide performance/{p} (docs.nvidia.com, stored copy), NeMo {v} container, "
      "Pre-training table 'System: {s}'")
PRESET = {  # (release, system) -> the preset file whose row matches the layout printed
 ('25.02', 'DGX-B200'): 'v2.2.0 scripts/llm/performance/recommended_model_configs/model_configs_b200.csv',
 ('25.04', 'DGX-GB200'): 'v2.3.0 scripts/performance/recommended_model_configs/model_configs_gb200.csv',
}
TPO = {  # recipes that create MegatronCommOverlapCallback(tp_comm_overlap=True) (both tags)
 'GPT175': 'nemo/collections/llm/recipes/gpt3_175b.py', 'L70': 'nemo/collections/llm/recipes/llama3_70b.py',
 'N340': 'nemo/collections/llm/recipes/nemotron4_340b.py', 'N15': 'nemo/collections/llm/recipes/nemotron4_15b.py'}
SWAP = ("; the page prints GBS 1 and MBS 64 for this row, read as swapped: GBS 64, MBS 1 from the preset "
        "(pre_train,mixtral,8x22b,b200,fp8: 256 GPUs, tp 2 pp 4 cp 8 ep 8 etp 1 vp 14, mbs 1, gbs 64 in v2.2.0 "
        "model_configs_b200.csv and v2.3.0's) and from the printed GA 16 = 64 / (DP 4 x MBS 1) (trust B)")
for ver, sysn, page, m, n, gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep, tps, preset_ok, extra in [
        ('25.02', 'DGX-B200', 'performance_summary.html', 'GPT175', 512, 2048, 2, 2048, 0, 4, 4, 1, 6, 1, 1600, False,
         "; v2.2.0's b200 preset holds GPT-3 175B only at 128 GPUs (GBS 256, VP 12); v2.3.0's has this 512-GPU layout"),
        ('25.02', 'DGX-B200', 'performance_summary.html', 'L70', 64, 128, 1, 8192, 0, 2, 4, 2, 5, 1, 3062, True, ''),
        ('25.02', 'DGX-B200', 'performance_summary.html', 'N15', 64, 256, 2, 4096, 0, 1, 1, 1, 1, 1, 14760, True, ''),
        ('25.02', 'DGX-B200', 'performance_summary.html', 'N340', 128, 32, 1, 4096, 0, 8, 4, 1, 12, 1, 602, True, ''),
        ('25.02', 'DGX-B200', 'performance_summary.html', 'MX7', 64, 256, 2, 4096, 0, 1, 1, 1, 1, 8, 15457, True, ''),
        ('25.02', 'DGX-B200', 'performance_summary.html', 'MX22', 256, 64, 1, 65536, 0, 2, 4, 8, 14, 8, 2232, True, SWAP),
        ('25.04', 'DGX-GB200', 'archive/25.04-performance-summary.html', 'GPT175', 128, 256, 2, 2048, 0, 4, 4, 1, 12, 1, 1804, True, ''),
        ('25.07', 'DGX-GB200', 'performance-summary.html', 'L70', 64, 128, 1, 8192, 1, 1, 1, 1, 1, 1, 4066, False,
         "; 25.04 page (archive/25.04-performance-summary.html): 4035 at the same layout; the 25.04 preset (v2.3.0 "
         "model_configs_gb200.csv: llama3 70b fp8, 64 GPUs, tp/pp/cp/vp 1, mbs 1, gbs 128, use_mcore_fsdp 1, "
         "recompute_layers 0) matches it; the 25.07 scripts not looked up"),
        ('25.04', 'DGX-GB200', 'archive/25.04-performance-summary.html', 'L405', 128, 64, 1, 8192, 0, 4, 8, 2, 8, 1, 665, False,
         "; v2.3.0's gb200 preset for llama31 405b fp8 has another layout (tp 4, pp 1, use_mcore_fsdp 1); the 25.07 page "
         "prints '(638)' for this layout next to its FSDP row, parentheses unexplained in the stored excerpt; the 25.09 "
         "Megatron-Bridge row of this layout above is FP8-MX (578), a different FP8 recipe"),
        ('25.04', 'DGX-GB200', 'archive/25.04-performance-summary.html', 'N15', 64, 256, 2, 4096, 0, 1, 1, 1, 1, 1, 17809, True, ''),
        ('25.04', 'DGX-GB200', 'archive/25.04-performance-summary.html', 'N340', 128, 32, 1, 4096, 0, 8, 4, 1, 12, 1, 737, True, ''),
        ('25.04', 'DGX-GB200', 'performance_summary.html', 'MX7', 64, 256, 2, 4096, 0, 1, 1, 1, 1, 8, 19275, True,
         "; read from the stored copy of performance_summary.html whose first table is this 25.04 GB200 table (its "
         "GPT3-175B 1804, LLAMA3-70B 4035, Nemotron-340B 737 rows equal the 25.04 archive page's)"),
        ('25.04', 'DGX-GB200', 'performance_summary.html', 'MX22', 256, 64, 1, 65536, 0, 2, 4, 8, 14, 8, 2731, False,
         "; the page prints GBS 1 and MBS 64 for this row, read as swapped: GBS 64, MBS 1 from the printed GA 16 = 64 / "
         "(DP 4 x MBS 1) and the B200 preset of the same layout (v2.2.0 / v2.3.0 model_configs_b200.csv: pre_train,mixtral,"
         "8x22b, 256 GPUs, tp 2 pp 4 cp 8 ep 8 etp 1 vp 14, mbs 1, gbs 64); v2.3.0's GB200 preset has no Mixtral 8x22B "
         "(trust B); read from the same stored copy as the Mixtral-8x7B GB200 row")]:
    dp = n // (tp * pp * cp)
    tag = 'v2.2.0' if ver == '25.02' else 'v2.3.0'
    if ver == '25.07':
        tag = 'v2.3.0 (the 25.04 release; this configuration\'s 25.04 run)'
    trust = 'B' if m == 'MX22' else 'A'
    preset = (f"; layout equals the preset row of {PRESET[(ver, sysn)]}" if preset_ok else '')
    scaling = ("per-tensor current scaling (the page: 'scaling factors computed in the current step') -> fp8_recipe cs"
               if ver != '25.02' else
               "FP8 recipe delayed: v2.2.0 scripts/llm/performance/pretrain_*.py set recipe.trainer.plugins = "
               "bf16_with_fp8_mixed() (Transformer Engine delayed scaling; the page names no recipe)")
    tpo = ''
    if tp > 1 and m in TPO:
        tpo = f"; tp_comm_overlap 1: {tag.split(' ')[0]} {TPO[m]} MegatronCommOverlapCallback(tp_comm_overlap=True)"
    moe = ''
    if SH[m]['arch'] == 'moe':
        moe = ("; moe_dispatcher alltoall (MixtralConfig moe_token_dispatcher_type 'alltoall' at v2.2.0 and v2.3.0); "
               "expert-comm overlap not looked up (blank); routing aux-loss balanced (MixtralConfig), no force-balance "
               "footnote in the stored excerpt")
    add(source=UG.format(p=page, v=ver, s=sysn), trust=trust, **SH[m], seq_len=seq, global_batch_seqs=gbs, micro_batch=mbs,
        gpu=GPU_OF[sysn], num_gpus=n, tp=tp, pp=pp, vpp=vp, dp=dp, cp=cp, ep=ep, etp=1, zero=3 if fsdp else 1,
        sequence_parallel=1 if tp > 1 else 0, recompute='none', precision='fp8',
        fp8_recipe='delayed' if ver == '25.02' else 'cs', grad_reduce_dtype='bf16',
        tp_comm_overlap=1 if tpo else '', moe_dispatcher='alltoall' if moe else '',
        framework='nemo', measured_tokens_per_s_per_gpu=tps, oom=0,
        derivation=(f"'Tokens / sec / GPU' as printed; GPUs, GBS, MBS, sequence length, {'FSDP, ' if ver != '25.02' else ''}TP, PP, CP, "
                    f"VP, EP, GA printed (dp = GPUs/(tp*pp*cp) = {dp}, GA {gbs // (dp * mbs)}); sequence_parallel from TP>1 "
                    f"(set_primary_perf_configs: sequence_parallel = tp_size > 1); zero {3 if fsdp else 1} "
                    f"({'FSDP 1 -> use_mcore_fsdp, Megatron FSDP' if fsdp else 'distributed optimizer: recipes/optim/adam.py use_distributed_optimizer=True'}"
                    f" at {tag.split(' ')[0]}); recompute none (no recompute setting in the {tag.split(' ')[0]} recipes, model configs or "
                    f"performance scripts); grad_reduce_dtype bf16 ({tag.split(' ')[0]} performance scripts set "
                    f"grad_reduce_in_fp32 = False for FP8); {scaling}{tpo}{moe}{preset}{extra}; ETP 1; shape from the NeMo "
                    f"config named in this section's header"))
# END SECTION heldout-nemo-legacy
# ======================================================================================================
# ===================== heldout-v100 section (V100, framework megatron, paxml) =====================
# Appended by the heldout-v100 branch: rows for the held-out set's gaps (no V100, no framework
# 'megatron', no 'paxml' rows before this section). Every row: throughput from a printed time or
# rate (no FLOP-convention conversion), sources named in source/derivation.
#
# (1) V100: Megatron-LM paper (Shoeybi et al. 2019, arXiv 1909.08053), sec. 5.2 Table 2 ("Model
# configurations used for GPT-2": layers, hidden, heads, total GPUs, time per epoch in days) with
# sec. 5.2 text: one epoch = 68,507 iterations; sec. 4.2: GPT-2 trained on sequences of 1024 at a
# batch of 512, mixed precision (fp16, dynamic loss scaling), activation checkpointing after every
# transformer layer; sec. 5: DGX-2H servers, 16 V100 SXM3 32GB each, NVSwitch, 8 InfiniBand adapters
# per server = 100 GB/s between servers (-> 800 Gb/s / 16 GPUs = 50 Gb/s per GPU); sec. 5.1: vocab
# 50,257 padded to 51,200. Left out: the weak-scaling numbers (39 TFLOP/s on 1 GPU, 77% / 74%
# efficiency, 15.1 PFLOP/s on 512 GPUs): the paper states no FLOP-counting convention, so no
# tokens/s can be derived from them without assuming one.
MEG19 = ("Megatron-LM paper (Shoeybi et al. 2019, arXiv 1909.08053), sec. 5.2 Table 2 (time per epoch) "
         "with sec. 4.2 / 5 / 5.1 / App. B.1")
for name, l, h, a, n, mp, days, mp_src in [
        ('GPT-2 355M (Megatron)', 24, 1024, 16, 64, 1, 0.86,
         "MP 1 inferred: the paper says the 355M model 'still' used 64 GPUs and it fits one GPU (its 1.2B Table 1 "
         "model runs on 1 GPU); DP 64 = the 64-way data parallelism of every model+data run (sec. 5.1)"),
        ('GPT-2 2.5B (Megatron)', 54, 1920, 20, 128, 2, 2.27,
         "MP 2 from sec. 5.2 ('the 2.5B model is the same' as Table 1, whose 2.5B row uses 2 model-parallel GPUs and "
         "128 model+data GPUs), DP 64"),
        ('GPT-2 8.3B (Megatron)', 72, 3072, 24, 512, 8, 2.10,
         "MP 8 x DP 64 printed (App. B.1: 'for the 8.3 billion parameter model we use 8 GPUs per model parallel group "
         "and 64-way data parallelism'); 24 heads (head dim 128) per Table 2, not Table 1's 32")]:
    step = days * 86400 / 68507
    add(source=MEG19, trust='B', model=name, arch='dense', layers=l, hidden=h, heads=a, kv_heads=a, ffn=4 * h, vocab=51200,
        attention='mha', mlp='gelu', tied_embeddings=1, seq_len=1024, global_batch_seqs=512, micro_batch=512 // (n // mp),
        gpu='V100-SXM-32GB', gpus_per_node=16, nic_gbps_per_gpu=50, num_gpus=n, tp=mp, pp=1, vpp=1, dp=n // mp, cp=1,
        ep=1, etp=1, zero=0, sequence_parallel=0, recompute='full', precision='fp16', framework='megatron',
        tp_comm_overlap=0 if mp > 1 else '', grad_reduce_dtype='bf16', overlap_grad_reduce=0,
        measured_tokens_per_s_per_gpu=round(68507 * 512 * 1024 / (days * 86400 * n), 1),
        measured_step_time_s=round(step, 3), oom=0,
        derivation=(f"Table 2 prints {days} days per epoch; sec. 5.2: an epoch is 68,507 iterations of 512 x 1024 tokens -> "
                    f"68507 x 524288 / ({days} x 86400 s x {n} GPUs) tokens/s/GPU ({step:.3f} s per iteration); the epoch time "
                    "may include evaluation / checkpoint time (not stated): trust B; " + mp_src + "; micro batch "
                    f"{512 // (n // mp)} = 512 / DP (2019 Megatron-LM has no gradient accumulation: --batch-size is per "
                    "data-parallel rank); recompute full (sec. 4.2: activation checkpointing after every transformer layer); "
                    "fp16 mixed precision with dynamic loss scaling (sec. 4.2), zero 0 (plain data parallelism, App. B.1); "
                    "tp_comm_overlap 0: the model-parallel all-reduces are the synchronous f/g autograd operators of sec. 3 "
                    "(Code 1); grad_reduce_dtype bf16 = the schema's 16-bit gradient value: the fp16 model's gradients are "
                    "all-reduced in fp16 (megatron/model/distributed.py allreduce_params, fp32_allreduce=False unless "
                    "--fp32-allreduce, NVIDIA/Megatron-LM 78cb178, 2020-04-16), after the backward pass (its per-parameter "
                    "hook is commented out: no overlap with backward: overlap_grad_reduce 0, validate pins it); DGX-2H: 16 GPUs per node, "
                    "NVSwitch, 8 IB adapters = 100 GB/s per server -> 50 Gb/s per GPU (sec. 5); the DGX-2H V100 runs at "
                    "higher clocks (the paper's 39 TFLOP/s = 30% of peak -> 130 TFLOP/s fp16 peak vs 125 for a standard "
                    "V100 SXM2; the catalog has only V100-SXM-32GB); vocab 51,200 (sec. 5.1 padding), tied embeddings (sec. 3); "
                    "attention_kernel unfused-eager: the paper's code (NVIDIA/Megatron-LM mpu/transformer.py at abe36e2e5f, "
                    "2019-07-29, the GPT-2 + model-parallel release) computes the attention as torch.matmul, a division by "
                    "sqrt(d), torch.mul by the causal mask minus 10000 x (1 - mask), torch.nn.Softmax and dropout, each its own "
                    "op (no fused softmax kernel before 2020)"),
        attention_kernel='unfused-eager')
# V100 (2): BigScience tr1-13B (Megatron-DeepSpeed on Jean Zay V100 32GB, 4 GPUs per node), bigscience-workshop/
# bigscience train/tr1-13B-base/README.md at 053adaf (2022-03-11): the final checkpoint's log line (iteration 168000,
# 'elapsed time per iteration (ms): 13248.2', global batch size 1024) and 'only the last 3 weeks 128 nodes'; layout
# from train/tr1-13B-base/tr1-13B-round1.slurm at 699b2af (NNODES=128, --gres=gpu:4, constraint v100-32g, TP_SIZE=2,
# PP_SIZE=4, MICRO_BATCH_SIZE=1, GLOBAL_BATCH_SIZE=1024, NLAYERS=40, NHIDDEN=5120, NHEADS=32, FFN_HIDDEN_SIZE=20480,
# SEQ_LEN=2048, --fp16, --checkpoint-activations, ZERO_STAGE=1, GPT-2 vocab 50257). Left out: the tr8-104B tune-up
# tables (experiments/tr8-104B.md): the baseline rows say 'same conf as normal 104B' but the page's header shape
# (32 x 16384) and the production tr8-104B.slurm shape (64 x 11600) differ, so the shape of the timed run is not
# determined; its BNB rows use 8-bit Adam (not in the schema).
add(source="BigScience tr1-13B (bigscience-workshop/bigscience train/tr1-13B-base/README.md at 053adaf, final log line; "
           "tr1-13B-round1.slurm at 699b2af)", trust='B', model='BigScience tr1-13B', arch='dense', layers=40, hidden=5120,
    heads=32, kv_heads=32, ffn=20480, vocab=50432, attention='mha', mlp='gelu', tied_embeddings=1, seq_len=2048,
    global_batch_seqs=1024, micro_batch=1, gpu='V100-SXM-32GB', gpus_per_node=4, num_gpus=512, tp=2, pp=4, vpp=1, dp=64,
    cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='full', precision='fp16', framework='deepspeed',
    measured_tokens_per_s_per_gpu=round(1024 * 2048 / (13.2482 * 512), 1), measured_step_time_s=13.248, oom=0,
    derivation=("the README's final log line prints 'elapsed time per iteration (ms): 13248.2' at global batch 1024 "
                "(iteration 168000, after the batch ramp-up): 1024 x 2048 / (13.2482 s x 512 GPUs); 512 GPUs = 128 nodes x "
                "4 (README: 16 nodes during ramp-up, then 64, 'only the last 3 weeks 128 nodes', the run ending at "
                "iteration 168000; the slurm file's NNODES=128): inferred for this line, trust B; one logged interval, "
                "not an average over the run (the chronicles note Jean Zay's run-to-run variability); TP 2 x PP 4 x DP 64, MBS 1 (GA 16), ZeRO stage 1, --fp16, "
                "--checkpoint-activations (recompute full) from tr1-13B-round1.slurm; Megatron-DeepSpeed (DeepSpeed "
                "pipeline engine); vocab 50257 padded to 50432 (Megatron pads to a multiple of 128 x TP), tied embeddings"))
# the same run at 64 nodes (256 GPUs, DP 32): train/tr1-13B-base/chronicles.md at e47dc1f (2021-10-24), section 'Round3
# SAVE_INTERVAL=1500 NNODES=64' ('Finally GBS is at 1024, so we can do 64 nodes. Clocking about 23-26 secs / iteration')
# and the five consecutive log lines it prints (iterations 29020-29060, section 'A huge lm loss spike').
_t = [22306.6, 22336.4, 22332.6, 22148.5, 22181.7]
_s = sum(_t) / len(_t) / 1000
add(source="BigScience tr1-13B (bigscience-workshop/bigscience train/tr1-13B-base/chronicles.md at e47dc1f, 64-node "
           "round and its log lines; tr1-13B-round1.slurm at 699b2af)", trust='B', model='BigScience tr1-13B', arch='dense',
    layers=40, hidden=5120, heads=32, kv_heads=32, ffn=20480, vocab=50432, attention='mha', mlp='gelu', tied_embeddings=1,
    seq_len=2048, global_batch_seqs=1024, micro_batch=1, gpu='V100-SXM-32GB', gpus_per_node=4, num_gpus=256, tp=2, pp=4,
    vpp=1, dp=32, cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='full', precision='fp16', framework='deepspeed',
    measured_tokens_per_s_per_gpu=round(1024 * 2048 / (_s * 256), 1), measured_step_time_s=round(_s, 3), oom=0,
    derivation=(f"mean of the five printed 'elapsed time per iteration (ms)' values {_t} at global batch 1024 (iterations "
                f"29020-29060) = {_s:.3f} s: 1024 x 2048 / ({_s:.3f} s x 256 GPUs); 256 GPUs = 64 nodes x 4 (the section "
                "title NNODES=64); the prose says 'about 23-26 secs / iteration - the performance jumps around quite a lot "
                "from run to run' (Jean Zay's shared network; experiments/gpt2.md at e3ca7f3 warns of +/-40% run-to-run "
                "variation on the cluster): trust B; the printed lines fall in a loss-spike episode (no skipped "
                "iterations); layout and engine settings as the 128-node row (tr1-13B-round1.slurm: TP 2, PP 4, MBS 1, "
                "ZeRO 1, fp16, activation checkpointing) with DP 32 (GA 32)"))
# (3) framework megatron on H100: Nemotron-4 15B technical report (Parmar et al. 2024, arXiv 2402.16819), sec. 2
# 'Pre-training' and Table 2 (data-parallel size, GPUs, iteration time, MFU, batch size); Table 1 (32 layers,
# hidden 6144, 48 heads, 8 KV heads, seq 4096, vocab 256,000); sec. 2: RoPE, squared ReLU, no bias, untied
# embeddings, GQA; 8-way tensor parallelism (Shoeybi et al. 2019) x data parallelism with a distributed optimizer;
# H100 80GB SXM5 DGX nodes, 8 x 400 Gb/s IB per node. ffn 24576 as the dgxc Nemotron-4 15B rows above (NeMo
# Nemotron4Config15B; the paper does not print it).
NEMO4 = "Nemotron-4 15B technical report (Parmar et al. 2024, arXiv 2402.16819), sec. 2 Pre-training and Table 2"
for dp, n, it, mfu, gbs in [(96, 768, 0.57, 34.3, 384), (192, 1536, 0.58, 33.3, 768), (288, 2304, 0.64, 30.5, 1152)]:
    add(source=NEMO4, trust='B', **N15, seq_len=4096, global_batch_seqs=gbs, micro_batch='', gpu='H100-SXM-80GB', num_gpus=n,
        tp=8, pp=1, vpp=1, dp=dp, cp=1, ep=1, etp=1, zero=1, sequence_parallel='', recompute='', precision='bf16',
        framework='megatron', measured_tokens_per_s_per_gpu=round(gbs * 4096 / (it * n), 1), measured_step_time_s=it, oom=0,
        derivation=(f"Table 2 prints iteration time {it} s at batch {gbs} on {n} GPUs (DP {dp}); tokens/s/GPU = {gbs} x 4096 / "
                    f"({it} x {n}); the printed MFU {mfu}% is beside it (convention of Chowdhery 2022 / Korthikanti 2022, "
                    "not used here); TP 8 x DP printed, PP 1 (no pipeline parallelism named); zero 1: 'a distributed "
                    "optimizer to shard the optimizer state over the data-parallel replicas'; bf16 inferred (sec. 2 quotes "
                    "the bf16 peak; no FP8 mentioned); framework megatron inferred, trust B (NVIDIA ADLR run using Megatron "
                    "tensor parallelism and Megatron's distributed optimizer; the report does not name the code base); "
                    "micro batch, sequence parallelism, recompute and TP-comm overlap not printed (blank: planner's / "
                    "framework's choice); squared-ReLU 2-matrix MLP coded gelu, ffn 24576 from NeMo's Nemotron4Config15B"))
# (3b) framework megatron on A100: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
# (arXiv 2205.05198, MLSys 2023), sec. 6 with Table 3 (heads, hidden, layers, TP, PP, GPUs, global batch, micro batch),
# Table 5 (end-to-end iteration time: 'Full Recompute' and 'Present Work' = sequence parallelism + selective activation
# recomputation, Figure 8 caption and sec. 6.3) and the sec. 6.3 text on the 530B model at 8-way data parallelism
# (2240 GPUs, 39.15 s, batch x 8). Sec. 6: TP 8 everywhere, interleaved schedule with m = 3 for 175B and 530B,
# s = 2048, v = 51200, mixed precision, Selene (DGX A100 80GB, NVLink/NVSwitch, 8 x 200 Gb/s HDR IB per node),
# no data parallelism in Tables 3/5. Table 5's MFU/HFU (22B 41.5/43.7 ... 1T 56.3/57.0%) are beside the times, not used.
# Also printed in the Megatron-LM README from 2e90a342f5 (2022-05-19) on (the MFU/HFU table; NVIDIA/Megatron-LM).
KORT_ATTN = ("attention_kernel unfused: the paper's activation memory per layer, sbh(34 + 5as/h) (sec. 4.1, Eq. 1), "
             "holds the s x s attention scores, their softmax and its dropout mask, i.e. the scores are materialised "
             "(Megatron-LM's fused scale-mask-softmax between two batched GEMMs; the paper predates FlashAttention), and "
             "selective recomputation (sec. 5) recomputes exactly that part")
KORT = "Korthikanti et al. 2022 (arXiv 2205.05198), sec. 6: Table 3 (configurations) and Table 5 (end-to-end iteration time{x})"
for size, a, h, l, pp, n, gbs, mb, vp, t_full, t_sel in [
        ('22B', 64, 6144, 48, 1, 8, 4, 4, 1, 1.42, 1.10), ('175B', 96, 12288, 96, 8, 64, 64, 1, 3, 18.13, 13.75),
        ('530B', 128, 20480, 105, 35, 280, 280, 1, 3, 49.05, 37.83), ('1T', 160, 25600, 128, 64, 512, 512, 1, 1, 94.42, 71.49)]:
    for method, t in (('full', t_full), ('selective', t_sel)):
        add(source=KORT.format(x=''), trust='A' if vp == 3 or pp == 1 else 'B', model=f'GPT {size} (Megatron, Korthikanti 2022)',
            arch='dense', layers=l, hidden=h, heads=a, kv_heads=a, ffn=4 * h, vocab=51200, attention='mha', mlp='gelu',
            tied_embeddings=1, seq_len=2048, global_batch_seqs=gbs, micro_batch=mb, gpu='A100-SXM-80GB', num_gpus=n, tp=8,
            pp=pp, vpp=vp, dp=1, cp=1, ep=1, etp=1, zero=0, sequence_parallel=1 if method == 'selective' else 0,
            recompute=method, precision='bf16', framework='megatron', tp_comm_overlap=0,
            measured_tokens_per_s_per_gpu=round(gbs * 2048 / (t * n), 1), measured_step_time_s=t, oom=0,
            derivation=(f"Table 5 prints {t} s per iteration ({'Present Work: sequence parallelism + selective activation recomputation' if method == 'selective' else 'Full Recompute, without sequence parallelism'}); "
                        f"{gbs} x 2048 / ({t} s x {n} GPUs); Table 3: {a} heads, hidden {h}, {l} layers, TP 8, PP {pp}, {n} GPUs, "
                        f"global batch {gbs}, micro batch {mb}, no data parallelism (zero 0); "
                        + (f"interleaved schedule m = 3 (sec. 6) -> vpp 3" if vp == 3 else ("no pipeline" if pp == 1 else
                           "vpp 1 inferred: sec. 6 names interleaving (m = 3) only for the 175B and 530B models (trust B)"))
                        + "; selective = the attention core (QK^T, softmax, dropout, attention over V) recomputed, the paper's "
                        "definition (sec. 5), which is the engine's selective default; s 2048, v 51200, ffn 4h, tied embeddings "
                        "(Megatron GPT); 'mixed precision' (fp16 vs bf16 not stated; same A100 peak): bf16 coded; TP communication: "
                        "the paper overlaps the backward all-reduce with the weight-gradient GEMM (sec. 6.2), no forward overlap; "
                        "tp_comm_overlap 0: Megatron-LM's GEMM-communication overlap (--tp-comm-overlap, Transformer Engine "
                        "userbuffers) first appears in megatron/arguments.py at NVIDIA/Megatron-LM 116ffddc58 (2023-10-23), after "
                        "the paper; the backward overlap the paper describes is Megatron-LM's asynchronous input-gradient all-reduce "
                        "(reduce-scatter with sequence parallelism) beside the weight-gradient GEMM (megatron/mpu/layers.py "
                        "LinearWithGradAccumulationAndAsyncCommunication at d898a8991d, 2022-05-25), which the engine model "
                        "credits without the flag (cost/layer.py megatron_async_dgrad); " + KORT_ATTN),
            attention_kernel='unfused')
# the 530B model at 8-way data parallelism (sec. 6.3 text)
add(source=KORT.format(x='; sec. 6.3 text: the 530B model at 8-way data parallelism'), trust='A',
    model='GPT 530B (Megatron, Korthikanti 2022)', arch='dense', layers=105, hidden=20480, heads=128, kv_heads=128, ffn=81920,
    vocab=51200, attention='mha', mlp='gelu', tied_embeddings=1, seq_len=2048, global_batch_seqs=2240, micro_batch=1,
    gpu='A100-SXM-80GB', num_gpus=2240, tp=8, pp=35, vpp=3, dp=8, cp=1, ep=1, etp=1, zero=0, sequence_parallel=1,
    recompute='selective', precision='bf16', framework='megatron', overlap_grad_reduce=0, tp_comm_overlap=0,
    measured_tokens_per_s_per_gpu=round(2240 * 2048 / (39.15 * 2240), 1), measured_step_time_s=39.15, oom=0,
    derivation=("sec. 6.3: scaling the 530B Table 3 configuration to 8-way data parallelism (2240 GPUs) 'while keeping batch "
                "size per model instance constant - i.e., the batch size is also multiplied by the data parallel size' "
                "(280 x 8 = 2240) takes 39.15 s per iteration (MFU 54.2% printed beside it): 2240 x 2048 / (39.15 s x 2240); "
                "sequence parallelism + selective recompute (the 'Present Work' configuration), TP 8 PP 35 m = 3; 'we do not "
                "use any overlapping of gradient all-reduces with back-propagation' (plain data parallelism, zero 0; "
                "overlap_grad_reduce 0, validate pins it); precision and TP overlap as the Table 5 rows; " + KORT_ATTN),
    attention_kernel='unfused')
# Nemotron-4 340B technical report (NVIDIA 2024, arXiv 2406.11704) Table 2: only the last batch-ramp stage is in a stored
# source (6144 H100, batch 2304, iteration time 8.0 s, MFU 41-42%, quoted from the report's Table 2 by
# aiportalx.com/nvidia/nemotron-4-340b; TP 8 x PP 12 from a stored summary of the report, 96 layers, hidden 18432,
# 96 heads / 8 KV heads, seq 4096, vocab 256,000, untied, squared ReLU). The 1536 / 3072-GPU stages are left out
# (their numbers are not in any stored source).
add(source="Nemotron-4 340B technical report (NVIDIA 2024, arXiv 2406.11704), Table 2 (last batch-ramp stage), as quoted by "
           "aiportalx.com/nvidia/nemotron-4-340b; TP 8 / PP 12 per sec. 2.x of the report (stored summary)",
    trust='C', **N340, seq_len=4096, global_batch_seqs=2304, micro_batch='', gpu='H100-SXM-80GB', num_gpus=6144, tp=8, pp=12,
    vpp='', dp=64, cp=1, ep=1, etp=1, zero='', sequence_parallel='', recompute='', precision='bf16', framework='megatron',
    measured_tokens_per_s_per_gpu=round(2304 * 4096 / (8.0 * 6144), 1), measured_step_time_s=8.0, oom=0,
    derivation=("iteration time 8.0 s at batch 2304 on 6144 GPUs (the report's Table 2 as quoted); tokens/s/GPU = 2304 x 4096 / "
                "(8.0 x 6144); MFU 41-42% quoted beside it; DP = 6144 / (8 x 12) = 64; pipeline interleaving (vpp), zero, "
                "micro batch, sequence parallelism and recompute not in the stored sources (blank); bf16 inferred (the "
                "report's bf16 peak; no FP8 training stated); framework megatron inferred as for the 15B report; trust C: the numbers come second-hand (a third-party quote of the report's table and a stored summary), with vpp / zero unknown"))
# (4) paxml on NVIDIA GPUs: NVIDIA/JAX-Toolbox rosetta/rosetta/projects/pax/README.md at 28603900 (2025-05-27, the last
# version; the tables are unchanged since b024ad5d, 2024-05-01), 'A100 Results' / 'H100 Results': GPUs, DP, FSDP, TP,
# BS/GPU, Sequences/Sec (whole job: Est. Walltime = MAX_STEPS x GBS / (Sequences/Sec) reproduces the printed days, e.g.
# 175B H100 BF16 75000 x 1536 / 51.00 s = 26.15 days). Shapes and engine settings from the configs the README names,
# google/paxml paxml/contrib/gpu/scripts_gpu/configs.py (stored version 04516ac: GPT126M 12 layers, 768, 12 heads,
# ffn 3072, vocab 50304, seq 2048, USE_REPEATED_LAYER False; GPT5B 24 layers, 4096, 32 heads x 128, ffn 16384,
# repeated layers with CHECKPOINT_POLICY SAVE_DOT_WITH_NO_BATCH_DIM; GPT175B 96 layers, 12288, 96 heads, ffn 49152,
# vocab 50257, repeated layers) and paxml/tasks/lm/model_params.py (stored 0a866a7: TransformerLmSpmdAdafactor
# CHECKPOINT_POLICY SAVE_NOTHING, applied only to repeated layers; SEPARATE_EMBEDDING False = tied embeddings).
PAX = "NVIDIA/JAX-Toolbox rosetta/rosetta/projects/pax/README.md at 28603900 (2025-05-27), table '{t}'"
PAXM = {'126M': (12, 768, 12, 3072, 50304), '5B': (24, 4096, 32, 16384, 50304), '175B': (96, 12288, 96, 49152, 50257)}
PAX_RC = {'126M': ('none', "recompute none: GPT126M sets USE_REPEATED_LAYER False, and Pax applies CHECKPOINT_POLICY only "
                           "to repeated layers (model_params.py), so nothing is rematerialised"),
          '5B': ('full', "recompute coded full: GPT5B's CHECKPOINT_POLICY SAVE_DOT_WITH_NO_BATCH_DIM saves only dot products "
                         "without a batch dimension (none of a transformer layer's activations), so the layer's forward is "
                         "recomputed (trust B)"),
          '175B': ('full', "recompute full: GPT175B uses repeated layers with the inherited CHECKPOINT_POLICY SAVE_NOTHING "
                           "(TransformerLmSpmdAdafactor)")}
for gpu, table, size, prec, n, dp, fsdp, bs, seqs, other in [
        ('A100-SXM-80GB', 'A100 Results', '126M', 'TE BF16', 64, 64, 1, 4, 2526.72, 'BF16 without TE: 2098.16'),
        ('A100-SXM-80GB', 'A100 Results', '5B', 'TE BF16', 256, 1, 256, 8, 718.19, 'BF16 without TE: 594.13'),
        ('A100-SXM-80GB', 'A100 Results', '175B', 'TE BF16', 256, 1, 256, 6, 20.44, ''),
        ('H100-SXM-80GB', 'H100 Results', '126M', 'TE BF16', 64, 64, 1, 4, 4709.12, ''),
        ('H100-SXM-80GB', 'H100 Results', '5B', 'TE BF16', 256, 1, 256, 8, 1657.24, ''),
        ('H100-SXM-80GB', 'H100 Results', '175B', 'TE BF16', 256, 1, 256, 6, 51.00, ''),
        ('H100-SXM-80GB', 'H100 Results', '5B', 'TE FP8', 256, 1, 256, 8, 2374.66, ''),
        ('H100-SXM-80GB', 'H100 Results', '175B', 'TE FP8', 256, 1, 256, 6, 84.45, '')]:
    l, h, a, f, v = PAXM[size]
    rc, rc_text = PAX_RC[size]
    fa = ("126M numbers gathered without flash attention (README note): attention_kernel unfused" if size == '126M'
          else "flash attention on (README note; cuDNN fused attention through TE)")
    add(source=PAX.format(t=table), trust='A' if size != '5B' else 'B', model=f'GPT {size} (Pax)', arch='dense', layers=l,
        hidden=h, heads=a, kv_heads=a, ffn=f, vocab=v, attention='mha', mlp='gelu', tied_embeddings=1, seq_len=2048,
        global_batch_seqs=bs * n, micro_batch=bs, gpu=gpu, num_gpus=n, tp=1, pp=1, vpp=1, dp=n, cp=1, ep=1, etp=1,
        zero=3 if fsdp > 1 else 0, sequence_parallel=0, recompute=rc, precision='fp8' if 'FP8' in prec else 'bf16',
        framework='paxml', attention_kernel='unfused' if size == '126M' else '',
        measured_tokens_per_s_per_gpu=round(seqs * 2048 / n, 1),
        measured_step_time_s=round(bs * n / seqs, 3), oom=0,
        derivation=(f"Sequences/Sec {seqs} ({prec}) as printed, for the whole job: x 2048 tokens / {n} GPUs; layout DP {dp} x "
                    f"FSDP {fsdp} x TP 1 and BS/GPU {bs} as printed (README: GLOBAL_BATCH_SIZE = PERCORE_BATCH_SIZE x NUM_GPUS "
                    f"-> {bs * n} seqs, micro batch {bs}, no pipeline); FSDP {fsdp} {'= ZeRO-3 over all GPUs (zero 3)' if fsdp > 1 else '1: plain data parallelism (zero 0)'}"
                    f"; {rc_text}; {fa}; shape from configs.py GPT{size}; seq 2048 (MAX_SEQ_LEN; README: 5B/175B at seq 2048)"
                    + (f"; same table, {other} sequences/s" if other else '')
                    + ("; FP8 = Transformer Engine FP8 (ENABLE_FP8), recipe not printed" if 'FP8' in prec else '')
                    + ("; 5B remat policy coded full (trust B)" if size == '5B' else '')))
# Not found / left out (see the branch report): H200 (no stored source prints a pre-training throughput with a layout:
# Megatron-Bridge performance summaries list only DGX-H100/B200/GB200/GB300; dgxc-benchmarking's AWS P5en guide prints
# no numbers).
# =================== end heldout-v100 section ===================
# ======================================================================================================
# BEGIN SECTION heldout-amd: AMD Instinct MI325X / MI355X pre-training rows (the first AMD rows of the set).
# Appended after every row above; ids continue the sequence.
#
# Sources, read for this section:
#  * mlcommons/training_results_v5.1 (fetched mirror, commit 441d65f; the AMD files at 4da2d1c): AMD's closed-division
#    Llama 3.1 8B pre-training submission on one 8 x MI355X node, AMD/benchmarks/llama31_8b/implementations/
#    MI355X_EPYC_9575F_pytorch_llama3_8b (config_MI355X_1x8x1_8b.sh, src/train.py, src/callbacks.py, run_and_time.sh)
#    and its ten logs AMD/results/MI355X_EPYC_9575F_pytorch/llama31_8b/result_{0..9}.txt. Each log prints, before every
#    evaluation, ':::MLLOG ... "key": "tracked_stats", "value": {"throughput": X}' = samples (sequences) per second of the
#    whole node over the training steps of that block (callbacks.py: a timer started at on_train_batch_start and stopped
#    at on_train_batch_end, samples += GBS per step; evaluation excluded).
#  * AMD-AGI/Primus (fetched mirror, commit fd1eeab, 2026-08-22) docs_deprecated/tech_blogs/projection/projection.md
#    (last changed in c8e5c09, 2026-07-14), section 'Validation: Projected vs. Measured Results': the 'Measured 8-Node
#    (tok/s/GPU)' column, which the page says was taken from the AMD ROCm Performance Results page
#    (https://www.amd.com/en/developer/resources/rocm-hub/dev-ai/performance-results.html#ai-training). That page's
#    training tables lie past what the stored copies of it let us read, so the numbers are AMD's own transcription
#    (trust B at best), and the page's global batch is not transcribed.
# Found and left out:
#  * MLPerf Training v5.1 MI350X (AMD 24.9 samples/s, same code and layout): the catalog has no MI350X (a 1,000 W
#    air-cooled part with lower clocks than the MI355X); the Dell XE9785L and Supermicro 8xMI355X llama31_8b results
#    (same AMD code, GBS 32, GA 2): named in the MI355X row's derivation, not repeated as rows of the same configuration.
#  * MLPerf Training v5.0 / v5.1 Llama 2 70B LoRA on MI300X / MI325X / MI355X (AMD, MangoBoost, ASUSTeK, Supermicro,
#    MiTAC, Krai): LoRA fine-tuning, not pre-training (frozen base weights: no weight gradients or optimizer states).
#  * MLPerf Training v6.0 AMD rows: no snapshot of mlcommons/training_results_v6.0 here; the fork
#    Richardyu114/training_results_v6.0 holds work-in-progress copies (MI325X Llama 3.1 8B / 70B Primus configs of many
#    versions), not the published results: not used. Its MI355X Llama 3.1 8B runs are MXFP4 (not a schema precision).
#  * Primus projection.md's 1-node column (an input of the projection, the same page's numbers at 8 GPUs, not printed
#    with their own layout) and its 'Projected' column (a model's output, not a measurement).
#  * Primus docs_deprecated/tech_blogs/primus_pipeline/primus_pipeline.md: Llama 2 7B on one MI300X node at PP 8
#    (10057 tokens/s/device with 1F1B ...) and Qwen3-235B on 4 MI355X nodes at PP 4 EP 8 (2742.4 ... 3024.5): sequence
#    length, global and micro batch not printed.
#  * Primus examples/deepseek-v4/projection (DeepSeek-V4 Flash, ~4917 tokens/s/GPU): no shape for DeepSeek-V4 here;
#    docs/04-technical-guides/hybrid-models (GDN / KDA hybrid-attention models): not in the schema.
#  * rocm.blogs.amd.com 'Optimizing LLM Workloads: AMD Instinct MI355X GPUs Drive Competitive Performance' (ROCm/
#    rocm-blogs blogs/artificial-intelligence/ROCm7-MI355X-training-performance, 7552dae): only ratios to B200 in the
#    text, absolute numbers in images.
#  * ROCm/cvs training config '*_threshold.json' files: pass/fail thresholds, not published measurements.
MLP51 = ("mlcommons/training_results_v5.1 AMD/results/MI355X_EPYC_9575F_pytorch/llama31_8b/result_0..9.txt "
         "(tracked_stats throughput) with AMD/benchmarks/llama31_8b/implementations/MI355X_EPYC_9575F_pytorch_llama3_8b "
         "(config_MI355X_1x8x1_8b.sh, src/train.py) at 4da2d1c")
_sps = 30.682575  # median of the 146 tracked_stats values of the ten runs (30.150 ... 30.757 samples/s)
add(source=MLP51, trust='A', **L8_31, seq_len=8192, global_batch_seqs=32, micro_batch=2, gpu='MI355X', num_gpus=8,
    tp=1, pp=1, vpp=1, dp=8, cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='none', precision='fp8',
    fp8_recipe='delayed', grad_reduce_dtype='bf16', framework='nemo',
    measured_tokens_per_s_per_gpu=round(_sps * 8192 / 8, 1), measured_step_time_s=round(32 / _sps, 4), oom=0,
    derivation=(f"tokens/s/GPU = {_sps} samples/s x 8192 tokens / 8 GPUs: the median of the 146 'tracked_stats' throughput "
                "values (samples/s of the node over the training steps of each 12,288-sample block, evaluation excluded: "
                "src/callbacks.py) in the ten MI355X logs (per-run medians 30.649 ... 30.728; first blocks 30.15 ... 30.29 "
                "include warm-up); step time = GBS 32 / that rate. Layout from config_MI355X_1x8x1_8b.sh (GBS 32, MBS 2, "
                "TP 1, PP 1, CP 1 on 1 node x 8 GPUs; the logs print global_batch_size 32, gradient_accumulation_steps 2, "
                "max_sequence_length 8192) -> DP 8, GA 2. Engine from src/train.py (NeMo 2.0 v2.5.0rc0 with AMD's patch, "
                "Megatron-Core strategy; PyTorch 2.8 / ROCm 7.0 per AMD/systems/MI355X_EPYC_9575F_pytorch.json): "
                "Llama31Config8B, zero 1 (OptimizerConfig and DistributedDataParallelConfig use_distributed_optimizer=True), "
                "grad_reduce_dtype bf16 (grad_reduce_in_fp32=False on both the DDP config and MegatronMixedPrecision), "
                "FP8 recipe delayed (fp8='hybrid', fp8_amax_history_len 4, fp8_amax_compute_algo 'most_recent': TE delayed "
                "scaling; FP8_PARAMS=1 -> fp8 weights and fp8_param_gather), no fp8 attention "
                "(fp8_dot_product_attention False; NVTE_FUSED_ATTN_CK=1: TE's CK fused attention), optimizer states "
                "fp32 (Adam, bf16 mixed precision); recompute none: train.py sets no recompute and Llama31Config8B has "
                "none (inferred, not printed in the logs). Same configuration on the same code by other submitters of "
                "v5.1: Dell XE9785L 8xMI355X 29.356 and Supermicro 8xMI355X 29.711 samples/s (medians over their logs; "
                "3.2-4.3% below AMD's own)"))
# --- AMD ROCm Performance Results page, as transcribed in Primus projection.md (8 nodes x 8 GPUs) ---
PRJ = ("AMD-AGI/Primus docs_deprecated/tech_blogs/projection/projection.md at fd1eeab (c8e5c09), table '{t}', "
       "column 'Measured 8-Node (tok/s/GPU)', transcribed from amd.com/en/developer/resources/rocm-hub/dev-ai/"
       "performance-results.html#ai-training")
GA1 = ("global batch not printed: MBS x DP = {g} sequences assumed (GA 1; the MBS 'Batch' column and no accumulation, "
       "trust C): an assumption, not read")
for shape, prec, mbs, fsdp, tps in [(L8_31, 'fp8', 2, 0, 16186), (L70_31, 'fp8', 4, 1, 1726), (L70_31, 'bf16', 1, 1, 1174)]:
    gbs = mbs * 64
    add(source=PRJ.format(t='MI325X — Dense Models (Llama 3.1)'), trust='C', **shape, seq_len=8192, global_batch_seqs=gbs,
        micro_batch=mbs, gpu='MI325X', num_gpus=64, tp=1, pp=1, vpp=1, dp=64, cp=1, ep=1, etp=1,
        zero=3 if fsdp else '', sequence_parallel=0, recompute='', precision=prec, framework='megatron',
        measured_tokens_per_s_per_gpu=tps, oom=0,
        derivation=(f"measured 8-node tokens/s/GPU {tps} as the table prints it (its Precision {prec.upper()}, Batch {mbs}, "
                    f"SeqLen 8192, FSDP {'Yes' if fsdp else 'No'}, TP 1, PP 1, CP 1, EP 1; 8 nodes = 64 MI325X); the number is "
                    "AMD's transcription of the ROCm Performance Results page (Primus / rocm/megatron-lm Megatron-LM "
                    "backend -> framework megatron), not read at the page itself; "
                    + GA1.format(g=gbs) + "; " +
                    ("zero 3 from FSDP Yes (Primus runs FSDP as Megatron's use_torch_fsdp2, with "
                     "use_distributed_optimizer false in the MI325X FSDP configs); " if fsdp else
                     "FSDP No: zero not printed (blank: planner's choice); ")
                    + "recompute, FP8 recipe and gradient dtype not printed (blank): the Primus MI325X configs at fd1eeab "
                    "(examples/megatron/configs/MI325X/llama3.1_*-pretrain.yaml) are tuned to other micro batches (8B FP8 "
                    "MBS 4, 70B FP8 MBS 1, 70B BF16 MBS 3) and so are not this run's; the page's container version is not "
                    "transcribed"))
add(source=PRJ.format(t='MI355X — MoE Models (Mixtral 8×22B)'), trust='B', **SH['MX22'], seq_len=8192, global_batch_seqs=128,
    micro_batch=2, gpu='MI355X', num_gpus=64, tp=1, pp=4, vpp=2, dp=16, cp=1, ep=8, etp=1, zero=1, sequence_parallel=0,
    recompute='none', precision='bf16', framework='megatron', moe_dispatcher='alltoall', ep_overlap='',
    measured_tokens_per_s_per_gpu=3534, oom=0,
    derivation=("measured 8-node tokens/s/GPU 3,534 as the table prints it (BF16, Batch 2, SeqLen 8192, TP 1, PP 4, VPP 2, "
                "CP 1, EP 8; 8 nodes = 64 MI355X -> DP 16); the number is AMD's transcription of the ROCm Performance "
                "Results page, not read at the page itself; GBS 128 inferred (trust B): the same document's worked example "
                "for this layout ('Mixtral 8x22B - TP=1, PP=4, VPP=2, EP=8, CP=1 - GBS=128, MBS=2, Seq=8192', projected "
                "to these 8 nodes) and examples/megatron/configs/MI355X/mixtral_8x22B_v0.1-BF16-pretrain.yaml at fd1eeab "
                "(micro_batch_size 2, global_batch_size 128, seq_length 8192, TP 1, PP 4, EP 8; unchanged since ca4ef23, "
                "2025-12-16) -> 4 micro-batches per pipeline per step; recompute none from that config "
                "(recompute_granularity full with recompute_num_layers 0: no layer recomputed); MoE routing force-balanced "
                "(moe_router_force_load_balancing: true in that config); zero 1 from the module config it extends "
                "(primus/configs/modules/megatron/pre_trainer.yaml at fd1eeab: use_distributed_optimizer: true, not overridden); "
                "dispatcher alltoall from primus/configs/models/megatron/mixtral_base.yaml (moe_token_dispatcher_type: alltoall, "
                "grouped GEMM), expert-comm overlap not set there (blank); these configs are fd1eeab's, not checked to be the "
                "page's container's (trust B); gradient dtype not printed (blank); Mixtral 8x22B shape as the NeMo "
                "rows above (SH['MX22'])"))
# END SECTION heldout-amd
# --- H262+: H200, MI325X and Blackwell runs from MLPerf Training v4.1-v5.1 (median logged step times, layouts from the
# logs or the submission's config scripts), torchtitan's H200 benchmark and Primus' single-node MI325X column, gathered
# 2026-11-27 where the set had no H200 row: rows kept as data in heldout_rows_mlperf.csv (same columns, no id), each with
# its source and derivation ---
for _r in csv.DictReader(open(__import__('pathlib').Path(__file__).with_name('heldout_rows_mlperf.csv'), newline='')):
    add(**{k: v for k, v in _r.items() if v != ''})
# END SECTION heldout-mlperf
# ======================================================================================================
# BEGIN SECTION heldout-amd-2: AMD Instinct training rows gathered 2026-11-29 (ids H400+, set explicitly so that
# blocks other sessions append elsewhere do not renumber them). Held out: nothing is fitted to them.
#
# Source read: mlcommons/training_results_v5.1 (fetched mirror, commit 441d65f; the AMD and Cisco files at 4da2d1c):
#  AMD's closed-division Llama 3.1 8B pre-training on one 8 x MI350X node (AMD/results/MI350X_EPYC_9575F_pytorch/
#  llama31_8b/result_0..9.txt; AMD/benchmarks/llama31_8b/implementations/MI350X_EPYC_9575F_pytorch_llama3_8b/
#  config_MI350X_1x8x1_8b.sh, src/train.py, src/callbacks.py; AMD/systems/MI350X_EPYC_9575F_pytorch.json). The
#  implementation is the MI355X one of H257 (src/train.py identical; the config differs only in MAX_LR 1e-3 and the
#  platform name), so the engine cells are H257's, read again here in the MI350X files.
# and (H401+) LUMI-G MI250X runs, their sources with the rows below.
# Searched and left out (what each lacks):
#  * Cisco UCS C885A M8 8 x MI350X (same v5.1 round, Cisco/results/1xC885A_M8-8xMI350X-OAM-288GB/llama31_8b): its logs
#    print AMD's code and layout (submission_org AMD, GBS 32, GA 2, seq 8192); 24.099 samples/s median over its 131
#    tracked_stats values, 3.2% below AMD's MI350X: named in H400's derivation, not a row of the same configuration (as
#    the Dell / Supermicro MI355X results are named in H257's).
#  * MLPerf Training v5.0 / v5.1 Llama 2 70B LoRA (MI300X / MI325X / MI350X / MI355X; AMD, MangoBoost, ASUSTeK, Krai,
#    MiTAC, Supermicro, Cisco, Dell): LoRA fine-tuning with frozen base weights; the schema has no column for frozen
#    weights or adapter ranks (every row trains all weights, with their gradients and optimizer states), so it cannot
#    describe these runs: skipped.
#  * ROCm/ROCm docs how-to/rocm-for-ai/training/benchmark-docker (megatron-lm.rst, pytorch-training.rst), ROCm/MAD,
#    AMD-AIG-AIMA/pytorch-training-benchmark: run instructions and model lists, no measured throughput (the numbers
#    live on amd.com's performance-results page, whose stored copies end before its training tables).
#  * AMD-AGI/Primus at fd1eeab: examples/moe_package (DeepSeek-V2 / V2-Lite MI355X throughput only in images),
#    docs/04-technical-guides (LoRA / SFT), examples/odc (method, no table); projection.md / primus_pipeline.md as in
#    the heldout-amd section above.
#  * Frontier (MI250X) papers (Dash et al. 2023, arXiv 2312.12705; FORGE, SC23) and LUMI's 140B scaling post: only
#    their abstracts / openings are stored here, not the tables with layouts.
#  * eminorhan/frontier-torchtitan README (Llama 3.1 8B, torchtitan FSDP2 on 64 Frontier GCDs, 'a wps of ~645'): an
#    approximate figure from a personal experiment log; ROCm/TransformerEngine issues #76/#78/#79 (MI300X FP8 FSDP,
#    'preliminary' TFLOP/s of development branches, their FLOP formula not stated): not rows.
MLP51_350 = ("mlcommons/training_results_v5.1 AMD/results/MI350X_EPYC_9575F_pytorch/llama31_8b/result_0..9.txt "
             "(tracked_stats throughput) with AMD/benchmarks/llama31_8b/implementations/MI350X_EPYC_9575F_pytorch_llama3_8b "
             "(config_MI350X_1x8x1_8b.sh, src/train.py) at 4da2d1c")
_sps350 = 24.901114  # median of the 146 tracked_stats values of the ten runs (24.386 ... 25.037 samples/s)
add(id='H400', source=MLP51_350, trust='A', **L8_31, seq_len=8192, global_batch_seqs=32, micro_batch=2, gpu='MI350X',
    num_gpus=8, tp=1, pp=1, vpp=1, dp=8, cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='none',
    precision='fp8', fp8_recipe='delayed', grad_reduce_dtype='bf16', framework='nemo',
    measured_tokens_per_s_per_gpu=round(_sps350 * 8192 / 8, 1), measured_step_time_s=round(32 / _sps350, 4), oom=0,
    derivation=(f"tokens/s/GPU = {_sps350} samples/s x 8192 tokens / 8 GPUs: the median of the 146 'tracked_stats' "
                "throughput values (samples/s of the node over the training steps of each block between evaluations, "
                "evaluation excluded: src/callbacks.py) in the ten MI350X logs (per-run medians 24.809 ... 24.998); step "
                "time = GBS 32 / that rate. Layout from config_MI350X_1x8x1_8b.sh (GBS 32, MBS 2, TP 1, PP 1, CP 1 on "
                "1 node x 8 GPUs; the logs print global_batch_size 32, gradient_accumulation_steps 2, max_sequence_length "
                "8192) -> DP 8, GA 2. Engine from src/train.py, identical to the MI355X submission's (H257): NeMo 2.0 "
                "(v2.5.0rc0 with AMD's patch, Megatron-Core strategy; PyTorch 2.8 / ROCm 7.0 per AMD/systems/"
                "MI350X_EPYC_9575F_pytorch.json), zero 1 (use_distributed_optimizer=True), grad_reduce_dtype bf16 "
                "(grad_reduce_in_fp32=False), FP8 recipe delayed (fp8='hybrid', amax history 4, most_recent; FP8_PARAMS=1), "
                "no fp8 attention (NVTE_FUSED_ATTN_CK=1, CK v3 kernels with NVTE_CK_IS_V3_ATOMIC_FP32=0), recompute none "
                "(inferred: train.py sets none). GPU: the system json names 'AMD Instinct MI350X', 288 GB HBM3e, 8 per "
                "node over XGMI, cooling 'Passive & Active' (system SMCI350X, AS-8126GS-TNMR). The same code and layout "
                "on Cisco's air-cooled UCS C885A M8 8 x MI350X in the same round: 24.099 samples/s (median of its 131 "
                "tracked_stats values, 3.2% below)"))
# --- H401+: AMD Instinct MI250X (one GCD per device) on LUMI-G, Megatron-DeepSpeed, 2023 ---
# Source: spyysalo/lumi-llm-scaling (fetched mirror, HEAD 7314958, 2023-06-30), meg-ds/: the 175B strong-scaling
# logs meg-ds/experiments/175B-scaling-comms/{16,32,64,128,256}-node.out (added ef1c2eb, 2023-06-11; each prints
# Megatron's full argument list and one 'samples per second' line per iteration), and meg-ds/README.md's expected
# throughput.py output for pretrain_{7B_4,33B_8,65B_8}_node.sh (README and scripts at 7314958; the scripts last
# changed 58a790d / 9215af8). Engine: TurkuNLP's Megatron-DeepSpeed fork at 6732bc9 (meg-ds/README.md), DeepSpeed
# pipeline engine, ROCm 5.2.3 (setup-venv.sh), 8 GCDs per node (--gpus-per-node=mi250:8). Shared cells:
# BLOOM-style GPT (GELU MLP of 4h, MHA, tied embeddings; ALiBi positions and the embedding layernorm are not schema
# columns), GPT-2 BPE vocabulary 50,257 padded by Megatron to a multiple of 128 x TP
# (megatron/tokenizer/tokenizer.py _vocab_size_with_padding; the logs print 51,200 at TP 8); bf16; full activation
# checkpointing of every layer (--checkpoint-activations, checkpoint_num_layers 1); DeepSpeed zero_stage 0 with bf16,
# i.e. DeepSpeed's BF16_Optimizer (the logs print 'Creating BF16 optimizer'), which shards the fp32 master weights
# and Adam states over the data-parallel ranks as ZeRO-1 does (deepspeed/runtime/bf16_optimizer.py) -> zero 1, as
# the BLOOM row H049 of the same engine family; gradients reduced in fp32 (accumulate_allreduce_grads_in_fp32 True);
# attention unfused (no flash attention on this stack; Megatron's fused masked softmax, masked_softmax_fusion True:
# attention_kernel 'unfused'); NIC 100 Gb/s per GCD (LUMI-G: 4 x 200 Gb/s Slingshot-11 per node of 8 GCDs,
# lumi-supercomputer.eu 'Scaling the pre-training of large language models of >100B parameters to thousands of AMD
# MI250X GPUs on LUMI'). tokens/s/GPU = samples/s x 2048 / GCDs.
LUMI = "spyysalo/lumi-llm-scaling meg-ds/{f} at 7314958"
LUMI_ENG = ("engine: TurkuNLP Megatron-DeepSpeed 6732bc9 + DeepSpeed pipeline engine on ROCm 5.2.3; zero 1 = DeepSpeed "
            "zero_stage 0 with its BF16_Optimizer (log: 'Creating BF16 optimizer'; fp32 master and Adam states sharded "
            "over DP); grad_reduce_dtype fp32 (accumulate_allreduce_grads_in_fp32 True); attention unfused (Megatron fused "
            "masked softmax, no flash attention); ALiBi and embedding layernorm not schema columns; 8 GCDs per node, "
            "NIC 100 Gb/s per GCD (4 x 200 Gb/s Slingshot-11 per LUMI-G node)")
_lumi_ids = iter(range(401, 500))
def lumi(f, trust, layers, hidden, heads, tp, pp, nodes, gbs, sps, how):
    n = 8 * nodes
    vocab = -(-50257 // (128 * tp)) * 128 * tp
    add(id=f'H{next(_lumi_ids)}',
        source=LUMI.format(f=f), trust=trust, model=f'LUMI GPT {layers}L-{hidden} (BLOOM-style)', arch='dense',
        layers=layers, hidden=hidden, heads=heads, kv_heads=heads, ffn=4 * hidden, vocab=vocab, attention='mha',
        mlp='gelu', tied_embeddings=1, seq_len=2048, global_batch_seqs=gbs, micro_batch=2, gpu='MI250X', num_gpus=n,
        tp=tp, pp=pp, vpp=1, dp=n // (tp * pp), cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='full',
        precision='bf16', framework='deepspeed', attention_kernel='unfused', grad_reduce_dtype='fp32',
        nic_gbps_per_gpu=100, gpus_per_node=8,
        measured_tokens_per_s_per_gpu=round(sps * 2048 / n, 2), measured_step_time_s=round(gbs / sps, 2), oom=0,
        derivation=(f"tokens/s/GPU = {sps} samples/s x 2048 / {n} GCDs; step = GBS {gbs} / that rate; " + how
                    + f"; vocab {vocab} = 50,257 padded to a multiple of 128 x TP {tp}; " + LUMI_ENG))
# 175B (70 layers, hidden 14336, 112 heads): the logs print every argument (TP 8, PP 8, MBS 2, GBS 1024, seq 2048,
# world size = 8 x nodes); the rate is the median of the per-iteration 'samples per second' after the first
for nodes, sps, k in ((16, 2.954, 3), (32, 5.663, 7), (64, 10.499, 15), (128, 18.556, 27), (256, 28.289, 39)):
    lumi(f'experiments/175B-scaling-comms/{nodes}-node.out', 'A', 70, 14336, 112, 8, 8, nodes, 1024, sps,
         f"median of the {k} per-iteration 'samples per second' values after the first in {nodes}-node.out (the "
         f"log's arguments: tensor/pipeline parallel 8/8, data_parallel_size {nodes * 8 // 64}, micro 2, "
         f"global 1024, seq 2048, 70 layers, hidden 14336, 112 heads, ffn 57344, bf16, zero_stage 0, "
         f"checkpoint_activations True); a strong-scaling series, GBS fixed at 1024 from 128 to 2048 GCDs")
# 7B / 33B / 65B: README.md's 'This should print approximately' medians of throughput.py (first iteration left out)
# with the scripts of the same commit (trust B: the logs are not committed, the numbers are the README's one decimal)
for f, layers, hidden, heads, tp, pp, nodes, gbs, sps in (
        ('pretrain_7B_4_node.sh', 32, 4096, 32, 1, 2, 4, 2048, 19.4),
        ('pretrain_33B_8_node.sh', 60, 6656, 52, 2, 4, 8, 1024, 8.4),
        ('pretrain_65B_8_node.sh', 80, 8192, 64, 2, 8, 8, 1024, 4.0)):
    lumi('README.md with ' + f, 'B', layers, hidden, heads, tp, pp, nodes, gbs, sps,
         f"samples/s is the median README.md prints for {f} (throughput.py over Megatron's per-iteration lines, "
         f"the first left out; one decimal, so +-{0.05 / sps:.1%}); layout from the script at the same commit "
         f"(TP {tp}, PP {pp}, MICRO_BATCH_SIZE 2, GLOBAL_BATCH_SIZE {gbs}, SEQ_LEN 2048, NLAYERS {layers}, "
         f"NHIDDEN {hidden}, NHEADS {heads}, FFN 4 x hidden, ZERO_STAGE 0, --bf16, --checkpoint-activations, "
         f"{nodes} nodes x 8 GCDs); the README's 175B line (3.0 samples/s) is the 16-node log row above, not repeated")
# BigCode's Megatron-LM fork (spyysalo/Megatron-LM, bc-meg-lm/README.md) on the same machine: a 33B multi-query model,
# README's median of tokens-per-second-per-gpu (bc-meg-lm/throughput.py, first iteration left out) with the script of
# the same commit (bc-meg-lm last changed 4eebc60, 2023-06-09). The README's Singularity-container rerun of the 33B
# Megatron-DeepSpeed script (meg-ds-sing, 7.5 samples/s against 8.4) is the same configuration on another software
# environment: named here, not a row.
_v = -(-(50257 + 4) // (128 * 4)) * 128 * 4
add(id=f'H{next(_lumi_ids)}', source="spyysalo/lumi-llm-scaling bc-meg-lm/README.md with pretrain_33B_8_node.sh at 7314958",
    trust='B', model='LUMI BigCode 60L-6656 MQA', arch='dense', layers=60, hidden=6656, heads=52, kv_heads=1,
    ffn=4 * 6656, vocab=_v, attention='gqa', mlp='gelu', tied_embeddings=1, seq_len=2048, global_batch_seqs=1024,
    micro_batch=2, gpu='MI250X', num_gpus=64, tp=4, pp=4, vpp=1, dp=4, cp=1, ep=1, etp=1, zero=0, sequence_parallel=1,
    recompute='full', precision='bf16', framework='megatron', attention_kernel='unfused', grad_reduce_dtype='fp32',
    tp_comm_overlap=0, nic_gbps_per_gpu=100, gpus_per_node=8, measured_tokens_per_s_per_gpu=182.8,
    measured_step_time_s=round(1024 * 2048 / (182.8 * 64), 1), oom=0,
    derivation=("tokens/s/GPU 182.8 = the median README.md prints (tokens/sec/gpu: mean 177.1, stdev 15.6, median 182.8 "
                "over 7 values: a noisy run); step = 1024 x 2048 / (182.8 x 64). Layout from pretrain_33B_8_node.sh at "
                "the same commit: 8 nodes x 8 GCDs, TP 4, PP 4 (-> DP 4), --sequence-parallel, MICRO_BATCH_SIZE 2, "
                "GLOBAL_BATCH_SIZE 1024, SEQ_LEN 2048, 60 layers, hidden 6656, 52 heads, --attention-head-type multiquery "
                "(one KV head: attention gqa with kv_heads 1), ffn 4 x hidden (Megatron's default), --bf16, --recompute-granularity full "
                "--recompute-method uniform, no distributed optimizer (zero 0); vocab = 50,257 GPT-2 tokens + 4 FIM "
                f"tokens (add_fim_tokens.py) padded to a multiple of 128 x TP 4 = {_v}; tied embeddings (no untie flag); "
                "grad_reduce_dtype fp32 (Megatron-LM's arguments.py forces accumulate_allreduce_grads_in_fp32 under bf16); "
                "attention unfused (no flash-attention flag; no flash attention on ROCm 5.2.3); learned absolute positions "
                "and dropout 0.1 not schema columns; tp_comm_overlap 0: no overlap flag in the script and no Transformer "
                "Engine in the environment (bc-meg-lm/setup-venv.sh: torch 1.13.1+rocm5.2, deepspeed 0.8.1, apex); "
                "NIC 100 Gb/s per GCD as the rows above"))
# END SECTION heldout-amd-2
# BEGIN SECTION heldout-trainnew (ids H500+): training runs on NVIDIA GPUs from sources the set had not used,
# gathered 2026-11-29, held out (no constant, default or rule was tuned to them).
#
# (1) OLMo-core (allenai/OLMo-core) README.md, table 'Official training scripts' throughput, as changed by e27ba7455
#     (2024-11-05, "Update throughput numbers"; unchanged through 7f7c4894d, 2025-03-02, removed by 3ce0c5834). The page:
#     "Throughput numbers from these scripts ... measured on a cluster with NVIDIA H100 GPUs", footnote "Throughput
#     reported in tokens per second per device"; footnote 2: FP8 rows compute most matrix multiplications in float8,
#     everything else in bfloat16. Configuration from the scripts at the same commit (src/scripts/train/OLMo-1B.py,
#     OLMo-7B.py, Llama-8B.py, OLMo-13B.py and src/olmo_core/internal/experiment.py):
#     * layout: TransformerDataParallelConfig(name=fsdp, param_dtype=bfloat16, reduce_dtype=float32) = FSDP2 over all
#       ranks (zero 3; nn/transformer/model.py apply_fsdp: every block reshard_after_forward except the last, no
#       no_sync under gradient accumulation: train/trainer.py _train_microbatch_context skips sync only for DDP);
#       no activation checkpointing (no ac_config); compile=True (each block torch.compile'd) and compile_loss=True
#       (trainer.py: the loss function torch.compile'd) -> compiled_loss 1; compile=True makes llama_like pick
#       use_flash=False and fused_ops=False, i.e. torch SDPA (flash backend = FlashAttention-2 class, the default
#       for an engine cost/efficiency.py ENGINE_ATTENTION does not list: attention_kernel left blank);
#       AdamW(fused=True) on fp32 parameters (TransformerConfig dtype float32) -> fp32 optimizer states;
#       reduce_dtype float32 -> grad_reduce_dtype fp32.
#     * the GPU count is NOT printed: 8 GPUs = the scripts' launch default (experiment.py build_common_components:
#       BeakerLaunchConfig(num_nodes=1, num_gpus=8)); the table lists no --launch override -> trust B.
#     * global batch: main(global_batch_size=1024*4096 tokens) = 1024 sequences of 4096 (2048 for the 13B);
#       micro batch = rank_microbatch_size / 4096 (1B 8, 7B 2, 8B 2, 13B 1).
#     * shapes (nn/transformer/config.py at e27ba7455): olmo_1B/7B/13B = llama2_1B (18 layers, d 2048, 16 heads) /
#       llama2_7B (32, 4096, 32) / llama2_13B (40, 5120, 40) with OLMo's reordered norm and QK-norm, MHA; llama3_8B
#       (32, 4096, 32 heads, 8 KV heads); FFN = llama_like's rounding of 8d/3 (x1.3 for llama3_8B) up to a multiple of
#       256 (1024 for llama3_8B): 5632 / 11008 / 13824 / 14336; SwiGLU; untied (embeddings and w_out are separate
#       modules); vocab = dolma2 tokenizer 100278 padded to a multiple of 128 = 100352 (data/tokenizer.py).
#     * FP8 rows: Float8Config defaults (float8.py): torchao dynamic tensorwise scaling for inputs, weights and output
#       gradients, enable_fsdp_float8_all_gather=True, w_out left in bf16 (modules_to_ignore={'w_out'}) -> fp8_recipe
#       tensorwise.
OLMO_CORE = "allenai/OLMo-core README.md at e27ba7455 (2024-11-05), throughput table of the official training scripts"
OLMO_SH = {  # key: (model, layers, hidden, heads, kv_heads, ffn, script, micro_batch, global_batch_seqs)
    '1B': ('OLMo 2 1B-class (OLMo-core olmo_1B, Nov 2024)', 18, 2048, 16, 16, 5632, 'OLMo-1B.py', 8, 1024),
    '7B': ('OLMo 2 7B (OLMo-core olmo_7B)', 32, 4096, 32, 32, 11008, 'OLMo-7B.py', 2, 1024),
    '8B': ('Llama 3 8B (OLMo-core llama3_8B)', 32, 4096, 32, 8, 14336, 'Llama-8B.py', 2, 1024),
    '13B': ('OLMo 2 13B (OLMo-core olmo_13B)', 40, 5120, 40, 40, 13824, 'OLMo-13B.py', 1, 2048),
}
for key, prec, tps in [('1B', 'bf16', 55000), ('1B', 'fp8', 65000), ('7B', 'bf16', 10000), ('7B', 'fp8', 13000),
                       ('8B', 'bf16', 9500), ('8B', 'fp8', 12500), ('13B', 'bf16', 4600), ('13B', 'fp8', 5500)]:
    name, l, h, a, kv, f, script, mbs, gbs = OLMO_SH[key]
    add(id=f'H{500 + len([r for r in rows if r.get("id", "").startswith("H5")]):03d}', source=OLMO_CORE, trust='B',
        model=name, arch='dense', layers=l, hidden=h, heads=a, kv_heads=kv, ffn=f, vocab=100352,
        attention='gqa' if kv < a else 'mha', mlp='swiglu', tied_embeddings=0, seq_len=4096, global_batch_seqs=gbs,
        micro_batch=mbs, gpu='H100-SXM-80GB', num_gpus=8, tp=1, pp=1, vpp=1, dp=8, cp=1, ep=1, etp=1, zero=3,
        sequence_parallel=0, recompute='none', precision=prec, framework='olmo-core', compiled_loss=1,
        optimizer_state_precision='fp32', grad_reduce_dtype='fp32',
        fp8_recipe='tensorwise' if prec == 'fp8' else '', fp8_param_gather=1 if prec == 'fp8' else '',
        measured_tokens_per_s_per_gpu=tps, oom=0,
        derivation=(f"Throughput column as printed ({tps:,} TPS, 'tokens per second per device'; precision "
                    f"{'BF16/FP8 = --model.float8_config.enabled=true' if prec == 'fp8' else 'BF16'}), script "
                    f"src/scripts/train/{script} at e27ba7455; 8 GPUs inferred from the launch default "
                    f"(internal/experiment.py BeakerLaunchConfig num_nodes=1, num_gpus=8; not printed) -> FSDP2 dp 8, "
                    f"zero 3; global batch {gbs} x 4096 tokens (main global_batch_size), micro batch {mbs} "
                    f"(rank_microbatch_size {mbs}*4096) -> {gbs // (8 * mbs)} accumulation steps; no activation "
                    f"checkpointing; compile=True (blocks) and compile_loss=True -> compiled_loss 1; torch SDPA "
                    f"(use_flash False under compile): the fa2 class, the default of an engine the cost model does "
                    f"not list (attention_kernel blank); FSDP reduce_dtype float32 -> grad_reduce_dtype fp32; "
                    f"fp32 parameters with fused AdamW -> fp32 optimizer states; shape from config.py at e27ba7455 "
                    f"(ffn by llama_like's rounding, vocab dolma2 100278 padded to 100352, untied)"
                    + ("; FP8 = torchao Float8Linear dynamic tensorwise scaling, w_out in bf16, "
                       "enable_fsdp_float8_all_gather=True -> fp8_param_gather 1 (float8.py Float8Config defaults)"
                       if prec == 'fp8' else "")
                    + "; framework olmo-core (an FSDP2 engine: cost/fsdp2_copies.py)"))
#
# (2) MLPerf Training GPT-3 175B on H100 (closed division), rounds the set had not used: v3.0 (2023-06), v3.1
#     (2023-11), v4.0 (2024-06); mlcommons/training_results_v3.0 at 63e326c, _v3.1 at d06288b, _v4.0 at 6fe9543;
#     and the two v4.1 (2024-11) GPT-3 entries not yet in the file (NVIDIA eos_n32 / eos_n64 on NeMo 24.09,
#     _v4.1 at b87b9e3; its eos-dfw_n1452 entry is left out: the same logs as v4.0's, identical MLLOG timestamps).
#     Submitters: NVIDIA (DGX H100, Eos), NVIDIA+CoreWeave (HGX H100), Azure+NVIDIA (ND H100 v5), Supermicro (smc).
#     Measured step time from each submission's three result_*.txt logs (MLLOG lines of custom_callbacks.py):
#     * v3.0 / v3.1: the per-step 'tracked_stats' {'train_step_timing': s} (one per optimizer step), first 3 steps of
#       each log dropped, median over the pooled steps of the 3 logs (as the v4.1 rows of heldout_rows_mlperf.csv);
#     * v4.0 logs print no per-step timing: step time = (block_stop - block_start) / (epoch_count tokens / (GBS x
#       2048)) for each training block between evaluations (block_start after eval_stop, so evaluation is excluded),
#       the first block of each log dropped, median over the pooled blocks. On the v3.1 logs, which print both, this
#       block figure is 16-34 ms (0.2-3.5%) above the train_step_timing median (it also holds the per-step work
#       outside the timer): the v4.0 rows are on that slightly slower footing.
#     GBS and gradient accumulation as logged (global_batch_size, gradient_accumulation_steps); TP, PP from the config
#     script named in the source; micro batch from the config and = GBS / (GA x DP) in every row; VPP =
#     INTERLEAVED_PIPELINE (config or config_common; else conf/custom.yaml's default 12); no activation recompute
#     (ACT_CKPT_GRANULARITY null), sequence parallel (SEQ_PARALLEL default True: conf/custom.yaml; v3.0's
#     run_and_time.sh), distributed optimizer
#     (USE_DIST_OPTIMIZER=True -> zero 1), FP8 delayed scaling (config_fp8.sh: FP8_HYBRID, AMAX history 1024, max),
#     TP communication overlap (TP_COMM_OVERLAP=True); gradient reduce-scatter in bf16 (the distributed_fused_adam
#     optimizer config: grad_sync_dtype bf16, overlap_grad_sync and overlap_param_sync True; v3.0 in
#     conf/megatron_gpt_config.yaml model.optim, v3.1 / v4.0 in conf/optim/distributed_fused_adam.yaml, in each
#     submitter's implementation folder) -> grad_reduce_dtype bf16. Shape: GPT-3 175B
#     as the v4.1 rows (96 x 12288, 96 heads, ffn 49152, GeLU, tied, learned positions; vocab 50257 assumed for the
#     C4 SentencePiece tokenizer, not printed). NIC 400 Gb/s per GPU from each systems/*.json (8 x NDR 400 per node),
#     blank where the json leaves host_networking empty (Supermicro v4.0).
MLPERF_REPO = {'3.0': 'mlcommons/training_results_v3.0 at 63e326c', '3.1': 'mlcommons/training_results_v3.1 at d06288b',
               '4.0': 'mlcommons/training_results_v4.0 at 6fe9543', '4.1': 'mlcommons/training_results_v4.1 at b87b9e3',
               '5.0': 'mlcommons/training_results_v5.0 at 0fdc28f'}
# the per-step key each round's custom_callbacks.py logs under 'tracked_stats'
STEP_KEY = {'3.0': 'train_step_timing', '3.1': 'train_step_timing', '4.1': 'train_step_timing in s',
            '5.0': 'train_step_time'}
GPT3_MLPERF = dict(model='GPT-3 175B', arch='dense', layers=96, hidden=12288, heads=96, kv_heads=96, ffn=49152,
                   vocab=50257, attention='mha', mlp='gelu', tied_embeddings=1, seq_len=2048)
#  (round, results dir, config script, nodes, gbs, ga, tp, pp, mbs, vpp, vpp source, median step s, n, per-run medians,
#   timing kind, nic, system / engine note)
MLPERF_GPT3 = [
 ('3.0', 'NVIDIA/results/dgxh100_n64_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_64x8x128x4x8_mbs1.sh',
  64, 2048, 128, 4, 8, 1, 12, 'config_common.sh INTERLEAVED_PIPELINE=12', 12.0771, 855, '12.083, 12.071, 12.074', 'step', 400, 'DGX H100, NVIDIA NeMo Framework (release not named in the systems json; logs dated 2023-05)'),
 ('3.0', 'NVIDIA/results/dgxh100_n96_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_96x8x128x4x8_mbs1.sh',
  96, 3072, 128, 4, 8, 1, 12, 'config_common.sh INTERLEAVED_PIPELINE=12', 12.1263, 583, '12.128, 12.127, 12.124', 'step', 400, 'DGX H100, NVIDIA NeMo Framework (release not named in the systems json; logs dated 2023-05)'),
 ('3.0', 'NVIDIA_CoreWeave/results/coreweave_hgxh100_n96_ngc23.04_pytorch', 'NVIDIA_CoreWeave/benchmarks/gpt3/implementations/pytorch/config_DGXH100_96x8x128x4x8_mbs1.sh',
  96, 3072, 128, 4, 8, 1, 12, 'config_common.sh INTERLEAVED_PIPELINE=12', 12.2993, 591, '12.322, 12.286, 12.305', 'step', 400, 'CoreWeave HGX H100, NeMo Megatron 23.04'),
 ('3.0', 'NVIDIA_CoreWeave/results/coreweave_hgxh100_n192_ngc23.04_pytorch', 'NVIDIA_CoreWeave/benchmarks/gpt3/implementations/pytorch/config_DGXH100_192x8x64x4x8_mbs1.sh',
  192, 3072, 64, 4, 8, 1, 12, 'config_common.sh INTERLEAVED_PIPELINE=12', 6.3378, 607, '6.326, 6.357, 6.340', 'step', 400, 'CoreWeave HGX H100, NeMo Megatron 23.04'),
 ('3.0', 'NVIDIA_CoreWeave/results/coreweave_hgxh100_n448_ngc23.04_pytorch', 'NVIDIA_CoreWeave/benchmarks/gpt3/implementations/pytorch/config_DGXH100_448x8x24x4x8_mbs1.sh',
  448, 2688, 24, 4, 8, 1, 12, 'config_common.sh INTERLEAVED_PIPELINE=12', 2.5976, 651, '2.594, 2.601, 2.602', 'step', 400, 'CoreWeave HGX H100, NeMo Megatron 23.04'),
 ('3.1', 'NVIDIA/results/eos_n64_ngc23.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_64x8x192x4x8_mbs1.sh',
  64, 2048, 128, 4, 8, 1, 12, "conf/custom.yaml default 12 (no script sets it); the script's MINIBS=192 would give GBS 3072 but the logs print 2048 (MINIBS 128 at run time): the logged GBS is used",
  11.0520, 855, '11.045, 11.055, 11.054', 'step', 400, 'Eos DGX H100, NeMo 23.09'),
 ('3.1', 'NVIDIA/results/eos_n96_ngc23.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_96x8x128x4x8_mbs1.sh',
  96, 3072, 128, 4, 8, 1, 12, 'conf/custom.yaml default 12 (no script sets it)', 11.0751, 591, '11.072, 11.078, 11.075', 'step', 400, 'Eos DGX H100, NeMo 23.09'),
 ('3.1', 'NVIDIA/results/eos-dfw_n512_ngc23.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_512x8x16x4x8_mbs1.sh',
  512, 2048, 16, 4, 8, 1, 12, 'conf/custom.yaml default 12 (no script sets it)', 1.6086, 855, '1.608, 1.608, 1.610', 'step', 400, 'Eos DGX H100, NeMo 23.09'),
 ('3.1', 'NVIDIA/results/eos-dfw_n768_ngc23.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_768x8x16x4x8_mbs1.sh',
  768, 3072, 16, 4, 8, 1, 12, 'conf/custom.yaml default 12 (no script sets it)', 1.6153, 591, '1.616, 1.615, 1.615', 'step', 400, 'Eos DGX H100, NeMo 23.09'),
 ('3.1', 'NVIDIA/results/eos-dfw_n1024_ngc23.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_1024x8x16x4x8_mbs1.sh',
  1024, 4096, 16, 4, 8, 1, 12, 'conf/custom.yaml default 12 (no script sets it)', 1.6192, 465, '1.619, 1.619, 1.619', 'step', 400, 'Eos DGX H100, NeMo 23.09'),
 ('3.1', 'NVIDIA/results/eos-dfw_n1280_ngc23.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_1280x8x8x4x8_mbs1.sh',
  1280, 2560, 8, 4, 8, 1, 12, 'conf/custom.yaml default 12 (no script sets it)', 0.9255, 681, '0.926, 0.925, 0.926', 'step', 400, 'Eos DGX H100, NeMo 23.09'),
 ('3.1', 'NVIDIA/results/eos-dfw_n1344_ngc23.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_1344x8x8x4x8_mbs1.sh',
  1344, 2688, 8, 4, 8, 1, 12, 'conf/custom.yaml default 12 (no script sets it)', 0.9296, 651, '0.930, 0.930, 0.930', 'step', 400, 'Eos DGX H100, NeMo 23.09'),
 ('3.1', 'Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch', 'Azure+NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_1344x8x8x4x8_mbs1.sh',
  1344, 2688, 8, 4, 8, 1, 12, 'conf/custom.yaml default 12 (no script sets it)', 0.9460, 651, '0.945, 0.945, 0.954', 'step', 400, 'Azure ND H100 v5, PyTorch NVIDIA Release 23.09 (NeMo)'),
 ('4.0', 'NVIDIA/results/eos_n64_ngc24.04_nemo', 'NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_64x8x128x4x8_mbs2.sh',
  64, 2304, 72, 4, 8, 2, 4, "the script's INTERLEAVED_PIPELINE=4; its MINIBS default 128 would give GBS 2048 but the logs print 2304 (MINIBS 144 at run time): the logged GBS is used",
  10.9797, 67, '10.903, 10.983, 10.982', 'block', 400, 'Eos DGX H100, NeMo 24.04'),
 ('4.0', 'NVIDIA/results/eos-dfw_n1344_ngc24.04_nemo', 'NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_1344x8x6x4x6_mbs1_cg.sh',
  1344, 2688, 6, 4, 6, 1, 8, "the script's INTERLEAVED_PIPELINE=8 (2 layers per virtual stage); it also sets LAYER_CUDA_GRAPH=1 (per-layer CUDA graphs, not a schema column)",
  0.9207, 63, '0.921, 0.920, 0.921', 'block', 400, 'Eos DGX H100, NeMo 24.04'),
 ('4.0', 'NVIDIA/results/eos-dfw_n1452_ngc24.04_nemo', 'NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_1452x8x6x4x6_mbs1_cg.sh',
  1452, 2904, 6, 4, 6, 1, 8, "the script's INTERLEAVED_PIPELINE=8 (2 layers per virtual stage); it also sets LAYER_CUDA_GRAPH=1 (per-layer CUDA graphs, not a schema column)",
  0.9217, 66, '0.922, 0.921, 0.921', 'block', 400, 'Eos DGX H100, NeMo 24.04'),
 ('4.0', 'smc/results/64xSMC-H100-SXM-80GB', 'smc/benchmarks/gpt3/implementations/nemo/config_SMCH100_64x8x128x4x8.sh',
  64, 2048, 64, 4, 8, 2, 12, 'conf/custom.yaml default 12 (neither the script nor config_common.sh sets it); MICRO_BATCH_SIZE=2 from config_common.sh (identical to NVIDIA\'s)',
  10.7625, 69, '10.766, 10.764, 10.759', 'block', '', 'Supermicro H100-SXM-80GB x 64 nodes, NVIDIA v4.0 container (mlperfv40 gpt3 20240505)'),
 ('4.1', 'NVIDIA/results/eos_n32_ngc24.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/eos_n32_ngc24.09_nemo/config_DGXH100_32x8x256x4x8_mbs2.sh',
  32, 2048, 128, 4, 8, 2, 6, "the script's INTERLEAVED_PIPELINE=6 (2 layers per virtual stage); it also defers the embedding's weight-gradient GEMM (DEFER_EMBEDDING_WGRAD_COMPUTE, not a schema column)",
  18.3777, 867, '18.372, 18.374, 18.421', 'step', 400, 'Eos DGX H100, NeMo 24.09'),
 ('4.1', 'NVIDIA/results/eos_n64_ngc24.09_nemo', 'NVIDIA/benchmarks/gpt3/implementations/eos_n64_ngc24.09_nemo/config_DGXH100_64x8x128x4x8_mbs2.sh',
  64, 2048, 64, 4, 8, 2, 6, "the script's INTERLEAVED_PIPELINE=6 (2 layers per virtual stage); it also defers the embedding's weight-gradient GEMM (DEFER_EMBEDDING_WGRAD_COMPUTE, not a schema column)",
  9.5004, 867, '9.493, 9.554, 9.496', 'step', 400, 'Eos DGX H100, NeMo 24.09'),
]
for (rnd, rdir, cfg, nodes, gbs, ga, tp, pp, mbs, vpp, vpp_src, step_s, n, per_run, kind, nic, system) in MLPERF_GPT3:
    gpus = nodes * 8
    dp = gpus // (tp * pp)
    assert gbs == ga * mbs * dp, rdir
    tps = round(gbs * 2048 / step_s / gpus, 1)
    optim = cfg.rsplit('/', 1)[0] + ('/conf/megatron_gpt_config.yaml (model.optim)' if rnd == '3.0'
                                     else '/conf/optim/distributed_fused_adam.yaml')
    timing = (f"median of the {n} per-step 'tracked_stats' '{STEP_KEY.get(rnd)}' values over the 3 logs (first 3 steps of "
              f"each dropped; per-log medians {per_run} s)" if kind == 'step' else
              f"median over the {n} training blocks of the 3 logs (first block of each dropped) of (block_stop - "
              f"block_start) / steps per block, steps = epoch_count / (GBS x 2048) (per-log medians {per_run} s; the "
              f"logs print no per-step timing)")
    add(id=f'H{500 + len([r for r in rows if r.get("id", "").startswith("H5")]):03d}',
        source=(f"MLPerf Training v{rnd} GPT-3 175B: {MLPERF_REPO[rnd]} {rdir}/gpt3/result_*.txt "
                f"('{'tracked_stats ' + STEP_KEY[rnd] if kind == 'step' else 'block_start/block_stop'}') with {cfg}"),
        trust='A', **GPT3_MLPERF, global_batch_seqs=gbs, micro_batch=mbs, gpu='H100-SXM-80GB', num_gpus=gpus,
        tp=tp, pp=pp, vpp=vpp, dp=dp, cp=1, ep=1, etp=1, zero=1, sequence_parallel=1, recompute='none',
        precision='fp8', fp8_recipe='delayed', tp_comm_overlap=1, nic_gbps_per_gpu=nic, framework='nemo',
        grad_reduce_dtype='bf16', fp8_param_gather=1 if rnd in ('4.0', '4.1') else '',
        measured_tokens_per_s_per_gpu=tps, measured_step_time_s=step_s, oom=0,
        derivation=(f"tokens/s/GPU = GBS {gbs} x 2048 / {step_s} s / {gpus} GPUs; {step_s} s = {timing}. GBS {gbs} and "
                    f"gradient_accumulation_steps {ga} as logged; {nodes} nodes x 8 H100-SXM-80GB; TP {tp}, PP {pp}, "
                    f"micro batch {mbs} from the config script -> DP {dp} (GBS = GA x mbs x DP); VPP {vpp}: {vpp_src}; "
                    f"no recompute (ACT_CKPT_GRANULARITY null), sequence parallel (SEQ_PARALLEL default True: "
                    f"{'run_and_time.sh' if rnd == '3.0' else 'conf/custom.yaml'}), distributed "
                    f"optimizer (USE_DIST_OPTIMIZER=True -> zero 1), FP8 delayed scaling (config_fp8.sh: FP8_HYBRID, "
                    f"amax history 1024, max), TP_COMM_OVERLAP=True; grad_reduce_dtype bf16: {optim} sets "
                    f"distributed_fused_adam grad_sync_dtype bf16 (overlap_grad_sync, overlap_param_sync True); "
                    + ("FP8_PARAMS=True (config_common.sh: FP8 primary weights, which NeMo's "
                       "MegatronDistributedFusedAdam gathers as uint8, nemo/core/optim/distributed_adam.py) -> "
                       "fp8_param_gather 1; " if rnd in ('4.0', '4.1') else "")
                    + f"GPT-3 175B shape as the v4.1 rows (vocab 50257 assumed, not printed); system: {system}"
                    + (f"; NIC 400 Gb/s per GPU from the systems json" if nic else
                       "; NIC not stated (systems json host_networking empty: blank)")))
#
# (3) MLPerf Training v5.0 (2025-06) Llama 3.1 405B entries not yet in the file: NVIDIA eos-dfw_n304 / _n320 (H100,
#     NeMo 25.01), IBM+CoreWeave+NVIDIA carina_ngpu1536 / _ngpu2048 and NVIDIA tyche_ngpu512 (GB200 NVL72, NeMo 25.04);
#     mlcommons/training_results_v5.0 at 0fdc28f. Read as the v5.0 405B rows of heldout_rows_mlperf.csv were: step time =
#     median of the per-step 'tracked_stats' train_step_time values (first 3 steps of each log dropped) over the 3 logs;
#     GBS and gradient_accumulation_steps as logged (the logs are MLLOG-only); layout from the config script named in the
#     source (TENSOR/PIPELINE_MODEL_PARALLEL, INTERLEAVED_PIPELINE, CONTEXT_PARALLEL, MICRO_BATCH_SIZE, MINIBS,
#     DGXNNODES x DGXNGPU; DP = GPUs / (TP x PP x CP) and GBS = MINIBS x DP, equal to the logged GBS in every row);
#     ASYM_PP_EMBED / ASYM_PP_LOSS True (embedding and loss counted as pipeline layers; no schema column);
#     TP_COMM_OVERLAP True; USE_DIST_OPTIMIZER True (zero 1); FP8 True; no recompute (no ACT_CKPT variable set;
#     conf/custom.yaml default null); sequence parallel (conf/custom.yaml SEQ_PARALLEL default True); pretrain.py sets
#     grad_reduce_in_fp32=False (bf16). FP8 recipe: conf/custom.yaml defaults FP8_RECIPE to delayed and the H100 configs
#     source no file that changes it -> delayed; the GB200 configs source config_common_blackwell.sh, which the published
#     tree lacks -> blank (as the file's GB200 rows). The GB200 configs also source config_common_cg.sh
#     (FULL_CUDA_GRAPH=True, no schema column) and set FP8_PARAM_GATHER=True, the H100 ones FP8_PARAMS=True
#     (config_common.sh); pretrain.py turns either into Megatron-Core's fp8_param_gather -> fp8_param_gather 1. Shape: Llama 3.1 405B as the file's 405B rows (vocab 32000, printed in Nebius' logs of the same code).
#     NIC from each systems/*.json (8 x 400 Gb/s per 8-GPU H100 node, 4 x 400 Gb/s per 4-GPU GB200 tray) -> 400.
#     Trust B: the engine items above are read from scripts, not printed by these logs.
L405_MLPERF = dict(model='Llama 3.1 405B', arch='dense', layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248,
                   vocab=32000, attention='gqa', mlp='swiglu', tied_embeddings=0, seq_len=8192)
MLPERF_405B = [  # (results dir, implementation dir, config script, nodes, GPUs per node, gpu, gbs, ga, tp, pp, vpp, cp,
                 #  mbs, minibs, median step s, n steps, per-log medians, system note)
 ('NVIDIA/results/eos-dfw_n304_ngc25.01_nemo', 'NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n304_ngc25.01_nemo',
  'config_DGXH100_304x8x64xtp8pp8cp2.sh', 304, 8, 'H100-SXM-80GB', 1216, 64, 8, 8, 8, 2, 1, 64, 12.7279, 810,
  '12.700, 12.712, 12.864', 'Eos DGX H100 (NVIDIA/systems/eos-dfw_n304_ngc25.01_nemo.json), NeMo 25.01'),
 ('NVIDIA/results/eos-dfw_n320_ngc25.01_nemo', 'NVIDIA/benchmarks/llama31_405b/implementations/eos-dfw_n320_ngc25.01_nemo',
  'config_DGXH100_320x8x56xtp8pp8cp2.sh', 320, 8, 'H100-SXM-80GB', 1120, 56, 8, 8, 8, 2, 1, 56, 11.1742, 765,
  '11.185, 11.173, 11.166', 'Eos DGX H100 (NVIDIA/systems/eos-dfw_n320_ngc25.01_nemo.json), NeMo 25.01'),
 ('IBM+CoreWeave+NVIDIA/results/carina_ngpu1536_ngc25.04_nemo',
  'IBM+CoreWeave+NVIDIA/benchmarks/llama31_405b/implementations/carina_ngpu1536_ngc25.04_nemo',
  'config_GB200_384x4x48xtp4pp8cp2.sh', 384, 4, 'GB200', 1152, 48, 4, 8, 8, 2, 1, 48, 8.5046, 770,
  '8.490, 8.499, 8.525', 'CoreWeave GB200 NVL72 (IBM+CoreWeave+NVIDIA/systems/carina_ngpu1536_ngc25.04_nemo.json), NeMo 25.04'),
 ('IBM+CoreWeave+NVIDIA/results/carina_ngpu2048_ngc25.04_nemo',
  'IBM+CoreWeave+NVIDIA/benchmarks/llama31_405b/implementations/carina_ngpu2048_ngc25.04_nemo',
  'config_GB200_512x4x40xtp4pp8cp2.sh', 512, 4, 'GB200', 1280, 40, 4, 8, 8, 2, 1, 40, 7.1636, 768,
  '7.152, 7.158, 7.178', 'CoreWeave GB200 NVL72 (IBM+CoreWeave+NVIDIA/systems/carina_ngpu2048_ngc25.04_nemo.json), NeMo 25.04'),
 ('NVIDIA/results/tyche_ngpu512_ngc25.04_nemo', 'NVIDIA/benchmarks/llama31_405b/implementations/tyche_ngpu512_ngc25.04_nemo',
  'config_GB200_128x4x112xtp4pp8cp2_cg_dplast.sh', 128, 4, 'GB200', 896, 112, 4, 8, 8, 2, 1, 112, 19.4747, 927,
  '19.600, 19.432, 19.427', 'Tyche GB200 NVL72 (NVIDIA/systems/tyche_ngpu512_ngc25.04_nemo.json), NeMo 25.04; the config '
  'name ends _dplast (TP_PP_DP_MAPPING=True: data parallelism outermost)'),
]
for (rdir, impl, cfg, nodes, gpn, gpu, gbs, ga, tp, pp, vpp, cp, mbs, minibs, step_s, n, per_run, system) in MLPERF_405B:
    gpus = nodes * gpn
    dp = gpus // (tp * pp * cp)
    assert gbs == minibs * dp == ga * mbs * dp, rdir
    tps = round(gbs * 8192 / step_s / gpus, 1)
    h100 = gpu.startswith('H100')
    add(id=f'H{500 + len([r for r in rows if r.get("id", "").startswith("H5")]):03d}',
        source=(f"MLPerf Training v5.0 Llama 3.1 405B: {MLPERF_REPO['5.0']} {rdir}/llama31_405b/result_*.txt "
                f"('tracked_stats train_step_time') with {impl}/{cfg} + config_common.sh"),
        trust='B', **L405_MLPERF, global_batch_seqs=gbs, micro_batch=mbs, gpu=gpu, num_gpus=gpus, tp=tp, pp=pp,
        vpp=vpp, dp=dp, cp=cp, ep=1, etp=1, zero=1, sequence_parallel=1, recompute='none', precision='fp8',
        fp8_recipe='delayed' if h100 else '', tp_comm_overlap=1, nic_gbps_per_gpu=400, framework='nemo',
        fp8_param_gather=1,
        grad_reduce_dtype='bf16', measured_tokens_per_s_per_gpu=tps, measured_step_time_s=step_s, oom=0,
        derivation=(f"tokens/s/GPU = GBS {gbs} x 8192 / {step_s} s / {gpus} GPUs; {step_s} s = median of the {n} per-step "
                    f"'tracked_stats' train_step_time values over the 3 logs (first 3 steps of each dropped; per-log "
                    f"medians {per_run} s). GBS {gbs} and gradient_accumulation_steps {ga} as logged; {cfg}: TP {tp}, "
                    f"PP {pp}, INTERLEAVED_PIPELINE {vpp}, CP {cp}, MICRO_BATCH_SIZE {mbs}, MINIBS {minibs}, "
                    f"{nodes} nodes x {gpn} GPUs -> DP {dp}, GBS {minibs} x {dp} = {gbs}; ASYM_PP_EMBED/ASYM_PP_LOSS "
                    f"True; TP_COMM_OVERLAP True; USE_DIST_OPTIMIZER True (zero 1); FP8 True, "
                    + ("FP8_PARAMS True (pretrain.py: DistributedDataParallelConfig fp8_param_gather = "
                       "optim.fp8_params -> fp8_param_gather 1); fp8_recipe delayed (conf/custom.yaml FP8_RECIPE "
                       "default; no script sets it); "
                       if h100 else
                       "FP8_PARAM_GATHER True (pretrain.py: MegatronMixedPrecision / DDP fp8_param_gather -> "
                       "fp8_param_gather 1), FULL_CUDA_GRAPH True (config_common_cg.sh); fp8_recipe blank "
                       "(config_common_blackwell.sh is sourced but not published); ")
                    + "no recompute (no ACT_CKPT variable; custom.yaml default null); sequence parallel (custom.yaml "
                    "default); pretrain.py grad_reduce_in_fp32=False -> bf16; NIC 400 Gb/s per GPU (systems json); "
                    f"system: {system}; shape as the file's 405B rows (vocab 32000). Trust B: engine items read from "
                    "the scripts, not printed in these logs"))
# END SECTION heldout-trainnew
# BEGIN SECTION heldout-mlperf8b (ids H600+): MLPerf Training v5.1 Llama 3.1 8B results the set had not used,
# gathered 2026-11-29, held out (no constant, default or rule was tuned to them).
# Source: mlcommons/training_results_v5.1 at 441d65f (fetched mirror). Read as the set's other v5.1 llama31_8b rows:
#  * NVIDIA-code (NeMo 25.09 / Megatron-Core) runs: step time = median of the per-block 'tracked_stats' train_step_time
#    values that mlperf_common's callbacks/logging.py prints (mean step time over each training block between
#    evaluations, evaluation excluded), pooled over the 10 logs; the per-32-step values custom_callbacks.py prints are
#    quoted for comparison. GBS, gradient_accumulation_steps and max_sequence_length as logged. Layout from the logs'
#    rank-0 config dump where they print one (Verda, Dell, Supermicro), else from the config script named in the DLPAL
#    line / results folder (University of Florida: hpg.dgxb200x8/config_DGXB200_<n>x8x<minibs>xtp1pp1cp<cp>_8b.sh,
#    which source b200_nemo/config_common.sh, config_common_8b.sh, config_common_cg.sh as H280/H281 read them).
#    Engine items common to all: USE_DIST_OPTIMIZER True (zero 1), pretrain.py grad_reduce_in_fp32=False (bf16),
#    FP8=True with FP8_HYBRID and FP8_RECIPE 'tensorwise' (Transformer Engine per-tensor current scaling -> cs),
#    FP8_PARAM_GATHER True (Megatron-Core DistributedDataParallelConfig.fp8_param_gather -> fp8_param_gather 1; the
#    dumps print fp8_param_gather true), OVERLAP_GRAD_REDUCE / OVERLAP_PARAM_GATHER True,
#    OVERLAP_PARAM_GATHER_WITH_OPTIM_STEP False (config_common_8b.sh), no activation recompute, TP_COMM_OVERLAP False
#    (TP 1). DDP bucket_size (not a schema column) where printed: Verda 134217728, Dell 2xXE9685L 768000000, Dell B300
#    134217728, Supermicro B300 134217728.
#  * AMD-code runs (MI355X / MI350X on other submitters' systems): as H257 / H400 (AMD's src/train.py, NeMo 2.0 with
#    Megatron-Core), measured = median of the 'tracked_stats' throughput values (samples/s) src/callbacks.py prints;
#    these repeat H257's (MI355X) and H400's (MI350X) layout on other submitters' systems (cooling and host differ),
#    whose derivations name them; added as rows of their own so the set holds every submitter's system.
# Searched and left out: the FP4 runs (NVFP4 'e2m1' printed or config_common_fp4.sh sourced: Nebius b200_n1/_n2/_n4
#  and b300_n1, Oracle 1xBM.GPU.B200.8, Supermicro AS-4126GS-NBR-LCC and SYS-422GS-NBRT-LCC, Lenovo SR680aV3 /
#  SR780aV3 / SR680aV4, Dell 1xXE9680L, NVIDIA tyche_ngpu8 / theia_ngpu8): the schema's precisions stop at fp8;
#  training_results_v5.0 has no llama31_8b benchmark. No v5.1 run above 512 GPUs exists for this benchmark.
ML8 = "mlcommons/training_results_v5.1 at 441d65f"
ML8_ENGINE = ("Engine (config_common.sh / config_common_8b.sh / pretrain.py of NVIDIA's NeMo 25.09 MLPerf code): "
              "USE_DIST_OPTIMIZER True -> zero 1; grad_reduce_in_fp32=False -> bf16; FP8 True, FP8_HYBRID True, "
              "FP8_RECIPE tensorwise (current scaling -> cs); FP8_PARAM_GATHER True -> fp8_param_gather 1; "
              "OVERLAP_GRAD_REDUCE / OVERLAP_PARAM_GATHER True, OVERLAP_PARAM_GATHER_WITH_OPTIM_STEP False; no "
              "recompute; TP_COMM_OVERLAP False; shape Llama 3.1 8B (32 layers, 4096 hidden, 14336 ffn, 32 heads, 8 "
              "query groups), vocab 128256")
#  (results dir, config / layout source, gpu, nodes, gbs, mbs, cp, block median s, n blocks, per-log medians,
#   custom_callbacks median s, trust, note)
ML8_NV = [
 ('University-of-Florida/results/hpg.dgxb200x8.n2', 'University-of-Florida/benchmarks/llama31_8b/implementations/'
  'hpg.dgxb200x8/config_DGXB200_2x8x2xtp1pp1cp1_8b.sh (+ b200_nemo/config_common.sh, config_common_8b.sh, '
  'config_common_cg.sh)', 'B200', 2, 32, 2, 1, 0.5762, 80, '0.5723 ... 0.5776', 0.5741, 'B',
  'logs print only MLLOG lines; MINIBS 2, MICRO_BATCH_SIZE 2, TP 1, PP 1, CP 1, USE_TE_OPS True, full-iteration CUDA '
  'graphs (config_common_cg.sh); system json hpg.dgxb200x8.n2: B200-SXM-180GB, InfiniBand (rate not stated)'),
 ('University-of-Florida/results/hpg.dgxb200x8.n4', 'University-of-Florida/benchmarks/llama31_8b/implementations/'
  'hpg.dgxb200x8/config_DGXB200_4x8x1xtp1pp1cp2_8b.sh (+ b200_nemo/config_common.sh, config_common_8b.sh, '
  'config_common_cg.sh)', 'B200', 4, 16, 1, 2, 0.1896, 277, '0.1885 ... 0.1901', 0.1881, 'B',
  'logs print only MLLOG lines; MINIBS 1, MICRO_BATCH_SIZE 1, TP 1, PP 1, CP 2, full-iteration CUDA graphs; '
  'InfiniBand (rate not stated)'),
 ('University-of-Florida/results/hpg.dgxb200x8.n8', 'University-of-Florida/benchmarks/llama31_8b/implementations/'
  'hpg.dgxb200x8/config_DGXB200_8x8x1xtp1pp1cp2_8b.sh (+ b200_nemo/config_common.sh, config_common_8b.sh, '
  'config_common_cg.sh)', 'B200', 8, 32, 1, 2, 0.1906, 144, '0.1905 ... 0.1907', 0.1892, 'B',
  'logs print only MLLOG lines; MINIBS 1, MICRO_BATCH_SIZE 1, TP 1, PP 1, CP 2, full-iteration CUDA graphs; the '
  'layout of H284 (Oracle, RoCE) on InfiniBand (rate not stated); with H280 (n1), H281 (n32) and the n2/n4/n16 rows '
  'here the submitter\'s 8-256 GPU series on one cluster'),
 ('University-of-Florida/results/hpg.dgxb200x8.n16', 'University-of-Florida/benchmarks/llama31_8b/implementations/'
  'hpg.dgxb200x8/config_DGXB200_16x8x1xtp1pp1cp2_8b.sh (+ b200_nemo/config_common.sh, config_common_8b.sh, '
  'config_common_cg.sh)', 'B200', 16, 64, 1, 2, 0.1943, 92, '0.1942 ... 0.1944', 0.1926, 'B',
  'logs print only MLLOG lines; MINIBS 1, MICRO_BATCH_SIZE 1, TP 1, PP 1, CP 2, full-iteration CUDA graphs; '
  'InfiniBand (rate not stated)'),
 ('Verda/results/b200_8x8_ngc25.09', 'the logs\' rank-0 config dump (DLPAL config DGXB200_8x8x1xtp1pp1cp2_8b; '
  'Verda/benchmarks/llama31_8b/implementations/b200_8x8_ngc25.09)', 'B200', 8, 32, 1, 2, 0.1922, 150,
  '0.1915 ... 0.1932', 0.1908, 'A',
  'printed: tensor_model_parallel_size 1, context_parallel_size 2, micro_batch_size 1, sequence_parallel False, '
  'fp8 hybrid, fp8_recipe tensorwise, fp4 None, fp8_param_gather true, use_distributed_optimizer true, '
  'overlap_grad_reduce / overlap_param_gather true, bucket_size 134217728 (2 bf16 buckets: embedding, output layer; '
  '33 fp8 buckets, one layer each), enable_cuda_graph 1 (full_iteration), recompute_granularity None; system json: '
  '8 x 8 B200-SXM-180GB, host networking \'100GbE InfiniBand\' (per-GPU rate unclear: blank)'),
 ('Dell/results/2xXE9685Lx8B200-SXM-180GB', 'the logs\' rank-0 config dump (DLPAL config '
  'XE9685Lx8B200-SXM-180GB_2x8x2xtp1pp1cp1; Dell/benchmarks/llama31_8b/implementations/nemo/'
  'config_XE9685Lx8B200-SXM-180GB_2x8x2xtp1pp1cp1.sh)', 'B200', 2, 32, 2, 1, 0.5868, 80, '0.5850 ... 0.5898', 0.5748,
  'A', 'printed: tensor_model_parallel_size 1, context_parallel_size 1, micro_batch_size 2, sequence_parallel False, '
  'fp8 hybrid, fp8_recipe tensorwise, fp4 None, fp8_param_gather true, bucket_size 768000000 (1 bf16 bucket, 9 fp8 '
  'buckets), enable_cuda_graph 1 (full_iteration); H285\'s layout (Dell XE9680L) on XE9685L hosts; network not '
  'stated in the system json'),
 ('Dell/results/1xXE9780x8B300-SXM-270GB', 'the logs\' rank-0 config dump (DLPAL config '
  'XE9780x8B300-SXM-280GB_1x8x2xtp1pp1cp1_8b; Dell/benchmarks/llama31_8b/implementations/nemo/'
  'config_XE9780x8B300-SXM-270GB_1x8x2xtp1pp1cp1_8b.sh)', 'B300', 1, 16, 2, 1, 0.5484, 133, '0.5481 ... 0.5486',
  0.5479, 'A', 'printed: tensor_model_parallel_size 1, context_parallel_size 1, micro_batch_size 2, fp8 hybrid, '
  'fp8_recipe tensorwise, fp4 None, fp8_param_gather true, bucket_size 134217728, enable_cuda_graph 1 '
  '(full_iteration); system json: 1 x 8 B300-SXM-270GB'),
 ('Supermicro/results/AS-8126GS-NB3RT', 'the logs\' rank-0 config dump (DLPAL config DGXB200_1x8x2xtp1pp1cp1_8b; '
  'Supermicro/benchmarks/llama31_8b/implementations/AS-8126GS-NB3RT/config_DGXB200_1x8x2xtp1pp1cp1_8b.sh)', 'B300', 1,
  16, 2, 1, 0.5505, 131, '0.5499 ... 0.5514', 0.5501, 'A',
  'printed: tensor_model_parallel_size 1, context_parallel_size 1, micro_batch_size 2, fp8 hybrid, fp8_recipe '
  'tensorwise, fp4 None, fp8_param_gather true, bucket_size 134217728, enable_cuda_graph 0 (the config sets '
  'FULL_CUDA_GRAPH=0, MCORE_CUDA_GRAPH=0: no CUDA graphs, unlike the other B300 row); system json: 1 x 8 '
  'B300-SXM-270GB (Blackwell Ultra), air-cooled'),
]
# DDP bucket_size (parameters): printed in the DistributedDataParallelConfig line of the logs, or for the University of
# Florida runs (no config dump) conf/custom.yaml's default 'bucket_size: ${oc.env:BUCKET_SIZE,134217728}' of its
# b200_nemo code, whose config_common_8b.sh (unlike NVIDIA's, BUCKET_SIZE=768000000) sets none
ML8_BUCKET = {'Verda/results/b200_8x8_ngc25.09': (134217728, 'printed'),
              'Dell/results/2xXE9685Lx8B200-SXM-180GB': (768000000, 'printed'),
              'Dell/results/1xXE9780x8B300-SXM-270GB': (134217728, 'printed'),
              'Supermicro/results/AS-8126GS-NB3RT': (134217728, 'printed')}
for (rdir, cfg, gpu, nodes, gbs, mbs, cp, step_s, n, per_run, cc_s, trust, note) in ML8_NV:
    gpus = nodes * 8
    dp = gpus // cp
    assert gbs == dp * mbs, rdir  # GA 1 as logged
    add(id=f'H{600 + len([r for r in rows if r.get("id", "").startswith("H6")]):03d}',
        source=(f"MLPerf Training v5.1 Llama 3.1 8B: {ML8} {rdir}/llama31_8b/result_*.txt (tracked_stats "
                f"train_step_time) with {cfg}"),
        trust=trust, **L8_31, seq_len=8192, global_batch_seqs=gbs, micro_batch=mbs, gpu=gpu, num_gpus=gpus, tp=1, pp=1,
        vpp=1, dp=dp, cp=cp, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='none', precision='fp8',
        framework='nemo', fp8_recipe='cs', tp_comm_overlap=0, grad_reduce_dtype='bf16', fp8_param_gather=1,
        ddp_bucket_size=ML8_BUCKET.get(rdir, (134217728, ''))[0],
        measured_tokens_per_s_per_gpu=round(gbs * 8192 / step_s / gpus, 1), measured_step_time_s=step_s, oom=0,
        derivation=(f"tokens/s/GPU = GBS {gbs} x 8192 tokens / {step_s} s / {gpus} GPUs; {step_s} s = median of the {n} "
                    f"per-block 'tracked_stats' train_step_time values (mlperf_common callbacks/logging.py) in the 10 "
                    f"logs (per-log medians {per_run} s; the per-32-step custom_callbacks values give {cc_s} s). "
                    f"Logged: global_batch_size {gbs}, gradient_accumulation_steps 1, max_sequence_length 8192; "
                    f"{nodes} node(s) x 8 {gpu}, CP {cp}, micro batch {mbs} -> DP {dp} (GBS = DP x {mbs}). {note}. "
                    + ML8_ENGINE + "; ddp_bucket_size " + (
                        f"{ML8_BUCKET[rdir][0]}: DistributedDataParallelConfig(bucket_size=...) as the logs print it"
                        if rdir in ML8_BUCKET else
                        "134217728: b200_nemo/conf/custom.yaml default (BUCKET_SIZE not set by the config scripts)")))
# AMD-code runs: (results dir, implementation dir, gpu, samples/s median, n values, per-log medians, trust, note)
ML8_AMD = [
 ('Dell/results/XE9785L_8xMI355X', 'Dell/benchmarks/llama31_8b/implementations/AMD (config_MI355X_1x8x1_8b.sh, '
  'src/train.py)', 'MI355X', 29.355765, 150, 'B', 'system json Dell XE9785L, 8 x AMD Instinct MI355X, air-cooled'),
 ('Supermicro/results/8xMI355X_2xEPYC_9575F', 'Supermicro/benchmarks/llama31_8b/implementations/'
  '8xMI355X_2xEPYC_9575F (config_MI355X_1x8x1_8b.sh, src/train.py)', 'MI355X', 29.710888, 147, 'B',
  'system json Supermicro, 8 x AMD Instinct MI355X, DLC (direct liquid) cooling; the logs print submission_org AMD'),
 ('GigaComputing/results/G893-ZX1-AAX4_pytorch', 'GigaComputing/benchmarks/llama31_8b/implementations/MI355X/nemo '
  '(config_MI355X_1x8x1_8b.sh, src/train.py)', 'MI355X', 29.097482, 147, 'B',
  'system json G893-ZX1-AAX4, 8 x AMD Instinct MI355X, air-cooled; the config script sets MBS=4, but the logs print '
  'GBS 32 with gradient_accumulation_steps 2 on 8 GPUs, i.e. micro batch 2: the logged figures are used'),
 ('Cisco/results/1xC885A_M8-8xMI350X-OAM-288GB', 'AMD\'s implementation (Cisco publishes no llama31_8b AMD code; '
  'its logs print submission_org AMD and AMD\'s layout): AMD/benchmarks/llama31_8b/implementations/'
  'MI350X_EPYC_9575F_pytorch_llama3_8b (config_MI350X_1x8x1_8b.sh, src/train.py)', 'MI350X', 24.096721, 146, 'B',
  'system json Cisco UCS C885A M8, 8 x AMD Instinct MI350X, air-cooled'),
]
for (rdir, impl, gpu, sps, n, trust, note) in ML8_AMD:
    add(id=f'H{600 + len([r for r in rows if r.get("id", "").startswith("H6")]):03d}',
        source=(f"MLPerf Training v5.1 Llama 3.1 8B: {ML8} {rdir}/llama31_8b/result_*.txt (tracked_stats throughput) "
                f"with {impl}"),
        trust=trust, **L8_31, seq_len=8192, global_batch_seqs=32, micro_batch=2, gpu=gpu, num_gpus=8, tp=1, pp=1,
        vpp=1, dp=8, cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='none', precision='fp8',
        framework='nemo', fp8_recipe='delayed', grad_reduce_dtype='bf16', fp8_param_gather=1,
        measured_tokens_per_s_per_gpu=round(sps * 8192 / 8, 1), measured_step_time_s=round(32 / sps, 4), oom=0,
        derivation=(f"tokens/s/GPU = {sps} samples/s x 8192 tokens / 8 GPUs: the median of the {n} 'tracked_stats' "
                    f"throughput values (samples/s over each block's training steps, evaluation excluded: "
                    f"src/callbacks.py) pooled over the 10 logs; step time = GBS 32 / that rate. Logged: "
                    f"global_batch_size 32, gradient_accumulation_steps 2, max_sequence_length 8192 -> 1 node x 8 "
                    f"GPUs, DP 8, micro batch 2. Engine as H257 / H400 (AMD's src/train.py: NeMo 2.0 / Megatron-Core, "
                    f"use_distributed_optimizer -> zero 1, grad_reduce_in_fp32=False -> bf16, fp8 'hybrid' delayed "
                    f"scaling (amax history 4, most_recent), FP8_PARAMS=1 -> fp8_param_gather 1, no recompute: "
                    f"inferred from that code, not printed in these logs -> trust B). {note}"))
# END SECTION heldout-mlperf8b
# BEGIN SECTION heldout-moedata (ids H700+): MoE training runs published outside NVIDIA's NeMo / Megatron-Bridge /
# dgxc tables, MLPerf, DeepSeek and AMD Primus, gathered 2026-11-29 (issue 9). Held out: nothing was tuned to them.
def _h7():
    return f'H{700 + len([r for r in rows if r.get("id", "").startswith("H7")]):03d}'
# (1) InternLM/xtuner docs/en/benchmark/megatron_moe_benchmark.md at 79f2136 ("Megatron MoE Training Benchmark and
# Tuning Guide"; the Chinese twin docs/zh_cn/benchmark/megatron_moe_benchmark.md at bfafd26 prints the same tables):
# Qwen3-235B-A22B on 256 H800, Megatron-Core through alibaba/Pai-Megatron-Patch at 2b201af (image
# pai-megatron-patch:25.04). What the page states for every row: seq 4096, bf16 (TFLOPs quoted against 989.4 = the H800
# dense BF16 peak), mbs 1 unless printed, zero-1 distributed optimizer ("Zero1 is a must-have"),
# --moe-router-force-load-balancing (forced balance), --moe-permute-fusion, no CUDA graphs, PP layout with one layer
# fewer on the first and last stage (94 layers as 96 slots). recompute=select is
# '--recompute-granularity selective --recompute-modules moe_act layernorm', recompute=moe is 'moe layernorm',
# recompute=full the example script's '--recompute-method uniform --recompute-num-layers 1 --recompute-granularity
# full' (MP_AC_LAYERS default 1). From the example the page says it follows (Pai-Megatron-Patch 2b201af
# examples/qwen3/run_mcore_qwen3.sh and examples/qwen3/README.md, not printed on the page -> trust B):
# --moe-token-dispatcher-type alltoall unless 'deepep' is printed, ETP 1 (the README's launch line), sequence
# parallel with TP > 1, --attention-backend flash (FL=true in the README's launch line; flash-attn, no FA3 in the
# image: the README says FA3 must be installed by hand). Rows not printed twice; the four capacity-factor rows
# (capacity 1-5, deepep) are left out: meshplan has no capacity-factor / token-dropping input. nic: not stated.
XT = "InternLM/xtuner docs/en/benchmark/megatron_moe_benchmark.md at 79f2136 (Megatron MoE Training Benchmark and Tuning Guide, table '{t}')"
XT_ROWS = [  # table, tp, ep, pp, vpp, mbs, recompute, modules, gbs, step_s, tokens/s/GPU, dispatcher, ogr, tpo
 ('TP vs PP', 2, 8, 32, 3, 1, 'selective', 'layernorm+moe_act', 2048, 22.42, 1461.56, 'alltoall', None, None),
 ('TP vs PP', 4, 8, 8, 4, 1, 'none', '', 2048, 35.481, 923.53, 'alltoall', None, None),
 ('Trying Different EP Settings', 2, 32, 8, 4, 1, 'selective', 'layernorm+moe_act', 2048, 35.392, 925.87, 'alltoall', None, None),
 ('Trying Different EP Settings', 2, 32, 8, 4, 1, 'selective', 'layernorm+moe_act', 2048, 25.73, 1273.54, 'deepep', None, None),
 ('Trying Communication Overlap', 2, 8, 8, 1, 1, 'selective', 'layernorm+moe_act', 2048, 27.555, 1189.17, 'alltoall', None, None),
 ('Trying Communication Overlap', 2, 8, 8, 1, 1, 'selective', 'layernorm+moe_act', 2048, 29.66, 1104.8, 'alltoall', 1, None),
 ('Trying Communication Overlap', 2, 8, 8, 1, 1, 'selective', 'layernorm+moe_act', 2048, 29.276, 1119.26, 'alltoall', 1, 1),
 ('Trying Communication Overlap', 2, 8, 32, 3, 4, 'full', '', 4096, 43.495, 1506.76, 'alltoall', None, None),
 ('Trying Communication Overlap', 2, 8, 32, 1, 4, 'full', '', 8192, 92.652, 1414.68, 'alltoall', None, None),
 ('Recomputation', 1, 8, 32, 3, 1, 'selective', 'moe+layernorm', 2048, 22.946, 1428.04, 'alltoall', None, None),
 ('Recomputation', 1, 8, 32, 3, 4, 'full', '', 4096, 42.537, 1540.68, 'alltoall', None, None),
 ('Recomputation', 1, 8, 32, 3, 8, 'full', '', 8192, 86.186, 1520.8, 'alltoall', None, None),
]
for (t, tp, ep, pp, vpp, mbs, rc, mods, gbs, step, tps, disp, ogr, tpo) in XT_ROWS:
    dp = 256 // (tp * pp)
    extra = {}
    if ogr is not None:
        extra['overlap_grad_reduce'] = ogr
    if tpo is not None:
        extra['tp_comm_overlap'] = tpo
    label = (f"tp{tp}, ep{ep}{', deepep' if disp == 'deepep' else ''}, pp{pp}{f', vpp{vpp}' if vpp > 1 else ''}, "
             f"mbs={mbs}, recompute={ {'selective': 'select' if 'moe_act' in mods else 'moe', 'full': 'full', 'none': '(none printed)'}[rc] }"
             + (', zero overlap' if ogr and not tpo else '') + (', zero/tp overlap' if tpo else ''))
    add(id=_h7(), source=XT.format(t=t), trust='B', **SH['Q235'], seq_len=4096, global_batch_seqs=gbs, micro_batch=mbs,
        gpu='H800-SXM-80GB', num_gpus=256, tp=tp, pp=pp, vpp=vpp, dp=dp, cp=1, ep=ep, etp=1, zero=1,
        sequence_parallel=1 if tp > 1 else 0, recompute=rc, recompute_modules=mods, precision='bf16',
        framework='megatron', moe_dispatcher=disp, attention_kernel='fa2', **extra,
        measured_tokens_per_s_per_gpu=tps, measured_step_time_s=step, oom=0,
        derivation=(f"Row '{label}' of the page's table '{t}': TimePerIter {step} s and Tokens/GPU/Second {tps} as "
                    f"printed (= {gbs} x 4096 / {step} / 256); SeqLen 4096, GBS {gbs}, 256 H800; DP = 256 / (TP {tp} x "
                    f"PP {pp}) = {dp}, EP {ep} folded over DP x TP, ETP 1 (example README), zero 1, bf16, forced "
                    f"load balance (--moe-router-force-load-balancing), dispatcher {disp}"
                    + (", --overlap-grad-reduce --overlap-param-gather (the row's 'zero overlap')" if ogr else "")
                    + (", --tp-comm-overlap (the row's 'tp overlap')" if tpo else "")
                    + "; recompute " + ({'selective': f"selective, modules {mods}", 'full': "full, uniform, 1 layer per "
                    "checkpoint (example script default)", 'none': "none (the row prints no recompute)"}[rc])
                    + "; attention flash-attn 2 (--attention-backend flash with FL=true, no FA3 in the image); "
                    "Qwen3-235B-A22B shape as the other Qwen3 rows (94 layers, uneven first/last PP stages as the page "
                    "says). Trust B: dispatcher default, ETP and attention backend come from the example script the "
                    "page says it follows, not from the page."))
# (2) FlagOpen/FlagPerf (BAAI) training/nvidia/qwen1.5_MoE-megatron/README.md at 6faf9c1f (2024-04-30), table
# '性能指标' (token/p/s, mem, MFU), with training/nvidia/qwen1.5_MoE-megatron/config/config_A800x1x8.py and
# training/benchmarks/qwen1.5_MoE/megatron/megatron_pai_main.sh at the same commit: the case FlagPerf calls
# "qwen1.5_14B_MoE" is Pai-Megatron-Patch's Qwen1.5 MoE example as the script builds it -- 24 layers, hidden 2048,
# 16 heads (no GQA flag: MHA), --ffn-hidden-size 5504 per expert, 8 experts top-2, no shared expert, untied
# embeddings, Qwen2 tokenizer + --extra-vocab-size 293 = 151936, TE, --use-flash-attn, --recompute-activations
# (Megatron's selective = core attention), --use-distributed-optimizer (zero 1), EP 1, mbs 1, GBS 512, seq 8192,
# Megatron-LM-240405 (its default dispatcher is allgather; with EP 1 there is no token exchange). The FLOPs FlagPerf
# quotes (MFU 32.95% at 312 TFLOP/s for 7450.7 token/p/s = 2.3B x 6 per token) agree with this shape.
# GPU: DGX A800 80GB, written as A100-SXM-80GB: the A800 is the A100 SXM4 80GB die, clocks and HBM with NVLink capped
# at 400 GB/s (the A100 has 600); on one node with PP 2 x DP 4 the NVLink carries only the pipeline's activations and
# one gradient reduce-scatter / parameter all-gather per 128 micro-batches, so the cap is not modelled (trust B).
FP = ("FlagOpen/FlagPerf training/nvidia/qwen1.5_MoE-megatron/README.md at 6faf9c1f (BAAI; table 性能指标, row "
      "'A800单机8卡（1x8）' {p}) with config/config_A800x1x8.py and training/benchmarks/qwen1.5_MoE/megatron/"
      "megatron_pai_main.sh")
for prec, tps, mem in (('bf16', 7450.7, 66), ('fp16', 7537.7, 59)):
    add(id=_h7(), source=FP.format(p=prec), trust='B', model='FlagPerf Pai-Qwen1.5-MoE (8 experts top-2)', arch='moe',
        layers=24, hidden=2048, heads=16, kv_heads=16, ffn=5504, vocab=151936, moe_experts=8, moe_topk=2,
        moe_expert_ffn=5504, moe_shared_experts=0, moe_dense_layers=0, attention='mha', mlp='swiglu', tied_embeddings=0,
        seq_len=8192, global_batch_seqs=512, micro_batch=1, gpu='A100-SXM-80GB', num_gpus=8, tp=1, pp=2, vpp=1, dp=4,
        cp=1, ep=1, etp=1, zero=1, sequence_parallel=0, recompute='selective', recompute_modules='core_attn',
        precision=prec, framework='megatron', measured_tokens_per_s_per_gpu=tps,
        measured_step_time_s=round(512 * 8192 / (tps * 8), 2), oom=0,
        derivation=(f"token/p/s {tps} (tokens per GPU per second) as printed, parallel TP1PP2DP4 on one 8-GPU A800 node, "
                    f"precision {prec}; step time = GBS 512 x 8192 / ({tps} x 8). Shape and engine flags from "
                    "megatron_pai_main.sh (see the block comment: 8 experts of 5504, top-2, MHA 16 heads, selective "
                    "recompute, distributed optimizer, EP 1); config_A800x1x8.py: mbs 1, gbs 512, seq 8192, TP 1, "
                    "PP 2. A800 written as A100-SXM-80GB (same die; only NVLink is capped, which this one-node "
                    f"PP2/DP4 layout barely uses). The page's mem column reads {mem}/80 GiB (device memory in use "
                    "as the harness monitors it, allocator cache and CUDA context included): not entered as a "
                    "peak-memory figure."))
# (3) PyTorch's torchtitan / torchao MoE runs (Meta and contributors), Llama 4 Scout (torchtitan llama4 "17bx16e":
# dim 5120, 48 layers, 40 heads, 8 KV heads, vocab 202048, 16 routed experts top-1 + 1 shared expert on every layer;
# expert hidden = 4*5120 -> 2/3 -> x1.2 -> /(top_k 1 + shared 1) -> multiple of 2048 = 8192, torchtitan
# torchtitan/models/llama4/__init__.py and model/model.py auto_scale_hidden_dim at b3da1a2) and DeepSeek-V3 16B
# (torchtitan torchtitan/models/deepseek_v3/__init__.py "16B" at 8a2686c: 27 layers, dim 2048, 16 heads, MLA with
# kv_lora_rank 512, no q compression, qk nope/rope 128/64, v 128; 1 dense layer of 10944, 64 experts of 1408 top-6
# + 2 shared, vocab 102400). torchtitan's logged tps is tokens per second per device and its memory figure the peak
# reserved memory (torchtitan/components/metrics.py), which is what validate compares (peak_reserved_bytes).
L4 = dict(arch='moe', hidden=5120, heads=40, kv_heads=8, head_dim=128, ffn=8192, vocab=202048, moe_experts=16,
          moe_topk=1, moe_expert_ffn=8192, moe_shared_experts=1, moe_dense_layers=0, attention='gqa', mlp='swiglu',
          tied_embeddings=0)
TAO = ("pytorch/ao torchao/prototype/moe_training/README.md at 0b1bb11 (table 'End-to-end training benchmark with "
       "TorchTitan: Llama4 Scout vs bfloat16 baseline', row '{r}')")
for rname, prec, rec, tps, mem in (('bf16 baseline', 'bf16', '', 49381.0, 145.55),
                                   ('MXFP8 for Linears + Grouped GEMMs', 'fp8', 'mx', 70747.0, 145.32)):
    add(id=_h7(), source=TAO.format(r=rname), trust='B', model='Llama 4 Scout (2 of 48 layers)', layers=2, **L4,
        seq_len=8192, global_batch_seqs=32, micro_batch=8, gpu='B200', num_gpus=4, gpus_per_node=4, tp=1, pp=1, vpp=1,
        dp=4, cp=1, ep=4, etp=1, zero=3, sequence_parallel=0, recompute='none', precision=prec, fp8_recipe=rec,
        framework='torchtitan', compiled_loss=1, measured_tokens_per_s_per_gpu=tps, measured_peak_mem_gib=mem, oom=0,
        derivation=(f"Throughput (Median Tokens/s) {tps} and Max Memory {mem} GiB of the row '{rname}' as printed "
                    "(torchtitan's per-device tps and peak reserved memory). The page: 'Single node benchmarks with "
                    "4xB200', 'Llama4 16e default configs; FSDP=4, EP=4; AC=none; compile=True; seq_len=8192; "
                    "local_bs=8', layers reduced from 48 to 2 (torchtitan's 17bx16e shape otherwise); its command: "
                    "NGPU=4, data_parallel_shard_degree 4, expert_parallel_degree 4, tensor_parallel_degree 1, "
                    "--compile.enable (torchtitan's Compile.components default ['model', 'loss'] -> compiled_loss 1), "
                    "activation_checkpoint none"
                    + ("; --model.converters quantize.grouped_mm.mx,quantize.linear.mx: MXFP8 on the routed "
                       "experts' grouped GEMMs and the linear layers (torchao MX recipe, fp8_recipe mx)" if prec == 'fp8'
                       else "") + ". GBS = 8 x 4 = 32 sequences. Trust B: per-GPU reading of 'Tokens/s' (torchtitan "
                    "logs tps per device) and the B200 board's power setting are not printed."))
TT_MX = ("pytorch/torchtitan docs/mxfp8.md at b3da1a2 (MXFP8 Training on B200 GPUs, 'MoE models' table, row '{r}'; "
         "the same run in pytorch/ao torchao/prototype/moe_training/README.md at 0b1bb11)")
for rname, prec, rec, tps in (('None (bfloat16)', 'bf16', '', 6169.0), ('mxfp8', 'fp8', 'mx', 7401.0)):
    add(id=_h7(), source=TT_MX.format(r=rname), trust='C', model='Llama 4 Scout 17B-16E', layers=48, **L4,
        seq_len=8192, global_batch_seqs=256, micro_batch=1, gpu='GB200', num_gpus=256, tp=1, pp=1, vpp=1, dp=256,
        cp=1, ep=16, etp=1, zero=3, sequence_parallel=0, recompute='none', precision=prec, fp8_recipe=rec,
        framework='torchtitan', compiled_loss=1, measured_tokens_per_s_per_gpu=tps, oom=0,
        derivation=(f"Median tokens/s {tps} of the row '{rname}' read as per GPU (torchtitan's tps). Stated: Llama4 "
                    "Scout, C4, seq 8192, 'Parallelisms (64 nodes of 4 devices each = 256 chips): FSDP=256 (on "
                    "attention layers, shared experts, dense layer FFNs) ... EP=16 (on routed experts)', AC none, "
                    "torch.compile on" + ("; mxfp8 on the routed experts' grouped GEMMs and on all linear layers "
                    "except output, router.gate, attention.wk, attention.wv (those stay bf16 here; meshplan's fp8 "
                    "covers all linears)" if prec == 'fp8' else "")
                    + ". Trust C, the page contradicts itself and its twin: its title says '512 GPU training on 64 "
                    "node GB200 cluster' but the config lists 256 chips (256 used; GB200 compute trays hold 4 GPUs); "
                    "it says 'Local batch size: 10' where torchao's README prints 'Local batch size: 1' for the same "
                    "run. 1 is used: with AC none, 10 x 8192 tokens cannot fit -- Korthikanti et al. 2022 (arXiv "
                    "2205.05198) eq. 1 gives 34 s b h bytes per layer before the attention scores, 34 x 8192 x 10 x "
                    "5120 x 48 layers = 684 GB per GPU against the GB200's 186 GB (at b = 1: 68 GB); GBS = 256. "
                    "'256/4=64' expert-FSDP contradicts EP 16. "
                    "NVL72 domain from the GPU catalog (the page does not say how the 64 trays were cabled)."))
# DeepSeek-V3 16B on 8 H100: pytorch/torchtitan issue #1789 (syed-ahmed, 2025-10-02, NVIDIA), which PR #1792
# (82a9530, 'make the 16B default toml config safe for 80GB H100') closed by lowering local_batch_size 8 -> 4.
DS16 = dict(model='DeepSeek-V3 16B (torchtitan)', arch='moe', layers=27, hidden=2048, heads=16, kv_heads=16,
            ffn=10944, vocab=102400, moe_experts=64, moe_topk=6, moe_expert_ffn=1408, moe_shared_experts=2,
            moe_dense_layers=1, attention='mla', mlp='swiglu', tied_embeddings=0, q_lora_rank=0, kv_lora_rank=512,
            qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)
add(id=_h7(), source=("pytorch/torchtitan issue #1789 (DeepSeek-V3-16B OOMs on 8 x H100 80GB HBM3, 2025-10-02) with "
                      "torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml at 8a2686c and PR #1792 (82a9530)"),
    trust='C', **DS16, seq_len=4096, global_batch_seqs=32, micro_batch=4, gpu='H100-SXM-80GB', num_gpus=8, tp=1, pp=1,
    vpp=1, dp=8, cp=1, ep=8, etp=1, zero=3, sequence_parallel=0, recompute='selective', precision='bf16',
    framework='torchtitan', compiled_loss=1, attention_full_ac=1, measured_tokens_per_s_per_gpu=11584.5,
    measured_peak_mem_gib=73.32, oom=0,
    derivation=("tps 11,636 / 11,758 / 11,533 / 11,254 at steps 10-40 of the issue's log (median 11584.5; step 1 "
                "excluded), memory 73.32 GiB (92.70%) at every step. Config: the issue runs the then-default "
                "deepseek_v3_16b.toml (8a2686c: FSDP over the 8 GPUs, EP 8, ETP 1, TP 1, PP 1, seq 4096, AC "
                "selective 'op', compile on for the loss only) on 8 x H100 80GB HBM3, where local_batch_size 8 OOMs; "
                "the log shown is the run with the batch lowered ('instead of lowering local_batch_size' for the EP 1 "
                "variant), and the fix PR #1792 set local_batch_size 4: micro batch 4 is inferred from that (trust "
                "C). The model's use_flex_attn with block_causal (document) masking is not in the schema: full "
                "causal attention is charged. attention_full_ac 1: at 8a2686c a use_flex_attn model under op SAC with "
                "the model not compiled gets full AC on its attention modules "
                "(torchtitan/distributed/activation_checkpoint.py _apply_op_sac_to_transformer_block_with_flex), "
                "from the code, not from the issue."))
# END SECTION heldout-moedata
for i, r in enumerate(rows):
    r['id'] = r.get('id') or f'H{i+1:03d}'  # a block may set its ids (heldout-amd-2: H400+, heldout-trainnew: H500+)
# SECTION heldout-cudagraph: Megatron-Bridge recipes' CUDA-graph settings (optional column cuda_graph:
# none / full / '+'-joined Transformer Engine capture scopes; meshplan/cost/ops.py graph_replay) for the rows whose
# recipe layout matches the row, read at the release tag of the row's container (each suffix names file and tag)
cols += ['cuda_graph']
CUDA_GRAPH = {
    'H033': ('none', "; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.2.0 workload_base_configs.py QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG sets no cuda_graph_impl, so the recipe's own src/megatron/bridge/recipes/qwen/qwen3_moe.py cuda_graph_impl='none' stands"),
    'H036': ('moe_router+moe_preprocess', "; cuda_graph moe_router+moe_preprocess from NVIDIA-NeMo/Megatron-Bridge v0.2.0 scripts/performance/configs/qwen3/workload_base_configs.py QWEN3_30B_A3B_B200_FP8_MX_BASE_CONFIG (= the FP8_CS preset) (cuda_graph_impl='transformer_engine', cuda_graph_scope=['moe_router', 'moe_preprocess']; applied by scripts/performance/utils/helpers.py set_cuda_graph_overrides)"),
    'H042': ('moe_router+moe_preprocess', "; cuda_graph moe_router+moe_preprocess from NVIDIA-NeMo/Megatron-Bridge v0.2.0 scripts/performance/configs/qwen3/workload_base_configs.py QWEN3_30B_A3B_GB200_FP8_MX_BASE_CONFIG (cuda_graph_impl='transformer_engine', cuda_graph_scope=['moe_router', 'moe_preprocess']; applied by scripts/performance/utils/helpers.py set_cuda_graph_overrides)"),
    'H053': ('full', "; cuda_graph full: NVIDIA-NeMo/Megatron-Bridge v0.6.0 src/megatron/bridge/perf_recipes/qwen/common.py _enable_hybridep_full_iteration_mxfp8: cuda_graph_impl='full_iteration' (the whole step captured)"),
    'H057': ('none', "; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.5.0 / v0.5.1 configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 sets no cuda_graph_impl (the BF16 preset sets transformer_engine), so src/megatron/bridge/recipes/qwen/qwen3_moe.py cuda_graph_impl='none' stands"),
    'H062': ('attn+moe_router+moe_preprocess', "; cuda_graph attn+moe_router+moe_preprocess from NVIDIA-NeMo/Megatron-Bridge v0.4.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1 (= the BF16_V1 preset: cuda_graph_impl='transformer_engine', cuda_graph_scope=['attn', 'moe_router', 'moe_preprocess'])"),
    'H063': ('none', "; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.4.0 / v0.4.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2 (= the FP8_CS_V2 preset) sets no cuda_graph_impl, so src/megatron/bridge/recipes/qwen/qwen3_moe.py cuda_graph_impl='none' stands"),
    'H064': ('none', "; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.4.0 / v0.4.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2 sets no cuda_graph_impl, so src/megatron/bridge/recipes/qwen/qwen3_moe.py cuda_graph_impl='none' stands"),
    'H067': ('attn+moe_router+moe_preprocess', "; cuda_graph attn+moe_router+moe_preprocess from NVIDIA-NeMo/Megatron-Bridge v0.3.0 and v0.3.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2 (= the FP8_CS_V2 preset) (cuda_graph_impl='transformer_engine', cuda_graph_scope=['attn', 'moe_router', 'moe_preprocess'])"),
    'H071': ('none', "; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.2.0 scripts/performance/configs/qwen3/workload_base_configs.py QWEN3_235B_A22B_H100_FP8_CS_BASE_CONFIG sets no cuda_graph_impl, so src/megatron/bridge/recipes/qwen/qwen3_moe.py cuda_graph_impl='none' stands"),
    'H077': ('full', "; cuda_graph full: NVIDIA-NeMo/Megatron-Bridge v0.1.0rc4 scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml gb200 num_gpus_8 cuda_graphs: true -> scripts/performance/utils/helpers.py set_cuda_graph_overrides: model.enable_cuda_graph = True, whose Megatron-Core 0.14 default cuda_graph_scope 'full' captures each whole TransformerLayer (NVIDIA/Megatron-LM core_v0.14.0 megatron/core/transformer/transformer_config.py); capturable because run_script.py apply_moe_token_drop sets capacity factor 1.0 with moe_pad_expert_input_to_capacity, for which MoEAlltoAllTokenDispatcher keeps cuda_sync_point 'no_sync' (moe/token_dispatcher.py)"),
    'H082': ('full', "; cuda_graph full: NVIDIA-NeMo/Megatron-Bridge v0.1.0rc4 scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml b200 num_gpus_8 cuda_graphs: true -> scripts/performance/utils/helpers.py set_cuda_graph_overrides: model.enable_cuda_graph = True, whose Megatron-Core 0.14 default cuda_graph_scope 'full' captures each whole TransformerLayer (NVIDIA/Megatron-LM core_v0.14.0 megatron/core/transformer/transformer_config.py); capturable because run_script.py apply_moe_token_drop sets capacity factor 1.0 with moe_pad_expert_input_to_capacity, for which MoEAlltoAllTokenDispatcher keeps cuda_sync_point 'no_sync' (moe/token_dispatcher.py)"),
    'H083': ('none', '; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.1.0rc4 scripts/performance/configs/qwen3/qwen3_235b_a22b_llm_pretrain.yaml perf_matrix b200 cuda_graphs: false (scripts/performance/utils/helpers.py set_cuda_graph_overrides: enable_cuda_graph False)'),
    'H084': ('none', '; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.1.0rc4 scripts/performance/configs/qwen3/qwen3_235b_a22b_llm_pretrain.yaml perf_matrix b200 cuda_graphs: false (scripts/performance/utils/helpers.py set_cuda_graph_overrides: enable_cuda_graph False)'),
    'H086': ('none', '; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.1.0rc4 scripts/performance/configs/qwen3/qwen3_235b_a22b_llm_pretrain.yaml perf_matrix h100 cuda_graphs: false (scripts/performance/utils/helpers.py set_cuda_graph_overrides: enable_cuda_graph False)'),
    'H183': ('full', "; cuda_graph full: NVIDIA-NeMo/Megatron-Bridge v0.6.0 src/megatron/bridge/perf_recipes/qwen/common.py _enable_hybridep_full_iteration_mxfp8: cuda_graph_impl='full_iteration' (the whole step captured)"),
    'H184': ('full', "; cuda_graph full: NVIDIA-NeMo/Megatron-Bridge v0.6.0 src/megatron/bridge/perf_recipes/qwen/gb300/qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_gb300_fp8mx_config calls qwen/common.py _enable_hybridep_full_iteration_mxfp8: cuda_graph_impl='full_iteration' (the whole step captured)"),
    'H190': ('full', "; cuda_graph full: NVIDIA-NeMo/Megatron-Bridge v0.5.0 / v0.5.1 configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1: cuda_graph_impl='full_iteration', cuda_graph_scope=[] (the whole step captured)"),
    'H196': ('none', "; cuda_graph none: NVIDIA-NeMo/Megatron-Bridge v0.4.0 / v0.4.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2 (= the FP8_CS_V2 preset) sets no cuda_graph_impl, so src/megatron/bridge/recipes/qwen/qwen3_moe.py cuda_graph_impl='none' stands"),
    'H200': ('attn+moe_router+moe_preprocess', "; cuda_graph attn+moe_router+moe_preprocess from NVIDIA-NeMo/Megatron-Bridge v0.3.0 and v0.3.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 (= the FP8_CS_V2 preset) (cuda_graph_impl='transformer_engine', cuda_graph_scope=['attn', 'moe_router', 'moe_preprocess'])"),
}
for _r in rows:
    if _r['id'] in CUDA_GRAPH:
        _r['cuda_graph'], _suffix = CUDA_GRAPH[_r['id']]
        _r['derivation'] += _suffix
add(id='H296', source="Megatron-Bridge docs/performance-summary-archive.md (26.04.01 NeMo container, Pre-Training, table 'Model: Qwen3_30B_a3B' row DGX-GB300)", trust='B', model='Qwen3-30B-A3B', arch='moe', layers='48', hidden='2048', heads='32', kv_heads='4', ffn='6144', vocab='151936', moe_experts='128', moe_topk='8', moe_expert_ffn='768', moe_shared_experts='0', moe_dense_layers='0', head_dim='128', attention='gqa', mlp='swiglu', tied_embeddings='0', seq_len='4096', global_batch_seqs='512', micro_batch='8', gpu='GB300', num_gpus='8', tp='1', pp='1', vpp='1', dp='8', cp='1', ep='8', etp='1', zero='1', sequence_parallel='0', recompute='none', precision='fp8', framework='nemo', measured_tokens_per_s_per_gpu='31744', oom='0', derivation="Row 'DGX-GB300 | 8 | MXFP8 | 512 | 8 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 31744 | 729' of the 26.04.01 section (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md at 067f987): Tokens / sec / GPU as printed (MXFP8); dp = GPUs/(tp*pp*cp); MoE tokens force-balanced among experts, dropless (page footnote); zero 1 (FSDP 0: distributed optimizer) inferred; sequence_parallel 0 (tp 1); MoE dispatcher deepep (flex, hybridep), ep_overlap 0, recompute none from the recipe of this release (NVIDIA-NeMo/Megatron-Bridge v0.4.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1 (= the FP8_CS_V1 preset) (8 GPUs ep8 mbs8 gbs512, moe_flex_dispatcher_backend='hybridep', moe_a2a_overlap default False) and qwen3_llm_pretrain.py (moe_token_dispatcher_type 'flex'; set_qwen3_common_configs: recompute_granularity=None)), the release H062 (26.04.01, DGX-B200) names; cuda_graph moe_router+moe_preprocess from the same preset (cuda_graph_impl='transformer_engine', cuda_graph_scope=['moe_router', 'moe_preprocess']); grad_reduce_dtype bf16 (16-bit gradient buffer and reduction) from Megatron-Bridge v0.4.0 / v0.4.1 scripts/performance/configs/qwen/qwen3_llm_pretrain.py set_qwen3_common_configs: mixed_precision and ddp grad_reduce_in_fp32 = False, called by every config of the model; the same layout under a later recipe (full-iteration CUDA graph, expert-comm overlap): H183 (26.08, 44544)", moe_dispatcher='deepep', ep_overlap='0', fp8_recipe='mx', grad_reduce_dtype='bf16', cuda_graph='moe_router+moe_preprocess')
add(id='H297', source="Megatron-Bridge docs/performance-summary-archive.md (26.04.01 NeMo container, Pre-Training, table 'Model: Qwen3_30B_a3B' row DGX-B300)", trust='B', model='Qwen3-30B-A3B', arch='moe', layers='48', hidden='2048', heads='32', kv_heads='4', ffn='6144', vocab='151936', moe_experts='128', moe_topk='8', moe_expert_ffn='768', moe_shared_experts='0', moe_dense_layers='0', head_dim='128', attention='gqa', mlp='swiglu', tied_embeddings='0', seq_len='4096', global_batch_seqs='512', micro_batch='8', gpu='B300', num_gpus='8', tp='1', pp='1', vpp='1', dp='8', cp='1', ep='8', etp='1', zero='1', sequence_parallel='0', recompute='none', precision='fp8', framework='nemo', measured_tokens_per_s_per_gpu='30720', oom='0', derivation="Row 'DGX-B300 | 8 | MXFP8 | 512 | 8 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 30720 | 704' of the 26.04.01 section (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md at 067f987): Tokens / sec / GPU as printed (MXFP8); dp = GPUs/(tp*pp*cp); MoE tokens force-balanced among experts, dropless (page footnote); zero 1 (FSDP 0: distributed optimizer) inferred; sequence_parallel 0 (tp 1); MoE dispatcher deepep (flex, hybridep), ep_overlap 0, recompute none from the recipe of this release (NVIDIA-NeMo/Megatron-Bridge v0.4.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1 (= the FP8_CS_V1 preset) (8 GPUs ep8 mbs8 gbs512, moe_flex_dispatcher_backend='hybridep', moe_a2a_overlap default False) and qwen3_llm_pretrain.py (moe_token_dispatcher_type 'flex'; set_qwen3_common_configs: recompute_granularity=None)), the release H062 (26.04.01, DGX-B200) names; cuda_graph moe_router+moe_preprocess from the same preset (cuda_graph_impl='transformer_engine', cuda_graph_scope=['moe_router', 'moe_preprocess']); grad_reduce_dtype bf16 (16-bit gradient buffer and reduction) from Megatron-Bridge v0.4.0 / v0.4.1 scripts/performance/configs/qwen/qwen3_llm_pretrain.py set_qwen3_common_configs: mixed_precision and ddp grad_reduce_in_fp32 = False, called by every config of the model; the same layout under a later recipe (full-iteration CUDA graph, expert-comm overlap): H190 (26.06, 40769)", moe_dispatcher='deepep', ep_overlap='0', fp8_recipe='mx', grad_reduce_dtype='bf16', cuda_graph='moe_router+moe_preprocess')
add(id='H298', source="Megatron-Bridge docs/performance-summary-archive.md (26.04.01 NeMo container, Pre-Training, table 'Model: Qwen3_30B_a3B' row DGX-GB200)", trust='B', model='Qwen3-30B-A3B', arch='moe', layers='48', hidden='2048', heads='32', kv_heads='4', ffn='6144', vocab='151936', moe_experts='128', moe_topk='8', moe_expert_ffn='768', moe_shared_experts='0', moe_dense_layers='0', head_dim='128', attention='gqa', mlp='swiglu', tied_embeddings='0', seq_len='4096', global_batch_seqs='512', micro_batch='4', gpu='GB200', num_gpus='8', tp='1', pp='1', vpp='1', dp='8', cp='1', ep='8', etp='1', zero='1', sequence_parallel='0', recompute='none', precision='fp8', framework='nemo', measured_tokens_per_s_per_gpu='26112', oom='0', derivation="Row 'DGX-GB200 | 8 | MXFP8 | 512 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 26112 | 599' of the 26.04.01 section (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md at 067f987): Tokens / sec / GPU as printed (MXFP8); dp = GPUs/(tp*pp*cp); MoE tokens force-balanced among experts, dropless (page footnote); zero 1 (FSDP 0: distributed optimizer) inferred; sequence_parallel 0 (tp 1); MoE dispatcher deepep (flex, hybridep), ep_overlap 0, recompute none from the recipe of this release (NVIDIA-NeMo/Megatron-Bridge v0.4.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1 (8 GPUs ep8 mbs4 gbs512, moe_flex_dispatcher_backend='hybridep', moe_a2a_overlap default False) and qwen3_llm_pretrain.py (moe_token_dispatcher_type 'flex'; set_qwen3_common_configs: recompute_granularity=None)), the release H062 (26.04.01, DGX-B200) names; cuda_graph moe_router+moe_preprocess from the same preset (cuda_graph_impl='transformer_engine', cuda_graph_scope=['moe_router', 'moe_preprocess']); grad_reduce_dtype bf16 (16-bit gradient buffer and reduction) from Megatron-Bridge v0.4.0 / v0.4.1 scripts/performance/configs/qwen/qwen3_llm_pretrain.py set_qwen3_common_configs: mixed_precision and ddp grad_reduce_in_fp32 = False, called by every config of the model; the same layout under a later recipe (full-iteration CUDA graph, expert-comm overlap): none in this file (GB200 stays on the transformer_engine scopes)", moe_dispatcher='deepep', ep_overlap='0', fp8_recipe='mx', grad_reduce_dtype='bf16', cuda_graph='moe_router+moe_preprocess')
add(id='H299', source="Megatron-Bridge docs/performance-summary-archive.md (25.09 NeMo container, Pre-Training, table 'System: DGX-H100')", trust='B', model='Qwen3-30B-A3B', arch='moe', layers='48', hidden='2048', heads='32', kv_heads='4', ffn='6144', vocab='151936', moe_experts='128', moe_topk='8', moe_expert_ffn='768', moe_shared_experts='0', moe_dense_layers='0', head_dim='128', attention='gqa', mlp='swiglu', tied_embeddings='0', seq_len='4096', global_batch_seqs='512', micro_batch='2', gpu='H100-SXM-80GB', num_gpus='16', tp='1', pp='2', vpp='24', dp='8', cp='1', ep='8', etp='1', zero='1', sequence_parallel='0', recompute='none', precision='fp8', framework='nemo', measured_tokens_per_s_per_gpu='10494', oom='0', derivation="Row 'Qwen3_30B_a3B (tokendrop) | 16 | 512 | 2 | 4096 | 0 | 1 | 2 | 1 | 24 | 8 | 32 | 10494 | 241' of the 25.09 section, table 'System: DGX-H100' (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md at 067f987): Tokens / sec / GPU as printed; dp = GPUs/(tp*pp*cp) = 8; the 25.09 tables print no precision column: FP8 current scaling from the recipe, whose H100 entry (NVIDIA-NeMo/Megatron-Bridge v0.1.0rc4 scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml perf_matrix h100 num_gpus_16) is the printed layout (tp1 pp2 vp12 ep8 gbs512) with mbs 1 under bf16 and mbs 2 under fp8_cs: the printed MBS 2 is the fp8_cs run (trust B; the page prints VP 24 where the yaml has vp 12: kept as printed); MoE 'tokendrop' run: scripts/performance/run_script.py apply_moe_token_drop (capacity factor 1.0, moe_pad_expert_input_to_capacity) on the alltoall dispatcher (QwenProvider default 'alltoall', which apply_moe_token_drop asserts); ep_overlap 0: v0.1.0rc4 src/megatron/bridge/training/comm_overlap.py sets overlap_moe_expert_parallel_comm False and run_script.py passes only CommOverlapConfig(tp_comm_overlap=True) for qwen3 (tp 1: no TP overlap); recompute none from the yaml (recompute_granularity null over the recipe's full); zero 1 (FSDP 0: distributed optimizer) inferred; sequence_parallel 0 (tp 1); cuda_graph none: the yaml's h100 cuda_graphs: false (scripts/performance/utils/helpers.py set_cuda_graph_overrides: enable_cuda_graph False); grad_reduce_dtype bf16 (16-bit gradient buffer and reduction) from Megatron-Bridge v0.1.0rc4 scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml: mixed_precision.grad_reduce_in_fp32: false. Same layout as H033 (25.11, dropless, moe_a2a_overlap, 5275 tokens/s/GPU).", moe_dispatcher='alltoall', ep_overlap='0', fp8_recipe='cs', grad_reduce_dtype='bf16', cuda_graph='none')
# END SECTION heldout-cudagraph
assert len({r['id'] for r in rows}) == len(rows), 'duplicate row ids'
# cuda_graph: set from the setting each row's derivation already quotes (its recipe, config script or printed log):
# 'full-iteration CUDA graph' (Megatron-Bridge perf recipes' _enable_*_full_iteration_* helpers, cuda_graph_impl
# 'full_iteration'), 'full_cuda_graph' / 'enable_cuda_graph 1 ... full_iteration' (NeMo MLPerf config_common_cg.sh);
# 'cuda graphs off' / 'no CUDA graphs' / 'enable_cuda_graph 0' -> none (meshplan/cost/ops.py reads full_iteration as
# full)
CUDA_GRAPH_ROWS = {
    'full_iteration': ('H052', 'H053', 'H087', 'H181', 'H182', 'H183', 'H184', 'H190', 'H262', 'H271', 'H272',
                       'H273', 'H274', 'H275', 'H276', 'H277', 'H278', 'H279', 'H280', 'H281', 'H282', 'H283',
                       'H284', 'H285', 'H529', 'H530', 'H531', 'H600', 'H601', 'H602', 'H603', 'H604', 'H605',
                       'H606'),
    'none': ('H263', 'H264', 'H287', 'H288', 'H607'),
}
# moe_dispatcher hybridep (meshplan/plan.py MOE_DISPATCHERS): rows off rack-scale NVLink whose derivation quotes
# the recipe's moe_flex_dispatcher_backend 'hybridep' (B200 / B300 / H100 nodes of 8); 'deepep' on NVL72 already
# runs HybridEP
HYBRIDEP_ROWS = ('H057', 'H062', 'H065', 'H089', 'H189', 'H190', 'H195', 'H197')
for r in rows:
    if r['id'] in HYBRIDEP_ROWS:
        assert r['moe_dispatcher'] == 'deepep' and 'hybridep' in r['derivation'], r['id']
        r['moe_dispatcher'] = 'hybridep'
        r['derivation'] += "; moe_dispatcher hybridep: the recipe's HybridEP backend quoted above"
for r in rows:
    for g, ids in CUDA_GRAPH_ROWS.items():
        if r['id'] in ids and not r.get('cuda_graph'):  # the heldout-cudagraph section's cells stand
            r['cuda_graph'] = g
            r['derivation'] += f"; cuda_graph {g}: the CUDA-graph setting quoted above"
w = csv.DictWriter(open(__import__('pathlib').Path(__file__).with_name('heldout_runs.csv'), 'w', newline=''), fieldnames=cols)
w.writeheader()
for r in rows:
    w.writerow({k: r.get(k, '') for k in cols})
print(len(rows))
