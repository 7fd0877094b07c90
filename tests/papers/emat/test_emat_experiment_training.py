"""EMAT's head runs (seed 004): each head's run folder is keyed by exactly what changes its training but its length,
which a longer run extends and a shorter one reads the prefix of."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from helpers import metrics
from helpers.papers.emat import experiment_training, settings

SETTINGS = settings.SETTINGS["smoke"]


@dataclasses.dataclass
class _Dataset:
    path: Path

    @property
    def key(self) -> str:
        return self.path.name


def test_a_head_run_is_keyed_by_every_training_field_but_the_lengths_the_dataset_and_the_model(tiny_mlm, tmp_path,
                                                                                                monkeypatch):
    """Every HeadTraining field keys every head's folder but the run lengths (the epochs, the pre-training steps),
    which key none: a longer run extends the folder. The one exception: the GRU's MTC run starts from the pre-trained
    weights, so the pre-training's length keys it."""
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    dataset = _Dataset(tmp_path / "dataset-austen-abc")
    training = SETTINGS.training
    first = experiment_training.head_run("emat", dataset, tiny_mlm, training)
    assert first.path == experiment_training.head_run("emat", dataset, tiny_mlm, training).path  # a rerun finds it
    assert first.path.name.startswith("06_emat_") and first.path.parent.parent == tmp_path
    lengths = set(experiment_training.RUN_LENGTHS)
    assert lengths == {"emat_epochs", "gru_epochs", "length_epochs", "gru_pretrain_steps"}
    assert first.settings["training"] == {name: value for name, value in dataclasses.asdict(training).items()
                                          if name not in lengths} and first.settings["dataset"] == dataset.key
    for name in experiment_training.HEAD_RUNS:
        folder = experiment_training.head_run(name, dataset, tiny_mlm, training).path
        for field in dataclasses.fields(training):
            changed = dataclasses.replace(training, **{field.name: _changed(getattr(training, field.name))})
            keyed = field.name not in lengths or (name, field.name) == ("gru", "gru_pretrain_steps")
            assert (experiment_training.head_run(name, dataset, tiny_mlm, changed).path != folder) == keyed, \
                (name, field.name)
    assert experiment_training.head_run("emat", _Dataset(tmp_path / "dataset-austen-xyz"), tiny_mlm, training).path != first.path
    assert experiment_training.head_run("gru", dataset, tiny_mlm, training).path.name.startswith("06_gru_")


def _changed(value):
    if isinstance(value, bool):
        return not value
    return value + 1 if isinstance(value, int) else value / 2


# --------------------------------------------------------------------------- the held-out curve's last quarter


def _curve(values, every=10, key="dev a@1"):
    """Training records as ``training.train`` writes them: a loss per step, ``key`` at step 0 and every ``every``."""
    records = [{"step": step, "loss": 1.0} for step in range(1, every * (len(values) - 1) + 1)]
    records += [{"step": index * every, key: value} for index, value in enumerate(values)]
    return sorted(records, key=lambda record: record["step"])


def test_plateau_is_the_last_quarters_slope_with_its_interval():
    rising = metrics.plateau(_curve([0.01 * i + 0.001 * (-1) ** i for i in range(21)]), "dev a@1")
    slope, low, high, steps = rising
    assert steps == 200 and slope == pytest.approx(0.001, rel=0.2) and low > 0  # still rising: the interval is above 0
    flat = metrics.plateau(_curve([0.3 + 0.01 * i for i in range(12)] + [0.42 + 0.002 * (-1) ** i for i in range(9)]),
                                       "dev a@1")
    assert flat[1] <= 0 <= flat[2] and flat[3] == 200  # the last quarter (steps 150-200) is flat
    fitted = metrics.plateau(_curve([0.0, 1.0, 2.0, 3.0, 4.5, 6.0, 7.5, 9.0]), "dev a@1", fraction=0.5)
    assert fitted[0] == pytest.approx(0.15) and fitted[1] == pytest.approx(0.15)  # four collinear points: no spread


