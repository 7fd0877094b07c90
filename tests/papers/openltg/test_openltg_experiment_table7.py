"""Table 7's length strategies (seed 002 §3.1 Eq. 5, §6.2): the ridge predictor on prompt features against the
fixed training median."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.papers.openltg import experiment_table7

def test_length_predictor_learns_a_linear_rule_then_offsets_and_clips():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(300, 6))
    lengths = np.clip(np.rint(60 + 15 * features[:, 2]), 1, None)
    predictor = experiment_table7.LengthPredictor(max_length=200, ridge=1e-3).fit(features[:200], lengths[:200])
    assert np.abs(predictor.predict(features[200:]) - lengths[200:]).mean() < 1.0
    shifted = experiment_table7.LengthPredictor(max_length=200, offset=-20, ridge=1e-3).fit(features[:200], lengths[:200])
    assert np.abs(shifted.predict(features[200:]) - np.clip(lengths[200:] - 20, 1, 200)).mean() < 1.0
    assert experiment_table7.LengthPredictor(max_length=50, ridge=1e-3).fit(features, lengths).predict(features).max() <= 50
    scores = experiment_table7.length_strategies(features[:200], lengths[:200], features[200:], lengths[200:], max_length=200)
    table = scores.table
    assert table.loc["Prediction", "mean |error|"] < table.loc["Fixed", "mean |error|"]
    assert table.loc["Fixed", "mean length"] == np.median(lengths[:200])  # the median minimises the mean |error|
    for name in ("Fixed", "Prediction"):
        assert table.loc[name, "low"] <= table.loc[name, "mean |error|"] <= table.loc[name, "high"]
        assert table.loc[name, "mean |error|"] == pytest.approx(scores.errors[name].mean())
    assert scores.alpha <= 1.0  # a real linear rule: cross-validation keeps the fit


def test_cross_validation_regularises_a_predictor_that_only_fits_noise():
    """Many noise features and few prompts: the unregularised fit memorises the training lengths; the
    cross-validated α does not, and its held-out error is no worse than the fixed median's by much."""
    rng = np.random.default_rng(1)
    features, lengths = rng.normal(size=(120, 80)), rng.integers(20, 200, size=120)
    loose = experiment_table7.LengthPredictor(max_length=400, ridge=1e-6).fit(features[:80], lengths[:80])
    assert np.abs(loose.predict(features[:80]) - lengths[:80]).mean() < 5  # memorised
    scores = experiment_table7.length_strategies(features[:80], lengths[:80], features[80:], lengths[80:], max_length=400)
    assert scores.alpha >= 1e3
    assert scores.table.loc["Prediction", "mean |error|"] < 1.2 * scores.table.loc["Fixed", "mean |error|"]

