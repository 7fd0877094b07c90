"""MAGNET's equations and algorithms: missing-span generation, contrastive learning, the joint loss, §4.1 pooling
and infilling under the hybrid mask.

- **MSG** (§3.2.3, Eq. 4): one or more spans of a block become span tokens; under the hybrid mask
  (§3.1, Fig. 2c/2d, :func:`helpers.masks.magnet`) each span token is predicted from the output before it, which
  sees every context token and the earlier tokens of its own span. The loss falls on span tokens only.
- **MNTP** (§3.2.1, Eq. 2) on the corrupted context tokens of the same view, through the workbook's one gathered
  masked-LM loss (:func:`helpers.objectives.gathered_loss`).
- **SSCL** (§3.2.2, Eq. 3): InfoNCE with in-batch negatives (τ = 0.1) on the last token's final
  hidden state under the bidirectional mask, after the instruction "Given the sentence, find its
  representation:", through a projection head.
- **Joint loss** (§3.3, Eq. 5, App. A): λ = (1, 0, 1) first, then λ = (1, 9, 1).
- **Word pooling** (§4.1) and **infilling a span** (§3.1, mode 3).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ... import attention, models
from ... import masks as M
from ... import objectives as O
from ...checks import real_number, whole_number
from ...masked_lm import MNTPDecoder
from ...padding import padded
from .settings import MagnetSettings

INSTRUCTION = "Given the sentence, find its representation:"  # §3.2.2, App. A
MODES = ("causal", "magnet")  # §3.1: mode 1 (left context only) and mode 3 (span tokens see both sides)


# --------------------------------------------------------------------------- spans and MSG (§3.2.3, Eq. 4)

def check_spans(spans: Sequence[tuple[int, int]], length: int, *, min_start: int = 0,
                name: str = "spans") -> list[tuple[int, int]]:
    """Disjoint half-open spans inside a text of ``length`` tokens, each starting at ``min_start`` or later."""
    whole_number(length, "length", 1, "tokens")
    try:
        checked = M._check_spans(spans)
    except ValueError as error:
        raise ValueError(str(error).replace("spans[", f"{name}[", 1).replace("overlaps spans[", f"overlaps {name}[")) from None
    for index, (start, end) in enumerate(checked):
        if end > length:
            raise ValueError(f"{name}[{index}]=({start}, {end}) ends past the text of {length} tokens; "
                             f"spans must lie within [0, {length})")
        if start < min_start:
            raise ValueError(f"{name}[{index}]=({start}, {end}) starts before position {min_start}; a span token is "
                             f"predicted from the output before it, so at least {min_start} token(s) must precede it")
    return checked


def span_mask(length: int, spans: Sequence[tuple[int, int]]) -> torch.Tensor:
    """``(length,)`` bool: True at span tokens."""
    inside = torch.zeros(length, dtype=torch.bool)
    for start, end in check_spans(spans, length):
        inside[start:end] = True
    return inside


def sample_spans(length: int, *, max_spans: int, min_len: int, max_len: int,
                 generator: torch.Generator) -> list[tuple[int, int]]:
    """1 to ``max_spans`` disjoint spans of ``min_len``-``max_len`` tokens (App. A: up to 2 of 4-128).

    Every span has at least one context token before it, so its first token is predicted from a
    context output that sees the whole context and no span token.
    """
    whole_number(length, "length")
    whole_number(max_spans, "max_spans")
    whole_number(min_len, "min_len")
    whole_number(max_len, "max_len")
    if min_len > max_len:
        raise ValueError(f"min_len={min_len} exceeds max_len={max_len}; expected 1 <= min_len <= max_len")
    count = int(torch.randint(1, max_spans + 1, (1,), generator=generator))
    lengths = torch.randint(min_len, max_len + 1, (count,), generator=generator).tolist()
    free = length - sum(lengths) - count  # one obligatory context token before each span
    if free < 0:
        raise ValueError(f"length={length} is too short for {count} spans of {lengths} tokens")
    cuts = sorted(torch.randint(0, free + 1, (count,), generator=generator).tolist())
    spans, position, previous_cut = [], 0, 0
    for span_length, cut in zip(lengths, cuts):
        position += 1 + cut - previous_cut
        spans.append((position, position + span_length))
        position += span_length
        previous_cut = cut
    return spans


def msg_labels(input_ids: torch.Tensor, spans_per_row: Sequence[Sequence[tuple[int, int]]]) -> torch.Tensor:
    """Eq. 4 with next-token alignment (Fig. 3c, "y_i ~ x_(i+1)"): ``labels[l] = x[l+1]`` when l + 1 is a span token, else -100."""
    labels = torch.full_like(input_ids, O.IGNORE_INDEX)
    for row, spans in enumerate(spans_per_row):
        for start, end in check_spans(spans, input_ids.shape[1], min_start=1, name=f"spans_per_row[{row}]"):
            labels[row, start - 1:end - 1] = input_ids[row, start:end]
    return labels


def masked_view(input_ids: torch.Tensor, spans_per_row: Sequence[Sequence[tuple[int, int]]], *, mask_id: int,
                vocab_size: int, special_ids, corrupt: bool = True, masking: O.MaskingConfig = O.MaskingConfig(),
                generator: torch.Generator | None = None) -> dict:
    """x^m of Fig. 4: spans marked as span tokens, 20% of the *context* tokens corrupted for MNTP (§3.2.1, §3.3).

    Returns input ids, MNTP labels (on corrupted context tokens), MSG labels (on span tokens) and the spans.
    Span tokens are never corrupted: they are the teacher-forced targets of MSG. The context token right after
    a span is not selected either: its MNTP output would be the last span token's, which sees span tokens.
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}; expected (batch, length)")
    if len(spans_per_row) != input_ids.shape[0]:
        raise ValueError(f"spans_per_row has {len(spans_per_row)} entries for a batch of {input_ids.shape[0]} rows")
    length = input_ids.shape[1]
    spans_per_row = [check_spans(spans, length, min_start=1, name=f"spans_per_row[{row}]")
                     for row, spans in enumerate(spans_per_row)]
    in_span = torch.stack([span_mask(length, spans) for spans in spans_per_row])
    # §3.2.1 under the hybrid mask: a context token right after a span would be predicted from the last span
    # token's output, not "exclusively with the context tokens"; it is never an MNTP target.
    after_span = torch.zeros_like(in_span)
    for row, spans in enumerate(spans_per_row):
        for _, end in spans:
            if end < length:
                after_span[row, end] = True
    if corrupt:
        corrupted, selected = O.mask_tokens(input_ids, (~in_span & ~after_span).long(), mask_id=mask_id, vocab_size=vocab_size,
                                            special_ids=special_ids, config=masking, generator=generator)
        mntp = O.labels_for("mntp", input_ids, selected)
    else:
        corrupted, mntp = input_ids.clone(), torch.full_like(input_ids, O.IGNORE_INDEX)
    return {"input_ids": corrupted, "padding_mask": torch.ones_like(input_ids), "mntp_labels": mntp,
            "msg_labels": msg_labels(input_ids, spans_per_row), "spans": spans_per_row}


