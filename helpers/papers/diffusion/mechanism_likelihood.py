"""The masked-diffusion objective and likelihood bound, beside the sampler in :mod:`.mechanism` (which re-exports
them): LLaDA's forward process and loss (Eq. 3, Eq. 7-8, App. A.1; MDLM's continuous-time form), the bound on the
negative log-likelihood (LLaDA Eq. 6, App. B.6) and the causal NLL it equals at block size 1 (BD3-LM §4.1)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ... import attention, models
from ... import masks as M
from ... import objectives as O
from ...checks import real_number, whole_number
from ...masked_lm import MaskedLM
from ..openltg import mechanism as mask_predict
from .corruption import CORRUPTIONS, TIME_EPSILON, _choice


# --------------------------------------------------------------------------- training (LLaDA Eq. 3, MDLM)

def diffusion_batch(input_ids: torch.Tensor, padding_mask: torch.Tensor, *, mask_id: int, special_ids,
                    generator: torch.Generator | None = None, eps: float = TIME_EPSILON, corruption: str = "mask",
                    vocab_size: int | None = None) -> dict:
    """LLaDA's forward process (Eq. 7-8, App. A.1): one masking ratio per sequence, every selectable token replaced
    by the mask token independently with that probability (no 80/10/10). The ratio is ``p = (1 - ε) t + ε`` with
    MDLM's antithetic ``t`` (``_sample_t``: one uniform draw in each of the batch's B strata). Special tokens,
    padding and the first token are never masked (:func:`helpers.objectives.selectable`); labels are MNTP's (output
    l - 1 predicts token l), so the shift of notebook 02's adapter is kept.

    ``corruption="uniform"`` (DiffusionGemma's corruption, ``BlockRefinementScheduler``'s uniform mode): the same
    positions get a token drawn uniformly from ``range(vocab_size)`` instead of the mask token (drawn after the
    mask, so both corruptions pick the same positions from one seed); the loss is unchanged: Eq. 3 over the
    corrupted positions."""
    whole_number(mask_id, "mask_id", 0, "a token id")
    _choice(corruption, "corruption", CORRUPTIONS)
    if corruption == "uniform":
        whole_number(vocab_size, "vocab_size", 1, "the model's vocabulary, which uniform noise draws from")
    real_number(eps, "eps", low=0.0, high=1.0, high_open=True, what="the smallest masking ratio")
    batch = input_ids.shape[0]
    t = (torch.rand(batch, generator=generator) / batch + torch.arange(batch) / batch) % 1
    ratio = (1 - eps) * t + eps
    selectable = O.selectable(input_ids, padding_mask, special_ids)
    drawn = torch.rand(input_ids.shape, generator=generator).to(input_ids.device) < ratio.to(input_ids.device)[:, None]
    masked = drawn & selectable
    fill = torch.full_like(input_ids, mask_id)
    if corruption == "uniform":
        fill = torch.randint(vocab_size, input_ids.shape, generator=generator).to(input_ids.device)
    corrupted = torch.where(masked, fill, input_ids)
    return {"input_ids": corrupted, "padding_mask": padding_mask, "labels": O.labels_for("mntp", input_ids, masked),
            "ratio": ratio, "tokens": selectable.sum()}


def diffusion_loss(model, batch: dict) -> dict:
    """LLaDA Eq. 3 with the shift: ``(1 / n) Σ_rows (1 / t_row) Σ_masked -log p(x_l | x_t)``, n the selectable
    tokens of the batch (LLaDA divides by B·L, ``GUIDELINES.md``), under bidirectional attention; each row's masked
    cross-entropy is :func:`helpers.objectives.gathered_loss` (the head runs at the labelled outputs only). Also
    returns how many masked tokens the argmax got right and how many there were."""
    hidden = attention.forward_with_mask(models.decoder_body(model), batch["input_ids"], M.bidirectional,
                                         padding_mask=batch["padding_mask"]).last_hidden_state
    head, labels = model.get_output_embeddings(), batch["labels"].to(hidden.device)
    total, correct, count = hidden.sum() * 0.0, 0, 0
    for row in range(labels.shape[0]):
        if not bool((labels[row] != O.IGNORE_INDEX).any()):
            continue
        scored = O.gathered_loss(head, hidden[row:row + 1], labels[row:row + 1])
        total = total + scored["loss"] * scored["count"] / float(batch["ratio"][row])
        correct, count = correct + int(scored["correct"]), count + int(scored["count"])
    return {"loss": total / max(int(batch["tokens"]), 1), "correct": correct, "count": count}


# --------------------------------------------------------------------------- the likelihood bound (LLaDA Eq. 6, BD3-LM)

@dataclass
class BoundSamples:
    """:func:`diffusion_bound`'s Monte Carlo samples, one per (block, sample): the block's bound on its NLL (nats,
    ``L/l Σ_masked -log p``), its selectable tokens L, how many were masked (l) and how many of those the argmax
    predicted."""

    nll: torch.Tensor  # (blocks, samples), nats per block
    tokens: torch.Tensor  # (blocks,)
    masked: torch.Tensor  # (blocks, samples)
    correct: torch.Tensor  # (blocks, samples)

    def per_token(self) -> torch.Tensor:
        """Each block's bound in nats per token (the mean over samples, divided by L)."""
        return self.nll.mean(1) / self.tokens


