"""Gathering: the claims files and result tables the notebooks wrote (``runs/claims/<profile>/``), each checked
(:mod:`helpers.ledger.provenance`, its digest, a seed study re-derived from its per-seed files), merged into the
committed ledger and tables file, and the docs' generated blocks rendered from them, all in one journaled write
(:func:`gather`)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .. import code_identity, profiles, store
from .files import (LEDGER_PROFILE, LEDGER_PROFILES, ProvenanceError, check_digest, claims_dir, claims_doc_path,
                    journal_path, ledger_code, ledger_doc_path, ledger_path, read_changes, read_json, read_payload, read_provenance,
                    read_rows, read_table, read_tables, readme_path, rows_to_json, tables_path,
                    tables_to_json)
from .provenance import check_consistent, check_provenance, prefix_of, random_weights_refusal, rerun
from .render import gpu_block, render_docs
from .rows import Claim
from .study import rederive_study, seed_range_report, seed_values_at
from .tables import ResultTable


def gather(profile: str = LEDGER_PROFILE, notebooks: Sequence[str] | None = None, *, study: bool = False) -> list[Claim]:
    """Merge ``runs/claims/<profile>/*.json`` into the committed ledger (the rows of every notebook found there
    replace that notebook's rows) and its result tables (``<notebook>_<name>.json``) into ``claims/tables_cpu.json``
    (the tables of every notebook found there replace that notebook's tables; a notebook not rerun keeps its own),
    rewrite docs/claims.md's claims table and result tables and the README's headline from them
    (:func:`~helpers.ledger.render.render_docs`), and return the ledger's rows.

    A notebook whose ledger rows come from a seed study (``scripts/study.py``, ``study=True``) keeps them when a
    single-seed run is gathered: that run's trained values are compared with the study's prediction intervals for a
    new seed instead (:func:`~helpers.ledger.study.seed_range_report`, printed)."""
    if profile == "smoke":
        raise ProvenanceError("profile='smoke': smoke runs (a tiny random model at toy sizes) check that the code "
                              "runs and never enter a ledger; gather the cpu or gpu profile's runs")
    if profile not in LEDGER_PROFILES:
        raise ValueError(f"profile={profile!r}: the ledgers are the {' and '.join(LEDGER_PROFILES)} profiles'")
    finish_interrupted_gather()
    ledger = ledger_path(profile)
    origins = read_provenance(ledger)
    fresh = _fresh_claims(profile, notebooks, study, ledger, origins)
    check_consistent(origins, fresh)
    fresh_tables = [read_checked_table(path, profile) for path in sorted(claims_dir(profile).glob("[0-9][0-9]_*.json"))
                    if notebooks is None or path.name[:2] in notebooks]
    previous = read_rows(ledger) if ledger.exists() else []
    kept = [row for row in previous if row.notebook not in fresh]
    rows = sorted(kept + [row for group in fresh.values() for row in group], key=lambda row: row.notebook)
    # the verdicts a study (or any gather that changes one) changed; a gather that changes none keeps the record of
    # the last one that did, so docs/claims.md keeps saying what the last study changed
    changed = verdict_changes(previous, rows) if fresh else []
    changes = changed if (study or changed) else read_changes(ledger)
    origins = {notebook: origin for notebook, origin in sorted(origins.items()) if any(r.notebook == notebook for r in rows)}
    rerun_tables = {entry.notebook for entry in fresh_tables}
    tables = sorted([entry for entry in read_tables(tables_path(profile)) if entry.notebook not in rerun_tables]
                    + fresh_tables, key=lambda entry: entry.key)
    code = _code_record(origins, fresh, ledger_code(ledger))
    # refuses docs without their markers before anything is written
    texts = (render_docs(rows, tables, changes, code, provenance=origins) if profile == LEDGER_PROFILE else
             gpu_block(claims_doc_path(), rows, profile, origins))
    store.write_together({ledger: rows_to_json(rows, profile=profile, provenance=origins, changes=changes,
                                               code={"gathered_at": code_identity.git("rev-parse", "HEAD"),
                                                     "notebooks": code}),
                          tables_path(profile): tables_to_json(tables, profile), **texts}, journal_path())
    return rows


def _fresh_claims(profile: str, notebooks: Sequence[str] | None, study: bool, ledger: Path,
                  origins: dict[str, dict]) -> dict[str, list[Claim]]:
    """The claims files of ``runs/claims/<profile>/`` (of ``notebooks``, or all) that enter the ledger, each checked
    before anything is written: notebook -> rows, their provenance put in ``origins``. A single-seed run of a notebook
    whose ledger rows are a seed study's is compared with the study instead (printed) and does not enter."""
    fresh = {}
    for path in sorted(claims_dir(profile).glob("[0-9][0-9].json")):
        if notebooks is not None and path.stem not in notebooks:
            continue
        payload = read_payload(path)
        model = payload["provenance"].get("model") if isinstance(payload.get("provenance"), dict) else None
        if profiles.is_random_model(model):
            raise ProvenanceError(random_weights_refusal(model, path.stem))
        prefix = prefix_of(payload["provenance"]) if isinstance(payload.get("provenance"), dict) else 1
        if prefix != 1:
            _compare_prefix_run(payload, path.stem, prefix, profile, origins)
            continue
        check_provenance(payload.get("provenance"), profile, path.stem)
        if "study" in payload["provenance"]:
            rederive_study(payload, profile, path.stem)
        else:
            check_digest(path, path.stem, f"notebook {path.stem}'s claims", rerun(profile, path.stem))
        if not study and "study" in origins.get(path.stem, {}) and "study" not in payload["provenance"]:
            kept_study = [row for row in read_rows(ledger) if row.notebook == path.stem]
            print(f"[claims] notebook {path.stem}: the ledger keeps its seed study's rows "
                  f"({len(origins[path.stem]['seeds'])} seeds); this single-seed run against them:")
            at_own_examples = seed_values_at(profile, path.stem, origins[path.stem]["seeds"])
            for line in seed_range_report(payload["claims"], kept_study, at_own_examples or None):
                print("   ", line)
            continue
        fresh[path.stem], origins[path.stem] = payload["claims"], payload["provenance"]
    return fresh


def _compare_prefix_run(payload: dict, notebook: str, prefix: int, profile: str, origins: dict[str, dict]) -> None:
    """A prefix run (``WORKBOOK_PREFIX``, make reproduce's default) never enters the ledger, whose rows are read at the
    full lengths; its trained values are compared, at the same step, with the study's seeds cut to the same prefix
    (``claims/study/<profile>/prefix-<N>/``, :func:`~helpers.ledger.study.seed_values_at`), where the study recorded
    them (printed)."""
    seeds = (origins.get(notebook) or {}).get("seeds") or []
    values = seed_values_at(profile, notebook, seeds, prefix=prefix) if seeds else {}
    print(f"[claims] notebook {notebook}: a prefix run (each trained run at 1/{prefix} of its length, "
          f"{profiles.PREFIX_VAR}={prefix}): not gathered (the ledger's rows are read at the full lengths; make "
          "reproduce STOPS=1 runs those)" + (f"; against the study's {len(seeds)} seeds at the same prefix:" if values
                                             else "; the study recorded no seeds at this prefix to compare with"))
    if values:
        try:
            check_provenance(payload.get("provenance"), profile, notebook)
        except ProvenanceError as problem:
            print(f"    not compared: {problem}")
            return
        for line in seed_range_report(payload["claims"], [], values, f" at 1/{prefix} of the trained runs' lengths"):
            print("   ", line)


def _code_record(origins: dict[str, dict], fresh: dict, before: dict[str, dict]) -> dict[str, dict]:
    """What the docs say of each notebook's code since its rows' commit: the commit, the files changed since (none
    for a notebook gathered now), the equal-numbers record that carries it."""
    code = {}
    for notebook, origin in origins.items():
        entry = {"commit": origin.get("commit"), "changed": [] if notebook in fresh else
                 code_identity.code_changes(origin.get("commit"), notebook)}
        if entry["changed"] and code_identity.code_current(entry["commit"], notebook)[0]:
            entry["carried"] = code_identity.read_carried().get(notebook)
        code[notebook] = entry
    return code


def read_checked_table(path: Path, profile: str) -> ResultTable:
    """A result table that may enter the committed tables: :func:`~helpers.ledger.files.read_table`, after the
    claims' checks on the provenance it carries (:func:`~helpers.ledger.provenance.check_provenance`: profile, commit
    and code, notebook parameters) and its digest."""
    path = Path(path)
    payload = read_json(path)  # read once: the table, its provenance and its digest are of the same content
    entry = read_table(path, payload)
    what = f"the rows of notebook {entry.notebook}'s result table {entry.name}"
    check_provenance(payload.get("provenance"), profile, entry.notebook, what=what)
    check_digest(path, entry.notebook, what, rerun(profile, entry.notebook), payload)
    return entry


def verdict_changes(previous: Sequence[Claim], rows: Sequence[Claim]) -> list[dict]:
    """Every row whose verdict differs between ``previous`` (the ledger before) and ``rows`` (after), joined by id:
    ``{"id", "from", "to"}``."""
    before = {row.id: row for row in previous}
    return [{"id": row.id, "from": before[row.id].verdict, "to": row.verdict} for row in rows
            if row.id in before and before[row.id].verdict != row.verdict]


def compare_with_ledger(profile: str = LEDGER_PROFILE, notebooks: Sequence[str] | None = None) -> list[str]:
    """For a run under settings the ledger was not computed with (``WORKBOOK_DTYPE`` set): each finished notebook's
    trained values in ``runs/claims/<profile>/`` against the committed ledger's prediction intervals, without gathering
    them (:func:`~helpers.ledger.study.seed_range_report`). The provenance must still name ``profile``."""
    ledger = ledger_path()
    committed = read_rows(ledger) if ledger.exists() else []
    origins = read_payload(ledger).get("provenance", {}) if ledger.exists() else {}
    lines = []
    for path in sorted(claims_dir(profile).glob("[0-9][0-9].json")):
        if notebooks is not None and path.stem not in notebooks:
            continue
        payload = read_payload(path)
        if not isinstance(payload.get("provenance"), dict) or payload["provenance"].get("profile") != profile:
            raise ProvenanceError(f"{path}: not computed under the {profile!r} profile; rerun notebook {path.stem} "
                                  f"under WORKBOOK_PROFILE={profile}")
        seeds = (origins.get(path.stem) or {}).get("seeds") or []
        report = seed_range_report(payload["claims"], [row for row in committed if row.notebook == path.stem],
                                   seed_values_at(profile, path.stem, seeds) or None)
        if report:
            lines += [f"notebook {path.stem}:"] + [f"    {line}" for line in report]
    return lines


def finish_interrupted_gather() -> None:
    """Roll an interrupted :func:`gather` forward (or clean up after one killed before it wrote anything)."""
    store.finish_together(journal_path(), [ledger_path(), tables_path(), claims_doc_path(), readme_path(),
                                          ledger_doc_path()])
