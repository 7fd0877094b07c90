"""Sequence repetition's report (seed 003): the summary over seeds, Table 1's pick on validation, and the paired
F1 differences behind the claims."""
import pytest

from helpers import metrics
from helpers.papers.sequence_repetition import report
from helpers.papers.sequence_repetition.experiment_data import EncodedSentence, TaggingData
from helpers.papers.sequence_repetition.mechanism import Strategy

PAD = 2


def test_summary_is_mean_and_ci_over_seeds_and_table1_picks_the_best_r():
    import pandas as pd

    from helpers import metrics

    rows = []
    validation = {("sr", 0): 0.5, ("sr", 1): 0.8, ("sr", 2): 0.7, ("middle", 0): 0.6, ("full", 0): 0.6}
    for seed, scores in enumerate([(0.50, 0.70, 0.74, 0.60, 0.65), (0.54, 0.72, 0.70, 0.62, 0.61)]):
        for (kind, r), score in zip([("sr", 0), ("sr", 1), ("sr", 2), ("middle", 0), ("full", 0)], scores):
            label = Strategy(kind, r).label
            rows.append({"task": "ner", "strategy": label, "kind": kind, "r": r, "exit_layer": None, "seed": seed,
                         "test_f1": score, "validation_f1": validation[kind, r]})
    summary = report.summarize(pd.DataFrame(rows))
    sr1 = summary[(summary.kind == "sr") & (summary.r == 1)].iloc[0]
    assert (sr1.f1, sr1.ci95) == pytest.approx(metrics.mean_ci95([70.0, 72.0]))
    # test means favour r = 2 (72.0 against 71.0), validation favours r = 1: the test split never picks
    assert report.best_sr_r(summary, "ner") == 1
    table = report.table1(summary)
    assert list(table.method) == ["SR (r=1)", "middle unmasking", "full unmasking"]
    one_seed = report.summarize(pd.DataFrame(rows[:5]))
    assert one_seed.ci95.isna().all() and report.f1_text(70.0, float("nan"), 1) == "70.0 ± n/a (1 seed)"
    assert table[report.PAPER_TABLE1_COLUMN].tolist() == pytest.approx([92.92, 92.16, 92.30], abs=0.01)


def test_f1_comparison_pairs_seeds_and_sentences():
    import pandas as pd

    tags = [("B-NP", "I-NP", "O"), ("O", "B-NP"), ("B-NP", "O", "B-NP")]
    sentences = [EncodedSentence((1,) * len(t), tuple(range(len(t))), ("w",) * len(t), t) for t in tags]
    tagging = TaggingData("chunks", ("O", "B-NP", "I-NP"), sentences, sentences, sentences, PAD)
    perfect = [list(t) for t in tags]
    blind = [["O"] * len(t) for t in tags]
    rows = [{"task": "chunks", "kind": "sr", "r": r, "exit_layer": None, "seed": seed,
             "test_predictions": perfect if r == 1 else blind} for r in (0, 1) for seed in (5, 29)]
    found = report.f1_comparison(pd.DataFrame(rows), tagging, dict(kind="sr", r=1), dict(kind="sr", r=0), resamples=100)
    assert (found["value"], found["low"], found["high"]) == (100.0, 100.0, 100.0)
    assert found["seeds"] == 2 and found["sentences"] == 3
    alone = report.f1_comparison(pd.DataFrame(rows), tagging, dict(kind="sr", r=1), resamples=100)
    assert alone["value"] == 100.0
    with pytest.raises(ValueError, match="no seed has runs of both"):
        report.f1_comparison(pd.DataFrame(rows), tagging, dict(kind="sr", r=1), dict(kind="middle"))
    # seeds that disagree: seed 5 perfect, seed 29 and 42 blind; the interval is the t interval over the three seed
    # values with each seed's sentence bootstrap nested (the rule a seed study's rows follow)
    mixed = [{"task": "chunks", "kind": "sr", "r": 1, "exit_layer": None, "seed": seed,
              "test_predictions": perfect if seed == 5 else blind} for seed in (5, 29, 42)]
    found = report.f1_comparison(pd.DataFrame(mixed), tagging, dict(kind="sr", r=1), resamples=200)
    assert found["seed_values"] == (100.0, 0.0, 0.0) and found["seeds"] == 3
    halves = [(high - low) / 2 for _, low, high in (
        metrics.bootstrap_interval(list(zip(metrics.entity_counts([list(t) for t in tags], predictions))),
                                   lambda records: 100 * metrics.f1_from_counts([r[0] for r in records]),
                                   resamples=200) for predictions in (perfect, blind, blind))]
    expected = metrics.seeds_with_examples_interval([100.0, 0.0, 0.0], halves)
    assert (found["value"], found["low"], found["high"]) == pytest.approx(expected)
    assert found["low"] < 0 < 100 < found["high"]  # three seeds that disagree this much settle nothing
