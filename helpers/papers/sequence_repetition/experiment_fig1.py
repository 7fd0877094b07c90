"""§2, Fig. 1 measured on a real decoder: attention mass in the full blocks of ``s^k`` (notebooks 01 and 04), and
how close SR's last copy comes to the fully unmasked single copy."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from ... import attention, models
from ... import masks as M
from ...device import model_device
from .mechanism import SHARE_VIEWS, Strategy, block_mass_shares, check_fits, gather_last_copy, repeat_batch, \
    repeat_ids, sr_features

_VIEW_OPTIONS = {"all queries": {}, "all queries, sink excluded": {"exclude_sink": True},
                 "last copy": {"last_copy": True}, "last copy, sink excluded": {"exclude_sink": True, "last_copy": True}}


@torch.no_grad()
def measure_block_share_views(model, sentences_ids: Sequence[torch.Tensor], repeats: Sequence[int],
                              progress: bool = True) -> dict[str, dict[int, torch.Tensor]]:
    """For each of :data:`~.mechanism.SHARE_VIEWS` and each r: a ``(sentences, layers)`` tensor of full-block mass
    shares (:func:`~.mechanism.block_mass_shares`).

    One eager forward pass per (r, sentence) serves all four views. The model must use eager attention
    (weights are read from ``output_attentions``); the causal mask is the model's own, since SR changes the
    input, not the mask.
    """
    implementation = attention.attention_implementation(model)
    if implementation != "eager":
        raise ValueError(f"model uses attn_implementation={implementation!r}; attention weights need 'eager'")
    if not len(sentences_ids):
        raise ValueError("sentences_ids is empty; the block shares need at least one sentence")
    views: dict[str, dict[int, list]] = {view: {r: [] for r in repeats} for view in SHARE_VIEWS}
    for r, ids in tqdm([(r, ids) for r in repeats for ids in sentences_ids], desc="block shares", disable=not progress):
        ids = ids.reshape(1, -1)
        check_fits(model, ids.shape[1], r)
        output = model(input_ids=repeat_ids(ids, r).to(model_device(model)), output_attentions=True, use_cache=False)
        for view in SHARE_VIEWS:
            views[view][r].append(block_mass_shares(output.attentions, ids.shape[1], r, **_VIEW_OPTIONS[view]).cpu())
    return {view: {r: torch.stack(values) for r, values in by_r.items()} for view, by_r in views.items()}


def per_layer_shares(views: dict[str, dict[int, torch.Tensor]], view: str = "all queries") -> dict[int, torch.Tensor]:
    """For each r, one view's per-layer share of attention mass in full blocks, averaged over the sentences."""
    if view not in views:
        raise ValueError(f"view={view!r} is not one of {sorted(views)}")
    return {r: values.mean(0) for r, values in views[view].items()}


@torch.no_grad()
def unmasked_similarity(model, sentences_ids: Sequence[torch.Tensor], repeats: Sequence[int],
                        progress: bool = True) -> dict[int, torch.Tensor]:
    """Per layer, mean cosine similarity between SR's last-copy hidden states and the single copy's hidden
    states with the causal mask removed (the fully unmasked model), untrained: does SR drift towards it?"""
    body = models.decoder_body(model)
    results: dict[int, list[torch.Tensor]] = {r: [] for r in repeats}
    for ids in tqdm(sentences_ids, desc="SR vs unmasked", disable=not progress):
        ids = ids.reshape(1, -1)  # the helpers below move it to the model's device
        unmasked = attention.forward_with_mask(body, ids, M.bidirectional, output_hidden_states=True).hidden_states[1:]
        for r in repeats:
            _, output = sr_features(body, ids, None, Strategy("sr", r), output_hidden_states=True)
            repeated = repeat_batch(ids, None, r)
            shares = [nn.functional.cosine_similarity(gather_last_copy(h, repeated).float(), u.float(), dim=-1).mean()
                      for h, u in zip(output.hidden_states[1:], unmasked)]
            results[r].append(torch.stack(shares).cpu())
    return {r: torch.stack(values).mean(0) for r, values in results.items()}
