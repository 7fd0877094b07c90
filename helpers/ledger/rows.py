"""A ledger row (:class:`Claim`) and the one verdict rule (:func:`verdict_of`), symmetric: each verdict needs a check.

Why a row is *inconclusive* is said once, by :func:`reason_of`: the verdict reads it (a row with a reason is
inconclusive), the row's text says it (:attr:`Claim.verdict_text`), the headline counts it
(:func:`helpers.ledger.render.tally`) and the sequential plan reads whether more seeds could change it
(:func:`helpers.ledger.sequential.row_state`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import metrics
from .fields import (DECIDED, DEFINITION, EXACT, FINDING, MEASUREMENT, STUDY_MIN_SEEDS, _finite, _text, check_curve,
                     check_shared, number)


@dataclass(frozen=True)
class Claim:
    """One row of the ledger. ``low``/``high`` bound our value's (or the effect's) 95% interval; ``method`` says
    how it was obtained ("bootstrap over 32 prompts", "seeds x examples", or ``"exact"`` for a deterministic
    identity such as a mask drawn from its definition, whose interval is the value itself).

    The verdict is never typed: :func:`verdict_of` computes it from the row, by one rule per kind.

    - ``kind="finding"``: a paper's claim. ``direction=+1`` (or -1) says the paper's effect lies above (below)
      ``threshold``; ``margin`` turns the row into a "matches" claim (the effect lies within ``threshold ± margin``),
      with ``margin_source`` saying whose margin it is ("paper: ..." or "ours: ..."). A row that rests on training
      (``trained=True``) may be *not reproduced* only when ``plateau`` (its held-out curve, :func:`curve`) shows
      that training stopped improving.
    - ``kind="definition check"``: the code does what a definition says (exact); ``holds`` gives *holds*/*fails*.
      Counted apart from the papers' findings.
    - A finding that beats a ``baseline`` says whether that baseline was shown to work (``baseline_works``: it beats a
      simpler baseline, or its own curve flattened); a method cannot be *reproduced* against a broken baseline.
    - ``kind="measurement"``: a number the paper does not compare (``direction=0``): always *inconclusive*.
    - ``confound``: a reason, measured in the same run, why the interval's quantity does not measure the claim there
      (e.g. the row that the judge's perplexity prefers also repeats itself more, and perplexity rewards repetition).
      A confounded finding is *inconclusive* whatever its interval, and says why.

    The fields it shares with its declaration (:data:`~helpers.ledger.fields.SHARED_FIELDS`) are validated by
    :func:`~helpers.ledger.fields.check_shared`. A ``verdict`` passed in must equal the computed one (so a row read
    back from a ledger is re-checked).
    """

    notebook: str
    paper: str
    where: str
    claim: str
    paper_value: str
    ours: str
    low: float | None
    high: float | None
    method: str
    n: int | None
    verdict: str = ""
    check: str = ""
    figure: str = ""
    quantity: str = ""
    kind: str = FINDING
    direction: int = 1
    threshold: float = 0.0
    margin: float | None = None
    margin_source: str = ""
    holds: bool | None = None
    trained: bool = False
    plateau: dict | None = None
    n_seeds: int | None = None
    seed_values: tuple = ()
    baseline: str = ""
    baseline_works: bool | None = None
    confound: str = ""
    value: float | None = None  # the point estimate the interval is around: what a seed study averages over seeds
    id: str = ""  # the declared claim's stable id (``Declared.id``): what joins seeds and studies
    dataset: str = ""  # the data actually used, where it is not the paper's
    regime: str = ""  # how the hardware regime differs from the paper's, where it matters for the quantity
    note: str = ""  # what this run measured beside the claim (shown after it)
    # the minimum detectable effect at 80% power of this row's own interval (metrics.minimum_detectable_effect):
    # the smallest distance from the threshold it would decide four times in five; None where it has none
    mde: float | None = None
    paper_effect: float | None = None  # the paper's effect in our units (distance from the threshold), where stated

    def __post_init__(self):
        check_shared(self)
        for name in ("claim", "ours", "method"):
            _text(self, name)
        self._check_interval()
        self._check_rule()
        if self.plateau is not None:
            object.__setattr__(self, "plateau", check_curve(self.plateau))
        object.__setattr__(self, "seed_values", tuple(float(value) for value in self.seed_values))
        if self.seed_values and self.n_seeds != len(self.seed_values):
            raise ValueError(f"n_seeds={self.n_seeds!r} but {len(self.seed_values)} seed_values were given")
        computed = verdict_of(self)
        if self.verdict and self.verdict != computed:
            raise ValueError(f"verdict={self.verdict!r} does not follow from the row: its interval "
                             f"[{self.low}, {self.high}] under the {self.kind} rule gives {computed!r}")
        object.__setattr__(self, "verdict", computed)

    def _check_interval(self) -> None:
        if self.method == EXACT:
            if (self.low is None) != (self.high is None):
                raise ValueError(f"low={self.low!r}, high={self.high!r}: give both or neither")
            return
        for name in ("low", "high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name}={value!r} must be a finite number (method={self.method!r} is not 'exact')")
        if self.low > self.high:
            raise ValueError(f"low={self.low!r} > high={self.high!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n={self.n!r} must be a whole number >= 1 (examples or seeds behind the interval)")

    def _check_rule(self) -> None:
        if self.kind == DEFINITION:
            if self.method != EXACT or not isinstance(self.holds, bool):
                raise ValueError("a definition check is exact (method='exact') and says whether it holds (holds=True "
                                 f"or False); got method={self.method!r}, holds={self.holds!r}")
            return
        if self.holds is not None:
            raise ValueError(f"holds={self.holds!r} is for definition checks; kind={self.kind!r} rows get their "
                             "verdict from the interval")
        if self.method == EXACT:
            raise ValueError(f"kind={self.kind!r} needs an interval; an exact identity is a definition check")
        if not isinstance(self.note, str):
            raise ValueError(f"note={self.note!r} must be a string")
        if self.baseline and not isinstance(self.baseline_works, bool):
            raise ValueError(f"baseline={self.baseline!r} needs baseline_works=True or False: was it shown to work "
                             "(it beats a simpler baseline, or its own curve has flattened)?")
        _finite(self, "value", "", "the row's point estimate")
        if not isinstance(self.confound, str):
            raise ValueError(f"confound={self.confound!r} must be a string saying what confounds the row, or ''")
        _finite(self, "mde", "", "the minimum detectable effect at 80% power", at_least=0)

    @property
    def single_seed(self) -> bool:
        """Whether a trained row rests on fewer than :data:`STUDY_MIN_SEEDS` training seeds: one run's interval covers
        its test examples, not initialisation, data order and dropout, so it cannot speak for the method."""
        return self.trained and (self.n_seeds or 1) < STUDY_MIN_SEEDS

    @property
    def single_seed_text(self) -> str:
        return (f"{self.n_seeds or 1} training seed (its interval covers the test examples, not the seeds); a seed "
                f"study of at least {STUDY_MIN_SEEDS} seeds decides it (make study)")

    @property
    def underpowered(self) -> bool:
        """Whether an inconclusive decided row could not have detected the paper's own effect: its minimum detectable
        effect (80% power) exceeds the paper's effect in our units. Needs both numbers."""
        return self.kind in DECIDED and self.verdict == "inconclusive" and _cannot_detect(self)

    @property
    def stopping(self):
        """:func:`helpers.metrics.stopped_improving` on the held-out curve the row rests on, or
        :func:`helpers.curves.gap_stopped` on its gap to the compared curve (``"against"``, a declared gap); None
        without one."""
        if self.plateau is None:
            return None
        if "against" in self.plateau:
            return metrics.gap_stopped(self.plateau["points"], self.plateau["against"])
        return metrics.stopped_improving(self.plateau["points"])

    @property
    def still_improving(self) -> bool:
        """Whether a trained row's training is *not shown* to have stopped improving: no held-out curve, a curve of
        too few points, or a curve whose upper slope, over as many steps again, adds more than the tolerance
        (:func:`helpers.metrics.stopped_improving`)."""
        if not self.trained:
            return False
        stopping = self.stopping
        return stopping is None or not stopping.stopped

    @property
    def budget_text(self) -> str:
        """Why training is (or is not) shown to have stopped improving, in one phrase."""
        stopping = self.stopping
        if stopping is None:
            return "not shown to have stopped (no held-out curve recorded)"
        return f"{self.plateau['curve']}: {stopping.reason}"

    @property
    def verdict_text(self) -> str:
        """The verdict in bold, with a decided-kind row's reason (:func:`reason_of`) when it is inconclusive and its
        check when it is *not reproduced*."""
        text = f"**{self.verdict}**"
        if self.kind not in DECIDED or self.verdict == "reproduced":
            return text
        if self.verdict == "not reproduced":
            return text + f"; check: {self.check}"
        reason = reason_of(self)
        return text + (f": {reason.text}" if reason.text else "")

    @property
    def interval_text(self) -> str:
        if self.method == EXACT:
            return "exact (deterministic)"
        seeds = f", {self.n_seeds} seeds" if self.n_seeds else ""
        return f"[{number(self.low)}, {number(self.high)}] ({self.method}, n = {self.n}{seeds})"


@dataclass(frozen=True)
class Reason:
    """Why a row is inconclusive: ``short``, as the headline counts it; ``text``, as its verdict says it (``""``: the
    bare interval says it); ``more_seeds_help``: whether more seeds of a study could change it (the plan's question:
    a confound, a missing check, another regime, a baseline not shown to work or a stop not shown they cannot)."""

    short: str
    text: str
    more_seeds_help: bool


CONFOUNDED, NO_CHECK, REGIME, BASELINE = "confounded", "no check", "another hardware regime", "baseline not shown to work"
ONE_SEED, STILL_MOVING = "one training seed (a study decides)", "contradicting side, stop not shown"
UNDERPOWERED = "underpowered here (the design cannot detect the paper's effect)"
STRADDLES = "interval straddles the paper's threshold"


def _whatever_the_interval(row: Claim) -> Reason | None:
    """What keeps ``row`` from either verdict whatever its interval: the first of a confound, no check, another
    hardware regime, a baseline not shown to work and one training seed."""
    if row.confound:
        return Reason(CONFOUNDED, f"confounded: {row.confound}", False)
    if not row.check.strip():
        return Reason(NO_CHECK, "no check (a test ruling out our own bug) is declared, so neither verdict can be "
                                "reached", False)
    if row.regime:
        return Reason(REGIME, f"measured in another regime than the paper's ({row.regime})", False)
    if row.baseline_works is False:
        return Reason(BASELINE, f"the baseline ({row.baseline}) was not shown to work", False)
    if row.single_seed:
        return Reason(ONE_SEED, row.single_seed_text, True)
    return None


def reason_of(row: Claim) -> Reason | None:
    """Why ``row`` (of a kind the rule decides, or a measurement) is *inconclusive*: the first that applies of a
    confound, no check, another hardware regime, a baseline not shown to work, one training seed, an interval on the
    contradicting side whose training is not shown to have stopped, a design that cannot detect the paper's effect,
    and an interval that straddles the threshold. None when its interval decides it: wholly on the paper's side, or
    wholly on the other with training (if any) shown to have stopped."""
    blocked = _whatever_the_interval(row)
    if blocked is not None:
        return blocked
    if _agrees(row):
        return None
    if beyond_paper_side(row):
        return Reason(STILL_MOVING, f"wholly on the contradicting side, but {row.budget_text}", False) \
            if row.still_improving else None
    if _cannot_detect(row):
        return Reason(UNDERPOWERED, f"underpowered here: detects at least {number(row.mde)} (the paper's effect: "
                                    f"{number(abs(row.paper_effect))}, 80% power)", True)
    return Reason(STRADDLES, "", True)


NOT_STOPPED = "trained on a curve not shown stopped"


def what_blocks_no(row: Claim) -> str | None:
    """Why a finding or reference claim could not read *not reproduced* in this ledger, whatever its interval: the
    first of a confound, no check, another hardware regime, a baseline not shown to work, one training seed, and a
    trained row whose held-out curve is not shown to have stopped (the rule reads "no" only from a stopped curve).
    None when an interval on the contradicting side would read *not reproduced*."""
    blocked = _whatever_the_interval(row)
    if blocked is not None:
        return blocked.short
    return NOT_STOPPED if row.still_improving else None


def verdict_of(row: Claim) -> str:
    """The one verdict rule, symmetric: each verdict needs a check.

    - definition check: *holds* or *fails*; measurement: *inconclusive*;
    - finding or reference claim: *inconclusive* while it has a reason (:func:`reason_of`: a confound, no ``check``,
      a ``regime`` other than the paper's, a ``baseline`` not shown to work, fewer than :data:`STUDY_MIN_SEEDS`
      training seeds, ...); otherwise *reproduced* when the interval lies wholly on the paper's side of ``threshold``
      (for a "matches" claim, wholly within ``threshold ± margin``), *not reproduced* when it lies wholly on the
      other side and (for a trained row) training was shown to have stopped improving
      (:func:`helpers.metrics.stopped_improving`). The paper's value lying inside our interval is never a
      reproduction.
    """
    if row.kind == DEFINITION:
        return "holds" if row.holds else "fails"
    if row.kind == MEASUREMENT or reason_of(row) is not None:
        return "inconclusive"
    return "reproduced" if _agrees(row) else "not reproduced"


def _cannot_detect(row: Claim) -> bool:
    return row.mde is not None and row.paper_effect is not None and row.mde > abs(row.paper_effect)


def beyond_paper_side(row: Claim) -> bool:
    """Whether the interval lies wholly on the side that contradicts the paper."""
    lo, hi = row.low - row.threshold, row.high - row.threshold
    if row.margin is not None:
        return hi <= -row.margin or lo >= row.margin
    lo, hi = (lo, hi) if row.direction == 1 else (-hi, -lo)
    return hi < 0


def _agrees(row: Claim) -> bool:
    """Whether the interval lies wholly on the paper's side (for a "matches" claim: wholly within the margin)."""
    lo, hi = row.low - row.threshold, row.high - row.threshold
    if row.margin is not None:
        return -row.margin < lo and hi < row.margin
    return (lo > 0) if row.direction == 1 else (hi < 0)


def interval_decides(row: Claim) -> bool:
    """Whether the row's interval lies wholly on one side, the paper's or the contradicting one: what its quantity
    can say, whatever else (seeds, a stop not shown) still keeps the row from a verdict."""
    return row.low is not None and row.high is not None and (_agrees(row) or beyond_paper_side(row))
