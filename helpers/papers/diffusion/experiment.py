"""Notebook 07's experiments: the samplers on notebook 05's prompts, the block cache's speed, the block-causal mask
on the real model, and a short diffusion fine-tune of notebook 02's MNTP adapter with its likelihood bound.

- **Samplers** (:func:`sampler_rows`, :func:`generate`): every row is :func:`.mechanism.sample` with other switches,
  on the same prompts, target length and seeds; scored like notebook 05's Table 6 (:func:`score`: PPL under the
  causal base model, D-4, LR-5, B-1, R-L with bootstrap intervals over prompts).
- **Block cache** (:func:`cache_speed`): batch-1 time of semi-autoregressive decoding under full attention (every
  step runs all N targets) against block-causal decoding with the exact cache (every step runs one block), taking
  turns in every timing trial (:func:`helpers.metrics.interleaved_timings`).
- **Judges against the human continuations** (:func:`judge_against_humans`, :func:`human_continuation_bounds`):
  MAUVE of each sampler row against the human text that follows each prompt, and, for the two fine-tuned models,
  the bound each gives that human text (:mod:`.judge`).
- **Mask proof** (:func:`reachability_proof`): a changed token moves hidden states exactly where the block-causal
  mask's reachability says, layer by layer, on the notebook's own model.
- **Fine-tune** (:mod:`.experiment_fine_tune`, read here): a LoRA on notebook 02's merged MNTP adapter trained with
  LLaDA's Eq. 3 (:func:`.mechanism.diffusion_loss`), its run folder keyed by :class:`FineTuneKey` without the length;
  :func:`likelihood_study` scores both adapters' bound (LLaDA Eq. 6), their block-size-1 NLL (BD3-LM §4.1) and
  accuracy by mask ratio, and :func:`row_hits` their masked-token accuracy on notebook 02's held-out batches.

Notebook 05's prompts, its judge and its Table 6 scoring are reused from :mod:`helpers.papers.openltg` (the one line
importing it below), so the two notebooks score generations the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ... import attention, metrics, models
from ... import masks as M
from ...masked_lm import MaskedLM
from ..openltg import experiment as openltg_experiment, experiment_table6 as openltg_table6
from . import mechanism
from .experiment_fine_tune import (FINE_TUNE_HELDOUT_KEY, FINE_TUNE_RUN, FINE_TUNE_VERSION,  # noqa: F401 (re-exported)
                                   HELDOUT_MASK_SEED, FineTuned, FineTuneKey, LikelihoodStudy, accuracy_difference,
                                   fine_tune, fine_tune_heldout_curve, heldout_blocks, heldout_diffusion_batches,
                                   heldout_diffusion_loss, high_ratio_hits, likelihood_study, mean_difference,
                                   notebook02_eval_batches, row_hits)
from .judge import MauveJudge, mauve_judge
from .mechanism import SamplerConfig
from .settings import FINE_TUNE_HELDOUT_CURVE, DiffusionSettings  # noqa: F401 (the curve's name, re-exported)

LOW_CONFIDENCE = "LLaDA low-confidence"
RANDOM = "LLaDA random"
MASK_PREDICT = "mask-predict + LTD (notebook 05)"
SEMI_AR = "semi-AR blocks, full attention"
BLOCK_CAUSAL = "block-causal blocks + exact KV cache"
THRESHOLD = "Fast-dLLM threshold"
EDITING = "block-causal + token editing"
MASK_CORRUPTION = "fine-tuned, mask corruption (block-causal)"
UNIFORM_CORRUPTION = "fine-tuned, uniform corruption (block-causal)"
TRUTH_ROW = openltg_experiment.TRUTH_ROW
LR_N = 5  # LR-5, notebook 05's WP setting

story_prompts = openltg_experiment.story_prompts
paired_metric_difference = openltg_table6.paired_metric_difference


def steps_row(steps: int) -> str:
    return f"low-confidence, T={steps}"


def sampler_rows(settings: DiffusionSettings) -> dict[str, SamplerConfig]:
    """The rows of the sampler table: LLaDA low-confidence and random (one block), notebook 05's mask-predict, semi-AR
    blocks and block-causal blocks (all at T = ``settings.steps``), and low-confidence at the other T of the grid."""
    rows = {LOW_CONFIDENCE: settings.llada(), RANDOM: settings.llada(remasking="random"),
            MASK_PREDICT: settings.mask_predict(), SEMI_AR: settings.llada(block_length=settings.block_length),
            BLOCK_CAUSAL: settings.llada(block_length=settings.block_length, attention="block-causal")}
    rows[EDITING] = settings.llada(block_length=settings.block_length, attention="block-causal",
                                   editing_threshold=settings.editing_threshold)
    rows.update({steps_row(steps): settings.llada(steps) for steps in settings.step_grid if steps != settings.steps})
    return rows


def corruption_rows(settings: DiffusionSettings) -> dict[str, SamplerConfig]:
    """The corruption switch's two rows: block-causal decoding (``settings.block_length``, T = ``settings.steps``) with
    the mask token, and with uniform noise (each on the fine-tune of that corruption: :func:`corruption_generations`)."""
    base = settings.llada(block_length=settings.block_length, attention="block-causal")
    return {MASK_CORRUPTION: base, UNIFORM_CORRUPTION: replace(base, corruption="uniform")}


def corruption_generations(backends: dict[str, MaskedLM], prompts: Sequence[torch.Tensor], settings: DiffusionSettings,
                           *, seed: int = 0) -> Generations:
    """Each corruption row decoded by its own fine-tuned model (``backends``: row name -> backend), same prompts, seeds
    and forward passes."""
    out = Generations()
    for name, config in corruption_rows(settings).items():
        found = generate(backends[name], prompts, {name: config}, settings, seed=seed)
        out.texts.update(found.texts)
        out.forward_passes.update(found.forward_passes)
    return out


def anatomy_rows(settings: DiffusionSettings) -> dict[str, SamplerConfig]:
    """The samplers of the anatomy figure, on one prompt of ``trace_length`` targets (blocks of ``trace_block``)."""
    block, steps = settings.trace_block, settings.trace_steps
    return {MASK_PREDICT: settings.mask_predict(steps), LOW_CONFIDENCE: settings.llada(steps),
            RANDOM: settings.llada(steps, remasking="random"),
            f"semi-AR, B={block}": settings.llada(steps, block_length=block),
            f"block-causal, B={block}": settings.llada(steps, block_length=block, attention="block-causal"),
            f"{THRESHOLD} τ={settings.threshold:g}, B={block}": settings.llada(block_length=block,
                                                                              threshold=settings.threshold),
            f"{THRESHOLD} τ={settings.threshold:g} + editing τ_e={settings.editing_threshold:g}, B={block}":
                settings.llada(block_length=block, attention="block-causal", threshold=settings.threshold,
                               editing_threshold=settings.editing_threshold, edit_passes=settings.edit_passes),
            f"uniform corruption, block-causal, B={block}": settings.llada(steps, block_length=block,
                                                                          attention="block-causal",
                                                                          corruption="uniform")}


@dataclass
class Generations:
    """Each row's texts (one per prompt) and its forward passes per decode."""

    texts: dict[str, list[str]] = field(default_factory=dict)
    forward_passes: dict[str, int] = field(default_factory=dict)


