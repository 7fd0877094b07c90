"""Mask-predict with LTD and DSWA (seed 002 §3.1, §4.1-4.3, Eq. 6-8; App. B), the nucleus sampler and the AR baseline.

A deterministic stand-in masked LM checks the schedule exactly (re-mask counts, LTD temperatures,
top-p); tiny random BERT, RoBERTa and Llama models check that both backends share one interface
and that DSWA confines what each prediction can see.
"""
from __future__ import annotations

import ast
import inspect
import math
from dataclasses import replace

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, DynamicCache, LlamaForCausalLM, RobertaConfig, RobertaForMaskedLM

from helpers import attention
from helpers.masked_lm import EncoderMLM, MaskedLM, MNTPDecoder, underscore_only_ids
from helpers import masks as M
from helpers import models, profiles
from helpers.papers.openltg import experiment, mechanism, mechanism_autoregressive, settings

VOCAB = 40
MASK_ID = 0
PAD_ID = 1


class ToyMaskedLM(MaskedLM):
    """A deterministic stand-in: the logits of a target depend only on its column; every call is recorded."""

    def __init__(self, logits_for_column=None, num_layers: int = 3, max_positions: int = 512):
        super().__init__(None, None, MASK_ID, pad_id=PAD_ID)
        self._layers, self._max = num_layers, max_positions
        self.logits_for_column = logits_for_column or self._seeded_logits
        self.calls: list[dict] = []

    @staticmethod
    def _seeded_logits(column: int) -> torch.Tensor:
        return 3.0 * torch.randn(VOCAB, generator=torch.Generator().manual_seed(column))

    @property
    def num_layers(self) -> int:
        return self._layers

    @property
    def max_positions(self) -> int:
        return self._max

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def predict(self, input_ids, padding_mask, rows, cols, *, mask=None, layer_masks=None):
        self.calls.append({"inputs": input_ids.clone(), "rows": rows.clone(), "cols": cols.clone(), "mask": mask,
                           "layer_masks": layer_masks})
        return torch.stack([self.logits_for_column(int(c)) for c in cols])

    # the cached-prompt path: the stand-in keeps the prompt ids and predicts from the whole sequence
    def render(self, padding_mask, *, mask=None, layer_masks=None):
        return {"mask": mask, "layer_masks": layer_masks}

    def encode_source(self, source_ids, padding_mask, rendered, *, states="same-layer"):
        return source_ids.clone()

    def predict_targets(self, source, target_ids, padding_mask, rows, cols, rendered):
        width = source.shape[1]
        return self.predict(torch.cat([source, target_ids], 1), padding_mask, rows, cols + width, **rendered)


def prompts_of(*lengths: int) -> list[torch.Tensor]:
    return [torch.arange(2, 2 + n) for n in lengths]


# --------------------------------------------------------------------------- the schedule


@pytest.mark.parametrize("length", [1, 5, 10, 17, 64])
@pytest.mark.parametrize("iterations", [1, 2, 3, 4, 8, 10])
def test_remask_count_is_mask_predicts_linear_schedule(length, iterations):
    counts = [mechanism.remask_count(length, t, iterations) for t in range(iterations)]
    assert counts == [math.floor(length * (iterations - (t + 1)) / iterations) for t in range(iterations)]
    assert counts[-1] == 0
    assert all(a >= b for a, b in zip(counts, counts[1:]))


@pytest.mark.parametrize("update_all", [False, True])
def test_each_iteration_remasks_exactly_the_scheduled_number(update_all):
    backend = ToyMaskedLM()
    config = mechanism.DecodeConfig(iterations=4, update_all=update_all)
    decoded = mechanism.mask_predict(backend, prompts_of(3, 5), 10, config)
    assert [it.masked.sum(1).tolist() for it in decoded.trace] == [[10, 10], [7, 7], [5, 5], [2, 2]]
    assert [it.remasked.sum(1).tolist() for it in decoded.trace] == [[7, 7], [5, 5], [2, 2], [0, 0]]
    asked = [len(call["cols"]) for call in backend.calls]
    assert asked == ([20] * 4 if update_all else [20, 14, 10, 4])  # SMART predicts every target, else only masks
    assert not (decoded.tokens == MASK_ID).any()


def test_remasked_tokens_are_the_lowest_confidence_ones():
    decoded = mechanism.mask_predict(ToyMaskedLM(), prompts_of(4, 2, 6), 16, mechanism.DecodeConfig(iterations=5, update_all=False))
    for iteration in decoded.trace[:-1]:
        for row in range(3):
            confidences, chosen = iteration.confidences[row], iteration.remasked[row]
            assert confidences[chosen].max() <= confidences[~chosen].min()


