"""Notebook 06's claims, declared once (:data:`CLAIMS`, read by :mod:`helpers.ledger`), and the paper's numbers they
quote (Tables 1-3, §4.1, §5.2); the rows are measured in :mod:`.report`."""
from __future__ import annotations

from ...ledger import MEASUREMENT, REFERENCE, Declared, declare
from .experiment import METHOD_LABELS
from .settings import EMAT_CURVE, EMAT_NEW_ROWS_CURVE, GRU_CURVE

# ---------------------------------------------------------------------------------------------
# The paper's numbers (seed 004)
# ---------------------------------------------------------------------------------------------

PAPER_TABLE1 = {  # % of phrases by number of BERT-cased tokens / words (Table 1)
    "tokens": {"1": 10.2, "2": 52.9, "3": 23.0, "4": 9.5, "5": 2.8, ">5": 1.6},
    "words": {"1": 53.3, "2": 38.3, "3": 5.4, "4": 2.1, "5": 0.5, ">5": 0.4},
}
PAPER_VOCABULARY = {"phrases": 93_000, "k": 500, "sentences per phrase": 50, "corpus words": 3.3e9}  # §3, §4.1
PAPER_TABLE2 = {  # coverage %, then accuracy@k as (within coverage, over the whole test set), in %
    "BERT-cased": {"coverage": 13.8, 1: (13.5, 1.8), 3: (21.8, 3.0), 5: (25.9, 3.5), 10: (31.2, 4.3), 50: (43.1, 5.9)},
    "Naive-MTC-BERT": {"coverage": 66.1, 1: (6.6, 4.3), 3: (11.9, 7.8), 5: (14.9, 9.8), 10: (19.5, 12.8),
                       50: (32.3, 21.3)},
}
PAPER_LENGTH_CLASSIFIER_ACCURACY = 64.7  # §5.2: "The model reaches 64.7% accuracy on the test set"
PAPER_TABLE3 = {  # accuracy@k in %, inference ms per sentence on an Nvidia T4 (Table 3)
    "BERT-Adapted-EMAT": {"ms": 15, 1: 12.64, 3: 20.48, 5: 24.63, 10: 30.65, 50: 45.85},
    "BERT-Adapted-RNN": {"ms": 44, 1: 9.24, 3: 14.64, 5: 17.39, 10: 21.32, 50: 31.28},
    "T5-3B": {"ms": 802, 1: 11.6, 3: 18.5, 5: 21.5, 10: 25.4, 50: float("nan")},
    "T5-base": {"ms": 224, 1: 5.2, 3: 8.3, 5: 9.7, 10: 11.4, 50: 15.6},
}
PAPER_TRAINED_PARAMETERS = {"EMAT": "138M", "RNN": "32M"}  # §4.1 and §4.2, on BERT-base

PAPER_EMAT_MS, PAPER_RNN_MS = PAPER_TABLE3["BERT-Adapted-EMAT"]["ms"], PAPER_TABLE3["BERT-Adapted-RNN"]["ms"]
PAPER_SLOWDOWN = PAPER_RNN_MS / PAPER_EMAT_MS  # Table 3: the RNN decoder's time over EMAT's, on a T4


# The workbook's bar for "EMAT adds only a matrix product" (§4.1, Figure 1 (2)): at most 10% over the path it extends.
LATENCY_BAR = 1.1

# ---------------------------------------------------------------------------------------------
# The claims table: each row notebook 06 records, declared once
# ---------------------------------------------------------------------------------------------

_ACCURACY_FIGURE, _LATENCY_FIGURE = "figures/06_accuracy_at_k.png", "figures/06_latency.png"
DATASET = ("NP chunks and entities (spaCy) of the profile's corpus (Jane Austen's novels at cpu: k = 10, ~980 "
           "phrases, <= 20 masked sentences each), not the paper's Wikipedia + Books corpus (~93K phrases, k = 500, "
           "50 sentences each)")
REGIME = ("timed on this run's machine (CPU cores in the ledger's cpu profile), not the paper's Nvidia T4 GPU: a "
          "matrix product's share of a forward, and a sequential decoder's cost against one product, depend on the "
          "hardware (§5.3: EMAT is faster than the RNN \"because of GPU optimizations\")")

