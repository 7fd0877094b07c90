"""Mask-predict decoding with linear temperature decay (LTD) and dynamic sliding windows (DSWA); seed 002 (OpenLTG).

- **One masked-LM interface, two backends** (:class:`helpers.masked_lm.MaskedLM`). :class:`EncoderMLM` wraps an encoder
  MLM (BERT, RoBERTa): the output at position l predicts token l. :class:`MNTPDecoder` wraps the
  MNTP-adapted decoder of notebook 02: bidirectional, and the output at l - 1 predicts token l.
  :func:`mask_predict` only calls ``MaskedLM.predict``, so it does not care which one it gets.
- **Iterative decoding** (§3.1 "Model Inference", after Mask-Predict): N masked target tokens follow
  the prompt; each iteration samples every masked position with top-p at temperature
  ``T_t = β(1 - t/T)`` (LTD, §4.2 Eq. 8), then re-masks the ``n = N(T - t - 1)/T`` lowest-confidence
  tokens (iterations t = 0..T-1, so n reaches 0 after the last). ``update_all`` resamples every
  target token at each step (SMART, §4.3). Every iteration is recorded in a :class:`Iteration`.
- **DSWA** (§4.1, Eq. 6-7): targets see the whole prompt and only the targets inside a window whose
  size follows Eq. 7 layer by layer; the prompt is encoded on its own (mixed attention, §3.1 Fig. 1).
  The masks come from :mod:`helpers.masks` and reach the model through :mod:`helpers.attention`.
- **Baselines and measurements:** left-to-right sampling with a KV cache and the same sampler
  (:func:`autoregressive_generate`), perplexity under a causal model, the ablation of Table 6,
  tokens/s (Fig. 5), target-length strategies (Eq. 5, Table 7) and recurrent segments (App. B).

Sizes live in :data:`SETTINGS`, one entry per profile.
"""
from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from . import metrics
from .checks import whole_number
from . import masks as M
from .masked_lm import SOURCE_STATES, EncoderMLM, MaskedLM, MNTPDecoder

REJECTION_ROUNDS = 64  # nucleus-sampling redraws before the sorting fallback
FULL_WINDOW = 1 << 20  # a window wider than any sequence: DSWA off, mixed attention kept
ABLATIONS = ("Ours", "w/o DSWA", "w/o LTD", "w/o ALL")
SMART_ROW = "Ours + SMART (update all)"
PROMPT_SOURCES = ("corpus", "writingprompts")
WRITINGPROMPTS_DATASET = "euclaise/writingprompts"


# --------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class DecodingSettings:
    """Every size notebook 05 uses. The ``paper`` entry holds OpenLTG's §5.1 values."""

    num_prompts: int  # Table 6 prompts
    target_length: int  # N, fixed length (§3.1 "Fixed Length")
    batch_size: int
    max_prompt_tokens: int
    # "mntp": the profile's decoder with notebook 02's MNTP adapter; otherwise a Hub encoder MLM id.
    masked_lm: str = "mntp"
    causal_lm: str | None = None  # AR baseline and perplexity judge; None means the profile's model
    prompts: str = "corpus"  # "corpus": first sentence of a held-out paragraph -> the rest; or "writingprompts"
    iterations: int = 8  # T (§5.1: 6 for ROC, 8 for the others)
    beta: float = 1.8  # β (§5.1: 1.6 ROC, 1.8 WP and WikiPlots, 1.5 OPINION)
    top_p: float = 0.9
    fixed_window: int = 64  # S_fix
    alpha_min: float = 0.125
    alpha_max: float = 0.75
    update_all: bool = False  # masked-only updates (Mask-Predict, OpenLTG code); True is SMART (§4.3)
    paper_dataset: str = "WP"  # the row of Tables 4 and 6 we compare with
    lr_n: int = 5  # LR-n: LR-2 for ROC, LR-5 for WP (§5.1)
    trace_length: int = 32  # Fig. 2 and 4 and the widget
    probe_position: int = 7  # the "randomly picked position" of Fig. 2's histogram and Fig. 4
    speed_lengths: tuple[int, ...] = (64, 128, 256)
    speed_iterations: tuple[int, ...] = (1, 2, 4, 8)
    speed_prompt_tokens: int = 16
    speed_repeats: int = 1
    length_train_prompts: int = 256  # Table 7: fit the length predictor
    length_test_prompts: int = 64
    seed: int = 0

    def decode_config(self, **changes) -> "DecodeConfig":
        """The paper's inference settings (LTD, DSWA, SMART) with these sizes."""
        config = DecodeConfig(iterations=self.iterations, beta=self.beta, top_p=self.top_p, fixed_window=self.fixed_window,
                              alpha_min=self.alpha_min, alpha_max=self.alpha_max, update_all=self.update_all)
        return replace(config, **changes)


SETTINGS = {
    "smoke": DecodingSettings(num_prompts=3, target_length=8, batch_size=3, max_prompt_tokens=8, iterations=4,
                              fixed_window=8, paper_dataset="ROC", lr_n=2, trace_length=8, probe_position=3,
                              speed_lengths=(8, 12), speed_iterations=(1, 4), speed_prompt_tokens=4, length_train_prompts=8,
                              length_test_prompts=4),
    "cpu": DecodingSettings(num_prompts=16, target_length=128, batch_size=8, max_prompt_tokens=32,
                            speed_lengths=(64, 128, 256), speed_repeats=2, length_train_prompts=256,
                            length_test_prompts=64),
    "gpu": DecodingSettings(num_prompts=200, target_length=140, batch_size=25, max_prompt_tokens=64,
                            prompts="writingprompts", speed_repeats=3, length_train_prompts=2000,
                            length_test_prompts=500),
    # §5.1: RoBERTa-base, T = 8, β = 1.8 (WP), top-p 0.9, α 0.125 / 0.75, S_fix 64; PPL under GPT-2.
    "paper": DecodingSettings(num_prompts=1000, target_length=140, batch_size=50, max_prompt_tokens=64,
                              masked_lm="FacebookAI/roberta-base", causal_lm="openai-community/gpt2",
                              prompts="writingprompts", speed_repeats=3, length_train_prompts=10000,
                              length_test_prompts=4000),
}


