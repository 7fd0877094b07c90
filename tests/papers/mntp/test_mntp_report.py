"""Notebook 02's report: the loss slope and its interval, the claims paired by held-out block, the run summary and
the App. E sentence computed from it."""
import numpy as np
import pytest

from helpers import metrics, mntp_recipe
from helpers import ledger as claims
from helpers.papers.mntp import report, settings


def test_loss_slope_sees_a_falling_loss():
    falling = [{"step": s, "loss": 5 - 0.01 * s + 0.001 * (-1) ** s} for s in range(1, 101)]
    slope, low, high = report.loss_slope(falling, last=50)
    assert slope == pytest.approx(-1.0, abs=0.01) and high < 0
    flat = [{"step": s, "loss": 2 + 0.1 * (-1) ** s} for s in range(1, 101)]
    _, low, high = report.loss_slope(flat, last=50)
    assert low < 0 < high


def test_claims_are_paired_by_block_and_refuse_different_selections():
    counts = np.array([4.0, 3.0, 5.0, 2.0, 4.0, 3.0])  # six held-out blocks, the same tokens for both objectives
    hits = {"MNTP": (np.array([2.0, 1.0, 3.0, 1.0, 2.0, 2.0]), counts),
            "MTP": (np.array([1.0, 1.0, 2.0, 0.0, 1.0, 1.0]), counts)}
    runs = {name: _records([3 - 0.01 * s for s in range(1, 21)], [0.1 + 0.01 * k for k in range(21)], every=1)
            for name in ("MNTP", "MTP")}
    _, gap, slope = report.claims(runs, hits)
    assert gap.verdict == "inconclusive" and gap.n == 6 and gap.kind == claims.MEASUREMENT
    assert gap.ours == f"{100 * (11 - 6) / 21:+.1f}" and gap.low <= 100 * 5 / 21 <= gap.high
    assert slope.n == 10 and float(slope.ours) == pytest.approx(-1.0) and slope.high < 0  # still falling
    assert "still falling" in slope.note and slope.kind == "measurement"
    with pytest.raises(ValueError, match="different selections"):
        report.claims(runs, {"MNTP": hits["MNTP"], "MTP": (hits["MTP"][0][:5], hits["MTP"][1][:5])})


