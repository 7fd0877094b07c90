"""Multi-token completion (EMAT paper, seed 004): accuracy@k, the phrase vocabulary, the unseen split,
EMAT's extended matrix, the GRU decoder's beam search, naive MTC and the bad-input errors."""
from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
import torch

from helpers import attention, models, mtc, profiles
from helpers import masks as M
from helpers.masked_lm import EncoderMLM, MNTPDecoder
from helpers.plots import mtc as mtc_plots

SETTINGS = mtc.SETTINGS["smoke"]


# --- accuracy@k (§5: "the percentage of masked sentences where the label is among the top-k predictions") ---


def test_accuracy_at_k_on_hand_made_rankings():
    ranked = [
        [("Mr. Darcy", 0.5), ("Darcy", 0.3), ("he", 0.1)],  # gold first
        [("she", 0.6), ("Elizabeth", 0.2), ("her sister", 0.1)],  # gold third
        [("it", 0.9)],  # gold absent
        ["the house", "Netherfield Park"],  # plain strings work too; gold second
    ]
    gold = ["Mr. Darcy", "her sister", "Pemberley", " Netherfield Park "]  # labels are compared stripped
    scores = mtc.accuracy(ranked, gold, ks=(1, 2, 3, 50))
    assert scores == {1: 0.25, 2: 0.5, 3: 0.75, 50: 0.75}


def test_accuracy_rejects_k_below_one():
    with pytest.raises(ValueError, match="k=0"):
        mtc.accuracy([["a"]], ["a"], ks=(0,))


def test_rank_candidates_keeps_the_best_score_of_each_distinct_string():
    scores = torch.tensor([[0.1, 0.4, 0.3, 0.2, 0.0, 0.35]])
    candidates = ["Jane", "Elizabeth", "Elizabeth", "", "Kitty", ","]  # a duplicate, a special token, punctuation
    ranked = mtc.rank_candidates(scores, candidates, k=3)
    assert [text for text, _ in ranked[0]] == ["Elizabeth", "Jane", "Kitty"]
    assert ranked[0][0][1] == pytest.approx(0.4)


@pytest.mark.parametrize("k", [0, -3, 1.5, True])
def test_rank_candidates_rejects_non_positive_k(k):
    with pytest.raises(ValueError, match="k="):
        mtc.rank_candidates(torch.zeros(1, 3), ["a", "b", "c"], k=k)


# --- the vocabulary (§3): frequency cut-off and determiner trimming -----------------------------------


def test_frequency_cut_off_keeps_exactly_the_phrases_with_at_least_k_occurrences():
    counts = Counter({"Mr. Darcy": 5, "Longbourn": 3, "her sister": 3, "Kitty": 2, "Lydia": 1})
    assert mtc.build_vocabulary(counts, 3) == ["Mr. Darcy", "Longbourn", "her sister"]  # by count, then alphabetical
    assert mtc.build_vocabulary(counts, 1) == ["Mr. Darcy", "Longbourn", "her sister", "Kitty", "Lydia"]


def test_an_empty_vocabulary_is_an_error_naming_k():
    with pytest.raises(ValueError, match="min_count=6.*empty"):
        mtc.build_vocabulary(Counter({"Mr. Darcy": 5}), 6)
    with pytest.raises(ValueError, match="min_count=1.*no phrases"):
        mtc.build_vocabulary(Counter(), 1)
    with pytest.raises(ValueError, match="min_count=0"):
        mtc.build_vocabulary(Counter({"a": 1}), 0)


@pytest.fixture(scope="module")
def nlp():
    from helpers import data

    try:
        return data.spacy_pipeline()
    except Exception as error:  # pragma: no cover - only without the spaCy model package
        pytest.skip(f"spaCy pipeline unavailable: {error}")


def test_leading_determiners_are_trimmed_so_variants_count_as_one_phrase(nlp):
    texts = ["The old house stood empty.", "She saw an old house.", "They bought that old house."]
    spans = [mtc.phrase_spans(doc) for doc in nlp.pipe(texts)]
    counts = mtc.phrase_counts(texts, spans)
    assert counts["old house"] == 3
    assert not any(phrase.split()[0].lower() in {"the", "a", "an", "that", "this"} for phrase in counts)
    assert mtc.build_vocabulary(counts, 3) == ["old house"]


