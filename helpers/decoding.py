"""Mask-predict decoding with linear temperature decay (LTD) and dynamic sliding windows (DSWA); seed 002 (OpenLTG).

- **One masked-LM interface, two backends** (:mod:`helpers.masked_lm`): an encoder MLM (BERT, RoBERTa;
  output l predicts token l) or notebook 02's MNTP-adapted decoder (bidirectional; output l - 1
  predicts token l). :func:`mask_predict` does not care which one it gets.
- **Iterative decoding** (§3.1 "Model Inference", after Mask-Predict): N masked target tokens follow
  the prompt; each iteration samples every masked position with top-p at temperature
  ``T_t = β(1 - t/T)`` (LTD, §4.2 Eq. 8), then re-masks the ``n = N(T - t - 1)/T`` lowest-confidence
  tokens (iterations t = 0..T-1, so n reaches 0 after the last). Only masked positions are written
  and kept tokens keep their confidence (the released Mask-Predict and OpenLTG code);
  ``update_all`` resamples every target token at each step (SMART, §4.3). Every iteration is
  recorded in a :class:`Iteration`.
- **DSWA** (§4.1, Eq. 6-7): targets see the whole prompt and only the targets inside a window whose
  size follows Eq. 7 layer by layer; the prompt is a closed block that never sees a target (mixed
  attention, §3.1 Fig. 1), so it is computed once per decode with a KV cache. Targets attend the
  prompt's same-layer states, or (``source_states="last-layer"``) Eq. 3's last-layer states.
  The masks come from :mod:`helpers.masks` and reach the model through :mod:`helpers.attention`.
- **Baselines and measurements:** left-to-right sampling with a KV cache and the same sampler
  (:func:`autoregressive_generate`), perplexity under a causal model, Table 6 with B-1/R-L
  (sacrebleu, rouge-score) and bootstrap intervals over prompts, tokens/s (Fig. 5), target-length
  strategies (Eq. 5, Table 7) and recurrent segments (App. B).

Sizes live in :data:`SETTINGS`, one entry per profile.
"""
from __future__ import annotations

import functools
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

from . import metrics, store
from .checks import real_number, whole_number
from . import masks as M
from .masked_lm import SOURCE_STATES, EncoderMLM, MaskedLM, MNTPDecoder