def test_without_smart_only_masked_positions_change_and_inputs_carry_the_masks():
    backend = ToyMaskedLM()
    decoded = mechanism.mask_predict(backend, prompts_of(3), 12, mechanism.DecodeConfig(iterations=4, update_all=False))
    for before, after in zip(decoded.trace, decoded.trace[1:]):
        kept = ~after.masked[0]
        assert torch.equal(after.tokens[0][kept], before.tokens[0][kept])
    for call, iteration in zip(backend.calls, decoded.trace):
        target = call["inputs"][0, -12:]
        assert torch.equal(target == MASK_ID, iteration.masked[0])


def test_ltd_temperatures_follow_eq8():
    config = mechanism.DecodeConfig(iterations=8, beta=1.8)
    decoded = mechanism.mask_predict(ToyMaskedLM(), prompts_of(3), 8, config)
    assert [it.temperature for it in decoded.trace] == pytest.approx([1.8 * (1 - t / 8) for t in range(8)])
    flat = mechanism.mask_predict(ToyMaskedLM(), prompts_of(3), 8, mechanism.DecodeConfig(iterations=8, ltd=False, temperature=1.0))
    assert [it.temperature for it in flat.trace] == [1.0] * 8


def test_every_iteration_samples_at_its_ltd_temperature():
    """Eq. 8 applied, not only computed: the confidence each iteration records for its probe position is the sampled
    token's probability under softmax(logits / T_t) with T_t = β(1 - t/T) (banned tokens at -inf), so the sampler
    drew at that temperature; at temperature 1 the recorded confidences would differ."""
    backend = ToyMaskedLM()
    config = mechanism.DecodeConfig(iterations=6, beta=1.8, update_all=True, probe_position=2)
    decoded = mechanism.mask_predict(backend, prompts_of(4), 5, config, seed=1)
    differs = 0
    for iteration in decoded.trace:
        token = int(iteration.tokens[0, 2])
        logits = iteration.probe_logits[0]
        at_temperature = torch.softmax(logits / iteration.temperature, -1)[token]
        assert iteration.temperature == pytest.approx(1.8 * (1 - iteration.step / 6))
        assert float(iteration.confidences[0, 2]) == pytest.approx(float(at_temperature), rel=1e-5)
        differs += abs(float(torch.softmax(logits, -1)[token]) - float(at_temperature)) > 1e-3
    assert differs >= 4  # the check can tell the temperatures apart on these logits


def test_ltd_flattens_early_and_sharpens_late():
    """§4.2: 'flattened when T > 1, and become sharp when T < 1', from peaked to flat to peaked."""
    logits = ToyMaskedLM._seeded_logits(7)
    temperatures = [mechanism.ltd_temperature(t, 8, 1.8) for t in range(8)]
    entropies = [experiment.entropy(logits, temperature) for temperature in temperatures]
    assert entropies[0] > experiment.entropy(logits, 1.0) > entropies[-1]
    assert all(a > b for a, b in zip(entropies, entropies[1:]))


def test_probe_records_the_raw_logits_at_every_iteration():
    backend = ToyMaskedLM()
    decoded = mechanism.mask_predict(backend, prompts_of(4), 9, mechanism.DecodeConfig(iterations=3, update_all=False, probe_position=5))
    expected = backend.logits_for_column(4 + 5)
    expected[MASK_ID] = -float("inf")  # what sampling sees: banned tokens removed
    for iteration in decoded.trace:
        assert torch.equal(iteration.probe_logits[0], expected)
    stats = experiment.ltd_entropies(decoded)
    assert [s["temperature"] for s in stats] == pytest.approx([1.8, 1.2, 0.6])


# --------------------------------------------------------------------------- top-p and banned tokens


