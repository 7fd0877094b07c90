"""scripts/reproduce.py (``make reproduce``): a notebook that fails is named, the ones that finished are gathered,
and the run exits non-zero; executed copies go under the workbook root, not the script's checkout."""
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers import claims

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
    (root / "README.md").write_text(f"before\n{claims.README_BEGIN}\n{claims.README_END}\nafter\n")
    row = ("from helpers import claims\n"
           "claims.record([claims.Claim(notebook='01', paper='001', where='Fig. 1', claim='a claim', paper_value='1',"
           " ours='1', low=None, high=None, method='exact', n=None, kind=claims.DEFINITION, holds=True)], notebook='01',"
           " profile='cpu')")
    good = _notebook(root / "notebooks" / "01_good.ipynb", row)
    bad = _notebook(root / "notebooks" / "02_bad.ipynb", "raise RuntimeError('this notebook breaks')")
    env = {**os.environ, "WORKBOOK_ROOT": str(root), "WORKBOOK_PROFILE": "cpu"}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), str(good), str(bad)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "01_good.ipynb: " in result.stdout and "FAILED" not in result.stdout.split("01_good.ipynb: ")[1].split("\n")[0], \
        result.stdout + result.stderr
    assert "02_bad.ipynb: RuntimeError: this notebook breaks" in result.stderr
    ledger = json.loads((root / "claims" / "ledger_cpu.json").read_text())
    assert [row["notebook"] for row in ledger["claims"]] == ["01"]  # the finished notebook was gathered
    assert "1 rows from notebooks 01" in (root / "README.md").read_text()
    executed = root / "runs" / "notebooks"
    assert sorted(path.name for path in executed.iterdir()) == ["01_good.ipynb", "02_bad.ipynb"]
    failed_copy = nbformat.read(executed / "02_bad.ipynb", as_version=4)
    assert failed_copy.cells[0].outputs[0]["ename"] == "RuntimeError"  # the record of the failure is kept
    assert not (ROOT / "runs" / "notebooks" / "02_bad.ipynb").exists()


def _reproduce_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "scripts" / "reproduce.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_notebook_starts_only_after_the_notebooks_it_reads():
    reproduce = _reproduce_module()
    paths = [Path(f"/n/{name}.ipynb") for name in ("02_a", "03_b", "04_c")]
    needs = {"03": ("02",)}
    assert reproduce.next_ready(paths[1:], set(), {"02", "03", "04"}, needs) == paths[2]  # 03 waits for 02
    assert reproduce.next_ready(paths[1:], {"02"}, {"02", "03", "04"}, needs) == paths[1]
    assert reproduce.next_ready(paths[1:2], set(), {"03"}, needs) == paths[1]  # 02 not chosen: nothing to wait for
    assert reproduce.next_ready(paths[1:2], set(), {"02", "03"}, needs) is None
    everything = [Path(f"/n/{name}.ipynb") for name in ("01_a", "02_b", "03_c", "04_d", "05_e", "06_f")]
    chosen = {path.name[:2] for path in everything}
    needs = {"03": ("02",), "05": ("02",), "06": ("02",)}
    assert reproduce.next_ready(everything, set(), chosen, needs) == everything[1]  # what three others need
    assert reproduce.next_ready(everything[:1] + everything[3:], {"02"}, chosen, needs) == everything[5]  # longest
    assert reproduce.next_ready(everything[:1] + everything[3:], {"02"}, chosen, needs,
                                longest_first=False) == everything[0]  # one at a time: the order given


def _recording_cell(log: Path, label: str, seconds: float) -> str:
    return (f"import json, os, time\nstarted = time.time()\ntime.sleep({seconds})\n"
            f"with open({str(log)!r}, 'a') as f:\n"
            f"    f.write(json.dumps({{'cell': {label!r}, 'start': started, 'end': time.time(), "
            "'threads': os.environ.get('OMP_NUM_THREADS'), 'timing': os.environ.get('WORKBOOK_TIMING_THREADS')}) + '\\n')")


