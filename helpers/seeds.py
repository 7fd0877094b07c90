"""Seeds: integers mixed into one seed, a random generator from them, and how a seed study's seed reaches a paper.

- :func:`mixed_seed` folds integers (a run's seed, a step, a micro-batch) into one seed, ``s ← (s · multiplier +
  part) mod (2⁶³ - 1)`` from ``s = start``, so a batch or a draw is a pure function of them.
  Two rules are in use, named by their multiplier: :data:`MIX_MULTIPLIER` (the batches and masks of the trained runs
  and held-out sets, EMAT's epoch orders; ``helpers.training.micro_batch_seed`` is the same fold from its salt,
  ``start=training.MICRO_BATCH_SALT``) and :data:`EPOCH_ORDER_MULTIPLIER` (sequence repetition's tagger epochs). They
  give different seeds, and trained runs rest on both, so both stay.
- :func:`seeded_generator`: a torch generator seeded with :func:`mixed_seed` of its parts, on a device (the CPU
  unless told). With one part it is that seed itself: ``seeded_generator(seed, device=device)`` is the generator a
  decode or a sampler draws from.
- :func:`draw_seeds`: the seeds of a prompt's sampling draws (notebooks 05 and 07): draw 0 is the seed itself, so
  one draw samples as a run without draws does.
- :class:`StudySeed`: how a seed study's seed (the profile's seed, ``WORKBOOK_SEED``) reaches a paper's settings.
  Each paper's settings module declares one as ``STUDY_SEED``, and :func:`helpers.profiles.settings_for` applies it:
  study seed ``s`` adds ``stride · s`` to each seed field it names. A paper whose settings name none reads
  ``profile.seed`` where it uses a seed (MAGNET's runs, notebook 01's example tensors, notebook 02's recipe), or
  takes the study seed only through notebook 02's adapter (notebook 05: its sampling seeds stay).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .checks import whole_number

MODULUS = 2**63 - 1  # the largest seed torch takes from every generator, so any mixed seed is a valid one
MIX_MULTIPLIER = 1_000_003  # a prime larger than any step or index a run counts
EPOCH_ORDER_MULTIPLIER = 100_003  # sequence repetition's taggers: an epoch's sentence order from (seed, epoch)
DRAW_STRIDE = 1_000_003  # draw d samples from seed + d x this: its batches' seeds never meet another draw's


def mixed_seed(*parts: int, multiplier: int = MIX_MULTIPLIER, start: int = 0) -> int:
    """One seed from whole numbers >= 0: ``s ← (s · multiplier + part) mod (2⁶³ - 1)`` over ``parts`` from
    ``s = start`` (one part and ``start`` 0: the part itself)."""
    seed = start
    for index, part in enumerate(parts):
        seed = (seed * multiplier + whole_number(part, f"parts[{index}]", 0)) % MODULUS
    return seed


def seeded_generator(*parts: int, device=None, multiplier: int = MIX_MULTIPLIER) -> torch.Generator:
    """A torch generator on ``device`` (the CPU when None) seeded with :func:`mixed_seed` of ``parts`` (e.g. seed,
    step, micro-batch): what it draws is a pure function of them."""
    return torch.Generator(device=device).manual_seed(mixed_seed(*parts, multiplier=multiplier))


def draw_seeds(seed: int, draws: int) -> list[int]:
    """The sampling seed of each of ``draws`` draws: ``seed + d · DRAW_STRIDE`` for draw ``d`` (draw 0: ``seed``)."""
    return [seed + DRAW_STRIDE * draw for draw in range(draws)]


@dataclass(frozen=True)
class StudySeed:
    """How a seed study's seed reaches a paper's settings: study seed ``s`` adds ``stride · s`` to each seed field
    named in ``fields`` (a dotted path into nested settings, e.g. ``"training.seed"``; a tuple of seeds shifts each
    of them). Seed 0 leaves the settings as they are (the same object), so a run without a study reads its table's
    seeds; a stride above every seed a table holds keeps two study seeds from sharing one. No fields: the settings
    hold no seed that follows the study (the paper reads ``profile.seed`` where it needs one)."""

    fields: tuple[str, ...] = ()
    stride: int = 1

    def __post_init__(self):
        whole_number(self.stride, "stride", 1, "how far one study seed moves each seed")

    def apply(self, settings, seed: int):
        """``settings`` under study seed ``seed``."""
        shift = self.stride * whole_number(seed, "seed", 0, "a seed study's seed")
        if shift == 0:
            return settings
        for path in self.fields:
            settings = _shifted(settings, path.split("."), shift)
        return settings


def _shifted(settings, path: list[str], shift: int):
    """``settings`` (a dataclass) with the seed or seeds at ``path`` moved by ``shift``."""
    value = getattr(settings, path[0])
    if len(path) > 1:
        moved = _shifted(value, path[1:], shift)
    elif isinstance(value, tuple):
        moved = tuple(whole_number(seed, path[0], 0) + shift for seed in value)
    else:
        moved = whole_number(value, path[0], 0) + shift
    return dataclasses.replace(settings, **{path[0]: moved})
