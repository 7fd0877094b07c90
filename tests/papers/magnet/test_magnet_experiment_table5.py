"""MAGNET Table 5 and Fig. 6 (seed 000): Rep-n of greedy generations (§4.4, Eq. 6) against hand counts, generations of
exactly the requested length, and differences paired over prefixes."""
import pytest

from helpers import metrics, models
from helpers.papers.magnet import experiment_table5 as R


def test_rep_n_metrics_match_hand_counts():
    tokens = "a b c a b c a b".split()  # 4-grams: abca bcab cabc abca bcab -> 5, of which 3 unique
    assert metrics.rep_n(tokens, 4) == pytest.approx(1 - 3 / 5)
    assert metrics.rep_n("a b c d e".split(), 4) == 0.0
    assert metrics.rep_sen(["It rained.", "We stayed in.", "It rained."]) == pytest.approx(1 - 2 / 3)
    assert metrics.distinct_n(["a b c d a b c d".split(), "x y z w".split()], 4) == pytest.approx(5 / 6)
    generations = [{"text": "It rained. It rained. It rained. Then it stopped.", "continuation_ids": [1, 2, 3, 4, 1, 2, 3, 4]},
                   {"text": "All was well.", "continuation_ids": [5, 6, 7, 8, 9]}]
    scores = R.degeneration_scores(generations)
    assert scores["rep_sen"] == pytest.approx((1 - 2 / 4 + 0) / 2)
    assert scores["rep_4"] == pytest.approx(((1 - 4 / 5) + 0) / 2)
    assert scores["distinct_4"] == pytest.approx(6 / 7)


def test_generation_has_exactly_the_requested_length(tiny):
    model, tokenizer = tiny
    out = R.generate(model, tokenizer, ["It is a truth", "Emma Woodhouse, handsome, clever, and rich"], max_new_tokens=7)
    assert [len(g["continuation_ids"]) for g in out] == [7, 7]
    assert out[0]["text"].startswith("It is a truth")


def test_degeneration_difference_is_paired_over_prefixes():
    def texts(rep):
        return [{"text": "A b.", "continuation_ids": ids} for ids in rep]

    looping, fresh = [1, 2, 3, 4] * 3, list(range(12))
    generations = {("x", "s"): texts([looping, looping, fresh]), ("y", "s"): texts([fresh, fresh, fresh])}
    value, low, high = R.degeneration_difference(generations, "x", "y", "rep_4")
    assert value == pytest.approx(2 * (1 - 4 / 9) / 3) and low >= 0
    with pytest.raises(ValueError, match="no texts of model 'z'"):
        R.degeneration_difference(generations, "x", "z", "rep_4")


def test_bad_inputs_raise_clear_errors(tiny):
    model, tokenizer = tiny
    limit = models.max_positions(model)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        R.generate(model, tokenizer, ["It is a truth universally acknowledged"], max_new_tokens=limit)
    with pytest.raises(ValueError, match=r"prefixes\[0\] has"):
        R.generate(model, tokenizer, [" ".join(["word"] * (limit + 5))], max_new_tokens=1)
