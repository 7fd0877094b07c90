"""The sampler family, its objective and its bound (LLaDA §2.4, Algorithm 5, App. B.3, Eq. 3, Eq. 6; Fast-dLLM §3.3;
BD3-LM §3.1, §4.1; OpenLTG §3.1).

Tiny random Llama (read as an MNTP decoder, offset 1) and BERT (an encoder, offset 0) check the sampler's invariants,
its equality with notebook 05's mask-predict and with a reference written here from LLaDA's Algorithm 5, and that the
block-causal cache equals recomputing everything. The tiny Llama with SmolLM2's tokenizer checks the banned tokens.
"""
from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, LlamaForCausalLM

from helpers import masks as M
from helpers import models, objectives
from helpers.masked_lm import EncoderMLM, MaskedLM, MNTPDecoder, underscore_only_ids
from helpers.papers.diffusion import mechanism
from helpers.papers.diffusion.mechanism import SamplerConfig, sample
from helpers.papers.openltg import mechanism as openltg  # notebook 05's mask-predict, the reference of one configuration

VOCAB, MASK_ID, PAD_ID = 40, 0, 1
PROMPTS = [torch.tensor([5, 9, 12, 7]), torch.tensor([8, 3])]


def _mntp(seed: int = 0) -> MNTPDecoder:
    torch.manual_seed(seed)
    config = models.tiny_random_config(VOCAB, num_layers=2, pad_token_id=PAD_ID)
    return MNTPDecoder(LlamaForCausalLM(config).eval(), None, MASK_ID, pad_id=PAD_ID)


def _bert() -> EncoderMLM:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=80, pad_token_id=PAD_ID)
    return EncoderMLM(BertForMaskedLM(config).eval(), None, mask_id=MASK_ID, pad_id=PAD_ID)


BACKENDS = {"mntp": _mntp, "bert": _bert}
CONFIGS = {
    "one block, low-confidence, sampled": SamplerConfig(steps=4, temperature=1.0, top_p=0.9),
    "one block, random, greedy": SamplerConfig(steps=6, remasking="random", temperature=0.0),
    "semi-AR, greedy": SamplerConfig(steps=6, block_length=4, temperature=0.0),
    "block-causal, sampled": SamplerConfig(steps=6, block_length=4, attention="block-causal", temperature=1.0),
    "block-causal, uncached, linear": SamplerConfig(steps=6, block_length=4, attention="block-causal", cache=False,
                                                    schedule="linear", temperature=0.0),
}


# --------------------------------------------------------------------------- the schedule

@pytest.mark.parametrize("length,steps", [(12, 4), (10, 4), (7, 7), (9, 2), (5, 1)])
def test_schedules_end_unmasked_and_follow_their_definitions(length, steps):
    uniform = mechanism.unmasked_after(length, steps, "uniform")
    counts = [b - a for a, b in zip([0] + uniform, uniform)]
    base, extra = divmod(length, steps)
    assert counts == [base + 1] * extra + [base] * (steps - extra)  # LLaDA's get_num_transfer_tokens
    assert mechanism.unmasked_after(length, steps, "linear") == [math.floor(length * (t + 1) / steps) for t in range(steps)]
    assert mechanism.unmasked_after(length, steps, "mask-predict") == [
        length - openltg.remask_count(length, t, steps) for t in range(steps)]
    for schedule in mechanism.SCHEDULES:
        assert mechanism.unmasked_after(length, steps, schedule)[-1] == length
    if length % steps == 0:
        assert len({tuple(mechanism.unmasked_after(length, steps, s)) for s in mechanism.SCHEDULES}) == 1


# --------------------------------------------------------------------------- the invariants