def test_top_p_filter_keeps_the_smallest_nucleus_and_renormalises():
    probs = torch.tensor([[0.05, 0.5, 0.15, 0.3]])
    assert torch.allclose(mechanism.top_p_filter(probs, 0.9), torch.tensor([[0.0, 0.5, 0.15, 0.3]]) / 0.95)
    assert torch.allclose(mechanism.top_p_filter(probs, 0.4), torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
    assert torch.allclose(mechanism.top_p_filter(probs, 0.7), torch.tensor([[0.0, 0.5, 0.0, 0.3]]) / 0.8)
    assert torch.allclose(mechanism.top_p_filter(probs, 1.0), probs)


def _fixed_distribution(column: int) -> torch.Tensor:
    logits = torch.full((VOCAB,), -30.0)
    logits[[5, 6, 7, 8]] = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    logits[MASK_ID] = 10.0  # the mask token is the model's favourite; it must never be sampled
    return logits


def test_sampling_stays_inside_the_top_p_nucleus_with_its_renormalised_frequencies():
    backend = ToyMaskedLM(_fixed_distribution, max_positions=8192)
    config = mechanism.DecodeConfig(iterations=1, ltd=False, temperature=1.0, top_p=0.9)
    tokens = mechanism.mask_predict(backend, prompts_of(2), 4000, config, seed=3).tokens.flatten()
    assert set(tokens.tolist()) <= {5, 6, 7}  # 8 lies outside the 0.9 nucleus; MASK_ID is banned
    frequencies = torch.bincount(tokens, minlength=VOCAB)[[5, 6, 7]].float() / tokens.numel()
    assert torch.allclose(frequencies, torch.tensor([0.5, 0.3, 0.15]) / 0.95, atol=0.03)


@pytest.mark.parametrize("rounds", [mechanism.REJECTION_ROUNDS, 0])  # rejection sampling, and the sorting fallback
def test_nucleus_sampler_draws_from_the_renormalised_nucleus(rounds, monkeypatch):
    monkeypatch.setattr(mechanism, "REJECTION_ROUNDS", rounds)
    logits = 2.0 * torch.randn(1, 30, generator=torch.Generator().manual_seed(1))
    expected = mechanism.top_p_filter(torch.softmax(logits / 0.8, -1), 0.7)[0]
    tokens, confidences = mechanism.sample_tokens(logits.expand(40_000, -1), 0.8, 0.7, torch.Generator().manual_seed(2))
    frequencies = torch.bincount(tokens, minlength=30).float() / tokens.numel()
    assert frequencies[expected == 0].sum() == 0  # never outside the nucleus
    assert torch.allclose(frequencies, expected, atol=0.01)
    assert torch.allclose(confidences, torch.softmax(logits / 0.8, -1)[0][tokens])  # tempered, not renormalised


def test_top_p_below_the_top_token_mass_is_greedy():
    backend = ToyMaskedLM(_fixed_distribution)
    config = mechanism.DecodeConfig(iterations=1, ltd=False, top_p=0.3)
    assert set(mechanism.mask_predict(backend, prompts_of(2), 200, config).tokens.flatten().tolist()) == {5}


# --------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("changes, name", [({"iterations": 0}, "iterations"), ({"iterations": -2}, "iterations"),
                                           ({"beta": 0.0}, "beta"), ({"beta": -1.5}, "beta"),
                                           ({"top_p": 0.0}, "top_p"), ({"top_p": 1.2}, "top_p"),
                                           ({"fixed_window": 0}, "fixed_window"), ({"alpha_min": 1.5}, "alpha_min")])
def test_bad_decode_settings_name_the_argument(changes, name):
    with pytest.raises(ValueError, match=name):
        mechanism.DecodeConfig(**changes)


@pytest.mark.parametrize("length", [0, -4])
def test_a_length_below_one_is_rejected(length):
    with pytest.raises(ValueError, match="length"):
        mechanism.mask_predict(ToyMaskedLM(), prompts_of(3), length)


def test_prompt_plus_length_beyond_the_positions_is_rejected():
    backend = ToyMaskedLM(max_positions=32)
    mechanism.mask_predict(backend, prompts_of(12), 20, mechanism.DecodeConfig(iterations=1))  # exactly 32 fits
    with pytest.raises(ValueError, match="exceeds the model's 32 positions"):
        mechanism.mask_predict(backend, prompts_of(12), 21)
    with pytest.raises(ValueError, match="prompts\\[1\\] is empty"):
        mechanism.mask_predict(backend, [torch.tensor([3]), torch.tensor([], dtype=torch.long)], 4)


def test_schedule_helpers_reject_bad_values():
    with pytest.raises(ValueError, match="iterations"):
        mechanism.ltd_temperature(0, 0, 1.0)
    with pytest.raises(ValueError, match="beta"):
        mechanism.ltd_temperature(0, 4, 0.0)
    with pytest.raises(ValueError, match="step"):
        mechanism.remask_count(10, 4, 4)
    with pytest.raises(ValueError, match="top_p"):
        mechanism.top_p_filter(torch.ones(1, 3) / 3, 0.0)


# --------------------------------------------------------------------------- masks


@pytest.mark.parametrize("window", [1, 2, 3, 5, None])
@pytest.mark.parametrize("source", [1, 2, 4])
def test_generation_mask_against_a_double_loop(source, window):
    """Prompt rows see the prompt only (a closed block); targets see the prompt and the targets in the window."""
    length = source + 9
    half = (window or 10_000) // 2
    expected = torch.zeros(length, length, dtype=torch.bool)
    for q in range(length):
        for k in range(length):
            expected[q, k] = k < source or (q >= source and k >= source and abs(q - k) <= half)
    assert torch.equal(M.dense(mechanism.generation_mask(source, window), length), expected)


