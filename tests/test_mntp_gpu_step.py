"""benchmarks/mntp_gpu_step.py at a tiny shape on CPU: its configurations accumulate as documented, and its fast
bidirectional path (sdpa with ``is_causal=False`` and no mask tensor) computes what the rendered 4D mask computes, so a
speed it reports is a speed of the same step."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def _benchmark():
    spec = importlib.util.spec_from_file_location("mntp_gpu_step", ROOT / "benchmarks" / "mntp_gpu_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configurations_accumulate_in_their_documented_order():
    bench = _benchmark()
    assert bench.switches_of("today") == bench.CONFIGS["today"]
    compiled = bench.switches_of("compiled")
    assert compiled == {"autocast": True, "mask": "none", "dropout": 0.0, "fused": True, "compiled": True, "batch": 32}
    assert bench.switches_of("no-mask")["dropout"] == 0.05 and not bench.switches_of("no-mask")["fused"]


def test_the_no_mask_path_is_bidirectional_attention_and_a_causal_one_would_be_caught():
    bench = _benchmark()
    device = torch.device("cpu")
    today = bench.Step(bench.switches_of("today"), bench.TINY, 32, device)
    fast = bench.Step(bench.switches_of("no-mask"), bench.TINY, 32, device)
    with torch.no_grad():
        rendered, unmasked = today.hidden(), fast.hidden()
        # the planted break: sdpa's default for a decoder without a mask is causal attention
        causal = fast.body(input_ids=fast.batch["input_ids"], attention_mask=None, position_ids=fast.positions,
                           use_cache=False).last_hidden_state
    assert torch.allclose(rendered, unmasked, atol=1e-5)
    assert (rendered - causal).abs().max() > 1e-2


def test_the_benchmark_runs_and_records_its_rows(tmp_path):
    out = tmp_path / "mfu.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mntp_gpu_step.py"), "--tiny", "--configs",
                           "today", "no-mask", "--steps", "1", "--warmup", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [row["config"] for row in rows] == ["today", "no-mask"]
    assert rows[1]["hidden_max_abs_diff_vs_today"] < 1e-5 and all(row["tokens_per_s"] > 0 for row in rows)
    assert "profile of today" in done.stdout
