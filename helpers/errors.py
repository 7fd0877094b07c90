"""The error every loader of an offline asset raises alike, and the command that fetches the assets: the model loaders
(:mod:`helpers.models`, :mod:`helpers.embedded_model`) and the corpus loaders (:mod:`helpers.data`,
:mod:`helpers.austen`, :mod:`helpers.labels`) share them, so a caller catches one type for "not fetched yet". It
imports nothing of the workbook, so any module can import it."""
from __future__ import annotations


class MissingAssetError(ValueError):
    """An offline asset (e.g. the embedded model) has not been fetched yet."""


SETUP_COMMAND = "`make setup` (or `python -m helpers.assets`)"  # what fetches every offline asset
SETUP_HINT = f"run {SETUP_COMMAND}"  # as the corpus loaders' messages say it
