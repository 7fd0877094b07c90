"""Run every numbered notebook in order under the chosen profile and print the time each took, and its costliest cells.

Executed copies go to ``runs/notebooks/`` under the workbook root (``$WORKBOOK_ROOT``, else this checkout), written
atomically; the committed notebooks stay stripped. Figures land in figures/. In the cpu profile the claims of the
notebooks that finished are gathered into claims/ledger_cpu.json, their result tables into claims/tables_cpu.json,
and the generated blocks (docs/claims.md's claims table and result tables, the README's headline) are rebuilt. A
notebook that fails does not stop the others; the run then names every failed notebook and exits 1, so a partial rerun
never passes for a full one. Ctrl-C (SIGINT)
stops the run: the running notebook's kernel is shut down (kernels run in their own sessions, so the terminal's
signal reaches only this script), its executed copy is kept, the notebooks that finished are named, nothing is
gathered, and the run exits 130.
Runs that extend and whose paper says how to stop them early train make reproduce's prefix
(``helpers.profiles.REPRODUCE_PREFIX``, a quarter of their length) unless ``WORKBOOK_PREFIX`` is set (1: the full
length, ``make reproduce STOPS=1``).
Usage: WORKBOOK_PROFILE=cpu python scripts/reproduce.py [notebooks/01_*.ipynb ...]
"""
from __future__ import annotations

import asyncio
import atexit
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
INTERRUPTED = 128 + signal.SIGINT  # the shell's exit status for a run stopped by Ctrl-C


class InterruptibleClient(NotebookClient):
    """nbclient's client, with SIGINT recorded. nbclient's own SIGINT handler shuts the kernel down and lets the
    waiting cell fail, so an interrupt would read as a failed notebook (an AssertionError from the double cleanup)
    and the run would go on; this one shuts the kernel down the same way and sets ``interrupted``."""

    interrupted = False

    async def async_start_new_kernel(self, **kwargs) -> None:
        try:  # async_setup_kernel has just installed nbclient's handler on this loop: replace it
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._on_interrupt)
        except (RuntimeError, NotImplementedError):  # not the main thread, or no loop signals (Windows)
            pass
        await super().async_start_new_kernel(**kwargs)

    def _on_interrupt(self) -> None:
        self.interrupted = True
        atexit.unregister(self._cleanup_kernel)  # shut down here, not again at exit
        self._async_cleanup_kernel_future = asyncio.ensure_future(self._async_cleanup_kernel())

    async def _async_cleanup_kernel(self) -> None:
        if self.km is not None:  # the interrupt's cleanup and the context manager's both call this: once is enough
            await super()._async_cleanup_kernel()


def costliest_cells(notebook, top: int = 3) -> list[tuple[float, int, str]]:
    """The ``top`` longest-running code cells of an executed notebook, longest first: (seconds, cell index, the cell's
    first line). Read from the timestamps nbclient records in each cell's ``metadata.execution`` (from the kernel's
    receipt of the code to its reply); a cell without both timestamps (not run, or run elsewhere) is left out."""
    timed = []
    for index, cell in enumerate(notebook.cells):
        stamps = cell.get("metadata", {}).get("execution", {})
        began, ended = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
        if cell.cell_type != "code" or not began or not ended:
            continue
        seconds = (datetime.fromisoformat(ended.replace("Z", "+00:00"))
                   - datetime.fromisoformat(began.replace("Z", "+00:00"))).total_seconds()
        first_line = next((line for line in cell.source.splitlines() if line.strip()), "")
        timed.append((seconds, index, first_line))
    return sorted(timed, key=lambda row: -row[0])[:top]


