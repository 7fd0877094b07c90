"""For each held-out curve the ledger's trained findings rest on: how long it must train, and how often it must be
evaluated, for the equivalence test to be able to show it stopped, and what that costs on this machine.

The curves are read from the committed study's per-seed files (``claims/study/<profile>/seed-*/NN.json``, each
finding's ``plateau``). For each curve:

- its **gain** and **residual noise** (:func:`helpers.curves.residual_noise`, the scatter around the least-squares
  line over the last half) on the seed-mean curve, which is the curve a study judges (:func:`helpers.curves.mean_curve`);
  a curve still bending at its last length has an inflated residual, so the noise is an upper bound. A finding read
  by its *gap* to a method trained alike (``Declared.gap_stop``; its plateau holds ``against``) is designed on that
  gap: the noise is the seed-mean gap's, the gain the claimed curve's, the simulation
  :func:`helpers.curves.stop_power`'s ``gap=True``, and a seed's cost is both methods' runs;
- for each candidate length (the study's length times 1, 2, 4, ...), the sparsest evaluation cadence at which
  :func:`helpers.curves.stop_power` reaches both targets (a stopped curve reads "stopped" in at least 80% of draws,
  one still rising 3 points per 100 steps reads "still improving" in at least 95%);
- what a seed's run costs at that length and cadence: ``steps x step seconds + evaluations x evaluation seconds``
  from a ``benchmarks/training_steps.py --json`` report measured on this machine, and the evaluations' share of it
  (the train-to-a-stop design allows at most 15%).

    python scripts/stop_design.py --costs benchmarks/results/<machine>/training_steps.json
    python scripts/stop_design.py --costs ... --lengths 1 2 4 8 --speedup 2.4   # a faster step recipe, as measured
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from helpers import curves  # noqa: E402

EVALUATION_SHARE_LIMIT = 0.15
# Curve (as its findings name it) -> (the benchmark's training-step row, its held-out evaluation row or None when the
# curve is the training loss, logged at every step for free).
COST_ROWS = {
    "notebook 02's MNTP held-out masked-token accuracy": ("MNTP (notebook 02)", "MNTP held-out accuracy"),
    "notebook 02's MTP training loss (negated, so training raises it)": ("MTP (notebook 02)", None),
    "MAGNET's held-out MNTP accuracy during joint training": ("MAGNET phase 2: + SSCL", "MAGNET held-out MNTP accuracy"),
    "tagger validation F1: SR r=1 (chunks)": ("SR tagger r=1 (chunks)", "SR tagger r=1 (chunks) validation F1"),
    "tagger validation F1: SR r=2 (chunks)": ("SR tagger r=2 (chunks)", "SR tagger r=2 (chunks) validation F1"),
    "tagger validation F1: SR r=1, exit@18 (chunks)": ("SR tagger r=1 (chunks)", "SR tagger r=1 (chunks) validation F1"),
    "GRU decoder dev a@1": ("GRU decoder (MTC)", "GRU dev loss and a@1"),
    "EMAT dev a@1": ("EMAT head", "EMAT dev a@1 and a@10"),
    "EMAT (new rows only) dev a@1": ("EMAT head", "EMAT dev a@1 and a@10"),
    "notebook 07's diffusion fine-tune: held-out diffusion loss (LLaDA Eq. 3), negated":
        ("diffusion fine-tune (notebook 07)", "diffusion held-out Eq. 3 loss"),
}


@dataclass(frozen=True)
class Curve:
    name: str
    notebooks: tuple[str, ...]
    findings: int
    seeds: dict  # seed -> [(step, value)]
    against: dict | None = None  # seed -> the compared method's [(step, value)], for a finding read by its gap

    @cached_property
    def mean(self) -> list[tuple[int, float]]:
        return curves.mean_curve(list(self.seeds.values()))

    @cached_property
    def gap(self) -> list[tuple[int, float]] | None:
        """The seed-mean gap (claimed minus compared) at the steps both evaluated; None for a single curve."""
        if not self.against:
            return None
        return curves.gap_curve(self.mean, curves.mean_curve(list(self.against.values())))

    @property
    def length(self) -> int:
        return max(step for step, _ in self.mean)

    @property
    def every(self) -> int:
        steps = sorted(step for step, _ in self.mean)
        gaps = [b - a for a, b in zip(steps, steps[1:]) if b - a > 0]
        return min(gaps) if gaps else self.length


def read_curves(profile: str = "cpu") -> list[Curve]:
    """Every distinct held-out curve of the committed study's seeds (examples looks hold the same training runs)."""
    found: dict[str, dict] = {}
    for path in sorted(glob.glob(str(ROOT / "claims" / "study" / profile / "seed-*" / "0*.json"))):
        seed = int(Path(path).parent.name.split("-")[1])
        for claim in json.loads(Path(path).read_text()).get("claims", []):
            plateau = claim.get("plateau")
            if not isinstance(plateau, dict) or not plateau.get("points"):
                continue
            entry = found.setdefault(plateau["curve"], {"notebooks": set(), "findings": set(), "seeds": {},
                                                        "against": {}})
            entry["notebooks"].add(Path(path).stem[:2])
            entry["findings"].add(claim["id"])
            entry["seeds"][seed] = [(int(step), float(value)) for step, value in plateau["points"]]
            if plateau.get("against"):
                entry["against"][seed] = [(int(step), float(value)) for step, value in plateau["against"]]
    return [Curve(name, tuple(sorted(entry["notebooks"])), len(entry["findings"]), entry["seeds"],
                  entry["against"] if len(entry["against"]) == len(entry["seeds"]) else None)
            for name, entry in found.items()]


