"""scripts/study.py: each (seed, notebook) runs once, under WORKBOOK_SEED; an interrupted study resumes; a failed
seed is named and the exit code is 1."""
from pathlib import Path

import pytest

from helpers import ledger, profiles

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def workbook(git_workbook, monkeypatch):
    """A git workbook with the ledger's docs markers (conftest's ``git_workbook``), whose synthetic rows need no
    declaration, under the cpu profile, no study seed set."""
    monkeypatch.setenv(profiles.ENV_VAR, "cpu")
    monkeypatch.delenv(profiles.SEED_VAR, raising=False)
    return git_workbook(docs=True, synthetic=True)


def _fake_notebook(calls, fail_seed=None):
    """Stands for executing notebook 02: records a trained row whose value depends on the seed it ran under."""
    def runner(path, out_dir, timeout):
        seed = profiles.study_seed()
        calls.append((seed, path.name))
        if seed == fail_seed:
            return "RuntimeError: killed"
        row = ledger.Claim(id="mntp.fig7.test", notebook="02", paper="000", where="Fig. 7", claim="MNTP beats MTP",
                           paper_value="+", ours="x", low=seed, high=seed + 2.0, value=seed + 1.0, method="bootstrap",
                           n=10, trained=True, quantity="accuracy")
        cfg = profiles.current()  # the parameters cell, unedited
        ledger.record([row], "02", cfg, parameters=ledger.parameters("02", cfg, *ledger.notebook_settings("02", cfg)))
        return None
    return runner


def test_an_interrupted_study_resumes_without_redoing_finished_seeds(workbook, load_script):
    study = load_script("study")
    notebook = workbook.root / "notebooks" / "02_mntp_vs_mtp.ipynb"
    calls = []
    assert study.study([notebook], [0, 1, 2], runner=_fake_notebook(calls, fail_seed=2)) == 1  # seed 2 was killed
    assert calls == [(0, notebook.name), (1, notebook.name), (2, notebook.name)]
    assert not ledger.ledger_path().exists()  # nothing gathered from an unfinished study
    calls.clear()
    assert study.study([notebook], [0, 1, 2], runner=_fake_notebook(calls)) == 0
    assert calls == [(2, notebook.name)]  # seeds 0 and 1 were kept
    row, = ledger.read_rows(ledger.ledger_path())
    assert row.seed_values == (1.0, 2.0, 3.0) and row.value == pytest.approx(2.0)
    assert (workbook.root / "figures" / "02_seed_spread.png").stat().st_size > 0  # the seeds behind the verdict, drawn
    assert profiles.study_seed() is None  # the variable does not outlive the study


def test_ctrl_c_stops_the_study_at_once_gathers_nothing_and_exits_130(workbook, load_script):
    """A KeyboardInterrupt from the notebook executor (reproduce.execute raises it after shutting the kernel down)
    ends the study there: no later seed runs, nothing is combined or gathered, the seed variable is unset."""
    study = load_script("study")
    notebook = workbook.root / "notebooks" / "02_mntp_vs_mtp.ipynb"
    calls = []
    finishes = _fake_notebook(calls)

    def runner(path, out_dir, timeout):
        if profiles.study_seed() == 1:
            calls.append((1, path.name))
            raise KeyboardInterrupt
        return finishes(path, out_dir, timeout)

    assert study.study([notebook], [0, 1, 2], runner=runner) == 130
    assert calls == [(0, notebook.name), (1, notebook.name)]
    assert not ledger.ledger_path().exists() and profiles.study_seed() is None


PLANNED = {"02": [5.0 + 0.1 * seed for seed in range(8)],  # far above 0 from the first look
           "05": [0.2, 1.0, 0.6, 0.9, 0.5, 0.8, 0.7, 0.6]}  # above 0, but three seeds' t interval at 98.0% straddles


