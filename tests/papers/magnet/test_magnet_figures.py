"""MAGNET's figures (seed 000): the budget check's held-out curve draws each run and MAGNET's last-quarter fit."""
import pytest

from helpers import metrics
from helpers.papers.magnet import figures


def test_heldout_curve_figure_draws_each_run_and_the_equivalence_tests_window_and_verdict():
    records = [{"step": step, "acc": 0.1 + 0.002 * step} for step in range(0, 101, 5)]
    rising = metrics.stopped_improving(metrics.curve_points(records, "acc"))
    fig = figures.heldout_curve_figure({"MAGNET": records, "other": records[:3]}, "acc", rising)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["MAGNET", "other", "least-squares line"]
    fitted = ax.lines[-1]
    assert list(fitted.get_xdata()) == list(range(50, 101, 5))  # the last half of 0..100, the test's window
    assert fitted.get_ydata()[-1] == pytest.approx(0.3)  # an exact line is fitted exactly
    assert "still improving" in ax.get_title()
    flat = [{"step": 0, "acc": 0.0}] + [{"step": step, "acc": 0.3 + (0.001 if step % 10 else -0.001)}
                                        for step in range(5, 101, 5)]
    stopped = metrics.stopped_improving(metrics.curve_points(flat, "acc"))
    assert stopped.stopped
    fig = figures.heldout_curve_figure({"MAGNET": flat}, "acc", stopped)
    assert "MAGNET: stopped at 100 steps" in fig.axes[0].get_title()


