"""The serving search's order (serve/search.py search): plans meeting the SLO first."""

from meshplan.scenario import make_cluster
from meshplan.serve.search import SLO
from meshplan.serve.traffic import Lengths, synthetic
from meshplan.specs.catalog.presets import load_model


def test_min_gpus_with_no_plan_meeting_the_slo_ranks_the_closest_first():
    """--min-gpus ranks the fewest GPUs MEETING the SLO first. When none meets it (TPOT
    p90 <= 0.1 ms is below any decode step), the GPU count said nothing about the SLO and
    put the one-GPU plan, the furthest from the target, first; the plans that miss now rank
    by how close they come (serve/search.headroom), as without --min-gpus."""
    from meshplan.serve.search import headroom, search

    model = load_model("llama3.1-8b")
    cluster = make_cluster("4xH100-SXM-80GB")
    tr = synthetic(40, Lengths(500, 500), Lengths(50, 50), rate_per_s=2.0, seed=0)
    slo = SLO(tpot_s=1e-4)
    res = search(model, cluster, tr, slo, min_gpus=True, disaggregated=False)
    assert not any(c.meets(slo) for c in res.ranked)
    assert headroom(res.ranked[0], slo) == min(headroom(c, slo) for c in res.ranked)