def test_dswa_gives_each_layer_its_eq7_window_and_no_dswa_one_mask():
    backend = ToyMaskedLM(num_layers=6)
    config = mechanism.DecodeConfig(iterations=1, fixed_window=16)
    mechanism.mask_predict(backend, prompts_of(3, 4), 20, config)
    layer_masks = backend.calls[-1]["layer_masks"]
    schedule = M.dswa_window_schedule(6, 16)
    assert len(layer_masks) == 6 and backend.calls[-1]["mask"] is None
    for layer_mask, window in zip(layer_masks, schedule):
        for row_mask, source in zip(layer_mask, (3, 4)):
            assert torch.equal(M.dense(row_mask, 24), M.dense(mechanism.generation_mask(source, window), 24))
    mechanism.mask_predict(backend, prompts_of(3), 5, mechanism.DecodeConfig(iterations=1, dswa=False))
    assert backend.calls[-1]["layer_masks"] is None and len(backend.calls[-1]["mask"]) == 1


# --------------------------------------------------------------------------- real (tiny random) backends


def _encoder(kind: str) -> EncoderMLM:
    torch.manual_seed(0)
    config_class, model_class = (BertConfig, BertForMaskedLM) if kind == "bert" else (RobertaConfig, RobertaForMaskedLM)
    config = config_class(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=80, pad_token_id=PAD_ID)
    return EncoderMLM(model_class(config).eval(), None, mask_id=MASK_ID, pad_id=PAD_ID)


def _mntp() -> MNTPDecoder:
    torch.manual_seed(0)
    config = models.tiny_random_config(VOCAB, num_layers=2, pad_token_id=PAD_ID)
    return MNTPDecoder(LlamaForCausalLM(config).eval(), None, MASK_ID, pad_id=PAD_ID)


BACKENDS = {"bert": lambda: _encoder("bert"), "roberta": lambda: _encoder("roberta"), "mntp": _mntp}


@pytest.mark.parametrize("name", list(BACKENDS))
def test_both_backends_decode_through_one_interface(name):
    backend = BACKENDS[name]()
    prompts = [torch.tensor([5, 9, 12, 7]), torch.tensor([8, 3])]
    for config in (mechanism.DecodeConfig(iterations=3, fixed_window=8), mechanism.DecodeConfig(iterations=3, dswa=False, update_all=False)):
        decoded = mechanism.mask_predict(backend, prompts, 9, config, seed=1)
        assert [it.masked.sum(1).tolist() for it in decoded.trace] == [[9, 9], [6, 6], [3, 3]]
        assert decoded.tokens.shape == (2, 9)
        assert not torch.isin(decoded.tokens, torch.tensor(backend.banned_ids)).any()


@pytest.mark.parametrize("name", list(BACKENDS))
@torch.no_grad()
def test_dswa_confines_a_prediction_to_its_window_while_the_prompt_stays_visible(name):
    """§4.1: a target sees every prompt token and only the targets within its window (Eq. 7 per layer)."""
    backend = BACKENDS[name]()
    source, length = 4, 40
    ids = torch.cat([torch.tensor([5, 9, 12, 7]), torch.randint(2, VOCAB, (length,), generator=torch.Generator().manual_seed(0))])[None]
    padding = torch.ones_like(ids)
    config = mechanism.DecodeConfig(fixed_window=8)  # 2 layers: windows 3 and 1, so a change reaches at most 1 position
    routing = mechanism.attention_masks(backend, [source], config)
    column = torch.tensor([source + 5])
    before = backend.predict(ids, padding, torch.tensor([0]), column, **routing)

    def moved(position: int, token: int) -> float:
        changed = ids.clone()
        changed[0, position] = token
        return float((backend.predict(changed, padding, torch.tensor([0]), column, **routing) - before).abs().max())

    assert moved(source + 30, 3) == 0.0  # a far target: outside every window
    assert moved(1, 3) > 0.0  # the prompt
    assert moved(int(column) - backend.offset + 1, 3) > 0.0  # the neighbour inside the first layer's window
    no_dswa = mechanism.attention_masks(backend, [source], mechanism.DecodeConfig(dswa=False))
    far = ids.clone()
    far[0, source + 30] = 3
    full_before = backend.predict(ids, padding, torch.tensor([0]), column, **no_dswa)
    assert float((backend.predict(far, padding, torch.tensor([0]), column, **no_dswa) - full_before).abs().max()) > 0.0


