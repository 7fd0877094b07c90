"""The claims ledger: rows are validated, verdicts follow the interval, the docs' generated blocks are the ledger's."""
import dataclasses
import json
import os
from pathlib import Path

import pytest

from helpers import code_identity, ledger, metrics
from helpers.ledger import provenance

CHECK = "tests/papers/openltg/test_openltg_mechanism.py::test_ltd_schedule"
ROW = dict(notebook="05", paper="002", where="Table 6", claim="LTD cuts repetition", paper_value="17.80 -> 0.73",
           ours="40.6 -> 12.5", low=-40.0, high=-10.0, method="bootstrap over 32 prompts", n=32, direction=-1,
           check=CHECK, id="openltg.table6.ltd")
DEFINITION = dict(ROW, low=None, high=None, method=ledger.EXACT, n=None, kind=ledger.DEFINITION, holds=True,
                  direction=1, check="", id="openltg.definition.window")


def _rising(steps=100, every=5, per_step=0.03, start=0.0):
    """A held-out curve rising ``per_step`` a step from ``start``, evaluated every ``every`` steps (no noise)."""
    return ledger.curve("held-out accuracy", [(step, start + per_step * step) for step in range(0, steps + 1, every)])


def _flat(steps=100, every=5, gain=60.0):
    """A held-out curve that gained ``gain`` in its first steps and is flat over its last half (no noise)."""
    return ledger.curve("held-out accuracy", [(step, 0.0 if step == 0 else gain) for step in range(0, steps + 1, every)])


def _verdict(**change) -> str:
    return ledger.Claim(**{**ROW, **change}).verdict


def test_the_verdict_is_computed_from_the_interval_and_the_papers_direction():
    assert _verdict() == "reproduced"  # wholly below 0, the paper's side
    assert _verdict(low=-5.0, high=3.0) == "inconclusive"  # straddles
    assert _verdict(low=2.0, high=5.0) == "not reproduced"  # the other side, with a check
    assert _verdict(direction=1, low=0.1, high=0.5) == "reproduced"
    assert _verdict(direction=1, low=0.0, high=0.3) == "inconclusive"  # touching 0 is not "above"
    assert _verdict(direction=-1, low=0.9, high=1.05, threshold=1.1) == "reproduced"  # "at most 1.1x"


def test_neither_verdict_without_a_check_and_the_row_says_so():
    assert _verdict(check="") == "inconclusive"  # wholly on the paper's side, but nothing rules out our bug
    against = ledger.Claim(**{**ROW, "low": 2.0, "high": 5.0, "check": ""})
    assert against.verdict == "inconclusive" and "no check" in against.verdict_text


@pytest.mark.parametrize("check", ["the public code's rule on the same inputs", "tests/test_x.py", "test_x.py::test_a",
                                   "tests/test_x.py::helper name"])
def test_a_check_is_a_pytest_node_id(check):
    with pytest.raises(ValueError, match="pytest node id"):
        ledger.Claim(**{**ROW, "check": check})
    ok = "tests/test_x.py::test_a tests/papers/y/test_y.py::TestY::test_b[3-x]"
    assert ledger.check_ids(ok) == ok.split()


def test_a_typed_verdict_must_follow_from_the_interval():
    assert ledger.Claim(**{**ROW, "verdict": "reproduced"}).verdict == "reproduced"  # a ledger row read back
    with pytest.raises(ValueError, match="does not follow from the row.*gives 'reproduced'"):
        ledger.Claim(**{**ROW, "verdict": "inconclusive"})
    with pytest.raises(ValueError, match="does not follow"):
        ledger.Claim(**{**ROW, "low": 2.0, "high": 5.0, "check": "", "verdict": "not reproduced"})  # no check


def test_the_papers_value_inside_our_interval_is_not_a_reproduction():
    # a paper value of 96.59 inside [96.15, 97.19] says nothing without a direction or a stated margin
    row = dict(low=96.15, high=97.19, direction=1, threshold=96.59)
    assert _verdict(**row) == "inconclusive"
    with pytest.raises(ValueError, match="margin_source"):
        ledger.Claim(**{**ROW, **row, "margin": 1.0})
    assert _verdict(**row, margin=1.0, margin_source="ours: one point of token accuracy") == "reproduced"
    assert _verdict(**row, margin=0.2, margin_source="ours: tighter") == "inconclusive"


def test_a_matches_claim_is_not_reproduced_only_outside_its_margin():
    matches = dict(margin=2.0, margin_source="paper: §3.5 'comparable'")
    assert _verdict(**matches, low=-1.0, high=1.5) == "reproduced"
    assert _verdict(**matches, low=-3.0, high=1.0) == "inconclusive"
    assert _verdict(**matches, low=-9.0, high=-2.5) == "not reproduced"


def test_a_trained_row_is_not_reproduced_only_once_training_is_shown_to_have_stopped():
    against = dict(low=2.0, high=5.0, trained=True, n_seeds=3, seed_values=(3.0, 3.5, 4.0))  # a study's row
    unmeasured = ledger.Claim(**{**ROW, **against})
    assert unmeasured.verdict == "inconclusive" and "no held-out curve recorded" in unmeasured.verdict_text
    assert "wholly on the contradicting side, but" in unmeasured.verdict_text
    rising = ledger.Claim(**{**ROW, **against, "plateau": _rising()})
    assert rising.verdict == "inconclusive" and "still improving at 100 steps" in rising.verdict_text
    assert _verdict(**against, plateau=_flat()) == "not reproduced"
    sparse = ledger.Claim(**{**ROW, **against, "plateau": _flat(every=25)})  # 3 evaluations in the last half
    assert sparse.verdict == "inconclusive" and "needs 6" in sparse.verdict_text
    with pytest.raises(ValueError, match="plateau="):  # a slope alone never shows a stop: the curve is the record
        ledger.Claim(**{**ROW, **against, "plateau": (0.1, -0.2, 0.4, 100)})


def test_a_row_says_the_first_reason_it_is_inconclusive_and_the_plan_reads_whether_seeds_could_change_it():
    """One reason per row (ledger.reason_of), read by the verdict, its text, the headline and the plan: a trained row
    of one seed on the contradicting side says the study decides it (more seeds help); the same row from three
    seeds says its curve still moves (a longer run decides it, not more seeds)."""
    row = ledger.Claim(**{**ROW, "low": 2.0, "high": 5.0, "trained": True, "plateau": _rising()})
    reason = ledger.reason_of(row)
    assert (reason.short, reason.more_seeds_help) == ("one training seed (a study decides)", True)
    assert row.verdict_text == f"**inconclusive**: {row.single_seed_text}"
    studied = dataclasses.replace(row, verdict="", n_seeds=3, seed_values=(3.0, 3.5, 4.0))
    reason = ledger.reason_of(studied)
    assert (reason.short, reason.more_seeds_help) == ("contradicting side, stop not shown", False)
    assert studied.verdict_text == f"**inconclusive**: wholly on the contradicting side, but {studied.budget_text}"
    assert ledger.tally([studied]).endswith("(1 contradicting side, stop not shown); 0 definition checks (the code does "
                                            "what a definition says; exact on every machine): 0 hold, 0 fail; 0 "
                                            "measurements the papers do not compare")
    assert ledger.reason_of(dataclasses.replace(studied, verdict="", plateau=_flat())) is None  # not reproduced
    regime = ledger.Claim(**{**ROW, "low": 2.0, "high": 5.0, "regime": "a GPU ratio measured on a CPU"})
    assert regime.verdict == "inconclusive" and "another regime" in regime.verdict_text
    assert _verdict(regime="a GPU ratio measured on a CPU") == "inconclusive"  # it decides neither way


def test_definition_checks_hold_or_fail_and_measurements_stay_inconclusive():
    assert ledger.Claim(**DEFINITION).verdict == "holds"
    assert ledger.Claim(**{**DEFINITION, "holds": False}).verdict == "fails"
    with pytest.raises(ValueError, match="definition check is exact"):
        ledger.Claim(**{**DEFINITION, "holds": None})
    with pytest.raises(ValueError, match="an exact identity is a definition check"):
        ledger.Claim(**{**DEFINITION, "kind": ledger.FINDING, "holds": None})
    assert _verdict(kind=ledger.MEASUREMENT, direction=0, low=-22.0, high=-20.0) == "inconclusive"
    with pytest.raises(ValueError, match="direction=0"):
        ledger.Claim(**{**ROW, "kind": ledger.MEASUREMENT})


def test_a_comparison_against_a_baseline_that_does_not_work_decides_nothing():
    beats = dict(direction=1, low=30.0, high=50.0, baseline="full unmasking")
    with pytest.raises(ValueError, match="baseline_works"):
        ledger.Claim(**{**ROW, **beats})
    assert _verdict(**beats, baseline_works=True) == "reproduced"
    broken = ledger.Claim(**{**ROW, **beats, "baseline_works": False})  # it scored below the plain decoder
    assert broken.verdict == "inconclusive" and "not shown to work" in broken.verdict_text
    assert _verdict(direction=1, low=-50.0, high=-30.0, baseline="full unmasking", baseline_works=False) == "inconclusive"


def test_a_confounded_finding_is_inconclusive_and_says_why():
    assert _verdict() == "reproduced"
    confounded = ledger.Claim(**{**ROW, "confound": "the better-scored row repeats more"})
    assert confounded.verdict == "inconclusive"
    assert confounded.verdict_text.endswith("confounded: the better-scored row repeats more")
    with pytest.raises(ValueError, match="does not follow"):
        ledger.Claim(**{**ROW, "confound": "a confound", "verdict": "reproduced"})
    with pytest.raises(ValueError, match="confound="):
        ledger.Claim(**{**ROW, "confound": None})


def test_seed_values_agree_with_n_seeds():
    row = ledger.Claim(**{**ROW, "n_seeds": 3, "seed_values": (-20, -25.5, -18)})
    assert row.seed_values == (-20.0, -25.5, -18.0) and "3 seeds" in row.interval_text
    with pytest.raises(ValueError, match="n_seeds"):
        ledger.Claim(**{**ROW, "n_seeds": 2, "seed_values": (1, 2, 3)})


