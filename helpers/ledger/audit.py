"""The audits ``python -m helpers.ledger --check`` runs on the committed ledger, reading only: rows without a
declaration (:func:`undeclared_rows`), provenance that does not hold against itself (:func:`provenance_problems`),
and the notebooks whose code changed since their rows' commit, stale (:func:`stale_notebooks`) or carried by equal
numbers (:func:`carried_notebooks`)."""
from __future__ import annotations

from pathlib import Path

from .. import code_identity
from .declared import declared_claims
from .files import LEDGER_PROFILE, ProvenanceError, ledger_code, ledger_path, read_payload, read_rows
from .provenance import check_provenance

def undeclared_rows(path: Path | None = None) -> list[str]:
    """The committed ledger's rows whose id is not declared in any paper's claims table, or whose declared fields
    (kind, check, direction, threshold, margin, dataset, regime) differ from the declaration."""
    path = Path(path or ledger_path())
    if not path.exists():
        return []
    declared = declared_claims()
    problems = []
    for row in read_rows(path):
        entry = declared.get(row.id)
        if entry is None:
            problems.append(f"notebook {row.notebook}: {row.id} is not declared")
            continue
        differs = [name for name in ("kind", "check", "direction", "threshold", "margin", "dataset", "regime",
                                     "notebook", "paper") if getattr(row, name) != getattr(entry, name)]
        if differs:
            problems.append(f"{row.id}: {', '.join(differs)} differ from its declaration")
    return problems


def provenance_problems(path: Path | None = None) -> list[str]:
    """What is wrong with the committed ledger's provenance: each notebook with rows needs one computed under the
    ledger's profile and its current settings (:func:`check_provenance`)."""
    path = Path(path or ledger_path())
    if not path.exists():
        return []
    payload = read_payload(path)
    origins = payload.get("provenance", {})
    problems = []
    for notebook in sorted({row.notebook for row in payload["claims"]}):
        origin = origins.get(notebook)
        try:  # the ledger against itself; a notebook whose code changed since is stale (stale_notebooks), not wrong
            check_provenance(origin, payload.get("profile", LEDGER_PROFILE), notebook, code=False)
        except ProvenanceError as error:
            problems.append(str(error))
            continue
        if "study" in origin:
            seeds = sorted(int(seed) for seed in origin["study"])
            if origin.get("seeds") != seeds:
                problems.append(f"notebook {notebook}: its provenance's seeds {origin.get('seeds')} are not its "
                                f"study's {seeds}")
            # a sequential study keeps each row at the look that decided it: any look's seed count is the study's
            looks = {len(seeds)} | {int(look[0]) for look in (origin.get("plan") or {}).get("schedule", [])}
            counted = sorted({row.n_seeds for row in payload["claims"] if row.notebook == notebook and row.n_seeds}
                             - looks)
            if counted:
                problems.append(f"notebook {notebook}: rows averaged over {counted} seeds, but its study's looks read "
                                f"{sorted(looks)} of its seeds {seeds}")
    return problems


def stale_notebooks(path: Path | None = None) -> list[str]:
    """For each notebook of the committed ledger whose code changed between the commit its rows were computed at and
    HEAD (or whose commit this checkout lacks): one line saying so. Stale is shown, not an error."""
    path = Path(path or ledger_path())
    lines = []
    for notebook, entry in sorted(ledger_code(path).items()):
        commit = entry.get("commit")
        current, how = code_identity.code_current(commit, notebook)
        redone = f"; rerun notebook {notebook} (make reproduce, make study) to recompute"
        if current is None:
            lines.append(f"notebook {notebook}: computed at {commit!r}, not a commit of this checkout (a shallow "
                         f"clone?){redone}")
        elif not current:
            lines.append(f"notebook {notebook}: computed at {commit[:7]}; {how}; if it moved no number, "
                         f"`python -m helpers.equal_numbers` carries it{redone}")
    return lines


def carried_notebooks(path: Path | None = None) -> list[str]:
    """For each notebook of the committed ledger whose code changed since its rows' commit but was carried to HEAD
    by equal numbers (:func:`helpers.code_identity.code_current`): one line saying from where."""
    lines = []
    for notebook, entry in sorted(ledger_code(Path(path or ledger_path())).items()):
        current, how = code_identity.code_current(entry.get("commit"), notebook)
        if current and how != "unchanged":
            lines.append(f"notebook {notebook}: {how}")
    return lines
