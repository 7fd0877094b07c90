"""MAGNET's settings per profile: App. A's values in the ``paper`` entry, and checked inputs."""
import pytest

from helpers import profiles
from helpers.papers.magnet.settings import SETTINGS, MagnetSettings


def test_settings_cover_every_profile():
    assert set(SETTINGS) == set(profiles.PROFILE_NAMES)
    paper = SETTINGS["paper"]
    assert (paper.phase1_steps, paper.phase2_steps, paper.lambda_sscl, paper.temperature) == (3400, 800, 9.0, 0.1)
    assert (paper.max_spans, paper.span_min, paper.span_max, paper.seq_len) == (2, 4, 128, 512)
    assert paper.batch_size * paper.grad_accum == 32 and paper.lr == 3e-5
    assert profiles.settings_for("magnet", profiles.get("smoke")) is SETTINGS["smoke"]


def test_settings_refuse_too_small_an_sscl_batch():
    with pytest.raises(ValueError, match="sscl_batch_size=1"):
        MagnetSettings(seq_len=32, batch_size=2, phase1_steps=1, phase2_steps=1, lr=1e-3, train_blocks=4,
                       span_min=2, span_max=4, sscl_batch_size=1)
