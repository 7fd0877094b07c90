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
- **Fine-tune** (:func:`fine_tune`): a LoRA on notebook 02's merged MNTP adapter trained with LLaDA's Eq. 3
  (:func:`.mechanism.diffusion_loss`), its run folder keyed by :class:`FineTuneKey`; :func:`likelihood_study` scores
  both adapters' bound (LLaDA Eq. 6), their block-size-1 NLL (BD3-LM §4.1) and accuracy by mask ratio, and
  :func:`row_hits` their masked-token accuracy on notebook 02's held-out batches.

Notebook 05's prompts, its judge and its Table 6 scoring are reused from :mod:`helpers.papers.openltg` (the one line
importing it below), so the two notebooks score generations the same way.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ... import adapters, attention, data, metrics, mntp_adapter, models, store, training
from ... import masks as M
from ... import objectives as O
from ...masked_lm import MaskedLM, MNTPDecoder
from ..openltg import experiment as openltg_experiment, experiment_table6 as openltg_table6
from . import mechanism
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
FINE_TUNE_RUN = "07_diffusion_fine_tune"
FINE_TUNE_VERSION = 2  # bump when the fine-tune's recipe changes what its run folder holds (2: held-out evaluations)
FINE_TUNE_HELDOUT_KEY = "eval_diffusion_loss"  # the fine-tune's held-out LLaDA Eq. 3 loss, logged at every evaluation
HELDOUT_MASK_SEED = 0  # the held-out masks are drawn once, the same for every evaluation, seed and profile

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
    (:func:`helpers.workers.run_jobs`, the model sent to each), so the speed-up's interval nests the trials in the
    processes and covers run-to-run variance (:func:`speed_ratios`, :func:`speed_interval`)."""
    from ... import workers

    job = (backend, prompt, settings)
    if settings.timing_processes == 1:
        return [_timed_cache(*job)]
    _remove_output_capturing_hooks(backend.model)  # the model is pickled to every worker
    return [workers.run_jobs(_timed_cache_job, [job], 1)[0] for _ in range(settings.timing_processes)]


def _remove_output_capturing_hooks(model: torch.nn.Module) -> None:
    """Take transformers' output-capturing forward hooks off ``model`` and mark it unhooked. transformers installs
    them the first time a forward asks for hidden states (the reachability proof does); they are local functions,
    which pickle cannot send to a worker process. Nothing else changes: the next forward that asks for hidden states
    installs them again."""
    for module in model.modules():
        capturing = [key for key, hook in module._forward_hooks.items()
                     if "output_capturing_hook" in getattr(hook, "__qualname__", "")]
        for hooks in (module._forward_hooks, module._forward_hooks_with_kwargs, module._forward_hooks_always_called):
            for key in capturing:
                hooks.pop(key, None)
        module.__dict__.pop("_output_capturing_hooks_installed", None)


def _timed_cache(backend: MaskedLM, prompt: torch.Tensor, settings: DiffusionSettings) -> dict[str, list[float]]:
    """One process's timing trials of :func:`cache_speed` (runs in whichever process calls it)."""
    semi = settings.llada(block_length=settings.block_length)
    cached = settings.llada(block_length=settings.block_length, attention="block-causal")
    jobs = {SEMI_AR: lambda seed: mechanism.sample(backend, prompt, settings.target_length, semi, seed=seed),
            BLOCK_CAUSAL: lambda seed: mechanism.sample(backend, prompt, settings.target_length, cached, seed=seed)}
    synchronize = torch.cuda.synchronize if backend.device.type == "cuda" else None
    return metrics.interleaved_timings(jobs, list(settings.timing_seeds), rounds=1, best=True, synchronize=synchronize,
                                       per_input=True)


def _timed_cache_job(job: tuple) -> dict[str, list[float]]:
    """:func:`_timed_cache` for a fresh worker process (one picklable tuple of its arguments)."""
    return _timed_cache(*job)


def speed_ratios(runs: Sequence[dict[str, list[float]]]) -> tuple[tuple[float, ...], ...]:
    """Per process (``runs``: :func:`cache_speed`), the block cache's speed-up of each trial: semi-AR time over
    block-causal time."""
    if isinstance(runs, dict) or not runs:
        raise ValueError("runs must be cache_speed's list of per-process timings (at least one process)")
    return tuple(tuple(slow / fast for slow, fast in zip(milliseconds[SEMI_AR], milliseconds[BLOCK_CAUSAL]))
                 for milliseconds in runs)


