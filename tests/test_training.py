"""Training helpers: LoRA wiring, exact resume after an interruption, checkpoints, metrics, fallbacks."""
import warnings

import pytest
import torch

from helpers import models
from helpers import objectives as O
from helpers import training as T
from helpers.device import resolve_four_bit

CONFIG = T.TrainConfig(steps=6, batch_size=2, grad_accum=2, lr=1e-2, eval_every=2, checkpoint_every=0, seed=3)


def experiment(run_dir, stop_after=None, resume=True, config=CONFIG):
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    blocks = torch.randint(10, 2000, (12, 16), generator=torch.Generator().manual_seed(0))
    mask_id = O.resolve_mask_token(tokenizer, "underscore")
    evals = O.fixed_eval_batches("mntp", blocks[:4], batch_size=2, num_batches=2, mask_id=mask_id,
                                 vocab_size=len(tokenizer), special_ids=tokenizer.all_special_ids)
    return T.masked_lm_experiment(model, tokenizer, objective="mntp", train_blocks=blocks, eval_batches=evals,
                                  config=config, run_dir=run_dir, mask_id=mask_id, stop_after=stop_after,
                                  resume=resume, progress=False,
                                  lora=T.LoraSettings(r=4, alpha=8, dropout=0.1))


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path):
    _, straight = experiment(tmp_path / "straight")
    _, first_half = experiment(tmp_path / "resumed", stop_after=3)
    assert max(r["step"] for r in first_half) == 3
    assert (tmp_path / "resumed" / T.CHECKPOINT_DIR / "state.pt").exists()
    _, resumed = experiment(tmp_path / "resumed")  # a fresh process would do exactly this
    losses = lambda records: [(r["step"], r["loss"]) for r in records if "loss" in r]
    assert losses(resumed) == losses(straight)  # every step logged once, identical to the bit
    final = lambda records: [r for r in records if "eval_loss" in r][-1]
    assert final(resumed) == final(straight)


def test_training_lowers_the_loss_and_logs_evaluations(tmp_path):
    model, records = experiment(tmp_path / "run", config=T.TrainConfig(steps=12, batch_size=2, lr=2e-2, eval_every=4))
    evals = [r for r in records if "eval_loss" in r]
    assert [r["step"] for r in evals] == [0, 4, 8, 12]
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"]
    assert T.read_metrics(tmp_path / "run") == records
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)


def test_adapter_round_trip(tmp_path):
    model, _ = experiment(tmp_path / "run", config=T.TrainConfig(steps=2, batch_size=2, lr=1e-2))
    path = T.save_adapter(model, tmp_path / "adapter")
    base, _ = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    loaded = T.load_adapter(base, path)
    ids = torch.randint(10, 2000, (1, 8))
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, model(ids).logits, atol=1e-5)
    with pytest.raises(ValueError, match="path="):
        T.load_adapter(base, tmp_path)


def test_bad_train_config_and_targets():
    with pytest.raises(ValueError, match="steps="):
        T.TrainConfig(steps=0, batch_size=1)
    with pytest.raises(ValueError, match="lr="):
        T.TrainConfig(steps=1, batch_size=1, lr=0)
    model, _ = models.load_model("tiny-random:llama", device="cpu", dtype="float32")
    with pytest.raises(ValueError, match="target_modules="):
        T.add_lora(model, T.LoraSettings(target_modules=("query_key_value",)))


def test_sequence_longer_than_the_model_is_rejected(tmp_path):
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32")
    too_long = torch.randint(10, 2000, (2, model.config.max_position_embeddings + 1))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        T.masked_lm_experiment(model, tokenizer, objective="mntp", train_blocks=too_long, eval_batches=[],
                               config=CONFIG, run_dir=tmp_path, mask_id=5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback")
def test_four_bit_on_cpu_falls_back_with_a_clear_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert resolve_four_bit(True) is False
    assert any("needs CUDA" in str(w.message) for w in caught)


def test_lr_lambda_scales_each_step_and_linear_decay_is_the_trainer_default(tmp_path):
    assert [T.linear_decay(4)(step) for step in range(5)] == [1.0, 0.75, 0.5, 0.25, 0.0]
    with pytest.raises(ValueError, match="steps=0"):
        T.linear_decay(0)

    def moved(lr_lambda):
        weight = torch.nn.Parameter(torch.ones(3))
        model = torch.nn.Module()
        model.weight = weight
        config = T.TrainConfig(steps=3, batch_size=1, lr=0.1, eval_every=0)
        T.train(model, batch_for=lambda step, micro: {}, loss_fn=lambda m, b: {"loss": (m.weight ** 2).sum()},
                config=config, run_dir=tmp_path / str(id(lr_lambda)), progress=False, lr_lambda=lr_lambda)
        return float((weight.detach() - 1).abs().max())

    assert moved(lambda step: 0.0) == 0.0  # a zero factor freezes every step
    # AdamW's first steps move each weight by about lr x factor: 0.1 x (1 + 2/3 + 1/3) for linear decay over 3 steps
    assert moved(T.linear_decay(3)) == pytest.approx(0.2, abs=0.01)
    assert moved(None) == pytest.approx(0.3, abs=0.01)
