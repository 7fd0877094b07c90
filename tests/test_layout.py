"""The shape of the helper package: one package per paper with the same files, the mechanism apart from the
experiment, no long function without a reason, and no reference to a tracker the reader cannot see."""
from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest

from helpers import profiles

ROOT = Path(__file__).resolve().parents[1]
PAPERS_DIR = ROOT / "helpers" / "papers"
PACKAGE_FILES = ("__init__.py", "mechanism.py", "settings.py", "report.py", "figures.py")
PAPER_MODULE_MAX_LINES = 500  # past this a paper's module splits along a seam (mechanism_*, experiment_*, declarations)
LONG_FUNCTION_LINES = 80
LONG_REASON = "Long because"


def _paper_packages() -> list[Path]:
    return sorted(path for path in PAPERS_DIR.iterdir() if (path / "__init__.py").exists())


def _imported_modules(path: Path, package: str) -> set[str]:
    """Every module ``path`` imports, relative imports resolved against ``package`` (``helpers.papers.<paper>``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
                names.add(module)
                if not node.module:  # `from . import report`
                    names.update(f"{base}.{alias.name}" for alias in node.names)
            else:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_every_profile_paper_has_a_package_with_the_same_files():
    found = {path.name for path in _paper_packages()}
    assert found == set(profiles.PAPERS)
    for package in _paper_packages():
        missing = [name for name in PACKAGE_FILES if not (package / name).exists()]
        assert not missing, f"{package} lacks {missing}"
        assert list(package.glob("experiment*.py")), f"{package} has no experiment*.py"


@pytest.mark.parametrize("paper", profiles.PAPERS)
def test_each_package_exports_its_citation_settings_and_claims(paper):
    package = importlib.import_module(f"helpers.papers.{paper}")
    assert {"title", "authors", "venue"} <= set(package.CITATION)
    report = importlib.import_module(f"helpers.papers.{paper}.report")
    assert callable(report.claims)
    table = importlib.import_module(f"helpers.papers.{paper}.settings").SETTINGS
    assert set(table) == set(profiles.PROFILE_NAMES)
    assert profiles.settings_for(paper, profiles.get("smoke")) is table["smoke"]


@pytest.mark.parametrize("paper", profiles.PAPERS)
def test_a_mechanism_imports_no_experiment_report_or_figures(paper):
    package = f"helpers.papers.{paper}"
    for path in sorted((PAPERS_DIR / paper).glob("mechanism*.py")):
        forbidden = [name for name in _imported_modules(path, package)
                     if re.match(r"helpers\.papers\.\w+\.(experiment|report|figures)", name)]
        assert not forbidden, f"{path} imports {forbidden}; the mechanism must not depend on its experiment or report"


def test_no_module_of_a_paper_package_is_over_500_lines():
    long_ones = [f"{path.relative_to(ROOT)} ({count} lines)" for path in sorted(PAPERS_DIR.rglob("*.py"))
                 if (count := len(path.read_text().splitlines())) > PAPER_MODULE_MAX_LINES]
    assert not long_ones, f"split these along a seam, keeping their names importable where they were: {long_ones}"


def test_the_import_check_sees_relative_and_absolute_imports(tmp_path):
    source = tmp_path / "mechanism.py"
    source.write_text("from . import report\nfrom .experiment import run\nimport helpers.papers.magnet.figures\n")
    found = _imported_modules(source, "helpers.papers.magnet")
    assert {"helpers.papers.magnet.report", "helpers.papers.magnet.experiment",
            "helpers.papers.magnet.figures"} <= found


def _functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_over_80_lines_without_a_reason_in_its_docstring():
    long_ones = []
    for path in sorted((ROOT / "helpers").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py")):
        for node in _functions(path):
            length = node.end_lineno - node.lineno + 1
            if length > LONG_FUNCTION_LINES and LONG_REASON not in (ast.get_docstring(node) or ""):
                long_ones.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    assert not long_ones, f"split these or say '{LONG_REASON} ...' in the docstring: {long_ones}"


TRACKER = re.compile(r"\bissues? ?#?\d+|\bthe issue'?s?\b|\bitems? \d+(?:[-–,]| and)? ?\d* of\b|\(see the issues\)",
                     re.IGNORECASE)


def test_no_file_refers_to_the_issue_tracker():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    hits = []
    for name in tracked.stdout.splitlines():
        path = ROOT / name
        if path.suffix not in {".py", ".ipynb", ".md", ".toml", ".yml", ".cfg"} and path.name != "Makefile":
            continue
        if not path.exists() or path == Path(__file__).resolve():  # this file spells the pattern's examples
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if TRACKER.search(line):
                hits.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not hits, "say what and why in the code's own terms, not which issue asked for it:\n" + "\n".join(hits)


def test_the_tracker_pattern_catches_the_usual_forms():
    for text in ("(issue 12, item 4)", "items 1-6 of issue 18", "the issue's goal", "see issue #3"):
        assert TRACKER.search(text), text
    for text in ("GitHub issues of the authors' code", "an issue with padding"):
        assert not TRACKER.search(text), text


LEDGER_MAX_LINES = 400  # one module per concern of the claims ledger, each short enough to read whole


def test_every_module_of_the_ledger_stays_short():
    modules = {path.name: len(path.read_text().splitlines()) for path in (ROOT / "helpers" / "ledger").glob("*.py")}
    assert {"rows.py", "notebook.py", "gathering.py", "render.py", "cli.py"} <= set(modules)  # the package is there
    over = {name: lines for name, lines in sorted(modules.items()) if lines > LEDGER_MAX_LINES}
    assert not over, f"split these modules of helpers/ledger/ by concern (at most {LEDGER_MAX_LINES} lines): {over}"


def test_the_registry_names_every_paper_package_its_notebook_and_the_papers_its_claims_are_of():
    """helpers/papers/__init__.py is the one list: every package there is a notebook's, every declared claim is of a
    paper its notebook lists, every paper is cited by its package, and docs/layout.md's table says the same."""
    from helpers import papers
    from helpers.ledger import declared_claims

    assert set(papers.PACKAGES) == {path.name for path in _paper_packages()}
    assert [notebook.number for notebook in papers.NOTEBOOKS] == sorted(path.name[:2] for path in
                                                                        (ROOT / "notebooks").glob("0*.ipynb"))
    claimed = {}
    for entry in declared_claims().values():
        claimed.setdefault(entry.notebook, set()).add(entry.paper)
    assert claimed == {notebook.number: set(notebook.papers) for notebook in papers.NOTEBOOKS}
    for key in papers.PAPERS:
        assert {"title", "authors", "venue"} <= set(papers.citation(key)), key
    table = re.findall(r"^\| `helpers/papers/(\w+)/` \| (\d\d) \| (.+) \|$", (ROOT / "docs" / "layout.md").read_text(),
                       re.M)
    assert table == [(notebook.package, notebook.number, notebook.subject) for notebook in papers.NOTEBOOKS]
