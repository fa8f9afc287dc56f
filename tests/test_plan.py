"""Plan validation names the rule it breaks; rank layout keeps tp innermost."""

import pytest

from meshplan.errors import InputError
from meshplan.plan import Plan
from meshplan.specs.catalog.presets import preset
from meshplan.specs.workload import Workload

L8 = preset("llama3.1-8b")
W = Workload(8192, 512)


def test_world_size_and_message():
    p = Plan(dp=8, tp=8)
    assert p.world_size == 64
    with pytest.raises(InputError, match=r"8\*1\*8\*1 = 64 must equal the number of GPUs \(128\)"):
        p.validate(L8, W, 128)


@pytest.mark.parametrize("kw,field", [
    (dict(tp=3), "tp"),            # heads 32
    (dict(pp=64), "pp"),           # more stages than layers
    (dict(ep=2), "ep"),            # dense model
    (dict(dp=3), "global_batch"),  # 512 % 3
    (dict(cp=3), "cp"),            # 8192 % 6
])
def test_bad_plans(kw, field):
    with pytest.raises(InputError) as e:
        Plan(**kw).validate(L8, W)
    assert e.value.field == field


def test_plan_construction_rules():
    with pytest.raises(InputError, match="zero"):
        Plan(zero=4)
    with pytest.raises(InputError, match="vpp"):
        Plan(vpp=2)
    with pytest.raises(InputError, match="schedule"):
        Plan(pp=2, schedule="bogus")
    with pytest.raises(InputError, match="ep"):
        Plan(dp=2, ep=4)


def test_microbatches_need_pp():
    with pytest.raises(InputError, match="micro-batches"):
        Plan(dp=64, pp=4).validate(L8, Workload(8192, 128))


def test_rank_order_tp_innermost():
    p = Plan(dp=2, tp=4, pp=2)
    assert p.group_ranks("tp", 5) == [4, 5, 6, 7]
    assert p.group_ranks("dp", 1) == [1, 5]
    assert p.group_ranks("pp", 0) == [0, 8]
    assert p.axis_stride("pp") == 8


def test_layer_split_balanced():
    ds = preset("deepseek-v3")
    split = Plan(dp=8, pp=16).layer_split(ds)
    assert sum(split) == 61 and max(split) - min(split) <= 1
    assert split[0] == split[-1] == 3


def test_v_schedule_placement():
    p = Plan(dp=1, pp=4, vpp=2, schedule="zb_v")
    assert [p.chunk_of(r, 1) for r in range(4)] == [7, 6, 5, 4]
    q = Plan(pp=4, vpp=2)
    assert [q.chunk_of(r, 1) for r in range(4)] == [4, 5, 6, 7]


def test_from_dict_long_names():
    p = Plan.from_dict({"tensor_parallel": 2, "pipeline_parallel": 2, "data_parallel": 2})
    assert (p.tp, p.pp, p.dp) == (2, 2, 2)
    with pytest.raises(InputError, match="unknown plan field"):
        Plan.from_dict({"tensorparallel": 2})
