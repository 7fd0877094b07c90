"""Notebook 03's sizes, one :class:`MagnetSettings` per profile (:data:`SETTINGS`, read by
:func:`helpers.profiles.settings_for`). The ``paper`` entry holds MAGNET's App. A values."""
from __future__ import annotations

from dataclasses import dataclass

from ... import store
from ...seeds import StudySeed

POSITIVE_KINDS = ("augment", "paraphrase")
PROBE_SOURCES = ("silver", "conll2003")
PROBE_CLASSIFIERS = ("app_a", "logistic")

# How a seed study's seed reaches these settings (helpers.profiles.settings_for): they hold no seed. Notebook 03's
# runs read the profile's seed (LoRA's initialisation, the views' masks and batches, dropout; part of every run key).
STUDY_SEED = StudySeed()

# (λ1, λ2, λ3) of Eq. 5 for the Table 6 runs that are not phases of MAGNET itself.
ABLATION_LAMBDAS = {"sscl": (0.0, 1.0, 0.0), "sscl+msg": (0.0, 9.0, 1.0)}


@dataclass(frozen=True)
class MagnetSettings:
    """Every size notebook 03 uses. The ``paper`` entry holds MAGNET's App. A values."""

    # Joint training (App. A): x^m blocks for MNTP + MSG.
    seq_len: int
    batch_size: int
    phase1_steps: int  # λ = (1, 0, 1); paper: 3400
    phase2_steps: int  # λ = (1, 9, 1); paper: 800
    lr: float
    train_blocks: int
    grad_accum: int = 1
    lambda_sscl: float = 9.0
    max_spans: int = 2
    span_min: int = 4
    span_max: int = 128
    # SSCL views x, x^+ (App. A: batch 64, length 128, lines of more than 20 words).
    sscl_batch_size: int = 64  # per micro-batch: with grad_accum > 1 a step sees grad_accum InfoNCE batches
    sscl_max_len: int = 128
    sscl_min_words: int = 20
    sscl_pool: int = 4096
    temperature: float = 0.1
    positives: str = "augment"
    paraphraser: str = "prithivida/parrot_paraphraser_on_T5"
    delete_prob: float = 0.1
    crop_min: float = 0.8
    # LLM2Vec-style baseline: SimCSE steps on top of the MNTP adapter, evaluated (Fig. 6's generations included) every
    # simcse_eval_every steps: a cadence of its own, not a share of simcse_steps, so that the run extends.
    simcse_steps: int = 800
    simcse_eval_every: int = 400
    eval_every: int = 200
    checkpoint_every: int = 200
    # The budget check: held-out MNTP accuracy at every evaluation, on this many validation blocks masked once.
    heldout_blocks: int = 32
    gradient_checkpointing: bool = False  # recompute layers in backward (helpers.memory)
    # Table 5 / Fig. 6: greedy generation.
    gen_prefixes: int = 64
    gen_new_tokens: int = 128
    curve_prefixes: int = 16
    # Fig. 6's generations in a joint run at the steps that are multiples of this and at the last step (None: at every
    # evaluation); the held-out MNTP accuracy stays at every ``eval_every`` steps, so the budget check keeps its points.
    curve_every: int | None = None
    # Table 4: infilling.
    infill_passages: int = 200  # ROC-style passages (all the split holds when fewer)
    infill_blocks: int = 200  # Wikitext-style blocks
    infill_block_len: int = 256
    infill_max_spans: int = 3
    infill_span_min: int = 8
    infill_span_max: int = 32
    infill_examples: int = 4
    story_max_words: int = 110
    # Table 1: word-level probes (App. A: 4000 steps, batch 8, lr 5e-4, dropout 0.1).
    probe_source: str = "conll2003"
    probe_train_sentences: int = 14000
    probe_test_sentences: int = 3453
    probe_max_words: int = 60
    probe_steps: int = 4000
    probe_batch_size: int = 8
    probe_lr: float = 5e-4
    probe_dropout: float = 0.1
    probe_classifier: str = "app_a"  # App. A's AdamW probe, or "logistic": standardised features, converged LR
    # Table 5 / Fig. 6 generation batch.
    gen_batch_size: int = 32
    # Tables 2-3: sentence level (STS-B from the Hub; nothing offline, see experiment_table2.sentence_table).
    sts: bool = True
    sts_pairs: int = 1379
    embed_batch_size: int = 32
    # Table 6: extra ablation runs, trained like the SSCL stage ("sscl", "sscl+msg").
    ablation_runs: tuple[str, ...] = ("sscl", "sscl+msg")

    def __post_init__(self):
        if self.positives not in POSITIVE_KINDS:
            raise ValueError(f"positives={self.positives!r} is not one of {POSITIVE_KINDS}")
        if self.probe_classifier not in PROBE_CLASSIFIERS:
            raise ValueError(f"probe_classifier={self.probe_classifier!r} is not one of {PROBE_CLASSIFIERS}")
        if self.probe_source not in PROBE_SOURCES:
            raise ValueError(f"probe_source={self.probe_source!r} is not one of {PROBE_SOURCES}")
        if not 1 <= self.span_min <= self.span_max:
            raise ValueError(f"span_min={self.span_min}, span_max={self.span_max}: expected 1 <= span_min <= span_max")
        if self.max_spans * self.span_max + self.max_spans + 1 > self.seq_len:
            raise ValueError(f"max_spans x span_max = {self.max_spans} x {self.span_max} leaves no context in seq_len={self.seq_len}")
        if self.simcse_eval_every < 1:
            raise ValueError(f"simcse_eval_every={self.simcse_eval_every} must be >= 1 (the SimCSE stage's evaluation "
                             "cadence, in steps)")
        if self.heldout_blocks < 1:
            raise ValueError(f"heldout_blocks={self.heldout_blocks} must be >= 1 (the held-out MNTP curve's blocks)")
        if self.curve_every is not None and (self.curve_every < 1 or self.curve_every % self.eval_every):
            raise ValueError(f"curve_every={self.curve_every} must be a positive multiple of eval_every="
                             f"{self.eval_every} (Fig. 6's generations fall on evaluation steps), or None (at every "
                             "evaluation)")
        if self.sscl_batch_size < 2:
            raise ValueError(f"sscl_batch_size={self.sscl_batch_size} must be >= 2 for in-batch negatives")
        unknown = set(self.ablation_runs) - set(ABLATION_LAMBDAS)
        if unknown:
            raise ValueError(f"ablation_runs={self.ablation_runs} has unknown entries {sorted(unknown)}; expected {tuple(ABLATION_LAMBDAS)}")

    @property
    def total_steps(self) -> int:
        return self.phase1_steps + self.phase2_steps


