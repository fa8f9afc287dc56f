"""Training data: synthetic tokens or the small shipped corpus, byte-level tokens.

Every batch is a pure function of (source, seed, step), so a parallel run and the
single-process reference see the same sequences; each rank then keeps its own slice:
``global_batch / dp`` sequences per data-parallel rank, and with context parallelism the
two load-balanced chunks ``i`` and ``2*cp-1-i`` of the ``2*cp`` chunks of every sequence
(the causal-attention balancing of Megatron-LM's context parallelism).
"""

from __future__ import annotations

from importlib import resources

import torch

from ..errors import InputError

SOURCES = ("synthetic", "corpus")


def corpus_bytes() -> torch.Tensor:
    """The shipped corpus as byte tokens (0..255); the tokenizer is UTF-8 itself."""
    text = (resources.files(__package__) / "data" / "corpus.txt").read_bytes()
    return torch.tensor(list(text), dtype=torch.long)


def global_batch(source: str, seed: int, step: int, batch: int, seq_len: int,
                 vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) of shape [batch, seq_len] for optimizer step ``step``."""
    g = torch.Generator().manual_seed(seed * 7919 + step)
    if source == "synthetic":
        toks = torch.randint(0, vocab, (batch, seq_len + 1), generator=g)
    elif source == "corpus":
        if vocab < 256:
            raise InputError("data", source, f"byte tokens need vocab >= 256 (model has {vocab})")
        data = corpus_bytes()
        if data.numel() <= seq_len + 1:
            raise InputError("seq_len", seq_len, f"the corpus holds {data.numel()} tokens")
        starts = torch.randint(0, data.numel() - seq_len - 1, (batch,), generator=g)
        toks = torch.stack([data[s:s + seq_len + 1] for s in starts.tolist()])
    else:
        raise InputError("data", source, "allowed: " + ", ".join(SOURCES))
    return toks[:, :-1].contiguous(), toks[:, 1:].contiguous()


def cp_positions(seq_len: int, cp: int, cp_rank: int) -> torch.Tensor:
    """Global positions held by context-parallel rank ``cp_rank``: chunks r and 2cp-1-r."""
    if cp == 1:
        return torch.arange(seq_len)
    c = seq_len // (2 * cp)
    a = torch.arange(cp_rank * c, (cp_rank + 1) * c)
    b = torch.arange((2 * cp - 1 - cp_rank) * c, (2 * cp - cp_rank) * c)
    return torch.cat([a, b])


def local_slice(x: torch.Tensor, dp: int, dp_rank: int, cp: int, cp_rank: int) -> torch.Tensor:
    """This rank's sequences (dp) and positions (cp) of a global [batch, seq] tensor."""
    per = x.shape[0] // dp
    x = x[dp_rank * per:(dp_rank + 1) * per]
    if cp > 1:
        x = x[:, cp_positions(x.shape[1], cp, cp_rank)]
    return x.contiguous()
