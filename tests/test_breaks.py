"""Checks shown able to fail (helpers.ledger.breaks): a guarded break is applied in a fresh pytest process and the
finding's checks must fail under it; a break that changes nothing survives, and the runner says so."""
import dataclasses

import pytest

from helpers import ledger
from helpers.ledger import breaks
from helpers.papers.openltg import report as openltg_report

LTD_ONLY = ledger.Declared(id="openltg.test.ltd", notebook="05", paper="002", where="§4.2, Eq. 8",
                           says="LTD is applied when sampling", paper_value="T_t = β(1 - t/T)", quantity="check only",
                           check=openltg_report.LTD_CHECK, breaks="openltg.ltd_not_applied")


def test_every_finding_declares_a_registered_break_and_names_are_checked():
    assert breaks.undeclared_breaks() == []  # python -m helpers.ledger --check fails otherwise
    registered = breaks.registered_breaks()
    assert {"openltg.ltd_not_applied", "mntp.causal_training", "testing.nothing"} <= set(registered)
    planted = {"x.y": dataclasses.replace(LTD_ONLY, id="x.y", breaks="openltg.no_such_break")}
    assert breaks.undeclared_breaks(planted) == [f"x.y: break 'openltg.no_such_break' is not registered in "
                                                 f"{breaks.REGISTRY}"]
    unguarded = {"x.z": dataclasses.replace(LTD_ONLY, id="x.z", breaks="")}
    assert breaks.undeclared_breaks(unguarded) == ["x.z: declares no guarded break (breaks=)"]
    with pytest.raises(ValueError, match="breaks="):
        dataclasses.replace(LTD_ONLY, breaks="Not A Name")


def test_the_ltd_checks_catch_ltd_not_applied_and_nothing_survives_a_break_that_changes_nothing():
    caught = breaks.run_break("openltg.ltd_not_applied", [LTD_ONLY])
    assert caught.caught(LTD_ONLY), caught.output[-2000:]
    assert caught.failed == {"tests/papers/openltg/test_openltg_mechanism.py::"
                             "test_every_iteration_samples_at_its_ltd_temperature"}  # the older two pass under it
    unchanged = breaks.run_break("testing.nothing", [LTD_ONLY])
    assert not unchanged.caught(LTD_ONLY) and unchanged.failed == frozenset()
    said = []
    survived = breaks.audit_breaks(["testing.nothing"], {LTD_ONLY.id: dataclasses.replace(
        LTD_ONLY, breaks="testing.nothing")}, say=said.append)
    assert survived and "openltg.test.ltd: break 'testing.nothing' survived" in survived[0]
