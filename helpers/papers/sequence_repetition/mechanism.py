"""Sequence repetition's mechanism (seed 003): repeat the input k = r + 1 times, read the last copy.

- **§2**: ``s^k``, the ``n``-token sentence repeated ``k = r + 1`` times (:func:`repeat_ids`), run under the plain
  causal mask, ``h_a(s) = softmax((QK^T + CM) / sqrt(d)) V``; the attention matrix is a ``k x k`` grid of blocks
  ``A_ij``, full for ``i > j`` (the layout is :class:`helpers.masks.Repetition`). :func:`block_mass_shares` is Fig. 1's
  quantity measured: the share of a real decoder's attention mass that falls in the full blocks.
- **App. A.3.2**: padded rows repeated with or without pads between the copies (:func:`repeat_batch`); SR reads
  each token's embedding in the last copy (:func:`gather_last_copy`, :func:`sr_features`).
- **§3.4, App. A.3.1**: the baselines, the causal mask removed in every layer (full unmasking) or in the middle
  layers only (middle unmasking); the masks themselves live in :mod:`helpers.masks` (:func:`strategy_masks`).
- **§3.5**: early exit, fine-tuning "up to, but not including, layer L" (:func:`truncate_layers`,
  :func:`early_exit`), at the paper's exit layers scaled to the model's depth (:func:`exit_layers`).
- **App. A.2, A.4**: :class:`TokenTagger`, a softmax linear layer on the token embeddings, trained with the
  cross-entropy of each word's first sub-token only.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from ... import attention, models
from ... import masks as M
from ...checks import whole_number

PAPER_EXIT_LAYERS = (9, 14, 19, 24)  # §3.5: L ∈ {9, 14, 19, 24} of a model with N = 32 layers
PAPER_DEPTH = 32
STRATEGY_KINDS = ("sr", "middle", "full")
PAD_POLICIES = ("packed", "masked", "unmasked")
IGNORE_INDEX = -100  # App. A.4: only the first sub-token of each word carries a label


# --------------------------------------------------------------------------- §2: the repeated sequence s^k

def repeat_ids(input_ids: torch.Tensor, r: int) -> torch.Tensor:
    """``s^k`` (§2): the ``(batch, n)`` ids concatenated ``k = r + 1`` times along the sequence."""
    layout = M.Repetition(input_ids.shape[-1], r)
    return input_ids.repeat(1, layout.k)


def check_fits(model, n: int, r: int) -> None:
    """§2: "the final sequence has a length of k·n"; a clear error when that exceeds the model's positions."""
    layout = M.Repetition(n, r)
    models.check_fits(model, layout.length, f"r={r}: k x n = {layout.k} x {n} =")


SHARE_VIEWS = ("all queries", "all queries, sink excluded", "last copy", "last copy, sink excluded")


def block_mass_shares(attentions: Sequence[torch.Tensor], n: int, r: int, *, exclude_sink: bool = False,
                      last_copy: bool = False) -> torch.Tensor:
    """Per layer, the share of attention mass on full blocks among all non-zero blocks (§2, Fig. 1 measured).

    ``attentions`` holds one ``(batch, heads, kn, kn)`` weight tensor per layer. Each row sums to 1
    over the full (j < i) and diagonal (j = i) blocks of its copy i; the share averages the mass of
    the full blocks over every query of every copy, head and batch row, as §2 counts blocks over the
    whole matrix. ``exclude_sink`` drops key 0 (the first token, the attention sink of a decoder without a
    BOS token, which sits in a full block of every later copy) from both the full mass and the row's mass;
    queries left with no mass (query 0) are skipped. ``last_copy`` averages over the last copy's queries only:
    the ones SR reads.
    """
    layout = M.Repetition(n, r)
    device = attentions[0].device
    copies = layout.copy_of(torch.arange(layout.length, device=device))
    full_block = (copies[:, None] > copies[None, :]).float()
    keys = torch.ones(layout.length, device=device)
    if exclude_sink:
        keys[0] = 0
    queries = torch.ones(layout.length, dtype=torch.bool, device=device)
    if last_copy:
        queries &= copies == layout.k - 1
    shares = []
    for weights in attentions:
        weights = weights.float() * keys
        mass = weights.sum(-1)
        full = (weights * full_block).sum(-1)
        kept = (queries & (mass > 0).all(0).all(0)).float()  # per query, over batch and heads
        ratio = full / mass.clamp_min(torch.finfo(mass.dtype).tiny)
        shares.append(((ratio * kept).sum(-1) / kept.sum()).mean())  # the mean over kept queries, batch rows, heads
    return torch.stack(shares)  # on the weights' device; callers copy to the CPU


