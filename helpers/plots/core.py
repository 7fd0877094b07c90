"""Figures and widget callbacks. Every callback is a plain function that returns a figure.

Figures are saved with :func:`save_figure` into ``figures/`` at the repo root, with fixed
metadata so that a rerun on CPU writes the same bytes, and stamped with the run they show: the profile and the
fingerprint of the notebook's parameters cell (:func:`figure_stamp`), the one its claims file records.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap

from .. import ledger, profiles, store
from ..paths import figures_dir

MASKED_COLOR = "#595959"  # dark gray: -inf (MAGNET Fig. 2)
CONTEXT_COLOR = "#9ecae1"  # blue: a context query may attend
SPAN_COLOR = "#a1d99b"  # green: a span query may attend
_MASK_CMAP = ListedColormap([MASKED_COLOR, CONTEXT_COLOR, SPAN_COLOR])

matplotlib.rcParams.update({"figure.dpi": 100, "savefig.dpi": 110, "font.size": 9})


STAMP_ID = "workbook-run-stamp"  # the gid of the stamp's text artist, so that a figure saved twice has one stamp


def figure_stamp(name: str, shows: Sequence[str] = ()) -> str:
    """What run a figure ``<NN>_...`` shows: the profile (and a study's seed), the fingerprint of notebook NN's
    parameters cell (the ``parameters`` field of its claims file's provenance; every cell in ``shows`` ran under it),
    and those cells, or that no parameters cell ran."""
    profile = profiles.current().name
    if profiles.study_seed() is not None:
        profile += f" (study seed {profiles.study_seed()})"
    notebook = name[:2] if name[:2].isdigit() else ""
    made = ledger.current_parameters(notebook) if notebook else None
    where = f"notebook {notebook} · " if notebook else ""
    if made is None:
        return f"{where}profile {profile} · parameters not set"
    cells = f" · results of {', '.join(shows)}" if shows else ""
    return f"{where}profile {profile} · parameters {made.fingerprint}{cells}"


def _stamp(fig: plt.Figure, text: str) -> None:
    for artist in [artist for artist in fig.texts if artist.get_gid() == STAMP_ID]:
        artist.remove()
    fig.text(0.998, 0.002, text, ha="right", va="bottom", fontsize=6, color="#8c8c8c", gid=STAMP_ID)


def save_figure(fig: plt.Figure, name: str, shows: Sequence[str] = ()) -> Path:
    """Save ``fig`` as ``figures/<name>.png`` (repo root, whatever the working directory) and return the path.

    ``shows`` names the notebook's earlier cells whose results the figure draws (the names they gave
    ``params.computed``): the figure is refused, in one line (:class:`helpers.ledger.StaleResultsError`), when one of
    them ran under other parameters than the parameters cell now holds, and its stamp names them.

    The figure is stamped (a small grey line at its foot, and the PNG's ``Description``) with :func:`figure_stamp`,
    so a figure left from earlier parameters says so. The smoke profile writes to ``figures/smoke/`` (git-ignored),
    so tests never overwrite real figures, and a seed study's seed (``WORKBOOK_SEED``) to ``figures/study/seed-<s>/``
    (git-ignored), so the committed figures stay the single-seed run's.
    """
    if not name or "/" in name or name.endswith(".png"):
        raise ValueError(f"name={name!r} must be a bare figure name such as '01_magnet_masks'")
    folder = figures_dir() / "smoke" if profiles.current().name == "smoke" else figures_dir()
    if profiles.study_seed() is not None:  # a seed study's seed: beside the committed figures, never over them
        folder = folder / "study" / f"seed-{profiles.study_seed()}"
    path = folder / f"{name}.png"
    if name[:2].isdigit():
        ledger.check_shown(name[:2], shows, name)
    stamp = figure_stamp(name, shows)
    _stamp(fig, stamp)
    try:  # atomically: a full disk or a file-size limit leaves the previous figure as it was
        with store.atomic_write(path, "wb") as handle:
            fig.savefig(handle, format="png", bbox_inches="tight", metadata={"Software": None, "Description": stamp})
    except OSError as error:
        raise OSError(error.errno, f"could not write the figure {path} ({error.strerror or error}); the previous "
                                   f"figure there is unchanged. Free disk space (or raise the file-size limit) and "
                                   f"rerun the cell, or set WORKBOOK_ROOT to a writable folder") from error
    return path


def show(fig: plt.Figure, name: str, shows: Sequence[str] = ()) -> None:
    """Save ``fig`` under ``name`` (``shows``: the earlier cells whose results it draws, :func:`save_figure`),
    display it inline once, and close it.

    Returns None, so a cell ending in ``show(...)`` prints no ``PosixPath`` under the figure.
    """
    try:
        save_figure(fig, name, shows)
    except ledger.StaleResultsError:
        plt.close(fig)  # a refused figure is not shown either
        raise
    _display(fig)


def _display(fig: plt.Figure) -> None:
    try:
        from IPython.display import display
    except ImportError:  # plain Python: nothing to show on
        plt.close(fig)
        return
    display(fig)
    plt.close(fig)


# --- Widgets ---

def view_defaults(view) -> dict:
    """The keyword defaults of ``view`` (a function or a ``functools.partial``; a partial's keywords count as defaults)."""
    import inspect

    return {name: parameter.default for name, parameter in inspect.signature(view).parameters.items()
            if parameter.default is not inspect.Parameter.empty}


def _decimals(*numbers: float) -> int:
    """Decimals that show every value ``start + n * step`` of a slider exactly (0.1 -> 1, 0.025 -> 3)."""
    from decimal import Decimal

    return max(max(0, -Decimal(repr(float(number))).normalize().as_tuple().exponent) for number in numbers)


def view_controls(view, continuous_update: bool = True, **controls) -> dict:
    """One ipywidgets control per keyword, each opening at ``view``'s default for that argument.

    A control is ``(min, max)`` or ``(min, max, step)`` (an IntSlider for whole numbers, else a FloatSlider),
    a list of options (a Dropdown), ``str`` (a Text box, updated on Enter), or a ready widget. A slider or
    Dropdown needs a default inside its range; a ready widget must open at the default where there is one.
    ``continuous_update=False`` redraws only when a slider is released (for callbacks that take a while).
    """
    import ipywidgets as widgets

    defaults = view_defaults(view)
    name = getattr(view, "__name__", getattr(getattr(view, "func", None), "__name__", "view"))
    built = {}
    for argument, spec in controls.items():
        has_default = argument in defaults
        default = defaults.get(argument)
        if isinstance(spec, widgets.ValueWidget):
            if has_default and spec.value != default:
                raise ValueError(f"{argument}: the widget opens at {spec.value!r} but {name} defaults to {default!r}; "
                                 "give the widget value= the default (or bind the value into the view with partial)")
            built[argument] = spec
            continue
        if not has_default:
            raise ValueError(f"{argument}={spec!r}: {name} has no default for {argument!r}, so the control would "
                             "open at an arbitrary value; give the view a default (e.g. with functools.partial)")
        if spec is str:
            if not isinstance(default, str):
                raise ValueError(f"{argument}=str: {name}'s default {default!r} is not a string")
            built[argument] = widgets.Text(value=default, description=argument, continuous_update=False,
                                           layout={"width": "90%"})
        elif isinstance(spec, list):
            if default not in spec:
                raise ValueError(f"{argument}={spec!r}: {name}'s default {default!r} is not one of the options")
            built[argument] = widgets.Dropdown(options=spec, value=default, description=argument)
        elif isinstance(spec, tuple) and len(spec) in (2, 3):
            low, high = spec[0], spec[1]
            step = spec[2] if len(spec) == 3 else None
            if isinstance(default, bool) or not isinstance(default, (int, float)) or not low <= default <= high:
                raise ValueError(f"{argument}={spec!r}: {name}'s default {default!r} lies outside the range "
                                 f"[{low}, {high}]")
            whole = all(isinstance(value, int) for value in (low, high, default) + ((step,) if step else ()))
            if whole:
                built[argument] = widgets.IntSlider(value=default, min=low, max=high, step=step or 1,
                                                    description=argument, continuous_update=continuous_update)
            else:
                step = step or (high - low) / 20
                built[argument] = widgets.FloatSlider(value=default, min=low, max=high, step=step,
                                                      readout_format=f".{_decimals(low, step)}f", description=argument,
                                                      continuous_update=continuous_update)
        else:
            raise ValueError(f"{argument}={spec!r} is not a control; expected (min, max[, step]), a list of options, "
                             "str, or an ipywidgets widget")
        built[argument].style = {"description_width": "initial"}
    return built


def render_view(view, **kwargs):
    """Call ``view(**kwargs)``: its figure, or, when the settings are invalid, a one-line message.

    A figure the failed call left open is closed, so nothing leaks into later output.
    """
    before = set(plt.get_fignums())
    try:
        return view(**kwargs)
    except Exception as error:  # a widget shows one line, never a traceback
        for number in set(plt.get_fignums()) - before:
            plt.close(number)
        text = " ".join(str(error).split()) or type(error).__name__
        if not isinstance(error, ValueError):  # bad settings raise ValueError; anything else is a bug to report
            text = f"{type(error).__name__}: {text}"
        return text if len(text) <= 300 else text[:297] + "..."


def _widget_value(control):
    value = control.value
    if isinstance(value, float) and getattr(control, "step", None):
        return round(value, _decimals(control.min, control.step))  # 1.5999999999999999 -> 1.6
    return value


def interactive_view(view, continuous_update: bool = True, **controls):
    """An ipywidgets ``interactive`` over ``view`` (a plain function returning a figure), opening at its defaults.

    Controls are built by :func:`view_controls`. Invalid settings show a one-line message in place of the
    figure (see :func:`render_view`).
    """
    from html import escape

    from IPython.display import HTML, display
    from ipywidgets import interactive

    built = view_controls(view, continuous_update=continuous_update, **controls)

    def render(**kwargs):
        result = render_view(view, **{name: _widget_value(built[name]) for name in kwargs})
        if isinstance(result, str):
            display(HTML(f'<p class="widget-message" style="color:#a50f15">⚠ {escape(result)}</p>'))
        else:
            _display(result)

    render.__name__ = getattr(view, "__name__", "view")
    return interactive(render, **built)


def token_labels(tokenizer, ids) -> list[str]:
    """Readable token strings for axis labels (byte-level markers removed)."""
    return [tokenizer.convert_tokens_to_string([token]).strip() or "·" for token in tokenizer.convert_ids_to_tokens(list(ids))]


def as_numpy(matrix) -> np.ndarray:
    return matrix.detach().cpu().numpy() if isinstance(matrix, torch.Tensor) else np.asarray(matrix)


def draw_mask(ax, allowed, title: str = "", query_kind=None, labels: Sequence[str] | None = None,
              cell_text: Sequence[Sequence[str]] | None = None) -> None:
    """Draw a bool (L, L) mask: rows are queries, columns keys; allowed cells blue (context) or green (span)."""
    allowed = as_numpy(allowed).astype(bool)
    length = allowed.shape[0]
    kind = np.zeros(length, dtype=int) if query_kind is None else (as_numpy(query_kind) > 0).astype(int)
    image = np.where(allowed, 1 + kind[:, None], 0)
    ax.imshow(image, cmap=_MASK_CMAP, vmin=0, vmax=2)
    ax.set_xticks(np.arange(length) - 0.5, minor=True)
    ax.set_yticks(np.arange(length) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6 if length <= 40 else 0)
    ax.tick_params(which="minor", length=0)
    ticks = labels if labels is not None else [str(i) for i in range(length)]
    step = max(1, length // 16)
    ax.set_xticks(range(0, length, step), [ticks[i] for i in range(0, length, step)], rotation=90 if labels else 0)
    ax.set_yticks(range(0, length, step), [ticks[i] for i in range(0, length, step)])
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if cell_text is not None:
        for q in range(length):
            for k in range(length):
                ax.text(k, q, cell_text[q][k], ha="center", va="center", fontsize=7,
                        color="black" if allowed[q, k] else "white")
    ax.set_title(title)




def seed_spread_figure(rows: Sequence, title: str = "") -> plt.Figure:
    """A seed study's trained rows (:class:`helpers.ledger.Claim` with ``seed_values``), one line each: every seed's
    value as a dot, the seed mean as a bar with its interval (seeds with the test examples nested), and the paper's
    threshold as a tick, so the spread behind each verdict is seen. Each row on its own scale (the units differ)."""
    rows = [row for row in rows if row.seed_values]
    if not rows:
        raise ValueError("rows holds no row with seed_values; draw a seed study's combined rows "
                         "(helpers.ledger.combine_seeds)")
    fig, axes = plt.subplots(len(rows), 1, figsize=(7.5, 0.62 * len(rows) + 0.8), squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        seeds = np.asarray(row.seed_values, dtype=float)
        ax.hlines(0, row.low, row.high, color="#3182bd", linewidth=3, alpha=0.5)
        ax.plot([row.value], [0], "|", color="#08519c", markersize=14, markeredgewidth=2)
        ax.plot(seeds, np.zeros_like(seeds), "o", color="#e6550d", markersize=5, alpha=0.85, zorder=3)
        if row.direction:
            ax.axvline(row.threshold, color="#636363", linestyle="--", linewidth=1)
        span = [row.low, row.high, row.threshold if row.direction else row.low, *seeds]
        pad = 0.08 * (max(span) - min(span) or 1.0)
        ax.set_xlim(min(span) - pad, max(span) + pad)
        ax.set_yticks([])
        label = row.quantity or row.claim
        ax.set_title(f"{row.where}: {label[:90]} — {row.verdict}", fontsize=7, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(title or f"seed spread ({len(rows[0].seed_values)} seeds: dots; mean and interval: bar; "
                          "threshold: dashed)", fontsize=8)
    fig.tight_layout()
    return fig
