"""Jane Austen's six novels, offline: the workbook's cpu-profile corpus.

They come from the Debian package ``r-cran-janeaustenr``: :func:`fetch_austen` downloads the .deb with
``apt-get download`` (no install, so no R), unpacks it with ``dpkg -x``, reads the novels out of R's lazy-load
database (``data/Rdata.rdb/.rdx``) with ``rdata`` and caches them as ``cache_dir()/austen/novels.json``, recorded
with its size and sha256. Everything else reads that cache (:func:`austen_novels`) and never downloads implicitly;
:mod:`helpers.data` turns the novels into paragraphs and splits.
"""
from __future__ import annotations

import bz2
import functools
import lzma
import os
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

from helpers import store
from helpers.errors import SETUP_HINT, MissingAssetError
from helpers.paths import cache_dir

AUSTEN_DEB_PACKAGE = "r-cran-janeaustenr"

# R object name in janeaustenr -> book title (the titles janeaustenr::austen_books() uses),
# in the order of publication that austen_books() uses.
AUSTEN_BOOKS = {
    "sensesensibility": "Sense & Sensibility",
    "prideprejudice": "Pride & Prejudice",
    "mansfieldpark": "Mansfield Park",
    "emma": "Emma",
    "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion",
}


def austen_cache_path() -> Path:
    """Where the parsed novels live: ``cache_dir()/austen/novels.json``."""
    return cache_dir() / "austen" / "novels.json"


def _missing_austen_error() -> MissingAssetError:
    return MissingAssetError(
        f"The Jane Austen corpus is missing: {austen_cache_path()} does not exist; "
        f"{SETUP_HINT} to fetch it (needs apt-get and dpkg, i.e. Debian/Ubuntu)."
    )


def _run_quietly(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True)


def _download_deb(downloads: Path, force: bool) -> Path:
    existing = sorted(downloads.glob(f"{AUSTEN_DEB_PACKAGE}_*.deb"))
    if existing and not force:
        try:
            store.verify_checksum(existing[-1], full=True)
            store.check_ar(existing[-1])
            print(f"[austen] reusing {existing[-1]}")
            return existing[-1]
        except store.CorruptFileError as error:
            print(f"[austen] {error}\n[austen] downloading it again")
    for stale in existing:
        stale.unlink()
    print(f"[austen] apt-get download {AUSTEN_DEB_PACKAGE} (into {downloads})")
    result = _run_quietly(["apt-get", "download", AUSTEN_DEB_PACKAGE], cwd=downloads)
    if result.returncode != 0 and hasattr(os, "geteuid") and os.geteuid() == 0:
        # A fresh container often has no package lists yet; as root we can fix that ourselves.
        print("[austen] apt-get download failed; running apt-get update and retrying")
        _run_quietly(["apt-get", "update"], cwd=downloads)
        result = _run_quietly(["apt-get", "download", AUSTEN_DEB_PACKAGE], cwd=downloads)
    if result.returncode != 0:
        raise MissingAssetError(
            f"`apt-get download {AUSTEN_DEB_PACKAGE}` failed in {downloads} (exit {result.returncode}): "
            f"{result.stderr.strip()[-500:]}\nRun `sudo apt-get update`, then {SETUP_HINT}."
        )
    found = sorted(downloads.glob(f"{AUSTEN_DEB_PACKAGE}_*.deb"))
    if not found:
        raise MissingAssetError(f"apt-get reported success but no {AUSTEN_DEB_PACKAGE}_*.deb is in {downloads}")
    store.check_ar(found[-1])
    store.record_checksum(found[-1])
    return found[-1]


def read_r_lazyload_db(rdx_path: Path) -> dict[str, Any]:
    """Every object in an R lazy-load database (``X.rdx`` index + ``X.rdb`` blobs), converted by rdata."""
    import rdata

    rdx_path = Path(rdx_path)
    rdb_path = rdx_path.with_suffix(".rdb")
    index = rdata.read_rds(rdx_path)  # the index is itself a (gzipped) RDS file
    compression = int(index["compressed"][0]) if "compressed" in index else 1
    if index.get("references"):
        raise ValueError(f"{rdx_path}: lazy-load databases with environment references are not supported")
    blob_bytes = rdb_path.read_bytes()
    objects: dict[str, Any] = {}
    for name, (offset, length) in index["variables"].items():
        blob = blob_bytes[int(offset) : int(offset) + int(length)]
        payload = _decompress_r_blob(blob, compression, where=f"{rdb_path}:{name}")
        objects[str(name)] = rdata.conversion.convert(rdata.parser.parse_data(payload, extension=".rds"))
    return objects


