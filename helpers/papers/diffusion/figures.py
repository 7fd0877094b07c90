"""Notebook 07's figures: the block-causal mask beside notebook 05's and MAGNET's, its proof on the real model, the
commit maps of the samplers (and the widget that redraws one), the sampler table as bars, quality against the number
of steps, and the fine-tune's likelihood bound and accuracy by mask ratio."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ... import masks as M
from ...masked_lm import MaskedLM
from ...plots.core import draw_mask
from ..lecture.figures import influence_figure  # notebook 01's proof figure, reused for block-causal attention
from . import mechanism
from .experiment import LR_N, LikelihoodStudy, steps_row
from .mechanism import Sampled, SamplerConfig

__all__ = ["judges_figure", "block_masks_figure", "proof_figure", "commit_map_figure", "anatomy_figure", "sampler_view",
           "samplers_figure", "steps_figure", "likelihood_figure"]

# masked (or noise, under uniform corruption), committed at this step, committed before, re-masked, edited
_STATES = ["#bdbdbd", "#31a354", "#ffffff", "#de2d26", "#3182bd"]
_STATE_LABELS = ["masked / noise", "committed at this step", "committed earlier", "re-masked (was committed)",
                 "edited (committed token re-written)"]


def block_masks_figure(prompt_length: int = 4, length: int = 12, block: int = 4) -> plt.Figure:
    """The masks of the sampler family on a prompt of ``prompt_length`` and ``length`` targets: notebook 05's mixed
    attention, block-causal attention (BD3-LM §3.1) with blocks of ``block`` and of 1, and MAGNET's hybrid mask with
    one span over the target (Fig. 2c). Titles say which panels are the same matrix."""
    total = prompt_length + length
    notebook05 = M.dense(mechanism.mask_predict.generation_mask(prompt_length), total)
    panels = [("notebook 05: closed prompt,\ntargets bidirectional", notebook05),
              (f"block-causal, B = {block}", M.dense(M.block_causal(prompt_length, block), total)),
              ("block-causal, B = 1", M.dense(M.block_causal(prompt_length, 1), total)),
              ("MAGNET: one span over the target", M.dense(M.magnet([(prompt_length, total)]), total))]
    equal_05 = torch.equal(M.dense(M.block_causal(prompt_length, length), total), notebook05)
    equal_magnet = torch.equal(panels[2][1], panels[3][1])
    labels = [f"p{i}" for i in range(prompt_length)] + [f"t{i}" for i in range(length)]
    kind = (torch.arange(total) >= prompt_length).long()
    fig, axes = plt.subplots(1, 4, figsize=(16, 4.4))
    for ax, (title, dense) in zip(axes, panels):
        draw_mask(ax, dense, title, query_kind=kind, labels=labels)
    fig.suptitle(f"block-causal with B = N equals notebook 05's mask: {equal_05}; with B = 1 it equals MAGNET's "
                 f"one-span mask: {equal_magnet}. Rows are queries (green: targets), columns keys.", fontsize=9)
    fig.tight_layout()
    return fig


def proof_figure(moved: torch.Tensor, reach: torch.Tensor, changed: int, prompt_length: int, block: int) -> plt.Figure:
    """Notebook 01's proof figure (measured change of every hidden state when token ``changed`` is replaced, next to
    the mask's reachability) for block-causal attention, with the prompt and block boundaries drawn."""
    fig = influence_figure(moved, reach, changed, title=f"block-causal, prompt {prompt_length}, blocks of {block}: "
                                                        f"measured == predicted: {bool(torch.equal(moved > 0, reach))}")
    for ax in fig.axes:
        ax.axvline(prompt_length - 0.5, color="black", lw=0.8)
        for edge in range(prompt_length + block, moved.shape[1], block):
            ax.axvline(edge - 0.5, color="gray", lw=0.5, ls=":")
    return fig


def _commit_states(sampled: Sampled, row: int) -> np.ndarray:
    states = []
    for step in sampled.trace:
        before = ~step.masked[row]
        state = np.where(step.committed[row], 1, np.where(before & ~step.remasked[row], 2, 0))
        state = np.where(step.remasked[row], 3, state)
        states.append(state if step.edited is None else np.where(step.edited[row], 4, state))
    return np.array(states)


def _draw_commit_map(ax, sampled: Sampled, title: str, row: int = 0) -> None:
    states = _commit_states(sampled, row)
    ax.imshow(states, cmap=ListedColormap(_STATES), vmin=0, vmax=len(_STATES) - 1, aspect="auto",
              interpolation="nearest")
    ax.set_yticks(range(len(states)), [f"t={i} (+{int(c.sum())})" for i, c in
                                       enumerate(step.committed[row] for step in sampled.trace)], fontsize=6)
    block = sampled.config.block_length
    length = states.shape[1]
    for edge in range(block or length, length, block or length):
        ax.axvline(edge - 0.5, color="black", lw=0.8)
    ax.set_xticks(np.arange(-0.5, length, 1), minor=True)
    ax.grid(which="minor", color="#e0e0e0", lw=0.4)
    ax.tick_params(which="minor", length=0)
    edits = sum(int(step.edited[row].sum()) for step in sampled.trace if step.edited is not None)
    extra = f", {edits} edits" if edits else ""
    ax.set_title(f"{title}: {sampled.forward_passes} forward passes{extra}", fontsize=8)


