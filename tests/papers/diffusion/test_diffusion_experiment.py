"""Notebook 07's drivers: the sampler rows, the mask's proof on a model, the exact checks, the fine-tune's run folder
and the paired statistics behind the claims."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM

from helpers import masks as M
from helpers import models, objectives, profiles, store, training
from helpers.masked_lm import MNTPDecoder
from helpers.paths import cache_dir
from helpers.papers.diffusion import experiment, mechanism, settings

SMOKE = settings.SETTINGS["smoke"]


def test_sampler_rows_differ_only_in_the_switch_under_test():
    rows = experiment.sampler_rows(settings.SETTINGS["cpu"])
    base = rows[experiment.LOW_CONFIDENCE]
    assert rows[experiment.RANDOM] == replace(base, remasking="random")
    assert rows[experiment.SEMI_AR] == replace(base, block_length=16)
    assert rows[experiment.BLOCK_CAUSAL] == replace(base, block_length=16, attention="block-causal")
    assert rows[experiment.steps_row(2)] == replace(base, steps=2) and experiment.steps_row(8) not in rows
    mask_predict = rows[experiment.MASK_PREDICT]
    assert (mask_predict.steps, mask_predict.ltd_beta, mask_predict.remask_committed) == (8, 1.8, True)
    assert {config.steps for name, config in rows.items() if "T=" not in name} == {8}  # equal forward passes


@pytest.mark.parametrize("prompt_length,length,block", [(4, 12, 4), (3, 9, 2), (1, 8, 8), (5, 10, 1)])
def test_block_mask_identities_hold(prompt_length, length, block):
    assert all(experiment.block_mask_identities(prompt_length, length, block).values())


def test_reachability_proof_on_a_model_matches_the_mask():
    torch.manual_seed(0)
    backend = MNTPDecoder(LlamaForCausalLM(models.tiny_random_config(40, num_layers=3)).eval(), None, 0)
    proof = experiment.reachability_proof(backend, torch.tensor([5, 9, 12]), torch.tensor([7, 8, 9, 10, 11, 12, 13, 14]), 2)
    assert proof.matches and proof.changed == 5
    assert not (proof.moved[:, :5] > 0).any()  # neither the prompt nor the first block moves
    assert (proof.moved[0, 5:7] > 0).all() and (proof.moved[-1, 5:] > 0).all()
    broken = experiment.BlockProof(proof.moved, ~proof.reach, proof.changed, 3, 2)
    assert not broken.matches


def test_exact_checks_hold_on_the_tiny_model(tiny_smollm2):
    backend = tiny_smollm2
    prompt = backend.encode("It was a bright cold day in April")
    assert experiment.cache_matches(backend, prompt, SMOKE)
    assert experiment.mask_predict_matches(backend, prompt, SMOKE)


def test_the_cache_check_holds_for_a_bf16_model_and_leaves_its_weights_as_they_were(tiny_smollm2):
    """In bf16 the cache's products round differently from recomputation's; the identity is checked in float32 and
    the weights come back bit for bit."""
    backend = tiny_smollm2
    prompt = backend.encode("It was a bright cold day in April")
    original = {name: tensor.clone() for name, tensor in backend.model.state_dict().items()}
    backend.model.to(torch.bfloat16)
    try:
        before = {name: tensor.clone() for name, tensor in backend.model.state_dict().items()}
        assert experiment.cache_matches(backend, prompt, SMOKE)
        after = backend.model.state_dict()
        assert all(after[name].dtype == tensor.dtype and torch.equal(after[name], tensor) for name, tensor in before.items())
        assert {tensor.dtype for tensor in backend.model.parameters()} == {torch.bfloat16}
    finally:
        backend.model.load_state_dict(original)
        backend.model.to(torch.float32)


def test_generate_gives_every_row_one_text_per_prompt_and_its_forward_passes(tiny_smollm2):
    backend = tiny_smollm2
    prompts = [backend.encode(text) for text in ("It was", "She said that", "The rain")]
    rows = {"a": SMOKE.llada(), "b": SMOKE.llada(block_length=4, attention="block-causal")}
    out = experiment.generate(backend, prompts, rows, replace(SMOKE, batch_size=2), seed=0)
    assert {name: len(texts) for name, texts in out.texts.items()} == {"a": 3, "b": 3}
    assert out.forward_passes == {"a": SMOKE.steps, "b": SMOKE.steps}


def test_row_hits_sum_to_the_workbook_accuracy(tiny_smollm2):
    backend = tiny_smollm2
    blocks = torch.randint(100, 5000, (4, 24), generator=torch.Generator().manual_seed(0))
    batches = objectives.fixed_eval_batches("mntp", blocks, batch_size=2, num_batches=2, mask_id=backend.mask_id,
                                            vocab_size=len(backend.tokenizer), special_ids=backend.tokenizer.all_special_ids)
    hits, counts = experiment.row_hits(backend.model, batches)
    assert len(hits) == 4 and counts.sum() == sum(int((b["labels"] != -100).sum()) for b in batches)
    expected = objectives.evaluate_masked_lm(backend.model, batches)["eval_accuracy"]
    assert hits.sum() / counts.sum() == pytest.approx(expected)


def test_paired_statistics_are_zero_on_identical_inputs_and_signed_otherwise():
    hits, counts = np.array([3.0, 5.0, 2.0]), np.array([10.0, 10.0, 10.0])
    assert experiment.accuracy_difference((hits, counts), (hits, counts)) == (0.0, 0.0, 0.0)
    value, low, high = experiment.accuracy_difference((hits + 1, counts), (hits, counts))
    assert value == pytest.approx(10.0) and low == pytest.approx(10.0) and high == pytest.approx(10.0)
    value, low, high = experiment.mean_difference(torch.tensor([2.0, 3.0, 4.0]), torch.tensor([1.0, 1.0, 1.0]))
    assert value == pytest.approx(2.0) and low >= 1.0 and high <= 3.0

    class Scores:
        resamples = 200
        per_prompt = {"x": [{"nll": 20.0, "tokens": 10}, {"nll": 30.0, "tokens": 10}],
                      "y": [{"nll": 10.0, "tokens": 10}, {"nll": 10.0, "tokens": 10}]}

    value, low, high = experiment.log_ppl_difference(Scores(), "x", "y")
    assert value == pytest.approx(1.5) and low <= value <= high
    assert experiment.speed_ratios([{experiment.SEMI_AR: [30.0, 20.0], experiment.BLOCK_CAUSAL: [10.0, 10.0]},
                                    {experiment.SEMI_AR: [40.0, 40.0], experiment.BLOCK_CAUSAL: [20.0, 10.0]}]) == \
        ((3.0, 2.0), (2.0, 4.0))
    with pytest.raises(ValueError, match="runs"):
        experiment.speed_ratios({experiment.SEMI_AR: [30.0], experiment.BLOCK_CAUSAL: [10.0]})


def test_the_block_cache_is_timed_in_fresh_processes(tiny_smollm2):
    """The model goes to each worker process, including one whose forward has been asked for hidden states before
    (the notebook's reachability proof does that), which leaves transformers' capturing hooks on it."""
    backend = tiny_smollm2
    prompt = backend.encode("It was a bright cold day in April")
    before = backend.model(input_ids=prompt[None], output_hidden_states=True).hidden_states
    runs = experiment.cache_speed(backend, prompt, replace(SMOKE, timing_processes=2))
    after = backend.model(input_ids=prompt[None], output_hidden_states=True).hidden_states  # captured again
    assert len(after) == len(before) and all(torch.equal(a, b) for a, b in zip(after, before))
    assert len(runs) == 2
    assert all(sorted(found) == sorted([experiment.SEMI_AR, experiment.BLOCK_CAUSAL]) for found in runs)
    ratios = experiment.speed_ratios(runs)
    assert [len(trials) for trials in ratios] == [len(SMOKE.timing_seeds)] * 2
    assert all(ratio > 0 for trials in ratios for ratio in trials)


def test_every_draw_samples_from_its_own_seed_and_the_first_from_the_settings(tiny_smollm2):
    backend = tiny_smollm2
    prompts = [backend.encode(text) for text in ("It was", "She said that", "The rain")]
    rows = {"a": SMOKE.llada()}
    chosen = replace(SMOKE, draws=3, batch_size=3, seed=1)
    draws = experiment.generate_draws(backend, prompts, rows, chosen)
    assert len(draws) == 3 and chosen.draw_seeds()[0] == 1
    assert draws[0].texts == experiment.generate(backend, prompts, rows, chosen, seed=1).texts
    assert draws[2].texts == experiment.generate(backend, prompts, rows, chosen, seed=chosen.draw_seeds()[2]).texts
    systems = experiment.systems_per_draw(draws, ["x", "y", "z"])
    assert [found[experiment.TRUTH_ROW] for found in systems] == [["x", "y", "z"]] * 3


def test_accuracy_by_ratio_and_high_ratio_hits_read_the_bound_samples():
    samples = mechanism.BoundSamples(nll=torch.ones(2, 2), tokens=torch.tensor([10.0, 10.0]),
                                     masked=torch.tensor([[2.0, 8.0], [4.0, 6.0]]),
                                     correct=torch.tensor([[1.0, 2.0], [2.0, 3.0]]))
    study = experiment.LikelihoodStudy({"a": samples}, {"a": torch.ones(2)})
    table = study.accuracy_by_ratio("a", 2)
    assert [entry["masked"] for entry in table] == [6.0, 14.0]
    assert table[0]["accuracy"] == pytest.approx(3 / 6) and table[1]["accuracy"] == pytest.approx(5 / 14)
    hits, counts = experiment.high_ratio_hits(samples)
    assert hits.tolist() == [2.0, 3.0] and counts.tolist() == [8.0, 6.0]


def test_the_fine_tune_trains_once_and_is_reloaded_from_its_run_folder(tmp_path, monkeypatch, tiny_smollm2):
    monkeypatch.setenv("WORKBOOK_CACHE", str(cache_dir()))  # the corpus and the model stay where they are
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    backend = tiny_smollm2
    profile = profiles.get("smoke")
    tuned = experiment.fine_tune(backend, profile, SMOKE, progress=False)
    assert [record["step"] for record in tuned.records] == list(range(1, SMOKE.fine_tune_steps + 1))
    assert all(np.isfinite(record["loss"]) for record in tuned.records)
    assert tuned.path.name.startswith(experiment.FINE_TUNE_RUN + "_") and tuned.path.parent == tmp_path / "runs"
    moved = [not torch.equal(a, b) for a, b in zip(backend.model.parameters(), tuned.backend.model.parameters())]
    assert any(moved)  # the LoRA changed the merged weights ...
    assert all(not p.requires_grad for p in backend.model.parameters())  # ... of a copy: the backend is untouched
    # the held-out curve: the fixed-mask Eq. 3 loss at step 0, every fine_tune_eval_every steps and the last, negated
    evaluated = sorted({0, SMOKE.fine_tune_steps, *range(SMOKE.fine_tune_eval_every, SMOKE.fine_tune_steps + 1,
                                                         SMOKE.fine_tune_eval_every)})
    assert [step for step, _ in tuned.heldout_curve] == evaluated
    assert all(np.isfinite(value) and value < 0 for _, value in tuned.heldout_curve)
    again = experiment.fine_tune(backend, profile, SMOKE, progress=False)
    assert again.path == tuned.path and again.heldout_curve == tuned.heldout_curve
    assert len(training.read_metrics(again.path)) == SMOKE.fine_tune_steps + len(evaluated)
    for a, b in zip(tuned.backend.model.parameters(), again.backend.model.parameters()):
        torch.testing.assert_close(a, b)
    other = experiment.FineTuneKey.of(profile, replace(SMOKE, fine_tune_lr=1e-3))
    assert store.run_dir_for(experiment.FINE_TUNE_RUN, other) != tuned.path  # another rate, another folder
    assert experiment.FineTuneKey.of(profile, replace(SMOKE, num_prompts=9)) == tuned.key  # sampling sizes do not key it


def test_the_held_out_loss_scores_the_same_masks_every_time_and_falls_with_a_better_model(tiny_smollm2):
    """The fine-tune's held-out curve reads fixed batches (its masks drawn once), so two evaluations of one model
    agree exactly; the loss is LLaDA Eq. 3's, the mean of :func:`mechanism.diffusion_loss` over the batches."""
    profile = profiles.get("smoke")
    batches = experiment.heldout_diffusion_batches(tiny_smollm2, profile, SMOKE)
    again = experiment.heldout_diffusion_batches(tiny_smollm2, profile, SMOKE)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(batches, again))
    assert sum(len(batch["input_ids"]) for batch in batches) == SMOKE.fine_tune_eval_blocks
    loss = experiment.heldout_diffusion_loss(tiny_smollm2.model, batches)
    assert loss == experiment.heldout_diffusion_loss(tiny_smollm2.model, again) and np.isfinite(loss)
    literal = np.mean([float(mechanism.diffusion_loss(tiny_smollm2.model, batch)["loss"]) for batch in batches])
    assert loss == pytest.approx(literal, rel=1e-5)  # equal batches: the row-weighted mean is the plain mean
    records = [{"step": 0, experiment.FINE_TUNE_HELDOUT_KEY: 3.0}, {"step": 1, "loss": 2.0},
               {"step": 1, experiment.FINE_TUNE_HELDOUT_KEY: 2.5}]
    assert experiment.fine_tune_heldout_curve(records) == [(0, -3.0), (1, -2.5)]  # oriented so training raises it
