"""Notebook 07's sizes: every profile's rows fit its target length, and the unmeasured profiles say so."""
from dataclasses import replace

import pytest

from helpers import metrics, mntp_recipe, profiles
from helpers.papers.diffusion import experiment, settings


@pytest.mark.parametrize("name", profiles.PROFILE_NAMES)
def test_every_row_and_the_anatomy_fit_their_lengths(name):
    chosen = settings.SETTINGS[name]
    for config in experiment.sampler_rows(chosen).values():
        config.layout(chosen.target_length)
    for config in experiment.anatomy_rows(chosen).values():
        config.layout(chosen.trace_length)
    assert chosen.steps in chosen.step_grid and min(chosen.step_grid) < chosen.steps
    assert chosen.trace_length in (4, 8, 16, 32)  # the widget's block-length options open at one block
    assert 1 <= chosen.trace_steps <= 32  # the widget's steps slider


def test_the_gpu_and_paper_sizes_are_marked_unmeasured():
    assert settings.SETTINGS["cpu"].measured and settings.SETTINGS["smoke"].measured
    assert not settings.SETTINGS["gpu"].measured and not settings.SETTINGS["paper"].measured
    gpu, cpu = settings.SETTINGS["gpu"], settings.SETTINGS["cpu"]
    assert gpu.num_prompts == 200 and gpu.fine_tune_steps > cpu.fine_tune_steps
    assert profiles.get("gpu").model_name != profiles.get("cpu").model_name  # the larger model is the profile's


def test_the_llada_and_mask_predict_rows_read_the_settings():
    cpu = settings.SETTINGS["cpu"]
    assert cpu.llada() == replace(cpu.llada(), steps=8, temperature=1.0, top_p=0.9)
    assert cpu.llada(2, remasking="random").steps == 2
    mask_predict = cpu.mask_predict()
    assert (mask_predict.schedule, mask_predict.confidence, mask_predict.ltd_beta) == ("mask-predict", "tempered", 1.8)


def test_a_study_seed_draws_the_fine_tune_and_the_samplers_and_keeps_the_prompts(monkeypatch):
    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    monkeypatch.setenv(profiles.SEED_VAR, "2")
    seeded = profiles.settings_for("diffusion")
    plain = settings.SETTINGS["cpu"]
    assert seeded.seed == 2 and seeded == replace(plain, seed=2)  # nothing else moves: same prompts, same blocks
    assert settings.STUDY_SEED.apply(plain, 0) is plain


def test_the_curve_counts_follow_the_evaluation_cadence():
    assert settings.evaluations_in_last_half(16, 1) == 9  # steps 8..16
    assert settings.evaluations_in_last_half(16, 2) == 5  # 8, 10, 12, 14, 16: too few for the equivalence test
    assert settings.evaluations_in_last_half(100, 0) == 1  # only the last step
    assert settings.evaluations_in_last_half(100, 30) == 3  # 60, 90 and the last step
    for name in ("cpu", "gpu", "paper"):
        points = settings.curve_points(profiles.get(name))
        recipe = mntp_recipe.MASKED_LM_RECIPES[name]
        assert points[mntp_recipe.MNTP_HELDOUT_CURVE] == settings.evaluations_in_last_half(recipe.steps, recipe.eval_every)
        assert points[settings.FINE_TUNE_HELDOUT_CURVE] >= metrics.STOP_MIN_POINTS


@pytest.mark.parametrize("field, value", [("draws", 0), ("draws", True), ("timing_processes", 0),
                                          ("timing_seeds", (0,))])
def test_a_bad_size_names_its_argument(field, value):
    with pytest.raises(ValueError, match=field):
        replace(settings.SETTINGS["smoke"], **{field: value})


def test_more_draws_prompts_or_timing_processes_find_the_same_fine_tune():
    smoke = profiles.get("smoke")
    chosen = settings.SETTINGS["smoke"]
    larger = replace(chosen, draws=chosen.draws + 3, num_prompts=chosen.num_prompts * 2,
                     timing_processes=chosen.timing_processes + 2)
    assert experiment.FineTuneKey.of(smoke, larger) == experiment.FineTuneKey.of(smoke, chosen)
    assert settings.SETTINGS["cpu"].draws >= 2 and settings.SETTINGS["cpu"].timing_processes >= 3