def generate(backend: MaskedLM, prompts: Sequence[torch.Tensor], rows: dict[str, SamplerConfig],
             settings: DiffusionSettings, *, seed: int = 0) -> Generations:
    """Every row on the same prompts, in batches of ``settings.batch_size`` (batch i draws from ``seed + i``)."""
    out = Generations()
    for name, config in rows.items():
        texts, passes = [], set()
        for index in tqdm(range(0, len(prompts), settings.batch_size), desc=name):
            result = mechanism.sample(backend, list(prompts[index:index + settings.batch_size]), settings.target_length,
                                      config, seed=seed + index)
            texts += [text.strip() for text in result.texts(backend.tokenizer)]
            passes.add(result.forward_passes)
        out.texts[name], out.forward_passes[name] = texts, max(passes)
    return out


def generate_draws(backend: MaskedLM, prompts: Sequence[torch.Tensor], rows: dict[str, SamplerConfig],
                   settings: DiffusionSettings) -> list[Generations]:
    """Every row sampled ``settings.draws`` times on the same prompts (:func:`generate`; draw d from
    ``settings.draw_seeds()[d]``, draw 0 from ``settings.seed``): the sampling draws the judges nest in the prompts."""
    return [generate(backend, prompts, rows, settings, seed=seed) for seed in settings.draw_seeds()]


