"""Sequence repetition (seed 003): repeat the input k = r + 1 times and read the block structure.

This module starts with the §2 block analysis used by notebook 01: the share of attention mass a
real decoder puts on the fully bidirectional blocks ``A_ij`` (i > j) of the repeated sequence,
next to the analytic share of blocks ``(k - 1) / (k + 1)``.
"""
from __future__ import annotations

from typing import Sequence

import torch
from tqdm.auto import tqdm

from . import masks as M


def repeat_ids(input_ids: torch.Tensor, r: int) -> torch.Tensor:
    """``s^k``: the ``(batch, n)`` ids concatenated ``k = r + 1`` times along the sequence."""
    layout = M.Repetition(input_ids.shape[-1], r)
    return input_ids.repeat(1, layout.k)


def check_fits(model, n: int, r: int) -> None:
    """A clear error when k · n exceeds the model's maximum positions."""
    layout = M.Repetition(n, r)
    limit = int(getattr(model.config, "max_position_embeddings", layout.length))
    if layout.length > limit:
        raise ValueError(f"r={r}: k x n = {layout.k} x {n} = {layout.length} tokens exceeds the model's "
                         f"max_position_embeddings={limit}")


def block_mass_shares(attentions: Sequence[torch.Tensor], n: int, r: int) -> torch.Tensor:
    """Per layer, the share of attention mass on full blocks among all non-zero blocks.

    ``attentions`` holds one ``(batch, heads, kn, kn)`` weight tensor per layer. Each row sums to 1
    over the full (j < i) and diagonal (j = i) blocks of its copy i; the share averages the mass of
    the full blocks over every query of every copy, head and batch row, as §2 counts blocks over the
    whole matrix.
    """
    layout = M.Repetition(n, r)
    copies = layout.copy_of(torch.arange(layout.length))
    full_block = copies[:, None] > copies[None, :]
    shares = []
    for weights in attentions:
        mass = weights.float().sum(-1)  # rows sum to 1
        full = (weights.float() * full_block).sum(-1)
        shares.append((full / mass).mean())
    return torch.stack(shares)


@torch.no_grad()
def measure_block_shares(model, sentences_ids: Sequence[torch.Tensor], repeats: Sequence[int],
                         progress: bool = True) -> dict[int, torch.Tensor]:
    """For each r, the per-layer share of attention mass in full blocks, averaged over sentences.

    The model must use eager attention (weights are read from ``output_attentions``); the causal
    mask is the model's own, since SR changes the input, not the mask.
    """
    implementation = model.config._attn_implementation
    if implementation != "eager":
        raise ValueError(f"model uses attn_implementation={implementation!r}; attention weights need 'eager'")
    results: dict[int, torch.Tensor] = {}
    jobs = [(r, ids) for r in repeats for ids in sentences_ids]
    per_r: dict[int, list[torch.Tensor]] = {r: [] for r in repeats}
    for r, ids in tqdm(jobs, desc="block shares", disable=not progress):
        ids = ids.reshape(1, -1)
        check_fits(model, ids.shape[1], r)
        output = model(input_ids=repeat_ids(ids, r).to(model.device), output_attentions=True, use_cache=False)
        per_r[r].append(block_mass_shares(output.attentions, ids.shape[1], r))
    for r in repeats:
        results[r] = torch.stack(per_r[r]).mean(0)
    return results
