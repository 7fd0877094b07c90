"""The tiny random Llama with SmolLM2's tokenizer, read as an MNTP decoder whose mask token is "_"."""
import pytest

from helpers import models, profiles
from helpers.masked_lm import MNTPDecoder


@pytest.fixture
def tiny_smollm2() -> MNTPDecoder:
    try:
        model, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, dtype="float32", device="cpu", seed=0)
    except models.MissingAssetError as error:
        pytest.skip(f"the tiny model needs the embedded SmolLM2 tokenizer (run `make setup`): {error}")
    model.eval().requires_grad_(False)
    return MNTPDecoder(model, tokenizer, tokenizer("_", add_special_tokens=False).input_ids[0],
                       name=profiles.TINY_RANDOM_MODEL)
