"""The forward process's shared constants, read by the sampler (:mod:`.mechanism`) and by the objective and bound
(:mod:`.mechanism_likelihood`): which corruption replaces a token (LLaDA's mask token, or DiffusionGemma's uniformly
random token), the time floor ε, and the check of a choice among named options."""
from __future__ import annotations

CORRUPTIONS = ("mask", "uniform")
TIME_EPSILON = 1e-3  # LLaDA GUIDELINES.md and SMDM: p_mask = (1 - ε) t + ε, so no sequence goes unmasked


def _choice(value, name: str, options: tuple) -> str:
    """``value`` when it is one of ``options``, else a ValueError naming ``name``."""
    if value not in options:
        raise ValueError(f"{name}={value!r} must be one of {options}")
    return value
