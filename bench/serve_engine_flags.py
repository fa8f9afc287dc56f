"""Dump the flags (and their choices) that vLLM's and SGLang's own argument parsers accept.

Run in an environment where both packages import without a GPU, e.g.:
    python -m venv --system-site-packages /tmp/eng && /tmp/eng/bin/pip install --no-deps vllm sglang
    (then add the pure-Python imports they ask for, each with --no-deps, so torch stays as is)
    VLLM_TARGET_DEVICE=cpu /tmp/eng/bin/python bench/serve_engine_flags.py > tests/data/serve_engine_flags.json
Also parses every command meshplan exports for a set of plans with those same parsers
(``--check``), which is how the exporter was verified.
"""

import argparse
import json
import sys


def vllm_parser():
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    return make_arg_parser(FlexibleArgumentParser())


def sglang_parser():
    from sglang.srt.server_args import ServerArgs
    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    return p


def dump(p) -> dict:
    return {k: (sorted(map(str, a.choices)) if a.choices else None)
            for k, a in sorted(p._option_string_actions.items()) if k.startswith("--")}


def main() -> None:
    import importlib.metadata as md
    parsers = {"vllm": vllm_parser(), "sglang": sglang_parser()}
    if "--check" in sys.argv:
        sys.path.insert(0, ".")
        from meshplan.scenario import make_cluster
        from meshplan.serve.export import commands
        from meshplan.serve.spec import Pool, ServePlan
        from meshplan.specs.catalog.presets import load_model
        cases = [("llama3.1-70b", ServePlan((Pool(tp=4, replicas=2),), "fp8", "fp8")),
                 ("llama3.1-405b", ServePlan((Pool(tp=8, pp=2),))),
                 ("deepseek-v3", ServePlan((Pool(tp=1, attn_dp=8, ep=8),), "fp8", "bf16")),
                 ("qwen3-235b-a22b", ServePlan((Pool(tp=8, ep=8),), "fp8", "fp8")),
                 ("llama3.1-70b", ServePlan((Pool(tp=4, replicas=2, role="prefill"),
                                             Pool(tp=8, role="decode")), kv_tier="scale-out"))]
        for name, plan in cases:
            for eng, p in parsers.items():
                try:
                    cmds = commands(eng, plan, load_model(name), "org/" + name,
                                    make_cluster("16xH100-SXM-80GB"), 2300)
                except Exception as e:  # refused
                    print(f"{eng} {name} {plan.describe()}: refused: {e}")
                    continue
                for label, argv in cmds:
                    if label.startswith("router"):
                        continue
                    args = argv[argv.index("serve") + 1:] if eng == "vllm" else argv[argv.index("sglang.launch_server") + 1:]
                    if eng == "vllm":
                        ns = p.parse_args(args)
                        print(f"vllm ok {name}: tp={ns.tensor_parallel_size} pp={ns.pipeline_parallel_size}"
                              f" dp={ns.data_parallel_size} ep={ns.enable_expert_parallel}"
                              f" seqs={ns.max_num_seqs} tokens={ns.max_num_batched_tokens}"
                              f" kv={ns.kv_cache_dtype} q={ns.quantization}")
                    else:
                        ns = p.parse_args(args)
                        print(f"sglang ok {name} {label}: tp={ns.tp_size} pp={ns.pp_size}"
                              f" attn_dp={ns.attn_dp_size} ep={ns.ep_size}"
                              f" running={ns.max_running_requests} chunk={ns.chunked_prefill_size}"
                              f" kv={ns.kv_cache_dtype} mode={ns.disaggregation_mode}")
        return
    out = {e: {"version": md.version(e), "flags": dump(p)} for e, p in parsers.items()}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
