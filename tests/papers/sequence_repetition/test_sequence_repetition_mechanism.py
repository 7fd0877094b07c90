"""Sequence repetition's mechanism (seed 003): repetition and pooling indices, padding between copies (App. A.3.2),
§2's right context, App. A.3.1's middle layers, §3.5's early exit, Fig. 1's block shares, and bad inputs."""
import ast
import inspect

import pytest
import torch

from helpers import masks as M
from helpers import models
from helpers.papers.sequence_repetition import mechanism as R

PAD = 2


def padded_pair(side: str = "right"):
    """A 4-token row padded to the 7 tokens of its batch-mate, on the given side."""
    generator = torch.Generator().manual_seed(0)
    short, long = torch.randint(10, 2000, (4,), generator=generator), torch.randint(10, 2000, (7,), generator=generator)
    ids, mask = torch.full((2, 7), PAD), torch.zeros(2, 7, dtype=torch.long)
    where = slice(0, 4) if side == "right" else slice(3, 7)
    ids[0, where], mask[0, where] = short, 1
    ids[1], mask[1] = long, 1
    return ids, mask, short, where


# --------------------------------------------------------------------------- indices

@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("r", [0, 1, 2, 4])
def test_packed_repetition_puts_no_pad_between_copies_and_pools_the_last_copy(side, r):
    ids, mask, short, where = padded_pair(side)
    k = r + 1
    batch = R.repeat_batch(ids, mask, r, "packed")
    assert batch.input_ids.shape == (2, k * 7)
    # §2: s^k is the sequence k times; App. A.3.2 alternative: no pad tokens between the copies.
    assert batch.input_ids[0, :4 * k].tolist() == short.tolist() * k
    assert (batch.input_ids[0, 4 * k:] == PAD).all() and (batch.padding_mask[0, 4 * k:] == 0).all()
    # Position ids continue across the copies.
    assert batch.position_ids[0, :4 * k].tolist() == list(range(4 * k))
    assert batch.position_ids[1].tolist() == list(range(7 * k))
    # Pooling: each real position reads the last copy, whose ids are the original ids.
    real = torch.arange(7)[where]
    last = batch.last_copy[0, real]
    assert last.tolist() == [r * 4 + j for j in range(4)]
    assert batch.input_ids[0, last].tolist() == ids[0, real].tolist()
    assert batch.last_copy[1].tolist() == [r * 7 + j for j in range(7)]


def test_masked_repetition_repeats_pads_hides_them_and_skips_them_in_positions():
    ids, mask, _, _ = padded_pair("right")
    batch = R.repeat_batch(ids, mask, 2, "masked")
    assert batch.input_ids.tolist() == ids.repeat(1, 3).tolist()  # App. A.3.2: the padded tensor concatenated k times
    assert batch.padding_mask.tolist() == mask.repeat(1, 3).tolist()
    assert batch.position_ids[0, [0, 1, 2, 3, 7, 8, 9, 10, 14, 15, 16, 17]].tolist() == list(range(12))
    assert batch.last_copy[0].tolist() == list(range(14, 21))


def test_unmasked_policy_is_the_public_implementation():
    ids, mask, _, _ = padded_pair("right")
    batch = R.repeat_batch(ids, mask, 1, "unmasked")
    assert batch.padding_mask.bool().all()
    assert batch.position_ids[0].tolist() == list(range(14))


# --------------------------------------------------------------------------- padding, on a decoder

@pytest.mark.parametrize("policy", ["packed", "masked"])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("r", [1, 2])
def test_padding_between_copies_leaves_the_real_tokens_exactly_as_without_padding(tiny, policy, side, r):
    body, _ = tiny
    ids, mask, short, where = padded_pair(side)
    batched, _ = R.sr_features(body, ids, mask, R.Strategy("sr", r), policy)
    alone, _ = R.sr_features(body, short[None], None, R.Strategy("sr", r), policy)
    torch.testing.assert_close(batched[0, where], alone[0], atol=1e-5, rtol=1e-5)