def commit_map_figure(sampled: Sampled, tokenizer, title: str = "", row: int = 0) -> plt.Figure:
    """Position × step map of one decode: when each target token was committed (and, for mask-predict, re-masked);
    black lines are block boundaries. The final text is printed under it."""
    length = sampled.tokens.shape[1]
    fig, ax = plt.subplots(figsize=(min(0.3 * length + 2.5, 16), 0.3 * len(sampled.trace) + 1.8))
    _draw_commit_map(ax, sampled, title or _describe(sampled.config), row)
    ax.set_xlabel("target position")
    text = tokenizer.decode(sampled.tokens[row], skip_special_tokens=True) if tokenizer is not None else ""
    ax.legend(handles=[Patch(facecolor=color, edgecolor="#999999", label=label)
                       for color, label in zip(_STATES, _STATE_LABELS)], fontsize=6, ncol=5,
              loc="upper center", bbox_to_anchor=(0.5, -0.25 if text else -0.15), frameon=False)
    if text:
        ax.text(0.0, -0.5, f"final: {text[:160]!r}", transform=ax.transAxes, fontsize=7, va="top")
    fig.tight_layout()
    return fig


def anatomy_figure(traces: dict[str, Sampled], row: int = 0) -> plt.Figure:
    """One commit map per sampler, same prompt and length (LLaDA §2.4 and App. B.3, Fast-dLLM §3.3, notebook 05)."""
    length = next(iter(traces.values())).tokens.shape[1]
    heights = [len(sampled.trace) + 2 for sampled in traces.values()]
    fig, axes = plt.subplots(len(traces), 1, figsize=(min(0.3 * length + 3, 16), 0.22 * sum(heights) + 1.2),
                             gridspec_kw={"height_ratios": heights})
    for ax, (name, sampled) in zip(np.atleast_1d(axes), traces.items()):
        _draw_commit_map(ax, sampled, name, row)
    np.atleast_1d(axes)[-1].set_xlabel("target position")
    fig.legend(handles=[Patch(facecolor=color, edgecolor="#999999", label=label)
                        for color, label in zip(_STATES, _STATE_LABELS)], fontsize=7, ncol=5, loc="lower center",
               frameon=False)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def _describe(config: SamplerConfig) -> str:
    rule = f"threshold τ={config.threshold:g}" if config.threshold is not None else f"T={config.steps}"
    blocks = f"B={config.block_length}" if config.block_length else "one block"
    editing = f", editing τ_e={config.editing_threshold:g}" if config.editing_threshold is not None else ""
    noise = ", uniform corruption" if config.corruption == "uniform" else ""
    return (f"{config.remasking}, {rule}, {blocks}, {config.attention}, temperature {config.temperature:g}"
            f"{editing}{noise}")


def sampler_view(backend: MaskedLM, prompt: torch.Tensor, steps: int = 8, block_length: int = 32,
                 remasking: str = "low_confidence", threshold: float = 0.0, temperature: float = 1.0,
                 length: int = 32, seed: int = 0, attention: str = "full") -> plt.Figure:
    """Widget: decode ``prompt`` with the chosen switches and draw the commit map. ``block_length >= length`` is one
    block; ``threshold`` 0 leaves the step schedule in charge, above 0 it is Fast-dLLM's τ (steps then unused)."""
    config = SamplerConfig(steps=int(steps), block_length=None if block_length >= length else int(block_length),
                           remasking=remasking, threshold=None if threshold == 0 else threshold,
                           temperature=temperature, top_p=0.9, attention=attention)
    config.layout(int(length))  # a setting that does not fit is refused before anything runs
    sampled = mechanism.sample(backend, prompt, int(length), config, seed=seed)
    return commit_map_figure(sampled, backend.tokenizer)


def _bars(ax, scores, names, metric: str, label: str, log: bool = False) -> None:
    values = [scores.values.loc[name, metric] for name in names]
    low = [value - scores.low.loc[name, metric] for name, value in zip(names, values)]
    high = [scores.high.loc[name, metric] - value for name, value in zip(names, values)]
    x = np.arange(len(names))
    ax.bar(x, values, yerr=[low, high], color="#6baed6", capsize=3)
    ax.set_xticks(x, names, rotation=35, ha="right", fontsize=7)
    ax.set_title(label, fontsize=9)
    if log:
        ax.set_yscale("log")


