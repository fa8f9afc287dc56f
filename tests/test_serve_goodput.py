"""Goodput is a sustained rate: it cannot exceed what the plan's GPUs can compute."""

from meshplan.scenario import make_cluster
from meshplan.serve.search import SLO, goodput
from meshplan.serve.spec import Pool, ServePlan
from meshplan.serve.traffic import Lengths, synthetic
from meshplan.specs.catalog.presets import load_model


def test_goodput_of_a_short_trace_stays_under_the_prefill_compute_roofline():
    """Every request's prompt costs at least 2 x params FLOPs per token (the forward's
    GEMMs; attention only adds), so a rate the plan serves for good needs
    rate x input_len x 2 x params <= GPUs x peak FLOP/s. On 200 requests the bisection
    reported 775 req/s for llama3.1-8b on tp8 H100 (1000-token prompts): 12.4 PFLOP/s, 157%
    of the 7.9 PFLOP/s bf16 peak. Those 200 requests arrived in a 0.26 s burst that the
    plan drained within the TTFT target, which is no steady state (the same plan's goodput
    on 1,000 requests read 92.5 req/s)."""
    model = load_model("llama3.1-8b")
    cluster = make_cluster("8xH100-SXM-80GB")
    plan = ServePlan((Pool(tp=8),))
    tr = synthetic(200, Lengths(1000, 1000), Lengths(200, 200), rate_per_s=10.0, seed=0)
    g = goodput(model, cluster, plan, tr, SLO(ttft_s=1.0, tpot_s=0.05, percentile=90.0))
    roofline_rps = 8 * cluster.gpu.flops("bf16") / (1000 * 2 * model.active_params())
    assert 0 < g <= roofline_rps


def test_goodput_is_finite_when_the_trace_fits_the_deployment_at_once():
    """50 short requests on eight llama3.1-8b replicas all run at once whatever their rate,
    so the bisection doubled the rate past 100,000 req/s and reported an infinite goodput
    (mixtral-8x22b on 72 GB200s, 300 requests, did the same). The bound is the compute of
    every request's prompt and decode tokens: 2 x params FLOPs per token at the bf16 peak."""
    model = load_model("llama3.1-8b")
    cluster = make_cluster("8xH100-SXM-80GB")
    plan = ServePlan((Pool(tp=1, replicas=8),))
    tr = synthetic(50, Lengths(100, 100), Lengths(50, 50), rate_per_s=10.0, seed=0)
    g = goodput(model, cluster, plan, tr, SLO(ttft_s=1.0, tpot_s=0.05, percentile=90.0))
    tokens = 100 + 49  # prompt, then one decode token per output token after the first
    assert 0 < g <= 8 * cluster.gpu.flops("bf16") / (tokens * 2 * model.active_params())
