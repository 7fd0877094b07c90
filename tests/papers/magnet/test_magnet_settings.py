"""MAGNET's settings per profile: App. A's values in the ``paper`` entry, and checked inputs."""
import pytest

from helpers import mntp_recipe, profiles
from helpers.papers.magnet.settings import SETTINGS, MagnetSettings


def test_settings_cover_every_profile():
    assert set(SETTINGS) == set(profiles.PROFILE_NAMES)
    paper = SETTINGS["paper"]
    assert (paper.phase1_steps, paper.phase2_steps, paper.lambda_sscl, paper.temperature) == (3400, 800, 9.0, 0.1)
    assert (paper.max_spans, paper.span_min, paper.span_max, paper.seq_len) == (2, 4, 128, 512)
    assert paper.batch_size * paper.grad_accum == 32 and paper.lr == 3e-5
    assert profiles.settings_for("magnet", profiles.get("smoke")) is SETTINGS["smoke"]


def test_settings_refuse_too_small_an_sscl_batch_and_no_simcse_cadence():
    with pytest.raises(ValueError, match="sscl_batch_size=1"):
        MagnetSettings(seq_len=32, batch_size=2, phase1_steps=1, phase2_steps=1, lr=1e-3, train_blocks=4,
                       span_min=2, span_max=4, sscl_batch_size=1)
    with pytest.raises(ValueError, match="simcse_eval_every=0"):
        MagnetSettings(seq_len=32, batch_size=2, phase1_steps=1, phase2_steps=1, lr=1e-3, train_blocks=4,
                       span_min=2, span_max=4, simcse_eval_every=0)


def test_curve_every_must_keep_fig6s_first_and_last_points_on_evaluation_steps():
    options = dict(seq_len=32, batch_size=2, phase1_steps=8, phase2_steps=4, lr=1e-3, train_blocks=4, span_min=2,
                   span_max=4, eval_every=2)
    assert MagnetSettings(**options, curve_every=4).curve_every == 4
    assert MagnetSettings(**options).curve_every is None  # Fig. 6 at every evaluation
    assert MagnetSettings(**options, curve_every=8).curve_every == 8  # the last step (12) is added by the evaluator
    for bad in (3, 0):  # not a multiple of eval_every; not positive
        with pytest.raises(ValueError, match=f"curve_every={bad}"):
            MagnetSettings(**options, curve_every=bad)
    cpu = SETTINGS["cpu"]  # the budget check keeps 11 held-out points in the last half; Fig. 6 keeps 6 points
    assert cpu.total_steps // cpu.eval_every + 1 == 21 and cpu.total_steps // cpu.curve_every + 1 == 6


def test_curve_points_count_the_evaluations_in_the_last_half_of_training_from_the_settings():
    from helpers import metrics, training
    from helpers.papers.magnet.settings import MAGNET_HELDOUT_CURVE, curve_points

    cpu = SETTINGS["cpu"]
    steps = range(0, cpu.total_steps + 1, cpu.eval_every)
    counted = curve_points("cpu")
    assert counted[MAGNET_HELDOUT_CURVE] == len([s for s in steps if s >= cpu.total_steps / 2]) == 11
    assert counted[mntp_recipe.MNTP_HELDOUT_CURVE] >= metrics.STOP_MIN_POINTS  # notebook 02's MNTP run, every 5 steps
    assert curve_points(profiles.get("smoke")) == curve_points("smoke")
