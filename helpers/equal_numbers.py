"""Equal numbers keep the study: a code change that moves no number is shown to move none, cheaply.

The seed study's rows were computed by a notebook's code at one commit; after any edit of that code
(:func:`helpers.code_identity.code_paths`) they would be stale until the study ran again (hours). Instead, this
command runs each notebook at a **slice scale** and compares every number it writes with the numbers recorded at a
commit whose code equals the study's, bit for bit:

- the slice: every cell of the notebook, at the smoke profile's sizes (a few training steps, small evaluations, one
  timing trial), on the embedded SmolLM2-135M in the cpu profile's precision (bf16 where the CPU computes it), from
  empty ``runs/`` and caches, so every code path the study runs is executed (``slice_site/sitecustomize.py`` swaps
  the model in every process, at any commit, without touching that commit's code);
- its numbers (:func:`collect_numbers`): every number and fingerprint in every JSON file the run writes under
  ``runs/`` and the caches (claims values and intervals, result tables, curve points, run settings; run fingerprints
  are in the folder names), and the sha256 of every safetensors file (adapter weights);
- a record (:func:`record`): the numbers at one commit, run twice in a git worktree of it; a number the two runs give
  differently (a timing) is listed as volatile and never compared. ``claims/slices/<notebook>.json``;
- a carry (:func:`carry`): the notebook at the working tree; where every number equals the record's, the notebook's
  rows computed at any commit with the record's code are current at this code: ``claims/carried.json`` says so, and
  ``python -m helpers.ledger --check`` shows "carried ... by equal numbers". Where a number moved, the command names
  it and the notebook is stale (its study must run again).

What a slice cannot see: a change that acts only at the cpu profile's sizes (a branch taken only past the smoke
sizes, a cpu-only setting: those change the notebook's parameters fingerprint, which provenance checks apart), the
number of seeds, examples looks, and anything on another machine (a record is one machine's: on another CPU the
command records again at the record's commit first). ``python -m helpers.equal_numbers --help`` lists the options.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import code_identity, store
from .paths import cache_dir, repo_root

SLICE_PROFILE = "smoke"  # the slice's sizes
SLICE_MODEL = "embedded:smollm2-135m"  # the slice's model (the tests use the tiny random decoder)
SITE = Path(__file__).resolve().parent / "slice_site"
NOTEBOOKS = ("01", "02", "03", "04", "05", "06", "07")
NOTEBOOK_TIMEOUT_S = 1800
RECORD_RUNS = 2  # a record runs the slice this many times: what differs between them is volatile
# Environment the slice sets itself; a study's or a user's setting of these must not leak into it.
_CLEARED = ("WORKBOOK_SEED", "WORKBOOK_EXAMPLES", "WORKBOOK_DTYPE", "WORKBOOK_MODEL", "WORKBOOK_PREFIX")
# Fields that say where and when, never what: the run's provenance (commit, machine) and write times.
_WHERE_AND_WHEN = re.compile(r"(^|\.)(written|digest|provenance\.(commit|dirty|machine\..*|written))$")
_FINGERPRINT = re.compile(r"[0-9a-f]{12}")
# What a claims row *means*, not what was measured: its declaration's numbers (a paper package's report.CLAIMS) and
# the minimum detectable effect that follows from its kind. A re-declaration changes these and no measurement, and
# the study's per-seed files are read again under it (helpers.ledger.study.redeclared_rows), so they are not compared.
_DECLARED = re.compile(r"claims\[\d+\]\.(direction|threshold|margin|paper_effect|trained|mde)$")


class SliceError(RuntimeError):
    """A slice run failed (the notebook raised): the message names the notebook and where its executed copy is."""


def machine() -> dict:
    """The machine a slice ran on: a record's numbers are compared only on the same kind (CPU model, cores, torch)."""
    import torch

    from .device import cpu_model

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "torch": torch.__version__}


