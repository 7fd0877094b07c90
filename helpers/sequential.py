"""A seed study with a plan fixed before it starts: looks at 3, then 5, then 8 seeds under Pocock's group-sequential
boundary, futility stops, and where the next look's compute should go.

Repeated looks at the same claims inflate the chance of a false "reproduced" (or "not reproduced"): at three looks,
each at 95%, a null effect crosses at some look in about 11% of studies, not 5%. Pocock (1977) keeps the overall
level by using one stricter nominal level at every look: the constant ``c`` with

    P(max_k |Z_k| >= c) = alpha  under no effect,  Z_k = S_{n_k} / sqrt(n_k),  corr(Z_i, Z_j) = sqrt(n_i / n_j),

for looks after n_1 < n_2 < ... < n_K seeds (Jennison & Turnbull 2000, §2.2; for three equally spaced looks at
alpha = 0.05, c = 2.289, nominal level 97.8%). :class:`SequentialPlan` computes ``c`` for the plan's own looks, and
every row's interval at look k is read at the nominal level ``1 - 2(1 - Φ(c))``.

At a look, each trained row is either decided (the one verdict rule, at the look's level), or undecided and then:

- **examples-dominated** when at the last look the examples' term would still be the larger: more test examples or
  sampling draws narrow it, not more seeds;
- else **futile** when even the last look could not decide it: the interval projected to ``looks[-1]`` seeds at
  today's seed spread and examples' half-width, centred at today's mean, still reaches the nearest decision boundary;
- else **seeds-dominated**: more seeds narrow it.

A notebook gets more seeds at the next look only while one of its rows is undecided, not futile and
seeds-dominated (:func:`allocate`); its cost is stated before the look starts (:func:`look_cost`).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

DEFAULT_LOOKS = (3, 5, 8)

# Minutes one seed of each notebook takes at the cpu profile on the 2-core CI machine (make reproduce, seed 0,
# 2026-11-27: the README's timing table); a look's cost is stated from these before it starts.
CPU_MINUTES_PER_SEED = {"02": 3.7, "03": 7.8, "04": 6.1, "05": 1.5, "06": 8.6, "07": 2.2}


@functools.lru_cache(maxsize=None)
def pocock_critical_value(looks: tuple[int, ...], alpha: float = 0.05) -> float:
    """Pocock's constant ``c`` for looks after ``looks`` seeds (or any information sizes): the two-sided boundary
    crossed at some look with probability ``alpha`` under no effect, from the multivariate normal law of
    ``(Z_1, ..., Z_K)`` with ``corr(Z_i, Z_j) = sqrt(n_i / n_j)`` (i < j), solved for ``c``."""
    import numpy as np
    from scipy import optimize, stats

    if isinstance(looks, (str, bytes)) or not isinstance(looks, Sequence) or not looks or \
            any(not n > 0 for n in looks) or list(looks) != sorted(set(looks)):
        raise ValueError(f"looks={looks!r} must be increasing positive information sizes (seed counts)")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must lie in (0, 1)")
    information = np.asarray(looks, dtype=float)
    correlation = np.sqrt(np.minimum.outer(information, information) / np.maximum.outer(information, information))
    law = stats.multivariate_normal(mean=np.zeros(len(looks)), cov=correlation, maxpts=200_000 * len(looks),
                                    abseps=1e-7, releps=1e-7, seed=0)

    def crossing(c: float) -> float:
        inside = law.cdf(np.full(len(looks), c), lower_limit=np.full(len(looks), -c))
        return 1.0 - float(inside) - alpha

    return float(optimize.brentq(crossing, float(stats.norm.isf(alpha / 2)) - 1e-9, 6.0, xtol=1e-6))


def _check_looks(looks) -> tuple[int, ...]:
    if isinstance(looks, (str, bytes)) or not isinstance(looks, Sequence) or not looks:
        raise ValueError(f"looks={looks!r} must be a non-empty list of seed counts, e.g. (3, 5, 8)")
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 2 for n in looks) or list(looks) != sorted(set(looks)):
        raise ValueError(f"looks={looks!r} must be increasing whole seed counts of at least 2 each (a t interval "
                         "over seeds needs 2)")
    return tuple(looks)


@dataclass(frozen=True)
class SequentialPlan:
    """The plan: look after each count of seeds in ``looks``, overall two-sided level ``alpha`` (Pocock)."""

    looks: tuple[int, ...] = DEFAULT_LOOKS
    alpha: float = 0.05

    def __post_init__(self):
        object.__setattr__(self, "looks", _check_looks(self.looks))
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, float) or not 0 < self.alpha < 1:
            raise ValueError(f"alpha={self.alpha!r} must be a number in (0, 1), e.g. 0.05")

    @property
    def critical_value(self) -> float:
        return pocock_critical_value(self.looks, self.alpha)

    @property
    def nominal_alpha(self) -> float:
        """The two-sided level each look's interval is read at: ``2 (1 - Φ(c))``."""
        from scipy import stats

        return float(2 * stats.norm.sf(self.critical_value))

    @property
    def level(self) -> float:
        """Every look's interval level, ``1 - nominal_alpha`` (97.8% for three looks at alpha 0.05)."""
        return 1.0 - self.nominal_alpha

    def look_number(self, seeds: int) -> int:
        """Which look (1-based) ``seeds`` seeds make; an error when the plan has no look after that many."""
        if seeds not in self.looks:
            raise ValueError(f"seeds={seeds!r}: the plan looks after {list(self.looks)} seeds only")
        return self.looks.index(seeds) + 1

    def describe(self) -> str:
        return (f"looks after {', '.join(map(str, self.looks))} seeds; Pocock's boundary c = "
                f"{self.critical_value:.3f}, so every look's interval is read at {100 * self.level:.1f}% (overall "
                f"two-sided {100 * self.alpha:g}%)")


