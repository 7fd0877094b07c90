"""Notebook 02's figures: MAGNET Fig. 7 (MNTP against MTP) and the masking widget of §3.2.1.

Both draw from what the runs logged or from one corrupted sentence; the shared drawing tools (``show``,
``interactive_view``, ``token_labels``) stay in :mod:`helpers.plots.core`.
"""
from __future__ import annotations

import copy

import matplotlib.pyplot as plt
import torch

from ...plots.core import token_labels
from . import mechanism


def training_curves_figure(runs: dict[str, list[dict]], references: dict[str, float] | None = None,
                           title: str = "MAGNET Fig. 7: MTP vs MNTP") -> plt.Figure:
    """MAGNET Fig. 7: training loss and held-out masked-token accuracy against steps, one line per run (records from
    runs/); ``references`` (label -> accuracy) are drawn as dashed horizontal lines."""
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for label, records in runs.items():
        losses = [(r["step"], r["loss"]) for r in records if "loss" in r]
        evals = [(r["step"], r["eval_accuracy"]) for r in records if "eval_accuracy" in r]
        if losses:
            loss_ax.plot(*zip(*losses), label=label, alpha=0.85)
        if evals:
            acc_ax.plot(*zip(*evals), "o-", label=label)
    for index, (label, value) in enumerate((references or {}).items()):
        acc_ax.axhline(value, ls="--", lw=0.9, color=f"C{index + len(runs)}", label=label)
    loss_ax.set(xlabel="step", ylabel="training loss", title="training loss")
    acc_ax.set(xlabel="step", ylabel="masked-token accuracy (held out)", title="eval accuracy, each objective's alignment")
    loss_ax.legend()
    acc_ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def masking_view(tokenizer, text: str, ratio: float = 0.2, mask_token: str = "underscore", objective: str = "mntp",
                 seed: int = 0, max_tokens: int = 24) -> plt.Figure:
    """Widget (§3.2.1, App. E): one sentence corrupted for MNTP/MTP; each column shows input, corrupted input and the
    target at that output (MNTP: the next token where it is selected; MTP: the token itself)."""
    config = mechanism.MaskingConfig(ratio=ratio)
    tokenizer = copy.deepcopy(tokenizer) if mask_token == "added" else tokenizer
    mask_id = mechanism.resolve_mask_token(tokenizer, mask_token)
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids[:, :max_tokens]
    batch = mechanism.make_batch(objective, ids, torch.ones_like(ids), mask_id=mask_id, vocab_size=len(tokenizer),
                                 special_ids=tokenizer.all_special_ids, config=config,
                                 generator=torch.Generator().manual_seed(seed))
    original, corrupted = token_labels(tokenizer, ids[0]), token_labels(tokenizer, batch["input_ids"][0])
    labels = batch["labels"][0]
    targets = [token_labels(tokenizer, [int(t)])[0] if t != mechanism.IGNORE_INDEX else "" for t in labels]
    selected = batch["selected"][0]
    length = ids.shape[1]
    fig, ax = plt.subplots(figsize=(max(8, 0.8 * length), 2.4))
    ax.set_xlim(-0.5, length - 0.5)
    ax.set_ylim(-0.5, 2.5)
    ax.axis("off")
    for column in range(length):
        changed = corrupted[column] != original[column]
        color = "#de2d26" if int(batch["input_ids"][0, column]) == mask_id and selected[column] else (
            "#fd8d3c" if changed else ("#3182bd" if selected[column] else "black"))
        ax.text(column, 2, original[column], ha="center", fontsize=8)
        ax.text(column, 1, corrupted[column], ha="center", fontsize=8, color=color,
                fontweight="bold" if selected[column] else "normal")
        ax.text(column, 0, targets[column], ha="center", fontsize=8, color="#31a354")
    for row, name in ((2, "input"), (1, "corrupted"), (0, f"target at output ({objective})")):
        ax.text(-0.8, row, name, ha="right", fontsize=8, style="italic")
    ax.set_title(f"{objective.upper()}, ratio {ratio:g}, mask token '{tokenizer.decode([mask_id])}': "
                 "red = mask, orange = random, blue = selected but kept, green = target")
    fig.tight_layout()
    return fig