# --------------------------------------------------------------------------- §3.4, §3.5: strategies and early exit

@dataclass(frozen=True)
class Strategy:
    """How the decoder sees the sentence (§3.4): SR with r repetitions, middle or full unmasking; optional early exit.

    ``exit_layer`` L fine-tunes "up to, but not including, layer L" (§3.5, 1-based layers): it keeps the L - 1
    decoder layers ``layers[:L-1]``, as the authors' scripts do (``EARLY_EXIT_LAYERS=(8 13 18 23)`` layers kept for
    L = 9, 14, 19, 24). None keeps all (the paper's "exit@L=32").
    """

    kind: str = "sr"
    r: int = 0
    exit_layer: int | None = None

    def __post_init__(self):
        if self.kind not in STRATEGY_KINDS:
            raise ValueError(f"kind={self.kind!r} is not one of {STRATEGY_KINDS}")
        M.check_repeats(self.r)
        if self.kind != "sr" and self.r != 0:
            raise ValueError(f"r={self.r} with kind={self.kind!r}: unmasking baselines read the single copy (r=0)")
        if self.exit_layer is not None:
            whole_number(self.exit_layer, "exit_layer", 1, "a layer count, or None for all layers")

    @property
    def label(self) -> str:
        name = {"sr": f"SR r={self.r}", "middle": "middle unmasking", "full": "full unmasking"}[self.kind]
        return name if self.exit_layer is None else f"{name}, exit@{self.exit_layer}"

    @property
    def slug(self) -> str:
        name = {"sr": f"sr{self.r}", "middle": "mu", "full": "fu"}[self.kind]
        return name if self.exit_layer is None else f"{name}_exit{self.exit_layer}"


def check_exit_layer(exit_layer: int, num_layers: int) -> int:
    """An exit layer L keeps the L - 1 layers before it: at least 1, at most ``num_layers``."""
    try:
        whole = not isinstance(exit_layer, (bool, str)) and int(exit_layer) == exit_layer
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or not 2 <= exit_layer <= num_layers + 1:
        raise ValueError(f"exit_layer={exit_layer!r} is out of range for a model with {num_layers} layers; "
                         f"expected 2..{num_layers + 1} (layers[:exit_layer - 1] are kept)")
    return int(exit_layer)


def exit_layers(num_layers: int) -> tuple[int, ...]:
    """§3.5's exit layers L ∈ {9, 14, 19, 24} of N = 32, scaled to ``num_layers``; exits that would keep all
    layers or the same layers as the full model's label (L >= N) are left out.

    exit@L runs L - 1 layers ("up to, but not including, layer L"): the paper's efficiency factors "from 4x to
    1.39x" are 32/8 and 32/23, and the authors' scripts keep 8, 13, 18, 23 layers.
    """
    return tuple(sorted({layer for layer in (scaled_exit_layer(paper, num_layers) for paper in PAPER_EXIT_LAYERS)
                         if layer < num_layers}))


