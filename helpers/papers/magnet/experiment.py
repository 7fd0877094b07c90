"""Notebook 03's training: joint training of Eq. 5 on ``helpers.training.train`` over the three views' data
(:mod:`.experiment_data`, Fig. 4), and the runs the tables read: MAGNET itself, the LLM2Vec-style baseline (MNTP,
then SimCSE) and Table 6's ablation runs. Every run folder is keyed by :func:`run_folder_key`: exactly what changes
the run's numbers, less the length of its last phase, so that a run extends (a longer request continues it, a shorter
one reads its prefix, ``helpers.training.train``).

The evaluations live beside this module, one per table: ``experiment_table1`` (word-level probes),
``experiment_table2`` (STS-B), ``experiment_table4`` (infilling) and ``experiment_table5`` (degeneration in
greedy generation, Fig. 6).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from ... import data as D
from ... import masks as M
from ... import adapters, models, store
from ... import objectives as O
from ... import mntp_adapter as MNTP
from ... import training as T
from ...seeds import seeded_generator
from .experiment_data import (JointData, augment, display_examples, joint_data, paraphrase,  # noqa: F401 (re-exported)
                              positive_pool, sscl_sentences, three_views)
from .mechanism import (Phase, add_projection_head, encode_sentences, joint_loss, magnet_phases, masked_view, phase_at,
                        sample_spans)
from .settings import ABLATION_LAMBDAS, MagnetSettings, evaluation_free, length_free

MASK_TOKEN = "underscore"  # MAGNET's "_" (App. A), resolved by objectives.resolve_mask_token
COMPONENTS_FILE = "components.jsonl"


def mask_id_for(tokenizer) -> int:
    """The id of MAGNET's mask token :data:`MASK_TOKEN` in ``tokenizer``'s vocabulary."""
    return O.resolve_mask_token(tokenizer, MASK_TOKEN)


def bos_id(tokenizer) -> int:
    """What opens a scored sequence (BOS, else EOS): infilling examples and probe sentences start with it, so
    that their first real token has an output before it."""
    token = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if token is None:
        raise ValueError("the tokenizer has neither BOS nor EOS to open a sequence with")
    return int(token)


# --------------------------------------------------------------------------- run keys

@dataclass(frozen=True)
class MagnetRunKey:
    """What changes a notebook-03 training run: the adapter MAGNET saves is keyed by this, its run folder
    (``store.reuse_run``) by this less the runs' lengths (:func:`run_folder_key`).

    The sizes of notebook 03 (:class:`MagnetSettings`, after ``memory.fit_training``) less those of the evaluations
    after training (:func:`~.settings.evaluation_free`), the model and how it is loaded, the corpus, the seed, LoRA,
    the mask token and, for a run that continues notebook 02's MNTP adapter, that adapter's own key. Sizes that only
    other notebooks use, or only the test sets, are not here, so changing them retrains nothing.
    """

    settings: MagnetSettings
    model: str
    dtype: str
    four_bit: bool
    corpus: str
    seed: int
    lora: T.LoraSettings
    mask_token: str = MASK_TOKEN
    mntp_adapter: dict | None = None
    rng: str = T.RNG_SCHEME  # how the loop draws dropout: another scheme trains another run


def run_key(profile, settings: MagnetSettings, *, mntp_adapter: dict | None = None) -> MagnetRunKey:
    """The one place a notebook-03 run key is built from the profile and notebook 03's settings. It holds the runs'
    lengths and keys the adapter MAGNET saves; its run folder is keyed by :func:`run_folder_key`."""
    return MagnetRunKey(settings=evaluation_free(settings), model=profile.model_name, dtype=models.weight_dtype_name(profile),
                        four_bit=T.four_bit_requested(profile), corpus=profile.corpus, seed=profile.seed,
                        lora=T.lora_settings(profile), mntp_adapter=mntp_adapter)


def run_folder_key(key: MagnetRunKey) -> dict:
    """What names a notebook-03 run folder: ``key`` less the lengths of the runs' last phases
    (:data:`~.settings.RUN_LENGTHS`: ``phase2_steps``, ``simcse_steps``), as plain JSON. The folder holds the run at
    any such length: ``helpers.training.train`` continues a longer request from its checkpoint (N then 2N steps equal
    2N at once) and answers a shorter one with its records and the adapter kept at that length. MAGNET's
    ``phase1_steps`` stays: it is where phase 2 starts."""
    return {**store.canonical_settings(key), "settings": length_free(key.settings)}


def phases_key(phases: Sequence[Phase]) -> list[dict]:
    """``phases`` as they key a joint run's training loop: every phase whole but the last, which keeps its λ and
    leaves out its length (the run's: a longer last phase extends the run)."""
    *earlier, last = phases
    return [*store.canonical_settings(earlier), store.canonical_without(last, ("steps",))]


HELDOUT_KEY = "heldout_mntp_accuracy"  # the budget check's curve in a joint run's evaluation records


def heldout_mntp_batches(profile, settings: MagnetSettings, tokenizer) -> list[dict]:
    """The budget check's held-out set: ``settings.heldout_blocks`` validation blocks of ``seq_len`` tokens, corrupted
    once for MNTP (§3.2.1: 20% of the tokens, 80/10/10) with a fixed seed, in batches of ``settings.batch_size``."""
    return MNTP.heldout_batches(tokenizer, profile.corpus, seq_len=settings.seq_len, batch_size=settings.batch_size,
                                num_batches=math.ceil(settings.heldout_blocks / settings.batch_size),
                                mask_id=mask_id_for(tokenizer), asked=f"heldout_blocks={settings.heldout_blocks} "
                                f"(rounded up to batches of {settings.batch_size}); lower heldout_blocks")


def joint_evaluation(profile, settings: MagnetSettings, tokenizer) -> tuple[list[str], Callable]:
    """What a joint run evaluates every ``eval_every`` steps: Fig. 6's Rep-n of greedy generations from the
    validation prefixes (:func:`experiment_table5.fig6_evaluation`) and the held-out MNTP accuracy under the
    bidirectional mask (:data:`HELDOUT_KEY`, on :func:`heldout_mntp_batches`), whose equivalence test over the last half
    of training (:func:`helpers.metrics.stopped_improving`) is the budget check of the rows that compare trained
    models. Returns ``(prefixes, evaluate)``; the one
    definition notebook 03 and ``python -m helpers.train magnet`` both train with.

    ``evaluate(model, step)`` generates only at the steps that are multiples of ``settings.curve_every`` and at the
    last step of the request (``settings.total_steps``; at every evaluation when curve_every is None, or when no step
    is given): greedy generation is most of an evaluation's cost, and Fig. 6 needs fewer points than the budget check.
    Like ``training.train``'s evaluation at each request's end, a run extended from a length on the ``curve_every``
    cadence has the records of one trained to the longer length at once."""
    from .experiment_table5 import fig6_evaluation

    prefixes, degeneration = fig6_evaluation(profile, settings, tokenizer)
    batches = heldout_mntp_batches(profile, settings, tokenizer)

    def evaluate(model, step: int | None = None) -> dict:
        heldout = O.evaluate_masked_lm(model, batches, M.bidirectional)
        scores = {HELDOUT_KEY: heldout["eval_accuracy"], "heldout_mntp_loss": heldout["eval_loss"]}
        if (step is None or settings.curve_every is None or step % settings.curve_every == 0
                or step == settings.total_steps):
            scores.update(degeneration(model))
        return scores

    return prefixes, evaluate


# --------------------------------------------------------------------------- joint training (Eq. 5, Fig. 4, App. A)

def joint_batch_maker(tokenizer, *, phases: Sequence[Phase], settings: MagnetSettings, blocks: torch.Tensor | None,
                      sentences: Sequence[str] | None, mask_id: int, seed: int, device,
                      paraphrases: Sequence[str] | None = None) -> Callable[[int, int], dict]:
    """``batch_for(step, micro)`` for :func:`helpers.training.train`: a pure function of (seed, step, micro).

    Builds only the views the step's phase needs: x^m (MNTP/MSG) from ``blocks``; x and x^+ (SSCL)
    from ``sentences``, x^+ being a paraphrase or the :func:`augment` view.
    """
    vocab_size = len(tokenizer)
    special_ids = tokenizer.all_special_ids
    if any(p.mntp or p.msg for p in phases) and (blocks is None or len(blocks) == 0):
        raise ValueError("blocks is empty but a phase trains MNTP or MSG")
    if any(p.sscl for p in phases) and (sentences is None or len(sentences) < settings.sscl_batch_size):
        raise ValueError(f"sentences has {0 if sentences is None else len(sentences)} entries, fewer than "
                         f"sscl_batch_size={settings.sscl_batch_size}")

    def batch_for(step: int, micro: int) -> dict:
        phase = phase_at(phases, step)
        generator = seeded_generator(seed, step, micro)
        batch = {"step": step, "micro": micro, "lambdas": (phase.mntp, phase.sscl, phase.msg)}
        if phase.mntp or phase.msg:
            rows = torch.randint(len(blocks), (settings.batch_size,), generator=generator)
            ids = blocks[rows]
            spans = [sample_spans(ids.shape[1], max_spans=settings.max_spans, min_len=settings.span_min,
                                  max_len=settings.span_max, generator=generator) if phase.msg else []
                     for _ in range(len(ids))]
            view = masked_view(ids, spans, mask_id=mask_id, vocab_size=vocab_size, special_ids=special_ids,
                               corrupt=bool(phase.mntp), generator=generator)
            batch["masked"] = O.to_device(view, device)
        if phase.sscl:
            chosen = torch.randperm(len(sentences), generator=generator)[:settings.sscl_batch_size].tolist()
            anchors = [sentences[i] for i in chosen]
            positives = ([paraphrases[i] for i in chosen] if paraphrases is not None else
                         [augment(text, generator, settings.delete_prob, settings.crop_min) for text in anchors])
            for name, texts in (("anchors", anchors), ("positives", positives)):
                batch[name] = O.to_device(encode_sentences(tokenizer, texts, max_len=settings.sscl_max_len), device)
        return batch

    return batch_for


def read_components(run_dir, up_to: int | None = None) -> list[dict]:
    """Per-step MNTP / SSCL / MSG losses of a joint run (last write wins for a step re-run after a resume), of its
    first ``up_to`` steps when given (a shorter request of a run trained further)."""
    path = Path(run_dir) / COMPONENTS_FILE
    if not path.exists():
        return []
    latest: dict[tuple[int, int], dict] = {}
    for record in store.read_jsonl(path):
        if up_to is None or record["step"] < up_to:  # 0-based steps
            latest[(record["step"], record["micro"])] = record
    steps: dict[int, list[dict]] = {}
    for (step, _), record in sorted(latest.items()):
        steps.setdefault(step, []).append(record)
    out = []
    for step, records in steps.items():
        names = {k for r in records for k in r if k not in ("step", "micro")}
        out.append({"step": step + 1, **{k: float(np.mean([r[k] for r in records if k in r])) for k in sorted(names)}})
    return out


def make_lora_trainable(model) -> None:
    """A peft model loaded for inference keeps its LoRA weights frozen; unfreeze them to continue training."""
    names = [name for name, parameter in model.named_parameters() if "lora_" in name]
    if not names:
        raise ValueError(f"{type(model).__name__} has no LoRA parameters to train; wrap it with training.add_lora() first")
    for name, parameter in model.named_parameters():
        if "lora_" in name:
            parameter.requires_grad_(True)


def _component_logger(run_dir: Path, temperature: float) -> Callable:
    """The loss function of a joint run: Eq. 5 (:func:`joint_loss`), each part appended to ``components.jsonl``."""
    def loss_fn(model, batch):
        result = joint_loss(model, batch, temperature)
        record = {"step": batch["step"], "micro": batch["micro"],
                  **{k: float(v.detach()) for k, v in result.items() if k != "loss"}}
        with open(run_dir / COMPONENTS_FILE, "a") as handle:
            handle.write(json.dumps(record) + "\n")
        return result

    return loss_fn


def joint_experiment(model, tokenizer, *, phases: Sequence[Phase], settings: MagnetSettings, run_dir,
                     blocks: torch.Tensor | None, sentences: Sequence[str] | None, mask_id: int, seed: int = 0,
                     evaluate: Callable | None = None, lora: T.LoraSettings = T.LoraSettings(), four_bit: bool = False,
                     resume: bool = True, snapshot_phases: bool = True, progress: bool = True,
                     paraphrases: Sequence[str] | None = None, eval_every: int | None = None,
                     stop_after: int | None = None):
    """Train Eq. 5 through ``phases`` with LoRA on ``helpers.training.train``; returns ``(peft_model, records)``.

    ``model`` is a base model (LoRA is added) or a peft model (its adapter keeps training, e.g. the
    MNTP adapter for the LLM2Vec-style SimCSE stage). With ``snapshot_phases`` the adapter is saved at
    the end of every phase but the last to ``run_dir/after_phase<i>`` (Table 6 reads MNTP + MSG there).
    Rerunning with ``resume`` continues an interrupted run and reuses a finished one; ``stop_after`` stops at that
    step with a checkpoint there, as an interruption would (``training.train``). The last phase's length keys nothing
    (:func:`phases_key`, :func:`~.settings.length_free`), and no cadence depends on it: a longer last phase continues a
    finished run, a shorter one returns its records and adapter up to that length (``training.train``'s extending).
    """
    run_dir = Path(run_dir)
    phases = list(phases)
    if not phases:
        raise ValueError("phases is empty; pass at least one Phase")
    if blocks is not None:
        models.check_fits(model, blocks.shape[1])
    if hasattr(model, "peft_config"):
        make_lora_trainable(model)
        peft_model = model
    else:
        peft_model = T.add_lora(model, lora, four_bit=four_bit, seed=seed)
    add_projection_head(peft_model, peft_model.config.hidden_size, seed)
    total = sum(phase.steps for phase in phases)
    config = T.TrainConfig(steps=total, batch_size=settings.batch_size, grad_accum=settings.grad_accum, lr=settings.lr,
                           eval_every=settings.eval_every if eval_every is None else eval_every,
                           checkpoint_every=settings.checkpoint_every,
                           gradient_checkpointing=settings.gradient_checkpointing, seed=seed)
    batch_for = joint_batch_maker(tokenizer, phases=phases, settings=settings, blocks=blocks, sentences=sentences,
                                  mask_id=mask_id, seed=seed, device=next(peft_model.parameters()).device,
                                  paraphrases=paraphrases)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        (run_dir / COMPONENTS_FILE).unlink(missing_ok=True)
    identity = {"phases": phases_key(phases), "magnet": length_free(settings), "lora": lora, "mask_id": mask_id,
                "seed": seed, "blocks": blocks,
                "sentences": None if sentences is None else store.fingerprint(list(sentences)),
                "paraphrases": None if paraphrases is None else store.fingerprint(list(paraphrases))}
    train = dict(batch_for=batch_for, loss_fn=_component_logger(run_dir, settings.temperature), config=config,
                 run_dir=run_dir, evaluate=evaluate, progress=progress, settings=identity)
    boundaries = np.cumsum([phase.steps for phase in phases])[:-1].tolist() if snapshot_phases else []
    for index, boundary in enumerate(boundaries, start=1):
        snapshot = run_dir / f"after_phase{index}"
        if (snapshot / "adapter_config.json").exists() and resume:
            continue
        if stop_after is not None and stop_after < boundary:  # interrupted inside this phase
            return peft_model, T.train(peft_model, resume=resume, stop_after=stop_after, **train)
        records = T.train(peft_model, resume=resume, stop_after=boundary, **train)
        resume = True
        reached = max((r["step"] for r in records if "loss" in r), default=0)
        if reached != boundary:
            raise ValueError(f"run_dir={str(run_dir)!r} holds a checkpoint past step {boundary} but no {snapshot.name}; "
                             "rerun with resume=False")
        adapters.save_adapter(peft_model, snapshot)
    records = T.train(peft_model, resume=resume, stop_after=stop_after, **train)
    return peft_model, records


# --------------------------------------------------------------------------- the runs notebook 03 reads

@dataclass
class TrainedRun:
    """A finished joint run at the requested length ``steps``: the trained peft ``model``, its metric ``records`` and
    its run folder ``path`` (which may hold the run trained further)."""

    model: object
    records: list[dict]
    path: Path
    steps: int

    def components(self) -> list[dict]:
        """The per-step Eq. 5 parts of the run's first ``steps`` steps (:func:`read_components`)."""
        return read_components(self.path, up_to=self.steps)


def train_magnet(base, tokenizer, profile, settings: MagnetSettings, views: JointData, *, evaluate: Callable | None = None,
                 resume: bool = True, progress: bool = True, stop_after: int | None = None) -> TrainedRun:
    """MAGNET (§3.3, App. A): both phases of Eq. 5 on ``base`` (phase 1's adapter kept as ``after_phase1``); the final
    adapter is also saved under ``data/cache/adapters`` with its run key, length included, once the run is finished.

    The run folder holds phase 2 at any length (:func:`run_folder_key`): a longer ``phase2_steps`` continues a finished
    run, a shorter one returns the records and adapter up to that length."""
    key = run_key(profile, settings)
    run = store.reuse_run(f"03_magnet_{profile.name}", run_folder_key(key), resume=resume)
    phases = magnet_phases(settings)
    model, records = joint_experiment(
        base, tokenizer, phases=phases, settings=settings, run_dir=run.path, blocks=views.blocks,
        sentences=views.sentences, paraphrases=views.paraphrases, mask_id=mask_id_for(tokenizer), seed=profile.seed,
        evaluate=evaluate, lora=key.lora, four_bit=key.four_bit, resume=resume, progress=progress,
        stop_after=stop_after)
    steps = sum(phase.steps for phase in phases)
    if _finished(records, steps):
        adapters.save_adapter(model, adapters.adapter_path("magnet", profile.model_name, key),
                              {**store.canonical_settings(key), "objective": "magnet"})
    return TrainedRun(model, records, run.path, steps)


def _finished(records: Sequence[dict], steps: int) -> bool:
    """Whether ``records`` (a request's: ``training.train`` returns those up to its length) reach ``steps``."""
    return max((record["step"] for record in records if "loss" in record), default=0) == steps


def train_llm2vec_style(tokenizer, profile, settings: MagnetSettings, views: JointData, *,
                        evaluate: Callable | None = None, resume: bool = True, progress: bool = True,
                        stop_after: int | None = None) -> TrainedRun:
    """The LLM2Vec-style baseline: notebook 02's MNTP adapter (merged; ``mntp_adapter.load_or_train_mntp`` trains a short
    one when notebook 02 has not run), then a fresh LoRA on SSCL alone, λ = (0, 1, 0), for ``simcse_steps`` steps
    with MAGNET's sentences, positives, instruction and last-token encoding, and no MSG; evaluated every
    ``simcse_eval_every`` steps and at the end. The run folder holds the stage at any ``simcse_steps``
    (:func:`run_folder_key`): a longer request continues it, a shorter one reads its prefix."""
    mntp_start, _, _ = MNTP.load_or_train_mntp(profile, progress=progress)
    key = run_key(profile, settings, mntp_adapter=MNTP.mntp_adapter(profile)[1])
    run = store.reuse_run(f"03_llm2vec_simcse_{profile.name}", run_folder_key(key), resume=resume)
    model, records = joint_experiment(
        mntp_start, tokenizer, phases=[Phase(settings.simcse_steps, 0.0, 1.0, 0.0)], settings=settings,
        run_dir=run.path, blocks=None, sentences=views.sentences, paraphrases=views.paraphrases,
        mask_id=mask_id_for(tokenizer), seed=profile.seed, evaluate=every_evaluation(evaluate), lora=key.lora,
        four_bit=key.four_bit, resume=resume, eval_every=settings.simcse_eval_every, progress=progress,
        stop_after=stop_after)
    return TrainedRun(model, records, run.path, settings.simcse_steps)


def every_evaluation(evaluate: Callable | None) -> Callable | None:
    """``evaluate`` without the step, so a step-aware evaluator does all its work at each evaluation: the SimCSE
    stage's evaluations (every ``simcse_eval_every`` steps) are the whole of Fig. 6's LLM2Vec-style line after the
    base model."""
    return None if evaluate is None else (lambda model: evaluate(model))


def ablation_name(run: str) -> str:
    """Table 6's row name of an ablation run: ``"sscl+msg"`` -> ``"SSCL + MSG"``."""
    return run.upper().replace("+", " + ")


def ablation_run(profile, settings: MagnetSettings, name: str, *, resume: bool = True) -> store.Run:
    """The run folder of Table 6's ablation ``name`` (one of ``settings.ablation_runs``), which holds the run at any
    ``phase2_steps`` (:func:`run_folder_key`)."""
    return store.reuse_run(f"03_ablation_{name.replace('+', '_')}_{profile.name}",
                           run_folder_key(run_key(profile, settings)), resume=resume)


def train_ablations(tokenizer, profile, settings: MagnetSettings, views: JointData, *, resume: bool = True,
                    progress: bool = True, stop_after: int | None = None) -> dict:
    """Table 6's runs that are not phases of MAGNET (``settings.ablation_runs``, λ from :data:`ABLATION_LAMBDAS`), each
    from a fresh base model for ``phase2_steps`` steps; ``{Table 6 name: peft model}``. Their rows are scored on
    STS-B only, so the settings ask for them only where STS-B loads."""
    key = run_key(profile, settings)
    trained = {}
    for name in settings.ablation_runs:
        fresh, _ = models.load_model(profile.model_name)
        run = ablation_run(profile, settings, name, resume=resume)
        trained[ablation_name(name)], _ = joint_experiment(
            fresh, tokenizer, phases=[Phase(settings.phase2_steps, *ABLATION_LAMBDAS[name])], settings=settings,
            run_dir=run.path, blocks=views.blocks, sentences=views.sentences, paraphrases=views.paraphrases,
            mask_id=mask_id_for(tokenizer), seed=profile.seed, lora=key.lora, four_bit=key.four_bit, resume=resume,
            progress=progress, stop_after=stop_after)
    return trained


def train_command(profile, seed: int | None, *, stop_after: int | None = None, progress: bool = True) -> list[Path]:
    """Notebook 03's trainings as a command (``python -m helpers.train magnet``, under ``accelerate launch`` too):
    the notebook's own calls in its order (sections 2 and 3: :func:`joint_data`, :func:`joint_evaluation`,
    ``memory.fit_training``, :func:`train_magnet`, :func:`train_llm2vec_style` on notebook 02's MNTP adapter, and
    Table 6's :func:`train_ablations` where the settings ask for them), so the run folders, their records and the
    saved adapter are the notebook's, which afterwards finds them finished and only evaluates. ``seed``: the
    profile's seed (LoRA's initialisation, the views' masks and batches, dropout; part of every key) when given.
    Returns the run folders."""
    from ... import memory, profiles

    if seed is not None:
        profile = profile.replace(seed=seed)
    settings = profiles.settings_for("magnet", profile)
    base, tokenizer = models.load_model(profile.model_name)
    views = joint_data(profile, settings, tokenizer)
    _, evaluate = joint_evaluation(profile, settings, tokenizer)
    settings = memory.fit_training("03", profile, settings)
    options = dict(resume=True, progress=progress, stop_after=stop_after)
    folders = [train_magnet(base, tokenizer, profile, settings, views, evaluate=evaluate, **options).path,
               train_llm2vec_style(tokenizer, profile, settings, views, evaluate=evaluate, **options).path]
    train_ablations(tokenizer, profile, settings, views, **options)
    return folders + [ablation_run(profile, settings, name).path for name in settings.ablation_runs]


def adapted_model(profile, adapter_dir):
    """A fresh base model with a saved adapter attached (inference), e.g. MAGNET's ``after_phase1`` (MNTP + MSG)."""
    model, _ = models.load_model(profile.model_name)
    return adapters.load_adapter(model, adapter_dir).eval()


def mntp_steps(profile) -> int:
    """How many MNTP steps the cached adapter had (notebook 02's, else the short fallback's), else the recipe's."""
    found = MNTP.mntp_adapter(profile)
    return found[1]["steps"] if found else T.masked_lm_recipe(profile).steps