def speed_interval(ratios: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """``(mean, low, high)`` of the speed-up, trials nested in processes
    (:func:`helpers.metrics.trials_in_processes_interval`)."""
    return metrics.trials_in_processes_interval(ratios, "ratios")


def describe_speed_method(ratios: Sequence[Sequence[float]]) -> str:
    """How the speed-up's interval was formed, for the ledger's method column."""
    trials = {len(found) for found in ratios}
    each = f"{min(trials)}" if len(trials) == 1 else f"{min(trials)}-{max(trials)}"
    if len(ratios) == 1:
        return f"t over {each} interleaved timing trials in one process"
    return (f"t over the means of {len(ratios)} processes, {each} interleaved timing trials each nested in them "
            "(run-to-run variance)")


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


# --------------------------------------------------------------------------- the diffusion fine-tune

@dataclass(frozen=True)
class FineTuneKey:
    """Exactly what changes the diffusion fine-tune: its run folder (``store.reuse_run``) is keyed by it."""

    profile: str  # the profile's decoder and dtype
    parent: str  # fingerprint of notebook 02's MNTP adapter settings (the weights it continues from)
    corpus: str
    steps: int
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


@dataclass
class FineTuned:
    """The fine-tuned masked LM (merged), the run's training records (one per step, its loss), its held-out
    evaluations (:data:`FINE_TUNE_HELDOUT_KEY` at step 0, every ``fine_tune_eval_every`` steps and the last) and
    where they are."""

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
        generator = O.seeded_generator(HELDOUT_MASK_SEED, index, 0)
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
    notebook 02. A finished run is reloaded from its folder instead of retrained. ``corruption="uniform"`` corrupts
    with uniformly random tokens instead of the mask token (:func:`.mechanism.diffusion_batch`), in training and in the
    held-out loss, in a run folder of its own; everything else (seed, steps, LoRA, batches, positions) is the same."""
    mechanism._choice(corruption, "corruption", mechanism.CORRUPTIONS)
    key = FineTuneKey.of(profile, settings)
    run = store.reuse_run(FINE_TUNE_RUN if corruption == "mask" else f"{FINE_TUNE_RUN}_{corruption}", key)
    noise = dict(corruption=corruption, vocab_size=mechanism.noise_vocabulary(backend))
    adapter = run.path / "adapter"
    model = copy.deepcopy(backend.model)
    if run.finished() is not None and adapters.adapter_exists(adapter):
        tuned, records = adapters.load_adapter(model, adapter, expected=store.canonical_settings(key)), \
            training.read_metrics(run.path)
    else:
        tokenizer = backend.tokenizer
        blocks = data.token_blocks(tokenizer, (p.text for p in data.load_paragraphs(profile.corpus, "train")),
                                   settings.fine_tune_seq_len, max_blocks=settings.fine_tune_blocks)
        tuned = training.add_lora(model, key.lora, seed=settings.seed)
        device = backend.device

        def batch_for(step: int, micro: int) -> dict:
            generator = O.seeded_generator(settings.seed, step, micro)
            rows = blocks[torch.randint(len(blocks), (settings.fine_tune_batch,), generator=generator)]
            batch = mechanism.diffusion_batch(rows, torch.ones_like(rows), mask_id=backend.mask_id,
                                              special_ids=tokenizer.all_special_ids, generator=generator, **noise)
            return O.to_device(batch, device)

        heldout = heldout_diffusion_batches(backend, profile, settings, corruption=corruption)
        config = training.TrainConfig(steps=settings.fine_tune_steps, batch_size=settings.fine_tune_batch,
                                      lr=settings.fine_tune_lr, eval_every=settings.fine_tune_eval_every,
                                      seed=settings.seed)
        records = training.train(tuned, batch_for=batch_for, loss_fn=mechanism.diffusion_loss, config=config,
                                 run_dir=run.path, settings={"key": key}, progress=progress,
                                 evaluate=lambda model: {FINE_TUNE_HELDOUT_KEY: heldout_diffusion_loss(model, heldout)})
        adapters.save_adapter(tuned, adapter, store.canonical_settings(key))
        run.finish({"steps": settings.fine_tune_steps,
                    "last_loss": [record for record in records if "loss" in record][-1]["loss"]})
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
