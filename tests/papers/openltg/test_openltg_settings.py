"""Notebook 05's settings per profile (seed 002 §5.1 at the ``paper`` profile)."""
from __future__ import annotations

from helpers import masks as M, mntp_recipe
from helpers import metrics, profiles, training
from helpers.papers.openltg import settings


def test_settings_cover_every_profile_and_the_paper_entry_holds_section_5_1():
    assert set(settings.SETTINGS) == set(profiles.PROFILE_NAMES)
    for name in profiles.PROFILE_NAMES:
        assert profiles.settings_for("openltg", profiles.get(name)) is settings.SETTINGS[name]
    paper = settings.SETTINGS["paper"]
    assert (paper.iterations, paper.beta, paper.top_p, paper.fixed_window, paper.alpha_min, paper.alpha_max) == \
        (8, 1.8, 0.9, 64, 0.125, 0.75)
    assert paper.masked_lm == "FacebookAI/roberta-base"
    for entry in settings.SETTINGS.values():
        entry.decode_config()  # every profile's settings are valid
        assert entry.probe_position < entry.trace_length


def test_dswa_constants_come_from_the_shared_masks_module():
    """Eq. 7's S_fix, α_min and α_max are typed once, in helpers.masks; every profile but smoke keeps them."""
    for name, entry in settings.SETTINGS.items():
        assert (entry.alpha_min, entry.alpha_max) == (M.DSWA_ALPHA_MIN, M.DSWA_ALPHA_MAX)
        assert entry.fixed_window == (8 if name == "smoke" else M.DSWA_FIXED_WINDOW)
        config = entry.decode_config()
        assert (config.fixed_window, config.alpha_min, config.alpha_max) == (entry.fixed_window, entry.alpha_min,
                                                                             entry.alpha_max)


def test_curve_points_count_notebook_02s_evaluations_in_the_last_half_of_training():
    """Every held-out curve the declarations name gets a count; the cpu profile records enough for the equivalence
    test, and the count follows the recipe (evaluations at step 0, every eval_every steps and the last step)."""
    from helpers.papers.openltg import report

    named = {declared.curve for declared in report.CLAIMS.values() if declared.curve}
    for name in profiles.PROFILE_NAMES:
        counts = settings.curve_points(profiles.get(name))
        assert set(counts) == named == {mntp_recipe.MNTP_HELDOUT_CURVE}
        recipe = mntp_recipe.MASKED_LM_RECIPES[name]
        steps = sorted({*range(0, recipe.steps, recipe.eval_every), recipe.steps})
        assert counts[mntp_recipe.MNTP_HELDOUT_CURVE] == sum(step >= recipe.steps / 2 for step in steps)
    assert settings.curve_points(profiles.get("cpu"))[mntp_recipe.MNTP_HELDOUT_CURVE] >= metrics.STOP_MIN_POINTS
    assert all(declared.reaches_either_verdict(settings.curve_points(profiles.get("cpu")))
               for declared in report.CLAIMS.values() if declared.kind == "finding" and not declared.regime)