def samplers_figure(scores, names: list[str]) -> plt.Figure:
    """The sampler table as bars with 95% bootstrap intervals over prompts: judge PPL, Distinct-4 and LR-5."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, (metric, label, log) in zip(axes, [("PPL", "perplexity under the causal base model ↓", True),
                                               ("D-4", "Distinct-4 (%) ↑", False),
                                               (f"LR-{LR_N}", f"LR-{LR_N} (%) ↓", False)]):
        _bars(ax, scores, names, metric, label, log)
    fig.tight_layout()
    return fig


def judges_figure(scores, mauve, names: list[str]) -> plt.Figure:
    """Each sampler row under both judges: the causal judge's perplexity (left, lower reads better, and lower for
    repeated text too) against MAUVE with the human continuations of the same prompts (right, higher is closer to
    the human text; MAUVE §3), both with 95% bootstrap intervals over prompts; the marker's colour is the row's D-4."""
    rows = [name for name in names if name in mauve.labels and name != mauve.reference]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(rows) + 1.6), sharey=True)
    positions = np.arange(len(rows))
    distinct = np.array([scores.values.loc[name, "D-4"] for name in rows])
    ppl = np.array([scores.values.loc[name, "PPL"] for name in rows])
    ppl_err = [ppl - np.array([scores.low.loc[name, "PPL"] for name in rows]),
               np.array([scores.high.loc[name, "PPL"] for name in rows]) - ppl]
    found = np.array([mauve.interval(name) for name in rows])
    for ax, values, errors, label in ((axes[0], ppl, ppl_err, "perplexity under the causal judge ↓"),
                                      (axes[1], found[:, 0], [found[:, 0] - found[:, 1], found[:, 2] - found[:, 0]],
                                       "MAUVE against the human continuations ↑")):
        ax.errorbar(values, positions, xerr=errors, fmt="none", ecolor="grey", capsize=3)
        points = ax.scatter(values, positions, c=distinct, cmap="viridis", vmin=0, vmax=100, zorder=3)
        ax.set_title(label, fontsize=9)
    axes[0].set_xscale("log")
    axes[0].axvline(scores.values.loc[mauve.reference, "PPL"], color="black", lw=0.8, ls=":", label="human text")
    axes[0].legend(fontsize=8, loc="lower right")
    axes[1].set_xlim(0, 1.02)
    axes[0].set_yticks(positions, rows, fontsize=8)
    axes[0].invert_yaxis()
    fig.colorbar(points, ax=axes, label="Distinct-4 (%)", fraction=0.03)
    return fig


def steps_figure(scores, step_grid, steps: int, main_row: str) -> plt.Figure:
    """Quality against the number of steps T (LLaDA App. B.6, Fig. 5): low-confidence sampling, one block."""
    names = [main_row if value == steps else steps_row(value) for value in step_grid]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, metric, label in zip(axes, ("PPL", "D-4"), ("perplexity under the causal base model", "Distinct-4 (%)")):
        values = np.array([scores.values.loc[name, metric] for name in names])
        low = values - np.array([scores.low.loc[name, metric] for name in names])
        high = np.array([scores.high.loc[name, metric] for name in names]) - values
        ax.errorbar(list(step_grid), values, yerr=[low, high], marker="o", capsize=3)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("steps T (forward passes)")
        ax.set_title(label, fontsize=9)
    fig.tight_layout()
    return fig


def likelihood_figure(study: LikelihoodStudy, bins: int) -> plt.Figure:
    """Left: each adapter's bound (LLaDA Eq. 6, one block) and its NLL at block size 1 (BD3-LM's tight end), nats per
    token with bootstrap intervals over blocks. Right: masked-token accuracy against the mask ratio."""
    from ... import metrics

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    names = list(study.bound)
    width = 0.38
    for offset, (label, series) in zip((-width / 2, width / 2),
                                       (("bound, one block (Eq. 6)", {n: study.bound[n].per_token() for n in names}),
                                        ("NLL at block size 1", study.causal))):
        intervals = [metrics.bootstrap_interval(series[name].tolist()) for name in names]
        values = [value for value, _, _ in intervals]
        errors = [[value - low for value, low, _ in intervals], [high - value for value, _, high in intervals]]
        left.bar(np.arange(len(names)) + offset, values, width, yerr=errors, capsize=3, label=label)
    left.set_xticks(range(len(names)), names, fontsize=8)
    left.set_ylabel("nats per token")
    left.legend(fontsize=7)
    for name in names:
        table = study.accuracy_by_ratio(name, bins)
        right.plot([(entry["low"] + entry["high"]) / 2 for entry in table], [100 * entry["accuracy"] for entry in table],
                   marker="o", label=name)
    right.axvline(0.2, color="gray", ls=":", lw=0.8, label="MNTP's fixed 20 %")
    right.set_xlabel("mask ratio l / L")
    right.set_ylabel("masked-token accuracy (%)")
    right.legend(fontsize=7)
    fig.tight_layout()
    return fig
