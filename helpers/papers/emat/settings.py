"""Notebook 06's sizes per profile (:func:`helpers.profiles.settings_for` reads ``SETTINGS``).

Three groups, each what keys one cached artefact: :class:`PhraseData` the vocabulary and masked sentences (§3),
:class:`HeadTraining` every trained head (App. C, Table 8), and the rest of :class:`MTCSettings` the features,
the evaluation and the timing, which never change a trained head.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...checks import whole_number
from ...seeds import StudySeed
from .mechanism import KS


@dataclass(frozen=True)
class PhraseData:
    """What the phrase vocabulary and the masked sentences depend on (§3). ``min_count`` is the paper's k
    ("We keep phrases appearing 500 times or more")."""

    corpus_sentences: int | None  # sentences run through spaCy, spread over the splits 90/5/5 (None: all)
    min_count: int  # k: keep phrases occurring at least this often in those sentences
    max_sentences_per_phrase: int = 50  # §3: "We sample 50 unique sentences containing each vocabulary-phrase"
    unseen_fraction: float = 0.05  # share of the vocabulary held out as never-seen phrases
    seed: int = 0  # which phrases are unseen, which phrase a sentence masks, which sentences a phrase keeps


@dataclass(frozen=True)
class HeadTraining:
    """Everything that changes a trained head (EMAT, the GRU decoder, the length classifier): App. C, Table 8.

    With the dataset, the masked LM and its context size, it keys each head's run folder
    (:func:`helpers.papers.emat.experiment_training.head_run`), all but the runs' lengths (the epochs and the
    pre-training steps), so a longer run extends a finished one; the GRU's MTC run keeps the pre-training steps it
    starts from.
    """

    batch_size: int = 128  # App. C, Table 8 (both methods)
    lr: float = 1e-3  # App. C, Table 8 (both methods)
    emat_epochs: int = 2  # App. C, Table 8
    gru_epochs: int = 10  # App. C, Table 8
    gru_layers: int = 2  # App. C, Table 8
    gru_dropout: float = 0.2  # App. C, Table 8
    teacher_forcing: float = 0.5  # App. C, Table 8
    gru_pretrain_steps: int = 2000  # §4.2: "pre-train the generative model on a vanilla Language Modeling task" (batches)
    gru_pretrain_tokens: int = 24  # tokens per pre-training sentence (the public code cuts at the batch median)
    gru_train_embeddings: bool = True  # the public decoder trains its copy of the MLM's embeddings and output head
    length_epochs: int = 5  # naive MTC's length classifier (a linear probe on the frozen features)
    gru_evals_per_epoch: int = 1  # dev a@1 this many times per GRU epoch: the points its stopping test fits
    emat_evals_per_epoch: int = 1  # dev a@1 this many times per EMAT epoch (both EMAT heads): the same, for EMAT
    seed: int = 0  # initial weights and batch order

    def __post_init__(self):
        for name in ("batch_size", "emat_epochs", "gru_epochs", "gru_layers", "length_epochs", "gru_evals_per_epoch",
                     "emat_evals_per_epoch"):
            whole_number(getattr(self, name), name)
        whole_number(self.gru_pretrain_steps, "gru_pretrain_steps", 0, "0 skips the pre-training")


@dataclass(frozen=True)
class MTCSettings:
    """Sizes for notebook 06: the data (:class:`PhraseData`), the heads' training (:class:`HeadTraining`), and
    what the features, the evaluation and the timing use."""

    data: PhraseData
    training: HeadTraining = field(default_factory=HeadTraining)
    context_tokens: int = 24  # tokens kept on each side of the mask
    feature_batch_size: int = 32
    beam_size: int = 16
    naive_first_tokens: int = 100  # §5.2: "we replace the first mask with each of the top-100 predicted tokens"
    # §5.2: "... and complete the second mask": over the whole vocabulary (None), read as deep as the ranking needs
    naive_second_tokens: int | None = None
    eval_examples: int | None = None  # cap on the test and unseen sentences scored; None: all
    masked_lm: str | None = None  # a Hub encoder MLM (the paper: bert-base-cased); None: the profile's MNTP decoder
    # Table 3's Inf-time: latency_trials interleaved passes over latency_sentences test sentences (the methods take
    # turns on each sentence) in each of latency_processes processes; the ratios' intervals nest them in the processes.
    latency_sentences: int = 20
    latency_trials: int = 10
    latency_processes: int = 2
    ks: tuple[int, ...] = KS

    def __post_init__(self):
        whole_number(self.latency_sentences, "latency_sentences", 1, "test sentences timed")
        whole_number(self.latency_trials, "latency_trials", 1, "interleaved passes over the sentences per process")
        whole_number(self.latency_processes, "latency_processes", 1, "processes the timing trials repeat in")


# The held-out curves the ledger's trained rows rest on (``helpers.papers.emat.report.CLAIMS``' ``curve=``): each
# head's dev accuracy@1, evaluated ``*_evals_per_epoch`` times an epoch (:func:`.experiment_training.train_head`).
EMAT_CURVE = "EMAT dev a@1"
EMAT_NEW_ROWS_CURVE = "EMAT (new rows only) dev a@1"
GRU_CURVE = "GRU decoder dev a@1"


def evaluations_in_last_half(epochs: int, evals_per_epoch: int, steps_per_epoch: int, window: float = 0.5) -> int:
    """How many evaluations :func:`.experiment_training.train_head` records in the last ``window`` of training
    (the span :func:`helpers.metrics.stopped_improving` fits): at step 0, every ``steps_per_epoch //
    evals_per_epoch`` steps, and at the last step."""
    from ... import metrics

    return metrics.points_in_window(metrics.evaluation_steps(epochs * steps_per_epoch,
                                                             max(1, steps_per_epoch // evals_per_epoch)), window)


def _fewest_in_last_half(epochs: int, evals_per_epoch: int) -> int:
    """The fewest evaluations in the last half over every epoch length a dataset could give (from one step per
    evaluation up to far more): what the settings guarantee whatever the vocabulary's size."""
    from ... import metrics

    return min(evaluations_in_last_half(epochs, evals_per_epoch, steps, metrics.STOP_WINDOW)
               for steps in range(evals_per_epoch, 40 * evals_per_epoch + 1))


