"""Notebook 07's judges against the human continuations: MAUVE (Pillutla et al. 2021, §3) on planted feature sets
where the answer is known and against the authors' package on the same histograms, and the bound a masked model
gives a continuation given its prompt."""
import numpy as np
import pytest
import torch

from helpers.papers.diffusion import judge, mechanism

HUMAN = "human"


def _mixture(rng, centres, weights, n, spread=0.05):
    """``n`` feature vectors drawn from Gaussians around ``centres`` with mixture ``weights``."""
    which = rng.choice(len(centres), size=n, p=np.asarray(weights) / np.sum(weights))
    return centres[which] + rng.normal(0, spread, size=(n, centres.shape[1]))


def _centres(rng, count=8, dimensions=16):
    return rng.normal(0, 1, size=(count, dimensions))


def test_mauve_equals_the_authors_package_on_the_same_histograms():
    cm = pytest.importorskip("mauve.compute_mauve", reason="mauve-text (the authors' package) is not installed")
    rng = np.random.default_rng(0)
    for _ in range(20):
        buckets = int(rng.integers(2, 12))
        p, q = rng.dirichlet(np.ones(buckets)), rng.dirichlet(np.ones(buckets))
        p[rng.random(buckets) < 0.2] = 0  # empty buckets: KL is infinite at the extremes
        p = p / p.sum() if p.sum() else q
        weights = np.linspace(1e-6, 1 - 1e-6, judge.MIXTURE_POINTS)
        x, y = cm.get_divergence_curve_for_multinomials(p, q, weights, judge.MAUVE_SCALING).T
        first, second = np.argsort(x), np.argsort(y)
        theirs = 0.5 * (cm.compute_area_under_curve(x[first], y[first]) + cm.compute_area_under_curve(y[second], x[second]))
        assert judge.mauve_of_histograms(p, q) == pytest.approx(theirs, abs=1e-12)
        assert np.allclose(judge.divergence_curve(p, q), np.stack([x, y], 1))


def test_identical_sets_score_one_and_disjoint_sets_near_zero():
    assert judge.mauve_of_histograms(np.array([3.0, 1.0, 2.0]), np.array([3.0, 1.0, 2.0])) == pytest.approx(1.0, abs=1e-6)
    # exact ties on the curve (mauve-text's unstable sort gives 0.75 here)
    assert judge.mauve_of_histograms(np.array([1.0, 1.0]), np.array([1.0, 1.0])) == pytest.approx(1.0)
    assert judge.mauve_of_histograms(np.array([1.0, 0.0]), np.array([0.0, 1.0])) < 0.05
    rng = np.random.default_rng(1)
    centres = _centres(rng)
    human = _mixture(rng, centres, np.ones(8), 80)
    same = judge.quantize({"copy": human, HUMAN: human.copy()}, seed=0)
    assert judge.MauveJudge(*same, HUMAN).score("copy") == pytest.approx(1.0, abs=1e-6)
    far = _mixture(rng, centres + 50.0, np.ones(8), 80)  # other clusters entirely
    disjoint = judge.MauveJudge(*judge.quantize({"far": far, HUMAN: human}, seed=0), HUMAN)
    assert disjoint.score("far") < 0.05


def test_mauve_ranks_a_repetitive_sampler_below_a_human_like_one():
    """The planted effect the sampler rows must detect: a sampler that collapses onto two of the human text's eight
    modes (it repeats itself) against one that covers them like the human text; on the same prompts, quantised
    together, the paired bootstrap's interval of the difference lies wholly below 0."""
    rng = np.random.default_rng(2)
    centres = _centres(rng)
    n = 60
    features = {HUMAN: _mixture(rng, centres, np.ones(8), n), "human-like": _mixture(rng, centres, np.ones(8), n),
                "repetitive": _mixture(rng, centres, [10, 10, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2], n)}
    labels, buckets = judge.quantize(features, seed=0)
    assert buckets == judge.default_buckets(n) == 6
    scored = judge.MauveJudge(labels, buckets, HUMAN, resamples=300)
    assert scored.score("repetitive") < scored.score("human-like")
    value, low, high = scored.difference("repetitive", "human-like")
    assert value < 0 and high < 0
    swapped = scored.difference("human-like", "repetitive")
    assert swapped[0] == pytest.approx(-value) and swapped[1] > 0  # the sign follows the order of the rows