def systems_per_draw(draws: Sequence[Generations], human: Sequence[str]) -> list[dict[str, list[str]]]:
    """Per draw, every row's texts and the human continuations (:data:`TRUTH_ROW`, the same in every draw): what
    :func:`score` and :func:`judge_against_humans` read."""
    return [{**found.texts, TRUTH_ROW: list(human)} for found in draws]


def human_continuation_ids(backend: MaskedLM, examples, settings: DiffusionSettings) -> list[torch.Tensor]:
    """Each prompt's human continuation (the text that follows it in the corpus) as token ids, cut to the target
    length N: as long as every generated continuation."""
    return [torch.tensor(backend.tokenizer(example.continuation, add_special_tokens=False).input_ids[:settings.target_length])
            for example in examples]


def human_continuations(backend: MaskedLM, examples, settings: DiffusionSettings) -> list[str]:
    """The human continuations cut to the target length (notebook 05's ground-truth row)."""
    return [backend.tokenizer.decode(row, skip_special_tokens=True).strip()
            for row in human_continuation_ids(backend, examples, settings)]


def judge_against_humans(systems: dict[str, list[str]] | Sequence[dict[str, list[str]]], examples, judge_model,
                         judge_tokenizer, settings: DiffusionSettings, *, seed: int = 0) -> MauveJudge:
    """MAUVE of every sampler row against the human continuations of the same prompts (``systems[TRUTH_ROW]``), on
    the causal judge's features, all rows quantised together (:func:`.judge.mauve_judge`). ``systems`` is one draw
    (name -> texts) or every sampling draw (:func:`systems_per_draw`), the draws nested in the prompts."""
    return mauve_judge(systems, [example.prompt for example in examples], judge_model, judge_tokenizer,
                       reference=TRUTH_ROW, seed=seed, resamples=settings.mauve_resamples)


def human_continuation_bounds(backends: dict[str, MaskedLM], prompts: Sequence[torch.Tensor], examples,
                              settings: DiffusionSettings) -> dict[str, np.ndarray]:
    """Per corruption row (``backends``: row name -> its fine-tuned model): the bound each model gives the human
    continuation of every prompt, given the prompt (:func:`.mechanism.continuation_bound`, ``bound_samples`` draws,
    the same positions for every model), in nats per token, each under its row's own corruption."""
    continuations = human_continuation_ids(next(iter(backends.values())), examples, settings)
    configs = corruption_rows(settings)
    out = {}
    for name, backend in backends.items():
        corruption = configs[name].corruption
        out[name] = np.array([mechanism.continuation_bound(backend, prompt, continuation, samples=settings.bound_samples,
                                                           seed=settings.seed + index, corruption=corruption,
                                                           vocab_size=mechanism.noise_vocabulary(backend))
                              for index, (prompt, continuation) in enumerate(zip(prompts, continuations))])
    return out


def score(systems: dict[str, list[str]] | Sequence[dict[str, list[str]]], examples, judge, judge_tokenizer,
          settings: DiffusionSettings, *, seed: int = 0):
    """Notebook 05's Table 6 scores for every row: B-1, R-L, LR-5, D-4 and the judge's PPL, each with a bootstrap
    interval over prompts. ``systems`` is one draw (name -> texts) or every sampling draw (:func:`systems_per_draw`):
    each draw of each prompt is scored and the draws are pooled per prompt (``openltg.evaluate_draws``, as notebook
    05's Table 6 pools them), so the bootstrap resamples prompts, each carrying all its draws."""
    draws = [systems] if isinstance(systems, dict) else list(systems)
    if not draws:
        raise ValueError("systems is empty; give the texts of at least one sampling draw")
    return openltg_table6.evaluate_draws(draws, [example.prompt for example in examples], judge, judge_tokenizer,
                                         references=draws[0][TRUTH_ROW], lr_n=LR_N, batch_size=settings.batch_size,
                                         seed=seed)


