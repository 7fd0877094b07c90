"""Every mask against a brute-force double loop over (q, k) written from the papers' sentences."""
import random

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from helpers import masks as M


def brute(length, rule):
    return torch.tensor([[bool(rule(q, k)) for k in range(length)] for q in range(length)])


def span_of(index, spans):
    for number, (start, end) in enumerate(spans):
        if start <= index < end:
            return number
    return None


def magnet_rule(spans):
    # "Each context token attends to every other context token, and each span token attends to all
    # context tokens and the preceding span tokens in the same span."
    def rule(q, k):
        if span_of(k, spans) is None:
            return True
        return span_of(q, spans) == span_of(k, spans) and k <= q
    return rule


def random_spans(rng, length, max_spans=3):
    cuts = sorted(rng.sample(range(length + 1), min(length + 1, 2 * rng.randint(0, max_spans)) // 2 * 2))
    return [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts), 2) if cuts[i] < cuts[i + 1]]


def test_causal_and_bidirectional_match_the_lecture():
    for length in (1, 4, 9):
        assert torch.equal(M.dense(M.causal, length), brute(length, lambda q, k: k <= q))
        assert torch.equal(M.dense(M.bidirectional, length), brute(length, lambda q, k: True))


def test_magnet_matches_brute_force_on_random_spans():
    rng = random.Random(0)
    for _ in range(200):
        length = rng.randint(1, 24)
        spans = random_spans(rng, length)
        rng.shuffle(spans)  # order of spans must not matter
        assert torch.equal(M.dense(M.magnet(spans), length), brute(length, magnet_rule(spans))), spans


def test_magnet_special_cases_are_fig_2a_and_2b():
    assert torch.equal(M.dense(M.magnet([(0, 7)]), 7), M.dense(M.causal, 7))
    assert torch.equal(M.dense(M.magnet([]), 7), M.dense(M.bidirectional, 7))


def test_magnet_context_never_sees_spans_and_spans_do_not_see_each_other():
    dense = M.dense(M.magnet([(2, 4), (6, 9)]), 10)
    context = [0, 1, 4, 5, 9]
    assert not dense[context][:, [2, 3, 6, 7, 8]].any()
    assert not dense[6:9, 2:4].any() and not dense[2:4, 6:9].any()
    assert dense[7, 6] and not dense[6, 7]


@pytest.mark.parametrize("spans, message", [
    ([(2, 6), (4, 9)], "overlaps"),
    ([(3, 3)], "empty"),
    ([(-1, 2)], "before 0"),
    ([(1, 2, 3)], "not a (start, end) pair"),
])
def test_magnet_rejects_bad_spans(spans, message):
    with pytest.raises(ValueError, match=r"spans\[\d\]") as error:
        M.magnet(spans)
    assert message in str(error.value)


def test_span_beyond_the_sequence_is_rejected_at_render_time():
    with pytest.raises(ValueError, match="length=5"):
        M.dense(M.magnet([(3, 8)]), 5)


def test_composition_is_elementwise_logic():
    rng = random.Random(1)
    for _ in range(50):
        length = rng.randint(2, 16)
        a, b = M.magnet(random_spans(rng, length)), M.sliding_window(rng.randint(1, 6))
        da, db = M.dense(a, length), M.dense(b, length)
        assert torch.equal(M.dense(a & b, length), da & db)
        assert torch.equal(M.dense(a | b, length), da | db)
        assert torch.equal(M.dense(~a, length), ~da)


def test_repetition_is_causal_over_k_copies_with_the_paper_block_structure():
    for n in (1, 3, 5):
        for r in (0, 1, 2, 4):
            layout = M.Repetition(n, r)
            dense = M.dense(layout.mask, layout.length)
            assert torch.equal(dense, brute(layout.length, lambda q, k: k <= q))
            for i in range(layout.k):
                for j in range(layout.k):
                    block = dense[i * n:(i + 1) * n, j * n:(j + 1) * n]
                    kind = layout.block_kind(i, j)
                    if kind == M.BLOCK_FULL:
                        assert block.all()
                    elif kind == M.BLOCK_LOWER:
                        assert torch.equal(block, torch.ones(n, n, dtype=torch.bool).tril())
                    else:
                        assert not block.any()
            assert torch.equal(layout.last_copy(), torch.arange(r * n, (r + 1) * n))


def test_bidirectional_block_share_counts_blocks():
    for r in range(0, 9):
        layout = M.Repetition(3, r)
        kinds = [kind for row in layout.block_kinds() for kind in row]
        nonzero = [kind for kind in kinds if kind != M.BLOCK_ZERO]
        assert M.bidirectional_block_share(r) == pytest.approx(nonzero.count(M.BLOCK_FULL) / len(nonzero))
    assert M.bidirectional_block_share(1) == pytest.approx(1 / 3)


