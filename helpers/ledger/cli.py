"""``python -m helpers.ledger --gather | --check | --render``: merge the notebooks' claims into the ledger, audit the
committed ledger against itself and its generated blocks (reading only), or rewrite those blocks from it."""
from __future__ import annotations

import argparse

from .. import code_identity
from . import audit, breaks, declared, gathering, render
from .files import LEDGER_PROFILE, LEDGER_PROFILES, journal_path, ledger_path, read_tables, tables_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The claims ledger, the result tables and the generated blocks of "
                                                 "docs/claims.md and README.md built from them.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--gather", action="store_true", help="merge runs/claims/cpu into the ledger and the tables file and rewrite the generated blocks")
    group.add_argument("--check", action="store_true", help="exit 1 when a generated block differs from the ledger or the tables file")
    group.add_argument("--render", action="store_true", help="rewrite the generated blocks from the committed ledger and tables file (runs nothing)")
    group.add_argument("--breaks", nargs="*", metavar="BREAK", help="run each finding's checks under its guarded "
                       "breaks (tests/breaks.py; all of them, or these); exit 1 when one survives")
    parser.add_argument("--profile", choices=LEDGER_PROFILES, default=LEDGER_PROFILE,
                        help="with --gather: whose ledger (gpu: runs/claims/gpu into claims/ledger_gpu.json)")
    arguments = parser.parse_args(argv)
    if arguments.gather:
        profile = arguments.profile
        rows = gathering.gather(profile)
        print(f"{ledger_path(profile)}: {render.headline(rows)}; {tables_path(profile)}: "
              f"{', '.join(entry.key for entry in read_tables(tables_path(profile))) or 'no result tables'}")
        return 0
    if arguments.breaks is not None:
        survived = breaks.audit_breaks(arguments.breaks or None)
        print(f"{len(survived)} guarded breaks survived their findings' checks" if survived else
              "every guarded break is caught by the checks of the findings that declare it")
        return 1 if survived else 0
    if journal_path().exists():  # --check and --render never finish an interrupted gather
        print(f"an interrupted gather left {journal_path()}: finish it with python -m helpers.ledger --gather (the "
              "ledger, the tables file and the docs may disagree until then)")
        return 1
    if arguments.render:
        changed = render.render_committed()
        print(f"rewrote the generated blocks of {', '.join(str(path) for path in changed)}" if changed else
              "the generated blocks already match the ledger and the tables file")
        return 0
    stale = render.stale_docs()
    print("the generated blocks (docs/claims.md's claims table and result tables, the README's headline) match the "
          "ledger and the tables file" if not stale else
          f"generated blocks of {', '.join(str(path) for path in stale)} differ from claims/ledger_cpu.json or "
          "claims/tables_cpu.json; run: python -m helpers.ledger --render")
    problems = audit.provenance_problems()
    for problem in problems:
        print(f"provenance: {problem}")
    absent = declared.missing_checks()
    for problem in absent:
        print(f"check names no existing test: {problem}")
    undeclared = audit.undeclared_rows()
    for problem in undeclared:
        print(f"ledger row without a declared claim: {problem}")
    unguarded = breaks.undeclared_breaks()  # a finding without a break, or a break no registry holds
    for problem in unguarded:
        print(f"guarded breaks: {problem}")
    for line in audit.stale_notebooks():  # shown as stale in docs/claims.md too; not a failure
        print(f"stale (not a failure): {line}")
    for line in audit.carried_notebooks():
        print(f"current: {line}")
    carry = code_identity.carry_problems()
    for problem in carry:
        print(f"equal numbers: {problem}")
    return 0 if not stale and not problems and not absent and not undeclared and not carry and not unguarded else 1

