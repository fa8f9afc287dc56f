"""vLLM V1's CUDA graphs in the step cost: an iteration is replayed at the next captured size
(its padded rows cost GEMM time) or, above the largest captured size, launched op by op from
the host. The sizes are checked against vLLM's rule written out by hand
(VllmConfig._set_cudagraph_sizes, vllm/config/vllm.py, 0.11)."""

from pathlib import Path

import pytest

from meshplan.scenario import make_cluster
from meshplan.serve import cost
from meshplan.serve.cost import StepModel
from meshplan.serve.spec import Pool
from meshplan.serve.vllm_serve import cudagraph_capture_sizes, padded_graph_tokens
from meshplan.specs.catalog.presets import load_model

DATA = Path(__file__).resolve().parent.parent / "bench" / "data"
H100 = make_cluster("1xH100-SXM-80GB")


def test_capture_sizes_follow_vllms_default_ladder():
    # vllm serve on an H100 (1024 requests, 8192 tokens): 1, 2, 4, 8..248 by 8, 256..512 by 16
    sizes = cudagraph_capture_sizes(1024, 8192)
    assert sizes == tuple([1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16)))
    assert len(sizes) == 51
    # the largest is min(2 x max_num_seqs, 512) ...
    assert cudagraph_capture_sizes(100, 8192)[-1] == 200
    assert cudagraph_capture_sizes(256, 2048)[-1] == 512
    # ... and never above the token budget (288: the ladder's last step at or below 300)
    assert cudagraph_capture_sizes(1024, 300)[-1] == 288
    assert cudagraph_capture_sizes(2, 8192) == (1, 2, 4)
    assert padded_graph_tokens(97, sizes) == 104
    assert padded_graph_tokens(257, sizes) == 272
    assert padded_graph_tokens(512, sizes) == 512
    assert padded_graph_tokens(513, sizes) is None


def test_vllm_pads_a_graphed_iteration_to_its_captured_size():
    """A decode step of 97 requests runs the graph captured for 104 tokens: its GEMMs cost
    what 104 rows cost; attention reads only the 97 requests' caches. SGLang's decode (its
    own graphs, not modelled here) keeps 97."""
    m = load_model("llama3.1-8b")
    vl = StepModel(m, H100, Pool(max_num_seqs=1024), "bf16", "bf16", "vllm")
    sg = StepModel(m, H100, Pool(max_num_seqs=1024), "bf16", "bf16", "sglang")
    padded = vl.decode_step(97, 1000)
    # 104 rows through the layers, the 97 sampled rows through the output layer
    rows104 = sg.step(104, 97, decode_ctx_tokens=97 * 1000, logits=97)
    assert padded.gemm_s == pytest.approx(rows104.gemm_s, rel=1e-12)
    sampling = (97 * m.vocab * cost.VLLM_SAMPLER_BYTES_PER_LOGIT / vl.dev.hbm_bytes_per_s
                + cost.VLLM_SAMPLER_KERNELS * cost.KERNEL_FLOOR_S)
    assert padded.elementwise_s == pytest.approx(rows104.elementwise_s + sampling, rel=1e-12)
    assert padded.gemm_s > sg.decode_step(97, 1000).gemm_s
    assert padded.attention_s == sg.decode_step(97, 1000).attention_s
    assert vl.decode_step(96, 1000).gemm_s == sg.decode_step(96, 1000).gemm_s  # a captured size