def _planned_notebook(calls):
    """Stands for executing notebook 02 or 05: one trained row whose value is PLANNED[notebook][seed], over the same
    test examples (half-width 0.05), with a check."""
    def runner(path, out_dir, timeout):
        seed, notebook = profiles.study_seed(), path.name[:2]
        calls.append((seed, notebook))
        value = PLANNED[notebook][seed]
        row = ledger.Claim(id="magnet.fig1.test", notebook=notebook, paper="000", where="Fig. 1",
                           claim="the method helps", paper_value="+", ours="x", low=value - 0.05, high=value + 0.05,
                           value=value, method="bootstrap", n=50, trained=True, quantity="gain", direction=1,
                           check="tests/test_study.py::test_x")
        cfg = profiles.current()
        ledger.record([row], notebook, cfg,
                      parameters=ledger.parameters(notebook, cfg, *ledger.notebook_settings(notebook, cfg)))
        return None
    return runner


def test_the_sequential_plan_stops_each_notebook_at_the_look_that_decides_it(workbook, load_script, capsys):
    """Looks after 3, 5 and 8 seeds: notebook 02's row is decided at the first look and gets no more seeds; notebook
    05's straddles at 3 seeds (t at the plan's 98.0% over 3 seeds is wide) and is decided at 5. Each look states its
    cost first; each notebook's rows say at which look they were computed, read at the plan's level."""
    from helpers.ledger import sequential

    study = load_script("study")
    paths = [workbook.root / "notebooks" / name for name in ("02_mntp_vs_mtp.ipynb", "05_mask_predict_ltd.ipynb")]
    calls = []
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_planned_notebook(calls)) == 0
    assert [seed for seed, notebook in calls if notebook == "02"] == [0, 1, 2]
    assert [seed for seed, notebook in calls if notebook == "05"] == [0, 1, 2, 3, 4]
    out = capsys.readouterr().out
    minutes = sequential.CPU_MINUTES_PER_SEED  # each look states its seeds' minutes before it runs
    assert f"[plan] look 1: seeds 0..2 of notebooks 02, 05; about {3 * (minutes['02'] + minutes['05']):.0f} min" in out
    assert f"[plan] look 2: seeds 3..4 of notebooks 05; about {2 * minutes['05']:.0f} min" in out
    rows = {row.notebook: row for row in ledger.read_rows(ledger.ledger_path())}
    assert rows["02"].n_seeds == 3 and rows["02"].verdict == "reproduced" and "look 1 of 3" in rows["02"].method
    assert rows["05"].n_seeds == 5 and rows["05"].verdict == "reproduced" and "look 2 of 3" in rows["05"].method
    assert "98.0%" in rows["05"].method
    assert ledger.provenance_problems() == []  # re-derived from the per-seed files under the recorded plan


def _never_run(path, out_dir, timeout):
    raise AssertionError(f"a rebuild ran {path.name}")


def test_a_rebuild_gathers_the_ledger_from_the_per_seed_files_alone(workbook, load_script, capsys):
    """What a fresh clone does with the committed per-seed claims files (make ledger): no notebook runs, no trained
    run is needed, and the ledger is the one the study gathered; with a seed's file gone the rebuild stops before that
    look and says which file a run would make."""
    import shutil

    from helpers.ledger import sequential

    study = load_script("study")
    paths = [workbook.root / "notebooks" / name for name in ("02_mntp_vs_mtp.ipynb", "05_mask_predict_ltd.ipynb")]
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_planned_notebook([])) == 0
    studied = ledger.read_rows(ledger.ledger_path())
    assert ledger.study_dir("cpu", 4) == workbook.root / "claims" / "study" / "cpu" / "seed-4"  # beside the ledger
    shutil.rmtree(workbook.root / "runs")  # a fresh clone: no trained runs, no combined claims files
    ledger.ledger_path().unlink()
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_never_run, rebuild=True) == 0
    assert ledger.read_rows(ledger.ledger_path()) == studied
    (ledger.study_dir("cpu", 4) / "05.json").unlink()
    capsys.readouterr()
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_never_run, rebuild=True) == 0
    assert "rebuild: notebook 05 stops before look 2; its claims files of seeds [4] are not all there, or were " \
        "computed by other code" in capsys.readouterr().out


