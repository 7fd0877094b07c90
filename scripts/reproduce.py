"""Run every numbered notebook under the chosen profile and print the time each took.

Executed copies go to ``runs/notebooks/`` under the workbook root (``$WORKBOOK_ROOT``, else this checkout), written
atomically; the committed notebooks stay stripped. Figures land in figures/. In the cpu profile the claims of the
notebooks that finished are gathered into claims/ledger_cpu.json, their result tables into claims/tables_cpu.json,
and the README's claims table and result tables are rebuilt. A notebook that fails does not stop the others; the
run then names every failed notebook and exits 1, so a partial rerun never passes for a full one.

With ``--jobs N`` (default: 2 on a CPU machine with at least 2 cores, else 1) N notebooks run side by side, each
kernel on its share of the cores (``OMP_NUM_THREADS``): small models leave one process's threads idle much of
the time, so side by side the cores do more. A notebook starts once the notebooks it reads
(``helpers.profiles.NOTEBOOK_NEEDS``) have finished, in the order given. A cell tagged ``timing`` runs alone: it
waits until no other notebook is inside a cell, keeps the others from starting one, and times on every core
(``helpers.device.timing_threads``), so no timing is measured on shared cores.
Usage: WORKBOOK_PROFILE=cpu python scripts/reproduce.py [--jobs N] [notebooks/01_*.ipynb ...]
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import fcntl
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
TIMING_TAG = "timing"  # a cell that times something: it runs with the cores to itself


class CoreShare:
    """The cores of notebooks run side by side: every cell holds ``<folder>/cells`` shared, a ``timing`` cell holds
    it exclusively. Taking it goes through ``<folder>/gate``, which a timing cell keeps until it has the cores, so
    the other notebooks' next cells wait behind it rather than keep it out. Both are kernel locks
    (``fcntl.flock``): they die with the process that holds them."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.gate, self.cells = folder / "gate", folder / "cells"

    @contextlib.contextmanager
    def cell(self, alone: bool):
        with open(self.gate, "a+") as gate, open(self.cells, "a+") as cells:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(cells, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(cells, fcntl.LOCK_UN)


class _SharingClient(NotebookClient):
    """nbclient's executor, each code cell inside :meth:`CoreShare.cell` (alone when tagged ``timing``)."""

    core_share: CoreShare | None = None

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if self.core_share is None or cell.cell_type != "code":
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        holding = self.core_share.cell(TIMING_TAG in cell.metadata.get("tags", []))
        await asyncio.to_thread(holding.__enter__)  # waiting for the cores must not stall this event loop
        try:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        finally:
            holding.__exit__(None, None, None)


_RUNNING = set()  # the executors of the notebooks running now: their kernels end on Ctrl-C


def end_kernels() -> None:
    """Kill the kernel of every notebook running now (its own session: Ctrl-C does not reach it), so that each
    executor stops at once with a dead-kernel error."""
    for client in list(_RUNNING):
        process = getattr(getattr(getattr(client, "km", None), "provisioner", None), "process", None)
        if process is not None and process.poll() is None:
            process.kill()


def execute(path: Path, out_dir: Path, timeout: int, *, core_share: CoreShare | None = None,
            env: dict | None = None) -> str | None:
    """Run one notebook; keep its executed copy (of a failed run too) in ``out_dir``. Returns the error, or None.
    ``core_share`` and ``env`` (the kernel's environment): for notebooks run side by side (:func:`run`)."""
    from helpers import store

    notebook = nbformat.read(path, as_version=4)
    try:
        client = _SharingClient(notebook, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        client.core_share = core_share
        _RUNNING.add(client)
        client.execute(**({"env": env} if env is not None else {}))
        return None
    except Exception as error:  # a failing cell, a dead kernel, a timeout: report it, run the next notebook
        if getattr(error, "ename", None):  # nbclient's CellExecutionError: the cell's own exception
            return f"{error.ename}: {error.evalue}"
        return f"{type(error).__name__}: {error}"
    finally:
        _RUNNING.discard(locals().get("client"))
        store.write_text(out_dir / path.name, nbformat.writes(notebook))


def default_jobs() -> int:
    """2 on a CPU machine with at least 2 cores; 1 with a GPU (one device's memory) or one core."""
    import torch

    return 1 if torch.cuda.is_available() or torch.get_num_threads() < 2 else 2


# Minutes each notebook took at cpu on 2 idle cores (README): which to start first when several are ready.
CPU_MINUTES = {"01": 1, "02": 7, "03": 19, "04": 14, "05": 7, "06": 19, "07": 6}


def next_ready(pending: list[Path], finished: set[str], chosen: set[str], needs: dict, *,
               longest_first: bool = True) -> Path | None:
    """Of ``pending``, the notebook to start now, or None when none is ready. Ready: its needs among the ``chosen``
    notebooks (``"02"``, ...) have all ``finished`` (a need not chosen is not waited for). With ``longest_first``
    (notebooks side by side), first the one that most pending notebooks need, then the longest
    (:data:`CPU_MINUTES`), so that short ones end the run rather than a long one left alone on its share of the
    cores; ties, and every choice without it, in ``pending`` order."""
    ready = [path for path in pending
             if all(need in finished or need not in chosen for need in needs.get(path.name[:2], ()))]
    if not ready or not longest_first:
        return ready[0] if ready else None

    def priority(path: Path) -> tuple:
        name = path.name[:2]
        needed_by = sum(name in needs.get(other.name[:2], ()) for other in pending)
        return -needed_by, -CPU_MINUTES.get(name, 0)

    return min(ready, key=priority)  # min is stable: ties keep pending order


def run(paths: list[Path], timeout: int = 3600, jobs: int = 1) -> int:
    os.environ.setdefault("WORKBOOK_ROOT", str(ROOT))
    import torch

    from helpers import claims, device, profiles
    from helpers.checks import whole_number
    from helpers.paths import figures_dir, runs_dir

    jobs = whole_number(jobs, "jobs", 1)
    profile = profiles.current()
    out_dir = runs_dir() / "notebooks"
    core_share, env = None, None
    if jobs > 1:  # each kernel on its share of the cores; a timing cell alone, on all of them
        cores = torch.get_num_threads()
        core_share = CoreShare(runs_dir() / ".cores")
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, cores // jobs)), device.TIMING_THREADS_VAR: str(cores)}
    print(f"profile: {profile.name}; {jobs} notebook(s) at a time"
          + (f", {env['OMP_NUM_THREADS']} thread(s) each, timing cells alone on {env[device.TIMING_THREADS_VAR]}"
             if env else "") + f"; executed copies in {out_dir}", flush=True)

    def timed(path: Path) -> tuple[float, str | None]:
        start = time.perf_counter()
        error = execute(path, out_dir, timeout, core_share=core_share, env=env)
        return time.perf_counter() - start, error

    chosen = {path.name[:2] for path in paths}
    pending, finished, running = list(paths), set(), {}
    timings, failed = {}, {}
    wall = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        try:
            while pending or running:
                while len(running) < jobs and (path := next_ready(pending, finished, chosen, profiles.NOTEBOOK_NEEDS,
                                                                           longest_first=jobs > 1)):
                    pending.remove(path)
                    print(f"running {path.name} ...", flush=True)
                    running[pool.submit(timed, path)] = path
                done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    path = running.pop(future)
                    elapsed, error = future.result()
                    finished.add(path.name[:2])  # a failed notebook counts too: its dependants run on what there is
                    timings[path.name] = elapsed
                    if error:
                        failed[path.name] = error
                    print(f"  {path.name}: {elapsed:.1f} s" + (f"  FAILED ({error})" if error else ""), flush=True)
        except KeyboardInterrupt:
            print(f"interrupted: ending {', '.join(path.name for path in running.values())}; executed copies so far in "
                  f"{out_dir}", file=sys.stderr, flush=True)
            end_kernels()
            raise
    wall = time.perf_counter() - wall
    print("\nnotebook times:")
    for path in paths:
        print(f"  {timings[path.name]:8.1f} s  {path.name}" + ("  FAILED" if path.name in failed else ""))
    print(f"  {wall:8.1f} s  from the first start to the last end ({jobs} at a time); figures in {figures_dir()}")
    finished = [path.name[:2] for path in paths if path.name not in failed]
    if profile.name == claims.LEDGER_PROFILE and finished:
        rows = claims.gather(notebooks=finished)
        print(f"claims ledger {claims.ledger_path()}: notebooks {', '.join(finished)} gathered; "
              f"{claims.headline(rows)}; README blocks regenerated")
    if failed:
        print(f"\n{len(failed)} notebook(s) failed, their claims NOT gathered (the ledger keeps their earlier rows): "
              + "; ".join(f"{name}: {error}" for name, error in failed.items())
              + f". Their executed copies, with the error, are in {out_dir}.", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="the notebooks to run (default: every numbered notebook)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="notebooks run side by side (default: 2 on a CPU machine with 2 or more cores, else 1)")
    arguments = parser.parse_args(argv)
    paths = ([Path(name).resolve() for name in arguments.notebooks]
             or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    try:
        return run(paths, jobs=arguments.jobs if arguments.jobs is not None else default_jobs())
    except KeyboardInterrupt:  # run() has ended the kernels and said so
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
