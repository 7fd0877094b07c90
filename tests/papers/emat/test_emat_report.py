"""EMAT's Table 3 by gold length as the notebook and docs/claims.md show it."""
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
    from helpers import ledger as claims  # the rows are what docs/claims.md's result table takes
    assert claims.ResultTable(notebook="06", name="table3", title="Table 3", header=header, rows=rows).rows[-1][0] == "ours: naive MTC"


def test_table3_rows_refuse_what_is_not_accuracy_intervals():
    intervals, unseen = _table3_intervals()
    with pytest.raises(ValueError, match="intervals="):
        report.table3_rows({}, unseen)
    with pytest.raises(ValueError, match="unseen has methods \\['t5'\\]"):
        report.table3_rows(intervals, {"t5": {}})


# --------------------------------------------------------------------------- the ledger rows from synthetic results

GRU_LIKE_NAIVE, GRU_OVER_NAIVE = set(range(5)), set(range(25))
EMAT_HITS = {*range(25), *range(30, 36)}


def _synthetic(naive_like_mlm: bool = True, gru_hits=GRU_LIKE_NAIVE, emat_hits=EMAT_HITS):
    """40 test sentences (30 one-token gold labels, 10 two-token) and 10 unseen ones, every method's hits given:
    EMAT 25 one-token + 6 multi-token hits, the GRU 5 (fewer than naive MTC) or 25, the single-token MLM 10 (naive
    MTC the same rows, or 10 more two-token hits), the MLM's first token over the vocabulary 20, the label prior
    none. Each ranking holds one item, so a hit at a@1 is a hit at every k."""
    ks = (1, 10, 50)
    gold = [f"w{i}" for i in range(30)] + [f"m{i} x" for i in range(10)]
    lengths = [1] * 30 + [2] * 10

    def ranked(hit, labels=gold):
        return [[(label, 1.0)] if index in hit else [("zzz", 1.0)] for index, label in enumerate(labels)]

    hits = {"emat": emat_hits, "gru": gru_hits, "mlm": set(range(10)),
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


RISING = _curve([0.0, 0.053, 0.074])  # three evaluations: too few for the stopping test
FLAT = _curve([0.0, 0.05, 0.07, 0.08] + [0.081 + 0.001 * (-1) ** i for i in range(12)])
FALLING = _curve([0.067, 0.066, 0.064, 0.062, 0.061, 0.060, 0.060, 0.060])  # a head that did not learn
MANIFEST = {"vocabulary": 978, "k (min_count)": 10, "corpus": "austen"}


def _rows(gru_hits=GRU_OVER_NAIVE, naive_like_mlm=True, emat_paper_ratio=1.04, emat_curve=FLAT,
          new_rows_curve=FLAT, emat_hits=EMAT_HITS):
    results, intervals, unseen = _synthetic(naive_like_mlm, gru_hits, emat_hits)
    rows = report.claims(manifest=MANIFEST, results=results, intervals=intervals, unseen=unseen,
                         latency=_latency(emat_paper_ratio),
                         curves={"emat": emat_curve, "emat_new_rows": new_rows_curve, "gru": FLAT},
                         phrase_tokens=[1] * 8 + [2] * 2, length_correct=[1, 0] * 20)
    return {row.id: row for row in _as_study(rows)}


def _as_study(rows):
    """The run's rows as a study of three agreeing seeds combines them: one seed's trained row reaches no verdict,
    and these tests check the report's per-row rules (baseline, budget check), which apply to a study's rows."""
    from helpers import ledger as claims

    return claims.combine_seeds({seed: rows for seed in range(3)})


def test_every_row_is_declared_and_every_declaration_is_a_row():
    from helpers import ledger as claims

    rows = _rows()
    assert set(rows) == set(report.CLAIMS)  # no row without a declaration, no declaration without a row
    for claim_id, row in rows.items():
        declared = report.CLAIMS[claim_id]
        assert (row.quantity, row.kind, row.where, row.claim) == (declared.quantity, declared.kind, declared.where,
                                                                   declared.says)
        assert row.verdict == claims.verdict_of(row) and row.dataset == report.DATASET
        if row.kind in claims.DECIDED:
            assert row.check and not claims.missing_checks({claim_id: declared}), claim_id
    assert not [row for row in rows.values() if row.baseline and "prior" in row.baseline.lower()]


def test_rows_the_paper_does_not_state_are_references_or_measurements():
    from helpers import ledger as claims

    for declared in report.CLAIMS.values():
        if declared.paper_value.startswith("not reported"):
            assert declared.kind in (claims.REFERENCE, claims.MEASUREMENT), declared.id
    assert report.CLAIMS["emat.ref.vs_mlm_vocab.a10"].kind == claims.REFERENCE
    assert report.CLAIMS["emat.ref.new_rows_only.unseen_a50"].kind == claims.REFERENCE


def test_emat_over_the_gru_counts_only_once_the_gru_beats_naive_mtc_as_in_tables_2_3():
    weak, working = _rows(gru_hits=GRU_LIKE_NAIVE), _rows(gru_hits=GRU_OVER_NAIVE)
    row = weak["emat.table3.vs_gru.a1"]
    assert row.low > 0 and row.baseline == "GRU decoder" and row.baseline_works is False
    assert row.verdict == "inconclusive" and "not shown to work" in row.verdict_text
    assert "naive MTC at a@10" in report.CLAIMS["emat.table3.vs_gru.a1"].baseline_must_beat
    assert "75% of our 40 test labels are one token" in row.note and "6 of 10" in row.note
    assert row.trained and row.plateau["curve"].startswith(report.EMAT_CURVE) and len(row.plateau["points"]) == len(FLAT)
    assert weak["emat.table3.gru_vs_naive"].low < 0  # the comparison that decides it is a row of its own
    assert working["emat.table3.gru_vs_naive"].verdict == "reproduced"
    assert working["emat.table3.vs_gru.a1"].baseline_works is True
    assert working["emat.table3.vs_gru.a1"].verdict == "reproduced"  # the same gap over a working baseline


def test_emat_over_naive_mtc_needs_naive_mtc_to_beat_the_single_token_mlm():
    same = _rows(naive_like_mlm=True)
    assert same["emat.table2.naive_vs_mlm"].low <= 0
    row = same["emat.tables2_3.vs_naive.a1"]
    assert row.baseline == "naive MTC" and row.baseline_works is False and row.verdict == "inconclusive"
    working = _rows(naive_like_mlm=False)
    assert working["emat.table2.naive_vs_mlm"].verdict == "reproduced"
    assert working["emat.tables2_3.vs_naive.a1"].baseline_works is True


def test_the_closed_vocabulary_baseline_must_beat_the_single_token_mlm_never_the_label_prior():
    rows = _rows()
    assert not [claim_id for claim_id in rows if "prior" in claim_id]
    assert rows["emat.ref.mlm_vocab_vs_mlm"].low > 0  # 20 hits against 10, the same sentences
    closed = rows["emat.ref.vs_mlm_vocab.a10"]
    assert closed.baseline_works is True and closed.verdict == "reproduced" and closed.kind == "reference"
    assert "single-token MLM" in report.CLAIMS["emat.ref.vs_mlm_vocab.a10"].baseline_must_beat


def test_a_trained_row_is_not_reproduced_only_once_emats_curve_stopped():
    behind = {*range(3)}  # EMAT below naive MTC (its 10 one-token hits and 10 two-token ones)
    stopped = _rows(emat_hits=behind, emat_curve=FLAT, naive_like_mlm=False)["emat.tables2_3.vs_naive.a1"]
    assert stopped.high < 0 and stopped.baseline_works and stopped.verdict == "not reproduced"
    rising = _rows(emat_hits=behind, emat_curve=RISING, naive_like_mlm=False)["emat.tables2_3.vs_naive.a1"]
    assert rising.high < 0 and rising.verdict == "inconclusive" and "equivalence test needs 6" in rising.verdict_text


def test_new_rows_only_counts_only_once_its_dev_a1_rose_over_training():
    learned = _rows(new_rows_curve=FLAT)["emat.ref.new_rows_only.unseen_a50"]
    assert learned.low > 0 and learned.baseline_works is True and learned.verdict == "reproduced"
    assert learned.plateau["curve"].startswith(report.EMAT_NEW_ROWS_CURVE)
    flat = _rows(new_rows_curve=FALLING)["emat.ref.new_rows_only.unseen_a50"]
    assert flat.low > 0 and flat.baseline_works is False and flat.verdict == "inconclusive"
    assert "from 6.7% to 6.0%" in flat.note


def test_curve_rose_compares_the_last_half_with_the_first_evaluation():
    assert report.curve_rose(FLAT) and report.curve_rose(RISING)
    assert not report.curve_rose(FALLING)
    assert not report.curve_rose(_curve([0.0] * 8))  # flat at its first value: nothing learned
    assert not report.curve_rose(_curve([0.2]))  # one evaluation shows nothing
    assert not report.curve_rose([])


def test_tables_1_2_and_the_length_classifier_are_measurements_with_intervals():
    from helpers import ledger as claims

    rows = _rows()
    table1 = rows["emat.table1.one_token_share"]
    assert table1.kind == claims.MEASUREMENT and table1.verdict == "inconclusive" and table1.n == 10
    assert table1.ours == "80.0%" and table1.low <= 80.0 <= table1.high and "10.2%" in table1.paper_value
    coverage = rows["emat.table2.coverage.mlm"]
    assert coverage.ours == "75.0%" and coverage.n == 40 and "13.8%" in coverage.paper_value
    assert rows["emat.table2.coverage.naive"].ours == "100.0%"
    classifier = rows["emat.sec5_2.length_classifier"]
    assert classifier.ours == "50.0%" and "64.7%" in classifier.paper_value and classifier.direction == 0


def test_timing_rows_carry_the_hardware_regime_and_so_stay_undecided():
    cheap, costly = _rows(emat_paper_ratio=1.04), _rows(emat_paper_ratio=1.5)
    for rows, side in ((cheap, "below"), (costly, "above")):
        for denominator in ("forward", "mlm"):
            row = rows[f"emat.sec4_1.paper_sized_overhead.{denominator}"]
            assert (row.direction, row.threshold) == (-1, report.LATENCY_BAR)
            assert (row.high < report.LATENCY_BAR) if side == "below" else (row.low > report.LATENCY_BAR)
            assert row.regime == report.REGIME and row.verdict == "inconclusive" and "T4" in row.verdict_text
            assert "93,000 new rows" in row.claim and "no bare forward" in row.paper_value
            assert "15 ms per sentence" in row.paper_value
    slower = cheap["emat.table3.inf_time.gru_over_emat"]
    assert (slower.direction, slower.threshold) == (1, 1.0) and slower.low > 1.0
    assert slower.regime and slower.verdict == "inconclusive"  # §5.3 credits the ordering to GPU optimizations