@pytest.mark.parametrize("r", [-1, 1.5])
def test_repetition_rejects_bad_r(r):
    with pytest.raises(ValueError, match="r="):
        M.Repetition(4, r)
    with pytest.raises(ValueError, match="r="):
        M.bidirectional_block_share(r)


def test_dswa_matches_brute_force():
    rng = random.Random(2)
    for _ in range(100):
        length = rng.randint(1, 30)
        source = rng.randint(0, length)
        window = rng.randint(1, 12)

        def rule(q, k):
            if k < source:
                return True  # the prompt stays fully visible
            return q >= source and abs(q - k) <= window // 2

        assert torch.equal(M.dense(M.dswa(source, window), length), brute(length, rule))


def test_dswa_schedule_follows_eq_7():
    # L = 12, S_fix = 64, alpha in [0.125, 0.75]: layer 1 -> max(.125, 11/12 * .75) * 64 = 44; top layer -> .125 * 64 = 8.
    schedule = M.dswa_window_schedule(12, 64, 0.125, 0.75)
    assert schedule[0] == 44 and schedule[-1] == 8
    assert schedule[5] == round(max(0.125, 6 / 12 * 0.75) * 64) == 24
    assert all(a >= b for a, b in zip(schedule, schedule[1:]))
    windows = [int(mask.name.split("window=")[1].rstrip(")")) for mask in M.dswa_per_layer(4, 12, 64)]
    assert windows == schedule


@pytest.mark.parametrize("kwargs, name", [
    (dict(fixed_window=0), "fixed_window"),
    (dict(alpha_min=-0.1), "alpha_min"),
    (dict(alpha_max=1.5), "alpha_max"),
])
def test_dswa_schedule_rejects_bad_inputs(kwargs, name):
    arguments = dict(num_layers=12, fixed_window=64, alpha_min=0.125, alpha_max=0.75) | kwargs
    with pytest.raises(ValueError, match=name):
        M.dswa_window_schedule(**arguments)


def test_window_must_be_positive():
    with pytest.raises(ValueError, match="window=0"):
        M.sliding_window(0)
    with pytest.raises(ValueError, match="window=-3"):
        M.dswa(2, -3)


def test_middle_unmasking_layers_follow_appendix_a31():
    # N = 28: N_u = floor(28/3)_even = 8, lb = 14 - 1 - 4 = 9, ub = 14 + 4 = 18.
    assert M.middle_unmasked_layers(28) == (9, 18)
    # N = 32: N_u = floor(32/3)_even = 10, lb = 16 - 1 - 5 = 10, ub = 16 + 5 = 21.
    assert M.middle_unmasked_layers(32) == (10, 21)
    per_layer = M.middle_unmasking(32)
    assert [mask is M.bidirectional for mask in per_layer] == [10 <= i <= 21 for i in range(32)]


def test_layer_index_out_of_range_is_rejected():
    with pytest.raises(ValueError, match="layer=30"):
        M.check_layer(30, 30)
    assert M.check_layer(29, 30) == 29


def test_padding_evaluates_the_mask_on_content_positions():
    mask = M.magnet([(1, 3)])
    plain = M.dense(mask, 5)
    left = torch.tensor([[0, 0, 1, 1, 1, 1, 1]])
    right = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    dense_left, dense_right = M.dense_batch(mask, left)[0], M.dense_batch(mask, right)[0]
    assert torch.equal(dense_left[2:, 2:], plain) and torch.equal(dense_right[:5, :5], plain)
    assert not dense_left[2:, :2].any() and not dense_right[:5, 5:].any()  # pads are never keys of real tokens
    assert torch.equal(dense_left[:2, :2], torch.eye(2, dtype=torch.bool))  # pads see only themselves: no NaN rows


def test_per_row_masks_in_one_batch():
    padding = torch.ones(2, 6, dtype=torch.long)
    rows = [M.magnet([(0, 2)]), M.magnet([(3, 6)])]
    batch = M.dense_batch(rows, padding)
    assert torch.equal(batch[0], M.dense(rows[0], 6)) and torch.equal(batch[1], M.dense(rows[1], 6))
    with pytest.raises(ValueError, match="per-row masks"):
        M.dense_batch(rows[:1] * 3, padding)


