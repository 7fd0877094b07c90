"""WORKBOOK_MODEL=random:<shape>: random weights of a real shape as any profile's model, offline, keyed apart."""
import shutil

import pytest
import torch

from helpers import embedded_model, memory, mntp_adapter, models, profiles


@pytest.fixture
def clean_env(monkeypatch):
    for name in (profiles.ENV_VAR, profiles.SEED_VAR, profiles.DTYPE_VAR, profiles.MODEL_VAR):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("profile", profiles.PROFILE_NAMES)
def test_the_model_override_changes_only_the_model_and_every_run_key(clean_env, profile):
    clean_env.setenv(profiles.ENV_VAR, profile)
    plain = profiles.current()
    clean_env.setenv(profiles.MODEL_VAR, " Random:SmolLM2-360M ")
    chosen = profiles.current()
    assert chosen.model_name == "random:smollm2-360m" and chosen.replace(model_name=plain.model_name) == plain
    assert profiles.is_random_model(chosen) and not profiles.is_random_model(plain)
    key = mntp_adapter.masked_lm_run_key(chosen, "mntp")
    assert key != mntp_adapter.masked_lm_run_key(plain, "mntp") and key["model"] == "random:smollm2-360m"
    assert memory.workload("02", chosen).model.name == "SmolLM2-360M (random)"  # the estimate knows the shape offline


@pytest.mark.parametrize("raw", ["random:smollm2-1.7b", "random:", "smollm2-135m", "HuggingFaceTB/SmolLM2-360M"])
def test_an_unknown_model_override_names_the_variable_and_the_known_shapes(clean_env, raw):
    clean_env.setenv(profiles.MODEL_VAR, raw)
    with pytest.raises(ValueError, match=f"WORKBOOK_MODEL={raw!r} is not a known random-weight model; "
                                         "expected one of random:smollm2-135m, random:smollm2-360m"):
        profiles.current()
    clean_env.delenv(profiles.MODEL_VAR)
    with pytest.raises(ValueError, match="name='random:gpt'"):
        models.load_model("random:gpt", device="cpu")


def test_random_weights_load_offline_from_the_tokenizer_alone_seeded_and_say_so(clean_env, tmp_path, capsys):
    source = embedded_model._embedded_target_dir()
    if not (source / "tokenizer.json").is_file():
        pytest.skip("embedded tokenizer not fetched (run `make setup`)")
    folder = tmp_path / models.EMBEDDED_DIR_NAME
    folder.mkdir()
    for name in models.TOKENIZER_FILES:  # the tokenizer and its checksums only: no weights travel
        for found in source.glob(f"{name}*"):
            shutil.copy2(found, folder / found.name)
    clean_env.setenv("WORKBOOK_CACHE", str(tmp_path))
    clean_env.setattr(models, "_ANNOUNCED", set())
    with pytest.raises(models.MissingAssetError):
        models.embedded_model_dir()  # the embedded model itself is not there
    first, tokenizer = models.load_model("random:smollm2-135m", device="cpu", dtype="float32", seed=1)
    second, _ = models.load_model("random:smollm2-135m", device="cpu", dtype="float32", seed=1)
    shape = memory.KNOWN_SHAPES["embedded:smollm2-135m"]
    assert sum(p.numel() for p in first.parameters()) == shape.parameters
    assert (first.config.num_hidden_layers, first.config.hidden_size, first.config.vocab_size) == (30, 576, len(tokenizer))
    assert first.config.eos_token_id == tokenizer.eos_token_id and not first.training
    weight = first.model.layers[7].mlp.down_proj.weight
    assert torch.equal(weight, second.model.layers[7].mlp.down_proj.weight)
    out = capsys.readouterr().out
    assert out.count("RANDOM WEIGHTS: random:smollm2-135m") == 1 and "measure nothing of the papers" in out


def test_the_larger_shape_is_smollm2_360m():
    tokenizer = type("T", (), {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2})()
    config = models.random_config("random:smollm2-360m", tokenizer)
    with torch.device("meta"):
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == memory.KNOWN_SHAPES["HuggingFaceTB/SmolLM2-360M"].parameters
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (32, 960, 5)
