"""One package per paper (and one for the lecture, one for notebook 07), each with the same files:

- ``mechanism.py``: the paper's equations and algorithms only; it never imports its experiment, report or figures;
- ``settings.py``: its settings dataclass, its values per profile (``SETTINGS``, read by
  :func:`helpers.profiles.settings_for`) and how a seed study's seed reaches them (``STUDY_SEED``,
  :class:`helpers.seeds.StudySeed`);
- ``experiment.py``: data, training and evaluation drivers returning result objects;
- ``report.py``: the paper's numbers (once), tables, ``describe_*`` sentences and ``claims()``; where that grows past
  500 lines, the paper's numbers and the claims table (``CLAIMS``) live in ``declarations.py``, which ``report.py``
  re-exports (``helpers.ledger`` reads ``report.CLAIMS``);
- ``figures.py``: its figures and widget views.

This module is also the one registry of the papers and the notebooks, as data (:data:`PAPERS`, :data:`NOTEBOOKS`):
which notebook runs which package, which papers its claims are of, the name a paper goes by in the ledger, the
trainers ``python -m helpers.train`` offers for a notebook, and the package whose ``CITATION`` cites a paper.
:mod:`helpers.profiles`, :mod:`helpers.train`, :mod:`helpers.code_identity` and :mod:`helpers.ledger` read it; it
imports nothing of the workbook, so reading it never imports a paper package.

The shared modules one level up hold each concept once (masks, attention, models, data, objectives, training, the
masked-LM interface, metrics, the ledger, plots); a paper package imports them, never another paper's experiment.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """A paper the ledger's rows are claims of. ``key`` is what a row's ``paper`` holds: the seed document's id for
    the lecture and the four papers the workbook reproduces (``seed``), the paper's own name beyond them; ``name`` is
    how the docs name it; ``package`` is the paper package whose ``CITATION`` (or ``CITATIONS[name]``) cites it."""

    key: str
    name: str
    package: str
    seed: bool = True
    models: str = ""  # the models the paper's own results are on (the ledger's headline sets ours beside them)


@dataclass(frozen=True)
class Trainer:
    """A name ``python -m helpers.train`` accepts: ``helpers.papers.<package>.<module>.train_command`` called with
    ``fixed`` (keyword arguments, as pairs)."""

    name: str
    module: str = "experiment"
    fixed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Notebook:
    """A numbered notebook: ``package`` is its paper package (whose ``settings.SETTINGS`` its parameters cell
    registers, :func:`helpers.profiles.settings_for`), ``papers`` the keys of the papers it measures claims of,
    ``subject`` one line on what it reproduces, ``trainers`` what ``python -m helpers.train`` trains for it, and
    ``registers`` what its parameters cell registers beside the profile and its settings, as committed."""

    number: str
    package: str
    papers: tuple[str, ...]
    subject: str
    trainers: tuple[Trainer, ...] = ()
    registers: tuple[dict, ...] = ()


PAPERS: dict[str, Paper] = {paper.key: paper for paper in (
    Paper("000", "MAGNET", "magnet", models="LLaMA-2-7B"),
    Paper("001", "Lecture", "lecture"),
    Paper("002", "OpenLTG", "openltg", models="RoBERTa-base"),
    Paper("003", "SR", "sequence_repetition",
          models="Gemma-7B, Gemma2-2B, Gemma2-9B, Qwen3-1.7B, Qwen3-4B, Qwen3-8B and Mistral-7B"),
    Paper("004", "EMAT", "emat", models="BERT-base"),
    # beyond the four papers (notebook 07): counted apart in the docs
    Paper("LLaDA", "LLaDA", "diffusion", seed=False),
    Paper("MDLM", "MDLM", "diffusion", seed=False),
    Paper("BD3-LM", "BD3-LM", "diffusion", seed=False),
    Paper("Fast-dLLM", "Fast-dLLM", "diffusion", seed=False),
)}

NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("01", "lecture", ("001", "000", "003"), "the lecture: attention matrices and the mask gallery"),
    Notebook("02", "mntp", ("000",), "MAGNET App. E: MNTP against MTP; trains the MNTP adapter",
             trainers=(Trainer("mntp", fixed=(("objective", "mntp"),)), Trainer("mtp", fixed=(("objective", "mtp"),))),
             registers=({"mask_token": "underscore"},)),  # its MASK_TOKEN (MAGNET's "_" for LLaMA-2)
    Notebook("03", "magnet", ("000",), "MAGNET: MSG (Eq. 4), SSCL (Eq. 3), joint training (Eq. 5)",
             trainers=(Trainer("magnet"),)),
    Notebook("04", "sequence_repetition", ("003",), "SR: repeated inputs, block shares, the tagger, early exit",
             trainers=(Trainer("sr"),)),
    Notebook("05", "openltg", ("002",), "OpenLTG: mask-predict with LTD and DSWA, the AR baseline"),
    Notebook("06", "emat", ("004",), "EMAT: the phrase vocabulary, the extended matrix, the GRU decoder, naive MTC",
             trainers=(Trainer("emat", module="experiment_training"),)),
    Notebook("07", "diffusion", ("LLaDA", "MDLM", "BD3-LM", "Fast-dLLM", "002"),
             "masked diffusion samplers and the diffusion fine-tune (beyond the four papers)"),
)

PACKAGES: tuple[str, ...] = tuple(notebook.package for notebook in NOTEBOOKS)
NOTEBOOK_PACKAGES: dict[str, str] = {notebook.number: notebook.package for notebook in NOTEBOOKS}
PAPER_NAMES: dict[str, str] = {key: paper.name for key, paper in PAPERS.items()}
SEED_PAPERS: tuple[str, ...] = tuple(key for key, paper in PAPERS.items() if paper.seed)


def notebook(number: str) -> Notebook:
    """The registry's entry for notebook ``number`` ("05"); an error naming the numbers it knows."""
    for entry in NOTEBOOKS:
        if entry.number == number:
            return entry
    raise ValueError(f"notebook={number!r} is not in the registry; expected one of {list(NOTEBOOK_PACKAGES)}")


def citation(key: str) -> dict:
    """Paper ``key``'s citation (title, authors, venue, ...), from its package's ``CITATION`` (``CITATIONS[name]``
    where the package cites several papers); importing that package."""
    if key not in PAPERS:
        raise ValueError(f"key={key!r} is not a paper of the registry; expected one of {sorted(PAPERS)}")
    paper = PAPERS[key]
    package = importlib.import_module(f"{__name__}.{paper.package}")
    return getattr(package, "CITATIONS", {}).get(paper.name) or package.CITATION
