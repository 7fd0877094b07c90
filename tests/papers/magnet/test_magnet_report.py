"""MAGNET's report (seed 000): the claims quote the paper's numbers from :data:`PAPER` alone, in the ledger's order."""
import math

import numpy as np
import pytest

from helpers import ledger, mntp_recipe
from helpers import metrics, training
from helpers.papers.magnet import experiment_table1 as P
from helpers.papers.magnet import report, settings



def _as_study(rows):
    """The run's rows as a study of three agreeing seeds combines them: one seed's trained row reaches no verdict,
    and these tests check the report's per-row rules (baseline, budget check), which apply to a study's rows."""
    from helpers import ledger as claims

    return claims.combine_seeds({seed: list(rows) for seed in range(3)})


def _study_claims(**measured):
    return _as_study(report.claims(**measured))


def _study(n=6):
    rng = np.random.default_rng(0)

    def counts():
        tags = np.full(n, 10.0)
        return {"correct": rng.integers(5, 11, n).astype(float), "tags": tags, "tp": rng.integers(0, 3, n).astype(float),
                "predicted": np.full(n, 3.0), "gold": np.full(n, 3.0)}

    rows = [P.CHANCE_ROW, *P.table1_readouts(middle=1)]
    return P.ProbeStudy({row: {task: counts() for task in P.PROBE_TASKS} for row in rows}, n=n)


def _infilling():
    def scored(shift):
        return {"example_nll": [4.0 + shift, 6.0 + shift, 5.0], "example_tokens": [2, 3, 3]}

    return {dataset: {"base": scored(1.0), "MAGNET (left only)": scored(0.5), "MAGNET": scored(0.0)}
            for dataset in ("ROC Stories", "Wikitext-103")}


def _generations():
    looping, fresh = [1, 2, 3, 4] * 3, list(range(12))
    texts = {"base": [fresh, fresh], "LLM2Vec-style": [looping, looping], "MAGNET": [looping, fresh]}
    return {(name, set_name): [{"text": "A b. A b.", "continuation_ids": ids} for ids in rows]
            for name, rows in texts.items() for set_name in ("5-word prefixes", "sentence prefixes")}


def test_claims_quote_the_papers_numbers_from_one_place():
    rows = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                         rows=P.claim_rows(middle=1))
    assert len(rows) == 26 and all(row.notebook == "03" and row.paper == "000" for row in rows)
    quoted = [row.paper_value for row in rows]
    assert quoted[:3] == ["+4.41", "+1.72", "+1.81"]  # Table 1, MAGNET - base
    assert quoted[3:6] == ["+1.03", "+1.15", "+0.73"]  # Table 1's central claim: MAGNET - LLM2Vec-style [MNTP]
    assert quoted[10] == "96.59"  # Table 1's base NER, a token accuracy
    assert quoted[12] == "+0.381" and quoted[14] == "+0.355"  # Table 4, log(base / MAGNET) per dataset
    # Table 5, each prefix set with its own paper row: LLM2Vec-style - base, then the margin MAGNET's raise minus half
    # of it (the paper's Rep-4, 5-word prefixes: 0.35 x 0.415 - 0.5 x 0.415 = -0.063); a row for Rep-Sen too, where
    # the synthetic LLM2Vec-style texts raise nothing and a share would be undefined
    assert quoted[15:17] == ["+0.415 (5-word prefixes)", "-0.063 (share 0.35; 5-word prefixes)"]
    assert quoted[17] == "+0.199 (5-word prefixes)"
    assert quoted[19] == "+0.508 (sentence prefixes)"
    assert quoted[23:] == ["+0.07", "+0.09", "+0.20"]  # Table 6, MNTP + MSG - MNTP


def _curve(rep_4):
    return [{"step": 10 * index, "rep_sen": 0.0, "rep_4": value} for index, value in enumerate(rep_4)]


