"""Sequence repetition (seed 003): repeat the input k = r + 1 times and read the token embeddings of the last copy.

- **§2 block analysis** (notebooks 01 and 04): the share of attention mass a real decoder puts on the
  fully bidirectional blocks ``A_ij`` (i > j) of the repeated sequence, against the diagonal blocks,
  next to the analytic share of blocks ``(k - 1) / (k + 1)``.
- **Repetition with padding** (App. A.3.2): :func:`repeat_batch` with no pad between copies, or pads
  between copies hidden from attention; position ids continue across the copies.
- **Token labelling** (§3, App. A.2-A.4): :class:`TokenTagger`, a decoder body with a softmax head on the
  first sub-token of each word (IOB2), LoRA r = 16, α = 16, dropout 0.1, AdamW lr 2e-4, weight decay 0.05;
  QLoRA nf4 with fp16 compute on CUDA. Baselines: middle-layer unmasking (App. A.3.1) and full unmasking.
  Scored with seqeval micro F1, mean ± 95% CI over seeds.
- **Early exit** (§3.5, Fig. 5) and **speed** (§4.5, Table 2).

Sizes live in :data:`SETTINGS`, one entry per profile.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import math
import random
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from . import attention, data, metrics, models, paths, training
from . import masks as M
from . import store
from .checks import whole_number
from .device import model_device, resolve_four_bit


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
        full = (weights.float() * full_block.to(weights.device)).sum(-1)
        shares.append((full / mass).mean())
    return torch.stack(shares)


@torch.no_grad()
def measure_block_shares(model, sentences_ids: Sequence[torch.Tensor], repeats: Sequence[int],
                         progress: bool = True) -> dict[int, torch.Tensor]:
    """For each r, the per-layer share of attention mass in full blocks, averaged over sentences.

    The model must use eager attention (weights are read from ``output_attentions``); the causal
    mask is the model's own, since SR changes the input, not the mask.
    """
    implementation = attention.attention_implementation(model)
    if implementation != "eager":
        raise ValueError(f"model uses attn_implementation={implementation!r}; attention weights need 'eager'")
    results: dict[int, torch.Tensor] = {}
    jobs = [(r, ids) for r in repeats for ids in sentences_ids]
    per_r: dict[int, list[torch.Tensor]] = {r: [] for r in repeats}
    for r, ids in tqdm(jobs, desc="block shares", disable=not progress):
        ids = ids.reshape(1, -1)
        check_fits(model, ids.shape[1], r)
        output = model(input_ids=repeat_ids(ids, r).to(model_device(model)), output_attentions=True, use_cache=False)
        per_r[r].append(block_mass_shares(output.attentions, ids.shape[1], r).cpu())
    for r in repeats:
        results[r] = torch.stack(per_r[r]).mean(0)
    return results


# =====================================================================================================
# Everything below serves notebook 04: SR token labelling, its baselines, early exit and speed.
# =====================================================================================================

# --------------------------------------------------------------------------- settings

PAPER_SEEDS = (5, 29, 42, 81, 123)  # App. A.4
PAPER_EXIT_LAYERS = (9, 14, 19, 24)  # §3.5, out of PAPER_DEPTH layers
PAPER_DEPTH = 32
TASKS = ("ner", "chunks")
DATASETS = ("silver", "conll2003")
STRATEGY_KINDS = ("sr", "middle", "full")
PAD_POLICIES = ("packed", "masked", "unmasked")
IGNORE_INDEX = -100


@dataclass(frozen=True)
class RepetitionSettings:
    """Every size notebook 04 uses; the ``paper`` entry holds §3.3 and App. A.4's values."""

    # §2 block analysis: sentences of at most block_max_tokens tokens, repeated r times.
    block_repeats: tuple[int, ...] = (0, 1, 2, 4, 8)
    block_sentences: int = 4
    block_max_tokens: int = 12
    # §3.1 data: spaCy silver tags on the profile's corpus, or CoNLL-2003 from the Hub.
    dataset: str = "silver"
    tasks: tuple[str, ...] = ("ner", "chunks")
    train_sentences: int | None = 256  # None: the whole training split
    validation_sentences: int | None = 48
    test_sentences: int | None = 96
    min_words: int = 5
    max_words: int = 20
    max_tokens: int = 256  # App. A.4
    # §3.3 optimisation (App. A.4): LoRA r=16, α=16, p=0.1 on q, k, v, o; AdamW lr 2e-4, wd 0.05; batch 8 x 4.
    repeats: tuple[int, ...] = (0, 1, 2, 4, 8)
    baselines: tuple[str, ...] = ("middle", "full")
    seeds: tuple[int, ...] = PAPER_SEEDS
    steps: int = 100
    batch_size: int = 8
    grad_accum: int = 4
    lr: float = 2e-4
    weight_decay: float = 0.05
    lora_r: int = 16
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    eval_every: int = 50
    checkpoint_every: int = 0
    qlora: bool = False  # nf4 with fp16 compute; only where CUDA and bitsandbytes are present
    gradient_checkpointing: bool = False
    pad_policy: str = "packed"
    # §3.5 early exit: fine-tune up to one of these exit layers (scaled from 9/14/19/24 of 32 layers).
    exit_repeats: tuple[int, ...] = (1, 2, 4, 8)
    exit_tasks: tuple[str, ...] = ("ner",)
    exit_seeds: tuple[int, ...] = PAPER_SEEDS
    # §4.5 Table 2: inference speed for every r x exit layer, ratios measured in one run.
    speed_repeats: tuple[int, ...] = (0, 1, 2, 4, 8)
    speed_sentences: int = 32
    speed_batch_size: int = 8
    speed_trials: int = 3
    # The tagging widget.
    widget_sentence: str = "Elizabeth Bennet walked with Mr. Darcy to Netherfield Park in October."

    def __post_init__(self):
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset={self.dataset!r} is not one of {DATASETS}")
        for task in self.tasks + self.exit_tasks:
            if task not in TASKS:
                raise ValueError(f"task={task!r} is not one of {TASKS}")
        for r in self.block_repeats + self.repeats + self.exit_repeats + self.speed_repeats:
            M.check_repeats(r)
        for baseline in self.baselines:
            if baseline not in ("middle", "full"):
                raise ValueError(f"baselines holds {baseline!r}; expected 'middle' and/or 'full'")
        if self.pad_policy not in PAD_POLICIES:
            raise ValueError(f"pad_policy={self.pad_policy!r} is not one of {PAD_POLICIES}")


