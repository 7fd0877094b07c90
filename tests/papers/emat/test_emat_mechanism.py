"""EMAT's mechanism (seed 004): accuracy@k and ranking (§5), the extended matrix (§4.1), the GRU decoder and its
beam search (§4.2), naive MTC (§5.2), on the tiny random Llama and on a tiny BERT."""
from __future__ import annotations

import pytest
import torch

from helpers.papers.emat import experiment_data, mechanism, settings

SETTINGS = settings.SETTINGS["smoke"]


def test_accuracy_at_k_on_hand_made_rankings():
    ranked = [
        [("Mr. Darcy", 0.5), ("Darcy", 0.3), ("he", 0.1)],  # gold first
        [("she", 0.6), ("Elizabeth", 0.2), ("her sister", 0.1)],  # gold third
        [("it", 0.9)],  # gold absent
        ["the house", "Netherfield Park"],  # plain strings work too; gold second
    ]
    gold = ["Mr. Darcy", "her sister", "Pemberley", " Netherfield Park "]  # labels are compared stripped
    scores = mechanism.accuracy(ranked, gold, ks=(1, 2, 3, 50))
    assert scores == {1: 0.25, 2: 0.5, 3: 0.75, 50: 0.75}


def test_accuracy_rejects_k_below_one():
    with pytest.raises(ValueError, match="k=0"):
        mechanism.accuracy([["a"]], ["a"], ks=(0,))


def test_rank_candidates_keeps_the_best_score_of_each_distinct_string():
    scores = torch.tensor([[0.1, 0.4, 0.3, 0.2, 0.0, 0.35]])
    candidates = ["Jane", "Elizabeth", "Elizabeth", "", "Kitty", ","]  # a duplicate, a special token, punctuation
    ranked = mechanism.rank_candidates(scores, candidates, k=3)
    assert [text for text, _ in ranked[0]] == ["Elizabeth", "Jane", "Kitty"]
    assert ranked[0][0][1] == pytest.approx(0.4)


@pytest.mark.parametrize("k", [0, -3, 1.5, True])
def test_rank_candidates_rejects_non_positive_k(k):
    with pytest.raises(ValueError, match="k="):
        mechanism.rank_candidates(torch.zeros(1, 3), ["a", "b", "c"], k=k)


def test_emat_extends_the_matrix_without_changing_single_token_predictions(tiny_mlm):
    vocabulary = ["Mr. Darcy", "Netherfield Park", "she", "Elizabeth Bennet"]
    emat = mechanism.build_emat(tiny_mlm, vocabulary)
    single = [p for p in vocabulary if experiment_data.phrase_token_count(tiny_mlm.tokenizer, p) == 1]
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
    frozen_tokens = mechanism.build_emat(tiny_mlm, vocabulary, train_token_rows=False)
    assert [name for name, p in frozen_tokens.named_parameters() if p.requires_grad] == ["phrase_matrix"]
    torch.testing.assert_close(frozen_tokens(hidden), logits)
    assert emat.token_matrix.data_ptr() != weights.data_ptr()  # training the copy never touches the masked LM


def test_emat_with_an_empty_vocabulary_is_an_error(tiny_mlm):
    with pytest.raises(ValueError, match="vocabulary is empty"):
        mechanism.build_emat(tiny_mlm, [])


def test_gru_loss_on_live_rows_equals_the_cross_entropy_over_the_padded_batch(tiny_mlm, tiny_gru):
    gru = tiny_gru(seed=2)
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


def test_gru_trains_copies_of_the_embeddings_and_output_head_through_ff_and_gelu(tiny_mlm, tiny_gru):
    gru = tiny_gru()
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
    frozen = mechanism.build_gru(tiny_mlm, SETTINGS.training.gru_layers, SETTINGS.training.gru_dropout, train_embeddings=False)
    assert not frozen.embedding.weight.requires_grad and not frozen.output_head.weight.requires_grad


