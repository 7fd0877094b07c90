"""Notebook 07's fine-tune extends: its run folder is keyed without the length (``training.train``'s "Extending"), so
N then 2N steps equal 2N at once, a shorter request reads the prefix and the adapter kept at its length, and what an
adapter gives is keyed with the length (``FineTuneKey.adapter_key``)."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from helpers import profiles, store, training
from helpers.paths import cache_dir
from helpers.papers.diffusion import experiment, settings

SMOKE = settings.SETTINGS["smoke"]
# N and 2N, both on the held-out cadence (every step), so the run trained 2N at once evaluates at N as well
SHORT, LONG = replace(SMOKE, fine_tune_steps=2, fine_tune_eval_every=1), replace(SMOKE, fine_tune_steps=4,
                                                                                fine_tune_eval_every=1)


def _fine_tune(root, monkeypatch, backend, chosen, corruption):
    monkeypatch.setenv("WORKBOOK_ROOT", str(root))
    return experiment.fine_tune(backend, profiles.get("smoke"), chosen, progress=False, corruption=corruption)


def _checkpoint_weights(tuned) -> dict:
    """The run's trainable (LoRA) weights at its checkpoint, the last step it trained."""
    return store.load_torch(tuned.path / training.CHECKPOINT_DIR / "state.pt", "")["trainable"]


def _equal_weights(first, second) -> bool:
    return all(torch.equal(a, b) for a, b in zip(first.backend.model.parameters(), second.backend.model.parameters()))


@pytest.mark.parametrize("corruption", ["mask", "uniform"])
def test_a_fine_tune_extended_from_n_to_2n_steps_equals_one_trained_2n_steps_and_a_shorter_request_reads_the_prefix(
        tmp_path, monkeypatch, tiny_smollm2, corruption):
    monkeypatch.setenv("WORKBOOK_CACHE", str(cache_dir()))  # the corpus and the model stay where they are
    extended_root, at_once_root = tmp_path / "extended", tmp_path / "at_once"
    first = _fine_tune(extended_root, monkeypatch, tiny_smollm2, SHORT, corruption)
    extended = _fine_tune(extended_root, monkeypatch, tiny_smollm2, LONG, corruption)
    at_once = _fine_tune(at_once_root, monkeypatch, tiny_smollm2, LONG, corruption)
    assert extended.path == first.path and extended.path.name == at_once.path.name  # one folder, whatever the length
    assert [record["step"] for record in extended.records] == [1, 2, 3, 4]
    assert extended.records == at_once.records  # loss for loss, to the bit (the stored floats)
    assert [step for step, _ in extended.heldout_curve] == [0, 1, 2, 3, 4]
    assert extended.evaluations == at_once.evaluations
    trained, trained_at_once = _checkpoint_weights(extended), _checkpoint_weights(at_once)
    assert trained.keys() == trained_at_once.keys() and trained
    assert all(torch.equal(trained[name], trained_at_once[name]) for name in trained)
    assert _equal_weights(extended, at_once)
    assert extended.records[:2] == first.records and not _equal_weights(extended, first)  # it trained on from N

    # a shorter request: the records up to its length and the adapter kept there, never the longer run's
    shorter = _fine_tune(extended_root, monkeypatch, tiny_smollm2, SHORT, corruption)
    assert shorter.path == first.path and training.kept_lengths(shorter.path) == [2, 4]
    assert shorter.records == first.records and shorter.evaluations == first.evaluations
    assert _equal_weights(shorter, first) and not _equal_weights(shorter, extended)
    assert _checkpoint_weights(shorter).keys() == trained.keys()  # the checkpoint stays at 2N: a longer request goes on
    # a length never requested in a run that trained past it has no adapter of its own: refused, not the final one
    with pytest.raises(ValueError, match=r"steps=2: .* lengths \[4\]"):
        _fine_tune(at_once_root, monkeypatch, tiny_smollm2, SHORT, corruption)


def test_the_run_folder_key_ignores_the_length_but_not_other_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    profile = profiles.get("smoke")
    key, longer = experiment.FineTuneKey.of(profile, SHORT), experiment.FineTuneKey.of(profile, LONG)
    assert (key.steps, longer.steps) == (2, 4) and "steps" not in store.canonical_settings(key)
    assert store.run_dir_for(experiment.FINE_TUNE_RUN, longer) == store.run_dir_for(experiment.FINE_TUNE_RUN, key)
    for change in (dict(fine_tune_lr=1e-3), dict(fine_tune_batch=3), dict(fine_tune_seq_len=16),
                   dict(fine_tune_blocks=8), dict(seed=1), dict(fine_tune_eval_every=2), dict(fine_tune_eval_blocks=4)):
        other = experiment.FineTuneKey.of(profile, replace(SHORT, **change))
        assert store.fingerprint(other) != store.fingerprint(key), change
        assert store.fingerprint(other.adapter_key) != store.fingerprint(key.adapter_key), change


def test_what_an_adapter_gives_is_keyed_with_its_length():
    """The adapter after N steps is not the one after 2N: whatever is keyed by what it gives (the ledger's provenance
    of notebook 07's rows, ``runs={"fine-tune": tuned.key.adapter_key}``) tells the lengths apart, though both share a
    run folder. Keyed by the folder's key instead, the two lengths would share one entry."""
    profile = profiles.get("smoke")
    key, longer = experiment.FineTuneKey.of(profile, SHORT), experiment.FineTuneKey.of(profile, LONG)
    assert store.fingerprint(key.adapter_key) != store.fingerprint(longer.adapter_key)
    assert key.adapter_key == {"run": store.canonical_settings(key), "steps": 2}
    assert store.fingerprint(key) == store.fingerprint(longer)  # the folder's key alone would share them
