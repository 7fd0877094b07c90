"""The equal-numbers command on real notebooks: a pure rename in a shared module carries every notebook it runs; a
changed constant in one paper package stales exactly that notebook and names the number that moved.

The notebooks run at the slice scale on the tiny random decoder (the command's default is the embedded model; the
mechanism is the same), in a git copy of this workbook, from empty runs and caches.
"""
import json
from pathlib import Path

import pytest

from helpers import code_identity, equal_numbers, ledger

TINY = "tiny-random:llama"


@pytest.fixture
def copy_of_this_workbook(git_workbook):
    """This checkout's files in a git repository of their own, as its workbook root (conftest's ``git_workbook``); the
    assets come from this checkout's cache."""
    return git_workbook(copy=True)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) >= 1, f"{path} no longer holds {old!r}: choose another edit for this test"
    path.write_text(text.replace(old, new))


def test_a_rename_carries_and_a_changed_constant_stales_exactly_its_notebook(copy_of_this_workbook):
    copy, said = copy_of_this_workbook, []
    workbook, studied = copy.root, copy.git("rev-parse", "HEAD")
    equal_numbers.record(["01", "02"], model=TINY, runs=1, say=said.append)
    assert {code_identity.read_slice(notebook)["commit"] for notebook in ("01", "02")} == {studied}
    assert len(code_identity.read_slice("02")["numbers"]) > 50  # curves, claims, intervals, fingerprints

    # a pure rename in a shared module both notebooks run: every number stays, both are carried
    _edit(workbook / "helpers" / "metrics.py", "resamples = whole_number(resamples, \"resamples\")",
          "resamples = whole_number(resamples, \"resamples\")  # renamed below\n    draws_wanted = resamples")
    _edit(workbook / "helpers" / "metrics.py", "size=(resamples, len(examples))", "size=(draws_wanted, len(examples))")
    assert equal_numbers.carry(["01", "02"], say=said.append) == {}
    copy.git("commit", "-qam", "a rename")
    for notebook in ("01", "02"):
        assert code_identity.code_changes(studied, notebook) == ["helpers/metrics.py"]
        current, how = code_identity.code_current(studied, notebook)
        assert current is True and "by equal numbers" in how
    assert code_identity.carry_problems() == []

    # a changed constant in notebook 02's paper package: 02 is stale and its moved number is named; 01 stays carried
    _edit(workbook / "helpers" / "papers" / "mntp" / "report.py", "stats.t.ppf(0.975,", "stats.t.ppf(0.95,")
    moved = equal_numbers.carry(["02"], say=said.append)
    copy.git("commit", "-qam", "a changed constant")
    assert list(moved) == ["02"]
    assert any(line.startswith("runs/claims/smoke/02.json:claims[2].low:") for line in moved["02"]), moved["02"]
    assert not any("metrics.jsonl" in line for line in moved["02"])  # training itself did not move
    assert code_identity.code_current(studied, "02")[0] is False
    assert code_identity.code_current(studied, "01")[0] is True
    assert "02" not in code_identity.read_carried() and "01" in code_identity.read_carried()
    assert any("notebook 02: " in line and "numbers moved" in line for line in said)


def test_a_slice_sees_a_number_it_records_twice_differently_as_volatile(tmp_path):
    """A record's volatile numbers are those its runs disagree on; moved_numbers never compares them, and it names a
    changed, a missing and a new number each."""
    recorded = {"numbers": {"a": 1.0, "b": 2, "c": None}, "volatile": ["t"]}
    assert equal_numbers.moved_numbers(recorded, {"a": 1.0, "b": 2, "c": None, "t": 0.31}) == []
    assert equal_numbers.moved_numbers(recorded, {"a": 1.0000000000000002, "c": None, "d": 5}) == [
        "a: 1.0 -> 1.0000000000000002", "b: 2 -> missing", "d: new, 5"]
    assert equal_numbers.moved_numbers({"numbers": {"z": 0.0}}, {"z": -0.0}) == ["z: 0.0 -> -0.0"]