@torch.no_grad()
def test_mntp_backend_predicts_token_l_from_output_l_minus_1():
    backend = _mntp()
    ids = torch.tensor([[5, 9, 12, 7, 0, 0, 0, 0]])
    padding = torch.ones_like(ids)
    mask = mechanism.generation_mask(4, None)
    logits = backend.predict(ids, padding, torch.tensor([0, 0]), torch.tensor([4, 6]), mask=[mask])
    full = attention.forward_with_mask(backend.model, ids, [mask], padding_mask=padding).logits[0]
    assert torch.allclose(logits, full[[3, 5]], atol=1e-5)


@torch.no_grad()
def test_roberta_positions_start_after_the_padding_index():
    backend = _encoder("roberta")
    ids = torch.tensor([[5, 9, 12, 7, 0, 0]])
    own = backend.model(input_ids=ids).logits[0]  # RoBERTa numbers positions from pad_token_id + 1
    ours = backend.predict(ids, torch.ones_like(ids), torch.zeros(6, dtype=torch.long), torch.arange(6), mask=M.bidirectional)
    assert torch.allclose(ours, own, atol=1e-5)
    assert backend.max_positions == 80 - (PAD_ID + 1)


@torch.no_grad()
def test_left_padding_gives_each_row_the_result_it_gets_alone():
    backend = _mntp()
    prompts = [torch.tensor([5, 9, 12, 7]), torch.tensor([8, 3])]
    routing = mechanism.attention_masks(backend, [4, 2], mechanism.DecodeConfig(fixed_window=8))
    ids, padding = mechanism.left_padded(prompts, 6, MASK_ID, PAD_ID)
    cols = torch.arange(4, 10)
    together = backend.predict(ids, padding, torch.ones(6, dtype=torch.long), cols, **routing)
    alone_ids, alone_padding = mechanism.left_padded(prompts[1:], 6, MASK_ID, PAD_ID)
    alone = backend.predict(alone_ids, alone_padding, torch.zeros(6, dtype=torch.long), torch.arange(2, 8),
                            **mechanism.attention_masks(backend, [2], mechanism.DecodeConfig(fixed_window=8)))
    assert torch.allclose(together, alone, atol=1e-4)


# --------------------------------------------------------------------------- AR baseline


def test_kv_cache_generation_matches_recomputing_the_whole_prefix():
    torch.manual_seed(0)
    model = LlamaForCausalLM(models.tiny_random_config(VOCAB, num_layers=2, pad_token_id=PAD_ID)).eval()
    prompts = [torch.tensor([5, 9, 12, 7]), torch.tensor([8, 3])]
    cached = mechanism_autoregressive.autoregressive_generate(model, prompts, 8, temperature=1e-4, top_p=1.0, pad_id=PAD_ID, banned_ids=[MASK_ID])
    ids, padding = mechanism.left_padded(prompts, 0, PAD_ID, PAD_ID)
    with torch.no_grad():
        for step in range(8):
            logits = model(input_ids=ids, attention_mask=padding, position_ids=M.content_positions(padding)).logits[:, -1]
            logits[:, MASK_ID] = -float("inf")
            token = logits.argmax(-1)
            assert torch.equal(token, cached[:, step])
            ids = torch.cat([ids, token[:, None]], 1)
            padding = torch.cat([padding, torch.ones_like(padding[:, :1])], 1)


def test_ar_with_a_kv_cache_runs_the_prompt_once_then_one_token_per_step():
    """Fig. 5's baseline is AR *with a KV cache*: the first forward runs the (left-padded) prompts, every later one
    only the token sampled last, its keys and values joining the cache; nothing before it is computed again."""
    torch.manual_seed(0)
    model = LlamaForCausalLM(models.tiny_random_config(VOCAB, num_layers=2, pad_token_id=PAD_ID)).eval()
    widths = []
    hook = model.model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    try:
        mechanism_autoregressive.autoregressive_generate(model, [torch.tensor([5, 9, 12, 7]), torch.tensor([8, 3])], 6,
                                                         top_p=1.0, pad_id=PAD_ID, banned_ids=[MASK_ID])
    finally:
        hook.remove()
    assert widths == [4] + [1] * 5  # the prompt once, then the 5 tokens before the last, one at a time


# --------------------------------------------------------------------------- App. B


def test_recurrent_segments_condition_each_segment_on_the_ones_before():
    backend = ToyMaskedLM()
    segments = mechanism.recurrent_mask_predict(backend, prompts_of(3), 10, 3, mechanism.DecodeConfig(iterations=2))
    assert mechanism.segment_lengths(10, 3) == [4, 3, 3]
    assert [s.tokens.shape[1] for s in segments] == [4, 3, 3]
    assert [s.trace[0].masked.sum().item() for s in segments] == [4, 3, 3]
    assert torch.equal(segments[1].prompts[0], torch.cat([prompts_of(3)[0], segments[0].tokens[0]]))
    assert mechanism.joined_tokens(segments).shape == (1, 10)
    with pytest.raises(ValueError, match="segments"):
        mechanism.segment_lengths(3, 4)