def scaled_exit_layer(paper_layer: int, num_layers: int) -> int:
    """The paper's exit layer (of 32) for a ``num_layers``-layer model: the L - 1 kept layers scaled to the same
    relative depth, rounded half up (at least one kept layer); identity for 32 layers."""
    whole_number(num_layers, "num_layers")
    kept = math.floor((paper_layer - 1) * num_layers / PAPER_DEPTH + 0.5)
    return min(num_layers, max(1, kept)) + 1


def _layers_owner(body) -> tuple[nn.Module, str]:
    layers = models.decoder_layers(body)
    for name, module in body.named_modules():
        for child_name, child in module.named_children():
            if child is layers:
                return module, child_name
    raise ValueError(f"could not find the module holding the decoder layers of {type(body).__name__}")


def _set_depth(body, owner: nn.Module, attribute: str, layers: nn.ModuleList) -> None:
    setattr(owner, attribute, layers)
    config = body.config
    types = getattr(config, "layer_types", None)
    if types is not None:
        config.layer_types = list(types)[:len(layers)]
    config.num_hidden_layers = len(layers)


def truncate_layers(body, exit_layer: int):
    """Early exit (§3.5): keep ``layers[:exit_layer - 1]`` for good, so the dropped layers cost nothing."""
    owner, attribute = _layers_owner(body)
    layers = getattr(owner, attribute)
    exit_layer = check_exit_layer(exit_layer, len(layers))
    _set_depth(body, owner, attribute, nn.ModuleList(list(layers)[:exit_layer - 1]))
    return body


@contextlib.contextmanager
def early_exit(body, exit_layer: int | None):
    """Run ``body`` on ``layers[:exit_layer - 1]`` inside the block (for timing, §4.5); restores every layer
    afterwards."""
    if exit_layer is None:
        yield body
        return
    owner, attribute = _layers_owner(body)
    layers = getattr(owner, attribute)
    exit_layer = check_exit_layer(exit_layer, len(layers))
    saved_types = getattr(body.config, "layer_types", None)
    _set_depth(body, owner, attribute, nn.ModuleList(list(layers)[:exit_layer - 1]))
    try:
        yield body
    finally:
        _set_depth(body, owner, attribute, layers)
        if saved_types is not None:
            body.config.layer_types = saved_types


# --------------------------------------------------------------------------- App. A.3.2: repetition with padding

@dataclass(frozen=True)
class RepeatedBatch:
    """``s^k`` for a padded batch (§2, App. A.3.2).

    ``last_copy[b, j]`` is where original position j of row b sits in the last copy: SR reads its token
    embedding there. ``position_ids`` continue across the copies and skip padding.
    """

    input_ids: torch.Tensor
    padding_mask: torch.Tensor
    position_ids: torch.Tensor
    last_copy: torch.Tensor
    r: int
    policy: str


def repeat_batch(input_ids: torch.Tensor, padding_mask: torch.Tensor | None = None, r: int = 0,
                 policy: str = "packed") -> RepeatedBatch:
    """Repeat each row k = r + 1 times (App. A.3.2), with one of three padding policies.

    - ``packed``: each row's real tokens k times, then all its padding at the end: no pad between copies.
    - ``masked``: the padded row concatenated k times (as App. A.3.2 does); the pads between copies are
      hidden from attention and skipped by the position ids, so the real tokens compute exactly as packed.
    - ``unmasked``: the padded row concatenated k times with every pad visible and plain positions
      ``0..kn-1``, as the public implementation does; a row's result then depends on its batch-mates' length.
    """
    r = M.check_repeats(r)
    if policy not in PAD_POLICIES:
        raise ValueError(f"policy={policy!r} is not one of {PAD_POLICIES}")
    padding_mask = attention.check_batch(input_ids, padding_mask)
    k, (batch, n) = r + 1, input_ids.shape
    valid = padding_mask.bool()
    content = M.content_positions(padding_mask)  # index among the row's real tokens
    if policy == "packed":
        lengths = valid.sum(-1)
        ids = torch.zeros(batch, k * n, dtype=input_ids.dtype, device=input_ids.device)
        mask = torch.zeros(batch, k * n, dtype=padding_mask.dtype, device=input_ids.device)
        pad_fill = input_ids[~valid][0] if (~valid).any() else input_ids.new_tensor(0)
        ids.fill_(int(pad_fill))
        for row in range(batch):
            real = input_ids[row][valid[row]]
            ids[row, :k * len(real)] = real.repeat(k)
            mask[row, :k * len(real)] = 1
        last = (r * lengths[:, None] + content).clamp(max=k * n - 1)
        positions = M.content_positions(mask)
    else:
        ids = input_ids.repeat(1, k)
        mask = padding_mask.repeat(1, k) if policy == "masked" else torch.ones_like(ids, dtype=padding_mask.dtype)
        last = r * n + torch.arange(n, device=input_ids.device).expand(batch, n)
        positions = M.content_positions(mask)
    return RepeatedBatch(ids, mask, positions, last, r, policy)