# The sizes of the evaluations after training (Tables 1-5's test sets, the probes trained on frozen features, the
# generation batch). They change no trained weight and no record of a joint run, so a run's key leaves them out
# (``evaluation_free``): a larger test set finds the same run folders. The held-out MNTP blocks, Fig. 6's prefixes
# and the length of their generations are evaluated during training and stay in the key (the run's records).
EVALUATION_ONLY = ("gen_prefixes", "gen_batch_size", "infill_passages", "infill_blocks", "infill_block_len",
                   "infill_max_spans", "infill_span_min", "infill_span_max", "infill_examples", "story_max_words",
                   "probe_source", "probe_train_sentences", "probe_test_sentences", "probe_max_words", "probe_steps",
                   "probe_batch_size", "probe_lr", "probe_dropout", "probe_classifier", "sts", "sts_pairs",
                   "embed_batch_size")
# The test-example counts a seed study's examples look multiplies (helpers.profiles.scale_examples): Table 5's
# prefixes, Table 4's passages (ROC-style and Wikitext-style) and Table 1's probe test sentences; all evaluation-only.
EXAMPLE_SIZES = ("gen_prefixes", "infill_passages", "infill_blocks", "probe_test_sentences")


def evaluation_free(settings: MagnetSettings) -> MagnetSettings:
    """``settings`` with every :data:`EVALUATION_ONLY` size at its class default: what keys a notebook-03 run."""
    from dataclasses import fields, replace

    defaults = {field.name: field.default for field in fields(MagnetSettings) if field.name in EVALUATION_ONLY}
    return replace(settings, **defaults)


# The lengths of the last (or only) phase of notebook 03's runs: MAGNET's phase 2 (λ = (1, 9, 1), App. A), the
# LLM2Vec-style SimCSE stage, and Table 6's ablation runs (phase2_steps each). One run folder holds its run at any of
# these lengths (helpers.training.train continues a longer request from the checkpoint and reads a shorter one's
# prefix), so no run folder is keyed by them (``length_free``). MAGNET's phase 1 length stays in the key: it is where
# phase 2 starts, so another phase1_steps trains other steps, not a longer run. The adapter MAGNET saves keeps its
# length in its key (``experiment.run_key``).
RUN_LENGTHS = ("phase2_steps", "simcse_steps")


def length_free(settings: MagnetSettings) -> dict:
    """What keys a notebook-03 run folder and its training loop's stored settings: :func:`evaluation_free` settings as
    plain JSON (``store.canonical_settings``) without the run lengths :data:`RUN_LENGTHS`."""
    return store.canonical_without(evaluation_free(settings), RUN_LENGTHS)


