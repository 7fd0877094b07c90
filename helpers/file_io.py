"""Writing and reading the workbook's own files so that a crash or a damaged file never passes for a good one.

- :func:`atomic_write` writes to a temporary file in the same folder, fsyncs it and ``os.replace``-s it over the
  target, so a crash leaves either the old file or the new one, never a torn one. Every helper writes through it
  (:func:`write_text`, :func:`write_json`, :func:`save_torch`, :func:`replace_dir` for whole folders,
  :func:`write_together` for several files as one).
- :func:`read_json`, :func:`read_jsonl`, :func:`load_torch` turn a damaged file into :class:`CorruptFileError`,
  naming the path and what to do about it; a failed write raises :class:`WriteError` naming what is intact.

:mod:`helpers.store` re-exports all of it (``store.write_json``, ``store.CorruptFileError``, ...).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path


class CorruptFileError(ValueError):
    """A file the workbook wrote (or downloaded) cannot be read back as what it should be."""


class WriteError(OSError):
    """A write that failed (a full disk, a file-size limit, a read-only folder): the message names the path and
    what is intact; ``errno`` is the failure's own (``errno.ENOSPC``, ``errno.EFBIG``, ...)."""


def write_failure(error: BaseException) -> int | None:
    """The ``errno`` of an I/O failure behind ``error`` (an ``OSError``, or a safetensors or torch error that wraps
    one as "os error N"), else None: a failed write, as against a bug in what was being written."""
    if isinstance(error, OSError):
        return error.errno or 0
    found = re.search(r"\(os error (\d+)\)", str(error))
    return int(found[1]) if found else None


def write_failed(path, error: BaseException, intact: str, again: str) -> WriteError:
    """A :class:`WriteError` for a failed write of ``path``: "could not write <path> (No space left on device);
    <intact>. Free space on that disk, then <again>". ``intact``: what the failure left as it was; ``again``: how
    to go on once the cause is fixed."""
    import errno

    number = write_failure(error) or 0
    reason = os.strerror(number) if number else f"{type(error).__name__}: {error}"
    remedy = ("Free space on that disk" if number in (errno.ENOSPC, errno.EDQUOT) else
              "Raise the file-size limit (ulimit -f)" if number == errno.EFBIG else
              "Make that folder writable" if number in (errno.EACCES, errno.EPERM, errno.EROFS) else "Fix that")
    return WriteError(number, f"could not write {path} ({reason}); {intact}. {remedy}, then {again}")


# --------------------------------------------------------------------------- atomic writes


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a folder be opened for fsync
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _scratch_prefix(path: Path) -> str:
    """``.<name>.<pid>.``: a scratch file or folder names the process that writes it, so a later writer can tell
    one left by a killed process (its pid gone) from one another process is writing right now."""
    return f".{path.name}.{os.getpid()}."


