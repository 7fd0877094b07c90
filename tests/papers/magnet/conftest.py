"""Shared fixtures of MAGNET's tests: the tiny random Llama (and its tokenizer), loaded once per test module."""
import pytest

from helpers import models


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    return model, tokenizer