@pytest.mark.parametrize("change, argument", [({"notebook": "5"}, "notebook"), ({"paper": "009"}, "paper"),
                                              ({"kind": "maybe"}, "kind"), ({"low": float("nan")}, "low"),
                                              ({"low": 1.0, "high": 0.0}, "low"), ({"n": 0}, "n"), ({"n": None}, "n"),
                                              ({"claim": " "}, "claim"), ({"direction": 2}, "direction"),
                                              ({"margin": -1.0}, "margin")])
def test_claim_names_the_bad_argument(change, argument):
    with pytest.raises(ValueError, match=argument):
        ledger.Claim(**{**ROW, **change})


def test_exact_claims_need_no_n():
    assert ledger.Claim(**DEFINITION).interval_text == "exact (deterministic)"


def test_no_call_site_types_a_verdict():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(r"""verdict\s*=\s*(f?["'](reproduced|not reproduced|inconclusive|holds|fails)|verdict_for)""")
    sources = [path for folder in ("helpers", "notebooks", "scripts") for path in (root / folder).rglob("*")
               if path.suffix in {".py", ".ipynb"}]
    typed = [f"{path.relative_to(root)}:{number}" for path in sources
             for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not typed, f"verdicts are computed by helpers.ledger.verdict_of, never typed: {typed}"


def test_rows_beyond_the_four_papers_have_their_own_block_and_count():
    seed_rows = [ledger.Claim(**ROW), ledger.Claim(**DEFINITION)]
    beyond = ledger.Claim(**{**ROW, "notebook": "07", "paper": "LLaDA", "low": 1.0, "high": 2.0, "direction": 1})
    alone = ledger.render_markdown(seed_rows)
    together = ledger.render_markdown([*seed_rows, beyond])
    headline = together.splitlines()[0]
    assert headline == alone.splitlines()[0]  # the four papers' headline does not count notebook 07's row
    assert "Beyond the four papers" not in alone
    block = together[together.index("**Beyond the four papers**"):]
    assert "LLaDA" in block and "1 rows: 1 findings of the papers: **1 reproduced" in block
    assert "LLaDA" not in together[:together.index("**Beyond the four papers**")]
    assert ledger.headline([*seed_rows, beyond]) == (f"2 rows of the four papers: {ledger.tally(seed_rows)}; beyond the "
                                                     f"four papers, 1 rows: {ledger.tally([beyond])}")


def test_bootstrap_interval_covers_the_mean_and_shrinks_with_n():
    small = metrics.bootstrap_interval([0, 1] * 10, seed=1)
    large = metrics.bootstrap_interval([0, 1] * 1000, seed=1, resamples=500)
    assert small[1] < 0.5 < small[2] and large[1] < 0.5 < large[2]
    assert large[2] - large[1] < (small[2] - small[1]) / 3
    assert metrics.bootstrap_interval([3.0, 3.0]) == (3.0, 3.0, 3.0)
    with pytest.raises(ValueError, match="first has 2"):
        metrics.paired_difference_interval([1, 2], [1])
    assert metrics.seed_interval([0.5]) == (0.5, None, None)


@pytest.fixture
def workbook(git_workbook):
    """``workbook(doc_tail="")``: a git workbook (conftest's ``git_workbook``) with the ledger's docs markers, whose
    synthetic rows need no declaration; returns it (``.root``, ``.git``)."""
    return lambda doc_tail="": git_workbook(docs=True, doc_tail=doc_tail, synthetic=True)


def _params(notebook, profile="cpu", prefix=1):
    """The parameters notebook ``notebook``'s parameters cell registers, unedited, under ``profile`` (its trained runs
    at 1/``prefix`` of their lengths)."""
    from helpers import profiles

    cfg = profiles.get(profile) if isinstance(profile, str) else profile
    return ledger.parameters(notebook, cfg, *ledger.notebook_settings(notebook, cfg, prefix=prefix))


def test_record_gather_and_docs_round_trip(tmp_path, monkeypatch, workbook):
    wb = workbook()
    doc = wb.root / "docs" / "claims.md"
    rows = [ledger.Claim(**ROW), ledger.Claim(**{**ROW, "where": "Fig. 5", "high": 5.0})]
    path = ledger.record(rows, notebook="05", profile="cpu", parameters=_params("05"))
    assert path == tmp_path / "runs" / "claims" / "cpu" / "05.json"
    with pytest.raises(ValueError, match="notebook='04'"):
        ledger.record(rows, notebook="04", profile="cpu")
    gathered = ledger.gather()
    assert gathered == rows
    text = doc.read_text()
    assert "1 reproduced, 0 not reproduced, 1 inconclusive" in text and "\nold\n" not in text and text.endswith("after\n")
    readme = (tmp_path / "README.md").read_text()  # the README gets the headline only: counts, no rows
    assert "| OpenLTG | 05 | 1 / 0 / 1 | — | — | 0 |" in readme and "\nold\n" not in readme and "40.6" not in readme
    assert readme.endswith(f"{ledger.HEADLINE_END}\nafter\n")
    assert ledger.docs_are_current()
    doc.write_text(text.replace("40.6", "41.6"))
    assert not ledger.docs_are_current() and ledger.stale_docs() == [doc]
    doc.write_text(text)
    (tmp_path / "README.md").write_text(readme.replace("1 / 0 / 1", "2 / 0 / 0"))
    assert ledger.stale_docs() == [tmp_path / "README.md"]
    assert ledger.render_committed() == [tmp_path / "README.md"] and ledger.docs_are_current()
    assert (tmp_path / "README.md").read_text() == readme
    path.write_text(path.read_text()[:40])
    with pytest.raises(ValueError, match=str(path)):
        ledger.gather()


TABLE = dict(header=["method", "a@1"], rows=[["EMAT", "35.0 [30.1, 40.2]"], ["GRU | beam", "8.3 [3.1, 14.6]"]],
             notebook="06", title="Table 3 by gold length", note="95% bootstrap over 353 test sentences")


def _table_markers(key, body="stale"):
    return f"{ledger.TABLE_BEGIN.format(key=key)}\n{body}\n{ledger.TABLE_END.format(key=key)}"


@pytest.mark.parametrize("change, argument", [
    ({"rows": [["EMAT", "35.0"], ["GRU"]]}, r"rows\[1\]"),  # ragged
    ({"rows": [["EMAT", 0.35]]}, r"rows\[0\]\[1\]"),  # a number, not a formatted cell
    ({"rows": []}, "rows="), ({"header": []}, "header="), ({"header": "method"}, "header="),
    ({"header": ["method", " "]}, r"header\[1\]"), ({"name": "Table 3"}, "name="), ({"name": ""}, "name="),
    ({"notebook": "6"}, "notebook="), ({"notebook": "nb06"}, "notebook="), ({"title": ""}, "title=")])
def test_record_table_names_the_bad_argument(tmp_path, monkeypatch, change, argument, workbook):
    workbook()
    arguments = {"name": "table3", **TABLE, **change}
    with pytest.raises(ValueError, match=argument):
        ledger.record_table(arguments.pop("name"), arguments.pop("header"), arguments.pop("rows"), profile="cpu", **arguments)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.json"))


def test_gather_writes_result_tables_and_keeps_those_of_notebooks_not_rerun(tmp_path, monkeypatch, workbook):
    wb = workbook("\n" + _table_markers("05_table6") + "\n\n" + _table_markers("06_table3") + "\n")
    doc = wb.root / "docs" / "claims.md"
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile="cpu", parameters=_params("05"))
    path = ledger.record_table("table3", TABLE["header"], TABLE["rows"], notebook="06", title=TABLE["title"],
                               note=TABLE["note"], profile="cpu", parameters=_params("06"))
    assert path == tmp_path / "runs" / "claims" / "cpu" / "06_table3.json"
    assert ledger.read_table(path) == ledger.ResultTable(name="table3", **TABLE)
    ledger.record_table("table6", ["row", "B-1"], [["LTD", "0.31 [0.2, 0.4]"]], notebook="05", title="Table 6",
                        profile="cpu", parameters=_params("05"))
    ledger.gather()
    committed = ledger.read_tables()
    assert [entry.key for entry in committed] == ["05_table6", "06_table3"]
    assert committed[1].rows == (("EMAT", "35.0 [30.1, 40.2]"), ("GRU | beam", "8.3 [3.1, 14.6]"))
    text = doc.read_text()
    assert "stale" not in text and "**Table 3 by gold length** (notebook 06" in text and text.endswith("after\n")
    assert "| EMAT | 35.0 [30.1, 40.2] |" in text and "| GRU \\| beam |" in text and "95% bootstrap over 353" in text
    assert ledger.docs_are_current() and ledger.main(["--check"]) == 0
    first = (tmp_path / "claims" / "tables_cpu.json").read_text()
    ledger.gather()  # deterministic: gathering the same files again writes the same bytes
    assert (tmp_path / "claims" / "tables_cpu.json").read_text() == first

    # notebook 06 reruns with a new table 3; notebook 05 is not rerun (its files are gone): its table stays
    for stale in (tmp_path / "runs" / "claims" / "cpu").glob("05*.json"):
        stale.unlink()
    ledger.record_table("table3", ["method", "a@1"], [["EMAT", "40.0 [35.0, 45.0]"]], notebook="06", title="Table 3",
                        profile="cpu", parameters=_params("06"))
    ledger.gather(notebooks=["06"])
    committed = {entry.key: entry for entry in ledger.read_tables()}
    assert committed["05_table6"].rows == (("LTD", "0.31 [0.2, 0.4]"),)
    assert committed["06_table3"].rows == (("EMAT", "40.0 [35.0, 45.0]"),)
    assert "40.0 [35.0, 45.0]" in doc.read_text() and "35.0 [30.1, 40.2]" not in doc.read_text()