def log_ppl_difference(scores, first: str, second: str, *, seed: int = 0) -> tuple[float, float, float]:
    """``log PPL(first) - log PPL(second)`` under the judge (nats per token) with a paired bootstrap over prompts:
    the same resampled prompts for both rows."""
    pairs = list(zip(scores.per_prompt[first], scores.per_prompt[second]))

    def statistic(sample):
        return (sum(a["nll"] for a, _ in sample) / sum(a["tokens"] for a, _ in sample)
                - sum(b["nll"] for _, b in sample) / sum(b["tokens"] for _, b in sample))

    return metrics.bootstrap_interval(pairs, statistic, resamples=scores.resamples, seed=seed)


def anatomy(backend: MaskedLM, prompt: torch.Tensor, settings: DiffusionSettings, *, seed: int = 0) -> dict:
    """Each anatomy row decoding one prompt: name -> :class:`.mechanism.Sampled`."""
    return {name: mechanism.sample(backend, prompt, settings.trace_length, config, seed=seed)
            for name, config in anatomy_rows(settings).items()}


def cache_speed(backend: MaskedLM, prompt: torch.Tensor, settings: DiffusionSettings) -> list[dict[str, list[float]]]:
    """Milliseconds per decode at batch 1, per process: one timing trial per timing seed, semi-AR under full
    attention (no block cache) and block-causal with the exact cache, same T and blocks, the two decodes taking turns
    in every trial (one warm-up first), so a drift of the machine reaches both alike. ``settings.timing_processes`` = 1
    times in this process; more repeat the same trials in that many fresh processes, one after another
    (:func:`helpers.workers.in_fresh_processes`, the model sent to each), so the speed-up's interval nests the trials
    in the processes and covers run-to-run variance (:func:`speed_ratios`,
    :func:`helpers.metrics.trials_in_processes_interval`)."""
    from ... import workers

    return workers.in_fresh_processes(_timed_cache, (backend, prompt, settings), settings.timing_processes,
                                      models=(backend.model,))


def _timed_cache(backend: MaskedLM, prompt: torch.Tensor, settings: DiffusionSettings,
                 progress: bool = False) -> dict[str, list[float]]:
    """One process's timing trials of :func:`cache_speed` (runs in whichever process calls it)."""
    semi = settings.llada(block_length=settings.block_length)
    cached = settings.llada(block_length=settings.block_length, attention="block-causal")
    jobs = {SEMI_AR: lambda seed: mechanism.sample(backend, prompt, settings.target_length, semi, seed=seed),
            BLOCK_CAUSAL: lambda seed: mechanism.sample(backend, prompt, settings.target_length, cached, seed=seed)}
    synchronize = torch.cuda.synchronize if backend.device.type == "cuda" else None
    return metrics.interleaved_timings(jobs, list(settings.timing_seeds), rounds=1, best=True, synchronize=synchronize,
                                       progress=progress, per_input=True)


def speed_ratios(runs: Sequence[dict[str, list[float]]]) -> tuple[tuple[float, ...], ...]:
    """Per process (``runs``: :func:`cache_speed`), the block cache's speed-up of each trial: semi-AR time over
    block-causal time."""
    if isinstance(runs, dict) or not runs:
        raise ValueError("runs must be cache_speed's list of per-process timings (at least one process)")
    return tuple(tuple(slow / fast for slow, fast in zip(milliseconds[SEMI_AR], milliseconds[BLOCK_CAUSAL]))
                 for milliseconds in runs)


