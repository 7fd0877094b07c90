"""Worker processes that die with the process that started them.

A notebook that trains in a pool of worker processes (``concurrent.futures.ProcessPoolExecutor``) leaves those
workers running as orphans when its kernel is killed: nothing tells them their parent is gone. :func:`worker_pool`
starts each worker with a parent-death check: on Linux the kernel sends the worker SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), and everywhere a watchdog thread exits the worker once its parent's pid is gone.

An interrupt stops the pool too. Jupyter's stop button sends SIGINT to the kernel's whole process group, workers
included; ``concurrent.futures`` would return a worker's KeyboardInterrupt as that job's exception and go on with
the queued jobs, and leaving the ``with`` block waits (``shutdown(wait=True)``) for every pending job. So workers
ignore SIGINT (the process that started them decides), and a pool left by an exception (:meth:`WorkerPool.stop`)
cancels its queued jobs and ends its workers at once.

A timing repeated in fresh processes (:func:`in_fresh_processes`) runs one job in each of N new processes, one after
another, so that its results see the run-to-run variance of a process's state and not only one process's.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import sys
import threading
import time

from .checks import whole_number

PARENT_POLL_SECONDS = 1.0


def _parent_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return os.getppid() == pid  # reparented to init (or a subreaper): the parent is gone


def _watch_parent(pid: int) -> None:
    while _parent_alive(pid):
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)  # the notebook's kernel is gone: stop training for nobody


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this process when ``parent_pid`` ends (SIGKILL from the kernel on Linux; a watchdog
    thread elsewhere, and as a fallback). SIGINT is ignored: the parent's interrupt stops the pool
    (:meth:`WorkerPool.stop`), and a job never ends with a KeyboardInterrupt that would be taken as its outcome."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if not _parent_alive(parent_pid):  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


STOP_SECONDS = 5.0  # how long a stopped worker has to exit after SIGTERM before it is killed


class WorkerPool(concurrent.futures.ProcessPoolExecutor):
    """A process pool that, left by an exception (a KeyboardInterrupt above all), stops instead of waiting."""

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.shutdown(wait=True)
        else:
            self.stop()
        return False

    def stop(self) -> None:
        """Cancel the queued jobs and end the running ones: ``shutdown(wait=False, cancel_futures=True)``, then
        SIGTERM to each worker (SIGKILL after :data:`STOP_SECONDS`), so that no job runs after this returns."""
        processes = list((self._processes or {}).values())
        self.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(STOP_SECONDS)
            if process.is_alive():
                process.kill()
                process.join()


def worker_pool(workers: int) -> WorkerPool:
    """A spawn-context process pool whose workers die with this process (:func:`die_with_parent`) and that stops
    when left by an exception (:meth:`WorkerPool.stop`)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers={workers!r} must be a positive int")
    return WorkerPool(workers, mp_context=multiprocessing.get_context("spawn"), initializer=die_with_parent,
                      initargs=(os.getpid(),))


def run_jobs(function, jobs: list, workers: int, on_result=None) -> list:
    """``[function(job) for job in jobs]``, computed in ``workers`` processes (:func:`worker_pool`) in the order given;
    ``on_result(index, result)`` is called as each job finishes. A job's exception, or one in this process (the
    stop button's KeyboardInterrupt), cancels the queued jobs, ends the running ones and is raised here."""
    results = [None] * len(jobs)
    with worker_pool(workers) as pool:
        futures = {pool.submit(function, job): index for index, job in enumerate(jobs)}
        for future in concurrent.futures.as_completed(futures):
            index = futures[future]
            results[index] = future.result()
            if on_result is not None:
                on_result(index, results[index])
    return results


def remove_output_capturing_hooks(model) -> None:
    """Take transformers' output-capturing forward hooks off ``model`` (a torch module) and mark it unhooked.
    transformers installs them the first time a forward asks for hidden states; they are local functions, which
    pickle cannot send to a worker process. Nothing else changes: the next forward that asks for hidden states
    installs them again."""
    for module in model.modules():
        capturing = [key for key, hook in module._forward_hooks.items()
                     if "output_capturing_hook" in getattr(hook, "__qualname__", "")]
        for hooks in (module._forward_hooks, module._forward_hooks_with_kwargs, module._forward_hooks_always_called):
            for key in capturing:
                hooks.pop(key, None)
        module.__dict__.pop("_output_capturing_hooks_installed", None)


def _call_without_progress(call: tuple):
    """One fresh process's run of :func:`in_fresh_processes`' job (a worker shows no progress bar)."""
    function, arguments = call
    return function(*arguments, progress=False)


def in_fresh_processes(function, arguments: tuple, processes: int, *, progress: bool = False, models=()) -> list:
    """``function(*arguments, progress=...)`` once per process, the results in process order (a timing's runs).

    ``processes`` = 1 runs it here, with ``progress`` passed on. More run it in that many fresh processes, one after
    another (each a pool of one worker, :func:`run_jobs`), so no two overlap and each result sees a new process's
    state (allocation, thread placement, the machine's): the spread of the results is the run-to-run variance.
    ``function`` must be importable by name (a module-level function) and take ``progress``; ``arguments`` are
    pickled to every process, so the torch modules in ``models`` (those among the arguments) first lose
    transformers' output-capturing hooks (:func:`remove_output_capturing_hooks`)."""
    processes = whole_number(processes, "processes", 1, "fresh processes the job runs in, one after another")
    if processes == 1:
        return [function(*arguments, progress=progress)]
    for model in models:
        remove_output_capturing_hooks(model)
    return [run_jobs(_call_without_progress, [(function, arguments)], 1)[0] for _ in range(processes)]