def test_check_detects_an_out_of_sync_result_table(tmp_path, monkeypatch, workbook):
    wb = workbook("\n" + _table_markers("06_table3", ledger.TABLE_PLACEHOLDER) + "\n")
    doc = wb.root / "docs" / "claims.md"
    ledger.gather()
    assert ledger.docs_are_current()  # nothing gathered yet: the placeholder is the current block
    ledger.record_table("table3", TABLE["header"], TABLE["rows"], notebook="06", title=TABLE["title"], profile="cpu", parameters=_params("06"))
    ledger.gather()
    text = doc.read_text()
    assert ledger.TABLE_PLACEHOLDER not in text and ledger.docs_are_current()
    doc.write_text(text.replace("35.0 [30.1, 40.2]", "36.0 [30.1, 40.2]"))
    assert not ledger.docs_are_current() and ledger.main(["--check"]) == 1
    doc.write_text(text.replace(ledger.TABLE_END.format(key="06_table3"), ""))
    with pytest.raises(ValueError, match="06_table3:end"):
        ledger.docs_are_current()


def test_gather_refuses_a_table_or_a_headline_without_its_markers_and_writes_nothing(tmp_path, monkeypatch, workbook):
    wb = workbook()
    doc = wb.root / "docs" / "claims.md"
    before = doc.read_text()
    ledger.record_table("table3", TABLE["header"], TABLE["rows"], notebook="06", title=TABLE["title"], profile="cpu", parameters=_params("06"))
    with pytest.raises(ValueError, match="06_table3:begin"):
        ledger.gather()
    assert doc.read_text() == before and not (tmp_path / "claims").exists()
    doc.write_text(before + "\n" + _table_markers("06_table3") + "\n")
    readme = tmp_path / "README.md"
    readme.write_text("# t\n")  # the README without its headline markers
    with pytest.raises(ValueError, match="README.md lacks the markers .*headline:begin"):
        ledger.gather()
    assert readme.read_text() == "# t\n" and "stale" in doc.read_text() and not (tmp_path / "claims").exists()
    readme.unlink()
    with pytest.raises(ValueError, match="README.md is missing"):
        ledger.gather()
    assert not (tmp_path / "claims").exists()


def test_the_generated_blocks_never_make_the_tree_dirty_but_the_prose_around_them_does(tmp_path, monkeypatch, workbook):
    wb = workbook()
    doc = wb.root / "docs" / "claims.md"
    readme = tmp_path / "README.md"
    committed = {path: path.read_text() for path in (doc, readme)}
    for path, text in committed.items():  # what a gather writes: the blocks only
        path.write_text(text.replace("\nold\n", "\nnew rows\n"))
    assert provenance._dirty() is False
    for path, text in committed.items():  # prose edited outside the blocks
        path.write_text(text.replace("# t", "# edited"))
        assert provenance._dirty() is True, path
        path.write_text(text)
    assert provenance._dirty() is False


def test_the_readme_headline_counts_each_paper_and_the_papers_beyond_them_apart():
    magnet = ledger.Claim(**{**ROW, "paper": "000", "notebook": "03"})
    straddles = ledger.Claim(**{**ROW, "low": -5.0, "high": 3.0})  # OpenLTG, inconclusive
    beyond = ledger.Claim(**{**ROW, "notebook": "07", "paper": "LLaDA"})
    rows = [magnet, straddles, ledger.Claim(**DEFINITION), beyond]
    text = ledger.render_headline(rows)
    lines = text.splitlines()
    names = [line.split(" | ")[0].lstrip("| ") for line in lines[2:] if line.startswith("| ")]
    assert names[:2] == ["MAGNET", "OpenLTG"] and names[-1] == "beyond them: LLaDA"  # by notebook, then the others
    found = ledger.counts([magnet, straddles])
    assert (f"| **{found['reproduced']} / {found['not reproduced']} / {found['inconclusive']}** |" in text
            and "| beyond them: LLaDA | 07 | 1 / 0 / 0 |" in text)
    assert "The four papers' 1 inconclusive findings, each under its first reason: 1 interval straddles" in text
    assert "seed 00" not in text and "| 002 " not in text  # papers by name, never by their source file


def test_the_headline_says_what_the_ledger_can_say_and_which_model_every_row_ran_on():
    """A finding can read *not reproduced* only with a check, the paper's regime, a working baseline, a seed study
    and a stopped curve; the headline counts those and names what blocks the others, and sets the model and dtype
    of every row beside the papers' own models."""
    open_to_no = ledger.Claim(**ROW)  # untrained, with a check: an interval on the other side would read "no"
    moving = ledger.Claim(**{**TRAINED, "plateau": _rising(), "n_seeds": 3, "seed_values": (1.0, 2.0, 3.0)})
    stopped = ledger.Claim(**{**TRAINED, "n_seeds": 3, "seed_values": (1.0, 2.0, 3.0)})
    regime = ledger.Claim(**{**ROW, "regime": "a GPU speed-up timed on a CPU"})
    unchecked = ledger.Claim(**{**ROW, "check": ""})
    rows = [open_to_no, moving, stopped, regime, unchecked, ledger.Claim(**DEFINITION)]
    assert [ledger.what_blocks_no(row) for row in rows[:5]] == [
        None, "trained on a curve not shown stopped", None, "another hardware regime", "no check"]
    said = ledger.what_the_design_can_say(rows)
    assert said.startswith("Of the 5 findings, 2 could read *not reproduced*")
    assert "the other 3 cannot, whatever their interval: 1 trained on a curve not shown stopped" in said
    powered = ledger.Claim(**{**ROW, "paper_effect": 20.0, "mde": 15.0})
    weak = ledger.Claim(**{**ROW, "paper_effect": 5.0, "mde": 15.0})
    assert "2 findings state the paper's effect in our units; 1 of them could detect" in \
        ledger.what_the_design_can_say([powered, weak])
    study = {"study": {"0": {"model": "embedded:smollm2-135m", "dtype": "bfloat16"},
                       "1": {"model": "embedded:smollm2-135m", "dtype": "bfloat16"}}}
    text = ledger.render_headline(rows, {"02": study, "05": {"model": "embedded:smollm2-135m", "dtype": "float32"}})
    assert ("Every row ran on `embedded:smollm2-135m` (SmolLM2-135M-Instruct, dequantised from the Q4_1 gguf) in "
            "bfloat16 (notebooks 02); `embedded:smollm2-135m` (SmolLM2-135M-Instruct") in text
    assert "in float32 (notebooks 05)" in text and "MAGNET: LLaMA-2-7B" in text and "EMAT: BERT-base" in text
    assert "What this ledger can say: Of the 5 findings" in text


def test_the_design_block_counts_power_and_the_plans_classes_from_the_rows_alone():
    powered = ledger.Claim(**{**ROW, "id": "a.powered", "paper_effect": -20.0, "mde": 15.0})
    weak = ledger.Claim(**{**ROW, "id": "a.weak", "paper_effect": -5.0, "mde": 15.0})
    timed = ledger.Claim(**{**ROW, "id": "a.timed", "paper_effect": -20.0, "mde": 15.0, "regime": "CPU timing"})
    # an undecided study row whose examples' term dominates: three seeds that agree, a wide interval
    undecided = ledger.Claim(**{**TRAINED, "id": "a.examples", "low": -3.0, "high": 3.0, "value": 0.0, "n_seeds": 3,
                                "seed_values": (-0.01, 0.0, 0.01)})
    text = ledger.design_block([powered, weak, timed, undecided])
    assert ("3 of the four papers' 4 findings state the paper's effect in our units; 2 of them could detect an effect "
            "of that size") in text
    assert "1 of those in another hardware regime, which leaves **1 that can be decided here**: `a.powered`" in text
    assert "1 examples-dominated (more test examples would narrow them) (`a.examples`)" in text
    assert "could read *not reproduced*" in text and "findings state the paper's effect" not in \
        text.split("**Either verdict.**")[1]


# The ledger's comparisons against a baseline: (notebook, text in the row's claim) -> what must beat what first.
BASELINE_COMPARISONS = {("04", "beats middle unmasking"): "middle unmasking above the causal decoder (r=0)",
                        ("04", "beats full unmasking"): "full unmasking above the causal decoder (r=0)",
                        ("06", "beats the RNN decoder"): "the GRU's dev curve rose and then flattened",
                        ("06", "beats naive MTC"): "naive MTC above the single-token MLM",
                        ("06", "first-token ranking"): "the MLM's ranking above the label prior"}


def test_no_reproduced_row_of_the_ledger_beats_a_baseline_not_shown_to_work():
    rows = ledger.read_rows(ledger.ledger_path())
    for (notebook, text), must in BASELINE_COMPARISONS.items():
        found = [row for row in rows if row.notebook == notebook and text in row.claim]
        assert found, f"notebook {notebook} has no ledger row that {text!r}"
        for row in found:
            assert row.baseline, f"{row.where} ({row.claim}) names no baseline; it must show {must}"
            assert row.verdict != ledger.VERDICTS[0] or row.baseline_works, f"{row.claim}: reproduced against " \
                                                                           f"{row.baseline}, not shown to work"
    # a baseline that scores 0 by construction is a table row, never the thing a claim beats
    assert not [row for row in rows if "label prior" in row.claim or "by their training frequency" in row.claim]

NOTEBOOKS_WITH_CLAIMS = ("01", "02", "03", "04", "05", "06", "07")
NOTEBOOK_TABLES = {"06": ("table3",)}  # result tables a notebook's summary cell records next to its claims