def test_a_re_declaration_moves_no_measured_number_but_a_measurement_still_moves():
    """What a claims row means (its declared direction, threshold, margin, paper effect, trained flag, and the MDE
    that follows from its kind) is a declaration, read again over the recorded measurements; its value, interval and
    curve are measurements, compared bit for bit."""
    row = "runs/claims/smoke/04.json:claims[0]"
    recorded = {"numbers": {f"{row}.low": 0.1, f"{row}.high": 0.3, f"{row}.mde": 0.28, f"{row}.direction": 1,
                            f"{row}.threshold": 0.0}}
    redeclared = {f"{row}.low": 0.1, f"{row}.high": 0.3, f"{row}.mde": None, f"{row}.direction": -1,
                  f"{row}.threshold": 0.5}
    assert equal_numbers.moved_numbers(recorded, redeclared) == []
    assert equal_numbers.moved_numbers(recorded, {**redeclared, f"{row}.low": 0.11}) == [f"{row}.low: 0.1 -> 0.11"]
    # a field of another file that happens to share a name is still compared
    assert equal_numbers.moved_numbers({"numbers": {"runs/x.json:threshold": 1}}, {"runs/x.json:threshold": 2})


def test_collect_numbers_reads_every_number_and_leaves_out_where_and_when(tmp_path):
    runs = tmp_path / "runs"
    (runs / "claims").mkdir(parents=True)
    (runs / "claims" / "02.json").write_text(json.dumps(
        {"written": "2026-11-28T11:00", "digest": "ab", "provenance": {"commit": "f" * 40, "machine": {"cpu": "x"},
                                                                       "parameters": "0123456789ab"},
         "claims": [{"value": 1.5, "low": None, "ours": "+1.5", "trained": True}]}))
    (runs / "run_0123456789ab").mkdir()
    (runs / "run_0123456789ab" / "metrics.jsonl").write_text('{"step": 0, "loss": 3.25}\n\n{"step": 1}\n')
    assert equal_numbers.collect_numbers(runs) == {
        "runs/claims/02.json:provenance.parameters": "0123456789ab",
        "runs/claims/02.json:claims[0].value": 1.5, "runs/claims/02.json:claims[0].low": None,
        "runs/claims/02.json:claims[0].trained": True,
        "runs/run_0123456789ab/metrics.jsonl:#0.step": 0, "runs/run_0123456789ab/metrics.jsonl:#0.loss": 3.25,
        "runs/run_0123456789ab/metrics.jsonl:#2.step": 1}


def test_a_tampered_record_or_carry_is_refused(copy_of_this_workbook, capsys):
    path = code_identity.slice_path("02")
    numbers = {"runs/x:#0.loss": 1.25}
    record = {"notebook": "02", "commit": "f" * 40, "numbers": numbers, "digest": code_identity.numbers_digest(numbers)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    assert code_identity.read_slice("02")["numbers"] == numbers
    code_identity.carried_path().write_text(json.dumps({"notebooks": {"02": {"from": "e" * 40,
                                                                            "numbers": record["digest"]}}}))
    assert "holds those of fffffff" in code_identity.carry_problems()[0]
    path.write_text(json.dumps({**record, "numbers": {"runs/x:#0.loss": 1.5}}))
    with pytest.raises(Exception, match="do not match the digest"):
        code_identity.read_slice("02")
    assert ledger.main(["--check"]) == 1 and "equal numbers: " in capsys.readouterr().out


def test_code_paths_follow_the_paper_packages_a_notebook_imports():
    assert code_identity.notebook_packages("07") == ["diffusion", "lecture", "mntp", "openltg"]
    assert code_identity.notebook_packages("01") == ["lecture", "sequence_repetition"]
    assert code_identity.notebook_packages("02") == ["mntp"]
    assert "helpers/papers/openltg/" in code_identity.code_paths("07")
