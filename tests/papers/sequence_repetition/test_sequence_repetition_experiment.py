"""Sequence repetition's experiments (seed 003): first-sub-token labels (App. A.4), Fig. 1 measured on a real model,
the taggers' training and run folders (§3.3), the frozen-feature probe, and parallel training."""
import dataclasses

import pytest
import torch

from helpers import models, paths, schedules, store, training
from helpers.papers.sequence_repetition import (experiment, experiment_data, experiment_fig1, experiment_probe,
                                                mechanism, report)
from helpers.papers.sequence_repetition.settings import SETTINGS

PAD = 2


# --------------------------------------------------------------------------- labels on first sub-tokens

def test_labels_sit_on_the_first_sub_token_of_each_word_only(tiny):
    _, tokenizer = tiny
    words = ["Elizabeth", "walked", "to", "Netherfield", ",", "Hertfordshire", "."]
    tags = ["B-PER", "O", "O", "B-LOC", "O", "B-LOC", "O"]
    ids, starts = experiment_data.encode_words(tokenizer, words)
    assert len(starts) == len(words) and starts == sorted(set(starts))
    for word, start, end in zip(words, starts, starts[1:] + [len(ids)]):
        assert tokenizer.decode(ids[start:end]).strip() == word  # the word's sub-tokens run from its start
    assert any(end - start > 1 for start, end in zip(starts, starts[1:]))  # some word really is split
    sentence = experiment_data.EncodedSentence(tuple(ids), tuple(starts), tuple(words), tuple(tags))
    labels = experiment_data.label_vocabulary([tags])
    short = experiment_data.EncodedSentence(tuple(ids[:2]), (0,), ("Elizabeth",), ("B-PER",))
    batch = experiment_data.collate([sentence, short], labels, PAD)
    row = batch["labels"][0]
    assert [labels[int(row[s])] for s in starts] == tags
    others = [i for i in range(len(ids)) if i not in starts]
    assert (row[others] == mechanism.IGNORE_INDEX).all()
    assert (batch["labels"][1, 1:] == mechanism.IGNORE_INDEX).all() and (batch["padding_mask"][1, 2:] == 0).all()


def test_truncation_drops_words_past_max_tokens(tiny):
    _, tokenizer = tiny
    ids, starts = experiment_data.encode_words(tokenizer, ["Netherfield"] * 10, max_tokens=8)
    assert len(ids) <= 8 and all(start < len(ids) for start in starts) and len(starts) < 10


def test_label_vocabulary_and_silver_types():
    assert experiment_data.label_vocabulary([["B-PER", "I-PER", "O"], ["B-LOC"]]) == ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")
    assert experiment_data.conll_types(["B-PERSON", "I-PERSON", "B-DATE", "B-GPE", "B-NORP"]) == ("B-PER", "I-PER", "O", "B-LOC", "B-MISC")


# --------------------------------------------------------------------------- §2 block shares on a real model

def test_block_share_views_measure_a_real_model(tiny):
    body, _ = tiny
    model = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0,
                              attn_implementation="eager")[0]
    sentences = [torch.randint(10, 2000, (5,), generator=torch.Generator().manual_seed(s)) for s in range(3)]
    views = experiment_fig1.measure_block_share_views(model, sentences, [0, 1, 2], progress=False)
    assert set(views) == set(mechanism.SHARE_VIEWS) and views["last copy"][1].shape == (3, models.num_layers(model))
    assert all(float(views[view][0].abs().max()) == 0.0 for view in mechanism.SHARE_VIEWS)  # r = 0 has no full block
    table = report.block_share_views_table(views, resamples=50)
    assert list(table.index) == [1, 2] and table.loc[1, "analytic (k-1)/(k+1) of blocks"] == pytest.approx(1 / 3)
    assert "formula 0.33" in report.describe_block_share_views(table)


# --------------------------------------------------------------------------- training