def curve_points(profile) -> dict[str, int]:
    """For each held-out curve the ledger's trained rows name, how many evaluations fall in the last half of training
    under ``profile`` (a name or a :class:`helpers.profiles.Profile`): at least this many whatever the dataset's
    size, computed from the epochs and the evaluations per epoch."""
    training = SETTINGS[getattr(profile, "name", profile)].training
    emat = _fewest_in_last_half(training.emat_epochs, training.emat_evals_per_epoch)
    return {EMAT_CURVE: emat, EMAT_NEW_ROWS_CURVE: emat,
            GRU_CURVE: _fewest_in_last_half(training.gru_epochs, training.gru_evals_per_epoch)}


# How a seed study's seed reaches these settings (helpers.profiles.settings_for): seed s moves the heads' seed (initial
# weights and batch order) by s, from 0 in every profile; the phrase data keep their own seed, so every study seed
# trains on and scores the same sentences.
STUDY_SEED = StudySeed(("training.seed",))

# The test-example count a seed study's examples look multiplies (helpers.profiles.scale_examples): the cap on the
# test and unseen sentences scored, which no head's run key holds.
EXAMPLE_SIZES = ("eval_examples",)


SETTINGS = {
    # The same code paths at toy sizes, on the tiny random Llama.
    "smoke": MTCSettings(data=PhraseData(corpus_sentences=400, min_count=3, max_sentences_per_phrase=8,
                                         unseen_fraction=0.1),
                         training=HeadTraining(batch_size=32, emat_epochs=1, gru_epochs=1, length_epochs=1,
                                               gru_pretrain_steps=2, gru_pretrain_tokens=8),
                         context_tokens=12, feature_batch_size=16, beam_size=3, naive_first_tokens=3, eval_examples=8,
                         latency_sentences=2, latency_trials=2, latency_processes=1),
    # SmolLM2-135M + the notebook-02 MNTP adapter on half of Austen: k = 10 with <= 20 sentences per phrase leaves
    # ~980 phrases and ~6.4K masked sentences (one per sentence); every method is scored on the same first 160 test
    # and unseen sentences. The GRU trains 5 epochs (its dev loss is lowest at epoch 3-4 and its dev a@1 flat after
    # epoch 4 in three seeds of the paper's 10) with its dev a@1 four times an epoch (the points of its plateau check)
    # after 20 of the paper profile's 2,000 pre-training batches, and naive MTC reads the top-5 first tokens of the
    # paper's top-100 (each is a forward per sentence), for time: make reproduce's 45 minutes on 2 cores. Both EMAT
    # heads score dev a@1 six times an epoch (a matrix product over the dev features: cheap), so their second and
    # last epoch holds the evaluations the stopping test needs (:func:`curve_points`). Inf-time: 12 test sentences, 10
    # interleaved trials in each of 3 processes (about a minute and a half).
    "cpu": MTCSettings(data=PhraseData(corpus_sentences=15_000, min_count=10, max_sentences_per_phrase=20,
                                       unseen_fraction=0.08),
                       training=HeadTraining(gru_epochs=5, gru_evals_per_epoch=4, emat_evals_per_epoch=6,
                                             gru_pretrain_steps=20, gru_pretrain_tokens=8),
                       context_tokens=12, beam_size=16, naive_first_tokens=5, latency_sentences=12, latency_trials=10,
                       latency_processes=3, eval_examples=160),
    # The Hub model on 200K WikiText-103 sentences (~4M words); k = 50 keeps a few thousand phrases, 50 sentences each.
    "gpu": MTCSettings(data=PhraseData(corpus_sentences=200_000, min_count=50), context_tokens=48,
                       feature_batch_size=128, masked_lm="bert-base-cased", beam_size=50, naive_first_tokens=100,
                       latency_sentences=100, latency_processes=3),
    # The paper's hyperparameters; k = 500 per 3.3B words scaled to WikiText-103's 103M words is 16.
    "paper": MTCSettings(data=PhraseData(corpus_sentences=None, min_count=16), context_tokens=64,
                         feature_batch_size=128, masked_lm="bert-base-cased", beam_size=50, naive_first_tokens=100,
                         latency_sentences=200, latency_processes=3),
}