_SMOKE = RepetitionSettings(
    block_repeats=(0, 1, 2), block_sentences=1, block_max_tokens=6,
    tasks=("ner", "chunks"), train_sentences=16, validation_sentences=4, test_sentences=6, max_words=12, max_tokens=32,
    repeats=(0, 1, 2), seeds=(0,), steps=2, batch_size=2, grad_accum=1, lr=2e-3, lora_r=4, lora_alpha=4, eval_every=1,
    exit_repeats=(1,), exit_tasks=("chunks",), exit_seeds=(0,),
    speed_repeats=(0, 1, 2), speed_sentences=4, speed_batch_size=2, speed_trials=1,
)
# cpu: sized to <= 20 min on 2 cores (notebook 04 and the issue report say how): silver chunking and NER on
# Austen, r in {0, 1, 2} (r = 4, 8 are left to the gpu profile), 2 seeds, 30 steps of 8 sentences of 5-12 words at
# lr 1e-3 (5x the paper's, for so few steps), scored at the last step; early exit for r in {1, 2} on chunking, one seed.
_CPU = RepetitionSettings(
    block_repeats=(0, 1, 2, 4, 8), block_sentences=4, block_max_tokens=12,
    tasks=("chunks", "ner"), train_sentences=240, validation_sentences=32, test_sentences=80, max_words=12, max_tokens=48,
    repeats=(0, 1, 2), seeds=(5, 29), steps=30, batch_size=8, grad_accum=1, lr=1e-3, eval_every=0,
    exit_repeats=(1, 2), exit_tasks=("chunks",), exit_seeds=(5,),
    speed_repeats=(0, 1, 2, 4, 8), speed_sentences=4, speed_batch_size=4, speed_trials=3,
)
_GPU = RepetitionSettings(
    block_sentences=16, block_max_tokens=24, dataset="conll2003", tasks=("ner",),
    train_sentences=4000, validation_sentences=500, test_sentences=None, max_words=1000,
    seeds=(5, 29, 42), steps=400, batch_size=8, grad_accum=4, eval_every=100, checkpoint_every=100, qlora=True,
    gradient_checkpointing=True, exit_seeds=(5,), speed_sentences=256, speed_batch_size=32, speed_trials=5,
    widget_sentence="EU rejects German call to boycott British lamb .",
)
# paper: §3.3 and App. A.4: 10 epochs of CoNLL03 (14,041 sentences, effective batch 32), best epoch on validation,
# five seeds, QLoRA nf4 / fp16, gradient checkpointing, max 256 tokens; padded rows concatenated k times (App. A.3.2)
# with the pads between copies masked.
_PAPER = RepetitionSettings(
    block_sentences=32, block_max_tokens=32, dataset="conll2003", tasks=("ner",),
    train_sentences=None, validation_sentences=None, test_sentences=None, max_words=1000,
    seeds=PAPER_SEEDS, steps=4388, batch_size=8, grad_accum=4, eval_every=439, checkpoint_every=439, qlora=True,
    gradient_checkpointing=True, pad_policy="masked", exit_seeds=PAPER_SEEDS, speed_sentences=1024,
    speed_batch_size=32, speed_trials=5,
    widget_sentence="EU rejects German call to boycott British lamb .",
)
SETTINGS = {"smoke": _SMOKE, "cpu": _CPU, "gpu": _GPU, "paper": _PAPER}


# --------------------------------------------------------------------------- the paper's numbers

# Table 5, CoNLL03 test micro F1 (mean of five seeds) for SR at r = 0..8, middle (MU) and full unmasking (FU).
PAPER_CONLL03 = {
    "Gemma-7B": {0: 81.87, 1: 93.20, 2: 93.38, 4: 93.38, 8: 93.25, "middle": 91.46, "full": 92.75},
    "Gemma2-2B": {0: 80.13, 1: 92.60, 2: 93.05, 4: 93.09, 8: 92.87, "middle": 92.60, "full": 92.82},
    "Gemma2-9B": {0: 82.20, 1: 93.44, 2: 93.58, 4: 93.59, 8: 93.51, "middle": 93.17, "full": 93.44},
    "Mistral-7B": {0: 77.88, 1: 93.67, 2: 93.66, 4: 93.79, 8: 93.70, "middle": 93.48, "full": 93.69},
    "Qwen3-1.7B": {0: 70.98, 1: 90.85, 2: 91.53, 4: 91.56, 8: 91.78, "middle": 90.31, "full": 90.27},
    "Qwen3-4B": {0: 72.83, 1: 91.90, 2: 92.19, 4: 92.30, 8: 92.33, "middle": 91.87, "full": 91.17},
    "Qwen3-8B": {0: 73.27, 1: 92.24, 2: 92.81, 4: 92.74, 8: 93.00, "middle": 92.23, "full": 91.99},
}
# Table 1: the r each model's SR row reports (its best average over the four datasets).
PAPER_TABLE1_R = {"Gemma-7B": 4, "Gemma2-2B": 2, "Gemma2-9B": 2, "Mistral-7B": 4, "Qwen3-1.7B": 4, "Qwen3-4B": 8,
                  "Qwen3-8B": 4}
# Table 2: inference speedup over base Mistral-7B (r = 0, all 32 layers), rows exit@L, columns r.
PAPER_SPEEDUPS = {9: {1: 3.96, 2: 2.89, 4: 2.13, 8: 1.47}, 14: {1: 2.15, 2: 1.74, 4: 1.25, 8: 0.82},
                  19: {1: 1.51, 2: 1.25, 4: 0.98, 8: 0.59}, 24: {1: 1.17, 2: 0.98, 4: 0.72, 8: 0.46}}


def paper_f1_by_r() -> dict:
    """Table 5's CoNLL03 F1, averaged over the seven decoders, for each r and both unmasking baselines."""
    keys = next(iter(PAPER_CONLL03.values())).keys()
    return {key: float(np.mean([row[key] for row in PAPER_CONLL03.values()])) for key in keys}


def paper_table1() -> dict[str, float]:
    """Table 1's CoNLL03 column averaged over the seven decoders: SR at each model's reported r, MU, FU."""
    return {"sr": float(np.mean([PAPER_CONLL03[m][r] for m, r in PAPER_TABLE1_R.items()])),
            "middle": float(np.mean([row["middle"] for row in PAPER_CONLL03.values()])),
            "full": float(np.mean([row["full"] for row in PAPER_CONLL03.values()]))}


# --------------------------------------------------------------------------- strategies and layers