def test_a_look_names_the_rows_a_longer_run_could_decide(load_script):
    """A study row on the contradicting side whose held-out curve still rises is no case for more seeds: the look names
    it as one a longer run could decide; the same row with a curve shown flat, or on the paper's side, is not named."""
    study = load_script("study")
    rising = ledger.curve("held-out accuracy", [(step, 0.03 * step) for step in range(0, 101, 5)])
    flat = ledger.curve("held-out accuracy", [(step, 0.0 if step == 0 else 60.0) for step in range(0, 101, 5)])
    row = dict(id="magnet.table1.test", notebook="03", paper="000", where="Table 1", claim="the method helps",
               paper_value="+", ours="x", method="bootstrap", n=50, trained=True, quantity="gain", direction=1,
               check="tests/test_study.py::t",
               value=-1.0, low=-1.5, high=-0.5, n_seeds=3, seed_values=(-1.1, -1.0, -0.9))
    moving = ledger.Claim(**row, plateau=rising)
    assert moving.verdict == "inconclusive"
    assert [row_id for row_id, _ in study._still_moving([moving])] == ["magnet.table1.test"]
    assert "a longer run, not more seeds" in study._still_moving([moving])[0][1]
    assert study._still_moving([ledger.Claim(**row, plateau=flat)]) == []  # shown stopped: not reproduced
    assert ledger.Claim(**row, plateau=flat).verdict == "not reproduced"
    assert study._still_moving([ledger.Claim(**{**row, "low": 0.5, "high": 1.5, "value": 1.0}, plateau=rising)]) == []


def test_a_seed_computed_by_other_code_runs_again(workbook, load_script):
    """Gathering refuses a seed computed at a commit whose code for the notebook differs from HEAD's, so the study
    does not keep such a seed's committed file: it runs it again (a change outside the notebook's code keeps it)."""
    study = load_script("study")
    notebook = workbook.root / "notebooks" / "02_mntp_vs_mtp.ipynb"
    calls = []
    assert study.study([notebook], [0, 1, 2], runner=_fake_notebook(calls)) == 0

    def commit(path, text):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        workbook.commit(path.name)

    commit(workbook.root / "scripts" / "other.py", "x = 1\n")  # not notebook 02's code
    calls.clear()
    assert study.study([notebook], [0, 1, 2], runner=_fake_notebook(calls)) == 0 and calls == []
    commit(workbook.root / "helpers" / "shared.py", "x = 1\n")  # a shared module: notebook 02's code changed
    assert study.study([notebook], [0, 1, 2], runner=_fake_notebook(calls)) == 0
    assert calls == [(0, notebook.name), (1, notebook.name), (2, notebook.name)]


def _examples_dominated_notebook(calls):
    """Stands for executing notebook 05: one trained row whose seeds agree (0.29-0.31) while its half-width over the
    test examples, 0.4 at the notebook's own examples, halves when an examples look scores twice as many."""
    def runner(path, out_dir, timeout):
        seed, scale = profiles.study_seed(), profiles.examples_scale()
        calls.append((seed, scale))
        value, half = (0.30, 0.31, 0.29)[seed], 0.4 / scale
        row = ledger.Claim(id="magnet.table6.test", notebook="05", paper="000", where="Table 6",
                           claim="the method helps", paper_value="+", ours="x", low=value - half, high=value + half,
                           value=value, method="bootstrap",
                           n=16 * scale, trained=True, quantity="gain", direction=1, check="tests/test_study.py::test_x")
        cfg = profiles.current()
        ledger.record([row], "05", cfg, parameters=ledger.parameters("05", cfg, *ledger.notebook_settings(
            "05", cfg, scale)))
        return None
    return runner


