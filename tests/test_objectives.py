"""MNTP / MTP (MAGNET §3.2.1, Eq. 2, App. A, App. E): selection, corruption, alignment, loss."""
import copy

import pytest
import torch

from helpers import masks as M
from helpers import models
from helpers import objectives as O

SPECIAL = (0, 1, 2)
VOCAB = 500
MASK_ID = 7


def corrupt(ids, padding=None, config=O.MaskingConfig(), seed=0):
    padding = torch.ones_like(ids) if padding is None else padding
    return O.mask_tokens(ids, padding, mask_id=MASK_ID, vocab_size=VOCAB, special_ids=SPECIAL, config=config,
                         generator=torch.Generator().manual_seed(seed))


def test_twenty_percent_selected_and_80_10_10_corruption():
    torch.manual_seed(0)
    ids = torch.randint(10, VOCAB, (400, 100))
    ids[ids == MASK_ID] = 8
    corrupted, selected = corrupt(ids)
    per_row = selected.sum(-1)
    assert torch.all(per_row == round(0.2 * 99))  # 99 selectable: the first token is never selected
    chosen = selected.sum().item()
    masked = ((corrupted == MASK_ID) & selected).sum().item() / chosen
    unchanged = ((corrupted == ids) & selected).sum().item() / chosen
    replaced = ((corrupted != ids) & (corrupted != MASK_ID) & selected).sum().item() / chosen
    assert masked == pytest.approx(0.8, abs=0.01)
    assert replaced == pytest.approx(0.1 * (1 - 1 / VOCAB), abs=0.01)  # a random draw can equal the original
    assert unchanged == pytest.approx(0.1, abs=0.01)
    assert torch.equal(corrupted[~selected], ids[~selected])  # nothing else is touched


def test_special_tokens_padding_and_first_token_are_never_selected():
    ids = torch.tensor([[1, 50, 51, 2, 52, 53, 54, 2, 0, 0]] * 200)
    padding = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]] * 200)
    ids[:, 1:8] = torch.randint(10, VOCAB, (200, 7)).masked_fill(ids[:, 1:8] == 2, 2)
    ids[:, [3, 7]] = 2
    _, selected = corrupt(ids, padding, O.MaskingConfig(ratio=0.9))
    assert not selected[:, [0, 3, 7, 8, 9]].any()
    left = torch.tensor([[0, 0, 60, 61, 62, 63]] * 50)
    _, selected = corrupt(left, (left != 0).long(), O.MaskingConfig(ratio=0.9))
    assert not selected[:, :3].any()  # pads and the first real token


def test_random_replacements_are_never_special():
    ids = torch.randint(10, VOCAB, (300, 50))
    corrupted, selected = corrupt(ids, config=O.MaskingConfig(ratio=0.5, mask_fraction=0.0, random_fraction=1.0))
    assert not torch.isin(corrupted[selected], torch.tensor(SPECIAL)).any()


def test_mntp_labels_shift_left_and_mtp_labels_stay():
    ids = torch.tensor([[10, 11, 12, 13, 14]])
    selected = torch.tensor([[False, True, False, True, True]])
    assert O.labels_for("mntp", ids, selected).tolist() == [[11, -100, 13, 14, -100]]
    assert O.labels_for("mtp", ids, selected).tolist() == [[-100, 11, -100, 13, 14]]
    with pytest.raises(ValueError, match="objective="):
        O.labels_for("clm", ids, selected)


@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.2, 1.5])
def test_mask_ratio_outside_open_interval_is_rejected(ratio):
    with pytest.raises(ValueError, match="ratio="):
        O.MaskingConfig(ratio=ratio)


@pytest.fixture(scope="module")
def tiny():
    return models.load_model("tiny-random:llama", device="cpu", dtype="float32")


def test_mask_token_choices(tiny):
    model, tokenizer = tiny
    underscore = O.resolve_mask_token(tokenizer, "underscore")
    assert tokenizer.decode([underscore]) == "_"
    assert O.resolve_mask_token(tokenizer, "eos") == tokenizer.eos_token_id
    model, tokenizer = copy.deepcopy(model), copy.deepcopy(tokenizer)
    rows = model.get_input_embeddings().weight.shape[0]
    mean = model.get_input_embeddings().weight.mean(0).clone()
    added = O.resolve_mask_token(tokenizer, "added", model=model)
    assert added == len(tokenizer) - 1 and model.get_input_embeddings().weight.shape[0] == rows + 1
    assert torch.allclose(model.get_input_embeddings().weight[added], mean)
    with pytest.raises(ValueError, match="mask_token="):
        O.resolve_mask_token(tokenizer, "[MASK]")


def test_tokenizer_without_pad_falls_back_to_eos(tiny):
    _, tokenizer = tiny
    assert tokenizer.pad_token_id is not None
    bare = copy.deepcopy(tokenizer)
    bare.pad_token = None
    assert models._ensure_pad_token(bare).pad_token_id == bare.eos_token_id


@pytest.mark.parametrize("objective", O.OBJECTIVES)
def test_gathered_loss_equals_the_full_logits_loss(tiny, objective):
    model, tokenizer = tiny
    ids = torch.randint(10, 1000, (3, 24))
    batch = O.make_batch(objective, ids, torch.ones_like(ids), mask_id=MASK_ID, vocab_size=len(tokenizer),
                         special_ids=tokenizer.all_special_ids, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        gathered = O.masked_lm_loss(model, batch)
        full = O.masked_lm_loss(model, batch, full_logits=True)
        logits = model(input_ids=batch["input_ids"], attention_mask=M.to_4d(M.bidirectional, 24)).logits
    by_hand = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1))
    assert gathered["loss"].item() == pytest.approx(by_hand.item(), rel=1e-5)
    assert gathered["loss"].item() == pytest.approx(full["loss"].item(), rel=1e-5)
    assert gathered["count"] == (batch["labels"] != -100).sum()
