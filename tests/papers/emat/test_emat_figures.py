"""EMAT's completion widget (notebook 06)."""
from __future__ import annotations

import pytest

from helpers.papers.emat import experiment, figures, mechanism, settings

SETTINGS = settings.SETTINGS["smoke"]


def test_completion_view_returns_one_panel_per_method(tiny_mlm, tiny_gru):
    emat = mechanism.build_emat(tiny_mlm, ["Mr. Darcy", "Netherfield Park"])
    completer = experiment.Completer(tiny_mlm, emat, tiny_gru(), mechanism.LengthClassifier(tiny_mlm.hidden_size),
                                     SETTINGS, max_steps=3)
    figure = figures.completion_view(completer, "It was [MASK] who spoke.", k=4)
    assert [ax.get_title() for ax in figure.axes] == ["EMAT", "GRU decoder", "single-token MLM"]
    assert all(len(ax.patches) == 4 for ax in figure.axes)
    with pytest.raises(ValueError, match="sentence="):
        figures.completion_view(completer, "no marker", k=4)