_TESTS = "tests/papers/emat/"
_EMAT_MATRIX = f"{_TESTS}test_emat_mechanism.py::test_emat_extends_the_matrix_without_changing_single_token_predictions"
_EMAT_LEARNS = (f"{_TESTS}test_emat_experiment_training.py::"
                "test_emat_learns_planted_phrases_and_new_rows_only_leave_the_token_rows_as_the_masked_lms")
_GRU = (f"{_TESTS}test_emat_mechanism.py::test_gru_loss_on_live_rows_equals_the_cross_entropy_over_the_padded_batch "
        f"{_TESTS}test_emat_mechanism.py::test_gru_starts_from_the_mask_embedding_in_every_layer "
        f"{_TESTS}test_emat_mechanism.py::test_beam_search_scores_are_the_sequence_log_probabilities_and_sorted")
_NAIVE = (f"{_TESTS}test_emat_mechanism.py::test_naive_mtc_with_a_sure_length_of_one_is_the_single_token_mlm "
          f"{_TESTS}test_emat_mechanism.py::test_naive_mtc_two_token_scores_are_products_of_the_two_mask_fills "
          f"{_TESTS}test_emat_mechanism.py::test_naive_mtc_completes_the_second_mask_over_the_whole_vocabulary")
_CLOSED = f"{_TESTS}test_emat_experiment.py::test_closed_vocabulary_baseline_ranks_phrases_by_the_first_token_probability"
_SCORING = (f"{_TESTS}test_emat_mechanism.py::test_accuracy_at_k_on_hand_made_rankings "
            f"{_TESTS}test_emat_experiment.py::test_accuracy_intervals_split_by_gold_length_and_contain_the_value")
_TIMING = (f"{_TESTS}test_emat_experiment.py::"
           "test_paper_sized_emat_extends_the_output_matrix_by_random_rows_and_is_timed_beside_the_forward")

_EMAT_A1, _RNN_A1 = PAPER_TABLE3["BERT-Adapted-EMAT"][1], PAPER_TABLE3["BERT-Adapted-RNN"][1]
_RNN_A10, _NAIVE_A10 = PAPER_TABLE3["BERT-Adapted-RNN"][10], PAPER_TABLE2["Naive-MTC-BERT"][10][1]
_NAIVE_A1, _BERT_A10 = PAPER_TABLE2["Naive-MTC-BERT"][1][1], PAPER_TABLE2["BERT-cased"][10][1]
# What each baseline must beat, from the paper's own comparisons, at a@10 over the whole test set (the paper's gaps at
# a@1, 9.24 vs 4.3 and 4.3 vs 1.8 points, are within what 160 test sentences resolve; at a@10 they are wider).
GRU_MUST_BEAT = (f"naive MTC at a@10 over the whole test set (Tables 2-3: BERT-Adapted-RNN {_RNN_A10:g}% vs "
                 f"Naive-MTC-BERT {_NAIVE_A10:g}%; §5.3: the RNN plugin \"performs better than existing solutions "
                 "comparable in size\")")
NAIVE_MUST_BEAT = (f"the single-token MLM at a@10 over the whole test set (Table 2: Naive-MTC-BERT {_NAIVE_A10:g}% vs "
                   f"BERT-cased {_BERT_A10:g}%)")
CLOSED_MUST_BEAT = (f"the single-token MLM at a@10 over the whole test set (Table 2's comparison: the MLM read over "
                    f"multi-token units, Naive-MTC-BERT {_NAIVE_A10:g}%, beats its single-token completion, BERT-cased "
                    f"{_BERT_A10:g}%)")
NEW_ROWS_MUST_BEAT = ("its own dev a@1 where its training began: the head must have learned its new rows, as the "
                      "paper's trained EMAT does (Table 3), i.e. its mean dev a@1 over the last half of training lies "
                      "above its first evaluation")
BASELINE_K = 10


# tests/breaks.py: the mistake every row scored by accuracy@k (its check names _SCORING) must catch
SCORING_BREAKS = "emat.accuracy_off_by_one"


def _declared(id, where, says, paper_value, quantity, **fields):
    if _SCORING in fields.get("check", ""):
        fields.setdefault("breaks", SCORING_BREAKS)
    return Declared(id=id, notebook="06", paper="004", where=where, says=says, paper_value=paper_value,
                    quantity=quantity, dataset=DATASET, **fields)