def test_two_samplers_of_one_distribution_differ_within_the_margin():
    """The "makes little difference" rows' planted case: two samplers drawn from the human text's own distribution
    on enough prompts differ by less than the declared MAUVE margin, wholly inside ±margin."""
    from helpers.papers.diffusion import settings

    margin = settings.SETTINGS["cpu"].mauve_margin
    rng = np.random.default_rng(3)
    centres = _centres(rng, count=4)
    n = 400
    features = {name: _mixture(rng, centres, np.ones(4), n) for name in (HUMAN, "first", "second")}
    scored = judge.MauveJudge(*judge.quantize(features, buckets=4, seed=0), HUMAN, resamples=300)
    value, low, high = scored.difference("first", "second")
    assert -margin < low and high < margin


def test_the_judge_refuses_rows_of_other_prompts_and_a_missing_reference():
    with pytest.raises(ValueError, match="reference"):
        judge.MauveJudge({"a": np.zeros(3, dtype=int)}, 2, HUMAN)
    with pytest.raises(ValueError, match="same prompts"):
        judge.MauveJudge({"a": np.zeros(3, dtype=int), HUMAN: np.zeros(4, dtype=int)}, 2, HUMAN)
    with pytest.raises(ValueError, match="same buckets"):
        judge.mauve_of_histograms(np.ones(2), np.ones(3))


def test_draws_are_nested_in_their_prompts():
    """A row sampled D times per prompt: its histogram counts every draw of the chosen prompts, copies of one draw
    score what that draw scores (the bootstrap resamples prompts, each carrying its draws, never a draw as a prompt),
    and where each draw lands on the human bucket or off it by chance, more draws narrow the paired interval."""
    n = 60
    human = np.arange(n) % 4
    one = np.where(np.arange(n) % 3 == 0, 0, human)
    single = judge.MauveJudge({HUMAN: human, "row": one, "same": human}, 4, HUMAN, resamples=300)
    copies = judge.MauveJudge({HUMAN: human, "row": np.repeat(one[:, None], 5, axis=1), "same": human}, 4, HUMAN,
                              resamples=300)
    assert copies.draws == 5 and single.draws == 1 and copies.n == single.n == n
    assert copies.histogram("row", [0, 0]).sum() == 10  # two picks of prompt 0, five draws each
    assert copies.score("row") == pytest.approx(single.score("row"))
    assert copies.difference("row", "same") == pytest.approx(single.difference("row", "same"))

    rng = np.random.default_rng(0)
    width = {}
    for draws in (1, 8):
        noisy = np.where(rng.random((n, draws)) < 0.5, 0, human[:, None])  # each draw a coin flip off the human bucket
        value, low, high = judge.MauveJudge({HUMAN: human, "noisy": noisy, "same": human}, 4, HUMAN,
                                            resamples=300).difference("noisy", "same")
        width[draws] = high - low
    assert width[8] < 0.85 * width[1]
    with pytest.raises(ValueError, match="prompts, draws"):
        judge.MauveJudge({HUMAN: human, "row": np.zeros((n, 2, 2), dtype=int)}, 4, HUMAN)