@pytest.mark.after_notebooks
def test_every_executed_notebook_wrote_well_formed_claims(request, session_start):
    """Runs after nbmake: each notebook executed in this session wrote its claims (smoke profile) in this session."""
    executed = {Path(str(item.fspath)).name[:2] for item in request.session.items if str(item.fspath).endswith(".ipynb")}
    executed |= getattr(request.session, "notebooks_run_by_tests", set())  # run whole by tests/test_out_of_order.py
    if not executed:
        pytest.skip("no notebook was executed in this session (run with `notebooks --nbmake`)")
    profile = os.environ.get("WORKBOOK_PROFILE", "smoke")
    for notebook in sorted(executed & set(NOTEBOOKS_WITH_CLAIMS)):
        path = ledger.claims_dir(profile) / f"{notebook}.json"
        assert path.exists(), (f"notebook {notebook} wrote no claims to {path}; that folder holds "
                               f"{sorted(each.name for each in path.parent.iterdir()) if path.parent.is_dir() else 'nothing'}")
        assert path.stat().st_mtime >= session_start - 1, f"{path} is older than this session: notebook {notebook} stopped writing it"
        rows = ledger.read_rows(path)
        assert rows and all(row.notebook == notebook for row in rows)
        assert json.loads(path.read_text())["profile"] == profile
        for name in NOTEBOOK_TABLES.get(notebook, ()):
            path = ledger.claims_dir(profile) / f"{notebook}_{name}.json"
            assert path.exists(), f"notebook {notebook} wrote no result table {name!r} to {path}"
            assert path.stat().st_mtime >= session_start - 1, f"{path} is older than this session"
            entry = ledger.read_table(path)
            assert (entry.notebook, entry.name) == (notebook, name) and entry.rows
            assert json.loads(path.read_text())["profile"] == profile


def test_claims_record_their_provenance_and_the_ledger_keeps_it(tmp_path, monkeypatch, workbook):
    from helpers import profiles, store

    workbook()
    path = ledger.record([ledger.Claim(**ROW)], notebook="05", profile=profiles.get("cpu"),
                         runs={"generations": {"T": 8}}, seeds=[0, 1, 2], parameters=_params("05"))
    origin = json.loads(path.read_text())["provenance"]
    assert origin["profile"] == "cpu" and origin["profile_fingerprint"] == store.fingerprint(profiles.get("cpu"))
    assert origin["runs"] == {"generations": store.fingerprint({"T": 8})} and origin["seeds"] == [0, 1, 2]
    assert origin["machine"]["torch"] and "cpu" in origin["machine"]
    ledger.gather()
    assert ledger.read_provenance()["05"] == origin and ledger.provenance_problems() == []


def test_a_prefix_run_of_notebook_04_is_not_gathered(tmp_path, monkeypatch, workbook, capsys):
    """make reproduce's prefix (WORKBOOK_PREFIX=4) trains notebook 04's taggers a quarter of their steps: its claims
    say so in their provenance, and the gather leaves the ledger's rows of 04 as they were, read at full length
    (with no study seeds at the prefix it compares nothing; tests/test_study.py compares with them); a notebook whose
    paper has no prefix (05) is gathered as always under the same variable."""
    from helpers import profiles

    workbook()
    sr = dict(ROW, notebook="04", paper="003", id="sr.test.row")
    ledger.record([ledger.Claim(**sr)], notebook="04", profile="cpu", parameters=_params("04"))
    before = [row for row in ledger.gather() if row.notebook == "04"]
    monkeypatch.setenv(profiles.PREFIX_VAR, "4")
    path = ledger.record([ledger.Claim(**{**sr, "low": 1.0, "high": 3.0})], notebook="04", profile="cpu",
                         parameters=_params("04", prefix=4))
    assert json.loads(path.read_text())["provenance"]["prefix"] == 4
    five = ledger.record([ledger.Claim(**ROW)], notebook="05", profile="cpu", parameters=_params("05"))
    assert "prefix" not in json.loads(five.read_text())["provenance"]
    rows = ledger.gather()
    assert [row for row in rows if row.notebook == "04"] == before and any(row.notebook == "05" for row in rows)
    out = capsys.readouterr().out
    assert "notebook 04: a prefix run (each trained run at 1/4 of its length" in out
    assert "the study recorded no seeds at this prefix to compare with" in out


def test_gather_refuses_smoke_claims_filed_under_the_cpu_profile(tmp_path, monkeypatch, workbook):
    from helpers import profiles

    workbook()
    smoke = ledger.record([ledger.Claim(**ROW)], notebook="05", profile=profiles.get("smoke"),
                          parameters=_params("05", "smoke"))
    target = ledger.claims_dir("cpu") / "05.json"
    target.parent.mkdir(parents=True)
    target.write_text(smoke.read_text().replace('"profile": "smoke",', '"profile": "cpu",', 1))  # renamed, not rerun
    with pytest.raises(ledger.ProvenanceError, match="computed under the 'smoke' profile"):
        ledger.gather()
    edited = profiles.get("cpu").replace(seed=7)  # a profile edited inside the kernel
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile=edited)
    with pytest.raises(ledger.ProvenanceError, match="other cpu-profile settings"):
        ledger.gather()
    payload = json.loads(target.read_text())
    del payload["provenance"]
    target.write_text(json.dumps(payload))
    with pytest.raises(ledger.ProvenanceError, match="record no provenance"):
        ledger.gather()
    assert not ledger.ledger_path().exists()  # nothing was written


def test_check_fails_on_ledger_rows_without_provenance(tmp_path, monkeypatch, workbook):
    workbook()
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile="cpu", parameters=_params("05"))
    ledger.gather()
    assert ledger.main(["--check"]) == 0
    committed = json.loads(ledger.ledger_path().read_text())
    committed["provenance"] = {}
    ledger.ledger_path().write_text(json.dumps(committed))
    assert ledger.main(["--check"]) == 1 and "record no provenance" in ledger.provenance_problems()[0]


def test_a_summary_rerun_after_the_parameters_changed_is_refused(tmp_path, monkeypatch, workbook):
    from helpers import profiles

    workbook()
    cfg = profiles.get("cpu")
    params = ledger.parameters("05", cfg, {"steps": 4, "seed": 0})
    params.computed("training")
    params.computed("evaluation")
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile=cfg, parameters=params)  # all cells agree
    changed = ledger.parameters("05", cfg, {"steps": 8, "seed": 1})  # the parameters cell edited and rerun
    changed.computed("evaluation")  # ... and the evaluation cell, but not the training cell
    with pytest.raises(ledger.StaleResultsError, match="results of training were computed under other parameters"):
        ledger.record([ledger.Claim(**ROW)], notebook="05", profile=cfg, parameters=changed)
    with pytest.raises(ledger.StaleResultsError, match="not the ones the parameters cell now holds"):
        ledger.record([ledger.Claim(**ROW)], notebook="05", profile=cfg, parameters=params)
    changed.computed("training")
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile=cfg, parameters=changed)


# --- the seed study

TRAINED = dict(ROW, notebook="02", paper="000", direction=1, low=1.0, high=3.0, value=2.0, trained=True, quantity="gain",
               plateau=_flat(), id="mntp.test.gain")


def _seeds(values, half=1.0, **change):
    return {seed: [ledger.Claim(**{**TRAINED, "value": value, "low": value - half, "high": value + half, **change}),
                   ledger.Claim(**{**DEFINITION, "notebook": "02"})]
            for seed, value in enumerate(values)}


def test_a_trained_row_becomes_the_seed_mean_with_the_seed_spread_in_its_interval():
    import numpy as np
    from scipy import stats

    combined, definition = ledger.combine_seeds(_seeds([2.0, 2.5, 3.0]))
    assert combined.value == pytest.approx(2.5) and combined.n_seeds == 3 and combined.seed_values == (2.0, 2.5, 3.0)
    seed_half = stats.t.ppf(0.975, 2) * np.std([2.0, 2.5, 3.0], ddof=1) / np.sqrt(3)
    assert combined.high - combined.value == pytest.approx((seed_half ** 2 + 1.0) ** 0.5)
    assert "3 training seeds" in combined.method and combined.verdict == "reproduced"
    assert definition.verdict == "holds"
    # the same per-seed intervals, spread further apart: a wider interval, and here no longer on the paper's side
    spread, _ = ledger.combine_seeds(_seeds([-1.0, 2.5, 6.0]))
    assert spread.high - spread.low > combined.high - combined.low and spread.verdict == "inconclusive"


def test_a_sequential_study_keeps_each_row_at_the_first_look_that_decided_it():
    """Pocock's plan stops a row at the first look whose interval crosses the boundary: seeds run later for the same
    notebook's other rows never re-read it, even when they would pull it back across. An undecided row is read at the
    last look its seeds reach, and a seed count that is no look of the plan is refused."""
    from helpers.ledger import sequential

    plan = sequential.SequentialPlan()
    early = _seeds([5.0, 5.1, 5.2, -20.0, -20.0], half=0.05)  # decided at 3 seeds; five would straddle 0
    late = _seeds([0.2, 1.0, 0.6, 0.9, 0.5], half=0.05, quantity="later gain", id="mntp.test.later_gain")  # straddles at 3 seeds, decided at 5
    rows = {seed: [early[seed][0], late[seed][0]] for seed in early}
    first, second = ledger.combine_seeds(rows, plan)
    assert first.n_seeds == 3 and first.value == pytest.approx(5.1) and first.verdict == "reproduced"
    assert "look 1 of 3" in first.method and "seeds 3..4 (run for other rows) are not read" in first.method
    assert ledger.verdict_of(ledger.combine_seeds({seed: early[seed][:1] for seed in early})[0]) == "inconclusive"
    assert second.n_seeds == 5 and "look 2 of 3" in second.method and second.verdict == "reproduced"
    assert ledger.verdict_of(ledger.combine_seeds({seed: late[seed][:1] for seed in range(3)}, plan)[0]) == \
        "inconclusive"
    with pytest.raises(ValueError, match="looks after"):
        ledger.combine_seeds({seed: rows[seed] for seed in range(4)}, plan)