def masked_lm_reader(model) -> MNTPDecoder:
    """The workbook's one masked-LM interface (:mod:`helpers.masked_lm`) over a decoder that notebook 03 trains
    or reads: output l - 1 predicts token l (MNTP's l -> l+1, §3.2.1), under any workbook mask. It scores given
    sequences only (no mask token, no tokenizer)."""
    return MNTPDecoder.reader(model)


def mntp_msg_losses(model, view: dict) -> dict:
    """One forward of x^m under each row's hybrid mask; MNTP (Eq. 2) and MSG (Eq. 4) from the same hidden states.

    Each loss is :func:`helpers.objectives.gathered_loss`, the mean cross-entropy over its labelled tokens, with
    logits computed only there. Departure: Eq. 2 writes 1/(N·L) over all positions and Eq. 4 1/N over spans; both
    are per-token means here, which changes the MSG:MNTP weighting of Eq. 5 by the ratio of their token counts.
    """
    masks_per_row = [M.magnet(spans) for spans in view["spans"]]
    reader = masked_lm_reader(model)
    hidden = reader.hidden_states(view["input_ids"], view["padding_mask"], mask=masks_per_row)
    losses = {}
    for name in ("mntp", "msg"):
        labels = view[f"{name}_labels"]
        if (labels != O.IGNORE_INDEX).any():
            losses[name] = O.gathered_loss(reader.head, hidden, labels)["loss"]
    return losses


# --------------------------------------------------------------------------- SSCL (§3.2.2, Eq. 3)

class ProjectionHead(nn.Module):
    """The projection head of Fig. 4 (h -> e): Linear + tanh, as in SimCSE. Used in training only."""

    def __init__(self, width: int):
        super().__init__()
        self.dense = nn.Linear(width, width)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden))


def _unwrapped(model):
    return getattr(model, "module", model)


