"""Notebook 05's figures (OpenLTG, seed 002): mask-predict traces (Fig. 2), LTD (Fig. 4), the masks mask-predict feeds
the model (§4.1), the ablation (Table 6), speed (Fig. 5), and the decoding widget."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Patch, Rectangle

from ... import masks as M
from ...masked_lm import MaskedLM
from ...plots.core import draw_mask, token_labels
from .experiment import function_word_share, is_function_word, ltd_entropies, speed_ratios
from .mechanism import DecodeConfig, Decoded, generation_mask, mask_predict
from .report import PAPER_TABLE4, PAPER_TABLE6

__all__ = ["trace_figure", "ltd_figure", "decoding_view", "generation_masks_figure", "ablation_figure", "speed_figure"]

_MASKED = "#bdbdbd"  # entered the iteration as <mask>
_REMASKED = "#fb6a4a"  # re-masked after the iteration (lowest confidence)
_KEPT = "#ffffff"
_FUNCTION = "#9e9ac8"
_CONTENT = "#74c476"


def _short(text: str, width: int = 9) -> str:
    """A token for a cell: newlines shown, scripts the default font lacks replaced by '?', cut to ``width``."""
    text = "".join(ch if ord(ch) < 0x0530 or ch in "…⏎·" else "?" for ch in text.replace("\n", "⏎"))
    return text if len(text) <= width else text[:width - 1] + "…"


def _token_grid(ax, decoded: Decoded, tokenizer, row: int, columns: int) -> None:
    """Tokens per iteration (rows of cells): gray = was <mask>, red = re-masked afterwards."""
    trace = decoded.trace
    length = decoded.tokens.shape[1]
    lines_per_step = -(-length // columns)
    total_lines = len(trace) * (lines_per_step + 1)
    for index, iteration in enumerate(trace):
        labels = token_labels(tokenizer, iteration.tokens[row].tolist())
        top = index * (lines_per_step + 1)
        ax.text(-0.3, top + lines_per_step / 2 - 0.5, f"t={iteration.step}\nT_t={iteration.temperature:.2f}\n"
                f"masked {int(iteration.masked[row].sum())}", ha="right", va="center", fontsize=7)
        for position in range(length):
            line, column = divmod(position, columns)
            y = top + line
            color = _REMASKED if iteration.remasked[row, position] else _MASKED if iteration.masked[row, position] else _KEPT
            ax.add_patch(Rectangle((column, y - 0.45), 0.96, 0.9, facecolor=color, edgecolor="#d9d9d9", lw=0.5))
            ax.text(column + 0.48, y, _short(labels[position]), ha="center", va="center", fontsize=6)
    ax.set_xlim(-0.1, columns)
    ax.set_ylim(total_lines - 0.5, -0.7)
    ax.axis("off")
    kept = "not masked (SMART resamples it too)" if decoded.config.update_all else "kept from an earlier iteration"
    ax.legend(handles=[Patch(facecolor=_MASKED, label="was <mask>: newly sampled"),
                       Patch(facecolor=_REMASKED, label="re-masked for the next iteration"),
                       Patch(facecolor=_KEPT, edgecolor="#d9d9d9", label=kept)],
              loc="upper center", bbox_to_anchor=(0.5, 1.06), ncol=3, fontsize=7, frameon=False)


def _candidate_histogram(ax, logits: torch.Tensor, tokenizer, temperature: float, top_k: int, title: str) -> None:
    probs = torch.softmax(logits.float() / temperature, -1)
    values, ids = probs.topk(top_k)
    labels = [tokenizer.decode([i]) for i in ids.tolist()]
    colors = [_FUNCTION if is_function_word(label) else _CONTENT for label in labels]
    ax.barh(np.arange(top_k), values.numpy(), color=colors)
    ax.set_yticks(np.arange(top_k), [_short(repr(label.strip())[1:-1] or "·", 12) for label in labels], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("probability")
    share = function_word_share(tokenizer, logits, temperature=temperature, top_k=top_k)
    ax.set_title(f"{title}\nfunction words: {share:.0%} of the top-{top_k} mass", fontsize=8)
    ax.legend(handles=[Patch(facecolor=_FUNCTION, label="function word / punctuation"),
                       Patch(facecolor=_CONTENT, label="content word")], fontsize=6, loc="lower right")


def trace_figure(decoded: Decoded, tokenizer, row: int = 0, columns: int = 16, top_k: int = 50,
                 title: str = "") -> plt.Figure:
    """OpenLTG Fig. 2: the target after each iteration, re-masked tokens highlighted, and the output
    distribution at iteration 1 for the probe position (when one was recorded)."""
    if not 0 <= row < decoded.tokens.shape[0]:
        raise ValueError(f"row={row} is out of range for a batch of {decoded.tokens.shape[0]}")
    probe = decoded.config.probe_position
    width = 0.62 * min(columns, decoded.tokens.shape[1]) + 2
    lines = len(decoded.trace) * (-(-decoded.tokens.shape[1] // columns) + 1)
    histogram_height = 0.11 * top_k + 1.2 if probe is not None else 0
    fig = plt.figure(figsize=(width + (3.6 if probe is not None else 0), max(3.5, 0.28 * lines + 1.2, histogram_height)))
    grid = fig.add_gridspec(1, 2 if probe is not None else 1, width_ratios=[width, 3.6] if probe is not None else [1])
    _token_grid(fig.add_subplot(grid[0, 0]), decoded, tokenizer, row, columns)
    if probe is not None:
        first = decoded.trace[0]
        _candidate_histogram(fig.add_subplot(grid[0, 1]), first.probe_logits[row], tokenizer, 1.0, top_k,
                             f"iteration 1, target position {probe}, at T = 1")
    prompt = tokenizer.decode(decoded.prompts[row], skip_special_tokens=True)
    config = decoded.config
    fig.suptitle(title or f"mask-predict, T={config.iterations}, β={config.beta:.3g}, LTD {'on' if config.ltd else 'off'}, "
                 f"DSWA {'on' if config.dswa else 'off'} (S_fix={config.fixed_window}), top-p {config.top_p:.3g}\n"
                 f"prompt: {_short(prompt[-90:], 100)!r}", fontsize=8)
    fig.tight_layout()
    return fig


def ltd_figure(decoded: Decoded, tokenizer, row: int = 0, top_k: int = 15) -> plt.Figure:
    """OpenLTG Fig. 4: iteration 1's distribution at the probe position re-estimated at each T_t of Eq. 8 (flatter,
    then more peaked than at T = 1), and the entropy at that position through the actual decode, with LTD and at T = 1."""
    stats = ltd_entropies(decoded, row)
    trace = decoded.trace
    first_logits = trace[0].probe_logits[row]
    ids = first_logits.topk(top_k).indices
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(trace)))
    for iteration, color in zip(trace, colors):
        probs = torch.softmax(first_logits.float() / iteration.temperature, -1)[ids]
        left.plot(np.arange(top_k), probs.numpy(), marker="o", ms=3, color=color, label=f"T_{iteration.step}={iteration.temperature:.2f}")
    raw = torch.softmax(first_logits.float(), -1)[ids]
    left.plot(np.arange(top_k), raw.numpy(), color="black", ls="--", lw=1.2, label="T = 1")
    left.set_xticks(np.arange(top_k), [_short(tokenizer.decode([i]).strip() or "·", 8) for i in ids.tolist()],
                    rotation=70, fontsize=7)
    left.set_ylabel("probability")
    left.set_title(f"position {decoded.config.probe_position}: iteration 1's logits re-estimated at each T_t")
    left.legend(fontsize=6, ncol=2)
    steps = [s["step"] for s in stats]
    right.plot(steps, [s["entropy_ltd"] for s in stats], marker="o", label="entropy with LTD (T_t)")
    right.plot(steps, [s["entropy_t1"] for s in stats], marker="s", ls="--", label="entropy at T = 1")
    right.set_xlabel("iteration t")
    right.set_ylabel("entropy (nats)")
    twin = right.twinx()
    twin.plot(steps, [s["temperature"] for s in stats], color="#e6550d", lw=1, label="T_t = β(1 - t/T)")
    twin.axhline(1.0, color="#e6550d", lw=0.6, ls=":")
    twin.set_ylabel("temperature", color="#e6550d")
    handles = right.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    right.legend(handles=handles, fontsize=7, loc="upper right")
    right.set_title("the decode itself: entropy at each iteration's T_t vs T = 1")
    fig.tight_layout()
    return fig


def decoding_view(backend: MaskedLM, prompt: torch.Tensor, beta: float = 1.8, iterations: int = 8,
                  window: int = M.DSWA_FIXED_WINDOW, top_p: float = 0.9, length: int = 32, probe_position: int = 7,
                  seed: int = 0, ltd: bool = True, dswa: bool = True) -> plt.Figure:
    """Widget: rerun mask-predict with β, T, S_fix and top-p, and show the trace (Fig. 2 style)."""
    config = DecodeConfig(iterations=int(iterations), beta=beta, top_p=top_p, fixed_window=int(window), ltd=ltd,
                          dswa=dswa, probe_position=min(int(probe_position), int(length) - 1))
    decoded = mask_predict(backend, prompt, int(length), config, seed=seed)
    return trace_figure(decoded, backend.tokenizer)


def generation_masks_figure(backend: MaskedLM, source_length: int = 5, target_length: int = 14,
                            fixed_window: int = 8, alpha_min: float = M.DSWA_ALPHA_MIN,
                            alpha_max: float = M.DSWA_ALPHA_MAX) -> plt.Figure:
    """The masks mask-predict feeds the model: no DSWA, and DSWA in the first and last layer (Eq. 7)."""
    length = source_length + target_length
    schedule = M.dswa_window_schedule(backend.num_layers, fixed_window, alpha_min, alpha_max)
    panels = [("no DSWA (mixed attention)", None), (f"DSWA, layer 1: S_win={schedule[0]}", schedule[0]),
              (f"DSWA, layer {backend.num_layers}: S_win={schedule[-1]}", schedule[-1])]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.3))
    labels = [f"p{i}" for i in range(source_length)] + [f"t{i}" for i in range(target_length)]
    kind = (torch.arange(length) >= source_length - backend.offset).long()
    for ax, (title, window) in zip(axes, panels):
        mask = generation_mask(source_length, window)
        draw_mask(ax, M.dense(mask, length), title, query_kind=kind, labels=labels)
    fig.suptitle(f"{backend.kind} backend: output at l - {backend.offset} predicts token l; green rows predict targets",
                 fontsize=9)
    fig.tight_layout()
    return fig


def ablation_figure(table, paper_dataset: str, lr_n: int) -> plt.Figure:
    """Table 6 as bars: our LR-n, D-4 and perplexity per system, the paper's values as black ticks."""
    paper = {**PAPER_TABLE6[paper_dataset], **PAPER_TABLE4[paper_dataset]}
    metrics = [(f"LR-{lr_n}", "Rep", f"LR-{lr_n} (%) ↓"), ("D-4", "Dist", "Distinct-4 (%) ↑"), ("PPL", "PPL", "perplexity")]
    names = list(table.index)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (ours, theirs, label) in zip(axes, metrics):
        x = np.arange(len(names))
        ax.bar(x, table[ours].values, color="#6baed6", label="ours")
        reference = [paper.get("AR (BART)" if name.startswith("AR") else name, {}).get(theirs, np.nan) for name in names]
        ax.scatter(x, reference, marker="_", s=400, color="black", label=f"paper ({paper_dataset})", zorder=3)
        ax.set_xticks(x, names, rotation=30, ha="right", fontsize=7)
        ax.set_title(label)
        if ours == "PPL":
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def speed_figure(rows: Sequence[dict], device_label: str = "") -> plt.Figure:
    """OpenLTG Fig. 5: tokens/s against target length for mask-predict (one line per T) and AR; and the ratios."""
    import pandas as pd

    frame = pd.DataFrame(list(rows)).groupby(["method", "iterations", "length"], as_index=False)["tokens_per_s"].median()
    ratios = speed_ratios(list(rows))  # median over timing seeds
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for steps, group in frame[frame.method == "mask-predict"].groupby("iterations"):
        left.plot(group.length, group.tokens_per_s, marker="o", label=f"mask-predict T={steps}")
    ar = frame[frame.method == "AR"]
    left.plot(ar.length, ar.tokens_per_s, marker="s", color="black", ls="--", label="AR + KV cache")
    left.set_xlabel("target length")
    left.set_ylabel("tokens / s (batch 1)")
    left.set_yscale("log")
    left.legend(fontsize=7)
    left.set_title(f"decoding speed {device_label}".strip())
    for label, values in ratios.iterrows():
        right.plot(ratios.columns, values.values, marker="o", label=label)
    right.axhline(1.0, color="black", lw=0.8)
    right.axhline(5.0, color="gray", ls=":", lw=0.8, label="5×")
    right.set_xlabel("target length")
    right.set_ylabel("speed-up over AR")
    right.legend(fontsize=7)
    right.set_title("mask-predict tokens/s ÷ AR tokens/s, same run")
    fig.tight_layout()
    return fig
