"""One out-of-order rule for every notebook: run notebooks 02-07 cell by cell (smoke profile), edit one setting in
the parameters cell (the profile's seed, which is the study seed) and rerun it, then rerun only the summary: the
summary refuses, in one line, to record claims computed under other parameters, and the claims file is left as it
was; a figure that shows an earlier cell's results is refused the same way. One kernel per notebook; about 30 s to 90 s each on 2 cores."""
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from helpers import ledger

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/0[2-7]_*.ipynb"))
EDIT = ("cfg = profiles.current()\n", "cfg = profiles.current()\ncfg = cfg.replace(seed=cfg.seed + 1)  # edited\n")


def _parameters_cell(notebook) -> int:
    found = [index for index, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", [])]
    assert len(found) == 1, "a notebook has one cell tagged 'parameters'"
    return found[0]


def _summary_cell(notebook) -> int:
    return [index for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and "ledger.record(" in cell.source][-1]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.name[:2] for path in NOTEBOOKS])
def test_a_summary_rerun_after_the_parameters_cell_changed_is_refused(path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_PROFILE", "smoke")
    monkeypatch.setenv("WORKBOOK_ROOT", str(ROOT))
    monkeypatch.delenv("WORKBOOK_SEED", raising=False)
    monkeypatch.delenv("WORKBOOK_DTYPE", raising=False)
    notebook = nbformat.read(path, as_version=4)
    number, parameters, summary = path.name[:2], _parameters_cell(notebook), _summary_cell(notebook)
    cell = notebook.cells[parameters]
    assert cell.source.count(EDIT[0]) == 1 and f'ledger.parameters("{number}", cfg' in cell.source, \
        f"notebook {number}'s parameters cell reads the profile once and registers its parameters"
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        for index, each in enumerate(notebook.cells):  # the whole notebook, in order: it records its claims
            if each.cell_type == "code":
                client.execute_cell(each, index)
        written = ledger.claims_dir("smoke") / f"{number}.json"
        before = written.read_text()
        cell.source = cell.source.replace(*EDIT)  # one setting edited, the parameters cell rerun ...
        client.execute_cell(cell, parameters)
        with pytest.raises(CellExecutionError):  # ... and only the summary
            client.execute_cell(notebook.cells[summary], summary)
        figure = nbformat.v4.new_code_cell(  # a figure of the first cell's results, as the notebook's figures draw them
            "import matplotlib.pyplot as plt\nfrom helpers import plots as _plots\nfrom helpers.ledger import notebook as _kernel\n"
            f"_plots.save_figure(plt.figure(), '{number}_out_of_order', shows=list(_kernel._COMPUTED['{number}'])[:1])")
        with pytest.raises(CellExecutionError):
            client.execute_cell(figure, len(notebook.cells))
    error, = [output for output in notebook.cells[summary].outputs if output.output_type == "error"]
    assert error.ename == "StaleResultsError"
    line, = error.traceback  # one line, no traceback
    refused = (f"claims not recorded: notebook {number}: the results of ",  # or, before it, the summary's figure
               f"figure {number}_")
    assert line.startswith(refused) and ("computed under other parameters than the parameters cell now holds" in line
                                         or "were computed under other parameters" in line), line
    assert written.read_text() == before  # nothing recorded
    shown, = [output for output in figure.outputs if output.output_type == "error"]
    assert shown.ename == "StaleResultsError"
    assert shown.traceback[0].startswith(f"figure {number}_out_of_order not saved: notebook {number}: it shows the "
                                         "results of "), shown.traceback