def test_to_4d_is_additive_zero_or_dtype_min():
    mask = M.magnet([(2, 5)])
    rendered = M.to_4d(mask, 6, dtype=torch.float16)
    assert rendered.shape == (1, 1, 6, 6) and rendered.dtype == torch.float16
    assert torch.equal(rendered[0, 0] == 0, M.dense(mask, 6))
    assert torch.all(rendered[0, 0][~M.dense(mask, 6)] == torch.finfo(torch.float16).min)


@pytest.mark.parametrize("mask, padding", [
    (M.magnet([(3, 9), (20, 31)]), None),
    (M.dswa(8, 6), None),
    (M.causal, torch.tensor([[0] * 5 + [1] * 35, [1] * 40])),
    (M.magnet([(2, 6)]), torch.tensor([[1] * 33 + [0] * 7, [0] * 3 + [1] * 37])),
])
def test_block_mask_attends_exactly_like_the_dense_mask(mask, padding):
    torch.manual_seed(0)
    length, batch = 40, 2 if padding is not None else 1
    q, k, v = (torch.randn(batch, 2, length, 8) for _ in range(3))
    block = M.to_block_mask(mask, length, padding_mask=padding, block_size=16)
    dense = M.dense_batch(mask, padding if padding is not None else torch.ones(1, length))[:, None]
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense)
    assert torch.allclose(flex_attention(q, k, v, block_mask=block), expected, atol=1e-5)


def test_reachability_is_the_transitive_closure_per_layer():
    layer = M.dense(M.sliding_window(3), 7)  # neighbours only
    reach = M.reachability([layer] * 3)
    for depth, matrix in enumerate(reach, start=1):
        assert torch.equal(matrix, brute(7, lambda q, k: abs(q - k) <= depth))


def test_reachability_of_no_layers_is_a_clear_error():
    with pytest.raises(ValueError, match="layer_masks=.*non-empty list"):
        M.reachability([])


# --- Block-causal attention (BD3-LM §3.1): causal across blocks, bidirectional within one, behind a closed prompt ---

def block_causal_rule(start, block):
    # "The prompt is a closed block; a target sees the prompt, every earlier block and its own block."
    def rule(q, k):
        if k < start:
            return True
        if q < start:
            return False
        return (k - start) // block <= (q - start) // block
    return rule


def test_block_causal_matches_a_literal_reading_on_random_sizes():
    rng = random.Random(0)
    for _ in range(200):
        start, block, length = rng.randint(0, 6), rng.randint(1, 7), rng.randint(1, 20)
        total = start + length
        assert torch.equal(M.dense(M.block_causal(start, block), total), brute(total, block_causal_rule(start, block))), \
            (start, block, length)


def test_block_causal_is_its_composition_from_existing_masks():
    full = 1 << 20
    for start, block, length in ((0, 1, 6), (3, 2, 9), (4, 4, 12), (2, 5, 7), (5, 16, 16)):
        total = start + length
        composed = M.dswa(start, full) & (M.causal | M.same_block(start, block))
        assert torch.equal(M.dense(M.block_causal(start, block), total), M.dense(composed, total))


def test_block_causal_identities_notebook05_magnet_causal_bidirectional():
    full = 1 << 20
    start, length = 4, 10
    total = start + length
    assert torch.equal(M.dense(M.block_causal(start, length), total), M.dense(M.dswa(start, full), total))
    assert torch.equal(M.dense(M.block_causal(start, 3 * length), total), M.dense(M.dswa(start, full), total))
    assert torch.equal(M.dense(M.block_causal(start, 1), total), M.dense(M.magnet([(start, total)]), total))
    assert torch.equal(M.dense(M.block_causal(0, 1), total), M.dense(M.causal, total))
    assert torch.equal(M.dense(M.block_causal(0, total), total), M.dense(M.bidirectional, total))


def test_block_ids_and_bad_block_arguments():
    assert M.block_ids(torch.arange(9), 3, 2).tolist() == [-1, -1, -1, 0, 0, 1, 1, 2, 2]
    with pytest.raises(ValueError, match="block=0"):
        M.block_causal(3, 0)
    with pytest.raises(ValueError, match="start=-1"):
        M.block_causal(-1, 2)
    with pytest.raises(ValueError, match="shorter than"):
        M.dense(M.block_causal(5, 2), 4)


def test_block_causal_padding_gives_the_same_pattern_over_real_tokens():
    mask = M.block_causal(2, 3)
    padding = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 0, 0]])
    batch = M.dense_batch(mask, padding)
    assert torch.equal(batch[0][2:, 2:], M.dense(mask, 7)) and torch.equal(batch[1][:7, :7], M.dense(mask, 7))
