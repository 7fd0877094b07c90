"""Ragged rows of token ids as one rectangular batch: the workbook's one padding loop.

Every batch of sequences of different lengths is built by :func:`padded`: the rows at the start of each line
(right padding, for the encoders and the loss) or at its end (left padding, for generation), the rest filled, with
the padding mask that tells the attention which positions are real. The fill is the caller's (the tokenizer's pad
id, which :func:`helpers.models.load_tokenizer` always sets, or ``-100`` for labels that carry no loss).
"""
from __future__ import annotations

from typing import Sequence

import torch


def padded(rows: Sequence, fill: int, *, left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, padding_mask)``: ``rows`` (lists or 1D tensors of ids) as one ``(len(rows), longest)`` long tensor, each
    row at the start of its line (``left=True``: right-aligned at its end) and ``fill`` elsewhere; the mask is 1 on the
    rows' own positions and 0 on the filled ones."""
    if len(rows) == 0:
        raise ValueError("rows is empty; there is nothing to pad")
    longest = max(len(row) for row in rows)
    ids = torch.full((len(rows), longest), fill, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for index, row in enumerate(rows):
        where = slice(longest - len(row), longest) if left else slice(0, len(row))
        ids[index, where] = torch.as_tensor(row, dtype=torch.long)
        mask[index, where] = 1
    return ids, mask
