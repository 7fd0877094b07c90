"""Point every notebook's Colab install cell at one commit: ``python scripts/pin_colab_commit.py [COMMIT]``.

The install cell pip-installs ``mlm-workbook @ git+...@WORKBOOK_COMMIT``, so a notebook opened from the badge runs
the helpers it was written with, not whatever ``main`` holds later. COMMIT defaults to ``git rev-parse HEAD``; it
must be pushed to GitHub. Run it after the helpers change and commit the notebooks: the pinning commit touches
notebooks only, so the helpers at COMMIT are the helpers the notebooks are committed with.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PIN = re.compile(r'^WORKBOOK_COMMIT = "[0-9a-f]{7,40}"', re.MULTILINE)


def pin(commit: str, notebooks: Path = NOTEBOOKS) -> list[Path]:
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ValueError(f"commit={commit!r} is not a full 40-character commit hash")
    changed = []
    for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        notebook = json.loads(path.read_text())
        cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code" and PIN.search("".join(cell["source"]))]
        if len(cells) != 1:
            raise ValueError(f"{path.name} has {len(cells)} cells with a WORKBOOK_COMMIT line; expected one")
        source = PIN.sub(f'WORKBOOK_COMMIT = "{commit}"', "".join(cells[0]["source"]))
        cells[0]["source"] = source.splitlines(keepends=True)
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
        changed.append(path)
    return changed


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
    for path in pin(target):
        print(f"{path.name}: WORKBOOK_COMMIT = {target}")
