"""Notebook 03's figures: MAGNET's three views, training curves, Tables 4, 5, 1 and 6, Fig. 6, the infilling widget.

Every function returns a figure; ``show`` saves and displays it. Bars put our value next to the
paper's (hatched) wherever the paper reports one.
"""
from __future__ import annotations

import math
import textwrap
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from ... import masks as M
from ...plots.core import draw_mask, token_labels
from .experiment_table1 import CHANCE_ROW, ENTITY_TASKS, PROBE_TASKS
from .experiment_table4 import infill_passage

_MODEL_COLORS = {"base": "#7f7f7f", "LLM2Vec-style [MNTP]": "#9ecae1", "LLM2Vec-style": "#3182bd",
                 "MAGNET": "#e6550d", "MAGNET (left only)": "#fdae6b", "MNTP + MSG": "#fd8d3c"}


def _color(name: str, index: int) -> str:
    return _MODEL_COLORS.get(name, f"C{index}")


# --- Fig. 4: the three views ---

def magnet_views_figure(tokenizer, views: dict) -> plt.Figure:
    """Fig. 4: x^m under the hybrid mask (corrupted context, green span rows), x and x^+ under the bidirectional mask.

    ``views`` comes from :func:`helpers.papers.magnet.experiment.three_views`.
    """
    fig, axes = plt.subplots(1, 3, figsize=(18, 6.4), gridspec_kw={"width_ratios": [1.2, 1, 1]})
    masked = views["x^m"]
    length = len(masked["ids"])
    labels = token_labels(tokenizer, masked["ids"])
    original = token_labels(tokenizer, masked["original"])
    shown = [f"{now}←{was}" if now != was else now for now, was in zip(labels, original)]
    kinds = M.span_ids(torch.arange(length), masked["spans"])
    draw_mask(axes[0], M.dense(masked["mask"], length), f"x^m: MNTP + MSG, spans {masked['spans']}",
              query_kind=kinds, labels=shown)
    mntp, msg = masked["mntp_labels"], masked["msg_labels"]
    for position in range(length):
        if int(mntp[position]) >= 0:
            axes[0].text(length + 0.2, position, f"MNTP → {token_labels(tokenizer, [int(mntp[position])])[0]}",
                         fontsize=6, va="center", color="#3182bd")
        if int(msg[position]) >= 0:
            axes[0].text(length + 0.2, position, f"MSG → {token_labels(tokenizer, [int(msg[position])])[0]}",
                         fontsize=6, va="center", color="#31a354")
    for ax, name in zip(axes[1:], ("x", "x^+")):
        view = views[name]
        draw_mask(ax, M.dense(view["mask"], len(view["ids"])), f"{name}: SSCL, last token = EOS",
                  labels=token_labels(tokenizer, view["ids"]))
        ax.set_xlabel("key\n" + textwrap.fill(view["text"], 60), fontsize=7)
    fig.suptitle("MAGNET Fig. 4: one model, three views. Blue rows: context queries; green rows: span queries; "
                 "'a←b' marks a corrupted token; arrows: each output's target")
    fig.tight_layout()
    return fig


# --- training curves ---

def magnet_training_figure(components: dict[str, list[dict]], boundaries: dict[str, Sequence[int]] | None = None,
                          smooth: int = 5) -> plt.Figure:
    """Per-objective training losses against steps for each run (records from ``experiment.read_components``)."""
    objectives = ("mntp", "msg", "sscl")
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    for run_index, (name, records) in enumerate(components.items()):
        for ax, objective in zip(axes, objectives):
            points = [(r["step"], r[objective]) for r in records if objective in r]
            if not points:
                continue
            steps, values = map(np.asarray, zip(*points))
            window = max(1, min(smooth, len(values)))
            smoothed = np.convolve(values, np.ones(window) / window, mode="valid")
            ax.plot(steps, values, color=_color(name, run_index), alpha=0.25)
            ax.plot(steps[window - 1:], smoothed, color=_color(name, run_index), label=name)
        for step in (boundaries or {}).get(name, []):
            for ax in axes:
                ax.axvline(step, color=_color(name, run_index), ls=":", lw=0.9)
    titles = {"mntp": "MNTP (Eq. 2)", "msg": "MSG (Eq. 4)", "sscl": "SSCL (Eq. 3)"}
    for ax, objective in zip(axes, objectives):
        ax.set(xlabel="step", ylabel="loss", title=titles[objective])
        if ax.lines:
            ax.legend(fontsize=7)
    fig.suptitle("Joint training (Eq. 5): dotted lines mark the λ phase change")
    fig.tight_layout()
    return fig


