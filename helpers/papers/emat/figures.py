"""Notebook 06's figures and its widget view (EMAT multi-token completion, seed 004). Every callback returns a
figure; the paper's numbers come from :mod:`.report`."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .experiment import LATENCY_LABELS, METHOD_LABELS, METHODS, PAPER_SIZED
from .experiment_data import LENGTH_BUCKETS
from .mechanism import KS
from .declarations import PAPER_TABLE1, PAPER_TABLE2, PAPER_TABLE3

_OURS = "#3182bd"
_PAPER = "#bdbdbd"
_METHOD_COLORS = {"emat": "#3182bd", "gru": "#e6550d", "mlm": "#31a354", "naive": "#756bb1", "emat_new_rows": "#9ecae1",
                  "mlm_vocab": "#a1d99b", "prior": "#969696"}
_LABEL_COLORS = {METHOD_LABELS[method]: color for method, color in _METHOD_COLORS.items()}
_PAPER_STYLES = {"BERT-Adapted-EMAT": ("#3182bd", "EMAT"), "BERT-Adapted-RNN": ("#e6550d", "RNN"),
                 "T5-3B": ("#636363", "T5-3B"), "T5-base": ("#969696", "T5-base")}


def _paired_bars(ax, buckets: Sequence[str], paper: dict, ours: dict, title: str, ours_label: str) -> None:
    x = np.arange(len(buckets))
    ax.bar(x - 0.2, [paper[b] for b in buckets], 0.4, color=_PAPER, label="paper (Table 1)")
    ax.bar(x + 0.2, [ours[b] for b in buckets], 0.4, color=_OURS, label=ours_label)
    for xi, value in zip(x + 0.2, (ours[b] for b in buckets)):
        ax.text(xi, value + 0.8, f"{value:.0f}", ha="center", fontsize=7)
    ax.set_xticks(x, buckets)
    ax.set_ylabel("% of phrases")
    ax.set_ylim(0, 1.2 * max(max(paper.values()), max(ours.values())))
    ax.set_title(title)
    ax.legend(frameon=False, fontsize=8)


def vocabulary_figure(manifest: dict) -> plt.Figure:
    """Table 1 as bars: phrases by number of tokens and of words, ours next to the paper's."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    ours = f"ours ({manifest['vocabulary']} phrases, k = {manifest['k (min_count)']})"
    _paired_bars(axes[0], LENGTH_BUCKETS, PAPER_TABLE1["tokens"], manifest["tokens per phrase %"],
                 f"tokens per phrase (paper: BERT cased; ours: {manifest['model_name']})", ours)
    _paired_bars(axes[1], LENGTH_BUCKETS, PAPER_TABLE1["words"], manifest["words per phrase %"],
                 "words per phrase", ours)
    fig.suptitle(f"EMAT Table 1: the completion vocabulary ({manifest['corpus']})")
    fig.tight_layout()
    return fig


def _smooth(values: Sequence[float], window: int) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if len(values) < window or window <= 1:
        return values
    return np.convolve(values, np.ones(window) / window, mode="valid")