def test_trim_span_removes_only_leading_determiners_and_edge_punctuation(nlp):
    doc = nlp("Every morning the young ladies walked to Meryton.")
    trimmed = {span.text: getattr(mtc.trim_span(span), "text", None) for span in doc.noun_chunks}
    assert trimmed["the young ladies"] == "young ladies"
    assert all(not (value or "").lower().startswith(("the ", "every ")) for value in trimmed.values())


def test_noun_chunks_are_cut_to_their_head_keeping_advmod_amod_compound(nlp):
    doc = nlp("Her younger sister read the very long letter from the village post office.")
    heads = {chunk.text: mtc.head_of_chunk(chunk).text for chunk in doc.noun_chunks}
    assert heads["Her younger sister"] == "younger sister"  # "Her" (poss) dropped, "younger" (amod) kept
    assert heads["the very long letter"] == "very long letter"  # "very" is advmod: kept with its head
    assert heads["the village post office"] == "village post office"  # compounds kept
    for chunk in doc.noun_chunks:  # the first token kept is a kept modifier, or the chunk's last token
        head = mtc.head_of_chunk(chunk)
        assert head[0].dep_ in mtc.HEAD_MODIFIER_DEPS or len(head) == 1
        assert head.end == chunk.end


def test_entities_win_over_noun_chunks_and_pronouns_are_flagged(nlp):
    text = "She met Mr. Darcy at Pemberley House yesterday."
    spans = mtc.phrase_spans(nlp(text))
    phrases = {text[start:end]: pronoun for start, end, pronoun in spans}
    assert phrases.get("She") is True
    assert all(not pronoun for phrase, pronoun in phrases.items() if phrase != "She")
    covered = [set(range(start, end)) for start, end, _ in spans]
    assert all(not a & b for i, a in enumerate(covered) for b in covered[i + 1:])  # no overlapping spans
    assert mtc.pronoun_phrases([text], [spans]) == {"She"}


# --- masked sentences and the unseen split ------------------------------------------------------------


def test_each_sentence_masks_exactly_one_of_its_vocabulary_phrases():
    text = "Jane and Elizabeth walked to Meryton with Kitty."
    spans = [(text.index(name), text.index(name) + len(name), False) for name in ("Jane", "Elizabeth", "Meryton", "Kitty")]
    pairs = [(text, "train"), (text, "train"), ("Kitty laughed.", "train")]
    examples = mtc.masked_examples(pairs, [spans, spans, [(0, 5, False)]], ["Jane", "Elizabeth", "Kitty"], [],
                                   max_per_phrase=5, seed=0)
    sentences = Counter(example.sentence for example in examples["train"])
    assert sentences == Counter({text: 1, "Kitty laughed.": 1})  # one span per unique sentence
    chosen = next(e for e in examples["train"] if e.sentence == text)
    assert chosen.phrase in {"Jane", "Elizabeth", "Kitty"}  # a vocabulary phrase ("Meryton" is not one)


def _synthetic_corpus():
    names = ["Jane", "Elizabeth", "Mary", "Kitty", "Lydia", "Mr. Bennet", "Mrs. Bennet", "Mr. Collins"]
    pairs, spans = [], []
    for i in range(400):
        name = names[i % len(names)]
        text = f"On day {i} {name} walked to Meryton."
        start = text.index(name)
        pairs.append((text, "validation" if i % 20 == 18 else "test" if i % 20 == 19 else "train"))
        spans.append([(start, start + len(name))])
    return pairs, spans, names


def test_the_unseen_split_holds_phrases_that_are_never_a_train_or_dev_label():
    pairs, spans, names = _synthetic_corpus()
    unseen = mtc.choose_unseen_phrases(names, 0.25, seed=3)
    assert len(unseen) == 2
    examples = mtc.masked_examples(pairs, spans, names, unseen, max_per_phrase=30, seed=0)
    labelled = {split: {example.phrase for example in examples[split]} for split in mtc.MTC_SPLITS}
    assert labelled[mtc.UNSEEN] == set(unseen)
    for split in ("train", "validation", "test"):
        assert not labelled[split] & set(unseen)
    assert labelled["train"] == set(names) - set(unseen)
    assert all(example.split == mtc.UNSEEN for example in examples[mtc.UNSEEN])