@dataclass(frozen=True)
class LookState:
    """An undecided row at a look: whether the last look could still decide it, and which term dominates there."""

    futile: bool
    projected_half: float  # the interval's half-width projected to the plan's last look
    distance: float  # from today's mean to the nearest decision boundary
    examples_dominated: bool

    @property
    def reason(self) -> str:
        if self.futile:
            return (f"futile: even at the last look its half-width would be about {self.projected_half:.3g}, more "
                    f"than its distance {self.distance:.3g} from the nearest decision boundary")
        if self.examples_dominated:
            return "undecided; the examples' term dominates: more test examples or draws narrow it, not more seeds"
        return "undecided; more seeds narrow it"


def boundary_distance(mean: float, threshold: float, margin: float | None) -> float:
    """How far ``mean`` lies from the nearest place a verdict changes: the threshold for a direction claim, the edge
    of ``threshold ± margin`` for a "matches" claim."""
    gap = mean - threshold
    return abs(gap) if margin is None else abs(abs(gap) - margin)


def look_state(values: Sequence[float], example_halves: Sequence[float], *, threshold: float,
               margin: float | None = None, plan: SequentialPlan = SequentialPlan()) -> LookState:
    """An undecided trained row's :class:`LookState` from its seeds' ``values`` and each seed's 95% half-width over
    the shared test examples (``example_halves``): both terms re-read at the plan's level, the seeds' standard error
    shrunk to ``plan.looks[-1]`` seeds at today's SD."""
    from scipy import stats

    values = [float(value) for value in values]
    if len(values) < 2 or len(values) != len(example_halves):
        raise ValueError(f"values={values!r} and example_halves={list(example_halves)!r} must give one half-width per "
                         "seed, for at least 2 seeds")
    last = plan.looks[-1]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((value - mean) ** 2 for value in values) / (len(values) - 1))
    examples_se = math.sqrt(sum(float(h) ** 2 for h in example_halves) / len(example_halves)) / stats.norm.ppf(0.975)
    seeds_half = float(stats.t.ppf(1 - plan.nominal_alpha / 2, last - 1)) * sd / math.sqrt(last)
    examples_half = float(stats.norm.ppf(1 - plan.nominal_alpha / 2)) * examples_se
    projected = math.hypot(seeds_half, examples_half)
    distance = boundary_distance(mean, threshold, margin)
    examples_dominated = bool(examples_half > seeds_half)
    return LookState(futile=distance <= projected and not examples_dominated, projected_half=projected,
                     distance=distance, examples_dominated=examples_dominated)


def row_state(row, plan: SequentialPlan = SequentialPlan()) -> LookState | None:
    """The :class:`LookState` of a study's combined trained row (:func:`helpers.claims.combine_seeds` at ``plan``'s
    level), or None when more seeds cannot change it: it is decided, or blocked by what seeds do not fix
    (:func:`helpers.claims.missing_for_verdict`: no check, a confound, another regime, a baseline not shown to work,
    the contradicting side waiting for its training to be shown stopped). The examples' term is the combined
    interval's, half² = seeds' half² + examples' half², both at the plan's level."""
    from scipy import stats

    from . import claims, metrics

    if not (row.trained and row.verdict == "inconclusive" and row.seed_values and len(row.seed_values) > 1) \
            or claims.missing_for_verdict(row):
        return None
    seeds_half = metrics.mean_ci95(list(row.seed_values), plan.level)[1]
    examples_half = math.sqrt(max(((row.high - row.low) / 2) ** 2 - seeds_half ** 2, 0.0))
    examples_95 = examples_half * float(stats.norm.ppf(0.975) / stats.norm.ppf((1 + plan.level) / 2))
    return look_state(row.seed_values, [examples_95] * len(row.seed_values), threshold=row.threshold,
                      margin=row.margin, plan=plan)


def allocate(states: dict[str, Sequence[LookState]]) -> dict[str, str]:
    """Per notebook, what its next look gets: ``"seeds"`` while one of its undecided rows is neither futile nor
    examples-dominated; ``"examples"`` when its only live rows are examples-dominated; ``"stop"`` otherwise."""
    plan = {}
    for notebook, found in states.items():
        live = [state for state in found if not state.futile]
        plan[notebook] = ("seeds" if any(not state.examples_dominated for state in live) else
                          "examples" if live else "stop")
    return plan


def look_cost(notebooks: Sequence[str], new_seeds: int, minutes: dict[str, float] | None = None) -> float:
    """Minutes a look takes: ``new_seeds`` more seeds of each notebook in ``notebooks``, at
    :data:`CPU_MINUTES_PER_SEED` (or ``minutes``)."""
    minutes = CPU_MINUTES_PER_SEED if minutes is None else minutes
    unknown = [notebook for notebook in notebooks if notebook not in minutes]
    if unknown:
        raise ValueError(f"notebooks={list(notebooks)!r}: no measured minutes per seed for {unknown}")
    if isinstance(new_seeds, bool) or not isinstance(new_seeds, int) or new_seeds < 0:
        raise ValueError(f"new_seeds={new_seeds!r} must be a whole number >= 0")
    return float(sum(minutes[notebook] for notebook in notebooks) * new_seeds)
