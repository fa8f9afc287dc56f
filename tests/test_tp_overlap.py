"""TP communication can be hidden only with sequence parallelism (cost/layer.py).

Megatron/TE's --tp-comm-overlap and torchtitan's async TP pipeline the all-gather /
reduce-scatter of sequence-parallel TP with the GEMMs; plain TP's all-reduce needs the whole
GEMM output and the next op the whole reduced tensor (Shoeybi et al. 2019), so asking for
overlap without SP must not make the step faster, and with SP it must hide TP time.
"""

from meshplan.cost import estimate
from meshplan.plan import Plan
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

MODEL = preset("llama3.1-8b")
CLUSTER = make_cluster(gpu="H100-SXM-80GB", num_gpus=8)
WORK = Workload(4096, 64, "bf16")


def _step(sp: bool, overlap: bool) -> float:
    plan = Plan(tp=8, dp=1, pp=1, micro_batch=1, recompute="none", zero=1,
                sequence_parallel=sp, tp_comm_overlap=overlap)
    return estimate(MODEL, CLUSTER, WORK, plan).step_time_s


def test_no_overlap_without_sequence_parallelism():
    assert _step(sp=False, overlap=True) == _step(sp=False, overlap=False)


def test_overlap_hides_tp_time_with_sequence_parallelism():
    assert _step(sp=True, overlap=True) < _step(sp=True, overlap=False)
