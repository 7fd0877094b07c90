"""§3.3-§3.5 token labelling for notebook 04: build, fine-tune, score and reload SR taggers and their baselines.

Each run (task, strategy, seed) lives in ``runs/<prefix>_<task>_<strategy>_s<seed>_<fingerprint>``, keyed by a
:class:`TaggerRunKey` through :func:`helpers.store.reuse_run`: the training settings but their length, the strategy,
the seed, the model and the data's fingerprint, exactly what changes a trained tagger. One folder holds a tagger's
run whatever its length: a longer request extends it, a shorter one reads its prefix (:func:`train_tagger`).
"""
from __future__ import annotations

import functools
import gc
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from tqdm.auto import tqdm

from ... import attention, distributed, metrics, models, store, training
from ...device import resolve_four_bit, training_mixed_precision
from ...seeds import EPOCH_ORDER_MULTIPLIER, seeded_generator
from .experiment_data import EncodedSentence, TaggingData, collate, encode_words
from .mechanism import PAPER_DEPTH, Strategy, TokenTagger, scaled_exit_layer, truncate_layers
from .settings import RepetitionSettings, TaggerTraining


def _half_compute(body) -> None:
    """App. A.4: nf4 weights with fp16 computation."""
    for module in body.modules():
        if type(module).__name__ == "Linear4bit":
            module.compute_dtype = torch.float16


def build_tagger(model_name: str, num_labels: int, strategy: Strategy, settings: TaggerTraining, *,
                 seed: int = 0, device=None) -> tuple[TokenTagger, object]:
    """The profile's decoder, cut at ``strategy.exit_layer``, with LoRA (r, α, dropout from ``settings``) on
    q, k, v, o of the kept layers and a fresh head, both drawn from ``seed`` (two builds with one seed are
    identical). QLoRA (nf4, fp16) on CUDA."""
    four_bit = bool(settings.qlora) and resolve_four_bit(True, torch.device(device) if device else None)
    model, tokenizer = models.load_model(model_name, attn_implementation="sdpa", load_in_4bit=four_bit, device=device,
                                         **({"dtype": "float16"} if four_bit else {}))
    body = models.decoder_body(model)
    if strategy.exit_layer is not None:
        truncate_layers(body, strategy.exit_layer)
    if four_bit:
        _half_compute(body)
    if settings.gradient_checkpointing and torch.cuda.is_available():
        body.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        body.enable_input_require_grads()
    lora = training.LoraSettings(r=settings.lora_r, alpha=settings.lora_alpha, dropout=settings.lora_dropout)
    torch.manual_seed(seed)  # before add_lora: LoRA's A matrices are drawn here
    body = training.add_lora(body, lora, four_bit=four_bit)
    tagger = TokenTagger(body, num_labels, strategy, settings.pad_policy, settings.classifier_dropout)
    tagger.head.to(next(p for p in body.parameters()).device)
    return tagger, tokenizer


def _training_autocast(tagger: TokenTagger):
    """The autocast the loop's validation evaluations run under (accelerate's, for training's mixed precision: its
    prepared model keeps it), so a tagger read back from its weights scores as one just trained does."""
    mixed = training_mixed_precision(tagger)
    return torch.autocast(tagger.head.weight.device.type, dtype=torch.float16 if mixed == "fp16" else torch.bfloat16,
                          enabled=mixed != "no")


@torch.no_grad()
def predict_tags(tagger: TokenTagger, sentences: Sequence[EncodedSentence], labels: Sequence[str], pad_id: int,
                 batch_size: int = 16) -> list[list[str]]:
    """The argmax tag of each word, read at its first sub-token, in training's precision (:func:`_training_autocast`:
    the same predictions whether the tagger was just trained or read back)."""
    was_training = tagger.training
    tagger.eval()
    device = tagger.head.weight.device
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].input_ids))  # less padding
    predictions: list[list[str]] = [[] for _ in sentences]
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        chunk = [sentences[i] for i in chosen]
        batch = collate(chunk, labels, pad_id)
        with _training_autocast(tagger):
            logits = tagger(batch["input_ids"].to(device), batch["padding_mask"].to(device))["logits"]
        best = logits.argmax(-1).cpu()
        for row, (index, sentence) in enumerate(zip(chosen, chunk)):
            predictions[index] = [labels[int(best[row, position])] for position in sentence.word_starts]
    tagger.train(was_training)
    return predictions


