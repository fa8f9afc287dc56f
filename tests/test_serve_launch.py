"""What the exported launch lines make the engines do, against the engines' own source
(vLLM 0.33.0 sdist, SGLang 0.5.23 and sglang-router 0.3.2 wheels; file:line cited at each
test). Neither engine is needed here: the facts are written out from the source."""

import subprocess
import sys
from pathlib import Path

import pytest

from meshplan.errors import InputError
from meshplan.scenario import make_cluster
from meshplan.serve.export import commands
from meshplan.serve.spec import Pool, ServePlan
from meshplan.specs.catalog.presets import load_model

ROOT = Path(__file__).resolve().parent.parent
H100X16 = make_cluster("16xH100-SXM-80GB")


def _servers(cmds):
    return [(label, argv) for label, argv in cmds if not label.startswith("router")]


def _flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def _node(label):
    return int(label.rsplit(" ", 1)[1])


DIS = ServePlan((Pool(tp=2, replicas=4, role="prefill"), Pool(tp=8, role="decode")),
                kv_tier="scale-out")


@pytest.mark.parametrize("plan", [DIS, ServePlan((Pool(tp=4, replicas=4),))])
def test_sglang_servers_listen_on_every_interface(plan):
    # SGLang's --host defaults to 127.0.0.1 (sglang/srt/arg_groups/fields/serving.py:65) and
    # the prefill bootstrap server binds it too (managers/disagg_service.py:46-47): the router
    # and other nodes' decode servers reach neither unless it is 0.0.0.0
    for _, argv in _servers(commands("sglang", plan, load_model("llama3.1-70b"), "m",
                                     H100X16, 2300)):
        assert _flag(argv, "--host") == "0.0.0.0"


def test_prefill_bootstrap_ports_distinct_and_given_to_the_router():
    cmds = commands("sglang", DIS, load_model("llama3.1-70b"), "m", H100X16, 2300)
    pre = [(l, a) for l, a in _servers(cmds) if "prefill" in l]
    assert len(pre) == 4 and len({_node(l) for l, _ in pre}) == 1  # all four on node 0
    # every prefill server's bootstrap server binds its own port (default 8998 for all:
    # arg_groups/fields/disagg.py:81-83)
    boot = [_flag(a, "--disaggregation-bootstrap-port") for _, a in pre]
    assert None not in boot and len(set(boot)) == 4
    # the router reads --prefill URL [BOOTSTRAP_PORT], a missing port meaning none
    # (sglang_router/router_args.py:351-356, 977-1006), and the decode server then falls
    # back to 8998 (managers/scheduler.py:2970-2971): each URL must carry its server's port
    router = dict(cmds)["router"]
    given = [(router[i + 1], router[i + 2]) for i, a in enumerate(router) if a == "--prefill"]
    ports = [_flag(a, "--port") for _, a in pre]
    assert given == [(f"http://node0:{p}", b) for p, b in zip(ports, boot)]


def test_attention_dp_limits_are_the_simulated_per_rank_ones():
    plan = ServePlan((Pool(tp=1, attn_dp=8, ep=8, max_num_seqs=64, max_batched_tokens=4096),),
                     "fp8")
    model = load_model("deepseek-v3")
    (_, sg), = _servers(commands("sglang", plan, model, "m", make_cluster("8xH200-SXM-141GB"),
                                 2300))
    # SGLang divides both by the attention-DP size (arg_groups/parallel_hook.py:331;
    # model_executor/pool_configurator.py:956, 1142): each rank must get the plan's figures
    assert int(_flag(sg, "--max-running-requests")) // 8 == 64
    assert int(_flag(sg, "--chunked-prefill-size")) // 8 == 4096
    (_, vl), = _servers(commands("vllm", plan, model, "m", make_cluster("8xH200-SXM-141GB"),
                                 2300))
    assert _flag(vl, "--max-num-seqs") == "64"  # vLLM's is per DP engine already



@pytest.mark.parametrize("tokens, dp, expect", [(32768, 1, "32768"), (32768, 4, "32768"),
                                                (8192, 1, None), (16384, 2, None)])
