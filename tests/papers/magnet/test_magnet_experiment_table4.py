"""MAGNET Table 4 (seed 000): span perplexity sees the right context only under the hybrid mask, equals the model's own
span NLL, the test sets avoid spans MSG never trained on, and gains are paired over examples."""
import pytest
import torch
import torch.nn.functional as F

from helpers import masks as M
from helpers.papers.magnet import experiment_table4 as I


def test_span_perplexity_sees_the_right_context_only_under_the_hybrid_mask(tiny):
    model, _ = tiny
    ids = torch.randint(10, 2000, (30,), generator=torch.Generator().manual_seed(2))
    example = I.InfillExample(ids, ((8, 14),), "test")
    changed = ids.clone()
    changed[20:] = torch.randint(10, 2000, (10,), generator=torch.Generator().manual_seed(3))
    other = I.InfillExample(changed, ((8, 14),), "test")
    causal = [I.span_perplexity(model, [e], "causal", progress=False)["ppl"] for e in (example, other)]
    hybrid = [I.span_perplexity(model, [e], "magnet", progress=False)["ppl"] for e in (example, other)]
    assert causal[0] == pytest.approx(causal[1], rel=1e-6)
    assert hybrid[0] != pytest.approx(hybrid[1], rel=1e-6)


@pytest.mark.parametrize("spans", [((1, 5),), ((8, 14), (20, 24))])  # (1, 5): the first token after BOS
def test_span_perplexity_through_the_masked_lm_interface_is_the_models_own_span_nll(tiny, spans):
    model, _ = tiny
    ids = torch.randint(10, 2000, (30,), generator=torch.Generator().manual_seed(7))
    example = I.InfillExample(ids, spans, "test")
    for mode, mask in (("causal", M.causal), ("magnet", M.magnet(list(spans)))):
        with torch.no_grad():
            logits = model(input_ids=ids[None], attention_mask=M.to_4d(mask, len(ids))).logits[0]
        by_hand = [F.cross_entropy(logits[start - 1:end - 1], ids[start:end], reduction="sum").item() for start, end in spans]
        tokens = sum(end - start for start, end in spans)
        result = I.span_perplexity(model, [example], mode, progress=False)
        assert result["tokens"] == tokens
        assert result["nll"] == pytest.approx(sum(by_hand) / tokens, rel=1e-5)


def test_block_infilling_spans_never_hold_a_paragraph_separator(tiny):
    _, tokenizer = tiny
    texts = ["Short one.", "It rained all day in Highbury and nobody came.", "Yes.", "No, indeed, not at all, sir."] * 30
    examples = I.block_infilling_data(tokenizer, texts, block_len=24, count=20, max_spans=2, span_min=3, span_max=6, seed=0)
    assert len(examples) == 20
    separator = tokenizer.eos_token_id
    assert any((e.ids == separator).any() for e in examples)  # the blocks do cross paragraphs
    for example in examples:
        assert all(not (example.ids[start:end] == separator).any() for start, end in example.spans)


def test_sentence_infilling_masks_only_sentences_msg_could_have_trained_on(tiny):
    _, tokenizer = tiny
    long = " ".join(["Elizabeth walked"] * 20) + "."
    passages = [["She came.", long, "He left.", "They sat.", "It ended."]] * 12 + [[long] * 5]
    examples = I.sentence_infilling_data(tokenizer, passages, seed=0, max_span_tokens=8)
    assert len(examples) == 12  # the passage of long sentences only is left out
    assert all(end - start <= 8 for e in examples for start, end in e.spans)
    assert len(I.sentence_infilling_data(tokenizer, passages, seed=0)) == 13


def test_nll_gain_is_paired_over_the_same_examples():
    worse = {"example_nll": [4.0, 6.0, 9.0], "example_tokens": [2, 3, 3]}
    better = {"example_nll": [2.0, 3.0, 9.0], "example_tokens": [2, 3, 3]}
    gain, low, high = I.nll_gain_interval(worse, better)
    assert gain == pytest.approx(5 / 8) and 0 <= low <= gain <= high
    with pytest.raises(ValueError, match="different examples"):
        I.nll_gain_interval(worse, {"example_nll": [1.0, 1.0, 1.0], "example_tokens": [2, 3, 4]})


def test_bad_inputs_raise_clear_errors(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="span_start=4, span_end=2"):
        I.infill_passage({}, tokenizer, "one two three four five", 4, 2)
    with pytest.raises(ValueError, match="mode='both'"):
        I.span_perplexity(model, [I.InfillExample(torch.arange(10, 20), ((2, 5),), "t")], "both", progress=False)
