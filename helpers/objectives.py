"""Training objectives: MNTP and MTP (MAGNET §3.2.1, Eq. 2, App. A and App. E).

MNTP: select 20% of the tokens; replace 80% of those with the mask token, 10% with a random token,
and keep 10% unchanged; "use the token representations from position l to predict a masked token
at position l + 1". MTP (App. E): the output at l predicts the masked token at l.

Logits are computed only at the positions that carry a loss: the decoder's hidden states are
gathered there first, then the LM head runs on those rows alone. Full-vocabulary logits for the
whole batch are never materialised.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import attention, models
from . import masks as M
from .checks import real_number, whole_number
from .device import model_device
from .seeds import seeded_generator  # helpers.training reads it here too (O.seeded_generator)

IGNORE_INDEX = -100
OBJECTIVES = ("mntp", "mtp")
MASK_TOKEN_CHOICES = ("underscore", "added", "eos")
ADDED_MASK_TOKEN = "<mask>"


@dataclass(frozen=True)
class MaskingConfig:
    """BERT-style corruption (MAGNET App. A: 20% selected; 80% mask, 10% random, 10% unchanged)."""

    ratio: float = 0.2
    mask_fraction: float = 0.8
    random_fraction: float = 0.1

    def __post_init__(self):
        real_number(self.ratio, "ratio", low=0.0, high=1.0, low_open=True, high_open=True,
                    what="the share of tokens selected for prediction")
        for name in ("mask_fraction", "random_fraction"):
            real_number(getattr(self, name), name, low=0.0, high=1.0)
        if self.mask_fraction + self.random_fraction > 1.0:
            raise ValueError(f"mask_fraction + random_fraction = {self.mask_fraction + self.random_fraction} exceeds 1")


def check_objective(objective: str) -> str:
    if not isinstance(objective, str) or objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is not one of {OBJECTIVES}")
    return objective


def resolve_mask_token(tokenizer, choice: str = "underscore", model=None) -> int:
    """The mask token id for ``choice``; the default is "underscore", MAGNET's "_" for LLaMA-2 (App. A).

    - "underscore": the vocabulary's own "_" piece, as LLM2Vec sets it (``tokenizer.mask_token = "_"``, which
      MAGNET's MNTP follows): on LLaMA-2 the bare piece "_" (id 29918), not "▁_" (id 903), which a SentencePiece
      tokenizer makes of the *text* "_" by prefixing a word boundary. A vocabulary without that piece falls back
      to the text "_", which must then encode to one token;
    - "added": a new ``<mask>`` special token; with ``model`` given, the embedding matrix grows by one
      row initialised to the **mean of all existing input embeddings** (and so does an untied LM head);
    - "eos": the end-of-sequence token (decoders without a spare token).
    """
    if choice not in MASK_TOKEN_CHOICES:
        raise ValueError(f"mask_token={choice!r} is not one of {MASK_TOKEN_CHOICES}")
    if choice == "eos":
        if tokenizer.eos_token_id is None:
            raise ValueError("mask_token='eos' but the tokenizer has no eos token; use 'added'")
        return int(tokenizer.eos_token_id)
    if choice == "underscore":
        piece = tokenizer.get_vocab().get("_")
        if piece is not None:
            return int(piece)
        ids = tokenizer("_", add_special_tokens=False).input_ids
        if len(ids) != 1:
            raise ValueError(f"mask_token='underscore' but '_' is {len(ids)} tokens in this vocabulary; use 'added'")
        return int(ids[0])
    if ADDED_MASK_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"mask_token": ADDED_MASK_TOKEN})
    mask_id = int(tokenizer.convert_tokens_to_ids(ADDED_MASK_TOKEN))
    if model is not None and model.get_input_embeddings().weight.shape[0] <= mask_id:
        _grow_embeddings_with_mean(model, len(tokenizer))
    return mask_id


def check_mask_id(model, mask_id, tokenizer=None) -> int:
    """``mask_id`` as an int that indexes ``model``'s embedding rows.

    An id past the rows that the tokenizer knows (the "added" ``<mask>`` of :func:`resolve_mask_token`, resolved
    without the model) grows the embeddings with the mean row, as ``resolve_mask_token(..., model=model)`` does;
    any other id past the rows is refused.
    """
    rows = model.get_input_embeddings().weight.shape[0]
    mask_id = whole_number(mask_id, "mask_id", 0, "a token id")
    if mask_id >= rows:
        added = tokenizer is not None and mask_id == tokenizer.convert_tokens_to_ids(ADDED_MASK_TOKEN)
        if not added or hasattr(model, "peft_config"):
            raise ValueError(f"mask_id={mask_id} is past the model's {rows} embedding rows; expected an id in "
                             f"0..{rows - 1} (resolve an added <mask> with resolve_mask_token(..., model=model) "
                             "before wrapping the model)")
        _grow_embeddings_with_mean(model, len(tokenizer))
    return mask_id


@torch.no_grad()
def _grow_embeddings_with_mean(model, vocab_size: int) -> None:
    old = model.get_input_embeddings().weight.shape[0]
    mean_input = model.get_input_embeddings().weight.mean(0)
    output = model.get_output_embeddings()
    tied = output is not None and output.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    mean_output = None if tied or output is None else output.weight.mean(0)
    model.resize_token_embeddings(vocab_size, mean_resizing=False)
    model.get_input_embeddings().weight[old:] = mean_input
    if mean_output is not None:
        model.get_output_embeddings().weight[old:] = mean_output


def selectable(input_ids: torch.Tensor, padding_mask: torch.Tensor, special_ids) -> torch.Tensor:
    """Tokens that may be selected: real, not special (BOS/EOS/pad/...), and not the first real token.

    The first real token is excluded for both objectives so MNTP and MTP see identical selections
    (MNTP predicts token l + 1 from output l, so it has nothing to predict the first token from).
    """
    allowed = padding_mask.bool().clone()
    for special in special_ids:
        allowed &= input_ids != int(special)
    first_real = padding_mask.long().cumsum(-1) == 1
    return allowed & ~(first_real & padding_mask.bool())


def mask_tokens(input_ids: torch.Tensor, padding_mask: torch.Tensor, *, mask_id: int, vocab_size: int,
                special_ids, config: MaskingConfig = MaskingConfig(),
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt a batch; returns ``(corrupted_ids, selected)``.

    Each row selects ``round(ratio · n)`` of its n selectable tokens (at least one), uniformly.
    Of the selected, a share ``mask_fraction`` becomes ``mask_id``, ``random_fraction`` a uniformly
    drawn non-special token, the rest stay as they are.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.is_floating_point():
        raise ValueError(f"input_ids has shape {tuple(getattr(input_ids, 'shape', ()))}; expected a (batch, length) "
                         "integer tensor")
    M.check_padding_mask(padding_mask, input_ids.shape)
    vocab_size = whole_number(vocab_size, "vocab_size", 1, "rows of the embedding matrix")
    mask_id = whole_number(mask_id, "mask_id", 0, "a token id")
    if mask_id >= vocab_size:
        raise ValueError(f"mask_id={mask_id} is not below vocab_size={vocab_size}; the model has no row for it")
    if not isinstance(config, MaskingConfig):
        raise ValueError(f"config={config!r} must be a MaskingConfig")
    candidates = selectable(input_ids, padding_mask, special_ids)
    scores = torch.rand(input_ids.shape, generator=generator)
    scores = scores.masked_fill(~candidates.cpu(), 2.0)  # never chosen
    counts = candidates.sum(-1).cpu()
    wanted = torch.clamp((counts.float() * config.ratio).round().long(), min=1).minimum(counts)
    order = scores.argsort(-1)
    ranks = order.argsort(-1)
    selected = (ranks < wanted[:, None]).to(input_ids.device) & candidates

    action = torch.rand(input_ids.shape, generator=generator).to(input_ids.device)
    to_mask = selected & (action < config.mask_fraction)
    to_random = selected & (action >= config.mask_fraction) & (action < config.mask_fraction + config.random_fraction)
    ordinary = torch.ones(vocab_size, dtype=torch.bool)
    ordinary[[int(s) for s in special_ids if 0 <= int(s) < vocab_size]] = False
    pool = ordinary.nonzero().squeeze(-1)
    random_ids = pool[torch.randint(len(pool), input_ids.shape, generator=generator)].to(input_ids.device)
    corrupted = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    corrupted = torch.where(to_random, random_ids, corrupted)
    return corrupted, selected


def labels_for(objective: str, input_ids: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """MNTP: ``labels[l] = x[l + 1]`` where l + 1 is selected; MTP: ``labels[l] = x[l]`` where l is selected; else -100."""
    check_objective(objective)
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    if objective == "mtp":
        return torch.where(selected, input_ids, labels)
    labels[:, :-1] = torch.where(selected[:, 1:], input_ids[:, 1:], labels[:, 1:])
    return labels


def make_batch(objective: str, input_ids: torch.Tensor, padding_mask: torch.Tensor, *, mask_id: int, vocab_size: int,
               special_ids, config: MaskingConfig = MaskingConfig(), generator: torch.Generator | None = None) -> dict:
    """Corrupted inputs and the objective's labels for one batch."""
    corrupted, selected = mask_tokens(input_ids, padding_mask, mask_id=mask_id, vocab_size=vocab_size,
                                      special_ids=special_ids, config=config, generator=generator)
    return {"input_ids": corrupted, "padding_mask": padding_mask, "labels": labels_for(objective, input_ids, selected),
            "selected": selected}