def tagging_f1(tagger: TokenTagger, sentences: Sequence[EncodedSentence], labels: Sequence[str], pad_id: int,
               batch_size: int = 16) -> float:
    """seqeval micro F1 (strict IOB2) of the predicted tags against the gold ones."""
    predicted = predict_tags(tagger, sentences, labels, pad_id, batch_size)
    return metrics.seqeval_f1([list(s.tags) for s in sentences], predicted)


def _trainable_state(model) -> dict:
    return {name: tensor.detach().cpu().clone() for name, tensor in model.named_parameters() if tensor.requires_grad}


def _load_trainable_state(model, state: dict) -> None:
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, tensor in state.items():
            parameters[name].copy_(tensor)


@functools.lru_cache(maxsize=4)
def _epoch_order(seed: int, epoch: int, size: int) -> torch.Tensor:
    return torch.randperm(size, generator=seeded_generator(seed, epoch, multiplier=EPOCH_ORDER_MULTIPLIER))


# --------------------------------------------------------------------------- one tagger's run

def run_folder_training(recipe: TaggerTraining) -> dict:
    """``recipe`` as it keys a tagger's run folder: every field but the length, so one folder holds the run whatever
    its length (:func:`train_tagger` extends it or reads its prefix)."""
    return store.canonical_without(recipe, ("steps",))


@dataclass(frozen=True)
class TaggerRunKey:
    """Exactly what changes a trained tagger: how it trains (but for how long), the strategy, the seed, the model and
    the data."""

    training: dict  # run_folder_training(settings.training)
    strategy: Strategy
    seed: int
    model: str
    data: str  # TaggingData.fingerprint()
    dtype: str  # the weights' dtype (models.weight_dtype_name)
    rng: str = training.RNG_SCHEME  # how the loop draws dropout: another scheme trains another tagger


def tagger_run(tagging: TaggingData, strategy: Strategy, settings: RepetitionSettings, *, model_name: str, seed: int,
               run_prefix: str, resume: bool = True) -> store.Run:
    """The run folder of one (task, strategy, seed): ``runs/<run_prefix>_<task>_<strategy>_s<seed>_<fingerprint>``."""
    key = TaggerRunKey(run_folder_training(settings.training), strategy, seed, model_name, tagging.fingerprint(),
                       models.weight_dtype_name())
    return store.reuse_run(f"{run_prefix}_{tagging.task}_{strategy.slug}_s{seed}", key, resume=resume)


BEST_PREFIX = "best-at-step-"  # the weights of an evaluation that beat every earlier one
RESULT_PREFIX = "result-at-"  # the result of a request, by its length


def _best_path(run_dir, step: int) -> Path:
    return Path(run_dir) / f"{BEST_PREFIX}{int(step)}.pt"


def _result_path(run_dir, steps: int) -> Path:
    return Path(run_dir) / f"{RESULT_PREFIX}{int(steps)}.json"


def _lengths(run_dir, prefix: str) -> list[int]:
    """The steps named by the files ``<prefix><steps>.*`` of a run folder."""
    return sorted(int(path.name[len(prefix):].split(".")[0]) for path in Path(run_dir).glob(f"{prefix}*"))


def finished_result(run: store.Run, steps: int) -> dict | None:
    """The result a request of ``steps`` steps stored in ``run`` (:func:`train_tagger`), or None before one did."""
    path = _result_path(run.path, steps)
    return store.read_json(path, f"Delete {path} to score this tagger again.") if path.exists() else None


def validation_curve(records: Sequence[dict], steps: int) -> list[tuple[int, float]]:
    """A run's (step, validation F1) evaluations up to ``steps``."""
    return [(r["step"], r["validation_f1"]) for r in records if "validation_f1" in r and r["step"] <= steps]


def best_step(curve: Sequence[tuple[int, float]]) -> int:
    """The first step of the highest validation F1: the weights a request keeps (§3.3: "the best-performing weights
    were selected based on the highest micro F1 score on the validation set")."""
    return max(curve, key=lambda item: item[1])[0]


def _drop_unreachable_best(run_dir: Path) -> None:
    """Delete the best weights no request can ask for again: a length already requested reads its own best step's
    (``result-at-`` files, ``training.kept_lengths``), a longer one continues from the furthest step's best."""
    records = training.read_metrics(run_dir)
    lengths = {*_lengths(run_dir, RESULT_PREFIX), *training.kept_lengths(run_dir), records[-1]["step"]}
    needed = {best_step(curve) for curve in (validation_curve(records, length) for length in lengths) if curve}
    for step in _lengths(run_dir, BEST_PREFIX):
        if step not in needed:
            _best_path(run_dir, step).unlink(missing_ok=True)  # every process of a launch prunes


