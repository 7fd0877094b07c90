"""The shared drawing tools: saving and showing figures, the mask heatmap, and the widget helpers.

Every figure and widget view of a paper lives in its package (``helpers.papers.<paper>.figures``); a view is a plain
function returning a figure, opened as a widget with :func:`interactive_view` and also called directly.
"""
from .core import (CONTEXT_COLOR, MASKED_COLOR, SPAN_COLOR, as_numpy, draw_mask, interactive_view, render_view,
                   save_figure, seed_spread_figure, show, token_labels, view_controls, view_defaults)

__all__ = ["CONTEXT_COLOR", "MASKED_COLOR", "SPAN_COLOR", "as_numpy", "draw_mask", "interactive_view", "render_view",
           "save_figure", "seed_spread_figure", "show", "token_labels", "view_controls", "view_defaults"]
