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


# --------------------------------------------------------------------------- the ledger rows from synthetic results

def _synthetic(naive_like_mlm: bool = True):
    """40 test sentences (30 one-token gold labels, 10 two-token) and 10 unseen ones, every method's hits given:
    EMAT 25 one-token + 6 multi-token hits, the GRU 5, the single-token MLM 10 (naive MTC the same rows, or 10 more
    two-token hits), the MLM's first token over the vocabulary 20, the label prior none."""
    ks = (1, 10, 50)
    gold = [f"w{i}" for i in range(30)] + [f"m{i} x" for i in range(10)]
    lengths = [1] * 30 + [2] * 10

    def ranked(hit, labels=gold):
        return [[(label, 1.0)] if index in hit else [("zzz", 1.0)] for index, label in enumerate(labels)]

    hits = {"emat": {*range(25), *range(30, 36)}, "gru": set(range(5)), "mlm": set(range(10)),
            "naive": set(range(10)) if naive_like_mlm else {*range(10), *range(30, 40)}, "mlm_vocab": set(range(20)),
            "prior": set()}
    results = {method: {"test": experiment.score_ranking(ranked(hit), gold, lengths, ks, None)} for method, hit in hits.items()}
    unseen_gold, unseen_lengths = [f"u{i}" for i in range(10)], [1] * 10
    for method, hit in (("emat", set()), ("emat_new_rows", set(range(8)))):
        results.setdefault(method, {})
        results[method][experiment_data.UNSEEN] = experiment.score_ranking(ranked(hit, unseen_gold), unseen_gold,
                                                                           unseen_lengths, ks, None)
    results["emat_new_rows"]["test"] = results["emat"]["test"]
    return results, experiment.accuracy_intervals(results, "test", resamples=300), \
        experiment.accuracy_intervals(results, experiment_data.UNSEEN, resamples=300)