def test_fig6_rows_test_magnets_trend_against_a_stated_margin_and_llm2vecs_rise_above_zero():
    flat = report.FIG6_FLAT * (0.4747 - 0.0601)  # a tenth of LLM2Vec's Table 5 Rep-4 raise (Wikitext-103)
    curves = {"MAGNET": _curve([0.30, 0.301, 0.299, 0.300, 0.302, 0.300]),
              "LLM2Vec-style": _curve([0.10, 0.20, 0.31, 0.39, 0.50])}
    rows = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                         rows=P.claim_rows(middle=1), curves=curves, heldout=_stopped())
    magnet, llm2vec = [row for row in rows if row.where == "Fig. 6"]
    assert magnet.margin == pytest.approx(flat) and magnet.margin_source.startswith("ours:")
    assert magnet.low > -flat and magnet.high < flat and magnet.verdict == "reproduced"  # flat within the margin
    assert llm2vec.value == pytest.approx(0.0099 * 40, rel=0.05) and llm2vec.verdict == "reproduced"  # slope per step x 40 steps
    rising = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                           rows=P.claim_rows(middle=1), curves={"MAGNET": _curve([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])},
                           heldout=_stopped())
    trend = next(row for row in rising if row.where == "Fig. 6")
    assert trend.low > flat and trend.verdict != "reproduced"  # a clear trend: not "no trend"
    # a curve of two evaluations has no residual to put an interval on: no row
    assert not [row for row in _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                                             rows=P.claim_rows(middle=1), curves={"MAGNET": _curve([0.1, 0.2])})
                if row.where == "Fig. 6"]


def _stopped():
    """A held-out accuracy curve that rose and then stopped: 21 evaluations, flat over the last half."""
    return [(5 * k, 0.4 - 0.3 * 0.5 ** k + 0.0001 * (-1) ** k) for k in range(21)]


def _still_rising():
    """A held-out accuracy curve still rising at the same pace at its last step."""
    return [(5 * k, 0.1 + 0.01 * k + 0.0001 * (-1) ** k) for k in range(21)]


def test_the_budget_check_reaches_every_row_that_rests_on_magnets_training():
    rows = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                         rows=P.claim_rows(middle=1), curves={"MAGNET": _curve([0.3, 0.4, 0.5])},
                         heldout=_still_rising(), mntp_heldout=_stopped())
    carrying = [row for row in rows if row.plateau and row.plateau["curve"].startswith(settings.MAGNET_HELDOUT_CURVE)]
    assert {row.where for row in carrying} == {"Table 1", "Table 1 (middle layer)", "Table 4", "Table 5, Fig. 6", "Fig. 6"}
    assert all(row.plateau["points"] == [pytest.approx(list(point)) for point in _still_rising()] for row in carrying)
    assert all(row.verdict != "not reproduced" and row.still_improving for row in carrying)
    # Fig. 6's MAGNET trend lies wholly beyond its margin here: the row says why it is not "not reproduced"
    trend = next(row for row in carrying if row.where == "Fig. 6")
    assert trend.low > trend.margin and "still improving at 100 steps" in trend.verdict_text
    # the rows resting on notebook 02's MNTP adapter carry its held-out curve, here stopped
    on_mntp = [row for row in rows if row.plateau and row.plateau["curve"].startswith(mntp_recipe.MNTP_HELDOUT_CURVE)]
    assert {row.id for row in on_mntp} == {"magnet.table1.pos.mntp_vs_step0",
                                          *(f"magnet.table5.{metric}.llm2vec_vs_base.{prefixes}"
                                            for metric in ("rep_4", "rep_sen")
                                            for prefixes in ("five_word_prefixes", "sentence_prefixes"))}
    assert all(not row.still_improving for row in on_mntp)
    # every trained row declares a curve, and the one it carries is that curve
    assert all(row.plateau["curve"].startswith(report.CLAIMS[row.id].curve) for row in rows if row.plateau)
    assert all(report.CLAIMS[key].curve for key, entry in report.CLAIMS.items() if entry.trained)


