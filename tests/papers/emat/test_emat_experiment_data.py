"""EMAT's data (seed 004, §3): the phrase vocabulary, the masked sentences and the unseen split, and the feature at
the mask as the MNTP decoder and an encoder MLM read it."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from helpers import attention, models, profiles
from helpers import masks as M
from helpers.papers.emat import experiment_data, settings

SETTINGS = settings.SETTINGS["smoke"]


def test_frequency_cut_off_keeps_exactly_the_phrases_with_at_least_k_occurrences():
    counts = Counter({"Mr. Darcy": 5, "Longbourn": 3, "her sister": 3, "Kitty": 2, "Lydia": 1})
    assert experiment_data.build_vocabulary(counts, 3) == ["Mr. Darcy", "Longbourn", "her sister"]  # by count, then alphabetical
    assert experiment_data.build_vocabulary(counts, 1) == ["Mr. Darcy", "Longbourn", "her sister", "Kitty", "Lydia"]


def test_an_empty_vocabulary_is_an_error_naming_k():
    with pytest.raises(ValueError, match="min_count=6.*empty"):
        experiment_data.build_vocabulary(Counter({"Mr. Darcy": 5}), 6)
    with pytest.raises(ValueError, match="min_count=1.*no phrases"):
        experiment_data.build_vocabulary(Counter(), 1)
    with pytest.raises(ValueError, match="min_count=0"):
        experiment_data.build_vocabulary(Counter({"a": 1}), 0)


def test_leading_determiners_are_trimmed_so_variants_count_as_one_phrase(nlp):
    texts = ["The old house stood empty.", "She saw an old house.", "They bought that old house."]
    spans = [experiment_data.phrase_spans(doc) for doc in nlp.pipe(texts)]
    counts = experiment_data.phrase_counts(texts, spans)
    assert counts["old house"] == 3
    assert not any(phrase.split()[0].lower() in {"the", "a", "an", "that", "this"} for phrase in counts)
    assert experiment_data.build_vocabulary(counts, 3) == ["old house"]


def test_trim_span_removes_only_leading_determiners_and_edge_punctuation(nlp):
    doc = nlp("Every morning the young ladies walked to Meryton.")
    trimmed = {span.text: getattr(experiment_data.trim_span(span), "text", None) for span in doc.noun_chunks}
    assert trimmed["the young ladies"] == "young ladies"
    assert all(not (value or "").lower().startswith(("the ", "every ")) for value in trimmed.values())


def test_noun_chunks_are_cut_to_their_head_keeping_advmod_amod_compound(nlp):
    doc = nlp("Her younger sister read the very long letter from the village post office.")
    heads = {chunk.text: experiment_data.head_of_chunk(chunk).text for chunk in doc.noun_chunks}
    assert heads["Her younger sister"] == "younger sister"  # "Her" (poss) dropped, "younger" (amod) kept
    assert heads["the very long letter"] == "very long letter"  # "very" is advmod: kept with its head
    assert heads["the village post office"] == "village post office"  # compounds kept
    for chunk in doc.noun_chunks:  # the first token kept is a kept modifier, or the chunk's last token
        head = experiment_data.head_of_chunk(chunk)
        assert head[0].dep_ in experiment_data.HEAD_MODIFIER_DEPS or len(head) == 1
        assert head.end == chunk.end


def test_entities_win_over_noun_chunks_and_pronouns_are_flagged(nlp):
    text = "She met Mr. Darcy at Pemberley House yesterday."
    spans = experiment_data.phrase_spans(nlp(text))
    phrases = {text[start:end]: pronoun for start, end, pronoun in spans}
    assert phrases.get("She") is True
    assert all(not pronoun for phrase, pronoun in phrases.items() if phrase != "She")
    covered = [set(range(start, end)) for start, end, _ in spans]
    assert all(not a & b for i, a in enumerate(covered) for b in covered[i + 1:])  # no overlapping spans
    assert experiment_data.pronoun_phrases([text], [spans]) == {"She"}


def test_each_sentence_masks_exactly_one_of_its_vocabulary_phrases():
    text = "Jane and Elizabeth walked to Meryton with Kitty."
    spans = [(text.index(name), text.index(name) + len(name), False) for name in ("Jane", "Elizabeth", "Meryton", "Kitty")]
    pairs = [(text, "train"), (text, "train"), ("Kitty laughed.", "train")]
    examples = experiment_data.masked_examples(pairs, [spans, spans, [(0, 5, False)]], ["Jane", "Elizabeth", "Kitty"], [],
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
    unseen = experiment_data.choose_unseen_phrases(names, 0.25, seed=3)
    assert len(unseen) == 2
    examples = experiment_data.masked_examples(pairs, spans, names, unseen, max_per_phrase=30, seed=0)
    labelled = {split: {example.phrase for example in examples[split]} for split in experiment_data.MTC_SPLITS}
    assert labelled[experiment_data.UNSEEN] == set(unseen)
    for split in ("train", "validation", "test"):
        assert not labelled[split] & set(unseen)
    assert labelled["train"] == set(names) - set(unseen)
    assert all(example.split == experiment_data.UNSEEN for example in examples[experiment_data.UNSEEN])


def test_masked_examples_take_at_most_n_unique_sentences_per_phrase_and_mask_the_phrase():
    pairs, spans, names = _synthetic_corpus()
    pairs += pairs[:40]  # recurring sentences are counted once
    spans += spans[:40]
    examples = experiment_data.masked_examples(pairs, spans, names, [], max_per_phrase=20, seed=0)
    every = [example for split in experiment_data.MTC_SPLITS for example in examples[split]]
    per_phrase = Counter(example.phrase for example in every)
    assert set(per_phrase.values()) == {20}
    assert len({(example.sentence, example.phrase) for example in every}) == len(every)
    for example in every:
        assert example.masked.count(experiment_data.MASK_MARKER) == 1
        assert example.masked.replace(experiment_data.MASK_MARKER, example.phrase) == example.sentence


def test_examples_keep_their_paragraph_split():
    pairs, spans, names = _synthetic_corpus()
    split_of = dict(pairs)
    examples = experiment_data.masked_examples(pairs, spans, names, [], max_per_phrase=50, seed=0)
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
    return experiment_data.build_dataset("austen", SETTINGS.data, tokenizer, profiles.TINY_RANDOM_MODEL, progress=False)


def test_on_austen_unseen_phrases_are_never_a_label_outside_the_unseen_split(smoke_dataset):
    unseen = set(smoke_dataset.unseen_phrases)
    assert unseen and unseen < set(smoke_dataset.vocabulary)
    labelled = {example.phrase for example in smoke_dataset.examples[experiment_data.UNSEEN]}
    assert labelled and labelled <= unseen  # one span per sentence: a rare unseen phrase may lose every sentence
    for split in ("train", "validation", "test"):
        assert not {example.phrase for example in smoke_dataset.examples[split]} & unseen


def test_on_austen_every_label_is_a_trimmed_vocabulary_phrase_with_at_least_k_occurrences(smoke_dataset):
    manifest = smoke_dataset.manifest
    assert manifest["k (min_count)"] == SETTINGS.data.min_count
    assert sum(manifest["tokens per phrase %"].values()) == pytest.approx(100.0)
    assert all(count >= SETTINGS.data.min_count for _, count in manifest["most frequent"])
    vocabulary = set(smoke_dataset.vocabulary)
    for split in experiment_data.MTC_SPLITS:
        for example in smoke_dataset.examples[split]:
            assert example.phrase in vocabulary
            assert example.phrase.split()[0].lower() not in {"the", "a", "an"}
    per_phrase = Counter(e.phrase for split in experiment_data.MTC_SPLITS for e in smoke_dataset.examples[split])
    assert max(per_phrase.values()) <= SETTINGS.data.max_sentences_per_phrase


def test_length_distribution_uses_table_1_buckets():
    assert experiment_data.length_distribution([1, 1, 2, 3, 7, 9, 5, 4]) == {"1": 25.0, "2": 12.5, "3": 12.5, "4": 12.5,
                                                                "5": 12.5, ">5": 25.0}


@pytest.mark.parametrize("sentence, count", [("Elizabeth walked to Meryton.", 0),
                                             ("[MASK] walked to [MASK].", 2)])
def test_a_sentence_needs_exactly_one_mask(sentence, count):
    with pytest.raises(ValueError, match=rf"sentence=.*{count} times; expected exactly once"):
        experiment_data.split_at_mask(sentence)


def test_the_feature_is_the_mntp_output_one_position_before_the_mask(tiny_mlm):
    sentence = "Elizabeth walked with [MASK] to the village of Meryton."
    ids, position = tiny_mlm.encode_masked(sentence)
    assert ids[0] == tiny_mlm.separator_id and ids[position] == tiny_mlm.mask_id
    hidden = attention.forward_with_mask(models.decoder_body(tiny_mlm.model), torch.tensor([ids]),
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
