"""Proof on a real model that every mask reaches the attention of every layer.

Change one input token of SmolLM2 and compare hidden states position by position, layer by
layer: the positions that move must be exactly those the masks' reachability predicts
(``masks.reachability``), under eager, sdpa and flex attention, at batch size 1 and in
left- and right-padded batches. A silent fall-back to the causal mask, or a per-layer mask
that is computed and never used, fails here.
"""
import pytest
import torch

from helpers import attention as A
from helpers import masks as M
from helpers import models
from helpers.profiles import EMBEDDED_MODEL

pytestmark = pytest.mark.embedded

MOVED = 1e-4  # a reachable position moves by far more than this; an unreachable one not at all
SOURCE = 6
SPANS = [(3, 7), (9, 13)]


@pytest.fixture(scope="module")
def smollm2():
    return models.load_model(EMBEDDED_MODEL, attn_implementation="sdpa", dtype="float32", device="cpu")


@pytest.fixture(scope="module")
def sentence_ids(smollm2):
    _, tokenizer = smollm2
    text = "It is a truth universally acknowledged, that a single man in possession of a good fortune"
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids[:, :16]
    assert ids.shape[1] == 16
    return ids


def mask_cases(num_layers):
    """(name, mask, layer_masks, [positions to perturb]) for every mask of the workbook."""
    return [
        ("causal", M.causal, None, [4]),
        ("bidirectional", M.bidirectional, None, [12]),
        ("magnet_fig2c", M.magnet([(5, 10)]), None, [6, 2]),
        ("magnet_fig2d", M.magnet(SPANS), None, [4, 10, 14]),
        ("magnet_fig2a", M.magnet([(0, 16)]), None, [8]),
        ("dswa_eq7", None, M.dswa_per_layer(SOURCE, num_layers, fixed_window=4, alpha_min=0.25, alpha_max=1.0), [12, 2]),
        ("middle_unmasking", None, M.middle_unmasking(num_layers), [11]),
        ("block_causal", M.block_causal(SOURCE, 3), None, [9, 7, 2]),
    ]


def pad_batch(ids, side, pad_id, other_ids):
    """Row 0 is ``ids`` padded by 3 on ``side``; row 1 is another sentence filling the length."""
    length = ids.shape[1]
    padded = torch.full((2, length + 3), pad_id)
    padding = torch.zeros_like(padded)
    if side == "left":
        padded[0, 3:], padding[0, 3:] = ids[0], 1
    else:
        padded[0, :length], padding[0, :length] = ids[0], 1
    padded[1], padding[1] = other_ids[0, : length + 3], 1
    return padded, padding, (3 if side == "left" else 0)


def check_mask_is_obeyed(model, ids, padding, offset, mask, layer_masks, positions, replacement):
    num_layers = model.config.num_hidden_layers
    for position in positions:
        reach = A.predicted_influence(mask, layer_masks=layer_masks, num_layers=num_layers, padding_mask=padding,
                                      position=position + offset)
        moved = A.influence(model, ids, position + offset, replacement, mask, layer_masks=layer_masks, padding_mask=padding)
        real = padding[0].bool()
        for layer in range(num_layers):
            expected = reach[layer][real]
            actual = moved[layer][real]
            assert torch.all(actual[~expected] == 0), f"layer {layer}: unreachable positions moved {actual[~expected]}"
            assert torch.all(actual[expected] > MOVED), f"layer {layer}: reachable positions did not move {actual[expected]}"


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("padding_side", ["none", "left", "right"])
def test_hidden_states_move_exactly_where_the_mask_reaches(smollm2, sentence_ids, implementation, padding_side):
    model, tokenizer = smollm2
    model.set_attn_implementation(implementation)
    other = tokenizer("Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy disposition",
                      add_special_tokens=False, return_tensors="pt").input_ids
    if padding_side == "none":
        ids, padding, offset = sentence_ids, torch.ones_like(sentence_ids), 0
    else:
        ids, padding, offset = pad_batch(sentence_ids, padding_side, tokenizer.pad_token_id, other)
    replacement = tokenizer.convert_tokens_to_ids("Ġcat")
    for name, mask, layer_masks, positions in mask_cases(model.config.num_hidden_layers):
        check_mask_is_obeyed(model, ids, padding, offset, mask, layer_masks, positions, replacement)


def test_flex_attention_obeys_one_mask_and_per_layer_masks(smollm2, sentence_ids):
    model, tokenizer = smollm2
    model.set_attn_implementation("flex_attention")
    try:
        replacement = tokenizer.convert_tokens_to_ids("Ġcat")
        padding = torch.ones_like(sentence_ids)
        num_layers = model.config.num_hidden_layers
        for name, mask, layer_masks, positions in mask_cases(num_layers):
            if name in ("magnet_fig2d", "dswa_eq7"):
                check_mask_is_obeyed(model, sentence_ids, padding, 0, mask, layer_masks, positions[:1], replacement)
    finally:
        model.set_attn_implementation("sdpa")


def test_bidirectional_differs_from_causal_on_the_real_model(smollm2, sentence_ids):
    """The cheapest alarm: a bidirectional forward must not equal the causal one."""
    model, _ = smollm2
    model.set_attn_implementation("sdpa")
    with torch.no_grad():
        causal = A.forward_with_mask(model, sentence_ids, M.causal).logits
        plain = model(sentence_ids).logits
        bidirectional = A.forward_with_mask(model, sentence_ids, M.bidirectional).logits
    assert torch.allclose(causal, plain, atol=1e-4)
    assert not torch.allclose(bidirectional[:, :-1], causal[:, :-1], atol=1e-2)