def test_every_row_is_declared_and_every_declaration_is_emitted():
    curves = {"MAGNET": _curve([0.3, 0.3, 0.3, 0.31]), "LLM2Vec-style": _curve([0.1, 0.2, 0.4])}
    rows = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                         rows=P.claim_rows(middle=1), curves=curves, heldout=_stopped(), mntp_heldout=_stopped())
    assert [row.id for row in rows] == list(report.CLAIMS)  # each declared id once, in the declarations' order
    for row in rows:
        declared = report.CLAIMS[row.id]
        assert (row.quantity, row.kind, row.check, row.dataset, row.trained) == (
            declared.quantity, declared.kind, declared.check, declared.dataset, declared.trained)
    assert not ledger.missing_checks(report.CLAIMS)  # every check names an existing test
    decided = [entry for entry in report.CLAIMS.values() if entry.kind in ledger.DECIDED]
    assert all(entry.check for entry in decided)
    # the reference rows are counted apart from the paper's findings
    assert {key for key, entry in report.CLAIMS.items() if entry.kind == ledger.REFERENCE} == {
        "magnet.table1.pos.step0_vs_base", "magnet.table1.pos.mntp_vs_step0", "magnet.table1.pos.middle_layer_vs_base"}
    # at the cpu profile every decided row can reach either verdict: both held-out curves have enough evaluations
    cpu = settings.curve_points("cpu")
    assert all(entry.reaches_either_verdict(cpu) for entry in decided)
    assert all(count >= metrics.STOP_MIN_POINTS for count in cpu.values())


def test_verdicts_follow_the_one_rule_for_each_kind_of_row():
    rows = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                         rows=P.claim_rows(middle=1))
    by_where = {}
    for row in rows:
        by_where.setdefault(row.where, []).append(row)
    assert all(row.kind == "measurement" and row.verdict == "inconclusive" for row in by_where["Table 6"])
    assert by_where["§3.2.2 (i-1 readout)"][0].kind == "measurement"
    assert by_where["Table 1 (metric)"][0].kind == "measurement"  # the paper's value inside ours is no reproduction
    table1 = by_where["Table 1"]
    assert all(row.trained and not row.plateau for row in table1)  # no plateau given: cannot read "not reproduced"
    assert all(row.verdict != "not reproduced" for row in table1)
    infill = by_where["Table 4"]
    assert all(row.direction == 1 and row.trained for row in infill)
    assert all(row.verdict == ("reproduced" if row.low > 0 else "inconclusive") for row in infill)
    margins = [row for row in by_where["Table 5, Fig. 6"] if "margin" in row.quantity]
    assert len(margins) == 2 * len({name for _, name in _generations()})  # Rep-4 and Rep-Sen for every prefix set
    assert all(row.direction == -1 and not row.threshold and row.trained for row in margins)


def test_much_less_is_a_margin_below_zero_exactly_when_the_share_is_below_it():
    from helpers.papers.magnet import experiment_table5 as T5

    generations = _generations()
    per = {name: np.array(T5.per_text_rep_n(generations[(name, "5-word prefixes")])["rep_4"])
           for name in ("MAGNET", "LLM2Vec-style", "base")}
    raise_model, raise_reference = per["MAGNET"] - per["base"], per["LLM2Vec-style"] - per["base"]
    for share in (0.25, 0.5, 0.75, 1.0):
        value, low, high = T5.degeneration_raise_margin(generations, "MAGNET", "LLM2Vec-style", "base", "rep_4", share,
                                                        sets=["5-word prefixes"])
        assert value == pytest.approx(float(np.mean(raise_model - share * raise_reference)))
        assert low <= value <= high
        ratio = raise_model.sum() / raise_reference.sum()
        assert (value < 0) == (ratio < share)
    # defined where the reference raises nothing (the ratio is not): reference = base gives MAGNET's own raise
    value, _, _ = T5.degeneration_raise_margin(generations, "MAGNET", "base", "base", "rep_4", 0.5,
                                               sets=["5-word prefixes"])
    assert value == pytest.approx(float(np.mean(raise_model)))
    with pytest.raises(ValueError, match="share=0"):
        T5.degeneration_raise_margin(generations, "MAGNET", "LLM2Vec-style", "base", "rep_4", 0)
    with pytest.raises(ValueError, match="no texts of model 'z'"):
        T5.degeneration_raise_margin(generations, "z", "LLM2Vec-style", "base", "rep_4", 0.5)