def gather_last_copy(hidden: torch.Tensor, repeated: RepeatedBatch) -> torch.Tensor:
    """``(B, kn, H)`` hidden states -> ``(B, n, H)``: each original position's state in the last copy (§2)."""
    index = repeated.last_copy.to(hidden.device)[..., None].expand(-1, -1, hidden.shape[-1])
    return hidden.gather(1, index)


def strategy_masks(strategy: Strategy, num_layers: int) -> dict:
    """The masks a strategy feeds ``attention.forward_with_mask``: causal for SR (the input changes, not the
    mask), bidirectional in every layer for full unmasking, or in App. A.3.1's middle layers only."""
    if strategy.kind == "middle":
        return {"layer_masks": M.middle_unmasking(num_layers)}
    return {"mask": M.causal if strategy.kind == "sr" else M.bidirectional}


def sr_features(body, input_ids: torch.Tensor, padding_mask: torch.Tensor | None, strategy: Strategy,
                policy: str = "packed", **forward_kwargs):
    """Token embeddings under ``strategy``: ``(B, n, H)`` from the last copy, and the body's raw output.

    SR keeps the causal mask and repeats the input (§2); the baselines keep one copy and remove the causal
    mask in the middle layers (App. A.3.1) or in every layer (§3.4). Masks go through ``helpers.attention``.
    """
    check_fits(body, input_ids.shape[1], strategy.r)
    repeated = repeat_batch(input_ids, padding_mask, strategy.r, policy)
    output = attention.forward_with_mask(body, repeated.input_ids, padding_mask=repeated.padding_mask,
                                         position_ids=repeated.position_ids,
                                         **strategy_masks(strategy, models.num_layers(body)), **forward_kwargs)
    return gather_last_copy(output.last_hidden_state, repeated), output


# --------------------------------------------------------------------------- App. A.2, A.4: the tagger

class TokenTagger(nn.Module):
    """A decoder body with a softmax token-classification head (App. A.2) on SR / unmasked token embeddings.

    The head reads its input through dropout, as the authors' token-classification head does; the loss is the
    cross-entropy of the labelled positions only (each word's first sub-token, App. A.4; the rest are
    :data:`IGNORE_INDEX`).
    """

    def __init__(self, body, num_labels: int, strategy: Strategy, policy: str = "packed", dropout: float = 0.1):
        super().__init__()
        self.body = body
        self.strategy = strategy
        self.policy = policy
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(int(body.config.hidden_size), num_labels)

    def forward(self, input_ids, padding_mask, labels=None, **forward_kwargs) -> dict:
        features, output = sr_features(self.body, input_ids, padding_mask, self.strategy, self.policy, **forward_kwargs)
        logits = self.head(self.dropout(features.to(self.head.weight.dtype)))
        result = {"logits": logits, "output": output}
        if labels is not None:
            result["loss"] = nn.functional.cross_entropy(logits.flatten(0, 1), labels.to(logits.device).flatten(),
                                                         ignore_index=IGNORE_INDEX)
        return result
