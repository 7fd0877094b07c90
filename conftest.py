"""Session-wide pytest wiring: the ledger check runs after the notebooks that nbmake executes.

Tests marked ``after_notebooks`` move to the end of the session, so they can read what the notebooks wrote
(e.g. each notebook's claims under ``runs/claims/smoke``).
"""
import time

import pytest

SESSION_START = time.time()


def pytest_configure(config):
    config.addinivalue_line("markers", "after_notebooks: runs after every other item, notebooks included")


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.get_closest_marker("after_notebooks") is not None)


@pytest.fixture
def session_start() -> float:
    return SESSION_START


def load_script(name: str):
    """``scripts/<name>.py`` imported as a module (the scripts are not a package)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def names_the_argument(call, argument: str, value: str | None) -> None:
    """The bad-input contract of every public entry point: ``call()`` raises ValueError naming ``argument`` (as a
    word of its own) and, when given, showing ``value``."""
    import re

    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert re.search(rf"(?<![\w.]){re.escape(argument)}(?![\w])", message), f"{argument!r} not named in: {message}"
    if value is not None:
        assert value in message, f"value {value!r} not in: {message}"


@pytest.fixture
def bad_input():
    """:func:`names_the_argument`, for the tables of bad-input probes."""
    return names_the_argument


@pytest.fixture
def lock_holder():
    """Start another process that holds ``store.exclusive(folder)`` until the test ends; yields its Popen."""
    import subprocess
    import sys

    started = []

    def hold(folder):
        holder = subprocess.Popen([sys.executable, "-c", (
            "import time; from helpers import store\n"
            f"with store.exclusive({str(folder)!r}, 'training run'):\n"
            "    print('held', flush=True); time.sleep(120)\n")], stdout=subprocess.PIPE, text=True)
        started.append(holder)
        assert holder.stdout.readline().strip() == "held"
        return holder

    yield hold
    for holder in started:
        holder.kill()
        holder.wait()