def test_an_examples_look_rereads_the_same_seeds_on_more_examples_and_keeps_rows_decided_before_it():
    """An examples look reads the same three seeds' rows scored on twice the test examples: a row that straddled at
    look 1 because its examples' term was wide is decided at look 2 and says so; a row decided at look 1 keeps its
    look-1 reading even though the larger evaluation would have moved it; a row that does not rest on training is the
    first look's. A schedule the plan does not allow, or a look whose seeds are missing, is an error naming it."""
    from helpers.ledger import sequential

    plan = sequential.SequentialPlan()
    decided = {seed: _seeds([5.0, 5.1, 5.2], half=0.05)[seed][0] for seed in range(3)}
    wide = {seed: _seeds([0.30, 0.31, 0.29], half=0.4, quantity="noisy gain", id="mntp.test.noisy_gain")[seed][0] for seed in range(3)}
    rows = {(1, seed): [decided[seed], wide[seed], ledger.Claim(**ROW)] for seed in range(3)}
    moved = {seed: dataclasses.replace(decided[seed], value=-9.0, low=-9.05, high=-8.95) for seed in range(3)}
    narrow = {seed: dataclasses.replace(wide[seed], low=wide[seed].value - 0.2, high=wide[seed].value + 0.2)
              for seed in range(3)}
    rows.update({(2, seed): [moved[seed], narrow[seed], ledger.Claim(**{**ROW, "ours": "other"})] for seed in range(3)})
    at_one = ledger.combine_study({where: found for where, found in rows.items() if where[0] == 1}, [(3, 1)], plan)
    assert at_one[1].verdict == "inconclusive"  # the examples' half-width, 0.4, reaches below 0
    kept, noisy, plain = ledger.combine_study(rows, [(3, 1), (3, 2)], plan)
    assert kept.value == pytest.approx(5.1) and "look 1 of 3" in kept.method
    assert "seeds 0..2 (at 2x the test examples) (run for other rows) are not read" in kept.method
    assert noisy.verdict == "reproduced" and noisy.n_seeds == 3 and noisy.low > 0
    assert "look 2 of 3 of a sequential plan, on 2x the test examples" in noisy.method
    assert plain == ledger.Claim(**ROW)
    with pytest.raises(ValueError, match="is not a schedule of this plan"):
        ledger.combine_study(rows, [(3, 1), (5, 2)], plan)
    with pytest.raises(ValueError, match="has the rows of seeds"):
        ledger.combine_study({where: found for where, found in rows.items() if where != (2, 2)}, [(3, 1), (3, 2)], plan)


def test_a_seed_study_refuses_what_it_cannot_average():
    with pytest.raises(ValueError, match="at least 3 seeds"):
        ledger.combine_seeds(_seeds([2.0, 2.5]))
    with pytest.raises(ValueError, match="records no value="):
        ledger.combine_seeds(_seeds([2.0, 2.5, 3.0], value=None))
    missing = _seeds([2.0, 2.5, 3.0])
    missing[2] = missing[2][1:]
    with pytest.raises(ValueError, match="seed 2's rows differ from seed 0's: missing"):
        ledger.combine_seeds(missing)
    failing = _seeds([2.0, 2.5, 3.0])
    failing[1][1] = ledger.Claim(**{**DEFINITION, "notebook": "02", "holds": False})
    assert ledger.combine_seeds(failing)[1].verdict == "fails"  # a definition holds only if it holds on every seed
    assert ledger.combine_seeds({0: [ledger.Claim(**ROW)]})[0] == ledger.Claim(**ROW)  # not trained: seed 0's


def test_a_study_row_counts_its_baseline_as_working_only_if_it_worked_on_every_seed():
    works = ledger.combine_seeds(_seeds([2.0, 2.5, 3.0], baseline="the baseline", baseline_works=True))[0]
    assert works.baseline_works is True and works.verdict == "reproduced"
    seeds = _seeds([2.0, 2.5, 3.0], baseline="the baseline", baseline_works=True)
    seeds[2][0] = dataclasses.replace(seeds[2][0], baseline_works=False, verdict="")  # a later seed's baseline broke
    broken = ledger.combine_seeds(seeds)[0]
    assert broken.baseline_works is False and broken.verdict.startswith("inconclusive")
    assert "was not shown to work" in broken.verdict_text


def test_a_study_seed_computed_under_other_notebook_settings_is_not_done(tmp_path, monkeypatch, workbook):
    from helpers import profiles

    workbook()
    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    monkeypatch.setenv(profiles.SEED_VAR, "1")
    cfg = profiles.current()
    row = ledger.Claim(**{**ROW, "notebook": "03"})
    settings = profiles.settings_for("magnet", cfg)
    ledger.record([row], "03", cfg, parameters=ledger.parameters("03", cfg, settings))
    assert ledger.study_seed_is_done("cpu", 1, "03")
    # the same seed computed before a setting of notebook 03 changed (here: its held-out blocks) is run again
    changed = dataclasses.replace(settings, heldout_blocks=7)
    ledger.record([row], "03", cfg, parameters=ledger.parameters("03", cfg, changed))
    assert not ledger.study_seed_is_done("cpu", 1, "03")
    ledger.record([row], "03", cfg)  # no parameters recorded: nothing says which settings it ran under
    assert not ledger.study_seed_is_done("cpu", 1, "03")


def test_a_study_seed_writes_its_own_file_and_the_ledger_keeps_the_study_over_a_single_seed(tmp_path, monkeypatch,
                                                                                              capsys, workbook):
    from helpers import profiles

    workbook()
    paths = _record_seeds(monkeypatch)
    assert paths == [ledger.study_dir("cpu", seed) / "02.json" for seed in (0, 1, 2)]
    assert all(ledger.study_seed_is_done("cpu", seed, "02") for seed in (0, 1, 2))
    assert not ledger.study_seed_is_done("cpu", 3, "02")
    combined = ledger.record_study("cpu", [0, 1, 2], "02")
    assert combined[0].seed_values == (2.0, 3.0, 4.0)
    rows = ledger.gather(study=True)
    assert rows[0].n_seeds == 3 and ledger.provenance_problems() == []
    ledger.record([ledger.Claim(**{**TRAINED, "value": 9.0, "low": 8.0, "high": 10.0})], "02", profiles.current(),
                  parameters=_params("02", profiles.current()))
    after = ledger.gather()  # a single-seed rerun: compared with the study, not written over it
    assert after == rows
    assert "9 OUTSIDE the study's 95% prediction interval for a new seed [-1.97, 7.97] (3 seeds at the run's own " \
        "test examples)" in \
        capsys.readouterr().out  # mean 3, s = 1: 3 ± t(0.975; 2) · sqrt(1 + 1/3)


def test_a_single_seed_run_is_compared_with_the_studys_seeds_at_its_own_test_examples(tmp_path, monkeypatch, workbook):
    """A study row is kept at the look that decided it, often at several times the test examples; a run on the
    notebook's own examples is compared with the seeds' values at those examples (their per-seed files), not with
    the decided look's, whose spread describes another evaluation."""
    workbook()
    _record_seeds(monkeypatch)
    assert ledger.study.seed_values_at("cpu", "02", [0, 1, 2]) == {"mntp.test.gain": (2.0, 3.0, 4.0)}
    assert ledger.study.seed_values_at("cpu", "02", [0, 1, 2, 3]) == {}  # a seed's file missing: nothing to compare
    run = ledger.Claim(**{**TRAINED, "value": 3.5, "low": 3.0, "high": 4.0})
    decided_elsewhere = [dataclasses.replace(run, seed_values=(20.0, 21.0, 22.0), n_seeds=3, verdict="")]
    assert "OUTSIDE" in ledger.seed_range_report([run], decided_elsewhere)[0]
    line, = ledger.seed_range_report([run], decided_elsewhere, ledger.study.seed_values_at("cpu", "02", [0, 1, 2]))
    assert "3.5 inside" in line and "at the run's own test examples" in line


def test_a_run_in_another_dtype_is_compared_with_the_study_and_never_gathered(tmp_path, monkeypatch, workbook):
    from helpers import profiles

    workbook()
    _study(tmp_path, monkeypatch)
    study = ledger.gather(study=True)
    monkeypatch.setenv(profiles.DTYPE_VAR, "bfloat16")
    ledger.record([ledger.Claim(**{**TRAINED, "value": 3.5, "low": 3.0, "high": 4.0})], "02", profiles.current(),
                  parameters=_params("02", profiles.current()))
    lines = ledger.compare_with_ledger("cpu", ["02"])
    assert lines[0] == "notebook 02:" and "3.5 inside the study's 95% prediction interval" in lines[1]
    assert ledger.read_rows(ledger.ledger_path()) == study  # compared, not written
    with pytest.raises(ledger.ProvenanceError, match="computed under other cpu-profile settings"):
        ledger.gather()  # the ledger refuses the bf16 run


def test_a_study_joins_seeds_by_id_and_recomputes_what_each_seed_says():
    seeds = _seeds([2.0, 2.5, 3.0], id="mntp.test.gain", note="step-0 accuracy 5.1")
    seeds[1][0] = dataclasses.replace(seeds[1][0], quantity="renamed", claim="reworded", confound="seed 1 repeats more",
                                      note="step-0 accuracy 4.9", verdict="")
    combined = ledger.combine_seeds(seeds)[0]  # joined by id although the texts differ
    assert combined.n_seeds == 3 and combined.confound == "seed 1: seed 1 repeats more"
    assert combined.verdict == "inconclusive" and "seed 0: step-0 accuracy 5.1" in combined.note


def test_a_study_judges_the_seed_mean_curve():
    flat = ledger.combine_seeds(_seeds([2.0, 2.5, 3.0]))[0]
    assert flat.plateau["curve"].endswith("mean of 3 seeds") and not flat.still_improving
    moving = ledger.combine_seeds(_seeds([2.0, 2.5, 3.0], plateau=_rising()))[0]
    assert moving.still_improving
    missing = _seeds([2.0, 2.5, 3.0])
    missing[1][0] = dataclasses.replace(missing[1][0], plateau=None, verdict="")
    assert ledger.combine_seeds(missing)[0].still_improving  # one seed without a curve: no curve for the study