@dataclass(frozen=True)
class Strategy:
    """How the decoder sees the sentence (§3.4): SR with r repetitions, middle or full unmasking; optional early exit.

    ``exit_layer`` L keeps decoder layers ``0..L-1`` (``layers[:L]``); None keeps all (the paper's "exit@L=32").
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
    """An exit layer must keep between 1 and all ``num_layers`` decoder layers."""
    if isinstance(exit_layer, bool) or int(exit_layer) != exit_layer or not 1 <= exit_layer <= num_layers:
        raise ValueError(f"exit_layer={exit_layer!r} is out of range for a model with {num_layers} layers; "
                         f"expected 1..{num_layers} (layers[:exit_layer] are kept)")
    return int(exit_layer)


def exit_layers(num_layers: int) -> tuple[int, ...]:
    """§3.5's exit layers L ∈ {9, 14, 19, 24} of N = 32 (about 28/44/59/75 % of depth), scaled to ``num_layers``.

    The paper's efficiency factors "from 4x to 1.39x" equal 32/8 and 32/23, i.e. L - 1 layers run, while
    Fig. 5 calls the full model "exit@L=32"; we follow the latter: exit@L runs ``layers[:L]``.
    """
    return tuple(sorted({scaled_exit_layer(layer, num_layers) for layer in PAPER_EXIT_LAYERS}))


def scaled_exit_layer(paper_layer: int, num_layers: int) -> int:
    """The paper's exit layer (of 32) at the same relative depth of a ``num_layers``-layer model, rounded half up."""
    whole_number(num_layers, "num_layers")
    return min(num_layers, max(1, math.floor(paper_layer * num_layers / PAPER_DEPTH + 0.5)))


def num_layers_of(model) -> int:
    return int(model.config.num_hidden_layers)


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
    """Early exit (§3.5): keep ``layers[:exit_layer]`` for good, so the dropped layers cost nothing."""
    owner, attribute = _layers_owner(body)
    layers = getattr(owner, attribute)
    exit_layer = check_exit_layer(exit_layer, len(layers))
    _set_depth(body, owner, attribute, nn.ModuleList(list(layers)[:exit_layer]))
    return body


@contextlib.contextmanager
def early_exit(body, exit_layer: int | None):
    """Run ``body`` on ``layers[:exit_layer]`` inside the block (for timing); restores every layer afterwards."""
    if exit_layer is None:
        yield body
        return
    owner, attribute = _layers_owner(body)
    layers = getattr(owner, attribute)
    exit_layer = check_exit_layer(exit_layer, len(layers))
    saved_types = getattr(body.config, "layer_types", None)
    _set_depth(body, owner, attribute, nn.ModuleList(list(layers)[:exit_layer]))
    try:
        yield body
    finally:
        _set_depth(body, owner, attribute, layers)
        if saved_types is not None:
            body.config.layer_types = saved_types


# --------------------------------------------------------------------------- repetition with padding

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
    """``(B, kn, H)`` hidden states -> ``(B, n, H)``: each original position's state in the last copy."""
    index = repeated.last_copy.to(hidden.device)[..., None].expand(-1, -1, hidden.shape[-1])
    return hidden.gather(1, index)


def check_fits_batch(model, n: int, r: int) -> None:
    """§2: s^k has k·n tokens; a clear error when that exceeds the model's positions."""
    M.check_repeats(r)
    check_fits(model, n, r)


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
    check_fits_batch(body, input_ids.shape[1], strategy.r)
    repeated = repeat_batch(input_ids, padding_mask, strategy.r, policy)
    output = attention.forward_with_mask(body, repeated.input_ids, padding_mask=repeated.padding_mask,
                                         position_ids=repeated.position_ids, **strategy_masks(strategy, num_layers_of(body)),
                                         **forward_kwargs)
    return gather_last_copy(output.last_hidden_state, repeated), output


# --------------------------------------------------------------------------- data: words, tags, sub-tokens

@dataclass(frozen=True)
class TaggedSentence:
    words: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class EncodedSentence:
    """Sub-token ids of a sentence, where each (kept) word starts, and the word's IOB2 tag."""

    input_ids: tuple[int, ...]
    word_starts: tuple[int, ...]
    words: tuple[str, ...]
    tags: tuple[str, ...]


def encode_words(tokenizer, words: Sequence[str], max_tokens: int = 256) -> tuple[list[int], list[int]]:
    """Token ids of ``" ".join(words)`` (with the tokenizer's special tokens) and each word's first sub-token.

    Words whose first sub-token falls beyond ``max_tokens`` are dropped (App. A.4 caps sequences at 256).
    """
    if not words:
        raise ValueError("words is empty; a sentence needs at least one word")
    text, starts_in_text, cursor = "", [], 0
    for index, word in enumerate(words):
        if index:
            text += " "
        starts_in_text.append(len(text))
        text += word
    encoding = tokenizer(text, return_offsets_mapping=True, truncation=True, max_length=max_tokens)
    ids, offsets = list(encoding["input_ids"]), list(encoding["offset_mapping"])
    starts = []
    for start in starts_in_text:
        while cursor < len(offsets) and (offsets[cursor][1] <= start or offsets[cursor][0] == offsets[cursor][1]):
            cursor += 1
        if cursor >= len(offsets):
            break
        starts.append(cursor)
    return ids, starts


def encode_sentences(tokenizer, sentences: Sequence[TaggedSentence], max_tokens: int) -> list[EncodedSentence]:
    out = []
    for sentence in sentences:
        ids, starts = encode_words(tokenizer, sentence.words, max_tokens)
        if starts:
            kept = len(starts)
            out.append(EncodedSentence(tuple(ids), tuple(starts), tuple(sentence.words[:kept]), tuple(sentence.tags[:kept])))
    return out