@pytest.mark.parametrize("backend_name", list(BACKENDS))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_step_commits_the_scheduled_count_in_its_block_and_commits_are_final(backend_name, name):
    config = CONFIGS[name]
    result = sample(BACKENDS[backend_name](), PROMPTS, 12, config, seed=3)
    block, blocks, per_block = config.layout(12)
    schedule = mechanism.unmasked_after(block, per_block, config.schedule)
    expected = [b - a for a, b in zip([0] + schedule, schedule)] * blocks
    assert result.forward_passes == config.steps == len(result.trace)
    for index, step in enumerate(result.trace):
        current = torch.zeros(12, dtype=torch.bool)
        current[step.block * block:(step.block + 1) * block] = True
        assert step.block == index // per_block
        assert step.committed.sum(1).tolist() == [expected[index]] * 2
        assert not step.committed[:, ~current].any() and not step.remasked.any()
        assert torch.equal(step.masked[:, current] | ~step.masked[:, current], torch.ones(2, block, dtype=torch.bool))
        assert not step.masked[:, :step.block * block].any()  # earlier blocks are complete
        later = step.masked.clone()
        later[:, :(step.block + 1) * block] = True
        assert later.all()  # later blocks untouched
    final = result.tokens
    for step in result.trace:
        done = ~step.masked
        assert torch.equal(step.tokens[done], final[done])  # a committed token never changes
    assert not (final == MASK_ID).any() and not torch.isin(final, torch.tensor(BACKENDS[backend_name]().banned_ids)).any()


def test_low_confidence_commits_the_highest_scores_among_the_masked_positions():
    result = sample(_mntp(), PROMPTS, 12, SamplerConfig(steps=4, temperature=1.0), seed=1)
    for step in result.trace:
        for row in range(2):
            masked = step.masked[row]
            chosen = step.committed[row]
            assert step.scores[row][masked].isfinite().all() and step.scores[row][~masked].isnan().all()
            rest = step.scores[row][masked & ~chosen]
            assert rest.numel() == 0 or step.scores[row][chosen].min() >= rest.max()


def test_random_remasking_ignores_the_logits():
    """Greedy tokens differ between two models, but the positions committed at each step come from the generator
    alone; and over seeds every position is equally likely to go first (chi-square)."""
    config = SamplerConfig(steps=6, remasking="random", temperature=0.0)
    first, second = (sample(_mntp(seed), PROMPTS, 12, config, seed=5) for seed in (0, 1))
    assert not torch.equal(first.tokens, second.tokens)
    assert all(torch.equal(a.committed, b.committed) for a, b in zip(first.trace, second.trace))
    backend = _mntp()
    firsts = torch.zeros(12)
    for seed in range(240):
        firsts += sample(backend, PROMPTS[:1], 12, replace(config, steps=12), seed=seed).trace[0].committed[0].float()
    chi_square = float(((firsts - 20) ** 2 / 20).sum())
    assert chi_square < 31.3  # the 0.001 quantile of chi-square with 11 degrees of freedom


def test_threshold_commits_at_least_one_and_only_confident_extras():
    backend = _mntp()
    for threshold in (0.05, 0.2):
        result = sample(backend, PROMPTS, 12, SamplerConfig(block_length=4, threshold=threshold, temperature=0.0), seed=0)
        assert result.forward_passes == len(result.trace)
        for step in result.trace:
            for row in range(2):
                candidates = step.masked[row] & ~step.scores[row].isnan()
                if not candidates.any():
                    continue
                chosen = step.committed[row]
                assert chosen.sum() >= 1
                best = step.scores[row].nan_to_num(-1.0).argmax()
                assert chosen[best]
                others = chosen.clone()
                others[best] = False
                assert (step.scores[row][others] >= threshold).all()
        assert not (result.tokens == MASK_ID).any()
    everything = sample(backend, PROMPTS, 12, SamplerConfig(block_length=4, threshold=0.0, temperature=0.0))
    assert everything.forward_passes == 3  # τ = 0: each block in one step
    one_by_one = sample(backend, PROMPTS, 12, SamplerConfig(threshold=1.5, temperature=0.0))
    stepwise = sample(backend, PROMPTS, 12, SamplerConfig(steps=12, temperature=0.0))
    assert one_by_one.forward_passes == 12 and torch.equal(one_by_one.tokens, stepwise.tokens)


def test_semi_autoregressive_blocks_finish_before_the_next_one_starts():
    result = sample(_mntp(), PROMPTS, 12, SamplerConfig(steps=6, block_length=4, temperature=1.0), seed=2)
    done_at = {}
    for step in result.trace:
        for block in range(3):
            if not step.masked[:, block * 4:(block + 1) * 4].any() and block not in done_at:
                done_at[block] = step.step
        assert all(not step.committed[:, block * 4:].any() for block in range(3) if block > step.block)
    one_by_one = sample(_mntp(), PROMPTS, 12, SamplerConfig(steps=12, block_length=1, temperature=0.0))
    greedy = [step.committed.nonzero()[:, 1].tolist() for step in one_by_one.trace]
    assert greedy == [[index, index] for index in range(12)]  # blocks of one token: left to right


