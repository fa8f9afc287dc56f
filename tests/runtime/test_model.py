"""Single-process checks of the runtime model against independent truth."""

import math

import pytest
import torch

from meshplan.errors import InputError
from meshplan.plan import Plan
from meshplan.runtime.data import corpus_bytes, cp_positions, global_batch, local_slice
from meshplan.runtime.model import MoE, Transformer, build_model, cross_entropy
from meshplan.runtime.train import RunConfig, reference_run
from meshplan.specs.catalog.presets import preset


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-moe", "llama3.1-8b", "mixtral-8x7b",
                                  "qwen3-30b-a3b", "deepseek-v3"])
def test_parameter_count_matches_the_planner(name):
    """sum(numel) of the built model equals ModelSpec.total_params (the planner's count).

    DeepSeek-V3's router score-correction bias is a buffer here (it is not trained by
    gradients), the planner counts it as a parameter.
    """
    spec = preset(name)
    with torch.device("meta"):
        m = Transformer(spec)
    bias = sum(b.numel() for n, b in m.named_buffers() if n.endswith("expert_bias"))
    assert sum(p.numel() for p in m.parameters()) + bias == spec.total_params()


def test_initial_loss_is_log_vocab():
    """With 0.02-std weights the logits are near zero, so the loss is close to ln(V)."""
    spec = preset("tiny-llama")
    m = build_model(spec, seed=3)
    x, y = global_batch("synthetic", 0, 0, 4, 32, spec.vocab)
    assert abs(float(cross_entropy(m(x), y).detach()) - math.log(spec.vocab)) < 0.05


def test_chunks_start_from_the_same_weights_as_the_whole_model():
    spec = preset("tiny-llama")
    whole = dict(build_model(spec, seed=1).named_parameters())
    chunk = build_model(spec, seed=1, layer_ids=[2, 3], first=False, last=True)
    for n, p in chunk.named_parameters():
        assert torch.equal(p, whole[n]), n
    other = dict(build_model(spec, seed=2).named_parameters())
    assert not torch.equal(other["layers.0.attention.wq.weight"], whole["layers.0.attention.wq.weight"])


def test_causal_model_does_not_see_the_future():
    spec = preset("tiny-moe")
    m = build_model(spec)
    x = torch.randint(0, spec.vocab, (1, 16))
    x2 = x.clone()
    x2[0, 10:] = (x2[0, 10:] + 1) % spec.vocab
    assert torch.allclose(m(x)[0, :10], m(x2)[0, :10], atol=1e-6)
    assert not torch.allclose(m(x)[0, 10:], m(x2)[0, 10:], atol=1e-6)


def test_moe_layer_matches_a_per_token_loop():
    """Sorted dispatch equals routing every token through its top-k experts one by one."""
    spec = preset("tiny-moe")
    torch.manual_seed(0)
    moe = MoE(spec)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.1)
    x = torch.randn(2, 5, spec.hidden)
    got = moe(x)
    xf = x.reshape(-1, spec.hidden)
    idx, w = moe.route(xf)
    want = []
    for t in range(xf.shape[0]):
        acc = moe.shared(xf[t:t + 1])[0]
        for j in range(spec.moe_topk):
            e = int(idx[t, j])
            h = torch.nn.functional.silu(xf[t] @ moe.experts.w1[e].t()) * (xf[t] @ moe.experts.w3[e].t())
            acc = acc + w[t, j] * (h @ moe.experts.w2[e].t())
        want.append(acc)
    assert torch.allclose(got.reshape(-1, spec.hidden), torch.stack(want), atol=1e-6)


def test_context_parallel_chunks_cover_every_position_once():
    for cp in (1, 2, 4):
        pos = torch.cat([cp_positions(32, cp, r) for r in range(cp)])
        assert sorted(pos.tolist()) == list(range(32))
    x = torch.arange(4 * 8).view(4, 8)
    assert local_slice(x, 2, 1, 2, 0).tolist() == [[16, 17, 22, 23], [24, 25, 30, 31]]


def test_corpus_is_bytes_and_reference_learns_it():
    data = corpus_bytes()
    assert data.numel() > 2000 and int(data.max()) < 256
    cfg = RunConfig(preset("tiny-llama"), Plan(), seq_len=32, global_batch=8, steps=30,
                    lr=3e-3, data="corpus")
    losses, _ = reference_run(cfg)
    assert losses[-1] < losses[0] - 1.0  # English bytes are far from uniform


def test_models_the_runtime_cannot_build_are_input_errors():
    with pytest.raises(InputError, match="linear bias"):
        Transformer(preset("gpt2"))
    cfg = RunConfig(preset("tiny-llama"), Plan(dp=2), seq_len=16, global_batch=8)
    with pytest.raises(InputError, match="must equal the number of GPUs"):
        cfg.check(world_size=4)
    RunConfig(preset("tiny-llama"), Plan(cp=2, cp_kind="all_to_all"), seq_len=16).check(2)
    with pytest.raises(InputError, match="heads per tp rank") as e:  # 4 heads / tp2 = 2, cp 4
        RunConfig(preset("tiny-llama"), Plan(tp=2, cp=4, cp_kind="all_to_all"),
                  seq_len=16).check(8)
    assert e.value.field == "cp"
    RunConfig(preset("tiny-llama"), Plan(pp=2, schedule="zb_h1"), seq_len=16).check(2)  # runs
    with pytest.raises(InputError, match="no class for zb_h1"):
        RunConfig(preset("tiny-llama"), Plan(pp=2, schedule="zb_h1"), seq_len=16,
                  schedule_source="torch").check(2)


