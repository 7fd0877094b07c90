"""From mask-predict to masked diffusion: one sampler family, its training objective and its likelihood bound.

**One loop, five switches** (notebook 07). Every sampler of masked diffusion LMs is notebook 05's mask-predict loop
with five switches; :class:`SamplerConfig` holds them and :func:`sample` runs them all:

1. *which positions compete* for staying unmasked: the masked ones only (LLaDA, arXiv 2502.09992 §2.4: a committed
   token never changes), or every target with a kept token keeping its old score (mask-predict, so a committed
   token can be re-masked: ``remask_committed``);
2. *how many stay unmasked after each step*: a schedule (LLaDA's code ``get_num_transfer_tokens``: ``⌊m/T⌋`` per
   step, the first ``m mod T`` steps one more; LLaDA Algorithm 5: ``⌊L(1 - s)⌋`` unmasked at time s; mask-predict's
   ``N - ⌊N(T - t - 1)/T⌋``), or Fast-dLLM's confidence threshold (§3.3: every masked token of the block whose
   confidence reaches τ, and always the most confident one);
3. *the ranking score*: the raw probability of the proposed token (LLaDA low-confidence), its probability under the
   tempered sampling distribution (mask-predict with LTD), or a uniform random number (LLaDA random remasking);
4. *block order*: one block, or semi-autoregressive blocks generated left to right (LLaDA App. B.3);
5. *attention and cache*: notebook 05's mixed attention with the prompt computed once (exact: the prompt is a
   closed block) and every later block present as masks, or block-causal attention (BD3-LM §3.1,
   :func:`helpers.masks.block_causal`) where a finished block's keys and values are computed once and never revised
   (an exact KV cache; each step runs only the current block, plus the finished block once at the next block's first
   step).

Two switches of 2026 systems, defined as diffusers 0.42's ``BlockRefinementScheduler.step`` defines them (tests
prove the two token-equal, :mod:`.ecosystem`): **token editing** (LLaDA2.1's Token-to-Token editing,
``editing_threshold``): at every step a committed token of the current block is re-written to the proposal when the
proposal differs and its raw probability exceeds the threshold; after the block's last mask, up to ``edit_passes``
more passes run while they edit, only for a block finished before its step budget (``LLaDA2Pipeline``'s loop);
**uniform corruption** (DiffusionGemma, ``corruption="uniform"``): uncommitted positions of the current block hold
``randint(0, vocab)`` tokens, drawn at the block's start and re-drawn after every step, instead of the mask token.

Tokens are proposed by 05's nucleus sampler (:func:`helpers.papers.openltg.mechanism.sample_tokens`) or greedily at
temperature 0. **Banned tokens** (``backend.banned_ids``: specials, the mask token and every token that is only
underscores) get ``-inf`` logits before the softmax, so every confidence is renormalised over the allowed tokens.
Mask-predict is the configuration :func:`mask_predict_config`; the tests prove it equal, token for token, to notebook
05's ``mask_predict``, and the greedy low-confidence rows equal to a reference written from LLaDA's Algorithm 5.

**Training** (LLaDA Eq. 3; MDLM's antithetic t): :func:`diffusion_batch` masks every token with one ratio
``t ~ U(ε, 1)`` per sequence, :func:`diffusion_loss` weights the cross-entropy by ``1/t``; the MNTP shift is kept
(output l - 1 predicts token l, as DiffuLLaMA keeps GPT-2's). **Likelihood**: :func:`diffusion_bound` is LLaDA's
Eq. 6 estimator; :func:`causal_nll` is the same bound at block size 1 (BD3-LM §4.1), where it is exact.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from ... import attention
from ... import masks as M
from ...checks import real_number, whole_number
from ...masked_lm import MaskedLM, SourceCache
from ...seeds import seeded_generator
from ..openltg import mechanism as mask_predict

from .corruption import CORRUPTIONS, TIME_EPSILON, _choice  # noqa: F401 (read as mechanism.*)

REMASKING = ("low_confidence", "random")
SCHEDULES = ("uniform", "linear", "mask-predict")
CONFIDENCES = ("raw", "tempered")
ATTENTIONS = ("full", "block-causal")


@dataclass(frozen=True)
class SamplerConfig:
    """The five switches (module docstring). The defaults are LLaDA's low-confidence sampler over one block.

    ``steps``: forward passes in total (T; with ``block_length``, ``steps / blocks`` per block, LLaDA's rule);
    ``threshold`` replaces the schedule by Fast-dLLM's rule, and each block then runs until it has no mask left;
    ``temperature`` 0 is greedy (LLaDA's default), else 05's nucleus sampler at ``temperature`` and ``top_p``;
    ``ltd_beta`` replaces the temperature by OpenLTG's LTD, ``β(1 - t/T)``; ``cache`` False recomputes the whole
    sequence at every step (the reference the cached paths must equal). ``editing_threshold``, ``edit_passes`` and
    ``corruption`` are the two switches of 2026 systems (module docstring).
    """

    steps: int = 8
    block_length: int | None = None
    remasking: str = "low_confidence"
    schedule: str = "uniform"
    threshold: float | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    confidence: str = "raw"
    remask_committed: bool = False
    ltd_beta: float | None = None
    attention: str = "full"
    cache: bool = True
    editing_threshold: float | None = None
    edit_passes: int = 1
    corruption: str = "mask"

    def __post_init__(self):
        whole_number(self.steps, "steps", 1, "forward passes, T")
        if self.block_length is not None:
            whole_number(self.block_length, "block_length", 1, "target tokens per block, or None for one block")
        _choice(self.remasking, "remasking", REMASKING)
        _choice(self.schedule, "schedule", SCHEDULES)
        _choice(self.confidence, "confidence", CONFIDENCES)
        _choice(self.attention, "attention", ATTENTIONS)
        if self.threshold is not None:
            real_number(self.threshold, "threshold", low=0.0, what="Fast-dLLM's confidence threshold τ")
        real_number(self.temperature, "temperature", low=0.0, what="0 is greedy")
        mask_predict.check_top_p(self.top_p)
        if self.ltd_beta is not None:
            real_number(self.ltd_beta, "ltd_beta", low=0.0, low_open=True, what="β of LTD, OpenLTG Eq. 8")
        if self.remask_committed and (self.threshold is not None or self.block_length is not None):
            raise ValueError("remask_committed=True is mask-predict's rule over one block with a step schedule; "
                             "set threshold=None and block_length=None")
        if self.threshold is not None and self.ltd_beta is not None:
            raise ValueError("ltd_beta needs a fixed number of steps T; the threshold rule has none (threshold=None)")
        if self.confidence == "tempered" and self.temperature == 0 and self.ltd_beta is None:
            raise ValueError("confidence='tempered' needs a sampling temperature > 0 (or ltd_beta); greedy scores are raw")
        if self.attention == "block-causal" and self.block_length is None:
            raise ValueError("attention='block-causal' needs block_length (the block-causal mask's block)")
        _choice(self.corruption, "corruption", CORRUPTIONS)
        whole_number(self.edit_passes, "edit_passes", 0, "editing passes over a finished block")
        if self.editing_threshold is not None:
            real_number(self.editing_threshold, "editing_threshold", low=0.0, low_open=True,
                        what="the confidence above which a committed token is re-written (LLaDA2.1's editing)")
            if self.remask_committed:
                raise ValueError("editing_threshold re-writes committed tokens, remask_committed=True re-masks them: "
                                 "choose one (set editing_threshold=None for mask-predict)")
        if self.corruption == "uniform" and self.block_length is not None and self.attention != "block-causal":
            raise ValueError("corruption='uniform' draws noise for the current block only; later blocks must be "
                             "invisible: set attention='block-causal' (or block_length=None for one block)")
        if self.corruption == "uniform" and self.remask_committed:
            raise ValueError("corruption='uniform' tracks committed positions; remask_committed=True is mask-predict's "
                             "rule (set corruption='mask')")

    def layout(self, length: int) -> tuple[int, int, int]:
        """``(block, blocks, steps_per_block)`` for a target of ``length`` tokens, or a ValueError naming the setting."""
        block = self.block_length or length
        if length % block:
            raise ValueError(f"length={length} is not a multiple of block_length={block}")
        blocks = length // block
        if self.threshold is not None:
            return block, blocks, 0
        if self.steps % blocks:
            raise ValueError(f"steps={self.steps} is not a multiple of the {blocks} blocks (length {length} / "
                             f"block_length {block}); LLaDA gives every block steps / blocks steps")
        if self.steps // blocks > block:
            raise ValueError(f"steps={self.steps} gives {self.steps // blocks} steps per block of {block} tokens; at most "
                             "one step per token (each step commits at least one token)")
        return block, blocks, self.steps // blocks

    def temperature_at(self, step: int) -> float:
        return mask_predict.ltd_temperature(step, self.steps, self.ltd_beta) if self.ltd_beta else self.temperature


def mask_predict_config(iterations: int, beta: float = 1.8, top_p: float = 0.9, *, ltd: bool = True,
                        temperature: float = 1.0) -> SamplerConfig:
    """Notebook 05's mask-predict (OpenLTG §3.1, LTD Eq. 8; DSWA off) as one configuration: every target competes
    and a kept token keeps its score, ``N - ⌊N(T - t - 1)/T⌋`` stay unmasked after step t, tempered confidence."""
    return SamplerConfig(steps=iterations, schedule="mask-predict", remask_committed=True, confidence="tempered",
                         top_p=top_p, ltd_beta=beta if ltd else None, temperature=temperature)


def unmasked_after(length: int, steps: int, schedule: str) -> list[int]:
    """How many of a block's ``length`` tokens are unmasked after each of its ``steps`` steps (the last: all).

    - ``"uniform"``: LLaDA's code (``get_num_transfer_tokens``): ``⌊m/T⌋`` per step, one more in the first ``m mod T``;
    - ``"linear"``: LLaDA Algorithm 5: ``n_un = ⌊L(1 - s)⌋`` at time ``s = 1 - (t + 1)/T``;
    - ``"mask-predict"``: Mask-Predict's ``N - ⌊N(T - t - 1)/T⌋``.
    The three agree when T divides the length.
    """
    length, steps = whole_number(length, "length"), whole_number(steps, "steps")
    _choice(schedule, "schedule", SCHEDULES)
    if schedule == "uniform":
        base, extra = divmod(length, steps)
        counts = [base + (step < extra) for step in range(steps)]
        return [sum(counts[:step + 1]) for step in range(steps)]
    if schedule == "linear":
        return [length * (step + 1) // steps for step in range(steps)]
    return [length - length * (steps - step - 1) // steps for step in range(steps)]


def propose(logits: torch.Tensor, config: SamplerConfig, temperature: float,
            generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens for the masked positions (rows of ``logits``, banned tokens already at ``-inf``) and their scores.

    Greedy at temperature 0 (LLaDA Algorithm 5's argmax), else 05's nucleus sampler. The score is the token's raw
    probability (LLaDA: ``softmax(logits)``, not the tempered one), its tempered probability (mask-predict), or a
    uniform draw (LLaDA's random remasking).
    """
    if temperature == 0:
        tokens = logits.argmax(-1)
        tempered = None
    else:
        tokens, tempered = mask_predict.sample_tokens(logits, temperature, config.top_p, generator)
    if config.remasking == "random":
        return tokens, torch.rand(tokens.shape, generator=generator, device=logits.device)
    if config.confidence == "tempered" and tempered is not None:
        return tokens, tempered
    return tokens, torch.softmax(logits.float(), -1).gather(-1, tokens[:, None]).squeeze(-1)


def lowest(ranking: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Per row, the ``counts[row]`` positions of lowest score (ties: the earlier position), as a bool mask."""
    order = ranking.argsort(dim=-1, stable=True)
    return order.argsort(-1) < counts[:, None]


def threshold_commits(scores: torch.Tensor, candidates: torch.Tensor, threshold: float) -> torch.Tensor:
    """Fast-dLLM's parallel decoding (§3.3; ``get_transfer_index``): commit every candidate whose confidence reaches
    ``threshold``, and always each row's most confident candidate (so every step commits at least one)."""
    ranked = torch.where(candidates, scores, torch.full_like(scores, -math.inf))
    best = torch.zeros_like(candidates).scatter(1, ranked.argmax(-1, keepdim=True), True) & candidates
    return (candidates & (scores >= threshold)) | best


@dataclass
class Step:
    """One forward pass of :func:`sample` (``(B, N)`` CPU tensors): what was masked before it, the tokens after it
    (proposals written at the masked positions), the proposals' scores (NaN elsewhere), which positions it committed
    and which committed tokens it re-masked (mask-predict only)."""

    step: int
    block: int
    temperature: float
    masked: torch.Tensor
    tokens: torch.Tensor
    scores: torch.Tensor
    committed: torch.Tensor
    remasked: torch.Tensor
    edited: torch.Tensor | None = None


@dataclass
class Sampled:
    """The result of :func:`sample`: final tokens ``(B, N)``, the per-step trace and the forward-pass count."""

    tokens: torch.Tensor
    trace: list[Step]
    prompts: list[torch.Tensor]
    config: SamplerConfig
    forward_passes: int
    seconds: float

    def texts(self, tokenizer) -> list[str]:
        return [tokenizer.decode(row, skip_special_tokens=True) for row in self.tokens.tolist()]

    def commit_step(self) -> torch.Tensor:
        """``(B, N)``: the step after which each position stayed unmasked for good."""
        final = torch.zeros_like(self.tokens)
        for entry in self.trace:
            final = torch.where(entry.committed, torch.full_like(final, entry.step), final)
        return final


class _Predictor:
    """Logits for target positions, one forward pass per call, under the sampler's attention and cache."""

    def __init__(self, backend: MaskedLM, ids, padding, start: int, config: SamplerConfig, block: int, prompt_lengths):
        self.backend, self.ids, self.padding, self.start, self.block = backend, ids, padding, start, block
        self.blockwise = config.attention == "block-causal"
        # "full": notebook 05's mixed attention = block-causal with one block; the prompt is a closed block either way
        self.masks = [M.block_causal(prompt, block if self.blockwise else ids.shape[1]) for prompt in prompt_lengths]
        self.cached, self.forward_passes = config.cache, 0
        if self.cached:
            self.rendered = backend.render(padding, mask=self.masks)
            self.source = backend.encode_source(ids[:, :start], padding, self.rendered)

    def __call__(self, rows: torch.Tensor, cols: torch.Tensor, block_index: int) -> torch.Tensor:
        self.forward_passes += 1
        if not self.cached:
            return self.backend.predict(self.ids, self.padding, rows, cols + self.start, mask=self.masks)
        if not self.blockwise:
            return self.backend.predict_targets(self.source, self.ids[:, self.start:], self.padding, rows, cols,
                                                self.rendered)
        return self._block_step(rows, cols, block_index)

    def _block_step(self, rows, cols, block_index: int) -> torch.Tensor:
        """Run the current block against the cached prefix; at a block's first step the block before it (now
        complete) runs once more and its keys and values join the cache (exact: block-causal rows never see a
        later block)."""
        backend, source = self.backend, self.source
        first, stop = self.start + block_index * self.block, self.start + (block_index + 1) * self.block
        begin = source.width
        positions, cache = backend.position_ids(self.padding)[:, begin:stop], source.cache()
        output = attention.forward_rendered(backend.body(), self.ids[:, begin:stop],
                                            **backend.rows_of(self.rendered, begin, stop, stop),
                                            position_ids=positions, past_key_values=cache, use_cache=True)
        states = output.last_hidden_state
        context = torch.cat([source.last_hidden[:, source.width - backend.offset:], states], 1)
        if begin < first:
            layers = [(layer.keys[:, :, :first], layer.values[:, :, :first]) for layer in cache.layers]  # grown in place
            self.source = SourceCache(layers, torch.cat([source.last_hidden, states[:, :first - begin]], 1), source.states)
        return backend.head(context[rows, cols + self.start - begin])


def noise_vocabulary(backend: MaskedLM) -> int:
    """The ids uniform corruption draws from: every row of the model's output layer (the width of its logits, as
    ``BlockRefinementScheduler`` draws ``randint(0, vocab)``), banned ids included."""
    head = backend.model.get_output_embeddings()
    return int(head.weight.shape[0])


def _snapshot(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", copy=True)


@torch.inference_mode()
def sample(backend: MaskedLM, prompts, length: int, config: SamplerConfig = SamplerConfig(), *, seed: int = 0) -> Sampled:
    """Masked-diffusion sampling (LLaDA §2.4, App. A.3, B.3; Fast-dLLM §3.3; BD3-LM §3; OpenLTG §3.1 as
    :func:`mask_predict_config`): ``length`` masks after each prompt, unmasked block by block, one forward pass per
    step. Each step proposes a token at every masked position of the current block (:func:`propose`), then keeps
    the schedule's number unmasked (the lowest-ranked re-masked, :func:`lowest`) or applies the threshold rule
    (:func:`threshold_commits`). Every step is recorded in a :class:`Step`. ``prompts``: one 1D id tensor or a list
    (batched with left padding; each row gets the result it gets alone). Long because every switch acts inside the
    one step loop (proposal, commit rule, editing of committed tokens, renoising), on the state they share.
    """
    prompts = mask_predict.check_prompts(prompts, mask_predict.vocabulary_size(backend.model))
    mask_predict.check_seed(seed)
    length = mask_predict.check_length(length)
    mask_predict.check_fits(backend, prompts, length)
    block, blocks, steps_per_block = config.layout(length)
    device, started = backend.device, time.perf_counter()
    ids, padding = mask_predict.left_padded(prompts, length, backend.mask_id, backend.pad_id)
    ids, padding = ids.to(device), padding.to(device)
    start = ids.shape[1] - length
    predict = _Predictor(backend, ids, padding, start, config, block, [prompt.numel() for prompt in prompts])
    banned = torch.tensor(backend.banned_ids, dtype=torch.long, device=device)
    generator = seeded_generator(seed, device=device)
    batch = len(prompts)
    tokens = torch.full((batch, length), backend.mask_id, dtype=torch.long, device=device)
    scores = torch.zeros(batch, length, device=device)
    masked = torch.ones(batch, length, dtype=torch.bool, device=device)
    trace: list[Step] = []
    editing, uniform = config.editing_threshold is not None, config.corruption == "uniform"
    noise = torch.full_like(tokens, backend.mask_id)  # what an uncommitted position holds: the mask, or uniform noise
    vocabulary = noise_vocabulary(backend) if uniform else 0

    def draw(lo: int, hi: int) -> None:  # the scheduler's renoising: one uniform draw over the whole block
        noise[:, lo:hi] = torch.randint(0, vocabulary, (batch, hi - lo), device=device, generator=generator)
        ids[:, start:] = torch.where(masked, noise, tokens)

    for block_index in range(blocks):
        lo, hi = block_index * block, (block_index + 1) * block
        in_block = torch.zeros_like(masked)
        in_block[:, lo:hi] = True
        schedule = None if config.threshold is not None else unmasked_after(block, steps_per_block, config.schedule)
        budget = block if schedule is None else len(schedule)  # the threshold rule commits at least one per step
        if uniform:
            draw(lo, hi)
        inner = polished = 0
        while True:
            polishing = not bool(masked[:, lo:hi].any())
            if polishing:  # LLaDA2Pipeline's editing passes: only a block done before its budget, while they edit
                if not editing or inner >= budget or polished >= config.edit_passes or (polished and not edited_last):
                    break
            elif schedule is not None and inner >= len(schedule):
                break
            candidates = masked & in_block
            rows, cols = (in_block if editing else candidates).nonzero(as_tuple=True)
            logits = predict(rows, cols, block_index).float()
            logits[:, banned[banned < logits.shape[-1]]] = float("-inf")
            temperature = config.temperature_at(len(trace))
            proposed, score = propose(logits, config, temperature, generator)
            pending = candidates[rows, cols]
            edited = torch.zeros_like(masked)
            if editing:
                confidence = torch.softmax(logits, -1).gather(-1, proposed[:, None]).squeeze(-1)
                hit = ~pending & (proposed != tokens[rows, cols]) & (confidence > config.editing_threshold)
                edited[rows[hit], cols[hit]] = True
                rewrite = proposed[hit]
            rows, cols, proposed, score = rows[pending], cols[pending], proposed[pending], score[pending]
            tokens[rows, cols] = proposed
            scores[rows, cols] = score.to(scores.dtype)
            if polishing:
                remasked = masked
            elif schedule is None:
                remasked = (masked & ~in_block) | (candidates & ~threshold_commits(scores, candidates, config.threshold))
            else:
                ranking = scores if config.remask_committed else torch.where(masked, scores, math.inf)
                counts = torch.full((batch,), block - schedule[inner], dtype=torch.long, device=device)
                remasked = masked & ~in_block
                remasked[:, lo:hi] = lowest(ranking[:, lo:hi], counts)
            if editing:
                tokens[edited] = rewrite  # row-major order on both sides: the hits' order
            step_scores = torch.full_like(scores, math.nan)
            step_scores[rows, cols] = scores[rows, cols]
            trace.append(Step(len(trace), block_index, temperature, _snapshot(masked), _snapshot(tokens),
                              _snapshot(step_scores), _snapshot(masked & ~remasked), _snapshot(~masked & remasked),
                              _snapshot(edited)))
            masked = remasked
            if uniform:
                draw(lo, hi)
            else:
                ids[:, start:] = torch.where(masked, noise, tokens)
            if polishing:
                polished, edited_last = polished + 1, bool(edited.any())
            else:
                inner += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return Sampled(_snapshot(tokens), trace, prompts, config, predict.forward_passes, time.perf_counter() - started)


# The objective and the bound live in their own file (a mechanism file stays near 500 lines); one namespace for both.
from .mechanism_likelihood import (BoundSamples, causal_nll, continuation_bound, diffusion_batch,  # noqa: E402
                                   diffusion_bound, diffusion_loss)
