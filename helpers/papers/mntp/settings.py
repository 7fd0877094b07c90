"""Notebook 02's sizes per profile: the masked-LM recipe (MAGNET App. A; App. E, Fig. 7).

The recipe's dataclass and values stay in :mod:`helpers.mntp_recipe` (``MaskedLMRecipe``, ``MASKED_LM_RECIPES``):
the MNTP adapter that notebooks 03, 05 and 06 read is keyed by it (``mntp_adapter.mntp_adapter``), and
``mntp_adapter.load_or_train_mntp`` trains the short fallback adapter from it when notebook 02 has not run. The
``paper`` entry holds App. A's values: 4200 iterations of batch 32 x 512 tokens at lr 3e-5.
"""
from ... import metrics
from ...seeds import StudySeed
from ...mntp_recipe import MASKED_LM_RECIPES as SETTINGS
from ...mntp_recipe import MNTP_HELDOUT_CURVE, MaskedLMRecipe

__all__ = ["MTP_LOSS_CURVE", "SETTINGS", "STUDY_SEED", "MaskedLMRecipe", "curve_points"]

# App. E's premise, "with MTP, the loss converges": the curve whose stop lets its accuracy trend read either way
MTP_LOSS_CURVE = "notebook 02's MTP training loss (negated, so training raises it)"

# How a seed study's seed reaches the recipe (helpers.profiles.settings_for): it holds no seed; notebook 02's runs
# read the profile's seed (part of every run key and of the adapter the other notebooks load).
STUDY_SEED = StudySeed()


def curve_points(profile) -> dict[str, int]:
    """Per curve notebook 02's claims rest on, its points in the last half of training under ``profile`` (a profile
    or its name), from :data:`SETTINGS`: the MNTP run's held-out masked-token accuracy (its evaluations) and the MTP
    run's training loss (one point a step)."""
    recipe = SETTINGS[getattr(profile, "name", profile)]
    return {MNTP_HELDOUT_CURVE: metrics.points_in_window(metrics.evaluation_steps(recipe.steps, recipe.eval_every)),
            MTP_LOSS_CURVE: metrics.points_in_window(range(1, recipe.steps + 1))}