def _log_rising(offset=0.0, steps=400, every=10):
    """A held-out curve rising with the logarithm of the steps (never shown stopped on its own), no noise."""
    import math

    return [(step, offset + 10.0 * math.log1p(step)) for step in range(0, steps + 1, every)]


def test_a_row_declared_by_its_gap_is_read_by_the_gap_between_two_curves_trained_alike():
    """Two methods whose curves both keep rising (neither shown stopped) with a constant gap: the row's budget check
    reads the gap, so an interval on the contradicting side reads "not reproduced"; a widening gap keeps it
    inconclusive. The seed study averages both curves; the stored form round-trips."""
    gap = ledger.curve("held-out accuracy: A against B", _log_rising(-2.0), against=_log_rising())
    assert ledger.fields.check_curve(gap) == gap and set(gap) == {"curve", "points", "against"}
    row = ledger.Claim(**{**TRAINED, "low": -3.0, "high": -1.0, "value": -2.0, "plateau": gap, "n_seeds": 3,
                          "seed_values": (-2.5, -2.0, -1.5)})
    assert not row.still_improving and row.verdict == "not reproduced" and "gap stopped changing" in row.budget_text
    alone = ledger.Claim(**{**TRAINED, "low": -3.0, "high": -1.0, "value": -2.0, "n_seeds": 3,
                            "seed_values": (-2.5, -2.0, -1.5), "plateau": ledger.curve("A", _log_rising(-2.0))})
    assert alone.still_improving and alone.verdict == "inconclusive"  # the claimed curve alone never stops
    widening = ledger.curve("A against B", [(step, value - 0.03 * step) for step, value in _log_rising()],
                            against=_log_rising())
    assert ledger.Claim(**{**TRAINED, "low": -3.0, "high": -1.0, "value": -2.0, "plateau": widening, "n_seeds": 3,
                           "seed_values": (-2.5, -2.0, -1.5)}).verdict == "inconclusive"
    combined = ledger.combine_seeds(_seeds([-2.0, -2.5, -1.5], plateau=gap))[0]
    assert [step for step, _ in combined.plateau["against"]] == [step for step, _ in gap["against"]]
    assert [v for _, v in combined.plateau["against"]] == pytest.approx([v for _, v in gap["against"]])
    assert not combined.still_improving
    with pytest.raises(ValueError, match="with 'against' for a gap"):
        ledger.fields.check_curve({**gap, "other": []})


def test_a_gap_declaration_needs_both_curves_and_says_why():
    declared = ledger.Declared(**{**DECLARED, "trained": True, "curve": "held-out accuracy",
                                  "gap_stop": "both trained alike; the row is their difference"})
    gap = ledger.curve("held-out accuracy", _log_rising(-2.0), against=_log_rising())
    assert "against" in declared.measured(-20.0, -40.0, -10.0, "bootstrap", 32, plateau=gap).plateau
    with pytest.raises(ValueError, match="needs the compared curve"):
        declared.measured(-20.0, -40.0, -10.0, "bootstrap", 32, plateau=ledger.curve("held-out accuracy",
                                                                                     _log_rising()))
    with pytest.raises(ValueError, match="no gap_stop= says"):
        ledger.Declared(**{**DECLARED, "trained": True}).measured(-20.0, -40.0, -10.0, "bootstrap", 32, plateau=gap)
    with pytest.raises(ValueError, match="only a trained row"):
        ledger.Declared(**{**DECLARED, "gap_stop": "alike"})


DECLARED = dict(id="openltg.table6.lr5.no_ltd", notebook="05", paper="002", where="Table 6", says="LTD cuts repetition",
                paper_value="17.80 -> 0.73", quantity="LR-5 gain", direction=-1, check=CHECK)


def test_a_recorded_row_read_under_a_new_declaration_keeps_its_measurement_and_changes_its_meaning():
    declared = ledger.Declared(**DECLARED)
    row = declared.measured(-20.0, -40.0, -10.0, "bootstrap over 32 prompts", 32, fmt="{:.1f}", note="at T = 8")
    assert row.verdict == "reproduced" and row.mde is not None
    as_measurement = ledger.Declared(**{**DECLARED, "kind": ledger.MEASUREMENT, "direction": 0,
                                        "says": "one metric of the ablation"})
    read = as_measurement.redeclare(row)
    assert (read.value, read.low, read.high, read.method, read.n, read.note, read.ours) == \
        (row.value, row.low, row.high, row.method, row.n, row.note, row.ours)
    assert (read.kind, read.claim, read.mde, read.verdict) == (ledger.MEASUREMENT, "one metric of the ablation", None,
                                                               "inconclusive")
    # the other way round, the minimum detectable effect is computed as a fresh run would
    back = declared.redeclare(read)
    assert back == row
    # a threshold moved past the interval turns the verdict without touching the measurement
    moved = ledger.Declared(**{**DECLARED, "threshold": -45.0}).redeclare(row)
    assert moved.verdict == "not reproduced" and (moved.low, moved.high) == (row.low, row.high)
    with pytest.raises(ValueError, match="is not declaration"):
        ledger.Declared(**{**DECLARED, "id": "openltg.other"}).redeclare(row)
    with pytest.raises(ValueError, match="rerun its notebook"):
        ledger.Declared(**DECLARED, baseline="the causal decoder", baseline_must_beat="BART").redeclare(row)


def test_a_declared_claim_joins_its_measurement_into_the_row():
    declared = ledger.Declared(**DECLARED, dataset="Austen passages, not WritingPrompts")
    row = declared.measured(-20.0, -40.0, -10.0, "bootstrap over 32 prompts", 32, fmt="{:.1f}", note="at T = 8")
    assert (row.id, row.claim, row.check, row.ours, row.note) == (declared.id, "LTD cuts repetition", CHECK, "-20.0",
                                                                   "at T = 8")
    assert row.verdict == "reproduced" and row.dataset.startswith("Austen")
    assert "**here: Austen passages" in ledger.render_markdown([row])
    exact = ledger.Declared(**{**DECLARED, "kind": ledger.DEFINITION, "check": ""}).measured(
        None, None, None, ledger.EXACT, None, holds=True, ours="16 vs 10")
    assert exact.verdict == "holds"


@pytest.mark.parametrize("change, match", [
    ({"id": "Table6"}, "id="), ({"check": "a free-text check"}, "pytest node id"),
    ({"baseline": "MNTP"}, "baseline_must_beat"),
    ({"baseline": "MNTP", "baseline_must_beat": "the untrained step 0"}, "never certifies"),
    ({"baseline": "the MLM", "baseline_must_beat": "the label prior"}, "never certifies"),
    ({"paper_value": "not reported"}, "reference claim"), ({"kind": "maybe"}, "kind=")])
def test_a_declaration_names_what_is_wrong(change, match):
    with pytest.raises(ValueError, match=match):
        ledger.Declared(**{**DECLARED, **change})
    with pytest.raises(ValueError, match="declared twice"):
        ledger.declare(ledger.Declared(**DECLARED), ledger.Declared(**DECLARED))


def test_a_baseline_declaration_needs_its_measured_standing():
    declared = ledger.Declared(**DECLARED, baseline="MNTP", baseline_must_beat="the causal base (Table 1)")
    with pytest.raises(ValueError, match="baseline_works="):
        declared.measured(-20.0, -40.0, -10.0, "bootstrap", 32)
    assert declared.measured(-20.0, -40.0, -10.0, "bootstrap", 32, baseline_works=False).verdict == "inconclusive"


def test_missing_checks_names_every_check_without_a_test(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_one():\n    assert True\n\n\nclass TestB:\n"
                                                 "    def test_two(self):\n        assert True\n\n\ndef helper():\n"
                                                 "    pass\n")
    ok = "tests/test_a.py::test_one tests/test_a.py::TestB::test_two tests/test_a.py::test_one[x-1]"
    declared = ledger.declare(
        ledger.Declared(**{**DECLARED, "check": ok}),
        ledger.Declared(**{**DECLARED, "id": "openltg.x.gone", "check": "tests/test_a.py::test_gone"}),
        ledger.Declared(**{**DECLARED, "id": "openltg.x.file", "check": "tests/test_b.py::test_one"}))
    assert ledger.missing_checks(declared, tmp_path) == ["openltg.x.file: tests/test_b.py::test_one",
                                                         "openltg.x.gone: tests/test_a.py::test_gone"]


def test_every_declared_check_names_an_existing_test_and_ids_are_unique():
    declared = ledger.declared_claims()  # raises on an id declared twice
    assert declared and ledger.missing_checks(declared) == []
    for entry in declared.values():
        if entry.kind == ledger.FINDING:
            assert entry.check, f"{entry.id}: a finding without a check can reach neither verdict"


def test_verdict_changes_are_listed_against_the_previous_ledger():
    before = [ledger.Claim(**{**ROW, "id": "openltg.table6.lr5.no_ltd"}), ledger.Claim(**ROW)]
    after = [ledger.Claim(**{**ROW, "quantity": "LR-5 gain", "id": "openltg.table6.lr5.no_ltd", "check": ""}),
             ledger.Claim(**{**ROW, "id": "openltg.table6.new"})]  # joined by id: a new row changes nothing
    assert ledger.verdict_changes(before, after) == [{"id": "openltg.table6.lr5.no_ltd", "from": "reproduced",
                                                      "to": "inconclusive"}]
    text = ledger.render_markdown(after, ledger.verdict_changes(before, after))
    assert "1 verdicts changed against the ledger this one replaced" in text.splitlines()[0]


CURVE_PACKAGES = ("mntp", "magnet", "sequence_repetition", "openltg", "emat", "diffusion")