def label_vocabulary(tag_sequences: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """'O' first, then every B-X/I-X pair that occurs, sorted by type."""
    tag_sequences = [list(tags) for tags in tag_sequences]
    if not any(tag_sequences):
        raise ValueError("tag_sequences is empty; a label set needs at least one tagged sentence")
    for index, tags in enumerate(tag_sequences):
        for position, tag in enumerate(tags):
            if not isinstance(tag, str) or not (tag == "O" or tag[:2] in ("B-", "I-") and len(tag) > 2):
                raise ValueError(f"tag_sequences[{index}][{position}]={tag!r} is not an IOB2 tag ('O', 'B-X', 'I-X')")
    types = sorted({tag[2:] for tags in tag_sequences for tag in tags if tag != "O"})
    return ("O",) + tuple(f"{prefix}-{name}" for name in types for prefix in ("B", "I"))


def collate(sentences: Sequence[EncodedSentence], labels: Sequence[str], pad_id: int) -> dict:
    """Right-padded ``input_ids``/``padding_mask`` and ``labels``: the tag id on each word's first sub-token, -100 elsewhere (App. A.4)."""
    index = {label: i for i, label in enumerate(labels)}
    length = max(len(s.input_ids) for s in sentences)
    input_ids = torch.full((len(sentences), length), pad_id, dtype=torch.long)
    padding_mask = torch.zeros_like(input_ids)
    targets = torch.full_like(input_ids, IGNORE_INDEX)
    for row, sentence in enumerate(sentences):
        input_ids[row, :len(sentence.input_ids)] = torch.tensor(sentence.input_ids)
        padding_mask[row, :len(sentence.input_ids)] = 1
        targets[row, list(sentence.word_starts)] = torch.tensor([index.get(tag, 0) for tag in sentence.tags])
    return {"input_ids": input_ids, "padding_mask": padding_mask, "labels": targets}


@dataclass
class TaggingData:
    """One task's encoded splits and its label set."""

    task: str
    labels: tuple[str, ...]
    train: list[EncodedSentence]
    validation: list[EncodedSentence]
    test: list[EncodedSentence]
    pad_id: int

    def fingerprint(self) -> str:
        digest = hashlib.md5()
        for split in (self.train, self.validation, self.test):
            for sentence in split:
                digest.update(repr((sentence.input_ids, sentence.tags)).encode())
        digest.update(repr(self.labels).encode())
        return digest.hexdigest()[:12]


# spaCy's OntoNotes types folded into CoNLL-2003's four (§3.1); numbers, dates and amounts are not entities there.
SILVER_TO_CONLL = {"PERSON": "PER", "ORG": "ORG", "GPE": "LOC", "LOC": "LOC", "FAC": "LOC", "NORP": "MISC",
                   "EVENT": "MISC", "WORK_OF_ART": "MISC", "LAW": "MISC", "LANGUAGE": "MISC", "PRODUCT": "MISC"}


def conll_types(tags: Sequence[str]) -> tuple[str, ...]:
    """Silver OntoNotes IOB2 tags mapped onto CoNLL-2003's PER/ORG/LOC/MISC; other types become O."""
    out = []
    for tag in tags:
        kind = SILVER_TO_CONLL.get(tag[2:]) if tag != "O" else None
        out.append(f"{tag[:2]}{kind}" if kind else "O")
    # an I- whose entity start was dropped cannot happen: spaCy entities keep one type across B/I
    return tuple(out)


def _silver_split(corpus: str, split: str, count: int | None, settings: RepetitionSettings, task: str,
                  seed: int, progress: bool = True) -> list[TaggedSentence]:
    texts = [s.text for s in data.load_sentences(corpus, split, min_words=settings.min_words)
             if len(s.text.split()) <= settings.max_words]
    random.Random(seed).shuffle(texts)
    wanted = len(texts) if count is None else count
    pool = texts[:wanted * (4 if task == "ner" else 1)]  # about one short Austen sentence in three names an entity
    labelled = data.silver_labels(pool, progress=progress)
    tagged = [TaggedSentence(tuple(s.words), conll_types(s.ner) if task == "ner" else tuple(s.chunks))
              for s in labelled if s.words]
    if task == "ner":
        tagged = [s for s in tagged if any(tag != "O" for tag in s.tags)]
    return tagged[:wanted]


CONLL2003_SIZES = {"train": 14041, "validation": 3250, "test": 3453}  # sentences per split (§3.1, Table 4)


def conll2003_sentences(split: str, limit: int | None = None) -> list[TaggedSentence]:
    """CoNLL-2003 NER (§3.1) as IOB2 tag strings, through the one loader in :func:`helpers.data.conll2003`."""
    return [TaggedSentence(s.words, s.ner) for s in data.conll2003(split, limit)]


def load_tagging_data(tokenizer, task: str, settings: RepetitionSettings, corpus: str = "austen",
                      seed: int = 0, progress: bool = True) -> TaggingData:
    """§3.1 data for ``task``: spaCy silver NER or noun-chunk IOB2 tags on ``corpus`` (train/validation/test
    splits), or CoNLL-2003 NER from the Hub; encoded with the first sub-token of each word labelled."""
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not one of {TASKS}")
    counts = {"train": settings.train_sentences, "validation": settings.validation_sentences,
              "test": settings.test_sentences}
    splits = None
    if settings.dataset == "conll2003":
        if task != "ner":
            raise ValueError(f"task={task!r}: the CoNLL-2003 path of notebook 04 labels NER only")
        try:
            splits = {name: conll2003_sentences(name, count) for name, count in counts.items()}
        except data.MissingAssetError as error:
            warnings.warn(f"CoNLL-2003 is unavailable, so notebook 04 falls back to spaCy silver NER on corpus={corpus!r} "
                          f"(CoNLL-sized splits); its F1 are then not CoNLL-2003 scores. Cause: {error}", stacklevel=2)
            counts = {name: CONLL2003_SIZES[name] if count is None else count for name, count in counts.items()}
    if splits is None:
        splits = {name: _silver_split(corpus, name, count, settings, task, seed, progress) for name, count in counts.items()}
    encoded = {name: encode_sentences(tokenizer, sentences, settings.max_tokens) for name, sentences in splits.items()}
    for name, sentences in encoded.items():
        if not sentences:
            raise ValueError(f"split={name!r} of task={task!r} is empty; raise its sentence count in the settings")
    labels = label_vocabulary(s.tags for split in encoded.values() for s in split)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return TaggingData(task, labels, encoded["train"], encoded["validation"], encoded["test"], int(pad_id))


# --------------------------------------------------------------------------- the tagger

class TokenTagger(nn.Module):
    """A decoder body with a softmax token-classification head (App. A.2) on SR / unmasked token embeddings."""

    def __init__(self, body, num_labels: int, strategy: Strategy, policy: str = "packed"):
        super().__init__()
        self.body = body
        self.strategy = strategy
        self.policy = policy
        self.head = nn.Linear(int(body.config.hidden_size), num_labels)

    def forward(self, input_ids, padding_mask, labels=None, **forward_kwargs) -> dict:
        features, output = sr_features(self.body, input_ids, padding_mask, self.strategy, self.policy, **forward_kwargs)
        logits = self.head(features.to(self.head.weight.dtype))
        result = {"logits": logits, "output": output}
        if labels is not None:
            result["loss"] = nn.functional.cross_entropy(logits.flatten(0, 1), labels.to(logits.device).flatten(),
                                                         ignore_index=IGNORE_INDEX)
        return result


def _half_compute(body) -> None:
    """App. A.4: nf4 weights with fp16 computation."""
    for module in body.modules():
        if type(module).__name__ == "Linear4bit":
            module.compute_dtype = torch.float16


def build_tagger(model_name: str, num_labels: int, strategy: Strategy, settings: RepetitionSettings, *,
                 seed: int = 0, device=None) -> tuple[TokenTagger, object]:
    """The profile's decoder, cut at ``strategy.exit_layer``, with LoRA (r, α, dropout from ``settings``) on
    q, k, v, o of the kept layers and a fresh head seeded by ``seed``. QLoRA (nf4, fp16) on CUDA."""
    four_bit = bool(settings.qlora) and resolve_four_bit(True, torch.device(device) if device else None)
    model, tokenizer = models.load_model(model_name, attn_implementation="sdpa", load_in_4bit=four_bit, device=device,
                                         **({"dtype": "float16"} if four_bit else {}))
    body = model.get_decoder()
    if strategy.exit_layer is not None:
        truncate_layers(body, strategy.exit_layer)
    if four_bit:
        _half_compute(body)
    if settings.gradient_checkpointing and torch.cuda.is_available():
        body.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        body.enable_input_require_grads()
    lora = training.LoraSettings(r=settings.lora_r, alpha=settings.lora_alpha, dropout=settings.lora_dropout)
    body = training.add_lora(body, lora, four_bit=four_bit)
    torch.manual_seed(seed)
    tagger = TokenTagger(body, num_labels, strategy, settings.pad_policy)
    tagger.head.to(next(p for p in body.parameters()).device)
    return tagger, tokenizer


@torch.no_grad()
def predict_tags(tagger: TokenTagger, sentences: Sequence[EncodedSentence], labels: Sequence[str], pad_id: int,
                 batch_size: int = 16) -> list[list[str]]:
    """The argmax tag of each word, read at its first sub-token."""
    was_training = tagger.training
    tagger.eval()
    device = tagger.head.weight.device
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].input_ids))  # less padding
    predictions: list[list[str]] = [[] for _ in sentences]
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        chunk = [sentences[i] for i in chosen]
        batch = collate(chunk, labels, pad_id)
        logits = tagger(batch["input_ids"].to(device), batch["padding_mask"].to(device))["logits"]
        best = logits.argmax(-1).cpu()
        for row, (index, sentence) in enumerate(zip(chosen, chunk)):
            predictions[index] = [labels[int(best[row, position])] for position in sentence.word_starts]
    tagger.train(was_training)
    return predictions