def test_masked_examples_take_at_most_n_unique_sentences_per_phrase_and_mask_the_phrase():
    pairs, spans, names = _synthetic_corpus()
    pairs += pairs[:40]  # recurring sentences are counted once
    spans += spans[:40]
    examples = mtc.masked_examples(pairs, spans, names, [], max_per_phrase=20, seed=0)
    every = [example for split in mtc.MTC_SPLITS for example in examples[split]]
    per_phrase = Counter(example.phrase for example in every)
    assert set(per_phrase.values()) == {20}
    assert len({(example.sentence, example.phrase) for example in every}) == len(every)
    for example in every:
        assert example.masked.count(mtc.MASK_MARKER) == 1
        assert example.masked.replace(mtc.MASK_MARKER, example.phrase) == example.sentence


def test_examples_keep_their_paragraph_split():
    pairs, spans, names = _synthetic_corpus()
    split_of = dict(pairs)
    examples = mtc.masked_examples(pairs, spans, names, [], max_per_phrase=50, seed=0)
    for split in ("train", "validation", "test"):
        assert all(split_of[example.sentence] == split for example in examples[split])


@pytest.fixture(scope="module")
def smoke_dataset():
    from helpers import data

    try:
        data.load_sentences("austen", "validation", limit=1)
        tokenizer = models.load_tokenizer(profiles.TINY_RANDOM_MODEL)
    except (models.MissingAssetError, ValueError) as error:
        pytest.skip(f"Austen corpus or tokenizer not fetched (run `make setup`): {error}")
    return mtc.build_dataset("austen", SETTINGS, tokenizer, profiles.TINY_RANDOM_MODEL, progress=False)


def test_on_austen_unseen_phrases_are_never_a_label_outside_the_unseen_split(smoke_dataset):
    unseen = set(smoke_dataset.unseen_phrases)
    assert unseen and unseen < set(smoke_dataset.vocabulary)
    labelled = {example.phrase for example in smoke_dataset.examples[mtc.UNSEEN]}
    assert labelled and labelled <= unseen  # one span per sentence: a rare unseen phrase may lose every sentence
    for split in ("train", "validation", "test"):
        assert not {example.phrase for example in smoke_dataset.examples[split]} & unseen


def test_on_austen_every_label_is_a_trimmed_vocabulary_phrase_with_at_least_k_occurrences(smoke_dataset):
    manifest = smoke_dataset.manifest
    assert manifest["k (min_count)"] == SETTINGS.min_count
    assert sum(manifest["tokens per phrase %"].values()) == pytest.approx(100.0)
    assert all(count >= SETTINGS.min_count for _, count in manifest["most frequent"])
    vocabulary = set(smoke_dataset.vocabulary)
    for split in mtc.MTC_SPLITS:
        for example in smoke_dataset.examples[split]:
            assert example.phrase in vocabulary
            assert example.phrase.split()[0].lower() not in {"the", "a", "an"}
    per_phrase = Counter(e.phrase for split in mtc.MTC_SPLITS for e in smoke_dataset.examples[split])
    assert max(per_phrase.values()) <= SETTINGS.max_sentences_per_phrase


def test_length_distribution_uses_table_1_buckets():
    assert mtc.length_distribution([1, 1, 2, 3, 7, 9, 5, 4]) == {"1": 25.0, "2": 12.5, "3": 12.5, "4": 12.5,
                                                                "5": 12.5, ">5": 25.0}


# --- bad inputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("sentence, count", [("Elizabeth walked to Meryton.", 0),
                                             ("[MASK] walked to [MASK].", 2)])
def test_a_sentence_needs_exactly_one_mask(sentence, count):
    with pytest.raises(ValueError, match=rf"sentence=.*{count} times; expected exactly once"):
        mtc.split_at_mask(sentence)


# --- the models, on the tiny random Llama (plumbing) ------------------------------------------------


@pytest.fixture(scope="module")
def tiny_mlm():
    try:
        models.embedded_model_dir()
    except models.MissingAssetError as error:
        pytest.skip(f"the tiny model needs the embedded tokenizer (run `make setup`): {error}")
    model, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, dtype="float32", device="cpu", seed=0)
    mask_id = tokenizer("_", add_special_tokens=False).input_ids[0]
    return MNTPDecoder(model.requires_grad_(False), tokenizer, mask_id, context_tokens=8, name=profiles.TINY_RANDOM_MODEL)


