"""Scenarios shared by the export tests: (id, model preset, gpus, Workload args, Plan kwargs)."""

from meshplan.plan import Plan
from meshplan.scenario import Scenario, make_cluster
from meshplan.specs.catalog.presets import load_model
from meshplan.specs.workload import Workload


def scenario(model: str, gpus: str, seq: int, batch: int, precision: str = "bf16", **plan) -> Scenario:
    return Scenario(load_model(model), make_cluster(gpus), Workload(seq, batch, precision), Plan(**plan))


# Plans every engine named can express (engine -> list of (id, scenario args)).
MEGATRON = [
    ("llama70b-tp8pp4vpp2", ("llama3.1-70b", "64xH100-SXM-80GB", 8192, 512), dict(dp=2, tp=8, pp=4, vpp=2, recompute="selective")),
    ("llama70b-uneven-pp6", ("llama3.1-70b", "48xH100-SXM-80GB", 8192, 96), dict(dp=1, tp=8, pp=6, recompute="full")),
    ("llama70b-uneven-vpp", ("llama3.1-70b", "48xH100-SXM-80GB", 8192, 96), dict(dp=1, tp=8, pp=6, vpp=3)),
    ("llama70b-partial-recompute", ("llama3.1-70b", "64xH100-SXM-80GB", 8192, 512),
     dict(dp=2, tp=8, pp=4, vpp=2, recompute="full", recompute_layers=3)),
    ("llama8b-cp-a2a-zero3", ("llama3.1-8b", "16xH100-SXM-80GB", 16384, 64), dict(dp=4, cp=2, tp=2, zero=3, cp_kind="all_to_all")),
    ("llama8b-zero2-offload", ("llama3.1-8b", "8xH100-SXM-80GB", 8192, 64), dict(dp=8, zero=2, offload_optimizer=True)),
    ("llama8b-zero1-hsdp", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=16, zero=1, hsdp_shard=8)),
    ("llama8b-fp8-bfs", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, "fp8"), dict(dp=4, tp=2, pp=2, vpp=2, schedule="looped_bfs", tp_comm_overlap=True)),
    ("llama8b-tppp-order", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=4, tp=2, pp=2, order="tp-cp-pp-dp")),
    ("deepseek-v3", ("deepseek-v3", "256xH100-SXM-80GB", 4096, 1024), dict(dp=32, pp=8, ep=32, zero=1)),
    ("mixtral-ep-etp", ("mixtral-8x7b", "64xH100-SXM-80GB", 4096, 256), dict(dp=8, tp=4, pp=2, ep=8, etp=4)),
    ("qwen3-moe", ("qwen3-30b-a3b", "32xH100-SXM-80GB", 4096, 256), dict(dp=16, tp=2, ep=8)),
    ("qwen3-recompute-modules", ("qwen3-30b-a3b", "32xH100-SXM-80GB", 4096, 256),
     dict(dp=16, tp=2, ep=8, recompute="selective", recompute_modules="layernorm+moe_act")),
    ("deepseek-v3-recompute-modules", ("deepseek-v3", "256xH100-SXM-80GB", 4096, 1024),
     dict(dp=32, pp=8, ep=32, zero=1, recompute="selective",
          recompute_modules="layernorm+mla_up_proj+moe_act")),
    ("gpt2-learned-ln", ("gpt2", "8xA100-SXM-80GB", 1024, 64, "fp16"), dict(dp=8, zero=0)),
    ("gpt3-blackwell-fp8", ("gpt3-175b", "64xB200", 2048, 512, "fp8"), dict(dp=2, tp=8, pp=4, vpp=3)),
    # expert parallelism in fp16: Megatron-LM 4193f3aa (core_v0.16.0) removed validate_args'
    # "Expert parallelism is not supported with fp16 training"; meshplan still refused it
    ("mixtral-fp16-ep", ("mixtral-8x7b", "16xA100-SXM-80GB", 4096, 64, "fp16"), dict(dp=16, ep=8)),
]

TORCHTITAN = [
    ("llama70b-fsdp-tp-pp", ("llama3.1-70b", "64xH100-SXM-80GB", 8192, 512), dict(dp=2, tp=8, pp=4, vpp=2, zero=3, recompute="full")),
    ("llama8b-hsdp-cp", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=4, cp=2, tp=2, zero=2, hsdp_shard=4, recompute="selective")),
    ("llama8b-ddp", ("llama3.1-8b", "8xH100-SXM-80GB", 8192, 64), dict(dp=8, zero=0)),
    ("llama405b-uneven-zbv", ("llama3.1-405b", "192xH100-SXM-80GB", 8192, 192), dict(dp=2, tp=8, pp=12, vpp=2, zero=3, schedule="zb_v")),
    ("qwen3-ep-zbv", ("qwen3-30b-a3b", "32xH100-SXM-80GB", 4096, 256), dict(dp=8, tp=2, pp=2, ep=8, zero=3, vpp=2, schedule="zb_v")),
    ("deepseek-dualpipev", ("deepseek-v3", "256xH100-SXM-80GB", 4096, 1024), dict(dp=32, pp=8, ep=32, zero=2, vpp=2, schedule="dualpipev")),
    ("llama8b-fp8", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64, "fp8"), dict(dp=4, tp=4, zero=3)),
    ("llama8b-gpipe-asynctp", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=2, tp=4, pp=2, zero=3, schedule="gpipe", tp_comm_overlap=True)),
]

DEEPSPEED = [
    ("llama8b-zero3-offload", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=16, zero=3, offload_optimizer=True)),
    ("llama8b-autotp", ("llama3.1-8b", "16xH100-SXM-80GB", 8192, 64), dict(dp=8, tp=2, zero=1, sequence_parallel=False, recompute="full")),
    ("llama70b-pipe", ("llama3.1-70b", "64xH100-SXM-80GB", 4096, 256), dict(dp=16, pp=4, zero=1, recompute="full")),
    ("gpt2-fp16-ddp", ("gpt2", "8xA100-SXM-80GB", 1024, 64, "fp16"), dict(dp=8, zero=0, micro_batch=4)),
    ("llama8b-ulysses", ("llama3.1-8b", "16xH100-SXM-80GB", 16384, 64), dict(dp=4, cp=4, zero=3, cp_kind="all_to_all", recompute="full")),
]


def build(args: tuple, plan: dict) -> Scenario:
    return scenario(*args, **plan)