def gathered_loss(head, hidden: torch.Tensor, labels: torch.Tensor) -> dict:
    """Eq. 2's cross-entropy at the labelled outputs only: the LM ``head`` runs on those rows of ``hidden``, never
    on the whole sequence. ``labels`` are output-aligned (``labels[b, l]`` is what output l predicts, -100 elsewhere).

    Returns the mean ``loss``, how many labelled tokens the argmax got right (``correct``) and their ``count``.
    """
    rows, cols = (labels != IGNORE_INDEX).nonzero(as_tuple=True)  # where the labels live, then on hidden's device
    if rows.numel() == 0:
        raise ValueError("labels hold no labelled positions; raise the mask ratio or use longer sequences")
    labels, rows, cols = labels.to(hidden.device), rows.to(hidden.device), cols.to(hidden.device)
    logits = head(hidden[rows, cols])
    targets = labels[rows, cols]
    return _scored(logits, targets)


def _scored(logits: torch.Tensor, targets: torch.Tensor) -> dict:
    loss = F.cross_entropy(logits.float(), targets)
    correct = (logits.argmax(-1) == targets).sum()
    return {"loss": loss, "correct": correct, "count": torch.tensor(targets.numel(), device=targets.device)}


def masked_lm_loss(model, batch: dict, mask: M.Mask = M.bidirectional, *, full_logits: bool = False,
                   mask_tensor: bool = True) -> dict:
    """MNTP's (or MTP's) loss on a batch of :func:`make_batch`: one forward under ``mask``, then
    :func:`gathered_loss` at the labelled positions (Eq. 2), plus accuracy and counts.

    With ``full_logits=True`` the LM head runs on every position first (the naive way; used only by the
    benchmark to measure what gathering saves). ``mask_tensor=False``: the bidirectional mask of an unpadded batch
    reaches sdpa as no mask tensor (``attention.forward_with_mask``); the default renders it.
    """
    labels = batch["labels"]
    if full_logits:
        rows, cols = (labels != IGNORE_INDEX).nonzero(as_tuple=True)
        if rows.numel() == 0:
            raise ValueError("batch has no labelled positions; raise the mask ratio or use longer sequences")
        device = model_device(model)
        labels, rows, cols = labels.to(device), rows.to(device), cols.to(device)
        output = attention.forward_with_mask(model, batch["input_ids"], mask, padding_mask=batch["padding_mask"],
                                             mask_tensor=mask_tensor)
        return _scored(output.logits[rows, cols], labels[rows, cols])
    hidden = attention.forward_with_mask(models.decoder_body(model), batch["input_ids"], mask,
                                         padding_mask=batch["padding_mask"], mask_tensor=mask_tensor).last_hidden_state
    return gathered_loss(model.get_output_embeddings(), hidden, labels)


