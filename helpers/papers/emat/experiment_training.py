"""Training notebook 06's heads on the cached features (the masked LM never runs here): EMAT (§4.1), the GRU decoder
with its language-model pre-training (§4.2) and naive MTC's length classifier (§5.2), each in its own run folder.

A run folder is keyed by :class:`HeadRunKey`: the head's training settings (App. C, Table 8) without the runs'
lengths, the dataset, the masked LM (name, context size and a probe forward) and :data:`HEADS_VERSION`; a rerun
resumes or reuses it, a longer one extends it and a shorter one reads its prefix (``training.train``), and anything
else that changes the features or the training starts a fresh one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

import torch
import torch.nn.functional as F
from torch import nn

from ... import models, store, training
from ...checks import whole_number
from ...masked_lm import MaskedLM
from ...seeds import seeded_generator
from .experiment_data import EncodedSplit, MTCDataset, model_probe
from .mechanism import (ExtendedMatrixDecoder, GRUDecoder, LengthClassifier, accuracy, build_emat, build_gru,
                        emat_labels, gru_targets, language_model_targets, length_class, start_id)
from .settings import HeadTraining

HEADS_VERSION = "mtc-heads-v5"  # part of every run key: a change to the heads starts fresh runs (v5: per-micro-batch RNG)


# HeadTraining's run lengths. None keys a head's run folder: one folder holds a head's run whatever its length, which
# ``training.train`` extends to a longer request or reads a shorter one's prefix from.
RUN_LENGTHS = ("emat_epochs", "gru_epochs", "length_epochs", "gru_pretrain_steps")
# The lengths of the runs a head starts from, which do key it: the GRU's MTC training starts from its pre-trained
# weights, so another pre-training length is another starting point.
STARTS_FROM = {"gru": ("gru_pretrain_steps",)}


@dataclass(frozen=True)
class HeadRunKey:
    """Exactly what changes a trained head's numbers, beside which head it is (the run folder's name) and its length."""

    training: dict  # HeadTraining's fields but the run lengths (RUN_LENGTHS)
    starts_from: dict  # the lengths of the runs the head starts from (STARTS_FROM): the GRU's pre-training steps
    dataset: str  # MTCDataset.key: the vocabulary and masked sentences
    model_name: str
    context_tokens: int
    model_probe: tuple[float, ...]  # the probe forward, rounded to 2 decimals: a retrained adapter starts fresh runs
    dtype: str  # the masked LM's weights' dtype: features in another dtype train other heads
    version: str = HEADS_VERSION


def head_run(name: str, dataset: MTCDataset, mlm: MaskedLM, training_settings: HeadTraining, *,
             resume: bool = True) -> store.Run:
    """``runs/06_<name>_<fingerprint>``: the run folder of one head (:func:`helpers.store.reuse_run`), keyed by
    :class:`HeadRunKey`: ``training_settings`` without the run lengths, but with those of the runs ``name`` starts
    from."""
    key = HeadRunKey(store.canonical_without(training_settings, RUN_LENGTHS),
                     {field: getattr(training_settings, field) for field in STARTS_FROM.get(name, ())}, dataset.key,
                     mlm.name,
                     mlm.context_tokens,
                     tuple(round(value, 2) for value in model_probe(mlm)),
                     models.dtype_name(next(mlm.model.parameters()).dtype))
    return store.reuse_run(f"06_{name}", key, resume=resume)


def train_head(head: nn.Module, tensors: dict[str, torch.Tensor], loss_fn, evaluate, *, epochs: int | None,
               training_settings: HeadTraining, run: store.Run, max_grad_norm: float = 0.0, resume: bool = True,
               progress: bool = True, steps: int | None = None, evals_per_epoch: int = 1) -> list[dict]:
    """Adam (``lr``), batches of ``batch_size`` over a fresh seeded permutation each epoch (App. C, Table 8), through
    ``training.train``: metrics per step and dev metrics every ``steps per epoch // evals_per_epoch`` steps (and at
    step 0 and the last step) in the run's ``metrics.jsonl``, a checkpoint per epoch, and a finished run is reused
    rather than retrained.

    The length, ``epochs`` or ``steps``, reaches the loop as steps (``epochs`` x steps per epoch) and keys nothing:
    the batches, the constant learning rate and every cadence count in steps and epochs from the start, never in the
    length, so a longer request extends the finished run in ``run`` (N then 2N steps equal 2N at once, with an
    evaluation at N besides when N is off the cadence) and a shorter one returns its records up to that length with
    the weights kept there (``training.kept_lengths``: each finished request's)."""
    if (epochs is None) == (steps is None):
        raise ValueError(f"epochs={epochs!r}, steps={steps!r}: give exactly one of them")
    if epochs is not None:
        whole_number(epochs, "epochs")
    sizes = {name: tensor.shape[0] for name, tensor in tensors.items()}
    count = next(iter(sizes.values()))
    if count == 0 or len(set(sizes.values())) != 1:
        raise ValueError(f"tensors must hold the same, non-zero number of examples; got {sizes}")
    batch_size, seed = training_settings.batch_size, training_settings.seed
    per_epoch = math.ceil(count / batch_size)
    device = next(head.parameters()).device

    def batch_for(step: int, micro: int) -> dict:
        epoch, offset = divmod(step, per_epoch)
        order = torch.randperm(count, generator=seeded_generator(seed, epoch))
        rows = order[offset * batch_size:(offset + 1) * batch_size]
        return {name: tensor[rows].to(device) for name, tensor in tensors.items()}

    total = epochs * per_epoch if epochs is not None else whole_number(steps, "steps")
    whole_number(evals_per_epoch, "evals_per_epoch")
    config = training.TrainConfig(steps=total, batch_size=batch_size, lr=training_settings.lr,
                                  max_grad_norm=max_grad_norm, eval_every=max(1, per_epoch // evals_per_epoch),
                                  checkpoint_every=per_epoch,
                                  seed=seed, extra={"examples": count, "steps per epoch": per_epoch})
    return training.train(head, batch_for=batch_for, loss_fn=loss_fn, config=config, run_dir=run.path,
                          evaluate=evaluate, resume=resume, progress=progress, settings=run.settings)


def train_emat(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit], features: dict[str, torch.Tensor],
               training_settings: HeadTraining, *, train_token_rows: bool = True, resume: bool = True,
               progress: bool = True) -> tuple[ExtendedMatrixDecoder, list[dict]]:
    """Build EMAT over the whole vocabulary (seen and unseen phrases) and train it with cross-entropy over the
    extended matrix (§4.1; Adam 1e-3, batch 128, 2 epochs, App. C): by default the whole extended matrix, a copy of
    the token rows included, as the public ``matrix_plugin``; with ``train_token_rows=False`` only the new rows.
    Dev a@1 and a@10 are scored ``emat_evals_per_epoch`` times an epoch (the head's held-out curve).
    Unlike ``matrix_plugin`` (``gradient_clip_val=1``), the gradients are not clipped."""
    emat = build_emat(mlm, dataset.vocabulary, train_token_rows)
    train = encoded["train"]
    tensors = {"hidden": features["train"], "label": emat_labels(emat, mlm, train.phrases, train.phrase_ids)}
    dev_hidden, dev_gold = features["validation"].to(mlm.device), encoded["validation"].phrases

    def loss_fn(model, batch):
        return {"loss": F.cross_entropy(model(batch["hidden"]), batch["label"])}

    def evaluate(model):
        if not dev_gold:
            return {}
        scores = accuracy(model.complete(dev_hidden, 10), dev_gold, (1, 10))
        return {"dev a@1": scores[1], "dev a@10": scores[10]}

    run = head_run("emat" if train_token_rows else "emat_new_rows", dataset, mlm, training_settings, resume=resume)
    records = train_head(emat, tensors, loss_fn, evaluate, epochs=training_settings.emat_epochs,
                         training_settings=training_settings, run=run, resume=resume, progress=progress,
                         evals_per_epoch=training_settings.emat_evals_per_epoch)
    return emat.eval(), records


def max_generation_steps(encoded: EncodedSplit) -> int:
    """Longest in-context label in train (tokens) plus EOS: how far beam search may run."""
    return max(len(ids) for ids in encoded.phrase_ids) + 1


def pretrain_gru(gru: GRUDecoder, mlm: MaskedLM, dataset: MTCDataset, training_settings: HeadTraining, *,
                 resume: bool = True, progress: bool = True) -> list[dict]:
    """§4.2: *"it helps to pre-train the generative model on a vanilla Language Modeling task before starting MTC
    training"*. As the public ``lm_pretrain``: the GRU starts from a zero state with a zero context vector, reads
    a start token (our separator) and predicts the train sentences token by token (teacher forcing 1), for
    ``gru_pretrain_steps`` batches, at Table 8's constant lr (the public ``lm_pretrain`` warms up from 1e-8 to 5e-4
    and lowers it on a dev-loss plateau, a schedule the paper does not state). Its run folder holds no length: more
    batches extend it, fewer read its prefix. Returns the run's records ([] when the step count is 0)."""
    if training_settings.gru_pretrain_steps == 0:
        return []
    sentences = sorted({example.sentence for example in dataset.examples["train"]})
    targets = language_model_targets(mlm, sentences, training_settings.gru_pretrain_tokens)
    tensors = {"target": targets, "first": torch.full((len(sentences),), start_id(mlm), dtype=torch.long)}

    def loss_fn(model, batch):
        zeros = batch["first"].new_zeros((batch["first"].shape[0], mlm.hidden_size), dtype=torch.float)
        return {"loss": model.loss(zeros, batch["first"], batch["target"], teacher_forcing=1.0)}

    run = head_run("gru_lm", dataset, mlm, training_settings, resume=resume)
    return train_head(gru, tensors, loss_fn, None, epochs=None, steps=training_settings.gru_pretrain_steps,
                      training_settings=training_settings, run=run, max_grad_norm=0.25, resume=resume,
                      progress=progress)


def train_gru(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit], features: dict[str, torch.Tensor],
              training_settings: HeadTraining, *, resume: bool = True, progress: bool = True):
    """Pre-train the GRU decoder as a language model (:func:`pretrain_gru`), then train it on MTC with teacher
    forcing 0.5 (§4.2; Adam 1e-3, batch 128, 10 epochs, App. C; gradients clipped at 1 as the public code).
    The MTC run's folder holds the pre-training's length (what it starts from), not its own epochs.
    Returns the decoder, the MTC run's records and the pre-training run's records."""
    torch.manual_seed(training_settings.seed)  # the GRU's own weights: the same in every rerun
    gru = build_gru(mlm, training_settings.gru_layers, training_settings.gru_dropout,
                    training_settings.gru_train_embeddings)
    pretraining = pretrain_gru(gru, mlm, dataset, training_settings, resume=resume, progress=progress)
    max_steps = max_generation_steps(encoded["train"])
    tensors = {"hidden": features["train"], "first": encoded["train"].previous_tokens,
               "target": gru_targets(encoded["train"].phrase_ids, gru.eos_id, max_steps)}
    validation = encoded["validation"]
    dev = {"hidden": features["validation"].to(mlm.device), "first": validation.previous_tokens.to(mlm.device),
           "target": gru_targets(validation.phrase_ids, gru.eos_id, max_steps).to(mlm.device)} if len(validation) else None

    def loss_fn(model, batch):
        return {"loss": model.loss(batch["hidden"], batch["first"], batch["target"], training_settings.teacher_forcing)}

    def evaluate(model):
        if dev is None:
            return {}
        loss = model.loss(dev["hidden"], dev["first"], dev["target"], teacher_forcing=1.0)
        greedy = model.complete(dev["hidden"], dev["first"], mlm.tokenizer, k=1, beam_size=1, max_steps=max_steps)
        return {"dev loss": float(loss), "dev a@1": accuracy(greedy, validation.phrases, (1,))[1]}

    run = head_run("gru", dataset, mlm, training_settings, resume=resume)
    records = train_head(gru, tensors, loss_fn, evaluate, epochs=training_settings.gru_epochs,
                         training_settings=training_settings, run=run, max_grad_norm=1.0, resume=resume,
                         progress=progress, evals_per_epoch=training_settings.gru_evals_per_epoch)
    return gru.eval(), records, pretraining


