"""EMAT's settings per profile (seed 004, App. C, Table 8)."""
from __future__ import annotations


from helpers import profiles
from helpers.papers.emat import settings


def test_settings_cover_every_profile_and_follow_table_8():
    assert set(settings.SETTINGS) == set(profiles.PROFILE_NAMES)
    paper = settings.SETTINGS["paper"]
    assert (paper.training.batch_size, paper.training.lr, paper.training.emat_epochs, paper.training.gru_epochs) == (128, 1e-3, 2, 10)
    assert (paper.training.gru_layers, paper.training.gru_dropout, paper.training.teacher_forcing) == (2, 0.2, 0.5)
    assert paper.data.max_sentences_per_phrase == 50