def add_projection_head(model, width: int, seed: int) -> None:
    """Attach a :class:`ProjectionHead` as ``model.sscl_head`` (drawn after ``torch.manual_seed(seed)``, without
    touching the global generator), unless the model already has one; :func:`joint_loss` reads it there."""
    if not hasattr(_unwrapped(model), "sscl_head"):
        device = next(model.parameters()).device
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            _unwrapped(model).sscl_head = ProjectionHead(width).to(device)


def info_nce(anchors: torch.Tensor, positives: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    """Eq. 3: ``-1/N Σ_i log exp(s(e_i, e_i^+)/τ) / Σ_j exp(s(e_i, e_j^+)/τ)`` with in-batch negatives.

    ``s`` is the cosine similarity (the dot product of L2-normalised encodings, as in SimCSE and LLM2Vec);
    the paper writes the plain dot product e·e⁺, a stated departure. The denominator runs over every positive
    in the batch, its own included.
    """
    if anchors.dim() != 2 or anchors.shape != positives.shape:
        raise ValueError(f"positives has shape {tuple(positives.shape)} and anchors {tuple(anchors.shape)}; "
                         "both must be the same (batch, width)")
    if anchors.shape[0] < 2:
        raise ValueError(f"batch size {anchors.shape[0]} is too small for in-batch negatives; SSCL needs at least 2 sentences")
    real_number(temperature, "temperature", low=0.0, low_open=True, what="τ of Eq. 3")
    similarities = F.normalize(anchors.float(), dim=-1) @ F.normalize(positives.float(), dim=-1).T / temperature
    return F.cross_entropy(similarities, torch.arange(len(anchors), device=anchors.device))


def encode_sentences(tokenizer, texts: Sequence[str], *, instruction: str | None = INSTRUCTION,
                     max_len: int = 128) -> dict:
    """``instruction + " " + text`` followed by EOS, right-padded: the SSCL input whose last token is encoded (§3.2.2).

    Long texts are cut so that EOS always stays last.
    """
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no EOS token, whose representation SSCL uses")
    rows = []
    for text in texts:
        prompt = f"{instruction} {text}" if instruction else text
        ids = tokenizer(prompt, add_special_tokens=False).input_ids[:max_len - 1] + [tokenizer.eos_token_id]
        rows.append(ids)
    input_ids, padding = padded(rows, tokenizer.pad_token_id)
    return {"input_ids": input_ids, "padding_mask": padding}


def last_token_states(model, batch: dict, mask: M.Mask = M.bidirectional) -> torch.Tensor:
    """``(B, d)``: the final hidden state of each row's last real token (the [EOS] of §3.2.2)."""
    hidden = attention.forward_with_mask(models.decoder_body(model), batch["input_ids"], mask,
                                         padding_mask=batch["padding_mask"]).last_hidden_state
    last = batch["padding_mask"].to(hidden.device).sum(-1) - 1
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def sscl_loss(model, head: nn.Module, anchors: dict, positives: dict, temperature: float = 0.1) -> torch.Tensor:
    """Eq. 3 on x and x^+, each encoded under the bidirectional mask and projected by ``head``."""
    return info_nce(head(last_token_states(model, anchors)), head(last_token_states(model, positives)), temperature)


# --------------------------------------------------------------------------- the joint loss (Eq. 5, Fig. 4, App. A)

@dataclass(frozen=True)
class Phase:
    """``steps`` iterations of Eq. 5 with weights λ1 (MNTP), λ2 (SSCL), λ3 (MSG)."""

    steps: int
    mntp: float
    sscl: float
    msg: float

    def __post_init__(self):
        whole_number(self.steps, "steps")
        for name in ("mntp", "sscl", "msg"):
            real_number(getattr(self, name), name, low=0.0, what="a loss weight λ of Eq. 5")
        if max(self.mntp, self.sscl, self.msg) == 0:
            raise ValueError(f"λ=({self.mntp}, {self.sscl}, {self.msg}) must be >= 0 with at least one positive")


def magnet_phases(settings: MagnetSettings) -> list[Phase]:
    """App. A: λ = (1, 0, 1) first ("MNTP and MSG ... help the model learn to capture future context"), then (1, 9, 1)."""
    return [Phase(settings.phase1_steps, 1.0, 0.0, 1.0), Phase(settings.phase2_steps, 1.0, settings.lambda_sscl, 1.0)]


def phase_at(phases: Sequence[Phase], step: int) -> Phase:
    """The phase that 0-based ``step`` falls in."""
    end = 0
    for phase in phases:
        end += phase.steps
        if step < end:
            return phase
    raise ValueError(f"step={step} is past the last phase (total {end} steps)")


def joint_loss(model, batch: dict, temperature: float = 0.1) -> dict:
    """Eq. 5: ``λ1 L_MNTP + λ2 L_SSCL + λ3 L_MSG`` for one batch of views (``experiment.joint_batch_maker``):
    ``lambdas``, the masked view x^m under ``masked``, and x, x^+ under ``anchors`` and ``positives``."""
    lambda_mntp, lambda_sscl, lambda_msg = batch["lambdas"]
    parts: dict[str, torch.Tensor] = {}
    if "masked" in batch:
        parts.update(mntp_msg_losses(model, batch["masked"]))
    if lambda_sscl:
        parts["sscl"] = sscl_loss(model, _unwrapped(model).sscl_head, batch["anchors"], batch["positives"], temperature)
    weights = {"mntp": lambda_mntp, "sscl": lambda_sscl, "msg": lambda_msg}
    missing = [name for name, weight in weights.items() if weight and name not in parts]
    if missing:
        raise ValueError(f"batch has no labelled tokens for {missing} although their λ is positive")
    total = sum(weights[name] * loss for name, loss in parts.items() if weights[name])
    return {"loss": total, **parts}


# --------------------------------------------------------------------------- word pooling (§4.1)

def pool_words(hidden: torch.Tensor, spans: Sequence[tuple[int, int]], *, shift: bool = True) -> torch.Tensor:
    """§4.1: a word is the mean of its tokens' representations, token i being represented by output i - 1.

    For tokens ``x_w11 x_w12 x_w21 x_w22 x_w23 x_w31`` and outputs ``y_w11 ... y_w31``, word w2 is
    ``(y_w12 + y_w21 + y_w22) / 3``. ``shift=False`` averages outputs i instead (for a causal model,
    whose output i is the first to see token i).
    """
    if hidden.dim() != 2:
        raise ValueError(f"hidden has shape {tuple(hidden.shape)}; expected (length, width)")
    checked = check_spans(spans, hidden.shape[0], min_start=1 if shift else 0)
    offset = 1 if shift else 0
    return torch.stack([hidden[start - offset:end - offset].mean(0) for start, end in checked])


# --------------------------------------------------------------------------- infilling a span (§3.1, mode 3)

def mode_mask(mode: str, spans) -> M.Mask:
    """The mask a span is read under: ``"causal"`` (left context only), ``"magnet"`` (the hybrid mask of ``spans``)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {MODES}")
    return M.causal if mode == "causal" else M.magnet(spans)


@torch.no_grad()
def infill_span(model, ids: torch.Tensor, span: tuple[int, int], mode: str) -> torch.Tensor:
    """Greedily generate the tokens of ``span`` (its length is kept) with the other tokens as context.

    ``"magnet"``: the hybrid mask, so span token t sees all context and the span tokens before t (§3.1,
    mode 3). Context tokens never see span tokens, so the context is encoded once under the
    bidirectional mask (at its original positions) and the span is decoded after it with a KV cache:
    row for row the attention of ``masks.magnet([span])``, at O(L + m) instead of O(m·L) cost.
    ``"causal"``: only the text left of the span, decoded the same way.
    """
    ids = torch.as_tensor(ids)
    if ids.dim() != 1:
        raise ValueError(f"ids has shape {tuple(ids.shape)}; expected one sequence (length,)")
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {MODES}")
    (start, end), = check_spans([span], len(ids), min_start=1, name="span")
    reader = masked_lm_reader(model)
    device = reader.device
    ids = ids.to(device)
    decoder, head = reader.body(), reader.head
    if mode == "magnet":
        context = torch.cat([ids[:start], ids[end:]])
        positions = torch.cat([torch.arange(start), torch.arange(end, len(ids))]).to(device)
    else:
        context, positions = ids[:start], torch.arange(start, device=device)
    out = attention.forward_with_mask(decoder, context[None], M.bidirectional if mode == "magnet" else M.causal,
                                      position_ids=positions[None], use_cache=True)
    hidden, cache = out.last_hidden_state[0, start - 1], out.past_key_values
    generated = []
    for position in range(start, end):
        token = head(hidden).argmax()
        generated.append(int(token))
        if position + 1 < end:
            out = decoder(input_ids=token.view(1, 1), position_ids=torch.tensor([[position]], device=device),
                          past_key_values=cache, use_cache=True)
            hidden, cache = out.last_hidden_state[0, -1], out.past_key_values
    return torch.tensor(generated)