def train_length_classifier(mlm: MaskedLM, dataset: MTCDataset, encoded: dict[str, EncodedSplit],
                            features: dict[str, torch.Tensor], training_settings: HeadTraining, *, resume: bool = True,
                            progress: bool = True) -> tuple[LengthClassifier, list[dict]]:
    """Naive MTC's length classifier on the frozen features (classes 1, 2, 3+ tokens; §5.2)."""
    torch.manual_seed(training_settings.seed)  # the same initial weights in every rerun
    classifier = LengthClassifier(mlm.hidden_size).to(mlm.device)
    classes = {split: torch.tensor([length_class(ids) for ids in encoded[split].phrase_ids]) for split in encoded}
    dev_hidden = features["validation"].to(mlm.device)

    def loss_fn(model, batch):
        return {"loss": F.cross_entropy(model(batch["hidden"]), batch["label"])}

    def evaluate(model):
        if not len(dev_hidden):
            return {}
        return {"dev accuracy": float((model(dev_hidden).argmax(-1).cpu() == classes["validation"]).float().mean())}

    run = head_run("length", dataset, mlm, training_settings, resume=resume)
    records = train_head(classifier, {"hidden": features["train"], "label": classes["train"]}, loss_fn, evaluate,
                         epochs=training_settings.length_epochs, training_settings=training_settings, run=run,
                         resume=resume, progress=progress)
    return classifier.eval(), records


