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


SHARE_VIEWS = ("all queries", "all queries, sink excluded", "last copy", "last copy, sink excluded")


def block_mass_shares(attentions: Sequence[torch.Tensor], n: int, r: int, *, exclude_sink: bool = False,
                      last_copy: bool = False) -> torch.Tensor:
    """Per layer, the share of attention mass on full blocks among all non-zero blocks.

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


@torch.no_grad()
def measure_block_share_views(model, sentences_ids: Sequence[torch.Tensor], repeats: Sequence[int],
                              progress: bool = True) -> dict[str, dict[int, torch.Tensor]]:
    """For each of :data:`SHARE_VIEWS` and each r: a ``(sentences, layers)`` tensor of full-block mass shares.

    One eager forward pass per (r, sentence) serves all four views. The model must use eager attention
    (weights are read from ``output_attentions``); the causal mask is the model's own, since SR changes the
    input, not the mask.
    """
    implementation = attention.attention_implementation(model)
    if implementation != "eager":
        raise ValueError(f"model uses attn_implementation={implementation!r}; attention weights need 'eager'")
    if not len(sentences_ids):
        raise ValueError("sentences_ids is empty; the block shares need at least one sentence")
    options = {"all queries": {}, "all queries, sink excluded": {"exclude_sink": True},
               "last copy": {"last_copy": True}, "last copy, sink excluded": {"exclude_sink": True, "last_copy": True}}
    views: dict[str, dict[int, list]] = {view: {r: [] for r in repeats} for view in SHARE_VIEWS}
    for r, ids in tqdm([(r, ids) for r in repeats for ids in sentences_ids], desc="block shares", disable=not progress):
        ids = ids.reshape(1, -1)
        check_fits(model, ids.shape[1], r)
        output = model(input_ids=repeat_ids(ids, r).to(model_device(model)), output_attentions=True, use_cache=False)
        for view in SHARE_VIEWS:
            views[view][r].append(block_mass_shares(output.attentions, ids.shape[1], r, **options[view]).cpu())
    return {view: {r: torch.stack(values) for r, values in by_r.items()} for view, by_r in views.items()}


def measure_block_shares(model, sentences_ids: Sequence[torch.Tensor], repeats: Sequence[int],
                         progress: bool = True) -> dict[int, torch.Tensor]:
    """For each r, the per-layer share of attention mass in full blocks (all queries, sink included), averaged
    over sentences; :func:`measure_block_share_views` gives the sink-excluded and last-copy views too."""
    views = measure_block_share_views(model, sentences_ids, repeats, progress)
    return {r: values.mean(0) for r, values in views["all queries"].items()}


def block_share_views_table(views: dict[str, dict[int, torch.Tensor]], resamples: int = 2000):
    """Fig. 1 in numbers, one row per r > 0: (k-1)/(k+1) beside each view's share (mean over layers and
    sentences) with its 95% bootstrap interval over sentences."""
    import pandas as pd

    rows = []
    for r in sorted(next(iter(views.values()))):
        if r == 0:
            continue
        row = {"r": r, "analytic (k-1)/(k+1) of blocks": M.bidirectional_block_share(r)}
        for view in SHARE_VIEWS:
            per_sentence = views[view][r].mean(-1).tolist()
            value, low, high = metrics.bootstrap_interval(per_sentence, resamples=resamples)
            row[view] = value
            row[f"{view} 95% interval"] = (low, high)
        rows.append(row)
    return pd.DataFrame(rows).set_index("r")


def describe_block_share_views(table) -> str:
    """Which measured share agrees with (k-1)/(k+1): the formula's value inside a view's interval, per r."""
    lines = []
    for r, row in table.iterrows():
        formula = row["analytic (k-1)/(k+1) of blocks"]
        parts = []
        for view in SHARE_VIEWS:
            low, high = row[f"{view} 95% interval"]
            where = "agrees" if low <= formula <= high else ("above" if low > formula else "below")
            parts.append(f"{view} {row[view]:.2f} [{low:.2f}, {high:.2f}] ({where})")
        lines.append(f"r={r}: formula {formula:.2f}; " + "; ".join(parts) + ".")
    return "\n".join(lines)


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
LR_SCHEDULES = ("linear", "constant")
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
    classifier_dropout: float = 0.1  # the authors' head: nn.Dropout(0.1) before the linear layer
    lr_schedule: str = "linear"  # HF Trainer's default in the authors' code: linear decay to 0, no warm-up
    eval_every: int = 50
    checkpoint_every: int = 0
    qlora: bool = False  # nf4 with fp16 compute; only where CUDA and bitsandbytes are present
    gradient_checkpointing: bool = False
    pad_policy: str = "packed"
    # §3.5 early exit: fine-tune up to one of these exit layers (scaled from 9/14/19/24 of 32 layers).
    exit_repeats: tuple[int, ...] = (1, 2, 4, 8)
    exit_tasks: tuple[str, ...] = ("ner",)
    exit_seeds: tuple[int, ...] = PAPER_SEEDS
    exit_at: tuple[int, ...] = PAPER_EXIT_LAYERS  # the paper's exit layers (of 32) to run, scaled to the model
    # Training runs in parallel processes of `threads` torch threads each (results do not depend on it).
    workers: int = 1
    threads: int | None = None  # None: torch's default
    # The frozen-feature probe (Fig. 5's layer curve without fine-tuning): one no-grad pass per r, then a
    # logistic regression per layer on standardised first-sub-token features.
    probe_repeats: tuple[int, ...] = (0, 1)
    probe_train_sentences: int | None = None  # None: the task's whole training split
    probe_max_iter: int = 300
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
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule={self.lr_schedule!r} is not one of {LR_SCHEDULES}")
        if not 0 <= self.classifier_dropout < 1:
            raise ValueError(f"classifier_dropout={self.classifier_dropout!r} must lie in [0, 1)")
        for layer in self.exit_at:
            whole_number(layer, "exit_at", 2, f"a paper exit layer of {PAPER_DEPTH} (2..{PAPER_DEPTH})")
        whole_number(self.workers, "workers", 1)
        for r in self.probe_repeats:
            M.check_repeats(r)


_SMOKE = RepetitionSettings(
    block_repeats=(0, 1, 2), block_sentences=1, block_max_tokens=6,
    tasks=("ner", "chunks"), train_sentences=16, validation_sentences=4, test_sentences=6, max_words=12, max_tokens=32,
    repeats=(0, 1, 2), seeds=(0,), steps=2, batch_size=2, grad_accum=1, lr=2e-3, lora_r=4, lora_alpha=4, eval_every=1,
    exit_repeats=(1,), exit_tasks=("chunks",), exit_seeds=(0,),
    speed_repeats=(0, 1, 2), speed_sentences=4, speed_batch_size=2, speed_trials=1,
)
# cpu: sized to <= 14 min on an idle 2-core machine. Silver noun chunks only (silver NER has too few test entities
# to separate the strategies); r in {0, 1}, middle and full unmasking, and r = 1 at exit@18 (17 of 30 layers), two
# seeds each, 100 steps of 8 sentences of 5-12 words at lr 1e-3 (5x the paper's, for so few steps) decayed linearly;
# validation F1 at steps 25/50/75/100 picks each run's weights (the test split never picks). Two training processes
# of one torch thread each. r = 2, 4, 8 at full depth and the other exits are left to the gpu profile; the
# frozen-feature probe covers every layer for r = 0 and 1.
_CPU = RepetitionSettings(
    block_repeats=(0, 1, 2, 4, 8), block_sentences=16, block_max_tokens=12,
    tasks=("chunks",), train_sentences=240, validation_sentences=48, test_sentences=120, max_words=12, max_tokens=48,
    repeats=(0, 1), seeds=(5, 29), steps=100, batch_size=8, grad_accum=1, lr=1e-3, eval_every=25,
    exit_repeats=(1,), exit_tasks=("chunks",), exit_seeds=(5, 29), exit_at=(19,), workers=2, threads=1,
    speed_repeats=(0, 1, 2, 4, 8), speed_sentences=4, speed_batch_size=4, speed_trials=3,
)
_GPU = RepetitionSettings(
    block_sentences=16, block_max_tokens=24, dataset="conll2003", tasks=("ner",),
    train_sentences=4000, validation_sentences=500, test_sentences=None, max_words=1000,
    seeds=(5, 29, 42), steps=400, batch_size=8, grad_accum=4, eval_every=100, checkpoint_every=100, qlora=True,
    gradient_checkpointing=True, exit_seeds=(5,), speed_sentences=256, speed_batch_size=32, speed_trials=5,
    probe_train_sentences=1000,
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
    speed_batch_size=32, speed_trials=5, probe_train_sentences=500,
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
    if isinstance(exit_layer, bool) or int(exit_layer) != exit_layer or not 2 <= exit_layer <= num_layers + 1:
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
    """Early exit (§3.5): keep ``layers[:exit_layer - 1]`` for good, so the dropped layers cost nothing."""
    owner, attribute = _layers_owner(body)
    layers = getattr(owner, attribute)
    exit_layer = check_exit_layer(exit_layer, len(layers))
    _set_depth(body, owner, attribute, nn.ModuleList(list(layers)[:exit_layer - 1]))
    return body


@contextlib.contextmanager
def early_exit(body, exit_layer: int | None):
    """Run ``body`` on ``layers[:exit_layer - 1]`` inside the block (for timing); restores every layer afterwards."""
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

    def __init__(self, body, num_labels: int, strategy: Strategy, policy: str = "packed", dropout: float = 0.1):
        super().__init__()
        self.body = body
        self.strategy = strategy
        self.policy = policy
        self.dropout = nn.Dropout(dropout)  # on the head's input, as the authors' token-classification head
        self.head = nn.Linear(int(body.config.hidden_size), num_labels)

    def forward(self, input_ids, padding_mask, labels=None, **forward_kwargs) -> dict:
        features, output = sr_features(self.body, input_ids, padding_mask, self.strategy, self.policy, **forward_kwargs)
        logits = self.head(self.dropout(features.to(self.head.weight.dtype)))
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
    q, k, v, o of the kept layers and a fresh head, both drawn from ``seed`` (two builds with one seed are
    identical). QLoRA (nf4, fp16) on CUDA."""
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
    torch.manual_seed(seed)  # before add_lora: LoRA's A matrices are drawn here
    body = training.add_lora(body, lora, four_bit=four_bit)
    tagger = TokenTagger(body, num_labels, strategy, settings.pad_policy, settings.classifier_dropout)
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
                   "classifier_dropout", "lr_schedule", "eval_every", "qlora", "gradient_checkpointing", "pad_policy")