def test_vllm_iteration_above_its_largest_graph_is_launch_bound():
    """Qwen3-0.6B on one H100 (vllm serve defaults: graphs up to 512 tokens): a decode step of
    512 requests of 100 cached tokens replays a graph and costs its GPU time; one of 513
    runs without a graph and cannot end before the host has launched its 28 layers' ops
    (forward_host_ops x eager_op_s, 11.8 ms), far above its GPU time."""
    m = load_model(str(DATA / "qwen3-0.6b.config.json"))
    vl = StepModel(m, H100, Pool(max_num_seqs=1024, max_batched_tokens=8192), "bf16", "bf16",
                   "vllm")
    floor = cost.forward_host_ops(m) * cost.eager_op_s()
    assert cost.forward_host_ops(m) == 28 * 16
    graphed = vl.decode_step(512, 100)
    eager = vl.decode_step(513, 100)
    assert graphed.total_s < 0.5 * floor
    assert eager.total_s == pytest.approx(floor, rel=1e-9)
    # a 600-token prefill is as launch-bound; 8192 tokens outlast their launches
    assert vl.prefill_step(600).total_s == pytest.approx(floor, rel=1e-9)
    assert vl.prefill_step(8192).total_s > floor
    # TensorRT-LLM is not touched
    tr = StepModel(m, H100, Pool(max_num_seqs=1024, max_batched_tokens=8192), "bf16", "bf16",
                   "trtllm")
    assert tr.decode_step(513, 100).total_s < 0.5 * floor


def test_vllm_samples_after_gathering_the_logits():
    """vLLM V1 all-gathers the vocab-split 16-bit logits of the sampled rows over tp
    (use_all_gather() is VLLM_USE_V1) and its Sampler casts them to float32 and takes the
    argmax: 2 + 4 + 4 bytes a logit and two kernels. Llama 3.1 70B at tp 8, a decode step of
    256 requests: 256 x 128,256 logits, 65.7 MB gathered; SGLang's step lacks both."""
    from meshplan.cost import collectives
    m = load_model("llama3.1-70b")
    cl = make_cluster("8xH100-SXM-80GB")
    vl = StepModel(m, cl, Pool(tp=8), "bf16", "bf16", "vllm")
    sg = StepModel(m, cl, Pool(tp=8), "bf16", "bf16", "sglang")
    a, b = vl.decode_step(256, 2000), sg.decode_step(256, 2000)
    assert cost.VLLM_SAMPLER_BYTES_PER_LOGIT == 10
    assert a.elementwise_s - b.elementwise_s == pytest.approx(
        256 * 128256 * 10 / vl.dev.hbm_bytes_per_s + 2 * cost.KERNEL_FLOOR_S, rel=1e-9)
    pl = collectives.placement(((8, 1),), cl.domain_size)
    assert a.tp_comm_s - b.tp_comm_s == pytest.approx(
        collectives.all_gather_s(cl, pl, 256 * 128256 * 2)
        + 2 * m.layers * (cost.all_reduce_small_s(cl, 8, 2 * 256 * m.hidden, "vllm")
                          - cost.all_reduce_small_s(cl, 8, 2 * 256 * m.hidden, "sglang")),
        rel=1e-9)


def test_vllm_prompt_iteration_within_the_graphs_runs_piecewise():
    """An iteration with prompt tokens of at most 512 tokens replays Qwen3-0.6B's 29 graph
    pieces and launches each of its 28 layers' attention (reshape_and_cache_flash,
    flash_attn_varlen_func) from the host in between: (3 x 28 + 1) x eager_op_s = 2.2 ms
    bounds it; a decode step of the same size replays one full graph and keeps its GPU time."""
    m = load_model(str(DATA / "qwen3-0.6b.config.json"))
    vl = StepModel(m, H100, Pool(max_num_seqs=1024, max_batched_tokens=8192), "bf16", "bf16",
                   "vllm")
    assert cost.PIECEWISE_HOST_OPS_PER_LAYER == 3
    floor = (3 * 28 + 1) * cost.eager_op_s()
    assert vl.prefill_step(100).total_s == pytest.approx(floor, rel=1e-9)
    dec = vl.decode_step(100, 100)
    assert dec.host_s == pytest.approx(cost.HOST_STEP_S + cost.HOST_PER_SEQ_S * 100, rel=1e-12)
    assert vl.prefill_step(600).total_s > 4 * floor  # no graph at all: every op launched
