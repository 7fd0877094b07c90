"""The fields a ledger row (:class:`~helpers.ledger.rows.Claim`) and a declaration
(:class:`~helpers.ledger.declared.Declared`) share, and their one validation (:func:`check_shared`); the row kinds,
the verdict words and the small forms every part of the ledger reads (a check's test ids, a figure's path, a
held-out curve, a number as the docs print it)."""
from __future__ import annotations

import math
import re
from typing import Sequence

from ..papers import PAPER_NAMES, SEED_PAPERS  # noqa: F401 (the papers a row may be of, by the key it stores)

PAPERS = PAPER_NAMES  # a row's ``paper`` (the seed document's id, or the paper's name beyond the four) -> its name
VERDICTS = ("reproduced", "not reproduced", "inconclusive")  # a finding's; a definition check holds or fails
DEFINITION_VERDICTS = ("holds", "fails")
FINDING, REFERENCE, DEFINITION, MEASUREMENT = "finding", "reference", "definition check", "measurement"
KINDS = (FINDING, REFERENCE, DEFINITION, MEASUREMENT)
DECIDED = (FINDING, REFERENCE)  # the kinds the verdict rule decides: a paper's finding, and a reference claim
EXACT = "exact"  # the method of a deterministic identity, whose interval is the value itself
STUDY_MIN_SEEDS = 3  # a row that rests on training needs at least this many seeds in a study
# What never certifies a baseline: it scores 0 (the label prior) or is broken (the untrained step 0) by construction.
STRAW_BASELINES = ("step 0", "label prior")

# The fields a declaration and its ledger rows share, declared once (in :class:`Declared`) and carried into every row.
SHARED_FIELDS = ("id", "notebook", "paper", "where", "paper_value", "quantity", "kind", "direction", "threshold",
                 "margin", "margin_source", "check", "figure", "trained", "baseline", "dataset", "regime",
                 "paper_effect")

_ID = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9][a-z0-9_\-]*)+")
# A check is one or more pytest node ids (space-separated): tests/<path>.py::<test>[::<test>][<parameters>]
_CHECK = re.compile(r"tests/[A-Za-z0-9_/.\-]+\.py::[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?(?:\[[^\]\s]*\])?")
_FIGURE = re.compile(r"(?:figures/)?(?P<stem>\d\d_[A-Za-z0-9_]+?)(?:\.png)?")


def check_shared(entry, who: str = "") -> None:
    """Validate the :data:`SHARED_FIELDS` of ``entry`` (a row or a declaration), normalising its figure; each error
    names the field, its value and what was expected, after ``who`` (``"<id>: "`` for a declaration)."""
    if not isinstance(entry.id, str) or not _ID.fullmatch(entry.id):
        raise ValueError(f"{who}id={entry.id!r} must be dotted lower-case words such as 'magnet.table1.pos.vs_base'")
    check_notebook(entry.notebook)
    object.__setattr__(entry, "figure", figure_path(entry.figure))
    if entry.paper not in PAPERS:
        raise ValueError(f"{who}paper={entry.paper!r} must be a seed id, one of {sorted(PAPERS)}")
    if entry.kind not in KINDS:
        raise ValueError(f"{who}kind={entry.kind!r} must be one of {KINDS}")
    for name in ("where", "paper_value"):
        _text(entry, name, who)
    check_ids(entry.check)
    for name in ("quantity", "dataset", "regime", "margin_source", "baseline"):
        if not isinstance(getattr(entry, name), str):
            raise ValueError(f"{who}{name}={getattr(entry, name)!r} must be a string")
    _finite(entry, "paper_effect", who, "the paper's effect in our units, its distance from the threshold")
    if entry.kind == DEFINITION:
        return
    if entry.kind == MEASUREMENT and entry.direction != 0:
        raise ValueError(f"{who}a measurement has no paper direction: direction=0")
    if entry.kind in DECIDED and entry.direction not in (1, -1) and entry.margin is None:
        raise ValueError(f"{who}direction={entry.direction!r}: a finding's paper direction is +1 (above threshold) or "
                         "-1 (below), or give margin= for a 'matches' claim")
    if entry.margin is not None:
        if isinstance(entry.margin, bool) or not isinstance(entry.margin, (int, float)) or not entry.margin > 0:
            raise ValueError(f"{who}margin={entry.margin!r} must be a positive number")
        if not entry.margin_source.startswith(("paper:", "ours:")):
            raise ValueError(f"{who}margin_source={entry.margin_source!r} must say whose margin it is: 'paper: "
                             "<where>' or 'ours: <why>'")