def test_an_examples_dominated_notebook_gets_an_examples_look_on_the_same_seeds(workbook, load_script, capsys):
    """Look 1 leaves notebook 05's row straddling zero with the examples' term dominant, so more seeds would barely
    narrow it: look 2 runs the same three seeds again at twice the test examples (WORKBOOK_EXAMPLES=2, their own
    per-seed files), no fourth seed, and decides it there, read at the plan's level. A rebuild from the per-seed files
    alone gives the same ledger."""
    import shutil

    from helpers.ledger import sequential

    study = load_script("study")
    paths = [workbook.root / "notebooks" / "05_mask_predict_ltd.ipynb"]
    calls = []
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_examples_dominated_notebook(calls)) == 0
    assert calls == [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]
    out = capsys.readouterr().out
    assert "[plan] look 1, notebook 05: examples; look 2: seeds 0..2 again at 2x the test examples" in out
    row = ledger.read_rows(ledger.ledger_path())[0]
    assert row.verdict == "reproduced" and row.n_seeds == 3 and row.low > 0
    assert "look 2 of 3 of a sequential plan, on 2x the test examples, read at 98.0%" in row.method
    assert (ledger.study_dir("cpu", 0, 2) / "05.json").exists()
    assert ledger.study_dir("cpu", 0, 2) == workbook.root / "claims" / "study" / "cpu" / "examples-x2" / "seed-0"
    assert ledger.provenance_problems() == []  # re-derived from both looks' per-seed files
    shutil.rmtree(workbook.root / "runs")
    ledger.ledger_path().unlink()
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_never_run, rebuild=True) == 0
    assert ledger.read_rows(ledger.ledger_path()) == [row]


def test_a_rebuild_rereads_the_looks_as_the_study_ran_them_whatever_todays_allocation_says(workbook, load_script,
                                                                                          capsys, monkeypatch):
    """The plan was fixed before the study: a rebuild under a later allocation rule (here one that would have given
    notebook 05 more seeds at look 2, whose files do not exist) still re-reads the examples look the study ran, from
    the committed ledger's recorded schedule, and gives the same rows."""
    from helpers.ledger import sequential

    study = load_script("study")
    paths = [workbook.root / "notebooks" / "05_mask_predict_ltd.ipynb"]
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_examples_dominated_notebook([])) == 0
    ran = ledger.read_rows(ledger.ledger_path())
    monkeypatch.setattr(sequential, "allocate", lambda states, plan=None, minutes=None: {n: "seeds" for n in states})
    capsys.readouterr()
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_never_run, rebuild=True) == 0
    assert "[plan] look 1, notebook 05: as run (seeds under today's allocation); look 2: seeds 0..2 again at 2x" in \
        capsys.readouterr().out
    assert ledger.read_rows(ledger.ledger_path()) == ran and "look 2 of 3" in ran[0].method


def test_a_study_asked_to_stop_after_a_look_stops_there_and_resumes_at_the_next(workbook, load_script, capsys):
    from helpers.ledger import sequential

    study = load_script("study")
    paths = [workbook.root / "notebooks" / name for name in ("02_mntp_vs_mtp.ipynb", "05_mask_predict_ltd.ipynb")]
    calls = []
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_planned_notebook(calls),
                                  through_look=1) == 0
    assert calls == [(0, "02"), (1, "02"), (2, "02"), (0, "05"), (1, "05"), (2, "05")]
    assert "stopping after look 1 as asked (--through-look 1); notebooks 05 go on to look 2" in capsys.readouterr().out
    assert {row.notebook: row.n_seeds for row in ledger.read_rows(ledger.ledger_path())} == {"02": 3, "05": 3}
    calls.clear()
    assert study.sequential_study(paths, sequential.SequentialPlan(), runner=_planned_notebook(calls)) == 0
    assert calls == [(3, "05"), (4, "05")]  # the finished seeds are kept
    assert {row.notebook: row.n_seeds for row in ledger.read_rows(ledger.ledger_path())} == {"02": 3, "05": 5}