def heldout_curve_figure(runs: dict[str, Sequence[dict]], key: str, stopping=None) -> plt.Figure:
    """The budget check: each run's held-out curve ``key`` against steps (evaluation records), with MAGNET's
    least-squares line over the window :func:`helpers.metrics.stopped_improving` fits (``stopping``: its result on
    MAGNET's curve) and, in the title, that equivalence test's verdict: stopped, or still improving, with the numbers."""
    from ... import metrics

    fig, ax = plt.subplots(figsize=(7, 3.8))
    for index, (name, records) in enumerate(runs.items()):
        points = sorted((r["step"], r[key]) for r in records if key in r)
        if points:
            steps, values = zip(*points)
            ax.plot(steps, values, "o-", ms=3, color=_color(name, index), label=name)
    magnet = metrics.curve_points(runs.get("MAGNET", ()), key)
    title = "held-out MNTP accuracy during joint training"
    if stopping is not None and magnet:
        first, last = magnet[0][0], magnet[-1][0]
        start = last - metrics.STOP_WINDOW * (last - first)
        window = [(step, value) for step, value in magnet if step >= start]
        ax.axvspan(start, last, color="0.9", zorder=0, label=f"last {metrics.STOP_WINDOW:.0%} of training")
        if math.isfinite(stopping.slope):
            steps = np.array([step for step, _ in window], dtype=float)
            values = np.array([value for _, value in window])
            ax.plot(steps, values.mean() + stopping.slope * (steps - steps.mean()), "k--", lw=1.2,
                    label="least-squares line")
        title += "\nMAGNET: " + textwrap.fill(stopping.reason, 90)
    ax.set(xlabel="step", ylabel="masked-token accuracy (bidirectional)", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# --- Table 4 and the infilling widget ---

def _paired_bars(ax, groups: Sequence[str], series: dict[str, Sequence[float | None]], paper: dict[str, Sequence[float | None]] | None,
                 ylabel: str, title: str, fmt: str = "{:.2f}") -> None:
    names = list(series)
    width = 0.8 / (len(names) * (2 if paper else 1))
    x = np.arange(len(groups))
    slot = 0
    for index, name in enumerate(names):
        for source, values, hatch in (("ours", series[name], None), ("paper", (paper or {}).get(name), "//")):
            if source == "paper" and not paper:
                continue
            heights = [np.nan if v is None else v for v in (values or [None] * len(groups))]
            bars = ax.bar(x + (slot - (len(names) * (2 if paper else 1) - 1) / 2) * width, heights, width,
                          color=_color(name, index), hatch=hatch, edgecolor="white" if hatch else None,
                          alpha=0.55 if hatch else 1.0, label=f"{name} ({source})" if paper else name)
            for bar, value in zip(bars, heights):
                if not np.isnan(value):
                    ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), fmt.format(value), ha="center",
                            va="bottom", fontsize=6, rotation=90)
            slot += 1
    ax.set_xticks(x, groups)
    ax.set(ylabel=ylabel, title=title)
    ax.legend(fontsize=6, ncol=2)


def infilling_ppl_figure(ours: dict, paper: dict) -> plt.Figure:
    """Table 4: span perplexity of the base model (left context) and MAGNET (both sides), ours next to the paper's."""
    datasets = list(ours)
    models = list(dict.fromkeys(m for by_model in ours.values() for m in by_model))
    fig, ax = plt.subplots(figsize=(8, 4))
    series = {m: [ours[d].get(m) for d in datasets] for m in models}
    paper_series = {m: [paper.get(d, {}).get(m) for d in datasets] for m in models}
    _paired_bars(ax, [f"{d}-style" for d in datasets], series, paper_series, "perplexity over span tokens",
                 "MAGNET Table 4: infilling perplexity (lower is better); hatched = paper (LLaMA-2-7B)")
    fig.tight_layout()
    return fig


def infill_view(models_by_mode: dict, tokenizer, passage: str, span_start: int = 5, span_words: int = 6) -> plt.Figure:
    """Widget: mask ``span_words`` words of ``passage`` from word ``span_start`` and infill them with each model.

    ``models_by_mode`` maps a label to ``(model, mode)``; mode "causal" sees the left context only,
    "magnet" both sides through the hybrid mask. Each infill keeps the original span's token count.
    """
    result = infill_passage(models_by_mode, tokenizer, passage, span_start, span_start + span_words)
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.9 * (len(result["infills"]) + 1)))
    ax.axis("off")
    lines = [("passage", f"{result['left']} [ {result['original']} ] {result['right']}", "black")]
    for index, (name, text) in enumerate(result["infills"].items()):
        lines.append((f"{name}\n(PPL of the original {result['ppl'][name]:.1f})", f"{result['left']} [ {text} ] {result['right']}",
                      _color(name, index)))
    y = 1.0
    for label, text, color in lines:
        ax.text(0.0, y, label, fontsize=8, fontweight="bold", va="top", color=color, transform=ax.transAxes)
        ax.text(0.2, y, textwrap.fill(text, 110), fontsize=8, va="top", transform=ax.transAxes, family="serif")
        y -= 1.0 / len(lines)
    ax.set_title(f"Infilling words {span_start}-{span_start + span_words - 1} (Table 10 style): the bracket holds the span")
    fig.tight_layout()
    return fig


