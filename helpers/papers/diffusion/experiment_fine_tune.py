"""Notebook 07's fine-tune and likelihood study: a LoRA on notebook 02's merged MNTP adapter trained with LLaDA's Eq. 3
(:func:`.mechanism.diffusion_loss`), its run folder keyed by :class:`FineTuneKey` without the length, so that a longer
request extends the run (:func:`fine_tune`); both adapters' bound (LLaDA Eq. 6), their block-size-1 NLL (BD3-LM §4.1)
and accuracy by mask ratio (:func:`likelihood_study`), and their masked-token accuracy on notebook 02's held-out
batches (:func:`row_hits`). Read through :mod:`.experiment`, which re-exports it."""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ... import attention, data, metrics, mntp_adapter, models, store, training
from ... import masks as M
from ... import objectives as O
from ...masked_lm import MaskedLM, MNTPDecoder
from ...seeds import seeded_generator
from . import mechanism
from .settings import DiffusionSettings

FINE_TUNE_RUN = "07_diffusion_fine_tune"
# bump when the fine-tune's recipe changes what its run folder holds (2: held-out evaluations; 3: one run of any length,
# extended by a longer request, its adapter kept at each requested length)
FINE_TUNE_VERSION = 3
FINE_TUNE_HELDOUT_KEY = "eval_diffusion_loss"  # the fine-tune's held-out LLaDA Eq. 3 loss, logged at every evaluation
HELDOUT_MASK_SEED = 0  # the held-out masks are drawn once, the same for every evaluation, seed and profile


# --------------------------------------------------------------------------- the diffusion fine-tune

@dataclass(frozen=True)
class FineTuneKey:
    """Exactly what changes the diffusion fine-tune. Its run folder (``store.reuse_run``) is keyed by it without the
    length (``steps`` keys nothing, as ``training.TrainConfig.steps``): the folder holds one run whatever its length,
    which a longer request extends and a shorter one reads the prefix of (``training.train``'s "Extending"). What a
    request's adapter gives (its samples, bounds, accuracies, the ledger's rows) is keyed by :attr:`adapter_key`,
    which holds the length."""

    profile: str  # the profile's decoder and dtype
    parent: str  # fingerprint of notebook 02's MNTP adapter settings (the weights it continues from)
    corpus: str
    steps: int = field(metadata={"key": False})  # the run's length: a longer request extends the same run folder
    batch_size: int
    seq_len: int
    lr: float
    train_blocks: int
    eps: float
    lora: training.LoraSettings
    seed: int
    dtype: str  # the weights' dtype (models.weight_dtype_name)
    eval_every: int = 0  # the held-out curve's cadence and size (they change the run's metrics, not its weights)
    eval_blocks: int = 0
    version: int = FINE_TUNE_VERSION

    @classmethod
    def of(cls, profile, settings: DiffusionSettings) -> "FineTuneKey":
        found = mntp_adapter.mntp_adapter(profile)
        parent = store.fingerprint(found[1]) if found else "none"
        return cls(profile=profile.name, parent=parent, corpus=profile.corpus, steps=settings.fine_tune_steps,
                   batch_size=settings.fine_tune_batch, seq_len=settings.fine_tune_seq_len, lr=settings.fine_tune_lr,
                   train_blocks=settings.fine_tune_blocks, eps=mechanism.TIME_EPSILON,
                   lora=training.lora_settings(profile), seed=settings.seed, dtype=models.weight_dtype_name(profile),
                   eval_every=settings.fine_tune_eval_every, eval_blocks=settings.fine_tune_eval_blocks)

    @property
    def adapter_key(self) -> dict:
        """What keys one request's fine-tuned adapter, and whatever is computed from it: the run folder's key and the
        length (the folder's key leaves it out; the adapter after N steps is not the one after 2N)."""
        return {"run": store.canonical_settings(self), "steps": self.steps}


@dataclass
class FineTuned:
    """The fine-tuned masked LM (merged), the run's training records up to the requested length (one per step, its
    loss), its held-out evaluations up to it (:data:`FINE_TUNE_HELDOUT_KEY` at step 0, every ``fine_tune_eval_every``
    steps and at the end of every request so far) and where they are."""

    backend: MNTPDecoder
    records: list[dict]
    key: FineTuneKey
    path: Path
    evaluations: list[dict] = field(default_factory=list)

    @property
    def heldout_curve(self) -> list[tuple[int, float]]:
        """:func:`fine_tune_heldout_curve` of this run's evaluations."""
        return fine_tune_heldout_curve(self.evaluations)


def fine_tune_heldout_curve(records: Sequence[dict]) -> list[tuple[int, float]]:
    """The fine-tune's held-out curve, oriented so that training raises it: ``(step, -loss)`` of the held-out LLaDA
    Eq. 3 loss at every evaluation (:data:`FINE_TUNE_HELDOUT_CURVE`)."""
    return [(step, -value) for step, value in metrics.curve_points(records, FINE_TUNE_HELDOUT_KEY)]


