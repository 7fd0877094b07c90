"""scripts/stop_design.py on the committed study's curves: every curve a trained finding rests on is read and costed,
and the cadence it reports reaches the stop-power targets on fresh simulated draws."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from helpers import curves

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("stop_design", ROOT / "scripts" / "stop_design.py")
stop_design = importlib.util.module_from_spec(SPEC)
sys.modules["stop_design"] = stop_design  # its dataclass looks its module up
SPEC.loader.exec_module(stop_design)


@pytest.fixture
def costs(tmp_path):
    """A benchmark report in training_steps.py's --json form: 1 s a step, 2 s an evaluation, for every row named."""
    steps = sorted({step for step, _ in stop_design.COST_ROWS.values()})
    evaluations = sorted({evaluation for _, evaluation in stop_design.COST_ROWS.values() if evaluation})
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"steps": [{"name": name, "step_s": 1.0} for name in steps],
                                "evaluations": [{"run": name, "kinds": [{"name": name, "seconds": 2.0}]}
                                                for name in evaluations]}))
    return path


def test_every_curve_of_the_committed_study_has_its_costs_named():
    found = stop_design.read_curves("cpu")
    assert found, "the committed study holds per-seed curves"
    for curve in found:
        (step_row, _), _ = stop_design.cost_rows(curve.name)
        assert step_row is not None, f"{curve.name}: a curve the script cannot cost"
    for curve in found:
        # a look spread over sittings leaves a curve some of whose seeds ran at an older length (one seed, here)
        assert len(curve.seeds) >= 1 and curve.length >= 10 and curve.every >= 1
    assert any(len(curve.seeds) >= 2 for curve in found)


def test_the_reported_cadence_reaches_both_targets_on_fresh_draws_and_its_cost_is_the_arithmetic(costs):
    steps, evaluations = stop_design.read_costs(costs)
    curve = next(c for c in stop_design.read_curves("cpu") if c.name.startswith("notebook 02's MNTP held-out"))
    row, = stop_design.design(curve, [4], (steps, evaluations), speedup=2.0, draws=300)
    assert row["steps"] == 4 * curve.length and row["every"] is not None
    fresh = curves.stop_power(steps=row["steps"], every=row["every"], noise=row["noise"], gain=row["gain"],
                              rise=curves.moving_rise(curve.mean), draws=600, seed=7)
    assert fresh.stopped >= curves.STOP_POWER - 0.05 and fresh.moving >= curves.MOVING_POWER
    evaluated = len(curves.evaluation_steps(row["steps"], row["every"]))
    train, evaluate = row["steps"] * 1.0 / 2.0, evaluated * 2.0
    assert row["minutes_per_seed"] == pytest.approx((train + evaluate) / 60)
    assert row["evaluation_share"] == pytest.approx(evaluate / (train + evaluate))


def test_a_curve_that_never_rose_has_no_cadence_that_shows_a_stop(costs):
    flat = stop_design.Curve("EMAT dev a@1", ("06",), 1, {seed: [(step, 0.5 - 0.001 * step) for step in range(0, 85, 7)]
                                                          for seed in range(3)})
    row, = stop_design.design(flat, [4], stop_design.read_costs(costs), speedup=1.0, draws=100)
    assert row["gain"] < 0 and row["every"] is None and row["minutes_per_seed"] is None


def test_bad_arguments_name_themselves(costs, tmp_path, capsys):
    with pytest.raises(SystemExit):
        stop_design.main(["--costs", str(tmp_path / "absent.json")])
    assert "--costs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        stop_design.main(["--costs", str(costs), "--speedup", "0"])
    assert "--speedup" in capsys.readouterr().err


def test_a_finding_read_by_its_gap_is_designed_on_the_gap_and_costs_both_runs(costs):
    """Two SR taggers whose validation curves keep rising alike (a constant gap of 3 points, small noise): the
    design reads the gap's noise, not the claimed curve's bend, simulates the gap test, and a seed pays for two runs."""
    import math

    import numpy as np

    rng = np.random.default_rng(3)
    rising = lambda offset: [(step, offset + 10 * math.log1p(step) + 0.2 * rng.standard_normal())  # noqa: E731
                             for step in range(10, 401, 10)]
    name = "tagger validation F1: SR r=2 against SR r=1 (chunks)"
    gap = stop_design.Curve(name, ("04",), 1, {seed: rising(3.0) for seed in range(3)},
                            {seed: rising(0.0) for seed in range(3)})
    assert stop_design.cost_rows(name) == (stop_design.COST_ROWS["tagger validation F1: SR r=2 (chunks)"], 2)
    assert gap.gap[0][1] == pytest.approx(3.0, abs=1.0) and gap.gap[-1][0] == 400
    row, = stop_design.design(gap, [1], stop_design.read_costs(costs), speedup=1.0, draws=200)
    assert row["curve"].endswith("(gap)") and row["noise"] < 0.5 and row["every"] is not None
    evaluated = len(curves.evaluation_steps(400, row["every"]))
    assert row["minutes_per_seed"] == pytest.approx(2 * (400 * 1.0 + evaluated * 2.0) / 60)


def test_notebook_04s_gaps_at_their_measured_noise_reach_both_targets_at_twice_the_studied_length():
    """Every gap curve of notebook 04 in the committed ledger (the seed-mean validation F1 of a tagger against the
    one it is compared with): at the gap's measured residual noise, the gap test simulated at twice the length the
    study trained, with the same validation cadence, reads a stopped gap as stopped in at least 80% of draws and one
    still widening 3 points per 100 steps as still changing in at least 95%. At 400 steps every 10 the three-seed
    noise (1.1-1.7 F1 points) gives 0.43-0.62; 800 steps every 10 is the length the runs extend to next."""
    from helpers import ledger

    gaps = [row for row in ledger.read_rows(ledger.ledger_path("cpu"))
            if row.notebook == "04" and row.plateau and "against" in row.plateau]
    assert len(gaps) == 5, [row.id for row in gaps]
    for seed, row in enumerate(gaps):
        points, against = row.plateau["points"], row.plateau["against"]
        gap = curves.gap_curve(points, against)
        steps, every = gap[-1][0], gap[-1][0] - gap[-2][0]
        noise, gain = curves.residual_noise(gap), curves.gap_stopped(points, against).gain
        power = curves.stop_power(steps=2 * steps, every=every, noise=noise, gain=gain, draws=200, gap=True, seed=seed)
        assert power.enough, (row.id, power)
