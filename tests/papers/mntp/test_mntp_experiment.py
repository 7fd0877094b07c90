"""Notebook 02's experiment: per-block hits add up to the masked-LM evaluation, and the two smoke runs share data and
selections and save the MNTP adapter under the one key that ``mntp_adapter.mntp_adapter`` looks up."""
import numpy as np
import pytest
import torch

from helpers import adapters, mntp_adapter, mntp_recipe, models, paths, profiles
from helpers import objectives as O
from helpers.papers.mntp import experiment
from helpers.store import fingerprint

SPECIAL = (0, 1, 2)
MASK_ID = 7


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    return model, tokenizer


def test_row_hits_add_up_to_the_masked_lm_evaluation(tiny):
    model, tokenizer = tiny
    blocks = torch.randint(10, 2000, (6, 20), generator=torch.Generator().manual_seed(1))
    batches = {objective: O.fixed_eval_batches(objective, blocks, batch_size=3, num_batches=2, mask_id=MASK_ID,
                                               vocab_size=2000, special_ids=SPECIAL) for objective in O.OBJECTIVES}
    hits = {objective.upper(): experiment.masked_lm_row_hits(model, batches[objective]) for objective in O.OBJECTIVES}
    for objective in O.OBJECTIVES:
        correct, counts = hits[objective.upper()]
        assert len(counts) == 6 and correct.sum() / counts.sum() == pytest.approx(
            O.evaluate_masked_lm(model, batches[objective])["eval_accuracy"])
    assert np.array_equal(hits["MNTP"][1], hits["MTP"][1])  # the same selected tokens for both objectives


def test_smoke_runs_save_the_adapter_later_notebooks_find(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "runs_dir", lambda: tmp_path / "runs")
    monkeypatch.setattr(adapters, "adapter_path",
                        lambda kind, name, settings: tmp_path / f"{kind}-{fingerprint(settings)}")
    smoke = profiles.get("smoke")
    _, tokenizer = tiny
    recipe = mntp_recipe.masked_lm_recipe(smoke)
    mlm_data = experiment.load_data(tokenizer, smoke, recipe)
    assert torch.equal(mlm_data.eval_batches["mntp"][0]["selected"], mlm_data.eval_batches["mtp"][0]["selected"])
    assert mlm_data.train_blocks.shape == (recipe.train_blocks, recipe.seq_len)
    found_before = {}  # objective -> the adapter mntp_adapter.mntp_adapter finds as that run starts
    run_objective = experiment.run_objective

    def recording(profile, tokenizer, mlm_data, objective, **options):
        found_before[objective] = mntp_adapter.mntp_adapter(profile)
        return run_objective(profile, tokenizer, mlm_data, objective, **options)

    monkeypatch.setattr(experiment, "run_objective", recording)
    comparison = experiment.train_both(smoke, tokenizer, mlm_data, recipe=recipe, resume=False)
    assert set(comparison.runs) == {"MNTP", "MTP"}
    # the MNTP adapter is saved as soon as MNTP finishes: a notebook reading it during the MTP run finds it
    assert found_before == {"mntp": None, "mtp": (comparison.mntp_adapter_path, comparison.keys["mntp"])}
    for records in comparison.runs.values():
        evaluated = [r["step"] for r in records if "eval_accuracy" in r]
        assert evaluated[0] == 0 and evaluated[-1] == recipe.steps
    mntp_key = comparison.keys["mntp"]
    assert mntp_key == mntp_adapter.masked_lm_run_key(smoke, "mntp")  # the key mntp_adapter.mntp_adapter asks for first
    assert {**comparison.keys["mtp"], "objective": "mntp"} == mntp_key  # the runs differ in their objective only
    assert mntp_adapter.mntp_adapter(smoke) == (comparison.mntp_adapter_path, mntp_key)
    hits = experiment.final_hits(comparison, mlm_data)
    assert len(hits["MNTP"][1]) == recipe.batch_size * recipe.eval_batches
