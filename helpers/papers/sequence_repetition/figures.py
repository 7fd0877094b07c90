"""Notebook 04's figures and its widget: sequence repetition (seed 003), Fig. 1, 2 and 5 and Table 2.

Every function returns a figure; the notebook shows and saves it with ``plots.show``.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle

from ... import data
from ... import masks as M
from ...plots.core import as_numpy, token_labels
from .experiment import explain_sentence
from .experiment_data import conll_types

_BLOCK_COLORS = {M.BLOCK_FULL: "#08519c", M.BLOCK_LOWER: "#31a354", M.BLOCK_ZERO: "#bdbdbd"}


def sr_block_analysis_figure(measured: dict[int, torch.Tensor], similarity: dict[int, torch.Tensor] | None = None,
                             model_label: str = "") -> plt.Figure:
    """SR Fig. 1 measured (§2): attention mass in full vs diagonal blocks against r beside (k-1)/(k+1), and per layer.

    ``measured`` maps r to the per-layer share of mass in full blocks; ``similarity`` (optional) maps r to the
    per-layer cosine between SR's last copy and the fully unmasked single copy.
    """
    keys = sorted(measured)
    panels = 3 if similarity else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2))
    curve, per_layer = axes[0], axes[1]
    rs = np.arange(0, max(keys) + 1)
    curve.plot(rs, [M.bidirectional_block_share(int(r)) for r in rs], "o-", color="black", label="analytic (k-1)/(k+1) of blocks")
    full = np.array([float(measured[r].mean()) for r in keys])
    low = np.array([float(measured[r].min()) for r in keys])
    high = np.array([float(measured[r].max()) for r in keys])
    curve.plot(keys, full, "s--", color=_BLOCK_COLORS[M.BLOCK_FULL], label="measured: mass in full blocks (mean of layers)")
    curve.fill_between(keys, low, high, color=_BLOCK_COLORS[M.BLOCK_FULL], alpha=0.15, label="lowest to highest layer")
    curve.plot(keys, 1 - full, "^:", color=_BLOCK_COLORS[M.BLOCK_LOWER], label="measured: mass in diagonal blocks")
    curve.set(xlabel="repetitions r (k = r + 1 copies)", ylabel="share", ylim=(0, 1), title="SR Fig. 1 / §2: full vs diagonal blocks")
    curve.set_xticks(keys)
    curve.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    palette = plt.get_cmap("viridis")
    for index, r in enumerate(keys):
        color = palette(index / max(1, len(keys) - 1))
        shares = as_numpy(measured[r])
        per_layer.plot(np.arange(len(shares)), shares, "-", color=color, label=f"r={r}")
        per_layer.axhline(M.bidirectional_block_share(r), color=color, ls="--", lw=0.8)
    per_layer.set(xlabel="layer", ylabel="attention mass in full blocks", ylim=(0, 1),
                  title="per layer (dashed: (k-1)/(k+1))")
    per_layer.legend(ncol=min(5, len(keys)), fontsize=7, loc="lower right")
    if similarity:
        ax = axes[2]
        for index, r in enumerate(sorted(similarity)):
            values = as_numpy(similarity[r])
            ax.plot(np.arange(len(values)), values, color=palette(index / max(1, len(similarity) - 1)), label=f"r={r}")
        ax.set(xlabel="layer", ylabel="cosine(last copy, unmasked single copy)", ylim=(-0.05, 1.05),
               title="optional: closeness to the fully unmasked model")
        ax.legend(fontsize=7)
    fig.suptitle(f"Sequence repetition §2 on {model_label}" if model_label else "Sequence repetition §2")
    fig.tight_layout()
    return fig


def _task_axes(tasks: Sequence[str], width: float = 5.2, height: float = 4.0):
    fig, axes = plt.subplots(1, len(tasks), figsize=(width * len(tasks), height), squeeze=False)
    return fig, dict(zip(tasks, axes[0]))


def sr_f1_figure(summary, paper: dict | None = None, title_suffix: str = "") -> plt.Figure:
    """SR Fig. 2: micro F1 against r (mean ± 95% CI band over seeds), with middle and full unmasking as lines.

    ``paper`` (e.g. ``report.paper_f1_by_r()``) adds the paper's CoNLL03 curve in gray on each panel.
    """
    tasks = list(dict.fromkeys(summary.task))
    fig, axes = _task_axes(tasks)
    for task, ax in axes.items():
        rows = summary[(summary.task == task) & summary.exit_layer.isna()]
        sr = rows[rows.kind == "sr"].sort_values("r")
        ax.plot(sr.r, sr.f1, "o-", color="#08519c", label="SR (ours)")
        ax.fill_between(sr.r, sr.f1 - sr.ci95, sr.f1 + sr.ci95, color="#08519c", alpha=0.2)
        for kind, color in (("middle", "#e6550d"), ("full", "#756bb1")):
            base = rows[rows.kind == kind]
            if not base.empty:
                value, half = float(base.f1.iloc[0]), float(base.ci95.iloc[0])
                ax.axhline(value, color=color, ls="--", label=f"{kind} unmasking (ours)")
                if np.isfinite(half):  # one seed: no interval to shade
                    ax.axhspan(value - half, value + half, color=color, alpha=0.08)
        if paper:
            rs = sorted(key for key in paper if isinstance(key, int))
            ax.plot(rs, [paper[r] for r in rs], "s:", color="gray", label="paper, CoNLL03 (7-decoder mean)")
        ax.set(xlabel="repetitions r", ylabel="micro F1 (x100)", title=f"{task}{title_suffix}", ylim=(0, 100))
        ax.set_xticks(sorted(set(sr.r) | ({r for r in paper if isinstance(r, int)} if paper else set())))
        ax.legend(fontsize=7)
    fig.suptitle("SR Fig. 2: F1 against the number of repetitions (band: 95% CI over seeds)")
    fig.tight_layout()
    return fig


def sr_early_exit_figure(summary, num_layers: int) -> plt.Figure:
    """SR Fig. 5: F1 against the exit layer for each r (solid), the full-depth model of the same r dashed."""
    exits = summary[summary.exit_layer.notna()]
    tasks = list(dict.fromkeys(exits.task)) or list(dict.fromkeys(summary.task))
    fig, axes = _task_axes(tasks)
    palette = plt.get_cmap("plasma")
    for task, ax in axes.items():
        rows = exits[exits.task == task]
        repeats = sorted(set(rows.r))
        for index, r in enumerate(repeats):
            color = palette(index / max(1, len(repeats)))
            line = rows[rows.r == r].sort_values("exit_layer")
            ax.plot(line.exit_layer.astype(int), line.f1, "o-", color=color, label=f"r={r}")
            ax.fill_between(line.exit_layer.astype(int), line.f1 - line.ci95, line.f1 + line.ci95, color=color, alpha=0.15)
            full = summary[(summary.task == task) & (summary.kind == "sr") & (summary.r == r) & summary.exit_layer.isna()]
            if not full.empty:
                ax.axhline(float(full.f1.iloc[0]), color=color, ls="--", lw=1, label=f"r={r}, all {num_layers} layers")
        ax.set(xlabel=f"exit layer L (the L-1 layers before it, of {num_layers})", ylabel="micro F1 (x100)", title=task)
        ax.set_xticks(sorted({int(layer) for layer in rows.exit_layer}))
        ax.legend(fontsize=7)
    fig.suptitle("SR Fig. 5: early exit")
    fig.tight_layout()
    return fig


def sr_speed_figure(ours, paper=None, num_layers: int | None = None, model_label: str = "") -> plt.Figure:
    """SR Table 2 as heatmaps: inference speedup over (r = 0, all layers) for each exit layer x r, ours beside the paper's."""
    tables = [(f"ours: {model_label}", ours)] + ([("paper: Mistral-7B (32 layers)", paper)] if paper is not None else [])
    fig, axes = plt.subplots(1, len(tables), figsize=(5.2 * len(tables), 3.8), squeeze=False)
    for ax, (title, table) in zip(axes[0], tables):
        values = table.to_numpy(dtype=float)
        image = ax.imshow(np.log2(values), cmap="RdBu", vmin=-2.5, vmax=2.5, aspect="auto")
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(values.shape[1]), [f"r={r}" for r in table.columns])
        labels = [f"exit@{layer}" + (" (all)" if num_layers and layer == num_layers and table is ours else "")
                  for layer in table.index]
        ax.set_yticks(range(values.shape[0]), labels)
        ax.set_title(title)
        fig.colorbar(image, ax=ax, label="log2 speedup (blue: faster than base)")
    fig.suptitle("SR Table 2: speedup over the base model (r = 0, no early exit), interleaved trials × processes")
    fig.tight_layout()
    return fig


