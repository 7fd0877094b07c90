"""Notebook 05's sizes, one :class:`OpenLTGSettings` per profile (:data:`SETTINGS`, read by
:func:`helpers.profiles.settings_for`). The ``paper`` entry holds OpenLTG's §5.1 values."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ... import masks as M
from ...masked_lm import MNTP
from ... import seeds
from ...seeds import StudySeed
from .mechanism import DecodeConfig


# How a seed study's seed reaches these settings (helpers.profiles.settings_for): it moves none of them. Notebook 05
# trains nothing; a study seed reaches it through notebook 02's adapter of that seed (the profile's), and its
# sampling and timing seeds (``seed``, the draws', the trials') are the same under every study seed.
STUDY_SEED = StudySeed()

# The test-example counts a seed study's examples look multiplies (helpers.profiles.scale_examples): Table 6's
# prompts and Table 7's length-test prompts. Neither keys a run (notebook 05 trains nothing of its own).
EXAMPLE_SIZES = ("num_prompts", "length_test_prompts")


@dataclass(frozen=True)
class OpenLTGSettings:
    """Every size notebook 05 uses. The ``paper`` entry holds OpenLTG's §5.1 values."""

    num_prompts: int  # Table 6 prompts
    target_length: int  # N, fixed length (§3.1 "Fixed Length")
    batch_size: int
    max_prompt_tokens: int
    # "mntp": the profile's decoder with notebook 02's MNTP adapter; otherwise a Hub encoder MLM id.
    masked_lm: str = MNTP
    causal_lm: str | None = None  # AR baseline and perplexity judge; None means the profile's model
    prompts: str = "corpus"  # "corpus": first sentence of a held-out paragraph -> the rest; or "writingprompts"
    iterations: int = 8  # T (§5.1: 6 for ROC, 8 for the others)
    beta: float = 1.8  # β (§5.1: 1.6 ROC, 1.8 WP and WikiPlots, 1.5 OPINION)
    top_p: float = 0.9
    fixed_window: int = M.DSWA_FIXED_WINDOW  # S_fix of Eq. 7
    alpha_min: float = M.DSWA_ALPHA_MIN
    alpha_max: float = M.DSWA_ALPHA_MAX
    update_all: bool = False  # masked-only updates (Mask-Predict, OpenLTG code); True is SMART (§4.3)
    paper_dataset: str = "WP"  # the row of Tables 4 and 6 we compare with
    lr_n: int = 5  # LR-n: LR-2 for ROC, LR-5 for WP (§5.1)
    trace_length: int = 32  # Fig. 2 and 4 and the widget
    probe_position: int = 7  # the "randomly picked position" of Fig. 2's histogram and Fig. 4
    speed_lengths: tuple[int, ...] = (64, 128, 256)
    speed_iterations: tuple[int, ...] = (1, 2, 4, 8)
    speed_prompt_tokens: int = 16
    speed_repeats: int = 1
    # Fig. 5's timing: speed_trials interleaved trials (trial t samples from seed t; the settings take turns within
    # it) in each of speed_processes processes; the speed-up's interval nests the trials in the processes.
    speed_trials: int = 10
    speed_processes: int = 2
    compare_source_states: bool = True  # Table 6 also decodes Ours with Eq. 3's last-layer prompt states
    length_train_prompts: int = 256  # Table 7: fit the length predictor
    length_test_prompts: int = 64
    seed: int = 0
    # Sampling draws per prompt on the one adapter (draw d samples from seed + seeds.DRAW_STRIDE d): Table 6 scores
    # every draw of every prompt, the draws nested in the prompts (experiment_table6.pool_draws), so more draws narrow
    # a row whose sampling noise dominates without training anything. Neither draws nor num_prompts keys a run folder.
    draws: int = 1

    def __post_init__(self):
        if isinstance(self.draws, bool) or not isinstance(self.draws, int) or self.draws < 1:
            raise ValueError(f"draws={self.draws!r} must be a whole number >= 1 (sampling draws per prompt)")
        for name, minimum, what in (("speed_trials", 2, "interleaved timing trials per process (an interval needs 2)"),
                                    ("speed_processes", 1, "processes the timing trials repeat in")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name}={value!r} must be a whole number >= {minimum} ({what})")

    def speed_seeds(self) -> list[int]:
        """The sampling seed of each timing trial: trial t samples from seed t, in every process alike."""
        return list(range(self.speed_trials))

    def draw_seeds(self) -> list[int]:
        """The sampling seed of each draw; draw 0 is ``seed`` itself, so one draw samples as before."""
        return seeds.draw_seeds(self.seed, self.draws)

    def decode_config(self, **changes) -> DecodeConfig:
        """The paper's inference settings (LTD, DSWA, SMART) with these sizes."""
        config = DecodeConfig(iterations=self.iterations, beta=self.beta, top_p=self.top_p, fixed_window=self.fixed_window,
                              alpha_min=self.alpha_min, alpha_max=self.alpha_max, update_all=self.update_all)
        return replace(config, **changes)