def _records(losses, accuracies, every):
    records = [{"step": 0, "eval_accuracy": accuracies[0]}]
    for step, loss in enumerate(losses, start=1):
        records.append({"step": step, "loss": loss})
        if step % every == 0:
            records.append({"step": step, "eval_accuracy": accuracies[step // every]})
    return records


def test_the_summary_and_sentence_follow_the_records():
    runs = {"MNTP": _records([4.0, 3.0, 2.0, 1.0], [0.1, 0.2, 0.3], every=2),
            "MTP": _records([5.0, 4.0, 3.0, 2.0], [0.05, 0.25, 0.15], every=2)}
    summary = report.run_summary(runs, window=2)
    assert summary.loc["MNTP", "loss, first steps"] == 3.5 and summary.loc["MNTP", "loss, last steps"] == 1.5
    assert summary.loc["MTP", "eval acc, best"] == 0.25 and summary.loc["MTP", "best at step"] == 2
    assert summary.loc["MTP", "eval acc, final"] == 0.15 and summary.loc["MTP", "steps"] == 4
    text = report.describe_mntp_vs_mtp(summary)
    assert "MTP loss fell: True; MTP accuracy ended below its best: True; MNTP accuracy rose: True" in text
    assert "MNTP ends above MTP (0.300 vs 0.150)" in text and text.endswith("The finding is reproduced.")
    with pytest.raises(ValueError, match="runs\\['MTP'\\] has no training or evaluation records"):
        report.run_summary({"MTP": [{"step": 1, "loss": 1.0}]})


def _hits():
    counts = np.array([4.0, 3.0, 5.0, 2.0, 4.0, 3.0])
    return {"MNTP": (np.array([2.0, 1.0, 3.0, 1.0, 2.0, 2.0]), counts),
            "MTP": (np.array([1.0, 1.0, 2.0, 0.0, 1.0, 1.0]), counts)}


def test_every_row_is_declared_and_every_declaration_is_emitted():
    runs = {name: _records([3 - 0.1 * s for s in range(20)], [0.1 + 0.01 * k for k in range(21)], every=1)
            for name in ("MNTP", "MTP")}
    rows = report.claims(runs, _hits())
    assert [row.id for row in rows] == list(report.CLAIMS)
    for row in rows:
        declared = report.CLAIMS[row.id]
        assert (row.quantity, row.kind, row.check, row.dataset) == (declared.quantity, declared.kind, declared.check,
                                                                   declared.dataset)
    assert not claims.missing_checks(report.CLAIMS)  # every check names an existing test


def _three_seeds(row):
    return claims.combine_seeds({seed: [row] for seed in range(3)})[0]


@pytest.mark.parametrize("trend,expected", [(-0.002, "reproduced"), (0.002, "not reproduced"), (0.0, "inconclusive")])
def test_the_trend_row_reads_mtps_accuracy_falling_or_not_once_its_loss_has_converged(trend, expected):
    """App. E as the paper states it: MTP's held-out accuracy over the run's second half, read against 0 by the one
    rule; "does not fall" only once MTP's training loss is shown to have converged (its negated curve stopped)."""
    steps = 40
    accuracies = [0.3 + trend * step + 0.0005 * (-1) ** step for step in range(steps + 1)]
    converged = [2 + 1.5 * 0.7 ** step + 0.001 * (-1) ** step for step in range(1, steps + 1)]
    runs = {"MNTP": _records(converged, [0.2] * (steps + 1), every=1), "MTP": _records(converged, accuracies, every=1)}
    row = report.claims(runs, _hits())[0]
    assert row.id == "mntp.fig7.mtp_accuracy_falls" and row.plateau["curve"] == settings.MTP_LOSS_CURVE
    assert row.plateau["points"][0] == [1, -converged[0]] and row.stopping.stopped
    assert float(row.ours) == pytest.approx(100 * 100 * trend, abs=0.2) and row.n == steps // 2 + 1
    assert _three_seeds(row).verdict == expected
    still_falling = [3 - 0.05 * step for step in range(1, steps + 1)]  # the loss has not converged
    rising = report.claims({**runs, "MTP": _records(still_falling, accuracies, every=1)}, _hits())[0]
    assert rising.still_improving and _three_seeds(rising).verdict == ("reproduced" if expected == "reproduced"
                                                                       else "inconclusive")
    cpu = settings.curve_points("cpu")
    assert report.CLAIMS[row.id].reaches_either_verdict(cpu) and cpu[settings.MTP_LOSS_CURVE] >= metrics.STOP_MIN_POINTS


def test_the_fig7_row_carries_the_mntp_runs_held_out_curve_and_can_reach_either_verdict():
    accuracies = [0.1 + 0.3 * (1 - 0.5 ** k) for k in range(21)]  # rises, then flat
    losses = [3 - 0.05 * s + 0.01 * (-1) ** s for s in range(20)]
    runs = {"MNTP": _records(losses, accuracies, every=1), "MTP": _records(losses, [0.1] * 21, every=1)}
    row = report.claims(runs, _hits())[1]
    assert row.trained and row.plateau["curve"] == mntp_recipe.MNTP_HELDOUT_CURVE
    assert row.plateau["points"] == [[step, value] for step, value in metrics.curve_points(runs["MNTP"], "eval_accuracy")]
    assert row.stopping.stopped and not row.still_improving
    # the cpu recipe records enough evaluations in the last half of training for the equivalence test
    cpu = settings.curve_points("cpu")
    assert cpu[mntp_recipe.MNTP_HELDOUT_CURVE] >= metrics.STOP_MIN_POINTS
    assert not report.CLAIMS[row.id].reaches_either_verdict(cpu)  # the endpoint gap is a measurement
    recipe = settings.SETTINGS["cpu"]
    assert cpu[mntp_recipe.MNTP_HELDOUT_CURVE] == len([s for s in range(0, recipe.steps + 1, recipe.eval_every)
                                                    if s >= recipe.steps / 2])