REJECTION_ROUNDS = 64  # nucleus-sampling redraws before the sorting fallback
FULL_WINDOW = 1 << 20  # a window wider than any sequence: DSWA off, mixed attention kept
ABLATIONS = ("Ours", "w/o DSWA", "w/o LTD", "w/o ALL")
SMART_ROW = "Ours + SMART (update all)"
LAST_LAYER_ROW = "Ours, Eq. 3 prompt states (last layer)"
AR_ROW = "AR (KV cache; judge = generator)"
TRUTH_ROW = "Ground truth"
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
    speed_seeds: tuple[int, ...] = (0, 1, 2)  # timing inputs: the speed-up's interval is over these
    compare_source_states: bool = True  # Table 6 also decodes Ours with Eq. 3's last-layer prompt states
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
                              speed_lengths=(8, 12), speed_iterations=(1, 4), speed_prompt_tokens=4, speed_seeds=(0, 1),
                              length_train_prompts=8, length_test_prompts=4),
    # 32 prompts × 6 mask-predict rows × 8 passes fit the 8-minute budget on 2 CPU cores only at N = 64.
    "cpu": DecodingSettings(num_prompts=32, target_length=64, batch_size=16, max_prompt_tokens=32,
                            speed_lengths=(64, 128), speed_iterations=(1, 8), speed_repeats=1, length_train_prompts=256,
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
    return real_number(top_p, "top_p", low=0.0, high=1.0, low_open=True,
                       what="the nucleus keeps the smallest set of tokens with mass >= top_p")


def check_positive(value, name: str, what: str) -> float:
    return real_number(value, name, low=0.0, low_open=True, what=what)


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

    This is the issue's ``n = N(1 - t/T)`` with t counted from 1 after the iteration ends; it is N·(T-1)/T
    after the first iteration and 0 after the last.
    """
    length, iterations = check_length(length), check_iterations(iterations)
    step = check_step(step, iterations)
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
def continuation_nlls(model, tokenizer, prompts: Sequence[str], continuations: Sequence[str], *, batch_size: int = 8,
                      desc: str = "perplexity") -> list[tuple[float, int]]:
    """Per prompt: the summed negative log-likelihood of the continuation given the prompt under a causal LM, and
    its token count. The LM head runs only at the positions that predict continuation tokens."""
    if len(prompts) != len(continuations):
        raise ValueError(f"prompts has {len(prompts)} texts but continuations has {len(continuations)}")
    batch_size = whole_number(batch_size, "batch_size", 1, "texts per batch")
    device = next(model.parameters()).device
    limit = int(model.config.max_position_embeddings)
    body = model.get_decoder()
    head = model.get_output_embeddings()
    out: list[tuple[float, int]] = []
    for index in tqdm(range(0, len(prompts), batch_size), desc=desc):
        pairs = []
        for prompt, continuation in zip(prompts[index:index + batch_size], continuations[index:index + batch_size]):
            source = tokenizer(prompt, add_special_tokens=False).input_ids
            target = tokenizer(" " + continuation.strip(), add_special_tokens=False).input_ids if continuation.strip() else []
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
        rows, cols = (targets[:, 1:] != -100).nonzero(as_tuple=True)
        sums = torch.zeros(len(pairs), dtype=torch.float64)
        if rows.numel():
            hidden = body(input_ids=ids.to(device), attention_mask=padding.to(device)).last_hidden_state
            logits = head(hidden[rows.to(device), cols.to(device)]).float()
            gold = targets[:, 1:][rows, cols].to(device)
            losses = torch.nn.functional.cross_entropy(logits, gold, reduction="none").double().cpu()
            sums.index_add_(0, rows, losses)
        out.extend((float(total), len(target)) for total, (_, target) in zip(sums, pairs))
    return out


def continuation_nll(model, tokenizer, prompts: Sequence[str], continuations: Sequence[str], *, batch_size: int = 8,
                     desc: str = "perplexity") -> tuple[float, int]:
    """Summed negative log-likelihood of every continuation given its prompt, and the token count (:func:`continuation_nlls`)."""
    pairs = continuation_nlls(model, tokenizer, prompts, continuations, batch_size=batch_size, desc=desc)
    return sum(total for total, _ in pairs), sum(count for _, count in pairs)


def generation_metrics(texts: Sequence[str], *, lr_n: int = 5) -> dict[str, float]:
    """LR-n, Rep-4 and Distinct-4 of a set of generations, in percent (seed 002 §5.1, Table 4 and 6)."""
    if not texts:
        raise ValueError("texts is empty; nothing to score")
    units = [words(text) for text in texts]
    return {f"LR-{lr_n}": 100 * metrics.lexical_repetition(units, n=lr_n, gram=4),
            "Rep-4": 100 * float(np.mean([metrics.rep_n(unit, 4) for unit in units])),
            "D-4": 100 * metrics.distinct_n(units, 4)}


def bleu1_statistics(hypothesis: str, reference: str) -> tuple[int, int, int, int]:
    """sacrebleu's sufficient statistics for BLEU-1 of one text (13a tokens, lower-cased): clipped unigram
    matches, hypothesis unigrams, hypothesis length, reference length. Summed over texts they give corpus BLEU-1."""
    from sacrebleu.metrics import BLEU

    score = BLEU(max_ngram_order=1, lowercase=True).corpus_score([hypothesis], [[reference]])
    return int(score.counts[0]), int(score.totals[0]), int(score.sys_len), int(score.ref_len)


def corpus_bleu1(statistics: Sequence[tuple[int, int, int, int]]) -> float:
    """Corpus BLEU-1 (percent) from summed :func:`bleu1_statistics`: brevity penalty × clipped unigram precision."""
    matches, total, hypothesis_length, reference_length = (sum(column) for column in zip(*statistics))
    if total == 0:
        return 0.0
    brevity = 1.0 if hypothesis_length > reference_length else math.exp(1 - reference_length / max(hypothesis_length, 1))
    return 100 * brevity * matches / total


@functools.lru_cache(maxsize=1)
def _rouge_l_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"])


def rouge_l(hypothesis: str, reference: str) -> float:
    """ROUGE-L F1 (percent) of one text against its reference, from Google's ``rouge-score``."""
    return 100 * _rouge_l_scorer().score(reference, hypothesis)["rougeL"].fmeasure


@dataclass
class Table6Scores:
    """Table 6 with error bars: each cell's value, its 95% bootstrap interval over prompts, and the per-prompt
    quantities behind it (for paired comparisons). ``values``/``low``/``high`` are systems × metrics tables."""

    values: object
    low: object
    high: object
    per_prompt: dict
    n: int
    lr_n: int
    resamples: int

    def cell(self, system: str, metric: str) -> str:
        return (f"{self.values.loc[system, metric]:.1f} [{self.low.loc[system, metric]:.1f}, "
                f"{self.high.loc[system, metric]:.1f}]")

    def display(self):
        """One string per cell, ``value [low, high]``."""
        return self.values.apply(lambda column: [self.cell(system, column.name) if np.isfinite(self.values.loc[system, column.name])
                                                 else "—" for system in self.values.index])


def _table6_statistics(lr_n: int) -> dict:
    """Each metric as a statistic of a list of per-prompt records (so the bootstrap resamples prompts)."""
    return {"B-1": lambda sample: corpus_bleu1([record["bleu1"] for record in sample]),
            "R-L": lambda sample: float(np.mean([record["rouge_l"] for record in sample])),
            f"LR-{lr_n}": lambda sample: 100 * float(np.mean([record["lr"] for record in sample])),
            "D-4": lambda sample: 100 * float(np.mean([record["distinct4"] for record in sample])),
            "PPL": lambda sample: math.exp(sum(r["nll"] for r in sample) / max(sum(r["tokens"] for r in sample), 1))}


def evaluate_generations(systems: dict[str, Sequence[str]], prompts: Sequence[str], judge, judge_tokenizer, *,
                         references: Sequence[str], lr_n: int = 5, batch_size: int = 8, resamples: int = 1000,
                         seed: int = 0) -> Table6Scores:
    """Table 6 for our runs, one row per system: B-1 (corpus BLEU-1, sacrebleu) and R-L (ROUGE-L F1, rouge-score)
    against ``references`` (the human continuations), LR-n, D-4 (percent) and the perplexity of the continuation
    given the prompt under the causal ``judge``. Every cell gets a 95% percentile-bootstrap interval over prompts
    (:func:`helpers.metrics.bootstrap_interval`, ``resamples`` draws). D-4 is each text's distinct 4-grams over its
    4-grams, averaged over prompts (= 100 - MAGNET's Rep-4): the corpus-level ratio changes with the number of
    texts, so resampling prompts (duplicates included) would bias its interval. The references themselves
    ("Ground truth") get no B-1/R-L."""
    import pandas as pd

    if len(references) != len(prompts):
        raise ValueError(f"references has {len(references)} texts but there are {len(prompts)} prompts")
    statistics = _table6_statistics(lr_n)
    per_prompt, values, low, high = {}, {}, {}, {}
    for name, texts in systems.items():
        if len(texts) != len(prompts):
            raise ValueError(f"systems[{name!r}] has {len(texts)} texts but there are {len(prompts)} prompts")
        nlls = continuation_nlls(judge, judge_tokenizer, prompts, texts, batch_size=batch_size, desc=f"PPL {name}")
        if sum(count for _, count in nlls) == 0:
            raise ValueError(f"systems[{name!r}] holds only empty texts; there is nothing to score")
        is_reference = list(texts) == list(references)
        records = []
        for text, reference, (nll, count) in zip(texts, references, nlls):
            units = words(text)
            records.append({"bleu1": bleu1_statistics(text, reference), "rouge_l": rouge_l(text, reference),
                            "lr": metrics.lexical_repetition([units], n=lr_n, gram=4),
                            "distinct4": metrics.distinct_n([units], 4), "nll": nll, "tokens": count})
        per_prompt[name] = records
        values[name], low[name], high[name] = {}, {}, {}
        for metric, statistic in statistics.items():
            if is_reference and metric in ("B-1", "R-L"):
                values[name][metric] = low[name][metric] = high[name][metric] = float("nan")
                continue
            values[name][metric], low[name][metric], high[name][metric] = metrics.bootstrap_interval(
                records, statistic, resamples=resamples, seed=seed)
    frame = lambda table: pd.DataFrame(table).T
    return Table6Scores(frame(values), frame(low), frame(high), per_prompt, len(prompts), lr_n, resamples)


def paired_metric_difference(scores: Table6Scores, first: str, second: str, metric: str, *, seed: int = 0):
    """``(value, low, high)``: ``metric(first) - metric(second)`` over the same prompts, with a paired bootstrap
    (each resample draws the same prompts for both systems)."""
    statistic = _table6_statistics(scores.lr_n)[metric]
    pairs = list(zip(scores.per_prompt[first], scores.per_prompt[second]))
    return metrics.bootstrap_interval(pairs, lambda sample: statistic([a for a, _ in sample]) - statistic([b for _, b in sample]),
                                      resamples=scores.resamples, seed=seed)


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


def ablation_with_paper(scores: Table6Scores, paper_dataset: str):
    """Our Table 6 (each cell ``value [95% interval]``) next to the paper's rows for ``paper_dataset`` ("ROC" or "WP")."""
    import pandas as pd

    if paper_dataset not in PAPER_TABLE6:
        raise ValueError(f"paper_dataset={paper_dataset!r} must be one of {tuple(PAPER_TABLE6)}")
    paper = {**PAPER_TABLE6[paper_dataset], **{k: v for k, v in PAPER_TABLE4[paper_dataset].items() if k != "Ours"}}
    ours = scores.display()
    column = f"LR-{scores.lr_n}"
    rows = {}
    for name in ours.index:
        reference = paper.get(name, paper.get("AR (BART)") if name.startswith("AR") else {})
        row = {}
        for metric, theirs in (("B-1", "B-1"), ("R-L", "R-L"), (column, "Rep"), ("D-4", "Dist"), ("PPL", "PPL")):
            row[f"{metric} (ours)"] = ours.loc[name, metric]
            row[f"{theirs} (paper)"] = reference.get(theirs, np.nan)
        rows[name] = row
    return pd.DataFrame(rows).T


def describe_ablation(scores: Table6Scores, paper_dataset: str) -> str:
    """Table 6 in words, from the measured numbers: does removing LTD or DSWA raise repetition, as in the paper?
    Each change is a paired bootstrap over prompts (95%)."""
    paper = PAPER_TABLE6[paper_dataset]
    column = f"LR-{scores.lr_n}"
    values = scores.values
    lines = []
    for ablation in ("w/o DSWA", "w/o LTD", "w/o ALL", SMART_ROW, LAST_LAYER_ROW):
        if ablation not in values.index:
            continue
        change, low, high = paired_metric_difference(scores, ablation, "Ours", column)
        distinct, d_low, d_high = paired_metric_difference(scores, ablation, "Ours", "D-4")
        paper_note = (f"; paper {paper[ablation]['Rep'] - paper['Ours']['Rep']:+.2f} on {paper_dataset}"
                      if ablation in paper else "")
        lines.append(f"{ablation}: {column} {values.loc['Ours', column]:.1f} -> {values.loc[ablation, column]:.1f} "
                     f"({change:+.1f} [{low:+.1f}, {high:+.1f}]{paper_note}), D-4 {distinct:+.1f} [{d_low:+.1f}, {d_high:+.1f}], "
                     f"PPL {values.loc['Ours', 'PPL']:.1f} -> {values.loc[ablation, 'PPL']:.1f}.")
    return "\n".join(lines)


def describe_self_scoring(scores: Table6Scores) -> str:
    """The AR row's perplexity comes from the model that sampled it (the only causal LM offline): how it compares with
    the human text under the same judge, next to the paper's AR/human ratio under an independent judge (GPT-2)."""
    ar, truth = scores.values.loc[AR_ROW, "PPL"], scores.values.loc[TRUTH_ROW, "PPL"]
    paper = PAPER_TABLE4["WP"]
    paper_ratio = paper["AR (BART)"]["PPL"] / paper["Ground truth"]["PPL"]
    return (f"Self-scoring: the AR text was sampled from the judge itself, so its PPL ({ar:.1f}) is flattered: under its own "
            f"generator the AR text scores {ar / truth:.2f}× the human continuations' PPL ({truth:.1f}); in the paper, BART's "
            f"text under an independent judge (GPT-2) scores {paper_ratio:.2f}× the human text's (WP). The mask-predict rows are "
            f"sampled by the MNTP adapter and scored by the base model without it: a different model, though one that shares "
            f"its base weights. Read the AR row's PPL as a lower bound, not as a comparison.")


# --------------------------------------------------------------------------- Fig. 2 and Fig. 4 quantities

def is_function_word(text: str) -> bool:
    """Stop words (spaCy's English list) and tokens without a letter or digit (punctuation, spaces)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    stripped = text.strip().lower()
    return not any(ch.isalnum() for ch in stripped) or stripped in STOP_WORDS


def function_word_share(tokenizer, logits: torch.Tensor, *, temperature: float = 1.0, top_k: int = 50) -> float:
    """Share of the probability mass of the ``top_k`` candidates that falls on function words (seed 002 §3.3, Fig. 2)."""
    temperature = check_positive(temperature, "temperature", "the softmax temperature")
    whole_number(top_k, "top_k")
    probs = torch.softmax(logits.float() / temperature, -1)
    values, ids = probs.topk(top_k)
    function = torch.tensor([is_function_word(tokenizer.decode([i])) for i in ids.tolist()])
    return float(values[function].sum() / values.sum())


def entropy(logits: torch.Tensor, temperature: float = 1.0) -> float:
    """Entropy (nats) of ``softmax(logits / temperature)``."""
    temperature = check_positive(temperature, "temperature", "the softmax temperature")
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
                   seeds: Sequence[int] = (0,), extra: dict[str, DecodeConfig] | None = None) -> list[dict]:
    """Tokens/s at batch 1 (Fig. 5): mask-predict for each T in ``iterations`` and AR with a KV cache, per target length.

    Every setting runs once per sampling seed in ``seeds``, ``repeats`` times after one warm-up, and the fastest
    repeat counts. The settings take turns in one call (:func:`helpers.metrics.interleaved_timings`), so the
    ratios compare like with like. ``extra`` adds named mask-predict variants at T = ``config.iterations``
    (e.g. the prompt recomputed every iteration). One row per setting and seed.
    """
    repeats = whole_number(repeats, "repeats", 1, "timed runs per setting")
    prompt = _check_prompts(prompt)[:1]
    for value in iterations:
        check_iterations(value)
    lengths = [check_length(value, "lengths") for value in lengths]
    _check_fits(backend, prompt, max(lengths))
    variants = {"mask-predict": None, **(extra or {})}

    def job(length: int, steps: int, variant: str):
        if steps == 0:
            return lambda run_seed: autoregressive_generate(causal_model, prompt, length, top_p=config.top_p,
                                                            banned_ids=backend.banned_ids, seed=run_seed)
        chosen = replace(variants[variant] or config, iterations=steps)
        return lambda run_seed: mask_predict(backend, prompt, length, chosen, seed=run_seed)

    settings = [(length, 0, "AR") for length in lengths]
    settings += [(length, steps, "mask-predict") for length in lengths for steps in iterations]
    settings += [(length, config.iterations, name) for length in lengths for name in variants if name != "mask-predict"]
    synchronize = torch.cuda.synchronize if backend.device.type == "cuda" else None
    milliseconds = metrics.interleaved_timings({setting: job(*setting) for setting in settings}, list(seeds), rounds=repeats,
                                               best=True, synchronize=synchronize, progress=True, per_input=True)
    rows = []
    for (length, steps, variant), per_seed in milliseconds.items():
        for seed, elapsed in zip(seeds, per_seed):
            seconds = elapsed / 1000
            rows.append({"method": variant, "iterations": steps, "length": length, "seed": seed,
                         "seconds": seconds, "tokens_per_s": length / seconds})
    return rows


def device_label(device: torch.device | str) -> str:
    """``"cpu (2 threads)"`` or the GPU's name, for speed plots."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type} ({torch.get_num_threads()} threads)"


def speed_ratios(rows: list[dict], method: str = "mask-predict"):
    """``method``'s tokens/s divided by AR tokens/s at the same length and seed, median over seeds: one row per T,
    one column per length."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if "seed" not in frame:
        frame["seed"] = 0
    ar = frame[frame.method == "AR"].set_index(["length", "seed"])["tokens_per_s"]
    nar = frame[frame.method == method].set_index(["length", "seed"])
    nar = nar.assign(ratio=nar["tokens_per_s"] / ar.reindex(nar.index).values).reset_index()
    table = nar.groupby(["iterations", "length"])["ratio"].median().unstack("length")
    return table.rename(index=lambda t: f"T={t}")


def speed_ratio_samples(rows: list[dict], iterations: int, length: int, method: str = "mask-predict") -> list[float]:
    """Per seed, ``method``'s tokens/s at (T, length) over AR's at the same length: the samples behind an interval."""
    by = {(row["method"], row["iterations"], row["length"], row.get("seed", 0)): row["tokens_per_s"] for row in rows}
    seeds = sorted({key[3] for key in by if key[0] == "AR" and key[2] == length})
    return [by[(method, iterations, length, seed)] / by[("AR", 0, length, seed)] for seed in seeds]


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


RIDGE_ALPHAS = tuple(10.0 ** power for power in range(-2, 6))  # the grid the length predictor's α is chosen from


@dataclass
class LengthPredictor:
    """Target-length prediction in the spirit of Eq. 5: a linear map of mean-pooled prompt states.

    Eq. 5 classifies over lengths; this regresses (ridge on standardised features, α chosen by 5-fold
    cross-validation over :data:`RIDGE_ALPHAS` unless ``ridge`` is given), then adds ``offset`` (the paper
    tunes an offset on validation, e.g. -20 for WP) and clips to ``[1, max_length]``.
    """

    max_length: int
    offset: int = 0
    ridge: float | None = None
    model: object = field(default=None, repr=False)

    def fit(self, features: np.ndarray, lengths: Sequence[int]) -> "LengthPredictor":
        from sklearn.linear_model import Ridge, RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        features, lengths = np.asarray(features, dtype=float), np.asarray(lengths, dtype=float)
        if len(features) != len(lengths) or len(lengths) < 2:
            raise ValueError(f"features has {len(features)} rows and lengths {len(lengths)}; need the same number, at least 2")
        if self.ridge is None:
            folds = min(5, len(lengths))
            regressor = RidgeCV(alphas=RIDGE_ALPHAS, cv=folds if folds >= 2 else None, scoring="neg_mean_absolute_error")
        else:
            regressor = Ridge(alpha=self.ridge)
        self.model = make_pipeline(StandardScaler(), regressor).fit(features, lengths)
        return self

    @property
    def alpha(self) -> float:
        regressor = self.model[-1]
        return float(getattr(regressor, "alpha_", getattr(regressor, "alpha", float("nan"))))

    def predict(self, features: np.ndarray) -> np.ndarray:
        if self.model is None:
            raise ValueError("the LengthPredictor is not fitted; call fit(features, lengths) first")
        raw = self.model.predict(np.asarray(features, dtype=float)) + self.offset
        return np.clip(np.rint(raw), 1, self.max_length).astype(int)


@dataclass
class LengthScores:
    """Table 7 scored by length error on held-out prompts: per strategy the mean length, the mean |error| and its
    bootstrap interval, the per-prompt errors, and the cross-validated α."""

    table: object
    errors: dict
    alpha: float
    train_error: float
    n: int


def length_strategies(train_features, train_lengths, test_features, test_lengths, *, max_length: int,
                      resamples: int = 1000, seed: int = 0) -> LengthScores:
    """Table 7's strategies scored by length error on held-out prompts: a fixed length (the training median, which
    minimises the mean absolute error on the training set) and the cross-validated predictor."""
    import pandas as pd

    train_lengths, test_lengths = np.asarray(train_lengths), np.asarray(test_lengths)
    fixed = int(np.clip(round(float(np.median(train_lengths))), 1, max_length))
    predictor = LengthPredictor(max_length=max_length).fit(train_features, train_lengths)
    predicted = predictor.predict(test_features)
    errors = {"Fixed": np.abs(test_lengths - fixed).astype(float), "Prediction": np.abs(test_lengths - predicted).astype(float)}
    rows = {"Ground truth": {"mean length": float(test_lengths.mean()), "mean |error|": 0.0, "low": 0.0, "high": 0.0}}
    for name, lengths in (("Fixed", np.full_like(test_lengths, fixed)), ("Prediction", predicted)):
        value, low, high = metrics.bootstrap_interval(errors[name], resamples=resamples, seed=seed)
        rows[name] = {"mean length": float(np.mean(lengths)), "mean |error|": value, "low": low, "high": high}
    train_error = float(np.abs(train_lengths - predictor.predict(train_features)).mean())
    return LengthScores(pd.DataFrame(rows).T, errors, predictor.alpha, train_error, len(test_lengths))


# --------------------------------------------------------------------------- the notebook's experiments

def table6_generations(backend: MaskedLM, causal_model, causal_tokenizer, examples: Sequence[PromptExample],
                       settings: DecodingSettings, *, seed: int = 0) -> dict[str, list[str]]:
    """Every system of Table 6 on the same prompts, texts one per prompt: the four ablations and Ours with SMART's
    update-all (mask-predict), Ours with Eq. 3's last-layer prompt states (when ``settings.compare_source_states``),
    the AR baseline with the same sampler (T = 1, top-p, KV cache) and the human continuation cut to the same length."""
    prompts = [backend.encode(example.prompt, settings.max_prompt_tokens) for example in examples]
    decode = lambda ids: [backend.tokenizer.decode(row, skip_special_tokens=True).strip() for row in ids]
    configs = ablation_configs(settings.decode_config())
    if settings.compare_source_states:
        configs[LAST_LAYER_ROW] = replace(configs["Ours"], source_states="last-layer")
    systems = {name: decode(mask_predict_batched(backend, prompts, settings.target_length, config,
                                                 batch_size=settings.batch_size, seed=seed, desc=name))
               for name, config in configs.items()}
    causal_prompts = [torch.tensor(causal_tokenizer(example.prompt, add_special_tokens=False).input_ids[-settings.max_prompt_tokens:])
                      for example in examples]
    ar = autoregressive_batched(causal_model, causal_prompts, settings.target_length, batch_size=settings.batch_size,
                                desc="AR", seed=seed, top_p=settings.top_p, banned_ids=causal_tokenizer.all_special_ids,
                                pad_id=causal_tokenizer.pad_token_id or 0)
    systems[AR_ROW] = [causal_tokenizer.decode(row, skip_special_tokens=True).strip() for row in ar]
    truth = [backend.tokenizer(example.continuation, add_special_tokens=False).input_ids[:settings.target_length]
             for example in examples]
    systems[TRUTH_ROW] = decode(truth)
    return systems


def continuation_lengths(tokenizer, examples: Sequence[PromptExample], max_length: int) -> np.ndarray:
    """Each human continuation's length in tokens, capped at ``max_length`` (the length to predict)."""
    return np.array([min(len(tokenizer(example.continuation, add_special_tokens=False).input_ids), max_length)
                     for example in examples])