def test_the_feature_is_the_mntp_output_one_position_before_the_mask(tiny_mlm):
    sentence = "Elizabeth walked with [MASK] to the village of Meryton."
    ids, position = tiny_mlm.encode_masked(sentence)
    assert ids[0] == tiny_mlm.separator_id and ids[position] == tiny_mlm.mask_id
    hidden = attention.forward_with_mask(tiny_mlm.model.get_decoder(), torch.tensor([ids]),
                                         M.bidirectional).last_hidden_state
    feature, previous = tiny_mlm.features([sentence])
    torch.testing.assert_close(feature[0], hidden[0, position - 1])
    assert int(previous[0]) == ids[position - 1]


def test_the_feature_sees_the_right_context_and_the_context_is_cropped(tiny_mlm):
    left = tiny_mlm.features(["Elizabeth walked with [MASK] to Meryton."])[0]
    right = tiny_mlm.features(["Elizabeth walked with [MASK] to Pemberley."])[0]
    assert not torch.allclose(left, right)  # bidirectional: the words after the mask matter
    long_sentence = " ".join(["word"] * 40) + " [MASK] " + " ".join(["word"] * 40)
    ids, position = tiny_mlm.encode_masked(long_sentence)
    assert position == 1 + tiny_mlm.context_tokens and len(ids) == 2 + 2 * tiny_mlm.context_tokens


def test_emat_extends_the_matrix_without_changing_single_token_predictions(tiny_mlm):
    vocabulary = ["Mr. Darcy", "Netherfield Park", "she", "Elizabeth Bennet"]
    emat = mtc.build_emat(tiny_mlm, vocabulary)
    single = [p for p in vocabulary if mtc.phrase_token_count(tiny_mlm.tokenizer, p) == 1]
    assert "she" in single and "she" not in emat.phrases  # one token: keeps its original row
    assert emat.phrases == [p for p in vocabulary if p not in single]
    weights = tiny_mlm.output_matrix
    for row, phrase in enumerate(emat.phrases):  # new rows start as the mean of the phrase's token rows
        ids = tiny_mlm.tokenizer(" " + phrase, add_special_tokens=False).input_ids
        torch.testing.assert_close(emat.phrase_matrix[row], weights[ids].mean(0))
    hidden, _ = tiny_mlm.features(["It was [MASK] who spoke first."])
    logits = emat(hidden)
    assert logits.shape[-1] == weights.shape[0] + len(emat.phrases)
    torch.testing.assert_close(logits[:, :weights.shape[0]], tiny_mlm.token_logits(hidden))
    assert sorted(name for name, p in emat.named_parameters() if p.requires_grad) == ["phrase_matrix", "token_matrix"]
    frozen_tokens = mtc.build_emat(tiny_mlm, vocabulary, train_token_rows=False)
    assert [name for name, p in frozen_tokens.named_parameters() if p.requires_grad] == ["phrase_matrix"]
    torch.testing.assert_close(frozen_tokens(hidden), logits)
    assert emat.token_matrix.data_ptr() != weights.data_ptr()  # training the copy never touches the masked LM


def test_emat_with_an_empty_vocabulary_is_an_error(tiny_mlm):
    with pytest.raises(ValueError, match="vocabulary is empty"):
        mtc.build_emat(tiny_mlm, [])


def _tiny_gru(tiny_mlm, seed=0):
    torch.manual_seed(seed)
    return mtc.build_gru(tiny_mlm, SETTINGS).eval()


def test_gru_loss_on_live_rows_equals_the_cross_entropy_over_the_padded_batch(tiny_mlm):
    gru = _tiny_gru(tiny_mlm, seed=2)
    hidden, first = torch.randn(3, tiny_mlm.hidden_size), torch.tensor([5, 6, 7])
    targets = torch.tensor([[9, 2, -100, -100], [4, 8, 3, 2], [11, 2, -100, -100]])
    with torch.no_grad():
        logits = gru(hidden, first, targets, teacher_forcing=1.0)
        reference = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                       ignore_index=-100)
        assert float(gru.loss(hidden, first, targets)) == pytest.approx(float(reference), rel=1e-5)
        changed = targets.clone()
        changed[0, 0] = 10  # the first target moves the loss
        assert float(gru.loss(hidden, first, changed)) != pytest.approx(float(reference), rel=1e-5)