SETTINGS = {
    "smoke": OpenLTGSettings(num_prompts=3, target_length=8, batch_size=3, max_prompt_tokens=8, iterations=4,
                             fixed_window=8, paper_dataset="ROC", lr_n=2, trace_length=8, probe_position=3,
                             speed_lengths=(8, 12), speed_iterations=(1, 4), speed_prompt_tokens=4, speed_trials=2,
                             speed_processes=1, length_train_prompts=8, length_test_prompts=4, draws=2),
    # 16 prompts × 2 draws × 6 mask-predict rows × 8 passes at N = 64: make reproduce's 45 minutes on 2 CPU cores.
    # Fig. 5 times N = 32 and 64 (AR at batch 1 dominates a trial) in 10 trials × 3 processes (a t over 3 process
    # means has 2 degrees of freedom; over 2 it would have 1, t = 12.7).
    "cpu": OpenLTGSettings(num_prompts=16, target_length=64, batch_size=16, max_prompt_tokens=32,
                           speed_lengths=(32, 64), speed_iterations=(1, 8), speed_repeats=1, length_train_prompts=256,
                           length_test_prompts=64, draws=2, speed_processes=3),
    "gpu": OpenLTGSettings(num_prompts=200, target_length=140, batch_size=25, max_prompt_tokens=64,
                           prompts="writingprompts", speed_repeats=3, speed_processes=3, length_train_prompts=2000,
                           length_test_prompts=500, draws=4),
    # §5.1: RoBERTa-base, T = 8, β = 1.8 (WP), top-p 0.9, α 0.125 / 0.75, S_fix 64; PPL under GPT-2.
    "paper": OpenLTGSettings(num_prompts=1000, target_length=140, batch_size=50, max_prompt_tokens=64,
                             masked_lm="FacebookAI/roberta-base", causal_lm="openai-community/gpt2",
                             prompts="writingprompts", speed_repeats=3, speed_processes=3,
                             length_train_prompts=10000, length_test_prompts=4000),
}


def curve_points(profile) -> dict[str, int]:
    """How many evaluations of each held-out curve notebook 05's declarations name (``Declared.curve``) fall in the
    last half of training under ``profile``: the equivalence test (:func:`helpers.metrics.stopped_improving`) needs
    :data:`helpers.metrics.STOP_MIN_POINTS` there. Notebook 05's trained rows rest on notebook 02's MNTP adapter,
    whose run evaluates at step 0, every ``eval_every`` steps and at its last step
    (:data:`helpers.mntp_recipe.MASKED_LM_RECIPES`)."""
    from ...mntp_recipe import MNTP_HELDOUT_CURVE
    from ..mntp import settings as mntp_settings

    return {MNTP_HELDOUT_CURVE: mntp_settings.curve_points(profile)[MNTP_HELDOUT_CURVE]}
