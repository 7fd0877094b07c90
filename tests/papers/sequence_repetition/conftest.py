"""Fixtures the sequence repetition tests share: the tiny random Llama body and its tokenizer."""
import pytest

from helpers import models


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    return models.decoder_body(model).eval(), tokenizer
