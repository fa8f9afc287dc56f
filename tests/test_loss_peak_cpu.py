"""The loss path's peak bytes per logit (cost/ops.py LOSS_BYTES_PER_LOGIT and the figures
logits_bytes uses), against a CPU reference: the engines' loss code run in PyTorch on the
CPU, its live bytes followed by the profiler's memory timeline (every allocation and free of
the CPU allocator), its peak divided by tokens x vocabulary.

- torchtitan (components/loss.py cross_entropy_loss, ``cross_entropy(pred.flatten(0, 1)
  .float(), ...)``; train.py ``del pred`` before ``loss.backward()``): the unfused figure;
- Aleph Alpha's scaling at 737f8558 (transformer/model/losses/cross_entropy.py
  CrossEntropyLoss.forward, the logits of two micro-batches in the pipeline's output buffer,
  the LM head's all-gather core/nn/linear/utils.py _all_concat over a list and torch.cat):
  logits_bytes for that engine;
- the same torchtitan loss under torch.compile: what AOTAutograd saves for backward is the
  16-bit logits (the log-sum-exp is per row) and the gradient it writes is 16-bit.
"""

import pytest

from meshplan.cost.ops import (COMPILED_CE_BYTES_PER_LOGIT, UNFUSED_CE_BYTES_PER_LOGIT, Shard,
                               logits_bytes)
from meshplan.specs.catalog.presets import preset

torch = pytest.importorskip("torch")
F = torch.nn.functional
T, V = 1024, 4096  # tokens, vocabulary


def _peak_bytes(fn) -> int:
    """Peak of the bytes allocated while ``fn`` runs, above what was live before."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        fn()
    cur = peak = 0
    for _, action, _, size in sorted(prof._memory_profile().timeline, key=lambda x: x[0]):
        cur += size if action == Action.CREATE else -size if action == Action.DESTROY else 0
        peak = max(peak, cur)
    return peak


def test_torchtitan_eager_loss_peak():
    torch.manual_seed(0)
    w = torch.randn(V, 64, dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(1, T, 64, dtype=torch.bfloat16)
    labels = torch.randint(0, V, (1, T))

    def step():
        pred = x @ w.t()  # the output projection, 16-bit
        loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
        del pred
        loss.backward()

    per_logit = _peak_bytes(step) / (T * V)
    assert per_logit == pytest.approx(UNFUSED_CE_BYTES_PER_LOGIT, abs=0.1)


@pytest.mark.parametrize("tp", [1, 4])
def test_aleph_alpha_loss_peak(tp):
    torch.manual_seed(0)
    w = torch.randn(V // tp, 64, dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(T, 64, dtype=torch.bfloat16)
    target = torch.randint(0, V, (T,))
    weights = torch.ones(T)

    class AllConcat(torch.autograd.Function):  # _AllConcat, one rank's view
        @staticmethod
        def forward(ctx, y):
            y = y.contiguous()
            parts = [torch.empty_like(y) for _ in range(tp)]
            parts[0] = y  # tensor_list[rank] = input_tensor; all_gather fills the others
            return torch.cat(parts, dim=-1).contiguous()

        @staticmethod
        def backward(ctx, g):  # _all_shard: this rank's slice
            return torch.split(g, g.shape[-1] // tp, dim=-1)[0].contiguous()

    def loss_fn(out):  # CrossEntropyLoss.forward, _standard_forward
        lw = weights.float().flatten()
        o = out.float().reshape(-1, out.shape[-1])
        losses = F.cross_entropy(o, target=target, reduction="none")
        loss = torch.sum(losses * lw) / lw.sum()
        accuracy = (o.argmax(-1) == target).float()
        return loss, torch.sum(accuracy * (lw > 0).float()) / (lw > 0).float().sum()

    buffers = {}

    def steps():
        for k in range(4):  # PIPELINE_STAGE_OUTPUT slot k % 2, overwritten two later
            out = x @ w.t()
            buffers[k % 2] = AllConcat.apply(out) if tp > 1 else out
            del out
            loss, _ = loss_fn(buffers[k % 2])
            (loss.float() / 4).backward()  # optimizer.backward

    # the head's weight gradient, accumulated from the first micro-batch on, is no logit
    per_logit = (_peak_bytes(steps) - w.numel() * w.element_size()) / (T * V)
    model = preset("llama3.1-8b")
    want = logits_bytes(model, Shard(seq=1024, micro_batch=1, tp=tp), "aleph-alpha",
                        microbatches=4) / (1024 * model.vocab)
    assert per_logit == pytest.approx(want, abs=0.1)


def test_compiled_loss_keeps_16bit_logits_and_gradient():
    torch.manual_seed(0)

    def cross_entropy_loss(pred, labels):  # torchtitan components/loss.py
        return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))

    pred = torch.randn(1, T, V, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (1, T))
    saved = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    fn = torch.compile(cross_entropy_loss)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn(pred, labels)
    loss.backward()
    per_logit = (sum(b for b in saved.values() if b >= T * V)
                 + pred.grad.element_size() * pred.grad.numel()) / (T * V)
    assert per_logit == COMPILED_CE_BYTES_PER_LOGIT
