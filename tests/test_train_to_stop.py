"""scripts/train_to_stop.py at smoke sizes: each round extends the same run folder (no retraining), the curve is
judged after every round, and a curve that reached its cap is reported capped, never stopped."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_rounds_extend_one_run_and_a_capped_curve_says_so(tmp_path):
    (tmp_path / "runs").mkdir()
    out = tmp_path / "rounds.json"
    env = {**os.environ, "WORKBOOK_ROOT": str(tmp_path), "WORKBOOK_CACHE": str(ROOT / "data" / "cache"),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_to_stop.py"), "mntp", "--profile", "smoke",
                           "--cap-steps", "8", "--json", str(out)], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rounds = json.loads(out.read_text())
    assert [entry["steps"] for entry in rounds] == [4, 8]
    assert rounds[1]["points"][:len(rounds[0]["points"])] == rounds[0]["points"]  # the first round is its prefix
    folders = list((tmp_path / "runs").glob("02_mntp_smoke_*"))
    assert len(folders) == 1  # one folder: the second round continued the first
    assert sorted(p.name for p in (folders[0] / "checkpoint").glob("adapter-at-*")) == ["adapter-at-4.pt",
                                                                                      "adapter-at-8.pt"]
    assert not any(entry["stopped"] for entry in rounds)
    assert "reached its cap at 8 steps" in done.stdout and "without a shown stop" in done.stdout


def test_a_cap_below_the_recipe_is_refused_by_name(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_to_stop.py"), "mntp", "--profile", "smoke",
                           "--cap-steps", "1"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "WORKBOOK_ROOT": str(tmp_path), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "--cap-steps 1" in done.stderr