# --------------------------------------------------------------------------- checks

def check_iterations(iterations) -> int:
    return whole_number(iterations, "iterations", 1, "T, the number of mask-predict iterations")


def check_length(length, name: str = "length") -> int:
    return whole_number(length, name, 1, "the number of target tokens to generate")


def check_top_p(top_p) -> float:
    if not 0.0 < float(top_p) <= 1.0:
        raise ValueError(f"top_p={top_p!r} must lie in (0, 1]: the nucleus keeps the smallest set of tokens with mass >= top_p")
    return float(top_p)


def check_positive(value, name: str, what: str) -> float:
    if not float(value) > 0.0:
        raise ValueError(f"{name}={value!r} must be > 0 ({what})")
    return float(value)


# --------------------------------------------------------------------------- the schedule (Eq. 8, Mask-Predict)

def ltd_temperature(step: int, iterations: int, beta: float) -> float:
    """LTD, seed 002 §4.2 Eq. 8: ``T_t = β · (1 - t/T)`` at iteration t = 0..T-1 (always > 0)."""
    iterations = check_iterations(iterations)
    beta = check_positive(beta, "beta", "β, the LTD scale of Eq. 8")
    if int(step) != step or not 0 <= step < iterations:
        raise ValueError(f"step={step!r} must be an iteration index in 0..{iterations - 1}")
    return beta * (1.0 - step / iterations)


def remask_count(length: int, step: int, iterations: int) -> int:
    """Mask-Predict's schedule: after iteration t (0-based) re-mask ``n = ⌊N · (T - t - 1) / T⌋`` tokens.

    This is the issue's ``n = N(1 - t/T)`` with t counted from 1 after the iteration ends; it is N·(T-1)/T
    after the first iteration and 0 after the last.
    """
    length, iterations = check_length(length), check_iterations(iterations)
    if int(step) != step or not 0 <= step < iterations:
        raise ValueError(f"step={step!r} must be an iteration index in 0..{iterations - 1}")
    return length * (iterations - step - 1) // iterations