def cost_rows(name: str) -> tuple[tuple[str | None, str | None], int]:
    """The benchmark rows a curve's cost is read from, and how many runs of that cost a seed trains: a gap curve
    ("<claimed> against <compared> (<task>)") costs its claimed method's run twice (the two train alike)."""
    if " against " in name:
        claimed, _, rest = name.partition(" against ")
        task = rest[rest.rfind(" ("):] if " (" in rest else ""
        return COST_ROWS.get(claimed + task, (None, None)), 2
    return COST_ROWS.get(name, (None, None)), 1


def read_costs(path: Path) -> tuple[dict, dict]:
    """Seconds a training step and a held-out evaluation take, by the benchmark's row names."""
    report = json.loads(Path(path).read_text())
    steps = {row["name"]: row["step_s"] for row in report["steps"]}
    evaluations = {kind["name"]: kind["seconds"] for run in report["evaluations"] for kind in run["kinds"]}
    return steps, evaluations


def _by_prefix(table: dict, name: str | None):
    if name is None:
        return 0.0
    matches = [value for key, value in table.items() if key == name or key.startswith(name)]
    return matches[0] if matches else None


def design(curve: Curve, lengths, costs, speedup: float, draws: int) -> list[dict]:
    mean = curve.mean
    gap = curve.gap
    noise, gain = curves.residual_noise(gap or mean), mean[-1][1] - mean[0][1]
    rise = curves.moving_rise(mean)
    (step_row, eval_row), runs = cost_rows(curve.name)
    step_s = _by_prefix(costs[0], step_row) if step_row else None
    eval_s = _by_prefix(costs[1], eval_row)
    rows = []
    for factor in lengths:
        steps = curve.length * factor
        at_recipe = every = minutes = share = None
        if gain > 0:  # a curve that has not risen is never shown stopped (curves.stopped_improving)
            simulation = dict(steps=steps, noise=noise, gain=gain, rise=rise, draws=draws, gap=gap is not None)
            at_recipe = curves.stop_power(every=curve.every, **simulation)
            if eval_row is None:  # the training loss: logged at every step at no cost
                every = 1 if curves.stop_power(every=1, **simulation).enough else None
            else:
                every = curves.cadence_for(most=max(1, steps // 5), **simulation)
        if every is not None and step_s is not None and eval_s is not None:
            evaluations = 0 if eval_row is None else len(curves.evaluation_steps(steps, every))
            train, evaluate = runs * steps * step_s / speedup, runs * evaluations * eval_s
            minutes, share = (train + evaluate) / 60, evaluate / (train + evaluate)
        rows.append({"curve": curve.name + (" (gap)" if gap is not None else ""), "notebooks": curve.notebooks,
                     "findings": curve.findings,
                     "seeds": len(curve.seeds), "noise": noise, "gain": gain, "steps": steps,
                     "power_at_recipe_cadence": None if at_recipe is None else (at_recipe.stopped, at_recipe.moving),
                     "recipe_every": curve.every,
                     "every": every, "minutes_per_seed": minutes, "evaluation_share": share})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| curve | notebooks | findings | noise (seed mean) | gain | steps | P(stopped), P(moving) at the "
             "study's cadence | sparsest cadence reaching 80% / 95% | min per seed | evaluations' share |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        every = "none" if row["every"] is None else f"every {row['every']}"
        minutes = "—" if row["minutes_per_seed"] is None else f"{row['minutes_per_seed']:.1f}"
        share = "—" if row["evaluation_share"] is None else f"{row['evaluation_share']:.0%}"
        flag = " (over 15%)" if row["evaluation_share"] and row["evaluation_share"] > EVALUATION_SHARE_LIMIT else ""
        power = row["power_at_recipe_cadence"]
        at_recipe = "never (it has not risen)" if power is None else \
            f"{power[0]:.2f}, {power[1]:.2f} (every {row['recipe_every']})"
        lines.append(f"| {row['curve']} | {', '.join(row['notebooks'])} | {row['findings']} | {row['noise']:.3g} | "
                     f"{row['gain']:.3g} | {row['steps']} | {at_recipe} | {every} | {minutes} | {share}{flag} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--costs", type=Path, required=True, help="a benchmarks/training_steps.py --json report")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1, 2, 4, 8],
                        help="candidate lengths as multiples of the study's")
    parser.add_argument("--speedup", type=float, default=1.0,
                        help="divide the training steps' seconds by this (a faster recipe measured side by side)")
    parser.add_argument("--draws", type=int, default=600)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.costs.is_file():
        parser.error(f"--costs {args.costs}: no such file; write one with benchmarks/training_steps.py --json")
    if args.speedup <= 0 or not math.isfinite(args.speedup):
        parser.error(f"--speedup {args.speedup}: must be a positive number")
    if any(length < 1 for length in args.lengths):
        parser.error(f"--lengths {args.lengths}: each must be a whole number >= 1")
    costs = read_costs(args.costs)
    found = read_curves(args.profile)
    if not found:
        parser.error(f"--profile {args.profile}: no per-seed curves under claims/study/{args.profile}")
    rows = [row for curve in found for row in design(curve, args.lengths, costs, args.speedup, args.draws)]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=list))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