def toy_data(tokenizer):
    words = [("Elizabeth", "walked", "home"), ("Darcy", "rode", "to", "London"), ("Jane", "smiled")]
    tags = [("B-PER", "O", "O"), ("B-PER", "O", "O", "B-LOC"), ("B-PER", "O")]
    sentences = [experiment_data.TaggedSentence(w, t) for w, t in zip(words, tags)]
    encoded = experiment_data.encode_sentences(tokenizer, sentences, 32)
    labels = experiment_data.label_vocabulary(tags)
    return experiment_data.TaggingData("ner", labels, encoded, encoded[:2], encoded, PAD)


def test_training_moves_only_lora_and_the_head_and_finished_runs_are_read_back(tmp_path, tiny, monkeypatch):
    _, tokenizer = tiny
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path)
    settings = SETTINGS["smoke"].with_training(steps=3, batch_size=2, lora_r=2, lora_alpha=2, lr=1e-2, eval_every=0)
    built = {}
    original = experiment.build_tagger

    def remember(*args, **kwargs):
        tagger, tok = original(*args, **kwargs)
        built["before"] = {name: p.detach().clone() for name, p in tagger.named_parameters()}
        built["tagger"] = tagger
        return tagger, tok

    monkeypatch.setattr(experiment, "build_tagger", remember)
    tagging = toy_data(tokenizer)
    strategy = mechanism.Strategy("sr", 1)

    def train():
        run = experiment.tagger_run(tagging, strategy, settings, model_name="tiny-random:llama", seed=0,
                                    run_prefix="run")
        return experiment.train_tagger(tagging, strategy, settings, model_name="tiny-random:llama", seed=0, run=run,
                                       progress=False)

    result = train()
    after = {name: p.detach() for name, p in built["tagger"].named_parameters()}
    moved = {name for name, before in built["before"].items() if not torch.equal(before, after[name])}
    assert all("lora_" in name or name.startswith("head.") for name in moved)  # the decoder itself stays frozen
    assert any("lora_B" in name for name in moved) and {"head.weight", "head.bias"} <= moved
    built.clear()
    again = train()
    assert "tagger" not in built and again == result  # read back, not retrained
    reloaded = experiment.load_trained_tagger(result, settings)
    predicted = experiment.predict_tags(reloaded, tagging.test, tagging.labels, tagging.pad_id)
    assert experiment.tagging_f1(reloaded, tagging.test, tagging.labels, tagging.pad_id) == result["test_f1"]
    assert [len(p) for p in predicted] == [len(s.words) for s in tagging.test]
    # another test split (the run key holds none): the same run is scored on it from its best weights, not retrained
    tagging = dataclasses.replace(tagging, test=tagging.test[:1])
    built.clear()
    rescored = train()
    assert rescored["train_seconds"] == result["train_seconds"] and rescored["evaluations"] == result["evaluations"]
    assert len(rescored["test_predictions"]) == 1 and rescored["test_data"] == tagging.test_fingerprint()
    assert rescored["test_f1"] == experiment.tagging_f1(reloaded, tagging.test, tagging.labels, tagging.pad_id)


