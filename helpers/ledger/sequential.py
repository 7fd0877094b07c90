"""A seed study with a plan fixed before it starts: looks at 3, then 5, then 8 seeds under Pocock's group-sequential
boundary, futility stops, and where the next look's compute should go.

Repeated looks at the same claims inflate the chance of a false "reproduced" (or "not reproduced"): at three looks,
each at 95%, a null effect crosses at some look in about 11% of studies, not 5%. Pocock (1977) keeps the overall
level by using one stricter nominal level at every look: the constant ``c`` with

    P(max_k |Z_k| >= c) = alpha  under no effect,  Z_k = S_{n_k} / sqrt(n_k),  corr(Z_i, Z_j) = sqrt(n_i / n_j),

for looks after n_1 < n_2 < ... < n_K seeds (Jennison & Turnbull 2000, §2.2; for three equally spaced looks at
alpha = 0.05, c = 2.289, nominal level 97.8%). Pocock's constant is right for normal statistics, but a row's interval
over few seeds is a Student t interval: read at 97.8% at looks after 3, 5 and 8 seeds it crosses in about 5.6% of
null studies. :func:`t_rule_level` calibrates the one level every look is read at for the rule the ledger applies (t
over the seeds, its heavier tails at 2 and 4 degrees of freedom included) by simulation, to ``alpha`` overall; that is
:attr:`SequentialPlan.level`. The examples' term, nested (every seed scores the same examples, so their noise is one
offset common to the seeds, added in quadrature at the same level), only widens the interval: with it the overall
level stays at or under ``alpha`` (tested by simulating the whole rule).

At a look, each trained row is either decided (the one verdict rule, at the look's level), or undecided and then:

- **examples-dominated** when at the last look the examples' term would still be the larger: more test examples or
  sampling draws narrow it, not more seeds;
- else **futile** when even the last look could not decide it: the interval projected to ``looks[-1]`` seeds at
  today's seed spread and examples' half-width, centred at today's mean, still reaches the nearest decision boundary;
- else **seeds-dominated**: more seeds narrow it.

Each notebook's next look goes where it narrows its live rows most per CPU-minute (:func:`allocate`): from each row's
own two terms, the expected half-width after more seeds (the plan's next seed count) or after an **examples look**
(never for a row whose examples cannot grow: an earlier examples look left its count unchanged), divided by what each
look costs; a notebook with no live row stops. In an examples look the same seeds' trained runs score
``examples_factor`` times the test examples, prompts or draws (``WORKBOOK_EXAMPLES``; no run key holds an evaluation's
size, so nothing retrains). Either kind is one of the plan's looks, so a notebook has at most ``len(looks)`` of them
(:meth:`SequentialPlan.check_schedule`), every one read at the same level. Where the examples carry no noise an
examples look gives the seeds' values again, so it adds no chance of crossing; where they do, the simulation of the
whole rule covers it. Each look's cost is stated before it starts (:func:`look_cost`).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

from .. import metrics
from .rows import Claim, reason_of

DEFAULT_LOOKS = (3, 5, 8)

# Minutes one new seed of each notebook takes at the cpu profile on the 2-core machine, its runs trained from empty
# (the largest of the study's three seeds at the runs' length-free keys; each notebook after 02 on notebook 02's
# adapter of the seed, found trained). Notebook 04's is seed 0's whole notebook while its six taggers trained 400
# steps (extending them from 400 to 800, other work sharing the cores). A look's cost is stated from these before it
# starts.
CPU_MINUTES_PER_SEED = {"02": 6.2, "03": 13.4, "04": 49.1, "05": 4.4, "06": 8.9, "07": 4.0}
# The same with every run found trained (its cells' time): what an examples look re-runs, its evaluations scaled (the
# examples look's cost is stated as these times the scale, an upper bound: timing and loading cells do not grow).
CPU_MINUTES_PER_CACHED_SEED = {"02": 0.3, "03": 3.6, "04": 2.5, "05": 3.5, "06": 2.8, "07": 3.1}


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


T_RULE_DRAWS = 400_000  # simulated null studies behind the calibrated level (its Monte Carlo sd at 5%: 0.03 points)


@functools.lru_cache(maxsize=None)
def t_rule_level(looks: tuple[int, ...], alpha: float = 0.05, draws: int = T_RULE_DRAWS, seed: int = 0) -> float:
    """The one level every look's t interval over the seeds is read at so that, under no effect, some look of a study
    with looks after ``looks`` seeds excludes 0 with probability ``alpha``: simulated null studies (standard normal
    seed values, the same draws for every candidate level), the crossing rate solved for the level by bisection.
    At looks after 3, 5 and 8 seeds and alpha 0.05 it is about 98.0%, where Pocock's normal 97.8% gives 5.6%."""
    import numpy as np
    from scipy import optimize, stats

    looks = _check_looks(tuple(looks))
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must lie in (0, 1)")
    values = np.random.default_rng(seed).standard_normal((int(draws), looks[-1]))
    t_statistics = []
    for n in looks:
        first = values[:, :n]
        t_statistics.append(np.abs(first.mean(axis=1)) / (first.std(axis=1, ddof=1) / math.sqrt(n)))

    def crossing(level: float) -> float:
        crossed = np.zeros(len(values), dtype=bool)
        for n, t in zip(looks, t_statistics):
            crossed |= t > stats.t.ppf(0.5 + level / 2, n - 1)
        return float(crossed.mean()) - alpha

    return float(optimize.brentq(crossing, 1 - alpha, 1 - alpha / (10 * len(looks)), xtol=1e-6))


