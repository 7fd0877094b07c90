"""benchmarks/training_steps.py: its FLOP count is the count its docstring states (checked on a frozen Linear, a
LoRA-wrapped one and a tiny Llama, each worked out by hand here), its no-mask variant computes what the rendered mask
computes, and at the smoke profile's sizes it times every training step of the notebooks with positive rates, a share
of the limit that a real measurement can give, and each held-out evaluation's share of its run."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from helpers import attention, masks as M, models, training

ROOT = Path(__file__).resolve().parents[1]
STEP_ROWS = ("MNTP (notebook 02)", "MTP (notebook 02)", "MAGNET phase 1: MNTP + MSG", "MAGNET phase 2: + SSCL",
             "LLM2Vec-style SimCSE stage", "diffusion fine-tune (notebook 07)", "SR tagger r=0", "SR tagger r=1",
             "SR tagger r=2", "SR tagger, middle unmasking", "SR tagger, full unmasking", "EMAT head (",
             "EMAT head, new rows only", "naive MTC length classifier", "GRU language-model pre-training",
             "GRU decoder (MTC)")


def _counts():
    spec = importlib.util.spec_from_file_location("training_steps_counts",
                                                  ROOT / "benchmarks" / "training_steps_counts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _OneLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16, bias=False)


def test_a_frozen_linear_counts_its_activation_gradient_and_lora_its_weight_gradients_too():
    counts, tokens = _counts(), 10
    frozen = _OneLinear().requires_grad_(False)
    assert counts.linear_flops(frozen, tokens, backward=False) == 2 * 128 * tokens
    assert counts.linear_flops(frozen, tokens, backward=True) == 4 * 128 * tokens  # forward + activation gradient
    wrapped = training.add_lora(_OneLinear(), training.LoraSettings(r=2, alpha=4, target_modules=("proj",)), seed=0)
    lora = 8 * 2 + 2 * 16  # A (8 -> 2) and B (2 -> 16)
    assert counts.linear_flops(wrapped, tokens, backward=True) == 4 * 128 * tokens + 6 * lora * tokens


def test_a_tiny_llama_step_counts_its_layers_attention_and_the_head_on_the_scored_rows():
    counts = _counts()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = training.add_lora(LlamaForCausalLM(config), training.LoraSettings(r=4, alpha=8), seed=0)
    lengths, scored = [5, 7], 3
    tokens, kv = sum(lengths), 2 * 16
    frozen = 64 * 64 + 64 * kv + 64 * kv + 64 * 64 + 3 * 64 * 128  # q, k, v, o and the MLP's three matrices
    lora = 4 * (64 + 64) + 2 * 4 * (64 + kv) + 4 * (64 + 64)  # LoRA on q, k, v, o
    layers = 2 * (4 * frozen * tokens + 6 * lora * tokens)
    attention_products = 2 * 3 * 4 * (5 ** 2 + 7 ** 2) * 64  # QK^T and AV, forward and twice that backward
    head = 4 * 100 * 64 * scored  # forward and activation gradient of the frozen head
    assert counts.decoder_flops(model, lengths, scored) == layers + attention_products + head
    assert counts.decoder_flops(model, lengths, scored, backward=False) == \
        2 * (2 * (frozen + lora) * tokens) + 2 * 4 * (5 ** 2 + 7 ** 2) * 64 + 2 * 100 * 64 * scored


def test_an_evaluation_share_is_its_seconds_over_the_whole_run():
    counts = _counts()
    assert counts.evaluation_count(100, 5) == 21 and counts.evaluation_count(100, 5, skip_first=True) == 20
    assert counts.evaluation_share([(2.0, 3)], 10.0) == pytest.approx(6 / 16)


def test_the_no_mask_variant_is_bidirectional_attention_and_other_batches_keep_their_mask():
    model, _ = models.load_model("tiny-random:llama", dtype="float32", device="cpu")
    body = models.decoder_body(model)
    ids = torch.randint(10, 1000, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        rendered = attention.forward_with_mask(body, ids, M.bidirectional).last_hidden_state
        unmasked = attention.forward_with_mask(body, ids, M.bidirectional, mask_tensor=False).last_hidden_state
        causal = attention.forward_with_mask(body, ids, M.causal, mask_tensor=False).last_hidden_state
        padding = torch.ones_like(ids)
        padding[1, -5:] = 0
        padded = [attention.forward_with_mask(body, ids, M.bidirectional, padding_mask=padding,
                                              mask_tensor=flag).last_hidden_state for flag in (True, False)]
    assert torch.allclose(rendered, unmasked, atol=1e-5)
    assert (rendered - causal).abs().max() > 1e-2  # a causal mask is still rendered, not dropped
    assert torch.equal(padded[0], padded[1])  # a padded batch is rendered either way


def test_the_benchmark_times_every_training_step_at_smoke_sizes(tmp_path):
    out = tmp_path / "steps.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "training_steps.py"), "--tiny", "--no-compile",
                           "--threads", "1", "--profile-top", "3", "--scratch", str(tmp_path / "scratch"),
                           "--json", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    names = [row["name"] for row in report["steps"]]
    for expected in STEP_ROWS:
        assert any(name.startswith(expected) for name in names), (expected, names)
    for row in report["steps"]:
        assert row["tokens_per_s"] > 0 and row["gflop_per_step"] > 0, row
        assert 0 < row["share_of_limit"] < 1.5, row
    runs = [evaluation["run"] for evaluation in report["evaluations"]]
    for expected in ("MNTP", "MTP", "MAGNET", "LLM2Vec-style", "diffusion", "SR tagger r=1", "EMAT head (",
                     "EMAT head, new rows", "naive MTC length", "GRU decoder"):
        assert any(run.startswith(expected) for run in runs), (expected, runs)
    assert all(0 < evaluation["share"] < 1 for evaluation in report["evaluations"])
    variants = {row["name"]: row for row in report["variants"]}
    assert set(variants) == {"today", "eager attention", "LoRA dropout 0", "no mask tensor"}
    assert all(row["speed_vs_today"] > 0 for row in variants.values())
    assert report["profiles"] and len(report["profiles"][0]["ops"]) == 3
    assert "held-out evaluation" in done.stdout and "MNTP step variant" in done.stdout
