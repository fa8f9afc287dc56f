"""Extract training-sized kernel times from NVIDIA AIConfigurator's measured tables.

Source: github.com/ai-dynamo/aiconfigurator at commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce
(2026-08-21), aic-core/src/aiconfigurator_core/systems/data/<system>/...:
  gemm/trtllm/1.2.0rc5/gemm_perf.parquet             (collector/trtllm/collect_gemm.py)
  attention/trtllm/1.2.0rc5/context_attention_perf.parquet   (collector/trtllm/collect_attn.py)
  comm/nccl/2.29.2/nccl_perf.parquet                 (collector/network/collect_nccl.py)

Usage: python bench/data/make_aic_training_kernels.py <dir with the parquet files> > \
           bench/data/aic_training_kernels.csv
where <dir> holds <system>_gemm.parquet, <system>_ctx.parquet, <system>_nccl.parquet, written
with `git show <commit>:<path>` from a clone (pandas + pyarrow read them; neither is a
dependency of meshplan, so the parquet files and this step stay outside the package).

Selection (training shapes only; the decode GEMMs are aic_h100_trtllm_bf16_small_m_gemm.csv):
  gemm: m in 2k..32k tokens, n and k in 4096..16384 (the table has no 28672), bf16 and per-tensor
        fp8 (gemm_dtype 'fp8', kernel_source torch_flow), H100 / H200 / B200.
  attention: context phase, head dim 128, no window, bf16 Q/K/V and KV cache, 2k-16k tokens (the
        table stops at 16384), 32 or 64 query heads, 8 KV heads or MHA, batch 1-8.
  nccl: 8 GPUs, fp16, all_reduce / all_gather / reduce_scatter, 1 MiB..1 GiB, H100 / H200 /
        B200 at 8 GPUs; GB200 at 4 GPUs (its table holds one 4-GPU tray only).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

GPU = {"h100_sxm": "H100-SXM-80GB", "h200_sxm": "H200-SXM-141GB", "b200_sxm": "B200",
       "gb200": "GB200"}
SIZES = [4096, 5120, 6144, 8192, 10240, 12288, 16384]


def rows(d: Path) -> list[str]:
    out = []
    for sys_, gpu in GPU.items():
        g = d / f"{sys_}_gemm.parquet"
        if g.exists():
            t = pd.read_parquet(g)
            t = t[(t.kernel_source == "torch_flow") & t.gemm_dtype.isin(["bfloat16", "fp8"])
                  & t.m.isin([2048, 4096, 8192, 16384, 32768]) & t.n.isin(SIZES)
                  & t.k.isin(SIZES)]
            for r in t.sort_values(["gemm_dtype", "m", "n", "k"]).itertuples():
                dt = "bf16" if r.gemm_dtype == "bfloat16" else "fp8"
                out.append(f"gemm,{gpu},{dt},{r.m},{r.n},{r.k},,,,,,,,{r.latency * 1e3:.3f}")
        a = d / f"{sys_}_ctx.parquet"
        if a.exists():
            t = pd.read_parquet(a)
            t = t[(t.head_dim == 128) & (t.window_size == 0) & (t.attn_dtype == "bfloat16")
                  & (t.kv_cache_dtype == "bfloat16") & (t.isl >= 2048)
                  & t.num_heads.isin([32, 64]) & t.batch_size.isin([1, 2, 4, 8])
                  & ((t.num_key_value_heads == 8) | (t.num_key_value_heads == t.num_heads))]
            for r in t.sort_values(["num_heads", "num_key_value_heads", "batch_size",
                                    "isl"]).itertuples():
                out.append(f"attention,{gpu},bf16,,,,{r.batch_size},{r.isl},{r.num_heads},"
                           f"{r.num_key_value_heads},128,,,{r.latency * 1e3:.3f}")
        c = d / f"{sys_}_nccl.parquet"
        if c.exists():
            t = pd.read_parquet(c)
            # GB200's table holds one 4-GPU tray (2 and 4 GPUs), the others 8-GPU boards
            t = t[(t.num_gpus == (4 if sys_ == "gb200" else 8)) & (t.nccl_dtype == "half")
                  & (t.message_size * 2 >= 2**20)
                  & t.op_name.isin(["all_reduce", "all_gather", "reduce_scatter"])]
            for r in t.sort_values(["op_name", "message_size"]).itertuples():
                out.append(f"{r.op_name},{gpu},fp16,,,,,,,,,{r.num_gpus},{r.message_size * 2},"
                           f"{r.latency * 1e3:.3f}")
    return out


HEADER = """\
# NVIDIA AIConfigurator's measured kernel tables, training shapes (written by
# bench/data/make_aic_training_kernels.py; read its docstring for the selection).
# Source: https://github.com/ai-dynamo/aiconfigurator commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce
# (2026-08-21), aic-core/src/aiconfigurator_core/systems/data/{h100_sxm,h200_sxm,b200_sxm,gb200}/:
#   gemm/trtllm/1.2.0rc5/gemm_perf.parquet, attention/trtllm/1.2.0rc5/context_attention_perf.parquet,
#   comm/nccl/2.29.2/nccl_perf.parquet. Extracted 2026-11-29.
# Conditions (collector/ of the same commit):
# gemm: TensorRT-LLM 1.2.0rc5 Linear forward (trtllm/collect_gemm.py), bf16 out, timed in CUDA-graph
#   replay (helper.benchmark_with_power); fp8 = per-tensor FP8 with a static input scale, so each
#   call includes the kernel that quantizes the bf16 input (m x k) besides the GEMM.
# attention: TensorRT-LLM 1.2.0rc5 attention op, context phase (trtllm/collect_attn.py), causal,
#   head dim 128, window 0 (full), bf16 Q/K/V and KV cache; the whole op: QKV preprocessing into
#   the paged KV cache (64-token blocks) and the FMHA; 10 warm-ups, 6 timed runs, CUDA graph.
#   time covers batch x seq query tokens; the heads column is query heads.
# nccl: nccl-tests (network/collect_nccl.py): <op>_perf -t <gpus> (one process, one thread per
#   GPU) -w 40 -n 100 (60 above 16 MiB) -a 1 -c 0, fp16, NCCL 2.29.2, out-of-place time column;
#   size_bytes is nccl-tests' size (all-reduce buffer, gathered all-gather output,
#   reduce-scatter input). GB200: 4 GPUs of one tray; others: one 8-GPU NVSwitch board.
# time_us: the measured latency (the table's ms x 1000).
"""


def main(argv: list[str]) -> int:
    print(HEADER, end="")
    print("kind,gpu,dtype,m,n,k,batch,seq,heads,kv_heads,head_dim,gpus,size_bytes,time_us")
    print("\n".join(rows(Path(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
