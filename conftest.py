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
