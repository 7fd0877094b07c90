"""Notebook 05's measurements (seed 002 §3.3 Fig. 2, §6.1 Fig. 5) and the run folder of Table 6's generations."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from helpers import profiles
from helpers.papers.openltg import experiment, settings


class WordTokenizer:
    vocabulary = ["the", ",", "garden", "of", "Emma", "."]

    def decode(self, ids):
        return " ".join(self.vocabulary[i] for i in ids)


def test_function_word_share_counts_stop_words_and_punctuation():
    probs = torch.tensor([0.3, 0.2, 0.25, 0.1, 0.1, 0.05])
    share = experiment.function_word_share(WordTokenizer(), probs.log(), top_k=6)
    assert share == pytest.approx(0.3 + 0.2 + 0.1 + 0.05)


def test_speed_ratios_divide_by_ar_at_the_same_length():
    rows = [{"method": "AR", "iterations": 0, "length": 64, "tokens_per_s": 10.0},
            {"method": "AR", "iterations": 0, "length": 128, "tokens_per_s": 8.0},
            {"method": "mask-predict", "iterations": 8, "length": 64, "tokens_per_s": 30.0},
            {"method": "mask-predict", "iterations": 8, "length": 128, "tokens_per_s": 48.0}]
    assert experiment.speed_ratios(rows).loc["T=8"].tolist() == [3.0, 6.0]
    seeded = [dict(row, seed=seed, tokens_per_s=row["tokens_per_s"] * (1 + seed * (row["method"] == "AR")))
              for row in rows for seed in (0, 1)]
    assert experiment.speed_ratio_samples(seeded, 8, 128) == [6.0, 3.0]
    assert experiment.speed_ratios(seeded).loc["T=8", 128] == 4.5  # the median over seeds of the per-seed ratios


def test_generations_land_in_a_folder_keyed_by_what_changes_them(tmp_path, monkeypatch):
    """Table 6's texts go to runs/05_ablation_<fingerprint>: a setting that changes the generations names another
    folder; one that does not (the speed benchmark's sizes) keeps the folder."""
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    profile = profiles.get("smoke")
    base = settings.SETTINGS["smoke"]
    examples = [experiment.PromptExample("It was a dark night.", "The wind rose."),
                experiment.PromptExample("Emma smiled.", "She was handsome, clever and rich.")]
    systems = {"Ours": ["one", "two"], experiment.TRUTH_ROW: ["The wind rose.", "She was handsome"]}
    path = experiment.save_generations(examples, systems, base, profile, seed=0)
    assert path.name == "generations.jsonl" and path.parent.name.startswith(experiment.GENERATIONS_RUN + "_")
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"prompt": "It was a dark night.", "Ours": "one", experiment.TRUTH_ROW: "The wind rose."},
        {"prompt": "Emma smiled.", "Ours": "two", experiment.TRUTH_ROW: "She was handsome"}]
    same = experiment.save_generations(examples, systems, replace(base, speed_lengths=(4,), lr_n=5), profile, seed=0)
    assert same == path
    for changed, seed in ((replace(base, target_length=9), 0), (replace(base, beta=1.5), 0), (base, 1),
                          (replace(base, batch_size=1), 0)):
        assert experiment.save_generations(examples, systems, changed, profile, seed=seed).parent != path.parent
