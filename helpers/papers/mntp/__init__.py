"""MAGNET App. E (seed 000): MNTP against MTP, notebook 02 (Fig. 7), and the MNTP adapter notebooks 03, 05 and 06 read.

- :mod:`.mechanism`: MNTP (§3.2.1, Eq. 2) and MTP (App. E) as the paper defines them (implemented once in
  :mod:`helpers.objectives`);
- :mod:`.settings`: the masked-LM recipe per profile (App. A at the ``paper`` profile);
- :mod:`.experiment`: the data, the two runs, the saved MNTP adapter and the per-block held-out hits;
- :mod:`.report`: the run summary, the App. E sentence and the notebook's claims;
- :mod:`.figures`: Fig. 7 and the masking widget.
"""
from . import experiment, figures, mechanism, report, settings
from .experiment import (Comparison, MaskedLMData, final_hits, load_data, masked_lm_row_hits, reference_accuracies,
                         run_objective, save_mntp_adapter, train_both)
from .figures import masking_view, training_curves_figure
from .report import PAPER, claims, describe_mntp_vs_mtp, loss_slope, run_summary
from .settings import SETTINGS

CITATION = dict(
    title="MAGNET: Augmenting Generative Decoders with Representation Learning and Infilling Capabilities",
    authors="Savya Khosla, Aditi Tiwari, Kushal Kafle, Simon Jenni, Handong Zhao, John Collomosse, Jing Shi",
    venue="ACL 2025 (seed 000 is the earlier double-blind submission)",
    arxiv="2501.08648",
)

__all__ = ["CITATION", "PAPER", "SETTINGS", "Comparison", "MaskedLMData", "claims", "describe_mntp_vs_mtp",
           "experiment", "figures", "final_hits", "load_data", "loss_slope", "masked_lm_row_hits", "masking_view",
           "mechanism", "reference_accuracies", "report", "run_objective", "run_summary", "save_mntp_adapter",
           "settings", "train_both", "training_curves_figure"]
