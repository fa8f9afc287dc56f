"""The search-speed caches change no answer: the specs' hash computed once equals the hash
their dataclass defines, stays out of pickles (str hashes differ between processes), and
compute.matmul_s's cache returns what pricing each GEMM with gemm_time_s gives."""

import pickle
from dataclasses import fields, replace

from meshplan.cost.compute import device, gemm_time_s, matmul_s
from meshplan.cost.ops import Shard, layer_ops
from meshplan.scenario import make_cluster
from meshplan.specs.catalog.presets import preset
from meshplan.specs.hashing import cached_hash


def _field_hash(obj) -> int:
    """What @dataclass(frozen=True) generates: the hash of the compared fields' tuple."""
    return hash(tuple(getattr(obj, f.name) for f in fields(obj)
                      if (f.compare if f.hash is None else f.hash)))


def test_cached_hash_is_the_dataclass_hash_and_stays_out_of_pickles():
    cluster = make_cluster("2048xH800-SXM-80GB")
    model = preset("deepseek-v3")
    shard = Shard(seq=4096, micro_batch=1, tp=2)
    dev = device(cluster.gpu, "bf16")
    for obj in (cluster, model, shard, dev):
        assert hash(obj) == _field_hash(obj) == hash(obj)  # first and second call
        back = pickle.loads(pickle.dumps(obj))
        assert "_cached_hash" not in back.__dict__
        assert back == obj and hash(back) == hash(obj)
    g = cluster.gpu  # the GPU's own __hash__ (its peak_flops dict is not hashable)
    assert hash(g) == hash((g.name, g.memory_bytes, g.memory_bytes_per_s,
                            g.scaleup_bytes_per_s, g.nic_bytes_per_s, g.power_limit_w))
    # a changed copy is a new object with its own hash, never the stored one
    other = replace(cluster, num_gpus=1024)
    assert hash(other) == _field_hash(other) != hash(cluster)


def test_cached_hash_refuses_unhashable_classes():
    class Plain:
        __hash__ = None
    try:
        cached_hash(Plain)
    except TypeError:
        return
    raise AssertionError("an unhashable class was given a hash")


def test_matmul_s_cache_agrees_with_pricing_each_gemm():
    cluster = make_cluster("2048xH800-SXM-80GB")
    model = preset("deepseek-v3")
    mms = [mm for sh in (Shard(seq=4096, micro_batch=1, tp=1), Shard(seq=4096, micro_batch=2, tp=4))
           for mm in layer_ops(model, True, sh).matmuls]
    assert mms
    for precision in ("bf16", "fp8"):
        dev = device(cluster.gpu, precision)
        for mm in mms:
            d = dev.hp if mm.high_precision and dev.hp is not None else dev
            want = [0.0, 0.0, 0.0]
            for n in mm.parts or (mm.n,):
                args = (mm.count, mm.streams, mm.kernel)
                want[0] += gemm_time_s(d, mm.m, n, mm.k, *args)
                want[1] += gemm_time_s(d, mm.m, mm.k, n, *args)
                want[2] += gemm_time_s(d, n, mm.k, mm.m, *args)
            assert matmul_s(dev, mm) == tuple(want) == matmul_s.__wrapped__(dev, mm)
            assert matmul_s(dev, mm) == tuple(want)  # a cache hit


def test_links_and_attention_efficiency_caches_follow_a_profile():
    """collectives._links and compute.attention_efficiency are cached; a profile that changes
    the constants they read must clear them (profile._clear_caches), never leave them stale."""
    from meshplan import profile
    from meshplan.cost import collectives
    from meshplan.cost.compute import attention_efficiency
    from meshplan.cost.efficiency import NETWORK

    cluster = make_cluster("2048xH800-SXM-80GB")
    dev = device(cluster.gpu, "bf16")
    before = collectives._links(cluster)
    assert before == collectives._links.__wrapped__(cluster)
    for args in ((128.0,), (192.0, True, 192.0, 128.0), (64.0, False)):
        assert attention_efficiency(dev, *args) == attention_efficiency.__wrapped__(dev, *args)
    restore = profile.apply({"NETWORK.scaleout": NETWORK.scaleout / 2})
    try:
        after = collectives._links(cluster)
        assert after.nic == before.nic / 2
        assert after == collectives._links.__wrapped__(cluster)
    finally:
        restore()
    assert collectives._links(cluster) == before
