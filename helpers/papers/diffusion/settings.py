"""Notebook 07's sizes, one :class:`DiffusionSettings` per profile (:data:`SETTINGS`, read by
:func:`helpers.profiles.settings_for`).

The cpu entry is sized for 8 minutes on 2 cores (notebook 05's prompts and target length, T = 8, a 16-step
fine-tune). The gpu and paper entries are the plan for a larger model, 200 prompts and longer fine-tunes; they have
not been run (``measured=False``), so nothing in the workbook quotes their numbers yet.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ... import metrics, seeds
from ...seeds import StudySeed
from .mechanism import SamplerConfig, mask_predict_config

FINE_TUNE_HELDOUT_CURVE = "notebook 07's diffusion fine-tune: held-out diffusion loss (LLaDA Eq. 3), negated"


@dataclass(frozen=True)
class DiffusionSettings:
    """Every size notebook 07 uses."""

    num_prompts: int  # notebook 05's prompts: first sentence of a held-out paragraph -> the rest
    target_length: int  # N
    batch_size: int
    max_prompt_tokens: int
    steps: int = 8  # T, the main budget: notebook 05's (OpenLTG §5.1), 8 tokens per step at N = 64
    step_grid: tuple[int, ...] = (2, 4, 8)  # quality against T (LLaDA App. B.6, Fig. 5)
    block_length: int = 16  # semi-autoregressive and block-causal blocks
    temperature: float = 1.0  # the LLaDA rows sample like notebook 05's AR baseline: T = 1, top-p 0.9
    top_p: float = 0.9
    beta: float = 1.8  # the mask-predict row: LTD's β (OpenLTG §5.1, WP)
    threshold: float = 0.9  # Fast-dLLM's default τ (§4.1), in the anatomy figure and the widget
    editing_threshold: float = 0.5  # LLaDA2Pipeline's default editing threshold (diffusers 0.42)
    edit_passes: int = 17  # LLaDA2Pipeline's default max_post_steps = 16, i.e. at most 17 editing passes per block
    trace_length: int = 32  # the anatomy figure, the exact checks and the widget: one prompt
    trace_steps: int = 8
    trace_block: int = 8
    # Batch-1 timing trials of the block cache, one per seed: in each the uncached and the cached decode run once, one
    # after the other (metrics.interleaved_timings), and the trial's speed-up is their ratio. The trials repeat in
    # timing_processes fresh processes (helpers.workers.in_fresh_processes), and the speed-up's interval nests the
    # trials in the processes (metrics.trials_in_processes_interval), so it holds the run-to-run variance as well as
    # the trials'.
    timing_seeds: tuple[int, ...] = tuple(range(10))
    timing_processes: int = 3
    # Sampling draws per prompt of every sampler row on the one adapter (draw d samples from seed +
    # seeds.DRAW_STRIDE d): each draw of each prompt is scored, and the judges resample prompts, each carrying all its
    # draws (draws nested in prompts), so more draws narrow the sampling noise of a row without training anything.
    # Keys no run folder.
    draws: int = 2
    fine_tune_steps: int = 16  # the diffusion fine-tune of notebook 02's adapter (LLaDA Eq. 3, 1/t weight)
    fine_tune_batch: int = 4
    fine_tune_seq_len: int = 128
    fine_tune_lr: float = 5e-4  # notebook 02's cpu rate (mntp_recipe.MaskedLMRecipe)
    fine_tune_blocks: int = 2000
    # The fine-tune's held-out curve (its budget check): the LLaDA Eq. 3 loss on fine_tune_eval_blocks validation
    # blocks under fixed masks, at step 0, every fine_tune_eval_every steps and the last; every step at cpu, so the
    # last half of its 16 steps holds 9 evaluations (the equivalence test needs 6), one forward of 8 blocks each.
    fine_tune_eval_every: int = 1
    fine_tune_eval_blocks: int = 8
    eval_blocks: int = 32  # held-out blocks for the bound (LLaDA Eq. 6) and the block-size-1 NLL
    eval_block_tokens: int = 64
    bound_samples: int = 2  # Monte Carlo samples per block (LLaDA uses 128 for benchmarks)
    ratio_bins: int = 5  # accuracy by mask ratio
    mauve_margin: float = 0.1  # MAUVE (0..1) within which "makes little difference" claims hold
    mauve_resamples: int = 2000  # bootstrap resamples of each MAUVE interval (the smoke profile checks the code path)
    accuracy_margin: float = 2.0  # points of masked-token accuracy the fine-tune may lose and still "keep" it
    seed: int = 0
    measured: bool = True  # False: these sizes have not been run yet

    def __post_init__(self):
        for name, minimum, what in (("draws", 1, "sampling draws per prompt"),
                                    ("timing_processes", 1, "processes the timing trials repeat in")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name}={value!r} must be a whole number >= {minimum} ({what})")
        if len(self.timing_seeds) < 2:
            raise ValueError(f"timing_seeds={self.timing_seeds!r} must hold at least 2 trials (an interval needs 2)")

    def draw_seeds(self) -> list[int]:
        """The sampling seed of each draw; draw 0 is ``seed`` itself, so one draw samples as before."""
        return seeds.draw_seeds(self.seed, self.draws)

    def llada(self, steps: int | None = None, **changes) -> SamplerConfig:
        """LLaDA's low-confidence sampler at these sizes (one block unless ``block_length`` is given)."""
        config = SamplerConfig(steps=steps or self.steps, temperature=self.temperature, top_p=self.top_p)
        return replace(config, **changes)

    def mask_predict(self, steps: int | None = None) -> SamplerConfig:
        """Notebook 05's sampler (LTD, re-masking of committed tokens, top-p; DSWA off) at T = ``steps``."""
        return mask_predict_config(steps or self.steps, self.beta, self.top_p)