@dataclass(frozen=True)
class DecodeConfig:
    """One decoding setting. The defaults are the paper's (§5.1): T = 8, β = 1.8, top-p 0.9, LTD, DSWA.

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
    fixed_window: int = 64
    alpha_min: float = 0.125
    alpha_max: float = 0.75
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


def ablation_configs(base: DecodeConfig) -> dict[str, DecodeConfig]:
    """Table 6's rows: Ours (LTD + DSWA), w/o DSWA, w/o LTD, w/o ALL, all with ``base``'s update rule,
    and Ours with the other update rule (SMART's update-all, §4.3, when ``base`` updates masked positions only)."""
    rows = {"Ours": base, "w/o DSWA": replace(base, dswa=False), "w/o LTD": replace(base, ltd=False),
            "w/o ALL": replace(base, dswa=False, ltd=False)}
    if not base.update_all:
        rows[SMART_ROW] = replace(base, update_all=True)
    return rows


# --------------------------------------------------------------------------- sampling

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
    return kept / kept.sum(-1, keepdim=True)


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


def _check_prompts(prompts) -> list[torch.Tensor]:
    if isinstance(prompts, torch.Tensor):
        prompts = [prompts] if prompts.dim() == 1 else list(prompts)
    prompts = [torch.as_tensor(prompt, dtype=torch.long).flatten() for prompt in prompts]
    if not prompts:
        raise ValueError("prompts is empty; pass at least one prompt (a 1D tensor of token ids)")
    for index, prompt in enumerate(prompts):
        if prompt.numel() == 0:
            raise ValueError(f"prompts[{index}] is empty; each prompt needs at least one token")
    return prompts


def _check_fits(backend: MaskedLM, prompts: list[torch.Tensor], length: int) -> None:
    longest = max(prompt.numel() for prompt in prompts)
    if longest + length > backend.max_positions:
        raise ValueError(f"prompt of {longest} tokens + length={length} = {longest + length} exceeds the model's "
                         f"{backend.max_positions} positions; shorten the prompt or the target")


def left_padded(prompts: list[torch.Tensor], length: int, fill: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, P_max + length)`` ids with each prompt right-aligned before ``length`` copies of ``fill``, and the padding mask."""
    widest = max(prompt.numel() for prompt in prompts)
    ids = torch.full((len(prompts), widest + length), pad_id, dtype=torch.long)
    padding = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, widest - prompt.numel():widest] = prompt
        padding[row, widest - prompt.numel():] = 1
    ids[:, widest:] = fill
    return ids, padding


def _snapshot(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU copy that later in-place updates cannot change (``.cpu()`` alone aliases CPU tensors)."""
    return tensor.detach().to("cpu", copy=True)


def _generator(seed: int, device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(int(seed))


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
    """
    prompts = _check_prompts(prompts)
    length = check_length(length)
    _check_fits(backend, prompts, length)
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
    generator = _generator(seed, device)

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
    prompts = _check_prompts(prompts)
    _check_fits(backend, prompts, check_length(length))
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


def mask_predict_batched(backend: MaskedLM, prompts: list[torch.Tensor], length: int, config: DecodeConfig, *,
                         batch_size: int, seed: int = 0, desc: str = "mask-predict") -> list[torch.Tensor]:
    """:func:`mask_predict` over many prompts in batches, with a progress bar; one 1D tensor per prompt."""
    batch_size = whole_number(batch_size, "batch_size", 1, "prompts per batch")
    prompts = _check_prompts(prompts)
    out: list[torch.Tensor] = []
    for index in tqdm(range(0, len(prompts), batch_size), desc=desc):
        out.extend(mask_predict(backend, prompts[index:index + batch_size], length, config, seed=seed + index).tokens)
    return out


# --------------------------------------------------------------------------- the AR baseline

@torch.inference_mode()
def autoregressive_generate(model, prompts, length: int, *, temperature: float = 1.0, top_p: float = 0.9,
                            banned_ids: Sequence[int] = (), pad_id: int = 0, seed: int = 0) -> torch.Tensor:
    """Left-to-right sampling with a KV cache, using the same nucleus sampler as :func:`mask_predict`.

    Every prompt gets exactly ``length`` new tokens (the paper forces a fixed length, Table 1).
    Returns ``(B, length)`` ids.
    """
    prompts = _check_prompts(prompts)
    length = check_length(length)
    check_positive(temperature, "temperature", "the sampling temperature")
    check_top_p(top_p)
    limit = int(model.config.max_position_embeddings)
    longest = max(prompt.numel() for prompt in prompts)
    if longest + length > limit:
        raise ValueError(f"prompt of {longest} tokens + length={length} = {longest + length} exceeds the model's {limit} positions")
    device = next(model.parameters()).device
    ids, padding = left_padded(prompts, 0, pad_id, pad_id)
    ids, padding = ids.to(device), padding.to(device)
    positions = M.content_positions(padding)
    banned = torch.tensor(sorted(set(map(int, banned_ids))), dtype=torch.long, device=device)
    generator = _generator(seed, device)
    out = model(input_ids=ids, attention_mask=padding, position_ids=positions, use_cache=True, logits_to_keep=1)
    generated = []
    next_position = positions[:, -1:] + 1
    for step in range(length):
        logits = out.logits[:, -1].float()
        if banned.numel():
            logits[:, banned[banned < logits.shape[-1]]] = float("-inf")
        token, _ = sample_tokens(logits, temperature, top_p, generator)
        generated.append(token)
        if step == length - 1:
            break
        padding = torch.cat([padding, torch.ones_like(padding[:, :1])], dim=1)
        out = model(input_ids=token[:, None], attention_mask=padding, position_ids=next_position,
                    past_key_values=out.past_key_values, use_cache=True)
        next_position = next_position + 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return torch.stack(generated, dim=1).cpu()


def autoregressive_batched(model, prompts: list[torch.Tensor], length: int, *, batch_size: int, desc: str = "AR",
                           seed: int = 0, **kwargs) -> list[torch.Tensor]:
    """:func:`autoregressive_generate` over many prompts in batches, with a progress bar."""
    batch_size = whole_number(batch_size, "batch_size", 1, "prompts per batch")
    prompts = _check_prompts(prompts)
    out: list[torch.Tensor] = []
    for index in tqdm(range(0, len(prompts), batch_size), desc=desc):
        out.extend(autoregressive_generate(model, prompts[index:index + batch_size], length, seed=seed + index, **kwargs))
    return out


# --------------------------------------------------------------------------- evaluation (Table 6)

_WORDS = re.compile(r"\w+|[^\w\s]")


def words(text: str) -> list[str]:
    """Lower-cased words and punctuation marks: the units LR-n, Rep-n and Distinct-n count."""
    return _WORDS.findall(text.lower())


@torch.inference_mode()
def continuation_nll(model, tokenizer, prompts: Sequence[str], continuations: Sequence[str], *, batch_size: int = 8,
                     desc: str = "perplexity") -> tuple[float, int]:
    """Summed negative log-likelihood of each continuation given its prompt under a causal LM, and the token count.

    The LM head runs only at the positions that predict continuation tokens.
    """
    if len(prompts) != len(continuations):
        raise ValueError(f"prompts has {len(prompts)} texts but continuations has {len(continuations)}")
    batch_size = whole_number(batch_size, "batch_size", 1, "texts per batch")
    device = next(model.parameters()).device
    limit = int(model.config.max_position_embeddings)
    total, count = 0.0, 0
    body = model.get_decoder()
    head = model.get_output_embeddings()
    for index in tqdm(range(0, len(prompts), batch_size), desc=desc):
        pairs = []
        for prompt, continuation in zip(prompts[index:index + batch_size], continuations[index:index + batch_size]):
            source = tokenizer(prompt, add_special_tokens=False).input_ids
            target = tokenizer(" " + continuation.strip(), add_special_tokens=False).input_ids
            if not source:
                source = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
            pairs.append((source, target[:limit - len(source)]))
        width = max(len(s) + len(t) for s, t in pairs)
        ids = torch.full((len(pairs), width), tokenizer.pad_token_id or 0, dtype=torch.long)
        padding = torch.zeros_like(ids)
        targets = torch.full_like(ids, -100)
        for row, (source, target) in enumerate(pairs):
            ids[row, :len(source) + len(target)] = torch.tensor(source + target)
            padding[row, :len(source) + len(target)] = 1
            targets[row, len(source):len(source) + len(target)] = torch.tensor(target, dtype=torch.long)
        hidden = body(input_ids=ids.to(device), attention_mask=padding.to(device)).last_hidden_state
        rows, cols = (targets[:, 1:] != -100).nonzero(as_tuple=True)
        if rows.numel() == 0:  # every continuation in the batch was empty
            continue
        logits = head(hidden[rows.to(device), cols.to(device)]).float()
        gold = targets[:, 1:][rows, cols].to(device)
        total += float(torch.nn.functional.cross_entropy(logits, gold, reduction="sum"))
        count += int(gold.numel())
    return total, count


def generation_metrics(texts: Sequence[str], *, lr_n: int = 5) -> dict[str, float]:
    """LR-n, Rep-4 and Distinct-4 of a set of generations, in percent (seed 002 §5.1, Table 4 and 6)."""
    from . import metrics

    if not texts:
        raise ValueError("texts is empty; nothing to score")
    units = [words(text) for text in texts]
    return {f"LR-{lr_n}": 100 * metrics.lexical_repetition(units, n=lr_n, gram=4),
            "Rep-4": 100 * float(np.mean([metrics.rep_n(unit, 4) for unit in units])),
            "D-4": 100 * metrics.distinct_n(units, 4)}


def evaluate_generations(systems: dict[str, Sequence[str]], prompts: Sequence[str], judge, judge_tokenizer, *,
                         lr_n: int = 5, batch_size: int = 8):
    """Table 6 for our runs: LR-n, Rep-4, D-4 (percent) and perplexity under the causal ``judge``, one row per system."""
    import pandas as pd

    rows = {}
    for name, texts in systems.items():
        if len(texts) != len(prompts):
            raise ValueError(f"systems[{name!r}] has {len(texts)} texts but there are {len(prompts)} prompts")
        nll, count = continuation_nll(judge, judge_tokenizer, prompts, texts, batch_size=batch_size, desc=f"PPL {name}")
        if count == 0:
            raise ValueError(f"systems[{name!r}] holds only empty texts; there is nothing to score")
        rows[name] = {**generation_metrics(texts, lr_n=lr_n), "PPL": math.exp(nll / count)}
    return pd.DataFrame(rows).T


# The paper's numbers (seed 002). Table 6: Rep = LR-n (LR-2 ROC, LR-5 WP), Dist = D-4, PPL under GPT-2.
PAPER_TABLE6 = {
    "ROC": {"Ours": {"B-1": 33.22, "R-L": 18.22, "Rep": 3.28, "Dist": 68.93, "PPL": 53.00},
            "w/o DSWA": {"B-1": 32.12, "R-L": 17.67, "Rep": 3.71, "Dist": 68.53, "PPL": 48.87},
            "w/o LTD": {"B-1": 33.04, "R-L": 17.73, "Rep": 11.29, "Dist": 69.66, "PPL": 78.07},
            "w/o ALL": {"B-1": 31.86, "R-L": 16.96, "Rep": 14.49, "Dist": 67.30, "PPL": 67.75}},
    "WP": {"Ours": {"B-1": 32.80, "R-L": 12.97, "Rep": 0.73, "Dist": 86.70, "PPL": 85.88},
           "w/o DSWA": {"B-1": 29.37, "R-L": 12.31, "Rep": 0.90, "Dist": 86.07, "PPL": 86.95},
           "w/o LTD": {"B-1": 29.80, "R-L": 13.88, "Rep": 17.80, "Dist": 64.53, "PPL": 63.08},
           "w/o ALL": {"B-1": 12.95, "R-L": 6.60, "Rep": 90.58, "Dist": 32.15, "PPL": 17.69}},
}
# Table 4: the AR baseline (BART) and the references, same columns.
PAPER_TABLE4 = {
    "ROC": {"AR (BART)": {"Rep": 3.93, "Dist": 79.07, "PPL": 65.21, "Speedup": 1.0},
            "Ours": {"Rep": 3.28, "Dist": 68.93, "PPL": 53.00, "Speedup": 2.9},
            "Ground truth": {"Rep": 2.50, "Dist": 46.46, "PPL": 53.35}},
    "WP": {"AR (BART)": {"Rep": 0.73, "Dist": 90.38, "PPL": 88.74, "Speedup": 1.0},
           "Ours": {"Rep": 0.73, "Dist": 86.70, "PPL": 85.88, "Speedup": 6.4},
           "Ground truth": {"Rep": 0.45, "Dist": 49.23, "PPL": 55.39}},
}
# §6.1 / Fig. 5: tokens/s of mask-predict on an A100 at batch 1 and the speedup over BART.
PAPER_SPEED = {"ROC": (133, 391), "WP": (137, 882), "WikiPlots": (132, 1753), "speedup": (3.0, 13.0)}
# §3.3: function words hold 35-45% of the high-probability region at iteration 1 (the bad case of Fig. 2).
PAPER_FUNCTION_WORD_SHARE = (0.35, 0.45)


def ablation_with_paper(ours, paper_dataset: str, lr_n: int):
    """Our Table 6 next to the paper's rows for ``paper_dataset`` ("ROC" or "WP")."""
    import pandas as pd

    if paper_dataset not in PAPER_TABLE6:
        raise ValueError(f"paper_dataset={paper_dataset!r} must be one of {tuple(PAPER_TABLE6)}")
    paper = {**PAPER_TABLE6[paper_dataset], **{k: v for k, v in PAPER_TABLE4[paper_dataset].items() if k != "Ours"}}
    rows = {}
    for name in ours.index:
        reference = paper.get(name, paper.get("AR (BART)") if name.startswith("AR") else {})
        rows[name] = {f"LR-{lr_n} (ours)": ours.loc[name, f"LR-{lr_n}"], f"Rep (paper, {paper_dataset})": reference.get("Rep", np.nan),
                      "D-4 (ours)": ours.loc[name, "D-4"], f"Dist (paper, {paper_dataset})": reference.get("Dist", np.nan),
                      "PPL (ours)": ours.loc[name, "PPL"], f"PPL (paper, {paper_dataset})": reference.get("PPL", np.nan),
                      "Rep-4 (ours)": ours.loc[name, "Rep-4"]}
    return pd.DataFrame(rows).T


def describe_ablation(ours, lr_n: int, paper_dataset: str) -> str:
    """Table 6 in words, from the measured numbers: does removing LTD or DSWA raise repetition, as in the paper?"""
    paper = PAPER_TABLE6[paper_dataset]
    column = f"LR-{lr_n}"
    lines = []
    for ablation in ("w/o DSWA", "w/o LTD", "w/o ALL"):
        if ablation not in ours.index:
            continue
        ours_change = ours.loc[ablation, column] - ours.loc["Ours", column]
        paper_change = paper[ablation]["Rep"] - paper["Ours"]["Rep"]
        distinct_change = ours.loc[ablation, "D-4"] - ours.loc["Ours", "D-4"]
        lines.append(f"{ablation}: LR-{lr_n} {ours.loc['Ours', column]:.1f} -> {ours.loc[ablation, column]:.1f} "
                     f"({ours_change:+.1f} points; paper {paper_change:+.2f} on {paper_dataset}), "
                     f"D-4 {distinct_change:+.1f} points (paper {paper[ablation]['Dist'] - paper['Ours']['Dist']:+.2f}), "
                     f"PPL {ours.loc['Ours', 'PPL']:.1f} -> {ours.loc[ablation, 'PPL']:.1f} "
                     f"(paper {paper['Ours']['PPL']:.2f} -> {paper[ablation]['PPL']:.2f}).")
    return "\n".join(lines)


# --------------------------------------------------------------------------- Fig. 2 and Fig. 4 quantities

def is_function_word(text: str) -> bool:
    """Stop words (spaCy's English list) and tokens without a letter or digit (punctuation, spaces)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    stripped = text.strip().lower()
    return not any(ch.isalnum() for ch in stripped) or stripped in STOP_WORDS


def function_word_share(tokenizer, logits: torch.Tensor, *, temperature: float = 1.0, top_k: int = 50) -> float:
    """Share of the probability mass of the ``top_k`` candidates that falls on function words (seed 002 §3.3, Fig. 2)."""
    probs = torch.softmax(logits.float() / temperature, -1)
    values, ids = probs.topk(top_k)
    function = torch.tensor([is_function_word(tokenizer.decode([i])) for i in ids.tolist()])
    return float(values[function].sum() / values.sum())


def entropy(logits: torch.Tensor, temperature: float = 1.0) -> float:
    """Entropy (nats) of ``softmax(logits / temperature)``."""
    log_probs = torch.log_softmax(logits.float() / temperature, -1)
    probs = log_probs.exp()
    return float(-(probs * torch.where(probs > 0, log_probs, torch.zeros_like(log_probs))).sum())


def ltd_entropies(decoded: Decoded, row: int = 0) -> list[dict]:
    """Per iteration at the probe position: temperature, entropy with LTD and at T = 1 (Fig. 4 in numbers)."""
    if decoded.config.probe_position is None:
        raise ValueError("decoded has no probe logits; decode with DecodeConfig(probe_position=...)")
    return [{"step": it.step, "temperature": it.temperature, "entropy_ltd": entropy(it.probe_logits[row], it.temperature),
             "entropy_t1": entropy(it.probe_logits[row], 1.0)} for it in decoded.trace]


def describe_trace(decoded: Decoded, tokenizer, row: int = 0, top_k: int = 50) -> str:
    """Fig. 2 in words: the function-word share at iteration 1 against §3.3's 35-45%, and the output."""
    first = decoded.trace[0]
    share = function_word_share(tokenizer, first.probe_logits[row], temperature=1.0, top_k=top_k)
    low, high = PAPER_FUNCTION_WORD_SHARE
    verdict = "inside" if low <= share <= high else "above" if share > high else "below"
    text = tokenizer.decode(decoded.tokens[row], skip_special_tokens=True)
    return (f"At iteration 1, function words and punctuation hold {share:.0%} of the top-{top_k} probability mass at "
            f"target position {decoded.config.probe_position}; the paper reports {low:.0%}-{high:.0%} for its bad case "
            f"(ours is {verdict} that range). Final text: {text!r}")


def describe_ltd(entropies: list[dict]) -> str:
    """Fig. 4 in words: how much LTD widens the distribution first and narrows it last."""
    first, last = entropies[0], entropies[-1]
    return (f"At t=0, T_t={first['temperature']:.2f} raises the entropy at the probe position from {first['entropy_t1']:.2f} "
            f"to {first['entropy_ltd']:.2f} nats (flatter); at t={last['step']}, T_t={last['temperature']:.2f} lowers it from "
            f"{last['entropy_t1']:.2f} to {last['entropy_ltd']:.2f} nats (sharper), the shape of the paper's Fig. 4.")


def describe_speed(ratios, device_label: str) -> str:
    """Fig. 5 in words: the measured speed-ups against the paper's 3-13× and the issue's 5× bar at T = 8."""
    top = max(int(label.split("=")[1]) for label in ratios.index)
    long_lengths = [length for length in ratios.columns if length >= 128]
    parts = ", ".join(f"{ratios.loc[f'T={top}', length]:.2f}× at {length}" for length in ratios.columns)
    met = bool(long_lengths) and all(ratios.loc[f"T={top}", length] >= 5 for length in long_lengths)
    fastest = ratios.max().max()
    return (f"On {device_label}, mask-predict with T={top} runs at {parts} the AR tokens/s (best of any T: {fastest:.2f}×). "
            f"The paper measures {PAPER_SPEED['speedup'][0]:.0f}-{PAPER_SPEED['speedup'][1]:.0f}× on an A100. The 5× goal at "
            f"length >= 128 is {'met' if met else 'not met'} here.")


# --------------------------------------------------------------------------- speed (Fig. 5)

def decoding_speed(backend: MaskedLM, causal_model, prompt: torch.Tensor, lengths: Sequence[int],
                   iterations: Sequence[int], config: DecodeConfig = DecodeConfig(), *, repeats: int = 1,
                   seed: int = 0) -> list[dict]:
    """Tokens/s at batch 1 (Fig. 5): mask-predict for each T in ``iterations`` and AR with a KV cache, per target length.

    Each setting runs ``repeats`` times after one warm-up; the fastest run counts. The settings take turns in
    one call (:func:`helpers.metrics.interleaved_timings`), so the ratios compare like with like.
    """
    repeats = whole_number(repeats, "repeats", 1, "timed runs per setting")
    prompt = _check_prompts(prompt)[:1]
    for value in iterations:
        check_iterations(value)
    lengths = [check_length(value, "lengths") for value in lengths]
    _check_fits(backend, prompt, max(lengths))

    def job(length: int, steps: int):
        if steps == 0:
            return lambda run_seed: autoregressive_generate(causal_model, prompt, length, top_p=config.top_p,
                                                            banned_ids=backend.banned_ids, seed=run_seed)
        return lambda run_seed: mask_predict(backend, prompt, length, replace(config, iterations=steps), seed=run_seed)

    settings = [(length, steps) for length in lengths for steps in (0, *iterations)]
    synchronize = torch.cuda.synchronize if backend.device.type == "cuda" else None
    milliseconds = metrics.interleaved_timings({setting: job(*setting) for setting in settings}, [seed], rounds=repeats,
                                               best=True, synchronize=synchronize, progress=True)
    rows = []
    for (length, steps), elapsed in milliseconds.items():
        seconds = elapsed / 1000
        rows.append({"method": "AR" if steps == 0 else "mask-predict", "iterations": steps, "length": length,
                     "seconds": seconds, "tokens_per_s": length / seconds})
    return rows


def device_label(device: torch.device | str) -> str:
    """``"cpu (2 threads)"`` or the GPU's name, for speed plots."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type} ({torch.get_num_threads()} threads)"


def speed_ratios(rows: list[dict]):
    """Mask-predict tokens/s divided by AR tokens/s, one row per T, one column per length."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    ar = frame[frame.method == "AR"].set_index("length")["tokens_per_s"]
    nar = frame[frame.method == "mask-predict"]
    table = nar.pivot(index="iterations", columns="length", values="tokens_per_s")
    return table.div(ar, axis=1).rename(index=lambda t: f"T={t}")


# --------------------------------------------------------------------------- length (Eq. 5, Table 7)

@torch.inference_mode()
def prompt_features(backend: MaskedLM, prompts: list[torch.Tensor], *, batch_size: int = 16) -> np.ndarray:
    """Mean-pooled last-layer states of each prompt encoded on its own, Eq. 5's ``Mean-Pooling(H_src^L)``."""
    prompts = _check_prompts(prompts)
    features = []
    for index in tqdm(range(0, len(prompts), batch_size), desc="prompt features"):
        chunk = prompts[index:index + batch_size]
        ids, padding = left_padded(chunk, 0, backend.pad_id, backend.pad_id)
        ids, padding = ids.to(backend.device), padding.to(backend.device)
        hidden = backend.hidden_states(ids, padding, mask=M.bidirectional).float()
        weights = padding[..., None].float()
        features.append(((hidden * weights).sum(1) / weights.sum(1)).cpu().numpy())
    return np.concatenate(features)


@dataclass
class LengthPredictor:
    """Target-length prediction in the spirit of Eq. 5: a linear map of mean-pooled prompt states.

    Eq. 5 classifies over lengths; this regresses (ridge), then adds ``offset`` (the paper tunes an
    offset on validation, e.g. -20 for WP) and clips to ``[1, max_length]``.
    """

    max_length: int
    offset: int = 0
    ridge: float = 10.0
    model: object = field(default=None, repr=False)

    def fit(self, features: np.ndarray, lengths: Sequence[int]) -> "LengthPredictor":
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        features, lengths = np.asarray(features, dtype=float), np.asarray(lengths, dtype=float)
        if len(features) != len(lengths) or len(lengths) < 2:
            raise ValueError(f"features has {len(features)} rows and lengths {len(lengths)}; need the same number, at least 2")
        self.model = make_pipeline(StandardScaler(), Ridge(alpha=self.ridge)).fit(features, lengths)
        return self

    def predict(self, features: np.ndarray) -> np.ndarray:
        if self.model is None:
            raise ValueError("the LengthPredictor is not fitted; call fit(features, lengths) first")
        raw = self.model.predict(np.asarray(features, dtype=float)) + self.offset
        return np.clip(np.rint(raw), 1, self.max_length).astype(int)


def length_strategies(train_features, train_lengths, test_features, test_lengths, *, max_length: int) -> dict[str, dict]:
    """Table 7's strategies scored by length error on held-out prompts: fixed (the training mean) and predicted."""
    train_lengths, test_lengths = np.asarray(train_lengths), np.asarray(test_lengths)
    fixed = int(np.clip(round(float(train_lengths.mean())), 1, max_length))
    predicted = LengthPredictor(max_length=max_length).fit(train_features, train_lengths).predict(test_features)
    return {"Ground truth": {"mean length": float(test_lengths.mean()), "mean |error|": 0.0},
            "Fixed": {"mean length": float(fixed), "mean |error|": float(np.abs(test_lengths - fixed).mean())},
            "Prediction": {"mean length": float(predicted.mean()), "mean |error|": float(np.abs(test_lengths - predicted).mean())}}


# --------------------------------------------------------------------------- the notebook's experiments

def table6_generations(backend: MaskedLM, causal_model, causal_tokenizer, examples: Sequence[PromptExample],
                       settings: DecodingSettings, *, seed: int = 0) -> dict[str, list[str]]:
    """Every system of Table 6 on the same prompts: the four ablations (mask-predict), the AR baseline with the
    same sampler (T = 1, top-p), and the human continuation cut to the same length. Texts, one per prompt."""
    prompts = [backend.encode(example.prompt, settings.max_prompt_tokens) for example in examples]
    decode = lambda ids: [backend.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]
    systems = {name: decode(mask_predict_batched(backend, prompts, settings.target_length, config,
                                                 batch_size=settings.batch_size, seed=seed, desc=name))
               for name, config in ablation_configs(settings.decode_config()).items()}
    causal_prompts = [torch.tensor(causal_tokenizer(example.prompt, add_special_tokens=False).input_ids[-settings.max_prompt_tokens:])
                      for example in examples]
    ar = autoregressive_batched(causal_model, causal_prompts, settings.target_length, batch_size=settings.batch_size,
                                desc="AR", seed=seed, top_p=settings.top_p, banned_ids=causal_tokenizer.all_special_ids,
                                pad_id=causal_tokenizer.pad_token_id or 0)
    systems["AR (same model, KV cache)"] = [causal_tokenizer.decode(row, skip_special_tokens=True).strip() for row in ar]
    truth = [backend.tokenizer(example.continuation, add_special_tokens=False).input_ids[:settings.target_length]
             for example in examples]
    systems["Ground truth"] = decode(truth)
    return systems


def continuation_lengths(tokenizer, examples: Sequence[PromptExample], max_length: int) -> np.ndarray:
    """Each human continuation's length in tokens, capped at ``max_length`` (the length to predict)."""
    return np.array([min(len(tokenizer(example.continuation, add_special_tokens=False).input_ids), max_length)
                     for example in examples])


def length_experiment(backend: MaskedLM, train_examples: Sequence[PromptExample], test_examples: Sequence[PromptExample],
                      settings: DecodingSettings, *, max_length: int | None = None):
    """Table 7's strategies on held-out prompts: the true lengths, a fixed length (training mean) and Eq. 5's predictor."""
    import pandas as pd

    max_length = max_length or backend.max_positions - settings.max_prompt_tokens - 2
    encode = lambda examples: [backend.encode(example.prompt, settings.max_prompt_tokens) for example in examples]
    scores = length_strategies(prompt_features(backend, encode(train_examples), batch_size=settings.batch_size),
                               continuation_lengths(backend.tokenizer, train_examples, max_length),
                               prompt_features(backend, encode(test_examples), batch_size=settings.batch_size),
                               continuation_lengths(backend.tokenizer, test_examples, max_length), max_length=max_length)
    return pd.DataFrame(scores).T


# Table 7 (WP): target lengths of the strategies.
PAPER_TABLE7 = {"Ground truth": 157.42, "Fixed": 153.51, "Prediction": 155.55}


def describe_lengths(lengths) -> str:
    """Table 7 in words: the predictor's length error against the fixed length's."""
    fixed, predicted = lengths.loc["Fixed", "mean |error|"], lengths.loc["Prediction", "mean |error|"]
    truth = lengths.loc["Ground truth", "mean length"]
    return (f"Held-out continuations average {truth:.1f} tokens; the fixed length misses each by {fixed:.1f} tokens on average "
            f"and the predictor by {predicted:.1f} ({'better' if predicted < fixed else 'no better'}). The paper's WP means: "
            f"fixed {PAPER_TABLE7['Fixed']}, predicted {PAPER_TABLE7['Prediction']}, true {PAPER_TABLE7['Ground truth']} tokens, "
            f"and generation quality that differs little between them (Table 7).")


def summary_table(*, function_share: float, entropies: list[dict], table6, ratios, lengths, settings: DecodingSettings):
    """Every number the notebook reproduces, ours next to the paper's."""
    import pandas as pd

    dataset, column = settings.paper_dataset, f"LR-{settings.lr_n}"
    paper6 = PAPER_TABLE6[dataset]
    longest = max(ratios.columns)
    rows = [("Fig. 2: function words' share of the top-50 mass, iteration 1", f"{function_share:.0%}",
             f"{PAPER_FUNCTION_WORD_SHARE[0]:.0%}-{PAPER_FUNCTION_WORD_SHARE[1]:.0%} (bad case)"),
            ("Fig. 4: entropy at t=0 / at T=1 (LTD flattens)", f"{entropies[0]['entropy_ltd'] / entropies[0]['entropy_t1']:.2f}",
             "> 1 (flatter)"),
            ("Fig. 4: entropy at t=T-1 / at T=1 (LTD sharpens)",
             f"{entropies[-1]['entropy_ltd'] / entropies[-1]['entropy_t1']:.2f}", "< 1 (sharper)")]
    for name in ABLATIONS:
        rows.append((f"Table 6 {name}: {column} / D-4 / PPL",
                     f"{table6.loc[name, column]:.1f} / {table6.loc[name, 'D-4']:.1f} / {table6.loc[name, 'PPL']:.1f}",
                     f"{paper6[name]['Rep']:.2f} / {paper6[name]['Dist']:.2f} / {paper6[name]['PPL']:.2f} ({dataset})"))
    ar = PAPER_TABLE4[dataset]["AR (BART)"]
    ar_name = next(name for name in table6.index if name.startswith("AR"))
    rows.append((f"Table 4 AR baseline: {column} / D-4 / PPL",
                 f"{table6.loc[ar_name, column]:.1f} / {table6.loc[ar_name, 'D-4']:.1f} / {table6.loc[ar_name, 'PPL']:.1f}",
                 f"{ar['Rep']:.2f} / {ar['Dist']:.2f} / {ar['PPL']:.2f} (BART, {dataset})"))
    top = max(int(label.split("=")[1]) for label in ratios.index)
    rows.append((f"Fig. 5: speed-up of T={top} over AR at length {longest}", f"{ratios.loc[f'T={top}', longest]:.2f}×",
                 f"{PAPER_SPEED['speedup'][0]:.0f}-{PAPER_SPEED['speedup'][1]:.0f}× (A100, T=8)"))
    rows.append(("Table 7: mean |length error|, fixed vs predicted",
                 f"{lengths.loc['Fixed', 'mean |error|']:.1f} vs {lengths.loc['Prediction', 'mean |error|']:.1f} tokens",
                 f"lengths {PAPER_TABLE7['Fixed']} / {PAPER_TABLE7['Prediction']} vs {PAPER_TABLE7['Ground truth']} (WP)"))
    return pd.DataFrame(rows, columns=["quantity", "ours", "paper"]).set_index("quantity")


# --------------------------------------------------------------------------- prompts and models

@dataclass(frozen=True)
class PromptExample:
    """A prompt and its human continuation (the ground truth of Table 4's last row)."""

    prompt: str
    continuation: str


def story_prompts(source: str, corpus: str, split: str, limit: int, *, min_continuation_words: int = 8,
                  offset: int = 0) -> list[PromptExample]:
    """Prompts from held-out text.

    - ``"corpus"``: paragraphs of ``corpus`` (Austen offline, WikiText on the Hub) with at least two
      sentences; the first sentence is the prompt, the rest of the paragraph the continuation.
    - ``"writingprompts"``: WritingPrompts (Fan et al., 2018) from the Hub, as in seed 002 §3.2.
    """
    if source not in PROMPT_SOURCES:
        raise ValueError(f"source={source!r} must be one of {PROMPT_SOURCES}")
    limit = whole_number(limit, "limit", 1, "the number of prompts")
    examples: list[PromptExample] = []
    if source == "writingprompts":
        from datasets import load_dataset

        for record in load_dataset(WRITINGPROMPTS_DATASET, split=split):
            prompt = re.sub(r"^\s*\[\s*\w+\s*\]\s*", "", record["prompt"]).strip()
            story = record["story"].replace("<newline>", " ").strip()
            if prompt and len(story.split()) >= min_continuation_words:
                examples.append(PromptExample(prompt, story))
            if len(examples) >= offset + limit:
                break
        return examples[offset:offset + limit]
    from . import data

    for paragraph in data.load_paragraphs(corpus, split):
        sentences = data.split_sentences(paragraph.text)
        if len(sentences) < 2:
            continue
        rest = " ".join(sentences[1:])
        if len(rest.split()) >= min_continuation_words:
            examples.append(PromptExample(sentences[0], rest))
        if len(examples) >= offset + limit:
            break
    return examples[offset:offset + limit]


def load_masked_lm(settings: DecodingSettings, profile=None, *, progress: bool = True) -> MaskedLM:
    """The profile's masked LM: notebook 02's MNTP decoder ("mntp"), or a Hub encoder MLM by id."""
    from . import profiles, training

    profile = profile or profiles.current()
    if settings.masked_lm == "mntp":
        model, tokenizer, mask_id = training.load_or_train_mntp(profile, progress=progress)
        return MNTPDecoder(model, tokenizer, mask_id)
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from .device import get_device
    from .models import _resolve_dtype

    tokenizer = AutoTokenizer.from_pretrained(settings.masked_lm)
    model = AutoModelForMaskedLM.from_pretrained(settings.masked_lm, attn_implementation="sdpa",
                                                 dtype=_resolve_dtype(profile.dtype))
    return EncoderMLM(model.to(get_device()).eval(), tokenizer)


def load_causal_lm(settings: DecodingSettings, profile=None):
    """The AR baseline and perplexity judge: ``settings.causal_lm`` or the profile's own decoder (without the adapter)."""
    from . import models, profiles

    profile = profile or profiles.current()
    if settings.causal_lm:  # a small judge such as GPT-2: never quantised
        return models.load_model(settings.causal_lm, load_in_4bit=False)
    return models.load_model(profile.model_name)


def save_generations(run_dir, prompts: Sequence[str], systems: dict[str, Sequence[str]]) -> Path:
    """Write every system's texts to ``run_dir/generations.jsonl`` (one line per prompt), so tables can be redrawn."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "generations.jsonl"
    with open(path, "w") as handle:
        for index, prompt in enumerate(prompts):
            handle.write(json.dumps({"prompt": prompt, **{name: texts[index] for name, texts in systems.items()}}) + "\n")
    return path


def settings_table(settings: DecodingSettings):
    """The settings as a one-column table, for the notebook."""
    import pandas as pd

    return pd.Series({name: str(value) for name, value in asdict(settings).items()}, name="value").to_frame()