def test_expert_mesh_folds_etp_innermost_as_megatron_does():
    """Closed form of MoE Parallel Folding (Megatron order etp, ep, edp over the attention
    ranks a = tp + tp*(cp + cp*dp)): with etp = tp the etp groups are the tp groups, and
    the expert groups stay inside one pipeline stage."""
    from meshplan.runtime.mesh import expert_rank_grid
    plan = Plan(dp=2, tp=2, pp=2, ep=2, etp=2)
    assert expert_rank_grid(plan).tolist() == [[[[0, 1], [2, 3]]], [[[4, 5], [6, 7]]]]
    plan = Plan(dp=4, cp=2, tp=2, ep=2, etp=2)  # edp = 4
    grid = expert_rank_grid(plan)
    assert grid.shape == (1, 4, 2, 2)
    for row in grid.reshape(-1, 2).tolist():
        assert row == plan.group_ranks("tp", row[0])
    assert grid[0, 3].flatten().tolist() == [12, 13, 14, 15]
    assert sorted(grid.flatten().tolist()) == list(range(16))


def test_cli_refuses_ulysses_when_heads_do_not_split_over_cp():
    """tiny-llama has 4 heads: tp2 leaves 2 per rank, which cp4 cannot split."""
    from .in_process import cli
    r = cli("run", "--tp", "2", "--cp", "4", "--cp-kind", "all_to_all", "--seq-len", "16",
            "--steps", "1")
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and "cp=4" in r.stderr, r.stderr


def test_attention_uses_the_models_rotary_base_fraction_and_norm_eps():
    """Bug: the runtime rotated with base 10,000 over every head dim and built its norms at
    eps 1e-5 whatever the model said (Llama 3: base 500,000; Qwen3: eps 1e-6; GPT-NeoX:
    a quarter of each head rotates). Truth: RoFormer's rotation written out by hand."""
    import dataclasses

    from meshplan.runtime.model import Attention

    spec = dataclasses.replace(preset("tiny-llama"), rope_theta=500000.0, rope_fraction=0.5,
                               norm_eps=1e-6, qk_norm=True)
    torch.manual_seed(0)
    attn = Attention(spec).double()
    assert attn.q_norm.eps == 1e-6
    d, r = spec.head_dim, spec.head_dim // 2
    x = torch.randn(1, 3, spec.hidden, dtype=torch.float64)
    seen = {}

    def grab(q, k, v, positions, scale):
        seen["q"] = q
        return v

    attn.core = grab
    attn(x, torch.arange(3))
    q = attn.q_norm(attn.wq(x).view(1, 3, -1, d).transpose(1, 2))
    p = torch.arange(3, dtype=torch.float64)[:, None]
    ang = p * spec.rope_theta ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
    # pairs (i, i + r/2), rotate_half, as Llama/Qwen checkpoints in transformers hold q and k
    x1, x2 = q[..., : r // 2], q[..., r // 2 : r]
    rot = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], dim=-1)
    assert torch.allclose(seen["q"][..., :r], rot)
    assert torch.equal(seen["q"][..., r:], q[..., r:])  # the other half passes through


def test_router_is_the_models_own():
    """Bug: the runtime renormalised every router's top-k weights, dropped DeepSeek's routed
    scale and group-limited routing, and took a sigmoid router without a bias for softmax.
    Truth: DeepSeek-V3's MoEGate (noaux_tc) and a softmax router without renormalisation
    (Qwen2-MoE's norm_topk_prob=false), written out token by token."""
    import dataclasses

    base = preset("tiny-moe")
    cases = [
        dataclasses.replace(base, moe_experts=8, moe_topk=2, moe_groups=4, moe_group_topk=2,
                            moe_score="sigmoid", moe_router_bias=True, moe_topk_norm=True,
                            moe_routed_scale=2.5),
        dataclasses.replace(base, moe_experts=8, moe_topk=2, moe_groups=0, moe_group_topk=0,
                            moe_score="softmax", moe_router_bias=False, moe_topk_norm=False,
                            moe_routed_scale=1.0),
    ]
    for spec in cases:
        torch.manual_seed(1)
        moe = MoE(spec).double()
        if hasattr(moe, "expert_bias"):
            moe.expert_bias.copy_(torch.linspace(-0.2, 0.2, spec.moe_experts))
        x = torch.randn(16, spec.hidden, dtype=torch.float64)
        idx, w = moe.route(x)
        logits = x @ moe.gate.weight.t()
        for t in range(x.shape[0]):
            if spec.moe_score == "sigmoid":
                s = torch.sigmoid(logits[t])
                c = (s + moe.expert_bias).tolist()
                per = spec.moe_experts // spec.moe_groups
                gs = [sum(sorted(c[g * per:(g + 1) * per])[-2:]) for g in range(spec.moe_groups)]
                best = sorted(range(spec.moe_groups), key=lambda g: -gs[g])[:spec.moe_group_topk]
                allowed = [e for e in range(spec.moe_experts) if e // per in best]
                pick = sorted(allowed, key=lambda e: -c[e])[:spec.moe_topk]
                want_w = s[pick] / s[pick].sum() * spec.moe_routed_scale
            else:
                s = torch.softmax(logits[t], dim=-1)
                pick = sorted(range(spec.moe_experts), key=lambda e: -float(s[e]))[:spec.moe_topk]
                want_w = s[pick]
            assert sorted(idx[t].tolist()) == sorted(pick)
            got = dict(zip(idx[t].tolist(), w[t].tolist()))
            assert all(math.isclose(got[e], float(v), rel_tol=1e-9)
                       for e, v in zip(pick, want_w))
