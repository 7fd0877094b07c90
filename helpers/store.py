"""How the workbook writes and reads its own files: fingerprints, atomic writes, checked reads, asset checksums.

- :func:`fingerprint` keys every run folder and cached artefact by everything that changes its contents, so a
  changed setting lands in a new folder instead of coming back with an old run's numbers
  (:func:`reuse_run`, :func:`run_dir_for`, :func:`cache_path_for`).
- :func:`atomic_write` writes to a temporary file in the same folder, fsyncs it and ``os.replace``-s it over the
  target, so a crash leaves either the old file or the new one, never a torn one. Every helper writes through it
  (:func:`write_text`, :func:`write_json`, :func:`save_torch`, :func:`replace_dir` for whole folders).
- :func:`read_json`, :func:`read_jsonl`, :func:`load_torch` turn a damaged file into :class:`CorruptFileError`,
  naming the path and what to do about it.
- :func:`record_checksum` / :func:`verify_checksum` keep a size + sha256 sidecar next to each downloaded or
  converted asset: the size is checked on every use, the hash by ``python -m helpers.assets``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path

REPAIR_ASSETS = "python -m helpers.assets --force"
CHECKSUM_SUFFIX = ".sha256.json"


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


# --------------------------------------------------------------------------- fingerprints


def _canonical(value):
    """A JSON-able form of ``value``: dataclasses as dicts, tuples as lists, tensors by content, the rest by str."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _canonical(getattr(value, field.name)) for field in dataclasses.fields(value)}
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


def _corrupt(path, what: str, fix: str, error: Exception | None = None) -> CorruptFileError:
    reason = f" ({type(error).__name__}: {error})" if error is not None else ""
    return CorruptFileError(f"{path} is not a readable {what}{reason}; it is damaged or truncated. {fix}")


DELETE_HINT = "Delete it (and its run folder, if it is one) and rerun to recompute it."


def read_json(path, fix: str = DELETE_HINT):
    """The JSON value in ``path``; a damaged file raises :class:`CorruptFileError` naming the path and ``fix``."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise _corrupt(path, "JSON file", fix, error) from error


def read_jsonl(path, fix: str = DELETE_HINT) -> list:
    """Every record of a JSON-lines file. A torn *last* line (a crash mid-append) is dropped with a warning;
    a damaged line elsewhere raises :class:`CorruptFileError`."""
    path = Path(path)
    if not path.exists():
        return []
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError as error:
        raise _corrupt(path, "JSON-lines file", fix, error) from error
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):
                warnings.warn(f"{path}: dropping a torn last line ({line[:60]!r}); an interrupted write left it",
                              stacklevel=2)
                break
            raise _corrupt(path, "JSON-lines file", fix + f" (line {number} of {len(lines)} is damaged)", error) from error
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
        raise _corrupt(path, "torch file", fix, error) from error


# --------------------------------------------------------------------------- asset checksums


def reuse_if_intact(present: bool, verify, label: str, ready: str, redo: str) -> bool:
    """Whether a cached asset can be reused: it is ``present`` and ``verify(full=True)`` passes. Prints ``ready``
    when it is reused, or the damage and ``redo`` when it must be fetched or built again."""
    if not present:
        return False
    try:
        verify(full=True)
    except CorruptFileError as error:
        print(f"[{label}] {error}\n[{label}] {redo}")
        return False
    print(f"[{label}] {ready}")
    return True


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def sha256_of(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(8 * 1024 * 1024), b""):
            digest.update(chunk)
    return digest.hexdigest()


def record_checksum(path) -> dict:
    """Write ``<path>.sha256.json`` with the file's size and sha256 (call right after creating the file)."""
    path = Path(path)
    record = {"size": path.stat().st_size, "sha256": sha256_of(path)}
    write_json(_checksum_path(path), record)
    return record


def verify_checksum(path, *, full: bool = False, fix: str = f"Run `{REPAIR_ASSETS}` to fetch it again.") -> bool:
    """Check ``path`` against its recorded size (always) and sha256 (with ``full``).

    Returns False when no checksum was recorded; raises :class:`CorruptFileError` naming the path and ``fix``
    when the file is missing or differs.
    """
    path = Path(path)
    sidecar = _checksum_path(path)
    if not sidecar.exists():
        return False
    expected = read_json(sidecar, fix)
    if not path.is_file():
        raise CorruptFileError(f"{path} is missing (its checksum {sidecar.name} is there). {fix}")
    size = path.stat().st_size
    if size != expected.get("size"):
        raise CorruptFileError(f"{path} has {size:,} bytes, but {expected.get('size'):,} were recorded when it was "
                               f"written; it is truncated or damaged. {fix}")
    if full and sha256_of(path) != expected.get("sha256"):
        raise CorruptFileError(f"{path} has the recorded size but not the recorded sha256; it is damaged. {fix}")
    return True


# --------------------------------------------------------------------------- format checks (no recorded checksum needed)


def check_safetensors(path, fix: str = f"Run `{REPAIR_ASSETS}` to fetch it again.") -> None:
    """Raise :class:`CorruptFileError` unless ``path``'s safetensors header is readable and its tensors end exactly
    at the end of the file (a truncated download or conversion fails this; only the header is read)."""
    import struct

    path = Path(path)
    size = path.stat().st_size
    try:
        with open(path, "rb") as handle:
            (header_length,) = struct.unpack("<Q", handle.read(8))
            if header_length > size - 8:
                raise ValueError(f"header length {header_length} exceeds the file")
            header = json.loads(handle.read(header_length))
        end = max((entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"), default=0)
    except (struct.error, ValueError, KeyError, TypeError, IndexError) as error:
        raise _corrupt(path, "safetensors file", fix, error) from error
    if 8 + header_length + end != size:
        raise CorruptFileError(f"{path} has {size:,} bytes, but its safetensors header needs "
                               f"{8 + header_length + end:,}; it is truncated or damaged. {fix}")


def check_zip(path, fix: str = f"Run `{REPAIR_ASSETS}` to fetch it again.", *, full: bool = False) -> None:
    """Raise :class:`CorruptFileError` unless ``path`` is a readable zip (a wheel); ``full`` also checks every CRC."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip() if full else None
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise _corrupt(path, "zip archive", fix, error) from error
    if bad is not None:
        raise CorruptFileError(f"{path}: member {bad} fails its CRC check; the archive is damaged. {fix}")


def check_ar(path, fix: str = f"Run `{REPAIR_ASSETS}` to fetch it again.") -> None:
    """Raise :class:`CorruptFileError` unless ``path`` is a complete ``ar`` archive (a .deb): every member's
    declared size fits, and the members end at the end of the file."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        if handle.read(8) != b"!<arch>\n":
            raise CorruptFileError(f"{path} does not start like an ar archive (.deb); it is damaged. {fix}")
        position = 8
        while position < size:
            header = handle.read(60)
            try:
                if len(header) != 60 or header[58:60] != b"`\n":
                    raise ValueError("a member header is cut off")
                member = int(header[48:58].decode().strip())
            except (ValueError, UnicodeDecodeError) as error:
                raise _corrupt(path, "ar archive (.deb)", fix, error) from error
            position += 60 + member + (member % 2)
            if position - (member % 2) > size:
                raise CorruptFileError(f"{path}: a member needs {position:,} bytes but the file has {size:,}; "
                                       f"it is truncated. {fix}")
            handle.seek(position)