@dataclass(frozen=True)
class SequentialPlan:
    """The plan: look after each count of seeds in ``looks``, overall two-sided level ``alpha`` (Pocock)."""

    looks: tuple[int, ...] = DEFAULT_LOOKS
    alpha: float = 0.05
    examples_factor: int = 2  # an examples look scores this many times the previous look's test examples

    def __post_init__(self):
        object.__setattr__(self, "looks", _check_looks(self.looks))
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, float) or not 0 < self.alpha < 1:
            raise ValueError(f"alpha={self.alpha!r} must be a number in (0, 1), e.g. 0.05")
        if isinstance(self.examples_factor, bool) or not isinstance(self.examples_factor, int) or self.examples_factor < 2:
            raise ValueError(f"examples_factor={self.examples_factor!r} must be a whole number >= 2 (how many times "
                             "the test examples an examples look scores)")

    @property
    def critical_value(self) -> float:
        return pocock_critical_value(self.looks, self.alpha)

    @property
    def nominal_alpha(self) -> float:
        """The two-sided level each look's interval is read at, ``1 - level``."""
        return 1.0 - self.level

    @property
    def level(self) -> float:
        """Every look's interval level: :func:`t_rule_level` for the plan's looks (about 98.0% for looks after 3, 5
        and 8 seeds at alpha 0.05), calibrated for the t rule over seeds; Pocock's normal-theory level,
        :attr:`pocock_level`, would be 97.8% there."""
        return t_rule_level(self.looks, self.alpha)

    @property
    def pocock_level(self) -> float:
        """Pocock's normal-theory level for the plan's looks, ``1 - 2(1 - Φ(c))`` from :attr:`critical_value`: right
        for normal statistics, too loose for a t interval over few seeds (what :attr:`level` corrects)."""
        from scipy import stats

        return float(1 - 2 * stats.norm.sf(self.critical_value))

    def look_number(self, seeds: int) -> int:
        """Which look (1-based) ``seeds`` seeds make; an error when the plan has no look after that many."""
        if seeds not in self.looks:
            raise ValueError(f"seeds={seeds!r}: the plan looks after {list(self.looks)} seeds only")
        return self.looks.index(seeds) + 1

    def seeds_schedule(self, seeds: int) -> tuple[tuple[int, int], ...]:
        """The looks a study of ``seeds`` seeds read with seeds alone: ((3, 1), (5, 1), ...) up to ``seeds``, each
        (seeds, examples scale); an error when the plan has no look after ``seeds`` seeds."""
        number = self.look_number(seeds)
        return tuple((count, 1) for count in self.looks[:number])

    def check_schedule(self, schedule) -> tuple[tuple[int, int], ...]:
        """``schedule`` (the looks a notebook's study read, each (seeds, examples scale)) as a tuple, when this plan
        allows it: the first look after ``looks[0]`` seeds at the notebook's own examples, each next look either the
        plan's next seed count at the same scale or the same seeds at ``examples_factor`` times the examples, at most
        ``len(looks)`` looks; else an error naming it."""
        try:
            found = tuple((int(count), int(scale)) for count, scale in schedule)
        except (TypeError, ValueError):
            found = ()
        allowed = bool(found) and len(found) <= len(self.looks) and found[0] == (self.looks[0], 1)
        for (count, scale), (then, then_scale) in zip(found, found[1:]):
            more_seeds = then_scale == scale and count in self.looks[:-1] and \
                then == self.looks[self.looks.index(count) + 1]
            allowed = allowed and (more_seeds or (then == count and then_scale == scale * self.examples_factor))
        if not allowed:
            raise ValueError(f"schedule={schedule!r} is not a schedule of this plan: looks of (seeds, examples scale) "
                             f"starting at ({self.looks[0]}, 1), each next one adding seeds (to the next of "
                             f"{list(self.looks)}) or multiplying the examples by {self.examples_factor}, at most "
                             f"{len(self.looks)} looks")
        return found

    def next_look(self, schedule, allocation: str) -> tuple[int, int] | None:
        """The look after ``schedule``'s last for a notebook allocated ``allocation`` (:func:`allocate`): more seeds
        at the same examples, the same seeds at ``examples_factor`` times the examples, or None (it stops: the plan's
        looks are spent, the seeds are the last look's, or it was allocated ``"stop"``)."""
        schedule = self.check_schedule(schedule)
        count, scale = schedule[-1]
        if allocation not in ("seeds", "examples", "stop"):
            raise ValueError(f"allocation={allocation!r} must be 'seeds', 'examples' or 'stop'")
        if allocation == "stop" or len(schedule) == len(self.looks):
            return None
        if allocation == "examples":
            return count, scale * self.examples_factor
        return None if count == self.looks[-1] else (self.looks[self.looks.index(count) + 1], scale)

    def describe(self) -> str:
        return (f"at most {len(self.looks)} looks, each adding seeds (to {', '.join(map(str, self.looks))}) or, where "
                f"an examples look narrows more per CPU-minute, scoring {self.examples_factor}x the test examples on "
                f"the same runs; every look's t interval is read at {100 * self.level:.1f}%, the level simulated to "
                f"keep the overall two-sided level at {100 * self.alpha:g}% (Pocock's normal-theory boundary, "
                f"c = {self.critical_value:.3f}, would read {100 * self.pocock_level:.1f}%)")