BEST_FILE = "best.pt"


def _fingerprint(**parts) -> str:
    return store.fingerprint(parts, length=16)


def _run_fingerprint(tagging: TaggingData, strategy: Strategy, settings: RepetitionSettings, model_name: str,
                     seed: int) -> str:
    return _fingerprint(strategy=dataclasses.asdict(strategy), seed=seed, model=model_name, data=tagging.fingerprint(),
                        settings={name: getattr(settings, name) for name in TRAINING_FIELDS})


def train_tagger(tagging: TaggingData, strategy: Strategy, settings: RepetitionSettings, *, model_name: str, seed: int,
                 run_dir, resume: bool = True, progress: bool = True) -> dict:
    """Fine-tune one tagger (§3.3) and score it: the best validation F1 over evaluations, and test F1 there.

    Batches walk through shuffled epochs of the training split as a pure function of (seed, step), so an
    interrupted run resumes exactly (``training.train``). A finished run with the same fingerprint is read
    back from ``run_dir/result.json`` instead of retrained.
    """
    run_dir = Path(run_dir)
    fingerprint = _run_fingerprint(tagging, strategy, settings, model_name, seed)
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
    schedule = training.linear_decay(settings.steps) if settings.lr_schedule == "linear" else None
    records = training.train(tagger, batch_for=batch_for, loss_fn=lambda model, batch: model(**batch), config=config,
                             run_dir=run_dir, evaluate=evaluate, resume=resume, progress=progress, lr_lambda=schedule)
    seconds = time.perf_counter() - started
    best = store.load_torch(best_path, fix)
    _load_trainable_state(tagger, best["state"])
    evaluations = [(r["step"], r["validation_f1"]) for r in records if "validation_f1" in r]
    best_step = max(evaluations, key=lambda item: item[1])[0] if evaluations else settings.steps
    test_predictions = predict_tags(tagger, tagging.test, tagging.labels, tagging.pad_id, settings.batch_size * 2)
    result = {"task": tagging.task, "strategy": strategy.label, "kind": strategy.kind, "r": strategy.r,
              "exit_layer": strategy.exit_layer, "seed": seed, "validation_f1": float(best["f1"]),
              "test_f1": metrics.seqeval_f1([list(s.tags) for s in tagging.test], test_predictions),
              "test_predictions": test_predictions, "evaluations": [list(item) for item in evaluations], "best_step": best_step, "steps": settings.steps, "train_seconds": seconds, "model": model_name,
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
    """§3.5: SR for each early-exit r at each of ``settings.exit_at`` (paper layers of 32) scaled to the model,
    below the full depth."""
    layers = sorted({scaled_exit_layer(layer, num_layers) for layer in settings.exit_at})
    return [Strategy("sr", r, layer) for r in settings.exit_repeats for layer in layers if layer < num_layers]


def _train_job(job: tuple) -> dict:
    """One (tagging, strategy, settings, ...) job in a worker process with ``threads`` torch threads."""
    tagging, strategy, settings, model_name, seed, run_dir, resume = job
    if settings.threads:
        torch.set_num_threads(settings.threads)
    return train_tagger(tagging, strategy, settings, model_name=model_name, seed=seed, run_dir=run_dir,
                        resume=resume, progress=False)


def _job_cost(strategy: Strategy) -> float:
    """Relative training cost: tokens per row (k copies) times the layers run (full depth counted as the paper's
    32), for longest-first scheduling."""
    return (strategy.r + 1) * (strategy.exit_layer - 1 if strategy.exit_layer else PAPER_DEPTH)


def run_experiments(tagging_by_task: dict[str, TaggingData], strategies: Sequence[Strategy], seeds: Sequence[int],
                    settings: RepetitionSettings, *, model_name: str, run_prefix: str, resume: bool = True,
                    progress: bool = True):
    """Train and score every (task, strategy, seed); one row each. Runs live in ``runs/<run_prefix>_...``.

    With ``settings.workers`` > 1 the runs that are not cached train in that many processes (spawned, each
    with ``settings.threads`` torch threads), longest first; every run is a pure function of its seed, so
    the results are the same as in one process.
    """
    import concurrent.futures
    import multiprocessing

    import pandas as pd

    jobs = [(tagging_by_task[task], strategy, settings, model_name, seed,
             paths.runs_dir() / f"{run_prefix}_{task}_{strategy.slug}_s{seed}", resume)
            for task in tagging_by_task for strategy in strategies for seed in seeds]
    results: dict[int, dict] = {}
    pending = []
    for index, job in enumerate(jobs):
        cached = _cached_result(*job)
        if cached is not None:
            results[index] = cached
        else:
            pending.append(index)
    pending.sort(key=lambda index: -_job_cost(jobs[index][1]))
    bar = tqdm(total=len(jobs), initial=len(results), desc="taggers", disable=not progress)
    if settings.workers > 1 and len(pending) > 1:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(min(settings.workers, len(pending)), mp_context=context) as pool:
            futures = {pool.submit(_train_job, jobs[index]): index for index in pending}
            for future in concurrent.futures.as_completed(futures):
                results[futures[future]] = future.result()
                bar.update()
    else:
        previous = torch.get_num_threads()
        try:
            for index in pending:
                results[index] = _train_job(jobs[index])
                bar.update()
        finally:
            torch.set_num_threads(previous)
    bar.close()
    return pd.DataFrame([results[index] for index in range(len(jobs))])


def _cached_result(tagging, strategy, settings, model_name, seed, run_dir, resume) -> dict | None:
    """A finished run's result when its fingerprint matches (what :func:`train_tagger` would read back)."""
    path = Path(run_dir) / RESULT_FILE
    if not resume or not path.exists():
        return None
    cached = store.read_json(path, f"Delete {Path(run_dir)} to train this tagger again.")
    return cached if cached.get("fingerprint") == _run_fingerprint(tagging, strategy, settings, model_name, seed) else None


def summarize(*results, split: str = "test"):
    """Mean and 95% CI half-width of F1 (x100, as the paper reports) over seeds, per task and strategy, and the
    mean validation F1 (what :func:`best_sr_r` selects on). ``ci95`` is NaN for a single seed (print "n/a").

    ``results`` are one or more tables from :func:`run_experiments`.
    """
    import pandas as pd

    column = f"{split}_f1"
    rows = []
    keys = ["task", "kind", "r", "exit_layer", "strategy"]
    frame = pd.concat(results, ignore_index=True)
    frame["exit_layer"] = frame["exit_layer"].astype("object").where(frame["exit_layer"].notna(), None)
    for key, group in frame.groupby(keys, dropna=False, sort=False):
        mean, low, high = metrics.seed_interval([100 * value for value in group[column]])
        rows.append(dict(zip(keys, key), f1=mean, ci95=math.nan if low is None else high - mean, seeds=len(group),
                         validation_f1=100 * float(np.mean(group["validation_f1"]))))
    return pd.DataFrame(rows)


def f1_text(f1: float, ci95: float, seeds: int) -> str:
    """``"80.5 ± 2.1 (2 seeds)"``, or ``"80.5 ± n/a (1 seed)"``: a single seed has no interval."""
    spread = "n/a" if seeds < 2 or not math.isfinite(ci95) else f"{ci95:.1f}"
    return f"{f1:.1f} ± {spread} ({seeds} seed{'s' if seeds != 1 else ''})"


def best_sr_r(summary, task: str) -> int:
    """The r with the highest mean **validation** F1 among full-depth SR runs (how Table 1 picks its SR row;
    the test split never chooses)."""
    sr = summary[(summary.task == task) & (summary.kind == "sr") & summary.exit_layer.isna()]
    if sr.empty:
        raise ValueError(f"task={task!r} has no full-depth SR rows in the summary")
    return int(sr.loc[sr.validation_f1.idxmax(), "r"])


PAPER_TABLE1_COLUMN = "paper F1 (CoNLL03, 7-decoder mean)"


def table1(summary):
    """Table 1 at our scale: SR at its best r on validation, middle and full unmasking, ours (test mean ± CI)
    beside the paper.

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
            rows.append({"task": task, "method": label, "ours F1": f1_text(row.f1, row.ci95, row.seeds),
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
                     f"best r on validation = {best_sr_r(summary, task)}.")
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
        rows.append(("Fig. 2", f"{row.task}, SR r={row.r}", reference, f1_text(row.f1, row.ci95, row.seeds)))
    for _, row in table1(summary).iterrows():
        rows.append(("Table 1", f"{row['task']}, {row['method']}", f"{row[PAPER_TABLE1_COLUMN]:.1f} (CoNLL03, 7-decoder mean)",
                     row["ours F1"]))
    for row in summary[summary.exit_layer.notna()].itertuples():
        full = full_depth[(full_depth.task == row.task) & (full_depth.kind == "sr") & (full_depth.r == row.r)]
        reference = f"{full.f1.iloc[0]:.1f} at all {num_layers} layers" if not full.empty else "-"
        rows.append(("Fig. 5", f"{row.task}, r={row.r}, exit@{int(row.exit_layer)}",
                     "figure only: exit@19/24 match the last layer, exit@9 falls short",
                     f"{f1_text(row.f1, row.ci95, row.seeds)} (vs {reference})"))
    for paper_layer, by_r in PAPER_SPEEDUPS.items():
        ours_layer = scaled_exit_layer(paper_layer, num_layers)
        for r, value in by_r.items():
            if ours_layer in speedups.index and r in speedups.columns:
                rows.append(("Table 2", f"exit@{paper_layer} of 32 (ours @{ours_layer} of {num_layers}), r={r}",
                             f"{value:.2f}x", f"{speedups.loc[ours_layer, r]:.2f}x"))
    return pd.DataFrame(rows, columns=["paper item", "quantity", "paper", "ours"])


# --------------------------------------------------------------------------- frozen-feature probe (Fig. 5's curve)

@torch.no_grad()
def layer_features(body, sentences: Sequence[EncodedSentence], strategy: Strategy, pad_id: int,
                   batch_size: int = 16, policy: str = "packed") -> torch.Tensor:
    """``(layers + 1, words, hidden)``: each word's first-sub-token state in the last copy after every layer
    (index 0: the embeddings), from one no-grad pass of the untrained ``body`` under ``strategy``."""
    if not sentences:
        raise ValueError("sentences is empty; the probe needs at least one sentence")
    device = next(body.parameters()).device
    collected = []
    for start in range(0, len(sentences), batch_size):
        chunk = list(sentences[start:start + batch_size])
        batch = collate(chunk, ("O",), pad_id)
        ids, mask = batch["input_ids"].to(device), batch["padding_mask"].to(device)
        _, output = sr_features(body, ids, mask, strategy, policy, output_hidden_states=True)
        repeated = repeat_batch(ids, mask, strategy.r, policy)
        states = torch.stack([gather_last_copy(hidden, repeated) for hidden in output.hidden_states]).float().cpu()
        for row, sentence in enumerate(chunk):
            collected.append(states[:, row, list(sentence.word_starts)])
    return torch.cat(collected, dim=1)


def probe_layers(body, tagging: TaggingData, repeats: Sequence[int], settings: RepetitionSettings,
                 progress: bool = True) -> dict[int, list[list[tuple[int, int, int]]]]:
    """The frozen-feature probe: for each r and each layer (0 = embeddings), a logistic regression on the
    standardised last-copy states of the training words predicts each test word's tag; returns per r and
    layer the per-test-sentence ``(correct, predicted, gold)`` entity counts (:func:`metrics.entity_counts`)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train = tagging.train[:settings.probe_train_sentences] if settings.probe_train_sentences else tagging.train
    index = {label: i for i, label in enumerate(tagging.labels)}
    targets = np.array([index[tag] for sentence in train for tag in sentence.tags])
    gold = [list(sentence.tags) for sentence in tagging.test]
    lengths = np.cumsum([0] + [len(sentence.tags) for sentence in tagging.test])
    results = {}
    for r in repeats:
        strategy = Strategy("sr", M.check_repeats(r))
        train_states = layer_features(body, train, strategy, tagging.pad_id, settings.batch_size * 2, settings.pad_policy)
        test_states = layer_features(body, tagging.test, strategy, tagging.pad_id, settings.batch_size * 2,
                                     settings.pad_policy)
        per_layer = []
        for layer in tqdm(range(train_states.shape[0]), desc=f"probe r={r}", disable=not progress):
            probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=settings.probe_max_iter))
            probe.fit(train_states[layer].numpy(), targets)
            guessed = probe.predict(test_states[layer].numpy())
            predicted = [[tagging.labels[int(g)] for g in guessed[a:b]] for a, b in zip(lengths[:-1], lengths[1:])]
            per_layer.append(metrics.entity_counts(gold, predicted))
        results[int(r)] = per_layer
    return results


