"""Checksums of the offline assets (the embedded model, the Austen corpus, their downloads) and checks of their formats.

:func:`record_checksum` / :func:`verify_checksum` keep a size + sha256 sidecar next to each downloaded or converted
asset: the size is checked on every use, the hash by ``python -m helpers.assets``. :func:`check_safetensors`,
:func:`check_zip` and :func:`check_ar` check a file's format without a record. :mod:`helpers.store` re-exports all of
it.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .file_io import CorruptFileError, corrupt, read_json, write_json

REPAIR_ASSETS = "python -m helpers.assets --force"
CHECKSUM_SUFFIX = ".sha256.json"


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


def recorded_checksum(path, fix: str = f"Run `{REPAIR_ASSETS}` to fetch it again.") -> dict | None:
    """``{"size": ..., "sha256": ...}`` as :func:`record_checksum` wrote it for ``path``, or None when none was."""
    sidecar = _checksum_path(Path(path))
    return read_json(sidecar, fix) if sidecar.exists() else None


def verify_checksum(path, *, full: bool = False, fix: str = f"Run `{REPAIR_ASSETS}` to fetch it again.") -> bool:
    """Check ``path`` against its recorded size (always) and sha256 (with ``full``).

    Returns False when no checksum was recorded; raises :class:`CorruptFileError` naming the path and ``fix``
    when the file is missing or differs.
    """
    path = Path(path)
    sidecar = _checksum_path(path)
    expected = recorded_checksum(path, fix)
    if expected is None:
        return False
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
        raise corrupt(path, "safetensors file", fix, error) from error
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
        raise corrupt(path, "zip archive", fix, error) from error
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
                raise corrupt(path, "ar archive (.deb)", fix, error) from error
            position += 60 + member + (member % 2)
            if position - (member % 2) > size:
                raise CorruptFileError(f"{path}: a member needs {position:,} bytes but the file has {size:,}; "
                                       f"it is truncated. {fix}")
            handle.seek(position)