def test_gru_trains_copies_of_the_embeddings_and_output_head_through_ff_and_gelu(tiny_mlm):
    gru = _tiny_gru(tiny_mlm)
    torch.testing.assert_close(gru.embedding.weight, tiny_mlm.input_embeddings)
    torch.testing.assert_close(gru.output_head.weight, tiny_mlm.output_matrix)
    assert gru.embedding.weight.data_ptr() != tiny_mlm.input_embeddings.data_ptr()
    assert gru.output_head.weight.data_ptr() != tiny_mlm.output_matrix.data_ptr()
    assert gru.embedding.weight.requires_grad and gru.output_head.weight.requires_grad
    hidden, tokens = torch.randn(2, tiny_mlm.hidden_size), torch.tensor([3, 4])
    state = gru.initial_state(hidden)
    with torch.no_grad():
        logits, _ = gru.step(tokens, state, hidden)
        output, _ = gru.gru(gru.embedding(tokens).unsqueeze(1), state)
        combined = torch.cat([output[:, 0], gru.embedding(tokens), hidden], dim=-1)
        expected = torch.nn.functional.gelu(gru.feed_forward(combined)) @ tiny_mlm.output_matrix.T
    torch.testing.assert_close(logits, expected)
    frozen = mtc.build_gru(tiny_mlm, dataclasses.replace(SETTINGS, gru_train_embeddings=False))
    assert not frozen.embedding.weight.requires_grad and not frozen.output_head.weight.requires_grad


def test_language_model_targets_end_with_eos_only_when_the_sentence_ends(tiny_mlm):
    tokenizer = tiny_mlm.tokenizer
    short, long = "She smiled.", "It is a truth universally acknowledged, that a single man must be in want."
    targets = mtc.language_model_targets(tiny_mlm, [short, long], max_tokens=6)
    short_ids = tokenizer(short, add_special_tokens=False).input_ids
    assert targets[0, :len(short_ids) + 1].tolist() == [*short_ids, tokenizer.eos_token_id]
    assert targets[1].tolist() == tokenizer(long, add_special_tokens=False).input_ids[:6]
    with pytest.raises(ValueError, match="sentences is empty"):
        mtc.language_model_targets(tiny_mlm, [], max_tokens=6)


def test_closed_vocabulary_baseline_ranks_phrases_by_the_first_token_probability(tiny_mlm):
    phrases = ["Mr. Darcy", "Mrs. Bennet", "Elizabeth", "she", "Netherfield Park"]
    prior = Counter({"Mrs. Bennet": 5, "Mr. Darcy": 2})
    baseline = mtc.ClosedVocabularyMLM(tiny_mlm, phrases, prior)
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
    prior_only = mtc.LabelPrior(phrases, prior).complete(torch.zeros(2, tiny_mlm.hidden_size), k=2)
    assert [[text for text, _ in row] for row in prior_only] == [["Mrs. Bennet", "Mr. Darcy"]] * 2


def test_accuracy_intervals_split_by_gold_length_and_contain_the_value():
    ranked = [[("a", 1.0)], [("x", 1.0)], [("b c", 1.0)], [("b c", 1.0)]]
    gold, lengths = ["a", "b", "b c", "d e"], [1, 1, 2, 2]
    scores = mtc._scores(ranked, gold, lengths, (1,), None)
    assert scores["hits"][1] == [1, 0, 1, 0]
    table = mtc.accuracy_intervals({"emat": {"test": scores}}, ks=(1,), resamples=200)
    assert table["emat"]["all"][1][0] == 0.5 and table["emat"]["all"][1][3] == 4
    assert table["emat"]["single-token"][1][0] == 0.5 and table["emat"]["multi-token"][1][3] == 2
    for group in mtc.LENGTH_GROUPS:
        value, low, high, _ = table["emat"][group][1]
        assert low <= value <= high
    assert mtc.group_rows(lengths, "multi-token") == [2, 3]
    with pytest.raises(ValueError, match="group='long'"):
        mtc.group_rows(lengths, "long")