# --- Table 5 and Fig. 6 ---

def degeneration_figure(table, paper: dict) -> plt.Figure:
    """Table 5: Rep-Sen and Rep-4 (degeneration) of greedy generations for each model, ours next to the paper's."""
    sets = list(dict.fromkeys(c[0] for c in table.columns))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    for metric_index, (ax, metric) in enumerate(zip(axes, ("Rep-Sen", "Rep-4"))):
        series = {m: [table.loc[m, (s, metric)] for s in sets] for m in table.index}
        paper_series = {m: [paper.get(s, {}).get(m, (None, None))[metric_index] for s in sets] for m in table.index}
        _paired_bars(ax, sets, series, paper_series, metric, f"{metric} (lower = less repetition)", fmt="{:.3f}")
    fig.suptitle("MAGNET Table 5: degeneration (Rep-n) in greedy generation; hatched = paper (Wikitext-103 5-word / ROC sentence prefixes)")
    fig.tight_layout()
    return fig


def degeneration_curve_figure(curves: dict[str, Sequence[dict]], boundaries: dict[str, Sequence[int]] | None = None) -> plt.Figure:
    """Fig. 6: Rep-Sen and Rep-4 of greedy generations against training iterations, one line per adaptation."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for index, (name, records) in enumerate(curves.items()):
        points = sorted((r["step"], r["rep_sen"], r["rep_4"]) for r in records)
        steps, rep_sen, rep_4 = zip(*points)
        for ax, values in zip(axes, (rep_sen, rep_4)):
            ax.plot(steps, values, "o-", color=_color(name, index), label=name)
        for step in (boundaries or {}).get(name, []):
            for ax in axes:
                ax.axvline(step, color=_color(name, index), ls=":", lw=0.9)
    for ax, metric in zip(axes, ("Rep-Sen", "Rep-4")):
        ax.set(xlabel="training iterations", ylabel=metric, title=metric)
        ax.legend(fontsize=7)
    fig.suptitle("MAGNET Fig. 6: degeneration (Rep-n) against training iterations (dotted: stage or λ-phase change)")
    fig.tight_layout()
    return fig


# --- Table 1 and Table 6 ---

def word_probe_figure(study, rows: Sequence[str], paper: dict | None = None, metric: str = "accuracy") -> plt.Figure:
    """Table 1: probe scores with their 95% intervals (bootstrap over test sentences), one panel per task; the
    majority tag (chance) as a dashed line; the paper's value (CoNLL-2003, LLaMA-2-7B) as a cross where ``paper``
    maps a row to its (Chunking, NER, POS) triple. ``study`` is an ``experiment_table1.ProbeStudy``."""
    tasks = PROBE_TASKS if metric == "accuracy" else ENTITY_TASKS
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 0.38 * len(rows) + 1.6), sharey=True)
    y = np.arange(len(rows))[::-1]
    for ax, task in zip(np.atleast_1d(axes), tasks):
        for position, row in zip(y, rows):
            value, low, high = study.interval(row, task, metric)
            ax.errorbar(value, position, xerr=[[value - low], [high - value]], fmt="o", color=_color(row, int(position)),
                        ms=4, capsize=2)
            triple = (paper or {}).get(row)
            if triple is not None and metric == "accuracy":
                ax.plot(triple[PROBE_TASKS.index(task)], position, "x", color="k", ms=6)
        chance = study.interval(CHANCE_ROW, task, metric)[0]
        ax.axvline(chance, color="grey", ls="--", lw=0.9)
        ax.set(title=f"{task} ({'token accuracy' if metric == 'accuracy' else 'entity F1'}, %)", xlabel="score (%)")
        ax.grid(axis="x", alpha=0.3)
    np.atleast_1d(axes)[0].set_yticks(y, rows, fontsize=7)
    fig.suptitle(f"MAGNET Table 1: linear probes on frozen word features, 95% intervals over {study.n} test sentences "
                 "(x = paper, dashed = majority tag)", fontsize=9)
    fig.tight_layout()
    return fig


def objective_ablation_figure(table, paper_value) -> plt.Figure:
    """Table 6: scores of the objective subsets; ``paper_value(row, column)`` gives the paper's entry or None."""
    columns = list(table.columns)
    series = {row: [table.loc[row, c] for c in columns] for row in table.index}
    paper_series = {row: [paper_value(row, c) for c in columns] for row in table.index}
    fig, ax = plt.subplots(figsize=(13, 4.2))
    _paired_bars(ax, columns, series, paper_series, "score", "MAGNET Table 6: objective ablation; hatched = paper "
                 "(its sentence-level entries are STS12-16 means, compared only with STS-B)", fmt="{:.1f}")
    fig.tight_layout()
    return fig