def length_experiment(backend: MaskedLM, train_examples: Sequence[PromptExample], test_examples: Sequence[PromptExample],
                      settings: DecodingSettings, *, max_length: int | None = None):
    """Table 7's strategies on held-out prompts: the true lengths, a fixed length (training median) and Eq. 5's
    predictor (ridge, α cross-validated), scored by length error with bootstrap intervals (:class:`LengthScores`)."""
    max_length = max_length or backend.max_positions - settings.max_prompt_tokens - 2
    encode = lambda examples: [backend.encode(example.prompt, settings.max_prompt_tokens) for example in examples]
    return length_strategies(prompt_features(backend, encode(train_examples), batch_size=settings.batch_size),
                             continuation_lengths(backend.tokenizer, train_examples, max_length),
                             prompt_features(backend, encode(test_examples), batch_size=settings.batch_size),
                             continuation_lengths(backend.tokenizer, test_examples, max_length), max_length=max_length)


# Table 7 (WP): target lengths of the strategies.
PAPER_TABLE7 = {"Ground truth": 157.42, "Fixed": 153.51, "Prediction": 155.55}


def describe_lengths(lengths: LengthScores) -> str:
    """Table 7 in words: the predictor's length error against the fixed length's, and how this differs from the paper."""
    table = lengths.table
    fixed, predicted = table.loc["Fixed"], table.loc["Prediction"]
    difference, low, high = metrics.paired_difference_interval(lengths.errors["Prediction"], lengths.errors["Fixed"])
    return (f"Held-out continuations average {table.loc['Ground truth', 'mean length']:.1f} tokens (n = {lengths.n}). The fixed "
            f"length ({fixed['mean length']:.0f}, the training median) misses each by {fixed['mean |error|']:.1f} "
            f"[{fixed['low']:.1f}, {fixed['high']:.1f}] tokens on average; the predictor (ridge α = {lengths.alpha:g} by 5-fold "
            f"cross-validation; training error {lengths.train_error:.1f}) by {predicted['mean |error|']:.1f} "
            f"[{predicted['low']:.1f}, {predicted['high']:.1f}]; predictor minus fixed: {difference:+.1f} [{low:+.1f}, {high:+.1f}] "
            f"(paired bootstrap over prompts). The paper scores the strategies by the quality of the generations they lead to "
            f"(Table 7: B-1, R-L, LR-n, D-4, PPL barely move; lengths fixed {PAPER_TABLE7['Fixed']}, predicted "
            f"{PAPER_TABLE7['Prediction']}, true {PAPER_TABLE7['Ground truth']}); we score only how close the length is, "
            f"which is what the predictor is for, but says nothing about text quality.")