def _special_ids(backend: MaskedLM) -> list[int]:
    return list(backend.tokenizer.all_special_ids) if backend.tokenizer is not None else []


@torch.inference_mode()
def diffusion_bound(backend: MaskedLM, blocks: torch.Tensor, *, samples: int, seed: int = 0,
                    batch_size: int = 8) -> BoundSamples:
    """LLaDA Eq. 6 (App. A.2, Eq. 14): ``-log p(x) ≤ E_l [L/l Σ_{i masked} -log p(x^i | x_l)]`` with ``l`` uniform on
    ``{1..L}`` and ``l`` of the L selectable tokens masked uniformly without replacement, under bidirectional attention
    (one block). ``l`` is stratified over the ``samples`` draws of a block (``⌈L v⌉`` with ``v`` uniform in the
    sample's stratum: marginally uniform on ``{1..L}``). ``blocks``: ``(n, S)`` token ids."""
    whole_number(samples, "samples", 1, "Monte Carlo samples per block")
    generator = torch.Generator().manual_seed(mask_predict.check_seed(seed))
    selectable = O.selectable(blocks, torch.ones_like(blocks), _special_ids(backend))
    counts = selectable.sum(-1)
    nll, masked, correct = (torch.zeros(len(blocks), samples) for _ in range(3))
    for sample_index in range(samples):
        v = (sample_index + torch.rand(len(blocks), generator=generator)) / samples
        chosen = torch.ceil(v * counts).long().clamp(min=1).minimum(counts)
        ranks = torch.rand(blocks.shape, generator=generator).masked_fill(~selectable, 2.0).argsort(-1).argsort(-1)
        targets = ranks < chosen[:, None]
        for first in range(0, len(blocks), batch_size):
            part = slice(first, first + batch_size)
            ids = torch.where(targets[part], torch.full_like(blocks[part], backend.mask_id), blocks[part])
            sums, hits = _scored(backend, ids, blocks[part], targets[part], M.bidirectional)
            nll[part, sample_index] = sums * counts[part] / chosen[part]
            correct[part, sample_index] = hits
        masked[:, sample_index] = chosen.float()
    return BoundSamples(nll, counts.float(), masked, correct)


