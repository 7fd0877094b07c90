"""MAGNET (seed 000): MSG labels and loss, SSCL (Eq. 3), joint training, repetition metrics, §4.1 pooling, bad inputs."""
import math

import numpy as np

import pytest
import torch
import torch.nn.functional as F

from helpers import magnet as G
from helpers import masks as M
from helpers import metrics, models, profiles
from helpers import objectives as O
from helpers import training as T

SPECIAL = (0, 1, 2)
VOCAB = 300
MASK_ID = 7


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    return model, tokenizer


def view(ids, spans, corrupt=True, seed=0):
    return G.masked_view(ids, spans, mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL, corrupt=corrupt,
                         generator=torch.Generator().manual_seed(seed))


# --- MSG (§3.2.3, Eq. 4) ---

def test_msg_labels_fall_on_span_tokens_only():
    torch.manual_seed(0)
    ids = torch.randint(10, VOCAB, (3, 40))
    ids[ids == MASK_ID] = 8
    spans = [[(5, 12)], [(1, 4), (20, 39)], [(30, 40)]]
    batch = view(ids, spans)
    for row, row_spans in enumerate(spans):
        in_span = G.span_mask(40, row_spans)
        labelled = batch["msg_labels"][row] != O.IGNORE_INDEX
        # output l carries a label exactly when token l + 1 is a span token (Fig. 3c: y_i ~ x_(i+1))
        assert torch.equal(labelled[:-1], in_span[1:]) and not labelled[-1]
        assert torch.equal(batch["msg_labels"][row][:-1][in_span[1:]], ids[row][1:][in_span[1:]])
        # span tokens are never corrupted, and MNTP targets only context tokens
        assert torch.equal(batch["input_ids"][row][in_span], ids[row][in_span])
        mntp_targets = torch.zeros(40, dtype=torch.bool)
        mntp_targets[1:] = batch["mntp_labels"][row][:-1] != O.IGNORE_INDEX
        assert not (mntp_targets & in_span).any() and mntp_targets.any()
        # §3.2.1: MNTP predicts from context only, so no MNTP label sits on a span token's output
        assert not ((batch["mntp_labels"][row] != O.IGNORE_INDEX) & in_span).any()
        assert not (labelled & (batch["mntp_labels"][row] != O.IGNORE_INDEX)).any()


def test_sampled_spans_follow_app_a():
    generator = torch.Generator().manual_seed(1)
    counts = set()
    for _ in range(500):
        spans = G.sample_spans(128, max_spans=2, min_len=4, max_len=32, generator=generator)
        counts.add(len(spans))
        assert G.check_spans(spans, 128, min_start=1) == spans  # disjoint, inside, a context token before each
        assert all(4 <= end - start <= 32 for start, end in spans)
        assert all(b[0] > a[1] for a, b in zip(spans, spans[1:]))  # a context token between spans too
    assert counts == {1, 2}


def test_msg_loss_is_cross_entropy_over_span_tokens_under_the_hybrid_mask(tiny):
    model, _ = tiny
    torch.manual_seed(0)
    ids = torch.randint(10, 2000, (2, 24))
    spans = [[(4, 9)], [(2, 6), (15, 20)]]
    batch = G.masked_view(ids, spans, mask_id=MASK_ID, vocab_size=2000, special_ids=SPECIAL, corrupt=False)
    with torch.no_grad():
        losses = G.mntp_msg_losses(model, batch)
    assert set(losses) == {"msg"}  # nothing is corrupted, so no MNTP term
    by_hand = []
    with torch.no_grad():
        for row, row_spans in enumerate(spans):
            mask = M.to_4d(M.magnet(row_spans), 24)
            logits = model(input_ids=ids[row:row + 1], attention_mask=mask).logits[0]
            for start, end in row_spans:
                by_hand.extend(F.cross_entropy(logits[start - 1:end - 1], ids[row, start:end], reduction="none").tolist())
    assert float(losses["msg"]) == pytest.approx(sum(by_hand) / len(by_hand), rel=1e-5)


