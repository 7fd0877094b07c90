"""Every size notebook 04 uses, one entry per profile; the ``paper`` entry holds §3.3 and App. A.4's values.

What changes a trained tagger is its own dataclass, :class:`TaggerTraining`, nested in :class:`RepetitionSettings`
as ``settings.training``: all of it but the length, together with the strategy, the seed, the model and the data,
keys a tagger's run folder (``experiment.TaggerRunKey``), so any other field (the number of workers, the probe, the
speed table) never forces a retrain, and a longer run extends the shorter one.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ... import masks as M
from ...checks import whole_number
from ...schedules import WarmupConstant
from ...seeds import StudySeed
from .mechanism import PAD_POLICIES, PAPER_DEPTH, PAPER_EXIT_LAYERS

PAPER_SEEDS = (5, 29, 42, 81, 123)  # App. A.4
STUDY_SEED_STRIDE = 1000  # a seed study's seed s adds 1000 s to every training seed (STUDY_SEED)
TASKS = ("ner", "chunks")
DATASETS = ("silver", "conll2003")


@dataclass(frozen=True)
class TaggerTraining:
    """§3.3 optimisation (App. A.4): LoRA r=16, α=16, p=0.1 on q, k, v, o; AdamW lr 2e-4, weight decay 0.05;
    batch 8 x 4. Every field changes the trained tagger; a tagger's run folder is keyed by all but ``steps``, so a
    longer request extends the run and a shorter one reads its prefix (``experiment.TaggerRunKey``). The notebook's
    parameters (``ledger.parameters``) keep the length: claims computed at another length are another notebook's.

    One departure: the learning rate stays constant. §3.3 states only "learning rate 2e-4"; the authors' code trains
    with HF Trainer's defaults, a linear decay to 0 over the whole run with no warm-up (its ``TrainingArguments`` set
    neither ``lr_scheduler_type`` nor ``warmup_steps``: takelab/repetition-sl, sl_pipeline/train_pipeline.py). That
    decay depends on the run's length, so a run under it could not be extended to show its validation curve stopped
    (``helpers.training.train``'s "Extending"); ``lr_schedule`` is the length-free
    :class:`helpers.schedules.WarmupConstant` with the recipe's warm-up, none.
    """

    steps: int = 100
    batch_size: int = 8
    grad_accum: int = 4
    lr: float = 2e-4
    weight_decay: float = 0.05
    lora_r: int = 16
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    classifier_dropout: float = 0.1  # the authors' head: nn.Dropout(0.1) before the linear layer
    lr_schedule: WarmupConstant = WarmupConstant(warmup=0)  # the authors' code warms up for 0 steps; no decay (above)
    eval_every: int = 50  # validation F1 every eval_every steps (and at a request's end) picks the run's weights
    qlora: bool = False  # nf4 with fp16 compute; only where CUDA and bitsandbytes are present
    gradient_checkpointing: bool = False
    pad_policy: str = "packed"  # App. A.3.2: how padded rows are repeated (mechanism.repeat_batch)

    def __post_init__(self):
        if self.pad_policy not in PAD_POLICIES:
            raise ValueError(f"pad_policy={self.pad_policy!r} is not one of {PAD_POLICIES}")
        if not isinstance(self.lr_schedule, WarmupConstant):
            raise ValueError(f"lr_schedule={self.lr_schedule!r} must be a helpers.schedules.WarmupConstant (a schedule "
                             "that does not depend on the run's length, so a run extends)")
        if not 0 <= self.classifier_dropout < 1:
            raise ValueError(f"classifier_dropout={self.classifier_dropout!r} must lie in [0, 1)")


@dataclass(frozen=True)
class RepetitionSettings:
    """Every size notebook 04 uses; the ``paper`` entry holds §3.3 and App. A.4's values."""

    # §2 block analysis: sentences of at most block_max_tokens tokens, repeated r times.
    block_repeats: tuple[int, ...] = (0, 1, 2, 4, 8)
    block_sentences: int = 4
    block_max_tokens: int = 12
    # §3.1 data: spaCy silver tags on the profile's corpus, or CoNLL-2003 from the Hub.
    dataset: str = "silver"
    tasks: tuple[str, ...] = ("ner", "chunks")
    train_sentences: int | None = 256  # None: the whole training split
    validation_sentences: int | None = 48
    test_sentences: int | None = 96
    min_words: int = 5
    max_words: int = 20
    max_tokens: int = 256  # App. A.4
    # §3.3-§3.4: the strategies and seeds trained, and how each tagger trains.
    repeats: tuple[int, ...] = (0, 1, 2, 4, 8)
    baselines: tuple[str, ...] = ("middle", "full")
    seeds: tuple[int, ...] = PAPER_SEEDS
    training: TaggerTraining = field(default_factory=TaggerTraining)
    checkpoint_every: int = 0  # resumable checkpoints; they never change the result
    # §3.5 early exit: fine-tune up to one of these exit layers (scaled from 9/14/19/24 of 32 layers).
    exit_repeats: tuple[int, ...] = (1, 2, 4, 8)
    exit_tasks: tuple[str, ...] = ("ner",)
    exit_seeds: tuple[int, ...] = PAPER_SEEDS
    exit_at: tuple[int, ...] = PAPER_EXIT_LAYERS  # the paper's exit layers (of 32) to run, scaled to the model
    # Training runs in parallel processes of `threads` torch threads each (results do not depend on it).
    workers: int = 1
    threads: int | None = None  # None: torch's default
    # The frozen-feature probe (Fig. 5's layer curve without fine-tuning): one no-grad pass per r, then a
    # logistic regression per layer on standardised first-sub-token features.
    probe_repeats: tuple[int, ...] = (0, 1)
    probe_train_sentences: int | None = None  # None: the task's whole training split
    probe_max_iter: int = 300
    # §4.5 Table 2: inference speed for every r x exit layer: speed_trials interleaved trials (the configurations
    # take turns within each) in each of speed_processes processes; the rows' intervals nest the trials in them.
    speed_repeats: tuple[int, ...] = (0, 1, 2, 4, 8)
    speed_sentences: int = 32
    speed_batch_size: int = 8
    speed_trials: int = 10
    speed_processes: int = 2
    # The tagging widget.
    widget_sentence: str = "Elizabeth Bennet walked with Mr. Darcy to Netherfield Park in October."

    def __post_init__(self):
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset={self.dataset!r} is not one of {DATASETS}")
        for task in self.tasks + self.exit_tasks:
            if task not in TASKS:
                raise ValueError(f"task={task!r} is not one of {TASKS}")
        for r in self.block_repeats + self.repeats + self.exit_repeats + self.speed_repeats:
            M.check_repeats(r)
        for baseline in self.baselines:
            if baseline not in ("middle", "full"):
                raise ValueError(f"baselines holds {baseline!r}; expected 'middle' and/or 'full'")
        if not isinstance(self.training, TaggerTraining):
            raise ValueError(f"training={self.training!r} must be a TaggerTraining")
        for layer in self.exit_at:
            whole_number(layer, "exit_at", 2, f"a paper exit layer of {PAPER_DEPTH} (2..{PAPER_DEPTH})")
        whole_number(self.workers, "workers", 1)
        whole_number(self.speed_trials, "speed_trials", 2, "interleaved timing trials per process (an interval needs 2)")
        whole_number(self.speed_processes, "speed_processes", 1, "processes the timing trials repeat in")
        for r in self.probe_repeats:
            M.check_repeats(r)

    def with_training(self, **changes) -> "RepetitionSettings":
        """These settings with some :class:`TaggerTraining` fields changed (e.g. ``steps=3``)."""
        return dataclasses.replace(self, training=dataclasses.replace(self.training, **changes))


# How a seed study's seed reaches these settings (helpers.profiles.settings_for): seed s shifts every training seed
# (initial LoRA and head, data order, dropout) by STUDY_SEED_STRIDE s, so no two study seeds share a training seed;
# seed 0 leaves them as they are. The tagging data read the profile's seed (training and validation sentences; the
# test sentences are every seed's).
STUDY_SEED = StudySeed(("seeds", "exit_seeds"), stride=STUDY_SEED_STRIDE)

# The test-example count a seed study's examples look multiplies (helpers.profiles.scale_examples): the test split,
# drawn with its own seed and held by no run key (a larger one scores the same taggers).
EXAMPLE_SIZES = ("test_sentences",)


_SMOKE = RepetitionSettings(
    block_repeats=(0, 1, 2), block_sentences=1, block_max_tokens=6,
    tasks=("ner", "chunks"), train_sentences=16, validation_sentences=4, test_sentences=6, max_words=12, max_tokens=32,
    repeats=(0, 1, 2), seeds=(0,),
    training=TaggerTraining(steps=2, batch_size=2, grad_accum=1, lr=2e-3, lora_r=4, lora_alpha=4, eval_every=1),
    exit_repeats=(1,), exit_tasks=("chunks",), exit_seeds=(0,),
    speed_repeats=(0, 1, 2), speed_sentences=4, speed_batch_size=2, speed_trials=2, speed_processes=1,
)
# cpu: 60 test sentences and a probe trained on 120. Silver noun chunks only (silver NER has too few test entities to separate the strategies); r in {0, 1, 2} (r=2
# against r=1 is §4.2's "more repetitions help"), middle and full unmasking, and r = 1 at exit@18 (17 of 30 layers), one
# training seed per run (`make study` runs the notebook under three study seeds, :data:`STUDY_SEED`,
# and each trained row becomes the seed mean with a t interval over them), 400 steps of 8 sentences of 5-12 words at
# lr 1e-3 (5x the paper's, for so few steps) held constant (TaggerTraining's departure); validation F1 every 10 steps
# picks each run's weights (the test split never picks) and gives the budget check (`curve_points`) 20 evaluations in
# the last half of training (steps 210..400; the step-0 evaluation is skipped): the length and cadence at which the
# seed-mean validation curves of the 100-step study (noise 1.3-1.9 F1 points, gain 65-71) read "stopped" in at least
# 80% of simulated draws and a curve still rising 3 points per 100 steps "still improving" in 95%
# (scripts/stop_design.py; below about 230 steps such a rise is within the tolerance, a stop by the test's own
# definition). Two training processes of one torch thread each. r = 4, 8 at full depth and the other exits are left to the gpu profile; the frozen-feature
# probe covers every layer for r = 0 and 1.
_CPU = RepetitionSettings(
    block_repeats=(0, 1, 2, 4, 8), block_sentences=16, block_max_tokens=12,
    tasks=("chunks",), train_sentences=240, validation_sentences=48, test_sentences=60, max_words=12, max_tokens=48,
    repeats=(0, 1, 2), seeds=(5,),
    training=TaggerTraining(steps=400, batch_size=8, grad_accum=1, lr=1e-3, eval_every=10),
    exit_repeats=(1,), exit_tasks=("chunks",), exit_seeds=(5,), exit_at=(19,), workers=2, threads=1,
    speed_repeats=(0, 1, 2, 4, 8), speed_sentences=4, speed_batch_size=4, speed_trials=10, speed_processes=3,
    probe_train_sentences=120,
)
_GPU = RepetitionSettings(
    block_sentences=16, block_max_tokens=24, dataset="conll2003", tasks=("ner",),
    train_sentences=4000, validation_sentences=500, test_sentences=None, max_words=1000, seeds=(5, 29, 42),
    training=TaggerTraining(steps=400, batch_size=8, grad_accum=4, eval_every=100, qlora=True,
                            gradient_checkpointing=True),
    checkpoint_every=100, exit_seeds=(5,), speed_sentences=256, speed_batch_size=32, speed_trials=10,
    speed_processes=3,
    probe_train_sentences=1000,
    widget_sentence="EU rejects German call to boycott British lamb .",
)
# paper: §3.3 and App. A.4: 10 epochs of CoNLL03 (14,041 sentences, effective batch 32), best epoch on validation,
# five seeds, QLoRA nf4 / fp16, gradient checkpointing, max 256 tokens; padded rows concatenated k times (App. A.3.2)
# with the pads between copies masked.
_PAPER = RepetitionSettings(
    block_sentences=32, block_max_tokens=32, dataset="conll2003", tasks=("ner",),
    train_sentences=None, validation_sentences=None, test_sentences=None, max_words=1000, seeds=PAPER_SEEDS,
    training=TaggerTraining(steps=4388, batch_size=8, grad_accum=4, eval_every=439, qlora=True,
                            gradient_checkpointing=True, pad_policy="masked"),
    checkpoint_every=439, exit_seeds=PAPER_SEEDS, speed_sentences=1024, speed_batch_size=32, speed_trials=10,
    speed_processes=3,
    probe_train_sentences=500,
    widget_sentence="EU rejects German call to boycott British lamb .",
)
SETTINGS = {"smoke": _SMOKE, "cpu": _CPU, "gpu": _GPU, "paper": _PAPER}


def at_prefix(settings: RepetitionSettings, divisor: int) -> RepetitionSettings:
    """make reproduce's prefix (``helpers.profiles.at_prefix``): every tagger trains 1/``divisor`` of its steps,
    rounded down to the validation cadence and at least one cadence, so each is a prefix of the full-length run (the
    run key holds no length and the learning rate is constant, :class:`TaggerTraining`); the cadence is kept."""
    training = settings.training
    every = training.eval_every or training.steps
    steps = max(every, training.steps // divisor // every * every)
    return settings.with_training(steps=min(steps, training.steps))


# Every tagger's held-out curve: validation F1 at each evaluation (``experiment.train_tagger`` records it as
# "validation_f1" every ``eval_every`` steps and at the last step; step 0 is skipped, its head is untrained).
TAGGER_CURVE = "tagger validation F1"


def tagger_evaluation_steps(training: TaggerTraining) -> list[int]:
    """The steps at which a tagger trained under ``training`` records its validation F1."""
    every = training.eval_every
    steps = set(range(every, training.steps + 1, every)) if every else set()
    return sorted(steps | {training.steps})


def curve_points(profile) -> dict[str, int]:
    """For each held-out curve notebook 04's trained claims rest on, how many evaluations fall in the last half of
    training under ``profile`` (the window :func:`helpers.metrics.stopped_improving` fits; it needs
    :data:`helpers.metrics.STOP_MIN_POINTS`). Computed from the settings, as the equivalence test selects them."""
    from ... import metrics

    return {TAGGER_CURVE: metrics.points_in_window(tagger_evaluation_steps(SETTINGS[getattr(profile, "name", profile)].training))}