def train_tagger(tagging: TaggingData, strategy: Strategy, settings: RepetitionSettings, *, model_name: str, seed: int,
                 run: store.Run, resume: bool = True, progress: bool = True) -> dict:
    """Fine-tune one tagger (§3.3) for ``settings.training.steps`` steps and score it: the best validation F1 over
    the evaluations up to there, and test F1 with those weights.

    Batches walk through shuffled epochs of the training split as a pure function of (seed, step), so an
    interrupted run resumes exactly, and a longer request continues a finished run (the run key holds no length, the
    schedule none either): N then 2N steps train what 2N at once does, evaluation for evaluation (N on the
    ``eval_every`` cadence: every request also evaluates at its end), and pick the same weights (``training.train``).
    Every evaluation that beats the earlier ones keeps its weights, so each request finds the best of its own prefix.
    A length requested before, shorter than the run has since trained or not, is read back (``result-at-<steps>.json``:
    its evaluations and best weights) instead of retrained; one scored on another test split (the run key holds no
    test data) is scored again from its best weights, without training.
    """
    recipe = settings.training
    fix = f"Delete {run.path} to train this tagger again."
    stored = finished_result(run, recipe.steps)
    if stored is not None and stored.get("test_data") == tagging.test_fingerprint():
        return stored
    tagger, _ = build_tagger(model_name, len(tagging.labels), strategy, recipe, seed=seed)
    if stored is not None:
        _load_trainable_state(tagger, store.load_torch(_best_path(run.path, stored["best_step"]), fix)["state"])
        result = {**stored, **_test_scores(tagger, tagging, recipe)}
        store.write_json(_result_path(run.path, recipe.steps), result, indent=1)
        return result
    device = tagger.head.weight.device
    size = len(tagging.train)

    def batch_for(step: int, micro: int) -> dict:
        first = (step * recipe.grad_accum + micro) * recipe.batch_size
        chosen = []
        for position in range(first, first + recipe.batch_size):
            epoch, offset = divmod(position, size)
            chosen.append(tagging.train[int(_epoch_order(seed, epoch, size)[offset])])
        return {name: tensor.to(device) for name, tensor in collate(chosen, tagging.labels, tagging.pad_id).items()}

    def evaluate(model, step: int) -> dict:
        if step == 0:  # the head is untrained, skip the cost
            return {}
        score = tagging_f1(model, tagging.validation, tagging.labels, tagging.pad_id, recipe.batch_size * 2)
        # the records on disk hold this run's earlier evaluations (a resumed run's, up to its checkpoint)
        earlier = [f1 for _, f1 in validation_curve(training.read_metrics(run.path), step - 1)]
        if not earlier or score > max(earlier):
            store.save_torch(_best_path(run.path, step), {"f1": score, "state": _trainable_state(model)})
        return {"validation_f1": score}

    config = training.TrainConfig(steps=recipe.steps, batch_size=recipe.batch_size, grad_accum=recipe.grad_accum,
                                  lr=recipe.lr, weight_decay=recipe.weight_decay, eval_every=recipe.eval_every,
                                  checkpoint_every=settings.checkpoint_every, seed=seed)
    started = time.perf_counter()
    records = training.train(tagger, batch_for=batch_for, loss_fn=lambda model, batch: model(**batch), config=config,
                             run_dir=run.path, evaluate=evaluate, resume=resume, progress=progress,
                             lr_lambda=recipe.lr_schedule)
    # the seconds of this request plus those of the shorter one it extended
    shorter = [length for length in _lengths(run.path, RESULT_PREFIX) if length < recipe.steps]
    seconds = time.perf_counter() - started + (finished_result(run, shorter[-1])["train_seconds"] if shorter else 0.0)
    curve = validation_curve(records, recipe.steps)
    best = best_step(curve)
    _load_trainable_state(tagger, store.load_torch(_best_path(run.path, best), fix)["state"])
    result = {"task": tagging.task, "strategy": strategy.label, "kind": strategy.kind, "r": strategy.r,
              "exit_layer": strategy.exit_layer, "seed": seed, "validation_f1": float(dict(curve)[best]),
              **_test_scores(tagger, tagging, recipe), "evaluations": [list(item) for item in curve],
              "best_step": best, "steps": recipe.steps, "train_seconds": seconds, "model": model_name,
              "labels": list(tagging.labels), "run_dir": str(run.path)}
    store.write_json(_result_path(run.path, recipe.steps), result, indent=1)
    _drop_unreachable_best(run.path)
    del tagger
    gc.collect()
    return result


