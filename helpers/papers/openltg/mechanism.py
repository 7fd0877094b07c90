"""Mask-predict with linear temperature decay (LTD) and dynamic sliding window attention (DSWA); OpenLTG, seed 002.

- **Iterative decoding** (§3.1 "Model Inference", after Mask-Predict): N masked target tokens follow
  the prompt; each iteration samples every masked position with top-p at temperature
  ``T_t = β(1 - t/T)`` (LTD, §4.2 Eq. 8), then re-masks the ``n = N(T - t - 1)/T`` lowest-confidence
  tokens (iterations t = 0..T-1, so n reaches 0 after the last). Only masked positions are written
  and kept tokens keep their confidence (the released Mask-Predict and OpenLTG code);
  ``update_all`` resamples every target token at each step (SMART, §4.3). Every iteration is
  recorded in an :class:`Iteration`.
- **DSWA** (§4.1, Eq. 6-7): targets see the whole prompt and only the targets inside a window whose
  size follows Eq. 7 layer by layer; the prompt is a closed block that never sees a target (mixed
  attention, §3.1 Fig. 1), so it is computed once per decode with a KV cache. Targets attend the
  prompt's same-layer states, or (``source_states="last-layer"``) Eq. 3's last-layer states.
  The masks are :func:`helpers.masks.dswa` with :func:`helpers.masks.dswa_window_schedule`'s windows, fed to the
  model through :mod:`helpers.attention`.
- **Recurrent segments** (App. B, Fig. 7): each segment is mask-predicted with the prompt and the segments
  before it as its source.
- **Nucleus sampling** (§3.1: *"we utilize the nucleus sampling (Holtzman et al., 2019) decoding strategy instead
  of beam search"*): :func:`sample_tokens`, shared by mask-predict and the AR baseline it is compared with
  (Table 4 and 6, Fig. 5), :func:`.mechanism_autoregressive.autoregressive_generate`, which samples left to right with a KV cache and gives
  every prompt exactly ``length`` new tokens (the paper forces a fixed length, Table 1).
- **One masked-LM interface, two backends** (:mod:`helpers.masked_lm`): an encoder MLM (BERT, RoBERTa;
  output l predicts token l) or notebook 02's MNTP-adapted decoder (bidirectional; output l - 1
  predicts token l). :func:`mask_predict` does not care which one it gets.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import torch
from tqdm.auto import tqdm

from ... import masks as M
from ...checks import real_number, whole_number
from ...masked_lm import SOURCE_STATES, MaskedLM
from ...padding import padded
from ...seeds import seeded_generator

REJECTION_ROUNDS = 64  # nucleus-sampling redraws before the sorting fallback
FULL_WINDOW = 1 << 20  # a window wider than any sequence: DSWA off, mixed attention kept


# --------------------------------------------------------------------------- checks

def check_length(length, name: str = "length") -> int:
    return whole_number(length, name, 1, "the number of target tokens to generate")


def check_top_p(top_p) -> float:
    return real_number(top_p, "top_p", low=0.0, high=1.0, low_open=True,
                       what="the nucleus keeps the smallest set of tokens with mass >= top_p")


def check_positive(value, name: str, what: str) -> float:
    return real_number(value, name, low=0.0, low_open=True, what=what)


def check_prompts(prompts, vocab_size: int | None = None) -> list[torch.Tensor]:
    """One 1D id tensor, a 2D batch or a list of 1D tensors, as a non-empty list of non-empty 1D long tensors of
    ids in ``0..vocab_size - 1`` (when ``vocab_size`` is given: the model's, :func:`vocabulary_size`). Text is
    refused: a prompt is token ids (``tokenizer(text).input_ids``)."""
    expected = "token ids: a 1D tensor, a 2D batch or a list of 1D tensors (tokenizer(text).input_ids)"
    if isinstance(prompts, (str, bytes)):
        raise ValueError(f"prompts={prompts[:40]!r} is text; expected {expected}")
    if isinstance(prompts, torch.Tensor):
        prompts = [prompts] if prompts.dim() == 1 else list(prompts)
    try:
        prompts = list(prompts)
    except TypeError:
        raise ValueError(f"prompts={prompts!r} is not a sequence of prompts; expected {expected}") from None
    for index, prompt in enumerate(prompts):
        if isinstance(prompt, (str, bytes)):
            raise ValueError(f"prompts[{index}]={prompt[:40]!r} is text; expected {expected}")
        floating = prompt.is_floating_point() if isinstance(prompt, torch.Tensor) else any(
            isinstance(value, float) for value in (prompt if isinstance(prompt, (list, tuple)) else [prompt]))
        if floating:  # a float id would be truncated to another token without a word
            raise ValueError(f"prompts[{index}] holds floats ({str(prompt)[:40]}); expected integer token ids")
    converted = []
    for index, prompt in enumerate(prompts):
        try:
            converted.append(torch.as_tensor(prompt, dtype=torch.long).flatten())
        except (TypeError, ValueError, RuntimeError, OverflowError):
            raise ValueError(f"prompts[{index}]={str(prompt)[:40]} is not a sequence of token ids; expected "
                             f"{expected}") from None
    prompts = converted
    if not prompts:
        raise ValueError("prompts is empty; pass at least one prompt (a 1D tensor of token ids)")
    for index, prompt in enumerate(prompts):
        if prompt.numel() == 0:
            raise ValueError(f"prompts[{index}] is empty; each prompt needs at least one token")
        low, high = int(prompt.min()), int(prompt.max())
        if low < 0 or (vocab_size is not None and high >= vocab_size):
            bad = low if low < 0 else high
            allowed = "ids are >= 0" if vocab_size is None else f"0..{vocab_size - 1}"
            raise ValueError(f"prompts[{index}] holds the id {bad}, outside the model's vocabulary ({allowed}); "
                             "expected token ids of its tokenizer")
    return prompts


def vocabulary_size(model) -> int | None:
    """The number of rows of ``model``'s input embeddings (the ids a prompt may hold), or None when it has none."""
    embeddings = getattr(model, "get_input_embeddings", None)
    if embeddings is None:
        return None
    try:
        return int(embeddings().num_embeddings)
    except (AttributeError, NotImplementedError):
        return None


def check_iterations(iterations) -> int:
    return whole_number(iterations, "iterations", 1, "T, the number of mask-predict iterations")


def check_step(step, iterations: int) -> int:
    step = whole_number(step, "step", 0, "an iteration index")
    if step >= iterations:
        raise ValueError(f"step={step!r} must be an iteration index in 0..{iterations - 1}")
    return step


# --------------------------------------------------------------------------- the schedule (Eq. 8, Mask-Predict)

def ltd_temperature(step: int, iterations: int, beta: float) -> float:
    """LTD, seed 002 §4.2 Eq. 8: ``T_t = β · (1 - t/T)`` at iteration t = 0..T-1 (always > 0)."""
    iterations = check_iterations(iterations)
    beta = check_positive(beta, "beta", "β, the LTD scale of Eq. 8")
    step = check_step(step, iterations)
    return beta * (1.0 - step / iterations)


def remask_count(length: int, step: int, iterations: int) -> int:
    """Mask-Predict's schedule: after iteration t (0-based) re-mask ``n = ⌊N · (T - t - 1) / T⌋`` tokens.

    This is Mask-Predict's ``n = N(T - t)/T`` with t counted from 1 once the iteration has ended; it is
    N·(T-1)/T after the first iteration and 0 after the last.
    """
    length, iterations = check_length(length), check_iterations(iterations)
    step = check_step(step, iterations)
    return length * (iterations - step - 1) // iterations


@dataclass(frozen=True)
class DecodeConfig:
    """One decoding setting. The defaults are the paper's (§5.1): T = 8, β = 1.8, top-p 0.9, LTD, DSWA with
    S_fix, α_min and α_max of Eq. 7 (:data:`helpers.masks.DSWA_FIXED_WINDOW` and its neighbours).

    ``update_all=False`` resamples only the masked positions and kept tokens keep the confidence they
    were sampled with, as the released Mask-Predict and OpenLTG code do; ``True`` is SMART (§4.3),
    which resamples every target token each iteration (a model trained to correct its own tokens).
    ``cache_prompt`` computes the prompt block once per decode; ``source_states`` picks which prompt
    states the targets attend: ``"same-layer"`` (one stack, ours) or ``"last-layer"`` (Eq. 3 and 6).
    """

    iterations: int = 8
    beta: float = 1.8
    ltd: bool = True
    temperature: float = 1.0  # used when ltd is False (§3.2: "temperature T = 1.0")
    top_p: float = 0.9
    dswa: bool = True
    fixed_window: int = M.DSWA_FIXED_WINDOW
    alpha_min: float = M.DSWA_ALPHA_MIN
    alpha_max: float = M.DSWA_ALPHA_MAX
    update_all: bool = False
    cache_prompt: bool = True  # compute the prompt once (exact: no prompt row attends a target)
    source_states: str = "same-layer"  # targets attend the prompt's same-layer states, or Eq. 3's "last-layer"
    probe_position: int | None = None  # record the raw logits here at every iteration (Fig. 2, Fig. 4)

    def __post_init__(self):
        check_iterations(self.iterations)
        check_positive(self.beta, "beta", "β, the LTD scale of Eq. 8")
        check_positive(self.temperature, "temperature", "the sampling temperature without LTD")
        check_top_p(self.top_p)
        whole_number(self.fixed_window, "fixed_window", 1, "S_fix of Eq. 7")
        M.dswa_window_schedule(1, self.fixed_window, self.alpha_min, self.alpha_max)  # checks α
        if self.probe_position is not None:
            whole_number(self.probe_position, "probe_position", 0, "a target index")
        if self.source_states not in SOURCE_STATES:
            raise ValueError(f"source_states={self.source_states!r} must be one of {SOURCE_STATES}")
        if self.source_states == "last-layer" and not self.cache_prompt:
            raise ValueError("source_states='last-layer' needs cache_prompt=True: the prompt's last-layer states are "
                             "computed once and projected into every layer's keys and values")

    def temperature_at(self, step: int) -> float:
        return ltd_temperature(step, self.iterations, self.beta) if self.ltd else self.temperature


# --------------------------------------------------------------------------- top-p (Holtzman et al.)

def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus sampling (Holtzman et al.): keep the smallest set of most likely tokens whose mass reaches top_p, renormalised."""
    top_p = check_top_p(top_p)
    if top_p >= 1.0:
        return probs / probs.sum(-1, keepdim=True)
    sorted_probs, order = probs.sort(-1, descending=True)
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    keep_sorted = mass_before < top_p  # the most likely token always stays
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    mass = kept.sum(-1, keepdim=True)
    if bool((mass <= 0).any()):  # an all-zero row has no nucleus: dividing would give NaN probabilities
        raise ValueError("probs has a row with no probability mass (all zero); every row needs at least one token "
                         "with positive probability")
    return kept / mass


def sample_tokens(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row from ``softmax(logits / temperature)`` restricted to the top-p nucleus.

    A token is in the nucleus when the tokens strictly more likely than it hold less than ``top_p`` of the
    mass (the sorted definition of :func:`top_p_filter`, ties aside). Sampling is exact rejection
    sampling: draw from the whole distribution by inverse CDF, keep the draw if it lies in the nucleus,
    else redraw that row (each draw is accepted with probability >= top_p). This avoids sorting the
    vocabulary, which at LTD's early, flat temperatures costs about as much as the forward pass.
    Returns ``(tokens, confidences)``; a token's confidence is its probability under the tempered
    distribution (Eq. 8), which is what re-masking ranks.
    """
    top_p = check_top_p(top_p)
    temperature = check_positive(temperature, "temperature", "the softmax temperature; 0 would divide by zero")
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or logits.shape[-1] == 0:
        raise ValueError(f"logits has shape {tuple(getattr(logits, 'shape', ()))}; expected (rows, vocabulary)")
    if torch.isnan(logits).any() or torch.isposinf(logits).any():
        raise ValueError("logits hold nan or +inf values; expected finite scores (-inf only for banned tokens)")
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    cdf = probs.cumsum(-1)
    rows = probs.shape[0]
    tokens = torch.empty(rows, dtype=torch.long, device=probs.device)
    pending = torch.arange(rows, device=probs.device)
    for _ in range(REJECTION_ROUNDS):
        if pending.numel() == 0:
            break
        every = pending.numel() == rows
        row_probs, row_cdf = (probs, cdf) if every else (probs[pending], cdf[pending])
        draw = torch.rand((pending.numel(), 1), generator=generator, device=probs.device) * row_cdf[:, -1:]
        candidate = torch.searchsorted(row_cdf, draw, right=True).clamp(max=probs.shape[-1] - 1)
        if top_p >= 1.0:
            accept = torch.ones(pending.numel(), dtype=torch.bool, device=probs.device)
        else:
            chosen_prob = row_probs.gather(-1, candidate)
            accept = torch.where(row_probs > chosen_prob, row_probs, 0.0).sum(-1) < top_p
        tokens[pending[accept]] = candidate[accept, 0]
        pending = pending[~accept]
    if pending.numel():  # practically unreachable: fall back to sorting for the rows left
        values, ids = probs[pending].sort(-1, descending=True)
        cumulative = values.cumsum(-1)
        kept = ((cumulative - values) < top_p).sum(-1, keepdim=True)
        draw = torch.rand(kept.shape, generator=generator, device=probs.device) * cumulative.gather(-1, kept - 1)
        tokens[pending] = ids.gather(-1, torch.searchsorted(cumulative, draw, right=True).minimum(kept - 1)).squeeze(-1)
    return tokens, probs.gather(-1, tokens[:, None]).squeeze(-1)


# --------------------------------------------------------------------------- prompts

def left_padded(prompts: list[torch.Tensor], length: int, fill: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, P_max + length)`` ids with each prompt right-aligned before ``length`` copies of ``fill``, and the padding mask."""
    ids, padding = padded(prompts, pad_id, left=True)
    tail = torch.full((len(prompts), length), fill, dtype=torch.long)
    return torch.cat([ids, tail], 1), torch.cat([padding, torch.ones_like(tail)], 1)


def check_seed(seed) -> int:
    return whole_number(seed, "seed", 0, "the random seed of the draws")


# --------------------------------------------------------------------------- masks (§3.1 Fig. 1, §4.1 Eq. 6-7)

def generation_mask(source_length: int, window: int | None = None) -> M.Mask:
    """Mixed attention for generation (seed 002 §3.1 Fig. 1), with DSWA's window (§4.1 Eq. 6, Fig. 3).

    The first ``source_length`` positions are the prompt, a closed block: prompt rows attend the prompt
    only, never a target (Eq. 2 encodes the source on its own). Targets "attend all source sequence
    hidden states and the target sequence hidden states in the window"; ``window=None`` means every
    target (no DSWA). With an MNTP backend the last prompt row predicts the first target from the prompt
    alone. The closed block is what makes a prompt computed once per decode exact.
    """
    source_length = whole_number(source_length, "source_length", 1, "the prompt length; a prompt needs a token")
    window = FULL_WINDOW if window is None else whole_number(window, "window", 1, "a DSWA window in tokens")
    return M.dswa(source_length, window)


def attention_masks(backend: MaskedLM, source_lengths: Sequence[int], config: DecodeConfig) -> dict:
    """``{"mask": ...}`` without DSWA, or ``{"layer_masks": ...}`` with one window per layer from Eq. 7 (one Mask per row)."""
    if not config.dswa:
        return {"mask": [generation_mask(length, None) for length in source_lengths]}
    schedule = M.dswa_window_schedule(backend.num_layers, config.fixed_window, config.alpha_min, config.alpha_max)
    per_window = {window: [generation_mask(length, window) for length in source_lengths]
                  for window in sorted(set(schedule))}
    return {"layer_masks": [per_window[window] for window in schedule]}


# --------------------------------------------------------------------------- mask-predict

@dataclass
class Iteration:
    """One mask-predict iteration (all tensors ``(B, N)`` on the CPU; ``probe_logits`` is ``(B, V)``)."""

    step: int
    temperature: float
    masked: torch.Tensor  # positions that entered the iteration as <mask>
    tokens: torch.Tensor  # the target after sampling
    confidences: torch.Tensor
    remasked: torch.Tensor  # the lowest-confidence positions masked for the next iteration
    probe_logits: torch.Tensor | None = None  # the logits sampling saw there (banned tokens at -inf)


@dataclass
class Decoded:
    """The result of :func:`mask_predict`: final tokens ``(B, N)`` and the trace."""

    tokens: torch.Tensor
    trace: list[Iteration]
    prompts: list[torch.Tensor]
    config: DecodeConfig
    seconds: float

    def texts(self, tokenizer) -> list[str]:
        return [tokenizer.decode(row, skip_special_tokens=True) for row in self.tokens.tolist()]


def check_fits(backend: MaskedLM, prompts: list[torch.Tensor], length: int) -> None:
    """The longest prompt plus ``length`` targets must fit the backend's positions."""
    longest = max(prompt.numel() for prompt in prompts)
    if longest + length > backend.max_positions:
        raise ValueError(f"prompt of {longest} tokens + length={length} = {longest + length} exceeds the model's "
                         f"{backend.max_positions} positions; shorten the prompt or the target")


def _snapshot(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU copy that later in-place updates cannot change (``.cpu()`` alone aliases CPU tensors)."""
    return tensor.detach().to("cpu", copy=True)


@torch.inference_mode()
def mask_predict(backend: MaskedLM, prompts, length: int, config: DecodeConfig = DecodeConfig(), *, seed: int = 0) -> Decoded:
    """Iterative mask-predict decoding (seed 002 §3.1 "Model Inference", §4.1-4.3).

    Starts from ``length`` <mask> tokens after each prompt. Iteration t = 0..T-1 predicts the masked
    positions, samples each from the top-p nucleus of ``softmax(u / T_t)`` with ``T_t = β(1 - t/T)``
    (LTD, Eq. 8), and re-masks the :func:`remask_count` lowest-confidence target tokens. By default
    only masked positions are written and kept tokens keep the confidence they were sampled with (the
    released Mask-Predict and OpenLTG code); ``config.update_all`` resamples every target (SMART, §4.3).
    Under DSWA each layer uses its Eq. 7 window. The prompt is a closed block, so with
    ``config.cache_prompt`` it runs once and each iteration runs only the N target positions.
    ``prompts``: one 1D id tensor or a list of them (batched with left padding).

    **Banned tokens** (``backend.banned_ids``: the special tokens, the mask token and every token that is only
    underscores, :func:`helpers.masked_lm.underscore_only_ids`) get ``-inf`` logits *before* the softmax, so they are
    never drawn and the confidences re-masking ranks are renormalised over the allowed tokens. The public OpenLTG
    code (``nucleus_sampling``) samples over the full vocabulary instead and swaps a drawn special token for the
    argmax, keeping the drawn token's probability as its score.
    """
    prompts = check_prompts(prompts, vocabulary_size(backend.model))
    check_seed(seed)
    length = check_length(length)
    check_fits(backend, prompts, length)
    if config.probe_position is not None and config.probe_position >= length:
        raise ValueError(f"probe_position={config.probe_position} is outside the target of length={length}")
    device = backend.device
    started = time.perf_counter()
    ids, padding = left_padded(prompts, length, backend.mask_id, backend.pad_id)
    ids, padding = ids.to(device), padding.to(device)
    start = ids.shape[1] - length
    routing = attention_masks(backend, [prompt.numel() for prompt in prompts], config)
    if config.cache_prompt:  # the masks are rendered once, the prompt computed once
        rendered = backend.render(padding, **routing)
        source = backend.encode_source(ids[:, :start], padding, rendered, states=config.source_states)

        def predict(rows, cols):
            return backend.predict_targets(source, ids[:, start:], padding, rows, cols, rendered)
    else:
        def predict(rows, cols):
            return backend.predict(ids, padding, rows, cols + start, **routing)
    banned = torch.tensor(backend.banned_ids, dtype=torch.long, device=device)
    generator = seeded_generator(seed, device=device)  # one stream per decode

    batch = len(prompts)
    tokens = torch.full((batch, length), backend.mask_id, dtype=torch.long, device=device)
    confidences = torch.zeros(batch, length, device=device)
    masked = torch.ones(batch, length, dtype=torch.bool, device=device)
    probe = torch.zeros_like(masked)
    if config.probe_position is not None:
        probe[:, config.probe_position] = True
    trace: list[Iteration] = []
    for step in range(config.iterations):
        temperature = config.temperature_at(step)
        update = torch.ones_like(masked) if config.update_all else masked
        rows, cols = (update | probe).nonzero(as_tuple=True)
        logits = predict(rows, cols).float()
        logits[:, banned[banned < logits.shape[-1]]] = float("-inf")
        chosen = update[rows, cols]
        sampled, confidence = sample_tokens(logits[chosen], temperature, config.top_p, generator)
        tokens[rows[chosen], cols[chosen]] = sampled
        confidences[rows[chosen], cols[chosen]] = confidence
        count = remask_count(length, step, config.iterations)
        lowest = confidences.argsort(dim=-1, stable=True)[:, :count]
        remasked = torch.zeros_like(masked).scatter(1, lowest, True)
        probe_logits = None
        if config.probe_position is not None:
            at_probe = cols == config.probe_position
            probe_logits = torch.zeros(batch, logits.shape[-1])
            probe_logits[rows[at_probe].cpu()] = logits[at_probe].cpu()
        trace.append(Iteration(step, temperature, _snapshot(masked), _snapshot(tokens), _snapshot(confidences),
                               _snapshot(remasked), probe_logits))
        masked = remasked
        ids[:, start:] = torch.where(masked, torch.full_like(tokens, backend.mask_id), tokens)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return Decoded(_snapshot(tokens), trace, prompts, config, time.perf_counter() - started)


def mask_predict_batched(backend: MaskedLM, prompts: list[torch.Tensor], length: int, config: DecodeConfig, *,
                         batch_size: int, seed: int = 0, desc: str = "mask-predict") -> list[torch.Tensor]:
    """:func:`mask_predict` over many prompts in batches, with a progress bar; one 1D tensor per prompt."""
    batch_size = whole_number(batch_size, "batch_size", 1, "prompts per batch")
    prompts = check_prompts(prompts)
    out: list[torch.Tensor] = []
    for index in tqdm(range(0, len(prompts), batch_size), desc=desc):
        out.extend(mask_predict(backend, prompts[index:index + batch_size], length, config, seed=seed + index).tokens)
    return out


# --------------------------------------------------------------------------- recurrent segments (App. B)

def segment_lengths(length: int, segments: int) -> list[int]:
    """Split ``length`` target tokens into ``segments`` near-equal segments (App. B), earlier ones longer."""
    length = check_length(length)
    segments = whole_number(segments, "segments", 1, "the number of recurrent segments")
    if segments > length:
        raise ValueError(f"segments={segments} exceeds length={length}; each segment needs a token")
    base, extra = divmod(length, segments)
    return [base + (index < extra) for index in range(segments)]


def recurrent_mask_predict(backend: MaskedLM, prompts, length: int, segments: int,
                           config: DecodeConfig = DecodeConfig(), *, seed: int = 0) -> list[Decoded]:
    """Recurrent segment generation (seed 002 App. B, Fig. 7): each segment is mask-predicted with the prompt
    and the segments before it as its source. One :class:`Decoded` per segment; ``segments=1`` is one pass."""
    prompts = check_prompts(prompts)
    check_fits(backend, prompts, check_length(length))
    results: list[Decoded] = []
    context = prompts
    for index, size in enumerate(segment_lengths(length, segments)):
        result = mask_predict(backend, context, size, config, seed=seed + index)
        results.append(result)
        context = [torch.cat([prompt, row]) for prompt, row in zip(context, result.tokens)]
    return results


def joined_tokens(segments: list[Decoded]) -> torch.Tensor:
    """The full target ``(B, N)`` of a recurrent decode."""
    return torch.cat([segment.tokens for segment in segments], dim=1)

