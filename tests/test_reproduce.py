"""scripts/reproduce.py (``make reproduce``): a notebook that fails is named, the ones that finished are gathered,
and the run exits non-zero; executed copies go under the workbook root, not the script's checkout."""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers import ledger

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, source: str) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    return path


@pytest.mark.slow
def test_a_failed_notebook_is_named_the_finished_ones_gathered_and_the_run_exits_1(tmp_path):
    root = tmp_path / "workbook"
    (root / "notebooks").mkdir(parents=True)
    (root / "helpers").mkdir()
    (root / "pyproject.toml").touch()
    (root / "docs").mkdir()
    (root / "docs" / "claims.md").write_text(f"before\n{ledger.CLAIMS_BEGIN}\n{ledger.CLAIMS_END}\nafter\n")
    (root / "README.md").write_text(f"before\n{ledger.HEADLINE_BEGIN}\n{ledger.HEADLINE_END}\nafter\n")
    for arguments in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "workbook"]):  # claims name a commit
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *arguments],
                       cwd=root, check=True, capture_output=True)
    row = ("from helpers import ledger, profiles\n"
           "ledger.record([ledger.Claim(id='lecture.fig1.claim', notebook='01', paper='001', where='Fig. 1',"
           " claim='a claim', paper_value='1', ours='1', low=None, high=None, method='exact', n=None,"
           " kind=ledger.DEFINITION, holds=True)], notebook='01', profile='cpu',"
           " parameters=ledger.parameters('01', profiles.get('cpu'), *ledger.notebook_settings('01', 'cpu')))")
    good = _notebook(root / "notebooks" / "01_good.ipynb", row)
    bad = _notebook(root / "notebooks" / "02_bad.ipynb", "raise RuntimeError('this notebook breaks')")
    env = {**os.environ, "WORKBOOK_ROOT": str(root), "WORKBOOK_PROFILE": "cpu"}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), str(good), str(bad)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "01_good.ipynb: " in result.stdout and "FAILED" not in result.stdout.split("01_good.ipynb: ")[1].split("\n")[0], \
        result.stdout + result.stderr
    assert "02_bad.ipynb: RuntimeError: this notebook breaks" in result.stderr
    committed = json.loads((root / "claims" / "ledger_cpu.json").read_text())
    assert [row["notebook"] for row in committed["claims"]] == ["01"]  # the finished notebook was gathered
    assert "1 rows from notebooks 01" in (root / "docs" / "claims.md").read_text()
    assert "| Lecture | 01 | — | — | 1 / 0 | 0 |" in (root / "README.md").read_text()
    executed = root / "runs" / "notebooks"
    assert sorted(path.name for path in executed.iterdir()) == ["01_good.ipynb", "02_bad.ipynb"]
    failed_copy = nbformat.read(executed / "02_bad.ipynb", as_version=4)
    assert failed_copy.cells[0].outputs[0]["ename"] == "RuntimeError"  # the record of the failure is kept
    assert not (ROOT / "runs" / "notebooks" / "02_bad.ipynb").exists()
    costs = result.stdout.split("costliest cells")[1]  # every notebook's cells, the failed one's too
    assert "01_good.ipynb cell 0: from helpers import ledger" in costs and "02_bad.ipynb cell 0: raise RuntimeError" in costs


def test_costliest_cells_reads_the_kernels_timestamps_longest_first_and_skips_untimed_cells(load_script):
    notebook = nbformat.v4.new_notebook()
    stamps = {"quick": ("2026-11-27T01:00:00.000000Z", "2026-11-27T01:00:01.500000Z"),
              "slow": ("2026-11-27T01:00:02.000000Z", "2026-11-27T01:02:02.250000Z"),  # crosses a minute: 120.25 s
              "middle": ("2026-11-27T01:03:00.000000Z", "2026-11-27T01:03:30.000000Z")}
    for name, (began, ended) in stamps.items():
        cell = nbformat.v4.new_code_cell(f"\n# the {name} cell\nx = 1")
        cell.metadata["execution"] = {"iopub.execute_input": began, "shell.execute_reply": ended}
        notebook.cells.append(cell)
    notebook.cells.append(nbformat.v4.new_code_cell("never_run()"))  # no timestamps: left out
    notebook.cells.append(nbformat.v4.new_markdown_cell("# a heading"))
    costliest_cells = load_script("reproduce").costliest_cells
    assert costliest_cells(notebook, top=2) == [(120.25, 1, "# the slow cell"), (30.0, 2, "# the middle cell")]
    assert [index for _, index, _ in costliest_cells(notebook, top=10)] == [1, 2, 0]


