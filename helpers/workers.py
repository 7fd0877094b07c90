"""Worker processes that die with the process that started them.

A notebook that trains in a pool of worker processes (``concurrent.futures.ProcessPoolExecutor``) leaves those
workers running as orphans when its kernel is killed: nothing tells them their parent is gone. :func:`worker_pool`
starts each worker with a parent-death check: on Linux the kernel sends the worker SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), and everywhere a watchdog thread exits the worker once its parent's pid is gone.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import sys
import threading
import time

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
    thread elsewhere, and as a fallback)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    if not _parent_alive(parent_pid):  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


def worker_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """A spawn-context process pool whose workers die with this process (:func:`die_with_parent`)."""
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=die_with_parent, initargs=(os.getpid(),))