def probe_table(probe: dict[int, list], resamples: int = 1000):
    """Probe F1 (x100) per r and layer with its 95% bootstrap interval over test sentences."""
    import pandas as pd

    rows = []
    for r, per_layer in probe.items():
        for layer, counts in enumerate(per_layer):
            value, low, high = metrics.bootstrap_interval(counts, lambda sample: 100 * metrics.f1_from_counts(sample),
                                                          resamples=resamples)
            rows.append({"r": r, "layer": layer, "f1": value, "low": low, "high": high})
    return pd.DataFrame(rows)


def probe_middle_gain(probe: dict[int, list], num_layers: int, low_r: int = 0, high_r: int = 1,
                      resamples: int = 1000) -> tuple[float, float, float]:
    """Mean over App. A.3.1's middle layers of probe F1 at ``high_r`` minus ``low_r`` (x100), paired bootstrap
    over test sentences."""
    lower, upper = M.middle_unmasked_layers(num_layers)
    layers = range(lower + 1, upper + 2)  # hidden_states index = layer index + 1
    pairs = list(zip(*[probe[high_r][layer] for layer in layers], *[probe[low_r][layer] for layer in layers]))
    count = len(layers)

    def gain(sample):
        return 100 * float(np.mean([metrics.f1_from_counts([row[i] for row in sample])
                                    - metrics.f1_from_counts([row[count + i] for row in sample]) for i in range(count)]))

    return metrics.bootstrap_interval(pairs, gain, resamples=resamples)


