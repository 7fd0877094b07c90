"""Rebuild a ledger written before the claims tables under the declared claims, keeping every measured number.

A ledger row written before each paper declared its claims (``helpers.papers.<package>.report.CLAIMS``) carries
its own free-text check, kind and baseline rule. This script joins each such row with its declaration, matched by
(notebook, quantity) (or by (notebook, where) for a definition check, which names no quantity), and rebuilds it
through ``Declared.measured``: the declaration supplies the id, the claim, the kind, the check (test node ids), the
dataset and the regime; the row keeps what was measured (value, interval, method, n, each seed's value, the
confound measured in its run). Where the declared baseline rule differs from the old one, ``BASELINE_RULES`` computes
whether the baseline beat what the paper says it beats from the other rows' seed values.

The ledger's provenance is kept, with ``redeclared`` recording the commit the rows were computed at and this script;
``changes`` lists every verdict that changed.

Only notebook 01's block of the committed ledger was rebuilt this way (its code record names this script,
``helpers.ledger.files.redeclared``); once notebook 01 is gathered again, this script and that function go. The
ledger no longer reads the rows it was written for (rows without an id, slope-only budget checks).

Usage: python scripts/redeclare_ledger.py [--dry-run]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _seed_values(rows: dict, quantity: str) -> list[float]:
    row = rows[quantity]
    return list(row["seed_values"]) if row.get("seed_values") else [row["value"]]


def _every_seed_above(values: list[float]) -> bool:
    return bool(values) and all(value > 0 for value in values)


def _mntp_beats_base(rows: dict, task: str) -> bool:
    """MAGNET Table 1: LLM2Vec-style MNTP beats the causal base (the paper: +1.08 POS). Per seed,
    (MNTP - base) = (MAGNET - base) - (MAGNET - MNTP)."""
    magnet_base = _seed_values(rows, f"{task} accuracy, MAGNET - base")
    magnet_mntp = _seed_values(rows, f"{task} accuracy, MAGNET - LLM2Vec-style MNTP")
    return _every_seed_above([a - b for a, b in zip(magnet_base, magnet_mntp)])


def _interval_above(rows: dict, quantity: str) -> bool:
    """Whether the committed row ``quantity``'s interval lies wholly above 0."""
    return quantity in rows and rows[quantity]["low"] > 0


_SETS = ("5-word prefixes", "sentence prefixes")
# notebook -> {quantity: rule(rows of that notebook by quantity) -> baseline_works}: each package's declared baseline
# (what it must beat, the paper's comparison) read off the committed rows that measure it. A declared baseline with
# no rule here, or whose comparison no committed row measures (EMAT's: the paired GRU - naive, naive - MLM and
# vocabulary - MLM differences are new rows), is not shown to work until the study records it.
BASELINE_RULES: dict[str, dict] = {
    "03": {**{f"{task} accuracy, MAGNET - LLM2Vec-style MNTP": (lambda rows, task=task: _mntp_beats_base(rows, task))
              for task in ("Chunking", "NER", "POS")},
           **{f"{label} raise margin, MAGNET - 0.5 x LLM2Vec-style, {name}":
              (lambda rows, label=label, name=name: _interval_above(rows, f"{label}, LLM2Vec-style - base, {name}"))
              for label in ("Rep-4", "Rep-Sen") for name in _SETS}},
    "04": {quantity: (lambda rows: _interval_above(rows, "F1 difference, r=1 - r=0"))
           for quantity in ("F1 difference, r=2 - r=1", "F1 difference, r=1, exit@18 - last layer")},
    "06": {},
}
# quantities renamed when their claims were declared (the old one named the cpu model's own exit layer)
RENAMED = {("04", "F1 difference, r=1, exit@18 - last layer"): "sr.fig5.exit19.r1",
           ("04", "F1 difference, r=1, exit@18 - last layer (probe)"): "sr.fig5.probe.exit19.r1"}