def sr_attention_figure(explained: dict, tokenizer, layer: int = -1, silver: Sequence[str] | None = None) -> plt.Figure:
    """The attention map (mean over heads) of one layer on the repeated sentence, blocks outlined, and the tags per word."""
    weights = explained["attention"]
    if isinstance(layer, (int, float)) and not isinstance(layer, bool) and layer < 0:  # -1: the last layer
        layer = weights.shape[0] + layer
    layer = M.check_layer(layer, weights.shape[0])
    n, r = explained["n"], explained["r"]
    layout = M.Repetition(n, r)
    fig, (ax, tags) = plt.subplots(2, 1, figsize=(max(6.5, 0.16 * layout.length + 3), max(7.5, 0.16 * layout.length + 4)),
                                   gridspec_kw={"height_ratios": [4, 1.1]})
    ax.imshow(as_numpy(weights[layer].mean(0)) ** 0.5, cmap="magma", vmin=0, vmax=1)
    for i in range(layout.k):
        for j in range(layout.k):
            kind = layout.block_kind(i, j)
            ax.add_patch(Rectangle((j * n - 0.5, i * n - 0.5), n, n, fill=False, lw=1.4, edgecolor=_BLOCK_COLORS[kind]))
            if layout.k <= 5:
                ax.text(j * n + n / 2 - 0.5, i * n + n / 2 - 0.5, f"A{i + 1}{j + 1}\n{kind}", ha="center", va="center",
                        fontsize=7, color="white" if kind != "zero" else "#969696", alpha=0.8)
    labels = token_labels(tokenizer, explained["tokens"]) * layout.k
    step = max(1, layout.length // 48)
    ax.set_xticks(range(0, layout.length, step), labels[::step], rotation=90, fontsize=6)
    ax.set_yticks(range(0, layout.length, step), labels[::step], fontsize=6)
    ax.set(xlabel="key", ylabel="query", title=f"layer {layer}, r={r} (k={layout.k}): sqrt of attention weight, mean over heads; "
                                              "blue: full blocks, green: diagonal")
    tags.axis("off")
    words, predicted = explained["words"], explained["predicted"]
    tags.set_xlim(-0.5, len(words) - 0.5)
    tags.set_ylim(-0.6, 2.4)
    for column, word in enumerate(words):
        tags.text(column, 2, word, ha="center", fontsize=8, rotation=30)
        wrong = silver is not None and column < len(silver) and silver[column] != predicted[column]
        tags.text(column, 1, predicted[column], ha="center", fontsize=7, color="#de2d26" if wrong else "#08519c")
        if silver is not None and column < len(silver):
            tags.text(column, 0, silver[column], ha="center", fontsize=7, color="gray")
    tags.text(-0.7, 1, "predicted", ha="right", fontsize=7, style="italic")
    if silver is not None:
        tags.text(-0.7, 0, "reference", ha="right", fontsize=7, style="italic")
    fig.tight_layout()
    return fig


def sr_tagging_view(taggers: dict, tokenizer, labels: Sequence[str], sentence: str = "", r: int = 1, layer: int = -1,
                    reference_task: str | None = None) -> plt.Figure:
    """Widget: type a sentence and pick r; see the trained tagger's attention on s^k with its blocks, and its tags.

    ``taggers`` maps r to a trained :class:`~.mechanism.TokenTagger`; words come from spaCy, and with
    ``reference_task`` ("ner" or "chunks") the silver tags are shown under the prediction.
    """
    if r not in taggers:
        raise ValueError(f"r={r!r} has no trained tagger; expected one of {sorted(taggers)}")
    if not sentence.strip():
        raise ValueError("sentence is empty; type a sentence to tag")
    labelled = data.silver_labels([sentence], progress=False)[0]
    reference = None
    if reference_task == "ner":
        reference = conll_types(labelled.ner)
    elif reference_task == "chunks":
        reference = labelled.chunks
    explained = explain_sentence(taggers[r], tokenizer, labels, labelled.words)
    return sr_attention_figure(explained, tokenizer, layer, reference)


def sr_probe_figure(table, num_layers: int, exit_layers: Sequence[int] = (), task: str = "") -> plt.Figure:
    """Fig. 5's layer curve without fine-tuning: frozen-feature probe F1 per layer for each r (95% bootstrap band
    over test sentences), App. A.3.1's middle layers shaded, the exit layers' inputs marked."""
    fig, ax = plt.subplots(figsize=(7, 4))
    palette = plt.get_cmap("viridis")
    repeats = sorted(set(table.r))
    lower, upper = M.middle_unmasked_layers(num_layers)
    ax.axvspan(lower + 1, upper + 1, color="#fee391", alpha=0.5, label=f"middle layers {lower}..{upper} (App. A.3.1)")
    for index, r in enumerate(repeats):
        rows = table[table.r == r].sort_values("layer")
        color = palette(index / max(1, len(repeats)))
        ax.plot(rows.layer, rows.f1, "o-", ms=3, color=color, label=f"r={r}")
        ax.fill_between(rows.layer, rows.low, rows.high, color=color, alpha=0.2)
    for layer in exit_layers:
        ax.axvline(layer - 1, color="grey", ls=":", lw=1)
        ax.text(layer - 1, ax.get_ylim()[0], f" exit@{layer}", rotation=90, va="bottom", fontsize=7, color="grey")
    ax.set(xlabel="layers run (0 = embeddings)", ylabel="probe micro F1 (x100)",
           title=f"Frozen-feature probe{', ' + task if task else ''}: logistic regression per layer")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
