"""Each paper's claims, declared once: :class:`Declared` (what the paper says and how we test it), a package's table
(:func:`declare`, ``helpers.papers.<package>.report.CLAIMS``), every package's tables joined (:func:`declared_claims`)
and the checks they name that no test answers (:func:`missing_checks`)."""
from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from .. import metrics, papers
from .fields import DECIDED, EXACT, FINDING, SHARED_FIELDS, STRAW_BASELINES, _text, check_ids, check_shared
from .rows import Claim


@dataclass(frozen=True)
class Declared:
    """One claim of a paper, declared once in its package's ``report.CLAIMS`` (:func:`declare`): what the paper says
    and how we test it. The experiment measures; :meth:`measured` joins the declaration with the measurement into the
    ledger row (:class:`~helpers.ledger.rows.Claim`), so every field below has one home; the fields the two share
    (:data:`~helpers.ledger.fields.SHARED_FIELDS`) are validated once, by
    :func:`~helpers.ledger.fields.check_shared`.

    - ``id``: stable, dotted (``magnet.table1.pos.vs_base``); it joins seeds and studies.
    - ``where``, ``says``, ``paper_value``: the section, what the paper says (quoted or paraphrased), its number.
    - ``quantity``: what we measure, in which units; ``direction`` / ``threshold`` / ``margin`` (+ ``margin_source``:
      "paper: ..." or "ours: <why>") as in :class:`~helpers.ledger.rows.Claim`.
    - ``kind``: a ``finding`` of the paper; a ``reference`` claim (another paper's, such as LLM2Vec's, or a row the
      paper does not state, counted apart); a ``definition check``; a ``measurement``.
    - ``check``: pytest node ids of the tests that validate the mechanism the row rests on (against the paper's text
      or its authors' code on the same inputs, or a planted case where the effect must appear). Without one neither
      verdict can be reached; ``python -m helpers.ledger --check`` fails when a named test does not exist.
    - ``breaks``: the guarded breaks (``tests/breaks.py``, space-separated names) of the mechanism the row rests on,
      each a one-line mistake that would leave its number plausible; ``python -m helpers.ledger --breaks`` fails when
      all of ``check`` pass under one of them (:mod:`helpers.ledger.breaks`).
    - ``trained`` and ``curve``: the row rests on training, and which held-out curve shows whether it stopped.
    - ``gap_stop``: for a finding that compares two methods trained alike, why the *gap* between their held-out
      curves is what must be shown to have stopped changing (:func:`helpers.curves.gap_stopped`); its rows then
      record both curves (``ledger.curve(name, points, against=...)``). Empty: the claimed curve itself must stop.
    - ``baseline`` and ``baseline_must_beat``: the baseline a comparison rests on, and what it must beat to count as
      working (the paper's own comparison; never the untrained step 0 or the label prior, :data:`STRAW_BASELINES`).
    - ``dataset``: the data actually used where it is not the paper's; ``regime``: where the hardware regime differs
      from the paper's in a way the quantity depends on (a GPU speed-up measured on a CPU): the row then says so and
      cannot be decided.
    """

    id: str
    notebook: str
    paper: str
    where: str
    says: str
    paper_value: str
    quantity: str
    kind: str = FINDING
    direction: int = 1
    threshold: float = 0.0
    margin: float | None = None
    margin_source: str = ""
    check: str = ""
    breaks: str = ""
    figure: str = ""
    trained: bool = False
    curve: str = ""
    gap_stop: str = ""
    baseline: str = ""
    baseline_must_beat: str = ""
    dataset: str = ""
    regime: str = ""
    paper_effect: float | None = None  # the paper's effect in our units (distance from threshold), where it states one

    def __post_init__(self):
        who = f"{self.id}: " if isinstance(self.id, str) else ""
        check_shared(self, who)
        for name in ("says", "quantity"):
            _text(self, name, who)
        if not isinstance(self.breaks, str) or not all(re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", name)
                                                       for name in self.breaks.split()):
            raise ValueError(f"{who}breaks={self.breaks!r} must be space-separated dotted names of tests/breaks.py")
        if not isinstance(self.gap_stop, str) or (self.gap_stop and not self.trained):
            raise ValueError(f"{who}gap_stop={self.gap_stop!r} must be a string, and only a trained row (trained=True) "
                             "reads the gap between two curves trained alike")
        if self.baseline and not self.baseline_must_beat.strip():
            raise ValueError(f"{who}baseline={self.baseline!r} needs baseline_must_beat=: what it must beat to "
                             "count as working (the paper's own comparison)")
        straw = [word for word in STRAW_BASELINES if word in self.baseline_must_beat.lower()]
        if straw:
            raise ValueError(f"{who}baseline_must_beat={self.baseline_must_beat!r} names {straw[0]!r}, which "
                             "never certifies a baseline (broken or zero by construction); name the paper's comparison")
        if self.kind == FINDING and self.paper_value.strip().lower().startswith(("not reported", "not compared",
                                                                                 "> 0 (paper: ")):
            raise ValueError(f"{who}paper_value={self.paper_value!r}: a finding is a claim the paper states; a "
                             "row the paper does not report is a reference claim (kind='reference') or a measurement")

    def measured(self, value: float, low: float, high: float, method: str, n: int, *, fmt: str = "{:+.3f}",
                 ours: str | None = None, note: str = "", plateau=None, baseline_works: bool | None = None,
                 confound: str = "", holds: bool | None = None, figure: str = "", **extra) -> Claim:
        """The ledger row: this declaration joined with one measurement (the value, its 95% interval ``low`` to
        ``high`` by ``method`` over ``n``). ``plateau``: the held-out curve (:func:`~helpers.ledger.fields.curve`)
        of a trained row; ``baseline_works``: whether the baseline beat :attr:`baseline_must_beat` in this run;
        ``note``: what this run measured beside the claim; ``extra``: the row's remaining fields (``n_seeds``,
        ``seed_values``)."""
        if self.baseline and baseline_works is None:
            raise ValueError(f"{self.id}: baseline_works= must say whether {self.baseline} beat "
                             f"{self.baseline_must_beat} in this run")
        if self.trained and plateau is not None and ("against" in plateau) != bool(self.gap_stop):
            raise ValueError(f"{self.id}: " + ("declares gap_stop=, so its plateau= needs the compared curve "
                                               "(ledger.curve(name, points, against=...))" if self.gap_stop else
                                               "plateau= holds a compared curve ('against'), but no gap_stop= says "
                                               "why this finding is read by its gap"))
        exact = method == EXACT
        if "mde" not in extra:
            extra["mde"] = self.mde_of(method, low, high, extra.get("n_seeds"))
        shared = {name: getattr(self, name) for name in SHARED_FIELDS}
        return Claim(**{**shared, "figure": figure or self.figure}, claim=self.says,
                     ours=ours if ours is not None else fmt.format(value),
                     low=None if low is None else float(low), high=None if high is None else float(high),
                     method=method, n=None if n is None else int(n), holds=holds,
                     plateau=plateau if self.trained else None,
                     baseline_works=baseline_works if self.baseline else None, confound=confound,
                     value=None if (value is None or exact) else float(value), note=note, **extra)

    def mde_of(self, method: str, low, high, n_seeds: int | None) -> float | None:
        """A row's minimum detectable effect from its 95% interval: for a kind the rule decides and an interval that
        is not exact; a study's t over seeds has S - 1 degrees of freedom (conservative: the examples' nested term
        only adds degrees of freedom, :func:`helpers.metrics.seeds_with_examples_mde`). None otherwise."""
        if method == EXACT or self.kind not in DECIDED or low is None or high is None:
            return None
        seeds = n_seeds or 0
        return metrics.minimum_detectable_effect((float(high) - float(low)) / 2, df=seeds - 1 if seeds > 1 else None)

    def redeclare(self, row: Claim) -> Claim:
        """``row``, a measurement recorded under an earlier form of this declaration, read under this one: the
        declared fields (:data:`~helpers.ledger.fields.SHARED_FIELDS` and the claim's words) from here, the
        measurement (value, interval, method, n, curve, seeds, note, what was computed) as recorded, and what
        follows from both (the minimum detectable effect, the verdict) recomputed. A re-declaration changes what a
        row *means* (its kind, threshold, direction or checks), never what was measured, so the committed per-seed
        files are read again under it without retraining."""
        if row.id != self.id:
            raise ValueError(f"row {row.id!r} is not declaration {self.id!r}")
        if self.baseline and row.baseline_works is None:
            raise ValueError(f"{self.id}: now declares baseline={self.baseline!r}, but the recorded row does not "
                             "say whether it worked; rerun its notebook")
        shared = {name: getattr(self, name) for name in SHARED_FIELDS}
        kept_mde = row.mde if (row.kind in DECIDED) == (self.kind in DECIDED) and row.mde is not None else \
            self.mde_of(row.method, row.low, row.high, row.n_seeds)
        return dataclasses.replace(
            row, **{**shared, "figure": row.figure or self.figure}, claim=self.says, verdict="",
            plateau=row.plateau if self.trained else None, baseline_works=row.baseline_works if self.baseline else None,
            mde=kept_mde if self.kind in DECIDED else None)

    def reaches_either_verdict(self, curve_points: dict[str, int]) -> bool:
        """Whether a row of this declaration could read *reproduced* and could read *not reproduced*: it has a
        check, no other regime, and, if trained, a held-out curve with enough evaluations in its window for the
        equivalence test (``curve_points``: curve name -> evaluations in the window under the profile)."""
        if self.kind not in DECIDED or not self.check or self.regime:
            return False
        return not self.trained or curve_points.get(self.curve, 0) >= metrics.STOP_MIN_POINTS