def test_sglang_prefill_batches_take_the_simulated_token_budget(tokens, dp, expect):
    # SGLang 0.5.23 stops adding prompts to a prefill batch once they hold
    # --max-prefill-tokens (default 16384: arg_groups/fields/schedule.py:71-81;
    # managers/schedule_policy.py PrefillAdder.budget_state, `rem_input_tokens <= 0`), a cap
    # the attention-DP split leaves whole (arg_groups/parallel_hook.py:327-331 divides only
    # chunked_prefill_size); the simulator's per-rank budget is max_batched_tokens
    plan = ServePlan((Pool(tp=4 // dp if dp < 4 else 1, attn_dp=dp, ep=4 if dp > 1 else 1,
                           max_num_seqs=256, max_batched_tokens=tokens),))
    (_, sg), = _servers(commands("sglang", plan, load_model("qwen3-30b-a3b"), "m",
                                 make_cluster("4xH100-SXM-80GB"), 2300))
    assert _flag(sg, "--max-prefill-tokens") == expect
    assert int(_flag(sg, "--chunked-prefill-size")) // dp == tokens

def test_attention_dp_replicas_on_one_node_use_disjoint_ports():
    plan = ServePlan((Pool(tp=1, attn_dp=4, ep=4, replicas=2),))
    cmds = _servers(commands("sglang", plan, load_model("qwen3-30b-a3b"), "m",
                             make_cluster("8xH100-SXM-80GB"), 2300))
    assert {_node(l) for l, _ in cmds} == {0}
    used = []
    for _, a in cmds:
        port = int(_flag(a, "--port"))
        # with attention DP: port + 233 (dist init) and port_base = port + 234 .. + 239
        # (sglang/srt/server_args.py:728, 820-849), port + 13 (server_args.py:729,
        # managers/data_parallel_controller.py:505)
        used.append({port, port + 13, *range(port + 233, port + 240)})
        # and none in the range SGLang picks its NCCL port from (utils/network.py:205)
        assert max(used[-1]) < 22000
    assert not used[0] & used[1]


def test_mixed_chunk_only_where_prefill_and_decode_share_a_server():
    # the simulator mixes decode tokens and prefill chunks in a step; SGLang does only with
    # --enable-mixed-chunk (arg_groups/fields/schedule.py:208-211, default off)
    agg = _servers(commands("sglang", ServePlan((Pool(tp=8),)), load_model("llama3.1-70b"), "m",
                            H100X16, 2300))
    assert all("--enable-mixed-chunk" in a for _, a in agg)
    dis = _servers(commands("sglang", DIS, load_model("llama3.1-70b"), "m", H100X16, 2300))
    assert not any("--enable-mixed-chunk" in a for _, a in dis)


@pytest.mark.parametrize("engine,flag", [("vllm", "--max-model-len"),
                                         ("sglang", "--context-length")])
def test_servers_take_the_planned_longest_request(engine, flag):
    # without it vLLM sizes the cache for the model's whole context (vllm/config/model.py:
    # 2642-2652) and refuses to start if one such request does not fit
    # (vllm/v1/core/kv_cache_planning.py:67-86)
    for _, a in _servers(commands(engine, ServePlan((Pool(tp=2, replicas=4),)),
                                  load_model("llama3.1-70b"), "m", H100X16, 2300)):
        assert _flag(a, flag) == "2300"


