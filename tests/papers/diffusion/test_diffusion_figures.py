"""Notebook 07's figures and widget view: each returns one figure; a bad widget setting is one line."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

from helpers import models, plots  # noqa: E402
from helpers.masked_lm import MNTPDecoder  # noqa: E402
from helpers.papers.diffusion import experiment, figures, mechanism, settings  # noqa: E402

SMOKE = settings.SETTINGS["smoke"]


def _backend():
    torch.manual_seed(0)
    return MNTPDecoder(LlamaForCausalLM(models.tiny_random_config(40, num_layers=2, pad_token_id=1)).eval(), None, 0,
                       pad_id=1)


def test_the_mask_figure_says_which_masks_are_the_same():
    fig = figures.block_masks_figure(4, 12, 4)
    assert len(fig.axes) == 4 and "notebook 05's mask: True" in fig._suptitle.get_text()
    assert "one-span mask: True" in fig._suptitle.get_text()
    plt.close(fig)


def test_commit_maps_draw_one_row_per_step():
    backend = _backend()
    traces = {name: mechanism.sample(backend, torch.tensor([5, 9, 12]), 8, config)
              for name, config in experiment.anatomy_rows(SMOKE).items()}
    fig = figures.anatomy_figure(traces)
    assert len(fig.axes) == len(traces)
    for ax, sampled in zip(fig.axes, traces.values()):
        assert ax.images[0].get_array().shape == (len(sampled.trace), 8)
    plt.close(fig)
    states = figures._commit_states(traces[experiment.MASK_PREDICT], 0)
    assert (states[-1] != 0).all()  # nothing masked after the last step


def test_the_widget_view_draws_and_a_bad_setting_is_one_line():
    backend = _backend()
    plt.close("all")
    fig = figures.sampler_view(backend, torch.tensor([5, 9, 12]), steps=4, block_length=8, length=8, threshold=0.3,
                               temperature=0.0)
    assert isinstance(fig, plt.Figure)
    plt.close(fig)
    for kwargs, expected in ((dict(steps=3, block_length=4, length=8), "not a multiple of the 2 blocks"),
                             (dict(steps=16, block_length=8, length=8), "at most one step per token"),
                             (dict(remasking="lowest"), "remasking")):
        message = plots.render_view(figures.sampler_view, backend=backend, prompt=torch.tensor([5, 9]), **kwargs)
        assert isinstance(message, str) and "\n" not in message and expected in message
    assert plt.get_fignums() == []
