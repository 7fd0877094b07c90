"""MAGNET's training (seed 000): the x^+ augmentation, joint batches (Eq. 5, App. A), phase snapshots, and run keys
that hold exactly what changes a run."""
import dataclasses

import pytest
import torch

from helpers import adapters, models, profiles, store
from helpers import training as T
from helpers.papers.magnet import experiment as E
from helpers.papers.magnet import mechanism as G
from helpers.papers.magnet.settings import SETTINGS

MASK_ID = 7


def test_augmentation_deletes_and_crops_words_in_order():
    generator = torch.Generator().manual_seed(0)
    text = " ".join(f"w{i}" for i in range(30))
    for _ in range(50):
        words = E.augment(text, generator, delete_prob=0.1, crop_min=0.8).split()
        indices = [int(word[1:]) for word in words]
        assert indices == sorted(indices) and len(set(indices)) == len(indices)
        assert indices[-1] - indices[0] + 1 <= 30 and len(words) >= 1


def test_joint_loss_is_the_lambda_weighted_sum_and_batches_are_pure(tiny):
    model, tokenizer = tiny
    settings = SETTINGS["smoke"]
    blocks = torch.randint(10, 2000, (8, settings.seq_len), generator=torch.Generator().manual_seed(0))
    sentences = [f"Sentence number {i} says something rather different about item {i * 7}." for i in range(6)]
    model = T.add_lora(model, T.LoraSettings(r=4, alpha=8, dropout=0.0))
    G.add_projection_head(model, model.config.hidden_size, 0)
    phases = [G.Phase(2, 1.0, 0.0, 1.0), G.Phase(2, 1.0, 9.0, 1.0)]
    batch_for = E.joint_batch_maker(tokenizer, phases=phases, settings=settings, blocks=blocks, sentences=sentences,
                                    mask_id=MASK_ID, seed=0, device="cpu")
    first, again = batch_for(3, 0), batch_for(3, 0)
    assert torch.equal(first["masked"]["input_ids"], again["masked"]["input_ids"])
    assert torch.equal(first["positives"]["input_ids"], again["positives"]["input_ids"])
    assert "anchors" not in batch_for(0, 0) and first["lambdas"] == (1.0, 9.0, 1.0)
    with torch.no_grad():
        out = G.joint_loss(model, first)
    assert float(out["loss"]) == pytest.approx(float(out["mntp"] + 9 * out["sscl"] + out["msg"]), rel=1e-6)
    assert G.phase_at(phases, 1) is phases[0] and G.phase_at(phases, 2) is phases[1]
    with pytest.raises(ValueError, match="step=4"):
        G.phase_at(phases, 4)


def test_phase_snapshot_equals_a_run_of_that_phase_alone(tmp_path):
    settings = SETTINGS["smoke"]
    sentences = [f"Sentence number {i} says something rather different about item {i * 7}." for i in range(6)]
    blocks = torch.randint(10, 2000, (8, settings.seq_len), generator=torch.Generator().manual_seed(0))
    lora = T.LoraSettings(r=4, alpha=8, dropout=0.0)
    runs = {}
    for name, phases in (("both", [G.Phase(2, 1.0, 0.0, 1.0), G.Phase(2, 1.0, 9.0, 1.0)]), ("first", [G.Phase(2, 1.0, 0.0, 1.0)])):
        model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
        runs[name], _ = E.joint_experiment(model, tokenizer, phases=phases, settings=settings, run_dir=tmp_path / name,
                                           blocks=blocks, sentences=sentences, mask_id=MASK_ID, lora=lora, progress=False)
    base, _ = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    snapshot = adapters.load_adapter(base, tmp_path / "both" / "after_phase1")
    ids = torch.randint(10, 2000, (1, 12))
    with torch.no_grad():
        assert torch.allclose(snapshot(ids).logits, runs["first"](ids).logits, atol=1e-6)
        assert not torch.allclose(snapshot(ids).logits, runs["both"](ids).logits, atol=1e-6)
    components = E.read_components(tmp_path / "both")
    assert [r["step"] for r in components] == [1, 2, 3, 4]
    assert "sscl" not in components[1] and "sscl" in components[2]


