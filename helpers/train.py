"""Every training as a command, so that ``accelerate launch`` can spread it over GPUs and a seed study over processes.

    python -m helpers.train mntp --profile cpu                                      # notebook 02's MNTP run, here
    accelerate launch --multi_gpu --num_processes 4 -m helpers.train mntp --profile gpu   # the same run on 4 GPUs
    python -m helpers.train mntp --profile cpu --seeds 0 1 2 --parallel 2           # three seeds, two at a time
    python -m helpers.train magnet --profile cpu                                    # notebook 03 (also: sr, emat)

A name trains exactly what its notebook trains, through the functions the notebook calls and into the run folder the
notebook uses (keyed by every setting, the seed included), so the notebook afterwards finds the finished run and only
evaluates. Under ``accelerate launch`` the processes share each step's micro-batches (``training.train``): the run,
and so its key, is the one-process run whatever the number of processes.

**The registry.** :data:`TRAINERS` maps a name to a callable ``(profile, seed, *, stop_after=None, progress=True)``
(plus ``micro_batch=`` when given) that imports its paper package only when called (:func:`entry_point`), so
``import helpers.train`` imports no paper package and the command loads one. A paper package takes part with one
function in its ``experiment`` module and one entry in its notebook's line of the registry (``helpers.papers``)::

    Notebook("03", "magnet", ..., trainers=(Trainer("magnet"),)),

An option (``stop_after``, ``micro_batch``) that the function does not take is refused by name when given.

The function, ``train_command(profile, seed, *, progress=True[, stop_after=None][, micro_batch=None], **fixed)``:

- trains what the notebook trains, by calling the notebook's own functions (never a copy of them), under the run keys
  and run folders the notebook uses (``store.reuse_run`` / ``store.run_dir_for`` with the notebook's settings);
- ``profile``: a ``profiles.Profile``; ``WORKBOOK_PROFILE`` is already set to its name;
- ``seed``: None means the notebook's own seed(s); a number means that seed only, and it must be part of every key
  it trains under (so that each seed of a study lands in its own folder);
- ``stop_after``: passed on to every ``training.train`` call (stop after that step, a checkpoint there, as an
  interruption would);
- ``progress``: passed on to ``training.train``;
- ``micro_batch`` (optional; leave it out to refuse ``--micro-batch``): ``distributed.split_step(settings, micro_batch)``
  applied to the settings ``memory.fit_training`` returns;
- ``**fixed``: the keyword arguments its registry entry binds (e.g. ``objective="mntp"``);
- returns the list of run folders (``Path``) it trained or found finished;
- runs in every process of a launch: what it reads must be the same in all of them, and whatever it writes outside
  ``training.train`` and ``adapters.save_adapter`` (a ``store.Run.finish`` result, a cache) goes through
  ``distributed.on_main_process``.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from . import papers
from .profiles import PROFILE_NAMES

Trainer = Callable[..., list]
PARENT_PID_VARIABLE = "WORKBOOK_TRAIN_PARENT"  # set for the seed study's children: they end when the parent ends


def entry_point(module: str, function: str, **fixed) -> Trainer:
    """A trainer that imports ``module`` when called and calls ``module.function(profile, seed, **fixed, **options)``."""

    def trainer(profile, seed: int | None, **options) -> list:
        target = getattr(importlib.import_module(module), function)
        accepted = inspect.signature(target).parameters
        for name, value in list(options.items()):
            if name in accepted:
                continue
            if value is not None:  # an option this trainer does not take: refused by name, never dropped silently
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"{name}={value!r}: {module}.{function} does not take it; leave {flag} out")
            del options[name]
        return target(profile, seed, **fixed, **options)

    trainer.__qualname__ = f"{module}.{function}"
    return trainer


# notebook 02's MNTP and MTP, notebook 03's MAGNET and LLM2Vec-style runs, notebook 04's taggers, notebook 06's heads
TRAINERS: dict[str, Trainer] = {
    trainer.name: entry_point(f"helpers.papers.{notebook.package}.{trainer.module}", "train_command",
                              **dict(trainer.fixed))
    for notebook in papers.NOTEBOOKS for trainer in notebook.trainers}


def train(names: Sequence[str], profile_name: str, seed: int | None = None, *, micro_batch: int | None = None,
          stop_after: int | None = None, progress: bool = True) -> list[Path]:
    """Train each of ``names`` under the profile ``profile_name``; returns every run folder trained or found finished.

    Sets ``WORKBOOK_PROFILE`` first: the helpers that read the current profile (``models.load_model``'s dtype and
    4-bit choice) then agree with the one named. The profile is then the notebooks' :func:`command_profile`
    (``WORKBOOK_DTYPE``'s dtype and ``WORKBOOK_SEED``'s seed when set), so the command trains into the run folders a
    notebook under the same variables uses: a bf16 and a float32 run never share a folder.
    ``stop_after``: None, or a whole number >= 1.
    """
    from . import distributed
    from .checks import whole_number

    unknown = [name for name in names if name not in TRAINERS]
    if unknown or not names:
        raise ValueError(f"names={list(names)!r}: expected one or more of {', '.join(TRAINERS)}")
    if stop_after is not None:
        whole_number(stop_after, "stop_after", 1, "the step to stop after; leave --stop-after out to train to the end")
    profile = command_profile(profile_name)
    folders = []
    for name in names:
        options = {"micro_batch": micro_batch, "stop_after": stop_after}
        found = TRAINERS[name](profile, seed, progress=progress, **options)
        folders.extend(found)
        launch = distributed.launched()
        if launch is None or launch.is_main_process:
            for folder in found:
                print(f"[{name}] {describe_run(folder)}")
    return folders


def command_profile(profile_name: str):
    """The profile the command trains under: ``profile_name`` (set as ``WORKBOOK_PROFILE``) as the notebooks read it
    (``profiles.current``), with ``WORKBOOK_DTYPE``'s weight dtype and ``WORKBOOK_SEED``'s seed when set. Its dtype
    (``models.weight_dtype_name``) is part of every run key, so the folders follow it."""
    from . import profiles

    os.environ[profiles.ENV_VAR] = profiles.get(profile_name).name
    return profiles.current()


def describe_run(folder: Path) -> str:
    """``<folder>: step 8, loss 10.74 (lengths finished: [8])`` from a run's metrics and the lengths it keeps (a run's
    length is no setting of it: :func:`helpers.training.kept_lengths`)."""
    from . import training

    losses = [record for record in training.read_metrics(folder) if "loss" in record]
    if not losses:
        return f"{folder}: no step trained yet"
    return (f"{folder}: step {losses[-1]['step']}, loss {losses[-1]['loss']:.4f} (lengths finished: "
            f"{training.kept_lengths(folder)})")


def seed_commands(names: Sequence[str], profile_name: str, seeds: Sequence[int], options: Sequence[str] = ()
                  ) -> list[list[str]]:
    """One ``python -m helpers.train`` command per seed (the seed study's processes)."""
    return [[sys.executable, "-m", "helpers.train", *names, "--profile", profile_name, "--seed", str(seed), *options]
            for seed in seeds]


def run_seeds(names: Sequence[str], profile_name: str, seeds: Sequence[int], parallel: int = 1,
              options: Sequence[str] = ()) -> dict[int, int]:
    """Train ``names`` once per seed, one process per seed, at most ``parallel`` at once; returns seed -> exit code.

    Each seed's runs land in their own folders (the seed is part of every key). With several GPUs, the process in
    slot i sees only GPU i mod (number of GPUs) (``CUDA_VISIBLE_DEVICES``); on CPUs each gets its share of the cores
    (``OMP_NUM_THREADS``, unless already set). The children end when this process ends.
    """
    import torch

    if parallel < 1:
        raise ValueError(f"parallel={parallel!r} must be a whole number >= 1")
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds={list(seeds)!r} must be one or more distinct seeds")
    gpus = torch.cuda.device_count()
    threads = str(max(1, (os.cpu_count() or 1) // min(parallel, len(seeds))))
    waiting = list(zip(seeds, seed_commands(names, profile_name, seeds, options)))
    running: dict[int, tuple[int, subprocess.Popen]] = {}  # slot -> (seed, process)
    codes: dict[int, int] = {}
    while waiting or running:
        for slot in range(parallel):
            if slot not in running and waiting:
                seed, command = waiting.pop(0)
                env = {**os.environ, PARENT_PID_VARIABLE: str(os.getpid())}
                env.setdefault("OMP_NUM_THREADS", threads)
                if gpus > 1:
                    env["CUDA_VISIBLE_DEVICES"] = str(slot % gpus)
                print(f"[seed {seed}] {' '.join(command[1:])}", flush=True)
                running[slot] = seed, subprocess.Popen(command, env=env)
        for slot, (seed, process) in list(running.items()):
            if process.poll() is not None:
                codes[seed] = process.returncode
                print(f"[seed {seed}] " + ("done" if process.returncode == 0 else f"failed (exit code {process.returncode})"),
                      flush=True)
                del running[slot]
        time.sleep(0.2)
    return codes


def _step_number(text: str) -> int:
    """``--stop-after``'s value: a whole number >= 1 (argparse names the option in its error)."""
    try:
        step = int(text)
    except ValueError:
        step = 0
    if step < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= 1 (the step to stop after; leave "
                                         "--stop-after out to train to the end)")
    return step


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m helpers.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+", choices=sorted(TRAINERS), metavar="name",
                        help=f"what to train: {', '.join(TRAINERS)}")
    parser.add_argument("--profile", required=True, choices=PROFILE_NAMES, help="the profile (as WORKBOOK_PROFILE)")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, help="train this seed (default: the notebook's own)")
    seeds.add_argument("--seeds", type=int, nargs="+", help="a seed study: one process per seed")
    parser.add_argument("--parallel", type=int, default=1, help="with --seeds: at most this many at once (default 1)")
    parser.add_argument("--micro-batch", type=int, help="rows per micro-batch (the same rows per step, more "
                        "accumulation, so more processes have work; part of the run key)")
    parser.add_argument("--stop-after", type=_step_number, help="stop each run after this step (>= 1), as an "
                        "interruption would")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from . import distributed

    args = parse_arguments(argv)
    options = [*(["--stop-after", str(args.stop_after)] if args.stop_after is not None else []),
               *(["--micro-batch", str(args.micro_batch)] if args.micro_batch is not None else []),
               *(["--no-progress"] if args.no_progress or args.parallel > 1 else [])]
    if args.seeds is not None:
        if distributed.launched() is not None:
            raise SystemExit("--seeds starts one process per seed itself: run it with python, not accelerate launch "
                             "(or launch each seed with --seed)")
        codes = run_seeds(args.names, args.profile, args.seeds, args.parallel, options)
        failed = sorted(seed for seed, code in codes.items() if code)
        if failed:
            print(f"seeds {failed} failed; run the study again: the finished seeds train 0 new steps", file=sys.stderr)
        return 1 if failed else 0
    if args.parallel != 1:
        raise SystemExit("--parallel goes with --seeds")
    if os.environ.get(PARENT_PID_VARIABLE):
        from .workers import die_with_parent

        die_with_parent(int(os.environ[PARENT_PID_VARIABLE]))
    train(args.names, args.profile, args.seed, micro_batch=args.micro_batch, stop_after=args.stop_after,
          progress=not args.no_progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
