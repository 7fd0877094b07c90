"""Notebook 02's sizes per profile: the masked-LM recipe (MAGNET App. A; App. E, Fig. 7).

The recipe's dataclass and values stay in :mod:`helpers.training` (``MaskedLMRecipe``, ``MASKED_LM_RECIPES``):
the MNTP adapter that notebooks 03, 05 and 06 read is keyed by it (``training.mntp_adapter``), and
``training.load_or_train_mntp`` trains the short fallback adapter from it when notebook 02 has not run. The
``paper`` entry holds App. A's values: 4200 iterations of batch 32 x 512 tokens at lr 3e-5.
"""
from ...training import MASKED_LM_RECIPES as SETTINGS
from ...training import MaskedLMRecipe

__all__ = ["SETTINGS", "MaskedLMRecipe"]