_SCRATCH = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[^.]*\.tmp")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_scratch(folder) -> list[Path]:
    """Delete the scratch files and folders (``.<name>.<pid>.*.tmp``) that a killed writer left in ``folder``;
    those of live processes stay. Returns what was removed."""
    folder, removed = Path(folder), []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        found = _SCRATCH.fullmatch(entry.name)
        if found and not _pid_alive(int(found["pid"])):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file next to ``path`` for writing; on success fsync it and ``os.replace`` it over ``path``.

    On an exception the temporary file is removed and ``path`` is untouched; one left by a killed process is
    removed by the next write into the same folder (:func:`remove_stale_scratch`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(path.parent)
    descriptor, scratch = tempfile.mkstemp(dir=path.parent, prefix=_scratch_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(descriptor, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(scratch, 0o666 & ~_umask())
        os.replace(scratch, path)
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path, text: str) -> Path:
    with atomic_write(path) as handle:
        handle.write(text)
    return Path(path)


def write_json(path, value, **dump_options) -> Path:
    with atomic_write(path) as handle:
        json.dump(value, handle, **dump_options)
    return Path(path)


class _Writes:
    """A file handle that keeps the ``OSError`` a write raised: torch reports one as a RuntimeError of its own
    ("unexpected pos ..."), which :func:`save_torch` turns back into the ``OSError``."""

    def __init__(self, handle):
        self.handle, self.error = handle, None

    def write(self, data):
        try:
            return self.handle.write(data)
        except OSError as error:
            self.error = error
            raise

    def flush(self):
        return self.handle.flush()


def save_torch(path, value) -> Path:
    """``torch.save`` through :func:`atomic_write`; a failed write raises its ``OSError`` (not torch's RuntimeError),
    and ``path`` keeps its previous contents."""
    import torch

    with atomic_write(path, "wb") as handle:
        writes = _Writes(handle)
        try:
            torch.save(value, writes)
        except RuntimeError as error:
            if writes.error is None:
                raise
            raise writes.error from error
    return Path(path)


def _staged(path: Path) -> Path:
    return path.with_name(f".{path.name}.staged")


def write_together(texts: dict, journal) -> None:
    """Replace several text files as one: after a kill at any instant, either all keep their old contents or,
    once :func:`finish_together` runs (every reader of the group calls it first), all have the new ones.

    Each new text is first written beside its file as ``.<name>.staged``; then ``journal`` lists them; then each
    is renamed over its file and the journal removed. A kill before the journal exists leaves the old files (and
    staged files that :func:`finish_together` removes); a kill after it is rolled forward.
    """
    journal, paths = Path(journal), [Path(path) for path in texts]
    finish_together(journal, paths)
    staged = {str(path): str(write_text(_staged(path), text)) for path, text in zip(paths, texts.values())}
    write_json(journal, staged)
    finish_together(journal, paths)


def finish_together(journal, paths) -> None:
    """Complete an interrupted :func:`write_together` of ``paths`` whose journal is ``journal``, or remove the
    staged files of one interrupted before its journal existed."""
    journal = Path(journal)
    if journal.exists():
        for final, staged in read_json(journal, f"Delete {journal} and rerun the command that wrote it.").items():
            if Path(staged).exists():
                os.replace(staged, final)
                _fsync_dir(Path(final).parent)
        journal.unlink()
        _fsync_dir(journal.parent)
    for path in paths:
        _staged(Path(path)).unlink(missing_ok=True)


@contextlib.contextmanager
def replace_dir(path):
    """Yield a scratch folder next to ``path``; on success it replaces ``path`` whole (the old one stays until then).

    The old folder is first renamed aside, then the new one renamed in, then the old one deleted, so at every
    instant one complete copy exists under ``path`` or under ``<path>.old``; :func:`recover_dir` puts it back.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    recover_dir(path)
    remove_stale_scratch(path.parent)
    scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix=_scratch_prefix(path), suffix=".tmp"))
    os.chmod(scratch, 0o777 & ~_umask())  # mkdtemp makes it private; the folder it becomes should not be
    try:
        yield scratch
        for file in scratch.rglob("*"):
            if file.is_file():
                with open(file, "rb+") as handle:
                    os.fsync(handle.fileno())
        old = path.with_name(path.name + ".old")
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        os.replace(scratch, path)
        _fsync_dir(path.parent)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def recover_dir(path) -> None:
    """After a crash inside :func:`replace_dir`'s swap, put the previous complete folder back under ``path``."""
    path = Path(path)
    old = path.with_name(path.name + ".old")
    if old.exists() and not path.exists():
        os.replace(old, path)


# --------------------------------------------------------------------------- checked reads


def corrupt(path, what: str, fix: str, error: Exception | None = None) -> CorruptFileError:
    """A :class:`CorruptFileError` saying that ``path`` is not a readable ``what`` (and why), and ``fix``."""
    reason = f" ({type(error).__name__}: {error})" if error is not None else ""
    return CorruptFileError(f"{path} is not a readable {what}{reason}; it is damaged or truncated. {fix}")


DELETE_HINT = "Delete it (and its run folder, if it is one) and rerun to recompute it."


def read_json(path, fix: str = DELETE_HINT):
    """The JSON value in ``path``; a damaged file raises :class:`CorruptFileError` naming the path and ``fix``."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise corrupt(path, "JSON file", fix, error) from error


def read_jsonl(path, fix: str = DELETE_HINT) -> list:
    """Every record of a JSON-lines file. A torn *last* line (a crash mid-append) is dropped with a warning;
    a damaged line elsewhere raises :class:`CorruptFileError`."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError as error:
        raise corrupt(path, "JSON-lines file", fix, error) from error
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):
                warnings.warn(f"{path}: dropping a torn last line ({line[:60]!r}); an interrupted write left it",
                              stacklevel=2)
                break
            raise corrupt(path, "JSON-lines file", fix + f" (line {number} of {len(lines)} is damaged)", error) from error
    return records


def load_torch(path, fix: str = DELETE_HINT, *, weights_only: bool = False):
    """``torch.load(path)`` with a damaged file turned into :class:`CorruptFileError` naming the path and ``fix``."""
    import pickle
    import zipfile

    import torch

    path = Path(path)
    try:
        return torch.load(path, weights_only=weights_only, map_location="cpu")
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError, KeyError) as error:
        raise corrupt(path, "torch file", fix, error) from error
