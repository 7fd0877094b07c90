"""Notebook 01's sizes: one entry per profile, read through ``profiles.settings_for``."""
import dataclasses

import pytest

from helpers import profiles
from helpers.papers.lecture.settings import SETTINGS


def test_every_profile_has_the_notebooks_sizes():
    assert set(SETTINGS) == set(profiles.PROFILE_NAMES)
    for name in profiles.PROFILE_NAMES:
        assert profiles.settings_for("lecture", profiles.get(name)) is SETTINGS[name]
    smoke, cpu = SETTINGS["smoke"], SETTINGS["cpu"]
    assert (smoke.example_sentence_max_tokens, smoke.sr_repeats, smoke.sr_sentences, smoke.sr_sentence_max_tokens) == \
        (12, (0, 1, 2), 1, 6)
    assert (cpu.example_sentence_max_tokens, cpu.sr_repeats, cpu.sr_sentences, cpu.sr_sentence_max_tokens) == \
        (24, (0, 1, 2, 4, 8), 4, 12)
    assert [(SETTINGS[name].sr_sentences, SETTINGS[name].sr_sentence_max_tokens) for name in ("gpu", "paper")] == \
        [(16, 24), (32, 32)]


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="r=-1"):
        dataclasses.replace(SETTINGS["cpu"], sr_repeats=(0, -1))
    with pytest.raises(ValueError, match="sr_sentences=0"):
        dataclasses.replace(SETTINGS["cpu"], sr_sentences=0)
