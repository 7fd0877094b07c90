"""What a notebook calls: its parameters cell registers its settings (:func:`parameters`), each cell that computes
results marks them (:meth:`Parameters.computed`), and its summary writes its claims (:func:`record`) and result
tables (:func:`record_table`) through the one sealed writer (:func:`write_sealed`), and shows them
(:func:`table`). A figure that draws an earlier cell's results is refused the same way (:func:`check_shown`)."""
from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from .. import profiles, store
from .fields import PAPERS, check_notebook
from .files import claims_dir, sealed_json, study_dir
from .provenance import provenance, random_weights_refusal
from .rows import Claim
from .tables import ResultTable


class StaleResultsError(RuntimeError):
    """A summary would record claims, or a figure would show results, computed under other parameters than the
    parameters cell now holds."""

    def __init__(self, message: str, refused: str = "claims not recorded"):
        super().__init__(message)
        self.refused = refused

    def _render_traceback_(self) -> list[str]:  # IPython shows this one line instead of a traceback
        return [f"{self.refused}: {self}"]


_COMPUTED: dict[str, dict[str, str]] = {}  # notebook -> {cell: fingerprint of the parameters it ran under}


@dataclass(frozen=True)
class Parameters:
    """The parameters cell's settings, fingerprinted: what every later cell's results must have been computed under.

    The parameters cell makes it (``params = ledger.parameters("02", cfg, settings)``); each cell that computes
    results the summary reports ends with ``params.computed("training")`` (any name per cell); the summary passes
    ``parameters=params`` to :func:`record`, which refuses, in one line, when a cell ran under other parameters than
    the ones the parameters cell now holds (it was changed and rerun, but that cell was not).
    """

    notebook: str
    fingerprint: str
    settings: object

    def computed(self, cell: str) -> None:
        """Mark ``cell``'s results as computed under these parameters."""
        _COMPUTED.setdefault(self.notebook, {})[str(cell)] = self.fingerprint

    def check(self, notebook: str) -> None:
        current = _PARAMETERS.get(notebook)
        if current is not None and current.fingerprint != self.fingerprint:
            raise StaleResultsError(f"notebook {notebook}: these parameters are not the ones the parameters cell now "
                                    "holds; rerun the notebook from the parameters cell down")
        stale = sorted(cell for cell, made in _COMPUTED.get(notebook, {}).items() if made != self.fingerprint)
        if stale:
            raise StaleResultsError(f"notebook {notebook}: the results of {', '.join(stale)} were computed under other "
                                    "parameters than the parameters cell now holds; rerun those cells (or the notebook "
                                    "from the parameters cell down) before recording claims")


_PARAMETERS: dict[str, Parameters] = {}


def parameters(notebook: str, profile, *settings) -> Parameters:
    """The parameters cell's :class:`Parameters` for ``notebook``: the profile and every settings object the cell
    sets, fingerprinted. Calling it again (the cell rerun) replaces the notebook's current parameters."""
    check_notebook(notebook)
    made = Parameters(notebook, store.fingerprint([profile, *settings]), store.canonical_settings([profile, *settings]))
    _PARAMETERS[notebook] = made
    return made


def current_parameters(notebook: str) -> Parameters | None:
    """Notebook ``notebook``'s parameters as its parameters cell last set them in this kernel, or None."""
    return _PARAMETERS.get(notebook)


def check_shown(notebook: str, cells: Sequence[str], figure: str) -> None:
    """Refuse figure ``figure`` when a cell whose results it shows (``cells``, the names those cells gave
    :meth:`Parameters.computed`) ran under other parameters than notebook ``notebook``'s parameters cell now holds,
    or has not run since the parameters cell did."""
    if isinstance(cells, str):
        raise ValueError(f"shows={cells!r} must be a list of cell names, e.g. [{cells!r}]")
    current = _PARAMETERS.get(notebook)
    if current is None or not cells:
        return
    made = _COMPUTED.get(notebook, {})
    stale = [str(cell) for cell in cells if made.get(str(cell)) != current.fingerprint]
    if stale:
        never = [cell for cell in stale if cell not in made]
        why = (f"{', '.join(never)} {'has' if len(never) == 1 else 'have'} not run in this kernel" if never else
               "were computed under other parameters than the parameters cell now holds")
        raise StaleResultsError(f"notebook {notebook}: it shows the results of {', '.join(stale)}, which {why}; rerun "
                                "those cells (or the notebook from the parameters cell down)",
                                refused=f"figure {figure} not saved")