def test_plateau_with_two_evaluations_in_reach_is_exact_and_refuses_fewer():
    """The cpu profile's GRU: dev a@1 0 -> 5.3 -> 7.4% over two epochs; the last quarter holds only the last
    evaluation, so the last two count, and a rising pair is never flat."""
    slope, low, high, steps = metrics.plateau(_curve([0.0, 0.053, 0.074], every=50), "dev a@1")
    assert (low, high, steps) == (slope, slope, 100) and slope == pytest.approx(0.021 / 50)
    assert metrics.plateau(_curve([0.2, 0.2], every=50), "dev a@1")[1:3] == (0.0, 0.0)
    with pytest.raises(ValueError, match="1 values of 'dev a@1'"):
        metrics.plateau(_curve([0.2]), "dev a@1")


def test_length_hits_mark_each_sentence_whose_class_the_probe_gets_right(tiny_mlm):
    from helpers.papers.emat import experiment_data, mechanism

    classifier = mechanism.LengthClassifier(tiny_mlm.hidden_size)
    with torch.no_grad():
        classifier.linear.weight.zero_()
        classifier.linear.bias.copy_(torch.tensor([0.0, 5.0, 0.0]))  # always "2 tokens"
    encoded = experiment_data.EncodedSplit([[1, 2]] * 4, [1] * 4, [[7], [7, 8], [7, 8, 9], [4, 5]], ["a", "b", "c", "d"],
                                           ["[MASK]"] * 4)
    hits = experiment_training.length_hits(classifier, encoded, torch.zeros(4, tiny_mlm.hidden_size))
    assert hits == [0, 1, 0, 1]
    assert experiment_training.length_accuracy(classifier, encoded, torch.zeros(4, tiny_mlm.hidden_size)) == 0.5


def test_a_head_is_evaluated_evals_per_epoch_times_an_epoch_and_at_its_start_and_end(tiny_mlm, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    training = dataclasses.replace(SETTINGS.training, batch_size=2)
    run = experiment_training.head_run("probe", _Dataset(tmp_path / "dataset-probe"), tiny_mlm, training)
    torch.manual_seed(0)
    head = torch.nn.Linear(3, 2)
    tensors = {"x": torch.randn(12, 3), "y": torch.randint(0, 2, (12,))}  # 6 steps an epoch
    loss_fn = lambda model, batch: {"loss": torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])}  # noqa: E731
    evaluate = lambda model: {"dev a@1": float(model.weight.sum())}  # noqa: E731
    records = experiment_training.train_head(head, tensors, loss_fn, evaluate, epochs=2, training_settings=training,
                                             run=run, progress=False, evals_per_epoch=3)
    assert sorted(record["step"] for record in records if "dev a@1" in record) == [0, 2, 4, 6, 8, 10, 12]
    assert settings.evaluations_in_last_half(2, 3, 6) == len([step for step, _ in metrics.curve_points(records, "dev a@1")
                                                              if step >= 6])  # what curve_points counts
    assert max(record["step"] for record in records) == 12
    with pytest.raises(ValueError, match="evals_per_epoch"):
        experiment_training.train_head(head, tensors, loss_fn, evaluate, epochs=2, training_settings=training,
                                       run=run, progress=False, evals_per_epoch=0)