def _test_scores(tagger: TokenTagger, tagging: TaggingData, recipe: TaggerTraining) -> dict:
    """The test split's predictions and seqeval F1 under ``tagger``, with the split's fingerprint."""
    predictions = predict_tags(tagger, tagging.test, tagging.labels, tagging.pad_id, recipe.batch_size * 2)
    return {"test_f1": metrics.seqeval_f1([list(s.tags) for s in tagging.test], predictions),
            "test_predictions": predictions, "test_data": tagging.test_fingerprint()}


def exit_or_none(value) -> int | None:
    """A results table's ``exit_layer`` cell as an int, or None for a full-depth run (None or NaN)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def load_trained_tagger(result: dict, settings: RepetitionSettings) -> TokenTagger:
    """Rebuild a tagger from its run directory (best validation weights), e.g. for the widget."""
    strategy = Strategy(result["kind"], int(result["r"]), exit_or_none(result["exit_layer"]))
    tagger, _ = build_tagger(result["model"], len(result["labels"]), strategy, settings.training, seed=result["seed"])
    _load_trainable_state(tagger, store.load_torch(_best_path(result["run_dir"], result["best_step"]),
                                                   f"Delete {result['run_dir']} to train this tagger again.")["state"])
    return tagger.eval()


def load_taggers(results, task: str, seed: int, settings: RepetitionSettings) -> dict[int, TokenTagger]:
    """The trained full-depth SR taggers of one task and seed, keyed by r (for the widget)."""
    rows = results[(results.task == task) & (results.kind == "sr") & (results.seed == seed)]
    rows = rows[[exit_or_none(value) is None for value in rows.exit_layer]]
    if rows.empty:
        raise ValueError(f"task={task!r}, seed={seed!r}: no full-depth SR runs in the results")
    return {int(row["r"]): load_trained_tagger(row.to_dict(), settings) for _, row in rows.iterrows()}


# --------------------------------------------------------------------------- every run of a notebook section

def run_prefix(profile) -> str:
    """The prefix of notebook 04's tagger run folders under the profile (``runs/04_<profile>_...``)."""
    return f"04_{profile.name}"


def train_command(profile, seed: int | None, *, progress: bool = True) -> list[Path]:
    """Notebook 04's taggers as a command (``python -m helpers.train sr``): the notebook's own calls in its order
    (sections 3 and 4: ``experiment_data.load_tagging_data`` per task, ``memory.fit_training``, :func:`run_experiments`
    over :func:`main_strategies` and then :func:`exit_strategies`), into the notebook's run folders, which it
    afterwards finds finished. ``seed``: the taggers' seed (initialisation, batch order, dropout; part of every
    key) in place of the settings' ``seeds`` and ``exit_seeds``; the tagging data stay the notebook's. Under
    ``accelerate launch`` the runs train one after another, each spread over the processes (``training.train``),
    rather than in ``settings.workers`` processes of their own. Returns the run folders."""
    import dataclasses

    from ... import memory, profiles
    from .experiment_data import load_tagging_data

    settings = profiles.settings_for("sequence_repetition", profile)
    if seed is not None:
        settings = dataclasses.replace(settings, seeds=(seed,), exit_seeds=(seed,))
    if distributed.launched() is not None:
        settings = dataclasses.replace(settings, workers=1)
    model, tokenizer = models.load_model(profile.model_name)
    num_layers = models.num_layers(model)
    del model
    taggings = {task: load_tagging_data(tokenizer, task, settings, profile.corpus, seed=profile.seed, progress=progress)
                for task in settings.tasks}
    settings = memory.fit_training("04", profile, settings)
    plans = [(taggings, main_strategies(settings), settings.seeds),
             ({task: taggings[task] for task in settings.exit_tasks}, exit_strategies(settings, num_layers),
              settings.exit_seeds)]
    folders = []
    for by_task, strategies, seeds in plans:
        run_experiments(by_task, strategies, seeds, settings, model_name=profile.model_name,
                        run_prefix=run_prefix(profile), progress=progress)
        folders += [tagger_run(by_task[task], strategy, settings, model_name=profile.model_name, seed=seed,
                               run_prefix=run_prefix(profile)).path
                    for task in by_task for strategy in strategies for seed in seeds]
    return folders


def main_strategies(settings: RepetitionSettings) -> list[Strategy]:
    """SR for each r of the settings, then the unmasking baselines (§3.4)."""
    return [Strategy("sr", r) for r in settings.repeats] + [Strategy(kind) for kind in settings.baselines]


