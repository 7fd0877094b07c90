"""EMAT: multi-token completion from a frozen masked LM (seed 004, notebook 06).

- :mod:`.mechanism`: the extended-matrix decoder (§4.1), the GRU decoder (§4.2), naive MTC and its length classifier
  (§5.2), ranking and accuracy@k (§5);
- :mod:`.settings`: :class:`MTCSettings` (with :class:`PhraseData` and :class:`HeadTraining`) per profile;
- :mod:`.experiment_data`: the phrase vocabulary, masked sentences and splits (§3), the cached features;
- :mod:`.experiment_training`: the heads' training runs;
- :mod:`.experiment`: the :class:`Completer`, accuracy@k by gold length with intervals, paired differences, latency;
- :mod:`.declarations`: the paper's numbers and the notebook's claims, declared once (``CLAIMS``);
- :mod:`.report`: Tables 1-3, ``describe_*`` sentences, the summary table, :func:`claims` (the rows);
- :mod:`.figures`: the notebook's figures and its completion widget.
"""
from . import declarations, experiment, experiment_data, experiment_training, figures, mechanism, report, settings
from .experiment import (FEATURE_METHODS, LATENCY_LABELS, LENGTH_GROUPS, METHOD_LABELS, METHODS, PAPER_SIZED,
                         ClosedVocabularyMLM, Completer, LabelPrior, accuracy_intervals, build_completer,
                         evaluate_methods, group_rows, latency_method, latency_ratio, measure_latency, paired_difference,
                         paper_sized_emat, score_ranking, training_label_share)
from .experiment_data import (MASK_MARKER, MTC_SPLITS, UNSEEN, EncodedSplit, MaskedExample, MTCDataset, build_dataset,
                              build_vocabulary, cached_features, choose_unseen_phrases, clean_sentence,
                              encode_examples, encode_splits, extract_phrase_spans, load_dataset, masked_examples,
                              phrase_counts, phrase_spans, phrase_token_count, split_at_mask, vocabulary_token_counts)
from .experiment_training import (HeadRunKey, head_run, length_accuracy, length_hits, max_generation_steps,
                                  train_emat, train_gru, train_length_classifier)
from .mechanism import (KS, ExtendedMatrixDecoder, GRUDecoder, LengthClassifier, accuracy, build_emat, build_gru,
                        emat_labels, first_distinct_completions, is_completion, length_class, naive_complete,
                        rank_candidates, ranking_depth)
from .report import claims
from .settings import SETTINGS, HeadTraining, MTCSettings, PhraseData

CITATION = dict(
    title="Simple and Effective Multi-Token Completion from Masked Language Models",
    authors="Oren Kalinsky, Guy Kushilevitz, Alexander Libov, Yoav Goldberg",
    venue="Findings of the Association for Computational Linguistics: EACL 2023, pages 2356-2369",
    arxiv=None,  # not on arXiv; ACL Anthology 2023.findings-eacl.179
)

__all__ = [
    "CITATION", "declarations", "experiment", "experiment_data", "experiment_training", "figures", "mechanism", "report", "settings",
    # mechanism
    "KS", "ExtendedMatrixDecoder", "GRUDecoder", "LengthClassifier", "accuracy", "build_emat", "build_gru",
    "emat_labels", "first_distinct_completions", "is_completion", "length_class", "naive_complete", "rank_candidates",
    "ranking_depth",
    # settings
    "SETTINGS", "HeadTraining", "MTCSettings", "PhraseData",
    # data
    "MASK_MARKER", "MTC_SPLITS", "UNSEEN", "EncodedSplit", "MaskedExample", "MTCDataset", "build_dataset",
    "build_vocabulary", "cached_features", "choose_unseen_phrases", "clean_sentence", "encode_examples",
    "encode_splits", "extract_phrase_spans", "load_dataset", "masked_examples", "phrase_counts", "phrase_spans",
    "phrase_token_count", "split_at_mask", "vocabulary_token_counts",
    # training
    "HeadRunKey", "head_run", "max_generation_steps", "train_emat", "train_gru", "train_length_classifier",
    "length_accuracy", "length_hits",
    # evaluation
    "FEATURE_METHODS", "LATENCY_LABELS", "LENGTH_GROUPS", "METHOD_LABELS", "METHODS", "PAPER_SIZED",
    "ClosedVocabularyMLM", "Completer", "LabelPrior", "accuracy_intervals", "build_completer", "evaluate_methods",
    "group_rows", "latency_method", "latency_ratio", "measure_latency", "paired_difference", "paper_sized_emat", "score_ranking",
    "training_label_share",
    # report
    "claims",
]