# How a seed study's seed reaches these settings (helpers.profiles.settings_for): seed s moves ``seed`` by s, from 0 in
# every profile: the samplers' and the bound's randomness and the fine-tune's LoRA, time and batch order (the prompts
# and held-out blocks stay); notebook 02's adapter of that seed comes with the profile.
STUDY_SEED = StudySeed(("seed",))

# The test-example counts a seed study's examples look multiplies (helpers.profiles.scale_examples): the samplers'
# prompts and the held-out validation blocks of the bound and the block-size-1 NLL (the first eval_blocks of the
# split, so a larger set holds the smaller); the fine-tune's key holds neither (its own held-out curve keeps
# fine_tune_eval_blocks).
EXAMPLE_SIZES = ("num_prompts", "eval_blocks")


SETTINGS = {
    "smoke": DiffusionSettings(num_prompts=3, target_length=8, batch_size=3, max_prompt_tokens=8, steps=4,
                               step_grid=(2, 4), block_length=4, trace_length=8, trace_steps=4, trace_block=4,
                               timing_seeds=(0, 1), timing_processes=1,
                               fine_tune_steps=2, fine_tune_batch=2, fine_tune_seq_len=32, fine_tune_blocks=16,
                               fine_tune_eval_blocks=2, eval_blocks=4, eval_block_tokens=16, ratio_bins=2,
                               mauve_resamples=200),
    "cpu": DiffusionSettings(num_prompts=16, target_length=64, batch_size=16, max_prompt_tokens=32),
    "gpu": DiffusionSettings(num_prompts=200, target_length=128, batch_size=25, max_prompt_tokens=64, steps=64,
                             step_grid=(8, 16, 32, 64, 128), block_length=32, timing_seeds=tuple(range(10)),
                             fine_tune_steps=200, fine_tune_batch=16, fine_tune_seq_len=512, fine_tune_lr=1e-4,
                             fine_tune_blocks=200_000, fine_tune_eval_every=10, fine_tune_eval_blocks=32,
                             eval_blocks=256, eval_block_tokens=128, bound_samples=16,
                             measured=False),
    # LLaDA App. B.3 ablation: answer length 512, 256 steps (2 tokens per step), block length 32; 128 MC samples (B.5).
    "paper": DiffusionSettings(num_prompts=1000, target_length=512, batch_size=8, max_prompt_tokens=64, steps=256,
                               step_grid=(64, 128, 256, 512), block_length=32, timing_seeds=tuple(range(10)),
                               fine_tune_steps=1000, fine_tune_batch=8, fine_tune_seq_len=512, fine_tune_lr=3e-5,
                               fine_tune_blocks=300_000, fine_tune_eval_every=50, fine_tune_eval_blocks=64,
                               eval_blocks=1000, eval_block_tokens=512, bound_samples=128,
                               measured=False),
}


def evaluations_in_last_half(steps: int, eval_every: int) -> int:
    """How many evaluations of a run of ``steps`` steps evaluated at step 0, every ``eval_every`` steps (0: never in
    between) and at the last fall in the window :func:`helpers.metrics.stopped_improving` fits (its last half)."""
    return metrics.points_in_window(metrics.evaluation_steps(steps, eval_every))


def curve_points(profile) -> dict[str, int]:
    """Held-out curve name -> evaluations in the last half of training under ``profile``: notebook 02's MNTP adapter
    (its recipe, ``mntp_recipe.MASKED_LM_RECIPES``), which every row rests on, and this notebook's diffusion fine-tune."""
    from ..mntp import settings as mntp_settings

    settings = SETTINGS[profile.name]
    return {**mntp_settings.curve_points(profile),
            FINE_TUNE_HELDOUT_CURVE: evaluations_in_last_half(settings.fine_tune_steps, settings.fine_tune_eval_every)}