def test_span_perplexity_sees_the_right_context_only_under_the_hybrid_mask(tiny):
    model, _ = tiny
    ids = torch.randint(10, 2000, (30,), generator=torch.Generator().manual_seed(2))
    example = G.InfillExample(ids, ((8, 14),), "test")
    changed = ids.clone()
    changed[20:] = torch.randint(10, 2000, (10,), generator=torch.Generator().manual_seed(3))
    other = G.InfillExample(changed, ((8, 14),), "test")
    causal = [G.span_perplexity(model, [e], "causal", progress=False)["ppl"] for e in (example, other)]
    hybrid = [G.span_perplexity(model, [e], "magnet", progress=False)["ppl"] for e in (example, other)]
    assert causal[0] == pytest.approx(causal[1], rel=1e-6)
    assert hybrid[0] != pytest.approx(hybrid[1], rel=1e-6)


@pytest.mark.parametrize("spans", [((1, 5),), ((8, 14), (20, 24))])  # (1, 5): the first token after BOS
def test_span_perplexity_through_the_masked_lm_interface_is_the_models_own_span_nll(tiny, spans):
    model, _ = tiny
    ids = torch.randint(10, 2000, (30,), generator=torch.Generator().manual_seed(7))
    example = G.InfillExample(ids, spans, "test")
    for mode, mask in (("causal", M.causal), ("magnet", M.magnet(list(spans)))):
        with torch.no_grad():
            logits = model(input_ids=ids[None], attention_mask=M.to_4d(mask, len(ids))).logits[0]
        by_hand = [F.cross_entropy(logits[start - 1:end - 1], ids[start:end], reduction="sum").item() for start, end in spans]
        tokens = sum(end - start for start, end in spans)
        result = G.span_perplexity(model, [example], mode, progress=False)
        assert result["tokens"] == tokens
        assert result["nll"] == pytest.approx(sum(by_hand) / tokens, rel=1e-5)


def test_the_reader_predicts_token_l_from_output_l_minus_1(tiny):
    model, _ = tiny
    reader = G.masked_lm_reader(model)
    ids = torch.randint(10, 2000, (1, 12), generator=torch.Generator().manual_seed(8))
    hidden = reader.hidden_states(ids, torch.ones_like(ids), mask=M.bidirectional)
    logits = reader.logits_at(hidden, torch.tensor([0, 0]), torch.tensor([1, 11]))
    assert torch.allclose(logits, model.get_output_embeddings()(hidden[0, [0, 10]]))
    with pytest.raises(ValueError, match="cols"):
        reader.logits_at(hidden, torch.tensor([0]), torch.tensor([0]))  # no output precedes token 0
    with pytest.raises(ValueError, match="mask_id=None"):
        reader.encode_masked("a [MASK] here")  # a reader has no mask token to insert


def test_cached_infilling_equals_decoding_under_the_hybrid_mask(tiny):
    model, _ = tiny
    ids = torch.randint(10, 2000, (26,), generator=torch.Generator().manual_seed(6))
    for mode, span in (("magnet", (6, 12)), ("causal", (6, 12)), ("magnet", (20, 26))):
        working = ids.clone()
        with torch.no_grad():
            for position in range(*span):  # the plain way: one full forward per token under the mask itself
                mask = M.magnet([span]) if mode == "magnet" else M.causal
                logits = model(input_ids=working[None], attention_mask=M.to_4d(mask, len(working))).logits
                working[position] = logits[0, position - 1].argmax()
        assert torch.equal(G.infill_span(model, ids, span, mode), working[span[0]:span[1]])


def test_infilling_never_reads_the_hidden_span(tiny):
    model, _ = tiny
    ids = torch.randint(10, 2000, (26,), generator=torch.Generator().manual_seed(4))
    scrambled = ids.clone()
    scrambled[6:12] = torch.randint(10, 2000, (6,), generator=torch.Generator().manual_seed(5))
    for mode in G.MODES:
        assert torch.equal(G.infill_span(model, ids, (6, 12), mode), G.infill_span(model, scrambled, (6, 12), mode))
    right_changed = ids.clone()
    right_changed[12:] = 11
    assert torch.equal(G.infill_span(model, ids, (6, 12), "causal"), G.infill_span(model, right_changed, (6, 12), "causal"))


# --- SSCL (§3.2.2, Eq. 3) ---

