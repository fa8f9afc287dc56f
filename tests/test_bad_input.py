"""Bad input, everywhere: every command and every input file gets one line naming the field,
the value and what is allowed, exit code 2, no traceback, nothing written.

CASES is the one list: (id, files to create, argv, text the error line must hold). The
table printed by ``python tests/test_bad_input.py`` (and kept in the module docstring of
the closing note) comes from it. ``{d}`` in files and argv is the test's temporary folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meshplan.cli import main
from meshplan.specs.catalog import presets

GOOD_SCENARIO = ('[model]\npreset = "llama3.1-8b"\n[cluster]\ngpus = "8xH100-SXM-80GB"\n'
                 '[workload]\nseq_len = 4096\nglobal_batch = 32\n[plan]\ndp = 8\n')
GOOD_GPU = ('[gpu.MyGPU]\npeak_tflops = {bf16 = 500}\nmemory_gib = 96\nmemory_tb_per_s = 4\n'
            'scaleup_gb_per_s = 300\ngpus_per_node = 4\nnic_gbps = 200\n')
LLAMA_HF = ('{"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256, '
            '"num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512, '
            '"vocab_size": 1000%s}')
W = ["--gpus", "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "32"]
M = ["--model", "llama3.1-8b"]


# a small DeepSeek-V3-style config (MLA, routed and shared experts, one leading dense layer)
MLA_HF = {"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
          "moe_intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 8,
          "n_shared_experts": 1, "n_routed_experts": 8, "num_experts_per_tok": 2,
          "first_k_dense_replace": 1, "q_lora_rank": 64, "kv_lora_rank": 32,
          "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "vocab_size": 1024,
          "n_group": 2, "topk_group": 1}


def hf(extra: str) -> str:
    return LLAMA_HF % extra


# (id, {relative file: text}, argv, needle in the one error line)
CASES = [
    # ---- sizes, degrees, NaN/inf -----------------------------------------------------------
    ("seq-len-zero", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "0",
                          "--global-batch", "8"], "seq_len=0"),
    ("global-batch-negative", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
                                   "--global-batch", "-8"], "global_batch=-8"),
    ("seq-len-not-a-number", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4k",
                                  "--global-batch", "8"], "--seq-len"),
    ("nic-nan", {}, ["plan", *M, *W, "--nic-gbps", "nan"], "nic"),
    ("nic-inf", {}, ["plan", *M, *W, "--nic-gbps", "inf"], "nic"),
    ("nic-negative", {}, ["plan", *M, *W, "--nic-gbps", "-100"], "nic"),
    ("gpus-per-node-zero", {}, ["plan", *M, *W, "--gpus-per-node", "0"], "gpus_per_node=0"),
    # a context-parallel degree the sequence does not split into 2*cp chunks was blamed on tp
    # ("tp=8: sequence parallel needs seq_len/cp (2730) divisible by tp", 8192 // 3 = 2730):
    # the degree that breaks its own rule is named, whatever is pinned beside it
    ("cp-not-splitting-the-sequence-predict", {}, ["predict", *M, *W, "--tp", "8", "--cp", "3"],
     "cp=3: seq_len (4096) must split into 2*cp"),
    ("cp-not-splitting-the-sequence-plan", {}, ["plan", *M, *W, "--tp", "8", "--cp", "3"],
     "cp=3: seq_len (4096) must split into 2*cp"),
    ("gpus-zero", {}, ["plan", *M, "--gpus", "0xH100-SXM-80GB", "--seq-len", "4096",
                       "--global-batch", "8"], "gpus='0xH100-SXM-80GB'"),
    ("gpus-malformed", {}, ["plan", *M, "--gpus", "H100x8", "--seq-len", "4096",
                            "--global-batch", "8"], "gpus='H100x8'"),
    ("gpus-absurd", {}, ["plan", *M, "--gpus", "1000000000xH100-SXM-80GB", "--seq-len", "4096",
                         "--global-batch", "8"], "gpus="),
    ("tp-negative", {}, ["predict", *M, *W, "--dp", "8", "--tp", "-2"], "tp=-2"),
    ("tp-not-dividing", {}, ["predict", *M, "--gpus", "24xH100-SXM-80GB", "--seq-len", "4096",
                             "--global-batch", "24", "--dp", "8", "--tp", "3"], "tp=3"),
    ("zero-4", {}, ["predict", *M, *W, "--dp", "8", "--zero", "4"], "zero=4"),
    ("schedule-unknown", {}, ["predict", *M, *W, "--dp", "4", "--pp", "2", "--schedule", "zigzag"],
     "schedule='zigzag'"),
    ("batch-not-multiple", {}, ["predict", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
                                "--global-batch", "12", "--dp", "8"], "global_batch=12"),
    ("global-batch-tokens-too-small", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len",
                                           "4096", "--global-batch-tokens", "100"], "global_batch"),
    ("top-zero", {}, ["plan", *M, *W, "--top", "0"], "top=0"),
    # a pinned knob whose value is bad on its own: refused by `plan` as by `predict`, not
    # searched and reported as "no plan fits" (exit 1), nor a ZeroDivisionError (micro-batch 0)
    ("plan-pin-micro-batch-zero", {}, ["plan", *M, *W, "--micro-batch", "0"], "micro_batch=0"),
    ("plan-pin-zero-negative", {}, ["plan", *M, *W, "--zero", "-1"], "zero=-1"),
    ("plan-pin-vpp-zero", {}, ["plan", *M, *W, "--vpp", "0"], "vpp=0"),
    # printed "no plan fits: no layout uses all 8 GPUs" and exited 1 (found 2026-11-29)
    ("plan-pin-vpp-over-the-layers", {}, ["plan", *M, *W, "--vpp", "18"], "vpp=18: at most 17"),
    ("plan-pin-recompute-unknown", {}, ["plan", *M, *W, "--recompute", "foo"], "recompute='foo'"),
    ("plan-pin-cp-kind-unknown", {}, ["plan", *M, *W, "--cp-kind", "foo"], "cp_kind='foo'"),
    ("plan-pin-order-unknown", {}, ["plan", *M, *W, "--order", "foo"], "order='foo'"),
    ("plan-pin-recompute-layers-negative", {}, ["plan", *M, *W, "--recompute-layers", "-1"],
     "recompute_layers=-1"),
    ("plan-pin-recompute-layers-over-model", {}, ["plan", *M, *W, "--recompute-layers", "100"],
     "recompute_layers=100"),
    ("plan-pin-hsdp-not-dividing", {}, ["plan", *M, *W, "--hsdp-shard", "3"], "hsdp_shard=3"),
    # pipeline knobs pinned together that no plan can hold: was "no plan fits" (exit 1)
    ("plan-pin-v-schedule-on-pp1", {}, ["plan", *M, *W, "--pp", "1", "--schedule", "dualpipev"],
     "pipeline parallelism (pp > 1)"),
    ("plan-pin-one-chunk-schedule-with-vpp", {}, ["plan", *M, *W, "--schedule", "gpipe",
                                                  "--vpp", "2"], "schedule='gpipe'"),
    ("plan-fp8-mx-on-hopper", {}, ["plan", *M, *W, "--precision", "fp8", "--fp8-recipe", "mx"],
     "fp8_recipe='mx'"),
    ("rerank-negative", {}, ["plan", *M, *W, "--rerank", "-1"], "rerank=-1"),
    # counts other commands took without a word: a negative critical-path length printed a
    # garbled path, serve --top 0 an empty table under "why #1 wins", --jobs -1 ran as 1
    ("simulate-path-lines-negative", {}, ["simulate", *M, *W, "--dp", "4", "--pp", "2",
                                          "--path-lines", "-3"], "path_lines=-3"),
    # 10**8 requests simulated on every candidate plan never returned
    ("serve-requests-too-many", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1024",
                                     "--output-len", "128", "--rate", "10", "--requests",
                                     "100000000"], "--requests=100000000"),
    ("serve-top-zero", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1024",
                            "--output-len", "128", "--rate", "5", "--top", "0"], "top=0"),
    ("serve-max-num-seqs-without-plan", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB",
                                             "--input-len", "1024", "--output-len", "128",
                                             "--rate", "5", "--max-num-seqs", "16"],
     "--max-num-seqs=16: applies to the plan given with --plan"),
    ("serve-trace-row-with-extra-field", {"t.csv": "arrival_s,input_len,output_len\n0,100,10\n1,100,10,7\n"},
     ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--trace", "{d}/t.csv"], "more non-blank field"),
    ("serve-trace-with-rate", {"t.csv": "arrival_s,input_len,output_len\n0,100,10\n1,100,10\n"},
     ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--trace", "{d}/t.csv", "--rate", "4"],
     "--rate='4': the --trace file gives"),
    # --arrivals spaces an open loop's requests: with --concurrency (closed loop) or --rate inf
    # (all at once) it was ignored, exit 0
    ("serve-arrivals-with-concurrency", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB",
                                             "--input-len", "1024", "--output-len", "128",
                                             "--concurrency", "4", "--arrivals", "uniform"],
     "--arrivals='uniform'"),
    ("serve-arrivals-with-rate-inf", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB",
                                          "--input-len", "1024", "--output-len", "128",
                                          "--rate", "inf", "--arrivals", "uniform"],
     "--arrivals='uniform'"),
    # a TPOT target on a trace of one-token outputs pointed to --output-len, which --trace
    # refuses
    ("serve-trace-one-token-tpot", {"t.csv": "arrival_s,input_len,output_len\n0,100,1\n1,100,1\n"},
     ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--trace", "{d}/t.csv", "--tpot-p90", "50ms"],
     "give the --trace requests more than one output token"),
    ("serve-model-id-without-export", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len",
                                           "1024", "--output-len", "128", "--rate", "5",
                                           "--model-id", "org/m"], "give --export"),
    ("serve-aggregated-only-disaggregated-plan", {},
     ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1024", "--output-len", "128",
      "--rate", "5", "--plan", "P=tp4x1/D=tp4x1", "--aggregated-only"], "is disaggregated"),
    ("serve-jobs-negative", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1024",
                                 "--output-len", "128", "--rate", "5", "--jobs", "-1"], "jobs=-1"),
    ("validate-jobs-negative", {"v.csv": "id,gpu,num_gpus,seq_len,global_batch_seqs,model\n"
                                "1,H100-SXM-80GB,8,4096,32,llama3.1-8b\n"},
     ["validate", "{d}/v.csv", "--jobs", "-1"], "jobs=-1"),
    # several pools and procurement search every plan: a pinned knob was silently ignored
    # (--tp 3 answered with tp2, exit 0); now refused
    ("pools-pinned-knob", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB",
                               "--seq-len", "4096", "--global-batch", "32", "--tp", "3"], "--tp=3"),
    ("pools-plan-label", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB",
                              "--seq-len", "4096", "--global-batch", "32", "--plan",
                              "dp8 tp1 pp1 zero3 mb2"], "--plan="),
    # MoE-only knobs on a dense model: the label used to carry 'deepep' / 'epo' through
    ("predict-deepep-on-dense", {}, ["predict", *M, *W, "--plan", "dp8 tp1 pp1 zero1 mb1 deepep"],
     "moe_dispatcher='deepep'"),
    ("plan-ep-overlap-on-dense", {}, ["plan", *M, *W, "--plan", "dp8 tp1 pp1 zero1 mb1 epo"],
     "ep_comm_overlap=True"),
    ("procurement-pinned-knob", {}, ["plan", *M, *W, "--train-tokens", "1T", "--deadline", "30d",
                                     "--gpu-types", "H100-SXM-80GB", "--micro-batch", "0"],
     "--micro-batch=0"),
    # ---- names -----------------------------------------------------------------------------
    ("gpu-unknown", {}, ["plan", *M, "--gpus", "8xH9000", "--seq-len", "4096",
                         "--global-batch", "8"], "gpu='H9000'"),
    ("model-unknown", {}, ["plan", "--model", "llama99", *W], "model='llama99'"),
    # a name short of the catalog's: the parts it may mean come first (both H100 parts)
    ("gpu-family-only", {}, ["plan", *M, "--gpus", "8xH100", "--seq-len", "4096",
                             "--global-batch", "8"],
     "gpu='H100': did you mean H100-SXM-80GB or H100-SXM-96GB-500W?"),
    ("model-hf-repo-id", {}, ["plan", "--model", "meta-llama/Llama-3.1-70B", *W],
     "did you mean llama3.1-70b?"),
    ("model-missing-flag", {}, ["plan", *W], "--model"),
    # ---- paths -----------------------------------------------------------------------------
    ("model-path-missing", {}, ["plan", "--model", "{d}/nope/config.json", *W], "model="),
    ("model-path-dir-without-config", {"empty/.keep": ""}, ["plan", "--model", "{d}/empty", *W],
     "model="),
    ("scenario-missing", {}, ["predict", "--scenario", "{d}/nope.toml"], "scenario="),
    ("scenario-is-dir", {"sdir/.keep": ""}, ["predict", "--scenario", "{d}/sdir"], "scenario="),
    ("gpu-file-missing", {}, ["plan", *M, *W, "--gpu-file", "{d}/nope.toml"], "gpu_file="),
    ("gpu-file-is-dir", {"gdir/.keep": ""}, ["plan", *M, *W, "--gpu-file", "{d}/gdir"], "gpu_file="),
    ("out-holds-files", {"out/mine.txt": "keep me"},
     ["export", *M, *W, "--dp", "8", "--to", "megatron", "--out", "{d}/out"], "--out="),
    ("out-is-a-file", {"afile": "x"},
     ["export", *M, *W, "--dp", "8", "--to", "megatron", "--out", "{d}/afile"], "--out="),
    ("plan-export-out-holds-files", {"out2/mine.txt": "keep me"},
     ["plan", *M, *W, "--export", "torchtitan", "--out", "{d}/out2"], "--out="),
    # serve --export: the same --out rule as the training exports (was a FileExistsError
    # traceback for a file, and launch files written among the folder's other files)
    ("serve-export-out-is-a-file", {"sfile": "x"},
     ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1024", "--output-len", "128",
      "--requests", "20", "--rate", "5", "--export", "vllm", "--out", "{d}/sfile"], "--out="),
    ("serve-export-out-holds-files", {"sout/mine.txt": "keep me"},
     ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1024", "--output-len", "128",
      "--requests", "20", "--rate", "5", "--export", "sglang", "--out", "{d}/sout"], "--out="),
    # an output flag without the flag that writes there was ignored (exit 0, nothing written)
    ("plan-out-without-export", {}, ["plan", *M, *W, "--out", "{d}/o"], "--out="),
    ("plan-png-without-gpu-types", {}, ["plan", *M, *W, "--png", "{d}/c.png"], "--png="),
    ("serve-out-without-export", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len",
                                      "1024", "--output-len", "128", "--rate", "5", "--out",
                                      "{d}/o"], "--out="),
    ("trace-into-missing-dir", {}, ["simulate", *M, *W, "--dp", "4", "--pp", "2",
                                    "--trace", "{d}/no/such/dir/t.json"], "directory does not exist"),
    # ---- scenario TOML ---------------------------------------------------------------------
    ("scenario-not-toml", {"s.toml": "[model\npreset = 1"}, ["predict", "--scenario", "{d}/s.toml"],
     "not valid TOML"),
    ("scenario-missing-table", {"s.toml": '[model]\npreset = "llama3.1-8b"\n'},
     ["predict", "--scenario", "{d}/s.toml"], "[cluster]"),
    ("scenario-seq-len-string", {"s.toml": GOOD_SCENARIO.replace("4096", '"long"')},
     ["predict", "--scenario", "{d}/s.toml"], "seq_len"),
    ("scenario-seq-len-float", {"s.toml": GOOD_SCENARIO.replace("4096", "4096.5")},
     ["predict", "--scenario", "{d}/s.toml"], "seq_len"),
    # a number written as text, a misspelt [workload] key, a table no scenario has
    ("scenario-seq-len-quoted-number", {"s.toml": GOOD_SCENARIO.replace("4096", '"4096"')},
     ["predict", "--scenario", "{d}/s.toml"], "workload.seq_len='4096': must be a TOML integer"),
    ("scenario-workload-unknown-key",
     {"s.toml": GOOD_SCENARIO.replace("[workload]\n", "[workload]\nglobal_batch_size = 9\n")},
     ["predict", "--scenario", "{d}/s.toml"], "workload.global_batch_size=9: unknown key"),
    ("scenario-unknown-table", {"s.toml": GOOD_SCENARIO + "[bogus]\nx = 1\n"},
     ["predict", "--scenario", "{d}/s.toml"], "[bogus]"),
    ("scenario-dp-nan", {"s.toml": GOOD_SCENARIO.replace("dp = 8", "dp = nan")},
     ["predict", "--scenario", "{d}/s.toml"], "dp"),
    ("scenario-plan-unknown-field", {"s.toml": GOOD_SCENARIO + "tensor = 2\n"},
     ["predict", "--scenario", "{d}/s.toml"], "plan.tensor"),
    ("scenario-plan-bool-as-string", {"s.toml": GOOD_SCENARIO + 'offload_optimizer = "yes"\n'},
     ["predict", "--scenario", "{d}/s.toml"], "offload_optimizer"),
    ("scenario-cluster-unknown-key", {"s.toml": GOOD_SCENARIO.replace(
        '[cluster]\n', '[cluster]\nspeed = 3\n')}, ["predict", "--scenario", "{d}/s.toml"],
     "cluster.speed"),
    # a number where the GPU text belongs: was a TypeError / AttributeError traceback
    ("scenario-cluster-gpus-number", {"s.toml": GOOD_SCENARIO.replace(
        'gpus = "8xH100-SXM-80GB"', "gpus = 8")}, ["plan", "--scenario", "{d}/s.toml"], "gpus=8"),
    ("scenario-cluster-gpu-number", {"s.toml": GOOD_SCENARIO.replace(
        'gpus = "8xH100-SXM-80GB"', "gpu = 5\nnum_gpus = 8")},
     ["predict", "--scenario", "{d}/s.toml"], "gpu=5"),
    # "false" as a string was read as true (bool("false")): 4.5 GiB more logits memory
    ("scenario-compiled-loss-string", {"s.toml": GOOD_SCENARIO.replace(
        "global_batch = 32\n", 'global_batch = 32\ncompiled_loss = "false"\n')},
     ["predict", "--scenario", "{d}/s.toml"], "compiled_loss='false'"),
    # a CUDA graph scope the cost model does not know (cost/ops.py CUDA_GRAPHS), flag and TOML
    ("cuda-graph-flag-unknown-scope", {}, ["predict", *M, *W, "--dp", "8", "--cuda-graph", "mlp"],
     "cuda_graph='mlp'"),
    ("scenario-cuda-graph-unknown-scope", {"s.toml": GOOD_SCENARIO.replace(
        "global_batch = 32\n", 'global_batch = 32\ncuda_graph = "attn+mlp"\n')},
     ["predict", "--scenario", "{d}/s.toml"], "cuda_graph='attn+mlp'"),
    ("scenario-attention-full-ac-string", {"s.toml": GOOD_SCENARIO.replace(
        "global_batch = 32\n", 'global_batch = 32\nattention_full_ac = "yes"\n')},
     ["predict", "--scenario", "{d}/s.toml"], "attention_full_ac='yes'"),
    # a key beside preset was silently ignored (the preset's 32 layers were planned)
    ("scenario-model-preset-and-field", {"s.toml": GOOD_SCENARIO.replace(
        'preset = "llama3.1-8b"\n', 'preset = "llama3.1-8b"\nlayers = 4\n')},
     ["predict", "--scenario", "{d}/s.toml"], "model.layers=4"),
    ("scenario-model-not-table", {"s.toml": GOOD_SCENARIO.replace(
        '[model]\npreset = "llama3.1-8b"\n', 'model = 3\n')},
     ["predict", "--scenario", "{d}/s.toml"], "model"),
    ("scenario-precision-unknown", {"s.toml": GOOD_SCENARIO.replace(
        "global_batch = 32\n", 'global_batch = 32\nprecision = "fp4"\n')},
     ["predict", "--scenario", "{d}/s.toml"], "precision='fp4'"),
    # ---- GPU TOML --------------------------------------------------------------------------
    ("gpu-toml-not-toml", {"g.toml": "[gpu.X\n"}, ["plan", *M, *W, "--gpu-file", "{d}/g.toml"],
     "not valid TOML"),
    ("gpu-toml-no-table", {"g.toml": "a = 1\n"}, ["plan", *M, *W, "--gpu-file", "{d}/g.toml"],
     "[gpu.NAME]"),
    # a name with '+' could not be asked for: --gpus reads '+' as the join of two pools
    ("gpu-toml-name-with-plus", {"g.toml": GOOD_GPU.replace("[gpu.MyGPU]", '[gpu."My+GPU"]')},
     ["plan", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "32",
      "--gpu-file", "{d}/g.toml"], "gpu_file='My+GPU'"),
    ("gpu-toml-missing-key", {"g.toml": GOOD_GPU.replace("memory_tb_per_s = 4\n", "")},
     ["plan", *M, "--gpus", "8xMyGPU", "--seq-len", "4096", "--global-batch", "32",
      "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.memory_tb_per_s"),
    ("gpu-toml-memory-string", {"g.toml": GOOD_GPU.replace("memory_gib = 96", 'memory_gib = "lots"')},
     ["plan", *M, "--gpus", "8xMyGPU", "--seq-len", "4096", "--global-batch", "32",
      "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.memory_gib"),
    ("gpu-toml-memory-negative", {"g.toml": GOOD_GPU.replace("memory_gib = 96", "memory_gib = -96")},
     ["plan", *M, "--gpus", "8xMyGPU", "--seq-len", "4096", "--global-batch", "32",
      "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.memory_gib"),
    ("gpu-toml-peak-nan", {"g.toml": GOOD_GPU.replace("bf16 = 500", "bf16 = nan")},
     ["plan", *M, "--gpus", "8xMyGPU", "--seq-len", "4096", "--global-batch", "32",
      "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.peak_tflops.bf16"),
    ("gpu-toml-peak-inf", {"g.toml": GOOD_GPU.replace("bf16 = 500", "bf16 = inf")},
     ["plan", *M, "--gpus", "8xMyGPU", "--seq-len", "4096", "--global-batch", "32",
      "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.peak_tflops.bf16"),
    ("gpu-toml-per-node-float", {"g.toml": GOOD_GPU.replace("gpus_per_node = 4", "gpus_per_node = 4.5")},
     ["plan", *M, "--gpus", "8xMyGPU", "--seq-len", "4096", "--global-batch", "32",
      "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.gpus_per_node"),
    # a misspelt generation ran with hopper's kernel constants without a word
    ("gpu-toml-generation-unknown", {"g.toml": GOOD_GPU + 'generation = "blackwel"\n'},
     ["plan", *M, "--gpus", "8xMyGPU", "--seq-len", "4096", "--global-batch", "32",
      "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.generation='blackwel'"),
    # only an fp8 peak: every plan rejected ("no plan fits", exit 1) and `gpus` failed
    ("gpu-toml-no-16-bit-peak", {"g.toml": GOOD_GPU.replace("bf16 = 500", "fp8 = 500")},
     ["gpus", "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.peak_tflops"),
    ("gpu-toml-unknown-key", {"g.toml": GOOD_GPU + "colour = 1\n"},
     ["plan", *M, *W, "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.colour"),
    # FP8 where the GPU has none, and an FP8 recipe without FP8 (both used to be ignored)
    ("fp8-on-ampere", {}, ["plan", *M, "--gpus", "8xA100-SXM-80GB", "--seq-len", "4096",
                           "--global-batch", "32", "--precision", "fp8"],
     "precision='fp8': A100-SXM-80GB (ampere) has no FP8 tensor cores"),
    ("bf16-on-volta", {}, ["plan", *M, "--gpus", "8xV100-SXM-32GB", "--seq-len", "2048",
                           "--global-batch", "32", "--precision", "bf16"],
     "precision='bf16': V100-SXM-32GB (volta) has no bf16 tensor cores"),
    ("fp8-recipe-without-fp8", {}, ["plan", *M, *W, "--fp8-recipe", "mx"],
     "--fp8-recipe='mx': applies to --precision fp8 only"),
    # an output that cannot be written, after others were: none of them is left behind
    ("simulate-png-unwritable", {},
     ["simulate", *M, "--gpus", "16xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "32",
      "--dp", "2", "--tp", "8", "--trace", "{d}/t.json", "--png", "/proc/x.png"],
     "output='/proc/x.png': cannot write"),
    ("serve-export-unwritable", {},
     ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "2000", "--output-len", "200",
      "--rate", "10", "--requests", "50", "--export", "vllm", "--out", "/proc/x"],
     "--out='/proc/x': cannot"),
    # ---- HuggingFace config.json -------------------------------------------------------------
    ("hf-not-json", {"c/config.json": "{"}, ["plan", "--model", "{d}/c", *W], "not valid JSON"),
    ("hf-not-object", {"c/config.json": "[1, 2]"}, ["plan", "--model", "{d}/c", *W],
     "must be a JSON object {...}, not an array"),
    ("hf-null", {"c/config.json": "null"}, ["plan", "--model", "{d}/c", *W],
     "must be a JSON object {...}, not null"),
    ("hf-unknown-family", {"c/config.json": '{"model_type": "bert"}'},
     ["plan", "--model", "{d}/c", *W], "model_type='bert'"),
    ("hf-linear-attention", {"c/config.json": '{"model_type": "qwen3_next"}'},
     ["plan", "--model", "{d}/c", *W], "model_type='qwen3_next': hybrid linear-attention"),
    ("hf-missing-field", {"c/config.json": hf("").replace('"vocab_size": 1000', '"x": 1')},
     ["plan", "--model", "{d}/c", *W], "vocab_size"),
    ("hf-tie-as-string", {"c/config.json": hf(', "tie_word_embeddings": "false"')},
     ["plan", "--model", "{d}/c", *W], "tie_word_embeddings='false'"),
    ("hf-bias-as-int", {"c/config.json": hf(', "attention_bias": 1')},
     ["plan", "--model", "{d}/c", *W], "attention_bias=1"),
    ("hf-layers-as-string", {"c/config.json": hf("").replace('"num_hidden_layers": 4',
                                                              '"num_hidden_layers": "4"')},
     ["plan", "--model", "{d}/c", *W], "num_hidden_layers='4'"),
    ("hf-layers-zero", {"c/config.json": hf("").replace('"num_hidden_layers": 4',
                                                         '"num_hidden_layers": 0')},
     ["plan", "--model", "{d}/c", *W], "num_hidden_layers=0"),
    ("hf-layers-absurd", {"c/config.json": hf("").replace('"num_hidden_layers": 4',
                                                           '"num_hidden_layers": 1000000000')},
     ["plan", "--model", "{d}/c", *W], "num_hidden_layers=1000000000: must be at most 16,384"),
    ("hf-head-dim-zero", {"c/config.json": hf(', "head_dim": 0')},
     ["plan", "--model", "{d}/c", *W], "config.json:head_dim=0: must be a positive integer"),
    # DeepSeek-style MoE fields: named by their config.json key (they were named by
    # ModelSpec's moe_dense_layers / moe_score), an unknown topk_method refused (it was read
    # as "no score-correction bias")
    ("hf-first-k-dense-past-the-layers",
     {"c/config.json": json.dumps(dict(MLA_HF, first_k_dense_replace=9))},
     ["plan", "--model", "{d}/c", *W], "config.json:first_k_dense_replace=9: at most"),
    ("hf-scoring-func-unknown", {"c/config.json": json.dumps(dict(MLA_HF, scoring_func="raw"))},
     ["plan", "--model", "{d}/c", *W], "config.json:scoring_func='raw': allowed"),
    ("hf-topk-method-unknown", {"c/config.json": json.dumps(dict(MLA_HF, topk_method="top2"))},
     ["plan", "--model", "{d}/c", *W], "config.json:topk_method='top2': allowed"),
    ("label-unknown-recompute-module", {}, ["predict", *M, *W, "--plan",
                                            "dp8 tp1 pp1 zero1 mb1 rc-selective-foo"],
     "rc-selective-foo: recompute_modules='foo': unknown recompute module"),
    ("seq-len-past-learned-positions", {}, ["predict", "--model", "gpt2", "--gpus",
                                            "8xH100-SXM-80GB", "--seq-len", "2048",
                                            "--global-batch", "32", "--plan", "dp8 tp1 pp1 zero1 mb1"],
     "seq_len=2048: at most 1,024 for gpt2: its learned position table"),
    ("global-batch-absurd", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096",
                                 "--global-batch", "1000000000000"],
     "global_batch=1000000000000: seq_len x global_batch must be at most 68,719,476,736"),
    ("serve-past-learned-positions", {}, ["serve", "--model", "gpt2", "--gpus", "8xH100-SXM-80GB",
                                          "--input-len", "1000:3000", "--output-len", "100",
                                          "--rate", "5"],
     "a request of 3,100 tokens (prompt + output): at most 1,024 for gpt2: its learned"),
    ("hf-hidden-float", {"c/config.json": hf("").replace('"hidden_size": 256', '"hidden_size": 256.5')},
     ["plan", "--model", "{d}/c", *W], "hidden_size=256.5"),
    ("hf-rope-theta-string", {"c/config.json": hf(', "rope_theta": "500000"')},
     ["plan", "--model", "{d}/c", *W], "rope_theta='500000'"),
    ("hf-rope-theta-nan", {"c/config.json": hf(', "rope_theta": NaN')},
     ["plan", "--model", "{d}/c", *W], "rope_theta"),
    ("hf-norm-eps-negative", {"c/config.json": hf(', "rms_norm_eps": -1e-5')},
     ["plan", "--model", "{d}/c", *W], "rms_norm_eps"),
    ("hf-rope-scaling-not-table", {"c/config.json": hf(', "rope_scaling": "yarn"')},
     ["plan", "--model", "{d}/c", *W], "rope_scaling='yarn'"),
    ("hf-heads-not-dividing", {"c/config.json": hf("").replace('"num_key_value_heads": 4',
                                                                '"num_key_value_heads": 3')},
     ["plan", "--model", "{d}/c", *W], "config.json:num_key_value_heads=3"),
    # ---- engines -----------------------------------------------------------------------------
    ("engine-model-missing", {}, ["plan", "--model", "gpt2", "--gpus", "8xH100-SXM-80GB",
                                  "--seq-len", "1024", "--global-batch", "64",
                                  "--engine", "torchtitan"], "model='gpt2'"),
    # a pinned knob the engine refuses, on a model where every plan also misses memory: was
    # "no plan fits" (exit 1) as if more memory would do
    ("engine-refuses-pin-nothing-fits", {}, ["plan", "--model", "mixtral-8x7b", *W,
                                             "--engine", "deepspeed", "--ep", "8"], "plan.ep=8"),
    ("export-refused", {}, ["export", *M, *W, "--dp", "8", "--zero", "1", "--to", "torchtitan",
                            "--out", "{d}/o"], "plan.zero=1"),
    # ---- today's rules: norm_kernel, fewer micro-batches than stages, tied pipelines --------
    ("scenario-norm-kernel-garbage",
     {"s.toml": GOOD_SCENARIO.replace("global_batch = 32\n",
                                      'global_batch = 32\nnorm_kernel = "garbage"\n')},
     ["predict", "--scenario", "{d}/s.toml"], "norm_kernel='garbage'"),
    # CUDA graphs: only the whole-step graph is modelled; per-module scopes are refused
    ("scenario-cuda-graph-partial",
     {"s.toml": GOOD_SCENARIO.replace("global_batch = 32\n",
                                      'global_batch = 32\ncuda_graph = "transformer_engine"\n')},
     ["predict", "--scenario", "{d}/s.toml"], "cuda_graph='transformer_engine'"),
    # m = 2 / (2 x 1) = 1 < pp 4: torchtitan and the runtime refuse 1F1B there, Megatron's
    # interleaved schedule too
    ("export-torchtitan-m-below-pp", {},
     ["export", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "2",
      "--plan", "dp2 tp1 pp4 zero3 mb1 1f1b", "--to", "torchtitan", "--out", "{d}/o"],
     "global_batch=2"),
    ("export-meshplan-m-below-pp", {},
     ["export", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "2",
      "--plan", "dp2 tp1 pp4 zero1 mb1 1f1b", "--to", "meshplan", "--out", "{d}/o"],
     "global_batch=2"),
    ("export-megatron-interleaved-m-below-pp", {},
     ["export", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "2",
      "--plan", "dp2 tp1 pp4 vpp2 zero1 mb1 interleaved_1f1b", "--to", "megatron", "--out",
      "{d}/o"], "global_batch=2"),
    ("global-batch-gives-no-microbatch", {},
     ["predict", *M, "--gpus", "8xH100-SXM-80GB", "--seq-len", "4096", "--global-batch", "2",
      "--plan", "dp4 tp1 pp2 zero1 mb1 1f1b", "--engine", "megatron"], "global_batch=2"),
    ("tied-pp-torchtitan", {},
     ["predict", "--model", "llama3.2-1b", *W, "--plan", "dp4 tp1 pp2 zero3 mb1 1f1b",
      "--engine", "torchtitan"], "plan.pp=2"),
    ("tied-pp-v-schedule-megatron", {},
     ["export", "--model", "llama3.2-1b", *W, "--plan", "dp4 tp1 pp2 vpp2 zero1 mb2 dualpipev",
      "--to", "megatron", "--out", "{d}/o"], "plan.schedule='dualpipev'"),
    # ---- other commands ----------------------------------------------------------------------
    ("simulate-bad-plan", {}, ["simulate", *M, *W, "--dp", "3"], "dp*cp*tp*pp"),
    ("validate-missing-csv", {}, ["validate", "{d}/nope.csv"], "nope.csv"),
    # runs CSV (meshplan/runs_csv.py): a file nothing can be read from; a bad row is not
    # bad input but a row that is listed as not scored (tests/test_validate_rows.py)
    ("validate-csv-empty", {"e.csv": ""}, ["validate", "{d}/e.csv"], "is empty"),
    ("validate-csv-duplicate-column",
     {"d.csv": "id,gpu,num_gpus,seq_len,global_batch_seqs,model,gpu\n"
               "1,H100-SXM-80GB,8,4096,32,llama3.1-8b,A100-SXM-80GB\n"},
     ["validate", "{d}/d.csv"], "column named more than once: gpu"),
    ("validate-csv-header-only", {"h.csv": "id,gpu,num_gpus,seq_len,global_batch_seqs,model\n"},
     ["validate", "{d}/h.csv"], "no data rows"),
    ("validate-csv-missing-columns", {"m.csv": "id,model\n1,llama3.1-8b\n"},
     ["validate", "{d}/m.csv"], "required column missing"),
    ("validate-csv-bom-crlf-missing-columns", {"b.csv": "\ufeffid,gpu\r\n1,H100-SXM-80GB\r\n"},
     ["validate", "{d}/b.csv"], "num_gpus"),
    ("validate-csv-is-dir", {"d.csv/.keep": ""}, ["validate", "{d}/d.csv"], "csv="),
    ("run-bad-steps", {}, ["run", "--steps", "0"], "steps=0"),
    # a model whose states alone exceed the host's memory (a 405B model needs ~6 TiB): the
    # ranks allocated until a worker was killed, exit 1
    ("run-model-too-big-for-host", {}, ["run", "--model", "llama3.1-405b", "--device", "cpu",
                                        "--seq-len", "128", "--global-batch", "2"],
     "--device='cpu'"),
    ("run-bad-plan", {}, ["run", "--tp", "3"], "tp=3"),
    # refused by AdamW / torchrun on the workers ("the run failed", exit 1), or a traceback
    ("run-lr-negative", {}, ["run", "--lr", "-1"], "lr=-1"),
    ("run-lr-nan", {}, ["run", "--lr", "nan"], "lr=nan"),
    ("run-max-restarts-negative", {}, ["run", "--max-restarts", "-1"], "max_restarts=-1"),
    ("run-nnodes-zero", {}, ["run", "--nnodes", "0"], "nnodes=0"),
    ("run-port-out-of-range", {}, ["run", "--port", "99999"], "--port=99999"),
    ("run-out-is-a-file", {"rfile": "x"}, ["run", "--out", "{d}/rfile"], "--out="),
    ("dryrun-bad-model", {}, ["dryrun", "--model", "llama99"], "model='llama99'"),
    ("gpus-command-bad-file", {}, ["gpus", "--gpu-file", "{d}/nope.toml"], "gpu_file="),
    # ---- found by driving the CLI as a user (2026-11-27) -------------------------------------
    ("profile-constant-zero", {"z.toml": '[constants]\n"EFFICIENCY.hopper.matmul_bf16" = 0\n'},
     ["predict", *M, *W, "--dp", "8", "--profile", "{d}/z.toml"], "must be in [1e-12, 1]"),
    ("profile-share-above-one", {"o.toml": '[constants]\n"NETWORK.tp_overlap" = 7\n'},
     ["predict", *M, *W, "--dp", "4", "--tp", "2", "--profile", "{d}/o.toml"],
     "NETWORK.tp_overlap=7"),
    ("profile-time-absurd", {"g.toml": '[constants]\n"KERNEL_GAP_S" = 1e9\n'},
     ["plan", *M, *W, "--profile", "{d}/g.toml"], "KERNEL_GAP_S"),
    ("profile-bom-then-garbage", {"b.toml": "\ufeff[constants\n"},
     ["plan", *M, *W, "--profile", "{d}/b.toml"], "not valid TOML"),
    ("scenario-tokens-contradict-batch",
     {"t.toml": '[model]\npreset = "llama3.1-8b"\n[cluster]\ngpus = "8xH100-SXM-80GB"\n'
                '[workload]\nseq_len = 4096\nglobal_batch = 32\nglobal_batch_tokens = 262144\n'
                '[plan]\ndp = 8\n'},
     ["predict", "--scenario", "{d}/t.toml"], "contradicts global_batch 32"),
    ("scenario-num-gpus-contradicts-gpus",
     {"n.toml": GOOD_SCENARIO.replace('gpus = "8xH100-SXM-80GB"\n',
                                      'gpus = "8xH100-SXM-80GB"\nnum_gpus = 16\n')},
     ["predict", "--scenario", "{d}/n.toml"], "num_gpus=16"),
    ("scenario-plan-alias-twice", {"a.toml": GOOD_SCENARIO + "data_parallel = 4\n"},
     ["predict", "--scenario", "{d}/a.toml"], "contradicts plan.dp"),
    ("scenario-plan-float-degree", {"f.toml": GOOD_SCENARIO + "zero = 3.0\n"},
     ["predict", "--scenario", "{d}/f.toml"], "must be a TOML integer"),
    ("scenario-framework-unknown",
     {"j.toml": GOOD_SCENARIO.replace("global_batch = 32\n",
                                      'global_batch = 32\nframework = "jax"\n')},
     ["predict", "--scenario", "{d}/j.toml"], "framework='jax'"),
    ("label-rc-full0", {}, ["predict", *M, *W, "--plan", "dp8 tp1 pp1 zero1 mb1 rc-full0"],
     "rc-fullN needs N >= 1"),
    ("serve-zero-replicas", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1000",
                                 "--output-len", "200", "--requests", "50", "--rate", "4",
                                 "--plan", "tp4x0"], "replicas=0"),
    ("serve-rate-beyond-the-clock", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len",
                                         "1000", "--output-len", "200", "--requests", "200",
                                         "--rate", "1e-12"], "the last request arrives after"),
    ("serve-model-id-newline", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1000",
                                    "--output-len", "200", "--requests", "50", "--rate", "4",
                                    "--plan", "tp4x2", "--export", "vllm", "--out", "{d}/se",
                                    "--model-id", "org/m\necho INJECTED"], "control characters"),
    ("model-file-name-newline", {"x\necho PWNED.json": LLAMA_HF % ""},
     ["export", "--model", "{d}/x\necho PWNED.json", *W, "--plan", "dp8 tp1 pp1 zero3 mb2",
      "--to", "megatron", "--out", "{d}/ex"], "control characters"),
    ("hf-llama-unknown-act", {"g/config.json": hf(', "hidden_act": "foo"')},
     ["plan", "--model", "{d}/g", *W], "config.json:hidden_act='foo'"),
    ("plan-max-gpus-below-the-cluster", {}, ["plan", *M, *W, "--max-gpus", "3"], "--max-gpus=3"),
    ("validate-serve-trust-unknown", {}, ["validate-serve", "{d}/none.csv", "--trust", "Q"],
     "--trust='Q'"),
    # scenario keys of the wrong kind: a number where a path belongs was a TypeError
    # traceback; `plan = 5` at the top and an empty gpu_file were ignored without a word;
    # a quoted degree was taken as the number
    ("scenario-config-number", {"s.toml": GOOD_SCENARIO.replace('preset = "llama3.1-8b"',
                                                               "config = 5")},
     ["predict", "--scenario", "{d}/s.toml"], "model.config=5"),
    ("scenario-gpu-file-number",
     {"s.toml": GOOD_SCENARIO.replace('[workload]', 'gpu_file = 5\n[workload]')},
     ["predict", "--scenario", "{d}/s.toml"], "cluster.gpu_file=5"),
    ("scenario-gpu-file-empty",
     {"s.toml": GOOD_SCENARIO.replace('[workload]', 'gpu_file = ""\n[workload]')},
     ["predict", "--scenario", "{d}/s.toml"], "cluster.gpu_file=''"),
    ("scenario-plan-not-a-table",
     {"s.toml": "plan = 5\n" + GOOD_SCENARIO.replace("[plan]\ndp = 8\n", "")},
     ["plan", "--scenario", "{d}/s.toml"], "plan=5: must be a [plan] table"),
    ("scenario-plan-degree-quoted", {"s.toml": GOOD_SCENARIO.replace("dp = 8", 'dp = "8"')},
     ["predict", "--scenario", "{d}/s.toml"], "plan.dp='8': must be a TOML integer"),
    # the link between pools: inf was taken (an infinitely fast link), TOML text converted
    ("pools-inter-pool-inf", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB",
                                  "--seq-len", "4096", "--global-batch", "32",
                                  "--inter-pool-gbps", "inf"], "inter_pool_gbps=inf"),
    ("pools-inter-pool-text",
     {"p.toml": '[model]\npreset = "llama3.1-8b"\n[cluster]\npools = [{gpus = "8xH100-SXM-80GB"}, '
                '{gpus = "8xA100-SXM-80GB"}]\ninter_pool_gbps = "100"\n[workload]\n'
                'seq_len = 4096\nglobal_batch = 32\n'},
     ["plan", "--scenario", "{d}/p.toml"], "inter_pool_gbps='100': must be a number"),
    # json keeps the last of two equal keys, and recurses once per nesting level
    ("hf-duplicate-key", {"c/config.json": hf(', "hidden_size": 512')},
     ["plan", "--model", "{d}/c", *W], "config.json:hidden_size=512: given twice (first 256)"),
    ("hf-nested-too-deeply", {"c/config.json": "[" * 100000 + "]" * 100000},
     ["plan", "--model", "{d}/c", *W], "nested too deeply"),
    # bytes of argv that are not UTF-8 (surrogates once decoded): a UnicodeEncodeError when
    # the launch script was written
    ("serve-model-id-not-utf8", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len",
                                     "1000", "--output-len", "200", "--requests", "50",
                                     "--rate", "4", "--plan", "tp4x2", "--export", "vllm",
                                     "--out", "{d}/se", "--model-id", "org/m\udcff"],
     "must be UTF-8 text"),
    # GPU file keys taken and ignored: the GPU class's own fields (memory_bytes, ...), the
    # latencies and the compute capability (an FP8 export for a part below vLLM's floor
    # was written); memory_gb beside memory_gib; a precision the peaks are never read at
    ("gpu-toml-bytes-field", {"g.toml": GOOD_GPU + "memory_bytes = 5\n"},
     ["gpus", "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.memory_bytes=5: unknown key"),
    ("gpu-toml-compute-capability-read",
     {"g.toml": GOOD_GPU.replace("bf16 = 500", "bf16 = 500, fp8 = 1000")
      + "compute_capability = 7.0\n"},
     ["serve", *M, "--gpu-file", "{d}/g.toml", "--gpus", "4xMyGPU", "--input-len", "1000",
      "--output-len", "200", "--requests", "50", "--rate", "4", "--plan", "tp4x1",
      "--weights", "fp8", "--export", "vllm", "--out", "{d}/se"], "MyGPU is 7"),
    ("gpu-toml-memory-twice", {"g.toml": GOOD_GPU + "memory_gb = 10\n"},
     ["gpus", "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.memory_gb=10: contradicts memory_gib"),
    ("gpu-toml-peak-unknown-precision",
     {"g.toml": GOOD_GPU.replace("bf16 = 500", "bf16 = 500, fp08 = 1000")},
     ["gpus", "--gpu-file", "{d}/g.toml"], "gpu.MyGPU.peak_tflops.fp08=1000: unknown precision"),
    ("gpu-toml-name-control-character", {"g.toml": GOOD_GPU.replace("MyGPU", '"A\\u001bB"')},
     ["gpus", "--gpu-file", "{d}/g.toml"], "control characters"),
    # an output that is one of the command's own inputs was written over it: the model's
    # config.json by a trace, the runs CSV by the profile fitted on it, and an export into
    # the folder of the plan.toml it reads deleted that file; two pictures on one path
    ("simulate-trace-over-the-model-config", {"m.json": hf("")},
     ["simulate", "--model", "{d}/m.json", *W, "--dp", "4", "--pp", "2", "--trace",
      "{d}/m.json"], "m.json': is a file this command reads"),
    ("calibrate-out-is-the-runs-csv", {"r.csv": "gpu,num_gpus\n"},
     ["calibrate", "--from-runs", "{d}/r.csv", "--out", "{d}/r.csv"],
     "is a file this command reads"),
    ("export-out-holds-its-own-plan-file", {"o/plan.toml": GOOD_SCENARIO},
     ["export", "--scenario", "{d}/o/plan.toml", "--to", "megatron", "--out", "{d}/o"],
     "holds plan.toml, a file this command reads"),
    ("simulate-png-and-mem-png-one-file", {},
     ["simulate", *M, *W, "--dp", "4", "--pp", "2", "--png", "{d}/a.png", "--mem-png",
      "{d}/a.png"], "is also --png"),
    # --model "" (an unset shell variable) was Path(""): the current folder's config.json
    ("model-empty", {}, ["plan", "--model", "", *W], "--model='': is blank; give a value or"),
    # a folder named like an export file is not a previous export: replacing it deleted it
    # and what it held
    ("out-holds-a-folder-named-like-an-export-file", {"out/plan.toml/data.txt": "mine"},
     ["export", *M, *W, "--dp", "8", "--to", "megatron", "--out", "{d}/out"],
     "holds other files (plan.toml)"),
    # serve wrote its export, then failed on the PNG: the export stayed
    ("serve-png-unwritable-leaves-no-export", {},
     ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1000", "--output-len", "200",
      "--requests", "50", "--rate", "4", "--plan", "tp4x2", "--export", "vllm", "--out",
      "{d}/se", "--png", "/proc/x.png"], "output='/proc/x.png': cannot write"),
    # an output that could not be written ended the command after its report was printed
    # (--json's whole document on stdout, exit 2); a PNG was written under any name
    ("plan-json-export-unwritable", {}, ["plan", *M, *W, "--json", "--export", "megatron",
                                         "--out", "/proc/x"], "--out='/proc/x': cannot"),
    ("procurement-json-png-unwritable", {},
     ["plan", *M, "--seq-len", "4096", "--global-batch", "32", "--gpu-types",
      "H100-SXM-80GB,A100-SXM-80GB", "--train-tokens", "1B", "--deadline", "30d", "--json",
      "--png", "/proc/x.png"], "output='/proc/x.png': cannot write"),
    ("procurement-png-not-png", {},
     ["plan", *M, "--seq-len", "4096", "--global-batch", "32", "--gpu-types",
      "H100-SXM-80GB,A100-SXM-80GB", "--train-tokens", "1B", "--deadline", "30d",
      "--png", "{d}/c.json"], "file name must end in .png"),
    ("serve-png-not-png", {}, ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "1000",
                               "--output-len", "200", "--requests", "50", "--rate", "4",
                               "--plan", "tp4x2", "--png", "{d}/p.svg"],
     "file name must end in .png"),
    # the run's folders: a checkpoint folder that is a file failed on every worker (exit 1);
    # an --out that cannot be created was a FileNotFoundError traceback
    ("run-checkpoint-dir-is-a-file", {"ck": "mine"},
     ["run", "--steps", "1", "--device", "cpu", "--checkpoint-dir", "{d}/ck",
      "--checkpoint-every", "1"], "ck': is a file; give a folder"),
    ("run-out-cannot-be-created", {}, ["run", "--steps", "1", "--device", "cpu", "--out",
                                       "/proc/x"], "--out='/proc/x': cannot be created"),
    # calibrate: flags of the other mode were ignored without a word
    ("calibrate-from-runs-with-gpu", {"r.csv": "gpu,num_gpus\n"},
     ["calibrate", "--from-runs", "{d}/r.csv", "--gpu", "H9000", "--out", "{d}/p.toml"],
     "--gpu='H9000': applies to measuring"),
    ("calibrate-force-without-from-runs", {},
     ["calibrate", "--out", "{d}/p.toml", "--force"], "--force=True: applies to --from-runs"),
    # a context length that is no length was taken as none given (serve never refused)
    ("hf-max-positions-negative", {"c/config.json": hf(', "max_position_embeddings": -1')},
     ["plan", "--model", "{d}/c", *W], "config.json:max_position_embeddings=-1"),
    # a scenario's inline model gives rope_scaling as text: it was not read until an export
    # (a JSONDecodeError or AttributeError traceback), nor checked as a config.json's is
    ("scenario-inline-rope-scaling-not-json",
     {"s.toml": GOOD_SCENARIO.replace('preset = "llama3.1-8b"',
                                      'name = "x"\nlayers = 4\nhidden = 256\nheads = 4\n'
                                      'kv_heads = 4\nffn = 512\nvocab = 1000\n'
                                      'rope_scaling = "notjson"')},
     ["export", "--scenario", "{d}/s.toml", "--to", "megatron", "--out", "{d}/ex"],
     "rope_scaling='notjson': must be JSON text of an object"),
    ("scenario-inline-rope-factor-negative",
     {"s.toml": GOOD_SCENARIO.replace('preset = "llama3.1-8b"',
                                      'name = "x"\nlayers = 4\nhidden = 256\nheads = 4\n'
                                      'kv_heads = 4\nffn = 512\nvocab = 1000\nrope_scaling = '
                                      '"{\\"rope_type\\": \\"llama3\\", \\"factor\\": -8}"')},
     ["export", "--scenario", "{d}/s.toml", "--to", "megatron", "--out", "{d}/ex"],
     "rope_scaling.factor=-8"),
    # a profile's [meta] that is no table was an AttributeError traceback; a table other
    # than [meta] and [constants] (a misspelt [constant]) was ignored
    ("profile-meta-not-a-table", {"p.toml": 'meta = 5\n[constants]\n"NETWORK.tp_overlap" = 0.5\n'},
     ["predict", *M, *W, "--dp", "8", "--profile", "{d}/p.toml"], "[meta] must be a table"),
    ("profile-unknown-table",
     {"p.toml": '[constants]\n"NETWORK.tp_overlap" = 0.5\n[constant]\n"NETWORK.scaleup" = 0.5\n'},
     ["predict", *M, *W, "--dp", "8", "--profile", "{d}/p.toml"], "unknown table or key 'constant'"),
    # options of the one-GPU-type search that pools and procurement took and ignored, and
    # --use-scenario-plan without a scenario
    ("pools-rank-by-p90", {}, ["plan", *M, "--gpus", "8xH100-SXM-80GB+8xA100-SXM-80GB",
                               "--seq-len", "4096", "--global-batch", "32", "--rank-by", "p90"],
     "--rank-by='p90': applies to one GPU type"),
    ("procurement-engine", {}, ["plan", *M, "--seq-len", "4096", "--global-batch", "32",
                                "--gpu-types", "H100-SXM-80GB,A100-SXM-80GB", "--train-tokens",
                                "1B", "--deadline", "30d", "--engine", "deepspeed"],
     "--engine='deepspeed': applies to one GPU type"),
    ("use-scenario-plan-without-scenario", {}, ["plan", *M, *W, "--use-scenario-plan"],
     "--use-scenario-plan=True: pins the [plan] table of --scenario"),
    # rope_scaling's numbers were not checked: a negative factor went into Megatron's
    # --rope-scaling-factor, a missing or text one ended the exports in a traceback
    ("hf-rope-factor-negative",
     {"c/config.json": hf(', "rope_scaling": {"rope_type": "llama3", "factor": -8}')},
     ["export", "--model", "{d}/c", *W, "--plan", "dp8 tp1 pp1 zero3 mb1", "--to", "megatron",
      "--out", "{d}/ex"], "config.json:rope_scaling.factor=-8"),
    ("hf-rope-factor-missing", {"c/config.json": hf(', "rope_scaling": {"rope_type": "llama3"}')},
     ["export", "--model", "{d}/c", *W, "--plan", "dp8 tp1 pp1 zero3 mb1", "--to", "torchtitan",
      "--out", "{d}/ex"], "config.json:rope_scaling.factor=None: missing"),
    ("hf-rope-original-positions-text",
     {"c/config.json": hf(', "rope_scaling": {"rope_type": "llama3", "factor": 8, '
                          '"original_max_position_embeddings": "big"}')},
     ["export", "--model", "{d}/c", *W, "--plan", "dp8 tp1 pp1 zero3 mb1", "--to", "torchtitan",
      "--out", "{d}/ex"], "rope_scaling.original_max_position_embeddings='big'"),
    # a blank value (an unset shell variable) was read as not given (`if args.x`, `args.x or
    # ...`): the file's value, the default or nothing, exit 0; refused by the parser now, for
    # every flag of every command (cli._Parser), as `--out ""` was by export alone
    *[(f"blank-{argv[0]}-{argv[argv.index('') - 1].lstrip('-')}", {"s.toml": GOOD_SCENARIO},
       argv, f"{argv[argv.index('') - 1]}='': is blank; give") for argv in [
        ["predict", "--scenario", "", *M, *W, "--dp", "8"],
        ["predict", "--scenario", "{d}/s.toml", "--model", ""],
        ["predict", "--scenario", "{d}/s.toml", "--gpus", ""],
        ["predict", "--scenario", "{d}/s.toml", "--gpu-file", ""],
        ["predict", "--scenario", "{d}/s.toml", "--fp8-recipe", ""],
        ["predict", "--scenario", "{d}/s.toml", "--recompute-modules", ""],
        ["predict", "--scenario", "{d}/s.toml", "--profile", ""],
        ["simulate", "--scenario", "{d}/s.toml", "--png", ""],
        ["simulate", "--scenario", "{d}/s.toml", "--trace", ""],
        ["plan", *M, *W, "--out", ""],
        ["plan", *M, *W, "--price", ""],
        ["export", "--scenario", "{d}/s.toml", "--to", "megatron", "--out", "{d}/ex",
         "--gpus", ""],
        ["run", "--nnodes", "2", "--dp", "2", "--out", ""],
        ["run", "--nnodes", "2", "--dp", "2", "--master", ""],
        ["run", "--dp", "1", "--checkpoint-dir", ""],
        ["dryrun", "--gpus", ""],
        ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "100", "--output-len", "10",
         "--rate", "1", "--plan", ""],
        ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "100", "--output-len", "10",
         "--rate", "1", "--trace", ""],
        ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--input-len", "100", "--output-len", "10",
         "--rate", "1", "--model-id", ""],
        ["validate", "{d}/s.toml", "--profile", ""],
    ]],
    ("blank-export-positional", {"s.toml": GOOD_SCENARIO},
     ["export", "", "--scenario", "{d}/s.toml", "--to", "megatron", "--out", "{d}/ex"],
     "PLAN.toml='': is blank; give a value"),
    # --inter-pool-gbps 0 on top of a pools scenario was read as not given (the file's link)
    ("inter-pool-gbps-zero-on-a-pools-scenario",
     {"p.toml": '[model]\npreset = "llama3.1-8b"\n[cluster]\npools = [{gpus = '
                '"8xH100-SXM-80GB"}, {gpus = "8xA100-SXM-80GB"}]\n[workload]\nseq_len = 4096\n'
                'global_batch = 32\n'},
     ["plan", "--scenario", "{d}/p.toml", "--inter-pool-gbps", "0"],
     "inter_pool_gbps=0.0: must be a finite number > 0"),
]


def _materialize(tmp: Path, files: dict, argv: list[str]) -> list[str]:
    for rel, text in files.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return [a.replace("{d}", str(tmp)) for a in argv]


def _snapshot(tmp: Path) -> dict:
    return {str(p.relative_to(tmp)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(tmp.rglob("*"))}


def _import_runtime(argv: list[str]) -> None:
    """run and dryrun import torch.distributed (6-8 s, over 20 s on a loaded 2-core machine)
    before they read their flags: imported here, outside the timed part, so that the time
    limit below times the command's own work before its refusal, not that import."""
    if argv[:1] in (["run"], ["dryrun"]):
        try:
            import meshplan.runtime.checkpoint  # noqa: F401
            import meshplan.runtime.dryrun  # noqa: F401
            import meshplan.runtime.orchestrate  # noqa: F401
        except ImportError:  # no torch: the commands refuse that in one line themselves
            pass


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(case, tmp_path, capsys):
    _, files, argv, needle = case
    argv = _materialize(tmp_path, files, argv)
    before = _snapshot(tmp_path)
    _import_runtime(argv)
    t0 = time.perf_counter()
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own errors (a non-integer where one belongs)
        rc = e.code
    took = time.perf_counter() - t0
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, f"exit {rc}; stderr: {err!r}"
    assert len(lines) == 1, f"not one line: {err!r}"
    assert "Traceback" not in err and needle in lines[0], lines[0]
    assert out == ""
    assert _snapshot(tmp_path) == before, "something was written"
    assert took < 20, f"took {took:.1f} s"


