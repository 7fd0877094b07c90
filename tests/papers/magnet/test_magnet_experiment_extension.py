"""Notebook 03's runs extend (``helpers.training.train``'s "Extending"): the run folder is keyed without the length of
the run's last phase (MAGNET's phase 2, the LLM2Vec-style SimCSE stage, Table 6's ablation runs), so a run trained N
steps of that phase and then asked for 2N equals one trained 2N at once, every loss and evaluation record and every
trainable weight to the bit; asking for N again returns the first N's records and adapter, training nothing."""
import dataclasses

import pytest
import torch

from helpers import adapters, models, paths, profiles, store
from helpers import training as T
from helpers.papers.magnet import experiment as E
from helpers.papers.magnet import mechanism as G
from helpers.papers.magnet.settings import SETTINGS

MASK_ID = 7
SENTENCES = [f"Sentence number {i} says something rather different about item {i * 7}." for i in range(6)]


@pytest.fixture
def workbooks(tmp_path, monkeypatch):
    """``use(name)`` points the workbook root (its runs/) at ``tmp_path/name``: one root for the run that extends,
    another for the run trained at once, under the same run key. The model and corpus stay in the real cache; adapters
    are saved under ``tmp_path``."""
    monkeypatch.setenv("WORKBOOK_CACHE", str(paths.cache_dir()))
    monkeypatch.setattr(adapters, "adapter_path",
                        lambda kind, name, settings: tmp_path / "adapters" / f"{kind}-{store.fingerprint(settings)}")

    def use(name: str):
        monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path / name))

    return use


def _views(settings) -> E.JointData:
    blocks = torch.randint(10, 2000, (8, settings.seq_len), generator=torch.Generator().manual_seed(0))
    return E.JointData(blocks=blocks, sentences=SENTENCES, paraphrases=None)


def _trainable(model) -> dict:
    return {name: weight.detach().clone() for name, weight in model.named_parameters() if weight.requires_grad}


def _assert_same_weights(model, expected: dict) -> None:
    found = _trainable(model)
    assert found.keys() == expected.keys() and found
    for name, weight in expected.items():
        assert torch.equal(found[name], weight), name


def _extend_train_at_once_and_shorten(workbooks, request, short, long) -> None:
    """``request(settings)`` trains (or finds) a run and returns ``(TrainedRun, path)``; ``short`` and ``long`` differ
    only in the length of the run's last phase, ``long``'s twice ``short``'s."""
    workbooks("extended")
    first, path = request(short)
    at_short = _trainable(first.model)
    extended, extended_path = request(long)
    assert extended_path == path  # the same folder: the longer request continued the run ...
    assert T.kept_lengths(path) == [first.steps, extended.steps]  # ... from its checkpoint at the shorter length
    workbooks("at_once")
    straight, straight_path = request(long)
    assert straight_path.name == path.name and T.kept_lengths(straight_path) == [straight.steps]
    assert extended.records == straight.records  # every loss and evaluation record, to the bit
    assert sum("loss" in record for record in extended.records) == extended.steps  # each step once
    assert [r for r in extended.records if r["step"] <= first.steps] == first.records
    assert extended.components() == straight.components()
    _assert_same_weights(extended.model, _trainable(straight.model))
    workbooks("extended")
    again, again_path = request(short)  # a shorter request: the prefix, training nothing
    assert again_path == path and again.records == first.records and again.components() == first.components()
    _assert_same_weights(again.model, at_short)
    assert T.kept_lengths(path) == [first.steps, extended.steps]


def test_the_run_folder_key_leaves_out_the_run_lengths_and_keeps_every_other_setting():
    smoke, settings = profiles.get("smoke"), SETTINGS["smoke"]

    def folder(chosen, **options):
        return store.run_dir_for("03_magnet_smoke", E.run_folder_key(E.run_key(smoke, chosen, **options)))

    longer = dataclasses.replace(settings, phase2_steps=40, simcse_steps=40)
    assert folder(longer) == folder(settings)
    assert store.fingerprint(E.run_key(smoke, longer)) != store.fingerprint(E.run_key(smoke, settings))  # the adapter's
    for other in (dataclasses.replace(settings, phase1_steps=3),  # where phase 2 starts: other steps, not a longer run
                  dataclasses.replace(settings, lr=2e-3), dataclasses.replace(settings, simcse_eval_every=2),
                  dataclasses.replace(settings, lambda_sscl=1.0), dataclasses.replace(settings, heldout_blocks=4)):
        assert folder(other) != folder(settings)
    assert folder(settings, mntp_adapter={"config": {"steps": 2}}) != folder(settings)
    assert folder(dataclasses.replace(settings, gen_prefixes=20)) == folder(settings)  # evaluation-only, as before
    # what the training loop stores: the last phase without its length, with its λ; earlier phases whole
    two = E.phases_key([G.Phase(2, 1.0, 0.0, 1.0), G.Phase(2, 1.0, 9.0, 1.0)])
    assert two == E.phases_key([G.Phase(2, 1.0, 0.0, 1.0), G.Phase(8, 1.0, 9.0, 1.0)])
    assert two != E.phases_key([G.Phase(3, 1.0, 0.0, 1.0), G.Phase(2, 1.0, 9.0, 1.0)])
    assert two != E.phases_key([G.Phase(2, 1.0, 0.0, 1.0), G.Phase(2, 1.0, 1.0, 1.0)])


