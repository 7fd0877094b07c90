"""diffusers' BlockRefinementScheduler beside :func:`mechanism.sample`, and the editing and corruption switches against
their definitions.

A tiny random Llama read as an MNTP decoder, its output layer scaled by 5 so that confidences spread over (0, 1)
(at scale 1 every probability is near 1/40 and no threshold ever fires; at 10 they saturate at 1.0 and exact ties
appear, which the scheduler's unstable sort breaks otherwise than ours). The real ``LLaDA2Pipeline`` runs on the
model through :class:`ecosystem.BackendLogits`; ``uniform_generate`` is DiffusionGemmaPipeline's loop around the
same scheduler.
"""
from __future__ import annotations

import pytest
import torch
from transformers import LlamaForCausalLM

from helpers import masks as M
from helpers import models
from helpers.masked_lm import MNTPDecoder
from helpers.papers.diffusion import ecosystem, mechanism
from helpers.papers.diffusion.mechanism import SamplerConfig, sample

pytest.importorskip("diffusers")

VOCAB, MASK_ID, PAD_ID = 40, 0, 1
PROMPT = torch.tensor([5, 9, 12, 7, 8, 3, 22, 30])  # 8 tokens: a multiple of every block below
LENGTH = 8


def _model(scale: float = 5.0) -> MNTPDecoder:
    torch.manual_seed(0)
    model = LlamaForCausalLM(models.tiny_random_config(VOCAB, num_layers=2, pad_token_id=PAD_ID)).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return MNTPDecoder(model, None, MASK_ID, pad_id=PAD_ID)


def _config(block: int, rule, editing: float | None, passes: int = 1, **changes) -> SamplerConfig:
    blocks = LENGTH // block
    layout = dict(block_length=block if blocks > 1 else None, attention="block-causal" if blocks > 1 else "full",
                  temperature=0.0, editing_threshold=editing, edit_passes=passes, **changes)
    if isinstance(rule, float):
        return SamplerConfig(threshold=rule, **layout)
    return SamplerConfig(steps=rule * blocks, **layout)


def test_llada2_pipeline_gives_the_tokens_of_sample():
    backend = _model()
    runs = commits = edits = 0
    for block in (2, 4, 8):
        for rule in (1, 2, block, 0.1, 0.12, 0.5):  # steps per block, or Fast-dLLM's τ (confidences: ~0.12 or ~0.94)
            for editing, passes in ((None, 1), (0.15, 1), (0.15, 3), (0.3, 1), (0.3, 3)):
                config = _config(block, rule, editing, passes)
                ours = sample(backend, PROMPT, LENGTH, config)
                library = ecosystem.llada2_generate(backend, PROMPT, LENGTH, config)
                assert torch.equal(ours.tokens, library.tokens), (block, rule, editing, passes)
                runs += 1
                commits += sum(int(step.committed.sum()) > 1 for step in ours.trace) * isinstance(rule, float)
                edits += sum(int(step.edited.sum()) for step in ours.trace)
    assert runs == 90 and commits > 0 and edits > 0  # the threshold committed several at once, editing fired


def test_uniform_scheduler_gives_the_tokens_of_sample():
    backend = _model()
    edits = 0
    for block in (2, 4, 8):
        for per_block in (1, 2, block):
            for editing in (None, 0.3):
                config = _config(block, per_block, editing, corruption="uniform", schedule="mask-predict")
                for seed in (0, 1):
                    ours = sample(backend, PROMPT, LENGTH, config, seed=seed)
                    library = ecosystem.uniform_generate(backend, PROMPT, LENGTH, config, seed=seed)
                    assert torch.equal(ours.tokens, library.tokens), (block, per_block, editing, seed)
                    assert library.forward_passes == ours.forward_passes == config.steps
                    edits += sum(int(step.edited.sum()) for step in ours.trace)
    assert edits > 0


def test_the_pipeline_arguments_refuse_what_it_cannot_express():
    with pytest.raises(ValueError, match="multiple of the block"):
        ecosystem.pipeline_arguments(_config(4, 2, None), PROMPT[:6], LENGTH)
    with pytest.raises(ValueError, match="temperature"):
        ecosystem.pipeline_arguments(SamplerConfig(steps=4), PROMPT, LENGTH)
    with pytest.raises(ValueError, match="block-causal"):
        ecosystem.pipeline_arguments(SamplerConfig(steps=4, block_length=4, temperature=0.0), PROMPT, LENGTH)
    arguments = ecosystem.pipeline_arguments(_config(4, 0.5, 0.2, 3), PROMPT, LENGTH)
    assert (arguments["num_inference_steps"], arguments["threshold"], arguments["max_post_steps"]) == (4, 0.5, 2)
    assert ecosystem.pipeline_arguments(_config(4, 2, None), PROMPT, LENGTH)["threshold"] > 1  # pure schedule


def _final_logits(backend, tokens, block):
    ids = torch.cat([PROMPT, tokens[0]])[None]
    hidden = backend.hidden_states(ids, torch.ones_like(ids), mask=M.block_causal(PROMPT.numel(), block))
    cols = torch.arange(PROMPT.numel(), ids.shape[1])
    logits = backend.logits_at(hidden, torch.zeros_like(cols), cols).float()
    logits[:, backend.banned_ids] = float("-inf")
    return torch.softmax(logits, -1)