def declare(*entries: Declared) -> dict[str, Declared]:
    """A paper's claims table, id -> :class:`Declared`; a repeated id is an error naming it."""
    table = {}
    for entry in entries:
        if not isinstance(entry, Declared):
            raise ValueError(f"{entry!r} is not a Declared claim")
        if entry.id in table:
            raise ValueError(f"id={entry.id!r} is declared twice")
        table[entry.id] = entry
    return table


def declared_claims() -> dict[str, Declared]:
    """Every paper package's claims table (``helpers.papers.<package>.report.CLAIMS``, the packages of the registry),
    joined; an id declared by two packages is an error. The reports are imported by name here: each imports the
    ledger."""
    joined: dict[str, Declared] = {}
    for package in papers.PACKAGES:
        table = importlib.import_module(f"helpers.papers.{package}.report").CLAIMS
        for claim_id, entry in table.items():
            if claim_id in joined:
                raise ValueError(f"id={claim_id!r} is declared by helpers.papers.{package} and another package")
            joined[claim_id] = entry
    return joined


def missing_checks(declared: dict[str, Declared] | None = None, root: Path | None = None) -> list[str]:
    """Every declared check that names no existing test: ``'<id>: <node id>'`` (the file, the test function, or the
    class method is missing). Parametrised ids are matched by their function."""
    root = Path(root or Path(__file__).resolve().parents[2])  # the tests live beside the code that declares them
    declared = declared_claims() if declared is None else declared
    found: dict[str, set[str]] = {}
    problems = []
    for claim_id, entry in sorted(declared.items()):
        for node in check_ids(entry.check):
            path, _, name = node.partition("::")
            name = name.split("[", 1)[0]
            if path not in found:
                found[path] = _test_names(root / path)
            if name not in found[path] or not name.split("::")[-1].startswith("test"):
                problems.append(f"{claim_id}: {node}")
    return problems


def _test_names(file: Path) -> set[str]:
    """The functions of a test file, and its classes' methods as ``Class::method``; none when it does not exist."""
    names: set[str] = set()
    if file.exists():
        for item in ast.parse(file.read_text()).body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(item.name)
            elif isinstance(item, ast.ClassDef):
                names |= {f"{item.name}::{sub.name}" for sub in item.body
                          if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names
