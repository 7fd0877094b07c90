"""Training curves: the ``(step, value)`` points of a held-out curve, its trend (:func:`plateau`) and whether training
has *stopped improving* (:func:`stopped_improving`, an equivalence test; the budget check of every trained row)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

def plateau(records: Sequence[dict], key: str, fraction: float = 0.25) -> tuple[float, float, float, int]:
    """``(slope, low, high, steps)``: the least-squares slope of ``key`` against the step over the last ``fraction``
    of training (at least the last two evaluations), its 95% Student-t interval, and the last step. With only two
    evaluations in that stretch the slope is exact and its interval the slope itself. This describes a curve's trend
    (Fig. 6's rise over a run); whether training has *stopped improving* is :func:`stopped_improving`'s equivalence
    test, never a slope whose interval merely holds 0."""
    from scipy import stats

    points = curve_points(records, key)
    if len(points) < 2:
        raise ValueError(f"records hold {len(points)} values of {key!r}; a slope needs at least two evaluations")
    last = points[-1][0]
    window = _last_share(points, fraction)
    window = window if len(window) >= 2 else points[-2:]
    if len(window) == 2:
        (step_a, value_a), (step_b, value_b) = window
        slope = (value_b - value_a) / (step_b - step_a)
        return slope, slope, slope, last
    slope, _, variance, spread = _fit_line(window)
    half = float(stats.t.ppf(0.975, len(window) - 2)) * _slope_error(variance, spread)
    return float(slope), float(slope - half), float(slope + half), last


def _last_share(curve: Sequence[tuple[int, float]], share: float) -> list[tuple[int, float]]:
    """The points of a step-sorted curve that lie in its last ``share`` of training (steps from its first to its
    last evaluation): the stretch every trend and stop reading below fits."""
    first, last = curve[0][0], curve[-1][0]
    return [point for point in curve if point[0] >= last - share * (last - first)]


def _fit_line(chosen: Sequence[tuple[int, float]]):
    """The least-squares line through ``chosen``: ``(slope, intercept, variance, spread)``, where ``variance`` is the
    residual variance on n - 2 degrees of freedom and ``spread`` the sum of squared step deviations (the slope's
    standard error is sqrt(variance / spread): :func:`_slope_error`)."""
    import numpy as np

    steps = np.array([step for step, _ in chosen], dtype=float)
    values = np.array([value for _, value in chosen])
    slope, intercept = np.polyfit(steps, values, 1)
    residuals = values - (slope * steps + intercept)
    return slope, intercept, float((residuals ** 2).sum()) / (len(chosen) - 2), float(((steps - steps.mean()) ** 2).sum())


def _slope_error(variance: float, spread: float) -> float:
    """The least-squares slope's standard error; infinite when every point sits at one step (no slope is known)."""
    return math.sqrt(variance / spread) if spread > 0 else math.inf


def curve_points(records: Sequence[dict], key: str) -> list[tuple[int, float]]:
    """The ``(step, value)`` pairs of ``key`` in training records (a run's ``metrics.jsonl``), sorted by step."""
    return sorted((int(record["step"]), float(record[key])) for record in records
                  if key in record and record.get(key) is not None)


# "Stopped improving" as an equivalence statement (the budget check of a trained row):
STOP_TOLERANCE = 0.1  # as many steps again may add at most this share of what training has added so far
STOP_WINDOW = 0.5  # the slope is fitted over this last share of training
STOP_MIN_POINTS = 6  # evaluations the window needs (4 degrees of freedom at least) before it can show a stop


@dataclass(frozen=True)
class Stopping:
    """:func:`stopped_improving`'s verdict on one held-out curve (oriented so that training raises it).

    ``upper`` is the one-sided 95% upper bound of the slope over the window; ``added`` = ``upper`` x ``steps`` is the
    most that training as many steps again would add at that bound; ``gain`` is what training has added so far (the
    fitted end of the window minus the curve's first evaluation) and ``tolerance`` = :data:`STOP_TOLERANCE` x gain."""

    slope: float
    upper: float
    steps: int
    gain: float
    tolerance: float
    points: int
    stopped: bool
    reason: str


def stopped_improving(points: Sequence[Sequence[float]], *, tolerance: float = STOP_TOLERANCE,
                      window: float = STOP_WINDOW, min_points: int = STOP_MIN_POINTS) -> Stopping:
    """Whether a held-out curve has been *shown* to stop improving: an equivalence test, not a significance test.

    ``points`` are ``(step, value)`` evaluations of a curve that training raises (held-out accuracy, validation F1;
    negate a loss). The slope is fitted by least squares over the last ``window`` of training; the curve has stopped
    when, at the one-sided 95% upper bound of that slope, training as many steps again (``steps`` = the last step)
    would add at most ``tolerance`` x what training has added so far. With fewer than ``min_points`` evaluations in
    the window, or a curve that has not risen at all, nothing is shown: ``stopped`` is False and ``reason`` says why.
    A slope whose interval merely holds 0 on a few noisy points proves nothing, so it is never read as a stop."""
    from scipy import stats

    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        raise ValueError(f"tolerance={tolerance!r} must be a share of the gain so far, in (0, 1)")
    if isinstance(window, bool) or not isinstance(window, (int, float)) or not 0 < window <= 1:
        raise ValueError(f"window={window!r} must be the last share of training to fit, in (0, 1]")
    if isinstance(min_points, bool) or not isinstance(min_points, int) or min_points < 3:
        raise ValueError(f"min_points={min_points!r} must be a whole number >= 3 (a slope's interval needs a residual)")
    curve = sorted((int(step), float(value)) for step, value in points)
    if not curve:
        raise ValueError("points is empty; a held-out curve needs its (step, value) evaluations")
    if any(not math.isfinite(value) for _, value in curve):
        raise ValueError(f"points={curve[:6]!r}... must hold finite values")
    last = curve[-1][0]
    chosen = _last_share(curve, window)
    if len(chosen) < min_points:
        return Stopping(math.nan, math.nan, last, math.nan, math.nan, len(chosen), False,
                        f"not shown to have stopped: {len(chosen)} evaluations in the last {window:.0%} of {last} "
                        f"steps, the equivalence test needs {min_points}")
    slope, intercept, variance, spread = _fit_line(chosen)
    upper = float(slope + stats.t.ppf(0.95, len(chosen) - 2) * _slope_error(variance, spread))
    gain = float(slope * last + intercept - curve[0][1])
    allowed = tolerance * gain
    added = upper * last
    if gain <= 0:
        return Stopping(float(slope), upper, last, gain, allowed, len(chosen), False,
                        f"not shown to have stopped: the curve has not risen over {last} steps (gain {gain:.3g})")
    stopped = added <= allowed
    verb = "stopped" if stopped else "still improving"
    return Stopping(float(slope), upper, last, gain, allowed, len(chosen), stopped,
                    f"{verb} at {last} steps: {last} more steps at the slope's upper bound add at most {added:.3g}, "
                    f"{'within' if stopped else 'above'} the tolerance {allowed:.3g} ({tolerance:g} of the {gain:.3g} "
                    "gained so far)")


def gap_curve(points: Sequence[Sequence[float]], against: Sequence[Sequence[float]]) -> list[tuple[int, float]]:
    """``points`` minus ``against`` at the steps both evaluated, sorted by step: the gap between two curves trained
    alike that :func:`gap_stopped` judges."""
    other = dict((int(step), float(value)) for step, value in against)
    if any(not math.isfinite(value) for value in other.values()):
        raise ValueError("against must hold finite values")
    return [(int(step), float(value) - other[int(step)]) for step, value in sorted(points) if int(step) in other]


def gap_stopped(points: Sequence[Sequence[float]], against: Sequence[Sequence[float]], *,
                tolerance: float = STOP_TOLERANCE, window: float = STOP_WINDOW,
                min_points: int = STOP_MIN_POINTS) -> Stopping:
    """Whether the *gap* between two held-out curves trained alike has been shown to stop changing: the same
    equivalence test as :func:`stopped_improving`, two-sided, on ``points`` minus ``against`` at the steps both
    evaluated. A finding that compares two methods trained alike (same steps, data order, learning rate and
    evaluation cadence) rests on their difference, and two curves that both keep rising with the logarithm of the
    steps can hold a constant gap: that gap, not either curve, is what more training could move.

    The gap's slope is fitted over the last ``window`` of training; it has stopped when, at *both* one-sided 95%
    bounds of that slope, as many steps again would move it by at most ``tolerance`` x what training has added to
    ``points`` (the claimed method's curve: its fitted end over the same window minus its first evaluation, as
    :func:`stopped_improving` computes its gain). A gap near 0 is judged against that gain, not against itself, so a
    method that does not beat its baseline can be shown to have stopped not beating it. ``upper`` is the larger
    magnitude of the two bounds. Nothing is shown with fewer than ``min_points`` common evaluations in the window or
    a claimed curve that has not risen."""
    from scipy import stats

    claimed = stopped_improving(points, tolerance=tolerance, window=window, min_points=min_points)
    gap = gap_curve(points, against)
    if not gap:
        raise ValueError("points and against share no evaluated step; the gap needs curves evaluated alike")
    last = gap[-1][0]
    chosen = _last_share(gap, window)
    if len(chosen) < min_points:
        return Stopping(math.nan, math.nan, last, claimed.gain, claimed.tolerance, len(chosen), False,
                        f"gap not shown to have stopped changing: {len(chosen)} common evaluations in the last "
                        f"{window:.0%} of {last} steps, the equivalence test needs {min_points}")
    if not claimed.gain > 0:
        return Stopping(math.nan, math.nan, last, claimed.gain, claimed.tolerance, len(chosen), False,
                        f"gap not shown to have stopped changing: the claimed curve has not risen over {last} steps "
                        f"(gain {claimed.gain:.3g}), so no tolerance follows from it")
    slope, intercept, variance, spread = _fit_line(chosen)
    half = float(stats.t.ppf(0.95, len(chosen) - 2)) * _slope_error(variance, spread)
    bound = max(abs(float(slope) + half), abs(float(slope) - half))
    moved, allowed = bound * last, claimed.tolerance
    stopped = moved <= allowed
    verb = "gap stopped changing" if stopped else "gap still changing"
    return Stopping(float(slope), bound, last, claimed.gain, allowed, len(chosen), stopped,
                    f"{verb} at {last} steps (now {float(slope * last + intercept):+.3g}): {last} more steps at the "
                    f"slope's 95% bounds move it by at most {moved:.3g}, {'within' if stopped else 'above'} the "
                    f"tolerance {allowed:.3g} ({tolerance:g} of the {claimed.gain:.3g} the claimed curve gained)")


def evaluation_steps(steps: int, every: int) -> list[int]:
    """The steps a run of ``steps`` steps evaluates at when it evaluates at step 0, every ``every`` steps (0: never
    in between) and at its last step."""
    return sorted({0, steps} | (set(range(every, steps + 1, every)) if every else set()))


def points_in_window(evaluated, window: float = STOP_WINDOW) -> int:
    """How many of the ``evaluated`` steps fall in the last ``window`` of training, the stretch
    :func:`stopped_improving` fits (it needs :data:`STOP_MIN_POINTS` there): what a settings table's evaluation
    cadence gives a held-out curve."""
    evaluated = sorted(evaluated)
    if not evaluated:
        return 0
    first, last = evaluated[0], evaluated[-1]
    return sum(step >= last - window * (last - first) for step in evaluated)


def mean_curve(curves: Sequence[Sequence[Sequence[float]]]) -> list[tuple[int, float]]:
    """The seed-mean of several held-out curves at the steps every one of them evaluated (a study judges it)."""
    if not curves:
        raise ValueError("curves is empty; give one (step, value) curve per seed")
    by_seed = [dict((int(step), float(value)) for step, value in curve) for curve in curves]
    common = sorted(set.intersection(*(set(curve) for curve in by_seed)))
    return [(step, sum(curve[step] for curve in by_seed) / len(by_seed)) for step in common]


# Stop power: how often the equivalence test reads a curve right at a given evaluation cadence and noise.
STOP_POWER = 0.80  # a curve that stopped must read "stopped" at least this often
MOVING_POWER = 0.95  # a curve still rising MOVING_RISE per 100 steps must read "still improving" at least this often
MOVING_RISE = 3.0  # points per 100 steps (0.03 on a curve of shares)


def moving_rise(points: Sequence[Sequence[float]]) -> float:
    """:data:`MOVING_RISE` in a curve's own units: 3 points per 100 steps on a curve in points (F1 x 100), 0.03 on
    one of shares (an accuracy in 0..1, whose values all lie within [-1, 1])."""
    return MOVING_RISE / 100 if all(abs(float(value)) <= 1 for _, value in points) else MOVING_RISE


def residual_noise(points: Sequence[Sequence[float]], window: float = STOP_WINDOW) -> float:
    """A curve's evaluation noise as the equivalence test sees it: the standard deviation of the residuals around the
    least-squares line over the last ``window`` of training (the fit :func:`stopped_improving` makes)."""
    curve = sorted((int(step), float(value)) for step, value in points)
    if len(curve) < 3:
        raise ValueError(f"points holds {len(curve)} evaluations; a residual needs at least 3")
    chosen = _last_share(curve, window)
    chosen = chosen if len(chosen) >= 3 else curve[-3:]
    return float(math.sqrt(_fit_line(chosen)[2]))


@dataclass(frozen=True)
class StopPower:
    """:func:`stop_power`'s reading: how often a stopped curve reads "stopped" and a rising one "still improving"."""

    steps: int
    every: int
    noise: float
    gain: float
    stopped: float  # share of draws of a curve flat over its last two thirds read "stopped"
    moving: float  # share of draws of a curve rising MOVING_RISE per 100 steps read "still improving"

    @property
    def enough(self) -> bool:
        return self.stopped >= STOP_POWER and self.moving >= MOVING_POWER


def stop_power(*, steps: int, every: int, noise: float, gain: float, rise: float = MOVING_RISE, draws: int = 2000,
               seed: int = 0, tolerance: float = STOP_TOLERANCE, gap: bool = False) -> StopPower:
    """Simulated power of :func:`stopped_improving` at an evaluation every ``every`` of ``steps`` steps, evaluation
    noise ``noise`` (normal, in the curve's units) and a curve that gains ``gain``: a stopped curve rises linearly to
    ``gain`` over the first third of training and stays flat; a moving one reaches ``gain`` at the window's start
    and keeps rising ``rise`` per 100 steps (in the curve's units: :func:`moving_rise`). Each is drawn ``draws``
    times with fresh noise. A rise that adds less than the tolerance over as many steps again is, by the test's own
    definition, a stop: at 100 steps a curve that gained 80 points and rises 3 a hundred steps reads "stopped"; the
    moving target is reachable only at lengths where ``rise x steps / 100`` exceeds ``tolerance x gain``.

    With ``gap=True`` it is :func:`gap_stopped`'s power on two curves trained alike: both follow the stopped shape
    above; in the stopped case their gap stays constant, in the moving one the claimed curve pulls away ``rise`` per
    100 steps from the window's start. ``noise`` is then the *gap's* noise (each curve draws ``noise`` / sqrt 2)."""
    import numpy as np

    for name, value in (("steps", steps), ("every", every), ("draws", draws)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number >= 1")
    if not noise >= 0 or not gain > 0:
        raise ValueError(f"noise={noise!r} must be >= 0 and gain={gain!r} > 0")
    at = np.array(evaluation_steps(steps, every), dtype=float)
    flat = gain * np.minimum(at / (steps / 3), 1.0)
    start = steps * (1 - STOP_WINDOW)
    moving = np.where(at < start, gain * at / start, gain + rise / 100 * (at - start))
    rng = np.random.default_rng(seed)
    if gap:
        pulling = np.where(at < start, 0.0, rise / 100 * (at - start))
        each = noise / math.sqrt(2)
        draw = lambda shape: list(zip(at, shape + each * rng.standard_normal(len(at))))  # noqa: E731
        shares = [float(np.mean([gap_stopped(draw(flat + extra), draw(flat), tolerance=tolerance).stopped == wanted
                                 for _ in range(draws)]))
                  for extra, wanted in ((0.0, True), (pulling, False))]
        return StopPower(steps, every, float(noise), float(gain), *shares)
    shares = []
    for curve, wanted in ((flat, True), (moving, False)):
        reads = [stopped_improving(list(zip(at, curve + noise * rng.standard_normal(len(at)))),
                                   tolerance=tolerance).stopped for _ in range(draws)]
        shares.append(float(np.mean([read == wanted for read in reads])))
    return StopPower(steps, every, float(noise), float(gain), *shares)


def cadence_for(*, steps: int, noise: float, gain: float, most: int | None = None, **simulation) -> int | None:
    """The sparsest evaluation cadence (the largest ``every`` dividing ``steps``, at most ``most``) at which
    :func:`stop_power` reaches both targets for a curve of this noise and gain; None when even an evaluation every
    step does not."""
    candidates = [every for every in range(1, (most or steps) + 1) if steps % every == 0]
    for every in sorted(candidates, reverse=True):
        if stop_power(steps=steps, every=every, noise=noise, gain=gain, **simulation).enough:
            return every
    return None


@dataclass(frozen=True)
class TrainedToStop:
    """:func:`train_to_stop`'s outcome: the length trained, each round's length, the last reading of the curve, and
    whether it stopped or reached its cap (a capped curve is *not* stopped: its rows cannot read "no")."""

    steps: int
    rounds: tuple[int, ...]
    stopping: Stopping
    capped: bool
    minutes: float

    @property
    def text(self) -> str:
        ending = (f"reached its cap at {self.steps} steps ({self.minutes:.1f} min) without a shown stop"
                  if self.capped else f"shown stopped at {self.steps} steps")
        return f"{ending}; rounds {list(self.rounds)}; {self.stopping.reason}"


def train_to_stop(train_to, *, start: int, cap_steps: int, cap_minutes: float = math.inf, grow: int = 2,
                  clock=None) -> TrainedToStop:
    """Train in extension rounds until the held-out curve is shown stopped (:func:`stopped_improving`) or a cap:
    ``train_to(steps)`` trains the run to ``steps`` (extending it: ``helpers.training.train`` continues a run from
    its checkpoint) and returns its ``(step, value)`` curve; the rounds are ``start``, ``grow`` x that, ... up to
    ``cap_steps``, and no round starts once ``cap_minutes`` of its own time have passed."""
    import time

    for name, value in (("start", start), ("cap_steps", cap_steps), ("grow", grow)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (2 if name == "grow" else 1):
            raise ValueError(f"{name}={value!r} must be a whole number >= {2 if name == 'grow' else 1}")
    if cap_steps < start:
        raise ValueError(f"cap_steps={cap_steps} is below start={start}")
    clock = clock or time.perf_counter
    began, rounds, steps = clock(), [], start
    while True:
        stopping = stopped_improving(train_to(steps))
        rounds.append(steps)
        minutes = (clock() - began) / 60
        if stopping.stopped:
            return TrainedToStop(steps, tuple(rounds), stopping, False, minutes)
        if steps >= cap_steps or minutes >= cap_minutes:
            return TrainedToStop(steps, tuple(rounds), stopping, True, minutes)
        steps = min(steps * grow, cap_steps)
