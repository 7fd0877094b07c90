"""How the workbook keys, finds and locks its runs, and (re-exported) how it writes and reads its own files.

- :func:`fingerprint` keys every run folder and cached artefact by everything that changes its contents, so a
  changed setting lands in a new folder instead of coming back with an old run's numbers
  (:func:`reuse_run`, :func:`run_dir_for`, :func:`cache_path_for`).
- :func:`exclusive` holds a run folder's lock while one process writes into it; :func:`folder_lock` serialises the
  writers of one folder.
- Atomic writes and checked reads (:func:`atomic_write`, :func:`write_json`, :func:`read_json`,
  :class:`CorruptFileError`, ...) live in :mod:`helpers.file_io`; asset checksums (:func:`record_checksum`,
  :func:`verify_checksum`, ...) in :mod:`helpers.checksums`. Both are read as ``store.<name>`` throughout.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import json
import os
import shutil
from pathlib import Path

from .checksums import (CHECKSUM_SUFFIX, REPAIR_ASSETS, check_ar, check_safetensors, check_zip,  # noqa: F401
                        record_checksum, recorded_checksum, reuse_if_intact, sha256_of, verify_checksum)
from .file_io import (DELETE_HINT, CorruptFileError, WriteError, atomic_write, finish_together,  # noqa: F401
                      load_torch, read_json, read_jsonl, recover_dir, remove_stale_scratch, replace_dir, save_torch,
                      write_failed, write_failure, write_json, write_text, write_together)

# --------------------------------------------------------------------------- fingerprints


def _canonical(value):
    """A JSON-able form of ``value``: dataclasses as dicts (without the fields whose metadata says ``key=False``, such
    as a run's length), tuples as lists, tensors by content, the rest by str."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a field marked key=False keys nothing
        return {field.name: _canonical(getattr(value, field.name)) for field in dataclasses.fields(value)
                if field.metadata.get("key", True)}
    if isinstance(value, dict):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if isinstance(value, enum.Enum):
        return _canonical(value.value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "numpy"):  # a tensor: by shape, dtype and bytes
        tensor = value.detach().cpu().contiguous()
        raw = tensor.reshape(-1).view(__import__("torch").uint8).numpy().tobytes()
        return {"tensor": list(tensor.shape), "dtype": str(tensor.dtype), "md5": hashlib.md5(raw).hexdigest()}
    if callable(value):  # a function: by name (its repr would hold a memory address)
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}"
    return str(value)


def canonical_settings(settings) -> object:
    """``settings`` as the plain JSON value that :func:`fingerprint` hashes (and run folders store)."""
    return _canonical(settings)


def canonical_without(settings, names) -> dict:
    """``settings`` as :func:`canonical_settings` gives them, less the top-level fields ``names``: a run's key without
    its length, so that one run folder holds the run at any length (``helpers.training.train`` extends it or reads its
    prefix) while the full key, length included, still keys what a finished length gives."""
    canonical = canonical_settings(settings)
    if not isinstance(canonical, dict):
        raise ValueError(f"settings={settings!r} must be a dataclass or a dict to leave fields {tuple(names)} out of")
    return {name: value for name, value in canonical.items() if name not in names}


def fingerprint(settings, length: int = 12) -> str:
    """A short md5 of ``settings`` (dicts, lists, dataclasses, tensors, scalars), independent of dict order.

    Not a security hash: it only has to change whenever anything that changes a run's contents changes.
    """
    text = json.dumps(_canonical(settings), sort_keys=True)
    return hashlib.md5(text.encode()).hexdigest()[:length]


def texts_digest(texts, version: str = "") -> str:
    """The md5 of a list of texts plus a cache ``version`` (keys the spaCy caches by their input)."""
    return hashlib.md5(("\n".join(texts) + version).encode()).hexdigest()


def run_dir_for(name: str, settings) -> Path:
    """``runs/<name>_<fingerprint(settings)>``: one folder per setting, so a rerun with other settings starts fresh."""
    from .paths import runs_dir

    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"name={name!r} must be a non-empty folder name without '/'")
    return runs_dir() / f"{name}_{fingerprint(settings)}"