def test_a_tagger_run_extended_from_n_to_2n_steps_equals_one_trained_2n_steps_and_a_shorter_request_reads_the_prefix(
        tmp_path, tiny, monkeypatch):
    """The run key holds no length and the schedule none either: 2 steps, then the same tagger asked for 4, equals 4
    steps at once to the bit (every loss and validation record, the final LoRA and tag head, the best weights picked);
    asking for 2 again reads the first request back, records and best weights, training nothing."""
    _, tokenizer = tiny
    tagging, strategy = toy_data(tokenizer), mechanism.Strategy("sr", 1)
    base = SETTINGS["smoke"].with_training(batch_size=2, lora_r=2, lora_alpha=2, lr=3e-2, eval_every=1)
    built, original, train = [], experiment.build_tagger, training.train

    def build(*args, **kwargs):  # every tagger train_tagger builds, to read the weights it ends with
        tagger, tokenizer = original(*args, **kwargs)
        built.append(tagger)
        return tagger, tokenizer

    def request(folder: str, steps: int):
        monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / folder)
        settings = base.with_training(steps=steps)
        run = experiment.tagger_run(tagging, strategy, settings, model_name="tiny-random:llama", seed=0, run_prefix="x")
        result = experiment.train_tagger(tagging, strategy, settings, model_name="tiny-random:llama", seed=0, run=run,
                                         progress=False)
        return run.path, result

    def trainable(tagger) -> dict:
        return {name: p.detach().clone() for name, p in tagger.named_parameters() if p.requires_grad}

    def final(path) -> dict:
        return store.load_torch(path / training.CHECKPOINT_DIR / "state.pt")["trainable"]

    def same(first: dict, second: dict) -> bool:
        return first.keys() == second.keys() and all(torch.equal(first[name], second[name]) for name in first)

    def numbers(result: dict) -> dict:  # everything but the wall time
        return {name: value for name, value in result.items() if name != "train_seconds"}

    monkeypatch.setattr(experiment, "build_tagger", build)
    path, short = request("extended", 2)
    short_best = trainable(built[-1])
    assert request("extended", 4)[0] == path  # one folder whatever the length
    extended_best = trainable(built[-1])
    straight_path, straight = request("straight", 4)
    _, extended = request("extended", 4)
    records = training.read_metrics(path)
    assert records == training.read_metrics(straight_path) and sum("loss" in r for r in records) == 4
    assert [step for step, _ in extended["evaluations"]] == [1, 2, 3, 4]
    assert numbers(extended) == {**numbers(straight), "run_dir": str(path)}
    assert same(final(path), final(straight_path)) and {"head.weight", "head.bias"} <= set(final(path))
    assert any("lora_B" in name for name in final(path))
    assert same(extended_best, trainable(built[-1]))  # the straight run picked the same best weights
    # the premise of the prefix check below: the longer run's best is past the shorter one's, with other weights
    assert short["best_step"] < extended["best_step"] and not same(short_best, extended_best)
    assert experiment._lengths(path, experiment.BEST_PREFIX) == [short["best_step"], extended["best_step"]]
    assert experiment._lengths(straight_path, experiment.BEST_PREFIX) == [extended["best_step"]]
    # the shorter request: its stored result, then (that file gone) its prefix of records and its own best weights
    monkeypatch.setattr(experiment.training, "train", lambda *a, **k: pytest.fail("a stored length trained again"))
    assert request("extended", 2)[1] == short
    monkeypatch.setattr(experiment.training, "train", train)
    experiment._result_path(path, 2).unlink()
    _, prefix = request("extended", 2)
    assert numbers(prefix) == numbers(short) and same(trainable(built[-1]), short_best)
    assert prefix["evaluations"] == [e for e in extended["evaluations"] if e[0] <= 2]
    assert training.read_metrics(path) == records  # nothing trained, nothing logged


def test_a_schedule_that_depends_on_the_length_cannot_extend_a_tagger(tmp_path, tiny, monkeypatch):
    """The check above can fail: under the authors' linear decay (the one-line mistake of passing it instead of the
    recipe's constant schedule) the 4-step request differs from the 2-step run in every step's learning rate, and
    the loop refuses to continue it in the same folder."""
    _, tokenizer = tiny
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path)
    tagging, strategy = toy_data(tokenizer), mechanism.Strategy("sr", 1)
    original = training.train
    monkeypatch.setattr(experiment.training, "train", lambda *a, config, lr_lambda, **k: original(
        *a, config=config, lr_lambda=schedules.linear_decay(config.steps), **k))
    for steps in (2, 4):
        settings = SETTINGS["smoke"].with_training(steps=steps, batch_size=2, lora_r=2, lora_alpha=2, eval_every=1)
        run = experiment.tagger_run(tagging, strategy, settings, model_name="tiny-random:llama", seed=0, run_prefix="x")
        call = lambda: experiment.train_tagger(tagging, strategy, settings,  # noqa: E731
                                               model_name="tiny-random:llama", seed=0, run=run, progress=False)
        if steps == 2:
            call()
        else:
            with pytest.raises(ValueError, match="lr_factors"):
                call()


