"""Run every numbered notebook in order under the chosen profile and print the time each took.

Executed copies go to runs/notebooks/ (the committed notebooks stay stripped); figures land in figures/. In the cpu
profile the claims the notebooks wrote are gathered into claims/ledger_cpu.json, their result tables into
claims/tables_cpu.json, and the README's claims table and result tables are rebuilt.
Usage: WORKBOOK_PROFILE=cpu python scripts/reproduce.py [notebooks/01_*.ipynb ...]
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def run(paths: list[Path], timeout: int = 3600) -> None:
    os.environ.setdefault("WORKBOOK_ROOT", str(ROOT))
    from helpers import claims, profiles

    profile = profiles.current()
    out_dir = ROOT / "runs" / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"profile: {profile.name}")
    timings = []
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        print(f"running {path.name} ...", flush=True)
        try:
            NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        finally:  # keep the executed cells, even of a failed run, for inspection
            nbformat.write(notebook, out_dir / path.name)
        elapsed = time.perf_counter() - start
        timings.append((path.name, elapsed))
        print(f"  {path.name}: {elapsed:.1f} s", flush=True)
    print("\nnotebook times:")
    for name, elapsed in timings:
        print(f"  {elapsed:8.1f} s  {name}")
    print(f"  {sum(t for _, t in timings):8.1f} s  total; figures in {ROOT / 'figures'}")
    if profile.name == claims.LEDGER_PROFILE:
        rows = claims.gather(notebooks=[path.name[:2] for path in paths])
        print(f"claims ledger {claims.ledger_path()}: {len(rows)} claims, {claims.counts(rows)}; result tables "
              f"{[entry.key for entry in claims.read_tables()]}; README blocks regenerated")


if __name__ == "__main__":
    chosen = [Path(arg).resolve() for arg in sys.argv[1:]] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    run(chosen)