def length_hits(classifier: LengthClassifier, encoded: EncodedSplit, features: torch.Tensor) -> list[int]:
    """Per sentence, 1 when the classifier gets its length class (1, 2, 3+ tokens) right, else 0 (§5.2)."""
    with torch.no_grad():
        predicted = classifier(features.to(next(classifier.parameters()).device)).argmax(-1).cpu()
    truth = torch.tensor([length_class(ids) for ids in encoded.phrase_ids])
    return [int(hit) for hit in (predicted == truth).tolist()]


def length_accuracy(classifier: LengthClassifier, encoded: EncodedSplit, features: torch.Tensor) -> float:
    """Share of sentences whose length class (1, 2, 3+ tokens) the classifier gets right (§5.2)."""
    hits = length_hits(classifier, encoded, features)
    return sum(hits) / len(hits)


HEAD_RUNS = ("emat", "emat_new_rows", "gru_lm", "gru", "length")  # :func:`head_run` names, in training order


def train_command(profile, seed: int | None, *, progress: bool = True) -> list:
    """Notebook 06's heads as a command (``python -m helpers.train emat``): the notebook's own calls in its order
    (sections 1-3: ``masked_lm.load_masked_lm``, ``experiment_data.build_dataset``, ``encode_splits``,
    ``cached_features``, then :func:`train_emat` on the whole extended matrix and on its new rows only,
    :func:`train_gru` with its pre-training, :func:`train_length_classifier`), into the notebook's run folders,
    which it afterwards finds finished. ``seed``: the heads' seed (initial weights and batch order; part of every
    key) in place of ``settings.training.seed``; the phrase data stay the notebook's. Returns the run folders."""
    import dataclasses

    from ... import masked_lm, profiles
    from .experiment_data import build_dataset, cached_features, encode_splits

    settings = profiles.settings_for("emat", profile)
    heads = settings.training if seed is None else dataclasses.replace(settings.training, seed=seed)
    mlm = masked_lm.load_masked_lm(profile, settings.masked_lm or "mntp", context_tokens=settings.context_tokens)
    dataset = build_dataset(profile.corpus, settings.data, mlm.tokenizer, mlm.name)
    encoded = encode_splits(mlm, dataset)
    features = cached_features(mlm, dataset, encoded, settings.feature_batch_size)
    train_emat(mlm, dataset, encoded, features, heads, progress=progress)
    train_emat(mlm, dataset, encoded, features, heads, train_token_rows=False, progress=progress)
    train_gru(mlm, dataset, encoded, features, heads, progress=progress)
    train_length_classifier(mlm, dataset, encoded, features, heads, progress=progress)
    pretrained = heads.gru_pretrain_steps > 0
    return [head_run(name, dataset, mlm, heads).path for name in HEAD_RUNS if name != "gru_lm" or pretrained]

