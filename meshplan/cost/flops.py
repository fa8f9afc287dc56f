"""Model FLOPs per token: the convention behind MFU.

PaLM (Chowdhery et al. 2022, appendix B): 6 * N_matmul + 6 * 2 * l * s * (d_qk + d_v) * a / 2
per token, i.e. three passes (forward, two backward) over every weight matrix a token touches
(top-k routed and shared experts only for MoE, the output layer included, the embedding
lookup excluded), plus attention scores and values over the full s x s (no causal halving).
For a GPT layer this is 72 h^2 + 12 s h, the no-recompute form of Narayanan et al. 2021 eq. 3.
Recomputation is not counted (hardware FLOPs are reported separately by the estimate).
"""

from __future__ import annotations

from ..specs.model import ModelSpec


def matmul_params_per_token(model: ModelSpec) -> float:
    """Weights that multiply each token: active parameters without the embedding lookup."""
    n = model.active_params() - model.vocab * model.hidden
    if model.position == "learned":
        n -= model.max_position * model.hidden
    if model.embedding_norm:
        n -= model.norm_params(model.hidden)  # a norm, not a matrix product
    if model.tied_embeddings:
        n += model.vocab * model.hidden  # the output layer reuses the embedding matrix
    # norms and biases are not matrix products; router counts (it is a GEMM)
    n -= model.layers * model.norms_per_layer * model.norm_params(model.hidden) \
        + model.norm_params(model.hidden)
    if model.attention_sinks:
        n -= model.layers * model.heads  # one sink logit per head: not a matrix
    return float(n)


def attention_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Forward attention-core FLOPs per token per model (all layers), full s x s; a
    sliding-window layer counts s x min(window, s) (the same convention over the keys a
    query may see)."""
    if model.is_mla:
        d = model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim
    else:
        d = 2 * model.head_dim
    return 2.0 * model.attention_keys(seq_len) * model.heads * d * model.layers


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    return 6.0 * matmul_params_per_token(model) + 3.0 * attention_flops_per_token(model, seq_len)
