"""EMAT's head runs (seed 004): each head's run folder is keyed by exactly what changes its training."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from helpers.papers.emat import experiment_training, settings

SETTINGS = settings.SETTINGS["smoke"]


@dataclasses.dataclass
class _Dataset:
    path: Path

    @property
    def key(self) -> str:
        return self.path.name


def test_a_head_run_is_keyed_by_every_training_field_the_dataset_and_the_model(tiny_mlm, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    dataset = _Dataset(tmp_path / "dataset-austen-abc")
    training = SETTINGS.training
    first = experiment_training.head_run("emat", dataset, tiny_mlm, training)
    assert first.path == experiment_training.head_run("emat", dataset, tiny_mlm, training).path  # a rerun finds it
    assert first.path.name.startswith("06_emat_") and first.path.parent.parent == tmp_path
    assert first.settings["training"] == dataclasses.asdict(training) and first.settings["dataset"] == dataset.key
    others = {experiment_training.head_run("emat", dataset, tiny_mlm,
                                           dataclasses.replace(training, **{field.name: changed})).path
              for field, changed in ((field, _changed(getattr(training, field.name)))
                                     for field in dataclasses.fields(training))}
    assert first.path not in others and len(others) == len(dataclasses.fields(training))
    assert experiment_training.head_run("emat", _Dataset(tmp_path / "dataset-austen-xyz"), tiny_mlm, training).path != first.path
    assert experiment_training.head_run("gru", dataset, tiny_mlm, training).path.name.startswith("06_gru_")


def _changed(value):
    if isinstance(value, bool):
        return not value
    return value + 1 if isinstance(value, int) else value / 2