def cache_matches(backend: MaskedLM, prompt: torch.Tensor, settings: DiffusionSettings, *, seed: int = 0) -> bool:
    """Block-causal decoding with the exact cache gives the tokens of recomputing the whole sequence every step.

    An identity of exact arithmetic, so it is checked in float32 (:func:`helpers.models.float32_weights`): in bf16
    the cache's keys and values come from matrix products of other shapes than the recomputation's, round
    differently, and a near tie between two tokens can flip."""
    cached = settings.llada(settings.trace_steps, block_length=settings.trace_block, attention="block-causal")
    with models.float32_weights(backend.model):
        fresh = mechanism.sample(backend, prompt, settings.trace_length, replace(cached, cache=False), seed=seed)
        return torch.equal(mechanism.sample(backend, prompt, settings.trace_length, cached, seed=seed).tokens,
                           fresh.tokens)


def mask_predict_matches(backend: MaskedLM, prompt: torch.Tensor, settings: DiffusionSettings, *, seed: int = 0) -> bool:
    """:func:`.mechanism.mask_predict_config` gives the tokens of notebook 05's ``mask_predict`` (DSWA off)."""
    reference = mechanism.mask_predict.mask_predict(
        backend, prompt, settings.trace_length,
        mechanism.mask_predict.DecodeConfig(iterations=settings.trace_steps, beta=settings.beta, top_p=settings.top_p,
                                            dswa=False), seed=seed)
    ours = mechanism.sample(backend, prompt, settings.trace_length, settings.mask_predict(settings.trace_steps), seed=seed)
    return torch.equal(reference.tokens, ours.tokens)


# --------------------------------------------------------------------------- the mask on the real model

def block_mask_identities(prompt_length: int, length: int, block: int) -> dict[str, bool]:
    """The block-causal mask against its composition from existing masks and its special cases (BD3-LM §3.1)."""
    total = prompt_length + length
    dense = lambda mask, size=total: M.dense(mask, size)  # noqa: E731
    closed_prompt = mechanism.mask_predict.generation_mask(prompt_length)  # notebook 05's mixed attention
    return {
        "composition dswa(P, ∞) & (causal | same block)":
            torch.equal(dense(M.block_causal(prompt_length, block)),
                        dense(closed_prompt & (M.causal | M.same_block(prompt_length, block)))),
        "B = N is notebook 05's mask": torch.equal(dense(M.block_causal(prompt_length, length)), dense(closed_prompt)),
        "B = 1 is MAGNET's one-span mask": torch.equal(dense(M.block_causal(prompt_length, 1)),
                                                       dense(M.magnet([(prompt_length, total)]))),
        "no prompt, B = 1 is causal": torch.equal(dense(M.block_causal(0, 1)), dense(M.causal)),
        "no prompt, B = L is bidirectional": torch.equal(dense(M.block_causal(0, total)), dense(M.bidirectional)),
    }


@dataclass(frozen=True)
class BlockProof:
    """``moved[l, p]``: how far hidden state p moved after layer l when token ``changed`` was replaced;
    ``reach[l, p]``: whether block-causal attention connects them after l layers."""

    moved: torch.Tensor
    reach: torch.Tensor
    changed: int
    prompt_length: int
    block: int

    @property
    def matches(self) -> bool:
        return bool(torch.equal(self.moved > 0, self.reach))


def reachability_proof(backend: MaskedLM, prompt: torch.Tensor, targets: torch.Tensor, block: int) -> BlockProof:
    """Replace the first token of the second block and compare, layer by layer, the hidden states that moved with the
    block-causal mask's reachability (``attention.predicted_influence``): nothing before that block may move."""
    ids = torch.cat([prompt, targets])[None]
    mask = M.block_causal(prompt.numel(), block)
    changed = prompt.numel() + block
    replacement = int(ids[0, 0]) if int(ids[0, 0]) != int(ids[0, changed]) else int(ids[0, 1])
    moved = attention.influence(backend.model, ids, changed, replacement, mask)
    reach = attention.predicted_influence(mask, num_layers=backend.num_layers, padding_mask=torch.ones_like(ids),
                                          position=changed)
    return BlockProof(moved, reach, changed, prompt.numel(), block)
