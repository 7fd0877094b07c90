"""Session-wide pytest wiring: the ledger check runs after the notebooks that nbmake executes; under pytest-xdist
(``make test``: two workers) the notebook items share one worker and each worker takes its share of the cores; a
guarded break (``WORKBOOK_BREAK``, ``tests/breaks.py``) is applied to the whole session when asked.

Tests marked ``after_notebooks`` move to the end of the session, so they can read what the notebooks wrote
(e.g. each notebook's claims under ``runs/claims/smoke``). A notebook that tests/test_out_of_order.py runs whole
is not run a second time under nbmake (:func:`pytest_collection_modifyitems`).
"""
import os
import time
from pathlib import Path

import pytest

SESSION_START = time.time()


def pytest_configure(config):
    config.addinivalue_line("markers", "after_notebooks: runs after every other item, notebooks included")
    config.pluginmanager.register(_NotebookGroup(), "workbook-notebook-group")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:  # each pytest-xdist worker gets its share of the cores for its own torch work
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or workers) // workers))
    from helpers.ledger.breaks import BREAK_VAR, REGISTRY

    if os.environ.get(BREAK_VAR):  # python -m helpers.ledger --breaks: the session runs a finding's checks under it
        import importlib.util

        spec = importlib.util.spec_from_file_location("workbook_breaks", Path(__file__).parent / REGISTRY)
        breaks = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(breaks)
        breaks.apply(os.environ[BREAK_VAR], pytest.MonkeyPatch())


OUT_OF_ORDER = "tests/test_out_of_order.py::"
# Under pytest-xdist (make test runs two workers) the items that run notebooks in this checkout or read what they wrote
# run in one worker, in the order below: they share runs/claims/smoke and the figures of the workbook root.
NOTEBOOK_GROUP = "notebooks"
_IN_NOTEBOOK_GROUP = (OUT_OF_ORDER, "tests/test_browser.py::")