def tagging_f1(tagger: TokenTagger, sentences: Sequence[EncodedSentence], labels: Sequence[str], pad_id: int,
               batch_size: int = 16) -> float:
    """seqeval micro F1 (strict IOB2) of the predicted tags against the gold ones."""
    predicted = predict_tags(tagger, sentences, labels, pad_id, batch_size)
    return metrics.seqeval_f1([list(s.tags) for s in sentences], predicted)


def _trainable_state(model) -> dict:
    return {name: tensor.detach().cpu().clone() for name, tensor in model.named_parameters() if tensor.requires_grad}


def _load_trainable_state(model, state: dict) -> None:
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, tensor in state.items():
            parameters[name].copy_(tensor)


@functools.lru_cache(maxsize=4)
def _epoch_order(seed: int, epoch: int, size: int) -> torch.Tensor:
    return torch.randperm(size, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))


RESULT_FILE = "result.json"
# The settings a trained tagger depends on (its data is fingerprinted separately); others never force a retrain.
TRAINING_FIELDS = ("steps", "batch_size", "grad_accum", "lr", "weight_decay", "lora_r", "lora_alpha", "lora_dropout",
                   "eval_every", "qlora", "gradient_checkpointing", "pad_policy")
BEST_FILE = "best.pt"


def _fingerprint(**parts) -> str:
    return store.fingerprint(parts, length=16)


def train_tagger(tagging: TaggingData, strategy: Strategy, settings: RepetitionSettings, *, model_name: str, seed: int,
                 run_dir, resume: bool = True, progress: bool = True) -> dict:
    """Fine-tune one tagger (§3.3) and score it: the best validation F1 over evaluations, and test F1 there.

    Batches walk through shuffled epochs of the training split as a pure function of (seed, step), so an
    interrupted run resumes exactly (``training.train``). A finished run with the same fingerprint is read
    back from ``run_dir/result.json`` instead of retrained.
    """
    run_dir = Path(run_dir)
    fingerprint = _fingerprint(strategy=dataclasses.asdict(strategy), seed=seed, model=model_name,
                               data=tagging.fingerprint(),
                               settings={name: getattr(settings, name) for name in TRAINING_FIELDS})
    result_path = run_dir / RESULT_FILE
    if resume and result_path.exists():
        cached = store.read_json(result_path, f"Delete {run_dir} to train this tagger again.")
        if cached.get("fingerprint") == fingerprint:
            return cached
    if run_dir.exists() and (not resume or not (run_dir / "fingerprint").exists()
                             or (run_dir / "fingerprint").read_text() != fingerprint):
        shutil.rmtree(run_dir)  # another configuration ran here: start clean
    run_dir.mkdir(parents=True, exist_ok=True)
    store.write_text(run_dir / "fingerprint", fingerprint)

    tagger, _ = build_tagger(model_name, len(tagging.labels), strategy, settings, seed=seed)
    device = tagger.head.weight.device
    size = len(tagging.train)

    def batch_for(step: int, micro: int) -> dict:
        started_batches.append(step)
        first = (step * settings.grad_accum + micro) * settings.batch_size
        chosen = []
        for position in range(first, first + settings.batch_size):
            epoch, offset = divmod(position, size)
            chosen.append(tagging.train[int(_epoch_order(seed, epoch, size)[offset])])
        return {name: tensor.to(device) for name, tensor in collate(chosen, tagging.labels, tagging.pad_id).items()}

    best_path = run_dir / BEST_FILE
    fix = f"Delete {run_dir} to train this tagger again."
    started_batches = []

    def evaluate(model) -> dict:
        if not started_batches:  # step 0: the head is untrained, skip the cost
            return {}
        score = tagging_f1(model, tagging.validation, tagging.labels, tagging.pad_id, settings.batch_size * 2)
        best = store.load_torch(best_path, fix)["f1"] if best_path.exists() else -1.0
        if score > best:
            store.save_torch(best_path, {"f1": score, "state": _trainable_state(model)})
        return {"validation_f1": score}

    config = training.TrainConfig(steps=settings.steps, batch_size=settings.batch_size, grad_accum=settings.grad_accum,
                                  lr=settings.lr, weight_decay=settings.weight_decay, eval_every=settings.eval_every,
                                  checkpoint_every=settings.checkpoint_every, seed=seed)
    started = time.perf_counter()
    records = training.train(tagger, batch_for=batch_for, loss_fn=lambda model, batch: model(**batch), config=config,
                             run_dir=run_dir, evaluate=evaluate, resume=resume, progress=progress)
    seconds = time.perf_counter() - started
    best = store.load_torch(best_path, fix)
    _load_trainable_state(tagger, best["state"])
    evaluations = [(r["step"], r["validation_f1"]) for r in records if "validation_f1" in r]
    best_step = max(evaluations, key=lambda item: item[1])[0] if evaluations else settings.steps
    result = {"task": tagging.task, "strategy": strategy.label, "kind": strategy.kind, "r": strategy.r,
              "exit_layer": strategy.exit_layer, "seed": seed, "validation_f1": float(best["f1"]),
              "test_f1": tagging_f1(tagger, tagging.test, tagging.labels, tagging.pad_id, settings.batch_size * 2),
              "best_step": best_step, "steps": settings.steps, "train_seconds": seconds, "model": model_name,
              "labels": list(tagging.labels), "fingerprint": fingerprint, "run_dir": str(run_dir)}
    store.write_json(result_path, result, indent=1)
    del tagger
    gc.collect()
    return result


