"""The training steps ``benchmarks/training_steps.py`` times, each built by the notebook's own driver.

Every notebook trains through ``helpers.training.train``. :func:`capture` runs a notebook's driver (notebook 02's
``run_objective``, notebook 03's ``train_magnet`` and ``train_llm2vec_style``, notebook 04's ``train_tagger``, notebook 06's ``train_emat`` (both
heads), ``train_length_classifier`` and ``train_gru``, notebook 07's ``fine_tune``) at the profile's settings until it hands ``train`` its run, and keeps what
it handed over (model, ``batch_for``, ``loss_fn``, config, evaluator) without training. :class:`Loop` then runs that
run's steps with ``train``'s own pieces: the optimizer and accelerator of ``training._prepare``, one step of
``training._step`` (the batch, bf16 autocast where the weights are bf16, backward, clipping, AdamW) and one held-out
evaluation of ``training._evaluate``.

Departures, each forced by what this machine holds: notebook 07 continues notebook 02's merged MNTP adapter and
notebook 06 reads features of it; no adapter of the current key is cached (loading one would train the short
fallback), so both run on the base weights (same shapes, same cost), and notebook 06's heads get features of the real
shape drawn at random (their values change no cost; computing them is a forward over every sentence, minutes). The
GRU's held-out evaluation decodes greedily from those features, so where it stops may differ from the notebook's.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from helpers import curves, distributed, memory, models, mntp_adapter, mntp_recipe, profiles, training
from helpers import objectives as O
from helpers.device import training_mixed_precision
from helpers.masked_lm import MNTPDecoder

from training_steps_counts import decoder_flops, evaluation_count, linear_flops, tensor_flops


class _Captured(Exception):
    """Raised by the stand-in ``train`` once it holds the run asked for."""


def capture(call: Callable, calls: int = 1) -> list[dict]:
    """Run ``call`` (a notebook's driver) until it hands ``helpers.training.train`` its ``calls``-th run; the
    arguments of each run up to it (``model`` included). Nothing trains: earlier runs get no records back."""
    seen: list[dict] = []

    def stand_in(model, **kwargs):
        seen.append({"model": model, **kwargs})
        if len(seen) == calls:
            raise _Captured
        return []

    original, training.train = training.train, stand_in
    try:
        call()
    except _Captured:
        return seen
    finally:
        training.train = original
    raise RuntimeError(f"{call} returned before handing helpers.training.train run {calls}")


class Loop:
    """One captured run's steps and evaluations through ``helpers.training``'s own loop pieces."""

    def __init__(self, run: dict, scratch: Path):
        self.run, self.config = run, run["config"]
        model = run["model"]
        self.accelerator = distributed.accelerator_for(training_mixed_precision(model))
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(self.parameters, lr=self.config.lr, betas=self.config.betas,
                                      eps=self.config.eps, weight_decay=self.config.weight_decay)
        torch.manual_seed(self.config.seed)
        self.model, self.optimizer = training._prepare(self.accelerator, model, optimizer, self.parameters,
                                                       self.config)
        self.micros = distributed.process_micro_batches(self.config.grad_accum, self.accelerator.process_index,
                                                        self.accelerator.num_processes)
        self.scratch = scratch

    def step(self, index: int) -> float:
        return training._step(self.accelerator, self.model, self.optimizer, self.parameters, index, self.micros,
                              batch_for=self.run["batch_for"], loss_fn=self.run["loss_fn"], config=self.config,
                              lr_lambda=self.run.get("lr_lambda"))

    def batches(self, index: int) -> list[dict]:
        return [self.run["batch_for"](index, micro) for micro in self.micros]

    def evaluate(self, step: int) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        training._evaluate(self.model, self.run["evaluate"], self.scratch, step)


@dataclass
class Row:
    """One timed step kind of a run: its step indices (the first is the warm-up) and its count of a batch."""

    name: str
    steps: list[int]
    count: Callable[[dict], tuple[int, float]]  # one micro-batch -> (tokens, useful FLOPs)
    unit: str = "tokens"
    run_steps: int = 0  # how many steps of the run are of this kind (an evaluation's share)


@dataclass
class Evaluation:
    """One held-out evaluation kind of a run: the step it is called at and how often a run calls it."""

    name: str
    step: int
    count: int


@dataclass
class Case:
    name: str
    loop: Loop
    rows: list[Row]
    evaluations: list[Evaluation] = field(default_factory=list)
    threads: int | None = None  # torch threads the notebook trains this with (None: the default)


def _steps(first: int, count: int) -> list[int]:
    return list(range(first, first + count + 1))


def _full_steps(loop: Loop, count: int, size: int) -> list[int]:
    """The first ``count + 1`` steps whose batch holds ``size`` rows (an epoch's last batch may hold fewer)."""
    chosen, step = [], 0
    while len(chosen) < count + 1 and step < loop.config.steps:
        if len(next(iter(loop.batches(step)[0].values()))) == size:
            chosen.append(step)
        step += 1
    return chosen


def _evaluations(loop: Loop, name: str, *, skip_first: bool = False) -> list[Evaluation]:
    if loop.run.get("evaluate") is None:
        return []
    every = loop.config.eval_every
    return [Evaluation(name, every or loop.config.steps, evaluation_count(loop.config.steps, every,
                                                                         skip_first=skip_first))]


def masked_lm_count(model) -> Callable:
    """A masked-LM batch (MNTP, MTP, LLaDA's Eq. 3): its rows' real tokens through the decoder, the head on the
    labelled outputs."""
    def count(batch: dict) -> tuple[int, float]:
        lengths = batch["padding_mask"].sum(-1).tolist()
        scored = int((batch["labels"] != O.IGNORE_INDEX).sum())
        return int(sum(lengths)), decoder_flops(model, lengths, scored)
    return count


# --------------------------------------------------------------------------- notebook 02

@dataclass
class MaskedLMInputs:
    profile: object
    tokenizer: object
    data: object
    recipe: mntp_recipe.MaskedLMRecipe


def masked_lm_inputs(profile) -> MaskedLMInputs:
    """Notebook 02's data and recipe (its sections 2 and 4: ``load_data``, ``memory.fit_training``)."""
    from helpers.papers.mntp import experiment as mntp_experiment

    tokenizer = models.load_tokenizer(profile.model_name)
    recipe = mntp_recipe.masked_lm_recipe(profile)
    data = mntp_experiment.load_data(tokenizer, profile, recipe)
    return MaskedLMInputs(profile, tokenizer, data, memory.fit_training("02", profile, recipe))


def masked_lm_case(inputs: MaskedLMInputs, objective: str, scratch: Path, steps: int) -> Case:
    """Notebook 02's ``objective`` run exactly as the notebook starts it (``run_objective``)."""
    from helpers.papers.mntp import experiment as mntp_experiment

    run, = capture(lambda: mntp_experiment.run_objective(inputs.profile, inputs.tokenizer, inputs.data, objective,
                                                         recipe=inputs.recipe, progress=False))
    loop = Loop(run, scratch / f"eval_{objective}")
    name = f"{objective.upper()} (notebook 02)"
    return Case(name, loop, [Row(name, _steps(0, steps), masked_lm_count(loop.model), run_steps=loop.config.steps)],
                _evaluations(loop, f"{objective.upper()} held-out accuracy"))


def masked_lm_variant(inputs: MaskedLMInputs, scratch: Path, *, attn_implementation: str = "sdpa",
                      dropout: float | None = None, mask_tensor: bool = True) -> Loop:
    """Notebook 02's MNTP run with its options changed through the workbook's own arguments:
    ``models.load_model(attn_implementation=...)``, ``LoraSettings(dropout=...)``,
    ``masked_lm_experiment(mask_tensor=...)``."""
    profile = inputs.profile
    config = mntp_adapter.mlm_train_config(profile, inputs.recipe)
    lora = training.lora_settings(profile)
    lora = lora if dropout is None else dataclasses.replace(lora, dropout=dropout)
    base, _ = models.load_model(profile.model_name, attn_implementation=attn_implementation)
    run, = capture(lambda: mntp_adapter.masked_lm_experiment(
        base, inputs.tokenizer, objective="mntp", train_blocks=inputs.data.train_blocks,
        eval_batches=inputs.data.eval_batches["mntp"], config=config, run_dir=scratch / "variant",
        mask_id=inputs.data.mask_id, lora=lora, four_bit=training.four_bit_requested(profile), progress=False,
        mask_tensor=mask_tensor))
    return Loop(run, scratch / "variant_eval")


def compile_layers(model) -> None:
    """``torch.compile`` each decoder layer in place (``nn.Module.compile``); the first steps then compile."""
    for layer in models.decoder_layers(model):
        layer.compile()


# --------------------------------------------------------------------------- notebook 03

def magnet_cases(profile, scratch: Path, steps: int):
    """Notebook 03's runs on one build of its views and evaluation: :func:`magnet_case`, then
    :func:`llm2vec_case`."""
    from helpers.papers.magnet import experiment as E

    settings = profiles.settings_for("magnet", profile)
    tokenizer = models.load_tokenizer(profile.model_name)
    views = E.joint_data(profile, settings, tokenizer)
    _, evaluate = E.joint_evaluation(profile, settings, tokenizer)
    settings = memory.fit_training("03", profile, settings)
    yield magnet_case(profile, settings, views, evaluate, scratch, steps)
    yield llm2vec_case(profile, settings, views, evaluate, scratch, steps)


def magnet_case(profile, settings, views, evaluate, scratch: Path, steps: int) -> Case:
    """Notebook 03's MAGNET run (``train_magnet``, both phases of Eq. 5): phase 1's step (MNTP + MSG) and phase 2's
    (+ SSCL); its evaluation is the held-out MNTP accuracy every ``eval_every`` steps, with Fig. 6's greedy
    generations at the multiples of ``curve_every`` and the last step."""
    from helpers.papers.magnet import experiment as E

    base, tokenizer = models.load_model(profile.model_name)
    run, = capture(lambda: E.train_magnet(base, tokenizer, profile, settings, views, evaluate=evaluate,
                                          progress=False))
    loop = Loop(run, scratch / "eval_magnet")
    model = loop.model

    def count(batch: dict) -> tuple[int, float]:
        lengths, scored, head = [], 0, 0.0
        if "masked" in batch:
            view = batch["masked"]
            lengths += view["padding_mask"].sum(-1).tolist()
            scored += sum(int((view[name] != O.IGNORE_INDEX).sum()) for name in ("mntp_labels", "msg_labels")
                          if name in view)
        if batch["lambdas"][1]:
            for name in ("anchors", "positives"):
                lengths += batch[name]["padding_mask"].sum(-1).tolist()
            head = linear_flops(model.sscl_head, 2 * len(batch["anchors"]["input_ids"]), backward=True)
        return int(sum(lengths)), decoder_flops(model, lengths, scored) + head

    first = settings.phase1_steps
    rows = [Row("MAGNET phase 1: MNTP + MSG", _steps(0, steps), count, run_steps=settings.phase1_steps),
            Row("MAGNET phase 2: + SSCL", _steps(first, steps), count, run_steps=settings.phase2_steps)]
    evaluated = curves.evaluation_steps(settings.total_steps, settings.eval_every)
    heavy = [s for s in evaluated if settings.curve_every is None or s % settings.curve_every == 0
             or s == settings.total_steps]
    light = [s for s in evaluated if s not in heavy]
    evaluations = [Evaluation("MAGNET held-out MNTP + Fig. 6 generations", heavy[0], len(heavy))]
    if light:
        evaluations.insert(0, Evaluation("MAGNET held-out MNTP accuracy", light[0], len(light)))
    return Case("MAGNET (notebook 03)", loop, rows, evaluations)


def llm2vec_case(profile, settings, views, evaluate, scratch: Path, steps: int) -> Case:
    """Notebook 03's LLM2Vec-style baseline (``train_llm2vec_style``): SSCL alone, λ = (0, 1, 0), on a fresh LoRA over
    the merged MNTP adapter, here over fresh base weights (same shapes, same cost; see the module's departures).
    Table 6's ablation runs are not timed: the cpu profile asks for none (they score STS-B only)."""
    from unittest import mock

    from helpers.papers.magnet import experiment as E

    base, tokenizer = models.load_model(profile.model_name)
    stand_in = {"base weights": profile.model_name}  # keys the scratch run folder in place of the adapter's key
    with mock.patch.object(E.MNTP, "load_or_train_mntp", lambda profile, progress=True: (base, tokenizer, None)), \
            mock.patch.object(E.MNTP, "mntp_adapter", lambda profile: (None, stand_in)):
        run, = capture(lambda: E.train_llm2vec_style(tokenizer, profile, settings, views, evaluate=evaluate,
                                                     progress=False))
    loop = Loop(run, scratch / "eval_llm2vec")
    model = loop.model

    def count(batch: dict) -> tuple[int, float]:
        lengths = [length for name in ("anchors", "positives") for length in batch[name]["padding_mask"].sum(-1).tolist()]
        head = linear_flops(model.sscl_head, 2 * len(batch["anchors"]["input_ids"]), backward=True)
        return int(sum(lengths)), decoder_flops(model, lengths, 0, lm_head=False) + head

    name = "LLM2Vec-style SimCSE stage (notebook 03)"
    return Case(name, loop, [Row(name, _steps(0, steps), count, run_steps=settings.simcse_steps)],
                _evaluations(loop, "LLM2Vec-style held-out MNTP accuracy"))


# --------------------------------------------------------------------------- notebook 04

def tagger_cases(profile, scratch: Path, steps: int):
    """Notebook 04's SR taggers, one per strategy it trains (``main_strategies``: each r of the settings, then the
    middle and full unmasking baselines on the single copy), at the torch threads its worker processes train with
    (``settings.threads``)."""
    from helpers.papers.sequence_repetition import experiment as E
    from helpers.papers.sequence_repetition.experiment_data import load_tagging_data

    settings = profiles.settings_for("sequence_repetition", profile)
    tokenizer = models.load_tokenizer(profile.model_name)
    task, seed = settings.tasks[0], settings.seeds[0]
    tagging = load_tagging_data(tokenizer, task, settings, profile.corpus, seed=profile.seed, progress=False)
    settings = memory.fit_training("04", profile, settings)
    for strategy in E.main_strategies(settings):
        r = strategy.r
        folder = E.tagger_run(tagging, strategy, settings, model_name=profile.model_name, seed=seed,
                              run_prefix=E.run_prefix(profile))
        run, = capture(lambda: E.train_tagger(tagging, strategy, settings, model_name=profile.model_name, seed=seed,
                                              run=folder, progress=False))
        loop = Loop(run, folder.path)
        tagger = loop.model

        def count(batch: dict, tagger=tagger, r=r) -> tuple[int, float]:
            real = batch["padding_mask"].sum(-1)
            lengths = ((r + 1) * real).tolist()
            return (int(sum(lengths)), decoder_flops(tagger.body, lengths, 0, lm_head=False)
                    + linear_flops(tagger.head, int(real.sum()), backward=True))

        name = f"SR tagger r={r} ({task})" if strategy.kind == "sr" else f"SR tagger, {strategy.label} ({task})"
        yield Case(name, loop, [Row(name, _steps(0, steps), count, run_steps=loop.config.steps)],
                   _evaluations(loop, f"{name} validation F1", skip_first=True), threads=settings.threads)


# --------------------------------------------------------------------------- notebook 06

def emat_cases(profile, scratch: Path, steps: int):
    """Notebook 06's heads on frozen features (``train_emat`` on the whole extended matrix, ``train_gru`` with its
    language-model pre-training first), at batch 128 (App. C)."""
    from helpers.papers.emat import experiment_training as E
    from helpers.papers.emat.experiment_data import build_dataset, encode_splits

    settings = profiles.settings_for("emat", profile)
    model, tokenizer = models.load_model(profile.model_name)
    mlm = MNTPDecoder(model.eval().requires_grad_(False), tokenizer, O.resolve_mask_token(tokenizer, "underscore"),
                      context_tokens=settings.context_tokens, name=profile.model_name)
    dataset = build_dataset(profile.corpus, settings.data, tokenizer, mlm.name, progress=False)
    encoded = encode_splits(mlm, dataset)
    generator = torch.Generator().manual_seed(0)
    features = {split: torch.randn(len(encoded[split]), mlm.hidden_size, generator=generator) for split in encoded}
    heads = settings.training
    size = f"{len(dataset.vocabulary)} phrases, {len(encoded['train'])} train / {len(encoded['validation'])} dev"

    run, = capture(lambda: E.train_emat(mlm, dataset, encoded, features, heads, progress=False))
    loop = Loop(run, scratch / "eval_emat")
    emat = loop.model

    def emat_count(batch: dict) -> tuple[int, float]:
        rows = len(batch["hidden"])
        return rows, tensor_flops([emat.token_matrix, emat.phrase_matrix], rows, input_grad=False)

    name = f"EMAT head ({size})"
    yield Case(name, loop, [Row(name, _full_steps(loop, steps, heads.batch_size), emat_count, "examples",
                                run_steps=loop.config.steps)], _evaluations(loop, "EMAT dev a@1 and a@10"))

    run, = capture(lambda: E.train_emat(mlm, dataset, encoded, features, heads, train_token_rows=False,
                                        progress=False))
    loop = Loop(run, scratch / "eval_emat_new_rows")
    new_rows = loop.model

    def new_rows_count(batch: dict) -> tuple[int, float]:
        rows = len(batch["hidden"])
        return rows, tensor_flops([new_rows.token_matrix, new_rows.phrase_matrix], rows, input_grad=False)

    name = "EMAT head, new rows only"
    yield Case(name, loop, [Row(name, _full_steps(loop, steps, heads.batch_size), new_rows_count, "examples",
                                run_steps=loop.config.steps)], _evaluations(loop, "EMAT (new rows) dev a@1 and a@10"))

    run, = capture(lambda: E.train_length_classifier(mlm, dataset, encoded, features, heads, progress=False))
    loop = Loop(run, scratch / "eval_length")
    classifier = loop.model

    def length_count(batch: dict) -> tuple[int, float]:
        return len(batch["hidden"]), tensor_flops([classifier.linear.weight], len(batch["hidden"]), input_grad=False)

    name = "naive MTC length classifier"
    yield Case(name, loop, [Row(name, _full_steps(loop, steps, heads.batch_size), length_count, "examples",
                                run_steps=loop.config.steps)], _evaluations(loop, "length classifier dev accuracy"))

    runs = capture(lambda: E.train_gru(mlm, dataset, encoded, features, heads, progress=False),
                   calls=2 if heads.gru_pretrain_steps else 1)
    for run in runs:
        loop = Loop(run, scratch / "eval_gru")
        gru = loop.model
        weights = [w for n, w in gru.gru.named_parameters() if n.startswith("weight")]
        weights += [gru.feed_forward.weight, gru.output_head.weight]

        def gru_count(batch: dict, weights=weights) -> tuple[int, float]:
            label_tokens = int((batch["target"] != -100).sum())
            return label_tokens, tensor_flops(weights, label_tokens, input_grad=True)

        name = "GRU decoder (MTC)" if "hidden" in run["batch_for"](0, 0) else "GRU language-model pre-training"
        yield Case(name, loop, [Row(name, _full_steps(loop, steps, heads.batch_size), gru_count, "label tokens",
                                    run_steps=loop.config.steps)], _evaluations(loop, "GRU dev loss and a@1"))


# --------------------------------------------------------------------------- notebook 07

def diffusion_case(profile, scratch: Path, steps: int) -> Case:
    """Notebook 07's fine-tune (``fine_tune``: a fresh LoRA trained on LLaDA's Eq. 3), held-out loss every
    ``fine_tune_eval_every`` steps."""
    from helpers.papers.diffusion import experiment_fine_tune as E

    settings = profiles.settings_for("diffusion", profile)
    model, tokenizer = models.load_model(profile.model_name)
    backend = MNTPDecoder(model.eval().requires_grad_(False), tokenizer, O.resolve_mask_token(tokenizer, "underscore"),
                          name=profile.model_name)
    run, = capture(lambda: E.fine_tune(backend, profile, settings, progress=False))
    loop = Loop(run, scratch / "eval_diffusion")
    name = "diffusion fine-tune (notebook 07)"
    return Case(name, loop, [Row(name, _steps(0, steps), masked_lm_count(loop.model), run_steps=loop.config.steps)],
                _evaluations(loop, "diffusion held-out Eq. 3 loss"))
