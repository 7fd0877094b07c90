"""Learning-rate schedules for :func:`helpers.training.train`'s ``lr_lambda``: step ``s`` (0-based) runs at
``config.lr * schedule(s)``. :class:`WarmupConstant` does not depend on the run's length, so a run under it extends
(``training.train``'s "Extending"); :func:`linear_decay` (HF Trainer's default) does, so a run under it records a
factor per step and cannot."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .checks import whole_number


@dataclass(frozen=True)
class WarmupConstant:
    """A learning-rate schedule that does not depend on the run's length, so a run extends: a linear warm-up over
    ``warmup`` steps (step ``s`` at ``(s + 1) / warmup`` of the lr), then constant. The trunk of a
    warmup-stable-decay schedule (transformers' ``get_wsd_schedule``) without its decay, which would need the
    length. A dataclass, so a run's key holds the schedule's form, not a factor per step."""

    warmup: int = 0

    def __post_init__(self):
        whole_number(self.warmup, "warmup", 0, "0: no warm-up")

    def __call__(self, step: int) -> float:
        return min(1.0, (step + 1) / self.warmup) if self.warmup else 1.0


def linear_decay(steps: int) -> Callable[[int], float]:
    """The HF Trainer default schedule (no warm-up): step ``s`` of ``steps`` runs at ``1 - s / steps`` of the lr.
    It depends on the length, so a run under it records a factor per step and cannot extend (:class:`WarmupConstant`
    can)."""
    steps = whole_number(steps, "steps")
    return lambda step: max(0.0, 1.0 - step / steps)