class _NotebookGroup:
    """Marks the notebook items before pytest-xdist names its groups (a plugin of its own: tryfirst)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            if (str(item.fspath).endswith(".ipynb") or item.nodeid.startswith(_IN_NOTEBOOK_GROUP)
                    or item.get_closest_marker("after_notebooks") is not None):
                item.add_marker(pytest.mark.xdist_group(NOTEBOOK_GROUP))


@pytest.hookimpl(trylast=True)  # after ``-m``/``-k`` have deselected theirs
def pytest_collection_modifyitems(session, config, items):
    """Move the ``after_notebooks`` tests to the end, and run each of notebooks 02-07 once: the out-of-order test
    runs every code cell of its notebook in order in a kernel of its own, as nbmake does, before it edits the
    parameters cell, so the notebook's nbmake item is left out when that test is collected with it.
    ``session.notebooks_run_by_tests`` names the notebooks run that way."""
    covered = {item.callspec.id for item in items if item.nodeid.startswith(OUT_OF_ORDER) and hasattr(item, "callspec")}
    repeated = [item for item in items
                if str(item.fspath).endswith(".ipynb") and Path(str(item.fspath)).name[:2] in covered]
    if repeated:
        config.hook.pytest_deselected(items=repeated)
        items[:] = [item for item in items if item not in repeated]
    session.notebooks_run_by_tests = covered
    items.sort(key=lambda item: item.get_closest_marker("after_notebooks") is not None)


@pytest.fixture
def session_start() -> float:
    return SESSION_START


def _load_script(name: str):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def load_script():
    """``load_script(name)``: ``scripts/<name>.py`` imported as a module (the scripts are not a package)."""
    return _load_script


def _process_alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is dead, only not yet reaped
        return handle.read().split(")")[-1].split()[0] != "Z"


@pytest.fixture
def process_alive():
    """Whether a process id still runs (a zombie, ended but not yet reaped, counts as ended); reads /proc, Linux."""
    return _process_alive


def names_the_argument(call, argument: str, value: str | None) -> None:
    """The bad-input contract of every public entry point: ``call()`` raises ValueError naming ``argument`` (as a
    word of its own) and, when given, showing ``value``."""
    import re

    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert re.search(rf"(?<![\w.]){re.escape(argument)}(?![\w])", message), f"{argument!r} not named in: {message}"
    if value is not None:
        assert value in message, f"value {value!r} not in: {message}"


@pytest.fixture
def bad_input():
    """:func:`names_the_argument`, for the tables of bad-input probes."""
    return names_the_argument


@pytest.fixture
def lock_holder():
    """Start another process that holds ``store.exclusive(folder)`` until the test ends; yields its Popen."""
    import subprocess
    import sys

    started = []

    def hold(folder):
        holder = subprocess.Popen([sys.executable, "-c", (
            "import time; from helpers import store\n"
            f"with store.exclusive({str(folder)!r}, 'training run'):\n"
            "    print('held', flush=True); time.sleep(120)\n")], stdout=subprocess.PIPE, text=True)
        started.append(holder)
        assert holder.stdout.readline().strip() == "held"
        return holder

    yield hold
    for holder in started:
        holder.kill()
        holder.wait()



class GitWorkbook:
    """A workbook root of its own (:func:`git_workbook`): ``root``, and ``git(*arguments)`` run in it."""

    def __init__(self, root: Path):
        self.root = root

    def git(self, *arguments: str) -> str:
        """``git <arguments>`` in the workbook (as user t, unsigned); its stripped output."""
        import subprocess

        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
                               *arguments], cwd=self.root, check=True, capture_output=True, text=True).stdout.strip()

    def commit(self, message: str = "workbook") -> str:
        """Commit everything in the workbook; the new commit's hash."""
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def git_workbook(tmp_path, monkeypatch):
    """``git_workbook(docs=False, doc_tail="", copy=False, synthetic=False)``: a workbook of its own, a git repository
    with one commit (claims record the commit they were computed at, and gathering checks it), as ``WORKBOOK_ROOT``
    and the working directory, in a fresh kernel (no notebook's parameters cell has run). Bare, it holds the root's
    markers only; with ``docs``, a docs/claims.md and a README with the ledger's markers (``doc_tail`` after the
    claims block); with ``copy``, this checkout's files (tracked and untracked, not ignored; the committed study and
    figures left out), its assets read from this checkout's cache; with ``synthetic``, the ledger's audits take its
    rows for declared (a test's synthetic rows are no paper's claims; the declarations are checked on the real
    ledger). Returns a :class:`GitWorkbook`."""
    import subprocess

    from helpers.ledger import audit, declared, notebook, render

    def make(*, docs: bool = False, doc_tail: str = "", copy: bool = False, synthetic: bool = False) -> GitWorkbook:
        root = tmp_path / "workbook" if copy else tmp_path
        if copy:
            checkout = Path(__file__).resolve().parent
            listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=checkout, check=True,
                                    capture_output=True, text=True).stdout.splitlines()
            for name in listed:
                if (checkout / name).is_file() and not name.startswith(("claims/study/", "figures/")):
                    (root / name).parent.mkdir(parents=True, exist_ok=True)
                    (root / name).write_bytes((checkout / name).read_bytes())
            from helpers.paths import cache_dir

            monkeypatch.setenv("WORKBOOK_CACHE", str(cache_dir()))
        else:
            for marker in ("helpers", "notebooks"):
                (root / marker).mkdir(exist_ok=True)
            (root / "pyproject.toml").touch()
        if docs:
            (root / "docs").mkdir(exist_ok=True)
            (root / "docs" / "claims.md").write_text(
                f"# t\n\n{render.CLAIMS_BEGIN}\nold\n{render.CLAIMS_END}\n{doc_tail}\nafter\n")
            (root / "README.md").write_text(f"# t\n\n{render.HEADLINE_BEGIN}\nold\n{render.HEADLINE_END}\nafter\n")
        monkeypatch.setenv("WORKBOOK_ROOT", str(root))
        monkeypatch.chdir(root)
        monkeypatch.setattr(notebook, "_PARAMETERS", {})
        monkeypatch.setattr(notebook, "_COMPUTED", {})
        if synthetic:
            monkeypatch.setattr(audit, "undeclared_rows", lambda path=None: [])
            monkeypatch.setattr(declared, "missing_checks", lambda declared=None, root=None: [])
        workbook = GitWorkbook(root)
        workbook.git("init", "-q")
        workbook.commit("the workbook")
        return workbook

    return make
