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


def test_a_head_setting_that_is_not_a_positive_whole_number_is_refused_by_name():
    import pytest

    for name, bad in (("gru_evals_per_epoch", 0), ("emat_evals_per_epoch", 0), ("gru_epochs", 0), ("batch_size", 2.5), ("gru_pretrain_steps", -1)):
        with pytest.raises(ValueError, match=name):
            settings.HeadTraining(**{name: bad})
    assert settings.HeadTraining(gru_pretrain_steps=0).gru_pretrain_steps == 0  # no pre-training is allowed


def test_the_cpu_gru_trains_half_table_8s_epochs_with_enough_dev_points_for_its_stopping_test():
    from helpers import metrics

    cpu = settings.SETTINGS["cpu"].training
    assert settings.SETTINGS["paper"].training.gru_epochs == 10  # Table 8
    assert cpu.gru_epochs == 5  # its dev loss bottomed at epoch 3-4 of 10 in three seeds; for make reproduce's time
    assert settings.curve_points("cpu")[settings.GRU_CURVE] >= metrics.STOP_MIN_POINTS


def test_both_cpu_emat_heads_keep_table_8s_two_epochs_with_enough_dev_points_for_the_stopping_test():
    from helpers import metrics

    cpu = settings.SETTINGS["cpu"].training
    assert cpu.emat_epochs == settings.SETTINGS["paper"].training.emat_epochs == 2  # Table 8
    points = settings.curve_points(profiles.get("cpu"))  # a Profile or its name
    assert points[settings.EMAT_CURVE] >= metrics.STOP_MIN_POINTS
    assert points[settings.EMAT_NEW_ROWS_CURVE] >= metrics.STOP_MIN_POINTS
    assert settings.curve_points("smoke")[settings.EMAT_CURVE] < metrics.STOP_MIN_POINTS  # smoke keeps few points


def test_curve_points_count_the_evaluations_train_head_makes_in_the_last_half():
    # train_head evaluates at step 0, every steps_per_epoch // evals_per_epoch steps and at the end
    assert settings.evaluations_in_last_half(epochs=2, evals_per_epoch=3, steps_per_epoch=6) == 4  # 6, 8, 10, 12
    assert settings.evaluations_in_last_half(epochs=2, evals_per_epoch=6, steps_per_epoch=42) == 7  # 42, 49, ..., 84
    assert settings.evaluations_in_last_half(epochs=2, evals_per_epoch=1, steps_per_epoch=42) == 2  # 42, 84
    assert settings.evaluations_in_last_half(epochs=1, evals_per_epoch=1, steps_per_epoch=5) == 1  # 5
    for profile in settings.SETTINGS:
        training = settings.SETTINGS[profile].training
        assert settings.curve_points(profile)[settings.EMAT_CURVE] <= settings.evaluations_in_last_half(
            training.emat_epochs, training.emat_evals_per_epoch, 42)  # the fewest over every epoch length
