"""Table 6's scoring (seed 002 §5.1, §5.3): perplexity of a continuation under a causal judge, BLEU-1 and ROUGE-L
against sacrebleu and rouge-score, bootstrap intervals per cell and paired differences over the same prompts."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from helpers import models, profiles
from helpers.papers.openltg import experiment_table6

# --------------------------------------------------------------------------- AR baseline, perplexity


def test_continuation_perplexity_is_the_mean_nll_of_the_continuation_tokens():
    try:
        model, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, device="cpu", dtype="float32")
    except models.MissingAssetError as error:
        pytest.skip(f"embedded tokenizer not fetched: {error}")
    prompts, continuations = ["It is a truth", "Emma Woodhouse"], ["universally acknowledged.", "handsome, clever, and rich"]
    nll, count = experiment_table6.continuation_nll(model, tokenizer, prompts, continuations, batch_size=2)
    expected, tokens = 0.0, 0
    for prompt, continuation in zip(prompts, continuations):
        source = tokenizer(prompt, add_special_tokens=False).input_ids
        target = tokenizer(" " + continuation, add_special_tokens=False).input_ids
        with torch.no_grad():
            logits = model(torch.tensor([source + target])).logits[0]
        predicted = logits[len(source) - 1:-1]
        expected += float(torch.nn.functional.cross_entropy(predicted, torch.tensor(target), reduction="sum"))
        tokens += len(target)
    assert count == tokens
    assert nll == pytest.approx(expected, rel=1e-4)


# --------------------------------------------------------------------------- Table 6 metrics with intervals


def test_bleu1_from_summed_statistics_is_sacrebleus_corpus_bleu1_and_rouge_l_is_rouge_scores():
    from rouge_score import rouge_scorer
    from sacrebleu.metrics import BLEU

    hypotheses = ["the cat sat on the mat .", "a dog ran", "Emma was handsome , clever and rich ."]
    references = ["the cat is on the mat .", "the dog ran away quickly", "Emma Woodhouse , handsome , clever , and rich"]
    statistics = [experiment_table6.bleu1_statistics(h, r) for h, r in zip(hypotheses, references)]
    expected = BLEU(max_ngram_order=1, lowercase=True).corpus_score(hypotheses, [references]).score
    assert experiment_table6.corpus_bleu1(statistics) == pytest.approx(expected, abs=1e-6)
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    assert experiment_table6.rouge_l(hypotheses[0], references[0]) == pytest.approx(100 * scorer.score(references[0], hypotheses[0])["rougeL"].fmeasure)


def test_table6_cells_carry_bootstrap_intervals_and_paired_differences_see_the_same_prompts():
    try:
        model, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, device="cpu", dtype="float32")
    except models.MissingAssetError as error:
        pytest.skip(f"embedded tokenizer not fetched: {error}")
    prompts = [f"Prompt number {i} says" for i in range(6)]
    references = [f"the garden was green and the house number {i} was quiet" for i in range(6)]
    repeated = ["the the the the the the the the the the the the"] * 6
    systems = {"echo": references, "varied": [f"a garden {i} was green near house {i}" for i in range(6)], "loop": repeated}
    scores = experiment_table6.evaluate_generations(systems, prompts, model, tokenizer, references=references, lr_n=2, resamples=200)
    assert np.isnan(scores.values.loc["echo", "B-1"])  # the references themselves get no overlap score
    assert scores.values.loc["loop", "LR-2"] == 100.0 and scores.values.loc["varied", "LR-2"] == 0.0
    for system in ("varied", "loop"):
        for metric in ("B-1", "R-L", "LR-2", "D-4", "PPL"):
            assert scores.low.loc[system, metric] <= scores.values.loc[system, metric] <= scores.high.loc[system, metric]
    value, low, high = experiment_table6.paired_metric_difference(scores, "loop", "varied", "LR-2")
    assert value == low == high == 100.0  # every prompt differs by the same amount: no resample can change it
    nll, count = experiment_table6.continuation_nll(model, tokenizer, prompts, repeated)
    per_prompt = experiment_table6.continuation_nlls(model, tokenizer, prompts, repeated)
    assert scores.values.loc["loop", "PPL"] == pytest.approx(math.exp(nll / count))
    assert sum(c for _, c in per_prompt) == count

def _record(bleu, rouge, lr, distinct, nll, tokens):
    return {"bleu1": bleu, "rouge_l": rouge, "lr": lr, "distinct4": distinct, "nll": nll, "tokens": tokens}


def test_sampling_draws_are_nested_in_their_prompts():
    rng = np.random.default_rng(0)
    draw = lambda: {"Ours": [_record((int(rng.integers(5, 9)), 10, 10, 12), float(rng.uniform(10, 20)),
                                     int(rng.integers(0, 2)), float(rng.uniform(0.5, 1)), float(rng.uniform(20, 40)), 10)
                             for _ in range(6)]}
    first, second = draw(), draw()
    assert experiment_table6.pool_draws([first]) == first  # one draw: the records themselves
    pooled = experiment_table6.pool_draws([first, second])["Ours"]
    assert len(pooled) == 6  # n stays the number of prompts: a draw is not another prompt
    a, b = first["Ours"][2], second["Ours"][2]
    assert pooled[2]["lr"] == pytest.approx((a["lr"] + b["lr"]) / 2)
    assert pooled[2]["bleu1"] == tuple(x + y for x, y in zip(a["bleu1"], b["bleu1"]))
    assert pooled[2]["nll"] == pytest.approx(a["nll"] + b["nll"]) and pooled[2]["tokens"] == 20
    # identical draws change no cell: the per-prompt means and the pooled sums give the same statistics
    same = experiment_table6.table6_scores(experiment_table6.pool_draws([first, first]), lr_n=5, resamples=200)
    once = experiment_table6.table6_scores(first, lr_n=5, resamples=200)
    assert np.allclose(same.values.to_numpy(float), once.values.to_numpy(float))
    assert np.allclose(same.low.to_numpy(float), once.low.to_numpy(float)) and same.n == once.n == 6
    with pytest.raises(ValueError, match="different numbers of prompts"):
        experiment_table6.pool_draws([first, {"Ours": first["Ours"][:3]}])


def test_draws_sample_from_seeds_apart_and_one_draw_samples_as_before():
    from helpers.papers.openltg import settings as S

    one = replace(S.SETTINGS["cpu"], draws=1)
    assert one.draw_seeds() == [one.seed]
    assert S.SETTINGS["cpu"].draw_seeds()[0] == one.seed  # draw 0 of several samples as one draw does
    several = S.OpenLTGSettings(num_prompts=16, target_length=8, batch_size=4, max_prompt_tokens=8, draws=3)
    seeds = several.draw_seeds()
    assert seeds[0] == several.seed and len(set(seeds)) == 3
    # a draw's batches sample from seed + the batch's first prompt: no two draws share a seed
    batch_seeds = [{seed + index for index in range(0, 16, 4)} for seed in seeds]
    assert not set.intersection(*batch_seeds[:2]) and not set.intersection(batch_seeds[0], batch_seeds[2])
    with pytest.raises(ValueError, match="draws=0"):
        S.OpenLTGSettings(num_prompts=1, target_length=8, batch_size=1, max_prompt_tokens=8, draws=0)


def test_every_draw_of_every_prompt_is_scored_and_the_draws_pool_within_prompts(monkeypatch):
    try:
        model, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, device="cpu", dtype="float32")
    except models.MissingAssetError as error:
        pytest.skip(f"embedded tokenizer not fetched: {error}")
    prompts = [f"Prompt number {i} says" for i in range(4)]
    references = [f"the garden was green and the house number {i} was quiet" for i in range(4)]
    first = {"Ours": [f"a garden {i} was green" for i in range(4)], "loop": ["the the the the the the"] * 4,
             "truth": references}
    second = {"Ours": [f"the house {i} was quiet near a garden" for i in range(4)], "loop": first["loop"],
              "truth": references}
    scored = []
    real = experiment_table6.continuation_nlls
    monkeypatch.setattr(experiment_table6, "continuation_nlls",
                        lambda *args, desc="", **kwargs: scored.append(desc) or real(*args, desc=desc, **kwargs))
    pooled = experiment_table6.evaluate_draws([first, second], prompts, model, tokenizer, references=references,
                                              lr_n=2, resamples=200)
    assert scored.count("PPL Ours") == 2 and scored.count("PPL truth") == 1  # a text the same in every draw: once
    assert pooled.n == 4 and pooled.draws == 2 and "4 prompts × 2 sampling draws" in pooled.interval_method
    assert np.isnan(pooled.values.loc["truth", "B-1"])  # the references themselves, in every draw
    one = experiment_table6.evaluate_generations(first, prompts, model, tokenizer, references=references, lr_n=2,
                                                 resamples=200)
    other = experiment_table6.evaluate_generations(second, prompts, model, tokenizer, references=references, lr_n=2,
                                                   resamples=200)
    # R-L and D-4 are per-prompt means: pooled, each prompt carries its draws' mean, so the cell is the draws' mean
    for metric in ("R-L", "D-4"):
        expected = (one.values.loc["Ours", metric] + other.values.loc["Ours", metric]) / 2
        assert pooled.values.loc["Ours", metric] == pytest.approx(expected)
    assert pooled.values.loc["loop", "LR-2"] == one.values.loc["loop", "LR-2"]
    assert one.draws == 1 and one.interval_method == "paired bootstrap over 4 prompts"
    with pytest.raises(ValueError, match="draws is empty"):
        experiment_table6.evaluate_draws([], prompts, model, tokenizer, references=references)
