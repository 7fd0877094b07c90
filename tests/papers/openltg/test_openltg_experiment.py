"""Notebook 05's measurements (seed 002 §3.3 Fig. 2, §6.1 Fig. 5) and the run folder of Table 6's generations."""
from __future__ import annotations

import dataclasses
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


class PlantedTokenizer:
    """100 tokens: ids 0-49 carry the high-probability region, ids 50-99 the tail; decoded with GPT-2's leading
    space, as a subword tokenizer gives them."""

    def __init__(self, words):
        self.words = words

    def decode(self, ids):
        return "".join(" " + self.words[i] for i in ids)


def test_function_word_share_is_the_function_word_mass_of_the_top_50_candidates():
    """§3.3, Fig. 2: "the function words dominate the high probability regions (from 35% to 45%)", the region being
    the top 50 candidates of the output distribution (Fig. 2's histogram) at the first iteration. On a planted
    distribution the share is the function words' and punctuation's mass among the top 50, over the top 50's mass,
    under the raw softmax (T = 1): the tail's function words, however many, do not count."""
    function = ["the", "of", ",", ".", "to", "it", "and", "a", "was", "her"]
    content = [f"garden{i}" for i in range(40)]
    tail = ["in", "that", "!", "he", "she"] * 10  # function words only, outside the top 50
    words = function + content + tail
    logits = torch.cat([torch.linspace(6.0, 4.0, 10), torch.linspace(5.0, 3.0, 40), torch.full((50,), 2.5)])
    probs = torch.softmax(logits, -1)
    top = probs[:50]
    expected = float(top[:10].sum() / top.sum())
    share = experiment.function_word_share(PlantedTokenizer(words), logits)  # top_k=50, T = 1 by default
    assert share == pytest.approx(expected, rel=1e-6)
    assert 0.35 < expected < 0.45  # a planted bad case inside the paper's band
    everything = experiment.function_word_share(PlantedTokenizer(words), logits, top_k=100)
    assert everything == pytest.approx(float((probs[:10].sum() + probs[50:].sum()) / probs.sum()), rel=1e-6)
    assert everything > 0.45  # counting the tail would leave the band: the region is the top 50 only
    assert [experiment.is_function_word(" " + word) for word in ("the", ",", "...", "Emma", "garden3")] == \
        [True, True, True, False, False]


def test_table6_ablations_switch_off_exactly_the_strategy_they_name():
    """§5.3's Table 6: Ours uses LTD and DSWA; w/o LTD keeps DSWA, w/o DSWA keeps LTD, w/o ALL drops both; every
    other setting (T, β, top-p, Eq. 7's constants, the update rule) stays as in Ours."""
    from helpers.papers.openltg import mechanism

    base = mechanism.DecodeConfig(iterations=8, beta=1.8, top_p=0.9, fixed_window=64)
    rows = experiment.ablation_configs(base)
    assert {name: (rows[name].ltd, rows[name].dswa) for name in experiment.ABLATIONS} == {
        "Ours": (True, True), "w/o DSWA": (True, False), "w/o LTD": (False, True), "w/o ALL": (False, False)}
    for name, config in rows.items():
        assert replace(config, ltd=True, dswa=True, update_all=False) == base, name


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
    # two processes of the same two trials: one tuple of trial ratios per process, each trial against its own AR
    processes = [dict(row, process=process, tokens_per_s=row["tokens_per_s"] * (1 + process * (row["method"] != "AR")))
                 for row in seeded for process in (0, 1)]
    assert experiment.speed_ratio_runs(processes, 8, 128) == ((6.0, 3.0), (12.0, 6.0))
    assert experiment.speed_ratios(processes).loc["T=8", 128] == 6.0  # median over all four trials
    with pytest.raises(ValueError, match="length=32"):
        experiment.speed_ratio_runs(processes, 8, 32)


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
    assert path.name == "generations_2prompts_draw0.jsonl" and path.parent.name.startswith(experiment.GENERATIONS_RUN + "_")
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"prompt": "It was a dark night.", "Ours": "one", experiment.TRUTH_ROW: "The wind rose."},
        {"prompt": "Emma smiled.", "Ours": "two", experiment.TRUTH_ROW: "She was handsome"}]
    same = experiment.save_generations(examples, systems, replace(base, speed_lengths=(4,), lr_n=5), profile, seed=0)
    assert same == path
    for changed, seed in ((replace(base, target_length=9), 0), (replace(base, beta=1.5), 0), (base, 1),
                          (replace(base, batch_size=1), 0)):
        assert experiment.save_generations(examples, systems, changed, profile, seed=seed).parent != path.parent
    # another draw, or another number of prompts, is another file in the same folder
    other_draw = experiment.save_generations(examples, systems, replace(base, draws=3), profile, seed=0, draw=2)
    fewer = experiment.save_generations(examples[:1], {name: texts[:1] for name, texts in systems.items()},
                                        base, profile, seed=0)
    assert other_draw.parent == fewer.parent == path.parent
    assert (other_draw.name, fewer.name) == ("generations_2prompts_draw2.jsonl", "generations_1prompts_draw0.jsonl")
    assert len(path.read_text().splitlines()) == 2  # the larger evaluation's file is left as it was
    with pytest.raises(ValueError, match="draw=-1"):
        experiment.save_generations(examples, systems, base, profile, seed=0, draw=-1)


