"""Sequence repetition's report (seed 003): the summary over seeds, Table 1's pick on validation, and the paired
F1 differences behind the claims."""
import pytest

from helpers import metrics
from helpers.papers.sequence_repetition import report
from helpers.papers.sequence_repetition.experiment_data import EncodedSentence, TaggingData
from helpers.papers.sequence_repetition.mechanism import Strategy

PAD = 2



def _as_study(rows):
    """The run's rows as a study of three agreeing seeds combines them: one seed's trained row reaches no verdict,
    and these tests check the report's per-row rules (baseline, budget check), which apply to a study's rows."""
    from helpers import ledger as claims

    return claims.combine_seeds({seed: list(rows) for seed in range(3)})


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


# --------------------------------------------------------------------------- the claims table

DEPTH = 32  # the paper's depth: exit@19 and exit@24 are our exits too
STEPS = list(range(5, 101, 5))
TAGS = [("B-NP", "I-NP", "O"), ("O", "B-NP"), ("B-NP", "O", "B-NP"), ("B-NP", "I-NP"), ("O", "B-NP", "O"),
        ("B-NP", "O")]


def saturating(step: int, top: float = 80.0) -> float:
    return top - 40.0 * 0.8 ** step  # flat long before the last half of training


def rising(step: int) -> float:
    return 40.0 + 0.4 * step  # still climbing at the last step


def _tagging():
    sentences = [EncodedSentence((1,) * len(t), tuple(range(len(t))), ("w",) * len(t), t) for t in TAGS]
    return TaggingData("chunks", ("O", "B-NP", "I-NP"), sentences, sentences, sentences, PAD)


def _run(kind, r, exit_layer, seed, perfect, curve=saturating):
    predictions = [list(t) for t in TAGS] if perfect else [["O"] * len(t) for t in TAGS]
    return {"task": "chunks", "strategy": Strategy(kind, r, exit_layer).label, "kind": kind, "r": r,
            "exit_layer": exit_layer, "seed": seed, "test_f1": 1.0 if perfect else 0.0,
            "validation_f1": 0.9 if perfect else 0.1, "test_predictions": predictions,
            "evaluations": [[step, curve(step) / 100 + seed / 1000] for step in STEPS]}


def _inputs(r1_beats_r0: bool = True, curves: dict | None = None):
    """Every input notebook 04's claims read: block-share views, fine-tuned taggers (r = 0, 1, 2, 4, 8, both
    unmasking baselines, exits 19 and 24 for r = 1, 2, 4, 8; two seeds), the probe and Table 2's timings."""
    import numpy as np
    import pandas as pd

    from helpers.papers.sequence_repetition.mechanism import SHARE_VIEWS

    curves = curves or {}
    specs = [("sr", r, None) for r in (0, 1, 2, 4, 8)] + [("middle", 0, None), ("full", 0, None)]
    specs += [("sr", r, layer) for layer in (19, 24) for r in (1, 2, 4, 8)]
    rows = [_run(kind, r, layer, seed, perfect=(kind, r) != ("sr", 0) or not r1_beats_r0,
                 curve=curves.get((kind, r, layer), saturating))
            for kind, r, layer in specs for seed in (5, 29)]
    rng = np.random.default_rng(0)
    views = {view: {r: rng.uniform(0.1 * r, 0.1 * r + 0.05, (8, 4)) for r in (0, 1, 2, 4, 8)} for view in SHARE_VIEWS}
    gold = [list(t) for t in TAGS]
    good = metrics.entity_counts(gold, gold)
    bad = metrics.entity_counts(gold, [["O"] * len(t) for t in TAGS])
    probe = {r: [good if r > 0 else bad for _ in range(DEPTH + 1)] for r in (0, 1, 2, 4, 8)}
    speed = {(19, 1): ((1.2, 1.25, 1.22), (1.21, 1.24, 1.2)), (24, 2): ((0.97, 0.99, 1.0), (0.98, 1.0, 0.99)),
             (DEPTH, 1): ((0.5, 0.52, 0.51), (0.49, 0.5, 0.52)), (DEPTH, 0): ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0))}
    return views, [pd.DataFrame(rows)], _tagging(), probe, speed


def _claims(**options):
    views, results, tagging, probe, speed = _inputs(**options)
    return _as_study(report.claims(views, results, tagging, probe, DEPTH, speed=speed, speed_device="cpu"))