def test_joint_training_refuses_blocks_longer_than_the_model_reads(tiny):
    model, tokenizer = tiny
    limit = models.max_positions(model)
    blocks = torch.zeros(2, limit + 1, dtype=torch.long)
    with pytest.raises(ValueError, match=f"sequence length {limit + 1} exceeds the model's max_position_embeddings"):
        E.joint_experiment(model, tokenizer, phases=[G.Phase(1, 1.0, 0.0, 1.0)], settings=SETTINGS["smoke"],
                           run_dir="/nonexistent/run", blocks=blocks, sentences=None, mask_id=MASK_ID)


def test_run_key_holds_what_changes_a_run_and_nothing_else():
    smoke, settings = profiles.get("smoke"), SETTINGS["smoke"]
    key = E.run_key(smoke, settings)
    assert key.settings == E.evaluation_free(settings)
    assert (key.model, key.corpus, key.seed) == (smoke.model_name, smoke.corpus, smoke.seed)
    assert key.lora == T.lora_settings(smoke) and key.mask_token == E.MASK_TOKEN and key.mntp_adapter is None
    fingerprint = store.fingerprint(key)
    # what only other notebooks read (the profile's name, gradient checkpointing of notebook 02's recipe) keys nothing
    assert store.fingerprint(E.run_key(smoke.replace(name="cpu", gradient_checkpointing=True), settings)) == fingerprint
    for changed in (E.run_key(smoke.replace(seed=1), settings), E.run_key(smoke.replace(lora_r=8), settings),
                    E.run_key(smoke, dataclasses.replace(settings, phase2_steps=3)),
                    E.run_key(smoke, dataclasses.replace(settings, heldout_blocks=4)),  # the records' held-out curve
                    E.run_key(smoke, settings, mntp_adapter={"config": {"steps": 2}})):
        assert store.fingerprint(changed) != fingerprint


def test_a_larger_evaluation_finds_the_same_run_folder_and_its_finished_run(tmp_path):
    smoke, settings = profiles.get("smoke"), SETTINGS["smoke"]
    larger = dataclasses.replace(settings, probe_test_sentences=60, gen_prefixes=20, infill_passages=30,
                                 infill_blocks=30, probe_train_sentences=40, gen_batch_size=4)
    assert store.run_dir_for("03_magnet_smoke", E.run_folder_key(E.run_key(smoke, larger))) == \
        store.run_dir_for("03_magnet_smoke", E.run_folder_key(E.run_key(smoke, settings)))
    # the run itself: trained under the small evaluation, found finished (not retrained) under the larger one
    blocks = torch.randint(10, 2000, (8, settings.seq_len), generator=torch.Generator().manual_seed(0))
    trained, written = {}, {}
    for name, chosen in (("small", settings), ("larger", larger)):
        model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
        _, trained[name] = E.joint_experiment(model, tokenizer, phases=[G.Phase(2, 1.0, 0.0, 1.0)], settings=chosen,
                                              run_dir=tmp_path / "run", blocks=blocks, sentences=None, mask_id=MASK_ID,
                                              progress=False, snapshot_phases=False)
        written[name] = {path.name: path.stat().st_mtime_ns for path in (tmp_path / "run").rglob("*")
                         if path.is_file() and path.name not in (".lock", "settings.json")}
    # found finished: its metrics and weights are not written again (only the lock and the settings it checks)
    assert written["larger"] == written["small"] and "metrics.jsonl" in written["small"]
    losses = lambda records: [(r["step"], r["loss"]) for r in records if "loss" in r]
    assert losses(trained["larger"]) == losses(trained["small"]) and len(losses(trained["small"])) == 2
    # a size the run's own records rest on (its held-out MNTP blocks) still names another run
    assert store.run_dir_for("03_magnet_smoke", E.run_folder_key(E.run_key(smoke, dataclasses.replace(
        settings, heldout_blocks=4)))) != store.run_dir_for("03_magnet_smoke", E.run_folder_key(E.run_key(smoke, settings)))