def record(rows: Iterable[Claim], notebook: str, profile, *, runs: dict | None = None,
           seeds: Sequence[int] | None = None, parameters: Parameters | None = None) -> Path | None:
    """Write ``rows`` as notebook ``notebook``'s claims for ``profile`` (the notebook's ``cfg``), sealed, with their
    provenance (:func:`write_sealed`); returns the path (None on random weights, which record nothing).

    ``runs`` names the settings of every run the rows rest on, ``seeds`` the seeds behind them. With
    ``parameters`` (the notebook's :func:`parameters` object), the rows are refused unless every cell that computed
    them ran under the parameters now in the parameters cell (:meth:`Parameters.check`).
    """
    rows = list(rows)
    if not rows:
        raise ValueError(f"rows is empty; notebook {notebook} must record at least one claim")
    for index, row in enumerate(rows):
        if not isinstance(row, Claim):
            raise ValueError(f"rows[{index}]={row!r} is not a Claim")
        if row.notebook != notebook:
            raise ValueError(f"rows[{index}].notebook={row.notebook!r} but notebook={notebook!r}")
    return write_sealed(notebook, notebook, profile, {"notebook": notebook, "claims": [asdict(row) for row in rows]},
                        parameters=parameters, runs=runs, seeds=seeds)


def record_table(name: str, header: Sequence[str], rows: Sequence[Sequence[str]], *, notebook: str, title: str,
                 profile, note: str = "", parameters: Parameters | None = None) -> Path | None:
    """Write notebook ``notebook``'s result table ``name`` (``header``: the column names; ``rows``: one list of
    formatted cells per row, as many as ``header``) for ``profile`` (the notebook's ``cfg``) to
    ``runs/claims/<profile>/<notebook>_<name>.json``, sealed like the claims (:func:`write_sealed`, refused the same
    way when a cell ran under other parameters); the gather puts it in docs/claims.md after the same checks as the
    claims. Returns the path."""
    entry = ResultTable(notebook=notebook, name=name, title=title, header=header, rows=rows, note=note)
    return write_sealed(notebook, entry.key, profile, entry.to_json(), parameters=parameters)


def write_sealed(notebook: str, name: str, profile, content: dict, *, parameters: Parameters | None = None,
                 runs: dict | None = None, seeds: Sequence[int] | None = None) -> Path | None:
    """The one writer of a notebook's claims file and result tables: ``content`` (the table's fields, or the rows
    under ``claims``) with the profile, the provenance (:func:`~helpers.ledger.provenance.provenance` of ``profile``,
    ``runs`` and ``seeds``, and the ``parameters`` fingerprint) and the time written, sealed with its digest
    (:func:`~helpers.ledger.files.sealed_json`), to ``<name>.json`` in ``runs/claims/<profile>/``, or in a study
    seed's folder (:func:`~helpers.ledger.files.study_dir`) under ``WORKBOOK_SEED``. Refused first when a cell ran
    under other parameters (:meth:`Parameters.check`); on random weights nothing is written (None)."""
    if not isinstance(profile, (str, profiles.Profile)):
        raise ValueError(f"profile={profile!r} must be the notebook's Profile (cfg) or a profile name")
    if parameters is not None:
        parameters.check(notebook)
    profile = profiles.get(profile) if isinstance(profile, str) else profile
    if profiles.is_random_model(profile):  # a notebook on random weights runs to the end, and records nothing
        what = "" if name == notebook else f"table {name} "
        print(f"[claims] {what}not recorded: {random_weights_refusal(profile.model_name, notebook)}")
        return None
    origin = provenance(profile, runs, seeds)
    if parameters is not None:  # the fingerprint the notebook's figures are stamped with
        origin["parameters"] = parameters.fingerprint
    if "claims" in content and (origin["mntp_adapter"] or {}).get("source") == "fallback":
        print(f"[claims] notebook {notebook}'s rows rest on the short fallback MNTP adapter (notebook 02 had not run); "
              "their provenance says so")
    prefix = profiles.prefix_divisor()
    if prefix > 1 and profiles.has_prefix(profiles.NOTEBOOK_PAPERS[notebook]):  # make reproduce's shorter runs
        origin["prefix"] = prefix
    folder, study_seed = claims_dir(profile.name), profiles.study_seed()
    if study_seed is not None:  # one seed of a seed study: its own files, never the single-seed ones
        origin["study_seed"], origin["examples_scale"] = study_seed, profiles.examples_scale()
        folder = study_dir(profile.name, study_seed, origin["examples_scale"], origin.get("prefix", 1))
    fields = {key: value for key, value in content.items() if key != "claims"}
    written = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    path = folder / f"{name}.json"
    store.write_text(path, sealed_json({**fields, "profile": profile.name, "provenance": origin, "written": written,
                                        **({"claims": content["claims"]} if "claims" in content else {})}))
    return path


def table(rows: Sequence[Claim]):
    """The rows as a pandas table for a notebook's summary cell."""
    import pandas as pd  # pandas only where a notebook shows its rows

    return pd.DataFrame([{"paper": f"{PAPERS[r.paper]} {r.where}", "claim": r.claim, "paper's value": r.paper_value,
                          "ours": r.ours, "95% interval": r.interval_text, "verdict": r.verdict,
                          "check": r.check or "—"} for r in rows])