def _table3_intervals():
    """accuracy_intervals on results built by the real scoring (``_scores``): EMAT, the GRU and naive MTC on four
    test sentences (two one-token gold labels, two multi-token), EMAT and the GRU on three unseen ones; naive MTC
    is not run on the unseen split, as in evaluate_methods."""
    ks = (1, 10, 50)
    test_gold, test_lengths = ["a", "b", "b c", "d e"], [1, 1, 2, 2]
    unseen_gold, unseen_lengths = ["u", "v w", "z"], [1, 2, 1]
    ranked = {"emat": [[("a", .9)], [("x", .9), ("b", .1)], [("b c", .9)], [("x", .9)]],
              "gru": [[("x", .9)], [("x", .9)], [("x", .9), ("b c", .1)], [("d e", .9)]]}
    ranked["naive"] = ranked["emat"]
    unseen_ranked = {"emat": [[("u", .9)], [("x", .9)], [("x", .9)]], "gru": [[("x", .9)], [("v w", .9)], [("z", .9)]]}
    results = {method: {"test": mtc._scores(rows, test_gold, test_lengths, ks, None)} for method, rows in ranked.items()}
    for method, rows in unseen_ranked.items():
        results[method][mtc.UNSEEN] = mtc._scores(rows, unseen_gold, unseen_lengths, ks, None)
    return (mtc.accuracy_intervals(results, "test", resamples=200),
            mtc.accuracy_intervals(results, mtc.UNSEEN, resamples=200))


def _percent_and_interval(cell):
    value, interval = cell.split(" [")
    low, high = interval.rstrip("]").split(", ")
    return float(value), float(low), float(high)


def test_table3_rows_give_a_at_k_by_gold_length_with_intervals_for_every_method():
    intervals, unseen = _table3_intervals()
    header, rows = mtc.table3_rows(intervals, unseen)
    assert header[:2] == ["method", "n (all / 1-token / multi-token / unseen)"]
    assert header[2:] == [f"{group} a@{k}" for group in ("all", "1-token", "multi-token", "unseen") for k in (1, 10, 50)]
    assert all(len(row) == len(header) for row in rows)
    assert sorted(mtc.TABLE3_METHODS) == sorted(mtc.METHODS)  # every method has its place in the table
    by_method = {row[0]: dict(zip(header, row)) for row in rows}
    assert [row[0] for row in rows] == [f"paper: {paper}" for paper in mtc.PAPER_TABLE3] + [
        "ours: EMAT", "ours: GRU decoder", "ours: naive MTC"]  # the order of mtc.TABLE3_METHODS
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
    frame = mtc.table3(intervals, unseen, latency={"forward": 3.0, "emat": 4.0, "gru": 9.5})
    assert frame.loc["ours: EMAT", "all a@10"] == emat["all a@10"]  # one definition: the notebook's table is these rows
    assert (frame.loc["ours: GRU decoder", "ms / sentence"], frame.loc["ours: naive MTC", "ms / sentence"]) == ("9.5", "—")
    assert frame.loc["paper: BERT-Adapted-RNN", "ms / sentence"] == "44 (T4)"
    from helpers import claims  # the rows are what the README's result table takes
    assert claims.ResultTable(notebook="06", name="table3", title="Table 3", header=header, rows=rows).rows[-1][0] == "ours: naive MTC"


def test_table3_rows_refuse_what_is_not_accuracy_intervals():
    intervals, unseen = _table3_intervals()
    with pytest.raises(ValueError, match="intervals="):
        mtc.table3_rows({}, unseen)
    with pytest.raises(ValueError, match="unseen has methods \\['t5'\\]"):
        mtc.table3_rows(intervals, {"t5": {}})

def test_gru_starts_from_the_mask_embedding_in_every_layer(tiny_mlm):
    gru = _tiny_gru(tiny_mlm)
    hidden = torch.randn(3, tiny_mlm.hidden_size)
    state = gru.initial_state(hidden)
    assert state.shape == (SETTINGS.gru_layers, 3, tiny_mlm.hidden_size)
    for layer in range(SETTINGS.gru_layers):
        torch.testing.assert_close(state[layer], hidden)


def test_beam_search_scores_are_the_sequence_log_probabilities_and_sorted(tiny_mlm):
    gru = _tiny_gru(tiny_mlm)
    hidden, first = torch.randn(2, tiny_mlm.hidden_size), torch.tensor([11, 22])
    found = gru.beam_search(hidden, first, beam_size=4, max_steps=4, num_results=6)
    for row, candidates in enumerate(found):
        scores = [score for _, score in candidates]
        assert scores == sorted(scores, reverse=True) and len(candidates) == 6
        for ids, score in candidates[:3]:
            target = torch.tensor([ids + [gru.eos_id]])
            with torch.no_grad():
                logits = gru(hidden[row:row + 1], first[row:row + 1], target, teacher_forcing=1.0)
            expected = logits.log_softmax(-1).gather(-1, target.unsqueeze(-1)).sum()
            assert score == pytest.approx(float(expected), abs=1e-4)


