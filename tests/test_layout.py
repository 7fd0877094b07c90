"""The shape of the helper package: one package per paper with the same files, the mechanism apart from the
experiment, no long function without a reason, and no reference to a tracker the reader cannot see."""
from __future__ import annotations

import ast
import fnmatch
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


# --------------------------------------------------------------------------- the import graph

# Import cycles allowed, each one exactly (its set of modules), with its reason; none is: any cycle fails the test.
CYCLES_ALLOWED: set[frozenset] = set()


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path = ROOT, package: str = "helpers") -> dict[str, dict[str, int]]:
    """``{module: {module it imports: line}}`` over every ``<package>/**/*.py`` under ``root``, read with ``ast``:
    module-level and function-local imports alike, relative ones resolved. An import names the most specific module
    of the tree it reaches (``from . import masks`` the module ``masks``, ``from .models import load_model`` the
    module ``models``); the parent packages Python imports on the way are not edges (a package's ``__init__`` that
    re-exports its own modules is the usual shape, not a cycle)."""
    paths = {_module_name(path, root): path for path in sorted((root / package).rglob("*.py"))}

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in paths.items():
        own = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = {}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = own.rsplit(".", node.level - 1)[0] if node.level > 1 else own if node.level else ""
                base = ".".join(part for part in (base, node.module) if part)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else known(base)
                           for alias in node.names]
            else:
                continue
            for target in targets:
                if target is not None and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def _import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle of each strongly connected group of two or more modules, as ``[a, b, ..., a]``."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def connect(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = set()
            while not group or module not in group:
                group.add(stack.pop())
            on_stack.difference_update(group)
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            connect(module)
    cycles = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}  # breadth first, inside the group, back to the start
        queue = [start]
        while queue:
            module = queue.pop(0)
            for target in sorted(graph[module]):
                if target == start:
                    queue = []
                    cycles.append(paths[module] + [start])
                    break
                if target in group and target not in paths:
                    paths[target] = paths[module] + [target]
                    queue.append(target)
    return cycles


def _describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    return cycle[0] + "".join(f" -> {target} (line {graph[source][target]} of {source})"
                              for source, target in zip(cycle, cycle[1:]))


def test_no_import_circle_among_the_helpers():
    graph = _import_graph()
    cycles = [cycle for cycle in _import_cycles(graph) if frozenset(cycle) not in CYCLES_ALLOWED]
    assert not cycles, ("the helpers import each other in a circle; move what both sides need into a lower module "
                        "(one that imports neither):\n" + "\n".join(_describe(cycle, graph) for cycle in cycles))


def test_the_import_graph_sees_a_circle_through_a_function_local_import(tmp_path):
    package = tmp_path / "helpers"
    (package / "papers" / "x").mkdir(parents=True)
    for name in ("__init__.py", "papers/__init__.py"):
        (package / name).write_text("")
    (package / "papers" / "x" / "__init__.py").write_text("from . import low\n")  # low does not import it back
    (package / "papers" / "x" / "low.py").write_text("from ... import high\n")
    (package / "high.py").write_text("import os\n\n\ndef late():\n    from .papers.x.low import thing\n")
    (package / "alone.py").write_text("from .papers.x import low\nfrom helpers import high\n")
    graph = _import_graph(tmp_path)
    assert graph["helpers.high"] == {"helpers.papers.x.low": 5}
    assert graph["helpers.alone"] == {"helpers.papers.x.low": 1, "helpers.high": 2}
    cycles = _import_cycles(graph)
    assert [set(cycle) for cycle in cycles] == [{"helpers.high", "helpers.papers.x.low"}]
    assert _describe(cycles[0], graph) == ("helpers.high -> helpers.papers.x.low (line 5 of helpers.high) -> "
                                           "helpers.high (line 1 of helpers.papers.x.low)")


MODULE_MAX_LINES = 500
# Modules over MODULE_MAX_LINES for now, each with its reason; every other file of helpers/ stays at or under it.
LONG_MODULES: dict[str, str] = {}


def test_no_module_of_the_helpers_over_500_lines():
    long_ones = []
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MODULE_MAX_LINES and not any(fnmatch.fnmatchcase(name, pattern) for pattern in LONG_MODULES):
            long_ones.append(f"{name} ({lines} lines)")
    assert not long_ones, f"split these along their seams (or name them in LONG_MODULES, with the reason): {long_ones}"


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