def _exit_or_none(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def load_trained_tagger(result: dict, settings: RepetitionSettings) -> TokenTagger:
    """Rebuild a tagger from its run directory (best validation weights), e.g. for the widget."""
    strategy = Strategy(result["kind"], int(result["r"]), _exit_or_none(result["exit_layer"]))
    tagger, _ = build_tagger(result["model"], len(result["labels"]), strategy, settings, seed=result["seed"])
    _load_trainable_state(tagger, store.load_torch(Path(result["run_dir"]) / BEST_FILE,
                                                   f"Delete {result['run_dir']} to train this tagger again.")["state"])
    return tagger.eval()


def load_taggers(results, task: str, seed: int, settings: RepetitionSettings) -> dict[int, TokenTagger]:
    """The trained full-depth SR taggers of one task and seed, keyed by r (for the widget)."""
    rows = results[(results.task == task) & (results.kind == "sr") & (results.seed == seed)]
    rows = rows[[_exit_or_none(value) is None for value in rows.exit_layer]]
    if rows.empty:
        raise ValueError(f"task={task!r}, seed={seed!r}: no full-depth SR runs in the results")
    return {int(row["r"]): load_trained_tagger(row.to_dict(), settings) for _, row in rows.iterrows()}


def main_strategies(settings: RepetitionSettings) -> list[Strategy]:
    """SR for each r of the settings, then the unmasking baselines (§3.4)."""
    return [Strategy("sr", r) for r in settings.repeats] + [Strategy(kind) for kind in settings.baselines]


def exit_strategies(settings: RepetitionSettings, num_layers: int) -> list[Strategy]:
    """§3.5: SR for each early-exit r at each scaled exit layer below the full depth."""
    return [Strategy("sr", r, layer) for r in settings.exit_repeats for layer in exit_layers(num_layers)
            if layer < num_layers]


def run_experiments(tagging_by_task: dict[str, TaggingData], strategies: Sequence[Strategy], seeds: Sequence[int],
                    settings: RepetitionSettings, *, model_name: str, run_prefix: str, resume: bool = True,
                    progress: bool = True):
    """Train and score every (task, strategy, seed); one row each. Runs live in ``runs/<run_prefix>_...``."""
    import pandas as pd

    jobs = [(task, strategy, seed) for task in tagging_by_task for strategy in strategies for seed in seeds]
    rows = []
    for task, strategy, seed in tqdm(jobs, desc="taggers", disable=not progress):
        run_dir = paths.runs_dir() / f"{run_prefix}_{task}_{strategy.slug}_s{seed}"
        rows.append(train_tagger(tagging_by_task[task], strategy, settings, model_name=model_name, seed=seed,
                                 run_dir=run_dir, resume=resume, progress=progress))
    return pd.DataFrame(rows)


def summarize(*results, split: str = "test"):
    """Mean and 95% CI half-width of F1 (x100, as the paper reports) over seeds, per task and strategy.

    ``results`` are one or more tables from :func:`run_experiments`.
    """
    import pandas as pd

    column = f"{split}_f1"
    rows = []
    keys = ["task", "kind", "r", "exit_layer", "strategy"]
    frame = pd.concat(results, ignore_index=True)
    frame["exit_layer"] = frame["exit_layer"].astype("object").where(frame["exit_layer"].notna(), None)
    for key, group in frame.groupby(keys, dropna=False, sort=False):
        mean, half = metrics.mean_ci95([100 * value for value in group[column]])
        rows.append(dict(zip(keys, key), f1=mean, ci95=half, seeds=len(group)))
    return pd.DataFrame(rows)


def best_sr_r(summary, task: str) -> int:
    """The r with the highest mean F1 among full-depth SR runs (how Table 1 picks its SR row)."""
    sr = summary[(summary.task == task) & (summary.kind == "sr") & summary.exit_layer.isna()]
    if sr.empty:
        raise ValueError(f"task={task!r} has no full-depth SR rows in the summary")
    return int(sr.loc[sr.f1.idxmax(), "r"])


PAPER_TABLE1_COLUMN = "paper F1 (CoNLL03, 7-decoder mean)"


def table1(summary):
    """Table 1 at our scale: SR at its best r, middle and full unmasking, ours (mean ± CI) beside the paper.

    The paper column is Table 1's CoNLL03 column averaged over its seven decoders (:func:`paper_table1`).
    """
    import pandas as pd

    paper = paper_table1()
    rows = []
    for task in summary.task.unique():
        full_depth = summary[(summary.task == task) & summary.exit_layer.isna()]
        best = best_sr_r(summary, task)
        for kind, label in (("sr", f"SR (r={best})"), ("middle", "middle unmasking"), ("full", "full unmasking")):
            picked = full_depth[(full_depth.kind == kind) & ((full_depth.r == best) if kind == "sr" else True)]
            if picked.empty:
                continue
            row = picked.iloc[0]
            rows.append({"task": task, "method": label, "ours F1": metrics.format_mean_ci(row.f1, row.ci95),
                         "ours mean": row.f1, PAPER_TABLE1_COLUMN: paper[kind]})
    return pd.DataFrame(rows)


def describe_repetitions(summary) -> str:
    """§4.2's claims checked on our numbers: r = 1 beats r = 0, the largest jump is 0 -> 1, more r does not hurt."""
    paper = paper_f1_by_r()
    lines = [f"Paper (Table 5, CoNLL03, mean of 7 decoders): r=0 {paper[0]:.1f}, r=1 {paper[1]:.1f}, r=2 {paper[2]:.1f}, "
             f"r=4 {paper[4]:.1f}, r=8 {paper[8]:.1f}; middle {paper['middle']:.1f}, full {paper['full']:.1f}."]
    for task in summary.task.unique():
        sr = summary[(summary.task == task) & (summary.kind == "sr") & summary.exit_layer.isna()].sort_values("r")
        values = dict(zip(sr.r, sr.f1))
        text = ", ".join(f"r={r} {f1:.1f}" for r, f1 in values.items())
        line = f"Ours, {task}: {text}."
        if 0 in values and 1 in values:
            jumps = [values[b] - values[a] for a, b in zip(list(values), list(values)[1:])]
            line += (f" r=1 {'beats' if values[1] > values[0] else 'does not beat'} r=0 by {values[1] - values[0]:+.1f}; "
                     f"the largest step is {'0 -> 1' if jumps and max(jumps) == jumps[0] else 'elsewhere'}; "
                     f"best r = {max(values, key=values.get)}.")
        for kind in ("middle", "full"):
            base = summary[(summary.task == task) & (summary.kind == kind)]
            if not base.empty and values:
                line += f" {kind} unmasking {base.f1.iloc[0]:.1f} ({max(values.values()) - base.f1.iloc[0]:+.1f} for the best SR)."
        lines.append(line)
    return "\n".join(lines)


def describe_early_exit(summary, num_layers: int) -> str:
    """§4.4's claims on our numbers: how close each exit layer comes to the full-depth F1 of the same r."""
    lines = []
    exits = summary[summary.exit_layer.notna()]
    for (task, r), group in exits.groupby(["task", "r"]):
        full = summary[(summary.task == task) & (summary.kind == "sr") & (summary.r == r) & summary.exit_layer.isna()]
        if full.empty:
            continue
        reference = full.f1.iloc[0]
        parts = ", ".join(f"exit@{int(row.exit_layer)} {row.f1:.1f} ({row.f1 - reference:+.1f})"
                          for row in group.sort_values("exit_layer").itertuples())
        lines.append(f"{task}, r={r}: full depth ({num_layers} layers) {reference:.1f}; {parts}.")
    lines.append("Paper (§4.4, Mistral-7B): exit@9 falls short of the last layer, exit@14 can match it, "
                 "exit@19 and exit@24 are the best and improve with r.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- §4.5 Table 2: speed

@torch.inference_mode()
def measure_speedups(body, input_ids: torch.Tensor, padding_mask: torch.Tensor, *, repeats: Sequence[int],
                     exits: Sequence[int | None], batch_size: int, trials: int = 3, policy: str = "packed",
                     progress: bool = True):
    """Table 2: inference time of SR features for every r x exit layer, as speedups over (r = 0, all layers).

    All configurations run in the same process, interleaved round by round; each time is the median of
    ``trials`` passes over the sentences. Returns ``(speedups, seconds)``: rows exit layer (None = all), columns r.
    """
    import pandas as pd

    repeats = [M.check_repeats(r) for r in repeats]
    depth = num_layers_of(body)
    exits = [None if layer is None else check_exit_layer(layer, depth) for layer in exits]
    for r in repeats:
        check_fits_batch(body, input_ids.shape[1], r)
    configs = [(layer, r) for layer in exits for r in repeats]
    if (None, 0) not in configs:
        configs.append((None, 0))
    device = next(body.parameters()).device
    batches = [(input_ids[i:i + batch_size].to(device), padding_mask[i:i + batch_size].to(device))
               for i in range(0, len(input_ids), batch_size)]

    def one_pass(layer, r):
        def run(_):
            with early_exit(body, layer):
                for ids, mask in batches:
                    sr_features(body, ids, mask, Strategy("sr", r), policy)
        return run

    synchronize = torch.cuda.synchronize if device.type == "cuda" else None
    milliseconds = metrics.interleaved_timings({config: one_pass(*config) for config in configs}, [None], rounds=trials,
                                               best=False, synchronize=synchronize, progress=progress)
    seconds = {config: elapsed / 1000 for config, elapsed in milliseconds.items()}
    base = seconds[(None, 0)]
    index = [layer if layer is not None else depth for layer in exits]
    speedups = pd.DataFrame([[base / seconds[(layer, r)] for r in repeats] for layer in exits],
                            index=pd.Index(index, name="exit layer"), columns=pd.Index(repeats, name="r"))
    raw = pd.DataFrame([[seconds[(layer, r)] for r in repeats] for layer in exits],
                       index=pd.Index(index, name="exit layer"), columns=pd.Index(repeats, name="r"))
    return speedups, raw


def paper_speedups_table():
    import pandas as pd

    return pd.DataFrame(PAPER_SPEEDUPS).T.rename_axis("exit layer").rename_axis("r", axis=1)


def speed_inputs(sentences: Sequence[EncodedSentence], count: int, pad_id: int):
    """The first ``count`` sentences as one right-padded batch (ids, padding mask) for :func:`measure_speedups`."""
    if not sentences:
        raise ValueError("sentences is empty; Table 2 needs sentences to time")
    chosen = list(sentences[:count])
    batch = collate(chosen, ("O",), pad_id)
    return batch["input_ids"], batch["padding_mask"]


def describe_speedups(ours, num_layers: int) -> str:
    """Table 2's shape on our numbers: where SR with early exit matches the base model's time."""
    paper = paper_speedups_table()
    at_par = [(layer, r) for layer in ours.index for r in ours.columns if r > 0 and layer < num_layers and ours.loc[layer, r] >= 0.95]
    deepest = max(ours.index[ours.index < num_layers], default=None)
    text = (f"Ours ({num_layers} layers): r=1 at exit@{ours.index[0]} runs {ours.loc[ours.index[0], 1]:.2f}x the base speed"
            if 1 in ours.columns else "Ours:")
    if deepest is not None and 2 in ours.columns:
        text += f"; r=2 at exit@{deepest} runs {ours.loc[deepest, 2]:.2f}x (paper, exit@24 of 32: {paper.loc[24, 2]:.2f}x)"
    if num_layers in ours.index and max(ours.columns) > 0:
        r_max = max(ours.columns)
        text += f"; r={r_max} at full depth runs {ours.loc[num_layers, r_max]:.2f}x"
    text += f". Configurations with SR at or above 0.95x the base speed: {at_par or 'none'}."
    return text


# --------------------------------------------------------------------------- §2 optional: closeness to unmasked

@torch.no_grad()
def unmasked_similarity(model, sentences_ids: Sequence[torch.Tensor], repeats: Sequence[int],
                        progress: bool = True) -> dict[int, torch.Tensor]:
    """Per layer, mean cosine similarity between SR's last-copy hidden states and the single copy's hidden
    states with the causal mask removed (the fully unmasked model), untrained: does SR drift towards it?"""
    body = model.get_decoder() if hasattr(model, "get_decoder") else model
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


def block_share_summary(measured: dict[int, torch.Tensor]):
    """Fig. 1 in numbers: per r, the mean over layers of attention mass in full and in diagonal blocks, and (k-1)/(k+1)."""
    import pandas as pd

    rows = []
    for r, shares in sorted(measured.items()):
        full = float(shares.mean())
        rows.append({"r": r, "full blocks (measured)": full, "diagonal blocks (measured)": 1 - full,
                     "full blocks (analytic share of blocks)": M.bidirectional_block_share(r),
                     "lowest layer": float(shares.min()), "highest layer": float(shares.max())})
    return pd.DataFrame(rows).set_index("r")


# --------------------------------------------------------------------------- the widget's data

@torch.no_grad()
def explain_sentence(tagger: TokenTagger, tokenizer, labels: Sequence[str], words: Sequence[str],
                     max_tokens: int = 64) -> dict:
    """Attention weights of the tagger on the repeated sentence, its tokens, and the predicted tag per word."""
    ids, starts = encode_words(tokenizer, words, max_tokens)
    input_ids = torch.tensor([ids], device=tagger.head.weight.device)
    body = tagger.body
    previous = attention.attention_implementation(body)
    body.set_attn_implementation("eager")
    try:
        result = tagger(input_ids, torch.ones_like(input_ids), output_attentions=True)
    finally:
        body.set_attn_implementation(previous)
    best = result["logits"][0].argmax(-1).cpu()
    weights = torch.stack([w[0].float().cpu() for w in result["output"].attentions])
    return {"attention": weights, "tokens": ids, "word_starts": starts, "words": list(words[:len(starts)]),
            "predicted": [labels[int(best[s])] for s in starts], "n": len(ids), "r": tagger.strategy.r}


# --------------------------------------------------------------------------- the notebook's sentences and summary

def describe_block_shares(block_summary, similarity: dict[int, torch.Tensor] | None = None) -> str:
    """§2 on our numbers: the measured share of attention mass in full blocks against (k-1)/(k+1), and (optional)
    the last layer's cosine between SR's last copy and the fully unmasked single copy."""
    parts = [f"r={r}: {row['full blocks (measured)']:.2f} measured vs {row['full blocks (analytic share of blocks)']:.2f} analytic "
             f"(layers {row['lowest layer']:.2f}-{row['highest layer']:.2f})" for r, row in block_summary.iterrows() if r > 0]
    rising = all(a < b for a, b in zip(block_summary["full blocks (measured)"], block_summary["full blocks (measured)"][1:]))
    return ("Attention mass in full (bidirectional) blocks, mean over layers: " + "; ".join(parts) + ". "
            + ("It rises with r, as the block count predicts." if rising else "It does not rise monotonically with r.")
            + ("" if not similarity else " Untrained, last-layer cosine to the fully unmasked model: "
               + ", ".join(f"r={r} {float(values[-1]):.2f}" for r, values in sorted(similarity.items())) + "."))


def summary_table(block_summary, summary, speedups, num_layers: int):
    """Every number notebook 04 reproduces, ours beside the paper's (Fig. 1, Fig. 2, Table 1, Fig. 5, Table 2)."""
    import pandas as pd

    rows = []
    for r, row in block_summary.iterrows():
        rows.append(("Fig. 1 / §2", f"r={r}: share in full blocks", f"{row['full blocks (analytic share of blocks)']:.2f} of blocks",
                     f"{row['full blocks (measured)']:.2f} of attention mass"))
    paper = paper_f1_by_r()
    full_depth = summary[summary.exit_layer.isna()]
    for row in full_depth[full_depth.kind == "sr"].itertuples():
        reference = f"{paper[row.r]:.1f} (CoNLL03, 7-decoder mean)" if row.r in paper else "-"
        rows.append(("Fig. 2", f"{row.task}, SR r={row.r}", reference, f"{metrics.format_mean_ci(row.f1, row.ci95)} ({row.seeds} seeds)"))
    for _, row in table1(summary).iterrows():
        rows.append(("Table 1", f"{row['task']}, {row['method']}", f"{row[PAPER_TABLE1_COLUMN]:.1f} (CoNLL03, 7-decoder mean)",
                     row["ours F1"]))
    for row in summary[summary.exit_layer.notna()].itertuples():
        full = full_depth[(full_depth.task == row.task) & (full_depth.kind == "sr") & (full_depth.r == row.r)]
        reference = f"{full.f1.iloc[0]:.1f} at all {num_layers} layers" if not full.empty else "-"
        rows.append(("Fig. 5", f"{row.task}, r={row.r}, exit@{int(row.exit_layer)}",
                     "figure only: exit@19/24 match the last layer, exit@9 falls short", f"{metrics.format_mean_ci(row.f1, row.ci95)} (vs {reference})"))
    for paper_layer, by_r in PAPER_SPEEDUPS.items():
        ours_layer = scaled_exit_layer(paper_layer, num_layers)
        for r, value in by_r.items():
            if ours_layer in speedups.index and r in speedups.columns:
                rows.append(("Table 2", f"exit@{paper_layer} of 32 (ours @{ours_layer} of {num_layers}), r={r}",
                             f"{value:.2f}x", f"{speedups.loc[ours_layer, r]:.2f}x"))
    return pd.DataFrame(rows, columns=["paper item", "quantity", "paper", "ours"])