def test_language_model_targets_end_with_eos_only_when_the_sentence_ends(tiny_mlm):
    tokenizer = tiny_mlm.tokenizer
    short, long = "She smiled.", "It is a truth universally acknowledged, that a single man must be in want."
    targets = mechanism.language_model_targets(tiny_mlm, [short, long], max_tokens=6)
    short_ids = tokenizer(short, add_special_tokens=False).input_ids
    assert targets[0, :len(short_ids) + 1].tolist() == [*short_ids, tokenizer.eos_token_id]
    assert targets[1].tolist() == tokenizer(long, add_special_tokens=False).input_ids[:6]
    with pytest.raises(ValueError, match="sentences is empty"):
        mechanism.language_model_targets(tiny_mlm, [], max_tokens=6)


def test_gru_starts_from_the_mask_embedding_in_every_layer(tiny_mlm, tiny_gru):
    gru = tiny_gru()
    hidden = torch.randn(3, tiny_mlm.hidden_size)
    state = gru.initial_state(hidden)
    assert state.shape == (SETTINGS.training.gru_layers, 3, tiny_mlm.hidden_size)
    for layer in range(SETTINGS.training.gru_layers):
        torch.testing.assert_close(state[layer], hidden)


def test_beam_search_scores_are_the_sequence_log_probabilities_and_sorted(tiny_mlm, tiny_gru):
    gru = tiny_gru()
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


def test_beam_search_of_width_one_returns_prefixes_of_the_greedy_path(tiny_mlm, tiny_gru):
    gru = tiny_gru(seed=1)
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
    encoded = experiment_data.EncodedSplit([[1, 2], [1, 3]], [1, 1], [[7, 8, 9], [4]], ["x", "y"], ["[MASK]", "[MASK]"])
    targets = mechanism.gru_targets(encoded.phrase_ids, eos_id=2, max_steps=5)
    assert targets.tolist() == [[7, 8, 9, 2], [4, 2, -100, -100]]


def _biased_lengths(tiny_mlm, favourite: int) -> mechanism.LengthClassifier:
    classifier = mechanism.LengthClassifier(tiny_mlm.hidden_size)
    with torch.no_grad():
        classifier.linear.weight.zero_()
        classifier.linear.bias.fill_(-30.0)
        classifier.linear.bias[favourite] = 30.0
    return classifier


def test_naive_mtc_with_a_sure_length_of_one_is_the_single_token_mlm(tiny_mlm):
    sentence = "Elizabeth walked with [MASK] to Meryton."
    naive = mechanism.naive_complete(tiny_mlm, _biased_lengths(tiny_mlm, 0), [sentence], k=5, first_tokens=3, second_tokens=2)[0]
    hidden, _ = tiny_mlm.features([sentence])
    single = mechanism.rank_candidates(tiny_mlm.token_logits(hidden).softmax(-1), tiny_mlm.token_strings, 5)[0]
    assert [text for text, _ in naive] == [text for text, _ in single]


def test_naive_mtc_two_token_scores_are_products_of_the_two_mask_fills(tiny_mlm):
    sentence = "Elizabeth walked with [MASK] to Meryton."
    naive = mechanism.naive_complete(tiny_mlm, _biased_lengths(tiny_mlm, 1), [sentence], k=3, first_tokens=2, second_tokens=2)[0]
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