def _latency(emat_paper_ratio: float):
    forward = [10.0, 10.5, 9.5, 10.2, 9.8] * 4
    samples = {"forward": forward, "mlm": [f * 1.01 for f in forward], "emat": [f * 1.02 for f in forward],
               "gru": [f * 2.5 for f in forward], experiment.PAPER_SIZED: [f * emat_paper_ratio for f in forward]}
    return {**{name: sorted(values)[len(values) // 2] for name, values in samples.items()}, "samples": samples,
            experiment.PAPER_SIZED_ROWS: 93_000}


def _curve(values, every=10):
    return [{"step": index * every, "dev a@1": value} for index, value in enumerate(values)]


RISING = _curve([0.0, 0.053, 0.074])  # the cpu profile's GRU after 2 epochs
FLAT = _curve([0.0, 0.05, 0.07, 0.08] + [0.081 + 0.001 * (-1) ** i for i in range(12)])
MANIFEST = {"vocabulary": 978, "k (min_count)": 10, "corpus": "austen"}


def _rows(gru_curve, naive_like_mlm=True, emat_paper_ratio=1.04):
    results, intervals, unseen = _synthetic(naive_like_mlm)
    rows = report.claims(manifest=MANIFEST, results=results, intervals=intervals, unseen=unseen,
                         latency=_latency(emat_paper_ratio), curves={"emat": FLAT, "emat_new_rows": FLAT, "gru": gru_curve},
                         phrase_tokens=[1] * 8 + [2] * 2, length_correct=[1, 0] * 20)
    return {f"{row.where} | {row.claim}": row for row in rows}


def _find(rows, *words):
    found = [row for key, row in rows.items() if all(word in key for word in words)]
    assert len(found) == 1, (words, list(rows))
    return found[0]


def test_emat_over_the_gru_is_reproduced_only_once_the_grus_dev_curve_stopped_rising():
    from helpers import claims

    rising, flat = _rows(RISING), _rows(FLAT)
    for rows in (rising, flat):
        for row in rows.values():
            assert row.verdict == claims.verdict_of(row)
    row = _find(rising, "Table 3 |", "RNN decoder at a@1 (")
    assert row.low > 0 and row.baseline == "GRU decoder" and row.baseline_works is False
    assert row.verdict == "inconclusive" and "not shown to work" in row.verdict_text
    assert "75% of our 40 test labels are one token" in row.claim and "6 of 10" in row.claim
    assert row.trained and row.plateau is not None
    assert _find(flat, "Table 3 |", "RNN decoder at a@1 (").verdict == "reproduced"  # the same gap, a working baseline


def test_emat_over_naive_mtc_needs_naive_mtc_to_beat_the_single_token_mlm():
    same = _find(_rows(FLAT), "Tables 2-3")
    assert same.baseline == "naive MTC" and same.baseline_works is False and same.verdict == "inconclusive"
    working = _find(_rows(FLAT, naive_like_mlm=False), "Tables 2-3")
    assert working.baseline_works is True


def test_the_label_prior_is_no_claim_and_the_closed_vocabulary_baseline_is_checked_against_it():
    rows = _rows(FLAT)
    assert not [key for key in rows if "frequency" in key or "prior" in key.split("|")[1]]
    closed = _find(rows, "closed vocabulary")
    assert closed.baseline_works is True and closed.verdict == "reproduced"


def test_tables_1_2_and_the_length_classifier_are_measurements_with_intervals():
    from helpers import claims

    rows = _rows(FLAT)
    table1 = _find(rows, "Table 1")
    assert table1.kind == claims.MEASUREMENT and table1.verdict == "inconclusive" and table1.n == 10
    assert table1.ours == "80.0%" and table1.low <= 80.0 <= table1.high and "10.2%" in table1.paper_value
    coverage = _find(rows, "coverage, BERT-cased")
    assert coverage.ours == "75.0%" and coverage.n == 40 and "13.8%" in coverage.paper_value
    assert _find(rows, "coverage, Naive-MTC-BERT").ours == "100.0%"
    classifier = _find(rows, "length classifier")
    assert classifier.ours == "50.0%" and "64.7%" in classifier.paper_value and classifier.direction == 0


def test_emats_overhead_is_measured_at_the_papers_matrix_size_against_a_bar_of_1_1():
    cheap, costly = _rows(FLAT, emat_paper_ratio=1.04), _rows(FLAT, emat_paper_ratio=1.5)
    for rows, verdict in ((cheap, "reproduced"), (costly, "inconclusive")):
        for denominator in ("forward", "single-token"):
            row = _find(rows, "matrix product", denominator)
            assert (row.direction, row.threshold) == (-1, report.LATENCY_BAR) and row.verdict == verdict
            assert "93,000 new rows" in row.claim and "EMAT's own" not in row.paper_value
            assert "15 ms per sentence" in row.paper_value and "no bare forward" in row.paper_value
    slower = _find(cheap, "Inf-time")
    assert (slower.direction, slower.threshold, slower.verdict) == (1, 1.0, "reproduced")


def test_curve_stopped_rising_reads_the_last_quarter():
    assert not report.curve_stopped_rising(RISING, "dev a@1")
    assert report.curve_stopped_rising(FLAT, "dev a@1")
    assert report.curve_stopped_rising(_curve([0.2, 0.1]), "dev a@1")  # falling: past its best
    assert not report.curve_stopped_rising(_curve([0.2]), "dev a@1")  # one evaluation shows nothing
    assert not report.curve_stopped_rising([], "dev a@1")


def test_a_gru_flat_at_its_untrained_value_is_no_working_baseline():
    assert report.curve_learned_and_stopped(FLAT, "dev a@1")
    assert not report.curve_learned_and_stopped(_curve([0.0, 0.0, 0.0, 0.0, 0.0]), "dev a@1")  # flat, but at 0
    assert not report.curve_learned_and_stopped(RISING, "dev a@1")
    assert _find(_rows(_curve([0.0] * 8)), "Table 3 |", "RNN decoder at a@1 (").baseline_works is False