def execute(path: Path, out_dir: Path, timeout: int, executed: dict | None = None) -> str | None:
    """Run one notebook; keep its executed copy (of a failed run too) in ``out_dir``, and the executed notebook in
    ``executed[path.name]`` when given. Returns the error, or None; a copy that cannot be written (a full disk, a
    file-size limit) is this notebook's error too, and the run goes on. Raises KeyboardInterrupt, after the kernel
    is shut down and the copy written, when SIGINT arrived while the notebook ran."""
    notebook = nbformat.read(path, as_version=4)
    error = copy_error = None
    client = InterruptibleClient(notebook, timeout=timeout, kernel_name="python3",
                                 resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except Exception as failure:  # a failing cell, a dead kernel, a timeout: report it, run the next notebook
        if getattr(failure, "ename", None):  # nbclient's CellExecutionError: the cell's own exception
            error = f"{failure.ename}: {failure.evalue}"
        else:
            error = f"{type(failure).__name__}: {failure}"
    finally:
        if executed is not None:
            executed[path.name] = notebook
        copy_error = write_copy(notebook, out_dir / path.name)
    if client.interrupted:
        raise KeyboardInterrupt(f"{path.name} interrupted" + (f" ({copy_error})" if copy_error else ""))
    return "; ".join(part for part in (error, copy_error) if part) or None


def write_copy(notebook, target: Path) -> str | None:
    """Write an executed notebook to ``target`` (atomically); a failed write is returned as a message naming the
    file and what is intact, never raised."""
    from helpers import store

    try:
        store.write_text(target, nbformat.writes(notebook))
        return None
    except OSError as failure:
        problem = store.write_failed(target, failure, "the notebook itself ran, and the copy there from an earlier "
                                     "run, if any, is intact", "rerun this notebook")
        return f"its executed copy was not saved: {problem}"


def run(paths: list[Path], timeout: int = 3600) -> int:
    os.environ.setdefault("WORKBOOK_ROOT", str(ROOT))
    from helpers import ledger, profiles
    from helpers.paths import figures_dir, runs_dir

    profile = profiles.current()
    out_dir = runs_dir() / "notebooks"
    print(f"profile: {profile.name}; executed copies in {out_dir}")
    timings, failed, executed = [], {}, {}
    for path in paths:
        start = time.perf_counter()
        print(f"running {path.name} ...", flush=True)
        try:
            error = execute(path, out_dir, timeout, executed)
        except KeyboardInterrupt:
            return interrupted(path, paths, timings, failed, out_dir)
        elapsed = time.perf_counter() - start
        timings.append((path.name, elapsed))
        if error:
            failed[path.name] = error
        print(f"  {path.name}: {elapsed:.1f} s" + (f"  FAILED ({error})" if error else ""), flush=True)
    print("\nnotebook times:")
    for name, elapsed in timings:
        print(f"  {elapsed:8.1f} s  {name}" + ("  FAILED" if name in failed else ""))
    print(f"  {sum(t for _, t in timings):8.1f} s  total; figures in {figures_dir()}")
    print("\ncostliest cells (where each notebook's time went):")
    for name, _ in timings:
        for seconds, index, first_line in costliest_cells(executed[name]):  # not read back: its copy may be missing
            print(f"  {seconds:8.1f} s  {name} cell {index}: {first_line[:90]}")
    finished = [path.name[:2] for path in paths if path.name not in failed]
    if profile.name == ledger.LEDGER_PROFILE and finished and profile.dtype != profiles.get(profile.name).dtype:
        # WORKBOOK_DTYPE changed the profile: the ledger holds the profile's own numbers, so this run is compared
        # with it and not gathered into it
        print(f"\n{profiles.DTYPE_VAR}={profile.dtype}: the ledger holds the {profile.name} profile's own dtype "
              f"({profiles.get(profile.name).dtype}); this run's trained values against its prediction intervals for a new seed, not gathered:")
        for line in ledger.compare_with_ledger(profile.name, finished):
            print("  " + line)
    elif profile.name == ledger.LEDGER_PROFILE and finished:
        rows = ledger.gather(notebooks=finished)
        print(f"claims ledger {ledger.ledger_path()}: notebooks {', '.join(finished)} gathered; "
              f"{ledger.headline(rows)}; docs/claims.md and the README's headline regenerated")
    if failed:
        print(f"\n{len(failed)} notebook(s) failed, their claims NOT gathered (the ledger keeps their earlier rows): "
              + "; ".join(f"{name}: {error}" for name, error in failed.items())
              + f". Their executed copies, with the error, are in {out_dir}.", file=sys.stderr)
        return 1
    return 0


def interrupted(during: Path, paths: list[Path], timings: list[tuple[str, float]], failed: dict, out_dir: Path) -> int:
    """Report a run stopped by Ctrl-C while ``during`` ran: what finished, what failed, what never ran. Nothing is
    gathered (the ledger and the docs stay as they were). Returns the exit code, 130."""
    ran = [name for name, _ in timings]
    finished = [name for name in ran if name not in failed]
    waiting = [path.name for path in paths[paths.index(during) + 1:]]
    print(f"\ninterrupted during {during.name} (its kernel shut down; its executed copy, if written, is in {out_dir})",
          file=sys.stderr)
    for name, elapsed in timings:
        print(f"  {elapsed:8.1f} s  {name}" + (f"  FAILED ({failed[name]})" if name in failed else "  finished"),
              file=sys.stderr)
    print(f"finished: {', '.join(finished) or 'none'}; not run: {', '.join(waiting) or 'none'}. Nothing was gathered "
          "(python -m helpers.ledger --gather merges the claims the finished notebooks wrote).", file=sys.stderr)
    return INTERRUPTED


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from helpers import profiles

    # runs that extend stop at make reproduce's prefix unless WORKBOOK_PREFIX says otherwise (1: the full length)
    os.environ.setdefault(profiles.PREFIX_VAR, str(profiles.REPRODUCE_PREFIX))
    chosen = [Path(arg).resolve() for arg in sys.argv[1:]] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    raise SystemExit(run(chosen))