def test_a_million_gpus_answers_in_seconds(capsys):
    """The largest cluster in range is planned, not refused, and quickly."""
    t0 = time.perf_counter()
    rc = main(["plan", "--model", "llama3.1-405b", "--gpus", f"{2**20}xH100-SXM-80GB",
               "--seq-len", "8192", "--global-batch", str(2**22), "--rerank", "0", "--top", "1"])
    assert rc == 0 and "winner:" in capsys.readouterr().out
    assert time.perf_counter() - t0 < 30


def test_one_case_through_a_real_process(tmp_path):
    """The same through the installed entry point: no traceback reaches the terminal."""
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "plan", "--model", "llama99", *W],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def table() -> str:
    """The cases and what each gets, as a Markdown table (run this file to print it)."""
    import contextlib
    import io
    import tempfile

    rows = ["| case | command | exit | error line |", "|---|---|---|---|"]
    for cid, files, argv, _ in CASES:
        with tempfile.TemporaryDirectory() as d:
            args = _materialize(Path(d), files, argv)
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    rc = main(args)
                except SystemExit as e:
                    rc = e.code
            line = err.getvalue().strip().replace(d, "DIR").replace("|", "\\|")
        rows.append(f"| {cid} | `{argv[0]}` | {rc} | {line} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())


def test_out_holding_a_previous_export_is_replaced_whole(tmp_path):
    """A folder holding only an earlier export is replaced in one rename: afterwards it
    holds exactly the new export's files, and no temporary folder is left beside it."""
    out = tmp_path / "out"
    base = ["export", *M, *W, "--dp", "8", "--zero", "3", "--out", str(out)]
    assert main(base + ["--to", "megatron"]) == 0
    assert main(base + ["--to", "deepspeed"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["deepspeed_launch.sh", "ds_config.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_out_is_the_current_folder(tmp_path, monkeypatch):
    """--out . (where the shell stands): the folder stays the same folder, its earlier export
    is replaced by the new one."""
    monkeypatch.chdir(tmp_path)
    base = ["export", *M, *W, "--dp", "8", "--zero", "3", "--out", "."]
    assert main(base + ["--to", "megatron"]) == 0
    assert main(base + ["--to", "deepspeed"]) == 0
    assert Path.cwd().exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deepspeed_launch.sh", "ds_config.json"]


@pytest.mark.parametrize("lengths", [("10000000", "128"), ("100", "10000000")],
                         ids=["prompt", "output"])
def test_serve_request_longer_than_the_kv_cache_is_refused_not_simulated_forever(lengths,
                                                                                  tmp_path):
    """A request that alone does not fit a replica's KV cache never finishes: it was
    preempted and recomputed forever (the prompt case hung; the output case ran millions
    of decode steps per plan). Now every plan refuses it up front, so the command is one
    line and exit 2 in seconds (a subprocess, so that a hang fails instead of blocking).
    Llama 3.1 8B's config without its context keys: with them, serve refuses 10M tokens as
    longer than the model's context before any plan (tests/test_serve_context.py)."""
    import json
    cfg = json.loads((Path(presets.__file__).parent / "models" / "llama3.1-8b.json").read_text())
    cfg.pop("max_position_embeddings")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    inp, out = lengths
    p = subprocess.run([sys.executable, "-m", "meshplan.cli", "serve", "--model",
                        str(tmp_path / "config.json"), "--gpus",
                        "8xH100-SXM-80GB", "--input-len", inp, "--output-len", out,
                        "--requests", "2", "--rate", "5"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "does not fit the replica's KV cache" in p.stderr and "Traceback" not in p.stderr


def test_out_empty_string_is_refused_not_the_current_folder(tmp_path, monkeypatch, capsys):
    """--out "" (an unset shell variable) was Path(""), the current folder: the export was
    written where the shell stood. Now one line, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    assert main(["export", *M, *W, "--dp", "8", "--to", "megatron", "--out", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out=''" in err
    assert list(tmp_path.iterdir()) == []


def test_a_model_folder_named_with_bytes_not_utf8_exports(tmp_path, capsys):
    """A config.json in a folder whose name is not UTF-8 (b'x\\xff'): every export ended in
    a UnicodeEncodeError traceback and left its staging folder (.ex.XXXX) beside --out. The
    name is now written as x\\xff, and the staging folder never outlives the export."""
    d = tmp_path / "x\udcff"  # os.fsencode: b"x\xff"
    d.mkdir()
    (d / "config.json").write_text(hf(""))
    for engine in ("megatron", "torchtitan", "meshplan"):
        out = tmp_path / f"ex-{engine}"
        assert main(["export", "--model", str(d), *W, "--plan", "dp8 tp1 pp1 zero3 mb1",
                     "--to", engine, "--out", str(out)]) == 0, capsys.readouterr().err
        assert any("x\\xff" in f.read_text() for f in out.iterdir())
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch, capsys):
    """A write that fails after its temporary file is made (a full disk, Ctrl-C) removed
    nothing: the hidden temporary file stayed beside the output (simulate --trace, plan and
    serve --png, calibrate --out), and so did an export's staging folder."""
    import os

    real = os.replace

    def fail(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    sim = ["simulate", *M, *W, "--dp", "4", "--pp", "2"]
    assert main([*sim, "--trace", str(tmp_path / "t.json")]) == 2
    assert "No space left" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []

    def interrupt(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupt)
    assert main([*sim, "--trace", str(tmp_path / "t.json")]) == 130
    assert main(["export", *M, *W, "--dp", "8", "--to", "megatron",
                 "--out", str(tmp_path / "ex")]) == 130
    monkeypatch.setattr(os, "replace", real)
    assert list(tmp_path.iterdir()) == []


def test_plan_toml_with_characters_past_the_bmp_reads_back(tmp_path, capsys):
    """export --to meshplan wrote names as JSON strings: an emoji (in a model's folder name,
    a GPU's name) became two surrogate escapes, which TOML refuses, so predict --scenario on
    the written plan.toml failed. Now the same step time comes back."""
    d = tmp_path / "m\U0001F600"
    d.mkdir()
    (d / "config.json").write_text(hf(""), encoding="utf-8")
    (tmp_path / "g.toml").write_text(GOOD_GPU.replace("MyGPU", '"G\U0001F680"'),
                                     encoding="utf-8")
    args = ["--model", str(d), "--gpu-file", str(tmp_path / "g.toml"),
            "--gpus", "8xG\U0001F680", "--seq-len", "4096", "--global-batch", "32",
            "--plan", "dp8 tp1 pp1 zero1 mb1"]
    assert main(["predict", *args]) == 0
    direct = capsys.readouterr().out.splitlines()[2]
    assert main(["export", *args, "--to", "meshplan", "--out", str(tmp_path / "ex")]) == 0
    capsys.readouterr()
    assert main(["predict", "--scenario", str(tmp_path / "ex" / "plan.toml")]) == 0, \
        capsys.readouterr().err
    assert capsys.readouterr().out.splitlines()[2] == direct


def test_gpu_file_latencies_are_read_and_exported(tmp_path, capsys):
    """scaleup_latency_s / scaleout_latency_s in a GPU file were accepted and ignored; they
    are read now, and plan.toml's gpus.toml carries them (and the power limit and compute
    capability) so that the exported scenario is the same GPU."""
    from meshplan.scenario import gpu_catalog, load_scenario
    (tmp_path / "g.toml").write_text(GOOD_GPU + "scaleup_latency_s = 2e-5\n"
                                     "scaleout_latency_s = 4e-5\ncompute_capability = 8.9\n"
                                     "power_limit_w = 500\n")
    g = gpu_catalog(tmp_path / "g.toml")["MyGPU"]
    assert (g.scaleup_latency_s, g.scaleout_latency_s, g.compute_capability,
            g.power_limit_w) == (2e-5, 4e-5, 8.9, 500)
    assert main(["export", "--gpu-file", str(tmp_path / "g.toml"), "--gpus", "8xMyGPU", *M,
                 "--seq-len", "4096", "--global-batch", "32", "--dp", "8", "--to", "meshplan",
                 "--out", str(tmp_path / "ex")]) == 0
    assert load_scenario(tmp_path / "ex" / "plan.toml").cluster.gpu == g


def test_python_dash_m_meshplan_is_the_command():
    """`python -m meshplan` (no console script on PATH) ran nothing: "No module named
    meshplan.__main__". It is the command now, bad input and all."""
    p = subprocess.run([sys.executable, "-m", "meshplan", "plan", "--model", "llama99", *W],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "model='llama99'" in p.stderr


@pytest.mark.parametrize("argv", [
    ["plan", "--model", "{f}", *W],
    ["predict", "--scenario", "{f}"],
    ["plan", *M, *W, "--gpu-file", "{f}"],
    ["predict", *M, *W, "--dp", "8", "--profile", "{f}"],
    ["validate", "{f}"],
    ["serve", *M, "--gpus", "8xH100-SXM-80GB", "--trace", "{f}"],
], ids=["model", "scenario", "gpu-file", "profile", "runs-csv", "serve-trace"])
def test_an_input_past_64_mib_is_refused_unread(argv, tmp_path, capsys):
    """Every input was read whole: --model /dev/zero read until memory ran out (a
    MemoryError traceback, or the machine swapping first). Inputs stop at 64 MiB now (a
    sparse file here, standing in for /dev/zero without the risk)."""
    f = tmp_path / "big"
    with open(f, "wb") as fh:
        fh.truncate(64 * 2**20 + 1)
    assert main([a.replace("{f}", str(f)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds more than 64 MiB" in err, err


def test_an_export_with_its_profile_is_a_previous_export(tmp_path, capsys):
    """export --to meshplan --profile P copies the profile into the folder (profile.toml),
    which the next export into it took for a foreign file ("holds other files"): the folder
    of a previous export could not be reused. It is replaced whole now."""
    prof = tmp_path / "p.toml"
    prof.write_text('[meta]\ndevice = "x"\n[constants]\n"NETWORK.tp_overlap" = 0.5\n')
    from meshplan.commands import _profile
    base = ["export", *M, *W, "--dp", "8", "--zero", "3", "--out", str(tmp_path / "out")]
    try:
        assert main(base + ["--to", "meshplan", "--profile", str(prof)]) == 0
    finally:
        _profile.reset()  # the profile applied in this process: not for the next tests
    assert (tmp_path / "out" / "profile.toml").exists()
    assert main(base + ["--to", "megatron"]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["megatron_launch.sh"]


def test_serve_trace_past_the_request_bound_is_refused(tmp_path):
    """--requests stops at 100,000 (each request runs through every candidate plan's
    simulation); a --trace of more rows was simulated whole, for minutes to hours. Refused
    now in one line (a subprocess, so that the old behaviour fails instead of blocking)."""
    rows = "".join(f"{i * 0.01:.2f},100,10\n" for i in range(100_001))
    (tmp_path / "t.csv").write_text("arrival_s,input_len,output_len\n" + rows)
    p = subprocess.run([sys.executable, "-m", "meshplan", "serve", *M, "--gpus",
                        "8xH100-SXM-80GB", "--trace", str(tmp_path / "t.csv"), "--plan", "tp1x8"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "holds 100,001 requests; at most 100,000" in p.stderr


def test_a_name_with_triple_quotes_stays_in_the_torchtitan_docstring(tmp_path, capsys):
    """torchtitan_job.py opens with a docstring naming the model (its folder's name): a name
    holding three double quotes ended the docstring and the rest of the name ran as Python
    on every rank (here a SyntaxError). Quotes and backslashes in it are escaped now."""
    import ast
    d = tmp_path / 'm"""; import os  # \\x'
    d.mkdir()
    (d / "config.json").write_text(hf(""))
    out = tmp_path / "tt"
    assert main(["export", "--model", str(d), *W, "--plan", "dp8 tp1 pp1 zero3 mb1",
                 "--to", "torchtitan", "--out", str(out)]) == 0, capsys.readouterr().err
    module = ast.parse((out / "torchtitan_job.py").read_text())
    assert 'model:    m"""; import os  # \\x (4 layers' in ast.get_docstring(module)