# --------------------------------------------------------------------------- the update rule (Mask-Predict, OpenLTG code)


@pytest.mark.parametrize("name", ["toy", "mntp"])
def test_by_default_a_kept_token_is_never_rewritten_and_keeps_its_score(name):
    """Masked-only updates: a token that survives re-masking keeps its id and its confidence in every later iteration."""
    backend = ToyMaskedLM() if name == "toy" else _mntp()
    assert mechanism.DecodeConfig().update_all is False and settings.SETTINGS["cpu"].update_all is False
    length, iterations = 24, 6
    decoded = mechanism.mask_predict(backend, [torch.tensor([5, 9, 12, 7]), torch.tensor([8, 3])], length,
                             mechanism.DecodeConfig(iterations=iterations, fixed_window=8), seed=2)
    for step, (before, after) in enumerate(zip(decoded.trace, decoded.trace[1:])):
        kept = ~after.masked  # survived the re-masking after `before`
        assert torch.equal(after.tokens[kept], before.tokens[kept]), f"iteration {step + 1} rewrote a kept token"
        assert torch.equal(after.confidences[kept], before.confidences[kept])
        assert torch.equal(after.masked, before.remasked)
    expected = [[length * (iterations - t - 1) // iterations] * 2 for t in range(iterations)]
    assert [it.remasked.sum(1).tolist() for it in decoded.trace] == expected


def test_smart_rewrites_kept_tokens_and_is_its_own_table6_row():
    decoded = mechanism.mask_predict(ToyMaskedLM(), prompts_of(3), 40, mechanism.DecodeConfig(iterations=4, update_all=True), seed=1)
    rewritten = sum(int((b.tokens[~a.masked] != a.tokens[~a.masked]).sum()) for b, a in zip(decoded.trace, decoded.trace[1:]))
    assert rewritten > 0
    rows = experiment.ablation_configs(mechanism.DecodeConfig())
    assert list(rows) == [*experiment.ABLATIONS, experiment.SMART_ROW]
    assert rows[experiment.SMART_ROW].update_all and not any(rows[name].update_all for name in experiment.ABLATIONS)


# --------------------------------------------------------------------------- the closed source block (§4.1)


@pytest.mark.parametrize("name", list(BACKENDS))
@torch.no_grad()
def test_no_target_reaches_a_prompt_row_and_each_reaches_only_what_the_windows_allow(name):
    """Perturb target 0 and every other target: prompt rows never move, at any layer or in their logits;
    a target's change reaches exactly the positions the per-layer DSWA windows connect, layer by layer."""
    backend = BACKENDS[name]()
    source, length = 4, 24
    ids = torch.cat([torch.tensor([5, 9, 12, 7]), torch.randint(2, VOCAB, (length,), generator=torch.Generator().manual_seed(0))])[None]
    padding = torch.ones_like(ids)
    config = mechanism.DecodeConfig(fixed_window=8)  # 2 layers: windows 3 and 1
    layer_masks = mechanism.attention_masks(backend, [source], config)["layer_masks"]
    all_rows = torch.zeros(source + length, dtype=torch.long), torch.arange(source + length)
    logits = backend.predict(ids, padding, all_rows[0], all_rows[1].clamp(min=backend.offset), layer_masks=layer_masks)
    for target in range(0, length, 2):
        position = source + target
        moved = attention.influence(backend.body(), ids, position, 3 if ids[0, position] != 3 else 4,
                                    layer_masks=layer_masks, padding_mask=padding)
        allowed = attention.predicted_influence(layer_masks=layer_masks, num_layers=backend.num_layers,
                                                padding_mask=padding, position=position)
        assert not allowed[:, :source].any()
        assert (moved[:, :source] == 0).all(), f"target {target} reached a prompt row"
        assert torch.equal(moved > 1e-6, allowed), f"target {target}: reach differs from the windows' reachability"
        changed = ids.clone()
        changed[0, position] = 3 if ids[0, position] != 3 else 4
        after = backend.predict(changed, padding, all_rows[0], all_rows[1].clamp(min=backend.offset), layer_masks=layer_masks)
        prompt_rows = slice(backend.offset, source)  # the outputs computed at prompt positions (MNTP: incl. target 0's)
        assert torch.equal(after[prompt_rows], logits[prompt_rows])


# --------------------------------------------------------------------------- the prompt computed once


@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.parametrize("dswa", [True, False])
def test_decoding_with_the_cached_prompt_equals_recomputing_it(name, dswa):
    backend = BACKENDS[name]()
    prompts = [torch.tensor([5, 9, 12, 7]), torch.tensor([8, 3])]
    for update_all in (False, True):
        config = mechanism.DecodeConfig(iterations=4, fixed_window=8, dswa=dswa, update_all=update_all, probe_position=2)
        cached = mechanism.mask_predict(backend, prompts, 12, config, seed=3)
        recomputed = mechanism.mask_predict(backend, prompts, 12, replace(config, cache_prompt=False), seed=3)
        assert torch.equal(cached.tokens, recomputed.tokens)
        for a, b in zip(cached.trace, recomputed.trace):
            assert torch.equal(a.masked, b.masked) and torch.equal(a.tokens, b.tokens)
            assert torch.allclose(a.confidences, b.confidences, atol=1e-5)
            assert torch.allclose(a.probe_logits, b.probe_logits, atol=1e-4)


@pytest.mark.parametrize("name", ["bert", "mntp"])
@torch.no_grad()
def test_last_layer_source_states_are_each_layers_own_projection_of_the_prompts_last_states(name):
    """Eq. 3 and 6: every layer's keys and values for the prompt come from H_src^L, the prompt's last-layer states."""
    backend = BACKENDS[name]()
    ids, padding = mechanism.left_padded([torch.tensor([5, 9, 12, 7]), torch.tensor([8, 3])], 6, MASK_ID, PAD_ID)
    routing = mechanism.attention_masks(backend, [4, 2], mechanism.DecodeConfig(fixed_window=8))
    rendered = backend.render(padding, **routing)
    same = backend.encode_source(ids[:, :4], padding, rendered, states="same-layer")
    last = backend.encode_source(ids[:, :4], padding, rendered, states="last-layer")
    assert torch.equal(same.last_hidden, last.last_hidden)
    positions = backend.position_ids(padding)[:, :4]
    body = backend.body()
    for index in range(backend.num_layers):
        cache = DynamicCache()
        if name == "mntp":  # run layer `index` itself on H_src^L and read the keys and values it caches
            layer = body.layers[index]
            layer(last.last_hidden, position_embeddings=body.rotary_emb(last.last_hidden, positions), attention_mask=None,
                  past_key_values=cache, use_cache=True, position_ids=positions)
        else:
            body.encoder.layer[index].attention.self(last.last_hidden, past_key_values=cache)
        keys, values = last.layers[index]
        assert torch.allclose(keys, cache.layers[index].keys, atol=1e-5)
        assert torch.allclose(values, cache.layers[index].values, atol=1e-5)
    assert not torch.allclose(same.layers[0][0], last.layers[0][0])  # layer 1 of the one stack sees embeddings
    decoded = mechanism.mask_predict(backend, [torch.tensor([5, 9, 12, 7])], 8, mechanism.DecodeConfig(iterations=2, source_states="last-layer"))
    assert decoded.tokens.shape == (1, 8)
    with pytest.raises(ValueError, match="source_states"):
        mechanism.DecodeConfig(source_states="first-layer")


# --------------------------------------------------------------------------- the package's layering


def test_mechanism_imports_no_experiment_report_or_figures():
    tree = ast.parse(inspect.getsource(mechanism))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1
                 and node.module is None for alias in node.names}
    assert not imported & {"experiment", "experiment_table6", "experiment_table7", "report", "figures"}


# --------------------------------------------------------------------------- the mask token's look-alikes


def _smollm2_tiny_backend() -> MNTPDecoder:
    """The tiny random Llama with SmolLM2's tokenizer, read as an MNTP decoder whose mask token is "_"."""
    try:
        model, tokenizer = models.load_model(profiles.TINY_RANDOM_MODEL, dtype="float32", device="cpu", seed=0)
    except models.MissingAssetError as error:
        pytest.skip(f"the tiny model needs the embedded SmolLM2 tokenizer (run `make setup`): {error}")
    mask_id = tokenizer("_", add_special_tokens=False).input_ids[0]
    return MNTPDecoder(model.eval(), tokenizer, mask_id, name=profiles.TINY_RANDOM_MODEL)


def test_every_underscore_only_token_is_banned_and_nothing_else_of_the_kind():
    backend = _smollm2_tiny_backend()
    vocabulary = backend.tokenizer.get_vocab()
    texts = {index: backend.tokenizer.decode([index]) for index in range(len(vocabulary))}
    underscores = sorted(index for index, text in texts.items() if text and set(text.lstrip(" ")) == {"_"}
                         and len(text) - len(text.lstrip(" ")) <= 1)
    assert len(underscores) == 16 and backend.mask_id in underscores  # "_" and its 15 look-alikes in SmolLM2
    assert set(underscores) <= set(backend.banned_ids)
    assert underscore_only_ids(backend.tokenizer) == underscores
    assert set(backend.banned_ids) == {*underscores, *backend.tokenizer.all_special_ids}
    allowed = [backend.tokenizer("\n", add_special_tokens=False).input_ids[0], vocabulary["._"], vocabulary["_{"],
               vocabulary["Ġ\\_"], backend.tokenizer(" the", add_special_tokens=False).input_ids[0]]
    assert not set(allowed) & set(backend.banned_ids)  # newlines and text that merely holds an underscore stay
    assert underscore_only_ids(None) == []


def test_mask_predict_never_emits_an_underscore_only_token_even_when_the_logits_favour_one():
    backend = _smollm2_tiny_backend()
    tokenizer, vocabulary = backend.tokenizer, backend.tokenizer.get_vocab()
    underscores = underscore_only_ids(tokenizer)
    newline, the, dotted = tokenizer("\n", add_special_tokens=False).input_ids[0], vocabulary["Ġthe"], vocabulary["._"]
    favoured = torch.full((len(vocabulary),), -20.0)
    favoured[underscores] = 60.0  # every look-alike far above the rest ...
    favoured[vocabulary["__"]] = 70.0  # ... and one above them all
    favoured[[newline, the, dotted]] = torch.tensor([40.0, 39.5, 39.0])
    backend.head = lambda hidden: favoured.to(hidden.device).expand(hidden.shape[0], -1).clone()
    # the reference: without the ban the sampler writes the look-alikes
    unbanned, _ = mechanism.sample_tokens(favoured.expand(64, -1).clone(), 1.8, 0.9, torch.Generator().manual_seed(0))
    assert torch.isin(unbanned, torch.tensor(underscores)).all()
    prompts = [backend.encode("It was a bright cold day"), backend.encode("She said")]
    decoded = mechanism.mask_predict(backend, prompts, 12, mechanism.DecodeConfig(iterations=4, fixed_window=8), seed=0)
    drawn = torch.stack([iteration.tokens for iteration in decoded.trace])
    assert not torch.isin(drawn, torch.tensor(underscores)).any()
    assert {newline, the} <= set(decoded.tokens.flatten().tolist())  # real text, newlines included, is still written
    # banned before the softmax: each kept confidence is its probability among the allowed tokens only
    last = decoded.trace[0]
    allowed = favoured.clone()
    allowed[backend.banned_ids] = float("-inf")
    probabilities = torch.softmax(allowed / last.temperature, -1)
    torch.testing.assert_close(last.confidences, probabilities[last.tokens], rtol=1e-5, atol=1e-6)


def test_eq7_windows_reach_at_most_one_token_further_or_nearer_than_the_public_formula():
    """The departures table: plan_roberta's Eq. 7 (layer index from 0, ``int(32 * scale)``, ``|q - k| < window``)
    against ours (layer index from 1, rounded, ``|q - k| <= S_win // 2``), for the paper's α and S_fix = 64: one
    token at most from 11 layers up (RoBERTa-base has 12, SmolLM2-135M 30); the one-layer shift of the index is worth
    0.75 · 32 / L tokens, so shallower stacks (the smoke profile's 4 layers: 5 tokens) differ more."""
    for layers in range(11, 49):
        ours = [window // 2 for window in M.dswa_window_schedule(layers, 64, 0.125, 0.75)]
        public = [int(32 * max((layers - index) / layers * 0.75, 0.125)) - 1 for index in range(layers)]
        assert max(abs(a - b) for a, b in zip(ours, public)) <= 1, layers
    ours = [window // 2 for window in M.dswa_window_schedule(4, 64, 0.125, 0.75)]
    assert max(abs(a - int(32 * max((4 - i) / 4 * 0.75, 0.125)) + 1) for i, a in enumerate(ours)) == 5


def test_float_prompt_ids_and_an_all_zero_nucleus_are_refused_by_name():
    import pytest
    import torch

    from helpers.papers.openltg import mechanism

    with pytest.raises(ValueError, match=r"prompts\[0\] holds floats"):
        mechanism.check_prompts(torch.tensor([3.7, 5.2]))
    with pytest.raises(ValueError, match=r"prompts\[1\] holds floats"):
        mechanism.check_prompts([[3, 5], [2.5]])
    assert mechanism.check_prompts([[3, 5]])[0].tolist() == [3, 5]
    with pytest.raises(ValueError, match="probs has a row with no probability mass"):
        mechanism.top_p_filter(torch.tensor([[0.5, 0.5], [0.0, 0.0]]), 0.9)