def test_visible_pads_between_copies_change_a_row_with_its_batch_mates(tiny):
    body, _ = tiny
    ids, mask, short, where = padded_pair("right")
    batched, _ = R.sr_features(body, ids, mask, R.Strategy("sr", 1), "unmasked")
    alone, _ = R.sr_features(body, short[None], None, R.Strategy("sr", 1), "unmasked")
    assert (batched[0, where] - alone[0]).abs().max() > 1e-3


# --------------------------------------------------------------------------- §2: SR makes the last copy bidirectional

@torch.no_grad()
def moved_first_token(body, strategy, length=6):
    """How much the first token's embedding moves when the last token of the sentence changes."""
    ids = torch.randint(10, 2000, (1, length), generator=torch.Generator().manual_seed(1))
    changed = ids.clone()
    changed[0, -1] = 7
    before, _ = R.sr_features(body, ids, None, strategy)
    after, _ = R.sr_features(body, changed, None, strategy)
    return float((before[0, 0] - after[0, 0]).abs().max())


def test_repetition_lets_the_first_token_see_the_last_one(tiny):
    body, _ = tiny
    assert moved_first_token(body, R.Strategy("sr", 0)) == 0.0  # causal: no right context
    for r in (1, 2):
        assert moved_first_token(body, R.Strategy("sr", r)) > 1e-4  # block A_k1 is full (§2)
    assert moved_first_token(body, R.Strategy("full")) > 1e-4
    assert moved_first_token(body, R.Strategy("middle")) > 1e-4


# --------------------------------------------------------------------------- App. A.3.1 middle layers

@pytest.mark.parametrize("depth, lower, upper", [(28, 9, 18), (32, 10, 21), (31, 10, 20), (33, 11, 21)])
def test_middle_unmasking_follows_appendix_a31(depth, lower, upper):
    # N_u = floor(N/3)_even; lb = N/2 - 1 - N_u/2; ub = N/2 + N_u/2: 28 -> N_u = 8, 32 -> N_u = 10; for odd N the
    # bounds are half-integers (33: lb = 10.5, ub = 21.5), so layers 11..21, not N // 2's 10..21.
    assert M.middle_unmasked_layers(depth) == (lower, upper)
    layer_masks = R.strategy_masks(R.Strategy("middle"), depth)["layer_masks"]
    assert [mask is M.bidirectional for mask in layer_masks] == [lower <= i <= upper for i in range(depth)]
    assert all(mask is M.causal for i, mask in enumerate(layer_masks) if not lower <= i <= upper)
    assert R.strategy_masks(R.Strategy("sr", 3), depth) == {"mask": M.causal}
    assert R.strategy_masks(R.Strategy("full"), depth) == {"mask": M.bidirectional}


def test_middle_unmasking_matches_the_authors_float_bounds_at_every_depth():
    for depth in range(3, 65):  # the public code: mask_cutoff = (N / 3) // 2 * 2; unmask lb <= i <= ub in floats
        cutoff = (depth / 3) // 2 * 2
        lb, ub = depth / 2 - 1 - cutoff / 2, depth / 2 + cutoff / 2
        assert [lb <= i <= ub for i in range(depth)] == [m is M.bidirectional for m in M.middle_unmasking(depth)]


# --------------------------------------------------------------------------- §3.5 early exit

def test_exit_layers_are_the_papers_for_32_layers_and_scale_with_depth():
    assert R.exit_layers(32) == (9, 14, 19, 24)
    assert R.exit_layers(30) == (9, 13, 18, 23)  # 8, 12, 17, 22 of 30 layers kept (8, 13, 18, 23 of 32)
    assert all(2 <= layer < 4 for layer in R.exit_layers(4))
    assert R.scaled_exit_layer(19, 32) == 19 and R.scaled_exit_layer(19, 30) == 18