def test_emat_learns_planted_phrases_and_new_rows_only_leave_the_token_rows_as_the_masked_lms(tiny_mlm, tmp_path,
                                                                                              monkeypatch):
    """§4.1 on a planted case where the effect must appear: each phrase has its own context vector, and two phrases
    share their first token ("Mr. Darcy", "Mr. Bennet"), so the masked LM's first-token ranking cannot tell them
    apart. EMAT, trained by cross-entropy over the extended matrix through ``train_head``, must rank every phrase
    first, its dev a@1 curve must rise (``report.curve_rose``), and with only the new rows trained the token rows
    must stay the masked LM's own."""
    import torch.nn.functional as F

    from helpers.papers.emat import mechanism, report

    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    phrases = ["Mr. Darcy", "Mr. Bennet", "Netherfield Park", "Lady Catherine"]
    torch.manual_seed(0)
    contexts = torch.randn(len(phrases), tiny_mlm.hidden_size)
    which = torch.arange(len(phrases)).repeat(8)
    hidden = contexts[which] + 0.1 * torch.randn(len(which), tiny_mlm.hidden_size)
    gold = [phrases[index] for index in which.tolist()]
    ids = [tiny_mlm.tokenizer(" " + phrase, add_special_tokens=False).input_ids for phrase in gold]
    assert ids[0][0] == ids[1][0]  # one first token for both "Mr." phrases
    training = dataclasses.replace(SETTINGS.training, batch_size=8, lr=0.05)

    def loss_fn(model, batch):
        return {"loss": F.cross_entropy(model(batch["hidden"]), batch["label"])}

    for train_token_rows in (True, False):
        emat = mechanism.build_emat(tiny_mlm, phrases, train_token_rows)
        assert emat.phrases == phrases  # every phrase is several tokens: each gets a new row
        token_rows = emat.token_matrix.detach().clone()
        labels = mechanism.emat_labels(emat, tiny_mlm, gold, ids)
        run = experiment_training.head_run(f"planted_{train_token_rows}", _Dataset(tmp_path / "dataset-planted"),
                                           tiny_mlm, training)
        records = experiment_training.train_head(
            emat, {"hidden": hidden, "label": labels}, loss_fn,
            lambda model: {"dev a@1": mechanism.accuracy(model.complete(hidden, 1), gold, (1,))[1]},
            epochs=10, training_settings=training, run=run, progress=False, evals_per_epoch=2)
        curve = metrics.curve_points(records, "dev a@1")
        assert curve[-1][1] == 1.0 and curve[0][1] < 1.0 and report.curve_rose(records), curve
        if not train_token_rows:
            torch.testing.assert_close(emat.token_matrix, token_rows)
        else:
            assert not torch.equal(emat.token_matrix, token_rows)  # all rows trained, as the public matrix_plugin


# --------------------------------------------------------------------------- runs that extend


@pytest.fixture(scope="module")
def planted(tiny_mlm, tmp_path_factory):
    """A hand-made MTC dataset (five phrases in four sentence frames, the last frame the dev split), encoded and
    featurised by the tiny Llama: 15 train examples, so 4 steps an epoch at batch 4."""
    from helpers.papers.emat import experiment_data

    phrases = ["Mr. Darcy", "Mr. Bennet", "Netherfield Park", "Lady Catherine", "Jane"]
    frames = ["It was {} who spoke first.", "She walked with {} to Meryton.", "Nobody expected {} that evening.",
              "Then {} left the house."]
    examples = {split: [] for split in experiment_data.MTC_SPLITS}
    for index, frame in enumerate(frames):
        split = "validation" if index == len(frames) - 1 else "train"
        for phrase in phrases:
            sentence = frame.format(phrase)
            start = sentence.index(phrase)
            examples[split].append(experiment_data.MaskedExample(sentence, start, start + len(phrase), split))
    dataset = experiment_data.MTCDataset(phrases, [], examples, {}, tmp_path_factory.mktemp("dataset-planted"))
    encoded = experiment_data.encode_splits(tiny_mlm, dataset)
    features = {split: experiment_data.compute_features(tiny_mlm, encoded[split], 8, progress=False)
                for split in ("train", "validation")}
    training = dataclasses.replace(SETTINGS.training, batch_size=4, emat_evals_per_epoch=2, gru_evals_per_epoch=2,
                                   gru_pretrain_steps=2, gru_pretrain_tokens=6)
    return dataset, encoded, features, training


def _trainable(model) -> dict:
    return {name: weight.detach().clone() for name, weight in model.named_parameters() if weight.requires_grad}


