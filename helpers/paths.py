"""Where the workbook keeps things: repo root, figures/, data/, the cache and runs/.

Under nbmake the working directory is the notebook's folder, so nothing here is
relative to the working directory. ``WORKBOOK_ROOT`` overrides the search (useful
in Colab, where the package is pip-installed away from the checkout).
"""
from __future__ import annotations

import os
from pathlib import Path

_MARKERS = ("pyproject.toml", "notebooks", "helpers")


def _looks_like_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in _MARKERS)


def repo_root() -> Path:
    """The workbook checkout: $WORKBOOK_ROOT, else the folder above this package, else the cwd upwards."""
    override = os.environ.get("WORKBOOK_ROOT")
    if override:
        return Path(override).expanduser().resolve()
    package_parent = Path(__file__).resolve().parents[1]
    if _looks_like_root(package_parent):
        return package_parent
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if _looks_like_root(candidate):
            return candidate
    return here


def _existing(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def figures_dir() -> Path:
    return _existing(repo_root() / "figures")


def data_dir() -> Path:
    return _existing(repo_root() / "data")


def cache_dir() -> Path:
    """Downloaded and converted assets (embedded model, corpus). $WORKBOOK_CACHE overrides."""
    override = os.environ.get("WORKBOOK_CACHE")
    return _existing(Path(override).expanduser() if override else data_dir() / "cache")


def runs_dir() -> Path:
    return _existing(repo_root() / "runs")