def test_early_exit_runs_the_layers_before_layer_l(tiny):
    # §3.5 "up to, but not including, layer L": exit@L reads the state after L - 1 layers, as the authors'
    # EARLY_EXIT_LAYERS=(8 13 18 23) do for L = 9, 14, 19, 24.
    body, _ = tiny
    ids = torch.randint(10, 2000, (1, 5), generator=torch.Generator().manual_seed(2))
    full = body(input_ids=ids, output_hidden_states=True, use_cache=False)
    for layer in (2, 3, 4):
        with R.early_exit(body, layer):
            assert len(models.decoder_layers(body)) == layer - 1 and body.config.num_hidden_layers == layer - 1
            cut, _ = R.sr_features(body, ids, None, R.Strategy("sr", 0))
        torch.testing.assert_close(cut[0], body.norm(full.hidden_states[layer - 1])[0], atol=1e-5, rtol=1e-5)
    assert len(models.decoder_layers(body)) == 4 and body.config.num_hidden_layers == 4  # restored
    with pytest.raises(ValueError, match="exit_layer=1"):
        R.check_exit_layer(1, 4)


# --------------------------------------------------------------------------- §2 block shares

def test_block_mass_shares_count_mass_in_full_blocks():
    n, r = 3, 2
    length = (r + 1) * n
    copies = torch.arange(length) // n
    on_diagonal = torch.zeros(1, 1, length, length)
    on_first_copy = torch.zeros(1, 1, length, length)
    for q in range(length):
        on_diagonal[0, 0, q, copies[q] * n] = 1.0
        on_first_copy[0, 0, q, q % n if copies[q] > 0 else 0] = 1.0
    assert float(R.block_mass_shares([on_diagonal], n, r)[0]) == 0.0
    assert float(R.block_mass_shares([on_first_copy], n, r)[0]) == pytest.approx(2 / 3)  # copies 2 and 3 of 3
    assert float(R.block_mass_shares([on_first_copy], n, r, last_copy=True)[0]) == 1.0


def test_block_shares_without_the_sink_drop_key_zero():
    # Half of every row on key 0 (the sink), the rest on the query itself (a diagonal block).
    n, r = 3, 1
    length = (r + 1) * n
    sink = torch.zeros(1, 1, length, length)
    for q in range(length):
        sink[0, 0, q, 0] += 0.5
        sink[0, 0, q, q] += 0.5
    # copy 1's queries put 0.5 in a full block (key 0); copy 0's put none: 0.25 overall, all of it the sink
    assert float(R.block_mass_shares([sink], n, r)[0]) == pytest.approx(0.25)
    assert float(R.block_mass_shares([sink], n, r, exclude_sink=True)[0]) == 0.0
    assert float(R.block_mass_shares([sink], n, r, last_copy=True)[0]) == pytest.approx(0.5)
    # a key-1 full-block share survives the exclusion: query 4 puts 0.25 on key 1 and 0.25 on key 0
    sink[0, 0, 4] = torch.tensor([0.25, 0.25, 0.0, 0.0, 0.5, 0.0])
    expected = (1 / 3) / 5  # query 4: 0.25 / 0.75; the other four kept queries (0 is dropped): 0
    assert float(R.block_mass_shares([sink], n, r, exclude_sink=True)[0]) == pytest.approx(expected)


# --------------------------------------------------------------------------- bad inputs

def test_bad_inputs_raise_clear_errors(tiny):
    body, _ = tiny
    ids = torch.randint(10, 2000, (1, 700))
    with pytest.raises(ValueError, match="r=-1"):
        R.Strategy("sr", -1)
    with pytest.raises(ValueError, match="r=-2"):
        R.repeat_batch(ids, None, -2)
    with pytest.raises(ValueError, match="r=2 with kind='full'"):
        R.Strategy("full", 2)
    with pytest.raises(ValueError, match="exit_layer=6 is out of range for a model with 4 layers"):
        R.check_exit_layer(6, 4)
    with pytest.raises(ValueError, match="exit_layer=0"):
        R.Strategy("sr", 1, 0)
    with pytest.raises(ValueError, match="exit_layer=9"):
        with R.early_exit(body, 9):
            pass
    with pytest.raises(ValueError, match="max_position_embeddings=2048"):  # k x n = 3 x 700 = 2100
        R.sr_features(body, ids, None, R.Strategy("sr", 2))
    with pytest.raises(ValueError, match="policy='loose'"):
        R.repeat_batch(ids, None, 1, "loose")


def test_the_mechanism_imports_no_experiment_report_or_figures():
    tree = ast.parse(inspect.getsource(R))
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {name for name in imported if name.split(".")[-1].startswith(("experiment", "report", "figures"))}