@torch.inference_mode()
def _scored(backend: MaskedLM, inputs: torch.Tensor, gold: torch.Tensor, targets: torch.Tensor, mask) -> tuple:
    """Per row: the summed ``-log p`` of ``gold`` at ``targets`` given ``inputs`` under ``mask``, and the argmax hits."""
    rows, cols = targets.nonzero(as_tuple=True)
    hidden = backend.hidden_states(inputs, torch.ones_like(inputs), mask=mask)
    logits = backend.logits_at(hidden, rows, cols).float().cpu()
    answers = gold[rows, cols]
    losses = torch.nn.functional.cross_entropy(logits, answers, reduction="none")
    sums = torch.zeros(len(inputs)).index_add_(0, rows, losses)
    hits = torch.zeros(len(inputs)).index_add_(0, rows, (logits.argmax(-1) == answers).float())
    return sums, hits


def causal_nll(backend: MaskedLM, blocks: torch.Tensor, *, batch_size: int = 8) -> torch.Tensor:
    """Each block's NLL in nats per selectable token at block size 1 (BD3-LM §4.1: the NELBO is tight at L' = 1).

    With blocks of one token the block-causal mask is the causal one, and under the shift output l - 1 (which sees
    tokens < l only) predicts token l, so masking token l changes nothing its predictor sees: the bound's
    ``E_t[1/t · 1[masked] · CE]`` is the cross-entropy itself, exactly, in one forward pass."""
    if backend.offset != 1:
        raise ValueError(f"backend has offset {backend.offset}; block size 1 is the causal NLL only for a shifted "
                         "(MNTP) backend, where output l - 1 predicts token l")
    selectable = O.selectable(blocks, torch.ones_like(blocks), _special_ids(backend))
    sums = torch.zeros(len(blocks))
    for first in range(0, len(blocks), batch_size):
        part = slice(first, first + batch_size)
        sums[part] = _scored(backend, blocks[part], blocks[part], selectable[part], M.causal)[0]
    return sums / selectable.sum(-1)


@torch.inference_mode()
def continuation_bound(backend: MaskedLM, prompt: torch.Tensor, continuation: torch.Tensor, *, samples: int,
                       seed: int = 0, corruption: str = "mask", vocab_size: int | None = None) -> float:
    """LLaDA Eq. 6 given the prompt (its conditional form, §2.3 and App. B.6: the prompt is never masked):
    ``-log p(r | p) ≤ E_l [L/l Σ_{i masked} -log p(r^i | p, r_l)]`` over the L tokens of the continuation ``r``,
    ``l`` stratified over the ``samples`` draws as in :func:`diffusion_bound`, bidirectional attention. Returns the
    mean over draws in nats per continuation token.

    ``corruption="uniform"``: the chosen positions hold uniformly random tokens of ``range(vocab_size)`` instead of
    the mask (drawn after the positions, so both corruptions corrupt the same positions from one seed): the same
    estimator read on a uniform-corruption model, i.e. its Eq. 3 loss at its own corruption, not a bound on its NLL."""
    whole_number(samples, "samples", 1, "Monte Carlo samples per continuation")
    _choice(corruption, "corruption", CORRUPTIONS)
    if corruption == "uniform":
        whole_number(vocab_size, "vocab_size", 1, "the model's vocabulary, which uniform noise draws from")
    prompt, continuation = prompt.reshape(-1).cpu(), continuation.reshape(-1).cpu()
    length = continuation.numel()
    if length == 0:
        raise ValueError("continuation is empty; the bound needs at least one token")
    generator = torch.Generator().manual_seed(mask_predict.check_seed(seed))
    v = (torch.arange(samples) + torch.rand(samples, generator=generator)) / samples
    chosen = torch.ceil(v * length).long().clamp(1, length)
    ranks = torch.rand(samples, length, generator=generator).argsort(-1).argsort(-1)
    targets = torch.cat([torch.zeros(samples, prompt.numel(), dtype=torch.bool), ranks < chosen[:, None]], 1)
    gold = torch.cat([prompt, continuation])[None].expand(samples, -1)
    fill = torch.full_like(gold, backend.mask_id)
    if corruption == "uniform":
        fill = torch.randint(vocab_size, gold.shape, generator=generator)
    sums, _ = _scored(backend, torch.where(targets, fill, gold), gold, targets, M.bidirectional)
    return float((sums / chosen).mean())
