"""Notebook 01's sizes, one entry per profile: the sentences its real-model sections read.

The DSWA figure uses Eq. 7's constants as the paper sets them (``masks.DSWA_FIXED_WINDOW``, ``DSWA_ALPHA_MIN``,
``DSWA_ALPHA_MAX``): they are the figure's defaults, the same in every profile.
"""
from __future__ import annotations

from dataclasses import dataclass

from ... import masks as M
from ...checks import whole_number
from ...seeds import StudySeed


@dataclass(frozen=True)
class LectureSettings:
    """How much text notebook 01 runs through the profile's model."""

    # Section 6: the sentence whose attention maps are drawn under three masks (and changed in section 7's proof).
    example_sentence_max_tokens: int = 24
    # Section 3: SR's block shares measured on held-out sentences of at most sr_sentence_max_tokens tokens,
    # repeated r times for each r in sr_repeats.
    sr_repeats: tuple[int, ...] = (0, 1, 2, 4, 8)
    sr_sentences: int = 4
    sr_sentence_max_tokens: int = 12

    def __post_init__(self):
        whole_number(self.example_sentence_max_tokens, "example_sentence_max_tokens", 1)
        for r in self.sr_repeats:
            M.check_repeats(r)
        whole_number(self.sr_sentences, "sr_sentences", 1)
        whole_number(self.sr_sentence_max_tokens, "sr_sentence_max_tokens", 1)


# How a seed study's seed reaches these settings (helpers.profiles.settings_for): they hold no seed; notebook 01 draws
# its example tensors from the profile's seed.
STUDY_SEED = StudySeed()

SETTINGS = {
    "smoke": LectureSettings(example_sentence_max_tokens=12, sr_repeats=(0, 1, 2), sr_sentences=1,
                             sr_sentence_max_tokens=6),
    "cpu": LectureSettings(),
    "gpu": LectureSettings(sr_sentences=16, sr_sentence_max_tokens=24),
    "paper": LectureSettings(sr_sentences=32, sr_sentence_max_tokens=32),
}


def curve_points(profile) -> dict[str, int]:
    """Held-out curve name -> evaluations in the last half of training under ``profile``: none here, since notebook 01
    trains nothing and every row is a definition check."""
    SETTINGS[profile.name]  # an unknown profile is an error, as for every other package
    return {}