def test_one_seed_builds_one_tagger_and_another_seed_another():
    recipe = dataclasses.replace(SETTINGS["smoke"].training, lora_r=2, lora_alpha=2)
    strategy = mechanism.Strategy("sr", 1)
    build = lambda seed: experiment.build_tagger("tiny-random:llama", 3, strategy, recipe, seed=seed,  # noqa: E731
                                                 device="cpu")[0]
    trainable = lambda tagger: {name: p.detach().clone() for name, p in tagger.named_parameters()  # noqa: E731
                                if p.requires_grad}
    torch.manual_seed(123)  # whatever ran before must not matter
    first = trainable(build(5))
    torch.manual_seed(456)
    again, other = trainable(build(5)), trainable(build(6))
    assert any("lora_A" in name for name in first) and "head.weight" in first
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert all(not torch.equal(first[name], other[name]) for name in first if "lora_A" in name or name == "head.weight")


def test_the_head_reads_its_input_through_dropout_in_training_only(tiny):
    _, tokenizer = tiny
    recipe = dataclasses.replace(SETTINGS["smoke"].training, lora_r=2, lora_alpha=2, classifier_dropout=0.5)
    tagger, _ = experiment.build_tagger("tiny-random:llama", 3, mechanism.Strategy("sr", 0), recipe, seed=0,
                                        device="cpu")
    assert tagger.dropout.p == 0.5 and SETTINGS["paper"].training.classifier_dropout == 0.1
    ids = torch.randint(10, 2000, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    tagger.eval()
    torch.testing.assert_close(tagger(ids, mask)["logits"], tagger(ids, mask)["logits"])
    tagger.train()
    assert not torch.equal(tagger(ids, mask)["logits"], tagger(ids, mask)["logits"])


def test_the_probe_scores_every_layer_of_the_frozen_decoder(tiny):
    body, tokenizer = tiny
    words = [("Elizabeth", "walked", "home"), ("the", "tall", "man", "rode"), ("Jane", "smiled")] * 4
    tags = [("B-NP", "O", "B-NP"), ("B-NP", "I-NP", "I-NP", "O"), ("B-NP", "O")] * 4
    sentences = [experiment_data.TaggedSentence(w, t) for w, t in zip(words, tags)]
    encoded = experiment_data.encode_sentences(tokenizer, sentences, 32)
    tagging = experiment_data.TaggingData("chunks", experiment_data.label_vocabulary(tags), encoded, encoded[:3],
                                          encoded[:6], PAD)
    settings = dataclasses.replace(SETTINGS["smoke"], probe_max_iter=50)
    features = experiment_probe.layer_features(body, tagging.test, mechanism.Strategy("sr", 1), PAD)
    assert features.shape == (models.num_layers(body) + 1, sum(len(t) for t in tags[:6]), body.config.hidden_size)
    probe = experiment_probe.probe_layers(body, tagging, [0, 1], settings, progress=False)
    assert set(probe) == {0, 1} and len(probe[0]) == models.num_layers(body) + 1
    assert all(len(counts) == 6 for counts in probe[1])
    table = report.probe_table(probe, resamples=20)
    assert len(table) == 2 * (models.num_layers(body) + 1) and (table.low <= table.f1).all()


def test_parallel_training_processes_give_the_results_of_one_process(tmp_path, tiny, monkeypatch):
    _, tokenizer = tiny
    tagging = toy_data(tokenizer)
    base = SETTINGS["smoke"].with_training(steps=2, batch_size=2, lora_r=2, lora_alpha=2, eval_every=1)
    found = {}
    for workers in (1, 2):
        monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / f"w{workers}")
        settings = dataclasses.replace(base, workers=workers, threads=1)
        table = experiment.run_experiments({"ner": tagging}, [mechanism.Strategy("sr", 0), mechanism.Strategy("sr", 1)],
                                           (0, 1), settings, model_name="tiny-random:llama", run_prefix="t",
                                           progress=False)
        found[workers] = table[["strategy", "seed", "validation_f1", "test_f1", "test_predictions"]].to_dict("records")
    assert found[1] == found[2] and len(found[1]) == 4


