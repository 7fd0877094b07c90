"""Two jobs side by side (one torch thread each) against one after the other (two threads each) on this CPU.

``make reproduce`` runs the notebooks one after the other, each with every core. On a 2-core machine the other
way to spend the cores is two notebooks at once, one thread each. This prints what that would buy on the embedded
SmolLM2-135M in float32, for the two kinds of work the cpu profile's notebooks spend their time on:

- a LoRA training step (r = 16 on every projection, AdamW, a batch of 4 x 128 tokens): MNTP, MAGNET, the taggers;
- a forward pass of 32 x 128 tokens without gradients: held-out curves, probes' features, span NLL, generation.

Each job runs in its own process (a thread count is fixed per process): first one process with two threads, then
two processes with one thread each at the same time, then one process with one thread alone. The ratio printed is
the work two side-by-side processes finish per second over the work one two-thread process finishes per second.
A step's time is the median of ``--steps`` steps after one untimed step.

    python benchmarks/cpu_side_by_side.py [--steps 5]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from cpu_precision import WORKS as PRECISION_WORKS, jobs_for  # this directory: the jobs, timed there in two dtypes

ROOT = Path(__file__).resolve().parents[1]
WORKS = dict(zip(("train", "forward"), PRECISION_WORKS[:2]))  # --job name: cpu_precision's training step and forward


def job(work: str, threads: int, steps: int) -> float:
    """Median seconds per step of ``work`` in this process with ``threads`` torch threads: the float32 job of
    ``benchmarks/cpu_precision.py`` (the same model, LoRA, optimizer and batches)."""
    torch.set_num_threads(threads)
    step = jobs_for(torch.float32)[WORKS[work]]
    step(None)  # untimed: first-call allocations
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step(None)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def _spawn(work: str, threads: int, steps: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--job", work, "--threads", str(threads), "--steps", str(steps)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)


def _seconds(process: subprocess.Popen) -> float:
    out, _ = process.communicate()
    if process.returncode:
        raise RuntimeError(f"a benchmark process exited with {process.returncode}; run it alone to see why: "
                           f"{' '.join(process.args)}")
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--job", choices=sorted(WORKS), help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps={args.steps} must be >= 1")
    if args.job:  # a child: print its median step time
        print(f"{job(args.job, args.threads, args.steps):.6f}")
        return
    print(f"{'work':36s} {'2 threads s':>12s} {'1 thread s':>11s} {'side by side s':>15s} {'side by side / one':>19s}")
    for work, label in WORKS.items():
        together = _seconds(_spawn(work, 2, args.steps))
        pair = [_spawn(work, 1, args.steps) for _ in range(2)]
        side_by_side = max(_seconds(process) for process in pair)
        alone = _seconds(_spawn(work, 1, args.steps))
        print(f"{label:36s} {together:12.3f} {alone:11.3f} {side_by_side:15.3f} {2 * together / side_by_side:18.2f}x")
    print("side by side / one > 1: two one-thread processes finish more work per second than one two-thread process")


if __name__ == "__main__":
    main()