def test_a_joint_run_whose_stored_settings_held_its_length_would_refuse_the_longer_request(tmp_path, monkeypatch):
    """The break this design guards against: the last phase's length in the training loop's stored settings."""
    settings = SETTINGS["smoke"]
    blocks = _views(settings).blocks

    def request(steps):
        model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
        return E.joint_experiment(model, tokenizer, phases=[G.Phase(steps, 1.0, 0.0, 1.0)], settings=settings,
                                  run_dir=tmp_path / "run", blocks=blocks, sentences=None, mask_id=MASK_ID,
                                  progress=False)[1]

    request(1)
    with monkeypatch.context() as patched:
        patched.setattr(E, "phases_key", lambda phases: store.canonical_settings(list(phases)))
        with pytest.raises(ValueError, match=r"cannot be resumed under these ones: run\.phases: "):
            request(2)
    assert [r["step"] for r in request(2) if "loss" in r] == [1, 2] and T.kept_lengths(tmp_path / "run") == [1, 2]


def test_magnet_extended_from_n_to_2n_phase2_steps_equals_2n_at_once_and_n_again_reads_the_prefix(workbooks):
    """Phase 1 (2 steps) then phase 2 of 2 steps, extended to 4, against 2 + 4 at once; the held-out MNTP accuracy
    every 2 steps and Fig. 6's generations every 4 and at each request's end (steps 4 and 6)."""
    smoke = profiles.get("smoke")
    short = dataclasses.replace(SETTINGS["smoke"], phase1_steps=2, phase2_steps=2, eval_every=2, curve_every=4)
    long = dataclasses.replace(short, phase2_steps=4)

    def request(settings):
        base, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
        _, evaluate = E.joint_evaluation(smoke, settings, tokenizer)
        run = E.train_magnet(base, tokenizer, smoke, settings, _views(settings), evaluate=evaluate, progress=False)
        return run, run.path

    _extend_train_at_once_and_shorten(workbooks, request, short, long)
    workbooks("extended")
    run, path = request(long)
    assert [r["step"] for r in run.records if E.HELDOUT_KEY in r] == [0, 2, 4, 6]
    assert [r["step"] for r in run.records if "rep_4" in r] == [0, 4, 6]
    assert [r["step"] for r in run.components()] == [1, 2, 3, 4, 5, 6]
    assert (path / "after_phase1" / "adapter_config.json").exists()  # Table 6's MNTP + MSG, kept once


def test_the_llm2vec_style_simcse_stage_extended_from_n_to_2n_steps_equals_2n_at_once(workbooks, monkeypatch):
    smoke = profiles.get("smoke")
    short = dataclasses.replace(SETTINGS["smoke"], simcse_steps=2, simcse_eval_every=1)
    long = dataclasses.replace(short, simcse_steps=4)
    _, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    # notebook 02's MNTP adapter, merged: a plain model here (the stage adds its own LoRA)
    monkeypatch.setattr(E.MNTP, "load_or_train_mntp", lambda profile, progress=True: (
        models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)[0], tokenizer, MASK_ID))
    monkeypatch.setattr(E.MNTP, "mntp_adapter", lambda profile: ("mntp", {"config": {"steps": 2}}))

    def request(settings):
        _, evaluate = E.joint_evaluation(smoke, settings, tokenizer)
        run = E.train_llm2vec_style(tokenizer, smoke, settings, _views(settings), evaluate=evaluate, progress=False)
        return run, run.path

    _extend_train_at_once_and_shorten(workbooks, request, short, long)
    workbooks("extended")
    run, _ = request(long)
    assert [r["step"] for r in run.records if "rep_4" in r] == [0, 1, 2, 3, 4]  # every evaluation generates


def test_an_ablation_run_extended_from_n_to_2n_steps_equals_2n_at_once(workbooks):
    smoke = profiles.get("smoke")
    short = dataclasses.replace(SETTINGS["smoke"], phase2_steps=2, ablation_runs=("sscl+msg",))
    long = dataclasses.replace(short, phase2_steps=4)
    _, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)

    def request(settings):
        model = E.train_ablations(tokenizer, smoke, settings, _views(settings), progress=False)["SSCL + MSG"]
        path = E.ablation_run(smoke, settings, "sscl+msg").path
        steps = settings.phase2_steps
        records = [r for r in T.read_metrics(path) if r["step"] <= steps]
        return E.TrainedRun(model, records, path, steps), path

    _extend_train_at_once_and_shorten(workbooks, request, short, long)