LOCK_FILE = ".lock"


class InUseError(RuntimeError):
    """Another live process holds the lock of a run folder (or adapter) that this one wants to write."""


@contextlib.contextmanager
def exclusive(folder, what: str = "run folder"):
    """Hold ``folder``'s lock (``<folder>/.lock``) while the block writes into it: one writer per run at a time.

    A second process refuses at once with :class:`InUseError`, naming the holder's pid and command. The lock is
    the kernel's (``fcntl.flock``), so it dies with its process: a killed run leaves no stale lock behind.
    """
    import fcntl
    import sys

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / LOCK_FILE, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise InUseError(f"the {what} {folder} is being written by {holder}; wait for it to finish (or stop it), "
                             f"then run this again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} ({' '.join(sys.argv)[:120] or 'python'})")
        handle.flush()
        yield folder
    finally:
        handle.close()  # closing releases the lock


@contextlib.contextmanager
def folder_lock(folder):
    """Wait for, then hold, a lock on ``folder`` itself (``fcntl.flock`` on the folder, so no lock file is left in
    it): the writers that take it, threads or processes, go one at a time. :func:`replace_dir`'s callers take it on
    the parent of the folder they replace (``adapters.save_adapter``): two swaps of one folder at once would move
    each other's copies aside."""
    import fcntl

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield folder
    finally:
        os.close(descriptor)  # closing releases the lock


def holder_of(folder) -> str | None:
    """Who holds ``folder``'s :func:`exclusive` lock right now, or None when nobody does."""
    import fcntl

    path = Path(folder) / LOCK_FILE
    if not path.exists():
        return None
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            return handle.read().strip() or "another process"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


RESULT_FILE = "result.json"


@dataclasses.dataclass(frozen=True)
class Run:
    """A run folder keyed by its settings (:func:`reuse_run`): what it was trained under, and its result once done."""

    path: Path
    settings: object  # canonical (plain JSON) settings; the folder name carries their fingerprint

    def finished(self) -> dict | None:
        """The result :meth:`finish` stored, or None while the run has not finished."""
        path = self.path / RESULT_FILE
        if not path.exists():
            return None
        return read_json(path, f"Delete {self.path} to run it again.")

    def finish(self, result: dict) -> dict:
        """Store ``result`` (plain JSON) atomically as the finished run's; later :func:`reuse_run` calls read it."""
        write_json(self.path / RESULT_FILE, result, indent=1)
        return result


def reuse_run(name: str, settings, *, resume: bool = True) -> Run:
    """The one way a finished or interrupted run is found again: ``runs/<name>_<fingerprint(settings)>``.

    ``settings`` is the object that keys the run: a settings dataclass (or a dict of them) holding exactly what
    changes the run's numbers, never a hand-written list of field names. Another value of any field names another
    folder, so a run never resumes under other settings. ``resume=False`` empties the folder first (a fresh run).
    """
    path = run_dir_for(name, settings)
    if not resume and path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    return Run(path, canonical_settings(settings))


def cache_path_for(kind: str, settings, suffix: str = "") -> Path:
    """``<cache>/<kind>/<fingerprint(settings)><suffix>``: where a cached artefact computed from ``settings`` lives."""
    from .paths import cache_dir

    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind={kind!r} must be a non-empty folder name")
    return cache_dir() / kind / f"{fingerprint(settings)}{suffix}"


def flat_differences(old, new, prefix: str = "") -> list[str]:
    """``key: old -> new`` for every leaf that differs between two canonical settings (nested keys dotted)."""
    if isinstance(old, dict) and isinstance(new, dict):
        lines = []
        for key in sorted(set(old) | set(new)):
            name = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                lines.append(f"{name}: (absent) -> {new[key]!r}")
            elif key not in new:
                lines.append(f"{name}: {old[key]!r} -> (absent)")
            else:
                lines.extend(flat_differences(old[key], new[key], name))
        return lines
    return [] if old == new else [f"{prefix or '(settings)'}: {old!r} -> {new!r}"]
