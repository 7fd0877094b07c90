"""One package per paper (and one for the lecture), each with the same files:

- ``mechanism.py``: the paper's equations and algorithms only; it never imports its experiment, report or figures;
- ``settings.py``: its settings dataclass, its values per profile (``SETTINGS``, read by
  :func:`helpers.profiles.settings_for`) and how a seed study's seed reaches them (``STUDY_SEED``,
  :class:`helpers.seeds.StudySeed`);
- ``experiment.py``: data, training and evaluation drivers returning result objects;
- ``report.py``: the paper's numbers (once), tables, ``describe_*`` sentences and ``claims()``; where that grows past
  500 lines, the paper's numbers and the claims table (``CLAIMS``) live in ``declarations.py``, which ``report.py``
  re-exports (``helpers.claims`` reads ``report.CLAIMS``);
- ``figures.py``: its figures and widget views.

| package | notebook | paper |
| --- | --- | --- |
| :mod:`~helpers.papers.lecture` | 01 | the lecture on attention masks (seed 001) |
| :mod:`~helpers.papers.mntp` | 02 | MAGNET App. E: MNTP against MTP (seed 000) |
| :mod:`~helpers.papers.magnet` | 03 | MAGNET (seed 000) |
| :mod:`~helpers.papers.sequence_repetition` | 04 | sequence repetition for token labelling (seed 003) |
| :mod:`~helpers.papers.openltg` | 05 | mask-predict with LTD and DSWA, OpenLTG (seed 002) |
| :mod:`~helpers.papers.emat` | 06 | EMAT multi-token completion (seed 004) |

The shared modules one level up hold each concept once (masks, attention, models, data, objectives, training, the
masked-LM interface, metrics, claims, plots); a paper package imports them, never another paper's experiment.
"""
