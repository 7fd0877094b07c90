"""Notebook 02's masked-LM recipe, the sizes of its MNTP and MTP runs per profile, and what the later notebooks
record of the MNTP adapter they read: the name of its held-out curve, and which adapter this process loaded.

Plain settings, importing nothing of the workbook: the memory estimate (:mod:`helpers.memory`) and the ledger read
the recipe without the training code. The runs themselves, their keys and the adapter supply live in
:mod:`helpers.mntp_adapter`.
"""
from __future__ import annotations

from dataclasses import dataclass

MASKED_LM_VERSION = 1  # bump when the masked-LM recipe changes what a run or adapter holds


@dataclass(frozen=True)
class MaskedLMRecipe:
    """Notebook 02's MNTP and MTP runs (MAGNET App. A, App. E), and so the MNTP adapter notebooks 03, 05 and 06 read.

    The paper: 4200 iterations of batch 32 x 512 tokens at lr 3e-5 (the ``paper`` profile).
    """

    steps: int = 100
    batch_size: int = 4
    grad_accum: int = 1
    seq_len: int = 128
    lr: float = 5e-4
    eval_every: int = 10
    eval_batches: int = 4
    train_blocks: int = 2000
    checkpoint_every: int = 25


MASKED_LM_RECIPES = {
    "smoke": MaskedLMRecipe(steps=4, batch_size=2, seq_len=32, eval_every=2, eval_batches=1, train_blocks=16,
                            checkpoint_every=2),
    # Fig. 7's held-out set: 4 batches (16 blocks, about 410 masked tokens, SE ~2 points; the seed study's t interval
    # is far wider), scored every 5 steps (cheap: 4 small batches), so that 11 evaluations fall in the last half of
    # training, enough for the equivalence test that shows whether training stopped improving.
    "cpu": MaskedLMRecipe(eval_every=5, eval_batches=4),
    "gpu": MaskedLMRecipe(steps=1000, batch_size=16, grad_accum=2, seq_len=512, lr=1e-4, eval_every=50, eval_batches=16,
                          train_blocks=200_000, checkpoint_every=100),
    "paper": MaskedLMRecipe(steps=4200, batch_size=8, grad_accum=4, seq_len=512, lr=3e-5, eval_every=200,
                            eval_batches=32, train_blocks=300_000, checkpoint_every=200),
}


def masked_lm_recipe(profile) -> MaskedLMRecipe:
    """The masked-LM recipe of ``profile`` (:data:`MASKED_LM_RECIPES`)."""
    return MASKED_LM_RECIPES[profile.name]


MNTP_HELDOUT_CURVE = "notebook 02's MNTP held-out masked-token accuracy"

NOTEBOOK_02, FALLBACK = "notebook 02", "fallback"
_LOADED_ADAPTERS: dict[str, dict] = {}  # profile name -> which MNTP adapter this process loaded (claims record it)


def loaded_mntp_adapters() -> dict[str, dict]:
    """Which MNTP adapter :func:`helpers.mntp_adapter.load_or_train_mntp` loaded in this process, per profile:
    ``{"source": "notebook 02" | "fallback", "fingerprint": ...}``; a notebook's claims carry it in their provenance."""
    return {name: dict(entry) for name, entry in _LOADED_ADAPTERS.items()}


def record_loaded_mntp_adapter(profile_name: str, source: str, fingerprint: str) -> None:
    """Note that this process loaded the MNTP adapter ``fingerprint`` from ``source`` for profile ``profile_name``."""
    _LOADED_ADAPTERS[profile_name] = {"source": source, "fingerprint": fingerprint}
