"""Sequence repetition's settings (seed 003): every profile, App. A.4's values at ``paper``, bad values refused."""
import dataclasses

import pytest

from helpers import memory, profiles, schedules
from helpers.papers.sequence_repetition.settings import SETTINGS, TaggerTraining


def test_settings_cover_every_profile_and_the_paper_entry_holds_appendix_a4():
    assert set(SETTINGS) == {"smoke", "cpu", "gpu", "paper"}
    paper = SETTINGS["paper"]
    recipe = paper.training
    assert (recipe.lora_r, recipe.lora_alpha, recipe.lora_dropout) == (16, 16, 0.1)
    assert (recipe.lr, recipe.weight_decay, recipe.batch_size * recipe.grad_accum) == (2e-4, 0.05, 32)
    assert paper.seeds == (5, 29, 42, 81, 123) and paper.max_tokens == 256 and recipe.qlora
    assert paper.repeats == (0, 1, 2, 4, 8) and set(paper.baselines) == {"middle", "full"}
    assert paper.dataset == "conll2003" and SETTINGS["cpu"].dataset == "silver"
    # the departure: a constant learning rate (the authors' code's warm-up, none), not its decay over the length
    assert all(entry.training.lr_schedule == schedules.WarmupConstant(warmup=0) for entry in SETTINGS.values())


def test_settings_refuse_a_negative_r():
    with pytest.raises(ValueError, match="r=-1"):
        dataclasses.replace(SETTINGS["cpu"], repeats=(0, -1))


def test_training_settings_refuse_unknown_policies():
    with pytest.raises(ValueError, match="pad_policy='loose'"):
        TaggerTraining(pad_policy="loose")
    with pytest.raises(ValueError, match="lr_schedule='cosine'"):
        SETTINGS["cpu"].with_training(lr_schedule="cosine")


def test_profiles_and_the_memory_fit_read_the_nested_training_settings():
    for name in ("smoke", "cpu", "gpu", "paper"):
        assert profiles.settings_for("sequence_repetition", profiles.get(name)) is SETTINGS[name]
    fitted = memory.with_micro_batch(SETTINGS["gpu"], 2, 16)
    assert (fitted.training.batch_size, fitted.training.grad_accum) == (2, 16)
    assert dataclasses.replace(fitted, training=SETTINGS["gpu"].training) == SETTINGS["gpu"]
    work = memory.workload("04", profiles.get("gpu"))
    recipe = SETTINGS["gpu"].training
    assert (work.micro_batch, work.grad_accum) == (recipe.batch_size, recipe.grad_accum)


def test_curve_points_count_the_validation_evaluations_in_the_last_half_of_training():
    from helpers import metrics
    from helpers.papers.sequence_repetition import report
    from helpers.papers.sequence_repetition.settings import TAGGER_CURVE, curve_points, tagger_evaluation_steps

    cpu = SETTINGS["cpu"].training
    assert tagger_evaluation_steps(cpu) == list(range(10, 401, 10))  # every 10 of 400 steps; step 0 is skipped
    assert curve_points("cpu") == {TAGGER_CURVE: 20} and curve_points("cpu")[TAGGER_CURVE] >= metrics.STOP_MIN_POINTS
    points = [(step, 1.0) for step in tagger_evaluation_steps(cpu)]
    assert metrics.stopped_improving(points).points == curve_points("cpu")[TAGGER_CURVE]
    assert {entry.curve for entry in report.CLAIMS.values() if entry.trained} == {TAGGER_CURVE}
    assert all(entry.reaches_either_verdict(curve_points("cpu")) for entry in report.CLAIMS.values()
               if entry.trained)
