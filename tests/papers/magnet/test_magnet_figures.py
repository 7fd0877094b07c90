"""MAGNET's figures (seed 000): the budget check's held-out curve draws each run and MAGNET's last-quarter fit."""
import pytest

from helpers import metrics
from helpers.papers.magnet import figures


def test_heldout_curve_figure_draws_each_run_and_the_last_quarter_line():
    records = [{"step": step, "acc": 0.1 + 0.002 * step} for step in range(0, 101, 5)]
    plateau = metrics.plateau(records, "acc")
    fig = figures.heldout_curve_figure({"MAGNET": records, "other": records[:3]}, "acc", plateau)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["MAGNET", "other", "least-squares line"]
    fitted = ax.lines[-1]
    assert list(fitted.get_xdata()) == [75, 80, 85, 90, 95, 100]  # the last quarter of 0..100
    assert fitted.get_ydata()[-1] == pytest.approx(0.3)  # an exact line is fitted exactly
    assert "still moving" in ax.get_title()
    flat = [{"step": step, "acc": 0.3 + (0.001 if step % 10 else -0.001)} for step in range(0, 101, 5)]
    fig = figures.heldout_curve_figure({"MAGNET": flat}, "acc", metrics.plateau(flat, "acc"))
    assert "flat: holds 0" in fig.axes[0].get_title()