def test_most_findings_of_the_four_papers_can_reach_either_verdict():
    """At the cpu profile, every finding of the four papers outside another hardware regime (a GPU speed-up timed on
    a CPU) has a check and, if trained, a held-out curve with enough evaluations in its window for the equivalence
    test; the regime rows are at most one finding in eight."""
    import importlib

    from helpers import profiles

    cpu = profiles.get("cpu")
    points = {}
    for package in CURVE_PACKAGES:
        points.update(importlib.import_module(f"helpers.papers.{package}.settings").curve_points(cpu))
    findings = [entry for entry in ledger.declared_claims().values()
                if entry.kind == ledger.FINDING and entry.paper in ledger.SEED_PAPERS]
    able = [entry.id for entry in findings if entry.reaches_either_verdict(points)]
    unable = sorted(entry.id for entry in findings if entry.id not in able)
    assert unable == sorted(entry.id for entry in findings if entry.regime), f"cannot reach either verdict: {unable}"
    assert len(unable) <= len(findings) / 8, f"{len(able)} of {len(findings)} can reach either verdict; not: {unable}"
    for entry in findings:
        if entry.trained and entry.curve:
            assert entry.curve in points, f"{entry.id}: its curve {entry.curve!r} has no evaluation count"


# --- provenance that is checked: each planted file is refused by gather, in one line naming the notebook


def test_gather_refuses_claims_from_a_commit_whose_code_differs_or_that_does_not_exist(tmp_path, monkeypatch, workbook):
    wb = workbook()
    package = tmp_path / "helpers" / "papers" / "openltg"
    package.mkdir(parents=True)
    (package / "decode.py").write_text("STEPS = 4\n")
    (tmp_path / "helpers" / "unrelated_notes.txt").write_text("")
    wb.git("add", "-A")
    wb.git("commit", "-q", "-m", "code")
    path = ledger.record([ledger.Claim(**ROW)], notebook="05", profile="cpu", parameters=_params("05"))
    (tmp_path / "figures").mkdir()  # what the run writes itself does not make the tree dirty
    (tmp_path / "figures" / "05_x.png").write_text("png")
    assert json.loads(path.read_text())["provenance"]["dirty"] is False
    (package / "decode.py").write_text("STEPS = 8\n")  # the notebook's code changes in a later commit
    wb.git("commit", "-q", "-am", "steps")
    with pytest.raises(ledger.ProvenanceError, match=r"notebook 05's claims were computed at commit \w{7}, and notebook "
                                                     r"05's code has changed since \(helpers/papers/openltg/decode.py\); "
                                                     r"rerun notebook 05"):
        ledger.gather()
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile="cpu", parameters=_params("05"))
    ledger.gather()  # rerun at HEAD: gathered
    payload = json.loads(path.read_text())
    payload["provenance"]["commit"] = "0" * 40
    path.write_text(json.dumps(payload))
    with pytest.raises(ledger.ProvenanceError, match="commit '0{40}', which is not a commit of this repository"):
        ledger.gather()
    assert ledger.read_provenance()["05"]["commit"] == wb.git("rev-parse", "HEAD")  # nothing written


def test_bumping_the_colab_pin_is_no_change_of_a_notebooks_code_but_any_other_edit_is(tmp_path, monkeypatch, workbook):
    """scripts/pin_colab_commit.py rewrites one line of every notebook after a helpers change; no computation reads it,
    so claims computed before the bump stay the notebook's current code's. Any other edit of the notebook, even in
    the same cell, is a change."""
    import importlib.util

    wb = workbook()
    spec = importlib.util.spec_from_file_location(
        "pin_colab_commit", Path(__file__).resolve().parents[1] / "scripts" / "pin_colab_commit.py")
    pinning = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pinning)
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir(exist_ok=True)
    install = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
               "source": ['WORKBOOK_COMMIT = "' + "a" * 40 + '"  # the workbook these notebooks belong to\n',
                          "print(WORKBOOK_COMMIT)\n"]}
    (notebooks / "05_mask_predict_ltd.ipynb").write_text(json.dumps({"cells": [install], "metadata": {},
                                                                     "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n")
    wb.git("add", "-A")
    wb.git("commit", "-q", "-m", "notebook")
    computed = wb.git("rev-parse", "HEAD")
    pinning.pin("b" * 40, notebooks)
    wb.git("commit", "-q", "-am", "pin")
    assert "b" * 40 in (notebooks / "05_mask_predict_ltd.ipynb").read_text()
    assert code_identity.code_changes(computed, "05") == []
    text = (notebooks / "05_mask_predict_ltd.ipynb").read_text().replace("print(WORKBOOK_COMMIT)", "print(1)")
    (notebooks / "05_mask_predict_ltd.ipynb").write_text(text)
    wb.git("commit", "-q", "-am", "edit")
    assert code_identity.code_changes(computed, "05") == ["notebooks/05_mask_predict_ltd.ipynb"]


def test_gather_refuses_claims_under_other_notebook_parameters_or_none(tmp_path, monkeypatch, workbook):
    from helpers import profiles

    workbook()
    cfg = profiles.get("cpu")
    edited = dataclasses.replace(profiles.settings_for("openltg", cfg), seed=9)  # a setting edited in the cell
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile=cfg, parameters=ledger.parameters("05", cfg, edited))
    with pytest.raises(ledger.ProvenanceError, match="notebook 05's claims were computed under other notebook "
                                                     "parameters .*; rerun notebook 05"):
        ledger.gather()
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile=cfg)
    with pytest.raises(ledger.ProvenanceError, match="record no notebook parameters"):
        ledger.gather()
    # notebook 02 registers its masked-LM recipe and mask token
    assert ledger.expected_parameters("02", cfg) == store_fingerprint(cfg, ledger.notebook_settings("02", cfg))
    assert ledger.notebook_settings("02", cfg)[1] == {"mask_token": "underscore"}


def store_fingerprint(cfg, settings):
    from helpers import store

    return store.fingerprint([cfg, *settings])


def _record_seeds(monkeypatch, notebook="02") -> list:
    """Seeds 0, 1 and 2 of ``notebook`` at the cpu profile, each a trained row of value 2 + seed; their files."""
    from helpers import profiles

    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    paths = []
    for seed in (0, 1, 2):
        monkeypatch.setenv(profiles.SEED_VAR, str(seed))
        paths.append(ledger.record(_seeds([2.0 + seed])[0][:1], notebook, profiles.current(),
                                   parameters=_params(notebook, profiles.current())))
    monkeypatch.delenv(profiles.SEED_VAR)
    return paths


def _study(tmp_path, monkeypatch, notebook="02"):
    _record_seeds(monkeypatch, notebook)
    ledger.record_study("cpu", [0, 1, 2], notebook)
    return ledger.claims_dir("cpu") / f"{notebook}.json"


def test_a_study_form_file_is_rederived_from_its_seeds_and_refused_when_edited(tmp_path, monkeypatch, workbook):
    workbook()
    path = _study(tmp_path, monkeypatch)
    original = path.read_text()
    payload = json.loads(original)
    payload["claims"][0]["low"], payload["claims"][0]["verdict"] = 2.9, ""  # moved by hand to a verdict it lacked
    path.write_text(json.dumps(payload))
    with pytest.raises(ledger.ProvenanceError, match="notebook 02's seed-study file is not what its per-seed files give "
                                                     r"\(rows .* differ"):
        ledger.gather(study=True)
    path.write_text(original)
    (ledger.study_dir("cpu", 2) / "02.json").unlink()
    with pytest.raises(ledger.ProvenanceError, match="seed study cannot be re-derived: .*seed-2/02.json missing"):
        ledger.gather()
    assert not ledger.ledger_path().exists()


def test_result_tables_carry_and_pass_the_claims_provenance(tmp_path, monkeypatch, workbook):
    from helpers import profiles

    wb = workbook("\n" + _table_markers("06_table3") + "\n")
    doc = wb.root / "docs" / "claims.md"
    arguments = dict(notebook="06", title=TABLE["title"])
    smoke = ledger.record_table("table3", TABLE["header"], TABLE["rows"], profile="smoke",
                                parameters=_params("06", "smoke"), **arguments)
    target = ledger.claims_dir("cpu") / "06_table3.json"
    target.parent.mkdir(parents=True)
    target.write_text(smoke.read_text().replace('"profile": "smoke"', '"profile": "cpu"'))  # renamed, not rerun
    with pytest.raises(ledger.ProvenanceError, match="the rows of notebook 06's result table table3 were computed under other cpu-profile"):
        ledger.gather()
    payload = json.loads(target.read_text())
    del payload["provenance"]  # a table from before provenance, or written by hand
    target.write_text(json.dumps(payload))
    with pytest.raises(ledger.ProvenanceError, match="the rows of notebook 06's result table table3 record no provenance"):
        ledger.gather()
    ledger.record_table("table3", TABLE["header"], TABLE["rows"], profile=profiles.get("cpu"), **arguments)
    with pytest.raises(ledger.ProvenanceError, match="record no notebook parameters"):
        ledger.gather()
    ledger.record_table("table3", TABLE["header"], TABLE["rows"], profile="cpu", parameters=_params("06"), **arguments)
    ledger.gather()
    assert "35.0 [30.1, 40.2]" in doc.read_text()


def test_the_docs_say_each_notebooks_commit_and_check_only_reads(tmp_path, monkeypatch, capsys, workbook):
    wb = workbook()
    doc = wb.root / "docs" / "claims.md"
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile="cpu", parameters=_params("05"))
    ledger.gather()
    head = wb.git("rev-parse", "HEAD")
    assert f"Computed at (per notebook): 05 at `{head[:7]}`, its code unchanged when gathered." in doc.read_text()
    (tmp_path / "notebooks" / "05_ltd.ipynb").write_text("{}")  # the notebook's code changes after the gather
    wb.git("add", "-A")
    wb.git("commit", "-q", "-m", "edit")
    assert ledger.main(["--check"]) == 0  # stale is shown, not a failure
    assert "stale (not a failure): notebook 05: computed at " in capsys.readouterr().out
    with pytest.raises(ledger.ProvenanceError, match="code has changed since"):
        ledger.gather()  # its claims file is HEAD~1's
    (ledger.claims_dir("cpu") / "05.json").unlink()
    ledger.gather()  # gathered without notebook 05: its rows are kept, and shown stale
    assert "05 at `" + head[:7] + "`: **stale** (its code changed since: notebooks/05_ltd.ipynb)" in doc.read_text()
    assert ledger.docs_are_current()
    journal = ledger.ledger_path().with_name(".gather.journal.json")
    journal.write_text("{}")  # a gather interrupted: --check and --render report it and write nothing
    before = {path: path.read_bytes() for path in (doc, tmp_path / "README.md", ledger.ledger_path(), journal)}
    assert ledger.main(["--check"]) == 1 and "interrupted gather" in capsys.readouterr().out
    assert ledger.main(["--render"]) == 1 and "interrupted gather" in capsys.readouterr().out
    assert {path: path.read_bytes() for path in before} == before