def heldout_diffusion_batches(backend: MaskedLM, profile, settings: DiffusionSettings, *,
                              corruption: str = "mask") -> list[dict]:
    """The fine-tune's held-out batches: ``fine_tune_eval_blocks`` validation blocks of ``fine_tune_seq_len`` tokens,
    masked once by LLaDA's forward process (:func:`.mechanism.diffusion_batch`, antithetic ratios) from a fixed seed,
    in batches of ``fine_tune_batch``; every evaluation scores the same masks."""
    tokenizer = backend.tokenizer
    blocks = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "validation")),
                               settings.fine_tune_seq_len, max_blocks=settings.fine_tune_eval_blocks)
    batches = []
    for index, first in enumerate(range(0, len(blocks), settings.fine_tune_batch)):
        rows = blocks[first:first + settings.fine_tune_batch]
        generator = seeded_generator(HELDOUT_MASK_SEED, index, 0)
        batches.append(mechanism.diffusion_batch(rows, torch.ones_like(rows), mask_id=backend.mask_id,
                                                 special_ids=tokenizer.all_special_ids, generator=generator,
                                                 corruption=corruption,
                                                 vocab_size=mechanism.noise_vocabulary(backend)))
    return batches


def heldout_diffusion_loss(model, batches: Sequence[dict]) -> float:
    """The mean LLaDA Eq. 3 loss (:func:`.mechanism.diffusion_loss`) over the held-out batches, weighted by rows."""
    device = next(model.parameters()).device
    total = rows = 0.0
    for batch in batches:
        count = len(batch["input_ids"])
        total += float(mechanism.diffusion_loss(model, O.to_device(batch, device))["loss"]) * count
        rows += count
    return total / rows


def fine_tune(backend: MNTPDecoder, profile, settings: DiffusionSettings, *, progress: bool = True,
              corruption: str = "mask") -> FineTuned:
    """Continue notebook 02's MNTP adapter (merged into ``backend.model``) with a fresh LoRA trained on LLaDA's Eq. 3
    (:func:`.mechanism.diffusion_batch`, :func:`.mechanism.diffusion_loss`; the shift kept) for
    ``settings.fine_tune_steps`` steps of the shared loop (``training.train``), same LoRA and cpu learning rate as
    notebook 02. ``corruption="uniform"`` corrupts with uniformly random tokens instead of the mask token
    (:func:`.mechanism.diffusion_batch`), in training and in the held-out loss, in a run folder of its own; everything
    else (seed, steps, LoRA, batches, positions) is the same.

    The run folder is keyed without the length and holds no schedule or cadence that depends on it (constant rate,
    evaluations every ``fine_tune_eval_every`` steps and at each request's end), so ``training.train`` decides what a
    request trains: a finished length is reloaded (its checkpoint or the adapter kept at it, no corpus read), a longer
    one continues from the checkpoint (N then 2N steps equal 2N at once), a shorter one returns the records up to its
    length with the adapter kept there."""
    mechanism._choice(corruption, "corruption", mechanism.CORRUPTIONS)
    key = FineTuneKey.of(profile, settings)
    run = store.reuse_run(FINE_TUNE_RUN if corruption == "mask" else f"{FINE_TUNE_RUN}_{corruption}", key)
    noise = dict(corruption=corruption, vocab_size=mechanism.noise_vocabulary(backend))
    tokenizer, device = backend.tokenizer, backend.device
    tuned = training.add_lora(copy.deepcopy(backend.model), key.lora, seed=settings.seed)

    @functools.cache
    def train_blocks() -> torch.Tensor:  # read at the first step trained: a reloaded length reads no corpus
        return data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "train")),
                                 settings.fine_tune_seq_len, max_blocks=settings.fine_tune_blocks)

    @functools.cache
    def heldout() -> list[dict]:  # built at the first evaluation
        return heldout_diffusion_batches(backend, profile, settings, corruption=corruption)

    def batch_for(step: int, micro: int) -> dict:
        blocks, generator = train_blocks(), seeded_generator(settings.seed, step, micro)
        rows = blocks[torch.randint(len(blocks), (settings.fine_tune_batch,), generator=generator)]
        batch = mechanism.diffusion_batch(rows, torch.ones_like(rows), mask_id=backend.mask_id,
                                          special_ids=tokenizer.all_special_ids, generator=generator, **noise)
        return O.to_device(batch, device)

    config = training.TrainConfig(steps=settings.fine_tune_steps, batch_size=settings.fine_tune_batch,
                                  lr=settings.fine_tune_lr, eval_every=settings.fine_tune_eval_every, seed=settings.seed)
    records = training.train(tuned, batch_for=batch_for, loss_fn=mechanism.diffusion_loss, config=config,
                             run_dir=run.path, settings={"key": key}, progress=progress,
                             evaluate=lambda model: {FINE_TUNE_HELDOUT_KEY: heldout_diffusion_loss(model, heldout())})
    merged = tuned.merge_and_unload().eval().requires_grad_(False)
    label = "diffusion fine-tune" if corruption == "mask" else f"{corruption}-corruption diffusion fine-tune"
    return FineTuned(MNTPDecoder(merged, backend.tokenizer, backend.mask_id, name=f"{backend.name} + {label}"),
                     [record for record in records if "loss" in record], key, run.path,
                     [record for record in records if FINE_TUNE_HELDOUT_KEY in record])