def test_the_evaluation_size_enters_no_run_key():
    """More sampling draws or more prompts is a larger evaluation of the same runs: the MNTP adapter's run key
    (notebook 02's trained folder) and Table 6's generations key stay the same, so nothing retrains or moves."""
    from helpers import mntp_adapter, store

    profile = profiles.get("smoke")
    base = settings.SETTINGS["smoke"]
    larger = replace(base, draws=base.draws + 3, num_prompts=base.num_prompts * 4, speed_trials=20, speed_processes=4)
    assert experiment.GenerationsKey.of(larger, profile, seed=0) == experiment.GenerationsKey.of(base, profile, seed=0)
    assert store.fingerprint(experiment.GenerationsKey.of(larger, profile, seed=0)) == \
        store.fingerprint(experiment.GenerationsKey.of(base, profile, seed=0))
    assert mntp_adapter.masked_lm_run_key(profile, larger.masked_lm) == mntp_adapter.masked_lm_run_key(profile, base.masked_lm)
    fields = {field.name for field in dataclasses.fields(experiment.GenerationsKey)}
    assert not fields & {"draws", "num_prompts", "speed_trials", "speed_processes"}


def test_decoding_speed_repeats_its_interleaved_trials_in_fresh_processes():
    """Two processes × two trials on the tiny random Llama: every setting is timed once per trial in each process, and
    the ratios come back one tuple of trials per process."""
    from helpers import models
    from helpers.masked_lm import MNTPDecoder

    try:
        model, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, dtype="float32", device="cpu", seed=0)
    except models.MissingAssetError as error:
        pytest.skip(f"the tiny model needs the embedded SmolLM2 tokenizer (run `make setup`): {error}")
    backend = MNTPDecoder(model.eval(), tokenizer, tokenizer("_", add_special_tokens=False).input_ids[0],
                          name=profiles.TINY_RANDOM_MODEL)
    prompt = backend.encode("It was a dark night.", 4)
    config = settings.SETTINGS["smoke"].decode_config()
    rows = experiment.decoding_speed(backend, model, prompt, [6], [1, 2], config, seeds=[0, 1], processes=2)
    assert sorted({(row["process"], row["seed"]) for row in rows}) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert len(rows) == 3 * 4 and all(row["tokens_per_s"] > 0 for row in rows)  # AR, T = 1, T = 2 per trial
    runs = experiment.speed_ratio_runs(rows, 2, 6)
    assert len(runs) == 2 and all(len(trials) == 2 for trials in runs)
    with pytest.raises(ValueError, match="processes=0"):
        experiment.decoding_speed(backend, model, prompt, [6], [1], config, processes=0)
    with pytest.raises(ValueError, match="seeds is empty"):
        experiment.decoding_speed(backend, model, prompt, [6], [1], config, seeds=[])
