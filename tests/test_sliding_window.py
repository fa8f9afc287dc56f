"""Sliding-window attention: the keys each query sees (closed form against a brute-force
count), the FLOPs that follow from it, the kernel time, and the engines that refuse it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from meshplan.cost import flops
from meshplan.cost.ops import Shard, layer_ops
from meshplan.errors import InputError
from meshplan.specs.catalog.presets import preset
from meshplan.specs.model import ModelSpec

BASE = ModelSpec(name="w", layers=4, hidden=1024, heads=16, kv_heads=4, ffn=4096, vocab=32000)


def _brute_causal_keys(seq: int, window: int) -> float:
    # query i (1-based) sees keys max(1, i - window + 1) .. i
    return sum(min(i, window) for i in range(1, seq + 1)) / seq


@pytest.mark.parametrize("seq,window", [(4096, 128), (8192, 4096), (1000, 999)])
def test_causal_keys_match_a_brute_force_count(seq, window):
    m = BASE.with_(sliding_window=window)  # every layer windowed
    # the closed form is the continuous one: it drops the w / (2 s) of the discrete sum, as
    # full attention's s / 2 drops the 1/2 of (s + 1) / 2
    assert m.causal_keys(seq) == pytest.approx(
        _brute_causal_keys(seq, window) - window / (2 * seq), rel=1e-12)
    assert BASE.causal_keys(seq) == _brute_causal_keys(seq, seq) - 0.5


def test_mixed_layers_average_and_a_window_longer_than_the_sequence_changes_nothing():
    half = BASE.with_(sliding_window=256, sliding_layers=2)
    assert half.attention_keys(4096) == (2 * 4096 + 2 * 256) / 4
    long = BASE.with_(sliding_window=8192)
    assert long.causal_keys(4096) == BASE.causal_keys(4096)
    assert flops.model_flops_per_token(long, 4096) == flops.model_flops_per_token(BASE, 4096)


def test_model_flops_drop_by_the_attention_keys_not_seen():
    seq, w = 8192, 1024
    m = BASE.with_(sliding_window=w)
    d = 2 * BASE.head_dim
    saved = 3 * 2.0 * (seq - w) * BASE.heads * d * BASE.layers  # PaLM convention, 3 passes
    assert flops.model_flops_per_token(BASE, seq) - flops.model_flops_per_token(m, seq) == \
        pytest.approx(saved)


def test_layer_ops_split_the_windowed_work():
    s = Shard(seq=8192, micro_batch=1)
    full, win = layer_ops(BASE, False, s), layer_ops(BASE.with_(sliding_window=512), False, s)
    assert win.attn_fwd_flops / full.attn_fwd_flops == pytest.approx(
        (512 - 512 ** 2 / (2 * 8192)) / 4096)
    assert win.attn_window_fwd_flops == pytest.approx(win.attn_fwd_flops)
    assert win.attn_window_seq == 1024  # 2 x window: a causal kernel doing the same work
    assert win.matmuls == full.matmuls


def test_bad_window_fields_name_the_field():
    with pytest.raises(InputError, match="sliding_layers"):
        BASE.with_(sliding_layers=2)
    with pytest.raises(InputError, match="sliding_layers"):
        BASE.with_(sliding_window=128, sliding_layers=5)


def _predict(model: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meshplan.cli", *extra, "--model", model,
                           "--gpus", "8xH100-SXM-80GB", "--seq-len", "8192", "--global-batch",
                           "64", "--plan", "dp8 tp1 pp1 ep8 zero1 mb1"],
                          capture_output=True, text=True)


def test_predict_says_which_layers_slide_and_exports_refuse(tmp_path):
    p = _predict("gpt-oss-20b", "predict")
    assert p.returncode == 0, p.stderr
    assert "12 of 24 layers with a 128-key window" in p.stdout
    for engine in ("megatron", "torchtitan"):
        e = _predict("gpt-oss-20b", "export", "--to", engine, "--out", str(tmp_path / engine))
        assert e.returncode == 2 and "sliding-window attention" in e.stderr
        assert len(e.stderr.strip().splitlines()) == 1 and "Traceback" not in e.stderr
        assert not (tmp_path / engine).exists()


def test_runtime_refuses_a_windowed_model():
    pytest.importorskip("torch", reason="the runtime needs torch (meshplan[run])")
    from meshplan.runtime.model import check_buildable
    with pytest.raises(InputError, match="sliding-window"):
        check_buildable(preset("gpt-oss-20b"))


def test_a_window_no_narrower_than_the_sequence_is_called_full_attention():
    """Phi-3.5-MoE's config sets sliding_window 131072 on every layer: at seq 8192 the window
    holds the whole sequence, and causal_keys prices full attention; the header says so."""
    from meshplan.report import scenario_line
    from meshplan.scenario import Scenario, make_cluster
    from meshplan.specs.workload import Workload
    m = BASE.with_(sliding_window=131072, sliding_layers=BASE.layers)
    assert m.causal_keys(8192) == BASE.causal_keys(8192)
    line = scenario_line(Scenario(m, make_cluster("8xH100-SXM-80GB"), Workload(8192, 64), None))
    assert "131072-key window (no narrower than the sequence: full attention here)" in line
    narrow = scenario_line(Scenario(m, make_cluster("8xH100-SXM-80GB"), Workload(262144, 8),
                                    None))
    assert "131072-key window," in narrow