@pytest.mark.parametrize("editing", [0.1, 0.3])
def test_editing_rewrites_exactly_the_confident_disagreements(editing):
    """LLaDA2.1's T2T editing (BlockRefinementScheduler.step): a committed, non-prompt token of the current block is
    re-written to the proposal when the proposal differs and its probability exceeds ``editing_threshold``."""
    backend = _model()
    config = _config(LENGTH, 0.1, editing, passes=50)  # one block; τ = 0.1 commits all at once, editing passes follow
    result = sample(backend, PROMPT, LENGTH, replace_cache(config))
    edits = 0
    for before, step in zip(result.trace, result.trace[1:]):
        committed = ~step.masked[0]
        previous, now = before.tokens[0], step.tokens[0]
        changed = committed & (previous != now)
        assert torch.equal(changed, step.edited[0]), step.step  # only edits change a committed token
        edits += int(changed.sum())
    assert edits > 0
    # the last pass edited nothing: every final token is the argmax or the argmax is below the editing threshold
    assert not bool(result.trace[-1].edited.any())
    probabilities = _final_logits(backend, result.tokens, LENGTH)
    best, argmax = probabilities.max(-1)
    assert bool(((argmax == result.tokens[0]) | (best <= editing)).all())
    # off, committed tokens never change and the forward passes are the schedule's
    plain = sample(backend, PROMPT, LENGTH, _config(4, 2, None))
    edited = sample(backend, PROMPT, LENGTH, _config(4, 2, editing))
    assert plain.forward_passes == edited.forward_passes == 4  # editing is free under a step schedule
    assert not any(bool(step.edited.any()) for step in plain.trace)


def replace_cache(config: SamplerConfig) -> SamplerConfig:
    from dataclasses import replace

    return replace(config, cache=False)


def test_uniform_corruption_replaces_the_mask_at_the_same_positions():
    ids = torch.randint(2, VOCAB, (64, 32), generator=torch.Generator().manual_seed(0))
    batches = {corruption: mechanism.diffusion_batch(ids, torch.ones_like(ids), mask_id=MASK_ID, special_ids=[],
                                                     generator=torch.Generator().manual_seed(1),
                                                     corruption=corruption, vocab_size=VOCAB)
               for corruption in mechanism.CORRUPTIONS}
    mask, uniform = batches["mask"], batches["uniform"]
    corrupted = mask["input_ids"] == MASK_ID
    assert torch.equal(mask["labels"], uniform["labels"]) and torch.equal(mask["ratio"], uniform["ratio"])
    assert torch.equal(uniform["input_ids"][~corrupted], ids[~corrupted])  # untouched outside the corrupted set
    noise = uniform["input_ids"][corrupted]
    assert noise.min() >= 0 and noise.max() < VOCAB
    counts = torch.bincount(noise, minlength=VOCAB).float()  # uniform over the vocabulary: chi-square, 39 dof
    expected = noise.numel() / VOCAB
    assert float(((counts - expected) ** 2 / expected).sum()) < 80
    with pytest.raises(ValueError, match="vocab_size"):
        mechanism.diffusion_batch(ids, torch.ones_like(ids), mask_id=MASK_ID, special_ids=[], corruption="uniform")
    with pytest.raises(ValueError, match="corruption"):
        mechanism.diffusion_batch(ids, torch.ones_like(ids), mask_id=MASK_ID, special_ids=[], corruption="gauss")


def test_uniform_sampling_feeds_noise_never_the_mask_and_commits_are_final():
    backend = _model()
    seen = []
    original = backend.predict

    def spy(ids, padding, rows, cols, **kwargs):
        seen.append(ids[0, PROMPT.numel():].clone())
        return original(ids, padding, rows, cols, **kwargs)

    backend.predict = spy
    config = SamplerConfig(steps=4, block_length=4, attention="block-causal", temperature=0.0, cache=False,
                           corruption="uniform")
    result = sample(backend, PROMPT, LENGTH, config, seed=3)
    assert len(seen) == 4
    generator = torch.Generator().manual_seed(3)  # the sampler's stream: one draw at a block's start and after each step
    draws = [torch.randint(0, VOCAB, (4,), generator=generator) for _ in range(6)]
    for index, (ids, step) in enumerate(zip(seen, result.trace)):
        block, uncommitted = slice(4 * step.block, 4 * step.block + 4), step.masked[0, 4 * step.block:4 * step.block + 4]
        noise = draws[3 * step.block + index % 2]
        # what the model saw in the current block: the committed tokens, and that step's noise where uncommitted
        assert torch.equal(ids[block][~uncommitted], result.tokens[0, block][~uncommitted])
        assert torch.equal(ids[block][uncommitted], noise[uncommitted])
    for step, nxt in zip(result.trace, result.trace[1:]):
        committed = ~nxt.masked[0]
        assert torch.equal(step.tokens[0][committed & ~step.masked[0]], nxt.tokens[0][committed & ~step.masked[0]])


@pytest.mark.parametrize("changes,match", [
    (dict(editing_threshold=0.0), "editing_threshold"),
    (dict(editing_threshold=0.5, remask_committed=True), "editing_threshold"),
    (dict(corruption="noise"), "corruption"),
    (dict(corruption="uniform", block_length=4), "corruption='uniform'"),
    (dict(edit_passes=-1), "edit_passes"),
])
def test_the_switches_refuse_settings_they_do_not_define(changes, match):
    with pytest.raises(ValueError, match=match):
        SamplerConfig(**changes)
