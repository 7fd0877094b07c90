"""Gradient checkpointing changes no gradient under any mask strategy.

With checkpointing, each decoder layer runs again in backward. A per-layer mask (middle-layer
unmasking, seed 003 App. A.3.1; DSWA's Eq. 7 windows, seed 002 §4.1) that reached the attention
only during the forward would be replaced by layer 0's mask in that recompute, and the gradients
would differ (relative error 1.09 on a tiny Llama before the fix). The masks now travel with the
layer call's own mask argument, so the recompute sees them.
"""
import pytest
import torch
from transformers import AutoModelForCausalLM

from helpers import attention as A
from helpers import masks as M
from helpers import models
from helpers.papers import sequence_repetition as R

LAYERS, VOCAB = 6, 200


def strategies():
    return {
        "SR (r=1, causal)": {"mask": M.causal, "repeat": 1},
        "full unmasking": {"mask": M.bidirectional},
        "middle unmasking": {"layer_masks": M.middle_unmasking(LAYERS)},
        "DSWA (Eq. 7)": {"layer_masks": M.dswa_per_layer(4, LAYERS, fixed_window=3, alpha_min=0.25, alpha_max=1.0)},
    }


def gradients(implementation: str, strategy: dict, checkpointing: dict | None) -> torch.Tensor:
    torch.manual_seed(0)
    config = models.tiny_random_config(VOCAB, num_layers=LAYERS, pad_token_id=0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=implementation).train()
    if checkpointing is not None:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=checkpointing)
    ids = torch.randint(1, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    padding = torch.ones_like(ids)
    padding[1, -3:] = 0
    strategy = dict(strategy)
    repeat = strategy.pop("repeat", 0)
    if repeat:
        batch = R.repeat_batch(ids, padding, repeat)
        ids, padding, strategy["position_ids"] = batch.input_ids, batch.padding_mask, batch.position_ids
    hidden = A.forward_with_mask(model.get_decoder(), ids, padding_mask=padding, **strategy).last_hidden_state
    target = torch.randn(hidden.shape, generator=torch.Generator().manual_seed(2))
    (hidden * target * padding[..., None]).sum().backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("name", list(strategies()))
@pytest.mark.parametrize("checkpointing", [{"use_reentrant": False}, {"use_reentrant": True}],
                         ids=["non-reentrant", "reentrant"])
def test_checkpointing_changes_no_gradient(implementation, name, checkpointing):
    plain = gradients(implementation, strategies()[name], None)
    checkpointed = gradients(implementation, strategies()[name], checkpointing)
    assert plain.norm() > 0
    assert float((plain - checkpointed).norm() / plain.norm()) < 1e-4


def test_routing_leaves_other_calls_to_the_base_attention():
    """After a per-layer forward the model stays routed (the recompute needs it); a plain call is unchanged."""
    config = models.tiny_random_config(VOCAB, num_layers=LAYERS, pad_token_id=0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    ids = torch.randint(1, VOCAB, (2, 9), generator=torch.Generator().manual_seed(3))
    padding = torch.ones_like(ids)
    padding[0, :2] = 0
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=padding).logits
        A.forward_with_mask(model, ids, layer_masks=M.middle_unmasking(LAYERS), padding_mask=padding)
        assert A.attention_implementation(model) == "eager"
        after = model(input_ids=ids, attention_mask=padding).logits
    assert torch.equal(before[padding.bool()], after[padding.bool()])


def test_training_with_checkpointing_follows_the_same_losses(tmp_path):
    """``TrainConfig(gradient_checkpointing=True)`` (gpu and paper profiles) trains to the same losses, per-row masks on."""
    from helpers import objectives as O
    from helpers import mntp_adapter
    from helpers import training as T

    records = {}
    for checkpointing in (False, True):
        model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
        blocks = torch.randint(10, 2000, (8, 16), generator=torch.Generator().manual_seed(0))
        mask_id = O.resolve_mask_token(tokenizer, "underscore")
        config = T.TrainConfig(steps=3, batch_size=2, lr=1e-2, eval_every=0, seed=1, gradient_checkpointing=checkpointing)
        evals = O.fixed_eval_batches("mntp", blocks[:2], batch_size=2, num_batches=1, mask_id=mask_id,
                                     vocab_size=len(tokenizer), special_ids=tokenizer.all_special_ids)
        _, run = mntp_adapter.masked_lm_experiment(model, tokenizer, objective="mntp", train_blocks=blocks, eval_batches=evals,
                                        config=config, run_dir=tmp_path / str(checkpointing), mask_id=mask_id,
                                        mask=M.magnet([(4, 9)]), progress=False, lora=T.LoraSettings(r=4, alpha=8, dropout=0.0))
        records[checkpointing] = [r["loss"] for r in run if "loss" in r]
        assert model.model.gradient_checkpointing is checkpointing
    assert records[True] == pytest.approx(records[False], rel=1e-5)