def test_beam_search_of_width_one_returns_prefixes_of_the_greedy_path(tiny_mlm):
    gru = _tiny_gru(tiny_mlm, seed=1)
    hidden, first = torch.randn(1, tiny_mlm.hidden_size), torch.tensor([5])
    found = gru.beam_search(hidden, first, beam_size=1, max_steps=4, num_results=4)[0]
    state, token, path = gru.initial_state(hidden), first, []
    with torch.no_grad():
        for _ in range(4):
            logits, state = gru.step(token, state, hidden)
            logits[:, gru.eos_id] = float("-inf")  # the live beam never ends; ending is a finished candidate
            token = logits.argmax(-1)
            path.append(int(token))
    assert sorted(len(ids) for ids, _ in found) == [0, 1, 2, 3]
    assert all(ids == path[:len(ids)] for ids, _ in found)


def test_gru_targets_end_with_eos_and_are_padded():
    encoded = mtc.EncodedSplit([[1, 2], [1, 3]], [1, 1], [[7, 8, 9], [4]], ["x", "y"], ["[MASK]", "[MASK]"])
    targets = mtc.gru_targets(encoded, eos_id=2, max_steps=5)
    assert targets.tolist() == [[7, 8, 9, 2], [4, 2, -100, -100]]


def _biased_lengths(tiny_mlm, favourite: int) -> mtc.LengthClassifier:
    classifier = mtc.LengthClassifier(tiny_mlm.hidden_size)
    with torch.no_grad():
        classifier.linear.weight.zero_()
        classifier.linear.bias.fill_(-30.0)
        classifier.linear.bias[favourite] = 30.0
    return classifier


def test_naive_mtc_with_a_sure_length_of_one_is_the_single_token_mlm(tiny_mlm):
    sentence = "Elizabeth walked with [MASK] to Meryton."
    naive = mtc.naive_complete(tiny_mlm, _biased_lengths(tiny_mlm, 0), [sentence], k=5, first_tokens=3, second_tokens=2)[0]
    hidden, _ = tiny_mlm.features([sentence])
    single = mtc.rank_candidates(tiny_mlm.token_logits(hidden).softmax(-1), tiny_mlm.token_strings, 5)[0]
    assert [text for text, _ in naive] == [text for text, _ in single]


def test_naive_mtc_two_token_scores_are_products_of_the_two_mask_fills(tiny_mlm):
    sentence = "Elizabeth walked with [MASK] to Meryton."
    naive = mtc.naive_complete(tiny_mlm, _biased_lengths(tiny_mlm, 1), [sentence], k=3, first_tokens=2, second_tokens=2)[0]
    ids, position = tiny_mlm.encode_masked(sentence, mask_count=2)
    first = tiny_mlm.token_logits(tiny_mlm.hidden_at([ids], [position - 1])).softmax(-1)[0]
    t1 = int(first.argmax())
    filled = ids[:position] + [t1] + ids[position + 1:]
    second = tiny_mlm.token_logits(tiny_mlm.hidden_at([filled], [position])).softmax(-1)[0]
    t2 = int(second.argmax())
    expected_text = tiny_mlm.tokenizer.decode([t1, t2], skip_special_tokens=True).strip()
    scores = dict(naive)
    assert expected_text in scores
    assert scores[expected_text] == pytest.approx(float(first[t1] * second[t2]), rel=1e-3)