def test_emat_gru_and_naive_mtc_run_on_an_encoder_mlm(tiny_bert):
    emat = mechanism.build_emat(tiny_bert, ["Mr Darcy", "Netherfield Park", "she"])
    features, previous = tiny_bert.features(["It was [MASK] who spoke first ."])
    vocab = tiny_bert.output_matrix.shape[0]
    torch.testing.assert_close(emat(features)[:, :vocab], tiny_bert.token_logits(features))  # BERT's bias included
    assert "token_bias" in dict(emat.named_parameters())  # trained with the token rows, as the public matrix_plugin
    gru = mechanism.build_gru(tiny_bert, SETTINGS.training.gru_layers, SETTINGS.training.gru_dropout).eval()
    assert gru.eos_id == tiny_bert.tokenizer.sep_token_id and mechanism.start_id(tiny_bert) == tiny_bert.tokenizer.cls_token_id
    with torch.no_grad():
        torch.testing.assert_close(gru.output_head(features), tiny_bert.model.cls(features))  # a copy of BERT's cls head
    assert gru.complete(features, previous, tiny_bert.tokenizer, k=2, beam_size=2, max_steps=3)
    sentence = "Elizabeth walked with [MASK] to Meryton ."
    naive = mechanism.naive_complete(tiny_bert, _biased_lengths(tiny_bert, 0), [sentence], k=4, first_tokens=2, second_tokens=2)[0]
    single = mechanism.rank_candidates(tiny_bert.token_logits(tiny_bert.features([sentence])[0]).softmax(-1),
                                 tiny_bert.token_strings, 4)[0]
    assert [text for text, _ in naive] == [text for text, _ in single]


def test_the_mechanism_imports_no_experiment_report_or_figures():
    """The paper's equations stand alone: mechanism.py reads the masked LM and the shared helpers only."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(mechanism.__file__).read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not [name for name in imported if name.split(".")[-1] in ("experiment", "experiment_data", "experiment_training",
                                                                       "report", "figures", "settings")], imported


def test_naive_mtc_completes_the_second_mask_over_the_whole_vocabulary(tiny_mlm):
    """§5.2 "complete the second mask": without a cap the ranking is the one over every (t1 in the top first tokens,
    any t2) pair, read best first; a cap of 2 second tokens loses pairs that belong in the top k."""
    sentence, k, first_tokens = "Elizabeth walked with [MASK] to Meryton.", 6, 3
    lengths = _biased_lengths(tiny_mlm, 1)  # sure of two tokens: the pairs decide the ranking
    naive = mechanism.naive_complete(tiny_mlm, lengths, [sentence], k=k, first_tokens=first_tokens)[0]
    ids, position = tiny_mlm.encode_masked(sentence, mask_count=2)
    first = tiny_mlm.token_logits(tiny_mlm.hidden_at([ids], [position - 1])).softmax(-1)[0]
    top = first.topk(first_tokens)
    scored = []
    for p1, t1 in zip(top.values.tolist(), top.indices.tolist()):
        filled = ids[:position] + [t1] + ids[position + 1:]
        second = tiny_mlm.token_logits(tiny_mlm.hidden_at([filled], [position])).softmax(-1)[0]
        scored += [(p1 * p2, t1, t2) for t2, p2 in enumerate(second.tolist())]
    scored.sort(key=lambda item: -item[0])
    brute = mechanism.first_distinct_completions(
        ((tiny_mlm.tokenizer.decode([t1, t2], skip_special_tokens=True).strip(), score) for score, t1, t2 in scored), k)
    assert [text for text, _ in naive] == [text for text, _ in brute]
    for (_, ours), (_, theirs) in zip(naive, brute):
        assert ours == pytest.approx(theirs, rel=1e-3)
    capped = mechanism.naive_complete(tiny_mlm, lengths, [sentence], k=k, first_tokens=first_tokens, second_tokens=1)[0]
    pairs = [text for text, score in capped if score > 1e-20]  # the one-token candidates weigh e^-60 here
    assert len(pairs) <= first_tokens < len([text for text, score in naive if score > 1e-20])  # one pair per first token


def test_nan_scores_and_a_string_as_gold_are_refused_by_name():
    import pytest
    import torch

    from helpers.papers.emat import mechanism

    with pytest.raises(ValueError, match="scores holds NaN"):
        mechanism.rank_candidates(torch.tensor([[0.1, float("nan")]]), ["a house", "the sea"], 1)
    with pytest.raises(ValueError, match="gold=.*list of phrase strings"):
        mechanism.accuracy([[("a house", 1.0)]], "a house", (1,))
    assert mechanism.accuracy([[("a house", 1.0)]], ["a house"], (1,)) == {1: 1.0}
