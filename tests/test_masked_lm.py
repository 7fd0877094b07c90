"""The one masked-LM interface (helpers.masked_lm) and its one loader: which output predicts which column, the
loader's two branches (the MNTP-adapted decoder, and a Hub encoder read from a local folder with the Hub's files),
and the tokens generation may never emit."""
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

from helpers import masked_lm, masks, models, profiles
from helpers.masked_lm import EncoderMLM, MNTPDecoder


def _tiny_bert_folder(tmp_path):
    """A BERT MLM saved as the Hub stores one (config.json, model.safetensors, tokenizer files)."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "sea", "was", "calm", "_", "##_", "."]
    tokenizer = BertTokenizerFast(vocab={word: index for index, word in enumerate(words)})
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=64, max_position_embeddings=64))
    folder = tmp_path / "tiny-bert"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_the_loader_reads_a_hub_encoder_through_the_interface(tmp_path):
    mlm = masked_lm.load_masked_lm(profiles.get("smoke"), str(_tiny_bert_folder(tmp_path)), context_tokens=8)
    assert isinstance(mlm, EncoderMLM) and mlm.offset == 0 and mlm.context_tokens == 8
    assert not any(parameter.requires_grad for parameter in mlm.model.parameters())  # frozen
    assert mlm.mask_id == mlm.tokenizer.mask_token_id
    underscores = {mlm.tokenizer.convert_tokens_to_ids(token) for token in ("_", "##_")}
    assert underscores <= set(mlm.banned_ids)  # the mask token's look-alikes are never generated
    assert mlm.tokenizer.convert_tokens_to_ids(".") not in mlm.banned_ids


def test_the_loader_refuses_a_name_that_is_neither_mntp_nor_a_model():
    with pytest.raises(ValueError, match="name=''"):
        masked_lm.load_masked_lm(profiles.get("smoke"), "")


def test_an_mntp_decoder_reads_column_l_from_output_l_minus_1_and_refuses_column_0():
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    reader = MNTPDecoder.reader(model, tokenizer)
    ids = torch.randint(10, 1000, (1, 6), generator=torch.Generator().manual_seed(1))
    hidden = reader.hidden_states(ids, torch.ones_like(ids), mask=masks.bidirectional)
    logits = reader.logits_at(hidden, torch.tensor([0]), torch.tensor([3]))
    assert torch.allclose(logits, model.get_output_embeddings()(hidden[0, 2])[None], atol=1e-6)
    with pytest.raises(ValueError, match="no output predicts it"):
        reader.logits_at(hidden, torch.tensor([0]), torch.tensor([0]))
    assert reader.num_layers == models.num_layers(model) and reader.max_positions == models.max_positions(model)


def test_token_logits_convert_a_bf16_head_once_and_again_when_it_changes():
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype=torch.bfloat16, seed=0)
    reader = MNTPDecoder.reader(model, tokenizer)
    head = model.get_output_embeddings().weight
    features = torch.randn(3, head.shape[1], generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        first = reader.token_logits(features)
        kept = reader._float32_head()[0]
        assert torch.equal(first, features @ head.float().T) and first.dtype == torch.float32
        assert reader._float32_head()[0] is kept  # converted once, not on every call
        head.mul_(2)  # an in-place change of the weights (its version counter moves)
        assert torch.equal(reader.token_logits(features), features @ head.float().T)
        assert reader._float32_head()[0] is not kept
    head.requires_grad_(True)  # a trainable head with grad on: the plain conversion, so the gradient reaches it
    reader.token_logits(features).sum().backward()
    assert head.grad is not None and head.grad.abs().sum() > 0
