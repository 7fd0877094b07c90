"""Which code computed a notebook's numbers, and whether HEAD's code still computes them.

A notebook's *code* is what it runs (:func:`code_paths`): the notebook, every shared module ``helpers/*.py``,
``helpers/ledger/``, ``helpers/plots/`` and the papers' registry, its paper package and every paper package that package (or the notebook) imports, followed
transitively (notebook 07's diffusion package imports notebook 05's ``openltg``, so a change there is 07's too).

Rows computed at a commit stay *current* at HEAD in one of two ways (:func:`code_current`):

- the notebook's code has not changed since that commit (:func:`code_changes` is empty; a change of only the Colab
  pin line does not count), or
- the change was **carried by equal numbers**: ``python -m helpers.equal_numbers`` ran the notebook at a slice scale
  at a commit whose code equals the rows' commit's and at HEAD's code, and every number it writes came out equal bit
  for bit. ``claims/carried.json`` keeps that record (:func:`carried_from`): the commit the numbers were recorded
  at, and a digest of the code they were found equal under (:func:`code_digest`), which must be HEAD's.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
from pathlib import Path

from . import papers, store
from .paths import repo_root

# The Colab install cell's pin (scripts/pin_colab_commit.py) as it stands in a notebook's JSON: it names the commit the
# notebooks belong to and changes after every helpers change, while no computation reads it.
COLAB_PIN_LINE = r'^ *"WORKBOOK_COMMIT = '
_PIN = re.compile(COLAB_PIN_LINE.encode(), re.MULTILINE)
CARRIED_FILE = "claims/carried.json"
REPAIR_CARRIED = "rerun `python -m helpers.equal_numbers` (make carry), or delete the file to treat every changed " \
                 "notebook as stale"
# The paper package each notebook runs, from the registry (notebook 02's is the masked-LM recipe's package, mntp).
NOTEBOOK_PACKAGES = papers.NOTEBOOK_PACKAGES
# The shared code every notebook runs: the modules of helpers/, the ledger, the plots and the papers' registry.
SHARED_CODE = (":(glob)helpers/*.py", "helpers/ledger/", "helpers/plots/", "helpers/papers/__init__.py")


def git(*arguments: str, root: Path | None = None) -> str | None:
    """``git <arguments>``'s stripped output in the workbook root (or ``root``); None when git fails."""
    try:
        result = subprocess.run(["git", *arguments], cwd=root or repo_root(), capture_output=True, text=True,
                                timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _imported_packages(source: str, own: str | None = None) -> set[str]:
    """The paper packages a module's source imports: ``helpers.papers.X`` (absolute), ``from helpers.papers import
    X, Y`` and, inside package ``own``, ``from ..X import ...``; every import statement, function-local ones too."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0:
                names = [module] + [f"{module}.{alias.name}" for alias in node.names]
            elif node.level == 2 and own is not None:  # from ..openltg import mechanism (inside helpers/papers/own/)
                names = [f"helpers.papers.{module}"] if module else \
                    [f"helpers.papers.{alias.name}" for alias in node.names]
            else:
                continue
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["helpers", "papers"] and len(parts) > 2:
                found.add(parts[2])
    return found


def _notebook_source(path: Path) -> str:
    try:
        cells = json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return ""
    return "\n".join("".join(cell.get("source", "")) for cell in cells if cell.get("cell_type") == "code"
                     and not "".join(cell.get("source", "")).lstrip().startswith(("!", "%")))


def notebook_packages(notebook: str, root: Path | None = None) -> list[str]:
    """The paper packages notebook ``notebook`` runs: its own (:data:`NOTEBOOK_PACKAGES`), those its code cells
    import, and every package those import, transitively (read from the working tree's sources)."""
    root = Path(root or repo_root())
    papers = root / "helpers" / "papers"
    start = {NOTEBOOK_PACKAGES[notebook]} if notebook in NOTEBOOK_PACKAGES else set()
    for path in sorted((root / "notebooks").glob(f"{notebook}_*.ipynb")):
        start |= _imported_packages(_notebook_source(path))
    seen, todo = set(), sorted(start)
    while todo:
        package = todo.pop()
        if package in seen or not (papers / package).is_dir():
            continue
        seen.add(package)
        for module in sorted((papers / package).glob("*.py")):
            todo.extend(sorted(_imported_packages(module.read_text(), own=package) - seen))
    return sorted(seen)


def code_paths(notebook: str, root: Path | None = None) -> list[str]:
    """The code notebook ``notebook`` runs, as git pathspecs: the notebook, the shared code (:data:`SHARED_CODE`:
    ``helpers/*.py``, the ledger, the plots, the papers' registry), and its paper packages
    (:func:`notebook_packages`). Imports made by name at run time (``importlib.import_module``) are not followed: the
    settings module a notebook reads is its own package's."""
    return ([f"helpers/papers/{package}/" for package in notebook_packages(notebook, root)]
            + [*SHARED_CODE, f":(glob)notebooks/{notebook}_*.ipynb"])


def _is_commit(commit) -> bool:
    return isinstance(commit, str) and bool(re.fullmatch(r"[0-9a-f]{7,40}", commit)) and \
        git("cat-file", "-e", f"{commit}^{{commit}}") is not None


def code_changes(commit, notebook: str, to: str = "HEAD") -> list[str] | None:
    """The files of notebook ``notebook``'s code (:func:`code_paths`) that differ between ``commit`` and ``to``, a
    change of only the Colab pin (:data:`COLAB_PIN_LINE`) not counted; None when either is not a commit of this
    repository (or git cannot say)."""
    if not _is_commit(commit) or (to != "HEAD" and not _is_commit(to)):
        return None
    # --numstat (not --name-only, which lists a file whatever -I ignores): a file whose changed lines all match the pin
    # has no line to count, so it is not listed
    changed = git("diff", "--numstat", "--no-renames", "-I", COLAB_PIN_LINE, commit, to, "--", *code_paths(notebook))
    return None if changed is None else [line.split("\t", 2)[2] for line in changed.splitlines() if line.strip()]


def code_digest(notebook: str, commit: str | None = "HEAD") -> str | None:
    """A sha256 over notebook ``notebook``'s code files (:func:`code_paths`) and their contents at ``commit``, or in
    the working tree (tracked and untracked files git does not ignore) when ``commit`` is None; the Colab pin line
    is left out of a notebook's content. None when git cannot say."""
    specs = code_paths(notebook)
    if commit is None:
        listed = git("ls-files", "-co", "--exclude-standard", "--", *specs)
        root = repo_root()
        read = (lambda path: (root / path).read_bytes() if (root / path).is_file() else None)
    else:
        if git("rev-parse", "--verify", "-q", f"{commit}^{{commit}}") is None:
            return None
        listed = git("ls-tree", "-r", "--name-only", commit, "--", *_plain(specs))
        read = (lambda path: _show(commit, path))
    if listed is None:
        return None
    wanted = _matcher(notebook)
    digest = hashlib.sha256()
    for path in sorted(set(listed.splitlines())):
        content = read(path) if wanted(path) else None
        if content is None:
            continue
        if path.endswith(".ipynb"):
            content = _PIN.sub(b"", content)
        digest.update(path.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()


def _plain(specs: list[str]) -> list[str]:
    """``ls-tree`` takes no glob magic: the folders the pathspecs lie in (:func:`_matcher` then picks the files)."""
    return sorted({"helpers/" if spec.startswith(":(glob)helpers") else "notebooks/" if "notebooks/" in spec else spec
                   for spec in specs})


def _matcher(notebook: str):
    """Whether a repository path is one of notebook ``notebook``'s code files (:func:`code_paths`, as a predicate)."""
    packages = tuple(f"helpers/papers/{package}/" for package in notebook_packages(notebook))
    shape = re.compile(rf"helpers/[^/]+\.py|helpers/(ledger|plots)/.+|helpers/papers/__init__\.py"
                       rf"|notebooks/{re.escape(notebook)}_[^/]*\.ipynb")
    return lambda path: bool(shape.fullmatch(path)) or path.startswith(packages)


def _show(commit: str, path: str) -> bytes | None:
    try:
        result = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo_root(), capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def carried_path() -> Path:
    return repo_root() / CARRIED_FILE


def read_carried(path: Path | None = None) -> dict[str, dict]:
    """``claims/carried.json``: for each notebook carried by equal numbers, ``{"from": the commit its slice numbers
    were recorded at, "code": the code digest they were found equal under, "numbers": the numbers' digest,
    "slice": the slice record's path}``; empty when there is none."""
    path = Path(path or carried_path())
    if not path.exists():
        return {}
    payload = store.read_json(path, f"It records which notebooks' code changes moved no number; {REPAIR_CARRIED}.")
    notebooks = payload.get("notebooks") if isinstance(payload, dict) else None
    if not isinstance(notebooks, dict):
        raise store.CorruptFileError(f"{path} has no 'notebooks' table; {REPAIR_CARRIED}")
    return notebooks


def carried_from(commit, notebook: str) -> dict | None:
    """The record that carries notebook ``notebook``'s numbers computed at ``commit`` to HEAD, or None: a
    ``claims/carried.json`` entry whose slice was recorded at a commit with the same code as ``commit`` and whose
    numbers were found equal under HEAD's code (its digest is :func:`code_digest` at HEAD)."""
    entry = read_carried().get(notebook)
    if not isinstance(entry, dict) or code_changes(commit, notebook, to=str(entry.get("from"))) != []:
        return None
    return entry if entry.get("code") == code_digest(notebook, "HEAD") else None


def code_current(commit, notebook: str) -> tuple[bool | None, str]:
    """Whether HEAD's code computes what notebook ``notebook``'s code computed at ``commit``, and how it is known:
    ``(True, "unchanged")``, ``(True, "carried from <from> by equal numbers")``, ``(False, "<files> changed")``, or
    ``(None, why)`` when ``commit`` is not a commit of this repository."""
    changed = code_changes(commit, notebook)
    if changed is None:
        return None, f"{commit!r} is not a commit of this checkout (a shallow clone?)"
    if not changed:
        return True, "unchanged"
    carried = carried_from(commit, notebook)
    if carried is not None:
        return True, f"carried from {commit[:7]} to HEAD by equal numbers (slice recorded at {carried['from'][:7]})"
    shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    return False, f"its code changed since ({len(changed)} files: {shown})"


SLICES_DIR = "claims/slices"


def slice_path(notebook: str) -> Path:
    """``claims/slices/<notebook>.json``: the numbers notebook ``notebook`` writes at the slice scale, recorded at one
    commit on one machine (``python -m helpers.equal_numbers --record``)."""
    return repo_root() / SLICES_DIR / f"{notebook}.json"


def numbers_digest(numbers: dict) -> str:
    """A sha256 over a slice's numbers (``{name: value}``), in a form that tells every float bit apart."""
    text = json.dumps(sorted((name, float.hex(value) if isinstance(value, float) else value)
                             for name, value in numbers.items()), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def read_slice(notebook: str, path: Path | None = None) -> dict | None:
    """A slice record (:func:`slice_path`), checked: its numbers digest is the one it states. None when absent."""
    path = Path(path or slice_path(notebook))
    if not path.exists():
        return None
    repair = f"Record it again: python -m helpers.equal_numbers --record --notebooks {notebook}"
    record = store.read_json(path, repair)
    if not isinstance(record, dict) or not isinstance(record.get("numbers"), dict):
        raise store.CorruptFileError(f"{path} holds no 'numbers' table. {repair}")
    if numbers_digest(record["numbers"]) != record.get("digest"):
        raise store.CorruptFileError(f"{path}: its numbers do not match the digest it states (edited by hand?). "
                                     f"{repair}")
    return record


def carry_problems() -> list[str]:
    """What is wrong with ``claims/carried.json``: an entry whose slice record is missing, was recorded at another
    commit, or holds other numbers than the ones found equal (its digest)."""
    problems = []
    try:
        carried = read_carried()
    except store.CorruptFileError as error:
        return [str(error)]
    for notebook, entry in sorted(carried.items()):
        try:
            record = read_slice(notebook)
        except store.CorruptFileError as error:
            problems.append(str(error))
            continue
        if not isinstance(entry, dict) or record is None:
            problems.append(f"notebook {notebook} is carried by equal numbers, but {SLICES_DIR}/{notebook}.json is "
                            f"missing; {REPAIR_CARRIED}")
        elif (entry.get("from"), entry.get("numbers")) != (record.get("commit"), record.get("digest")):
            problems.append(f"notebook {notebook}: {CARRIED_FILE} carries the numbers recorded at "
                            f"{str(entry.get('from'))[:7]}, but {SLICES_DIR}/{notebook}.json holds those of "
                            f"{str(record.get('commit'))[:7]}; {REPAIR_CARRIED}")
    return problems