def test_the_committed_ledger_is_consistent_and_no_block_is_stale():
    code = ledger.ledger_code()
    assert code and not any("redeclared" in entry for entry in code.values())
    assert ledger.provenance_problems() == []  # the ledger against itself


def test_each_row_records_its_mde_and_an_underpowered_row_is_counted_apart():
    declared = ledger.Declared(**{**DECLARED, "paper_effect": -17.07})
    # a straddling interval of half-width 15: it detects 1.43 x 15 = 21.4 > the paper's 17.07 points
    wide = declared.measured(-5.0, -20.0, 10.0, "bootstrap over 32 prompts", 32)
    assert wide.mde == pytest.approx(metrics.minimum_detectable_effect(15.0)) and wide.paper_effect == -17.07
    assert wide.verdict == "inconclusive" and wide.underpowered
    assert "underpowered here: detects at least 21.4" in wide.verdict_text
    # a narrow straddling one could have seen the paper's effect: a plain inconclusive row
    narrow = declared.measured(-1.0, -4.0, 2.0, "bootstrap over 32 prompts", 32)
    assert narrow.verdict == "inconclusive" and not narrow.underpowered and "underpowered" not in narrow.verdict_text
    tallied = ledger.tally([dataclasses.replace(wide, paper="002"), narrow])
    assert "1 underpowered here" in tallied and "1 interval straddles" in tallied
    # a row from before the power fields (no mde, no paper effect) still loads and is a plain inconclusive row
    old = {key: value for key, value in dataclasses.asdict(narrow).items() if key not in ("mde", "paper_effect")}
    assert ledger.Claim(**old).mde is None and not ledger.Claim(**old).underpowered
    # a study row's MDE is the nested interval's, t over the seeds
    studied = ledger.combine_seeds(_seeds([2.0, 2.5, 3.0]))[0]
    assert studied.mde == pytest.approx(metrics.seeds_with_examples_mde([2.0, 2.5, 3.0], [1.0] * 3))


def test_a_gather_that_changes_no_verdict_keeps_the_record_of_the_last_one_that_did(tmp_path, monkeypatch, workbook):
    workbook()
    ledger.record([ledger.Claim(**ROW)], notebook="05", profile="cpu", parameters=_params("05"))
    ledger.gather()
    straddles = ledger.Claim(**{**ROW, "low": -5.0, "high": 3.0})
    ledger.record([straddles], notebook="05", profile="cpu", parameters=_params("05"))
    ledger.gather()
    changed = [{"id": "openltg.table6.ltd", "from": "reproduced", "to": "inconclusive"}]
    assert ledger.read_changes() == changed
    ledger.record([straddles], notebook="05", profile="cpu", parameters=_params("05"))
    ledger.gather()  # the same verdict again: the docs still say what the last change was
    assert ledger.read_changes() == changed
    assert "1 verdicts changed" in (tmp_path / "docs" / "claims.md").read_text()


def test_the_prediction_interval_covers_a_new_seed_95_percent_of_the_time_and_the_seed_range_half():
    """A fourth seed's value against three seeds' prediction interval, mean ± t·s·sqrt(1 + 1/n): covered in 95% of
    normal draws; the three seeds' min..max covers it only half the time ((n − 1)/(n + 1) = 1/2)."""
    import numpy as np

    rng = np.random.default_rng(0)
    draws = rng.normal(size=(4000, 4))
    inside = [low <= new <= high for *study, new in draws for low, high in [ledger.seed_prediction_interval(study)]]
    in_range = [min(study) <= new <= max(study) for *study, new in draws]
    assert 0.94 <= np.mean(inside) <= 0.96 and 0.47 <= np.mean(in_range) <= 0.53
    with pytest.raises(ValueError, match="values=.*at least 2 seeds"):
        ledger.seed_prediction_interval([1.0])


def test_a_rerun_is_never_passed_by_a_study_whose_seeds_all_read_one_value():
    """Seeds that all sit at a judge's floor read one value: a prediction interval of width 0 would pass a rerun
    that lands on the floor too, and says nothing of how the judge moves; the report names it NOT COMPARED."""
    floor = ledger.Claim(**{**TRAINED, "value": 0.004, "low": 0.0, "high": 0.01})
    study = [dataclasses.replace(floor, seed_values=(0.004, 0.004, 0.004), n_seeds=3)]
    line, = ledger.seed_range_report([floor], study)
    assert "NOT COMPARED" in line and "inside" not in line
    spread = [dataclasses.replace(floor, seed_values=(0.003, 0.004, 0.005), n_seeds=3)]
    assert "inside the study's 95% prediction interval" in ledger.seed_range_report([floor], spread)[0]


def test_a_trained_row_of_one_seed_reaches_no_verdict_and_says_a_study_decides():
    """One training run's interval covers its test examples, not the seeds: far on either side it reads
    inconclusive; the same row from three seeds is decided."""
    far = ledger.Claim(**{**TRAINED, "value": 9.0, "low": 8.0, "high": 10.0})
    assert far.single_seed and far.verdict == "inconclusive" and "make study" in far.verdict_text
    studied = dataclasses.replace(far, verdict="", n_seeds=3, seed_values=(8.5, 9.0, 9.5))
    assert not studied.single_seed and studied.verdict == "reproduced"


def test_a_number_edited_by_hand_after_the_notebook_wrote_it_is_refused(tmp_path, monkeypatch, workbook):
    """A claims file and a result table are sealed with a digest of their content: one value or one cell edited
    afterwards is refused by gather, naming the file; a file with no digest (written by hand) is refused too."""
    workbook("\n" + _table_markers("06_table3") + "\n")
    path = ledger.record([ledger.Claim(**ROW)], notebook="05", profile="cpu", parameters=_params("05"))
    table = ledger.record_table("table3", TABLE["header"], TABLE["rows"], notebook="06", title=TABLE["title"],
                                note=TABLE["note"], profile="cpu", parameters=_params("06"))
    sealed = {found: found.read_text() for found in (path, table)}
    ledger.gather()  # as written: gathered
    payload = json.loads(sealed[path])
    payload["claims"][0]["high"] = -0.5  # a straddling row turned into a decided one
    path.write_text(json.dumps(payload))
    with pytest.raises(ledger.ProvenanceError, match=r"notebook 05's claims \(.*05\.json\) do not match the digest notebook 05 "
                                                     "sealed them with"):
        ledger.gather()
    del payload["digest"]
    path.write_text(json.dumps(payload))
    with pytest.raises(ledger.ProvenanceError, match="do not match the digest notebook 05 sealed"):
        ledger.gather()
    path.write_text(sealed[path])
    table.write_text(sealed[table].replace("35.0 [30.1, 40.2]", "45.0 [40.1, 50.2]"))  # one cell
    with pytest.raises(ledger.ProvenanceError, match="result table table3 .*do not match the digest notebook 06"):
        ledger.gather()
    assert "45.0" not in (tmp_path / "docs" / "claims.md").read_text()


def test_a_ledger_mixes_no_dtypes_and_rests_on_the_adapter_notebook_02_measured(tmp_path, monkeypatch, workbook):
    """Notebooks computed apart are refused together: rows in another weight dtype (the same 'auto' profile on a
    machine without bf16), rows resting on another MNTP adapter than notebook 02's rows measure, or on the short
    fallback adapter."""
    from helpers import mntp_recipe, models, store

    workbook()
    trained = store.fingerprint({"objective": "mntp"})  # the MNTP run notebook 02's rows record

    def recorded(notebook, adapter=None, dtype="bfloat16"):
        monkeypatch.setattr(models, "weight_dtype_name", lambda profile=None: dtype)
        monkeypatch.setattr(mntp_recipe, "loaded_mntp_adapters", lambda: {"cpu": adapter} if adapter else {})
        runs = {"mntp": {"objective": "mntp"}, "mtp": {"objective": "mtp"}} if notebook == "02" else {}
        return ledger.record([ledger.Claim(**{**ROW, "notebook": notebook})], notebook=notebook, profile="cpu",
                             runs=runs, parameters=_params(notebook))

    recorded("02")
    recorded("05", {"source": "notebook 02", "fingerprint": trained})
    assert {row.notebook for row in ledger.gather()} == {"02", "05"}
    recorded("05", {"source": "notebook 02", "fingerprint": "cccc"})
    with pytest.raises(ledger.ProvenanceError, match=f"rest on MNTP adapter cccc, but notebook 02's rows measure "
                                                     f"adapter {trained}"):
        ledger.gather()
    recorded("05", {"source": "fallback", "fingerprint": "dddd"})
    with pytest.raises(ledger.ProvenanceError, match="short fallback MNTP adapter"):
        ledger.gather()
    recorded("05", {"source": "notebook 02", "fingerprint": trained}, dtype="float32")
    with pytest.raises(ledger.ProvenanceError, match="computed in float32 and notebook 02's in bfloat16"):
        ledger.gather(notebooks=["05"])
    recorded("02", dtype="float32")  # both rerun on the float32 machine: gathered together
    assert {row.notebook for row in ledger.gather()} == {"02", "05"}
