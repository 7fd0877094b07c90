"""Notebook 02's figures: Fig. 7 draws one line per run and the reference levels; the masking widget writes each
objective's target at the output that predicts it."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from helpers import models  # noqa: E402
from helpers.papers.mntp import figures  # noqa: E402


def test_fig7_draws_each_run_and_each_reference():
    runs = {name: [{"step": 0, "eval_accuracy": 0.1}] + [{"step": s, "loss": 3.0 / s} for s in range(1, 5)]
            + [{"step": 4, "eval_accuracy": 0.2}] for name in ("MNTP", "MTP")}
    fig = figures.training_curves_figure(runs, {"causal base, MNTP labels": 0.3})
    loss_ax, acc_ax = fig.axes
    assert [line.get_label() for line in loss_ax.get_lines()] == ["MNTP", "MTP"]
    assert [line.get_label() for line in acc_ax.get_lines()] == ["MNTP", "MTP", "causal base, MNTP labels"]
    assert list(acc_ax.get_lines()[0].get_ydata()) == [0.1, 0.2]
    plt.close(fig)


@pytest.mark.parametrize("objective, shift", [("mntp", 1), ("mtp", 0)])
def test_masking_view_puts_the_target_under_the_output_that_predicts_it(objective, shift):
    _, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    fig = figures.masking_view(tokenizer, "one two three four five six seven eight nine ten", ratio=0.5,
                               objective=objective, seed=3)
    texts = {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_text() for t in fig.axes[0].texts
             if t.get_position()[0] >= 0}
    targets = {column: text for (column, row), text in texts.items() if row == 0 and text}
    assert targets
    for column, target in targets.items():
        assert texts[(column + shift, 2)] == target  # MNTP: output l shows token l + 1; MTP: token l itself
    plt.close(fig)
