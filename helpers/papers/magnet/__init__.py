"""MAGNET (seed 000), notebook 03: one decoder adapted for infilling, representations and generation.

- :mod:`.mechanism`: MSG (§3.2.3, Eq. 4), MNTP through the gathered loss, SSCL (§3.2.2, Eq. 3), the joint loss
  and its phases (Eq. 5, App. A), §4.1 word pooling, infilling a span under the hybrid mask (§3.1);
- :mod:`.settings`: :class:`MagnetSettings` per profile;
- :mod:`.experiment`: joint training and the runs (MAGNET, LLM2Vec-style, Table 6 ablations), keyed by
  :func:`~.experiment.run_key`, on the views' data of :mod:`.experiment_data`; :mod:`.experiment_table1` (word
  probes), :mod:`.experiment_table2` (STS-B), :mod:`.experiment_table4` (infilling), :mod:`.experiment_table5`
  (degeneration, Rep-n, Fig. 6);
- :mod:`.declarations`: the paper's numbers and the notebook's claims, declared once (``CLAIMS``);
- :mod:`.report`: tables, sentences and :func:`~.report.claims` (the rows);
- :mod:`.figures`: notebook 03's figures and the infilling widget.

The hybrid masks themselves are shared: :func:`helpers.masks.magnet`.
"""
from .experiment import (JointData, MagnetRunKey, TrainedRun, joint_data, joint_experiment, run_key, train_ablations,
                         train_llm2vec_style, train_magnet)
from .mechanism import (INSTRUCTION, MODES, Phase, ProjectionHead, check_spans, encode_sentences, infill_span, info_nce,
                        joint_loss, last_token_states, magnet_phases, masked_lm_reader, masked_view, mntp_msg_losses,
                        msg_labels, phase_at, pool_words, sample_spans, span_mask, sscl_loss)
from .report import PAPER, claims
from .settings import ABLATION_LAMBDAS, SETTINGS, MagnetSettings

CITATION = dict(
    title="MAGNET: Augmenting Generative Decoders with Representation Learning and Infilling Capabilities",
    authors="Savya Khosla, Aditi Tiwari, Kushal Kafle, Simon Jenni, Handong Zhao, John Collomosse, Jing Shi",
    venue="arXiv preprint, 2025 (the seed copy is the anonymous double-blind submission)",
    arxiv="2501.08648",
)

__all__ = [
    "CITATION", "ABLATION_LAMBDAS", "SETTINGS", "MagnetSettings", "PAPER", "claims",
    "INSTRUCTION", "MODES", "Phase", "ProjectionHead", "check_spans", "encode_sentences", "infill_span", "info_nce",
    "joint_loss", "last_token_states", "magnet_phases", "masked_lm_reader", "masked_view", "mntp_msg_losses",
    "msg_labels", "phase_at", "pool_words", "sample_spans", "span_mask", "sscl_loss",
    "JointData", "MagnetRunKey", "TrainedRun", "joint_data", "joint_experiment", "run_key", "train_ablations",
    "train_llm2vec_style", "train_magnet",
]