def _text(entry, name: str, who: str = "") -> None:
    value = getattr(entry, name)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{who}{name}={value!r} must be a non-empty string")


def _finite(entry, name: str, who: str, what: str, at_least: float | None = None) -> None:
    value = getattr(entry, name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value) or (at_least is not None and value < at_least)):
        bound = "" if at_least is None else f" >= {at_least:g}"
        raise ValueError(f"{who}{name}={value!r} must be a finite number{bound} ({what}) or None")


def check_ids(check: str) -> list[str]:
    """The pytest node ids of a row's ``check`` (space-separated); a malformed one is an error naming it."""
    ids = check.split()
    for node in ids:
        if not _CHECK.fullmatch(node):
            raise ValueError(f"check={check!r}: {node!r} is not a pytest node id such as "
                             "'tests/papers/magnet/test_magnet_mechanism.py::test_pooling'; a check is a test")
    return ids


def check_notebook(notebook) -> None:
    if not (isinstance(notebook, str) and len(notebook) == 2 and notebook.isdigit()):
        raise ValueError(f"notebook={notebook!r} must be a two-digit string such as '05'")


def figure_path(figure: str) -> str:
    """A claim's figure in its one form, ``figures/<NN>_<name>.png`` (what :func:`helpers.plots.save_figure` writes);
    ``"<NN>_<name>"`` and ``"<NN>_<name>.png"`` name the same file. ``""`` means no figure."""
    if not isinstance(figure, str):
        raise ValueError(f"figure={figure!r} must be a string such as 'figures/02_mntp_vs_mtp.png' (or '' for none)")
    if not figure:
        return ""
    found = _FIGURE.fullmatch(figure)
    if found is None:
        raise ValueError(f"figure={figure!r} must name a figure as figures/<NN>_<name>.png, e.g. "
                         "'figures/02_mntp_vs_mtp.png'")
    return f"figures/{found['stem']}.png"


def curve(name: str, points, against=None) -> dict:
    """A held-out curve for a trained row's ``plateau=``: ``name`` says which curve (e.g. "MAGNET held-out MNTP
    accuracy"), ``points`` its ``(step, value)`` evaluations, oriented so that training raises it. ``against``: the
    curve of the method it is compared with, trained alike, for a row whose declaration reads the *gap* between the
    two (``Declared.gap_stop``; :func:`helpers.curves.gap_stopped`)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name={name!r} must say which held-out curve this is")
    found = {"curve": name}
    for key, given in (("points", points), ("against", against)):
        if given is None and key == "against":
            continue
        pairs = [[int(step), float(value)] for step, value in given]
        if not pairs:
            raise ValueError(f"{key} for {name!r} is empty; record the curve's evaluations")
        found[key] = sorted(pairs)
    return found


def check_curve(plateau) -> dict:
    """A row's held-out curve, ``{"curve": name, "points": [[step, value], ...]}`` (oriented so training raises it),
    with ``"against"``: the compared method's curve for a row read by its gap, in its one stored form; an error
    naming it otherwise."""
    if not isinstance(plateau, dict) or not {"curve", "points"} <= set(plateau) <= {"curve", "points", "against"} \
            or not isinstance(plateau["curve"], str) or not plateau["curve"]:
        raise ValueError(f"plateau={plateau!r} must be a held-out curve {{'curve': name, 'points': [[step, value], "
                         "...]}}, with 'against' for a gap (helpers.ledger.curve)")
    checked = {"curve": str(plateau["curve"])}
    for key in ("points", "against"):
        if key not in plateau:
            continue
        points = plateau[key]
        if isinstance(points, str) or not all(isinstance(point, Sequence) and len(point) == 2 for point in points):
            raise ValueError(f"plateau[{key!r}]={points!r} must be [step, value] pairs")
        checked[key] = [[int(step), float(value)] for step, value in points]
    return checked


def number(value: float) -> str:
    """A number as the ledger prints it: 3 significant digits, at most."""
    magnitude = abs(value)
    if magnitude != 0 and (magnitude >= 1000 or magnitude < 0.001):
        return f"{value:.3g}"
    return f"{value:.3f}".rstrip("0").rstrip(".") if magnitude < 1 else f"{value:.2f}".rstrip("0").rstrip(".")