def test_a_notebook_whose_runs_stop_at_a_prefix_records_it_first_and_a_reproduce_run_is_compared_at_it(
        workbook, load_script, monkeypatch, capsys):
    """Notebook 04's taggers stop at a prefix (make reproduce trains a quarter of their steps): each study seed runs
    the prefix first (its best weights kept for the full run to extend), writing claims/study/cpu/prefix-4/, then the
    full length, which alone makes the ledger's rows; a resumed study runs neither again. A make reproduce run at the
    prefix is compared with the study's seeds at the same prefix (inside), never with the full-length seeds (it
    would lie outside them), and is not gathered."""
    study = load_script("study")
    notebook = workbook.root / "notebooks" / "04_sequence_repetition.ipynb"
    calls = []

    def row_at(value):
        return ledger.Claim(id="sr.fig2.test", notebook="04", paper="003", where="Fig. 2", claim="r=1 beats r=0",
                            paper_value="+", ours="x", low=value - 1.0, high=value + 1.0, value=value,
                            method="bootstrap", n=10, trained=True, quantity="F1 difference")

    def record(value, prefix):
        cfg = profiles.current()
        ledger.record([row_at(value)], "04", cfg,
                      parameters=ledger.parameters("04", cfg, *ledger.notebook_settings("04", cfg, prefix=prefix)))

    def runner(path, out_dir, timeout):
        seed, prefix = profiles.study_seed(), profiles.prefix_divisor()
        calls.append((seed, prefix))
        record(seed + (0.0 if prefix == 1 else 10.0), prefix)  # the prefix reads other values than the full run
        return None

    assert study.study([notebook], [0, 1, 2], runner=runner) == 0
    assert calls == [(0, 4), (0, 1), (1, 4), (1, 1), (2, 4), (2, 1)]
    assert (workbook.root / "claims" / "study" / "cpu" / "prefix-4" / "seed-2" / "04.json").exists()
    full, = [row for row in ledger.read_rows(ledger.ledger_path()) if row.notebook == "04"]
    assert full.seed_values == (0.0, 1.0, 2.0)
    calls.clear()
    assert study.study([notebook], [0, 1, 2], runner=runner) == 0 and calls == []
    monkeypatch.setenv(profiles.PREFIX_VAR, "4")
    record(11.0, 4)
    capsys.readouterr()
    rows = ledger.gather()
    out = capsys.readouterr().out
    assert "a prefix run (each trained run at 1/4 of its length" in out
    assert "11 inside the study's 95% prediction interval for a new seed [6.03, 15.97] (3 seeds at 1/4 of the " \
        "trained runs' lengths)" in out
    assert [row for row in rows if row.notebook == "04"] == [full]


def test_a_study_of_notebook_02_that_would_strand_notebooks_on_its_old_adapter_is_refused_before_it_runs(
        workbook, load_script, monkeypatch, capsys):
    """Notebook 05's rows in the committed ledger rest on an MNTP adapter that notebook 02 no longer trains (its key
    changed): a study of 02 alone would end in a gather that refuses 05, so it is refused before any notebook runs,
    naming 05 and the notebooks to study together; with 05 in the study, or 05 resting on the adapter 02 trains now,
    nothing is in the way."""
    from helpers import store
    from helpers.ledger import sequential
    from helpers.mntp_adapter import masked_lm_run_key

    study = load_script("study")
    notebook = workbook.root / "notebooks" / "02_mntp_vs_mtp.ipynb"
    trains = store.fingerprint(masked_lm_run_key(profiles.get("cpu").replace(seed=0), "mntp"))
    resting = {"fingerprint": "0123456789ab", "source": "notebook 02"}
    monkeypatch.setattr(ledger, "read_provenance", lambda: {"05": {"seeds": [0], "mntp_adapter": resting}})
    calls = []
    assert study.study([notebook], [0], runner=_fake_notebook(calls)) == 2
    assert study.sequential_study([notebook], sequential.SequentialPlan(), runner=_fake_notebook(calls)) == 2
    assert calls == [] and not ledger.ledger_path().exists()
    err = capsys.readouterr().err
    assert "not started: notebook 02's MNTP adapter would change under notebooks 05" in err
    assert "STUDY_NOTEBOOKS naming notebooks 02, 05" in err
    assert study.adapter_dependents_left_out(["02", "05"], [0]) == []
    assert study.adapter_dependents_left_out(["05"], [0]) == []  # notebook 02 is not rerun
    resting["fingerprint"] = trains  # 05 already rests on the adapter 02 trains now
    assert study.adapter_dependents_left_out(["02"], [0]) == []
    assert study.study([notebook], [0, 1, 2], runner=_fake_notebook(calls)) == 0
    assert calls == [(seed, notebook.name) for seed in (0, 1, 2)]