def test_every_row_is_declared_and_every_declaration_is_emitted():
    from helpers import ledger as claims

    rows = _claims()
    ids = [row.id for row in rows]
    assert len(ids) == len(set(ids)) and set(ids) == set(report.CLAIMS)
    for row in rows:
        entry = report.CLAIMS[row.id]
        assert (row.quantity, row.kind, row.check, row.dataset, row.regime) == (
            entry.quantity, entry.kind, entry.check, entry.dataset, entry.regime)
    assert claims.missing_checks(report.CLAIMS) == []
    by_id = {row.id: row for row in rows}
    # every tagging row names the silver data; only the fine-tuned ones rest on training
    tagging_rows = [row for row in rows if row.id.startswith(("sr.fig2", "sr.table1", "sr.fig5"))]
    assert all("spaCy silver noun-chunk" in row.dataset and "not CoNLL03" in row.dataset for row in tagging_rows)
    assert all(row.trained == (".probe." not in row.id) for row in tagging_rows)
    assert all(row.kind == claims.REFERENCE for row in rows if ".probe." in row.id)
    # Table 2 on a CPU: declared in another regime, never decided
    assert all(by_id[i].regime and by_id[i].verdict == "inconclusive" for i in ("sr.table2.r1_exit19",
                                                                                "sr.table2.r2_exit24"))


def test_baselines_count_only_once_they_beat_the_causal_decoder():
    by_id = {row.id: row for row in _claims()}
    for claim_id in ("sr.fig2.r2_vs_r1", "sr.table1.sr_vs_middle", "sr.table1.sr_vs_full", "sr.fig5.exit19.r1",
                     "sr.fig5.exit24.r8"):
        assert by_id[claim_id].baseline and by_id[claim_id].baseline_works is True, claim_id
    assert by_id["sr.fig5.exit19.r1"].verdict == "reproduced"  # exit matches a last layer that works
    # r = 1 no better than r = 0: the exit rows' baseline (the r = 1 tagger at full depth) is not shown to work
    tied = {row.id: row for row in _claims(r1_beats_r0=False)}
    for claim_id in ("sr.fig2.r2_vs_r1", "sr.fig5.exit19.r1", "sr.table1.sr_vs_middle"):
        assert tied[claim_id].baseline_works is False and tied[claim_id].verdict == "inconclusive", claim_id
    assert "baseline check" in tied["sr.fig5.exit19.r1"].note
    assert not tied["sr.fig2.r1_vs_r0"].baseline  # r = 1 against r = 0 is the paper's comparison itself


def test_fine_tuned_rows_carry_both_taggers_validation_curves_and_read_their_gap():
    from helpers import metrics
    from helpers.papers.sequence_repetition.declarations import GAP_STOP
    from helpers.papers.sequence_repetition.settings import TAGGER_CURVE

    assert all(entry.gap_stop == GAP_STOP for entry in report.CLAIMS.values() if entry.trained)
    by_id = {row.id: row for row in _claims()}
    r1 = by_id["sr.fig2.r1_vs_r0"].plateau
    assert r1["curve"].startswith(f"{TAGGER_CURVE}: SR r=1 against SR r=0 (chunks)")
    # the mean over the two seeds (5 and 29) at every evaluated step, x100, for each tagger
    assert r1["points"] == [[step, pytest.approx(saturating(step) + 1.7)] for step in STEPS]
    assert r1["against"] == [[step, pytest.approx(saturating(step) + 1.7)] for step in STEPS]
    assert by_id["sr.fig2.r1_vs_r0"].stopping.stopped
    assert by_id["sr.fig5.exit19.r1"].plateau["curve"].startswith(f"{TAGGER_CURVE}: SR r=1, exit@19 against SR r=1")
    # r = 0 still climbing under a flat r = 1: the gap keeps closing, so the row is not shown stopped
    moving = {row.id: row for row in _claims(curves={("sr", 0, None): rising})}
    assert not moving["sr.fig2.r1_vs_r0"].stopping.stopped
    assert "gap still changing" in moving["sr.fig2.r1_vs_r0"].budget_text
    # both still climbing alike: neither curve stops, their gap does
    alike = {row.id: row for row in _claims(curves={("sr", 0, None): rising, ("sr", 1, None): rising})}
    row = alike["sr.fig2.r1_vs_r0"]
    assert not metrics.stopped_improving(row.plateau["points"]).stopped and row.stopping.stopped