def _decompress_r_blob(blob: bytes, compression: int, where: str) -> bytes:
    """R's lazy-load blobs: a 4-byte big-endian length, then zlib (type 1) or a type byte and data (types 2, 3)."""
    if compression == 0:
        return blob
    (expected_length,) = struct.unpack(">I", blob[:4])
    if compression == 1:
        data = zlib.decompress(blob[4:])
    else:
        kind, body = blob[4:5], blob[5:]
        decompressors = {b"0": bytes, b"1": zlib.decompress, b"2": bz2.decompress, b"Z": lzma.decompress}
        if kind not in decompressors:
            raise ValueError(f"{where}: unknown R compression type {kind!r}")
        data = decompressors[kind](body)
    if len(data) != expected_length:
        raise ValueError(f"{where}: decompressed {len(data)} bytes, header says {expected_length}")
    return data


def _novels_from_package_tree(root: Path) -> dict[str, list[str]]:
    candidates = sorted(root.glob("usr/lib/R/site-library/janeaustenr/data/Rdata.rdx"))
    candidates = candidates or sorted(root.rglob("janeaustenr/data/Rdata.rdx"))
    if not candidates:
        raise MissingAssetError(f"no janeaustenr/data/Rdata.rdx inside the unpacked package at {root}")
    objects = read_r_lazyload_db(candidates[0])
    missing = [name for name in AUSTEN_BOOKS if name not in objects]
    if missing:
        raise ValueError(f"{candidates[0]} lacks the novels {missing}; it has {sorted(objects)}")
    return {
        title: ["" if line is None else str(line) for line in objects[name]]
        for name, title in AUSTEN_BOOKS.items()
    }


def fetch_austen(force: bool = False) -> Path:
    """Download, unpack and parse janeaustenr into ``novels.json`` (idempotent); returns its path."""
    target = austen_cache_path()
    if not force and store.reuse_if_intact(target.exists(), verify_austen, "austen", f"already cached: {target}",
                                           "building it again"):
        return target
    missing_tools = [tool for tool in ("apt-get", "dpkg") if shutil.which(tool) is None]
    if missing_tools:
        raise MissingAssetError(
            f"The Jane Austen corpus ({target}) is built from the Debian package {AUSTEN_DEB_PACKAGE}, "
            f"but {' and '.join(missing_tools)} is not available on this machine. Run `make setup` on a "
            f"Debian/Ubuntu machine (or container) and copy {target} here, or use a Hub corpus "
            f"(WORKBOOK_PROFILE=gpu)."
        )
    started = time.perf_counter()
    downloads = cache_dir() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    deb = _download_deb(downloads, force=force)
    unpacked = downloads / "janeaustenr-unpacked"
    shutil.rmtree(unpacked, ignore_errors=True)
    print(f"[austen] dpkg -x {deb.name}")
    result = _run_quietly(["dpkg", "-x", str(deb), str(unpacked)], cwd=downloads)
    if result.returncode != 0:
        raise MissingAssetError(f"`dpkg -x {deb} {unpacked}` failed: {result.stderr.strip()[-500:]}")
    try:
        novels = _novels_from_package_tree(unpacked)
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    store.write_json(target, novels, ensure_ascii=False, indent=0)
    store.record_checksum(target)
    words = sum(len(line.split()) for lines in novels.values() for line in lines)
    print(f"[austen] wrote {target}: {len(novels)} novels, {words:,} words in {time.perf_counter() - started:.1f}s")
    return target


def verify_austen(full: bool = False) -> Path:
    """The cached ``novels.json``, checked against its recorded size (and sha256 with ``full``); a damaged file
    raises ``store.CorruptFileError`` naming it and the repair command."""
    path = austen_cache_path()
    if not path.exists():
        raise _missing_austen_error()
    store.verify_checksum(path, full=full)
    if full:
        cached_novels(str(path), path.stat().st_mtime_ns)  # parses it
    return path


@functools.lru_cache(maxsize=4)
def cached_novels(path: str, modified_ns: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The novels of the cache file ``path`` as ``((title, lines), ...)``, parsed once per ``modified_ns``."""
    del modified_ns  # only part of the cache key, so a rewritten file is read again
    novels = store.read_json(path, f"Run `{store.REPAIR_ASSETS}` to build it again.")
    if not isinstance(novels, dict) or not novels:
        raise store.CorruptFileError(f"{path} holds no novels; run `{store.REPAIR_ASSETS}` to build it again.")
    return tuple((title, tuple(lines)) for title, lines in novels.items())


def austen_novels() -> dict[str, list[str]]:
    """The cached novels as {book title: [lines]}; raises MissingAssetError if not fetched."""
    path = verify_austen(full=False)
    return {title: list(lines) for title, lines in cached_novels(str(path), path.stat().st_mtime_ns)}