def test_info_nce_matches_a_hand_computation():
    anchors = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    positives = torch.tensor([[2.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    tau = 0.1

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    total = 0.0
    for i, anchor in enumerate(anchors.tolist()):
        scores = [math.exp(cosine(anchor, positive) / tau) for positive in positives.tolist()]
        total += -math.log(scores[i] / sum(scores))
    assert float(G.info_nce(anchors, positives, tau)) == pytest.approx(total / 3, rel=1e-6)


def test_last_token_encoding_ignores_padding(tiny):
    model, tokenizer = tiny
    texts = ["A short one.", "A much longer sentence that needs several more tokens than the first."]
    batch = G.encode_sentences(tokenizer, texts, max_len=64)
    last = batch["padding_mask"].sum(-1) - 1
    assert torch.all(batch["input_ids"][torch.arange(2), last] == tokenizer.eos_token_id)
    with torch.no_grad():
        together = G.last_token_states(model, batch)
        alone = G.last_token_states(model, G.encode_sentences(tokenizer, texts[:1], max_len=64))
    assert torch.allclose(together[0], alone[0], atol=1e-5)


def test_augmentation_deletes_and_crops_words_in_order():
    generator = torch.Generator().manual_seed(0)
    text = " ".join(f"w{i}" for i in range(30))
    for _ in range(50):
        words = G.augment(text, generator, delete_prob=0.1, crop_min=0.8).split()
        indices = [int(word[1:]) for word in words]
        assert indices == sorted(indices) and len(set(indices)) == len(indices)
        assert indices[-1] - indices[0] + 1 <= 30 and len(words) >= 1


# --- joint training (Eq. 5, App. A) ---

def test_joint_loss_is_the_lambda_weighted_sum_and_batches_are_pure(tiny):
    model, tokenizer = tiny
    settings = G.SETTINGS["smoke"]
    blocks = torch.randint(10, 2000, (8, settings.seq_len), generator=torch.Generator().manual_seed(0))
    sentences = [f"Sentence number {i} says something rather different about item {i * 7}." for i in range(6)]
    model = T.add_lora(model, T.LoraSettings(r=4, alpha=8, dropout=0.0))
    G._add_head(model, model.config.hidden_size, 0)
    phases = [G.Phase(2, 1.0, 0.0, 1.0), G.Phase(2, 1.0, 9.0, 1.0)]
    batch_for = G.joint_batch_maker(tokenizer, phases=phases, settings=settings, blocks=blocks, sentences=sentences,
                                    mask_id=MASK_ID, seed=0, device="cpu")
    first, again = batch_for(3, 0), batch_for(3, 0)
    assert torch.equal(first["masked"]["input_ids"], again["masked"]["input_ids"])
    assert torch.equal(first["positives"]["input_ids"], again["positives"]["input_ids"])
    assert "anchors" not in batch_for(0, 0) and first["lambdas"] == (1.0, 9.0, 1.0)
    with torch.no_grad():
        out = G.joint_loss(model, first)
    assert float(out["loss"]) == pytest.approx(float(out["mntp"] + 9 * out["sscl"] + out["msg"]), rel=1e-6)
    assert G.phase_at(phases, 1) is phases[0] and G.phase_at(phases, 2) is phases[1]
    with pytest.raises(ValueError, match="step=4"):
        G.phase_at(phases, 4)


def test_phase_snapshot_equals_a_run_of_that_phase_alone(tmp_path):
    settings = G.SETTINGS["smoke"]
    sentences = [f"Sentence number {i} says something rather different about item {i * 7}." for i in range(6)]
    blocks = torch.randint(10, 2000, (8, settings.seq_len), generator=torch.Generator().manual_seed(0))
    lora = T.LoraSettings(r=4, alpha=8, dropout=0.0)
    runs = {}
    for name, phases in (("both", [G.Phase(2, 1.0, 0.0, 1.0), G.Phase(2, 1.0, 9.0, 1.0)]), ("first", [G.Phase(2, 1.0, 0.0, 1.0)])):
        model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
        runs[name], _ = G.joint_experiment(model, tokenizer, phases=phases, settings=settings, run_dir=tmp_path / name,
                                           blocks=blocks, sentences=sentences, mask_id=MASK_ID, lora=lora, progress=False)
    base, _ = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    snapshot = T.load_adapter(base, tmp_path / "both" / "after_phase1")
    ids = torch.randint(10, 2000, (1, 12))
    with torch.no_grad():
        assert torch.allclose(snapshot(ids).logits, runs["first"](ids).logits, atol=1e-6)
        assert not torch.allclose(snapshot(ids).logits, runs["both"](ids).logits, atol=1e-6)
    components = G.read_components(tmp_path / "both")
    assert [r["step"] for r in components] == [1, 2, 3, 4]
    assert "sscl" not in components[1] and "sscl" in components[2]


# --- Table 5 metrics (§4.4, Eq. 6) ---

def test_repetition_metrics_match_hand_counts():
    tokens = "a b c a b c a b".split()  # 4-grams: abca bcab cabc abca bcab -> 5, of which 3 unique
    assert metrics.rep_n(tokens, 4) == pytest.approx(1 - 3 / 5)
    assert metrics.rep_n("a b c d e".split(), 4) == 0.0
    assert metrics.rep_sen(["It rained.", "We stayed in.", "It rained."]) == pytest.approx(1 - 2 / 3)
    assert metrics.distinct_n(["a b c d a b c d".split(), "x y z w".split()], 4) == pytest.approx(5 / 6)
    generations = [{"text": "It rained. It rained. It rained. Then it stopped.", "continuation_ids": [1, 2, 3, 4, 1, 2, 3, 4]},
                   {"text": "All was well.", "continuation_ids": [5, 6, 7, 8, 9]}]
    scores = G.repetition_scores(generations)
    assert scores["rep_sen"] == pytest.approx((1 - 2 / 4 + 0) / 2)
    assert scores["rep_4"] == pytest.approx(((1 - 4 / 5) + 0) / 2)
    assert scores["distinct_4"] == pytest.approx(6 / 7)


def test_generation_has_exactly_the_requested_length(tiny):
    model, tokenizer = tiny
    out = G.generate(model, tokenizer, ["It is a truth", "Emma Woodhouse, handsome, clever, and rich"], max_new_tokens=7)
    assert [len(g["continuation_ids"]) for g in out] == [7, 7]
    assert out[0]["text"].startswith("It is a truth")


# --- Table 1: §4.1 pooling ---

def test_word_pooling_follows_the_section_4_1_example():
    # tokens x_w11 x_w12 | x_w21 x_w22 x_w23 | x_w31 -> outputs y at positions 0..5
    hidden = torch.arange(6, dtype=torch.float32)[:, None] * torch.tensor([[1.0, 10.0]])
    w2 = G.pool_words(hidden, [(2, 5)])[0]
    assert torch.equal(w2, (hidden[1] + hidden[2] + hidden[3]) / 3)  # (y_w12 + y_w21 + y_w22) / 3
    assert torch.equal(G.pool_words(hidden, [(5, 6)])[0], hidden[4])  # one-token word: the output before it
    assert torch.equal(G.pool_words(hidden, [(2, 5)], shift=False)[0], hidden[2:5].mean(0))
    with pytest.raises(ValueError, match="starts before position 1"):
        G.pool_words(hidden, [(0, 2)])


def test_word_token_spans_cover_every_token_after_bos(tiny):
    _, tokenizer = tiny
    words = ["Mr.", "Darcy", "was", "n't", "amused", "."]
    ids, spans = G.word_token_spans(tokenizer, words)
    assert ids[0] == tokenizer.bos_token_id and spans[0][0] == 1 and spans[-1][1] == len(ids)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert tokenizer.decode(ids[spans[1][0]:spans[1][1]]).strip() == "Darcy"


def test_mntp_never_targets_the_token_right_after_a_span():
    ids = torch.randint(10, VOCAB, (64, 30), generator=torch.Generator().manual_seed(3))
    ids[ids == MASK_ID] = 8
    spans = [[(4, 9), (15, 20)]] * 64
    batch = G.masked_view(ids, spans, mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL,
                          masking=O.MaskingConfig(ratio=0.9), generator=torch.Generator().manual_seed(0))
    targets = torch.zeros_like(ids, dtype=torch.bool)
    targets[:, 1:] = batch["mntp_labels"][:, :-1] != O.IGNORE_INDEX
    assert not targets[:, 9].any() and not targets[:, 20].any()  # the tokens right after the spans
    assert targets[:, 10].any() and targets[:, 21].any()  # one further on, context tokens are targets again
    assert torch.equal(batch["input_ids"][:, 9], ids[:, 9])  # and are never corrupted


# --- Table 4 data and intervals ---

def test_block_infilling_spans_never_hold_a_paragraph_separator(tiny):
    _, tokenizer = tiny
    texts = ["Short one.", "It rained all day in Highbury and nobody came.", "Yes.", "No, indeed, not at all, sir."] * 30
    examples = G.block_infilling_data(tokenizer, texts, block_len=24, count=20, max_spans=2, span_min=3, span_max=6, seed=0)
    assert len(examples) == 20
    separator = tokenizer.eos_token_id
    assert any((e.ids == separator).any() for e in examples)  # the blocks do cross paragraphs
    for example in examples:
        assert all(not (example.ids[start:end] == separator).any() for start, end in example.spans)


def test_sentence_infilling_masks_only_sentences_msg_could_have_trained_on(tiny):
    _, tokenizer = tiny
    long = " ".join(["Elizabeth walked"] * 20) + "."
    passages = [["She came.", long, "He left.", "They sat.", "It ended."]] * 12 + [[long] * 5]
    examples = G.sentence_infilling_data(tokenizer, passages, seed=0, max_span_tokens=8)
    assert len(examples) == 12  # the passage of long sentences only is left out
    assert all(end - start <= 8 for e in examples for start, end in e.spans)
    assert len(G.sentence_infilling_data(tokenizer, passages, seed=0)) == 13


def test_nll_gain_is_paired_over_the_same_examples():
    worse = {"example_nll": [4.0, 6.0, 9.0], "example_tokens": [2, 3, 3]}
    better = {"example_nll": [2.0, 3.0, 9.0], "example_tokens": [2, 3, 3]}
    gain, low, high = G.nll_gain_interval(worse, better)
    assert gain == pytest.approx(5 / 8) and 0 <= low <= gain <= high
    with pytest.raises(ValueError, match="different examples"):
        G.nll_gain_interval(worse, {"example_nll": [1.0, 1.0, 1.0], "example_tokens": [2, 3, 4]})


# --- Table 1: metrics and intervals ---

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
    study = G.ProbeStudy({"a": {t: counts(base) for t in G.PROBE_TASKS},
                          "b": {t: counts([min(4, c + 1) for c in base]) for t in G.PROBE_TASKS}}, n=10)
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
    settings = G.SETTINGS["smoke"]
    readouts = {"last": G.ProbeReadout("m"), "mid, no shift": G.ProbeReadout("m", 2, shift=False)}
    study = G.word_probe_study({"m": (model, M.bidirectional)}, readouts, tokenizer, train, test, settings, progress=False)
    assert set(study.counts) == {"majority tag (chance)", "last", "mid, no shift"} and study.n == 3
    assert study.interval("majority tag (chance)", "NER")[0] == 100.0
    states, spans = G.word_hidden_states(model, tokenizer, [["the", "cat"]], mask=M.bidirectional, layers=(2, -1))
    features = G.word_features(model, tokenizer, [["the", "cat"]], mask=M.bidirectional, shift=False, layer=2)
    assert torch.allclose(features[0], G.pool_words(states[2][0], spans[0], shift=False))
    with pytest.raises(ValueError, match="readouts name models"):
        G.word_probe_study({}, readouts, tokenizer, train, test, settings, progress=False)


def test_word_states_are_each_sentences_own_despite_length_sorted_batches(tiny):
    model, tokenizer = tiny
    sentences = [["a", "long", "sentence", "of", "several", "words", "here"], ["short"], ["three", "words", "now"],
                 ["the", "first", "one", "is", "longer"]]
    states, spans = G.word_hidden_states(model, tokenizer, sentences, mask=M.causal, layers=(-1,), batch_size=2)
    for index, words in enumerate(sentences):  # alone, unpadded: the same states, in the caller's order
        alone, alone_spans = G.word_hidden_states(model, tokenizer, [words], mask=M.causal, layers=(-1,))
        assert spans[index] == alone_spans[0]
        assert torch.allclose(states[-1][index], alone[-1][0], atol=1e-5)


# --- Fig. 7 and Fig. 6 intervals ---

def test_loss_slope_sees_a_falling_loss():
    falling = [{"step": s, "loss": 5 - 0.01 * s + 0.001 * (-1) ** s} for s in range(1, 101)]
    slope, low, high = G.loss_slope(falling, last=50)
    assert slope == pytest.approx(-1.0, abs=0.01) and high < 0
    flat = [{"step": s, "loss": 2 + 0.1 * (-1) ** s} for s in range(1, 101)]
    _, low, high = G.loss_slope(flat, last=50)
    assert low < 0 < high


def test_row_hits_add_up_to_the_masked_lm_evaluation(tiny):
    model, tokenizer = tiny
    blocks = torch.randint(10, 2000, (6, 20), generator=torch.Generator().manual_seed(1))
    batches = {objective: O.fixed_eval_batches(objective, blocks, batch_size=3, num_batches=2, mask_id=MASK_ID,
                                               vocab_size=2000, special_ids=SPECIAL) for objective in O.OBJECTIVES}
    hits = {objective.upper(): G.masked_lm_row_hits(model, batches[objective]) for objective in O.OBJECTIVES}
    for objective in O.OBJECTIVES:
        correct, counts = hits[objective.upper()]
        assert len(counts) == 6 and correct.sum() / counts.sum() == pytest.approx(
            O.evaluate_masked_lm(model, batches[objective])["eval_accuracy"])
    assert np.array_equal(hits["MNTP"][1], hits["MTP"][1])  # the same selected tokens for both objectives
    runs = {name: [{"step": s, "loss": 3 - 0.01 * s} for s in range(1, 21)] for name in ("MNTP", "MTP")}
    rows = G.notebook02_claims(runs, hits)
    assert [r.verdict for r in rows][1] == "inconclusive" and rows[0].n == 6
    with pytest.raises(ValueError, match="different selections"):
        G.notebook02_claims(runs, {"MNTP": hits["MNTP"], "MTP": (hits["MTP"][0][:5], hits["MTP"][1][:5])})


def test_repetition_difference_is_paired_over_prefixes():
    def texts(rep):
        return [{"text": "A b.", "continuation_ids": ids} for ids in rep]

    looping, fresh = [1, 2, 3, 4] * 3, list(range(12))
    generations = {("x", "s"): texts([looping, looping, fresh]), ("y", "s"): texts([fresh, fresh, fresh])}
    value, low, high = G.repetition_difference(generations, "x", "y", "rep_4")
    assert value == pytest.approx(2 * (1 - 4 / 9) / 3) and low >= 0
    with pytest.raises(ValueError, match="no texts of model 'z'"):
        G.repetition_difference(generations, "x", "z", "rep_4")


# --- bad inputs ---

def test_bad_inputs_raise_clear_errors(tiny):
    model, tokenizer = tiny
    ids = torch.randint(10, VOCAB, (1, 20))
    with pytest.raises(ValueError, match=r"spans_per_row\[0\]\[1\]=\(6, 10\) overlaps"):
        view(ids, [[(2, 8), (6, 10)]])
    with pytest.raises(ValueError, match=r"ends past the text of 20 tokens"):
        view(ids, [[(15, 25)]])
    with pytest.raises(ValueError, match="too small for in-batch negatives"):
        G.info_nce(torch.ones(1, 4), torch.ones(1, 4))
    with pytest.raises(ValueError, match="sscl_batch_size=1"):
        G.MagnetSettings(seq_len=32, batch_size=2, phase1_steps=1, phase2_steps=1, lr=1e-3, train_blocks=4,
                         span_min=2, span_max=4, sscl_batch_size=1)
    limit = model.config.max_position_embeddings
    with pytest.raises(ValueError, match="max_position_embeddings"):
        G.generate(model, tokenizer, ["It is a truth universally acknowledged"], max_new_tokens=limit)
    with pytest.raises(ValueError, match=r"prefixes\[0\] has"):
        G.generate(model, tokenizer, [" ".join(["word"] * (limit + 5))], max_new_tokens=1)
    with pytest.raises(ValueError, match="span_start=4, span_end=2"):
        G.infill_passage({}, tokenizer, "one two three four five", 4, 2)
    with pytest.raises(ValueError, match="mode='both'"):
        G.span_perplexity(model, [G.InfillExample(torch.arange(10, 20), ((2, 5),), "t")], "both", progress=False)


def test_settings_cover_every_profile():
    assert set(G.SETTINGS) == set(profiles.PROFILE_NAMES)
    paper = G.SETTINGS["paper"]
    assert (paper.phase1_steps, paper.phase2_steps, paper.lambda_sscl, paper.temperature) == (3400, 800, 9.0, 0.1)
    assert (paper.max_spans, paper.span_min, paper.span_max, paper.seq_len) == (2, 4, 128, 512)
    assert paper.batch_size * paper.grad_accum == 32 and paper.lr == 3e-5
    assert profiles.settings_for("magnet", profiles.get("smoke")) is G.SETTINGS["smoke"]