def _assert_same_weights(first: dict, second: dict) -> None:
    assert first.keys() == second.keys() and first
    for name, weight in first.items():
        assert torch.equal(weight, second[name]), name


def test_emat_extended_from_one_epoch_to_two_equals_two_at_once_and_one_epoch_reads_the_prefix(tiny_mlm, planted,
                                                                                                tmp_path, monkeypatch):
    """§4.1's EMAT (the whole extended matrix trained): its run folder holds no length, so asking a finished 1-epoch
    run for 2 epochs continues it, loss for loss, dev a@1 and a@10 for each evaluation and in the trained matrix, to
    the bit of a 2-epoch run trained at once; asking for 1 epoch again returns the first epoch's records and the
    matrix kept after it, training nothing."""
    from helpers import training

    dataset, encoded, features, heads = planted

    def run(root, epochs):
        monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path / root))
        emat, records = experiment_training.train_emat(tiny_mlm, dataset, encoded, features,
                                                       dataclasses.replace(heads, emat_epochs=epochs),
                                                       progress=False)
        return _trainable(emat), records

    one, first = run("extended", 1)
    two, records = run("extended", 2)
    straight, straight_records = run("straight", 2)
    assert records == straight_records and [record for record in records if record["step"] <= 4] == first
    assert sum("loss" in record for record in records) == 8  # each of the 2 x 4 steps once
    assert [record["step"] for record in records if "dev a@1" in record] == [0, 2, 4, 6, 8]
    _assert_same_weights(two, straight)
    assert any(not torch.equal(one[name], two[name]) for name in one)  # the second epoch trained the matrix further
    folders = list((tmp_path / "extended" / "runs").glob("06_emat_*"))
    assert len(folders) == 1 and training.kept_lengths(folders[0]) == [4, 8]  # one folder, both lengths kept
    again, prefix = run("extended", 1)
    assert prefix == first
    _assert_same_weights(again, one)


def test_the_gru_and_its_pretraining_extend_and_a_shorter_request_reads_the_prefix(tiny_mlm, planted, tmp_path,
                                                                                   monkeypatch):
    """§4.2's GRU decoder (dropout and teacher forcing 0.5 draw at every step): its MTC run extended from 1 epoch to
    2 equals 2 at once (every loss, every dev loss and a@1, the trained weights); its language-model pre-training
    extended from 2 batches to 4 equals 4 at once, and the MTC run that starts from it is another run, equal to its
    straight twin; asking for the first lengths again reads both prefixes."""
    dataset, encoded, features, heads = planted

    def run(root, **lengths):
        monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path / root))
        gru, records, pretraining = experiment_training.train_gru(tiny_mlm, dataset, encoded, features,
                                                                  dataclasses.replace(heads, **lengths),
                                                                  progress=False)
        return _trainable(gru), records, pretraining

    one, first, pretrained = run("extended", gru_epochs=1)
    two, records, pretraining = run("extended", gru_epochs=2)
    straight, straight_records, straight_pretraining = run("straight", gru_epochs=2)
    assert records == straight_records and [record for record in records if record["step"] <= 4] == first
    assert pretraining == straight_pretraining == pretrained  # the pre-training ran once, and is reused
    assert [record["step"] for record in records if "dev loss" in record] == [0, 2, 4, 6, 8]
    _assert_same_weights(two, straight)

    longer, longer_records, longer_pretraining = run("extended", gru_epochs=1, gru_pretrain_steps=4)
    twin, twin_records, twin_pretraining = run("straight-pretraining", gru_epochs=1, gru_pretrain_steps=4)
    assert longer_pretraining == twin_pretraining and [r for r in longer_pretraining if r["step"] <= 2] == pretrained
    assert longer_records == twin_records and longer_records != first  # another start: another MTC run
    _assert_same_weights(longer, twin)

    again, prefix, pretraining_prefix = run("extended", gru_epochs=1)
    assert prefix == first and pretraining_prefix == pretrained
    _assert_same_weights(again, one)
