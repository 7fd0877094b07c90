"""EMAT's Table 3 by gold length (seed 004) as the notebook and the README show it."""
from __future__ import annotations

import pytest

from helpers.papers.emat import experiment, experiment_data, report


def _table3_intervals():
    """accuracy_intervals on results built by the real scoring (``score_ranking``): EMAT, the GRU and naive MTC on four
    test sentences (two one-token gold labels, two multi-token), EMAT and the GRU on three unseen ones; naive MTC
    is not run on the unseen split, as in evaluate_methods."""
    ks = (1, 10, 50)
    test_gold, test_lengths = ["a", "b", "b c", "d e"], [1, 1, 2, 2]
    unseen_gold, unseen_lengths = ["u", "v w", "z"], [1, 2, 1]
    ranked = {"emat": [[("a", .9)], [("x", .9), ("b", .1)], [("b c", .9)], [("x", .9)]],
              "gru": [[("x", .9)], [("x", .9)], [("x", .9), ("b c", .1)], [("d e", .9)]]}
    ranked["naive"] = ranked["emat"]
    unseen_ranked = {"emat": [[("u", .9)], [("x", .9)], [("x", .9)]], "gru": [[("x", .9)], [("v w", .9)], [("z", .9)]]}
    results = {method: {"test": experiment.score_ranking(rows, test_gold, test_lengths, ks, None)} for method, rows in ranked.items()}
    for method, rows in unseen_ranked.items():
        results[method][experiment_data.UNSEEN] = experiment.score_ranking(rows, unseen_gold, unseen_lengths, ks, None)
    return (experiment.accuracy_intervals(results, "test", resamples=200),
            experiment.accuracy_intervals(results, experiment_data.UNSEEN, resamples=200))


def _percent_and_interval(cell):
    value, interval = cell.split(" [")
    low, high = interval.rstrip("]").split(", ")
    return float(value), float(low), float(high)


def test_table3_rows_give_a_at_k_by_gold_length_with_intervals_for_every_method():
    intervals, unseen = _table3_intervals()
    header, rows = report.table3_rows(intervals, unseen)
    assert header[:2] == ["method", "n (all / 1-token / multi-token / unseen)"]
    assert header[2:] == [f"{group} a@{k}" for group in ("all", "1-token", "multi-token", "unseen") for k in (1, 10, 50)]
    assert all(len(row) == len(header) for row in rows)
    assert sorted(report.TABLE3_METHODS) == sorted(experiment.METHODS)  # every method has its place in the table
    by_method = {row[0]: dict(zip(header, row)) for row in rows}
    assert [row[0] for row in rows] == [f"paper: {paper}" for paper in report.PAPER_TABLE3] + [
        "ours: EMAT", "ours: GRU decoder", "ours: naive MTC"]  # the order of report.TABLE3_METHODS
    emat, naive = by_method["ours: EMAT"], by_method["ours: naive MTC"]
    assert emat["n (all / 1-token / multi-token / unseen)"] == "4 / 2 / 2 / 3"
    assert naive["n (all / 1-token / multi-token / unseen)"] == "4 / 2 / 2 / —" and naive["unseen a@1"] == "—"
    expected = {("EMAT", "all a@1"): 50.0, ("EMAT", "all a@10"): 75.0, ("EMAT", "1-token a@1"): 50.0,
                ("EMAT", "multi-token a@10"): 50.0, ("EMAT", "unseen a@1"): 33.3, ("GRU decoder", "all a@1"): 25.0,
                ("GRU decoder", "multi-token a@10"): 100.0, ("GRU decoder", "1-token a@50"): 0.0,
                ("GRU decoder", "unseen a@50"): 66.7}
    for (method, column), value in expected.items():
        found, low, high = _percent_and_interval(by_method[f"ours: {method}"][column])
        assert found == value and low <= found <= high, (method, column, by_method[f"ours: {method}"][column])
    paper = by_method["paper: BERT-Adapted-EMAT"]
    assert (paper["all a@1"], paper["all a@50"], paper["1-token a@1"]) == ("12.64", "45.85", "—")
    assert by_method["paper: T5-3B"]["all a@50"] == "—"  # not reported
    frame = report.table3(intervals, unseen, latency={"forward": 3.0, "emat": 4.0, "gru": 9.5})
    assert frame.loc["ours: EMAT", "all a@10"] == emat["all a@10"]  # one definition: the notebook's table is these rows
    assert (frame.loc["ours: GRU decoder", "ms / sentence"], frame.loc["ours: naive MTC", "ms / sentence"]) == ("9.5", "—")
    assert frame.loc["paper: BERT-Adapted-RNN", "ms / sentence"] == "44 (T4)"
    from helpers import claims  # the rows are what the README's result table takes
    assert claims.ResultTable(notebook="06", name="table3", title="Table 3", header=header, rows=rows).rows[-1][0] == "ours: naive MTC"


def test_table3_rows_refuse_what_is_not_accuracy_intervals():
    intervals, unseen = _table3_intervals()
    with pytest.raises(ValueError, match="intervals="):
        report.table3_rows({}, unseen)
    with pytest.raises(ValueError, match="unseen has methods \\['t5'\\]"):
        report.table3_rows(intervals, {"t5": {}})