def notebook_claims(*, function_shares: Sequence[float], entropies: list[dict], table6: Table6Scores, speed_rows: list[dict],
                    lengths: LengthScores, settings: DecodingSettings, speed_device: str) -> list:
    """Notebook 05's ledger rows (:mod:`helpers.claims`): Fig. 2's function-word share, Fig. 4's LTD, Table 6's three
    directions and SMART (paired bootstrap over prompts), Fig. 5's speed-up (over timing seeds), Table 7."""
    from .claims import EXACT, Claim, verdict_for_difference

    column, dataset = f"LR-{settings.lr_n}", settings.paper_dataset
    paper = PAPER_TABLE6[dataset]
    n = table6.n
    method = f"paired bootstrap over {n} prompts"
    rows = []
    share, low, high = metrics.bootstrap_interval(list(function_shares))
    lo, hi = PAPER_FUNCTION_WORD_SHARE
    rows.append(Claim(notebook="05", paper="002", where="§3.3, Fig. 2",
                      claim="at iteration 1, function words and punctuation dominate the high-probability region (35-45% of the "
                            "top-50 mass in the bad case)",
                      paper_value=f"{lo:.0%}-{hi:.0%}", ours=f"{share:.0%} (mean over prompts, at the probe position)",
                      low=low, high=high, method=f"bootstrap over {len(function_shares)} prompts", n=len(function_shares),
                      verdict="reproduced" if lo <= low and high <= hi else "inconclusive",
                      figure="figures/05_ltd_trace.png"))
    first, last = entropies[0], entropies[-1]
    flattens = first["entropy_ltd"] > first["entropy_t1"] and last["entropy_ltd"] < last["entropy_t1"]
    rows.append(Claim(notebook="05", paper="002", where="§4.2, Eq. 8, Fig. 4",
                      claim="LTD flattens the distribution in the first iterations and sharpens it in the last",
                      paper_value="flat at t = 0, peaked at t = T-1",
                      ours=f"entropy ×{first['entropy_ltd'] / first['entropy_t1']:.2f} at t = 0, "
                           f"×{last['entropy_ltd'] / last['entropy_t1']:.2f} at t = {last['step']}",
                      low=None, high=None, method=EXACT, n=None, verdict="reproduced" if flattens else "inconclusive",
                      figure="figures/05_ltd_distribution.png"))
    directions = [("w/o LTD", "Ours", "§5.3, Table 6: removing LTD raises repetition"),
                  ("w/o DSWA", "Ours", "§5.3, Table 6: removing DSWA raises repetition")]
    ablations = [name for name in ABLATIONS if name != "w/o ALL"]
    runner_up = max(ablations, key=lambda name: table6.values.loc[name, column])
    directions.append(("w/o ALL", runner_up, f"§5.3, Table 6: without both, repetition is the worst of the four rows "
                                             f"(against the next worst, {runner_up})"))
    for worse, better, claim in directions:
        value, low, high = paired_metric_difference(table6, worse, better, column)
        paper_gap = paper[worse]["Rep"] - paper[better]["Rep"]
        rows.append(Claim(notebook="05", paper="002", where="§5.3, Table 6", claim=claim.split(": ", 1)[1],
                          paper_value=f"{column} {paper[worse]['Rep']:.2f} vs {paper[better]['Rep']:.2f} ({dataset}, {paper_gap:+.2f})",
                          ours=f"{column} {table6.values.loc[worse, column]:.1f} vs {table6.values.loc[better, column]:.1f} "
                               f"({value:+.1f} points)",
                          low=low, high=high, method=method, n=n, verdict=verdict_for_difference(low, high, paper_sign=1),
                          figure="figures/05_ablation.png", quantity=f"{column}({worse}) - {column}({better})"))
    if SMART_ROW in table6.values.index:
        value, low, high = paired_metric_difference(table6, SMART_ROW, "Ours", column)
        rows.append(Claim(notebook="05", paper="002", where="§4.3 (SMART)",
                          claim="updating every target token each iteration (SMART) avoids the degeneration of refining "
                                "only the low-confidence tokens",
                          paper_value="less repetition with update-all", ours=f"{column} {table6.values.loc[SMART_ROW, column]:.1f} "
                          f"(update all) vs {table6.values.loc['Ours', column]:.1f} (masked only), {value:+.1f} points",
                          low=low, high=high, method=method, n=n, verdict=verdict_for_difference(low, high, paper_sign=-1),
                          figure="figures/05_ablation.png", quantity=f"{column}(update all) - {column}(masked only)"))
    top, longest = max(settings.speed_iterations), max(settings.speed_lengths)
    samples = speed_ratio_samples(speed_rows, top, longest)
    ratio, low, high = metrics.seed_interval(samples)
    if low is None:
        low = high = ratio
    rows.append(Claim(notebook="05", paper="002", where="§6.1, Fig. 5",
                      claim=f"mask-predict (T = {top}) generates faster than AR with a KV cache at batch 1",
                      paper_value=f"{PAPER_SPEED['speedup'][0]:.0f}-{PAPER_SPEED['speedup'][1]:.0f}× (A100, T = 8)",
                      ours=f"{ratio:.2f}× at N = {longest} on {speed_device}",
                      low=low, high=high, method=f"t over {len(samples)} timing seeds", n=len(samples),
                      verdict="reproduced" if low > 1 else "inconclusive", figure="figures/05_speed.png"))
    difference, low, high = metrics.paired_difference_interval(lengths.errors["Prediction"], lengths.errors["Fixed"])
    rows.append(Claim(notebook="05", paper="002", where="§6.2, Table 7",
                      claim="the length predictor lands closer to the true length than the fixed length",
                      paper_value=f"{PAPER_TABLE7['Prediction']} (predicted) vs {PAPER_TABLE7['Fixed']} (fixed), true "
                                  f"{PAPER_TABLE7['Ground truth']}",
                      ours=f"mean |error| {lengths.table.loc['Prediction', 'mean |error|']:.1f} vs "
                           f"{lengths.table.loc['Fixed', 'mean |error|']:.1f} tokens ({difference:+.1f})",
                      low=low, high=high, method=f"paired bootstrap over {lengths.n} prompts", n=lengths.n,
                      verdict=verdict_for_difference(low, high, paper_sign=-1), quantity="|error| predicted - |error| fixed"))
    return rows


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
    with store.atomic_write(path) as handle:
        for index, prompt in enumerate(prompts):
            handle.write(json.dumps({"prompt": prompt, **{name: texts[index] for name, texts in systems.items()}}) + "\n")
    return path


def settings_table(settings: DecodingSettings):
    """The settings as a one-column table, for the notebook."""
    import pandas as pd

    return pd.Series({name: str(value) for name, value in asdict(settings).items()}, name="value").to_frame()