def probe_layer_difference(probe: dict[int, list], r: int, layer: int, reference_layer: int,
                           resamples: int = 1000) -> tuple[float, float, float]:
    """Probe F1 (x100) at ``layer`` minus ``reference_layer`` for one r, paired bootstrap over test sentences."""
    pairs = list(zip(probe[r][layer], probe[r][reference_layer]))
    return metrics.bootstrap_interval(
        pairs, lambda sample: 100 * (metrics.f1_from_counts([a for a, _ in sample])
                                     - metrics.f1_from_counts([b for _, b in sample])), resamples=resamples)


def describe_probe(table, probe: dict[int, list], num_layers: int) -> str:
    """The probe's layer curve and its r=0 -> r=1 gain at the middle layers, in words."""
    lines = []
    for r, rows in table.groupby("r"):
        best = rows.loc[rows.f1.idxmax()]
        last = rows[rows.layer == num_layers].iloc[0]
        lines.append(f"r={r}: best layer {int(best.layer)} ({best.f1:.1f} [{best.low:.1f}, {best.high:.1f}]); "
                     f"last layer {last.f1:.1f} [{last.low:.1f}, {last.high:.1f}].")
    if 0 in probe and 1 in probe:
        value, low, high = probe_middle_gain(probe, num_layers)
        lower, upper = M.middle_unmasked_layers(num_layers)
        lines.append(f"r=1 minus r=0 over the middle layers {lower}..{upper}: {value:+.1f} [{low:+.1f}, {high:+.1f}] F1.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- F1 differences with intervals

def _selected(results, task: str, kind: str, r: int = 0, exit_layer: int | None = None):
    rows = results[(results.task == task) & (results.kind == kind) & (results.r == r)]
    return rows.loc[np.array([_exit_or_none(value) == exit_layer for value in rows.exit_layer], dtype=bool)]


def f1_comparison(results, tagging: TaggingData, first: dict, second: dict | None = None,
                  resamples: int = 2000) -> dict:
    """Test F1 (x100) of ``first`` (``dict(kind=, r=, exit_layer=)``), or its difference from ``second``, as
    the mean over the seeds both share, with a two-level bootstrap over seeds and test sentences
    (:func:`metrics.seed_and_example_interval`). Returns value, low, high, seeds and sentences."""
    gold = [list(sentence.tags) for sentence in tagging.test]
    chosen = [_selected(results, tagging.task, **spec) for spec in ([first] if second is None else [first, second])]
    seeds = sorted(set.intersection(*[set(rows.seed) for rows in chosen]))
    if not seeds:
        raise ValueError(f"first={first!r}, second={second!r}: no seed has runs of both in task {tagging.task!r}")
    groups = []
    for seed in seeds:
        counts = [metrics.entity_counts(gold, rows[rows.seed == seed].iloc[0]["test_predictions"]) for rows in chosen]
        groups.append(list(zip(*counts)))

    def statistic(runs):
        values = []
        for run in runs:
            scores = [metrics.f1_from_counts([record[i] for record in run]) for i in range(len(chosen))]
            values.append(scores[0] - (scores[1] if len(scores) > 1 else 0.0))
        return 100 * float(np.mean(values))

    value, low, high = metrics.seed_and_example_interval(groups, statistic, resamples=resamples)
    return {"value": value, "low": low, "high": high, "seeds": len(seeds), "sentences": len(gold)}


# --------------------------------------------------------------------------- the claims ledger

EXIT_MARGIN = 2.0  # F1 points: "an exit matches the last layer" read as "is not worse by more than this"


def notebook_claims(views: dict, results: Sequence, tagging: TaggingData, probe: dict | None, num_layers: int,
                    figure_prefix: str = "figures/04_") -> list:
    """Notebook 04's ledger rows: Fig. 1 shares, Fig. 2 (r=0 vs r=1), Table 1 (SR vs middle and full unmasking),
    Fig. 5 (exit vs full depth, fine-tuned and probed). ``results`` are tables from :func:`run_experiments`; the
    rows of ``tagging.task`` are used."""
    import pandas as pd

    from .claims import Claim, verdict_for_difference

    results = pd.concat(list(results), ignore_index=True)
    results = results[results.task == tagging.task]
    if results.empty:
        raise ValueError(f"results hold no runs of task={tagging.task!r}")
    rows = []
    common = dict(notebook="04", paper="003")

    # Fig. 1: block share (k-1)/(k+1) against measured attention mass, four views.
    table = block_share_views_table(views)
    r_low, r_high = int(table.index.min()), int(table.index.max())
    rise = [float(a - b) for a, b in zip(views["all queries, sink excluded"][r_high].mean(-1),
                                         views["all queries, sink excluded"][r_low].mean(-1))]
    value, low, high = metrics.bootstrap_interval(rise)
    shown = "; ".join(f"r={r}: " + ", ".join(f"{view} {row[view]:.2f}" for view in SHARE_VIEWS)
                      for r, row in table.iterrows())
    rows.append(Claim(**common, where="§2, Fig. 1",
                      claim=f"more repetitions put more attention into full (bidirectional) blocks: untrained decoder, "
                            f"attention mass with the sink (key 0) excluded, r={r_high} minus r={r_low}",
                      paper_value="(k-1)/(k+1) of blocks: " + ", ".join(
                          f"{row['analytic (k-1)/(k+1) of blocks']:.2f}" for _, row in table.iterrows()) +
                          f" at r = {', '.join(str(r) for r in table.index)}",
                      ours=f"{value:+.2f}; {shown}", low=low, high=high,
                      method="bootstrap over sentences", n=len(rise), verdict=verdict_for_difference(low, high),
                      figure=f"{figure_prefix}sr_block_shares.png", quantity="share difference"))

    task = tagging.task
    paper = paper_f1_by_r()

    def comparison_row(where, claim, first, second, paper_value, figure, margin=0.0):
        found = f1_comparison(results, tagging, first, second)
        verdict = verdict_for_difference(found["low"] + margin, found["high"] + margin)
        return Claim(**common, where=where, claim=claim, paper_value=paper_value,
                     ours=f"{found['value']:+.1f} F1 ({task}, mean of {found['seeds']} seed{'s' * (found['seeds'] > 1)})",
                     low=found["low"], high=found["high"], n=found["sentences"],
                     method=f"bootstrap over {found['seeds']} seeds x test sentences", verdict=verdict,
                     figure=f"{figure_prefix}{figure}.png", quantity="F1 difference")

    has = lambda kind, r=0, exit_layer=None: not _selected(results, task, kind, r, exit_layer).empty  # noqa: E731
    if has("sr", 0) and has("sr", 1):
        rows.append(comparison_row("§4.2, Fig. 2", "repeating once (r=1) beats the causal decoder (r=0)",
                                   dict(kind="sr", r=1), dict(kind="sr", r=0),
                                   f"{paper[1] - paper[0]:+.1f} F1 (CoNLL03, 7-decoder mean)", "sr_f1_vs_r"))
    summary = summarize(results)
    best = best_sr_r(summary, task)
    paper_table1_values = paper_table1()
    for kind in ("middle", "full"):
        if has("sr", best) and has(kind):
            rows.append(comparison_row("§4.1, Table 1", f"SR (r={best}, picked on validation) beats {kind} unmasking",
                                       dict(kind="sr", r=best), dict(kind=kind),
                                       f"{paper_table1_values['sr'] - paper_table1_values[kind]:+.1f} F1 "
                                       "(CoNLL03, 7-decoder mean)", "sr_f1_vs_r"))
    exits = sorted({_exit_or_none(value) for value in results.exit_layer} - {None})
    for exit_layer in exits:
        at_exit = results.loc[np.array([_exit_or_none(v) == exit_layer for v in results.exit_layer], dtype=bool)]
        for r in sorted(set(at_exit.r)):
            if has("sr", r) and has("sr", r, exit_layer):
                rows.append(comparison_row(
                    "§4.4, Fig. 5", f"SR r={r} fine-tuned up to exit@{exit_layer} ({exit_layer - 1} of {num_layers} layers) "
                    f"matches the last layer: not worse by more than {EXIT_MARGIN:g} F1",
                    dict(kind="sr", r=r, exit_layer=exit_layer), dict(kind="sr", r=r),
                    "exit@19 and exit@24 of 32 match or beat the last layer", "sr_early_exit", margin=EXIT_MARGIN))
        repeats = sorted(set(at_exit.r))
        if len(repeats) > 1:
            rows.append(comparison_row("§4.4, Fig. 5", f"at exit@{exit_layer}, more repetitions help: r={repeats[-1]} "
                                       f"beats r={repeats[0]}", dict(kind="sr", r=repeats[-1], exit_layer=exit_layer),
                                       dict(kind="sr", r=repeats[0], exit_layer=exit_layer),
                                       "quality improves with more repetitions at L=19 and L=24", "sr_early_exit"))
    if probe:
        if 0 in probe and 1 in probe:
            value, low, high = probe_middle_gain(probe, num_layers)
            lower, upper = M.middle_unmasked_layers(num_layers)
            rows.append(Claim(**common, where="§4.2, Fig. 2 (frozen-feature probe)",
                              claim=f"r=1 beats r=0 in the untrained decoder's middle layers {lower}..{upper} "
                                    "(logistic-regression probe per layer)",
                              paper_value=f"{paper[1] - paper[0]:+.1f} F1 fine-tuned (CoNLL03, 7-decoder mean)",
                              ours=f"{value:+.1f} F1 ({task}, mean over {upper - lower + 1} layers)", low=low, high=high,
                              method="paired bootstrap over test sentences", n=len(tagging.test),
                              verdict=verdict_for_difference(low, high), figure=f"{figure_prefix}sr_probe.png",
                              quantity="F1 difference"))
        exit_layer = scaled_exit_layer(19, num_layers)
        for r in sorted(probe):
            if r == 0:
                continue
            value, low, high = probe_layer_difference(probe, r, exit_layer - 1, num_layers)
            rows.append(Claim(**common, where="§4.4, Fig. 5 (frozen-feature probe)",
                              claim=f"r={r}: the probe on the state entering layer {exit_layer} (exit@{exit_layer}, "
                                    f"{exit_layer - 1} of {num_layers} layers) is not worse than on the last layer by "
                                    f"more than {EXIT_MARGIN:g} F1",
                              paper_value="exit@19 of 32 matches or beats the last layer",
                              ours=f"{value:+.1f} F1 ({task})", low=low, high=high,
                              method="paired bootstrap over test sentences", n=len(tagging.test),
                              verdict=verdict_for_difference(low + EXIT_MARGIN, high + EXIT_MARGIN),
                              figure=f"{figure_prefix}sr_probe.png", quantity="F1 difference"))
    return rows