@pytest.mark.parametrize("backend_name", list(BACKENDS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mask_predict_is_one_configuration(backend_name, seed):
    """Notebook 05's mask_predict (LTD, top-p, re-masking committed tokens; DSWA off) token for token."""
    backend = BACKENDS[backend_name]()
    for iterations, beta, ltd in ((4, 1.8, True), (6, 1.5, False), (3, 2.0, True)):
        reference = openltg.mask_predict(backend, PROMPTS, 12, openltg.DecodeConfig(iterations=iterations, beta=beta,
                                                                                    ltd=ltd, dswa=False), seed=seed)
        ours = sample(backend, PROMPTS, 12, mechanism.mask_predict_config(iterations, beta, ltd=ltd), seed=seed)
        assert torch.equal(reference.tokens, ours.tokens)
        assert [step.remasked.sum().item() for step in ours.trace][0] == 0
        assert ours.forward_passes == iterations
        for mine, theirs in zip(ours.trace, reference.trace):
            assert torch.equal(mine.masked, theirs.masked) and torch.equal(mine.tokens, theirs.tokens)


def _llada_algorithm5(backend: MaskedLM, prompt: torch.Tensor, length: int, steps: int, block: int | None = None):
    """LLaDA's reverse process with low-confidence remasking, written from the paper's Algorithm 5 (arXiv 2502.09992,
    App. A.3), with the blocks of App. B.3 ("divide the sequence into several blocks and generate them from left to
    right; within each block, apply ... the low-confidence remasking strategy"): greedy r_0 = argmax p(r_0 | p_0, r_t);
    c^i = 1 for an unmasked token, else p(r_0^i); n_un = ⌊L(1 - s)⌋ stay unmasked, the least confident re-masked.
    The mask predictor sees the whole sequence (the model's own mask, recomputed at every step)."""
    block = block or length
    r = [None] * length  # None is M
    mask = M.block_causal(prompt.numel(), prompt.numel() + length)
    banned = torch.tensor(backend.banned_ids)
    per_block = steps // (length // block)
    for first in range(0, length, block):
        span = range(first, first + block)
        for step in range(per_block):
            t = 1 - Fraction(step, per_block)
            s = t - Fraction(1, per_block)
            ids = torch.cat([prompt, torch.tensor([backend.mask_id if x is None else x for x in r])])[None]
            cols = torch.arange(prompt.numel(), ids.shape[1])
            with torch.no_grad():
                logits = backend.predict(ids, torch.ones_like(ids), torch.zeros_like(cols), cols, mask=mask).float()
            logits[:, banned] = -math.inf
            p = torch.softmax(logits, -1)
            r0, c = {}, {}
            for i in span:
                if r[i] is not None:
                    r0[i], c[i] = r[i], 1.0
                else:
                    r0[i] = int(p[i].argmax())
                    c[i] = float(p[i, r0[i]])
            n_un = math.floor(block * (1 - s))
            order = sorted(span, key=lambda i: (c[i], i))  # the least confident first
            for i in span:
                r[i] = None if i in order[:block - n_un] else r0[i]
    return torch.tensor(r)


@pytest.mark.parametrize("length,steps,block", [(12, 4, None), (12, 6, 4), (10, 4, None), (12, 4, 6), (9, 9, 3)])
def test_greedy_low_confidence_equals_llada_algorithm5(length, steps, block):
    backend = _mntp()
    for prompt in PROMPTS:
        reference = _llada_algorithm5(backend, prompt, length, steps, block)
        config = SamplerConfig(steps=steps, block_length=block, schedule="linear", temperature=0.0)
        assert torch.equal(sample(backend, prompt, length, config).tokens[0], reference)
        if (block or length) % (steps // (length // (block or length))) == 0:  # LLaDA's code schedule agrees then
            assert torch.equal(sample(backend, prompt, length, replace(config, schedule="uniform")).tokens[0], reference)


def test_mask_predict_differs_from_llada_because_it_remasks_committed_tokens():
    """A committed token keeps its old score and can lose to a newer, more confident one: mask-predict re-masks it,
    LLaDA (the same switches otherwise) never does."""
    backend = _mntp()
    config = mechanism.mask_predict_config(4, ltd=False, temperature=1.0)
    remasked = 0
    for seed in range(10):
        ours = sample(backend, PROMPTS, 12, config, seed=seed)
        remasked += sum(int(step.remasked.sum()) for step in ours.trace)
        llada = sample(backend, PROMPTS, 12, replace(config, remask_committed=False), seed=seed)
        assert sum(int(step.remasked.sum()) for step in llada.trace) == 0
    assert remasked > 0  # committed tokens went back under the mask


# --------------------------------------------------------------------------- the cache and padding

@pytest.mark.parametrize("backend_name", list(BACKENDS))
@pytest.mark.parametrize("temperature,threshold", [(0.0, None), (1.0, None), (0.0, 0.2), (1.0, 0.3)])
def test_block_causal_cache_equals_recomputing_the_whole_sequence(backend_name, temperature, threshold):
    backend = BACKENDS[backend_name]()
    config = SamplerConfig(steps=6, block_length=4, attention="block-causal", temperature=temperature, threshold=threshold)
    cached = sample(backend, PROMPTS, 12, config, seed=4)
    fresh = sample(backend, PROMPTS, 12, replace(config, cache=False), seed=4)
    assert torch.equal(cached.tokens, fresh.tokens) and cached.forward_passes == fresh.forward_passes
    for a, b in zip(cached.trace, fresh.trace):
        torch.testing.assert_close(a.scores, b.scores, equal_nan=True, rtol=1e-5, atol=1e-6)
    full = SamplerConfig(steps=6, block_length=4, temperature=temperature, threshold=threshold)
    assert torch.equal(sample(backend, PROMPTS, 12, full, seed=4).tokens,
                       sample(backend, PROMPTS, 12, replace(full, cache=False), seed=4).tokens)


@pytest.mark.parametrize("backend_name", list(BACKENDS))
def test_block_causal_steps_run_only_the_current_block_against_the_cache(backend_name):
    """BD3-LM §3 / Fast-dLLM's block cache: after the prompt (computed once), each step runs the current block only,
    and at a block's first step the finished block before it once more, its keys and values then joining the cache;
    no block is computed again after that. Semi-AR blocks under full attention run all N targets at every step."""
    backend = BACKENDS[backend_name]()
    widths = []
    hook = backend.body().register_forward_pre_hook(
        lambda module, args, kwargs: widths.append((args[0] if args else kwargs["input_ids"]).shape[1]),
        with_kwargs=True)
    try:
        config = SamplerConfig(steps=6, block_length=4, attention="block-causal", temperature=0.0)
        result = sample(backend, PROMPTS, 12, config, seed=4)
        block_causal, widths[:] = list(widths), []
        sample(backend, PROMPTS, 12, replace(config, attention="full"), seed=4)
        full = list(widths)
    finally:
        hook.remove()
    prompt = max(len(prompt) for prompt in PROMPTS)
    assert result.forward_passes == 6
    assert block_causal == [prompt, 4, 4, 8, 4, 8, 4]  # 3 blocks of 2 steps; the prompt once, the cache grown twice
    assert full == [prompt] + [12] * 6


@pytest.mark.parametrize("attention", ["full", "block-causal"])
def test_left_padding_gives_each_row_the_result_it_gets_alone(attention):
    backend = _mntp()
    config = SamplerConfig(steps=6, block_length=4, attention=attention, temperature=0.0)
    together = sample(backend, PROMPTS, 12, config).tokens
    for row, prompt in enumerate(PROMPTS):
        assert torch.equal(sample(backend, prompt, 12, config).tokens[0], together[row])


# --------------------------------------------------------------------------- banned tokens

@pytest.mark.parametrize("config", [SamplerConfig(steps=4, temperature=1.0, top_p=0.9),
                                    SamplerConfig(steps=4, temperature=0.0, block_length=4, attention="block-causal"),
                                    mechanism.mask_predict_config(4)], ids=["llada", "block-causal greedy", "mask-predict"])
def test_no_underscore_only_token_is_ever_proposed_while_real_text_stays(config, tiny_smollm2):
    backend = tiny_smollm2
    tokenizer, vocabulary = backend.tokenizer, backend.tokenizer.get_vocab()
    underscores = underscore_only_ids(tokenizer)
    assert len(underscores) == 16  # "_" and its 15 look-alikes in SmolLM2's vocabulary
    newline, the = tokenizer("\n", add_special_tokens=False).input_ids[0], vocabulary["Ġthe"]
    favoured = torch.full((len(vocabulary),), -20.0)
    favoured[underscores] = 60.0
    favoured[vocabulary["__"]] = 70.0
    favoured[[newline, the, vocabulary["._"]]] = torch.tensor([40.0, 39.5, 39.0])
    backend.head = lambda hidden: favoured.to(hidden.device).expand(hidden.shape[0], -1).clone()
    prompts = [backend.encode("It was a bright cold day"), backend.encode("She said")]
    result = sample(backend, prompts, 8, config, seed=0)
    proposed = torch.cat([step.tokens[~step.scores.isnan()] for step in result.trace])
    assert proposed.numel() and not torch.isin(proposed, torch.tensor(underscores)).any()
    assert newline in result.tokens.flatten().tolist()  # newlines are real text
    allowed = favoured.clone()
    allowed[backend.banned_ids] = float("-inf")
    first = result.trace[0]
    temperature = first.temperature if config.confidence == "tempered" else 1.0
    expected = torch.softmax(allowed / temperature, -1)[first.tokens]  # banned before the softmax: renormalised
    proposed_first = ~first.scores.isnan()
    torch.testing.assert_close(first.scores[proposed_first], expected[proposed_first], rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- bad settings

@pytest.mark.parametrize("changes,name", [({"steps": 0}, "steps"), ({"remasking": "lowest"}, "remasking"),
                                          ({"schedule": "cosine"}, "schedule"), ({"threshold": -0.1}, "threshold"),
                                          ({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"),
                                          ({"attention": "block-causal"}, "block-causal"),
                                          ({"remask_committed": True, "block_length": 4}, "remask_committed"),
                                          ({"ltd_beta": 1.8, "threshold": 0.9}, "ltd_beta"),
                                          ({"confidence": "tempered", "temperature": 0.0}, "tempered")])
def test_bad_settings_name_the_argument(changes, name):
    with pytest.raises(ValueError, match=name):
        SamplerConfig(**changes)


def test_layouts_that_do_not_fit_are_refused_by_name():
    backend = _mntp()
    with pytest.raises(ValueError, match="length=10 is not a multiple of block_length=4"):
        sample(backend, PROMPTS, 10, SamplerConfig(steps=4, block_length=4))
    with pytest.raises(ValueError, match="steps=5 is not a multiple of the 3 blocks"):
        sample(backend, PROMPTS, 12, SamplerConfig(steps=5, block_length=4))
    with pytest.raises(ValueError, match="at most one step per token"):
        sample(backend, PROMPTS, 4, SamplerConfig(steps=8))


# --------------------------------------------------------------------------- the objective

def test_diffusion_batch_masks_one_ratio_per_row_never_specials_or_the_first_token():
    ids = torch.randint(5, VOCAB, (8, 400), generator=torch.Generator().manual_seed(0))
    ids[:, 50] = 2  # a special token inside each row
    batch = mechanism.diffusion_batch(ids, torch.ones_like(ids), mask_id=MASK_ID, special_ids=[2],
                                      generator=torch.Generator().manual_seed(1))
    masked = batch["input_ids"] == MASK_ID
    assert not masked[:, 0].any() and not masked[:, 50].any()
    t = (batch["ratio"] - mechanism.TIME_EPSILON) / (1 - mechanism.TIME_EPSILON)
    assert sorted((t * 8).floor().long().tolist()) == list(range(8))  # antithetic: one t in each stratum
    share = masked.sum(1).float() / 398
    assert ((share - batch["ratio"]).abs() <= 4 * (batch["ratio"] * (1 - batch["ratio"]) / 398).sqrt() + 1e-3).all()
    labels = batch["labels"]  # MNTP: output l predicts token l + 1
    assert torch.equal(labels[:, :-1] != objectives.IGNORE_INDEX, masked[:, 1:])
    assert torch.equal(labels[:, :-1][masked[:, 1:]], ids[:, 1:][masked[:, 1:]])
    assert int(batch["tokens"]) == 8 * 398


def test_diffusion_loss_is_llada_eq3_with_the_shift():
    torch.manual_seed(0)
    model = LlamaForCausalLM(models.tiny_random_config(VOCAB, num_layers=2, pad_token_id=PAD_ID)).eval()
    ids = torch.randint(5, VOCAB, (4, 16), generator=torch.Generator().manual_seed(0))
    batch = mechanism.diffusion_batch(ids, torch.ones_like(ids), mask_id=MASK_ID, special_ids=[],
                                      generator=torch.Generator().manual_seed(3))
    loss = mechanism.diffusion_loss(model, batch)
    masked = batch["input_ids"] == MASK_ID
    assert masked[:, 1:].any() and not masked[:, 0].any()  # the first token is never masked
    # the shift (notebook 02's MNTP): output l is labelled with token l + 1 exactly where token l + 1 is masked
    assert torch.equal(batch["labels"][:, :-1] != objectives.IGNORE_INDEX, masked[:, 1:])
    assert torch.equal(batch["labels"][:, :-1][masked[:, 1:]], ids[:, 1:][masked[:, 1:]])
    assert (batch["labels"][:, -1] == objectives.IGNORE_INDEX).all()
    from helpers import attention

    logits = attention.forward_with_mask(model, batch["input_ids"], M.bidirectional).logits.float()
    literal = 0.0
    for row in range(4):
        for position in range(15):
            if batch["labels"][row, position] != objectives.IGNORE_INDEX:  # output l predicts token l + 1
                literal += -torch.log_softmax(logits[row, position], -1)[batch["labels"][row, position]] / batch["ratio"][row]
    torch.testing.assert_close(loss["loss"], literal / (4 * 15), rtol=1e-5, atol=1e-6)
    assert loss["count"] == int((batch["labels"] != objectives.IGNORE_INDEX).sum())


# --------------------------------------------------------------------------- the bound

class _ContextFree(MaskedLM):
    """A masked LM whose prediction ignores the context: the same distribution at every position."""

    offset = 1

    def __init__(self, logits: torch.Tensor):
        super().__init__(None, None, MASK_ID, pad_id=PAD_ID)
        self.logits = logits

    @property
    def device(self):
        return torch.device("cpu")

    def hidden_states(self, input_ids, padding_mask, *, mask=None, layer_masks=None):
        return torch.zeros(*input_ids.shape, 1)

    def logits_at(self, hidden, rows, cols):
        return self.logits.expand(len(rows), -1)


def test_the_bound_is_unbiased_where_it_must_be_exact():
    """For a model that ignores the context, Eq. 6's estimator has the exact NLL as its mean (every l)."""
    logits = torch.randn(VOCAB, generator=torch.Generator().manual_seed(0))
    backend = _ContextFree(logits)
    blocks = torch.randint(2, VOCAB, (3, 24), generator=torch.Generator().manual_seed(1))
    exact = -torch.log_softmax(logits, -1)[blocks[:, 1:]].mean(1)
    bound = mechanism.diffusion_bound(backend, blocks, samples=400, seed=0).per_token()
    torch.testing.assert_close(bound, exact, rtol=0.02, atol=0.0)
    samples = mechanism.diffusion_bound(backend, blocks, samples=8, seed=0)
    assert ((samples.masked >= 1) & (samples.masked <= 23)).all() and samples.tokens.tolist() == [23.0] * 3


def test_at_block_size_one_the_bound_is_the_causal_nll_exactly():
    """BD3-LM's L' = 1: mask token l alone, predict it from output l - 1 under block-causal blocks of one token."""
    backend = _mntp()
    blocks = torch.randint(2, VOCAB, (2, 10), generator=torch.Generator().manual_seed(0))
    literal = torch.zeros(2)
    for position in range(1, 10):
        ids = blocks.clone()
        ids[:, position] = MASK_ID
        rows, cols = torch.arange(2), torch.full((2,), position)
        logits = backend.predict(ids, torch.ones_like(ids), rows, cols, mask=M.block_causal(0, 1)).float()
        literal += torch.nn.functional.cross_entropy(logits, blocks[:, position], reduction="none")
    torch.testing.assert_close(mechanism.causal_nll(backend, blocks), literal / 9, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="offset 0"):
        mechanism.causal_nll(_bert(), blocks)