def test_a_failed_write_of_an_executed_copy_is_that_notebooks_failure_and_the_run_goes_on(tmp_path, monkeypatch,
                                                                                         capsys, load_script):
    """A full disk while writing 02's executed copy: 02 is reported failed (naming the file and what is intact),
    03 still runs, the times and costliest cells are printed, and the finished notebooks are gathered."""
    import errno

    from helpers import store

    module = load_script("reproduce")
    ran, gathered = [], []

    class Kernel:  # stands in for nbclient: "executes" a notebook without a kernel
        interrupted = False

        def __init__(self, notebook, **options):
            self.notebook = notebook

        def execute(self):
            ran.append(self.notebook.cells[0].source)

    real_write = store.write_text

    def write_text(path, text):
        if Path(path).name.startswith("02_"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(path, text)

    monkeypatch.setattr(module, "InterruptibleClient", Kernel)
    monkeypatch.setattr(store, "write_text", write_text)
    monkeypatch.setattr(ledger, "gather", lambda notebooks: gathered.extend(notebooks) or [])
    monkeypatch.setattr(ledger, "headline", lambda rows: "headline")
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    monkeypatch.setenv("WORKBOOK_PROFILE", "cpu")
    monkeypatch.delenv("WORKBOOK_DTYPE", raising=False)
    (tmp_path / "notebooks").mkdir()
    notebooks = [_notebook(tmp_path / "notebooks" / f"0{n}_x.ipynb", f"x = {n}") for n in (1, 2, 3)]
    assert module.run(notebooks) == 1
    out, err = capsys.readouterr()
    assert ran == ["x = 1", "x = 2", "x = 3"]  # the notebook after the failed write ran
    copy = tmp_path / "runs" / "notebooks" / "02_x.ipynb"
    assert (f"02_x.ipynb: its executed copy was not saved: [Errno {errno.ENOSPC}] could not write {copy} (No space "
            "left on device); the notebook itself ran") in err
    assert "02_x.ipynb  FAILED" in out.split("notebook times:")[1] and "costliest cells" in out
    assert gathered == ["01", "03"]  # the gather ran, without the failed notebook
    assert sorted(path.name for path in copy.parent.iterdir()) == ["01_x.ipynb", "03_x.ipynb"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_stops_the_run_ends_the_kernel_names_what_finished_and_exits_130(tmp_path, process_alive):
    """Ctrl-C in the terminal: SIGINT to the script's process group (the kernel runs in its own session, so only
    the script gets it) while notebook 02 sleeps. The run stops within seconds with exit status 130, 02's kernel is
    gone, 03 never runs, the report names 01 as finished, and nothing is gathered."""
    import signal
    import time

    root = tmp_path / "workbook"
    (root / "notebooks").mkdir(parents=True)
    (root / "helpers").mkdir()
    (root / "pyproject.toml").touch()
    pid_file = tmp_path / "kernel.pid"
    notebooks = [_notebook(root / "notebooks" / "01_quick.ipynb", "x = 1"),
                 _notebook(root / "notebooks" / "02_sleeps.ipynb",
                           f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)"),
                 _notebook(root / "notebooks" / "03_never.ipynb", f"open({str(tmp_path / 'ran')!r}, 'w')")]
    env = {**os.environ, "WORKBOOK_ROOT": str(root), "WORKBOOK_PROFILE": "cpu"}
    run = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "reproduce.py"), *map(str, notebooks)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not (pid_file.exists() and pid_file.read_text()) and time.time() < deadline:
            time.sleep(0.1)
        kernel = int(pid_file.read_text())
        assert process_alive(kernel)
        interrupted = time.time()
        os.killpg(run.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        out, err = run.communicate(timeout=30)
        stopped = time.time() - interrupted
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 130 and stopped < 10, (run.returncode, stopped, out, err)
    deadline = time.time() + 5
    while process_alive(kernel) and time.time() < deadline:
        time.sleep(0.1)
    assert not process_alive(kernel), "the interrupted notebook's kernel outlived the run"
    assert "interrupted during 02_sleeps.ipynb" in err and "FAILED" not in out + err
    assert "finished: 01_quick.ipynb; not run: 03_never.ipynb" in err
    assert "running 03_never.ipynb" not in out and not (tmp_path / "ran").exists()
    assert not (root / "claims").exists()  # nothing gathered
    assert (root / "runs" / "notebooks" / "02_sleeps.ipynb").exists()  # the interrupted copy is kept
