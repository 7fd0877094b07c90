"""Notebook 01's figures and widget views: the lecture's attention matrices and the gallery of every mask.

The lecture's bidirectional and unidirectional matrices (seed 001), MAGNET Fig. 2 (seed 000 §3.1), sequence
repetition's Fig. 1 blocks and the measured shares (seed 003 §2), OpenLTG's DSWA band and Eq. 7 schedule (seed 002
§4.1), middle-layer unmasking (seed 003 App. A.3.1), a real model's attention under three masks, and the proof
that the hidden states that move are the ones the mask reaches. Every function returns a figure; the notebook shows
and saves it with ``plots.show``. Drawing tools shared by every notebook (``draw_mask``, ``token_labels``, the
colours) stay in :mod:`helpers.plots.core`.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

from ... import masks as M
from ...plots.core import CONTEXT_COLOR, as_numpy, draw_mask


# --- The lecture (seed 001) ---

def lecture_masks_figure(length: int = 4) -> plt.Figure:
    """Seed 001's bidirectional and unidirectional attention matrices, with q_i·k_j in each cell."""
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.6))
    for ax, (mask, title) in zip(axes, [(M.bidirectional, "bidirectional (encoder, BERT)"),
                                        (M.causal, "unidirectional / causal (decoder, GPT)")]):
        allowed = M.dense(mask, length)
        text = [[f"q{q + 1}·k{k + 1}" if allowed[q, k] else "-∞" for k in range(length)] for q in range(length)]
        draw_mask(ax, allowed, title, labels=[f"{i + 1}" for i in range(length)], cell_text=text)
    fig.suptitle("Seed 001: attention matrices, upper triangle set to -inf for the decoder")
    fig.tight_layout()
    return fig


# --- MAGNET Fig. 2 ---

def _spans(*pairs: tuple[int, int]) -> list[tuple[int, int]]:
    """Widget spans: a pair with start >= end means 'no span'."""
    return [(int(s), int(e)) for s, e in pairs if e > s]


def magnet_figure(length: int = 10, spans_c: Sequence[tuple[int, int]] = ((3, 7),),
                  spans_d: Sequence[tuple[int, int]] = ((1, 4), (6, 9))) -> plt.Figure:
    """MAGNET Fig. 2 (a)-(d): causal, bidirectional, one span, several spans."""
    panels = [("(a) causal = one span over all", [(0, length)]), ("(b) bidirectional = no span", []),
              (f"(c) one span {list(spans_c)}", list(spans_c)), (f"(d) spans {list(spans_d)}", list(spans_d))]
    fig, axes = plt.subplots(1, 4, figsize=(15, 4))
    for ax, (title, spans) in zip(axes, panels):
        mask = M.magnet(spans)
        draw_mask(ax, M.dense(mask, length), title, query_kind=M.span_ids(torch.arange(length), spans))
    fig.suptitle("MAGNET Fig. 2: blue rows are context tokens, green rows span tokens, dark cells -inf")
    fig.tight_layout()
    return fig


def magnet_view(span_start: int = 3, span_end: int = 7, second_start: int = 0, second_end: int = 0,
                length: int = 12) -> plt.Figure:
    """Widget: a MAGNET mask with up to two spans (a span with start >= end is off).

    Overlapping spans or a span past ``length`` raise ValueError (from ``masks.magnet`` / ``masks.dense``).
    """
    spans = _spans((span_start, span_end), (second_start, second_end))
    allowed = M.dense(M.magnet(spans), length)  # checks before a figure opens
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    draw_mask(ax, allowed, f"MAGNET, length {length}, spans {spans}", query_kind=M.span_ids(torch.arange(length), spans))
    fig.tight_layout()
    return fig


# --- Sequence repetition Fig. 1 ---

def repetition_figure(tokens: str = "ABC", r: int = 2, measured: dict[int, float] | None = None,
                      max_r: int = 8) -> plt.Figure:
    """SR Fig. 1: the k² block matrix of a repeated sequence, blocks annotated, and the (k-1)/(k+1) curve.

    ``measured`` maps r to a share of attention mass in full blocks measured on a real model.
    """
    layout = M.Repetition(len(tokens), r)
    fig, (ax, curve) = plt.subplots(1, 2, figsize=(10, 4.4), gridspec_kw={"width_ratios": [1.1, 1]})
    draw_mask(ax, M.dense(layout.mask, layout.length), f"'{tokens}' with r={r} (k={layout.k})",
              labels=list(tokens) * layout.k)
    _label_blocks(ax, layout, 0.8 * min(fig.get_size_inches()[0] * 1.1 / 2.1, fig.get_size_inches()[1]))
    rs = np.arange(0, max_r + 1)
    curve.plot(rs, [M.bidirectional_block_share(int(x)) for x in rs], "o-", label="analytic (k-1)/(k+1)")
    if measured:
        keys = sorted(measured)
        curve.plot(keys, [measured[x] for x in keys], "s--", label="measured attention mass (mean over layers)")
    curve.axvline(r, color="gray", lw=0.8, ls=":")
    curve.set_xlabel("repetitions r (k = r + 1 copies)")
    curve.set_ylabel("share in fully bidirectional blocks")
    curve.set_ylim(0, 1)
    curve.legend(loc="lower right")
    curve.set_title("SR §2: bidirectional share")
    fig.tight_layout()
    return fig


