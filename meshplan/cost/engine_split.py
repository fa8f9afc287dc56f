"""How an engine assigns transformer layers to pipeline stages, where it differs from
meshplan's balanced split (plan.py ``Plan.layer_split``).

Aleph Alpha's training code (Hagemann et al. 2023's engine; public release github
Aleph-Alpha/scaling, 2024): the model is a list of layer specs, [input embedding, the
transformer layers, final norm, LM head] (transformer/model/model.py), and the default
``pipe_partition_method`` is UNIFORM (core/topology/topology_config.py), which cuts that
list, not the transformer layers, into ``pp`` runs of equal length, the first ``residual``
runs one item longer (core/nn/parallel_module/pipeline_partitioning.py
``pipe_partition_uniform``). So the first stage holds one transformer layer less than its
neighbours (the embedding takes a slot) and the last stage two less (norm and head), e.g.
LLaMA 30B (60 layers) on 16 stages: 3, 4 x 14, 1.
"""

from __future__ import annotations

ALEPH_ALPHA = "aleph-alpha"


def engine_layer_split(engine: str, layers: int, pp: int, vpp: int) -> list[int] | None:
    """Transformer layers per pipeline stage as the engine cuts them, or None when the
    engine splits like meshplan (or the plan interleaves, which the engine cannot)."""
    if engine != ALEPH_ALPHA or pp == 1 or vpp != 1:
        return None
    items = layers + 3  # embedding, the layers, final norm, LM head
    if items < pp:
        return None
    base, residual = divmod(items, pp)
    sizes = [base + (1 if s < residual else 0) for s in range(pp)]
    out = []
    start = 0
    for s, n in enumerate(sizes):
        end = start + n
        # items [start, end): item 0 is the embedding, items 1..layers the transformer
        # layers, items layers+1 and layers+2 the norm and the head
        out.append(max(0, min(end, layers + 1) - max(start, 1)))
        start = end
    return out