def _flatten(value, name: str, out: dict) -> None:
    """Every number (int, float, bool, None) and fingerprint-shaped string under ``value``, keyed by its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{name}.{key}" if name else str(key), out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _flatten(item, f"{name}[{index}]", out)
    elif value is None or isinstance(value, (bool, int, float)):
        out[name] = value
    elif isinstance(value, str) and _FINGERPRINT.fullmatch(value):
        out[name] = value


def collect_numbers(*folders: Path) -> dict:
    """The numbers a slice run wrote under ``folders`` (its ``runs/`` and its cache): ``{"<file>:<path>": value}``
    for every JSON and JSON-lines file (line ``i`` as ``#i``), ``{"<file>": sha256}`` for every safetensors file;
    provenance and write times (:data:`_WHERE_AND_WHEN`) left out. File names are relative to their folder."""
    import hashlib

    numbers = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if not path.is_file() or path.is_symlink() or any(part.is_symlink() for part in path.parents):
                continue
            name = f"{Path(folder).name}/{path.relative_to(folder).as_posix()}"
            found = {}
            if path.suffix == ".json":
                _flatten(store.read_json(path, "a slice run wrote it"), "", found)
            elif path.suffix == ".jsonl":
                for index, line in enumerate(path.read_text().splitlines()):
                    if line.strip():
                        _flatten(json.loads(line), f"#{index}", found)
            elif path.suffix == ".safetensors":
                found[""] = hashlib.sha256(path.read_bytes()).hexdigest()
            numbers.update({f"{name}:{key}" if key else name: value for key, value in found.items()
                            if not _WHERE_AND_WHEN.search(key)})
    return numbers


def _asset_folders() -> list[str]:
    """The cache's offline-asset folders (the embedded model, the corpus, the downloads): a slice links them in and
    computes everything else from empty."""
    from .assets import asset_files

    cache = cache_dir().resolve()
    return sorted({path.resolve().relative_to(cache).parts[0] for path in asset_files()
                   if path.exists() and cache in path.resolve().parents})


def run_slice(notebook: str, checkout: Path, scratch: Path, model: str = SLICE_MODEL) -> dict:
    """Runs notebook ``notebook`` of ``checkout`` at the slice scale on ``model``, from empty ``runs/`` and caches
    under ``scratch`` (the assets linked in), and returns the numbers it wrote (:func:`collect_numbers`)."""
    checkout = Path(checkout).resolve()
    paths = sorted((checkout / "notebooks").glob(f"{notebook}_*.ipynb"))
    if len(paths) != 1:
        raise ValueError(f"notebook={notebook!r}: {checkout / 'notebooks'} has {len(paths)} notebooks {notebook}_*")
    shutil.rmtree(scratch, ignore_errors=True)
    root, cache = Path(scratch) / "root", Path(scratch) / "cache"
    root.mkdir(parents=True)
    cache.mkdir()
    for folder in _asset_folders():
        (cache / folder).symlink_to(cache_dir().resolve() / folder, target_is_directory=True)
    env = {key: value for key, value in os.environ.items() if key not in _CLEARED}
    env.update(WORKBOOK_ROOT=str(root), WORKBOOK_CACHE=str(cache), WORKBOOK_PROFILE=SLICE_PROFILE,
               WORKBOOK_SLICE_MODEL=model, WORKBOOK_SLICE_CHECKOUT=str(checkout),
               PYTHONPATH=os.pathsep.join([str(SITE), str(checkout)]))
    result = subprocess.run([sys.executable, str(SITE / "execute_notebook.py"), paths[0].name, str(NOTEBOOK_TIMEOUT_S)],
                            cwd=paths[0].parent, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-25:])
        raise SliceError(f"notebook {notebook} failed at the slice scale in {checkout}:\n{tail}")
    return collect_numbers(root / "runs", cache)


def _worktree(commit: str, where: Path) -> Path:
    """A detached git worktree of ``commit`` at ``where`` (removed by :func:`_drop_worktree`)."""
    if code_identity.git("worktree", "add", "--detach", "-f", str(where), commit) is None:
        raise ValueError(f"commit={commit!r}: git cannot check it out into a worktree")
    return where


def _drop_worktree(where: Path) -> None:
    code_identity.git("worktree", "remove", "--force", str(where))
    shutil.rmtree(where, ignore_errors=True)


def record(notebooks, commit: str = "HEAD", model: str = SLICE_MODEL, runs: int = RECORD_RUNS,
           say=print) -> dict[str, dict]:
    """Records the slice numbers of ``notebooks`` at ``commit`` (in a git worktree of it): ``runs`` runs, the numbers
    that differ between them volatile. Writes ``claims/slices/<notebook>.json`` and returns the records."""
    full = code_identity.git("rev-parse", "--verify", "-q", f"{commit}^{{commit}}")
    if full is None:
        raise ValueError(f"commit={commit!r} is not a commit of this repository")
    if runs < 1:
        raise ValueError(f"runs={runs!r} must be at least 1")
    records = {}
    with tempfile.TemporaryDirectory(prefix="slice-record-") as scratch:
        checkout = _worktree(full, Path(scratch) / "checkout")
        try:
            for notebook in notebooks:
                started, seen = time.perf_counter(), []
                for run in range(runs):
                    seen.append(run_slice(notebook, checkout, Path(scratch) / "run", model))
                first = seen[0]
                volatile = sorted({name for numbers in seen[1:] for name in set(first) ^ set(numbers)}
                                  | {name for numbers in seen[1:] for name in set(first) & set(numbers)
                                     if not _same(first[name], numbers[name])})
                kept = {name: value for name, value in first.items() if name not in volatile}
                records[notebook] = {"notebook": notebook, "commit": full, "model": model, "machine": machine(),
                                     "runs": runs, "volatile": volatile, "numbers": kept,
                                     "digest": code_identity.numbers_digest(kept)}
                store.write_json(code_identity.slice_path(notebook), records[notebook])
                say(f"notebook {notebook}: {len(kept)} numbers recorded at {full[:7]} ({len(volatile)} volatile, "
                    f"{runs} runs, {time.perf_counter() - started:.0f} s)")
        finally:
            _drop_worktree(checkout)
    return records


def _same(a, b) -> bool:
    """Equal bit for bit (a NaN equals a NaN; 0.0 and -0.0 differ)."""
    if isinstance(a, float) and isinstance(b, float):
        return a.hex() == b.hex() if not (math.isnan(a) and math.isnan(b)) else True
    return type(a) is type(b) and a == b


def moved_numbers(recorded: dict, numbers: dict) -> list[str]:
    """The recorded numbers (``recorded["numbers"]``, volatile ones and a claims row's declared ones left out) that
    ``numbers`` does not give bit for bit, one line each: changed, missing, or new."""
    volatile = set(recorded.get("volatile", ()))
    old = {name: value for name, value in recorded["numbers"].items() if not _DECLARED.search(name)}
    new = {name: value for name, value in numbers.items() if name not in volatile and not _DECLARED.search(name)}
    lines = [f"{name}: {old[name]!r} -> {new[name]!r}" for name in sorted(set(old) & set(new))
             if not _same(old[name], new[name])]
    lines += [f"{name}: {old[name]!r} -> missing" for name in sorted(set(old) - set(new))]
    lines += [f"{name}: new, {new[name]!r}" for name in sorted(set(new) - set(old))]
    return lines


def carry(notebooks, model: str | None = None, say=print, most: int = 12) -> dict[str, list[str]]:
    """Runs each notebook's slice on the working tree and compares it with its record (recorded again first, at the
    record's commit, when the record is another machine's). Equal: ``claims/carried.json`` carries the notebook
    (from the record's commit, under the working tree's code digest). Moved: the entry goes and the moved numbers are
    returned (``{notebook: lines}``) and printed. A notebook whose code equals its record's is left as it is."""
    carried = code_identity.read_carried()
    moved = {}
    with tempfile.TemporaryDirectory(prefix="slice-carry-") as scratch:
        for notebook in notebooks:
            recorded = code_identity.read_slice(notebook)
            if recorded is None:
                raise ValueError(f"notebook {notebook} has no slice record ({code_identity.slice_path(notebook)}): "
                                 f"record one at the commit its rows were computed at: python -m helpers.equal_numbers "
                                 f"--record --at <commit> --notebooks {notebook}")
            digest = code_identity.code_digest(notebook, None)
            if digest == code_identity.code_digest(notebook, recorded["commit"]):
                carried.pop(notebook, None)
                say(f"notebook {notebook}: code as at its record ({recorded['commit'][:7]}); nothing to carry")
                continue
            if recorded.get("machine") != machine():
                say(f"notebook {notebook}: its record is another machine's ({recorded.get('machine')}); recording "
                    f"again at {recorded['commit'][:7]} on this one")
                recorded = record([notebook], recorded["commit"], model or recorded["model"], say=say)[notebook]
            started = time.perf_counter()
            try:
                lines = moved_numbers(recorded, run_slice(notebook, repo_root(), Path(scratch) / "run",
                                                          model or recorded["model"]))
            except SliceError as error:  # a notebook that no longer runs moved every number; the others go on
                lines = [f"the slice failed: {error}"]
            took = f"{time.perf_counter() - started:.0f} s"
            if lines:
                carried.pop(notebook, None)
                moved[notebook] = lines
                say(f"notebook {notebook}: {len(lines)} numbers moved ({took}); its rows are stale:\n  "
                    + "\n  ".join(lines[:most]) + (f"\n  ... and {len(lines) - most} more" if len(lines) > most else ""))
            else:
                carried[notebook] = {"from": recorded["commit"], "code": digest, "numbers": recorded["digest"],
                                     "at": code_identity.git("rev-parse", "HEAD"), "machine": machine()}
                say(f"notebook {notebook}: all {len(recorded['numbers'])} numbers equal ({took}); carried from "
                    f"{recorded['commit'][:7]}")
            store.write_json(code_identity.carried_path(), {"notebooks": dict(sorted(carried.items()))})
    store.write_json(code_identity.carried_path(), {"notebooks": dict(sorted(carried.items()))})
    return moved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Run the notebooks at the slice scale and compare every number they "
                                     "write with the record: equal numbers carry the study's rows to this code.")
    parser.add_argument("--notebooks", nargs="+", default=list(NOTEBOOKS), choices=NOTEBOOKS, metavar="NN",
                        help="which notebooks (default: all)")
    parser.add_argument("--record", action="store_true",
                        help="record the slice numbers at --at (default HEAD) instead of comparing")
    parser.add_argument("--at", default="HEAD", help="with --record: the commit to record at")
    parser.add_argument("--model", default=None,
                        help=f"the slice's model (default {SLICE_MODEL}; a record keeps the one it ran)")
    parser.add_argument("--runs", type=int, default=RECORD_RUNS, help="with --record: runs to find volatile numbers")
    arguments = parser.parse_args(argv)
    started = time.perf_counter()
    if arguments.record:
        record(arguments.notebooks, arguments.at, arguments.model or SLICE_MODEL, arguments.runs)
        print(f"recorded in {time.perf_counter() - started:.0f} s")
        return 0
    moved = carry(arguments.notebooks, arguments.model)
    print(f"{len(arguments.notebooks) - len(moved)} of {len(arguments.notebooks)} notebooks keep their numbers "
          f"({time.perf_counter() - started:.0f} s)" + (f"; stale: {', '.join(sorted(moved))}" if moved else ""))
    return 1 if moved else 0


if __name__ == "__main__":
    raise SystemExit(main())
