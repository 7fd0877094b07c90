"""scripts/gpu_run.py on a machine without CUDA (--tiny): a notebook under the reproduce executor and notebook 02's
training step in bf16 and in fp16 with the gradient scaler, each with its time, peak and estimate, into JSON and
markdown. Kept to about a minute: one notebook on the smoke profile's own tiny model, one training notebook."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from helpers import memory

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_script_runs_its_steps_on_cpu_and_records_them(tmp_path, load_script):
    out = tmp_path / "cpu-run"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_run.py"), "--tiny", "--notebooks", "01",
                           "--steps", "02", "--precisions", "bf16", "fp16", "nf4", "--model", "tiny-random:llama",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[gpu_run] installed: nothing" in done.stdout  # this machine has every package
    result = json.loads((out / "gpu_run.json").read_text())
    assert result["installed"] == [] and result["tiny"] and result["device"].startswith("cpu")
    [notebook] = result["notebooks"]
    assert notebook["passed"] and notebook["name"].startswith("01_") and notebook["seconds"] > 0
    assert notebook["peak_kind"] == "rss" and notebook["peak_bytes"] > 100 * 2 ** 20  # the kernel's own peak
    assert notebook["estimate_bytes"] is None  # helpers.memory models the training notebooks only
    assert [(row["notebook"], row["precision"]) for row in result["steps"]] == [("02", "bf16"), ("02", "fp16")]
    bf16, fp16 = result["steps"]
    assert bf16["passed"] and fp16["passed"] and bf16["scale"] is None and fp16["scale"] > 0  # the scaler ran
    assert "GradScaler" in fp16["precision_used"] and bf16["peak_kind"] == "rss" and bf16["step_seconds"] > 0
    assert any("nf4 not run" in note for note in result["notes"])  # 4-bit needs bitsandbytes with CUDA
    script = load_script("gpu_run")  # the script's own workload and the estimate it sets beside the peak
    work, _ = script.step_workload("02", tiny=True)
    found = memory.estimate(dataclasses.replace(work, resident_models=0), dtype_bytes=2)
    assert bf16["estimate_bytes"] == found.total - found.overhead and bf16["micro_batch"] == "2 x 64"
    table = (out / "gpu_run.md").read_text()
    assert any("fp16 path" in note for note in result["notes"])  # the T4 path is a CUDA path
    assert "| 01 | bf16 | pass |" in table and "| 02 | fp16 autocast, fp16 weights, GradScaler | pass |" in table
