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


def test_the_adapter_is_trained_and_scored_under_bidirectional_attention(tmp_path):
    """MNTP (Eq. 2) removes the causal mask: the held-out evaluation notebook 02's runs record at step 0 (LoRA's B
    starts at zero, so the base model) is the masked-token cross-entropy under full bidirectional attention,
    computed here by hand from the decoder body and the LM head, not through ``objectives.masked_lm_loss``; under
    the causal mask it differs."""
    import torch.nn.functional as F

    from helpers import attention, masks as M, training as T

    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    blocks = torch.randint(10, 2000, (8, 16), generator=torch.Generator().manual_seed(0))
    mask_id = O.resolve_mask_token(tokenizer, "underscore")
    evals = O.fixed_eval_batches("mntp", blocks[:2], batch_size=2, num_batches=1, mask_id=mask_id,
                                 vocab_size=len(tokenizer), special_ids=tokenizer.all_special_ids)
    config = T.TrainConfig(steps=1, batch_size=2, lr=1e-2, eval_every=1, seed=1)
    _, records = mntp_adapter.masked_lm_experiment(model, tokenizer, objective="mntp", train_blocks=blocks,
                                                   eval_batches=evals, config=config, run_dir=tmp_path / "run",
                                                   mask_id=mask_id, progress=False,
                                                   lora=T.LoraSettings(r=4, alpha=8, dropout=0.0))
    recorded = next(record["eval_loss"] for record in records if record.get("step") == 0 and "eval_loss" in record)
    base, _ = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    batch = evals[0]

    @torch.no_grad()
    def by_hand(mask) -> float:
        hidden = attention.forward_with_mask(models.decoder_body(base), batch["input_ids"], mask,
                                             padding_mask=batch["padding_mask"]).last_hidden_state
        rows, cols = (batch["labels"] != -100).nonzero(as_tuple=True)
        logits = base.get_output_embeddings()(hidden[rows, cols])
        return float(F.cross_entropy(logits.float(), batch["labels"][rows, cols]))

    assert recorded == pytest.approx(by_hand(M.bidirectional), rel=1e-5)
    assert abs(by_hand(M.bidirectional) - by_hand(M.causal)) > 1e-3  # the check tells the two apart