@dataclass(frozen=True)
class LookState:
    """An undecided row at a look: whether the last look could still decide it, which term dominates there, and its
    two terms today (``seeds`` seeds of standard deviation ``sd``; the examples' half-width at the plan's level),
    from which :meth:`half_after` projects either kind of next look."""

    futile: bool
    projected_half: float  # the interval's half-width projected to the plan's last look
    distance: float  # from today's mean to the nearest decision boundary
    examples_dominated: bool
    seeds: int = 0
    sd: float = 0.0
    examples_half: float = 0.0
    examples_grow: bool = True  # False: an earlier examples look left its count unchanged

    def half_after(self, look: str, plan: "SequentialPlan") -> float:
        """The half-width expected at the plan's level after ``look``: ``"now"``; ``"seeds"``, the plan's next seed
        count at today's SD; ``"examples"``, ``examples_factor`` times the examples (their half-width over
        sqrt(factor)), today's seeds. An examples look leaves a row whose examples cannot grow as it is."""
        from scipy import stats

        seeds = self.seeds
        if look == "seeds":
            later = [count for count in plan.looks if count > seeds]
            seeds = later[0] if later else seeds
        elif look not in ("now", "examples"):
            raise ValueError(f"look={look!r} must be 'now', 'seeds' or 'examples'")
        shrink = math.sqrt(plan.examples_factor) if look == "examples" and self.examples_grow else 1.0
        seeds_half = float(stats.t.ppf(0.5 + plan.level / 2, seeds - 1)) * self.sd / math.sqrt(seeds)
        return math.hypot(seeds_half, self.examples_half / shrink)

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
               margin: float | None = None, plan: SequentialPlan = SequentialPlan(),
               examples_grow: bool = True) -> LookState:
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
    return LookState(futile=distance <= projected and not (examples_dominated and examples_grow),
                     projected_half=projected, distance=distance, examples_dominated=examples_dominated,
                     seeds=len(values), sd=sd, examples_half=examples_half, examples_grow=examples_grow)


