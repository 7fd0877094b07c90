"""Notebook 01's measurements on a real model: attention maps under each mask, and the proof that a mask reaches
every layer as the mask algebra predicts (a token changed inside a span moves only the hidden states the mask
connects it to, layer by layer)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ... import attention, data, masks, models


def example_ids(tokenizer, corpus: str, max_tokens: int) -> torch.Tensor:
    """The first validation sentence of ``corpus`` as ``(1, L)`` token ids, at most ``max_tokens`` long."""
    sentence = data.load_sentences(corpus, "validation", limit=1)[0]
    return data.token_ids(tokenizer, [sentence.text], max_tokens)[0][None]


def example_span(example: torch.Tensor) -> tuple[int, int]:
    """The middle third of the example: the MAGNET span the maps and the proof use."""
    length = example.shape[1]
    return length // 3, 2 * length // 3


def example_masks(span: tuple[int, int]) -> dict[str, masks.Mask]:
    """The three masks the lecture compares on one sentence: causal, bidirectional and MAGNET with one span."""
    return {"causal": masks.causal, "bidirectional": masks.bidirectional, f"MAGNET span {span}": masks.magnet([span])}


@dataclass(frozen=True)
class MaskProof:
    """``moved[l, p]``: how far the hidden state at position p moved after layer l when token ``changed`` was
    replaced; ``reach[l, p]``: whether the mask connects token ``changed`` to position p after l layers."""

    moved: torch.Tensor
    reach: torch.Tensor
    changed: int
    span: tuple[int, int]

    @property
    def matches(self) -> bool:
        """Measured == predicted: a state moved exactly where the mask says it can."""
        return bool(torch.equal(self.moved > 0, self.reach))


def mask_proof(model, example: torch.Tensor, span: tuple[int, int]) -> MaskProof:
    """Replace the token after the span's start by the sentence's first token and compare, layer by layer, the
    hidden states that moved with the reachability the MAGNET mask predicts (``attention.predicted_influence``)."""
    changed = span[0] + 1
    moved = attention.influence(model, example, changed, int(example[0, 0]), masks.magnet([span]))
    reach = attention.predicted_influence(masks.magnet([span]), num_layers=models.num_layers(model),
                                          padding_mask=torch.ones_like(example), position=changed)
    return MaskProof(moved, reach, changed, span)