def training_figure(runs: dict[str, list[dict]], dev_metric: str = "dev a@1") -> plt.Figure:
    """Training loss per step and the dev metric at each evaluation for each head (the records in runs/)."""
    if not runs:
        raise ValueError("runs is empty; pass {label: training records}")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for label, records in runs.items():
        steps = [r["step"] for r in records if "loss" in r]
        losses = [r["loss"] for r in records if "loss" in r]
        if not steps:
            continue
        window = max(1, len(losses) // 20)
        color = _LABEL_COLORS.get(label)
        axes[0].plot(np.asarray(steps[window - 1:]) / max(steps), _smooth(losses, window), label=label, color=color)
        evals = [(r["step"], r[dev_metric]) for r in records if dev_metric in r]
        if evals:
            axes[1].plot([s / max(steps) for s, _ in evals], [100 * v for _, v in evals], marker="o", label=label,
                         color=color)
    axes[0].set(xlabel="training progress (share of steps)", ylabel="cross-entropy", title="training loss")
    axes[1].set(xlabel="training progress (share of steps)", ylabel=f"{dev_metric} (%)", title=f"dev split: {dev_metric}")
    for ax in axes:
        ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def coverage_figure(results: dict, split: str = "test") -> plt.Figure:
    """Table 2: coverage, and accuracy@k within coverage (x) and over the whole test set (y)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [1, 2]})
    pairs = (("mlm", "BERT-cased"), ("naive", "Naive-MTC-BERT"))
    x = np.arange(len(pairs))
    axes[0].bar(x - 0.2, [PAPER_TABLE2[p]["coverage"] for _, p in pairs], 0.4, color=_PAPER, label="paper")
    axes[0].bar(x + 0.2, [100 * results[m][split]["coverage"] for m, _ in pairs], 0.4, color=_OURS, label="ours")
    axes[0].set_xticks(x, [METHOD_LABELS[m] for m, _ in pairs])
    axes[0].set(ylabel="% of test sentences", title="coverage", ylim=(0, 115))
    axes[0].legend(frameon=False, fontsize=8)
    for method, paper in pairs:
        color = _METHOD_COLORS[method]
        measured = results[method][split]
        ks = list(measured["accuracy"])
        axes[1].plot(ks, [100 * measured["accuracy within coverage"][k] for k in ks], color=color, marker="o",
                     label=f"ours {METHOD_LABELS[method]}: within coverage")
        axes[1].plot(ks, [100 * measured["accuracy"][k] for k in ks], color=color, marker="o", alpha=0.5,
                     label=f"ours {METHOD_LABELS[method]}: whole test set")
        axes[1].plot(KS, [PAPER_TABLE2[paper][k][0] for k in KS], color=color, ls="--", lw=1,
                     label=f"paper {paper}: within coverage")
    axes[1].set_xscale("log")
    axes[1].set_xticks(KS, [str(k) for k in KS])
    axes[1].set(xlabel="k", ylabel="accuracy@k (%)", title="EMAT Table 2: limited completion")
    axes[1].legend(frameon=False, fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def accuracy_by_length_figure(intervals: dict, unseen: dict | None = None) -> plt.Figure:
    """accuracy@k (k = 1, 10, 50) of every method by gold length, with 95% bootstrap intervals: all seen test
    sentences, those whose label is one token, those whose label is several, and the unseen phrases.

    ``intervals`` (and ``unseen``) come from :func:`.experiment.accuracy_intervals`; the paper's Table 3 (all seen
    sentences, BERT-Adapted EMAT / RNN) is drawn as dashes in the first panel."""
    panels = [("all", intervals, "seen test: all"), ("single-token", intervals, "seen test: gold is 1 token"),
              ("multi-token", intervals, "seen test: gold is 2+ tokens")]
    if unseen:
        panels.append(("all", unseen, "unseen phrases: all"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), sharey=True)
    for ax, (group, table, title) in zip(np.atleast_1d(axes), panels):
        methods = [m for m in METHODS if m in table and table[m].get(group)]
        ks = list(table[methods[0]][group]) if methods else []
        width = 0.8 / max(1, len(methods))
        for j, method in enumerate(methods):
            cells = table[method][group]
            x = np.arange(len(ks)) + (j - (len(methods) - 1) / 2) * width
            values = np.array([100 * cells[k][0] for k in ks])
            errors = np.array([[100 * (cells[k][0] - cells[k][1]) for k in ks], [100 * (cells[k][2] - cells[k][0]) for k in ks]])
            ax.bar(x, values, width, yerr=errors, capsize=2, color=_METHOD_COLORS.get(method, _OURS),
                   label=METHOD_LABELS[method], error_kw={"lw": 0.8})
        n = next(iter(table[methods[0]][group].values()))[3] if methods else 0
        if group == "all" and table is intervals:
            for paper in ("BERT-Adapted-EMAT", "BERT-Adapted-RNN"):
                color, short = _PAPER_STYLES[paper]
                for i, k in enumerate(ks):
                    ax.hlines(PAPER_TABLE3[paper][k], i - 0.4, i + 0.4, colors=color, linestyles="--", lw=1,
                              label=f"paper: {short}" if i == 0 else None)
        ax.set_xticks(np.arange(len(ks)), [f"a@{k}" for k in ks])
        ax.set(title=f"{title} (n = {n})", ylim=(0, 100))
    np.atleast_1d(axes)[0].set_ylabel("accuracy@k (%), 95% bootstrap interval")
    np.atleast_1d(axes)[0].legend(frameon=False, fontsize=7)
    fig.suptitle("EMAT Table 3 by gold length: every method on the same, whole test split")
    fig.tight_layout()
    return fig


def latency_figure(latency: dict[str, float]) -> plt.Figure:
    """Milliseconds per sentence (batch 1, trained heads, interleaved) and the ratio to the bare masked-LM forward."""
    names = [n for n in ("forward", "mlm", "emat", "emat_new_rows", PAPER_SIZED, "gru") if n in latency]
    labels = [LATENCY_LABELS[n] for n in names]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.2))
    ax.barh(labels, [latency[n] for n in names], color=[_METHOD_COLORS.get(n, _PAPER) for n in names])
    for y, n in enumerate(names):
        ax.text(latency[n], y, f" {latency[n]:.1f} ms ({latency[n] / latency['forward']:.2f}x forward)", va="center", fontsize=8)
    ax.set(xlabel="ms per sentence (median, batch 1, this machine)",
           title=f"inference time (paper, T4: EMAT {PAPER_TABLE3['BERT-Adapted-EMAT']['ms']} ms, "
                 f"RNN {PAPER_TABLE3['BERT-Adapted-RNN']['ms']} ms)")
    ax.set_xlim(0, 1.45 * max(latency[n] for n in names))
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


def completion_view(completer, sentence: str = "Elizabeth was walking with [MASK] in the garden.", k: int = 8) -> plt.Figure:
    """The top-``k`` completions of EMAT, the GRU decoder and the single-token MLM, side by side.

    ``sentence`` must contain ``[MASK]`` exactly once.
    """
    methods = ("emat", "gru", "mlm")
    ranked = {method: completer.complete(sentence, method, k) for method in methods}
    fig, axes = plt.subplots(1, len(methods), figsize=(12, 0.35 * k + 1.6))
    for ax, method in zip(axes, methods):
        items = ranked[method]
        labels = [text for text, _ in items]
        ax.barh(range(len(items)), [score for _, score in items], color=_METHOD_COLORS[method])
        ax.set_yticks(range(len(items)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set(xlabel="probability", title=METHOD_LABELS[method])
    wrapped = sentence if len(sentence) < 110 else sentence[:107] + "..."
    fig.suptitle(wrapped, fontsize=9)
    fig.tight_layout()
    return fig