def test_completer_rejects_bad_k_method_and_masks(tiny_mlm):
    emat = mtc.build_emat(tiny_mlm, ["Mr. Darcy"])
    completer = mtc.Completer(tiny_mlm, emat, _tiny_gru(tiny_mlm), mtc.LengthClassifier(tiny_mlm.hidden_size),
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


def test_completion_view_returns_one_panel_per_method(tiny_mlm):
    emat = mtc.build_emat(tiny_mlm, ["Mr. Darcy", "Netherfield Park"])
    completer = mtc.Completer(tiny_mlm, emat, _tiny_gru(tiny_mlm), mtc.LengthClassifier(tiny_mlm.hidden_size),
                              SETTINGS, max_steps=3)
    figure = mtc_plots.completion_view(completer, "It was [MASK] who spoke.", k=4)
    assert [ax.get_title() for ax in figure.axes] == ["EMAT", "GRU decoder", "single-token MLM"]
    assert all(len(ax.patches) == 4 for ax in figure.axes)
    with pytest.raises(ValueError, match="sentence="):
        mtc_plots.completion_view(completer, "no marker", k=4)


def test_settings_cover_every_profile_and_follow_table_8():
    assert set(mtc.SETTINGS) == set(profiles.PROFILE_NAMES)
    paper = mtc.SETTINGS["paper"]
    assert (paper.batch_size, paper.lr, paper.emat_epochs, paper.gru_epochs) == (128, 1e-3, 2, 10)
    assert (paper.gru_layers, paper.gru_dropout, paper.teacher_forcing) == (2, 0.2, 0.5)
    assert paper.max_sentences_per_phrase == 50


# --- the same pipeline on an encoder MLM (the paper's BERT), through the one masked-LM interface ----------------


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A tiny random BertForMaskedLM and a local WordPiece tokenizer, saved and loaded back through
    ``EncoderMLM.from_pretrained`` (the code path that loads bert-base-cased from the Hub)."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    words = ("It was who spoke first . Elizabeth walked with to Meryton Mr Darcy Netherfield Park she the and of "
             "a in sister house ##s ##ing letter Jane Bennet").split()
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=False)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return EncoderMLM.from_pretrained(str(folder), device="cpu", context_tokens=8)


def test_encoder_mlm_reads_the_mask_itself_and_its_logits_are_the_bert_head(tiny_bert):
    sentence = "Elizabeth walked with [MASK] to Meryton ."
    ids, position = tiny_bert.encode_masked(sentence)
    assert ids[0] == tiny_bert.tokenizer.cls_token_id and ids[-1] == tiny_bert.tokenizer.sep_token_id
    assert ids[position] == tiny_bert.tokenizer.mask_token_id and tiny_bert.offset == 0
    features, previous = tiny_bert.features([sentence])
    with torch.no_grad():
        logits = tiny_bert.model(input_ids=torch.tensor([ids])).logits[0, position]
    torch.testing.assert_close(tiny_bert.token_logits(features)[0], logits, atol=1e-4, rtol=1e-4)
    assert int(previous[0]) == ids[position - 1]
    other, _ = tiny_bert.features(["Elizabeth walked with [MASK] to Netherfield Park ."])
    assert not torch.allclose(features, other)  # the words after the mask matter


def test_emat_gru_and_naive_mtc_run_on_an_encoder_mlm(tiny_bert):
    emat = mtc.build_emat(tiny_bert, ["Mr Darcy", "Netherfield Park", "she"])
    features, previous = tiny_bert.features(["It was [MASK] who spoke first ."])
    vocab = tiny_bert.output_matrix.shape[0]
    torch.testing.assert_close(emat(features)[:, :vocab], tiny_bert.token_logits(features))  # BERT's bias included
    assert "token_bias" in dict(emat.named_parameters())  # trained with the token rows, as the public matrix_plugin
    gru = mtc.build_gru(tiny_bert, SETTINGS).eval()
    assert gru.eos_id == tiny_bert.tokenizer.sep_token_id and mtc.start_id(tiny_bert) == tiny_bert.tokenizer.cls_token_id
    with torch.no_grad():
        torch.testing.assert_close(gru.output_head(features), tiny_bert.model.cls(features))  # a copy of BERT's cls head
    assert gru.complete(features, previous, tiny_bert.tokenizer, k=2, beam_size=2, max_steps=3)
    sentence = "Elizabeth walked with [MASK] to Meryton ."
    naive = mtc.naive_complete(tiny_bert, _biased_lengths(tiny_bert, 0), [sentence], k=4, first_tokens=2, second_tokens=2)[0]
    single = mtc.rank_candidates(tiny_bert.token_logits(tiny_bert.features([sentence])[0]).softmax(-1),
                                 tiny_bert.token_strings, 4)[0]
    assert [text for text, _ in naive] == [text for text, _ in single]


def test_training_label_share_counts_top_k_items_that_are_training_labels():
    ranked = [[("she", 0.5), ("Darcy", 0.3), ("xyz", 0.2)], [("Darcy", 0.9), ("abc", 0.1)]]
    assert mtc.training_label_share(ranked, {"she", "Darcy"}, k=2) == 0.75  # she, Darcy | Darcy, abc
    assert mtc.training_label_share(ranked, {"she", "Darcy"}, k=3) == 0.6