@pytest.mark.parametrize("gpus,per_node,tp", [("8xGB200", None, 1), ("8xH100-SXM-80GB", 2, 1),
                                              ("16xH100-SXM-80GB", 4, 2)])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_replicas_stay_on_the_clusters_nodes(engine, gpus, per_node, tp):
    cluster = make_cluster(gpus, gpus_per_node=per_node)
    plan = ServePlan((Pool(tp=tp, replicas=cluster.num_gpus // tp),))
    seen = []
    for label, a in _servers(commands(engine, plan, load_model("llama3.1-8b"), "m", cluster,
                                      2300)):
        local = [int(g) for g in a[1].removeprefix("CUDA_VISIBLE_DEVICES=").split(",")]
        assert max(local) < cluster.gpus_per_node
        seen += [(_node(label), g) for g in local]
        assert _node(label) < cluster.num_gpus // cluster.gpus_per_node
    assert len(set(seen)) == cluster.num_gpus


def test_replica_larger_than_a_node_is_refused():
    with pytest.raises(InputError, match="spans nodes"):
        commands("vllm", ServePlan((Pool(tp=8),)), load_model("llama3.1-70b"), "m",
                 make_cluster("8xGB200"), 2300)


@pytest.mark.parametrize("engine, gpus, refused", [
    # vLLM's fp8 quantization needs compute capability 7.5 (vllm/model_executor/layers/
    # quantization/fp8.py:146-147 at 0.33.0), SGLang's 8.0 (sglang/srt/layers/quantization/
    # fp8.py:329-339 at 0.5.23); V100 is 7.0, the Turing TITAN RTX 7.5 (the catalog's kernel
    # family puts it with Volta: not what decides here), A100 8.0, MI300X not CUDA
    ("vllm", "8xV100-SXM-32GB", True), ("sglang", "8xV100-SXM-32GB", True),
    ("vllm", "8xTITAN-RTX-24GB", False), ("sglang", "8xTITAN-RTX-24GB", True),
    ("vllm", "8xA100-SXM-80GB", False), ("sglang", "8xA100-SXM-80GB", False),
    ("sglang", "8xMI300X", False),
])
def test_fp8_weights_need_the_engines_compute_capability(engine, gpus, refused):
    def run():
        return commands(engine, ServePlan((Pool(tp=8),), "fp8"), load_model("llama3.1-8b"),
                        "m", make_cluster(gpus), 2300)
    if refused:
        with pytest.raises(InputError, match="compute capability"):
            run()
    else:
        assert run()



@pytest.mark.parametrize("engine, gpus, refused", [
    # SGLang 0.5.23 raises "SGLang only supports sm75 and above." at start-up
    # (sglang/srt/model_executor/model_runner_components/load_model_utils.py:80-91:
    # capability major < 8 and minor < 5); vLLM 0.33.0 serves Volta in fp16
    # (vllm/platforms/cuda.py:257-263)
    ("sglang", "8xV100-SXM-32GB", True), ("vllm", "8xV100-SXM-32GB", False),
    ("sglang", "8xRTX-2080-Ti-11GB", False), ("sglang", "8xMI250X", False),
])
def test_an_engine_is_not_exported_below_the_capability_it_starts_on(engine, gpus, refused):
    plan, cluster = ServePlan((Pool(tp=1),), "bf16"), make_cluster(gpus)
    model = load_model("llama3.2-1b")
    if refused:
        with pytest.raises(InputError, match="compute capability 7.5"):
            commands(engine, plan, model, "m", cluster, 2300)
    else:
        assert commands(engine, plan, model, "m", cluster, 2300)

def test_a_checkpoint_of_another_method_is_not_refused_for_a_flag_not_written():
    """gpt-oss ships MXFP4 weights: --weights fp8 writes no --quantization fp8 for it (the
    engines load the checkpoint's method; quantization_args), so the compute-capability rule
    of --quantization fp8 does not apply; the same plan of an unquantized model is refused."""
    plan, v100 = ServePlan((Pool(tp=8),), "fp8"), make_cluster("8xV100-SXM-32GB")
    oss = load_model("gpt-oss-20b")
    assert oss.checkpoint_quant == "mxfp4"
    argv = [a for _, cmd in commands("vllm", plan, oss, "m", v100, 2300) for a in cmd]
    assert "--quantization" not in argv
    with pytest.raises(InputError, match="compute capability"):
        commands("vllm", plan, load_model("llama3.1-8b"), "m", v100, 2300)


def _serve(*args, cwd):
    return subprocess.run([sys.executable, "-m", "meshplan.cli", "serve", *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def test_cli_refused_export_writes_no_png(tmp_path):
    # 405B in bf16 fits no replica of one node; the 16-GPU replicas span two, which the
    # export cannot launch: exit 2, one line, and neither the PNG nor the export written
    p = _serve("--model", "llama3.1-405b", "--gpus", "16xH100-SXM-80GB", "--input-len", "2000",
               "--output-len", "300", "--rate", "1", "--requests", "40", "--ttft-p90", "5s",
               "--tpot-p90", "100ms", "--export", "vllm", "--out", "e405", "--png", "f.png",
               "--aggregated-only", "--no-goodput", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "f.png").exists() and not (tmp_path / "e405").exists()


def test_cli_export_max_model_len_is_the_longest_request(tmp_path):
    p = _serve("--model", "llama3.1-8b", "--gpus", "2xH100-SXM-80GB", "--input-len", "500:900",
               "--output-len", "50:80", "--rate", "2", "--requests", "60", "--plan", "tp1x2",
               "--no-goodput", "--export", "vllm", "--out", "o", "--model-id", "org/m",
               "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    sh = (tmp_path / "o" / "launch_vllm.sh").read_text().split()
    got = int(sh[sh.index("--max-model-len") + 1])
    # the ranges' upper ends: a 900-token prompt asking 80 tokens is in the stated traffic,
    # and vLLM refuses a request longer than --max-model-len (it took the longest of the 60
    # draws, 962)
    assert got == 900 + 80


def test_notes_name_a_preset_id_and_the_checkpoints_own_quantization():
    from meshplan.serve.export import notes
    plan = ServePlan((Pool(tp=8),), "bf16")
    # DeepSeek-V3's and gpt-oss's published configs carry quantization_config (fp8, mxfp4):
    # vLLM loads the checkpoint's method whatever --quantization says (vllm/config/model.py:
    # 1388-1460)
    dsv3 = notes(plan, load_model("deepseek-v3"), "deepseek-ai/DeepSeek-V3", preset=True)
    assert len(dsv3) == 1 and "fp8" in dsv3[0] and "--weights fp8" in dsv3[0]
    assert any("mxfp4" in n for n in notes(plan, load_model("gpt-oss-120b"), "o/g", True))
    assert notes(ServePlan((Pool(tp=8),), "fp8"), load_model("deepseek-v3"), "d/v", True) == []
    assert any("--model-id" in n for n in notes(plan, load_model("llama3.1-8b"), "llama3.1-8b",
                                                True))


def test_default_model_id_of_a_config_json_is_its_folder(tmp_path):
    from meshplan.serve.export import default_model_id
    (tmp_path / "config.json").write_text("{}")
    assert default_model_id(str(tmp_path / "config.json")) == str(tmp_path)
    assert default_model_id("llama3.1-8b") == "llama3.1-8b"


def test_default_model_id_of_a_relative_config_json_is_absolute(tmp_path, monkeypatch):
    # `--model config.json` in the checkpoint's folder wrote `vllm serve .`, which names
    # another folder on a node whose shell starts elsewhere
    from meshplan.serve.export import default_model_id
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert default_model_id("config.json") == str(tmp_path.resolve())


def test_a_config_saved_under_another_name_is_not_its_folders_checkpoint(tmp_path):
    # vLLM 0.33.0 loads a local model from <folder>/config.json only
    # (vllm/transformers_utils/repo_utils.py file_or_path_exists: (local_path /
    # config_name).is_file(), config_name transformers.utils.CONFIG_NAME == "config.json"), so
    # the folder of qwen3-32b.config.json is not that model (here it even holds another
    # model's config.json, which the engines would have served)
    from meshplan.serve.export import default_model_id, notes
    (tmp_path / "config.json").write_text('{"architectures": ["OtherModel"]}')
    named = tmp_path / "qwen3-32b.config.json"
    named.write_text((ROOT / "bench" / "data" / "qwen3-32b.config.json").read_text())
    assert default_model_id(str(named)) != str(tmp_path)
    out = notes(ServePlan((Pool(tp=8),), "bf16"), load_model(str(named)),
                default_model_id(str(named)), preset=False)
    assert any("--model-id" in n and "config.json" in n for n in out), out
    # a file given as --model-id is no checkpoint either
    assert any("--model-id" in n for n in notes(ServePlan((Pool(tp=8),), "bf16"),
                                                load_model(str(named)), str(named), False))
    # a folder, or an org/name, draws no such note
    assert notes(ServePlan((Pool(tp=8),), "bf16"), load_model(str(named)), str(tmp_path),
                 False) == []


def test_cli_export_of_a_renamed_config_names_no_folder(tmp_path):
    cfg = tmp_path / "cfgs" / "qwen3-0.6b.config.json"
    cfg.parent.mkdir()
    cfg.write_text((ROOT / "bench" / "data" / "qwen3-0.6b.config.json").read_text())
    p = _serve("--model", str(cfg), "--gpus", "1xH100-SXM-80GB", "--input-len", "200",
               "--output-len", "20", "--rate", "1", "--requests", "20", "--plan", "tp1x1",
               "--no-goodput", "--export", "sglang", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    sh = (tmp_path / "o" / "launch_sglang.sh").read_text()
    assert f"--model-path {cfg.parent} " not in sh
    assert "set --model-id" in p.stdout