def fixed_eval_batches(objective: str, blocks: torch.Tensor, *, batch_size: int, num_batches: int, mask_id: int,
                       vocab_size: int, special_ids, config: MaskingConfig = MaskingConfig(), seed: int = 1234) -> list[dict]:
    """Held-out batches corrupted once with a fixed seed: MNTP and MTP get the same selections."""
    check_objective(objective)
    whole_number(batch_size, "batch_size")
    whole_number(num_batches, "num_batches")
    if len(blocks) < batch_size * num_batches:
        raise ValueError(f"blocks has {len(blocks)} rows, fewer than batch_size x num_batches = {batch_size * num_batches}")
    batches = []
    for index in range(num_batches):
        rows = blocks[index * batch_size:(index + 1) * batch_size]
        batches.append(make_batch(objective, rows, torch.ones_like(rows), mask_id=mask_id, vocab_size=vocab_size,
                                  special_ids=special_ids, config=config, generator=seeded_generator(seed, index)))
    return batches


def to_device(batch: dict, device) -> dict:
    return {name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in batch.items()}


@torch.no_grad()
def evaluate_masked_lm(model, batches: list[dict], mask: M.Mask = M.bidirectional) -> dict:
    """Mean loss and masked-token accuracy over fixed batches (each objective's own alignment is in its labels)."""
    if not batches:
        raise ValueError("batches is empty; pass at least one evaluation batch (fixed_eval_batches)")
    device = next(model.parameters()).device
    loss_sum, correct, count = 0.0, 0, 0
    for batch in batches:
        result = masked_lm_loss(model, to_device(batch, device), mask)
        loss_sum += float(result["loss"]) * int(result["count"])
        correct += int(result["correct"])
        count += int(result["count"])
    if count == 0:
        raise ValueError(f"batches hold no labelled positions ({len(batches)} batches, every label -100); nothing to score")
    return {"eval_loss": loss_sum / count, "eval_accuracy": correct / count}
