"""Sequence repetition (seed 003): bidirectional token embeddings from a causal decoder, notebook 04 (and the
block-share measurement of notebook 01).

- :mod:`.mechanism`: ``s^k`` and its padded batches (§2, App. A.3.2), the strategies (SR, middle and full
  unmasking, §3.4), early exit (§3.5), the measured block shares (Fig. 1) and the token tagger (App. A.2);
- :mod:`.settings`: notebook 04's sizes per profile, the training recipe nested as ``settings.training``;
- :mod:`.experiment_data`: §3.1's tagged sentences (silver or CoNLL-2003);
- :mod:`.experiment_fig1`: Fig. 1 measured on a real decoder;
- :mod:`.experiment`: the taggers' runs (Fig. 2, Table 1, Fig. 5);
- :mod:`.experiment_probe`: the frozen-feature probe (Fig. 5 without fine-tuning);
- :mod:`.experiment_table2`: the speed table (Table 2);
- :mod:`.declarations`: the paper's numbers and the notebook's claims, declared once (``CLAIMS``);
- :mod:`.report`: our tables and sentences, and the claims rows (:func:`claims`);
- :mod:`.figures`: the figures and the tagging widget.
"""
from . import (declarations, experiment, experiment_data, experiment_fig1, experiment_probe, experiment_table2, figures,
               mechanism, report, settings)
from .experiment import load_taggers, run_experiments, tagger_run, train_tagger
from .experiment_data import TaggingData, conll2003_sentences, label_vocabulary, load_tagging_data
from .experiment_fig1 import measure_block_share_views, per_layer_shares, unmasked_similarity
from .mechanism import (SHARE_VIEWS, RepeatedBatch, Strategy, TokenTagger, block_mass_shares, check_exit_layer,
                        early_exit, exit_layers, gather_last_copy, repeat_batch, repeat_ids, sr_features,
                        strategy_masks, truncate_layers)
from .report import block_share_views_table, claims, describe_block_share_views
from .settings import SETTINGS, RepetitionSettings, TaggerTraining

CITATION = dict(
    title="Sequence Repetition Enhances Token Embeddings and Improves Sequence Labeling with Decoder-only Language "
          "Models",
    authors="Matija Luka Kukić, Marko Čuljak, David Dukić, Martin Tutek, Jan Šnajder",
    venue="TakeLab, University of Zagreb (seed 003; code: takelab/repetition-sl)",
    arxiv=None,  # the seed's text names no arXiv identifier
)

__all__ = ["CITATION", "SETTINGS", "SHARE_VIEWS", "RepeatedBatch", "RepetitionSettings", "Strategy", "TaggerTraining",
           "TaggingData", "TokenTagger", "block_mass_shares", "block_share_views_table", "check_exit_layer", "claims",
           "conll2003_sentences", "declarations", "describe_block_share_views", "early_exit", "exit_layers", "experiment",
           "experiment_data", "experiment_fig1", "experiment_probe", "experiment_table2", "figures",
           "gather_last_copy", "label_vocabulary", "load_taggers", "load_tagging_data", "measure_block_share_views",
           "mechanism", "per_layer_shares", "repeat_batch", "repeat_ids", "report", "run_experiments", "settings",
           "sr_features", "strategy_masks", "tagger_run", "train_tagger", "truncate_layers", "unmasked_similarity"]