_BLOCK_EDGES = {"full": "#08519c", "lower": "#31a354", "zero": "#bdbdbd"}


def _label_blocks(ax, layout: M.Repetition, axis_inches: float) -> None:
    """Outline the k x k blocks; name each (A_ij and its kind) where a block is wide enough, else by one letter
    (F full, L lower, 0 zero) explained in a legend, so the labels stay readable at r >= 5."""
    n, k = layout.n, layout.k
    block_points = axis_inches * 72 / k
    spelled = block_points >= 34
    fontsize = 7 if spelled else max(5.5, min(9.0, 0.45 * block_points))
    for i in range(k):
        for j in range(k):
            kind = layout.block_kind(i, j)
            ax.add_patch(Rectangle((j * n - 0.5, i * n - 0.5), n, n, fill=False, lw=1.6, edgecolor=_BLOCK_EDGES[kind]))
            text = f"A{i + 1}{j + 1}\n{kind}" if spelled else {"full": "F", "lower": "L", "zero": "0"}[kind]
            ax.text(j * n + (n - 1) / 2, i * n + (n - 1) / 2, text, ha="center", va="center", fontsize=fontsize,
                    fontweight="normal" if spelled else "bold", color="black" if kind != "zero" else "white")
    if not spelled:
        ax.set_title(f"{ax.get_title()}\nblocks: F full, L lower triangle, 0 zero")


def repetition_view(r: int = 2) -> plt.Figure:
    """Widget: the repeated 'ABC' for r repetitions."""
    return repetition_figure("ABC", r)


def block_shares_figure(measured: dict[int, torch.Tensor], model_label: str = "") -> plt.Figure:
    """Per-layer share of attention mass in full blocks for each r, with the analytic block share as dashes."""
    fig, ax = plt.subplots(figsize=(7, 4))
    palette = plt.get_cmap("viridis")
    keys = sorted(measured)
    for index, r in enumerate(keys):
        color = palette(index / max(1, len(keys) - 1))
        shares = as_numpy(measured[r])
        ax.plot(np.arange(len(shares)), shares, "-", color=color, label=f"r={r}")
        ax.axhline(M.bidirectional_block_share(r), color=color, ls="--", lw=0.8)
    ax.set_xlabel("layer")
    ax.set_ylabel("attention mass in full blocks")
    ax.set_ylim(0, 1)
    ax.set_title(f"SR §2 measured on {model_label}: solid measured, dashed (k-1)/(k+1)")
    ax.legend(ncol=len(keys), fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


# --- OpenLTG Fig. 3 and Eq. 7 ---

def dswa_figure(source_length: int = 6, target_length: int = 18, window: int = 6, num_layers: int = 12,
                fixed_window: int = M.DSWA_FIXED_WINDOW, alpha_min: float = M.DSWA_ALPHA_MIN,
                alpha_max: float = M.DSWA_ALPHA_MAX) -> plt.Figure:
    """OpenLTG Fig. 3 (the window band with its source columns) and the Eq. 7 per-layer window schedule (the
    paper's S_fix, α_min and α_max by default)."""
    length = source_length + target_length
    schedule = M.dswa_window_schedule(num_layers, fixed_window, alpha_min, alpha_max)  # checks before a figure opens
    allowed = M.dense(M.dswa(source_length, window), length)
    fig, (ax, sched) = plt.subplots(1, 2, figsize=(10.5, 4.4))
    kind = (torch.arange(length) >= source_length).long()
    draw_mask(ax, allowed, f"DSWA: source {source_length}, window {window}", query_kind=kind,
              labels=[f"s{i}" for i in range(source_length)] + [f"t{i}" for i in range(target_length)])
    ax.add_patch(Rectangle((-0.5, -0.5), source_length, length, fill=False, lw=2, edgecolor="#e6550d"))
    layers = np.arange(1, num_layers + 1)
    sched.bar(layers, schedule, color="#fdae6b")
    sched.axhline(alpha_min * fixed_window, color="gray", ls="--", lw=0.8, label="α_min · S_fix")
    sched.set_xlabel(f"layer i (of {num_layers})")
    sched.set_ylabel("S_win")
    sched.set_title(f"Eq. 7: max(α_min, (L-i)/L·α_max)·S_fix\nS_fix={fixed_window}, α_min={alpha_min:g}, "
                    f"α_max={alpha_max:g}, L={num_layers}")
    sched.legend()
    fig.tight_layout()
    return fig


def dswa_view(window: int = 6, alpha_min: float = M.DSWA_ALPHA_MIN, alpha_max: float = M.DSWA_ALPHA_MAX,
              num_layers: int = 12, fixed_window: int = M.DSWA_FIXED_WINDOW) -> plt.Figure:
    """Widget: DSWA band and the Eq. 7 schedule; bind ``num_layers`` to the model's depth (α_min > α_max raises)."""
    return dswa_figure(window=window, num_layers=num_layers, fixed_window=fixed_window, alpha_min=alpha_min,
                       alpha_max=alpha_max)


# --- Middle-layer unmasking (SR App. A.3.1) ---

def middle_unmasking_figure(depths: Sequence[int] = (30, 32), labels: Sequence[str] | None = None) -> plt.Figure:
    """Which layers lose the causal mask (App. A.3.1), one row per model depth."""
    labels = labels or [f"{depth} layers" for depth in depths]
    width = max(depths)
    grid = np.full((len(depths), width), np.nan)
    for row, depth in enumerate(depths):
        grid[row, :depth] = [mask is M.bidirectional for mask in M.middle_unmasking(depth)]
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.55 * len(depths)))
    ax.imshow(np.ma.masked_invalid(grid), cmap=ListedColormap([CONTEXT_COLOR, "#fd8d3c"]), vmin=0, vmax=1, aspect="auto")
    for row, depth in enumerate(depths):
        lower, upper = M.middle_unmasked_layers(depth)
        ax.text(width - 0.5, row, f"  layers {lower}-{upper} bidirectional", va="center", fontsize=8)
    ax.set_yticks(range(len(depths)), labels)
    ax.set_xticks(range(0, width, 2))
    ax.set_xlabel("layer index (orange: bidirectional, blue: causal)")
    ax.set_title("SR App. A.3.1 middle-layer unmasking")
    fig.tight_layout()
    return fig


