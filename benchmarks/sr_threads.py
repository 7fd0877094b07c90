"""Notebook 04's training runs on a 2-core CPU: two processes of one torch thread, or one process of two threads?

Trains the same pair of short SR runs (silver chunks, the cpu profile's settings, ``--steps`` steps, seeds 5 and
29) both ways: the two runs in parallel processes with 1 thread each (``workers=2, threads=1``), and one after the
other in one process with 2 threads (``workers=1, threads=2``). Prints the wall time of each layout and their
ratio, measured in one run (say whether the machine was loaded), and checks both layouts gave the same F1.

    python benchmarks/sr_threads.py [--steps 10] [--r 1]
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

from helpers import models, paths, profiles
from helpers.papers.sequence_repetition import SETTINGS, Strategy, experiment_data, run_experiments


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--r", type=int, default=1)
    arguments = parser.parse_args()
    cfg = profiles.get("cpu")
    base = SETTINGS["cpu"].with_training(steps=arguments.steps, eval_every=0)
    _, tokenizer = models.load_model(cfg.model_name)
    tagging = experiment_data.load_tagging_data(tokenizer, "chunks", base, cfg.corpus, seed=cfg.seed, progress=False)
    layouts = {"2 processes x 1 thread": dict(workers=2, threads=1), "1 process x 2 threads": dict(workers=1, threads=2)}
    seconds, scores = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, layout in layouts.items():
            settings = dataclasses.replace(base, **layout)
            paths_root = Path(scratch) / name.replace(" ", "_")
            started = time.perf_counter()
            original = paths.runs_dir
            paths.runs_dir = lambda root=paths_root: root  # keep the benchmark's runs out of runs/
            try:
                results = run_experiments({"chunks": tagging}, [Strategy("sr", arguments.r)], (5, 29), settings,
                                          model_name=cfg.model_name, run_prefix="bench", resume=False, progress=False)
            finally:
                paths.runs_dir = original
            seconds[name] = time.perf_counter() - started
            scores[name] = [round(float(value), 6) for value in results.test_f1]
            print(f"{name}: {seconds[name]:.1f} s for 2 runs of {arguments.steps} steps (r={arguments.r}); "
                  f"test F1 {scores[name]}", flush=True)
    first, second = seconds.values()
    print(f"ratio (1 process x 2 threads) / (2 processes x 1 thread) = {second / first:.2f}; "
          f"same F1 both ways: {len(set(map(tuple, scores.values()))) == 1}; torch {torch.__version__}")


if __name__ == "__main__":
    main()