def test_the_judge_embeds_every_draw_and_the_human_text_once(tiny_smollm2):
    model, tokenizer = tiny_smollm2.model, tiny_smollm2.tokenizer
    prompts = ["It was a truth universally acknowledged.", "Emma Woodhouse, handsome, clever, and rich.", "The rain."]
    human = ["She walked to the window.", "He said nothing at all.", "It fell all day."]
    draws = [{"row": ["a b c", "d e f", "g h i"], HUMAN: human}, {"row": ["j k l", "m n o", "p q r"], HUMAN: human}]
    found = judge.mauve_judge(draws, prompts, model, tokenizer, reference=HUMAN, buckets=2)
    assert found.labels["row"].shape == (3, 2) and found.labels[HUMAN].shape == (3, 1) and found.draws == 2
    one = judge.mauve_judge(draws[0], prompts, model, tokenizer, reference=HUMAN, buckets=2)
    assert one.labels["row"].shape == (3, 1) and one.draws == 1
    with pytest.raises(ValueError, match="same rows"):
        judge.mauve_judge([draws[0], {HUMAN: human}], prompts, model, tokenizer, reference=HUMAN)


def test_continuation_features_read_the_continuation_in_its_prompts_context(tiny_smollm2):
    model, tokenizer = tiny_smollm2.model, tiny_smollm2.tokenizer
    prompts = ["It was a truth universally acknowledged.", "Emma Woodhouse, handsome, clever, and rich."]
    texts = ["She walked to the window.", "She walked to the window."]
    features = judge.continuation_features(model, tokenizer, prompts, texts)
    assert features.shape == (2, model.config.hidden_size)
    assert not np.allclose(features[0], features[1])  # the same words after another prompt
    again = judge.continuation_features(model, tokenizer, prompts[:1], texts[:1])
    assert np.allclose(again[0], features[0], atol=1e-5)
    found = judge.mauve_judge({"copy": texts, HUMAN: texts}, prompts, model, tokenizer, reference=HUMAN)
    assert found.score("copy") == pytest.approx(1.0, abs=1e-6)


def test_the_continuation_bound_is_exact_for_one_token(tiny_smollm2):
    """With one continuation token, l = L = 1 on every draw: the bound is that token's cross-entropy given the
    prompt with the token masked, one forward pass."""
    backend = tiny_smollm2
    prompt = torch.tensor(backend.tokenizer("It was a truth", add_special_tokens=False).input_ids)
    token = torch.tensor([int(prompt[1])])
    bound = mechanism.continuation_bound(backend, prompt, token, samples=3, seed=0)
    ids = torch.cat([prompt, torch.tensor([backend.mask_id])])[None]
    from helpers import masks as M

    hidden = backend.hidden_states(ids, torch.ones_like(ids), mask=M.bidirectional)
    logits = backend.logits_at(hidden, torch.tensor([0]), torch.tensor([prompt.numel()])).float()
    assert bound == pytest.approx(float(torch.nn.functional.cross_entropy(logits, token)), rel=1e-5)


def test_the_continuation_bound_prefers_the_model_that_knows_the_text(tiny_smollm2):
    """A planted model comparison: a model whose head is biased towards the continuation's tokens gives that human
    text a lower bound than the untouched model, on the same masks."""
    import copy

    backend = tiny_smollm2
    prompt = torch.tensor(backend.tokenizer("It was a truth universally", add_special_tokens=False).input_ids)
    continuation = torch.tensor(backend.tokenizer(" acknowledged, that a single man", add_special_tokens=False).input_ids)
    knowing = copy.deepcopy(backend)
    head = knowing.model.get_output_embeddings()
    if getattr(head, "bias", None) is None:
        head.bias = torch.nn.Parameter(torch.zeros(head.weight.shape[0]))
    with torch.no_grad():
        head.bias[continuation] += 5.0
    plain = mechanism.continuation_bound(backend, prompt, continuation, samples=4, seed=0)
    knows = mechanism.continuation_bound(knowing, prompt, continuation, samples=4, seed=0)
    assert knows < plain - 1.0
    uniform = mechanism.continuation_bound(backend, prompt, continuation, samples=4, seed=0, corruption="uniform",
                                           vocab_size=mechanism.noise_vocabulary(backend))
    assert np.isfinite(uniform) and uniform != plain  # random tokens, not the mask, at the same positions