@pytest.mark.slow
def test_notebooks_side_by_side_share_the_cores_and_a_timing_cell_runs_alone(tmp_path):
    """Two lanes: notebooks 01 and 02 overlap; 01's cell tagged ``timing`` overlaps no other cell; 03 (which reads
    02) starts after 02 has ended; every kernel got its share of the threads and the timing count."""
    root = tmp_path / "workbook"
    (root / "notebooks").mkdir(parents=True)
    (root / "helpers").mkdir()
    (root / "pyproject.toml").touch()
    log = tmp_path / "cells.jsonl"

    def notebook(name, cells):
        node = nbformat.v4.new_notebook()
        node.cells = [nbformat.v4.new_code_cell(_recording_cell(log, f"{name}:{index}", seconds))
                      for index, (seconds, _) in enumerate(cells)]
        for cell, (_, tags) in zip(node.cells, cells):
            cell.metadata["tags"] = list(tags)
        node.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        path = root / "notebooks" / f"{name}.ipynb"
        nbformat.write(node, path)
        return path

    paths = [notebook("01_first", [(1.5, ()), (1.0, ("timing",)), (0.2, ())]),
             notebook("02_second", [(0.6, ())] * 5),
             notebook("03_third", [(0.2, ())])]
    env = {**os.environ, "WORKBOOK_ROOT": str(root), "WORKBOOK_PROFILE": "smoke"}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), "--jobs", "2", *map(str, paths)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    cells = {row["cell"]: row for row in map(json.loads, log.read_text().splitlines())}
    assert len(cells) == 9

    def overlap(a, b):
        return min(a["end"], b["end"]) - max(a["start"], b["start"]) > 0

    timing = cells["01_first:1"]
    assert not any(overlap(timing, row) for name, row in cells.items() if name != "01_first:1")
    assert overlap(cells["01_first:0"], cells["02_second:0"])  # side by side
    assert cells["03_third:0"]["start"] >= max(row["end"] for name, row in cells.items() if name.startswith("02"))
    import torch

    cores = torch.get_num_threads()
    assert {row["threads"] for row in cells.values()} == {str(max(1, cores // 2))}
    assert {row["timing"] for row in cells.values()} == {str(cores)}
    assert "2 notebook(s) at a time" in result.stdout


# The helpers a notebook calls to time something (each times through helpers.metrics.interleaved_timings).
TIMED_CALLS = {"measure_speedups": "sequence_repetition/experiment_table2.py", "decoding_speed": "openltg/experiment.py",
               "measure_latency": "emat/experiment.py", "cache_speed": "diffusion/experiment.py"}


def test_every_cell_that_times_something_is_tagged_timing_and_no_other():
    """``make reproduce`` runs a cell alone only when it carries the tag: a timing cell without it would be timed on
    cores another notebook is using."""
    for name, module in TIMED_CALLS.items():
        source = (ROOT / "helpers" / "papers" / module).read_text()
        assert f"def {name}(" in source and "interleaved_timings" in source, (name, module)
    tagged = 0
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "code":
                continue
            times = any(f"{name}(" in cell.source for name in TIMED_CALLS)
            assert times == ("timing" in cell.metadata.get("tags", [])), f"{path.name} cell {index}"
            tagged += times
    assert tagged == 4


@pytest.mark.slow
def test_ctrl_c_ends_the_running_notebooks_kernels_and_keeps_their_executed_copies(tmp_path):
    """Kernels run in sessions of their own, so Ctrl-C reaches only the executor: it must end them itself."""
    import signal
    import time

    root = tmp_path / "workbook"
    (root / "notebooks").mkdir(parents=True)
    (root / "helpers").mkdir()
    (root / "pyproject.toml").touch()
    paths = []
    for name in ("02_a", "04_b"):
        pid_file = tmp_path / f"{name}.pid"
        paths.append(_notebook(root / "notebooks" / f"{name}.ipynb",
                               f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                               "for _ in range(600): time.sleep(0.1)"))
    env = {**os.environ, "WORKBOOK_ROOT": str(root), "WORKBOOK_PROFILE": "smoke"}
    process = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "reproduce.py"), "--jobs", "2", *map(str, paths)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    pid_files = [tmp_path / "02_a.pid", tmp_path / "04_b.pid"]
    deadline = time.time() + 120
    while not all(path.exists() and path.read_text() for path in pid_files) and time.time() < deadline:
        time.sleep(0.2)
    kernels = [int(path.read_text()) for path in pid_files]
    os.killpg(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 130, output
    assert "interrupted: ending" in output
    time.sleep(1)
    for pid in kernels:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert sorted(path.name for path in (root / "runs" / "notebooks").iterdir()) == ["02_a.ipynb", "04_b.ipynb"]
