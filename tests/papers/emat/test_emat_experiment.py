"""EMAT's evaluation (seed 004): the closed-vocabulary baselines, accuracy@k by gold length with intervals, the
Completer's checks, and how closed a ranking is on the training labels."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from helpers.papers.emat import experiment, mechanism, settings

SETTINGS = settings.SETTINGS["smoke"]


def test_closed_vocabulary_baseline_ranks_phrases_by_the_first_token_probability(tiny_mlm):
    phrases = ["Mr. Darcy", "Mrs. Bennet", "Elizabeth", "she", "Netherfield Park"]
    prior = Counter({"Mrs. Bennet": 5, "Mr. Darcy": 2})
    baseline = experiment.ClosedVocabularyMLM(tiny_mlm, phrases, prior)
    hidden, _ = tiny_mlm.features(["It was [MASK] who spoke first."])
    probabilities = tiny_mlm.token_logits(hidden).softmax(-1)[0]
    first = {p: tiny_mlm.tokenizer(" " + p, add_special_tokens=False).input_ids[0] for p in phrases}
    ranked = baseline.complete(hidden, k=len(phrases))[0]
    assert sorted(text for text, _ in ranked) == sorted(phrases)
    for text, score in ranked:
        assert score == pytest.approx(float(probabilities[first[text]]))
    assert [score for _, score in ranked] == sorted((score for _, score in ranked), reverse=True)
    if first["Mr. Darcy"] == first["Mrs. Bennet"]:  # a shared first token: the more frequent label first
        names = [text for text, _ in ranked]
        assert names.index("Mrs. Bennet") < names.index("Mr. Darcy")
    prior_only = experiment.LabelPrior(phrases, prior).complete(torch.zeros(2, tiny_mlm.hidden_size), k=2)
    assert [[text for text, _ in row] for row in prior_only] == [["Mrs. Bennet", "Mr. Darcy"]] * 2


def test_accuracy_intervals_split_by_gold_length_and_contain_the_value():
    ranked = [[("a", 1.0)], [("x", 1.0)], [("b c", 1.0)], [("b c", 1.0)]]
    gold, lengths = ["a", "b", "b c", "d e"], [1, 1, 2, 2]
    scores = experiment.score_ranking(ranked, gold, lengths, (1,), None)
    assert scores["hits"][1] == [1, 0, 1, 0]
    table = experiment.accuracy_intervals({"emat": {"test": scores}}, ks=(1,), resamples=200)
    assert table["emat"]["all"][1][0] == 0.5 and table["emat"]["all"][1][3] == 4
    assert table["emat"]["single-token"][1][0] == 0.5 and table["emat"]["multi-token"][1][3] == 2
    for group in experiment.LENGTH_GROUPS:
        value, low, high, _ = table["emat"][group][1]
        assert low <= value <= high
    assert experiment.group_rows(lengths, "multi-token") == [2, 3]
    with pytest.raises(ValueError, match="group='long'"):
        experiment.group_rows(lengths, "long")


def test_completer_rejects_bad_k_method_and_masks(tiny_mlm, tiny_gru):
    emat = mechanism.build_emat(tiny_mlm, ["Mr. Darcy"])
    completer = experiment.Completer(tiny_mlm, emat, tiny_gru(), mechanism.LengthClassifier(tiny_mlm.hidden_size),
                                     SETTINGS, max_steps=3)
    with pytest.raises(ValueError, match="k=0"):
        completer.complete("It was [MASK].", "emat", k=0)
    with pytest.raises(ValueError, match="method='emat_new_rows'"):  # only when the ablation EMAT is given
        completer.complete("It was [MASK].", "emat_new_rows", k=3)
    with pytest.raises(ValueError, match="method='mlm_vocab'"):  # only when the baseline is given
        completer.complete("It was [MASK].", "mlm_vocab", k=3)
    with pytest.raises(ValueError, match="method='t5'"):
        completer.complete("It was [MASK].", "t5", k=3)
    with pytest.raises(ValueError, match="sentence=.*0 times"):
        completer.complete("No mask here.", "gru", k=3)
    with pytest.raises(ValueError, match="sentence=.*2 times"):
        completer.complete(["It was [MASK].", "[MASK] and [MASK]."], "mlm", k=3)


def test_training_label_share_counts_top_k_items_that_are_training_labels():
    ranked = [[("she", 0.5), ("Darcy", 0.3), ("xyz", 0.2)], [("Darcy", 0.9), ("abc", 0.1)]]
    assert experiment.training_label_share(ranked, {"she", "Darcy"}, k=2) == 0.75  # she, Darcy | Darcy, abc
    assert experiment.training_label_share(ranked, {"she", "Darcy"}, k=3) == 0.6


def test_paper_sized_emat_extends_the_output_matrix_by_random_rows_and_is_timed_beside_the_forward(tiny_mlm, tiny_gru):
    big = experiment.paper_sized_emat(tiny_mlm, 5_000, seed=3)
    vocab = tiny_mlm.output_matrix.shape[0]
    hidden, _ = tiny_mlm.features(["It was [MASK] who spoke first."])
    logits = big(hidden)
    assert logits.shape == (1, vocab + 5_000) and len(big.phrases) == 5_000
    torch.testing.assert_close(logits[:, :vocab], tiny_mlm.token_logits(hidden))  # the token rows are the masked LM's
    torch.testing.assert_close(experiment.paper_sized_emat(tiny_mlm, 5_000, seed=3).phrase_matrix,
                               big.phrase_matrix)  # seeded: the same matrix in every run
    completer = experiment.Completer(tiny_mlm, mechanism.build_emat(tiny_mlm, ["Mr. Darcy"]), tiny_gru(),
                                     mechanism.LengthClassifier(tiny_mlm.hidden_size), SETTINGS, max_steps=3)
    sentences = ["It was [MASK] who spoke first.", "She met [MASK] there."]
    latency = experiment.measure_latency(completer, sentences, methods=["mlm", "emat"], trials=1, progress=False,
                                         paper_sized=big)
    assert latency[experiment.PAPER_SIZED_ROWS] == 5_000
    assert len(latency["samples"][experiment.PAPER_SIZED]) == 2 and latency[experiment.PAPER_SIZED] > 0
    value, low, high, n = experiment.latency_ratio(latency, experiment.PAPER_SIZED, "forward", resamples=100)
    assert n == 2 and low <= value <= high
    assert experiment.latency_method(latency).startswith("1 interleaved trials × 1 processes: bootstrap over sentences")
    # two fresh processes of two trials each: every process times every sentence, and the interval nests them
    several = experiment.measure_latency(completer, sentences, methods=["emat"], trials=2, processes=2, progress=False)
    assert [len(run) for run in several["runs"]["emat"]] == [2, 2] and several["trials"] == 2
    assert several["samples"]["emat"] == pytest.approx([sum(run[i] for run in several["runs"]["emat"]) / 2
                                                        for i in range(2)])
    value, low, high, n = experiment.latency_ratio(several, "emat", "forward", resamples=100)
    assert n == 2 and low <= value <= high
    assert "2 interleaved trials × 2 processes: t over process ratios" in experiment.latency_method(several)
    with pytest.raises(ValueError, match="processes=0"):
        experiment.measure_latency(completer, sentences, processes=0, progress=False)
    with pytest.raises(ValueError, match="rows=0"):
        experiment.paper_sized_emat(tiny_mlm, 0)


def test_latency_ratios_nest_sentences_and_trials_in_processes():
    """Two processes timing the same sentences: the ratio is the mean of the processes' ratios of medians, and its
    interval at least as wide as the t interval over those ratios (run-to-run variance) and each process's own."""
    from helpers import metrics

    forward = [10.0, 10.5, 9.5, 10.2, 9.8]
    runs = {"forward": [forward, forward], "gru": [[f * 2.0 for f in forward], [f * 2.4 for f in forward]]}
    latency = {"runs": runs, "trials": 10, "samples": {name: [sum(v) / 2 for v in zip(*per)] for name, per in runs.items()}}
    value, low, high, n = experiment.latency_ratio(latency, "gru", "forward", resamples=200)
    assert value == pytest.approx(2.2) and n == 5
    assert high - value >= metrics.mean_ci95([2.0, 2.4])[1] - 1e-9
    assert "10 interleaved trials × 2 processes" in experiment.latency_method(latency)
