"""Train one of notebook 02's runs in extension rounds until its held-out curve is shown stopped, or a cap.

Each round asks the notebook's own driver (``helpers.papers.mntp.experiment.run_objective``, on the profile's recipe
fitted by ``memory.fit_training``) for a longer run; the run folder is keyed without its length, so a round continues
the last one from its checkpoint (``helpers.training.train``). After each round the curve the ledger's findings read
is judged by the equivalence test (``helpers.curves.stopped_improving``): the MNTP held-out accuracy
(``eval_accuracy``) for ``mntp``, MTP's training loss negated for ``mtp`` (MAGNET App. E's trend row). The rounds are
the recipe's length, then ``--grow`` times that, up to ``--cap-steps``; no round starts after ``--cap-minutes``
(``helpers.curves.train_to_stop``). A capped curve is reported as capped, never as stopped.

    python scripts/train_to_stop.py mntp --profile cpu --seed 0 --cap-steps 800 --cap-minutes 45
    WORKBOOK_ROOT=/tmp/scratch python scripts/train_to_stop.py mntp ...   # runs/ of another root (copy a run there)

Only notebook 02's runs are wired here; the other notebooks' runs extend the same way (their run folders are keyed
without their length) but their drivers do not take a length from this script yet.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CURVES = {"mntp": ("eval_accuracy", 1.0), "mtp": ("loss", -1.0)}  # record key, sign (the test wants a rising curve)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(CURVES), help="notebook 02's run to train")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--seed", type=int, default=None, help="the run's seed (default: the profile's)")
    parser.add_argument("--cap-steps", type=int, required=True)
    parser.add_argument("--cap-minutes", type=float, default=float("inf"))
    parser.add_argument("--grow", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write each round's reading here")
    args = parser.parse_args(argv)

    from helpers import curves, memory, models, mntp_recipe, profiles
    from helpers.papers.mntp import experiment as E

    profile = profiles.get(args.profile)
    if args.seed is not None:
        profile = profile.replace(seed=args.seed)
    recipe = mntp_recipe.masked_lm_recipe(profile)
    if args.cap_steps < recipe.steps:
        parser.error(f"--cap-steps {args.cap_steps} is below the recipe's {recipe.steps} steps")
    tokenizer = models.load_tokenizer(profile.model_name)
    data = E.load_data(tokenizer, profile, recipe)
    key, sign = CURVES[args.name]
    rounds = []

    def train_to(steps: int):
        began = time.perf_counter()
        fitted = memory.fit_training("02", profile, dataclasses.replace(recipe, steps=steps))
        _, records, _ = E.run_objective(profile, tokenizer, data, args.name, recipe=fitted, progress=False)
        points = [(step, sign * value) for step, value in curves.curve_points(records, key)]
        reading = curves.stopped_improving(points)
        rounds.append({"steps": steps, "seconds": round(time.perf_counter() - began, 1), "points": points,
                       "stopped": reading.stopped, "reason": reading.reason})
        print(f"[{args.name} seed {profile.seed}] {steps} steps in {rounds[-1]['seconds']:.0f} s: {reading.reason}",
              flush=True)
        if args.json:
            args.json.write_text(json.dumps(rounds, indent=1))
        return points

    outcome = curves.train_to_stop(train_to, start=recipe.steps, cap_steps=args.cap_steps,
                                   cap_minutes=args.cap_minutes, grow=args.grow)
    print(outcome.text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