_vs_gru = dict(check=f"{_EMAT_MATRIX} {_EMAT_LEARNS} {_GRU} {_SCORING}", figure=_ACCURACY_FIGURE, trained=True,
               curve=EMAT_CURVE, baseline=METHOD_LABELS["gru"], baseline_must_beat=GRU_MUST_BEAT)

CLAIMS = declare(
    _declared("emat.table1.one_token_share", "Table 1 (#tokens = 1)",
              "share of the completion vocabulary's phrases that are one token",
              f"{PAPER_TABLE1['tokens']['1']}% (BERT cased; 36.9% are 3+ tokens)",
              "one-token phrases, % of the vocabulary", kind=MEASUREMENT, direction=0),
    _declared("emat.table2.coverage.mlm", "Table 2 (coverage, BERT-cased)",
              "share of test sentences the single-token MLM can complete (the gold label is one token)",
              f"{PAPER_TABLE2['BERT-cased']['coverage']}%", "coverage of the single-token MLM, %",
              kind=MEASUREMENT, direction=0),
    _declared("emat.table2.coverage.naive", "Table 2 (coverage, Naive-MTC-BERT)",
              "share of test sentences naive MTC can complete (the gold label is one or two tokens)",
              f"{PAPER_TABLE2['Naive-MTC-BERT']['coverage']}%", "coverage of naive MTC, %",
              kind=MEASUREMENT, direction=0),
    _declared("emat.sec5_2.length_classifier", "§5.2 (length classifier)",
              "naive MTC's length classifier (1, 2, 3+ tokens) gets the class right",
              f"{PAPER_LENGTH_CLASSIFIER_ACCURACY}% (a fine-tuned BERT; classes 10/53/37%)",
              "length classifier accuracy, %", kind=MEASUREMENT, direction=0),
    _declared("emat.table2.naive_vs_mlm", "Table 2 (whole test set)",
              "naive MTC beats the single-token MLM over the whole test set: it can complete multi-token phrases",
              f"{_NAIVE_A10:g}% vs {_BERT_A10:g}% at a@10 ({_NAIVE_A1:g}% vs {PAPER_TABLE2['BERT-cased'][1][1]:g}% "
              "at a@1)", f"a@{BASELINE_K} naive - mlm, points (all)", check=f"{_NAIVE} {_SCORING}",
              figure=_ACCURACY_FIGURE, paper_effect=round(_NAIVE_A10 - _BERT_A10, 2)),
    _declared("emat.table3.gru_vs_naive", "Tables 2-3 (whole test set)",
              "the RNN plugin performs better than existing solutions comparable in size (naive MTC with the same "
              "masked LM)", f"{_RNN_A10:g}% vs {_NAIVE_A10:g}% at a@10 ({_RNN_A1:g}% vs {_NAIVE_A1:g}% at a@1)",
              f"a@{BASELINE_K} gru - naive, points (all)", check=f"{_GRU} {_NAIVE} {_SCORING}",
              figure=_ACCURACY_FIGURE, trained=True, curve=GRU_CURVE, paper_effect=round(_RNN_A10 - _NAIVE_A10, 2)),
    _declared("emat.ref.mlm_vocab_vs_mlm", "baseline (the MLM's first token over the phrases)",
              "ranking the vocabulary's phrases by the masked LM's first-token probability beats its single-token "
              "completion over the whole test set", f"not reported (the analogue of Table 2's Naive-MTC-BERT "
              f"{_NAIVE_A10:g}% vs BERT-cased {_BERT_A10:g}% at a@10)", f"a@{BASELINE_K} mlm_vocab - mlm, points (all)",
              kind=MEASUREMENT, direction=0, figure=_ACCURACY_FIGURE),
    _declared("emat.table3.vs_gru.a1", "Table 3", "EMAT beats the RNN decoder at a@1",
              f"{_EMAT_A1:g}% vs {_RNN_A1:g}%", "a@1 emat - gru, points (all)",
              paper_effect=round(_EMAT_A1 - _RNN_A1, 2), **_vs_gru),
    _declared("emat.table3.vs_gru.a1.multi_token", "Table 3 (multi-token gold only)",
              "EMAT beats the RNN decoder at a@1 on labels of two or more tokens",
              f"not reported by length (all lengths: {_EMAT_A1:g}% vs {_RNN_A1:g}%)",
              "a@1 emat - gru, points (multi-token)", kind=REFERENCE, **_vs_gru),
    _declared("emat.table3.vs_gru.a10.multi_token", "Table 3 (multi-token gold only)",
              "EMAT beats the RNN decoder at a@10 on labels of two or more tokens",
              f"not reported by length (all lengths: {PAPER_TABLE3['BERT-Adapted-EMAT'][10]:g}% vs {_RNN_A10:g}%)",
              "a@10 emat - gru, points (multi-token)", kind=REFERENCE, **_vs_gru),
    _declared("emat.tables2_3.vs_naive.a1", "Tables 2-3", "EMAT beats naive MTC with the same masked LM (whole test set)",
              f"{_EMAT_A1:g}% vs {_NAIVE_A1:g}%", "a@1 emat - naive, points (all)",
              check=f"{_EMAT_MATRIX} {_EMAT_LEARNS} {_NAIVE} {_SCORING}", figure=_ACCURACY_FIGURE, trained=True,
              curve=EMAT_CURVE, baseline=METHOD_LABELS["naive"], baseline_must_beat=NAIVE_MUST_BEAT,
              paper_effect=round(_EMAT_A1 - _NAIVE_A1, 2)),
    _declared("emat.ref.vs_mlm_vocab.a10", "§4.1 (a trained head over a closed vocabulary)",
              "EMAT beats the untrained masked LM's first-token ranking over the same phrases",
              "not reported (the paper trains EMAT over its phrases and compares no untrained ranking of them)",
              "a@10 emat - mlm_vocab, points (all)", kind=REFERENCE,
              check=f"{_EMAT_MATRIX} {_EMAT_LEARNS} {_CLOSED} {_SCORING}", figure=_ACCURACY_FIGURE, trained=True,
              curve=EMAT_CURVE, baseline=METHOD_LABELS["mlm_vocab"], baseline_must_beat=CLOSED_MUST_BEAT),
    _declared("emat.ref.new_rows_only.unseen_a50", "§4.1 (which rows train; public matrix_plugin trains all)",
              "training only the new rows keeps the masked LM's reach on phrases never seen as labels",
              "not reported (the paper trains the extended matrix; the public matrix_plugin trains all its rows)",
              "unseen a@50 emat_new_rows - emat, points", kind=REFERENCE,
              check=f"{_EMAT_MATRIX} {_EMAT_LEARNS} {_SCORING}", figure=_ACCURACY_FIGURE, trained=True,
              curve=EMAT_NEW_ROWS_CURVE, baseline=METHOD_LABELS["emat_new_rows"],
              baseline_must_beat=NEW_ROWS_MUST_BEAT),
    _declared("emat.table3.inf_time.gru_over_emat", "Table 3 (Inf-time)", "the RNN decoder is slower than EMAT",
              f"{PAPER_RNN_MS} / {PAPER_EMAT_MS} ms = {PAPER_SLOWDOWN:.2f}x (T4)", "GRU time / EMAT time", direction=1,
              threshold=1.0, paper_effect=round(PAPER_SLOWDOWN - 1.0, 2), check=f"{_TIMING} {_GRU}",
              breaks="emat.gru_decodes_one_step emat.phrase_rows_not_multiplied", figure=_LATENCY_FIGURE,
              regime=REGIME),
    *[_declared(f"emat.sec4_1.paper_sized_overhead.{denominator}", "§4.1 / Table 3 (EMAT adds only a matrix product)",
                f"EMAT with a paper-sized matrix ({PAPER_VOCABULARY['phrases']:,} new rows) costs at most "
                f"{LATENCY_BAR}x {label}",
                f"EMAT {PAPER_EMAT_MS} ms per sentence with ~93K phrases on a T4 (Table 3; no bare forward reported; the "
                f"{LATENCY_BAR}x bar is ours)", f"EMAT ({PAPER_VOCABULARY['phrases']} rows) time / {denominator} time",
                direction=-1, threshold=LATENCY_BAR, check=f"{_TIMING} {_EMAT_MATRIX}",
                breaks="emat.phrase_rows_not_multiplied", figure=_LATENCY_FIGURE,
                regime=REGIME)
      for denominator, label in (("forward", "the bare masked-LM forward"), ("mlm", "the single-token MLM path"))],
)