def row_state(row: Claim, plan: SequentialPlan = SequentialPlan(), examples_grow: bool = True) -> LookState | None:
    """The :class:`LookState` of a study's combined trained row (:func:`helpers.ledger.study.combine_seeds` at
    ``plan``'s level), or None when more seeds cannot change it: it is decided, or its reason for being inconclusive
    (:func:`helpers.ledger.rows.reason_of`) is one seeds do not fix (no check, a confound, another regime, a baseline
    not shown to work, the contradicting side waiting for its training to be shown stopped). The examples' term is the
    combined interval's, half² = seeds' half² + examples' half², both at the plan's level."""
    from scipy import stats

    if not (row.trained and row.verdict == "inconclusive" and row.seed_values and len(row.seed_values) > 1):
        return None
    reason = reason_of(row)
    if reason is not None and not reason.more_seeds_help:
        return None
    seeds_half = metrics.mean_ci95(list(row.seed_values), plan.level)[1]
    examples_half = math.sqrt(max(((row.high - row.low) / 2) ** 2 - seeds_half ** 2, 0.0))
    examples_95 = examples_half * float(stats.norm.ppf(0.975) / stats.norm.ppf((1 + plan.level) / 2))
    return look_state(row.seed_values, [examples_95] * len(row.seed_values), threshold=row.threshold,
                      margin=row.margin, plan=plan, examples_grow=examples_grow)


def examples_grow(counts_by_scale: dict[int, int | None]) -> bool:
    """Whether a row's test examples can still grow, from its example count ``n`` at each examples scale it was read
    at: not when the last examples look left the count where the one before it was (all the data holds: MAGNET
    Table 4's passages, EMAT's labels) or when it never grew at all."""
    counts = [count for _, count in sorted(counts_by_scale.items())]
    return len(counts) < 2 or counts[-1] is None or counts[-2] is None or counts[-1] > counts[-2]


def look_gains(states: Sequence[LookState], plan: SequentialPlan) -> dict[str, float]:
    """Per kind of next look ("seeds", "examples"), the live (not futile) rows' summed share of today's half-width
    that look is expected to remove (each row's own two terms, :meth:`LookState.half_after`); 0 where the look
    cannot help (no later seed count; no row whose examples grow)."""
    gains = {"seeds": 0.0, "examples": 0.0}
    for state in states:
        if state.futile:
            continue
        now = state.half_after("now", plan)
        for look in gains:
            if now > 0:
                gains[look] += (now - state.half_after(look, plan)) / now
    return gains


def allocate(states: dict[str, Sequence[LookState]], plan: SequentialPlan = SequentialPlan(),
             minutes: dict[str, dict[str, float]] | None = None) -> dict[str, str]:
    """Per notebook, what its next look gets: the kind ("seeds" or "examples") with the larger expected half-width
    reduction per CPU-minute (:func:`look_gains` over the minutes that look costs: ``minutes[notebook][kind]``, by
    default :func:`look_cost` for the plan's next seed count and :func:`examples_look_cost` for an examples look);
    ``"stop"`` when neither can narrow a live row."""
    allocation = {}
    for notebook, found in states.items():
        gains = look_gains(found, plan)
        seeds = max((state.seeds for state in found), default=plan.looks[0])
        later = [count for count in plan.looks if count > seeds]
        cost = (minutes or {}).get(notebook) or {
            "seeds": look_cost([notebook], later[0] - seeds) if later and notebook in CPU_MINUTES_PER_SEED else 1.0,
            "examples": examples_look_cost([notebook], seeds, plan.examples_factor)
            if notebook in CPU_MINUTES_PER_CACHED_SEED else 1.0}
        rates = {look: gain / max(float(cost[look]), 1e-9) for look, gain in gains.items() if gain > 1e-12}
        allocation[notebook] = max(rates, key=rates.get) if rates else "stop"
    return allocation


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


def examples_look_cost(notebooks: Sequence[str], seeds: int, scale: int,
                       minutes: dict[str, float] | None = None) -> float:
    """Minutes an examples look takes: ``seeds`` seeds of each notebook in ``notebooks`` re-run on their trained
    runs at ``scale`` times the test examples, at :data:`CPU_MINUTES_PER_CACHED_SEED` (or ``minutes``) times
    ``scale``."""
    minutes = CPU_MINUTES_PER_CACHED_SEED if minutes is None else minutes
    unknown = [notebook for notebook in notebooks if notebook not in minutes]
    if unknown:
        raise ValueError(f"notebooks={list(notebooks)!r}: no measured minutes per cached seed for {unknown}")
    for name, value in (("seeds", seeds), ("scale", scale)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number >= 1")
    return float(sum(minutes[notebook] for notebook in notebooks) * seeds * scale)