def test_joint_evaluation_scores_repetition_and_the_held_out_mntp_accuracy_on_fixed_batches(tiny):
    from helpers import objectives as O
    from helpers import masks as M

    model, tokenizer = tiny
    smoke, settings = profiles.get("smoke"), dataclasses.replace(SETTINGS["smoke"], heldout_blocks=3)
    batches = E.heldout_mntp_batches(smoke, settings, tokenizer)
    # 3 blocks rounded up to whole batches of batch_size=2; the validation split, masked once with a fixed seed
    assert [len(batch["input_ids"]) for batch in batches] == [2, 2]
    assert all(batch["input_ids"].shape[1] == settings.seq_len for batch in batches)
    again = E.heldout_mntp_batches(smoke, settings, tokenizer)
    assert all(torch.equal(a["labels"], b["labels"]) and torch.equal(a["input_ids"], b["input_ids"])
               for a, b in zip(batches, again))
    assert all((batch["input_ids"] == E.mask_id_for(tokenizer)).any() for batch in batches)
    prefixes, evaluate = E.joint_evaluation(smoke, settings, tokenizer)
    first, second = evaluate(model.eval()), evaluate(model)
    assert len(prefixes) == settings.curve_prefixes and {"rep_4", "rep_sen", E.HELDOUT_KEY} <= set(first)
    assert first == second  # the same model on the same batches: a curve moves only when training moves it
    expected = O.evaluate_masked_lm(model, batches, M.bidirectional)
    assert first[E.HELDOUT_KEY] == pytest.approx(expected["eval_accuracy"])
    assert 0 <= first[E.HELDOUT_KEY] <= 1
    with pytest.raises(ValueError, match="heldout_blocks=100000"):
        E.heldout_mntp_batches(smoke, dataclasses.replace(settings, heldout_blocks=100_000), tokenizer)


def test_joint_evaluation_generates_only_at_fig6_steps_and_training_passes_the_step(tiny, tmp_path):
    model, tokenizer = tiny
    smoke = profiles.get("smoke")
    settings = dataclasses.replace(SETTINGS["smoke"], phase1_steps=4, phase2_steps=6, eval_every=2, curve_every=4)
    _, evaluate = E.joint_evaluation(smoke, settings, tokenizer)
    assert T.takes_step(evaluate) and not T.takes_step(E.every_evaluation(evaluate))
    model.eval()
    at_curve, between, plain = evaluate(model, step=8), evaluate(model, step=2), E.every_evaluation(evaluate)(model)
    assert "rep_4" in evaluate(model, step=10)  # the last step, though not a multiple of curve_every
    assert {"rep_4", "rep_sen", E.HELDOUT_KEY} <= set(at_curve) and {"rep_4", "rep_sen", E.HELDOUT_KEY} <= set(plain)
    assert E.HELDOUT_KEY in between and "rep_4" not in between and "rep_sen" not in between
    assert between[E.HELDOUT_KEY] == at_curve[E.HELDOUT_KEY]  # the budget check's points are all there
    # the training loop passes each evaluation's step: held-out accuracy at 0, 2, ..., 10; Rep-n at 0, 4, 8 and 10
    blocks = torch.randint(10, 2000, (8, settings.seq_len), generator=torch.Generator().manual_seed(0))
    sentences = [f"Sentence number {i} says something rather different about item {i * 7}." for i in range(6)]
    fresh, _ = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)  # the fixture stays bare
    _, records = E.joint_experiment(fresh, tokenizer, phases=E.magnet_phases(settings), settings=settings,
                                    run_dir=tmp_path / "run", blocks=blocks, sentences=sentences, mask_id=MASK_ID,
                                    evaluate=evaluate, progress=False, snapshot_phases=False)
    assert [r["step"] for r in records if E.HELDOUT_KEY in r] == [0, 2, 4, 6, 8, 10]
    assert [r["step"] for r in records if "rep_4" in r] == [0, 4, 8, 10]
