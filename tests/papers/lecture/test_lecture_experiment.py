"""Notebook 01's real-model proof: a token changed inside a MAGNET span moves exactly the hidden states the mask
predicts, layer by layer, and a wrong prediction is caught."""
import torch

from helpers import models
from helpers.papers.lecture import experiment


def test_the_mask_proof_matches_on_a_real_decoder_and_catches_a_wrong_reach():
    model, tokenizer = models.load_model("tiny-random:llama", device="cpu", dtype="float32", seed=0)
    example = torch.randint(10, 1000, (1, 9), generator=torch.Generator().manual_seed(0))
    span = experiment.example_span(example)
    assert span == (3, 6)
    proof = experiment.mask_proof(model, example, span)
    assert proof.changed == 4 and proof.matches
    assert proof.reach[0, :span[0]].sum() == 0  # context before the span cannot see a span token at layer 1
    wrong = experiment.MaskProof(proof.moved, ~proof.reach, proof.changed, span)
    assert not wrong.matches


def test_the_lectures_three_masks_are_named_by_their_span():
    named = experiment.example_masks((2, 5))
    assert list(named) == ["causal", "bidirectional", "MAGNET span (2, 5)"]
