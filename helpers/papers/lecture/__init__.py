"""The lecture on attention masks (seed 001), notebook 01: every mask of the workbook drawn from one definition.

- :mod:`.mechanism`: masked self-attention as the lecture writes it, and its two masks;
- :mod:`.settings`: notebook 01's sizes per profile;
- :mod:`.experiment`: the real model's attention maps and the proof that a mask reaches every layer;
- :mod:`.report`: the notebook's claims (definitions re-derived by brute force);
- :mod:`.figures`: the gallery's figures and widget views.

Section 3's measured block shares come from :mod:`helpers.papers.sequence_repetition` (its Fig. 1 quantity).
"""
from . import experiment, figures, mechanism, report, settings
from .experiment import MaskProof, mask_proof
from .mechanism import bidirectional, causal, masked_self_attention
from .report import claims
from .settings import SETTINGS, LectureSettings

CITATION = dict(
    title="Language Model Pretraining & Fine-Tuning (lecture slides)",
    authors="Yu Meng",
    venue="University of Virginia, lecture of Jan 21, 2026",
    arxiv=None,  # lecture slides, not a paper
)

__all__ = ["CITATION", "MaskProof", "SETTINGS", "LectureSettings", "bidirectional", "experiment", "mask_proof", "causal", "claims", "figures",
           "masked_self_attention", "mechanism", "report", "settings"]
