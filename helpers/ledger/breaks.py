"""Checks shown able to fail: every finding declares guarded breaks (``Declared.breaks``: small, named changes of
the mechanism it rests on, registered in ``tests/breaks.py``), and its named checks (``Declared.check``) must fail
under each of them. :func:`run_break` runs the checks of every finding that declares a break, under it, in a fresh
pytest process; :func:`audit_breaks` says, per finding, which break survived; :func:`undeclared_breaks` lists the
findings that declare none and the names no registry holds.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .declared import Declared, declared_claims
from .fields import FINDING, check_ids

BREAK_VAR = "WORKBOOK_BREAK"
REGISTRY = Path("tests") / "breaks.py"
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def _root() -> Path:
    return Path(__file__).resolve().parents[2]


def registered_breaks(root: Path | None = None) -> dict[str, str]:
    """The breaks of ``tests/breaks.py`` by name, with what each breaks, read from its source (no import)."""
    tree = ast.parse(((root or _root()) / REGISTRY).read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "guarded_break" and len(node.args) == 2:
            name, says = (arg.value if isinstance(arg, ast.Constant) else None for arg in node.args)
            if isinstance(name, str) and isinstance(says, str):
                found[name] = says
    return found


def breaks_of(entry: Declared) -> list[str]:
    return entry.breaks.split()


def undeclared_breaks(declared: dict[str, Declared] | None = None, root: Path | None = None) -> list[str]:
    """Every finding with a check but no guarded break, and every declared break no registry holds, one line each."""
    declared = declared_claims() if declared is None else declared
    registered = registered_breaks(root)
    problems = []
    for claim_id, entry in sorted(declared.items()):
        if entry.kind == FINDING and entry.check.strip() and not breaks_of(entry):
            problems.append(f"{claim_id}: declares no guarded break (breaks=)")
        problems += [f"{claim_id}: break {name!r} is not registered in {REGISTRY}" for name in breaks_of(entry)
                     if name not in registered]
    return problems


@dataclass(frozen=True)
class BreakResult:
    """One break run against the checks of the findings that declare it: the checks that failed under it."""

    name: str
    findings: tuple[str, ...]
    checks: tuple[str, ...]
    failed: frozenset[str]
    output: str

    def caught(self, entry: Declared) -> bool:
        """Whether one of ``entry``'s own checks failed under this break (a parametrised check by its function)."""
        return any(node == failed or failed.startswith(node + "[") for node in check_ids(entry.check)
                   for failed in self.failed)


def run_break(name: str, entries: Sequence[Declared], root: Path | None = None, timeout: int = 1800) -> BreakResult:
    """Run the named checks of ``entries`` under break ``name`` (``WORKBOOK_BREAK``) in a fresh pytest process."""
    root = root or _root()
    checks = tuple(dict.fromkeys(node for entry in entries for node in check_ids(entry.check)))
    if not checks:
        raise ValueError(f"break {name!r}: the findings that declare it name no checks to run")
    env = {**os.environ, BREAK_VAR: name, "WORKBOOK_PROFILE": "smoke"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *checks],
                          capture_output=True, text=True, cwd=root, env=env, timeout=timeout)
    output = done.stdout + done.stderr
    if done.returncode not in (0, 1):  # 1: tests failed; anything else: the session itself broke
        raise RuntimeError(f"break {name!r}: pytest exited {done.returncode} before running the checks:\n"
                           + output[-3000:])
    return BreakResult(name, tuple(entry.id for entry in entries), checks, frozenset(_FAILED.findall(output)), output)


def audit_breaks(names: Sequence[str] | None = None, declared: dict[str, Declared] | None = None,
                 root: Path | None = None, say=print) -> list[str]:
    """Run every declared break (or ``names``) against the checks of the findings that declare it; one line per
    finding whose checks all passed under a break it declares (the break survived)."""
    declared = declared_claims() if declared is None else declared
    by_break: dict[str, list[Declared]] = {}
    for entry in declared.values():
        for name in breaks_of(entry):
            by_break.setdefault(name, []).append(entry)
    unknown = sorted(set(names or ()) - set(by_break))
    if unknown:
        raise ValueError(f"--breaks {' '.join(unknown)}: no finding declares it; declared: {sorted(by_break)}")
    survived = []
    for name in sorted(names or by_break):
        result = run_break(name, by_break[name], root)
        for entry in by_break[name]:
            if result.caught(entry):
                say(f"caught: {name} by {entry.id}'s checks")
            else:
                survived.append(f"{entry.id}: break {name!r} survived its checks ({entry.check})")
                say(f"SURVIVED: {survived[-1]}")
    return survived