# --- Real attention and the proof ---

def attention_view(maps: dict[str, torch.Tensor], tokens: Sequence[str], layer: int = 0, head: int = 0,
                   named_masks: dict | None = None) -> plt.Figure:
    """Widget: one layer and head of a real model's attention weights under each mask.

    Colours follow the square root of the weight, so that small weights stay visible; with ``named_masks``
    (the masks that produced ``maps``, same names) the cells each mask hides are hatched.
    """
    from matplotlib.collections import PatchCollection
    from matplotlib.colors import PowerNorm

    first = next(iter(maps.values()))
    layer = M.check_layer(layer, first.shape[0])
    try:
        whole = not isinstance(head, (bool, str)) and int(head) == head and 0 <= head < first.shape[1]
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole:
        raise ValueError(f"head={head!r} must be a whole number in 0..{first.shape[1] - 1} ({first.shape[1]} heads)")
    head = int(head)
    if named_masks is not None and set(named_masks) != set(maps):
        raise ValueError(f"named_masks has {sorted(named_masks)} but maps has {sorted(maps)}; expected the same names")
    length = first.shape[-1]
    fig, axes = plt.subplots(1, len(maps), figsize=(4.4 * len(maps) + 0.8, 4.6), squeeze=False, layout="constrained")
    norm = PowerNorm(gamma=0.5, vmin=0, vmax=1)
    for ax, (name, weights) in zip(axes[0], maps.items()):
        image = ax.imshow(as_numpy(weights[layer, head]), cmap="magma", norm=norm)
        if named_masks is not None:
            hidden = ~as_numpy(M.dense(named_masks[name], length)).astype(bool)
            cells = [Rectangle((k - 0.5, q - 0.5), 1, 1) for q, k in zip(*np.nonzero(hidden))]
            ax.add_collection(PatchCollection(cells, facecolor="#d9d9d9", edgecolor="#737373", hatch="////", lw=0))
        ax.set_title(f"{name}: layer {layer}, head {head}")
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=7)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    fig.colorbar(image, ax=list(axes[0]), fraction=0.02, pad=0.02,
                 label="attention weight (square-root scale)" + ("; hatched: masked (-inf)" if named_masks else ""))
    return fig


def influence_figure(moved: torch.Tensor, reach: torch.Tensor, position: int, title: str = "") -> plt.Figure:
    """Measured change of each hidden state (layers x positions) next to the reachability the mask predicts."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.imshow(np.log10(as_numpy(moved) + 1e-12), aspect="auto", cmap="viridis", vmin=-6)
    left.set_title(f"measured log10 max|Δh| after changing token {position}")
    right.imshow(as_numpy(reach), aspect="auto", cmap=ListedColormap(["#f0f0f0", "#3182bd"]))
    right.set_title("predicted: reachable from that token")
    for ax in (left, right):
        ax.set_xlabel("position")
        ax.set_ylabel("layer")
        ax.axvline(position, color="red", lw=0.8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