# --------------------------------------------------------------------------- the bound and the accuracies

def heldout_blocks(tokenizer, profile, settings: DiffusionSettings) -> torch.Tensor:
    """``eval_blocks`` packed blocks of ``eval_block_tokens`` from the validation split (never trained on)."""
    return data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "validation")),
                             settings.eval_block_tokens, max_blocks=settings.eval_blocks)


@dataclass
class LikelihoodStudy:
    """Per adapter: LLaDA Eq. 6's Monte Carlo samples and each block's NLL at block size 1 (nats per token)."""

    bound: dict[str, mechanism.BoundSamples]
    causal: dict[str, torch.Tensor]

    def accuracy_by_ratio(self, name: str, bins: int) -> list[dict]:
        """Masked-token accuracy of ``name`` in ``bins`` equal bins of the mask ratio l/L, from the bound's samples."""
        samples = self.bound[name]
        ratio = (samples.masked / samples.tokens[:, None]).flatten()
        which = torch.clamp((ratio * bins).ceil().long() - 1, 0, bins - 1)
        correct, masked = samples.correct.flatten(), samples.masked.flatten()
        return [{"low": index / bins, "high": (index + 1) / bins, "masked": float(masked[which == index].sum()),
                 "accuracy": float(correct[which == index].sum() / masked[which == index].sum())
                 if masked[which == index].sum() else float("nan")} for index in range(bins)]


def likelihood_study(backends: dict[str, MaskedLM], blocks: torch.Tensor, settings: DiffusionSettings) -> LikelihoodStudy:
    """For each adapter: the bound (LLaDA Eq. 6, ``bound_samples`` per block; the same masks for every adapter, so
    their differences are paired) and the block-size-1 NLL."""
    bound = {name: mechanism.diffusion_bound(backend, blocks, samples=settings.bound_samples, seed=settings.seed,
                                             batch_size=settings.batch_size) for name, backend in backends.items()}
    causal = {name: mechanism.causal_nll(backend, blocks, batch_size=settings.batch_size)
              for name, backend in backends.items()}
    return LikelihoodStudy(bound, causal)


def high_ratio_hits(samples: mechanism.BoundSamples, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Per block: masked tokens predicted right and masked tokens, over the samples whose mask ratio is >= ``threshold``."""
    keep = (samples.masked / samples.tokens[:, None]) >= threshold
    return (samples.correct * keep).sum(1).numpy(), (samples.masked * keep).sum(1).numpy()


def notebook02_eval_batches(tokenizer, profile, mask_id: int) -> list[dict]:
    """Notebook 02's held-out MNTP batches (its recipe's validation blocks, 20 % selected, corrupted once with its
    fixed seed): the set notebook 02 scores, ``mntp_adapter.notebook02_heldout_batches``."""
    return mntp_adapter.notebook02_heldout_batches(tokenizer, profile, mask_id)


@torch.inference_mode()
def row_hits(model, batches: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Per held-out block: labelled tokens the argmax predicts and labelled tokens (one forward per batch, the head
    at the labelled outputs only), for a bootstrap over blocks."""
    device = next(model.parameters()).device
    body, head = models.decoder_body(model), model.get_output_embeddings()
    correct, counts = [], []
    for batch in batches:
        labels = batch["labels"]
        hidden = attention.forward_with_mask(body, batch["input_ids"], M.bidirectional,
                                             padding_mask=batch["padding_mask"]).last_hidden_state
        rows, cols = (labels != O.IGNORE_INDEX).nonzero(as_tuple=True)
        hits = (head(hidden[rows.to(device), cols.to(device)]).argmax(-1).cpu() == labels[rows, cols]).float()
        correct += torch.zeros(len(labels)).index_add_(0, rows, hits).tolist()
        counts += torch.zeros(len(labels)).index_add_(0, rows, torch.ones_like(hits)).tolist()
    return np.array(correct), np.array(counts)


def accuracy_difference(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray], *,
                        seed: int = 0) -> tuple[float, float, float]:
    """``100 · (accuracy(first) - accuracy(second))`` over the same blocks, with a paired bootstrap over blocks."""
    (a_hits, a_counts), (b_hits, b_counts) = first, second
    keep = (a_counts > 0) & (b_counts > 0)
    records = list(zip(a_hits[keep], a_counts[keep], b_hits[keep], b_counts[keep]))

    def statistic(sample):
        columns = np.array(sample)
        return 100 * (columns[:, 0].sum() / columns[:, 1].sum() - columns[:, 2].sum() / columns[:, 3].sum())

    return metrics.bootstrap_interval(records, statistic, seed=seed)


def mean_difference(first: torch.Tensor, second: torch.Tensor, *, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``first - second`` over paired blocks (nats per token) with its bootstrap interval."""
    return metrics.paired_difference_interval(first.tolist(), second.tolist(), seed=seed)
