"""Fixtures shared by the EMAT tests: spaCy, the tiny random Llama read as an MNTP decoder, a tiny BERT."""
from __future__ import annotations

import pytest
import torch

from helpers import models, profiles
from helpers.masked_lm import EncoderMLM, MNTPDecoder
from helpers.papers.emat import mechanism, settings

SETTINGS = settings.SETTINGS["smoke"]


@pytest.fixture(scope="module")
def nlp():
    from helpers import data

    try:
        return data.spacy_pipeline()
    except Exception as error:  # pragma: no cover - only without the spaCy model package
        pytest.skip(f"spaCy pipeline unavailable: {error}")


@pytest.fixture(scope="module")
def tiny_mlm():
    try:
        models.embedded_model_dir()
    except models.MissingAssetError as error:
        pytest.skip(f"the tiny model needs the embedded tokenizer (run `make setup`): {error}")
    model, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, dtype="float32", device="cpu", seed=0)
    mask_id = tokenizer("_", add_special_tokens=False).input_ids[0]
    return MNTPDecoder(model.requires_grad_(False), tokenizer, mask_id, context_tokens=8, name=profiles.TINY_RANDOM_MODEL)


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


@pytest.fixture
def tiny_gru(tiny_mlm):
    """``tiny_gru(seed=0)``: a GRU decoder on the tiny Llama, its weights drawn after ``torch.manual_seed(seed)``."""
    def build(seed=0):
        torch.manual_seed(seed)
        return mechanism.build_gru(tiny_mlm, SETTINGS.training.gru_layers, SETTINGS.training.gru_dropout).eval()

    return build