def exit_strategies(settings: RepetitionSettings, num_layers: int) -> list[Strategy]:
    """§3.5: SR for each early-exit r at each of ``settings.exit_at`` (paper layers of 32) scaled to the model,
    below the full depth."""
    layers = sorted({scaled_exit_layer(layer, num_layers) for layer in settings.exit_at})
    return [Strategy("sr", r, layer) for r in settings.exit_repeats for layer in layers if layer < num_layers]


def _train_job(job: tuple) -> dict:
    """One (tagging, strategy, settings, ...) job in a worker process with ``threads`` torch threads."""
    tagging, strategy, settings, model_name, seed, run, resume = job
    if settings.threads:
        torch.set_num_threads(settings.threads)
    return train_tagger(tagging, strategy, settings, model_name=model_name, seed=seed, run=run, resume=resume,
                        progress=False)


def _job_cost(strategy: Strategy) -> float:
    """Relative training cost: tokens per row (k copies) times the layers run (full depth counted as the paper's
    32), for longest-first scheduling."""
    return (strategy.r + 1) * (strategy.exit_layer - 1 if strategy.exit_layer else PAPER_DEPTH)


def run_experiments(tagging_by_task: dict[str, TaggingData], strategies: Sequence[Strategy], seeds: Sequence[int],
                    settings: RepetitionSettings, *, model_name: str, run_prefix: str, resume: bool = True,
                    progress: bool = True):
    """Train and score every (task, strategy, seed); one row each. Runs live in ``runs/<run_prefix>_...``
    (:func:`tagger_run`).

    With ``settings.workers`` > 1 the runs that are not finished train in that many processes (spawned, each
    with ``settings.threads`` torch threads, ended when the kernel that started them dies), longest first; every
    run is a pure function of its seed, so the results are the same as in one process. An interrupt (the stop
    button) cancels the queued runs, ends the running ones and returns at once (:func:`helpers.workers.run_jobs`);
    the finished runs are kept and reused by the next call; a finished run scored on another test split (a larger
    evaluation: the run key holds no test data) is scored again on this one without training (:func:`train_tagger`).
    """
    import pandas as pd

    from ...workers import run_jobs

    jobs = [(tagging_by_task[task], strategy, settings, model_name, seed,
             tagger_run(tagging_by_task[task], strategy, settings, model_name=model_name, seed=seed,
                        run_prefix=run_prefix, resume=resume), resume)
            for task in tagging_by_task for strategy in strategies for seed in seeds]
    results: dict[int, dict] = {}
    pending = []
    for index, job in enumerate(jobs):
        finished = finished_result(job[5], settings.training.steps)
        if finished is not None and finished.get("test_data") == job[0].test_fingerprint():
            results[index] = finished
        else:  # not trained yet, or trained and scored on another test split: train_tagger re-scores it, untrained
            pending.append(index)
    pending.sort(key=lambda index: -_job_cost(jobs[index][1]))
    bar = tqdm(total=len(jobs), initial=len(results), desc="taggers", disable=not progress)
    if settings.workers > 1 and len(pending) > 1:
        def record(position: int, result: dict) -> None:
            results[pending[position]] = result
            bar.update()

        # workers die with the notebook's kernel; the stop button cancels the queued jobs and ends the running ones
        run_jobs(_train_job, [jobs[index] for index in pending], min(settings.workers, len(pending)), record)
    else:
        previous = torch.get_num_threads()
        try:
            for index in pending:
                results[index] = _train_job(jobs[index])
                bar.update()
        finally:
            torch.set_num_threads(previous)
    bar.close()
    return pd.DataFrame([results[index] for index in range(len(jobs))])


# --------------------------------------------------------------------------- the widget's data

@torch.no_grad()
def explain_sentence(tagger: TokenTagger, tokenizer, labels: Sequence[str], words: Sequence[str],
                     max_tokens: int = 64) -> dict:
    """Attention weights of the tagger on the repeated sentence, its tokens, and the predicted tag per word."""
    ids, starts = encode_words(tokenizer, words, max_tokens)
    input_ids = torch.tensor([ids], device=tagger.head.weight.device)
    body = tagger.body
    previous = attention.attention_implementation(body)
    body.set_attn_implementation("eager")
    try:
        result = tagger(input_ids, torch.ones_like(input_ids), output_attentions=True)
    finally:
        body.set_attn_implementation(previous)
    best = result["logits"][0].argmax(-1).cpu()
    weights = torch.stack([w[0].float().cpu() for w in result["output"].attentions])
    return {"attention": weights, "tokens": ids, "word_starts": starts, "words": list(words[:len(starts)]),
            "predicted": [labels[int(best[s])] for s in starts], "n": len(ids), "r": tagger.strategy.r}
