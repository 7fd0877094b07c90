"""MAGNET Table 1 (seed 000): word spans behind BOS, entity F1 from per-sentence counts, paired probe intervals, and
probe studies that read the requested layer and shift."""
import random

import numpy as np
import pytest
import torch

from helpers import masks as M
from helpers import metrics
from helpers.papers.magnet import experiment_table1 as P
from helpers.papers.magnet.mechanism import pool_words
from helpers.papers.magnet.settings import SETTINGS


def test_word_token_spans_cover_every_token_after_bos(tiny):
    _, tokenizer = tiny
    words = ["Mr.", "Darcy", "was", "n't", "amused", "."]
    ids, spans = P.word_token_spans(tokenizer, words)
    assert ids[0] == tokenizer.bos_token_id and spans[0][0] == 1 and spans[-1][1] == len(ids)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert tokenizer.decode(ids[spans[1][0]:spans[1][1]]).strip() == "Darcy"


def test_entity_counts_give_seqeval_f1():
    generator = torch.Generator().manual_seed(0)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    gold, predicted = [], []
    for _ in range(200):
        length = int(torch.randint(1, 12, (1,), generator=generator))
        gold.append([tags[i] for i in torch.randint(0, 5, (length,), generator=generator).tolist()])
        predicted.append([tags[i] for i in torch.randint(0, 5, (length,), generator=generator).tolist()])
    counts = metrics.entity_counts(gold, predicted)
    tp, n_predicted, n_gold = (sum(c[i] for c in counts) for i in range(3))
    assert 2 * tp / (n_predicted + n_gold) == pytest.approx(metrics.seqeval_f1(gold, predicted))
    assert metrics.entity_counts([["B-X", "I-X", "I-Y", "B-X"]], [["B-X", "I-X", "O", "B-X"]]) == [(2, 2, 2)]


def test_probe_study_differences_are_paired_over_sentences():
    def counts(correct):
        correct = np.array(correct, dtype=float)
        return {"correct": correct, "tags": np.full(len(correct), 4.0), "tp": correct, "predicted": np.full(len(correct), 2.0),
                "gold": np.full(len(correct), 2.0)}

    base = [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
    study = P.ProbeStudy({"a": {t: counts(base) for t in P.PROBE_TASKS},
                          "b": {t: counts([min(4, c + 1) for c in base]) for t in P.PROBE_TASKS}}, n=10)
    value, low, high = study.interval("a", "POS")
    assert value == pytest.approx(100 * 20 / 40) and low < value < high
    difference, d_low, d_high = study.difference("b", "a", "POS")
    assert difference == pytest.approx(100 * 8 / 40) and d_low > 0  # every sentence improves: the paired interval excludes 0
    with pytest.raises(ValueError, match="metric='F1' for task='POS'"):
        study.interval("a", "POS", "F1")


def test_word_probe_study_reads_the_requested_layer_and_shift(tiny):
    model, tokenizer = tiny
    from helpers.data import LabelledSentence

    def sentence(words, pos):
        return LabelledSentence(tuple(words), tuple(pos), tuple("O" for _ in words), tuple("O" for _ in words))

    train = [sentence(["the", "dog", "ran"], ["DET", "NOUN", "VERB"]), sentence(["a", "cat", "sat"], ["DET", "NOUN", "VERB"])] * 4
    test = [sentence(["the", "cat", "ran"], ["DET", "NOUN", "VERB"])] * 3
    settings = SETTINGS["smoke"]
    readouts = {"last": P.ProbeReadout("m"), "mid, no shift": P.ProbeReadout("m", 2, shift=False)}
    study = P.word_probe_study({"m": (model, M.bidirectional)}, readouts, tokenizer, train, test, settings, progress=False)
    assert set(study.counts) == {"majority tag (chance)", "last", "mid, no shift"} and study.n == 3
    assert study.interval("majority tag (chance)", "NER")[0] == 100.0
    states, spans = P.word_hidden_states(model, tokenizer, [["the", "cat"]], mask=M.bidirectional, layers=(2, -1))
    features = P.word_features(model, tokenizer, [["the", "cat"]], mask=M.bidirectional, shift=False, layer=2)
    assert torch.allclose(features[0], pool_words(states[2][0], spans[0], shift=False))
    with pytest.raises(ValueError, match="readouts name models"):
        P.word_probe_study({}, readouts, tokenizer, train, test, settings, progress=False)


def test_word_states_are_each_sentences_own_despite_length_sorted_batches(tiny):
    model, tokenizer = tiny
    sentences = [["a", "long", "sentence", "of", "several", "words", "here"], ["short"], ["three", "words", "now"],
                 ["the", "first", "one", "is", "longer"]]
    states, spans = P.word_hidden_states(model, tokenizer, sentences, mask=M.causal, layers=(-1,), batch_size=2)
    for index, words in enumerate(sentences):  # alone, unpadded: the same states, in the caller's order
        alone, alone_spans = P.word_hidden_states(model, tokenizer, [words], mask=M.causal, layers=(-1,))
        assert spans[index] == alone_spans[0]
        assert torch.allclose(states[-1][index], alone[-1][0], atol=1e-5)


def test_the_claims_name_rows_the_readouts_define():
    readouts = P.table1_readouts(middle=15)
    roles = P.claim_rows(middle=15)
    assert set(roles.values()) <= set(readouts)
    assert readouts[roles["base_mid"]] == P.ProbeReadout("base", 15, shift=False)
    assert readouts[roles["step0"]] == P.ProbeReadout("step 0") and readouts[roles["magnet"]].shift


def test_the_word_probe_beats_the_majority_tag_exactly_where_the_features_carry_the_tag(tiny):
    """A planted case for Table 1's probe rows (§4.1 pooling with the i-1 shift, under the bidirectional mask): a tag
    that is a function of the word is in the features, so the probe must beat the majority tag by far; a tag drawn at
    random for every token is not, so the probe must not. A probe difference between two models then measures what
    their features carry, not the probe."""
    from helpers.data import LabelledSentence

    model, tokenizer = tiny
    nouns, verbs = ["cat", "dog", "bird", "horse"], ["ran", "sat", "flew", "slept"]
    generator = random.Random(0)

    def sentences(count, lexical):
        out = []
        for _ in range(count):
            words = [generator.choice(nouns), generator.choice(verbs), generator.choice(nouns), generator.choice(verbs)]
            tags = (["NOUN", "VERB", "NOUN", "VERB"] if lexical else [generator.choice(["NOUN", "VERB"]) for _ in words])
            out.append(LabelledSentence(tuple(words), tuple(tags), ("O",) * 4, ("O",) * 4))
        return out

    settings = SETTINGS["smoke"]
    readouts = {"MAGNET-style readout": P.ProbeReadout("m")}
    gains = {}
    for lexical in (True, False):
        study = P.word_probe_study({"m": (model, M.bidirectional)}, readouts, tokenizer, sentences(40, lexical),
                                   sentences(40, lexical), settings, progress=False)
        gains[lexical] = study.difference("MAGNET-style readout", P.CHANCE_ROW, "POS")
    assert gains[True][1] > 25  # the tag is in the features: the probe reads it, far above the majority tag
    assert gains[False][1] < 0 < gains[False][2]  # nothing to read: the interval holds the majority tag
