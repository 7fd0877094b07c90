"""MAGNET's mechanism (seed 000): MSG labels and loss (§3.2.3, Eq. 4), MNTP beside it, SSCL (§3.2.2, Eq. 3), the
masked-LM reader, infilling under the hybrid mask, §4.1 pooling, and bad inputs at the entry points."""
import math

import pytest
import torch
import torch.nn.functional as F

from helpers import masks as M
from helpers import objectives as O
from helpers.papers.magnet import experiment
from helpers.papers.magnet import mechanism as G

SPECIAL = (0, 1, 2)
VOCAB = 300
MASK_ID = 7
INF, NAN = float("inf"), float("nan")


def view(ids, spans, corrupt=True, seed=0):
    return G.masked_view(ids, spans, mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL, corrupt=corrupt,
                         generator=torch.Generator().manual_seed(seed))


def generator():
    return torch.Generator().manual_seed(0)


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


def test_mntp_and_msg_run_through_the_one_gathered_masked_lm_loss(tiny):
    model, _ = tiny
    ids = torch.randint(10, 2000, (2, 24), generator=torch.Generator().manual_seed(9))
    batch = G.masked_view(ids, [[(4, 9)], [(2, 6), (15, 20)]], mask_id=MASK_ID, vocab_size=2000, special_ids=SPECIAL,
                          masking=O.MaskingConfig(ratio=0.5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        losses = G.mntp_msg_losses(model, batch)
        hidden = G.masked_lm_reader(model).hidden_states(batch["input_ids"], batch["padding_mask"],
                                                         mask=[M.magnet(spans) for spans in batch["spans"]])
        for name in ("mntp", "msg"):
            expected = O.gathered_loss(model.get_output_embeddings(), hidden, batch[f"{name}_labels"])["loss"]
            assert torch.equal(losses[name], expected)


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


# --- infilling a span (§3.1, mode 3) ---

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


# --- §4.1 pooling ---

def test_word_pooling_follows_the_section_4_1_example():
    # tokens x_w11 x_w12 | x_w21 x_w22 x_w23 | x_w31 -> outputs y at positions 0..5
    hidden = torch.arange(6, dtype=torch.float32)[:, None] * torch.tensor([[1.0, 10.0]])
    w2 = G.pool_words(hidden, [(2, 5)])[0]
    assert torch.equal(w2, (hidden[1] + hidden[2] + hidden[3]) / 3)  # (y_w12 + y_w21 + y_w22) / 3
    assert torch.equal(G.pool_words(hidden, [(5, 6)])[0], hidden[4])  # one-token word: the output before it
    assert torch.equal(G.pool_words(hidden, [(2, 5)], shift=False)[0], hidden[2:5].mean(0))
    with pytest.raises(ValueError, match="starts before position 1"):
        G.pool_words(hidden, [(0, 2)])


# --- bad inputs ---

def test_bad_inputs_raise_clear_errors():
    ids = torch.randint(10, VOCAB, (1, 20))
    with pytest.raises(ValueError, match=r"spans_per_row\[0\]\[1\]=\(6, 10\) overlaps"):
        view(ids, [[(2, 8), (6, 10)]])
    with pytest.raises(ValueError, match=r"ends past the text of 20 tokens"):
        view(ids, [[(15, 25)]])
    with pytest.raises(ValueError, match="too small for in-batch negatives"):
        G.info_nce(torch.ones(1, 4), torch.ones(1, 4))
    with pytest.raises(ValueError, match="mode='both'"):
        G.mode_mask("both", [(2, 5)])


PROBES = [  # one row per bad input at the package's entry points: the ValueError names the argument (and its value)
    ("check_spans float span", lambda: G.check_spans([(1.5, 3)], 10), "spans[0]", "1.5"),
    ("check_spans bool span", lambda: G.check_spans([(False, True)], 10), "spans[0]", None),
    ("check_spans past the end", lambda: G.check_spans([(1, 11)], 10), "spans[0]", None),
    ("span_mask zero length", lambda: G.span_mask(0, []), "length", "0"),
    ("sample_spans string max_spans", lambda: G.sample_spans(40, max_spans="2", min_len=2, max_len=4,
                                                              generator=generator()), "max_spans", "'2'"),
    ("sample_spans inverted lengths", lambda: G.sample_spans(40, max_spans=2, min_len=5, max_len=4,
                                                              generator=generator()), "min_len", None),
    ("info_nce temperature 0", lambda: G.info_nce(torch.randn(3, 4), torch.randn(3, 4), 0), "temperature", "0"),
    ("info_nce temperature inf", lambda: G.info_nce(torch.randn(3, 4), torch.randn(3, 4), INF), "temperature", "inf"),
    ("info_nce temperature nan", lambda: G.info_nce(torch.randn(3, 4), torch.randn(3, 4), NAN), "temperature", "nan"),
    ("info_nce shapes", lambda: G.info_nce(torch.randn(3, 4), torch.randn(3, 5)), "positives", None),
    ("augment delete_prob 1.5", lambda: experiment.augment("a b c", generator(), delete_prob=1.5), "delete_prob", "1.5"),
    ("augment crop_min nan", lambda: experiment.augment("a b c", generator(), crop_min=NAN), "crop_min", "nan"),
    ("Phase negative weight", lambda: G.Phase(10, -1.0, 0.0, 0.0), "mntp", "-1.0"),
    ("phase_at past the end", lambda: G.phase_at([G.Phase(2, 1.0, 0.0, 0.0)], 2), "step", "2"),
    ("pool_words empty span", lambda: G.pool_words(torch.randn(6, 4), [(3, 3)]), "spans[0]", None),
]


@pytest.mark.parametrize("call, argument, value", [probe[1:] for probe in PROBES], ids=[probe[0] for probe in PROBES])
def test_bad_input_gives_a_value_error_naming_the_argument(call, argument, value, bad_input):
    bad_input(call, argument, value)