def redeclare(old_payload: dict, declared: dict, rules: dict = BASELINE_RULES) -> tuple[list, list]:
    """The old ledger's rows rebuilt under ``declared``, and the rows withdrawn: a row whose id is declared but whose
    declaration now measures another quantity (a new judge, say) keeps no number, since what it measured is not
    what its claim is now tested by; it is listed as withdrawn until the notebook is recomputed. An old row no
    declaration matches is an error naming it."""
    from helpers import ledger

    by_quantity = {(entry.notebook, entry.quantity): entry for entry in declared.values()}
    by_where = {(entry.notebook, entry.where): entry for entry in declared.values() if entry.kind == ledger.DEFINITION}
    rows_by_notebook: dict[str, dict] = {}
    for row in old_payload["claims"]:
        rows_by_notebook.setdefault(row["notebook"], {})[row.get("quantity") or row["claim"]] = row
    rebuilt, unmatched, withdrawn = [], [], []
    for row in old_payload["claims"]:
        same_id = declared.get(row.get("id") or "")
        if same_id is not None and same_id.kind != ledger.DEFINITION and same_id.quantity != row.get("quantity"):
            withdrawn.append({"id": row["id"], "notebook": row["notebook"], "measured_as": row.get("quantity"),
                              "declared_as": same_id.quantity, "verdict_was": row["verdict"]})
            continue
        renamed = RENAMED.get((row["notebook"], row.get("quantity", "")))
        entry = (declared.get(renamed) if renamed else None) or by_quantity.get((row["notebook"], row.get("quantity", ""))) \
            or by_where.get((row["notebook"], row["where"]))
        if entry is None:
            unmatched.append(f"notebook {row['notebook']}: {row['where']} / {row.get('quantity') or row['claim'][:60]!r}")
            continue
        rule = rules.get(row["notebook"], {}).get(row.get("quantity", ""))
        if entry.baseline:
            works = rule(rows_by_notebook[row["notebook"]]) if rule else row.get("baseline_works")
            works = bool(works) if works is not None else False
        else:
            works = None
        exact = row["method"] == ledger.EXACT
        rebuilt.append(entry.measured(
            None if exact else row["value"] if row.get("value") is not None else (row["low"] + row["high"]) / 2,
            row["low"], row["high"], row["method"], row["n"], ours=row["ours"], figure=row["figure"],
            plateau=row.get("plateau"), baseline_works=works, confound=row.get("confound", ""),
            holds=row.get("holds"), n_seeds=row.get("n_seeds"), seed_values=tuple(row.get("seed_values") or ())))
    if unmatched:
        raise ValueError("rows no declaration matches (declare them, or keep their quantity):\n  " + "\n  ".join(unmatched))
    return rebuilt, withdrawn


def main(argv: list[str] | None = None) -> int:
    from helpers import ledger, store

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the verdict changes, write nothing")
    arguments = parser.parse_args(argv)
    path = ledger.ledger_path()
    old_payload = json.loads(path.read_text())
    rows, withdrawn = redeclare(old_payload, ledger.declared_claims())  # one row per kept old row, in its order
    gone = {entry["id"] for entry in withdrawn}
    kept = [row for row in old_payload["claims"] if row.get("id") not in gone]
    old_rows = [ledger.Claim(**{**row, "verdict": "", "check": ""}) for row in kept]
    for old, raw in zip(old_rows, kept):  # the verdict each old row was committed with
        object.__setattr__(old, "verdict", raw["verdict"])
    changes = [{"id": new.id, "from": old.verdict, "to": new.verdict} for old, new in zip(old_rows, rows)
               if old.verdict != new.verdict]
    changes += [{"id": entry["id"], "from": entry["verdict_was"], "to": "withdrawn"} for entry in withdrawn]
    for entry in withdrawn:
        print(f"{entry['id']}: withdrawn (measured as {entry['measured_as']!r}; declared now as "
              f"{entry['declared_as']!r}): recompute notebook {entry['notebook']}")
    for change in changes:
        print(f"{change['id']}: {change['from']} -> {change['to']}")
    for old, new in zip(old_rows, rows):
        if old.kind != new.kind:
            print(f"{new.id}: kind {old.kind} -> {new.kind} (verdict {old.verdict} -> {new.verdict})")
        elif new.kind in ledger.DECIDED and new.verdict == "inconclusive":
            print(f"{new.id}: inconclusive: {new.verdict_text[len('**inconclusive**'):].lstrip(': ')[:160]}")
    print(f"{len(changes)} verdicts changed; {ledger.headline(rows)}")
    if arguments.dry_run:
        return 0
    commits = sorted({origin.get("commit") for origin in old_payload["provenance"].values() if origin.get("commit")})
    code = ledger.ledger_code(path)  # each notebook's commit and staleness, kept; marked as redeclared
    for entry in code.values():
        entry["redeclared"] = "scripts/redeclare_ledger.py"
    texts = ledger.render_docs(rows, ledger.read_tables(), changes, code, ROOT)  # docs/claims.md and the README
    payload = json.loads(ledger.files.rows_to_json(rows, profile=old_payload["profile"],
                                                   provenance=old_payload["provenance"], changes=changes))
    if isinstance(old_payload.get("code"), dict):
        payload["code"] = {**old_payload["code"], "notebooks": code}
    payload["withdrawn"] = [*old_payload.get("withdrawn", []), *withdrawn]
    payload["redeclared"] = {"computed_at": commits, "by": "scripts/redeclare_ledger.py",
                             "note": "measured numbers as computed at these commits; declarations, checks and verdict "
                                     "rule of the current code"}
    store.write_together({path: json.dumps(payload, indent=1) + "\n", **texts}, ledger.files.journal_path())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