SETTINGS = {
    # The same code paths at toy sizes on the tiny random Llama (nbmake).
    "smoke": MagnetSettings(seq_len=32, batch_size=2, phase1_steps=2, phase2_steps=2, lr=1e-3, train_blocks=16,
                            span_min=2, span_max=6, sscl_batch_size=2, sscl_max_len=24, sscl_min_words=5,
                            sscl_pool=8, simcse_steps=2, simcse_eval_every=1, eval_every=2, checkpoint_every=2,
                            heldout_blocks=2, gen_prefixes=2,
                            gen_new_tokens=6, curve_prefixes=2, infill_passages=2, infill_blocks=2, infill_block_len=48,
                            infill_span_min=3, infill_span_max=6, infill_examples=1, story_max_words=45, probe_source="silver",
                            probe_train_sentences=8, probe_test_sentences=6, probe_max_words=12, probe_steps=20,
                            probe_classifier="logistic", sts=False, embed_batch_size=8, ablation_runs=()),
    # SmolLM2-135M on Austen. Spans scaled with the block: 4-32 of 128 (the paper's 4-128 of 512); phase
    # lengths keep the paper's 3400:800 ratio roughly. Evaluation sizes fit make reproduce's 45 minutes on 2 cores:
    # 250 probe test sentences, 40 ROC-style and 30 Wikitext-style test passages, 2 x 50 prefixes x 128 tokens (half
    # the earlier sizes: the seed study's t interval over three seeds, not the test examples, sets most of a row's
    # width). Sentence clustering by novel is dropped (random assignment scored as high).
    # Budget (02 + 03 <= 22 min on 2 idle cores): evaluation takes about 60% of notebook 03, so joint training
    # stays at 100 steps (a phase-1 step ~2.4 s, a phase-2 step with SSCL ~5.5 s). The held-out MNTP accuracy every
    # 5 steps gives the budget check 11 points over the last half (metrics.stopped_improving needs 6); Fig. 6's
    # greedy generations, the costly part of an evaluation, every 20 steps give MAGNET's line 6 points.
    "cpu": MagnetSettings(seq_len=128, batch_size=4, phase1_steps=80, phase2_steps=20, lr=5e-4, train_blocks=2000,
                          span_min=4, span_max=32, sscl_batch_size=8, sscl_max_len=64, sscl_pool=2000,
                          simcse_steps=20, simcse_eval_every=10, eval_every=5, curve_every=20, checkpoint_every=20,
                          heldout_blocks=16,  # notebook 02's held-out set (4 x 4 blocks): Table 1's gap reads both
                          gen_prefixes=50,
                          gen_new_tokens=128, gen_batch_size=200, curve_prefixes=8, infill_passages=40, infill_blocks=30,
                          infill_block_len=128, infill_examples=3, probe_source="silver", probe_train_sentences=200,
                          probe_test_sentences=250, probe_max_words=25, probe_classifier="logistic", sts=False,
                          ablation_runs=()),
    # SmolLM2-360M, wikitext-103, one Colab-class GPU.
    "gpu": MagnetSettings(seq_len=512, batch_size=16, grad_accum=2, phase1_steps=850, phase2_steps=200, lr=1e-4,
                          train_blocks=100_000, sscl_batch_size=64, simcse_steps=200, simcse_eval_every=100,
                          eval_every=50,
                          checkpoint_every=50, gen_prefixes=200, gen_new_tokens=128, curve_prefixes=32,
                          infill_passages=500, infill_blocks=500, infill_block_len=256, probe_source="conll2003",
                          probe_train_sentences=14041, probe_test_sentences=3453, sts=True, sts_pairs=1379, gradient_checkpointing=True),
    # MAGNET App. A: LLaMA-2-7B, batch 32 x 512, lr 3e-5, 3400 + 800 iterations, SSCL batch 64 x 128.
    "paper": MagnetSettings(seq_len=512, batch_size=8, grad_accum=4, phase1_steps=3400, phase2_steps=800, lr=3e-5,
                            train_blocks=300_000, sscl_batch_size=64, simcse_steps=800, eval_every=400,
                            checkpoint_every=200, gen_prefixes=1000, gen_new_tokens=256, curve_prefixes=64,
                            infill_passages=1000, infill_blocks=1000, infill_block_len=512, probe_source="conll2003",
                            probe_train_sentences=14041, probe_test_sentences=3453, sts=True, sts_pairs=1379, gradient_checkpointing=True),
}


MAGNET_HELDOUT_CURVE = "MAGNET's held-out MNTP accuracy during joint training"


def curve_points(profile) -> dict[str, int]:
    """Per held-out curve notebook 03's claims rest on, how many evaluations fall in the last half of training under
    ``profile`` (a profile or its name), computed from the settings: MAGNET's held-out MNTP accuracy (step 0, every
    ``eval_every`` steps and the last step of the joint run) and notebook 02's MNTP run's held-out accuracy (the
    adapter the LLM2Vec-style rows rest on)."""
    from ... import metrics
    from ..mntp import settings as mntp_settings

    name = getattr(profile, "name", profile)
    magnet = SETTINGS[name]
    evaluated = metrics.evaluation_steps(magnet.total_steps, magnet.eval_every)
    return {MAGNET_HELDOUT_CURVE: metrics.points_in_window(evaluated), **mntp_settings.curve_points(name)}