def test_table_paper_lookups_read_paper():
    assert report.table1_paper()["base (causal)"] == report.PAPER["table1"]["base"]
    assert report.table6_paper_value("MNTP + MSG", "POS") == pytest.approx(93.38)
    assert list(report.ablation_table(_study()).index) == list(report.TABLE6_ROWS)


def test_magnet_beats_llm2vec_style_mntp_only_where_that_baseline_beats_the_causal_base():
    """Table 1's own comparison: LLM2Vec-style [MNTP] is above the base on every task (POS 92.61 against 91.53), so
    the MNTP baseline counts only where its probe beats the base's on that task, never because it beats step 0."""
    names = P.claim_rows(middle=1)

    def central_rows(mntp_correct, base_correct, step0_correct=0.0, magnet_correct=10.0):
        study = _study()
        for row, correct in ((names["mntp"], mntp_correct), (names["base"], base_correct),
                             (names["step0"], step0_correct), (names["magnet"], magnet_correct)):
            for task in P.PROBE_TASKS:
                study.counts[row][task]["correct"] = np.full(study.n, correct)
        rows = _study_claims(infilling=_infilling(), generations=_generations(), probes=study, rows=names)
        return [row for row in rows if row.id.endswith(".vs_llm2vec_mntp")]

    working = central_rows(mntp_correct=6.0, base_correct=3.0)  # MNTP above the causal base
    assert len(working) == 3 and all(row.baseline_works is True and row.verdict == "reproduced" for row in working)
    broken = central_rows(mntp_correct=3.0, base_correct=6.0)  # MNTP above step 0 but below the causal base
    assert all(row.baseline_works is False and row.verdict == "inconclusive" for row in broken)
    assert all("was not shown to work" in row.verdict_text for row in broken)
    assert all("step 0" not in report.CLAIMS[row.id].baseline_must_beat for row in broken)


def test_magnets_raise_margin_counts_only_where_the_llm2vec_style_adaptation_raised_repetition():
    rows = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                         rows=P.claim_rows(middle=1))
    by_id = {row.id: row for row in rows}
    raised = by_id["magnet.table5.rep_4.llm2vec_vs_base.five_word_prefixes"]
    margin = by_id["magnet.table5.rep_4.magnet_raise_margin.five_word_prefixes"]
    assert margin.baseline_works is (raised.low > 0)
    # the synthetic LLM2Vec-style texts repeat no sentence: no Rep-Sen raise, so its margin cannot be decided
    rep_sen = by_id["magnet.table5.rep_sen.magnet_raise_margin.five_word_prefixes"]
    assert rep_sen.baseline_works is False and rep_sen.verdict == "inconclusive"


def test_table1s_rows_against_llm2vec_style_mntp_read_the_gap_between_the_two_adapters_curves():
    """Both adapters still rising alike: neither curve is shown stopped, their gap is, so the rows against
    LLM2Vec-style MNTP can read "no" while the rows against the base (MAGNET's own curve) cannot; without notebook
    02's curve the gap rows carry none."""
    rising = [(5 * k, 0.1 + 0.03 * math.log1p(5 * k)) for k in range(21)]
    ahead = [(step, value + 0.02) for step, value in rising]
    rows = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                         rows=P.claim_rows(middle=1), heldout=ahead, mntp_heldout=rising)
    by_id = {row.id: row for row in rows}
    for task in ("chunking", "ner", "pos"):
        gap = by_id[f"magnet.table1.{task}.vs_llm2vec_mntp"]
        assert gap.plateau["against"] == [pytest.approx(list(point)) for point in rising]
        assert not gap.still_improving and "gap stopped changing" in gap.budget_text
        assert by_id[f"magnet.table1.{task}.vs_base"].still_improving
    alone = _study_claims(infilling=_infilling(), generations=_generations(), probes=_study(),
                          rows=P.claim_rows(middle=1), heldout=ahead, mntp_heldout=None)
    assert all(row.plateau is None for row in alone if row.id.endswith(".vs_llm2vec_mntp"))
