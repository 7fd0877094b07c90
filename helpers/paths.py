"""Where the workbook keeps things: repo root, figures/, data/, the cache and runs/.

Which checkout is "the" workbook (``repo_root``):

1. ``$WORKBOOK_ROOT`` when set (useful in Colab, where the package is pip-installed away from the checkout);
2. else the checkout the working directory is in (cwd upwards; under nbmake the cwd is ``notebooks/``);
3. else the checkout this package was imported from (its parent folder), e.g. a script run from elsewhere.

When (2) and (3) are two different checkouts, the code would come from one and the files land in the other
(figures, runs and caches of checkout A written by checkout B's editable install, or the reverse). That is
refused with :class:`CheckoutMismatchError`, which says how to choose: set ``WORKBOOK_ROOT``, or install (or put
on ``PYTHONPATH``) the checkout you are in.
"""
from __future__ import annotations

import os
from pathlib import Path

_MARKERS = ("pyproject.toml", "notebooks", "helpers")


class CheckoutMismatchError(RuntimeError):
    """The working directory is in one workbook checkout and ``helpers`` was imported from another."""


def _looks_like_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in _MARKERS)


def _checkout_of_cwd() -> Path | None:
    here = Path.cwd().resolve()
    return next((candidate for candidate in (here, *here.parents) if _looks_like_root(candidate)), None)


def repo_root() -> Path:
    """The workbook checkout: $WORKBOOK_ROOT, else the one the cwd is in, else the one this package came from.

    Raises CheckoutMismatchError when the cwd's checkout and the package's checkout differ (see the module doc).
    """
    override = os.environ.get("WORKBOOK_ROOT")
    if override:
        return Path(override).expanduser().resolve()
    package_parent = Path(__file__).resolve().parents[1]
    package_root = package_parent if _looks_like_root(package_parent) else None
    cwd_root = _checkout_of_cwd()
    if cwd_root is not None and package_root is not None and cwd_root != package_root:
        raise CheckoutMismatchError(
            f"the working directory is in the checkout {cwd_root}, but helpers was imported from {package_root}; "
            f"its figures, runs and caches would mix the two. Set WORKBOOK_ROOT={cwd_root} (or ={package_root}) "
            f"to choose, or `pip install -e {cwd_root}` / `export PYTHONPATH={cwd_root}` to run this checkout's code.")
    return cwd_root or package_root or Path.cwd().resolve()


class ReadOnlyRootError(PermissionError):
    """The workbook root (where figures, runs and caches go) cannot be written."""


def _existing(path: Path) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReadOnlyRootError(f"cannot create {path} ({error.strerror or error}): the workbook writes its figures, "
                                f"runs and caches under {repo_root()}. Point WORKBOOK_ROOT at a writable folder "
                                f"(export WORKBOOK_ROOT=~/mlm-workbook) and rerun.") from None
    if not os.access(path, os.W_OK):
        raise ReadOnlyRootError(f"{path} is not writable: the workbook writes its figures, runs and caches under "
                                f"{repo_root()}. Point WORKBOOK_ROOT at a writable folder (export "
                                f"WORKBOOK_ROOT=~/mlm-workbook) and rerun.")
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
