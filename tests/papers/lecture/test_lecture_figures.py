"""Notebook 01's figures: the DSWA view draws the layers it is given, the attention view hatches exactly the masked
cells on a square-root scale, and the SR block labels stay readable at every r."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from helpers import masks as M  # noqa: E402
from helpers.papers.lecture import figures  # noqa: E402


def attention_maps(length=6, layers=2, heads=2):
    """Random attention weights under three masks (zero where each mask hides a key), and the masks."""
    named = {"causal": M.causal, "bidirectional": M.bidirectional, "MAGNET": M.magnet([(2, 4)])}
    hidden = {name: ~M.dense(mask, length) for name, mask in named.items()}
    weights = {name: torch.rand(layers, heads, length, length).masked_fill(hidden[name], float("-inf")).softmax(-1)
               for name in named}
    return weights, named


def test_dswa_view_draws_the_layers_it_is_given():
    fig = figures.dswa_view(num_layers=30)
    schedule = fig.axes[1]
    assert len(schedule.patches) == 30
    assert [round(bar.get_height()) for bar in schedule.patches] == M.dswa_window_schedule(30, 64)
    plt.close(fig)


def test_attention_view_hatches_exactly_the_masked_cells_on_a_sqrt_scale():
    from matplotlib.collections import PatchCollection
    from matplotlib.colors import PowerNorm

    maps, named = attention_maps(length=6)
    fig = figures.attention_view(maps, [f"t{i}" for i in range(6)], layer=1, head=1, named_masks=named)
    for ax, name in zip(fig.axes, maps):
        image = ax.get_images()[0]
        assert isinstance(image.norm, PowerNorm) and image.norm.gamma == 0.5
        hatched = [c for c in ax.collections if isinstance(c, PatchCollection)]
        hidden = int((~M.dense(named[name], 6)).sum())
        assert (len(hatched[0].get_paths()) if hatched else 0) == hidden
        if hidden:
            assert hatched[0].get_hatch() == "////"
    plt.close(fig)
    with pytest.raises(ValueError, match="named_masks"):
        figures.attention_view(maps, ["t"] * 6, named_masks={"causal": M.causal})


@pytest.mark.parametrize("r", range(0, 9))
def test_sr_block_labels_stay_readable(r):
    fig = figures.repetition_view(r=r)
    labels = [text for text in fig.axes[0].texts]
    assert len(labels) == (r + 1) ** 2  # one label per block
    assert min(text.get_fontsize() for text in labels) >= 7
    plt.close(fig)
