"""What the lecture (seed 001, "Language Model Pretraining & Fine-Tuning") defines: masked self-attention.

"Compute attention for N words: A = Softmax(QK^T / sqrt(d)) V" (Parallel Computation of Attention), with
"Bidirectional self-attention: each position to attend to all other positions in the input sequence" and
"Unidirectional (or causal) self-attention: each position can only attend to earlier positions in the sequence
(including itself)", implemented with the "upper-triangle portion set to -inf" (Bidirectional vs. Unidirectional
Self-Attention).

The two masks are the shared predicates :data:`helpers.masks.bidirectional` and :data:`helpers.masks.causal`,
re-exported here; :func:`masked_self_attention` is the slide's equation over a dense mask (the tests check it
against PyTorch's ``scaled_dot_product_attention`` given the same mask rendered by ``masks.to_4d``).
"""
from __future__ import annotations

import math

import torch

from ...masks import Mask, bidirectional, causal, dense

__all__ = ["bidirectional", "causal", "masked_self_attention"]


def masked_self_attention(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                          mask: Mask) -> tuple[torch.Tensor, torch.Tensor]:
    """``A = Softmax((QK^T + M) / sqrt(d)) V`` with ``M`` = 0 where ``mask`` allows query i to see key j, -inf
    elsewhere; ``alpha_ij`` sums to 1 over the allowed keys of each query.

    ``queries``, ``keys``, ``values`` are ``(..., N, d)``; returns ``(weights, outputs)`` of shapes ``(..., N, N)``
    and ``(..., N, d)``.
    """
    if queries.shape != keys.shape or keys.shape[:-1] != values.shape[:-1]:
        raise ValueError(f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)} and values "
                         f"{tuple(values.shape)} must share (..., N, d) (values may differ in d)")
    length, width = queries.shape[-2], queries.shape[-1]
    allowed = dense(mask, length).to(queries.device)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(width)
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return weights, weights @ values