def test_a_larger_test_split_rescores_the_finished_taggers_without_training_them(tmp_path, tiny, monkeypatch):
    """A seed study's examples look doubles the test split: run_experiments finds every tagger finished (the run key
    holds no test data) and must score it on the new split, not hand back the predictions of the old one. Nothing is
    trained again: the validation F1 and the step it picked stay, and predictions cover every test sentence."""
    _, tokenizer = tiny
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path)
    small = toy_data(tokenizer)
    small = dataclasses.replace(small, test=small.test[:2])
    larger = toy_data(tokenizer)
    settings = SETTINGS["smoke"].with_training(steps=2, batch_size=2, lora_r=2, lora_alpha=2, eval_every=1)
    strategies = [mechanism.Strategy("sr", 0), mechanism.Strategy("sr", 1)]

    def table(tagging):
        return experiment.run_experiments({"ner": tagging}, strategies, (0,), settings, model_name="tiny-random:llama",
                                          run_prefix="t", progress=False)

    first = table(small)
    monkeypatch.setattr(experiment.training, "train", lambda *a, **k: pytest.fail("a finished tagger trained again"))
    again = table(larger)
    assert [len(found) for found in again.test_predictions] == [len(larger.test)] * 2
    assert list(again.validation_f1) == list(first.validation_f1) and list(again.best_step) == list(first.best_step)
    assert [len(found) for found in first.test_predictions] == [len(small.test)] * 2
    assert list(table(small).test_f1) == list(first.test_f1)  # and back on the first split, its own scores


def test_a_tagger_run_is_keyed_by_what_changes_the_trained_tagger_only(tmp_path, tiny, monkeypatch):
    """Other training settings, strategy, seed, model or data name another folder; the length, the speed table, the
    probe or the number of workers never do (they cannot change a trained tagger, or a longer run extends it)."""
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path)
    _, tokenizer = tiny
    tagging = toy_data(tokenizer)
    settings = SETTINGS["smoke"]

    def folder(tagging=tagging, strategy=mechanism.Strategy("sr", 1), settings=settings, model="tiny-random:llama",
               seed=0):
        return experiment.tagger_run(tagging, strategy, settings, model_name=model, seed=seed, run_prefix="key").path

    same = [dataclasses.replace(settings, workers=2, threads=1, probe_max_iter=7, speed_trials=9, speed_processes=3,
                                checkpoint_every=5),
            settings.with_training(steps=settings.training.steps * 2)]  # the length: a longer run extends this one
    assert all(folder(settings=other) == folder() for other in same)
    # the notebook's parameters keep the length: claims at another length are another notebook's (ledger provenance)
    assert store.fingerprint(same[-1]) != store.fingerprint(settings)
    # the test split is only scored: another (a larger) one finds the same run
    assert folder(tagging=dataclasses.replace(tagging, test=tagging.test[:1])) == folder()
    other_data = dataclasses.replace(tagging, validation=tagging.validation[:1])
    changed = [folder(settings=settings.with_training(lr=1e-3)),
               folder(settings=settings.with_training(pad_policy="masked")),
               folder(settings=settings.with_training(eval_every=3)),
               folder(settings=settings.with_training(lr_schedule=schedules.WarmupConstant(warmup=2))),
               folder(strategy=mechanism.Strategy("sr", 2)), folder(seed=1), folder(model="other"),
               folder(tagging=other_data)]
    assert len({folder(), *changed}) == 1 + len(changed)
